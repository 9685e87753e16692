"""The two ledgers: one allocation event per physical allocation, one copy event per
byte-preserving copy, and a release event when an allocation goes away.

Recording is cheap on the per-op path: one small tuple appended to each active
capture and two integer updates, under one lock (the ledger is the thread-safe
part of the kernel).  Rich event objects are built only when someone reads them.
"""

from __future__ import annotations

import enum
import itertools
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import attrs

from .errors import CopyForbiddenError


class AllocationReason(enum.Enum):
    """Why a physical allocation was made."""

    OPERATION_OUTPUT = "operation_output"
    CHECKPOINT_RECOMPUTE_OUTPUT = "checkpoint_recompute_output"
    EXPLICIT_DUPLICATE_DESTINATION = "explicit_duplicate_destination"
    TRANSFER_DESTINATION = "transfer_destination"


class CopyReason(enum.Enum):
    """Why bytes were copied unchanged.

    * ``EXPLICIT_DUPLICATE``: ``duplicate()`` (the user asked for a second owner);
    * ``TRANSFER``: bytes crossed the boundary to or from numpy (``from_numpy``,
      ``to_numpy``);
    * ``MATERIALIZE``: a kernel or rule returned memory that belongs to an existing value
      (for example one of its inputs), so its bytes were copied into a fresh owner
      (``kernel.materialize_output``) instead of giving those bytes a second owner.
    """

    EXPLICIT_DUPLICATE = "explicit_duplicate"
    TRANSFER = "transfer"
    MATERIALIZE = "materialize"


class EventKind(enum.Enum):
    """The kind of a ledger event."""

    ALLOCATE = "allocate"
    RELEASE = "release"
    COPY = "copy"


@attrs.frozen
class LedgerEvent:
    """One ledger event, as read back from a capture.

    ``reason`` is an :class:`AllocationReason` for allocate/release events and a
    :class:`CopyReason` for copy events; ``allocation`` is the allocation id (an
    observation label, never an authority) or ``None`` for copies whose source and
    destination are outside one allocation; ``operation`` names what caused it.
    """

    seq: int
    kind: EventKind
    reason: AllocationReason | CopyReason
    nbytes: int
    allocation: int | None
    operation: str


_ALLOC: Final = EventKind.ALLOCATE
_RELEASE: Final = EventKind.RELEASE
_COPY: Final = EventKind.COPY

# Raw events are tuples: (seq, kind, reason, nbytes, allocation id, operation).
_RawEvent = tuple[int, EventKind, "AllocationReason | CopyReason", int, "int | None", str]


