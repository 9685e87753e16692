"""Lowering to XLA: a rule for every primitive, refusals that name the primitive, and the
traced op table run on the XLA engine against eager mode and JAX (values; gradients,
JVPs and vmap of the core rows; float32 and complex; checkpoint fencing)."""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import extend
from tenferro_ad._core._dispatch import bind
from tenferro_ad._core._primitive import REGISTRY
from tenferro_ad._traced._lowering import LOWERINGS, lower_graph
from tenferro_ad.errors import LoweringError
from tenferro_ad.ops._lowering.shape import _dot_plan
from tenferro_ad.ops.einsum import EINSUM_BINARY
from tenferro_storage.providers._xla_support import _Namespace
from tests._opspecs import Op, table, values

TRACED = table(mode="traced")
CORE = table("core", "traced")


def _np(x: Any) -> Any:
    if isinstance(x, tuple | list):
        return [_np(y) for y in x]
    return x.to_numpy() if hasattr(x, "to_numpy") else np.asarray(x)


def _close(got: Any, want: Any, rtol: float) -> None:
    np.testing.assert_allclose(_np(got), np.asarray(want), rtol=rtol, atol=rtol)


def test_every_primitive_has_a_lowering_rule() -> None:
    """Every built-in primitive: not a user one (``extend``), not one another test file of
    this worker registered (its kernel is defined in the test suite)."""
    missing = sorted(
        n for n, p in REGISTRY.items()
        if p not in LOWERINGS
        and not p.checked
        and not str(getattr(p.impl, "__module__", "")).startswith("tests")
    )
    assert not missing, f"primitives without an XLA lowering rule: {missing}"


def test_a_user_primitive_without_a_rule_is_a_lowering_error_naming_it_and_its_equation(
    xla_engine: Any,
) -> None:
    prim = extend.defprimitive("xla_test_cube", lambda a: a * a * a, 1)
    f = ad.jit(lambda x: ad.sin(extend.bind(prim, x)), engine="xla")
    equation = r"'xla_test_cube'.*f64\[3\] = xla_test_cube\(f64\[3\]\)"
    with pytest.raises(LoweringError, match=equation):
        f(np.ones(3))
    assert f.cache_size == 0  # nothing was compiled, nothing ran
    extend.deflower(prim, lambda x, a: a * a * a)  # its own rule: now it lowers
    np.testing.assert_allclose(_np(f(np.full(3, 2.0))), np.sin(np.full(3, 8.0)))
    REGISTRY.pop("xla_test_cube")
    LOWERINGS.pop(prim)


def _cases(spec: Op) -> list[list[np.ndarray]]:
    """The first shape bucket in float64 (the row's widest dtype when it has no float64)."""
    dtype = "float64" if "float64" in spec.dtypes else spec.dtypes[-1]
    rng = np.random.default_rng(0)
    return [[values(rng, s, spec.domain).astype(dtype) for s in shapes]
            for shapes in spec.shapes[:1]]


def _tol(spec: Op) -> float:
    return max(spec.rtol64, 1e-8)


@pytest.mark.parametrize("spec", TRACED, ids=[s.name for s in TRACED])
def test_xla_engine_values_match_eager_and_jax(spec: Op) -> None:
    """Every traced op-table row, jitted on the XLA engine, equals eager mode and JAX."""
    for xs in _cases(spec):
        got = ad.jit(spec.ours, engine="xla")(*xs)
        _close(got, spec.theirs(*xs), _tol(spec))
        _close(got, _np(spec.ours(*[ts.from_numpy(x) for x in xs])), _tol(spec))


def _loss(spec: Op, m: Any, w: np.ndarray, *xs: Any) -> Any:
    f = spec.ours if m is ad else spec.theirs
    return m.sum(f(*xs) * w)


@pytest.mark.parametrize("spec", CORE, ids=[s.name for s in CORE])
def test_xla_engine_gradients_jvps_and_vmaps_match_jax(spec: Op) -> None:
    """jit(grad), jit(jvp) and jit(vmap) of every core row on the XLA engine vs JAX."""
    rng = np.random.default_rng(1)
    for xs in _cases(spec):
        w = rng.normal(size=np.shape(spec.theirs(*xs)))
        nums = tuple(range(len(xs)))
        got = ad.jit(ad.grad(lambda *a, w=w: _loss(spec, ad, w, *a), argnums=nums),
                     engine="xla")(*xs)
        want = jax.grad(lambda *a, w=w: _loss(spec, jnp, w, *a), argnums=nums)(*xs)
        for a, b in zip(got, want, strict=True):
            _close(a, b, _tol(spec))
        ts_ = [rng.normal(size=np.shape(x)) for x in xs]
        n = len(xs)
        _, tan = ad.jit(lambda *a, n=n: ad.jvp(spec.ours, tuple(a[:n]), tuple(a[n:])),
                        engine="xla")(*xs, *ts_)
        _, jtan = jax.jvp(spec.theirs, tuple(xs), tuple(ts_))
        _close(tan, jtan, _tol(spec))
        stacked = [np.stack([x, x * 0.5]) for x in xs]
        got_v = ad.jit(ad.vmap(spec.ours), engine="xla")(*stacked)
        _close(got_v, jax.vmap(spec.theirs)(*stacked), _tol(spec))


