"""The allocation and copy ledgers (``_ledger.py``, public ``tenferro_storage.ledger``).

Captures record one event per allocation, copy and release with its reason; they
nest; live bytes fall back to zero once everything allocated inside is released
(even after the block); the ledger is thread-safe; ``forbid_copies`` refuses the
first copy by name and changes nothing.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import Counter

import attrs
import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage.errors import CopyForbiddenError

A = ledger.AllocationReason
C = ledger.CopyReason
K = ledger.EventKind


def test_public_enums_have_exactly_the_contract_reasons() -> None:
    """AllocationReason and CopyReason name exactly the contract's reasons."""
    assert {r.name for r in A} == {
        "OPERATION_OUTPUT", "CHECKPOINT_RECOMPUTE_OUTPUT", "EXPLICIT_DUPLICATE_DESTINATION",
        "TRANSFER_DESTINATION",
    }
    assert {r.name for r in C} == {"EXPLICIT_DUPLICATE", "TRANSFER", "MATERIALIZE"}
    assert ts.AllocationReason is A and ts.CopyReason is C


def test_capture_records_each_event_with_its_reason_in_order() -> None:
    """Allocation, copy and release events appear once each, in order, with bytes and op."""
    with ledger.capture() as rec:
        t = ts.zeros(4)  # 32 bytes
        d = t.duplicate()
        t.to_numpy()
        del t
    kinds = [(e.kind, e.reason, e.nbytes, e.operation) for e in rec.events]
    assert kinds == [
        (K.ALLOCATE, A.OPERATION_OUTPUT, 32, "zeros"),
        (K.ALLOCATE, A.EXPLICIT_DUPLICATE_DESTINATION, 32, "duplicate"),
        (K.COPY, C.EXPLICIT_DUPLICATE, 32, "duplicate"),
        (K.COPY, C.TRANSFER, 32, "to_numpy"),
        (K.RELEASE, A.OPERATION_OUTPUT, 32, "release"),
    ]
    seqs = [e.seq for e in rec.events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert rec.allocations == Counter({A.OPERATION_OUTPUT: 1, A.EXPLICIT_DUPLICATE_DESTINATION: 1})
    assert rec.copies == Counter({C.EXPLICIT_DUPLICATE: 1, C.TRANSFER: 1})
    assert rec.copy_bytes == Counter({C.EXPLICIT_DUPLICATE: 32, C.TRANSFER: 32})
    assert rec.releases == 1 and rec.live_bytes == 32 and rec.peak_bytes == 64
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        rec.events[0].nbytes = 0  # type: ignore[misc]
    del d
    assert rec.live_bytes == 0 and rec.releases == 2
    assert "live_bytes=0" in repr(rec)


def test_live_and_peak_bytes_fall_to_zero() -> None:
    """live_bytes tracks allocations minus releases; peak keeps the maximum; both exact."""
    with ledger.capture() as rec:
        a = ts.zeros(10)  # 80
        b = ts.zeros(20)  # 160
        assert (rec.live_bytes, rec.peak_bytes) == (240, 240)
        del a
        assert (rec.live_bytes, rec.peak_bytes) == (160, 240)
        c = ts.zeros(5, "int32")  # 20
        assert (rec.live_bytes, rec.peak_bytes) == (180, 240)
        del b, c
    assert (rec.live_bytes, rec.peak_bytes) == (0, 240)
    timeline = rec.timeline()
    assert [live for _, live in timeline][-1] == {A.OPERATION_OUTPUT: 0}
    assert max(sum(live.values()) for _, live in timeline) == 240


def test_allocations_made_before_a_capture_do_not_count_as_its_live_bytes() -> None:
    """Releasing an older allocation inside a capture leaves that capture's live bytes alone."""
    old = ts.zeros(8)
    with ledger.capture() as rec:
        new = ts.zeros(2)
        del old
        assert rec.live_bytes == 16 and rec.releases == 0
        del new
    assert rec.live_bytes == 0 and rec.releases == 1


def test_live_bytes_keep_falling_after_the_block() -> None:
    """A record whose allocations outlive the block still sees their release."""
    with ledger.capture() as rec:
        t = ts.ones((3, 3))
    assert not rec.active and rec.live_bytes == 72
    other = ts.zeros(1)  # made after the block: not recorded
    assert len(rec.events) == 1
    del t
    assert rec.live_bytes == 0 and rec.releases == 1
    del other
    assert len(rec.events) == 2


def test_captures_nest() -> None:
    """An outer capture sees everything; an inner one only what happened while it was open."""
    with ledger.capture() as outer:
        a = ts.zeros(1)
        with ledger.capture() as inner:
            b = ts.from_numpy(np.ones(2))
            with ledger.capture() as innermost:
                pass
        c = a.duplicate()
        del a, b, c
    assert innermost.events == []
    assert inner.allocations == Counter({A.TRANSFER_DESTINATION: 1})
    assert inner.copies == Counter({C.TRANSFER: 1})
    assert outer.allocations == Counter(
        {A.OPERATION_OUTPUT: 1, A.TRANSFER_DESTINATION: 1, A.EXPLICIT_DUPLICATE_DESTINATION: 1}
    )
    assert outer.live_bytes == 0 and inner.live_bytes == 0 and outer.releases == 3


def test_process_wide_counters() -> None:
    """live_allocations/live_bytes count every live root; double_releases stays empty."""
    n, b = ledger.live_allocations(), ledger.live_bytes()
    t = ts.zeros(16, "int32")
    assert (ledger.live_allocations(), ledger.live_bytes()) == (n + 1, b + 64)
    del t
    assert (ledger.live_allocations(), ledger.live_bytes()) == (n, b)
    assert ledger.double_releases() == ()


def test_ledger_is_thread_safe_under_concurrent_allocation() -> None:
    """Threads allocating, copying and releasing concurrently, each under its own capture,
    lose no event and double nothing; the process-wide totals stay exact."""
    n_threads, per_thread = 8, 200
    barrier = threading.Barrier(n_threads)
    errors: list[BaseException] = []
    records: list[ledger.LedgerRecord] = []
    base = ledger.live_bytes()

    def work() -> None:
        try:
            with ledger.capture() as rec:
                barrier.wait()
                for i in range(per_thread):
                    t = ts.zeros(i % 7 + 1)
                    if i % 3 == 0:
                        t.duplicate()
                    del t
            records.append(rec)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    dups = len(range(0, per_thread, 3))
    assert len(records) == n_threads
    for rec in records:  # each capture saw exactly its own thread's work
        assert rec.allocations == Counter(
            {A.OPERATION_OUTPUT: per_thread, A.EXPLICIT_DUPLICATE_DESTINATION: dups}
        )
        assert rec.copies == Counter({C.EXPLICIT_DUPLICATE: dups})
        assert rec.releases == per_thread + dups
        assert rec.live_bytes == 0
    assert ledger.live_bytes() == base
    seqs = [e.seq for e in rec.events]
    assert len(set(seqs)) == len(seqs) and seqs == sorted(seqs)
    ids = [e.allocation for e in rec.events if e.kind is K.ALLOCATE]
    assert len(set(ids)) == len(ids)
    assert ledger.double_releases() == ()


# -- forbid_copies ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "call"),
    [
        ("to_numpy", lambda t: t.to_numpy()),
        ("to_numpy", lambda t: t.as_view()[::2].to_numpy()),
        ("duplicate", lambda t: t.duplicate()),
        ("duplicate", lambda t: t.T.duplicate()),
        ("from_numpy", lambda t: ts.from_numpy(np.zeros(3))),
    ],
)
def test_forbid_copies_refuses_the_first_copy_naming_it_and_changing_nothing(
    op: str, call: object
) -> None:
    """Inside forbid_copies() a copy raises CopyForbiddenError naming the op; nothing happens."""
    t = ts.arange(6).reshape(2, 3).duplicate()
    live = ledger.live_allocations()
    with ledger.capture() as rec, ledger.forbid_copies():
        with pytest.raises(CopyForbiddenError) as info:
            call(t)  # type: ignore[operator]
        ts.zeros(2).fill(1.0)  # allocation and kernel writes are not copies
    assert isinstance(info.value, RuntimeError)
    message = str(info.value)
    del info  # its traceback holds the frames (and any views) of the failed call
    assert message.startswith(f"{op}:") and "forbid_copies" in message
    assert rec.copies == Counter()
    assert rec.allocations == Counter({A.OPERATION_OUTPUT: 1})
    assert ledger.live_allocations() == live
    assert t.to_numpy().tolist() == [[0, 1, 2], [3, 4, 5]]  # allowed again after the block
    t.as_view_mut().release()  # no borrow was left behind


