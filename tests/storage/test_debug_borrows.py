"""Borrow debug mode: arrays handed out by prepared access cannot outlive their borrow unseen.

In debug mode (on for every storage test, see ``conftest.py``) each prepared access hands
out arrays over a private staging buffer; when the access ends the staged values are
copied back (write access), the buffer is poisoned and the handed-out arrays become
read-only.  These tests prove: a late write raises, a late read sees poison, the storage
is never changed after the borrow ended, ledger totals are the same with and without
debug mode, and normal mode still hands out zero-copy arrays.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import _access, ledger
from tenferro_storage.errors import ExpiredBorrowError


def _storage_bytes(t: ts.Tensor[Any, Any]) -> bytes:
    """The owner's whole root buffer, read white-box (no borrow, no ledger event)."""
    assert t._storage is not None
    return t._storage.claim.root._allocation.tobytes()


# -- late writes and reads ----------------------------------------------------------------


@pytest.mark.parametrize("accessor", ["as_slice_mut", "as_array"])
def test_late_write_through_a_write_access_array_raises(accessor: str) -> None:
    """Writing through an array after its prepared write access ended raises ValueError."""
    t = ts.from_numpy(np.arange(4.0))
    with t.prepare_host_mut() as p:
        a = getattr(p, accessor)()
        a[0] = 10.0
    before = _storage_bytes(t)
    with pytest.raises(ValueError, match="read-only"):
        a[1] = 99.0
    assert _storage_bytes(t) == before
    assert t.to_numpy().tolist() == [10.0, 1.0, 2.0, 3.0]


def test_writes_inside_the_block_reach_the_storage_when_the_access_ends() -> None:
    """A write access copies its staged values back into the storage at its end."""
    t = ts.zeros((2, 3))
    with t.prepare_host_mut() as p:
        p.as_slice_mut()[:] = np.arange(6.0)
        assert p.as_array().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]  # one staging
    assert t.to_numpy().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_writes_are_copied_back_even_when_the_block_raises() -> None:
    """Leaving the block by an exception still ends the access (values copied back)."""
    t = ts.zeros(3)
    with pytest.raises(RuntimeError, match="boom"), t.prepare_host_mut() as p:
        p.as_slice_mut()[1] = 5.0
        raise RuntimeError("boom")
    assert t.to_numpy().tolist() == [0.0, 5.0, 0.0]


def test_a_write_access_that_dies_unreleased_copies_back() -> None:
    """Dropping a prepared write access (no release call) ends it like release()."""
    t = ts.zeros(2)
    p = t.prepare_host_mut()
    p.as_array()[0] = 7.0
    del p
    assert t.to_numpy().tolist() == [7.0, 0.0]


@pytest.mark.parametrize(
    ("dtype", "is_poison"),
    [
        ("float64", lambda v: np.isnan(v).all()),
        ("float32", lambda v: np.isnan(v).all()),
        ("complex128", lambda v: np.isnan(v.real).all() and np.isnan(v.imag).all()),
        ("int64", lambda v: (v == np.iinfo(np.int64).max).all()),
        ("int32", lambda v: (v == np.iinfo(np.int32).max).all()),
    ],
)
def test_late_read_sees_poison(dtype: str, is_poison: Any) -> None:
    """After the access ends, every handed-out array reads poison, never stale values."""
    t = ts.arange(4, dtype=dtype)
    with t.prepare_host() as p:
        a = p.as_slice()
        b = p.as_array()
        assert a.tolist() == [0, 1, 2, 3]
    assert is_poison(a) and is_poison(b)
    assert t.to_numpy().tolist() == [0, 1, 2, 3]  # the storage was not poisoned


def test_late_read_of_a_bool_array_sees_every_value_inverted() -> None:
    """Bool poison flips every value, so each late read differs from what was stored."""
    t = ts.from_numpy(np.array([True, False, True]))
    with t.prepare_host() as p:
        assert isinstance(p, ts.PreparedContiguousRead)
        a = p.as_slice()
    assert a.tolist() == [False, True, False]
    assert t.to_numpy().tolist() == [True, False, True]


def test_late_write_through_a_derived_array_never_reaches_the_storage() -> None:
    """A slice taken inside the block writes into the poisoned staging buffer, not storage."""
    t = ts.from_numpy(np.arange(4.0))
    with t.prepare_host_mut() as p:
        tail = p.as_slice_mut()[1:]
    before = _storage_bytes(t)
    tail[:] = -1.0  # outside the contract; debug mode keeps it away from the storage
    assert _storage_bytes(t) == before
    assert t.to_numpy().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_strided_write_copies_back_only_the_layout_elements() -> None:
    """A strided write access changes exactly its own elements (not its envelope)."""
    t = ts.from_numpy(np.arange(8.0).reshape(2, 4))
    with t.as_view_mut() as m:
        child = m[:, ::2]
        with child.prepare_host_mut() as p:
            assert type(p) is ts.PreparedStridedWrite
            p.as_array()[...] = -1.0
        child.release()
    assert t.to_numpy().tolist() == [[-1.0, 1.0, -1.0, 3.0], [-1.0, 5.0, -1.0, 7.0]]


