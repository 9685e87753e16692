"""Composite programs (the eager suite's) traced, transformed and evaluated: traced == eager
== JAX for values, gradients, higher-order derivatives and per-example (vmapped) results."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import traced
from tests.traced._specs import close

RNG = np.random.default_rng(7)


def _mlp(m: Any, p: Any, x: Any) -> Any:
    h = m.tanh(x @ p[0] + p[1])
    o = h @ p[2]
    lse = ad.logsumexp(o, axis=-1) if m is ad else jax.nn.logsumexp(o, axis=-1)
    return m.mean(lse - o[:, 0])


def _rnn(m: Any, w: Any, u: Any, xs: Any) -> Any:
    h = None
    total = 0.0
    for t in range(4):
        pre = xs[t] @ u if h is None else h @ w + xs[t] @ u
        h = m.tanh(pre)
        total = total + m.sum(h * h)
    return total


def _where_heavy(m: Any, x: Any) -> Any:
    r = m.maximum(x, 0.0)
    y = m.where(x > 0.5, r * r, m.minimum(x, -0.2) * 3.0)
    return m.sum(m.clip(y, -1.0, 1.0)) + m.max(x)


def _indexing(m: Any, x: Any) -> Any:
    g = x[np.array([0, 3, 3, 1, 0, 0])]
    return m.sum(m.sin(g) * g) + m.sum(x[1:4, ::2] ** 2.0) + m.sum(x[2])


PARAMS = [RNG.normal(size=(4, 5)), RNG.normal(size=(5,)), RNG.normal(size=(5, 3))]
X = RNG.normal(size=(6, 4))


def test_mlp_value_and_grad_with_list_params_match_eager_and_jax() -> None:
    """A list-of-arrays parameter pytree: value_and_grad graph == ad.grad == jax.grad."""
    g = traced.trace(lambda p, x: _mlp(ad, p, x))(PARAMS, X)
    value, grads = traced.eval_graph(traced.value_and_grad(g), PARAMS, X)
    jv, jg = jax.value_and_grad(lambda p: _mlp(jnp, p, X))(PARAMS)
    eager = ad.grad(lambda p, x: _mlp(ad, p, x))([ts.from_numpy(a) for a in PARAMS],
                                                  ts.from_numpy(X))
    close(value, jv)
    assert isinstance(grads, list) and len(grads) == 3
    for a, b, c in zip(grads, jg, eager, strict=True):
        close(a, b)
        close(a, c)


def test_unrolled_rnn_grad_matches_jax() -> None:
    """Python loops unroll at trace time; gradients through the unrolled recurrence agree."""
    w, u, xs = RNG.normal(size=(3, 3)) * 0.5, RNG.normal(size=(2, 3)), RNG.normal(size=(4, 2))
    g = traced.trace(lambda w_, u_, x_: _rnn(ad, w_, u_, x_))(w, u, xs)
    assert sum(e.prim.name == "tanh" for e in g.eqns) == 4
    got = traced.eval_graph(traced.grad(g, argnums=(0, 1)), w, u, xs)
    want = jax.grad(lambda a, b: _rnn(jnp, a, b, xs), argnums=(0, 1))(w, u)
    for a, b in zip(got, want, strict=True):
        close(a, b)


@pytest.mark.parametrize("fn", [_where_heavy, _indexing], ids=["where_heavy", "indexing"])
def test_nonsmooth_and_indexing_programs_match_jax(fn: Any) -> None:
    """where/maximum/clip/max ties and gather/slice/scatter gradients equal JAX's."""
    x = RNG.normal(size=(5, 3))
    g = traced.trace(lambda v: fn(ad, v))(x)
    close(traced.eval_graph(g, x), fn(jnp, x))
    close(traced.eval_graph(traced.grad(g), x), jax.grad(lambda v: fn(jnp, v))(x))


def _smooth(m: Any, x: Any) -> Any:
    return m.sum(m.exp(x) * m.sin(x)) + m.sum(x * x * x)


