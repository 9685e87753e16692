"""Ledger tools: ``forbid_copies()`` and the live-bytes-by-reason ``timeline()`` of a capture."""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage.errors import CopyForbiddenError
from tenferro_storage.ledger import AllocationReason, CopyReason, EventKind

OP = AllocationReason.OPERATION_OUTPUT
DUP = AllocationReason.EXPLICIT_DUPLICATE_DESTINATION
XFER = AllocationReason.TRANSFER_DESTINATION


def test_forbid_copies_raises_on_first_duplicate_naming_the_operation_and_changes_nothing() -> None:
    t = ts.zeros((4,))
    before_live = ledger.live_allocations()
    with ledger.capture() as rec, ledger.forbid_copies():
        with pytest.raises(CopyForbiddenError, match=r"^duplicate: .*forbid_copies"):
            t.duplicate()
    assert rec.events == []  # nothing allocated, nothing copied
    assert ledger.live_allocations() == before_live
    assert t.to_numpy().tolist() == [0.0] * 4  # the source is untouched and still usable


def test_forbid_copies_refuses_transfers_in_and_out() -> None:
    t = ts.ones((2,))
    with ledger.capture() as rec, ledger.forbid_copies():
        with pytest.raises(CopyForbiddenError, match=r"^from_numpy: "):
            ts.from_numpy(np.arange(3.0))
        with pytest.raises(CopyForbiddenError, match=r"^to_numpy: "):
            t.to_numpy()
    assert rec.events == []


def test_forbid_copies_is_an_ordinary_runtime_error() -> None:
    assert issubclass(CopyForbiddenError, RuntimeError)


def test_forbid_copies_allows_fresh_results_and_views() -> None:
    """Allocations that are not copies (kernel outputs, views) stay allowed."""
    with ledger.capture() as rec, ledger.forbid_copies():
        t = ts.zeros((3, 2))
        with t.as_view() as v:
            assert v.T.shape == (2, 3)
    assert rec.allocations == {OP: 1}
    assert rec.copies == {}
    del t


def test_forbid_copies_nests_and_lifts_only_when_the_outermost_block_ends() -> None:
    t = ts.zeros((2,))
    with ledger.forbid_copies():
        with ledger.forbid_copies():
            pass
        with pytest.raises(CopyForbiddenError):  # still forbidden after the inner block
            t.duplicate()
    d = t.duplicate()  # allowed again
    assert d.shape == (2,)


def test_forbid_copies_lifts_after_an_exception_in_the_block() -> None:
    t = ts.zeros((2,))
    with pytest.raises(KeyError), ledger.forbid_copies():
        raise KeyError("boom")
    with ledger.capture() as rec:
        t.duplicate()
    assert rec.copies == {CopyReason.EXPLICIT_DUPLICATE: 1}


def test_timeline_reports_live_bytes_by_reason_after_each_event() -> None:
    with ledger.capture() as rec:
        a = ts.zeros((4,))  # +32 op
        b = a.duplicate()  # +32 dup dest (and a copy event, not in the timeline)
        c = ts.from_numpy(np.zeros(2))  # +16 transfer dest
        del a  # -32 op
        del b  # -32 dup dest
    tl = rec.timeline()
    assert [live for _, live in tl] == [
        {OP: 32},
        {OP: 32, DUP: 32},
        {OP: 32, DUP: 32, XFER: 16},
        {OP: 0, DUP: 32, XFER: 16},
        {OP: 0, DUP: 0, XFER: 16},
    ]
    seqs = [seq for seq, _ in tl]
    assert seqs == sorted(seqs)
    assert [e.kind for e in rec.events].count(EventKind.COPY) == 2
    assert rec.peak_bytes == 80
    assert rec.live_bytes == 16
    del c
    assert rec.live_bytes == 0  # the record keeps watching its own allocations


def test_timeline_ignores_allocations_made_outside_the_capture() -> None:
    outside = ts.zeros((8,))
    with ledger.capture() as rec:
        inside = ts.zeros((2,))
        del outside
    assert [live for _, live in rec.timeline()] == [{OP: 16}]
    assert rec.live_bytes == 16
    del inside


def test_nested_captures_each_see_their_own_timeline() -> None:
    with ledger.capture() as outer:
        a = ts.zeros((2,))
        with ledger.capture() as inner:
            b = ts.zeros((4,))
            del a
        del b
    assert [live for _, live in outer.timeline()] == [{OP: 16}, {OP: 48}, {OP: 32}, {OP: 0}]
    assert [live for _, live in inner.timeline()] == [{OP: 32}, {OP: 0}]
    assert outer.peak_bytes == 48
    assert inner.peak_bytes == 32
