"""``custom_vjp``/``custom_jvp`` calls under ``vmap`` and on the XLA engine.

``vmap`` of a custom-rule function batches the call with a rule (one batched call whose
primal and rules are the user's, mapped), never the per-example loop: the batched graph
holds one call equation whatever the batch size, its value is the per-example value, and
its derivative is still the user's rule (the rules here are 10x the true derivative, so a
transform that differentiates the body instead gives a different number).  ``jit`` on the
XLA engine lowers a call's primal graph; the host engine runs its kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
from tenferro_ad import traced
from tenferro_ad._custom_call import _PRIMS, call_primitive
from tenferro_ad._traced._batch_rules import RULES
from tenferro_ad._traced._lowering import LOWERINGS

X = np.array([0.5, 1.0, 2.0])
Y = np.array([1.5, -0.5, 0.25])
XS = np.stack([X, X * 0.5, X + 1.0, X - 0.25])


def _np(x: Any) -> np.ndarray:
    return np.asarray(x.to_numpy() if hasattr(x, "to_numpy") else x)


def _vjp_fn() -> Any:
    """``sin(x) * y`` whose rule is 10x the true VJP."""

    @ad.custom_vjp
    def f(x: Any, y: Any) -> Any:
        return ad.sin(x) * y

    def fwd(x: Any, y: Any) -> Any:
        return f(x, y), (x, y)

    def bwd(res: Any, g: Any) -> Any:
        x, y = res
        return (10.0 * g * ad.cos(x) * y, 10.0 * g * ad.sin(x))

    f.defvjp(fwd, bwd)
    return f


def _jvp_fn() -> Any:
    """``sin(x) * y`` whose JVP rule is 10x the true one and calls the function itself
    (JAX's usual spelling: the primal output is ``f(*primals)``)."""

    @ad.custom_jvp
    def f(x: Any, y: Any) -> Any:
        return ad.sin(x) * y

    @f.defjvp
    def f_jvp(p: Any, t: Any) -> Any:
        x, y = p
        out = f(x, y)
        return out, 10.0 * (t[0] * ad.cos(x) * y + t[1] * ad.sin(x)) + 0.0 * out

    return f


KINDS = {"custom_vjp": _vjp_fn, "custom_jvp": _jvp_fn}


def _count(g: traced.Graph, name: str) -> int:
    return sum(e.prim.name == name for e in g.eqns)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("size", [2, 4])
def test_vmap_of_a_custom_rule_function_is_one_batched_call(kind: str, size: int) -> None:
    f = KINDS[kind]()
    xs = XS[:size]
    g = traced.trace(ad.vmap(f, in_axes=(0, None)))(xs, Y)
    assert _count(g, f"{kind}_call") == 1, [e.prim.name for e in g.eqns]
    assert len(g.eqns) <= 2  # the call (and at most an input move): no per-example loop
    np.testing.assert_allclose(_np(ad.vmap(f, in_axes=(0, None))(xs, Y)), np.sin(xs) * Y)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("in_axes", [(0, None), (0, 0), (None, 0), (1, None)])
def test_derivative_of_a_vmapped_custom_rule_function_is_the_rule(
    kind: str, in_axes: tuple[Any, ...]
) -> None:
    """grad of vmap (the batched call's rule is the user's, mapped; an unbatched
    argument's cotangent is summed over the batch) against the rule per example."""
    f = KINDS[kind]()
    x = XS.T if in_axes[0] == 1 else (XS if in_axes[0] == 0 else X)
    y = np.stack([Y, Y * 2, Y - 1, Y + 3]) if in_axes[1] == 0 else Y
    w = np.arange(1.0, 1.0 + 4 * 3).reshape(4, 3)

    def loss(a: Any, b: Any) -> Any:
        return ad.sum(ad.vmap(f, in_axes=in_axes)(a, b) * w)

    for engine in ("eager", "jit"):
        fn = ad.grad(loss, argnums=(0, 1))
        gx, gy = fn(x, y) if engine == "eager" else ad.jit(fn)(x, y)
        ex = [x[:, k] if in_axes[0] == 1 else (x[k] if in_axes[0] == 0 else x) for k in range(4)]
        ey = [y[k] if in_axes[1] == 0 else y for k in range(4)]
        want_x = [10.0 * w[k] * np.cos(ex[k]) * ey[k] for k in range(4)]
        want_y = [10.0 * w[k] * np.sin(ex[k]) for k in range(4)]
        wx = (np.stack(want_x, axis=in_axes[0]) if in_axes[0] is not None
              else np.sum(want_x, axis=0))
        wy = np.stack(want_y) if in_axes[1] == 0 else np.sum(want_y, axis=0)
        np.testing.assert_allclose(_np(gx), wx, rtol=1e-12, err_msg=engine)
        np.testing.assert_allclose(_np(gy), wy, rtol=1e-12, err_msg=engine)


@pytest.mark.parametrize("kind", list(KINDS))
def test_vmap_of_grad_and_jvp_of_vmap_use_the_rule(kind: str) -> None:
    f = KINDS[kind]()
    vg = ad.vmap(ad.grad(lambda a, b: ad.sum(f(a, b))), in_axes=(0, None))
    np.testing.assert_allclose(_np(vg(XS, Y)), 10.0 * np.cos(XS) * Y, rtol=1e-12)
    np.testing.assert_allclose(_np(ad.jit(vg)(XS, Y)), 10.0 * np.cos(XS) * Y, rtol=1e-12)
    if kind == "custom_jvp":
        t = np.ones_like(XS)
        _, tan = ad.jvp(ad.vmap(f, in_axes=(0, None)), (XS, Y), (t, np.zeros(3)))
        np.testing.assert_allclose(_np(tan), 10.0 * np.cos(XS) * Y, rtol=1e-12)


def test_vmap_of_a_custom_vjp_function_with_several_outputs_of_one_dtype() -> None:
    """The batched call packs its leaves leaf by leaf; the rule puts the batch first."""

    @ad.custom_vjp
    def two(x: Any) -> Any:
        return ad.sin(x), ad.sum(x * x)

    def bwd(res: Any, g: Any) -> Any:
        return (10.0 * (g[0] * ad.cos(res) + g[1] * 2.0 * res),)

    two.defvjp(lambda x: (two(x), x), bwd)
    a, s = ad.vmap(two)(XS)
    np.testing.assert_allclose(_np(a), np.sin(XS))
    np.testing.assert_allclose(_np(s), np.sum(XS * XS, axis=1))
    g = ad.grad(lambda x: ad.sum(ad.vmap(two)(x)[0]) + ad.sum(ad.vmap(two)(x)[1] * 3.0))(XS)
    np.testing.assert_allclose(_np(g), 10.0 * (np.cos(XS) + 6.0 * XS), rtol=1e-12)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("engine", ["xla", "host"])
def test_custom_rule_function_runs_under_jit_on_each_engine(kind: str, engine: str) -> None:
    f = KINDS[kind]()
    np.testing.assert_allclose(_np(ad.jit(f, engine=engine)(X, Y)), np.sin(X) * Y)
    g = ad.jit(ad.grad(lambda a, b: ad.sum(f(a, b)), argnums=(0, 1)), engine=engine)(X, Y)
    np.testing.assert_allclose(_np(g[0]), 10.0 * np.cos(X) * Y, rtol=1e-12)
    np.testing.assert_allclose(_np(g[1]), 10.0 * np.sin(X), rtol=1e-12)
    vf = ad.jit(ad.vmap(f, in_axes=(0, None)), engine=engine)
    np.testing.assert_allclose(_np(vf(XS, Y)), np.sin(XS) * Y)


def test_custom_jvp_rule_calling_the_function_transposes_under_jit() -> None:
    """The transpose of a JVP rule is taken with respect to the tangents only: the rule's
    own call of the function (a primal value) is not differentiated (it recursed)."""

    @ad.custom_jvp
    def h(x: Any) -> Any:
        return ad.exp(x)

    @h.defjvp
    def h_jvp(p: Any, t: Any) -> Any:
        return h(p[0]), 3.0 * t[0] * h(p[0])

    want = 3.0 * np.exp(X)
    np.testing.assert_allclose(_np(ad.jit(ad.grad(lambda x: ad.sum(h(x))))(X)), want)
    np.testing.assert_allclose(_np(ad.vmap(ad.grad(lambda x: ad.sum(h(x))))(XS)),
                               3.0 * np.exp(XS))


@pytest.mark.parametrize("kind", ["vjp", "jvp"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_every_custom_call_primitive_has_a_batching_and_a_lowering_rule(kind: str, n: int) -> None:
    p = call_primitive(kind, n)
    assert p in RULES and p in LOWERINGS
    assert all(q in RULES and q in LOWERINGS for q in _PRIMS.values())
