"""JAX oracle with inputs that make conventions visible (issue 16).

Random oracle inputs almost never contain exact ties, repeated values or zeros, and a
random permutation of two axes is always its own inverse, so rules that get ties,
zeros or inverse permutations wrong survive them.  The strategies used here
(``tests.strategies.tie_arrays``, ``tie_pairs``, ``long_tie_vectors``,
``non_involutive_permutations``) make those cases the common ones, for ``max``,
``min``, ``maximum``, ``minimum``, ``sort`` (both directions), ``transpose`` and
``prod``: values, VJPs and JVPs are compared with JAX exactly (tie values are exact
binary fractions).

A few fixed-point checks of single VJP factors (``div``, ``cos``, ``sqrt``, ``sub``,
``where``, ``cumsum``) close the mutation list's op rows.  All were checked by hand to
fail with the rule mutated (on a temporary copy; the mutants are in
``tests/mutation/mutants.toml``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tenferro_ad as ad
from tests.strategies import (
    long_tie_vectors,
    non_involutive_permutations,
    tie_arrays,
    tie_pairs,
)


@pytest.fixture(autouse=True)
def _jax_op_by_op() -> Iterator[None]:
    """JAX (the oracle) runs op by op here, as in ``tests/ad/_opcheck.oracle``: every
    example has a new shape, and compiling each whole oracle function per shape costs far
    more than running its primitives."""
    with jax.disable_jit():
        yield


def _np(x: Any) -> np.ndarray[Any, Any]:
    return np.asarray(x)


def _weights(shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """Distinct cotangent weights (exact: small integers), so routing errors show."""
    return np.arange(1.0, 1.0 + int(np.prod(shape))).reshape(shape)


def _grad_pair(f_ad: Any, f_jax: Any, x: np.ndarray[Any, Any], rtol: float = 0.0) -> None:
    """VJP (of a weighted sum) and JVP agree with JAX (exactly unless ``rtol``)."""
    out = np.asarray(f_jax(x))
    w = _weights(out.shape)
    g = ad.grad(lambda a: ad.sum(f_ad(a) * w))(x)
    j = jax.grad(lambda a: jnp.sum(f_jax(a) * w))(x)
    np.testing.assert_allclose(g.to_numpy(), _np(j), rtol=rtol, atol=0)
    t = _weights(x.shape)[::-1].copy() if x.ndim == 1 else _weights(x.shape)
    _, tan = ad.jvp(f_ad, (x,), (t,))
    _, jtan = jax.jvp(f_jax, (x,), (t,))
    np.testing.assert_allclose(tan.to_numpy(), _np(jtan), rtol=1e-15, atol=0)


@given(tie_arrays(), st.sampled_from(["max", "min"]), st.data())
def test_max_min_with_ties_match_jax(x: np.ndarray[Any, Any], name: str, data: Any) -> None:
    """Full and per-axis reductions: tied maxima share the cotangent evenly."""
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)))
    keep = data.draw(st.booleans())
    f = getattr(ad, name)
    jf = getattr(jnp, name)
    _grad_pair(lambda a: f(a, axis=axis, keepdims=keep), lambda a: jf(a, axis=axis,
                                                                       keepdims=keep), x)


@given(tie_pairs(), st.sampled_from(["maximum", "minimum"]))
def test_maximum_minimum_with_ties_match_jax(
    xy: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]], name: str
) -> None:
    """Elementwise ties between the arguments: each gets half the cotangent."""
    x, y = xy
    f = getattr(ad, name)
    jf = getattr(jnp, name)
    w = _weights(x.shape)
    gx, gy = ad.grad(lambda a, b: ad.sum(f(a, b) * w), argnums=(0, 1))(x, y)
    jx, jy = jax.grad(lambda a, b: jnp.sum(jf(a, b) * w), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx.to_numpy(), _np(jx))
    np.testing.assert_array_equal(gy.to_numpy(), _np(jy))
    _, t = ad.jvp(lambda a, b: f(a, b), (x, y), (w, -2.0 * w))
    _, jt = jax.jvp(lambda a, b: jf(a, b), (x, y), (w, -2.0 * w))
    np.testing.assert_array_equal(t.to_numpy(), _np(jt))


@given(long_tie_vectors())
def test_sort_of_long_vectors_with_ties_routes_gradients_like_jax(x: np.ndarray[Any, Any]) -> None:
    """A stable ascending sort: tied entries keep their order, so each cotangent goes
    back to the same source element as in JAX."""
    _grad_pair(lambda a: ad.sort(a), lambda a: jnp.sort(a), x)


@given(long_tie_vectors(), st.booleans())
def test_argsort_of_long_vectors_with_ties_is_jaxs_stable_order(
    x: np.ndarray[Any, Any], descending: bool
) -> None:
    """``argsort`` (which ``sort`` gathers by) is JAX's stable order in both directions."""
    got = ad.argsort(x, descending=descending).to_numpy()
    want = _np(jnp.argsort(x, descending=descending, stable=True))
    np.testing.assert_array_equal(got, want)


