"""``jacfwd`` of a function returning a tuple/dict, and ``hessian`` with a tuple
``argnums``, give JAX's structure (the output's structure outside, one entry per argnum
inside) and JAX's values."""

from __future__ import annotations

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
