"""``jacfwd`` of a function returning a tuple/dict, and ``hessian`` with a tuple
``argnums``, give JAX's structure (the output's structure outside, one entry per argnum
inside) and JAX's values."""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)

X = np.array([0.3, -1.2, 2.0])
Y = np.array([0.5, -1.5])


def _same(ours: Any, theirs: Any) -> None:
    """Same pytree structure (owners are leaves) and the same values, leaf by leaf."""
    mine = jax.tree_util.tree_map(lambda t: t.to_numpy(), ours)
    assert jax.tree_util.tree_structure(mine) == jax.tree_util.tree_structure(theirs)
    for a, b in zip(jax.tree_util.tree_leaves(mine), jax.tree_util.tree_leaves(theirs),
                    strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("argnums", [0, 1, (0,), (1,), (0, 1), (1, 0)])
def test_hessian_with_argnums_matches_jax(argnums: Any) -> None:
    def f(a: Any, b: Any) -> Any:
        return ad.sum(ad.sin(a)) * ad.sum(b * b)

    def jf(a: Any, b: Any) -> Any:
        return jnp.sum(jnp.sin(a)) * jnp.sum(b * b)

    _same(ad.hessian(f, argnums)(X, Y), jax.hessian(jf, argnums)(X, Y))


@pytest.mark.parametrize("argnums", [0, (0, 1)])
def test_jacfwd_of_a_tuple_output_matches_jax(argnums: Any) -> None:
    def f(a: Any, b: Any) -> Any:
        return ad.sum(a) * ad.sum(b), a * 2.0

    def jf(a: Any, b: Any) -> Any:
        return jnp.sum(a) * jnp.sum(b), a * 2.0

    _same(ad.jacfwd(f, argnums)(X, Y), jax.jacfwd(jf, argnums)(X, Y))


def test_jacfwd_of_a_dict_output_matches_jax() -> None:
    _same(
        ad.jacfwd(lambda a: {"s": ad.sum(a * a), "c": ad.cos(a)})(X),
        jax.jacfwd(lambda a: {"s": jnp.sum(a * a), "c": jnp.cos(a)})(X),
    )


def test_grad_keeps_a_namedtuple_of_parameters_as_jax_does() -> None:
    """A namedtuple argument comes back as the same namedtuple (fields by name), a flat
    list as a list and a tuple as a tuple; values as JAX's."""
    P = collections.namedtuple("P", "w b")
    p = P(np.array([1.0, 2.0]), np.array([0.5, -1.0, 3.0]))

    def f(q: Any) -> Any:
        return ad.sum(q.w * q.w) + ad.sum(ad.sin(q.b))

    def fj(q: Any) -> Any:
        return jnp.sum(q.w * q.w) + jnp.sum(jnp.sin(q.b))

    g = ad.grad(f)(p)
    want = jax.grad(fj)(P(jnp.asarray(p.w), jnp.asarray(p.b)))
    assert type(g) is P
    np.testing.assert_allclose(g.w.to_numpy(), want.w)
    np.testing.assert_allclose(g.b.to_numpy(), want.b)
    as_list = ad.grad(lambda xs: ad.sum(xs[0] * xs[1]))([p.w, p.w])
    as_tuple = ad.grad(lambda xs: ad.sum(xs[0] * xs[1]))((p.w, p.w))
    assert type(as_list) is list and type(as_tuple) is tuple