def test_forward_over_reverse_hessian_vector_product_matches_jax() -> None:
    """jvp(grad(g)) — refused by eager mode — works on graphs and equals JAX's HVP."""
    x, v = RNG.normal(size=(4,)), RNG.normal(size=(4,))
    hvp = traced.jvp(traced.grad(traced.trace(lambda y: _smooth(ad, y))(x)))
    traced.check(hvp)
    grad_x, hv = traced.eval_graph(hvp, x, v)
    jg, jhv = jax.jvp(jax.grad(lambda y: _smooth(jnp, y)), (x,), (v,))
    close(grad_x, jg)
    close(hv, jhv)


def test_reverse_over_reverse_and_third_order_match_jax() -> None:
    """grad(grad(g)) and grad(grad(grad(g))) of a scalar function equal JAX's."""
    def f(m: Any, x: Any) -> Any:
        return m.sin(x) * m.exp(x * 0.5) + x ** 3.0

    x = np.asarray(0.7)
    g1 = traced.grad(traced.trace(lambda y: f(ad, y))(x))
    g2 = traced.grad(g1)
    g3 = traced.grad(g2)
    for gr, jf in [(g1, jax.grad(lambda y: f(jnp, y))),
                   (g2, jax.grad(jax.grad(lambda y: f(jnp, y)))),
                   (g3, jax.grad(jax.grad(jax.grad(lambda y: f(jnp, y)))))]:
        traced.check(gr)
        close(traced.eval_graph(gr, x), jf(x))


def test_hessian_by_vmapped_hvp_matches_jax_hessian() -> None:
    """vmap(jvp(grad(g))) over the basis vectors gives the full Hessian."""
    x = RNG.normal(size=(3,))
    hvp = traced.jvp(traced.grad(traced.trace(lambda y: _smooth(ad, y))(x)))
    _, hess = traced.eval_graph(traced.vmap(hvp, 3, in_axes=(None, 0)), x, np.eye(3))
    close(hess, jax.hessian(lambda y: _smooth(jnp, y))(x))


def test_per_example_gradients_of_the_mlp_match_jax() -> None:
    """ad.vmap of ad.grad... as graphs: per-example gradients of the MLP loss."""
    g = traced.grad(traced.trace(lambda p, x: _mlp(ad, p, x))(PARAMS, X[:1]))
    batch = X.reshape(6, 1, 4)
    got = traced.eval_graph(traced.vmap(g, 6, in_axes=(None, 0)), PARAMS, batch)
    want = jax.vmap(jax.grad(lambda p, x: _mlp(jnp, p, x)), in_axes=(None, 0))(PARAMS, batch)
    for a, b in zip(got, want, strict=True):
        close(a, b)


def test_function_vmap_matches_jax_and_composes_with_eager_grad() -> None:
    """ad.vmap(f) runs on owners (fresh owners out) and on handles (recorded: ad.grad of it)."""
    w = RNG.normal(size=(4, 2))
    xb = RNG.normal(size=(5, 4))

    def f(m: Any, x: Any, w_: Any) -> Any:
        return m.sum(m.tanh(x @ w_))

    out = ad.vmap(lambda x, w_: f(ad, x, w_), in_axes=(0, None))(xb, ts.from_numpy(w))
    close(out, jax.vmap(lambda x: f(jnp, x, w))(xb))
    gw = ad.grad(lambda w_: ad.sum(ad.vmap(lambda x, ww: f(ad, x, ww), in_axes=(0, None))(
        ts.from_numpy(xb), w_)))(ts.from_numpy(w))
    close(gw, jax.grad(lambda w_: jnp.sum(jax.vmap(lambda x: f(jnp, x, w_))(xb)))(w))


def test_eval_graph_on_handles_records_on_the_tape() -> None:
    """A graph evaluated on handles binds eager ops: ad.grad through eval_graph works."""
    x = RNG.normal(size=(3,))
    g = traced.trace(lambda y: _smooth(ad, y))(x)
    got = ad.grad(lambda y: traced.eval_graph(g, y))(ts.from_numpy(x))
    close(got, jax.grad(lambda y: _smooth(jnp, y))(x))


