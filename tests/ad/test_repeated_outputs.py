"""An output that holds one value twice: each position's cotangent counts.

``f(x) = (s, s)`` with ``s = sin(x)`` has the pullback ``ct0 * cos x + ct1 * cos x``; a
sweep that keeps only the last seed written for a value (or the first) gives one term.  The
same holds for a checkpoint region returning one value twice, under every policy, eagerly
and traced.  JAX is the oracle.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad

X = 0.7
POLICIES = [None, ad.save_nothing, ad.save_everything, ad.save_contractions]


def _value(h: Any) -> np.ndarray[Any, Any]:
    return np.asarray(h.to_numpy() if hasattr(h, "to_numpy") else h)


def _twice(x: Any) -> tuple[Any, Any]:
    s = ad.sin(x)
    return s, s


def test_vjp_sums_the_cotangents_of_an_output_repeated_in_its_structure() -> None:
    _, pull = ad.vjp(_twice, np.array(X))
    (g,) = pull((np.array(2.0), np.array(5.0)))
    _, jpull = jax.vjp(lambda x: (jnp.sin(x), jnp.sin(x)), jnp.array(X))
    np.testing.assert_allclose(_value(g), 7 * np.cos(X))
    np.testing.assert_allclose(_value(g), np.asarray(jpull((2.0, 5.0))[0]))


def test_vjp_sums_the_cotangents_of_a_value_repeated_in_a_dict_and_a_list() -> None:
    def f(x: Any) -> Any:
        s = ad.sin(x)
        return {"a": s, "b": [s, s]}

    _, pull = ad.vjp(f, np.array(X))
    (g,) = pull({"a": np.array(1.0), "b": [np.array(2.0), np.array(4.0)]})
    np.testing.assert_allclose(_value(g), 7 * np.cos(X))


def test_vjp_inside_jit_sums_the_cotangents_of_a_repeated_output() -> None:
    def f(x: Any) -> Any:
        _, pull = ad.vjp(_twice, x)
        return pull((2.0 * ad.ones_like(x), 5.0 * ad.ones_like(x)))[0]

    np.testing.assert_allclose(_value(ad.jit(f)(np.array(X))), 7 * np.cos(X))


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: str(p))
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_checkpoint_region_returning_one_value_twice_sums_both_cotangents(
    policy: Any, mode: str
) -> None:
    region = ad.checkpoint(_twice, policy=policy) if policy is not None else ad.checkpoint(_twice)

    def loss(x: Any) -> Any:
        a, b = region(x)
        return a + 2.0 * b

    grad = ad.grad(loss)
    g = ad.jit(grad)(np.array(X)) if mode == "jit" else grad(np.array(X))
    np.testing.assert_allclose(_value(g), 3 * np.cos(X))
    jg = jax.grad(lambda x: (lambda s: s + 2.0 * s)(jax.checkpoint(jnp.sin)(x)))(X)
    np.testing.assert_allclose(_value(g), float(jg))


def test_checkpoint_region_output_repeated_beside_an_input_passed_through() -> None:
    def region(x: Any, y: Any) -> Any:
        s = ad.sin(x)
        return s, y, s

    def loss(x: Any, y: Any) -> Any:
        a, b, c = ad.checkpoint(region)(x, y)
        return a + 3.0 * b + 5.0 * c

    gx, gy = ad.grad(loss, argnums=(0, 1))(np.array(X), np.array(1.5))
    np.testing.assert_allclose(_value(gx), 6 * np.cos(X))
    np.testing.assert_allclose(_value(gy), 3.0)


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: str(p))
def test_second_derivative_through_a_region_returning_one_value_twice(policy: Any) -> None:
    region = ad.checkpoint(_twice, policy=policy) if policy is not None else ad.checkpoint(_twice)

    def loss(x: Any) -> Any:
        a, b = region(x)
        return a + 2.0 * b

    h = ad.grad(ad.grad(loss))(np.array(X))
    np.testing.assert_allclose(_value(h), -3 * np.sin(X))