class LedgerRecord:
    """What happened inside one :func:`capture` block.

    Reading any attribute is O(events) at most; nothing is computed on the per-op path
    except appending raw events.
    """

    __slots__ = ("_allocated_ids", "_events", "_live", "_peak", "_thread", "active")

    def __init__(self) -> None:
        self._thread = _thread_key()  # a capture sees only its own thread's events
        self._events: list[_RawEvent] = []
        self._allocated_ids: set[int] = set()
        self._live = 0
        self._peak = 0
        self.active = True

    @property
    def events(self) -> list[LedgerEvent]:
        """Every event in order, as :class:`LedgerEvent` objects."""
        return [LedgerEvent(*e) for e in self._events]

    @property
    def allocations(self) -> Counter[AllocationReason]:
        """Allocation events by reason (a multiset)."""
        return Counter(e[2] for e in self._events if e[1] is _ALLOC)  # type: ignore[misc]

    @property
    def allocation_bytes(self) -> Counter[AllocationReason]:
        """Allocated bytes by reason."""
        c: Counter[AllocationReason] = Counter()
        for e in self._events:
            if e[1] is _ALLOC:
                c[e[2]] += e[3]  # type: ignore[index]
        return c

    @property
    def copies(self) -> Counter[CopyReason]:
        """Copy events by reason (a multiset)."""
        return Counter(e[2] for e in self._events if e[1] is _COPY)  # type: ignore[misc]

    @property
    def copy_bytes(self) -> Counter[CopyReason]:
        """Copied bytes by reason."""
        c: Counter[CopyReason] = Counter()
        for e in self._events:
            if e[1] is _COPY:
                c[e[2]] += e[3]  # type: ignore[index]
        return c

    @property
    def releases(self) -> int:
        """How many allocations made inside the capture were released inside it."""
        return sum(1 for e in self._events if e[1] is _RELEASE and e[4] in self._allocated_ids)

    @property
    def live_bytes(self) -> int:
        """Bytes allocated inside the capture and not yet released (0 once all are gone)."""
        return self._live

    @property
    def peak_bytes(self) -> int:
        """The largest ``live_bytes`` seen while the capture was active."""
        return self._peak

    def timeline(self) -> list[tuple[int, dict[AllocationReason, int]]]:
        """Live bytes by reason after each allocate/release event: ``[(seq, {reason: bytes})]``.

        Only allocations made inside the capture are counted.
        """
        live: dict[AllocationReason, int] = {}
        out: list[tuple[int, dict[AllocationReason, int]]] = []
        for seq, kind, reason, nbytes, alloc, _op in self._events:
            if kind is _COPY or alloc not in self._allocated_ids:
                continue
            assert isinstance(reason, AllocationReason)
            live[reason] = live.get(reason, 0) + (nbytes if kind is _ALLOC else -nbytes)
            out.append((seq, dict(live)))
        return out

    def __repr__(self) -> str:
        allocs = {r.name: n for r, n in self.allocations.items()}
        copies = {r.name: n for r, n in self.copies.items()}
        return (
            f"LedgerRecord(allocations={allocs}, copies={copies}, "
            f"live_bytes={self._live}, peak_bytes={self._peak})"
        )


class _ForbidDepth(threading.local):
    depth = 0


class _Attribution(threading.local):
    tid: int | None = None


_ATTRIBUTION: Final = _Attribution()


def _thread_key() -> int:
    """The thread whose captures see this thread's events (itself unless attributed)."""
    tid = _ATTRIBUTION.tid
    return threading.get_ident() if tid is None else tid


@contextmanager
def attributed_to(tid: int) -> Iterator[None]:
    """Inside the block, this thread's ledger events count as thread ``tid``'s.

    A worker that executes work submitted by another thread (the runtime's asynchronous
    engines) uses it so the submitter's ``capture()`` sees the allocations its programs
    make. O(1)."""
    prev = _ATTRIBUTION.tid
    _ATTRIBUTION.tid = tid
    try:
        yield
    finally:
        _ATTRIBUTION.tid = prev


