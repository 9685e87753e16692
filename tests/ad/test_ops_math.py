"""The elementwise math family (``ops/math.py``) and scipy.special primitives
(``ops/special.py``) against JAX: value, VJP, JVP in float32/float64 (complex where JAX
supports it), reverse-over-reverse on a random direction, and edge points."""

from __future__ import annotations

from typing import Any

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
    check_edges,
    check_first_order,
    check_forward_over_reverse,
    check_second_order,
    second_cases,
)

U = (((2, 3),), ((),), ((4,),))
B = (((2, 3), (2, 3)), ((2, 1), (1, 3)), ((), (3,)))
F = ("float32", "float64")
FC = ("float32", "float64", "complex64", "complex128")


def _mod_domain(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    x = rng.uniform(0.6, 2.4, shape) * rng.choice([-1.0, 1.0], shape)
    return np.asarray(x)


def _round_domain(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return np.asarray(rng.integers(-5, 5, shape) + rng.uniform(0.1, 0.4, shape))


TABLE = [
    Op("tan", ad.tan, jnp.tan, U, "unit", FC),
    Op("sinh", ad.sinh, jnp.sinh, U, "any", FC),
    Op("cosh", ad.cosh, jnp.cosh, U, "any", FC),
    Op("arcsin", ad.arcsin, jnp.arcsin, U, "unit", FC),
    Op("arccos", ad.arccos, jnp.arccos, U, "unit", FC),
    Op("arctan", ad.arctan, jnp.arctan, U, "any", FC),
    Op("arcsinh", ad.arcsinh, jnp.arcsinh, U, "any", FC),
    Op("arccosh", ad.arccosh, jnp.arccosh, U, "gt1", F),
    Op("arctanh", ad.arctanh, jnp.arctanh, U, "unit", FC),
    Op("arctan2", ad.arctan2, jnp.arctan2, B, "away", F),
    Op("hypot", ad.hypot, jnp.hypot, B, "away", F),
    Op("square", ad.square, jnp.square, U, "any", FC),
    Op("reciprocal", ad.reciprocal, jnp.reciprocal, U, "away", FC),
    Op("log2", ad.log2, jnp.log2, U, "positive", FC),
    Op("log10", ad.log10, jnp.log10, U, "positive", FC),
    Op("exp2", ad.exp2, jnp.exp2, U, "any", FC),
    Op("cbrt", ad.cbrt, jnp.cbrt, U, "positive", F),
    Op("logaddexp", ad.logaddexp, jnp.logaddexp, B, "any", F),
    Op("logaddexp2", ad.logaddexp2, jnp.logaddexp2, B, "any", F),
    Op("sinc", ad.sinc, jnp.sinc, U, "any", F),
    Op("floor", lambda x: ad.floor(x) * x, lambda x: jnp.floor(x) * x, U, _round_domain, F),
    Op("ceil", lambda x: ad.ceil(x) * x, lambda x: jnp.ceil(x) * x, U, _round_domain, F),
    Op("round", lambda x: ad.round(x) + x, lambda x: jnp.round(x) + x, U, _round_domain, F),
    Op("trunc", lambda x: ad.trunc(x) * x, lambda x: jnp.trunc(x) * x, U, _round_domain, F),
    Op("mod", ad.mod, jnp.mod, B, _mod_domain, F),
    Op("mod_op", lambda x, y: x % y, lambda x, y: x % y, B, _mod_domain, F),
    Op("rmod_op", lambda x: 1.7 % x, lambda x: 1.7 % x, U, _mod_domain, F),
    Op("fmod", ad.fmod, jnp.fmod, B, _mod_domain, F),
    Op("fmax", ad.fmax, jnp.fmax, B, "any", F),
    Op("fmin", ad.fmin, jnp.fmin, B, "any", F),
    Op("nan_to_num", ad.nan_to_num, jnp.nan_to_num, U, "any", F),
    Op("relu", ad.relu, jax.nn.relu, U, "away", F),
    Op("leaky_relu", ad.leaky_relu, jax.nn.leaky_relu, U, "away", F),
    Op("elu", ad.elu, jax.nn.elu, U, "away", F),
    Op("sigmoid", ad.sigmoid, jax.nn.sigmoid, U, "any", F),
    Op("arccosh_complex", ad.arccosh, jnp.arccosh, U, "any", ("complex64", "complex128")),
    Op("softplus", ad.softplus, jax.nn.softplus, U, "any", F),
    Op("log_sigmoid", ad.log_sigmoid, jax.nn.log_sigmoid, U, "any", F),
    Op("silu", ad.silu, jax.nn.silu, U, "any", F),
    Op("gelu", ad.gelu, jax.nn.gelu, U, "any", F),
    Op("gelu_exact", lambda x: ad.gelu(x, approximate=False),
       lambda x: jax.nn.gelu(x, approximate=False), U, "any", F),
    Op("deg2rad", ad.deg2rad, jnp.deg2rad, U, "any", F),
    Op("rad2deg", ad.rad2deg, jnp.rad2deg, U, "any", F),
    # scipy.special kernels
    Op("gammaln", ad.scipy.special.gammaln, jss.gammaln, U, "positive", F),
    Op("digamma", ad.scipy.special.digamma, jss.digamma, U, "positive", F),
    Op("polygamma2", lambda x: ad.scipy.special.polygamma(2, x),
       lambda x: jss.polygamma(2, x), U, "positive", F),
    Op("erf", ad.scipy.special.erf, jss.erf, U, "any", F),
    Op("erfc", ad.scipy.special.erfc, jss.erfc, U, "any", F),
    Op("erfinv", ad.scipy.special.erfinv, jss.erfinv, U, "unit", F),
    Op("expit", ad.scipy.special.expit, jss.expit, U, "any", F),
    Op("logit", ad.scipy.special.logit, jss.logit, U, "prob", F),
    Op("xlogy", ad.scipy.special.xlogy, jss.xlogy, B, "positive", F),
    Op("xlog1py", ad.scipy.special.xlog1py, jss.xlog1py, B, "positive", F),
    Op("betaln", ad.scipy.special.betaln, jss.betaln, B, "positive", F),
    Op("ndtr", ad.scipy.special.ndtr, jss.ndtr, U, "any", F),
    Op("ndtri", ad.scipy.special.ndtri, jss.ndtri, U, "prob", F),
    Op("log_ndtr", ad.scipy.special.log_ndtr, jss.log_ndtr, U, "any", F),
    Op("gammainc_x", lambda x: ad.scipy.special.gammainc(1.7, x),
       lambda x: jss.gammainc(1.7, x), U, "positive", F),
    Op("gammaincc_x", lambda x: ad.scipy.special.gammaincc(1.7, x),
       lambda x: jss.gammaincc(1.7, x), U, "positive", F),
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


INF, NAN = float("inf"), float("nan")
EDGES: list[tuple[str, Any, Any, list[tuple[float, ...]]]] = [
    ("relu", ad.relu, jax.nn.relu, [(0.0,), (-0.0,), (INF,), (-INF,), (NAN,)]),
    ("sinc", ad.sinc, jnp.sinc, [(0.0,), (1.0,), (-2.0,)]),
    ("logaddexp", ad.logaddexp, jnp.logaddexp,
     [(-INF, -INF), (INF, INF), (1.0, -INF), (-INF, 2.0), (0.0, 0.0)]),
    ("fmax", ad.fmax, jnp.fmax, [(1.0, 1.0), (NAN, 1.0), (1.0, NAN), (2.0, 1.0)]),
    ("fmin", ad.fmin, jnp.fmin, [(1.0, 1.0), (NAN, 1.0), (1.0, NAN), (2.0, 1.0)]),
    ("hypot", ad.hypot, jnp.hypot, [(0.0, 0.0), (3.0, 4.0), (-3.0, 0.0), (0.0, -2.0)]),
    ("arctan2", ad.arctan2, jnp.arctan2, [(0.0, 1.0), (1.0, 0.0), (-1.0, -1.0)]),
    ("mod", ad.mod, jnp.mod, [(5.5, 2.0), (-5.5, 2.0), (4.0, 2.0), (5.5, -2.0)]),
    ("fmod", ad.fmod, jnp.fmod, [(5.5, 2.0), (-5.5, 2.0), (5.5, -2.0)]),
    ("nan_to_num", ad.nan_to_num, jnp.nan_to_num, [(NAN,), (INF,), (-INF,), (1.5,)]),
    ("floor", ad.floor, jnp.floor, [(1.5,), (-1.5,), (2.0,)]),
    ("round", ad.round, jnp.round, [(0.5,), (1.5,), (-2.5,)]),
    ("sqrt-like arcsin", ad.arcsin, jnp.arcsin, [(1.0,), (-1.0,), (0.0,)]),
    ("arctanh", ad.arctanh, jnp.arctanh, [(1.0,), (0.0,)]),
    ("log2", ad.log2, jnp.log2, [(0.0,), (1.0,), (INF,)]),
    ("log10", ad.log10, jnp.log10, [(0.0,), (10.0,), (INF,)]),
    ("arccosh", ad.arccosh, jnp.arccosh, [(1.0,), (2.0,), (INF,)]),
    ("cbrt", ad.cbrt, jnp.cbrt, [(0.0,), (-8.0,), (27.0,)]),
    ("tan", ad.tan, jnp.tan, [(0.0,), (1.0,), (-1.2,)]),
    ("sinh", ad.sinh, jnp.sinh, [(0.0,), (INF,), (-INF,)]),
    ("cosh", ad.cosh, jnp.cosh, [(0.0,), (INF,), (-INF,)]),
    ("arctan", ad.arctan, jnp.arctan, [(0.0,), (INF,), (-INF,)]),
    ("elu", ad.elu, jax.nn.elu, [(0.0,), (-INF,), (INF,)]),
    ("leaky_relu", ad.leaky_relu, jax.nn.leaky_relu, [(0.0,), (-1.0,), (NAN,)]),
    ("silu", ad.silu, jax.nn.silu, [(0.0,), (-INF,), (50.0,)]),
    ("gelu", ad.gelu, jax.nn.gelu, [(0.0,), (-10.0,), (10.0,)]),
    ("exp2", ad.exp2, jnp.exp2, [(-INF,), (0.0,), (3.0,)]),
    ("sigmoid", ad.sigmoid, jax.nn.sigmoid, [(0.0,), (-INF,), (INF,), (40.0,)]),
    ("softplus", ad.softplus, jax.nn.softplus, [(0.0,), (-INF,), (INF,), (800.0,)]),
    ("log_sigmoid", ad.log_sigmoid, jax.nn.log_sigmoid, [(0.0,), (-800.0,), (800.0,)]),
    ("xlogy", ad.scipy.special.xlogy, jss.xlogy, [(0.0, 0.0), (0.0, 2.0), (1.0, 2.0)]),
    ("gammaln", ad.scipy.special.gammaln, jss.gammaln, [(1.0,), (2.0,), (0.5,)]),
    ("erfinv", ad.scipy.special.erfinv, jss.erfinv, [(0.0,), (1.0,), (-1.0,)]),
    ("log_ndtr", ad.scipy.special.log_ndtr, jss.log_ndtr, [(-30.0,), (0.0,), (10.0,)]),
]


@pytest.mark.parametrize(("name", "ours", "theirs", "points"), EDGES, ids=[e[0] for e in EDGES])
def test_edge_points_match_jax(name: str, ours: Any, theirs: Any, points: Any) -> None:
    """Values and derivatives at 0, +-inf, NaN and domain ends are JAX's."""
    check_edges(ours, theirs, points)


def test_tan_is_precise_near_the_pole() -> None:
    """tan uses its own kernel: near pi/2 it is not the sin/cos quotient."""
    x = np.array([np.pi / 2 - 1e-9, 1.5707963], np.float64)
    out = ad.tan(ts.from_numpy(x))
    np.testing.assert_array_equal(out.to_numpy(), np.tan(x))


def test_gammainc_in_a_has_no_rule() -> None:
    """The derivative of gammainc in ``a`` is missing (an error, never a silent zero)."""
    with pytest.raises(ad.MissingRuleError):
        ad.grad(lambda a: ad.scipy.special.gammainc(a, 1.0))(ts.from_numpy(np.array(1.5)))


def test_rounding_functions_have_zero_gradient() -> None:
    """floor/ceil/round/rint/trunc: zero gradient (JAX), not an error."""
    for f in (ad.floor, ad.ceil, ad.round, ad.rint, ad.trunc):
        g = ad.grad(lambda x, f=f: ad.sum(f(x)))(ts.from_numpy(np.array([1.3, -2.7])))
        np.testing.assert_array_equal(ts.kernel.read_array(g), [0.0, 0.0])


def test_polygamma_rejects_a_negative_order() -> None:
    """polygamma names the bad argument."""
    with pytest.raises(ValueError, match="polygamma: argument 'n'"):
        ad.scipy.special.polygamma(-1, ts.from_numpy(np.array([1.0])))
