"""A simulated asynchronous device provider: a worker thread as its queue, events that
complete later, and fault injection at every boundary.

Memory: by default the provider owns a device domain the host cannot read; program
outputs are allocated there (``run_program(..., device=DeviceAdopter(domain))``) and stay
device-resident until ``runtime.download``; inputs are read where they live (its own
domain, or host memory through its host mapping).

Submission (the caller's thread) validates, takes the owning package, derives one
prepared + bound device read per input binding and enqueues a work item; that enqueue
is the admission boundary.  The worker thread (also the reaper) runs the program,
completes the event, proves completion and then either releases the retirement record
exactly once and publishes ``Completed``/``RetiredFailed``, or retains it permanently
and publishes ``CompletionUnproven``.  A dropped handle changes none of this.

Fault injection (tests): :meth:`SimulatedAsyncProvider.inject` queues
:class:`Fault` values consumed one per submission; :attr:`fault_policy` may instead
pick a fault per submission (for randomized stress tests).
"""

from __future__ import annotations

import collections
import enum
import itertools
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Final

from .._access import PreparedDeviceRead
from .._ledger import attributed_to
from .._root import DeviceDomain, RootResource
from .._tensor import Tensor, TensorView
from ..errors import SubmitRejected, TransferError
from ..runtime._engine import (
    HOST_DOMAIN,
    AccessEndpoint,
    AllocationDomainId,
    EngineId,
    ExecutionProvider,
    register_engine,
    unregister_engine,
)
from ..runtime._program import CompiledGraph, run_program
from ..runtime._submission import (
    Completed,
    CompletionError,
    CompletionErrorKind,
    CompletionUnproven,
    DiagnosticKey,
    ExecutionErrorKind,
    ExecutionHandle,
    ExecutionInputs,
    ExecutionOutcome,
    OutcomeCell,
    RetiredFailed,
    ScopedExecutionOutcome,
    ScopedReadInputs,
    SubmitError,
    SubmitErrorKind,
    detached_bundle,
    execution_error,
)
from ._device import (
    DeviceAdopter,
    DeviceCounters,
    DeviceRead,
    ProviderContext,
    ProviderRetirementBinding,
    _bind,
    prepare_read,
)
from ._retirement import ProviderEvent, RetirementRecord
from ._transfers import _Value, download, upload


