"""Provider events, retirement records and the process's permanent retention (G1, G5).

A :class:`RetirementRecord` owns one admitted submission's retirement bindings, its
:class:`ProviderEvent`, the roots and the provider context until completion is proven;
then :meth:`RetirementRecord.release` lets go of everything exactly once.  When completion
cannot be proven, :meth:`RetirementRecord.retain_permanently` moves the record into the
process-wide permanent list: it is never released, not even when its provider is closed
and dropped (the device may still read or write that memory).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Final

import attrs

from .._root import RootResource

if TYPE_CHECKING:
    from ._device import ProviderContext, ProviderRetirementBinding

_PERMANENT: Final[list[RetirementRecord]] = []
_PERMANENT_LOCK: Final = threading.Lock()


@attrs.frozen
class PermanentRetention:
    """What unproven completions have retained for the rest of the process.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    records: int
    roots: int
    nbytes: int


def permanently_retained() -> PermanentRetention:
    """The records every provider retained after unproven completion, with the distinct
    roots (and their bytes) they keep alive.  These are never released -- not when their
    provider is closed or dropped -- because the device may still read or write them.
    O(records x roots); diagnostics and the test suite's leak check.

    Cost: no allocation; no copy; no sync; no dispatch; O(retained records).
    Raises: nothing."""
    with _PERMANENT_LOCK:
        records = list(_PERMANENT)
    roots = {id(r): r for rec in records for r in rec.roots}
    return PermanentRetention(
        len(records), len(roots), sum(r.capacity_bytes for r in roots.values())
    )



class ProviderEvent:
    """A completion event recorded on a provider queue (lifetime-only raw handle).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = ("_context", "_done", "_released")

    def __init__(self, context: ProviderContext) -> None:
        self._context = context
        self._done = threading.Event()
        self._released = False
        context.count(events_created=1)

    def complete(self) -> None:
        """Signal completion (the provider's queue does this). Idempotent.

        Cost: no allocation; no copy; no sync (sets the event and wakes its waiters; never
        blocks); no dispatch; O(1).
        Raises: nothing."""
        if not self._done.is_set():
            self._done.set()
            self._context.count(events_completed=1)

    def is_complete(self) -> bool:
        """Query without blocking.

        Cost: no allocation; no copy; no sync (never blocks); no dispatch; O(1).
        Raises: nothing."""
        return self._done.is_set()

    def wait(self, timeout: float | None) -> bool:
        """Block up to ``timeout`` seconds; ``True`` iff completion is proven.

        Cost: no allocation; no copy; synchronizes: blocks the calling thread until
        :meth:`complete` or ``timeout`` (``None``: no limit); no dispatch; O(1) besides the wait.
        Raises: nothing."""
        return self._done.wait(timeout)


class RetirementRecord:
    """Provider-private: owns the retirement bindings, event, roots and provider context of
    one admitted submission until completion is proven.

    :meth:`release` (after proven completion) ends every binding's borrow and drops the
    event, root and context references exactly once; a second call raises.  A record whose
    completion cannot be proven is never released: it moves into the context's permanent
    list.

    Cost: no allocation; no copy; no sync; no dispatch; O(1): takes over the bindings and the event.
    Raises: nothing."""

    __slots__ = ("bindings", "context", "event", "extra", "roots", "state")

    def __init__(
        self,
        context: ProviderContext,
        event: ProviderEvent,
        bindings: tuple[ProviderRetirementBinding, ...],
        roots: tuple[RootResource, ...],
    ) -> None:
        self.context: ProviderContext | None = context
        self.event: ProviderEvent | None = event
        self.bindings = bindings
        self.roots = roots
        self.extra: tuple[Any, ...] = ()  # package/outputs kept alive with the record
        self.state = "owned"
        context.count(records_created=1)
        with context.lock:
            context._owned[id(self)] = self

    def release(self) -> None:
        """Release bindings, event, roots and context exactly once (completion proven).

        Cost: no allocation; no copy; no sync (the caller proved completion first; this waits
        for nothing); no dispatch; O(bindings): ends each binding's borrow; a root whose last
        reference this was is released (its allocation freed).
        Raises: RuntimeError (the record is already released or retained)."""
        if self.state != "owned":
            raise RuntimeError(f"RetirementRecord.release: the record is already {self.state}")
        context = self.context
        assert context is not None and self.event is not None
        for b in self.bindings:
            b.release()
        n_bindings, n_roots = len(self.bindings), len(self.roots)
        with context.lock:
            context._owned.pop(id(self), None)
        self.event._released = True
        self.bindings = ()
        self.roots = ()
        self.event = None
        self.context = None
        self.state = "released"
        context.count(
            records_released=1,
            bindings_released=n_bindings,
            roots_released=n_roots,
            events_released=1,
        )

    def retain_permanently(self, *extra: Any) -> None:
        """Completion unproven: keep everything (and ``extra``) for the rest of the process
        (the process-wide permanent list holds the record, its context included).

        Cost: no allocation; no copy; no sync (called because completion could not be proven;
        waits for nothing); no dispatch; O(roots): the roots' bytes are added to
        ``retained_bytes`` and are never freed.
        Raises: RuntimeError (the record is already released or retained)."""
        if self.state != "owned":
            raise RuntimeError(f"RetirementRecord.retain_permanently: already {self.state}")
        self.state = "retained"
        self.extra = extra
        assert self.context is not None
        with self.context.lock:
            self.context._owned.pop(id(self), None)
        self.context._retain(self)

    def __repr__(self) -> str:
        n_b, n_r = len(self.bindings), len(self.roots)
        return f"RetirementRecord({self.state}, {n_b} bindings, {n_r} roots)"
