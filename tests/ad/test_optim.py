"""Optimizers update uniquely owned parameters in place (no copy) or change nothing."""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage.errors import BorrowError


@pytest.mark.parametrize("make", [lambda: ad.optim.SGD(0.1), lambda: ad.optim.SGD(0.1, 0.9),
                                  lambda: ad.optim.Adam(0.1)])
def test_step_updates_in_place_without_copies(make: object) -> None:
    opt = make()  # type: ignore[operator]
    p = {"w": ts.from_numpy(np.array([1.0, -2.0]))}
    span = p["w"].span
    g = ad.grad(lambda q: ad.sum(q["w"] * q["w"]))(p)
    opt.step(p, g)  # first step allocates optimizer state
    with ledger.capture() as rec:
        opt.step(p, g)
    assert rec.copies == {} and rec.allocations == {}
    assert p["w"].span == span  # the same allocation, updated in place
    assert np.all(np.abs(p["w"].to_numpy()) < np.array([1.0, 2.0]))
    del g


def test_step_refuses_when_a_parameter_is_borrowed_and_changes_nothing() -> None:
    opt = ad.optim.SGD(0.5, momentum=0.9)
    a, b = ts.from_numpy(np.ones(2)), ts.from_numpy(np.ones(2))
    ga, gb = ts.from_numpy(np.ones(2)), ts.from_numpy(np.ones(2))
    view = b.as_view()
    with pytest.raises(BorrowError):
        opt.step([a, b], [ga, gb])
    view.release()
    np.testing.assert_array_equal(a.to_numpy(), np.ones(2))
    assert opt.steps == 0
    opt.step([a, b], [ga, gb])
    np.testing.assert_array_equal(a.to_numpy(), np.full(2, 0.5))
