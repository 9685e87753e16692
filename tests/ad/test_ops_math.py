"""The elementwise math family (``ops/math.py``) and scipy.special primitives
(``ops/special.py``) against JAX: value, VJP, JVP in float32/float64 (complex where JAX
supports it), reverse-over-reverse on a random direction, and edge points."""

from __future__ import annotations

import re
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
    check_edges,
    check_first_order,
    check_forward_over_reverse,
    check_second_order,
    second_cases,
)

TABLE = table("math")  # this family's rows of the one op table


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


@pytest.mark.parametrize("decimals", [2**31, -(2**31) - 1, 2**40])
def test_round_refuses_decimals_outside_numpy_s_range_and_states_the_range(
    decimals: int,
) -> None:
    """``decimals`` must fit a C int (numpy's own limit): outside it the refusal names the
    argument, the value and the exact range.  Mutant: the
    range's lower end ``-(2**31)`` printed as ``-(2 % 31)``."""
    x = np.array([1.25, -2.5])
    with pytest.raises(ad.errors.ArgumentError, match=re.escape(
        f"round: argument 'decimals' {decimals} is outside the range numpy rounds to "
        f"[{-(2**31)}, {2**31 - 1}]"
    )):
        ad.round(x, decimals=decimals)
    np.testing.assert_array_equal(ad.round(x, decimals=1).to_numpy(), np.round(x, 1))
