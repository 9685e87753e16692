"""``tenferro_ad.scipy.special`` and ``tenferro_ad.scipy.stats`` against ``jax.scipy``: value,
VJP, JVP (float32/float64), reverse-over-reverse.  (The special-function primitives' own
rows, edge points and second order are in ``test_ops_math.py``; here are the composed
distributions and the module surface.)"""

from __future__ import annotations

import jax.scipy.stats as jst
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

st = ad.scipy.stats

TABLE = table("scipy")  # this family's rows of the one op table


@pytest.mark.parametrize(("op", "bucket", "dtype"), cases(TABLE))
def test_value_vjp_jvp_match_jax(op: Op, bucket: int, dtype: str) -> None:
    """Value, VJP and JVP agree with jax.scipy and keep the input dtype."""
    check_first_order(op, bucket, dtype)


@pytest.mark.parametrize("op", second_cases(TABLE))
def test_reverse_over_reverse_matches_jax(op: Op) -> None:
    """Second order agrees with jax.scipy."""
    check_second_order(op, 0)


@pytest.mark.parametrize("op", second_cases(TABLE))
def test_forward_over_reverse_matches_jax(op: Op) -> None:
    """jvp of a directional gradient (u^T H v) agrees with JAX."""
    check_forward_over_reverse(op, 0)


def test_logpdf_outside_the_support_is_minus_inf() -> None:
    """gamma/beta/poisson give -inf outside their support, like JAX."""
    x = ts.from_numpy(np.array([-1.0, 0.5, 2.0]))
    got = st.beta.logpdf(x, 2.0, 3.0).to_numpy()
    np.testing.assert_allclose(got, np.asarray(jst.beta.logpdf(np.array([-1.0, 0.5, 2.0]), 2.0,
                                                               3.0)))
    assert got[0] == -np.inf and got[2] == -np.inf
    k = np.array([-1.0, 1.5, 2.0])
    np.testing.assert_allclose(st.poisson.logpmf(k, 2.0).to_numpy(),
                               np.asarray(jst.poisson.logpmf(k, 2.0)))


def test_float32_stays_float32_with_python_scalar_parameters() -> None:
    """Python-scalar loc/scale are weakly typed (JAX): a float32 x gives float32."""
    x = ts.from_numpy(np.array([0.1, 0.2], np.float32))
    assert st.norm.logpdf(x, 0.0, 2.0).to_numpy().dtype == np.float32
    x = ts.from_numpy(np.array([0.1, 0.2], np.float32))
    assert st.gamma.logpdf(x, 2.0).to_numpy().dtype == np.float32
    q = ts.from_numpy(np.array([0.1, 0.2], np.float32))
    assert st.norm.ppf(q, 0.5, 2.0).to_numpy().dtype == np.float32