def test_strided_iteration_reads_the_staged_values() -> None:
    """iter_strided of a debug-mode write access sees writes made through as_array()."""
    t = ts.zeros((2, 2))
    with t.as_view_mut() as m:
        with m.T.prepare_host_mut() as p:
            p.as_array()[...] = [[1.0, 2.0], [3.0, 4.0]]
            assert [float(v) for v in p.iter_strided()] == [1.0, 2.0, 3.0, 4.0]
        m.release()
    assert t.to_numpy().tolist() == [[1.0, 3.0], [2.0, 4.0]]


def test_empty_layouts_stage_nothing() -> None:
    """A zero-size access hands out empty arrays and ends cleanly."""
    t = ts.zeros((0, 3))
    with t.prepare_host_mut() as p:
        assert p.as_array().shape == (0, 3)
    assert t.to_numpy().shape == (0, 3)


def test_the_access_itself_is_expired_after_release() -> None:
    """Debug mode keeps the normal expiry rule: the prepared object refuses use."""
    t = ts.zeros(2)
    p = t.prepare_host()
    p.release()
    with pytest.raises(ExpiredBorrowError):
        p.as_array()


# -- what debug mode does not change --------------------------------------------------------


def _program() -> list[tuple[Any, ...]]:
    """A small storage program; returns its ledger events without sequence numbers."""
    with ledger.capture() as rec:
        t = ts.arange(6, dtype="float64").reshape(2, 3).duplicate()
        with t.prepare_host_mut() as w:
            w.as_slice_mut()[:] = 2.0
        with t.prepare_host() as r:
            r.as_array().sum()
        with t.T.prepare_host() as s:
            list(s.iter_strided())
        t.to_numpy()
        del t, w, r, s
    return [(e.kind, e.reason, e.nbytes, e.operation) for e in rec.events]


def test_ledger_is_identical_with_and_without_debug_mode() -> None:
    """Staging copies are instrumentation: the ledger records exactly the same events."""
    previous = _access._set_debug_borrows(True)
    try:
        on = _program()
        _access._set_debug_borrows(False)
        off = _program()
    finally:
        _access._set_debug_borrows(previous)
    assert on == off
    assert any(kind is ledger.EventKind.COPY for kind, *_ in on)  # the program copies


def test_forbid_copies_does_not_refuse_debug_staging() -> None:
    """Prepared access stays copy-free by contract, so forbid_copies() allows it in debug."""
    t = ts.ones(3)
    with ledger.forbid_copies(), t.prepare_host_mut() as p:
        p.as_slice_mut()[0] = 4.0
    assert t.to_numpy().tolist() == [4.0, 1.0, 1.0]


def test_normal_mode_hands_out_zero_copy_arrays(debug_borrows_off: None) -> None:
    """Without debug mode the arrays lie over the storage itself and are cached."""
    t = ts.zeros(4)
    assert t._storage is not None
    root_buffer = t._storage.claim.root._allocation
    with t.prepare_host_mut() as p:
        a = p.as_slice_mut()
        assert np.shares_memory(a, root_buffer)
        assert p.as_slice_mut() is a
        a[0] = 1.0
    with t.prepare_host() as r:
        assert np.shares_memory(r.as_array(), root_buffer)
        assert r.as_array() is r.as_array()
    assert a.flags.writeable  # normal mode cannot revoke a handed-out array
    assert t.to_numpy()[0] == 1.0


def test_debug_mode_arrays_never_share_memory_with_the_storage() -> None:
    """In debug mode every handed-out array is over the staging buffer."""
    t = ts.zeros(4)
    assert t._storage is not None
    root_buffer = t._storage.claim.root._allocation
    with t.prepare_host_mut() as p:
        assert not np.shares_memory(p.as_slice_mut(), root_buffer)
        assert not np.shares_memory(p.as_array(), root_buffer)
        assert p.as_array() is p.as_array()


def test_an_access_keeps_the_mode_it_was_prepared_under() -> None:
    """Switching the mode does not change accesses that are already prepared."""
    t = ts.zeros(2)
    p = t.prepare_host_mut()
    assert isinstance(p, ts.PreparedContiguousWrite)
    previous = _access._set_debug_borrows(False)
    try:
        a = p.as_slice_mut()
        p.release()
    finally:
        _access._set_debug_borrows(previous)
    assert not a.flags.writeable  # prepared in debug mode: staged and frozen


_PRINT_MODE = "from tenferro_storage import _access; print(_access._debug_borrows())"


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("0", False), ("", False)])
def test_environment_variable_is_read_at_import(value: str, expected: bool) -> None:
    """TENFERRO_DEBUG_BORROWS switches debug mode on at import ('0' or empty: off)."""
    env = dict(os.environ, TENFERRO_DEBUG_BORROWS=value)
    out = subprocess.run(
        [sys.executable, "-c", _PRINT_MODE],
        env=env, capture_output=True, text=True, check=True,
    )
    assert out.stdout.strip() == str(expected)
