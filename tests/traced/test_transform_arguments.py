"""Arguments JAX accepts are accepted in both modes (issue 26, items 8, 9, 10): keyword
arguments to jit/vmap, has_aux under jit/vmap, dict arguments to jacrev/jacfwd, nested
in_axes, zero-size jacobians (JAX's shape and dtype: jacfwd the output's, jacrev the
argument's), big-endian arrays
(converted as numpy converts them), jax arrays in vmap as in jit, and a jvp tangent
that differs from its primal only in byte order."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad


def _np(x: Any) -> np.ndarray:
    return x.to_numpy() if hasattr(x, "to_numpy") else np.asarray(x)


def test_jit_takes_keyword_arguments_as_traced_leaves() -> None:
    f = ad.jit(lambda x, y=1.0, *, scale: (x * y) * scale)
    x, y = np.arange(3.0), np.array([2.0, 3.0, 4.0])
    np.testing.assert_allclose(_np(f(x, y=y, scale=2.0)), x * y * 2.0)
    np.testing.assert_allclose(_np(f(x, y=y + 1, scale=3.0)), x * (y + 1) * 3.0)
    assert f.cache_size == 1  # new values of the same types do not retrace
    np.testing.assert_allclose(_np(f(x, scale=2.0)), x * 2.0)  # default y: another signature
    assert f.cache_size == 2


def test_vmap_maps_keyword_arguments_over_axis_0() -> None:
    x, y = np.arange(6.0).reshape(2, 3), np.arange(6.0, 12.0).reshape(2, 3)
    got = ad.vmap(lambda a, b: a * ad.sum(b), in_axes=(0,))(x, b=y)
    want = jax.vmap(lambda a, b: a * jnp.sum(b), in_axes=(0,))(x, b=y)
    np.testing.assert_allclose(_np(got), np.asarray(want))
    got = ad.vmap(lambda a, b: a + b, in_axes=None)(np.arange(3.0), b=y)
    np.testing.assert_allclose(_np(got), np.arange(3.0) + y)


@pytest.mark.parametrize("wrap", ["jit", "vmap"])
def test_has_aux_works_under_jit_and_vmap(wrap: str) -> None:
    def f(x: Any) -> Any:
        return ad.sum(x * x), {"twice": x * 2.0}

    x = np.array([1.0, -2.0, 3.0])
    t = ad.jit if wrap == "jit" else ad.vmap
    arg = x if wrap == "jit" else np.stack([x, x + 1])
    g, aux = t(ad.grad(f, has_aux=True))(arg)
    np.testing.assert_allclose(_np(g), 2 * arg)
    np.testing.assert_allclose(_np(aux["twice"]), 2 * arg)
    (v, aux2), g2 = t(ad.value_and_grad(f, has_aux=True))(arg)
    np.testing.assert_allclose(_np(v), np.sum(arg * arg, axis=-1))
    np.testing.assert_allclose(_np(g2), 2 * arg)
    np.testing.assert_allclose(_np(aux2["twice"]), 2 * arg)


@pytest.mark.parametrize("name", ["jacrev", "jacfwd"])
def test_jacobians_take_dict_arguments(name: str) -> None:
    d = {"a": np.array([1.0, 2.0]), "b": np.array(3.0)}
    ours = getattr(ad, name)(lambda p: p["a"] * p["b"])(d)
    theirs = getattr(jax, name)(lambda p: p["a"] * p["b"])(d)
    assert sorted(ours) == sorted(theirs)
    for k in theirs:
        np.testing.assert_allclose(_np(ours[k]), np.asarray(theirs[k]))


def test_vmap_takes_nested_in_axes() -> None:
    pair = (np.arange(6.0).reshape(2, 3), np.arange(3.0))
    got = ad.vmap(lambda t, s: t[0] * s + t[1], in_axes=((0, None), None))(pair, 2.0)
    want = jax.vmap(lambda t, s: t[0] * s + t[1], in_axes=((0, None), None))(pair, 2.0)
    np.testing.assert_allclose(_np(got), np.asarray(want))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["jacfwd", "jacrev"])
@pytest.mark.parametrize(("in_shape", "fn"), [
    ((0,), "sum_plus_3"), ((3,), "take_none"), ((0,), "double"), ((0, 2), "sum_plus_3"),
])
def test_zero_size_jacobians_have_jaxs_shape_and_the_functions_dtype(
    dt: type, name: str, in_shape: tuple[int, ...], fn: str
) -> None:
    o3 = np.ones(3, dt)
    fns = {
        "sum_plus_3": lambda m: lambda x: m.sum(x) + o3,
        "take_none": lambda m: lambda x: x[:0],
        "double": lambda m: lambda x: x * 2,
    }
    x = np.zeros(in_shape, dt) if fn != "take_none" else np.ones(in_shape, dt)
    ours = _np(getattr(ad, name)(fns[fn](ad))(x))
    theirs = getattr(jax, name)(fns[fn](jnp))(x)
    assert ours.shape == theirs.shape
    assert ours.dtype == theirs.dtype


@pytest.mark.parametrize("wrap", ["eager", "jit"])
@pytest.mark.parametrize("name", ["jacfwd", "jacrev", "hessian"])
@pytest.mark.parametrize(("src", "dst", "empty"), [
    (np.float64, np.float32, "input"), (np.float32, np.float64, "input"),
    (np.float64, np.float32, "output"), (np.float32, np.float64, "output"),
])
def test_zero_size_jacobian_blocks_across_a_cast_take_jaxs_dtype(
    src: type, dst: type, empty: str, name: str, wrap: str
) -> None:
    """Issue 26 item 8, a function whose output dtype differs from its argument's: an empty
    block has the dtype a non-empty one has (JAX: jacfwd the output's, jacrev the
    argument's), not the promotion of the two (R^0 -> R^3 float64 -> float32 under jacfwd
    gave float64, R^3 -> R^0 float32 -> float64 under jacrev/hessian gave float64)."""
    n_in, n_out = (0, 3) if empty == "input" else (3, 0)

    def make(m: Any, n_out: int = n_out) -> Any:
        return lambda v: (m.sum(v) + np.ones(3, src))[:n_out].astype(dst)

    t = getattr(ad, name)(make(ad))
    ours = _np((ad.jit(t) if wrap == "jit" else t)(np.ones(n_in, src)))
    theirs = getattr(jax, name)(make(jnp))(np.ones(n_in, src))
    assert (ours.shape, ours.dtype) == (theirs.shape, theirs.dtype)
    # the dtype a non-empty block of the same transform has
    full = _np(getattr(ad, name)(make(ad, 1))(np.ones(2, src)))
    assert full.dtype == ours.dtype


def test_big_endian_arrays_are_converted_in_every_mode() -> None:
    be = np.arange(3.0).astype(">f8")
    native = be.astype("<f8")
    f = lambda x: ad.sum(x * x)  # noqa: E731
    np.testing.assert_allclose(_np(ad.sin(be)), np.sin(native))
    for g in (ad.grad(f), ad.jit(ad.grad(f)), ad.vmap(ad.grad(lambda s: s * s))):
        np.testing.assert_allclose(_np(g(be)), 2 * native)
    _, tan = ad.jvp(ad.sin, (native,), (be,))  # a tangent differing only in byte order
    np.testing.assert_allclose(_np(tan), np.cos(native) * native)
    assert be.dtype.str == ">f8"  # the caller's array is unchanged


def test_a_jax_array_works_in_vmap_as_in_jit() -> None:
    x = jnp.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(_np(ad.vmap(ad.sin)(x)), np.sin(np.asarray(x)))
    np.testing.assert_allclose(_np(ad.jit(ad.sin)(x)), np.sin(np.asarray(x)))


def test_a_jvp_tangent_of_another_dtype_names_both_dtypes() -> None:
    with pytest.raises(TypeError, match="float32, but its primal has dtype float64"):
        ad.jvp(ad.sin, (np.arange(3.0),), (np.ones(3, np.float32),))


@pytest.mark.parametrize("which", ["tangent", "primal"])
def test_a_big_endian_jvp_tangent_or_primal_is_converted_not_refused(which: str) -> None:
    """Issue 26 item 9: a big-endian float64 tangent was refused with "the tangent has dtype
    float64, but its primal has dtype float64" (byte order is not a dtype difference)."""
    x, t = np.arange(3.0), np.ones(3)
    if which == "tangent":
        t = t.astype(">f8")
    else:
        x = x.astype(">f8")
    _, tan = ad.jvp(ad.sin, (x,), (t,))
    np.testing.assert_allclose(_np(tan), np.cos(np.arange(3.0)))
