"""Statistics, scans, sorting, norms and logsumexp (``ops/scan.py``) against JAX: value, VJP,
JVP in float32/float64 (complex where JAX supports it) and reverse-over-reverse."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tests._opspecs import table
from tests.ad._opcheck import (
    Op,
    cases,
    check_first_order,
    check_forward_over_reverse,
    check_second_order,
    second_cases,
)

B_NEG = np.array([[1.0, -0.5, 2.0, 0.1], [0.3, 1.0, -1.0, 2.0], [1.0, 1.0, 0.2, 0.7]])

TABLE = table("scan")  # this family's rows of the one op table


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


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.float32])
def test_nanmean_keeps_the_precision_of_its_input(dtype: Any) -> None:
    """``nanmean`` of complex64 is complex64 (its NaN count is float32), as in JAX.
    Mutant: ``_real_dtype``'s ``dt.kind == "c"`` turned into ``<`` (a float64 count)."""
    x = np.array([[1.0, np.nan, 3.0], [2.0, 2.0, 5.0]]).astype(dtype)
    got = ad.nanmean(ts.from_numpy(x), axis=1).to_numpy()
    want = np.asarray(jnp.nanmean(x, axis=1))
    assert got.dtype == want.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6)