def test_tracing_a_vmapped_function_inlines_the_batched_graph() -> None:
    """trace(vmap(f)) is a graph (vmap composes with tracing) and grad of it matches JAX."""
    xb = RNG.normal(size=(4, 3))
    g = traced.trace(lambda b: ad.sum(ad.vmap(lambda x: _smooth(ad, x))(b)))(xb)
    traced.check(g)
    close(traced.eval_graph(traced.grad(g), xb),
          jax.grad(lambda b: jnp.sum(jax.vmap(lambda x: _smooth(jnp, x))(b)))(xb))


def test_complex_program_grad_jvp_and_vmap_match_jax() -> None:
    """Complex values meeting real ones: the real argument gets a real cotangent (as JAX)."""
    z = RNG.normal(size=(3,)) + 1j * RNG.normal(size=(3,))
    x = RNG.normal(size=(3,))

    def f(m: Any, a: Any, b: Any) -> Any:
        w = a * b + m.conj(a) * 2.0
        return m.sum(m.real(w * m.conj(w))) + m.sum(m.imag(m.exp(a)) * b)

    g = traced.trace(lambda a, b: f(ad, a, b))(z, x)
    got = traced.eval_graph(traced.grad(g, argnums=(0, 1)), z, x)
    want = jax.grad(lambda a, b: f(jnp, a, b), argnums=(0, 1))(z, x)
    assert got[1].dtype == ts.dtype("float64")
    for a, b in zip(got, want, strict=True):
        close(a.to_numpy().real, np.real(b))
        close(a.to_numpy().imag, np.imag(b))
    tz, tx = RNG.normal(size=3) + 1j * RNG.normal(size=3), RNG.normal(size=3)
    _, t = traced.eval_graph(traced.jvp(g), z, x, tz, tx)
    close(t, jax.jvp(lambda a, b: f(jnp, a, b), (z, x), (tz, tx))[1])
    zb = np.stack([z, 2 * z])
    close(ad.vmap(lambda a, b: f(ad, a, b), in_axes=(0, None))(zb, x),
          jax.vmap(lambda a: f(jnp, a, x))(zb))


def _mps_norm(ts_: list[Any], einsum: Any, conj: Any) -> Any:
    env = einsum("apb,cpd->bd", ts_[0], conj(ts_[0]))
    for t in ts_[1:]:
        env = einsum("ac,apb,cpd->bd", env, t, conj(t))
    return env


def test_complex_mps_norm_gradient_hvp_and_batched_norms_match_jax() -> None:
    """The eager suite's tensor network: a complex MPS norm through einsum paths — grad of
    every site, forward-over-reverse HVP, and norms of a batch of MPS (einsum batching)."""
    shapes = [(1, 2, 3), (3, 2, 3), (3, 2, 3), (3, 2, 1)]
    sites = [RNG.normal(size=s) + 1j * RNG.normal(size=s) for s in shapes]

    def f(m: Any, *t: Any) -> Any:
        ein = ad.einsum if m is ad else jnp.einsum
        return m.sum(m.real(_mps_norm(list(t), ein, m.conj)))

    g = traced.trace(lambda *t: f(ad, *t))(*sites)
    nums = tuple(range(4))
    got = traced.eval_graph(traced.grad(g, argnums=nums), *sites)
    for a, b in zip(got, jax.grad(lambda *t: f(jnp, *t), argnums=nums)(*sites), strict=True):
        close(a.to_numpy().real, np.real(b))
        close(a.to_numpy().imag, np.imag(b))
    v = RNG.normal(size=shapes[1]) + 1j * RNG.normal(size=shapes[1])
    one = traced.trace(lambda t1: f(ad, sites[0], t1, *sites[2:]))(sites[1])
    _, hv = traced.eval_graph(traced.jvp(traced.grad(one)), sites[1], v)
    _, jhv = jax.jvp(jax.grad(lambda t1: f(jnp, sites[0], t1, *sites[2:])), (sites[1],), (v,))
    close(hv.to_numpy().real, np.real(jhv))
    close(hv.to_numpy().imag, np.imag(jhv))
    batch = [np.stack([s, 0.5 * s]) for s in sites]
    bg = traced.vmap(g, 2)
    assert "concatenate" not in {e.prim.name for e in bg.eqns}
    close(traced.eval_graph(bg, *batch), jax.vmap(lambda *t: f(jnp, *t))(*batch))
