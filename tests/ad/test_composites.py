"""Composite programs and higher-order derivatives against JAX; tape and handle behaviour."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import BackwardError, MissingRuleError

RNG = np.random.default_rng(7)


def _mlp(ops: Any, p: Any, x: Any) -> Any:
    h = ops.tanh(x @ p[0] + p[1])
    o = h @ p[2]
    lse = ad.logsumexp(o, axis=-1) if ops is ad else jax.nn.logsumexp(o, axis=-1)
    return ops.mean(lse - o[:, 0])


def test_mlp_loss_matches_jax() -> None:
    ps = [RNG.normal(size=(4, 5)), RNG.normal(size=(5,)), RNG.normal(size=(5, 3))]
    x = RNG.normal(size=(6, 4))
    ours = ad.grad(lambda p, xx: _mlp(ad, p, xx))([ts.from_numpy(a) for a in ps], ts.from_numpy(x))
    theirs = jax.grad(lambda p: _mlp(jnp, p, jnp.asarray(x)))([jnp.asarray(a) for a in ps])
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.to_numpy(), b, rtol=1e-9, atol=1e-12)


def test_unrolled_rnn_matches_jax() -> None:
    w, u = RNG.normal(size=(3, 3)) * 0.5, RNG.normal(size=(2, 3))
    xs = RNG.normal(size=(5, 2))

    def rnn(ops: Any, w: Any, u: Any, xs: Any) -> Any:
        h = ops.zeros(3) if ops is jnp else None
        total = 0.0
        for t in range(5):
            pre = xs[t] @ u if h is None else h @ w + xs[t] @ u
            h = ops.tanh(pre)
            total = total + ops.sum(h * h)
        return total

    ours = ad.grad(lambda w_, u_, x_: rnn(ad, w_, u_, x_), argnums=(0, 1))(
        ts.from_numpy(w), ts.from_numpy(u), ts.from_numpy(xs)
    )
    theirs = jax.grad(lambda w_, u_: rnn(jnp, w_, u_, jnp.asarray(xs)), argnums=(0, 1))(
        jnp.asarray(w), jnp.asarray(u)
    )
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.to_numpy(), b, rtol=1e-9, atol=1e-12)


def test_where_maximum_heavy_loss_matches_jax() -> None:
    x = RNG.normal(size=(4, 5))

    def f(ops: Any, x: Any) -> Any:
        r = ops.maximum(x, 0.0)
        y = ops.where(x > 0.5, r * r, ops.minimum(x, -0.2) * 3.0)
        return ops.sum(ops.clip(y, -1.0, 1.0)) + ops.max(x)

    ours = ad.grad(lambda v: f(ad, v))(ts.from_numpy(x))
    theirs = jax.grad(lambda v: f(jnp, v))(jnp.asarray(x))
    np.testing.assert_allclose(ours.to_numpy(), theirs, rtol=1e-12)


def test_gather_scatter_indexing_matches_jax() -> None:
    x = RNG.normal(size=(5, 3))
    idx = np.array([0, 3, 3, 1, 0, 0])

    def f(ops: Any, x: Any) -> Any:
        g = x[idx]
        return ops.sum(ops.sin(g) * g) + ops.sum(x[1:4, ::2] ** 2.0) + ops.sum(x[2])

    ours = ad.grad(lambda v: f(ad, v))(ts.from_numpy(x))
    theirs = jax.grad(lambda v: f(jnp, v))(jnp.asarray(x))
    np.testing.assert_allclose(ours.to_numpy(), theirs, rtol=1e-12)


def test_hessian_vector_products_match_jax() -> None:
    x, v = RNG.normal(size=(4,)), RNG.normal(size=(4,))

    def f(ops: Any, x: Any) -> Any:
        return ops.sum(ops.exp(x) * ops.sin(x)) + ops.sum(x * x * x)

    def hvp(x_: Any, v_: Any) -> Any:
        return ad.sum(ad.grad(lambda y: f(ad, y))(x_) * v_)

    ours = ad.grad(hvp)(ts.from_numpy(x), ts.from_numpy(v))
    theirs = jax.jvp(jax.grad(lambda y: f(jnp, y)), (jnp.asarray(x),), (jnp.asarray(v),))[1]
    np.testing.assert_allclose(ours.to_numpy(), theirs, rtol=1e-10)
    second = ad.grad(ad.grad(lambda y: ad.sum(ad.sin(y) * y)))
    with pytest.raises(TypeError):  # grad of a non-scalar gradient is refused
        second(ts.from_numpy(x))


def test_create_graph_backward_gives_handles() -> None:
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.array([0.5, 1.5])))
        y = ad.sum(x * x * x)
        g1 = tape.backward(y, wrt=[x], create_graph=True, keep=True).handle(x)
        g2 = tape.backward(ad.sum(g1), wrt=[x]).grad(x)
    np.testing.assert_allclose(g2.to_numpy(), 6 * np.array([0.5, 1.5]))
    del g2, g1, y, x, tape


def test_second_backward_without_keep_fails_clearly() -> None:
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.ones(2)))
        y = ad.sum(ad.sin(x))
    tape.backward(y)
    with pytest.raises(BackwardError, match="keep=True"):
        tape.backward(y)
    del x, y, tape


def test_missing_rule_names_primitive_kind_and_argument() -> None:
    prim = ad.extend.defprimitive("test_norule", lambda a: np.square(a), 1)
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.ones(2)))
        y = ad.sum(ad.extend.bind(prim, x))
    with pytest.raises(MissingRuleError) as ei:
        tape.backward(y)
    assert (ei.value.primitive, ei.value.rule, ei.value.argument) == ("test_norule", "vjp", 0)
    assert isinstance(ei.value, NotImplementedError)
    del x, y, tape, ei


def test_extend_user_primitive_with_rules() -> None:
    sq = ad.extend.defprimitive(
        "test_square", lambda a: np.square(a), 1, save_in=(0,),
        vjp=(lambda ops, g, x: ops.mul(ops.mul(g, x), 2.0),),
        jvp=(lambda ops, t, x: ops.mul(ops.mul(t, x), 2.0),),
    )
    x0 = np.array([1.0, -2.0])
    g = ad.grad(lambda x: ad.sum(ad.extend.bind(sq, x)))(ts.from_numpy(x0))
    np.testing.assert_allclose(g.to_numpy(), 2 * x0)
    hv = ad.grad(lambda x: ad.sum(ad.grad(lambda y: ad.sum(ad.extend.bind(sq, y) * y))(x)))(
        ts.from_numpy(x0)
    )
    np.testing.assert_allclose(hv.to_numpy(), 6 * x0)


def test_functional_api_borrows_and_fills_zeros() -> None:
    a = ts.from_numpy(np.array([1.0, 2.0]))
    b = ts.from_numpy(np.array([3.0, 4.0]))
    ga, gb = ad.grad(lambda x, y: ad.sum(x * x), argnums=(0, 1))(a, b)
    np.testing.assert_array_equal(ga.to_numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(gb.to_numpy(), [0.0, 0.0])
    with a.as_view_mut():  # the arguments are free again after the call
        pass
    (val, aux), g = ad.value_and_grad(lambda d: (ad.sum(d["w"] ** 2.0), 3), has_aux=True)({"w": a})
    assert aux == 3 and float(val.item()) == 5.0 and set(g) == {"w"}


def test_no_grad_records_nothing_and_scalars_allocate_nothing() -> None:
    from tenferro_storage import ledger

    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.ones(3)))
        with ad.no_grad():
            y = ad.exp(x)
        assert not y.is_tracked and tape.retained() == []
        with ledger.capture() as rec:
            z = x * 2.5 + 1
        assert rec.allocations == {ts.AllocationReason.OPERATION_OUTPUT: 2}
        assert float(ad.sum(z).item()) == pytest.approx(10.5)
    del x, y, z, tape
