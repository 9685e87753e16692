"""Recording state is per thread: tapes in several threads never corrupt each other, and a
ledger capture sees only its own thread's events."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad._core._state import STATE
from tenferro_storage import ledger


def _run_threads(n: int, target: Callable[[int], None]) -> list[BaseException]:
    errors: list[BaseException] = []

    def wrapped(i: int) -> None:
        try:
            target(i)
        except BaseException as e:  # collected and re-raised by the test
            errors.append(e)

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_eight_threads_with_their_own_tapes_get_exact_gradients() -> None:
    """8 threads x 200 gradients (functional API and explicit tapes): all exact."""
    wrong: list[tuple[int, int]] = []

    def work(i: int) -> None:
        rng = np.random.default_rng(i)
        for k in range(200):
            x = rng.normal(size=(5,))
            if k % 2:
                g = ad.grad(lambda v: ad.sum(ad.sin(v) * v))(ts.from_numpy(x)).to_numpy()
            else:
                with ad.Tape() as tape:
                    h = tape.watch(ts.from_numpy(x))
                    loss = ad.sum(ad.sin(h) * h)
                g = tape.backward(loss).take_grad(h).to_numpy()  # type: ignore[union-attr]
            if not np.allclose(g, np.cos(x) * x + np.sin(x), rtol=1e-13, atol=1e-13):
                wrong.append((i, k))

    errors = _run_threads(8, work)
    assert errors == []
    assert wrong == []
    assert STATE.tape is None and STATE.key is None  # no thread's tape left installed here


def test_a_tape_in_another_thread_does_not_record_this_threads_ops() -> None:
    """A tape entered in one thread records nothing another thread computes."""
    inside = threading.Event()
    leave = threading.Event()
    seen: dict[str, Any] = {}

    def other() -> None:
        with ad.Tape() as tape:
            inside.set()
            leave.wait(10)
            seen["nodes"] = len(tape.nodes)

    t = threading.Thread(target=other)
    t.start()
    inside.wait(10)
    y = ad.sin(ts.from_numpy(np.ones(3)))  # this thread records nothing
    assert not y.is_tracked
    leave.set()
    t.join()
    assert seen["nodes"] == 0


def test_captures_in_several_threads_see_only_their_own_events() -> None:
    """Each thread's capture counts exactly its own allocations; global totals stay exact."""
    base = ledger.live_bytes()
    counts: dict[int, Any] = {}
    barrier = threading.Barrier(4)

    def work(i: int) -> None:
        with ledger.capture() as rec:
            barrier.wait(10)
            owners = [ts.zeros((i + 1,)) for _ in range(10 * (i + 1))]
            barrier.wait(10)
            del owners
        counts[i] = rec

    errors = _run_threads(4, work)
    assert errors == []
    for i, rec in counts.items():
        assert sum(rec.allocations.values()) == 10 * (i + 1)
        assert sum(rec.allocation_bytes.values()) == 8 * (i + 1) * 10 * (i + 1)
        assert rec.live_bytes == 0
    assert ledger.live_bytes() == base


def test_forbid_copies_in_one_thread_does_not_refuse_another_threads_copies() -> None:
    """forbid_copies() is a per-thread block."""
    inside = threading.Event()
    leave = threading.Event()

    def other() -> None:
        with ledger.forbid_copies():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=other)
    t.start()
    inside.wait(10)
    try:
        a = ts.from_numpy(np.ones(3))  # a TRANSFER copy: allowed in this thread
        assert a.duplicate().shape == (3,)
    finally:
        leave.set()
        t.join()