def test_float32_and_complex_programs_keep_their_types_and_match_jax() -> None:
    rng = np.random.default_rng(2)
    x32 = rng.normal(size=(3, 4)).astype(np.float32)
    f = ad.jit(lambda a: ad.sum(ad.tanh(a) * ad.exp(a)), engine="xla")
    y = f(x32)
    assert y.dtype.name == "float32"
    _close(y, jnp.sum(jnp.tanh(x32) * jnp.exp(x32)), 1e-5)
    g = ad.jit(ad.grad(lambda a: ad.sum(ad.sin(a) ** 2.0)), engine="xla")(x32)
    assert g.dtype.name == "float32"
    _close(g, jax.grad(lambda a: jnp.sum(jnp.sin(a) ** 2.0))(x32), 1e-5)
    z = (rng.normal(size=(2, 3)) + 1j * rng.normal(size=(2, 3))).astype(np.complex128)
    h = ad.jit(lambda a: ad.exp(a) * ad.conj(a), engine="xla")(z)
    assert h.dtype.name == "complex128"
    _close(h, np.exp(z) * np.conj(z), 1e-12)
    gz = ad.jit(ad.grad(lambda a: ad.sum(ad.real(a * ad.conj(a)))), engine="xla")(z)
    _close(gz, jax.grad(lambda a: jnp.sum(jnp.real(a * jnp.conj(a))))(z), 1e-12)


def test_checkpoint_recomputation_survives_lowering_behind_optimization_barriers() -> None:
    """A checkpointed 50-tanh chain: the compiled value-and-gradient computes 100 tanh
    (forward and the fenced recomputation), not 50 (XLA merges an unfenced
    recomputation with the forward pass)."""

    def chain(x: Any) -> Any:
        for _ in range(50):
            x = ad.tanh(x)
        return x

    f = ad.jit(ad.value_and_grad(
        lambda x: ad.sum(ad.checkpoint(chain, policy=ad.save_nothing)(x))), engine="xla")
    x = np.linspace(-1.0, 1.0, 8)
    program = f.lower(x).program
    hlo = program.executable.as_text()
    assert len(re.findall(r"\btanh\(", hlo)) == 100
    want = jax.value_and_grad(lambda a: jnp.sum(jax.checkpoint(
        lambda v: [v := jnp.tanh(v) for _ in range(50)][-1])(a)))(x)
    value, grad = f(x)
    _close(value, want[0], 1e-10)
    _close(grad, want[1], 1e-10)


def test_grad_of_jit_and_jit_of_grad_on_the_xla_engine_agree_with_eager() -> None:
    x = np.linspace(0.1, 1.0, 5)

    def f(a: Any) -> Any:
        return ad.sum(ad.log(a) * ad.sin(a))

    want = ad.grad(f)(ts.from_numpy(x)).to_numpy()
    _close(ad.jit(ad.grad(f), engine="xla")(x), want, 1e-12)
    _close(ad.grad(ad.jit(f, engine="xla"))(ts.from_numpy(x)), want, 1e-12)


@pytest.mark.parametrize("offset", [-2, -1, 0, 1, 3])
@pytest.mark.parametrize("axes", [(0, 1), (1, 0)])
def test_a_diagonal_s_gradient_embeds_on_the_same_offset_on_the_xla_engine(
    offset: int, axes: tuple[int, int]
) -> None:
    """The gradient of ``sum(diagonal(x, offset)**2)`` puts ``2 * diagonal`` back on that
    diagonal (the ``diag_embed`` lowering), below the main diagonal too, as eager and JAX
    do.  Mutant: the lowering's rows for a negative offset ``k - offset`` turned into
    ``k * offset``."""
    x = np.arange(12.0).reshape(3, 4)

    def f(t: Any) -> Any:
        return ad.sum(ad.linalg.diagonal(t, offset=offset, axis1=axes[0], axis2=axes[1]) ** 2)

    got = ad.jit(ad.grad(f), engine="xla")(x).to_numpy()
    want = jax.grad(lambda t: jnp.sum(jnp.diagonal(t, offset, *axes) ** 2))(jnp.asarray(x))
    np.testing.assert_array_equal(got, np.asarray(want))
    np.testing.assert_array_equal(got, ad.grad(f)(x).to_numpy())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_complex_to_real_cast_takes_the_real_part_on_the_xla_engine(dtype: Any) -> None:
    """``astype`` from complex to a real dtype keeps the real part (numpy's and eager's
    value) without JAX's complex-to-real cast, which warns and is to become an error: the
    one warning is tenferro's own ``ComplexWarning`` at the user's call (numpy's), raised
    while tracing.  Mutant: the lowering's ``iscomplexobj(a)`` test negated (the real part
    never taken)."""
    z = np.array([1 + 2j, -3 + 0.5j])
    with pytest.warns(np.exceptions.ComplexWarning, match="discards the imaginary part"):
        got = ad.jit(lambda t: ad.astype(t * 2.0, dtype), engine="xla")(z).to_numpy()
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, (2 * z.real).astype(dtype))


