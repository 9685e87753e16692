"""The in-place no-record forms of elementwise rules compute exactly what their general
formulas compute: the division's ``-(g x) / y^2`` written over its own scratch, and the
maximum/minimum mask product behind a sum-of-squares finiteness test.  Values only; these
forms exist for speed (issue 13) and nothing here is timed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
from tenferro_ad._core._namespace import NUMPY_NS
from tenferro_ad.ops import elementwise as E


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("y_shape", [(3, 4), (4,), ()])
def test_division_dy_in_place_equals_the_general_formula_bit_for_bit(
    dtype: Any, y_shape: tuple[int, ...]
) -> None:
    """Same bits as ``-((g x) / (y y))`` out of place, for every dtype and a broadcast y."""
    rng = np.random.default_rng(0)
    g, x = (rng.normal(size=(3, 4)).astype(dtype) for _ in range(2))
    y = (rng.normal(size=y_shape) + 3).astype(dtype)
    want = np.negative(np.divide(np.multiply(g, x), np.multiply(y, y)))
    got = E._div_dy(NUMPY_NS, g, x, y)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)


def test_division_dy_keeps_the_wider_dtype_of_a_wider_divisor() -> None:
    """A float64 y with a float32 g x is not squeezed into the float32 scratch."""
    g = x = np.ones(3, np.float32)
    y = np.full(3, 3.0)
    got = E._div_dy(NUMPY_NS, g, x, y)
    assert got.dtype == np.float64
    assert np.array_equal(got, -(g * x) / (y * y))


def test_division_gradient_in_y_through_the_tape() -> None:
    """The rule serves ``grad``: d/dy sum(x / y) = -x / y^2."""
    x = np.array([1.0, -2.0, 3.0])
    y = np.array([2.0, 4.0, -5.0])
    g = ad.grad(lambda y: ad.sum(x / y))(y)
    assert np.allclose(g.to_numpy(), -x / y**2)


@pytest.mark.parametrize(
    "g",
    [
        np.array([1.0, 2.0, 3.0]),
        np.array([1.0, np.inf, 3.0]),
        np.array([np.nan, 2.0, 3.0]),
        np.array([1e200, 1e200, 1.0]),  # the sum of squares overflows: the exact path
    ],
)
def test_maximum_mask_product_equals_the_where_form(g: Any) -> None:
    """The fast mask product and the general ``where`` agree wherever the fast path runs,
    including values whose squares overflow (they take the general path)."""
    x = np.array([-1.0, 0.5, 2.0])
    y = np.array([0.0, 1.0, 1.0])
    got = E._pick(NUMPY_NS, g, x, y)
    want = np.where(x > y, g, np.where(x == y, g * 0.5, 0.0))
    assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.complex128])
@pytest.mark.parametrize(
    "g", [[1.5, -2.0, 0.0, 3.0], [np.inf, 1.0, -np.inf, 2.0], [np.nan, 1.0, 2.0, -1.0],
          [3e38, 3e38, 1.0, 1.0]],
)
def test_where_mask_zero_equals_numpy_where(dtype: Any, g: Any) -> None:
    """``where(mask, g, 0)`` -- a traced relu's backward -- is numpy's where in values and
    dtype (a mask product for finite floats, np.where otherwise: inf/nan stay out)."""
    with np.errstate(over="ignore", invalid="ignore"):
        x = np.array(g).astype(dtype)
    c = np.array([True, False, True, False])
    want = np.where(c, x, 0.0)
    got = E._where(c, x, 0.0)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(E._where(c, x, 1.0), np.where(c, x, 1.0))


def test_a_jitted_relu_backward_multiplies_by_the_mask_as_eager_does() -> None:
    """The traced relu VJP is ``where(x > 0, g, 0)``; its kernel takes eager's mask-product
    form, visible in the sign of the dropped entries: ``-3 * 0`` is ``-0.0`` where np.where
    writes ``+0.0`` -- the jitted gradient equals eager's bit for bit."""
    import tenferro_storage as ts

    x = np.random.default_rng(1).normal(size=(8, 5))
    f = ad.grad(lambda a: ad.sum(ad.relu(a) * -3.0))
    jf = ad.jit(f, engine="host")
    assert "where" in [e.prim.name for e in jf.lower(x).graph.eqns]
    got, want = jf(ts.from_numpy(x)).to_numpy(), f(ts.from_numpy(x)).to_numpy()
    np.testing.assert_array_equal(got, np.where(x > 0, -3.0, 0.0))
    assert np.array_equal(np.signbit(got), np.signbit(want))
    assert np.signbit(got[x <= 0]).all()
