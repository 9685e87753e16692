"""JAX's dtype rules, the same in eager, ``jit`` and ``vmap`` (issue 26, item 4).

A Python scalar is *weakly typed*: it takes the array's precision (float32 * 2.5 is
float32; an int32 array * 2.5 becomes the default float, float64 under x64).  A numpy
array or numpy scalar is *not* weak: float32 * float64 array is float64.  A gradient
always has its argument's dtype: a float32 parameter that met a float64 constant gets a
float32 gradient (the cotangent is cast back).  Every mode must agree with JAX (x64).
See docs/guides/for-jax-users.md."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad

CONSTANTS: dict[str, Any] = {
    "py_float": 2.5,
    "py_int": 3,
    "np_f64_array": np.array([1.5, -0.5, 2.0]),
    "np_f32_array": np.array([1.5, -0.5, 2.0], np.float32),
    "np_f64_scalar": np.float64(1.25),
    "np_f32_scalar": np.float32(1.25),
    "np_i32_array": np.array([1, 2, 3], np.int32),
}
OPS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "mul": lambda m, p, c: p * c,
    "add": lambda m, p, c: p + c,
    "rsub": lambda m, p, c: c - p,
    "div": lambda m, p, c: p / c,
    "maximum": lambda m, p, c: m.maximum(p, c),
    "sin_mul": lambda m, p, c: m.sin(p) * c,
}
MODES = ("eager", "jit", "vmap", "grad_of_jit")


def _loss(m: Any, op: str, c: Any) -> Callable[[Any], Any]:
    return lambda p: m.sum(OPS[op](m, p, c) * OPS[op](m, p, c))


def _grad(mode: str, op: str, c: Any, p: np.ndarray) -> Any:
    if mode == "eager":
        return ad.grad(_loss(ad, op, c))(p)
    if mode == "jit":
        return ad.jit(ad.grad(_loss(ad, op, c)))(p)
    if mode == "grad_of_jit":
        return ad.grad(ad.jit(_loss(ad, op, c)))(p)
    return ad.vmap(ad.grad(_loss(ad, op, c)))(np.stack([p, p * 0.5]))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("const", sorted(CONSTANTS))
@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("pdt", [np.float32, np.float64])
def test_gradient_dtype_and_value_follow_jax_in_every_mode(
    mode: str, const: str, op: str, pdt: type
) -> None:
    """The gradient of a float32/float64 parameter mixed with each kind of constant has
    JAX's dtype (the parameter's) and value in eager, jit, vmap and grad(jit)."""
    c = CONSTANTS[const]
    p = np.array([0.5, 1.25, -0.75], pdt)
    got = _grad(mode, op, c, p).to_numpy()
    jg = jax.grad(_loss(jnp, op, c))
    want = np.asarray(jg(p)) if mode != "vmap" else np.asarray(jax.vmap(jg)(
        np.stack([p, p * 0.5])))
    assert got.dtype == want.dtype, (mode, const, op, got.dtype, want.dtype)
    tol = 1e-5 if np.float32 in (pdt, np.asarray(c).dtype.type) else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("const", sorted(CONSTANTS))
@pytest.mark.parametrize("pdt", [np.float32, np.float64, np.int32])
def test_forward_result_dtype_follows_jax_in_every_mode(const: str, pdt: type) -> None:
    """``p * c`` has JAX's result dtype (weak Python scalars, strong numpy values) eagerly
    (inside grad), under jit and under vmap -- the same in all three."""
    c = CONSTANTS[const]
    p = np.array([1, 2, 3]).astype(pdt)
    want = (jnp.asarray(p) * c).dtype
    kinds = {p.dtype.kind, np.asarray(c).dtype.kind}
    if kinds == {"i", "f"} and not isinstance(c, int | float):
        # the one documented difference: an integer and a floating *array* (not a weak
        # Python scalar) promote as numpy does (int32 x float32 -> float64), in every mode
        want = np.result_type(p, c)
    seen: list[Any] = []

    def probe(x: Any) -> Any:
        seen.append((x * c).dtype)
        return ad.sum(x * 0.0) if x.dtype.kind == "f" else 0.0

    if p.dtype.kind == "f":
        ad.grad(probe)(p)
        eager = seen[-1]
        assert np.dtype(getattr(eager, "numpy", eager)) == want
    assert ad.jit(lambda x: x * c)(p).to_numpy().dtype == want
    assert ad.vmap(lambda x: x * c)(np.stack([p, p])).to_numpy().dtype == want


@pytest.mark.parametrize(
    ("idt", "fdt"),
    [(np.int32, np.float32), (np.int64, np.float32), (np.int32, np.float64),
     (np.int64, np.float64)],
)
def test_integer_array_with_float_array_promotes_as_numpy_the_documented_jax_difference(
    idt: type, fdt: type
) -> None:
    """Issue 26 item 2(d): the one promotion that differs from JAX, pinned on both sides.
    JAX's lattice puts every float above every integer (int ⊕ floatN -> floatN); tenferro
    follows numpy (the float wide enough for the integer), in every mode, as
    docs/guides/for-jax-users.md says.  If either side changes, this fails."""
    i = np.array([1, 2, 3], idt)
    f = np.array([0.5, 1.5, -2.0], fdt)
    assert (jnp.asarray(i) * jnp.asarray(f)).dtype == np.dtype(fdt)  # JAX's rule
    want = np.result_type(idt, fdt)
    if fdt is np.float32:
        assert want != np.dtype(fdt)  # (the pairs where the two rules differ)
    eager = (ad.constant(i) * f).to_numpy()
    jitted = ad.jit(lambda a, b: a * b)(i, f).to_numpy()
    mapped = ad.vmap(lambda a, b: a * b)(np.stack([i, i]), np.stack([f, f])).to_numpy()
    assert eager.dtype == jitted.dtype == mapped.dtype == want
    np.testing.assert_array_equal(eager, i.astype(want) * f.astype(want))
