"""The straight paths of the per-parameter borrow round trip behave exactly like the
general ones: ``kernel.borrow_named`` and ``kernel.read_array`` on an owner (and
``read_array`` on a view), a view's own ``release``, ``borrow_arrays`` holding each leaf's
borrow on its lender, and the lazily built descriptor of a fresh owner.

Each test pins what the general path does (values, refusals and their messages, the
holder named in a conflict, counters, ledger events), so a fast path that diverges fails.
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import _access, _descriptor, ledger
from tenferro_storage._layout import Contiguous, c_strides
from tenferro_storage.errors import (
    AccessError,
    BorrowError,
    ExpiredBorrowError,
    OwnershipError,
    UseAfterMoveError,
)

kernel = ts.kernel


def _conflict(owner: Any) -> str:
    """The message of a refused exclusive borrow of ``owner``."""
    with pytest.raises(BorrowError) as info:
        owner.as_view_mut()
    return str(info.value)


def _fresh(values: Any) -> Any:
    """A fresh kernel output owner (its descriptor not built yet)."""
    return kernel.adopt_output(np.array(values, dtype=np.float64))


@pytest.fixture(params=["normal", "debug"])
def mode(request: pytest.FixtureRequest) -> Any:
    previous = _access._set_debug_borrows(request.param == "debug")
    try:
        yield request.param
    finally:
        _access._set_debug_borrows(previous)


# -- kernel.borrow_named on an owner ----------------------------------------------------------


@pytest.mark.parametrize(
    "make", [lambda: ts.arange(4, dtype="float64"), lambda: _fresh([0, 1, 2, 3])]
)
def test_borrow_named_owner_reads_in_place_and_names_its_holder(make: Any) -> None:
    """The view reads the owner's own memory read-only; a conflict names the holder and
    its count; the name goes with the last borrow of that holder."""
    t = make()
    with ledger.capture() as rec:
        a = kernel.borrow_named(t, "Tape#9: argument 0")
        b = kernel.borrow_named(t, "Tape#9: argument 0")
        arr = kernel.read_array(a)
    assert rec.events == []
    assert arr.tolist() == [0.0, 1.0, 2.0, 3.0] and not arr.flags.writeable
    assert arr is kernel.read_array(t) is kernel.read_array(b)  # the descriptor's one array
    msg = _conflict(t)
    held = "held by Tape#9: argument 0 (latest: Tape#9: argument 0 created at <unknown>)"
    assert f"2 shared borrows are live, {held}" in msg
    a.release()
    assert "held by Tape#9: argument 0" in _conflict(t)
    b.release()
    b.release()  # idempotent
    t.fill(5.0)
    view = t.as_view()
    assert "held by" not in _conflict(t)
    view.release()


def test_borrow_named_refuses_a_consumed_or_mutably_borrowed_owner_and_changes_nothing() -> None:
    """The same refusals and messages as the owner's ``_meta('borrow')`` check."""
    t = ts.ones(2)
    m = t.as_view_mut()
    with pytest.raises(BorrowError, match=r"^borrow: requested shared access to a Tensor, but an "
                       r"exclusive borrow is live \(TensorViewMut created at "):
        kernel.borrow_named(t, "X")
    m.release()
    view = t.as_view()
    assert "held by X" not in _conflict(t)
    view.release()
    t.into_storage()
    with pytest.raises(UseAfterMoveError, match=r"^borrow: this Tensor was consumed by "
                       r"Tensor.into_storage; it holds nothing any more$"):
        kernel.borrow_named(t, "X")


def test_borrow_named_of_two_holders_names_both_until_each_lets_go() -> None:
    t = ts.zeros(3)
    a = kernel.borrow_named(t, "first")
    b = kernel.borrow_named(t, "second")
    assert "held by first; second (latest: second " in _conflict(t)
    del a  # the view dying ends its borrow and its name
    msg = _conflict(t)
    assert "1 shared borrow is live, held by second" in msg and "held by first" not in msg
    b.release()
    t.fill(1.0)


# -- kernel.read_array ------------------------------------------------------------------------


