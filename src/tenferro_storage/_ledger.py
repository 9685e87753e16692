"""The two ledgers: one allocation event per physical allocation, one copy event per
byte-preserving copy, and a release event when an allocation goes away.

Recording is cheap on the per-op path: one small tuple appended to each active
capture and two integer updates, under one lock (the ledger is the thread-safe
part of the kernel).  Rich event objects are built only when someone reads them.
"""

from __future__ import annotations

import enum
import itertools
import os
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar

import attrs

from .errors import CopyForbiddenError

R = TypeVar("R", bound=enum.Enum)


class Counts(Counter[R]):
    """A :class:`collections.Counter` of reasons that prints as a plain table (``print(rec
    .copies)``) and reprs with the reasons' names (``Counts({transfer: 2})``); compares,
    adds and indexes like any ``Counter``. O(reasons) to print."""

    def __str__(self) -> str:
        if not self:
            return "(none)"
        width = max(len(str(k)) for k in self)
        rows = [f"{k!s:<{width}}  {v:>12,}" for k, v in self.most_common()]
        return "\n".join(rows)

    def __repr__(self) -> str:
        return "Counts({" + ", ".join(f"{k}: {v}" for k, v in self.most_common()) + "})"


class _Reason(enum.Enum):
    """A reason prints by one name everywhere: its value (``operation_output``), in
    ``str``, f-strings, tables and plots."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class AllocationReason(_Reason):
    """Why a physical allocation was made.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (an enum member look-up).
    Raises: ValueError."""

    OPERATION_OUTPUT = "operation_output"
    CHECKPOINT_RECOMPUTE_OUTPUT = "checkpoint_recompute_output"
    EXPLICIT_DUPLICATE_DESTINATION = "explicit_duplicate_destination"
    TRANSFER_DESTINATION = "transfer_destination"


class CopyReason(_Reason):
    """Why bytes were copied unchanged.

    * ``EXPLICIT_DUPLICATE``: ``duplicate()`` (the user asked for a second owner);
    * ``TRANSFER``: bytes crossed the boundary to or from numpy (``from_numpy``,
      ``to_numpy``);
    * ``MATERIALIZE``: a kernel or rule returned memory that belongs to an existing value
      (for example one of its inputs), so its bytes were copied into a fresh owner
      (``kernel.materialize_output``) instead of giving those bytes a second owner.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (an enum member look-up).
    Raises: ValueError."""

    EXPLICIT_DUPLICATE = "explicit_duplicate"
    TRANSFER = "transfer"
    MATERIALIZE = "materialize"


class EventKind(enum.Enum):
    """The kind of a ledger event.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (an enum member look-up).
    Raises: ValueError."""

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

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    seq: int
    kind: EventKind
    reason: AllocationReason | CopyReason
    nbytes: int
    allocation: int | None
    operation: str
    source: str | None = None
    """``file:line`` of the user's call that caused an allocation, when the capture was
    opened with ``capture(source_lines=True)`` (``None`` otherwise and for other events)."""


_ALLOC: Final = EventKind.ALLOCATE
_RELEASE: Final = EventKind.RELEASE
_COPY: Final = EventKind.COPY

# Raw events are tuples: (seq, kind, reason, nbytes, allocation id, operation).
_RawEvent = tuple[int, EventKind, "AllocationReason | CopyReason", int, "int | None", str]


class LedgerRecord:
    """What happened inside one :func:`capture` block.

    Reading any attribute is O(events) at most; nothing is computed on the per-op path
    except appending raw events.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = (
        "_allocated_ids", "_events", "_live", "_peak", "_sources", "_thread", "active",
    )

    def __init__(self, source_lines: bool = False) -> None:
        self._thread = _thread_key()  # a capture sees only its own thread's events
        # allocation id -> the user's file:line (only when asked for: off costs nothing)
        self._sources: dict[int, str] | None = {} if source_lines else None
        self._events: list[_RawEvent] = []
        self._allocated_ids: set[int] = set()
        self._live = 0
        self._peak = 0
        self.active = True

    @property
    def events(self) -> list[LedgerEvent]:
        """Every event in order, as :class:`LedgerEvent` objects (allocations carry their
        ``source`` when the capture records source lines)."""
        src = self._sources
        if src is None:
            return [LedgerEvent(*e) for e in self._events]
        return [LedgerEvent(*e, source=src.get(e[4]) if e[1] is _ALLOC else None)  # type: ignore[arg-type]
                for e in self._events]

    @property
    def allocation_bytes_by_source(self) -> Counts[Any]:
        """Allocated bytes by the user's ``file:line`` that caused them (prints as a table;
        needs ``capture(source_lines=True)``, else ``ValueError``). O(events)."""
        src = self._sources
        if src is None:
            raise ValueError(
                "allocation_bytes_by_source: this capture does not record source lines; "
                "open it with ledger.capture(source_lines=True)"
            )
        c: Counts[Any] = Counts()
        for e in self._events:
            if e[1] is _ALLOC:
                c[src.get(e[4] or 0, "?")] += e[3]
        return c

    @property
    def allocations(self) -> Counts[AllocationReason]:
        """Allocation events by reason (a multiset; prints as a table)."""
        return Counts(e[2] for e in self._events if e[1] is _ALLOC)  # type: ignore[misc]

    @property
    def allocation_bytes(self) -> Counts[AllocationReason]:
        """Allocated bytes by reason (prints as a table)."""
        c: Counts[AllocationReason] = Counts()
        for e in self._events:
            if e[1] is _ALLOC:
                c[e[2]] += e[3]  # type: ignore[index]
        return c

    @property
    def copies(self) -> Counts[CopyReason]:
        """Copy events by reason (a multiset; prints as a table)."""
        return Counts(e[2] for e in self._events if e[1] is _COPY)  # type: ignore[misc]

    @property
    def copy_bytes(self) -> Counts[CopyReason]:
        """Copied bytes by reason (prints as a table)."""
        c: Counts[CopyReason] = Counts()
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

        Cost: allocates the list and one dict per event (no ledger event); no copy; no sync;
        no dispatch; O(events x reasons).
        Raises: nothing.
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


