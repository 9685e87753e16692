"""A user primitive's rule output is checked at the boundary where it enters the sweep."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import extend


def _sin_with(rule: Any, name: str) -> Any:
    return extend.defprimitive(name, lambda x: np.sin(x), 1, save_in=(0,), vjp=(rule,))


BAD_SHAPE = _sin_with(lambda ops, g, x: np.ones(7, np.float64), "test_bad_shape_rule")
BAD_DTYPE = _sin_with(lambda ops, g, x: np.ones(3, np.int32), "test_bad_dtype_rule")
GOOD = _sin_with(lambda ops, g, x: ops.mul(g, ops.cos(x)), "test_good_rule")


def test_a_rule_returning_the_wrong_shape_is_refused_naming_the_primitive() -> None:
    x = ts.from_numpy(np.ones(3))
    with pytest.raises(ad.errors.ArgumentError, match="test_bad_shape_rule.*argument 0"):
        ad.grad(lambda v: ad.sum(extend.bind(BAD_SHAPE, v)))(x)
    np.testing.assert_array_equal(x.to_numpy(), np.ones(3))  # nothing changed


def test_a_rule_returning_an_integer_cotangent_is_refused() -> None:
    with pytest.raises(ad.errors.ArgumentTypeError, match="test_bad_dtype_rule"):
        ad.grad(lambda v: ad.sum(extend.bind(BAD_DTYPE, v)))(ts.from_numpy(np.ones(3)))


def test_a_correct_rule_passes_the_check() -> None:
    g = ad.grad(lambda v: ad.sum(extend.bind(GOOD, v)))(ts.from_numpy(np.ones(3)))
    np.testing.assert_allclose(g.to_numpy(), np.cos(np.ones(3)))
