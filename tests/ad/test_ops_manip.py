"""numpy's manipulation functions (``ops/manip.py``) and products (``ops/products.py``)
against JAX: value, VJP, JVP (float32/float64, complex where useful), reverse-over-reverse,
plus the constructors and the methods installed on handles."""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import AxisError
from tests._opspecs import table
from tests.ad._opcheck import (
    Op,
    cases,
    check_first_order,
    check_forward_over_reverse,
    check_second_order,
    second_cases,
)

TABLE = table("manip")  # this family's rows of the one op table


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


def test_constructors_are_constants() -> None:
    """eye/zeros_like/ones_like/full_like never track, even from a tracked value."""

    def f(x: ad.EagerTensor) -> ad.EagerTensor:
        for c in (ad.zeros_like(x), ad.ones_like(x), ad.full_like(x, 3.0), ad.eye(2)):
            assert not c.is_tracked
        np.testing.assert_array_equal(ad.full_like(x, 3.0).to_numpy(), np.full((2,), 3.0))
        assert ad.ones_like(x, dtype="float32").to_numpy().dtype == np.float32
        return ad.sum(x)

    ad.grad(f)(ts.from_numpy(np.array([1.0, 2.0])))


def test_squeeze_of_a_non_unit_axis_is_refused() -> None:
    """squeeze names the axis that is not of extent 1."""
    with pytest.raises(ValueError, match="squeeze: argument 'axis'"):
        ad.squeeze(ts.from_numpy(np.ones((2, 1))), axis=0)


def test_split_into_unequal_sections_is_refused() -> None:
    """split (unlike array_split) requires an equal division."""
    with pytest.raises(ValueError, match="split: array split does not result"):
        ad.split(ts.from_numpy(np.ones((5,))), 2)


def test_tensordot_axes_out_of_range_names_the_argument() -> None:
    """A tensordot axis outside the rank is refused with numpy's ``AxisError`` (also a
    ``ValueError``), naming the argument and the operand it belongs to."""
    with pytest.raises(
        AxisError, match=r"tensordot: argument 'axes': axis 3 .*an axis of argument 'a'"
    ):
        ad.tensordot(ts.from_numpy(np.ones((2, 3))), ts.from_numpy(np.ones((3, 2))), axes=[3, 0])


@pytest.mark.parametrize("sa, sb", [((4,), (3,)), ((3,), (4,)), ((4,), (4,))])
def test_cross_refuses_a_vector_of_any_other_length_than_2_or_3(
    sa: tuple[int, ...], sb: tuple[int, ...]
) -> None:
    """One operand of length 4 is enough to be refused, naming both dimensions.  Mutant:
    ``na not in (2, 3) or nb not in (2, 3)`` turned into ``and``."""
    with pytest.raises(ad.errors.ArgumentError, match=rf"cross: .*got {sa[0]} and {sb[0]}"):
        ad.cross(np.ones(sa), np.ones(sb))
