"""``tenferro_ad.scipy.special`` and ``tenferro_ad.scipy.stats`` against ``jax.scipy``: value,
VJP, JVP (float32/float64), reverse-over-reverse.  (The special-function primitives' own
rows, edge points and second order are in ``test_ops_math.py``; here are the composed
distributions and the module surface.)"""

from __future__ import annotations

import jax.numpy as jnp
import jax.scipy.special as jss
import jax.scipy.stats as jst
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

st = ad.scipy.stats
F = ("float32", "float64")
U = (((2, 3),),)
B3 = (((2, 3), (2, 3), (2, 3)),)


def _pos3(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return np.asarray(rng.uniform(0.6, 3.0, shape))


def _unit(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return np.asarray(rng.uniform(0.1, 0.9, shape))


def _simplex(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    x = rng.uniform(0.2, 1.0, shape)
    return np.asarray(x / x.sum(axis=0, keepdims=True))


def _cov(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    a = rng.normal(size=shape)
    return np.asarray(a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1]))


ALPHA = np.array([1.5, 2.0, 0.7])
MEAN = np.array([0.1, -0.2, 0.3])
K = np.array([[0.0, 1.0, 3.0], [2.0, 5.0, 1.0]])
_C3 = _cov(np.random.default_rng(3), (3, 3))

TABLE = [
    Op("norm.logpdf", lambda x, m, s: st.norm.logpdf(x, m, s),
       lambda x, m, s: jst.norm.logpdf(x, m, s), B3, _pos3, F),
    Op("norm.pdf", st.norm.pdf, jst.norm.pdf, U, "any", F),
    Op("norm.cdf", lambda x, m, s: st.norm.cdf(x, m, s), lambda x, m, s: jst.norm.cdf(x, m, s),
       B3, _pos3, F),
    Op("norm.logcdf", st.norm.logcdf, jst.norm.logcdf, U, "any", F),
    Op("norm.sf", st.norm.sf, jst.norm.sf, U, "any", F),
    Op("norm.logsf", st.norm.logsf, jst.norm.logsf, U, "any", F),
    # float64 only: JAX's ppf/isf cast their result to the default float (float64 under x64),
    # ours keep float32 (see test_float32_stays_float32_with_python_scalar_parameters)
    Op("norm.ppf", lambda q: st.norm.ppf(q, 0.5, 2.0), lambda q: jst.norm.ppf(q, 0.5, 2.0), U,
       _unit, ("float64",)),
    Op("norm.isf", lambda q: st.norm.isf(q, 0.5, 2.0), lambda q: jst.norm.isf(q, 0.5, 2.0), U,
       _unit, ("float64",)),
    Op("t.logpdf", lambda x, df: st.t.logpdf(x, df, 0.3, 1.5),
       lambda x, df: jst.t.logpdf(x, df, 0.3, 1.5), (((2, 3), (2, 3)),), _pos3, F),
    Op("t.pdf", lambda x: st.t.pdf(x, 3.0), lambda x: jst.t.pdf(x, 3.0), U, "any", F),
    Op("gamma.logpdf", lambda x, a: st.gamma.logpdf(x, a, 0.1, 1.3),
       lambda x, a: jst.gamma.logpdf(x, a, 0.1, 1.3), (((2, 3), (2, 3)),), _pos3, F),
    Op("gamma.pdf", lambda x: st.gamma.pdf(x, 2.5), lambda x: jst.gamma.pdf(x, 2.5), U,
       _pos3, F),
    Op("gamma.cdf_x", lambda x: st.gamma.cdf(x, 2.5, 0.0, 1.5),
       lambda x: jst.gamma.cdf(x, 2.5, 0.0, 1.5), U, _pos3, F),
    Op("chi2.logpdf", lambda x, k: st.chi2.logpdf(x, k), lambda x, k: jst.chi2.logpdf(x, k),
       (((2, 3), (2, 3)),), _pos3, F),
    Op("chi2.cdf_x", lambda x: st.chi2.cdf(x, 3.0), lambda x: jst.chi2.cdf(x, 3.0), U, _pos3, F),
    Op("beta.logpdf", lambda x, a, b: st.beta.logpdf(x, a, b),
       lambda x, a, b: jst.beta.logpdf(x, a, b), B3, _unit, F),
    Op("beta.pdf", lambda x: st.beta.pdf(x, 2.0, 3.0), lambda x: jst.beta.pdf(x, 2.0, 3.0), U,
       _unit, F),
    Op("poisson.logpmf_mu", lambda mu: st.poisson.logpmf(K, mu),
       lambda mu: jst.poisson.logpmf(K, mu), U, _pos3, F),
    Op("poisson.pmf_mu", lambda mu: st.poisson.pmf(K, mu), lambda mu: jst.poisson.pmf(K, mu),
       U, _pos3, F),
    Op("poisson.cdf_mu", lambda mu: st.poisson.cdf(K, mu), lambda mu: jst.poisson.cdf(K, mu),
       U, _pos3, F),
    Op("dirichlet.logpdf", lambda x: st.dirichlet.logpdf(x, ALPHA),
       lambda x: jst.dirichlet.logpdf(x, ALPHA), (((3,),), ((3, 4),)), _simplex, F),
    Op("dirichlet.logpdf_alpha", lambda a: st.dirichlet.logpdf(np.array([0.2, 0.3, 0.5]), a),
       lambda a: jst.dirichlet.logpdf(jnp.array([0.2, 0.3, 0.5]), a), (((3,),),), _pos3,
       ("float64",)),
    Op("multivariate_normal.logpdf", lambda x, c: st.multivariate_normal.logpdf(x, MEAN, c),
       lambda x, c: jst.multivariate_normal.logpdf(x, MEAN, c), (((3,), (3, 3)),), "any",
       ("float64",), rtol64=1e-8),
    Op("multivariate_normal.pdf_batch", lambda x: st.multivariate_normal.pdf(x, MEAN, _C3),
       lambda x: jst.multivariate_normal.pdf(x, MEAN, _C3), (((4, 3),),), "any", ("float64",),
       rtol64=1e-8),
    Op("special.logsumexp", lambda x: ad.scipy.special.logsumexp(x, axis=0, b=2.0),
       lambda x: jss.logsumexp(x, axis=0, b=2.0), U, "any", F),
]


@pytest.mark.parametrize(("op", "bucket", "dtype"), cases(TABLE))
def test_value_vjp_jvp_match_jax(op: Op, bucket: int, dtype: str) -> None:
    """Value, VJP and JVP agree with jax.scipy and keep the input dtype."""
    if op.name.startswith("multivariate_normal.logpdf"):
        op = _with_cov(op)
    check_first_order(op, bucket, dtype)


@pytest.mark.parametrize("op", second_cases(TABLE))
def test_reverse_over_reverse_matches_jax(op: Op) -> None:
    """Second order agrees with jax.scipy."""
    if op.name.startswith("multivariate_normal.logpdf"):
        op = _with_cov(op)
    check_second_order(op, 0)


@pytest.mark.parametrize("op", second_cases(TABLE))
def test_forward_over_reverse_matches_jax(op: Op) -> None:
    """jvp of a directional gradient (u^T H v) agrees with JAX."""
    if op.name.startswith("multivariate_normal.logpdf"):
        op = _with_cov(op)
    check_forward_over_reverse(op, 0)


def _with_cov(op: Op) -> Op:
    """The covariance argument must be positive definite: symmetrize and shift it."""

    def ours(x: object, c: object) -> object:
        cc = (c + ad.transpose(c)) * 0.5 + 4.0 * ad.eye(3)  # type: ignore[operator]
        return st.multivariate_normal.logpdf(x, MEAN, cc)

    def theirs(x: object, c: object) -> object:
        cc = (c + jnp.transpose(c)) * 0.5 + 4.0 * jnp.eye(3)  # type: ignore[operator]
        return jst.multivariate_normal.logpdf(x, MEAN, cc)

    return Op(op.name, ours, theirs, op.shapes, op.domain, op.dtypes, rtol64=op.rtol64)


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
