"""Statistics, scans, sorting, norms and logsumexp (``ops/scan.py``) against JAX: value, VJP,
JVP in float32/float64 (complex where JAX supports it) and reverse-over-reverse."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tests.ad._opcheck import (
    Op,
    cases,
    check_first_order,
    check_forward_over_reverse,
    check_second_order,
    second_cases,
)

F = ("float32", "float64")
FC = ("float32", "float64", "complex64", "complex128")
M = (((3, 4),), ((2, 3, 4),))
B_W = np.array([[1.0, 0.5, 2.0, 0.0], [0.3, 1.0, 1.0, 2.0], [1.0, 1.0, 0.2, 0.7]])
B_NEG = np.array([[1.0, -0.5, 2.0, 0.1], [0.3, 1.0, -1.0, 2.0], [1.0, 1.0, 0.2, 0.7]])
IDX = np.array([[2, 0, 1, 3], [1, 1, 0, 2], [3, 2, 1, 0]])

TABLE = [
    Op("var_all", ad.var, jnp.var, M, "any", FC),
    Op("var_axis0_ddof1", lambda x: ad.var(x, axis=0, ddof=1),
       lambda x: jnp.var(x, axis=0, ddof=1), M, "any", FC),
    Op("var_keepdims", lambda x: ad.var(x, axis=(0, -1), keepdims=True),
       lambda x: jnp.var(x, axis=(0, -1), keepdims=True), M, "any", F),
    Op("std", lambda x: ad.std(x, axis=-1), lambda x: jnp.std(x, axis=-1), M, "any", F),
    Op("std_ddof", lambda x: ad.std(x, ddof=1), lambda x: jnp.std(x, ddof=1), M, "any", F),
    Op("cumsum_none", ad.cumsum, jnp.cumsum, M, "any", FC),
    Op("cumsum_axis0", lambda x: ad.cumsum(x, axis=0), lambda x: jnp.cumsum(x, axis=0),
       M, "any", FC),
    Op("cumprod_axis1", lambda x: ad.cumprod(x, axis=1), lambda x: jnp.cumprod(x, axis=1),
       M, "away", FC),
    Op("cumprod_none", ad.cumprod, jnp.cumprod, (((5,),),), "away", F),
    Op("diff", ad.diff, jnp.diff, M, "any", FC),
    Op("diff_n2_axis0", lambda x: ad.diff(x, n=2, axis=0),
       lambda x: jnp.diff(x, n=2, axis=0), M, "any", F),
    Op("diff_prepend_append",
       lambda x: ad.diff(x, prepend=0.5, append=ad.ones_like(x)[:, :1]),
       lambda x: jnp.diff(x, prepend=0.5, append=jnp.ones_like(x)[:, :1]), (((3, 4),),), "any",
       F),
    Op("sort", ad.sort, jnp.sort, M, "distinct", F),
    Op("sort_axis0", lambda x: ad.sort(x, axis=0), lambda x: jnp.sort(x, axis=0),
       M, "distinct", F),
    Op("sort_none", lambda x: ad.sort(x, axis=None), lambda x: jnp.sort(x, axis=None),
       M, "distinct", F),
    Op("sort_descending", lambda x: ad.sort(x, descending=True),
       lambda x: jnp.sort(x, descending=True), M, "distinct", F),
    Op("partition", lambda x: ad.sort(ad.partition(x, 2)),
       lambda x: jnp.sort(jnp.partition(x, 2)), M, "distinct", F),
    Op("take_along_axis", lambda x: ad.take_along_axis(x, IDX, 1),
       lambda x: jnp.take_along_axis(x, IDX, 1), (((3, 4),),), "any", FC),
    Op("norm_fro", ad.norm, jnp.linalg.norm, M, "away", FC),
    Op("norm_vec_axis", lambda x: ad.norm(x, axis=-1), lambda x: jnp.linalg.norm(x, axis=-1),
       M, "away", FC),
    Op("norm_vec_1", lambda x: ad.norm(x, 1, axis=0), lambda x: jnp.linalg.norm(x, 1, axis=0),
       M, "away", F),
    Op("norm_vec_inf", lambda x: ad.norm(x, np.inf, axis=-1),
       lambda x: jnp.linalg.norm(x, jnp.inf, axis=-1), M, "distinct", F),
    Op("norm_vec_-inf", lambda x: ad.norm(x, -np.inf, axis=-1),
       lambda x: jnp.linalg.norm(x, -jnp.inf, axis=-1), M, "distinct", F),
    Op("norm_vec_p3", lambda x: ad.norm(x, 3, axis=-1),
       lambda x: jnp.linalg.norm(x, 3, axis=-1), M, "away", F),
    Op("norm_vec_0", lambda x: ad.norm(x, 0, axis=-1) * ad.sum(x),
       lambda x: jnp.linalg.norm(x, 0, axis=-1) * jnp.sum(x), M, "away", F),
    Op("norm_vec_keepdims", lambda x: ad.norm(x, axis=1, keepdims=True),
       lambda x: jnp.linalg.norm(x, axis=1, keepdims=True), M, "away", F),
    Op("norm_mat_fro", lambda x: ad.norm(x, "fro", axis=(0, 1)),
       lambda x: jnp.linalg.norm(x, "fro", axis=(0, 1)), M, "away", FC),
    Op("norm_mat_1", lambda x: ad.norm(x, 1, axis=(-2, -1)),
       lambda x: jnp.linalg.norm(x, 1, axis=(-2, -1)), M, "distinct", F),
    Op("norm_mat_-1", lambda x: ad.norm(x, -1, axis=(-2, -1)),
       lambda x: jnp.linalg.norm(x, -1, axis=(-2, -1)), M, "distinct", F),
    Op("norm_mat_inf", lambda x: ad.norm(x, np.inf, axis=(-2, -1), keepdims=True),
       lambda x: jnp.linalg.norm(x, jnp.inf, axis=(-2, -1), keepdims=True), M, "distinct", F),
    Op("norm_mat_-inf", lambda x: ad.norm(x, -np.inf, axis=(-1, -2)),
       lambda x: jnp.linalg.norm(x, -jnp.inf, axis=(-1, -2)), M, "distinct", F),
    Op("norm_mat_nuc", lambda x: ad.norm(x, "nuc", axis=(-2, -1)),
       lambda x: jnp.linalg.norm(x, "nuc", axis=(-2, -1)), M, "any", ("float64",),
       rtol64=1e-8),
    Op("norm_mat_2", lambda x: ad.norm(x, 2, axis=(-2, -1)),
       lambda x: jnp.linalg.norm(x, 2, axis=(-2, -1)), M, "any", ("float64",), rtol64=1e-8),
    Op("norm_mat_-2", lambda x: ad.norm(x, -2, axis=(-2, -1)),
       lambda x: jnp.linalg.norm(x, -2, axis=(-2, -1)), M, "any", ("float64",), rtol64=1e-8),
    Op("median_odd", lambda x: ad.median(x, axis=-1), lambda x: jnp.median(x, axis=-1),
       (((3, 5),),), "distinct", F),
    Op("median_even_none", ad.median, jnp.median, M, "distinct", F),
    Op("median_keepdims", lambda x: ad.median(x, axis=0, keepdims=True),
       lambda x: jnp.median(x, axis=0, keepdims=True), M, "distinct", F),
    Op("average_weights", lambda x, w: ad.average(x, axis=1, weights=w),
       lambda x, w: jnp.average(x, axis=1, weights=w), (((3, 4), (4,)),), "positive", F),
    Op("average_full_weights", lambda x, w: ad.average(x, weights=w),
       lambda x, w: jnp.average(x, weights=w), (((3, 4), (3, 4)),), "positive", F),
    Op("average_returned", lambda x: ad.average(x, axis=0, returned=True)[1] * ad.average(x),
       lambda x: jnp.average(x, axis=0, returned=True)[1] * jnp.average(x), M, "any", F),
    Op("nansum_nanmean", lambda x: ad.nansum(x, axis=0) + ad.nanmean(x),
       lambda x: jnp.nansum(x, axis=0) + jnp.nanmean(x), M, "any", F),
    Op("logsumexp_axis", lambda x: ad.logsumexp(x, axis=-1),
       lambda x: jss.logsumexp(x, axis=-1), M, "any", F),
    Op("logsumexp_b", lambda x: ad.logsumexp(x, axis=1, b=B_W),
       lambda x: jss.logsumexp(x, axis=1, b=B_W), (((3, 4),),), "any", F),
    Op("logsumexp_b_keepdims", lambda x: ad.logsumexp(x, b=B_W, keepdims=True),
       lambda x: jss.logsumexp(x, b=B_W, keepdims=True), (((3, 4),),), "any", F),
    Op("logsumexp_return_sign", lambda x: ad.logsumexp(x, axis=1, b=B_NEG, return_sign=True)[0],
       lambda x: jss.logsumexp(x, axis=1, b=B_NEG, return_sign=True)[0], (((3, 4),),),
       "any", F),
    Op("logsumexp_b_neg_nan", lambda x: ad.logsumexp(x, axis=1, b=B_NEG),
       lambda x: jss.logsumexp(x, axis=1, b=B_NEG), (((3, 4),),), "any", F, second=False),
]


@pytest.mark.parametrize(("op", "bucket", "dtype"), cases(TABLE))
def test_value_vjp_jvp_match_jax(op: Op, bucket: int, dtype: str) -> None:
    """Value, VJP and JVP agree with JAX and keep the input dtype."""
    check_first_order(op, bucket, dtype)


@pytest.mark.parametrize("op", second_cases(TABLE))
def test_reverse_over_reverse_matches_jax(op: Op) -> None:
    """The gradient of a directional gradient (second order) agrees with JAX."""
    check_second_order(op, 0)


@pytest.mark.parametrize("op", second_cases(TABLE))
def test_forward_over_reverse_matches_jax(op: Op) -> None:
    """jvp of a directional gradient (u^T H v) agrees with JAX."""
    check_forward_over_reverse(op, 0)


def test_logsumexp_return_sign_gives_the_sign() -> None:
    """return_sign=True returns (log|sum|, sign) like JAX."""
    x = np.random.default_rng(0).normal(size=(3, 4))
    out, sign = ad.logsumexp(ts.from_numpy(x), axis=1, b=B_NEG, return_sign=True)
    ref_out, ref_sign = jss.logsumexp(x, axis=1, b=B_NEG, return_sign=True)
    np.testing.assert_allclose(out.to_numpy(), ref_out, rtol=1e-12)
    np.testing.assert_array_equal(sign.to_numpy(), ref_sign)


def test_argsort_argmax_are_int64_and_non_differentiable() -> None:
    """Index producers: numpy's values (stable argsort), int64, never tracked."""
    x = np.array([[3.0, 1.0, 2.0, 1.0], [0.0, -1.0, 5.0, 5.0]])

    def f(v: ad.EagerTensor) -> ad.EagerTensor:
        i = ad.argsort(v, axis=-1)
        assert not i.is_tracked
        np.testing.assert_array_equal(i.to_numpy(), np.argsort(x, axis=-1, kind="stable"))
        np.testing.assert_array_equal(ad.argmax(v, axis=1).to_numpy(), np.argmax(x, axis=1))
        np.testing.assert_array_equal(ad.argmin(v).to_numpy(), np.argmin(x))
        d = ad.argsort(v, axis=-1, descending=True).to_numpy()
        np.testing.assert_array_equal(d, np.asarray(jnp.argsort(x, axis=-1, descending=True)))
        assert i.to_numpy().dtype == np.int64
        return ad.sum(v)

    ad.grad(f)(ts.from_numpy(x))