def test_read_array_refusals_name_read_array() -> None:
    t = ts.ones(2)
    v = t.as_view()
    v.release()
    with pytest.raises(ExpiredBorrowError, match=r"^read_array: this TensorView was released"):
        kernel.read_array(v)
    m = t.as_view_mut()
    with pytest.raises(BorrowError, match=r"^read_array: requested shared access to a Tensor"):
        kernel.read_array(t)
    assert kernel.read_array(m).tolist() == [1.0, 1.0]  # the mutable view reads itself
    m.release()
    t.into_storage()
    with pytest.raises(UseAfterMoveError, match=r"^read_array: this Tensor was consumed"):
        kernel.read_array(t)


def test_read_array_of_a_view_is_its_own_layout_read_only() -> None:
    t = ts.arange(6, dtype="float64").reshape(2, 3)
    tv = t.T
    arr = kernel.read_array(tv)
    assert arr.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]] and not arr.flags.writeable
    assert arr is kernel.read_array(tv)  # cached on the descriptor
    tv.release()


# -- the view's own release ---------------------------------------------------------------


def test_view_release_ends_exactly_one_shared_borrow() -> None:
    t = ts.ones(2)
    a, b = t.as_view(), t.as_view()
    a.release()
    a.release()
    with pytest.raises(ExpiredBorrowError, match=r"^shape: this TensorView was released"):
        a.shape  # noqa: B018
    assert "1 shared borrow is live" in _conflict(t)
    b.release()
    t.fill(0.0)


def test_a_refused_direct_view_construction_leaves_nothing_behind() -> None:
    """``TensorView()`` raises; the half-made object dies without a warning (its ``__del__``
    finds no borrow)."""
    with pytest.raises(OwnershipError, match="cannot be constructed directly"):
        ts.TensorView()
    gc.collect()


# -- borrow_arrays ------------------------------------------------------------------------------


def test_borrow_arrays_reads_fresh_owners_in_place_without_ledger_events(mode: str) -> None:
    """Fresh kernel outputs (lazy descriptors) read zero-copy; in normal mode the arrays
    are the owners' own cached read-only arrays."""
    gs = [_fresh([1.0, 2.0]), _fresh([[3.0]]), _fresh(4.0)]
    with ledger.capture() as rec, ts.borrow_arrays(gs) as arrs:
        assert [a.tolist() for a in arrs] == [[1.0, 2.0], [[3.0]], 4.0]
        assert all(not a.flags.writeable for a in arrs)
        if mode == "normal":
            assert all(a is kernel.read_array(g) for a, g in zip(arrs, gs, strict=True))
        assert "held by borrow_arrays" in _conflict(gs[0])
    assert rec.events == []
    for g in gs:
        g.fill(0.0)


def test_borrow_arrays_one_owner_twice_is_two_named_borrows(mode: str) -> None:
    t = ts.ones(2)
    with ts.borrow_arrays([t, (t,)]) as (x, (y,)):
        assert "2 shared borrows are live, held by borrow_arrays" in _conflict(t)
        assert x.tolist() == y.tolist() == [1.0, 1.0]
        if mode == "normal":
            assert x is y  # the owner's one cached read-only array
    view = t.as_view()
    assert "1 shared borrow is live (latest: TensorView" in _conflict(t)
    view.release()


def test_borrow_arrays_leaf_kinds_borrow_their_lenders(mode: str) -> None:
    """A view leaf borrows its owner; a mutable view leaf is reborrowed (writes through it
    wait); a released view is refused with the general message, borrowing nothing."""
    t, u = ts.arange(4, dtype="float64"), ts.zeros(2)
    v = t[1:3]
    m = u.as_view_mut()
    with ts.borrow_arrays({"v": v, "m": m}) as out:
        assert out["v"].tolist() == [1.0, 2.0] and out["m"].tolist() == [0.0, 0.0]
        assert "2 shared borrows are live, held by borrow_arrays" in _conflict(t)
        with pytest.raises(BorrowError, match="borrow_arrays"):
            m.fill(1.0)
    m.fill(1.0)
    m.release()
    v.release()
    with pytest.raises(ExpiredBorrowError, match=r"^borrow: this TensorView was released"):
        ts.borrow_arrays([t, v]).__enter__()
    t.fill(0.0)
    assert u.to_numpy().tolist() == [1.0, 1.0]