class _Ledger:
    """Process-wide ledger state (one instance).

    The fast path (no capture active) takes no lock: ids come from an
    ``itertools.count`` and live allocations are a dict, whose single-item updates
    are atomic under the GIL.  Captures are updated under ``lock``.
    """

    def __init__(self) -> None:
        # Reentrant: a root finalized by the cyclic collector while this thread holds the
        # lock (inside allocate/copy) releases through it again instead of deadlocking.
        self.lock = threading.RLock()
        self.seq = itertools.count()
        self.alloc_ids = itertools.count(1)
        self.captures: list[LedgerRecord] = []
        # Records whose block ended but whose own allocations are still alive: they
        # keep seeing those releases so ``live_bytes`` falls back to zero.
        self.watching: list[LedgerRecord] = []
        self.live: dict[int, int] = {}
        self.double_releases: list[int] = []
        self.forbid = _ForbidDepth()  # forbid_copies() blocks are per thread

    def allocate(
        self, reason: AllocationReason, nbytes: int, operation: str, alloc_id: int = 0
    ) -> int:
        """Record one allocation; returns its id (``alloc_id``: one the caller already took
        from ``alloc_ids``; 0: a new one)."""
        if not alloc_id:
            alloc_id = next(self.alloc_ids)
        self.live[alloc_id] = nbytes
        if self.captures:
            tid = _thread_key()
            with self.lock:
                event = (next(self.seq), _ALLOC, reason, nbytes, alloc_id, operation)
                for rec in self.captures:
                    if rec._thread != tid:
                        continue
                    rec._events.append(event)
                    rec._allocated_ids.add(alloc_id)
                    rec._live += nbytes
                    if rec._live > rec._peak:
                        rec._peak = rec._live
        return alloc_id

    def release(self, reason: AllocationReason, nbytes: int, alloc_id: int) -> None:
        if self.live.pop(alloc_id, None) is None:
            self.double_releases.append(alloc_id)
            return
        if self.captures or self.watching:
            tid = _thread_key()
            with self.lock:
                event = (next(self.seq), _RELEASE, reason, nbytes, alloc_id, "release")
                for rec in self.captures:
                    mine = alloc_id in rec._allocated_ids
                    if mine or rec._thread == tid:  # its own allocation, or its thread
                        rec._events.append(event)
                    if mine:
                        rec._live -= nbytes
                for rec in tuple(self.watching):
                    if alloc_id in rec._allocated_ids:
                        rec._events.append(event)
                        rec._live -= nbytes
                        if rec._live == 0:
                            self.watching.remove(rec)

    def check_copy_allowed(self, operation: str) -> None:
        if self.forbid.depth:
            raise CopyForbiddenError(
                f"{operation}: a copy was requested inside ledger.forbid_copies(); nothing "
                "was copied or allocated. Remove the copy or leave the forbid_copies() block"
            )

    def copy(self, reason: CopyReason, nbytes: int, operation: str) -> None:
        tid = _thread_key()
        with self.lock:
            if self.captures:
                event = (next(self.seq), _COPY, reason, nbytes, None, operation)
                for rec in self.captures:
                    if rec._thread == tid:
                        rec._events.append(event)


LEDGER: Final = _Ledger()


@contextmanager
def capture() -> Iterator[LedgerRecord]:
    """Record every ledger event inside the ``with`` block.

    >>> with capture() as rec:            # doctest: +SKIP
    ...     t = zeros((3,))
    >>> rec.allocations                   # doctest: +SKIP
    Counter({<AllocationReason.OPERATION_OUTPUT: ...>: 1})

    Captures nest; each sees every event its own thread makes while it is active (and
    the releases of its own allocations, wherever they happen), so captures in several
    threads do not see each other's work; process-wide totals (``live_bytes()``) stay
    exact.  The record
    stays readable after the block (its live bytes keep falling as its allocations
    are released, even after the block).  Cost: one list append per event per
    active capture.
    """
    rec = LedgerRecord()
    with LEDGER.lock:
        LEDGER.captures.append(rec)
    try:
        yield rec
    finally:
        with LEDGER.lock:
            LEDGER.captures.remove(rec)
            rec.active = False
            if rec._live:
                LEDGER.watching.append(rec)


@contextmanager
def forbid_copies() -> Iterator[None]:
    """Inside this block the first copy request of this thread raises
    ``CopyForbiddenError`` (other threads are unaffected).

    The error is raised before anything is allocated or copied, so the program's
    state is unchanged.  Blocks nest.  O(1).
    """
    LEDGER.forbid.depth += 1
    try:
        yield
    finally:
        LEDGER.forbid.depth -= 1


def live_bytes() -> int:
    """Bytes of every allocation currently alive in this process. O(live allocations)."""
    return sum(LEDGER.live.values())


def live_allocations() -> int:
    """How many allocations are currently alive in this process. O(1)."""
    return len(LEDGER.live)


def double_releases() -> tuple[int, ...]:
    """Allocation ids whose release was recorded more than once (always empty when sound)."""
    return tuple(LEDGER.double_releases)
