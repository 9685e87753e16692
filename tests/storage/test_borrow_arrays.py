"""``borrow_arrays``: several owners as numpy arrays in one borrow scope, with no copy.

For logging gradients and for benchmarks: the arrays are the values themselves (zero
copy, no ledger event), read-only, and the owners stay shared-borrowed (so unmodifiable)
until the block ends.
"""

from __future__ import annotations

import collections
import copy
import pickle
from typing import Any

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage.errors import (
    BorrowError,
    ExpiredBorrowError,
    OwnershipError,
    UseAfterMoveError,
)

pytestmark = pytest.mark.both_borrow_modes  # debug mode and the default mode


def _buffer(t: ts.Tensor[Any, Any]) -> np.ndarray[Any, Any]:
    assert t._storage is not None
    return t._storage.claim.root._allocation


def test_the_structure_is_kept_and_values_are_read() -> None:
    """Owners, views, None, nested tuples/lists/dicts and namedtuples map leaf by leaf."""
    a, b = ts.arange(3, dtype="float64"), ts.ones((2, 2))
    pair = collections.namedtuple("pair", "x y")
    view = b.T
    tree = {"a": a, "rest": [(b, None), pair(view, a)]}
    with ts.borrow_arrays(tree) as arrays:
        assert arrays["a"].tolist() == [0.0, 1.0, 2.0]
        (b_arr, none), p = arrays["rest"]
        assert b_arr.shape == (2, 2) and none is None
        assert type(p) is pair and p.y.tolist() == [0.0, 1.0, 2.0]
        assert p.x.strides == (8, 16)  # the view's own (transposed) layout
    view.release()


def test_no_copy_and_no_ledger_event(debug_borrows_off: None) -> None:
    """Outside debug mode the arrays are the storage itself; nothing is recorded."""
    a, b = ts.ones(4), ts.zeros((2, 3))
    with ledger.capture() as rec, ts.borrow_arrays((a, b)) as (x, y):
        assert np.shares_memory(x, _buffer(a)) and np.shares_memory(y, _buffer(b))
    assert rec.events == []


def test_the_arrays_are_read_only() -> None:
    """Writing through a borrowed array raises numpy's read-only error."""
    a = ts.ones(2)
    with ts.borrow_arrays([a]) as (x,), pytest.raises(ValueError, match="read-only"):
        x[0] = 5.0
    assert a.to_numpy().tolist() == [1.0, 1.0]


def test_mutating_a_borrowed_owner_names_borrow_arrays() -> None:
    """While the block runs, writes and consumption of the owners raise BorrowError."""
    a = ts.ones(2)
    with ts.borrow_arrays({"a": a}):
        for attempt in (a.as_view_mut, lambda: a.fill(0.0), a.into_storage):
            with pytest.raises(BorrowError, match="borrow_arrays created at"):
                attempt()
    a.fill(3.0)  # free again after the block
    assert a.to_numpy().tolist() == [3.0, 3.0]


def test_a_refused_leaf_leaves_nothing_borrowed() -> None:
    """If one leaf is refused, the borrows already taken are given back; nothing changes."""
    a, b = ts.ones(2), ts.ones(2)
    m = b.as_view_mut()
    with pytest.raises(BorrowError), ts.borrow_arrays((a, b)):
        pass
    m.release()
    bad = (a, np.ones(2))
    with pytest.raises(TypeError, match=r"tree\[1\] is a ndarray"), ts.borrow_arrays(bad):
        pass
    a.fill(0.0)  # a is not borrowed any more
    consumed = ts.zeros(1)
    consumed.into_storage()
    with pytest.raises(UseAfterMoveError), ts.borrow_arrays(consumed):
        pass
    released = a.as_view()
    released.release()
    with pytest.raises(ExpiredBorrowError), ts.borrow_arrays(released):
        pass


def test_debug_mode_poisons_the_arrays_at_the_end_of_the_block() -> None:
    """In debug mode (on in the storage tests) a late read sees NaN; the owner is intact."""
    a = ts.ones(3)
    with ts.borrow_arrays(a) as arr:
        assert arr.tolist() == [1.0, 1.0, 1.0]
    assert np.isnan(arr).all()
    assert a.to_numpy().tolist() == [1.0, 1.0, 1.0]


def test_the_scope_is_move_only_and_not_reentrant() -> None:
    """The scope object refuses copy/pickle and a second entry while entered."""
    a = ts.ones(1)
    scope = ts.borrow_arrays(a)
    for dup in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(OwnershipError):
            dup(scope)
    with scope:
        with pytest.raises(RuntimeError, match="already entered"), scope:
            pass
    with scope as again:  # re-entered after it was left
        assert again.tolist() == [1.0]
    a.fill(0.0)


def test_a_dropped_scope_gives_its_borrows_back() -> None:
    """An entered scope that dies without __exit__ releases its borrows."""
    a = ts.ones(1)
    scope = ts.borrow_arrays(a)
    scope.__enter__()
    with pytest.raises(BorrowError):
        a.fill(0.0)
    del scope
    a.fill(0.0)
    assert a.to_numpy().tolist() == [0.0]