def _user_line() -> str:
    """``file:line`` of the innermost frame outside the tenferro packages (the user's
    call that caused the event). O(stack depth); only for captures that ask for it."""
    f = sys._getframe(1)
    while f is not None and str(f.f_globals.get("__name__", "")).startswith("tenferro_"):
        f = f.f_back  # type: ignore[assignment]
    if f is None:
        return "?"
    name = f.f_code.co_filename
    try:
        rel = os.path.relpath(name)
        name = rel if not rel.startswith("..") else name
    except ValueError:  # another drive (Windows)
        pass
    return f"{name}:{f.f_lineno}"


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
                    if rec._sources is not None:  # asked for: find the user's line
                        rec._sources[alloc_id] = _user_line()
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
def capture(*, source_lines: bool = False) -> Iterator[LedgerRecord]:
    """Record every ledger event inside the ``with`` block.

    ``source_lines=True`` makes every allocation event carry the ``file:line`` of the
    user's call that caused it (``LedgerEvent.source``,
    ``rec.allocation_bytes_by_source``): one stack walk per allocation inside this
    capture only.  Off (the default) it costs nothing.

    >>> with capture() as rec:            # doctest: +SKIP
    ...     t = zeros((3,))
    >>> rec.allocations                   # doctest: +SKIP
    Counts({operation_output: 1})

    Captures nest; each sees every event its own thread makes while it is active (and
    the releases of its own allocations, wherever they happen), so captures in several
    threads do not see each other's work; process-wide totals (``live_bytes()``) stay
    exact.  The record stays readable after the block (its live bytes keep falling as
    its allocations are released, even after the block).

    Cost: no allocation (the record is a Python object; no storage); no copy; no sync; no
    dispatch of its own; O(1) per event: one list append per event per active capture.
    Raises: nothing."""
    rec = LedgerRecord(source_lines)
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

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to enter and leave.
    Raises: CopyForbiddenError."""
    LEDGER.forbid.depth += 1
    try:
        yield
    finally:
        LEDGER.forbid.depth -= 1


def live_bytes() -> int:
    """Bytes of every allocation currently alive in this process. O(live allocations).

    Cost: no allocation; no copy; no sync; no dispatch; O(live allocations).
    Raises: nothing."""
    return sum(LEDGER.live.values())


def live_allocations() -> int:
    """How many allocations are currently alive in this process. O(1).

    Cost: no allocation; no copy; no sync; no dispatch; O(1).
    Raises: nothing."""
    return len(LEDGER.live)


def double_releases() -> tuple[int, ...]:
    """Allocation ids whose release was recorded more than once (always empty when sound).

    Cost: no allocation; no copy; no sync; no dispatch; O(1).
    Raises: nothing."""
    return tuple(LEDGER.double_releases)
