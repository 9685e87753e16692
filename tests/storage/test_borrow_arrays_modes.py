"""``borrow_arrays`` behaves the same in both borrow modes, and lets go of its holder name
with its borrows.

Normal mode (what users and the benchmarks run) holds each leaf's borrow in a named view
and hands out the value's own read-only array; debug mode (the test default) consumes the
view into a prepared access that stages the array.  Every test here runs in both modes.
While a scope is entered, a conflicting borrow's error names ``borrow_arrays``; once it
has ended (left, refused, or dropped) an error about some *other* borrow must not.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import _access, ledger
from tenferro_storage.errors import AccessError, BorrowError, UseAfterMoveError

pytestmark = pytest.mark.both_borrow_modes  # debug mode and the default mode


@pytest.fixture(autouse=True, params=["normal", "debug"])
def mode(request: pytest.FixtureRequest) -> Iterator[str]:
    previous = _access._set_debug_borrows(request.param == "debug")
    try:
        yield request.param
    finally:
        _access._set_debug_borrows(previous)


def _error_of(attempt: object) -> str:
    with pytest.raises(BorrowError) as info:
        attempt()  # type: ignore[operator]
    return str(info.value)


def test_values_structure_and_read_only_arrays(mode: str) -> None:
    """The same structure back, the values read in place (normal mode: the owner's own
    memory, no ledger event), the arrays read-only."""
    a, b = ts.arange(3, dtype="float32"), ts.ones((2, 2))
    pair = collections.namedtuple("pair", "x y")
    with ledger.capture() as rec, ts.borrow_arrays([a, (b, None), pair(a, b.T)]) as out:
        x, (y, none), p = out
        assert x.tolist() == [0.0, 1.0, 2.0] and y.shape == (2, 2) and none is None
        assert type(p) is pair and p.y.strides == (8, 16)
        with pytest.raises(ValueError, match="read-only"):
            x[0] = 1.0
        if mode == "normal":
            with ts.borrow_arrays(a) as again:
                assert np.shares_memory(x, again)
    assert rec.events == []


def test_owners_are_borrowed_until_the_block_ends(mode: str) -> None:
    """Inside the block writes and consumption are refused naming borrow_arrays; after it
    the owners are free again and no error names the ended scope."""
    a, b = ts.ones(2), ts.ones(3)
    with ts.borrow_arrays([a, (b, None)]) as arrays:
        assert "held by borrow_arrays" in _error_of(a.as_view_mut)
        for attempt in (lambda: b.fill(0.0), b.into_storage):
            assert "borrow_arrays" in _error_of(attempt)
        assert arrays[0].tolist() == [1.0, 1.0]
    view = a.as_view()
    assert "held by borrow_arrays" not in _error_of(a.as_view_mut)
    view.release()
    a.fill(2.0)
    b.fill(2.0)
    assert a.to_numpy().tolist() == [2.0, 2.0]


def test_a_mutable_view_leaf_is_reborrowed_shared(mode: str) -> None:
    """A TensorViewMut leaf is readable in the block, refuses writes, writable after."""
    a = ts.zeros(2)
    with a.as_view_mut() as m:
        with ts.borrow_arrays(m) as arr:
            assert arr.tolist() == [0.0, 0.0]
            with pytest.raises(BorrowError, match="borrow_arrays"):
                m.fill(1.0)
        m.fill(2.0)
    assert a.to_numpy().tolist() == [2.0, 2.0]


def test_a_refused_scope_leaves_nothing_borrowed_and_no_name_behind(mode: str) -> None:
    """A refusal on a later leaf takes back the earlier leaves' borrows and their names."""
    a, b = ts.ones(2), ts.ones(2)
    m = b.as_view_mut()
    with pytest.raises(BorrowError), ts.borrow_arrays((a, b)):
        pass
    m.release()
    view = a.as_view()
    assert "held by borrow_arrays" not in _error_of(a.as_view_mut)
    view.release()
    consumed = ts.zeros(1)
    consumed.into_storage()
    with pytest.raises(UseAfterMoveError), ts.borrow_arrays([a, consumed]):
        pass
    a.fill(0.0)


def test_a_provider_fault_is_refused_and_leaves_nothing_borrowed(mode: str) -> None:
    """The provider's map runs for every leaf: an injected fault raises AccessError naming
    prepare_host, and the leaves borrowed before it are given back."""
    a, b = ts.ones(2), ts.ones(2)
    maps = ts.host_provider.counters.maps
    with ts.borrow_arrays([a]):
        pass
    assert ts.host_provider.counters.maps == maps + 1
    ts.host_provider.fail_next("map")
    with pytest.raises(AccessError, match="prepare_host"), ts.borrow_arrays([b, a]):
        pass
    a.fill(0.0)
    b.fill(0.0)


def test_a_dropped_scope_gives_its_borrows_and_name_back(mode: str) -> None:
    """A scope entered and dropped without ``__exit__`` releases and unnames itself."""
    a = ts.ones(1)
    scope = ts.borrow_arrays({"a": a})
    scope.__enter__()
    with pytest.raises(BorrowError):
        a.fill(0.0)
    del scope
    view = a.as_view()
    assert "held by borrow_arrays" not in _error_of(a.as_view_mut)
    view.release()
    a.fill(0.0)


def test_refusal_paths_name_the_nested_position(mode: str) -> None:
    """A refused leaf deep in the tree is named by its JAX key path (dict keys by repr,
    namedtuple fields by name)."""
    a = ts.ones(1)
    pair = collections.namedtuple("pair", "x y")
    tree = {"w": [a, pair(a, np.ones(1))]}
    with pytest.raises(TypeError, match=r"tree\['w'\]\[1\]\.y is a ndarray"):
        ts.borrow_arrays(tree).__enter__()
    a.fill(0.0)  # nothing stays borrowed