class Fault(enum.Enum):
    """A fault the simulated provider injects into one submission.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    REJECT_BEFORE_ADMISSION = "reject before admission"
    BIND_FAILURE = "binding fails before enqueue"
    FAIL_AFTER_ENQUEUE = "execution failure after enqueue"
    PANIC_PROVEN = "worker panic after a possible enqueue, completion proven"
    PANIC_UNPROVEN = "worker panic after a possible enqueue, completion unprovable"
    EVENT_NEVER_COMPLETES = "the event never completes"


class SimulatedPanic(BaseException):
    """The injected worker panic (a ``BaseException``: it is not an ordinary error).

    Contained at the worker-thread boundary; never reaches user code."""


class SimulatedDeviceError(RuntimeError):
    """The injected device execution failure."""


class ProviderEnqueueError(RuntimeError):
    """The enqueue-capable call failed (``context.fail_next("enqueue")``): whether the
    device received the work is unknown, so the submission drains."""


class _Closed(Exception):
    """Internal: the provider was closed while a submission was being prepared."""


_SUBMIT: Final = "runtime.submit"
_SUBMISSIONS: Final = itertools.count(1)
_DOMAINS: Final = itertools.count(1)
_MEMORY: Final = ("device", "host-visible")


class _Work:
    __slots__ = (
        "cell", "claimed", "fault", "package", "program", "record", "submission", "thread"
    )

    def __init__(
        self,
        program: CompiledGraph,
        package: ExecutionInputs,
        record: RetirementRecord,
        cell: OutcomeCell,
        fault: Fault | None,
        submission: int,
    ) -> None:
        self.program = program
        self.package: ExecutionInputs | None = package
        self.record = record
        self.cell: OutcomeCell | None = cell
        self.fault = fault
        self.submission = submission
        self.thread = threading.get_ident()  # the submitter: its captures see this work
        self.claimed = False  # set (under the provider lock) by whoever retires it


class SimulatedAsyncProvider(ExecutionProvider):
    """An asynchronous device engine with its own access endpoint and device memory.

    ``memory="device"`` (the default): the provider owns a :class:`DeviceDomain`
    (``domain``, named ``sim-device:<n>``) that the host cannot read.  Program outputs are
    allocated there and stay device-resident until ``download``-ed; inputs may be
    device-resident in this domain (``upload`` puts them there) or host memory, which the
    device reads in place through its host mapping.  ``memory="host-visible"`` models
    unified memory: outputs are host memory (``domain`` is ``None``).

    ``completion_timeout`` (seconds) bounds how long the reaper waits for an event before
    declaring completion unproven.  Use as a context manager to register it as an engine
    for a block (``with SimulatedAsyncProvider() as p: p.engine``) and close it after.

    Cost: no allocation; no copy; no sync; no dispatch until work is submitted; O(1) to construct.
    Raises: ValueError."""

    kind: ClassVar[str] = "sim-async"
    synchronous: ClassVar[bool] = False

    def __init__(
        self, *, completion_timeout: float = 5.0, name: str = "sim-async", memory: str = "device"
    ) -> None:
        if memory not in _MEMORY:
            raise ValueError(
                f"SimulatedAsyncProvider: memory must be one of {_MEMORY}, got {memory!r}"
            )
        self.completion_timeout = completion_timeout
        self.domain: DeviceDomain | None = (
            DeviceDomain(f"sim-device:{next(_DOMAINS)}") if memory == "device" else None
        )
        self._device = DeviceAdopter(self.domain) if self.domain is not None else None
        self.context = ProviderContext(name, self.domain)
        self.fault_policy: Callable[[], Fault | None] | None = None
        self._faults: collections.deque[Fault] = collections.deque()
        self._queue: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending = 0
        self._worker: threading.Thread | None = None
        self._gate = threading.Event()
        self._gate.set()
        self._closed = False
        self.engine: EngineId | None = None

    # -- discovery ----------------------------------------------------------------------
    def endpoint(self, engine: EngineId) -> AccessEndpoint:
        """The endpoint ``sim-queue:<index>`` of ``engine``.

        Cost: allocates the endpoint record; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        return AccessEndpoint(f"sim-queue:{engine.index}")

    def domains(self) -> frozenset[AllocationDomainId]:
        """The host domain and, with device memory, this provider's ``domain``.

        Cost: allocates a small frozenset; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        if self.domain is None:
            return frozenset({HOST_DOMAIN})
        return frozenset({HOST_DOMAIN, AllocationDomainId(self.domain.name)})

    def describe(self) -> str:
        """One line for discovery output.

        Cost: allocates the string; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        memory = (
            f"device memory {self.domain.name} (not host-visible; outputs stay there until "
            "downloaded)"
            if self.domain is not None
            else "host-visible (unified) memory"
        )
        return (
            f"simulated asynchronous device: one worker-thread queue, events, fault "
            f"injection; {memory}"
        )

    # -- transfers ------------------------------------------------------------------------
    def upload(self, value: _Value) -> Tensor[Any, Any]:
        """Copy a host value into this provider's device memory (``providers.upload``):
        one ``TRANSFER`` copy and one ``TRANSFER_DESTINATION`` allocation in ``domain``.
        ``TransferError`` for a host-visible provider (it has no device memory).

        Cost: allocates one device owner in ``domain``; transfers the bytes once (a recorded
        ``TRANSFER``, copied in the calling thread); no sync; no dispatch (nothing goes on the
        worker queue; the host source is mapped once); O(size).
        Raises: TransferError, CopyForbiddenError, BorrowError, UseAfterMoveError, TypeError."""
        if self.domain is None:
            raise TransferError(
                f"upload: {self!r} has host-visible memory; submit host values directly"
            )
        return upload(self.domain, value)

    @staticmethod
    def download(value: _Value) -> Tensor[Any, Any]:
        """Copy a device-resident value to a new host owner (``providers.download``).

        Cost: allocates one host owner; transfers the bytes once (a recorded ``TRANSFER``); no
        sync (it synchronizes only to read an XLA buffer); no dispatch; O(size).
        Raises: TransferError, CopyForbiddenError, DeviceResidentError, BorrowError, TypeError."""
        return download(value)

    @property
    def device_domain(self) -> DeviceDomain | None:
        """The provider's device memory (``domain``); ``None`` when host-visible."""
        return self.domain

    @property
    def counters(self) -> DeviceCounters:
        """The context's counters (read them when the provider is idle, see :meth:`drain`)."""
        return self.context.counters

    @property
    def retained_records(self) -> int:
        """Records retained permanently after unproven completion (observable, never freed)."""
        return self.context.retained_records

    # -- fault injection (tests) ----------------------------------------------------------
    def inject(self, fault: Fault, times: int = 1) -> None:
        """Apply ``fault`` to the next ``times`` submissions (before ``fault_policy``).

        Cost: no allocation (queues ``times`` entries); no copy; no sync (takes the provider
        lock); no dispatch; O(times).
        Raises: nothing."""
        with self._lock:
            self._faults.extend([fault] * times)

    def _next_fault(self) -> Fault | None:
        with self._lock:
            if self._faults:
                return self._faults.popleft()
        policy = self.fault_policy
        return policy() if policy is not None else None

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the queue: admitted work waits (still owned by the worker) until the block
        ends.  Lets tests observe the Running state deterministically.

        Cost: no allocation; no copy; no sync for the caller (the worker waits at the gate before
        each item it takes; an item already running finishes); no dispatch; O(1).
        Raises: nothing."""
        self._gate.clear()
        try:
            yield
        finally:
            self._gate.set()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every admitted submission reached its terminal outcome and the worker
        has dropped its own references to it (``wait()`` may return a moment earlier).

        Cost: no allocation; no copy; synchronizes: blocks until the worker retired every
        admitted submission (``False``: ``timeout`` passed first); no dispatch; O(1) + the wait.
        Raises: nothing."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    # -- submission ---------------------------------------------------------------------
    def submit_detached(
        self, engine: EngineId, program: CompiledGraph, inputs: ExecutionInputs
    ) -> ExecutionHandle:
        """Admit ``inputs`` and enqueue the program on the worker thread; return at once.

        Here: one prepared + bound device read per binding (inputs are read where they live),
        the retirement record, then the enqueue (the admission boundary).  A refusal before it
        raises ``SubmitRejected`` with the exact ``inputs``; later failures are outcomes.

        Cost: no allocation here (the worker allocates the fresh outputs in ``domain``); no copy
        (the package moves in); no sync (``ExecutionHandle.wait`` or :meth:`drain` synchronizes);
        dispatches the program to the worker queue; O(bindings) in the caller.
        Raises: SubmitRejected."""
        ctx = self.context
        fault = self._next_fault()
        if fault is Fault.REJECT_BEFORE_ADMISSION or self._closed:
            ctx.count(rejections=1)
            why = "the provider is closed" if self._closed else "injected admission refusal"
            raise SubmitRejected(
                SubmitError(SubmitErrorKind.PROVIDER_REJECTED, _SUBMIT, f"{engine}: {why}"),
                inputs,
            )
        package = inputs._take(_SUBMIT)
        # Before the enqueue-capable call: derive the prepared bindings and build the
        # retirement record.  Nothing can have been enqueued, so any failure -- of any
        # exception type -- hands the exact package back (an interrupt then propagates).
        bound: list[Any] = []
        record: RetirementRecord | None = None
        try:
            self._bind_inputs(package, fault is Fault.BIND_FAILURE, bound)
            cell = OutcomeCell()
            with self._lock:  # closing takes this lock too: no work can follow the stop marker
                if self._closed:
                    raise _Closed
                if self._worker is None:
                    self._worker = threading.Thread(
                        target=self._run, name=f"{ctx.name}-worker", daemon=True
                    )
                    self._worker.start()
                event = ProviderEvent(ctx)
                bindings = tuple(
                    b._successor(ProviderRetirementBinding, "enqueue") for b in bound
                )
                bound.clear()
                record = RetirementRecord(ctx, event, bindings, package._roots())
                work = _Work(program, package, record, cell, fault, next(_SUBMISSIONS))
                self._pending += 1
        except BaseException as exc:
            for b in bound:
                b.release()
            if record is not None and record.state == "owned":  # never enqueued: proven
                assert record.event is not None
                record.event.complete()
                record.release()
            inputs._give_back(package)
            if not isinstance(exc, Exception):
                raise
            ctx.count(rejections=1)
            kind, why = (
                (SubmitErrorKind.PROVIDER_REJECTED, f"{engine}: the provider is closed")
                if isinstance(exc, _Closed)
                else (SubmitErrorKind.BIND_FAILED, f"{type(exc).__name__}: {exc}")
            )
            raise SubmitRejected(SubmitError(kind, _SUBMIT, why), inputs) from None
        # The enqueue-capable call: the admission boundary.  From here on only outcomes.
        try:
            if ctx._fault("enqueue"):
                raise ProviderEnqueueError(f"{engine}: injected enqueue failure")
            ctx.count(enqueues=1)
            self._queue.put(work)
        except BaseException as exc:
            self._enqueue_failed(work, inputs, exc)
        return ExecutionHandle._make(engine, cell)

    def _bind_inputs(self, package: ExecutionInputs, fail_bind: bool, bound: list[Any]) -> None:
        """One prepared + bound device read per binding, appended to ``bound`` (so the
        caller can release them if a later one fails).  ``AccessError``/``BindError``
        leave nothing half-made behind."""
        ctx = self.context
        group = package._group
        assert group is not None
        descs, allocations, rec_alloc = group._descs, group._allocations, group._rec_alloc
        for slot in package._bindings:
            # A shared borrow of the task-owned group for this binding (the slot was
            # resolved by the runtime's validation; no call-site capture on this path).
            i = slot._index
            group._shared += 1
            group._who = "device binding"
            group._site = None
            storage, desc = allocations[rec_alloc[i]], descs[i]
            assert storage is not None and desc is not None
            view = TensorView._make(group, storage, desc)
            try:
                prepared = prepare_read(ctx, view)
            except BaseException:
                if view._lender is not None:
                    view.release()
                raise
            try:
                bound.append(_bind(prepared, PreparedDeviceRead, DeviceRead, fail_bind))
            except BaseException:
                prepared.release()
                raise

    def _enqueue_failed(self, work: _Work, inputs: ExecutionInputs, exc: BaseException) -> None:
        """The enqueue-capable call raised, so the work may or may not be on the queue: it
        enters Draining.  Whoever claims it first owns its retirement: if the worker did,
        it runs and retires as usual; if this thread does, the worker will skip it, so
        nothing ran and completion is proven -- the record is released once and the
        outcome is ``RetiredFailed`` with the exact package (an interrupt instead hands the
        package back to ``inputs`` and propagates)."""
        with self._lock:
            mine = not work.claimed
            work.claimed = True
        if not mine:
            if not isinstance(exc, Exception):
                raise exc  # the worker retires the work; the handle is dropped (detached)
            return
        record, package, cell = work.record, work.package, work.cell
        work.package = work.cell = None
        assert record.event is not None and package is not None and cell is not None
        record.event.complete()  # the queue entry is cancelled: nothing will run
        record.release()
        with self._idle:
            self._pending -= 1
            self._idle.notify_all()
        if not isinstance(exc, Exception):
            inputs._give_back(package)
            raise exc
        cause = execution_error(ExecutionErrorKind.PROVIDER_FAILED, "enqueue", exc)
        cell.publish(RetiredFailed(cause, package))

    def execute_scoped(
        self, engine: EngineId, program: CompiledGraph, inputs: ScopedReadInputs
    ) -> ScopedExecutionOutcome:
        """Never reached: ``execute_scoped_read_only`` refuses an asynchronous engine first.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: NotImplementedError (always)."""
        raise NotImplementedError(  # the runtime rejects before admission; never reached
            "execute_scoped: the simulated provider is asynchronous"
        )

    # -- worker (queue + reaper) ------------------------------------------------------------
    def _run(self) -> None:
        while True:
            work = self._queue.get()
            if work is None:
                return
            self._gate.wait()
            with self._lock:
                if work.claimed:  # a failed enqueue already drained it (see _enqueue_failed)
                    continue
                work.claimed = True
            try:
                with attributed_to(work.thread):
                    self._process(work)
            except BaseException as exc:
                self._contain(work, exc)
            finally:
                del work
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def _contain(self, work: _Work, exc: BaseException) -> None:
        """The reaper itself failed: nothing about completion can be claimed any more, so
        the record is retained for good and the observer (if any) gets CompletionUnproven."""
        if work.record.state == "owned":
            if work.package is not None and work.package._group is not None:
                _keep_roots(work.record, work.package._all_roots())
            work.record.retain_permanently(work.package)
        work.package = None
        cell = work.cell
        work.cell = None
        if cell is not None and not cell._done.is_set():
            cell.publish(
                CompletionUnproven(
                    CompletionError(
                        CompletionErrorKind.PANIC, f"reaper failure: {type(exc).__name__}: {exc}"
                    ),
                    (DiagnosticKey("submission", str(work.submission)),),
                )
            )

    def _process(self, work: _Work) -> None:
        ctx = self.context
        record = work.record
        program = work.program
        fault = work.fault
        fresh: dict[int, Any] = {}
        cause = None
        try:
            ctx.count(dispatches=1)
            if fault is Fault.FAIL_AFTER_ENQUEUE:
                raise SimulatedDeviceError("injected device execution failure")
            if fault is Fault.PANIC_PROVEN or fault is Fault.PANIC_UNPROVEN:
                raise SimulatedPanic("injected worker panic")
            fresh = run_program(
                program, [b._kernel_array() for b in record.bindings], device=self._device
            )
        except SimulatedPanic as exc:  # contained at the worker-thread boundary
            cause = execution_error(ExecutionErrorKind.PANIC, "worker", exc)
        except SimulatedDeviceError as exc:
            cause = execution_error(ExecutionErrorKind.PROVIDER_FAILED, "device", exc)
        except BaseException as exc:
            cause = execution_error(
                ExecutionErrorKind.KERNEL_FAILED, program.name or "program", exc
            )
        # The device side signals its event unless the fault says it never will.
        assert record.event is not None
        if fault is not Fault.EVENT_NEVER_COMPLETES and fault is not Fault.PANIC_UNPROVEN:
            record.event.complete()
        # Draining: prove completion before anything is released or returned.
        outcome: ExecutionOutcome
        if not record.event.wait(self.completion_timeout):
            kind = (
                CompletionErrorKind.PANIC
                if fault is Fault.PANIC_UNPROVEN
                else CompletionErrorKind.EVENT_TIMEOUT
            )
            out_roots = tuple(r for t in fresh.values() if (r := t._storage._root) is not None)
            assert work.package is not None
            _keep_roots(record, work.package._all_roots() + out_roots)
            record.retain_permanently(work.package, fresh)
            work.package = None
            outcome = CompletionUnproven(
                CompletionError(
                    kind,
                    f"no completion within {self.completion_timeout} s; the retirement record "
                    "is retained permanently",
                ),
                (
                    DiagnosticKey("engine", str(self.engine) if self.engine else ctx.name),
                    DiagnosticKey("submission", str(work.submission)),
                    DiagnosticKey("bindings", str(len(record.bindings))),
                    DiagnosticKey("roots", str(len(record.roots))),
                ),
            )
        else:
            record.release()
            package = work.package
            work.package = None
            assert package is not None
            if cause is None:
                outcome = Completed(detached_bundle(program, package, fresh))
            else:
                fresh.clear()
                outcome = RetiredFailed(cause, package)
            del package
        cell = work.cell
        work.cell = None
        assert cell is not None
        cell.publish(outcome)
        del outcome, cell, fresh

    # -- lifetime -----------------------------------------------------------------------------
    def close(self, timeout: float | None = 30.0) -> None:
        """Refuse new submissions, let admitted work reach its outcomes, stop the worker.

        Cost: no allocation; no copy; synchronizes: opens a :meth:`hold` gate and joins the
        worker for up to ``timeout`` seconds (then returns, the worker still running); no
        dispatch of new work; O(1) besides the wait.
        Raises: nothing."""
        with self._lock:
            self._closed = True
            worker = self._worker
            self._worker = None
            if worker is not None:
                self._queue.put(None)  # after every admitted work item
        self._gate.set()
        if worker is not None:
            worker.join(timeout)

    def __enter__(self) -> SimulatedAsyncProvider:
        self.engine = register_engine(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        if self.engine is not None:
            unregister_engine(self.engine)

    def __repr__(self) -> str:
        return f"SimulatedAsyncProvider({self.context.name!r})"


def _keep_roots(record: RetirementRecord, roots: tuple[RootResource, ...]) -> None:
    """Add ``roots`` the record does not name yet (it keeps them alive and counts them)."""
    seen = {id(r) for r in record.roots}
    record.roots = record.roots + tuple(r for r in roots if id(r) not in seen)


def roots_of(record: RetirementRecord) -> tuple[RootResource, ...]:
    """The roots a record keeps alive (diagnostics/tests)."""
    return record.roots
