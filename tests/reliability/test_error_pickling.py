"""Errors whose constructors take plain data survive pickling (a worker process's error
reaches its parent, ``multiprocessing`` and ``concurrent.futures`` pickle it): the same
class, message and attributes.  Errors that carry a move-only owner back pickle only as
far as that owner does (owners refuse pickling by design)."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tenferro_ad.errors as E
import tenferro_storage.errors as S

CASES: dict[str, tuple[Callable[[], BaseException], tuple[str, ...]]] = {
    "AxisError": (lambda: E.AxisError("sum", 5, 2, detail="an axis of 'b'"), ()),
    "UnsupportedDTypeError": (
        lambda: E.UnsupportedDTypeError("sin", "argument 'x'", np.dtype("<U1")),
        ("operation", "argument", "dtype"),
    ),
    "MissingRuleError": (lambda: E.MissingRuleError("f", "vjp", 1),
                         ("primitive", "rule", "argument")),
    "LoweringError": (lambda: E.LoweringError("no rule for f", "f"), ("primitive",)),
    "ExtractError": (lambda: S.ExtractError("aliased", "slot 2 is aliased"), ("reason",)),
    "LayoutError": (
        lambda: S.LayoutError("view", "out of range", shape=(2, 3), offset=4, span="alloc#1"),
        ("operation", "reason", "shape", "strides", "offset", "dtype", "span"),
    ),
    "DisjointViewError": (
        lambda: S.DisjointViewError(next(iter(S.DisjointCause)), "slots 0 and 1 overlap", (0, 1)),
        ("cause", "slots"),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_error_of_plain_data_round_trips_through_pickle(name: str) -> None:
    """Mutant: a ``__reduce__`` removed (pickle calls the constructor with the message
    only: TypeError on loading)."""
    make, attributes = CASES[name]
    e = make()
    back: Any = pickle.loads(pickle.dumps(e))
    assert type(back) is type(e)
    assert str(back) == str(e)
    for a in attributes:
        assert getattr(back, a) == getattr(e, a), a
