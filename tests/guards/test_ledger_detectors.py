"""Every detector the ledger has is made to fire (issue 16).

The ledger's detectors are easy to leave untested because sound code never trips them:
most suites only assert that they stay quiet.  Each test here provokes one:

* the double-release detector (``ledger.double_releases()``; also in
  ``test_guard_rows.py``);
* ``forbid_copies()``: the first copy request raises ``CopyForbiddenError`` before
  anything is allocated, copied or recorded, on every copy path (``duplicate``,
  ``to_numpy``, ``from_numpy``, ``materialize_output``); blocks nest; it is per thread;
* captures are per thread (another thread's allocations and copies are invisible) and
  ``attributed_to`` moves a worker's events into the submitter's capture;
* live bytes and the peak inside a capture, and the *watch* after the block: a record
  whose allocations outlive its block keeps seeing their releases until it reaches 0;
* the suite's own leak check: an allocation kept across the end of a test is what it
  reports (its arithmetic — ``live_allocations``/``live_bytes`` — is checked here).

Each test says which line of ``_ledger.py`` it protects; all were checked by hand to
fail with that line mutated (on a temporary copy).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage import AllocationReason, CopyReason, ledger
from tenferro_storage._ledger import LEDGER, attributed_to
from tenferro_storage.errors import CopyForbiddenError

OUT = AllocationReason.OPERATION_OUTPUT


def _in_thread(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a new thread and return its result (re-raising its exception)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # pragma: no cover - re-raised below
            box["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


# -- double release -----------------------------------------------------------------------


def test_double_release_is_recorded_once_per_extra_release() -> None:
    """Fails when ``_Ledger.release`` stops recording double releases (checked)."""
    before = len(ledger.double_releases())
    alloc = LEDGER.allocate(OUT, 16, "test")
    try:
        with ledger.capture() as rec:
            LEDGER.release(OUT, 16, alloc)
            LEDGER.release(OUT, 16, alloc)
            LEDGER.release(OUT, 16, alloc)
        assert ledger.double_releases()[before:] == (alloc, alloc)
        assert rec.releases == 0  # the allocation was not made inside this capture
    finally:
        while alloc in LEDGER.double_releases:
            LEDGER.double_releases.remove(alloc)
    assert ledger.double_releases()[before:] == ()


# -- forbid_copies ------------------------------------------------------------------------

COPIES: dict[str, Callable[[ts.Tensor[Any, Any]], Any]] = {
    "duplicate": lambda t: t.duplicate(),
    "to_numpy": lambda t: t.to_numpy(),
    "from_numpy": lambda t: ts.from_numpy(np.ones(2)),
    "materialize_output": lambda t: ts.kernel.materialize_output(ts.kernel.read_array(t)),
}


@pytest.mark.parametrize("path", sorted(COPIES))
def test_forbid_copies_refuses_every_copy_path_and_changes_nothing(path: str) -> None:
    """Fails when ``check_copy_allowed`` is disabled (checked), and for
    ``materialize_output`` when its check is removed (checked)."""
    t = ts.from_numpy(np.array([1.0, 2.0]))
    live, allocs = ledger.live_bytes(), ledger.live_allocations()
    with ledger.capture() as rec, ledger.forbid_copies(), pytest.raises(CopyForbiddenError):
        COPIES[path](t)
    assert rec.events == []
    assert (ledger.live_bytes(), ledger.live_allocations()) == (live, allocs)
    result = COPIES[path](t)  # allowed again after the block
    del result


def test_forbid_copies_nests_and_ends_with_its_outermost_block() -> None:
    t = ts.from_numpy(np.array([1.0]))
    with ledger.forbid_copies():
        with ledger.forbid_copies():
            with pytest.raises(CopyForbiddenError):
                t.duplicate()
        with pytest.raises(CopyForbiddenError):  # the outer block still forbids
            t.duplicate()
    d = t.duplicate()
    del d


def test_forbid_copies_is_per_thread() -> None:
    """Another thread copies freely while this one forbids; and a block in another
    thread does not forbid here.

    Fails when the forbid depth is process-wide (``_ForbidDepth`` not thread-local,
    checked)."""
    t = ts.from_numpy(np.array([1.0, 2.0]))
    with ledger.forbid_copies():
        out = _in_thread(lambda: t.to_numpy())
        np.testing.assert_array_equal(out, [1.0, 2.0])
        with pytest.raises(CopyForbiddenError):
            t.to_numpy()

    entered, leave = threading.Event(), threading.Event()

    def other() -> None:
        with ledger.forbid_copies():
            entered.set()
            leave.wait(10)

    th = threading.Thread(target=other)
    th.start()
    try:
        assert entered.wait(10)
        np.testing.assert_array_equal(t.to_numpy(), [1.0, 2.0])
    finally:
        leave.set()
        th.join()


def test_ad_ops_inside_forbid_copies_run_when_they_copy_nothing() -> None:
    """Ops on owners borrow (no copy) so they run inside ``forbid_copies``; an op that
    would import a numpy array (a recorded TRANSFER) is refused."""
    a = ts.from_numpy(np.array([0.0, 1.0]))
    with ledger.forbid_copies():
        y = ad.exp(a)
        with pytest.raises(CopyForbiddenError):
            ad.exp(np.array([0.0, 1.0]))
    np.testing.assert_allclose(y.to_numpy(), np.exp([0.0, 1.0]))


# -- captures per thread, attribution ------------------------------------------------------


def test_capture_does_not_see_another_threads_allocations_or_copies() -> None:
    """Fails when a capture records other threads' allocations (checked) or copies
    (checked)."""
    src = ts.from_numpy(np.arange(3.0))

    def work() -> None:
        d = src.duplicate()  # one allocation + one EXPLICIT_DUPLICATE copy
        del d

    with ledger.capture() as rec:
        _in_thread(work)
        mine = ts.zeros((2,), ts.dtype("float64"))
    assert rec.allocations == {OUT: 1}
    assert rec.copies == {}
    del mine


def test_attributed_to_moves_a_workers_events_into_the_submitters_capture() -> None:
    """Fails when ``attributed_to`` does not set the attribution (checked)."""
    me = threading.get_ident()
    src = ts.from_numpy(np.arange(3.0))
    kept: list[Any] = []

    def work() -> None:
        with attributed_to(me):
            kept.append(src.duplicate())

    with ledger.capture() as rec:
        _in_thread(work)
    assert rec.copies == {CopyReason.EXPLICIT_DUPLICATE: 1}
    assert sum(rec.allocations.values()) == 1
    assert rec.live_bytes == 24
    kept.clear()
    assert rec.live_bytes == 0


# -- live bytes, peak, the watch after the block ------------------------------------------


def test_capture_live_bytes_and_peak_follow_allocations_and_releases() -> None:
    """Fails when releases inside the block stop lowering ``live_bytes`` (checked) or
    the peak is not tracked (checked)."""
    with ledger.capture() as rec:
        a = ts.zeros((4,), ts.dtype("float64"))  # 32 bytes
        b = ts.zeros((2,), ts.dtype("float64"))  # 16 bytes
        assert rec.live_bytes == 48
        del a
        assert rec.live_bytes == 16
        c = ts.zeros((1,), ts.dtype("float64"))
        del b, c
    assert rec.live_bytes == 0
    assert rec.peak_bytes == 48
    assert rec.releases == 3
    assert [sum(d.values()) for _, d in rec.timeline()] == [32, 48, 16, 24, 8, 0]


def test_a_record_keeps_watching_its_allocations_after_the_block() -> None:
    """An allocation made inside the block and released after it still lowers the
    record's ``live_bytes`` (to 0), and the record stops watching then.

    Fails when the record is not kept watching after the block (checked), or the
    watched release does not lower ``live_bytes`` (checked)."""
    with ledger.capture() as rec:
        a = ts.zeros((4,), ts.dtype("float64"))
        b = ts.zeros((1,), ts.dtype("float64"))
    assert rec.live_bytes == 40 and not rec.active
    assert rec in LEDGER.watching
    del a
    assert rec.live_bytes == 8
    assert rec.events[-1].kind is ts.ledger.EventKind.RELEASE
    del b
    assert rec.live_bytes == 0
    assert rec not in LEDGER.watching


@pytest.mark.parametrize("captured", [False, True], ids=["fast-path", "in-capture"])
def test_live_bytes_and_allocations_count_every_live_root(captured: bool) -> None:
    """The numbers the suite's leak check reads: up by exactly what is allocated, back
    down on release — on the inlined release path (no capture active) and through
    ``_Ledger.release`` (a capture active).

    Fails when a release does not remove the allocation from the live set, on either
    path (both checked)."""
    live, n = ledger.live_bytes(), ledger.live_allocations()
    with ledger.capture() if captured else contextlib.nullcontext():
        a = ts.zeros((5,), ts.dtype("float64"))
        assert (ledger.live_bytes() - live, ledger.live_allocations() - n) == (40, 1)
        del a
        assert (ledger.live_bytes(), ledger.live_allocations()) == (live, n)