def test_borrow_arrays_provider_fault_reports_like_prepare_host(mode: str) -> None:
    """The provider's map runs once per leaf; a fault raises ``AccessError`` naming
    ``prepare_host`` and the span, carrying the leaf's released view; nothing stays
    borrowed or named."""
    a, b = ts.ones(2), ts.ones(3)
    c = ts.host_provider.counters
    before = (c.resolutions, c.maps, c.syncs)
    with ts.borrow_arrays([a, b]):
        pass
    assert (c.resolutions, c.maps, c.syncs) == tuple(n + 2 for n in before)
    span = b.as_view().span  # (the view dies at once)
    ts.host_provider.fail_next("map")
    with pytest.raises(AccessError) as info:
        ts.borrow_arrays([b, a]).__enter__()
    err = info.value
    assert str(err).startswith(f"prepare_host: provider could not map {span} for reading: ")
    assert type(err.value) is ts.TensorView
    with pytest.raises(ExpiredBorrowError):
        err.value.shape  # noqa: B018
    del err, info
    for t in (a, b):
        view = t.as_view()
        assert "held by" not in _conflict(t)
        view.release()
        t.fill(0.0)


# -- the lazily built whole-array descriptor -------------------------------------------------


@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3), (3, 0, 2), (1, 1, 4)])
def test_fresh_descriptor_matches_a_validated_build(shape: tuple[int, ...]) -> None:
    """The trivially valid descriptor of a fresh owner (built from the per-shape lookup)
    equals what the six-check ``build`` makes for the same whole layout, and hands out the
    same values."""
    arr = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    t: Any = kernel.adopt_output(arr.copy())
    d = t._desc
    root = t._storage._root
    ref = _descriptor.build("test", root, 0, arr.nbytes, d.dtype, shape, c_strides(shape), 0)
    for name in ("shape", "strides", "offset", "size", "lo", "hi", "start", "stop"):
        assert getattr(d, name) == getattr(ref, name), name
    assert type(d.layout) is Contiguous and d.layout == ref.layout
    assert d.injectivity() is not None
    ro = d.readonly()
    assert not ro.flags.writeable and ro.shape == shape and np.array_equal(ro, arr)
    assert d.array().flags.writeable and d.array().shape == shape
    if arr.size:
        assert np.shares_memory(d.array(), ro)


def test_borrow_arrays_a_refused_host_array_leaves_no_leaf_borrowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When building a leaf's read-only array fails after its borrow was taken, that leaf
    and the leaves before it are given back, names included (normal mode)."""
    a, g = ts.ones(2), _fresh([1.0, 2.0])
    kernel.read_array(a)  # a's array is cached: only g's is built inside the scope

    def refuse(self: Any) -> Any:
        raise RuntimeError("no host array")

    monkeypatch.setattr(_descriptor.CheckedDescriptor, "readonly", refuse)
    previous = _access._set_debug_borrows(False)
    try:
        with pytest.raises(RuntimeError, match="no host array"):
            ts.borrow_arrays([a, g]).__enter__()
    finally:
        _access._set_debug_borrows(previous)
    monkeypatch.undo()
    for t in (a, g):
        view = t.as_view()
        assert "held by" not in _conflict(t)
        view.release()
        t.fill(0.0)


def test_a_conflict_names_each_holder_while_any_of_its_named_borrows_lives() -> None:
    """Named shared borrows are counted per holder: with two borrows by one holder and one
    given back, a conflicting exclusive borrow still names that holder; once the last is
    given back it is no longer named.  Mutant: ``_unname_holder``'s ``k > 0`` turned into
    ``k < 0`` (the holder forgotten at its first release)."""
    x = ts.from_numpy(np.arange(3.0))
    held = "Tape#9: residual of mul"
    a = ts.kernel.borrow_named(x, held)
    b = ts.kernel.borrow_named(x, held)
    c = ts.kernel.borrow_named(x, "jit#2: argument 0")
    a.release()
    with pytest.raises(ts.errors.BorrowError, match=f"held by {held}; jit#2: argument 0"):
        x.as_view_mut()
    c.release()
    with pytest.raises(ts.errors.BorrowError, match=f"1 shared borrow is live, held by {held}"):
        x.as_view_mut()
    b.release()
    with pytest.raises(ts.errors.BorrowError) as err:  # (a plain shared borrow: no name)
        with x.as_view():
            x.as_view_mut()
    assert "held by" not in str(err.value)
    x.as_view_mut().release()