def test_forbid_copies_nests() -> None:
    """The innermost block's exit does not re-allow copies inside the outer block."""
    t = ts.zeros(1)
    with ledger.forbid_copies():
        with ledger.forbid_copies():
            pass
        with pytest.raises(CopyForbiddenError):
            t.duplicate()
    t.duplicate()


def test_reasons_print_by_one_name_everywhere() -> None:
    """str, f-strings and the Counts repr all spell a reason by its value."""
    for reason in (*ts.AllocationReason, *ts.CopyReason):
        assert str(reason) == f"{reason}" == reason.value
        assert f"{reason:>30}" == f"{reason.value:>30}"


def test_counters_print_as_plain_tables() -> None:
    """``print(rec.allocations)`` is a table of name and count, most common first; the
    counters still compare like any Counter."""
    with ledger.capture() as rec:
        ts.zeros(3)
        ts.from_numpy(np.ones(2))
        ts.from_numpy(np.ones(2))
    assert str(rec.allocations).splitlines() == [
        "transfer_destination             2",
        "operation_output                 1",
    ]
    assert repr(rec.copies) == "Counts({transfer: 2})"
    assert str(rec.allocation_bytes).splitlines()[1].split() == ["operation_output", "24"]
    assert rec.copies == {ts.CopyReason.TRANSFER: 2}
    with ledger.capture() as empty:
        pass
    assert str(empty.copies) == "(none)" and empty.copies == {}


def test_allocation_events_carry_the_users_source_line_when_asked() -> None:
    """``capture(source_lines=True)``: each allocation names the file:line of the user's
    call (not a line inside tenferro); other events and default captures carry none."""
    import tenferro_ad as ad  # the op's frames are inside tenferro: skipped

    w = ts.ones((2, 2))
    with ledger.capture(source_lines=True) as rec:
        line = sys._getframe().f_lineno + 1
        h = ad.sin(w)
        t = ts.zeros(3)
    here = f"{os.path.relpath(__file__)}:"
    allocs = [e for e in rec.events if e.kind is ledger.EventKind.ALLOCATE]
    assert [e.source for e in allocs] == [f"{here}{line}", f"{here}{line + 1}"]
    assert dict(rec.allocation_bytes_by_source) == {f"{here}{line}": 32, f"{here}{line + 1}": 24}
    del h, t
    with ledger.capture() as plain:
        ts.zeros(1)
    assert all(e.source is None for e in plain.events) and plain.events
    with pytest.raises(ValueError, match="source_lines=True"):
        _ = plain.allocation_bytes_by_source