@given(tie_arrays(min_rank=2, max_rank=3, min_side=2))
def test_sort_along_an_axis_with_ties_matches_jax(x: np.ndarray[Any, Any]) -> None:
    _grad_pair(lambda a: ad.sort(a, axis=0), lambda a: jnp.sort(a, axis=0), x)
    np.testing.assert_array_equal(
        ad.sort(x, axis=0, descending=True).to_numpy(),
        _np(jnp.sort(x, axis=0, descending=True)),
    )


def test_descending_sort_gradient_at_ties_matches_jax() -> None:
    """``x = [0, 1, 0, 1, 0]``: JAX's gradient of ``sum(sort(x, descending=True) * w)``
    is ``[5, 2, 4, 1, 3]``; tenferro gives ``[3, 1, 4, 2, 5]`` (found by issue 16's tie
    strategies)."""
    x = np.array([0.0, 1.0, 0.0, 1.0, 0.0])
    w = _weights(x.shape)
    # only numpy arrays stay alive in the failure's traceback (the suite's leak check)
    got = ad.grad(lambda a: ad.sum(ad.sort(a, descending=True) * w))(x).to_numpy()
    want = _np(jax.grad(lambda a: jnp.sum(jnp.sort(a, descending=True) * w))(x))
    assert got.tolist() == want.tolist(), f"tenferro {got.tolist()}, JAX {want.tolist()}"


@given(st.data(), st.integers(3, 4))
def test_transpose_with_non_involutive_permutations_matches_jax(data: Any, ndim: int) -> None:
    """Gradient and tangent of a transpose whose permutation is not its own inverse."""
    perm = data.draw(non_involutive_permutations(ndim))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    x = np.arange(float(np.prod(shape))).reshape(shape)
    _grad_pair(lambda a: ad.transpose(a, perm), lambda a: jnp.transpose(a, perm), x)


@given(tie_arrays(min_rank=1, max_rank=3), st.data())
def test_prod_with_zeros_and_repeats_matches_jax(x: np.ndarray[Any, Any], data: Any) -> None:
    """Exact first derivatives at (repeated) zeros, over any axis of 1-3-d arrays."""
    axis = data.draw(st.one_of(st.none(), st.integers(0, x.ndim - 1)))
    _grad_pair(lambda a: ad.prod(a, axis=axis), lambda a: jnp.prod(a, axis=axis), x)


def test_prod_over_the_leading_axis_of_a_cube_with_zeros() -> None:
    """A deterministic case of the above: axis 0 of a (2, 3, 4) array with zeros."""
    x = np.arange(24.0).reshape(2, 3, 4) % 5.0
    _grad_pair(lambda a: ad.prod(a, axis=0), lambda a: jnp.prod(a, axis=0), x)


# -- single VJP factors -------------------------------------------------------------------

X = np.array([0.3, 1.2, 2.5, -0.7])
Y = np.array([1.5, -0.4, 0.8, 2.0])


def _binary(f_ad: Any, f_jax: Any) -> None:
    w = _weights(X.shape)
    gx, gy = ad.grad(lambda a, b: ad.sum(f_ad(a, b) * w), argnums=(0, 1))(X, Y)
    jx, jy = jax.grad(lambda a, b: jnp.sum(f_jax(a, b) * w), argnums=(0, 1))(X, Y)
    np.testing.assert_allclose(gx.to_numpy(), _np(jx), rtol=1e-14)
    np.testing.assert_allclose(gy.to_numpy(), _np(jy), rtol=1e-14)


def test_div_and_sub_gradients_match_jax() -> None:
    _binary(lambda a, b: a / b, lambda a, b: a / b)
    _binary(lambda a, b: a - b, lambda a, b: a - b)


def test_cos_and_sqrt_gradients_match_jax() -> None:
    _grad_pair(ad.cos, jnp.cos, X, rtol=1e-14)
    _grad_pair(ad.sqrt, jnp.sqrt, np.abs(X) + 0.1, rtol=1e-14)


def test_where_routes_each_branch_its_own_cotangent() -> None:
    c = np.array([True, False, False, True])
    _binary(lambda a, b: ad.where(c, a, b), lambda a, b: jnp.where(c, a, b))


def test_cumsum_gradient_is_the_reversed_cumulative_sum() -> None:
    _grad_pair(lambda a: ad.cumsum(a, axis=0), lambda a: jnp.cumsum(a, axis=0), X)
    m = np.arange(12.0).reshape(3, 4)
    _grad_pair(lambda a: ad.cumsum(a, axis=1), lambda a: jnp.cumsum(a, axis=1), m)