@st.composite
def _binary_subscripts(draw: st.DrawFn) -> tuple[str, dict[str, int]]:
    """Random ``"ta,tb->out"`` of unique labels per operand: shared labels batched or
    contracted, free labels kept, the output in any order; sizes 1-3."""
    labels = draw(st.permutations("abcdefg"))[: draw(st.integers(1, 6))]
    role = {c: draw(st.sampled_from(["a", "b", "batch", "contr"])) for c in labels}
    ta = [c for c in labels if role[c] in ("a", "batch", "contr")]
    tb = [c for c in labels if role[c] in ("b", "batch", "contr")]
    out = [c for c in labels if role[c] != "contr"]
    ta, tb, out = (draw(st.permutations(t)) for t in (ta, tb, out))
    sizes = {c: draw(st.integers(1, 3)) for c in labels}
    return f"{''.join(ta)},{''.join(tb)}->{''.join(out)}", sizes


@given(_binary_subscripts(), st.sampled_from([np.float64, np.complex128, np.float32]))
def test_a_binary_contraction_lowers_to_one_dot_and_at_most_one_transpose(
    case: tuple[str, dict[str, int]], dtype: Any
) -> None:
    """``einsum_binary`` with any output order -- as a network's backward pass binds it,
    the cotangent of an operand in that operand's own label order -- lowers to one
    ``dot_general`` (operands swapped when that yields the output order) and at most one
    transpose of its result, none when the result is already in order: its value and its
    gradients on the XLA engine equal numpy's ``einsum`` and the eager ones.  Mutant: the
    swap's operands not exchanged (wrong values)."""
    sub, sizes = case
    lhs, _ = sub.split("->")
    ta, tb = lhs.split(",")
    rng = np.random.default_rng(len(sub))
    a, b = ((rng.normal(size=[sizes[c] for c in t]) + (1j if dtype is np.complex128 else 0)
             * rng.normal(size=[sizes[c] for c in t])).astype(dtype) for t in (ta, tb))

    def f(x: Any, y: Any) -> Any:
        return bind(EINSUM_BINARY, x, y, subscripts=sub)

    def loss(x: Any, y: Any) -> Any:
        return ad.sum(ad.real(f(x, y) * ad.conj(f(x, y))))

    rtol = 1e-5 if dtype is np.float32 else 1e-12
    _close(ad.jit(f, engine="xla")(a, b), np.einsum(sub, a, b), rtol)
    got = ad.jit(ad.grad(loss, argnums=(0, 1)), engine="xla")(a, b)
    want = ad.grad(loss, argnums=(0, 1))(a, b)
    for g, w in zip(got, want, strict=True):
        _close(g, _np(w), rtol)
    graph = ad.jit(f, engine="xla").lower(a, b).graph
    fn = lower_graph(graph, _Namespace(jax))
    eqns = jax.make_jaxpr(fn)(jnp.asarray(a), jnp.asarray(b)).jaxpr.eqns
    names = [e.primitive.name for e in eqns if e.primitive.name != "convert_element_type"]
    assert names in (["dot_general"], ["dot_general", "transpose"]), names
    if names == ["dot_general"]:  # no transpose: the natural order is the output's
        plan = _dot_plan(sub, a.shape, b.shape)
        assert plan is not None and plan[2] is None


@pytest.mark.parametrize("sub", ["kab,kc->abc", "abk,kc->cab", "kc,kab->abc"])
def test_a_contraction_s_large_operand_is_read_in_place_not_copied_into_the_dot_layout(
    sub: str,
) -> None:
    """A 16x16x16 operand contracted with a 16x2 one: the lowering picks the operand order
    and contraction order under which XLA's CPU dot reads the large operand in place, so
    the compiled executable's transposes and copies move fewer elements than that operand
    has (only the small operand and the small result).  Mutant: the plan chosen without
    the operands' sizes (the large operand copied: 8192 elements moved)."""
    lhs, _ = sub.split("->")
    sizes = {"k": 16, "a": 16, "b": 16, "c": 2}
    a, b = (np.ones([sizes[c] for c in t]) for t in lhs.split(","))

    def f(x: Any, y: Any) -> Any:
        return bind(EINSUM_BINARY, x, y, subscripts=sub)

    hlo = ad.jit(f, engine="xla").lower(a, b).program.executable.as_text()  # type: ignore[union-attr]
    moved = sum(
        int(np.prod([int(d) for d in m.group(1).split(",") if d]))
        for m in re.finditer(r"= f64\[([\d,]*)\]\{[^}]*\} (?:transpose|copy)\(", hlo)
    )
    assert moved < 16 * 16 * 16, moved
    np.testing.assert_array_equal(_np(ad.jit(f, engine="xla")(a, b)), np.einsum(sub, a, b))
