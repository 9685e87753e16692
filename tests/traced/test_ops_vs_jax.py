"""Every primitive of the op table, traced and transformed, against JAX and against eager
mode: values and output types (``jax.make_jaxpr``), ``grad``, ``vjp``, ``jvp`` and
``vmap`` graphs — each produced graph also type-checks."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import traced
from tests.traced._specs import SPECS, Spec, cases, close, ours, theirs

IDS = [s.name for s in SPECS]


def _checked(g: traced.Graph) -> traced.Graph:
    traced.check(g)
    return g


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_traced_value_and_type_match_jax_and_eager(spec: Spec) -> None:
    """eval(trace(f)) == eager f == jax f, and the graph's output type is JAX's."""
    for xs in cases(spec):
        g = _checked(traced.trace(ours(spec))(*xs))
        jaxpr = jax.make_jaxpr(theirs(spec))(*xs)
        (aval,) = jaxpr.out_avals
        (out,) = g.outvars
        assert out.shape == tuple(aval.shape)
        assert out.dtype == np.dtype(aval.dtype)
        got = traced.eval_graph(g, *xs)
        close(got, theirs(spec)(*xs))
        close(got, ours(spec)(*[ts.from_numpy(x) for x in xs]))


def _loss(spec: Spec, m: Any, w: np.ndarray, *xs: Any) -> Any:
    return m.sum(spec.fn(m, *xs) * w)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_grad_graph_matches_jax(spec: Spec) -> None:
    """traced.grad (every argument) equals jax.grad of the same weighted loss."""
    rng = np.random.default_rng(1)
    for xs in cases(spec):
        w = rng.normal(size=np.shape(theirs(spec)(*xs)))
        g = traced.trace(lambda *a, w=w: _loss(spec, ad, w, *a))(*xs)
        nums = tuple(range(len(xs)))
        got = traced.eval_graph(_checked(traced.grad(g, argnums=nums)), *xs)
        want = jax.grad(lambda *a, w=w: _loss(spec, jnp, w, *a), argnums=nums)(*xs)
        for a, b in zip(got, want, strict=True):
            close(a, b)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_vjp_and_jvp_graphs_match_jax(spec: Spec) -> None:
    """traced.vjp with a random cotangent and traced.jvp with random tangents equal JAX's."""
    rng = np.random.default_rng(2)
    for xs in cases(spec):
        g = traced.trace(ours(spec))(*xs)
        ref, pullback = jax.vjp(theirs(spec), *xs)
        ct = rng.normal(size=np.shape(ref))
        out, cts = traced.eval_graph(_checked(traced.vjp(g)), *xs, ct)
        close(out, ref)
        for a, b in zip(cts, pullback(ct), strict=True):
            close(a, b)
        tans = [rng.normal(size=np.shape(x)) for x in xs]
        out, tan = traced.eval_graph(_checked(traced.jvp(g)), *xs, *tans)
        _, ref_tan = jax.jvp(theirs(spec), tuple(xs), tuple(tans))
        close(out, ref)
        close(tan, ref_tan)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_vmap_graph_matches_jax_vmap(spec: Spec) -> None:
    """traced.vmap over every argument, and over the first only, equals jax.vmap."""
    rng = np.random.default_rng(3)
    for xs in cases(spec):
        g = traced.trace(ours(spec))(*xs)
        batch = [np.stack([x + 0.01 * k * rng.uniform(size=np.shape(x)) for k in range(3)])
                 for x in xs]
        got = traced.eval_graph(_checked(traced.vmap(g, 3)), *batch)
        close(got, jax.vmap(theirs(spec))(*batch))
        axes = (0,) + (None,) * (len(xs) - 1)
        mixed = [batch[0], *xs[1:]]
        got = traced.eval_graph(_checked(traced.vmap(g, 3, in_axes=axes)), *mixed)
        close(got, jax.vmap(theirs(spec), in_axes=axes)(*mixed))


@pytest.mark.parametrize("spec", [s for s in SPECS if len(s.shapes[0]) == 1], ids=lambda s: s.name)
def test_vmap_of_grad_matches_jax(spec: Spec) -> None:
    """Per-example gradients: vmap(grad(g)) equals jax.vmap(jax.grad(f))."""
    rng = np.random.default_rng(4)
    (x,) = cases(spec)[-1]
    w = rng.normal(size=np.shape(theirs(spec)(x)))
    g = traced.grad(traced.trace(lambda a: _loss(spec, ad, w, a))(x))
    batch = np.stack([x, x * 0.9 + 0.05, x * 1.1])
    got = traced.eval_graph(_checked(traced.vmap(g, 3)), batch)
    close(got, jax.vmap(jax.grad(lambda a: _loss(spec, jnp, w, a)))(batch))