def test_nan_aware_reductions_skip_nan() -> None:
    """nansum/nanmean ignore NaN entries (zero gradient there), any/all are booleans."""
    x = np.array([[1.0, np.nan, 3.0], [np.nan, 2.0, 2.0]])
    g = ad.grad(lambda v: ad.nansum(v) + ad.nanmean(v, axis=1).sum())(ts.from_numpy(x))
    ref = jax.grad(lambda v: jnp.nansum(v) + jnp.nanmean(v, axis=1).sum())(x)
    np.testing.assert_allclose(ts.kernel.read_array(g), np.asarray(ref))
    h = ts.from_numpy(np.array([[0.0, 1.0], [0.0, 0.0]]))
    np.testing.assert_array_equal(ad.any(h, axis=1).to_numpy(), [True, False])
    h = ts.from_numpy(np.array([[0.0, 1.0], [0.0, 0.0]]))
    assert not bool(ad.all(h))


def test_sort_gradient_routes_ties_like_jax() -> None:
    """With ties, each sorted slot's cotangent goes back to its (stable) source element."""
    x = np.array([2.0, 1.0, 2.0, 0.0])
    w = np.array([1.0, 10.0, 100.0, 1000.0])
    g = ad.grad(lambda v: ad.sum(ad.sort(v) * w))(ts.from_numpy(x))
    ref = jax.grad(lambda v: jnp.sum(jnp.sort(v) * w))(x)
    np.testing.assert_array_equal(ts.kernel.read_array(g), np.asarray(ref))


def test_cumsum_axis_out_of_range_names_the_op() -> None:
    """A bad axis raises numpy's AxisError naming the op; nothing is recorded."""
    with pytest.raises(np.exceptions.AxisError, match="cumsum"):
        ad.cumsum(ts.from_numpy(np.ones((2, 3))), axis=2)


def test_norm_rejects_bad_ord() -> None:
    """An ord that is not a norm raises a ValueError naming norm."""
    with pytest.raises(ValueError, match="norm: ord"):
        ad.norm(ts.from_numpy(np.ones((2, 3))), ord="bogus", axis=(0, 1))
