"""The XLA execution provider: compiled XLA executables on one JAX device per engine.

Registered only when ``jax`` is installed (the ``[xla]`` extra); without it nothing here
runs and discovery lists no ``xla`` engine.

Memory
    Every result of an execution is one XLA buffer owned by a root of the engine's
    :class:`~tenferro_storage._root.ExternalDomain` (``xla-<platform>:<device id>``): one
    ``OPERATION_OUTPUT`` allocation event per fresh result, one release when its owner
    goes, and the buffer is deleted right then (``free``: deterministic, not left to
    JAX's garbage).  On the CPU the host reads such a buffer in place: a zero-copy
    read-only borrow (``to_numpy()`` is still its one recorded copy); a host write is
    refused (``DeviceResidentError``) -- ``runtime.download`` is the recorded
    ``TRANSFER`` to a writable host owner.  Each execution also records one
    ``OPERATION_OUTPUT`` allocation named ``"<program> scratch @<domain>"``, sized by
    XLA's memory analysis (released at
    retirement) when the executable needs temporaries.

Inputs
    A whole-buffer owner of this engine's domain is passed as its XLA buffer (no copy).
    A host owner that is C-contiguous and 64-byte aligned is imported zero-copy: XLA
    reads the owner's bytes in place, under the submission's borrow until retirement.
    Anything else (a strided view, a misaligned buffer, another engine's buffer made
    host-readable) crosses as exactly one recorded ``TRANSFER`` copy.  Donated inputs
    must be this engine's own buffers with no host view ever taken: XLA then writes the
    result into the same bytes (the input's record holds the result; no allocation).

Programs
    Only :class:`~tenferro_storage.runtime.ExecutableProgram` of kind ``"xla"`` made by
    :meth:`XlaProvider.compile`; a ``CompiledGraph`` (host kernels) is refused at
    submission -- there is no host fallback.

Types
    Programs keep numpy's types (float64 stays float64) whatever the user's
    ``jax_enable_x64``: compile, upload and execution run under JAX's thread-local
    ``enable_x64`` (``_xla_support.call_x64``), so the user's own JAX code keeps its setting.

A call over whole owners
    ``prepare_scoped`` makes a :class:`~._xla_call.ScopedCall` per program: what
    ``execute_scoped`` checks and formats per call is done once; the events are the same.

Completion
    Asynchronous: execution is enqueued on XLA's stream and the submission returns a
    handle.  Completion is proven from buffer readiness (``block_until_ready``) either
    by the engine's reaper thread or by the first ``wait()``, whichever comes first (a
    ``wait(timeout)`` retires only results already ready, so it keeps its timeout);
    then the retirement record is released (the input borrows end) and the outcome is
    published exactly once.
"""

from __future__ import annotations

import itertools
import queue
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Final

import numpy as np

from .. import _descriptor
from .._dtypes import _BY_NUMPY, DType, from_numpy_dtype
from .._ledger import LEDGER, AllocationReason, CopyReason, attributed_to
from .._root import (
    ALIGNMENT,
    ExternalDomain,
    ExternalMemory,
    adopt_external,
    aligned_copy,
)
from .._tensor import Tensor, TensorView
from ..errors import AccessError, BindError, SubmitRejected, TransferError
from ..runtime._engine import (
    HOST_DOMAIN,
    AccessEndpoint,
    AllocationDomainId,
    EngineId,
    ExecutionProvider,
)
from ..runtime._executable import ExecutableProgram
from ..runtime._program import ProgramOutput
from ..runtime._submission import (
    ExecutionHandle,
    ExecutionInputs,
    OutcomeCell,
    ScopedExecutionOutcome,
    ScopedReadInputs,
    SubmitError,
    SubmitErrorKind,
)
from ._device import (
    DeviceRead,
    ProviderContext,
    ProviderRetirementBinding,
    _bind,
    prepare_read,
)
from ._retirement import ProviderEvent, RetirementRecord
from ._xla_call import ScopedCall, execute_scoped
from ._xla_retire import finish, hand_back
from ._xla_support import (
    XlaCounters,
    _free,
    _host_view,
    _Namespace,
    _ready,
    _ReadyEvent,
    _Work,
    call_x64,
    jax_module,
)

_SUBMIT: Final = "runtime.submit"
_DOMAINS: Final = itertools.count()


class XlaProvider(ExecutionProvider):
    """One JAX device as an asynchronous engine running XLA executables (see the module
    docstring).  ``device`` is a ``jax.Device``; ``namespace`` is what lowering rules
    receive; :meth:`compile` makes this engine's programs.

    Cost: no allocation; no copy; no sync; no dispatch until a program is compiled or run; O(1) to
    construct.
    Raises: nothing."""

    kind: ClassVar[str] = "xla"
    synchronous: ClassVar[bool] = False
    retires_scoped: ClassVar[bool] = True
    supports_donation: ClassVar[bool] = True
    verify_zero_copy: bool = False
    """Import aligned host inputs with ``jax.device_put`` and compare buffer addresses,
    recording a ``TRANSFER`` if XLA copied after all (tests); off: the executable imports
    them itself (its C++ path: about ten times cheaper per input)."""

    def __init__(self, device: Any) -> None:
        jax = jax_module()
        if jax is None:
            raise TransferError("XlaProvider: jax is not installed (pip install 'tenferro[xla]')")
        self._jax = jax
        self.device = device
        self.platform = str(device.platform)
        self.domain = ExternalDomain(
            f"xla-{self.platform}:{device.id}",
            host_readable=self.platform == "cpu",
            host_view=_host_view,
            free=_free,
        )
        self.context = ProviderContext(f"xla:{device.id}", self.domain)
        self.counters = XlaCounters()
        self.namespace = _Namespace(jax)
        self._queue: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._idle = threading.Condition(self._lock)
        self._pending = 0

    # -- discovery ------------------------------------------------------------------------
    def endpoint(self, engine: EngineId) -> AccessEndpoint:
        """The access endpoint ``xla-stream:<platform>:<device id>`` of this engine.

        Cost: allocates the endpoint record; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        return AccessEndpoint(f"xla-stream:{self.platform}:{self.device.id}")

    def domains(self) -> frozenset[AllocationDomainId]:
        """The host domain and this engine's XLA buffer domain.

        Cost: allocates a two-element frozenset; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        return frozenset({HOST_DOMAIN, AllocationDomainId(self.domain.name)})

    @property
    def device_domain(self) -> ExternalDomain:
        """The XLA buffers of this engine (``runtime.upload`` puts values there). O(1)."""
        return self.domain

    def describe(self) -> str:
        """One line for discovery output.

        Cost: allocates the string; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        where = "host-readable in place" if self.domain.host_readable else "not host-visible"
        return (
            f"XLA executables on jax device {self.platform}:{self.device.id}; asynchronous "
            f"(completion from buffer readiness); buffers in {self.domain.name} ({where})"
        )

    def accepts(self, program: object) -> bool:
        """Whether ``program`` is an :class:`ExecutableProgram` of kind ``"xla"`` (a
        ``CompiledGraph`` is refused: no host fallback).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        return type(program) is ExecutableProgram and program.engine_kind == self.kind

    # -- compilation ------------------------------------------------------------------------
    def compile(
        self,
        fn: Callable[..., Sequence[Any]],
        avals: Sequence[tuple[tuple[int, ...], np.dtype[Any]]],
        outputs: tuple[ProgramOutput, ...],
        n_results: int,
        *,
        name: str = "",
        donated: tuple[int, ...] = (),
        backing: tuple[tuple[int, int], ...] = (),
        description: str = "",
    ) -> ExecutableProgram:
        """Compile ``fn`` (jax arrays in, a tuple of ``n_results`` jax arrays out) for
        ``avals`` on this device into an :class:`ExecutableProgram`; its scratch size is
        XLA's memory analysis of temporaries.  ``donated`` inputs are aliased to the
        results ``backing`` names.

        Cost: no allocation of tensor memory (the executable lives in XLA); no copy; no sync; no
        dispatch (nothing runs); O(program): one XLA compilation, milliseconds to seconds.

        Raises:
            ProgramError: ``outputs``, ``donated`` or ``backing`` do not fit the results.
            UserWarning: XLA cannot use a donation (its warning is raised as an error).
            Exception: what tracing ``fn`` or XLA's compiler raises, unchanged.
        """
        jax = self._jax
        placed = jax.sharding.SingleDeviceSharding(self.device)
        specs = [jax.ShapeDtypeStruct(tuple(s), np.dtype(d), sharding=placed) for s, d in avals]
        with jax.enable_x64(True):
            jitted = jax.jit(fn, donate_argnums=donated)
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # an unusable donation must not pass silently
                compiled = jitted.lower(*specs).compile()
        analysis = compiled.memory_analysis()
        scratch = int(getattr(analysis, "temp_size_in_bytes", 0) or 0)
        return ExecutableProgram(
            self.kind, compiled, len(specs), n_results, outputs, name,
            donated, backing, scratch, description,
        )

    # -- transfers ------------------------------------------------------------------------
    def upload(self, value: Tensor[Any, Any] | TensorView[Any, Any]) -> Tensor[Any, Any]:
        """Copy a host value into a new XLA buffer of this engine (``runtime.upload``): one
        ``TRANSFER`` copy (XLA copies a read-only host array) and one
        ``TRANSFER_DESTINATION`` allocation in the engine's domain. O(size).

        Cost: allocates one XLA buffer in ``domain``; transfers the bytes once (``jax.device_put``;
        the ``TRANSFER`` is recorded when it is issued); no sync (the put may complete after the
        return); no dispatch (no program runs); O(size).
        Raises:
            TransferError: ``value`` is not on the host.
            CopyForbiddenError: inside ``ledger.forbid_copies()``.
            BorrowError: ``value`` is mutably borrowed.
            UseAfterMoveError: ``value`` was consumed.
            ExpiredBorrowError: ``value`` is a released view.
        """
        view = value.as_view()
        try:
            desc = view._d("upload")
            root = view._storage._root
            if root is not None and root.domain != "host":
                raise TransferError(
                    f"upload: {view._storage.span} lives in {root.domain!r}, not on the host; "
                    "download() it first"
                )
            LEDGER.check_copy_allowed(f"upload (host -> {self.domain.name})")
            arr = desc.readonly()
            handle = self._put(arr)
            t = self._own(handle, AllocationReason.TRANSFER_DESTINATION, "upload")
            LEDGER.copy(CopyReason.TRANSFER, arr.nbytes, f"upload host -> {self.domain.name}")
            return t
        finally:
            view.release()

    def _alias(self, d: Any, operation: str) -> Any:
        """An XLA buffer over the aligned contiguous host bytes of descriptor ``d``, made
        once and cached on ``d`` by the prepared call: XLA reads the bytes in place at
        each execution (what passing the numpy array does, without re-importing it per
        call), never writes them, and the alias keeps nothing alive beyond ``d``.
        ``None`` when XLA copied instead (the copy is recorded as the ``TRANSFER`` it is
        and discarded; later calls import the array per call). O(1) or O(size)."""
        arr = d.array()
        handle = self._put(arr)
        if handle.unsafe_buffer_pointer() == arr.ctypes.data or arr.size == 0:
            return handle
        LEDGER.copy(CopyReason.TRANSFER, arr.nbytes, f"{operation} host -> "
                    f"{self.domain.name} (XLA copied an aligned input)")
        return None

    def _put(self, arr: np.ndarray[Any, Any]) -> Any:
        with self._jax.enable_x64(True):
            return self._jax.device_put(arr, self.device)

    def _own(self, handle: Any, reason: AllocationReason, operation: str) -> Tensor[Any, Any]:
        """A new owner of a fresh XLA buffer: one allocation event. O(1)."""
        dtype = np.dtype(handle.dtype)
        dt = _BY_NUMPY.get(dtype) or from_numpy_dtype(dtype, operation)
        storage = adopt_external(self.domain, handle, int(handle.nbytes), reason, operation)
        root = storage._root
        assert root is not None
        d = _descriptor.fresh_shaped(dt, tuple(handle.shape), root)
        self.domain.counters.validations += 1
        t: Tensor[Any, Any] = Tensor.__new__(Tensor)
        t._init_lender()
        t._storage = storage
        t._desc = d
        return t

    def _import(self, binding: ProviderRetirementBinding, operation: str) -> Any:
        return self._import_desc(binding._check(operation), operation)

    def _import_desc(self, d: Any, operation: str) -> Any:
        """The XLA buffer a value is read from: its own (resident), a zero-copy import of
        aligned contiguous host bytes, or one recorded ``TRANSFER`` copy. O(1) or O(size)."""
        buf = d.buffer
        counters = self.counters
        if type(buf) is ExternalMemory and buf.domain is self.domain:
            if d.start == 0 and d.offset == 0 and d.stop == buf.nbytes and \
                    d.size * d.dtype.itemsize == buf.nbytes and d.strides == \
                    _descriptor._whole_meta(d.shape)[0] and d.shape == tuple(buf._handle.shape):
                counters.inputs_resident += 1
                return buf._handle
            arr = d.readonly()  # a view of this engine's buffer (CPU): copied below
        elif type(buf) is np.ndarray:
            arr = d.array()  # XLA only reads it (not donated); borrowed until retirement
            if d.importable_in_place():
                if not self.verify_zero_copy:
                    counters.imports_zero_copy += 1
                    return arr  # the executable imports it in place (XLA's aligned import)
                handle = self._put(arr)
                if handle.unsafe_buffer_pointer() == arr.ctypes.data or arr.size == 0:
                    counters.imports_zero_copy += 1
                    return handle
                LEDGER.copy(CopyReason.TRANSFER, arr.nbytes, f"{operation} host -> "
                            f"{self.domain.name} (XLA copied an aligned input)")
                counters.imports_transferred += 1
                return handle
        else:
            arr = d.readonly()  # another host-readable external buffer
        LEDGER.check_copy_allowed(f"{operation} (host -> {self.domain.name})")
        copy = aligned_copy(arr, arr.dtype)  # the one copy; XLA imports it in place
        LEDGER.copy(CopyReason.TRANSFER, arr.nbytes,
                    f"{operation} host -> {self.domain.name} (unaligned or strided input)")
        counters.imports_transferred += 1
        return copy

    # -- submission ---------------------------------------------------------------------------
    def _refuse(self, inputs: ExecutionInputs, kind: SubmitErrorKind, message: str) -> None:
        self.counters.rejections += 1
        self.context.count(rejections=1)
        raise SubmitRejected(SubmitError(kind, _SUBMIT, message), inputs)

    def _donation_refusal(self, program: ExecutableProgram, inputs: ExecutionInputs) -> str:
        group = inputs._group
        assert group is not None
        for k in program.donated:
            desc = group._descs[inputs._bindings[k]._index]
            assert desc is not None
            buf: Any = desc.buffer  # a host array, or the ExternalMemory of a device root
            if type(buf) is not ExternalMemory or buf.domain is not self.domain:
                return (f"input {k} is donated but lives in {getattr(buf, 'domain', 'host')}; "
                        f"XLA reuses only its own buffers ({self.domain.name})")
            if buf.host_viewed:
                return (f"input {k} is donated but the host has read its buffer in place (a "
                        "zero-copy view may still be alive); XLA would copy instead of reusing")
            if tuple(desc.shape) != tuple(buf._handle.shape) or desc.offset or desc.start:
                return f"input {k} is donated but is a view, not its whole buffer"
        return ""

    def donation_refusal(self, value: object) -> str:
        """Why ``value`` cannot be donated to this engine (``""``: it can): XLA reuses only
        a whole buffer of its own that the host never viewed in place. O(1).

        Cost: no allocation (a message string when refused); no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        if not isinstance(value, Tensor):
            return (f"{type(value).__name__} is not an owner of a {self.domain.name} buffer; "
                    "XLA reuses only its own buffers (donate a result of this engine)")
        root = value._storage._root if value._storage is not None else None
        buf = root._allocation if root is not None else None
        if type(buf) is not ExternalMemory or buf.domain is not self.domain:
            return (f"it lives in {root.domain if root is not None else 'no domain'}, not in "
                    f"{self.domain.name}; XLA reuses only its own buffers")
        if buf.host_viewed:
            return ("the host has read its buffer in place (a zero-copy view may still be "
                    "alive), so XLA would copy instead of reusing it")
        return ""

    def submit_detached(
        self, engine: EngineId, program: Any, inputs: ExecutionInputs
    ) -> ExecutionHandle:
        """Admit ``inputs``, enqueue the executable on the device and return at once.

        Inputs: a whole buffer of this engine is passed as is; an aligned C-contiguous host
        owner is imported in place (borrowed until retirement); anything else is copied once
        (a recorded ``TRANSFER``).  A donated input's result lands in its own buffer.  The
        executable call is asynchronous: completion is proven from buffer readiness
        (``block_until_ready``) by the engine's reaper thread or by the first
        ``ExecutionHandle.wait``, whichever comes first; then the record is released and the
        outcome published.  A refused donation or a failed preparation/binding (before
        admission) raises ``SubmitRejected`` with the exact ``inputs``; every later failure
        (``CopyForbiddenError`` for a needed ``TRANSFER``, an enqueue or XLA failure) is the
        ``RetiredFailed`` outcome; an interrupt before the executable ran hands the package
        back to ``inputs`` and propagates.

        Cost: allocates one XLA buffer per fresh result (owned and recorded at retirement) and
        records the scratch allocation now (released at retirement); transfers only inputs
        that cannot be imported in place (one recorded ``TRANSFER`` each), no copy otherwise;
        no sync (``ExecutionHandle.wait`` or :meth:`drain` synchronizes); dispatches the
        executable on the device; O(bindings) in the caller.
        Raises: SubmitRejected."""
        if program.donated:
            why = self._donation_refusal(program, inputs)
            if why:
                self._refuse(inputs, SubmitErrorKind.DONATION, why)
        ctx = self.context
        package = inputs._take(_SUBMIT)
        group = package._group
        assert group is not None
        bound: list[DeviceRead] = []
        try:
            descs, allocations, rec_alloc = group._descs, group._allocations, group._rec_alloc
            for slot in package._bindings:
                i = slot._index
                group._shared += 1
                group._who = "xla binding"
                group._site = None
                storage, desc = allocations[rec_alloc[i]], descs[i]
                assert storage is not None and desc is not None
                view = TensorView._make(group, storage, desc)
                try:
                    prepared = prepare_read(ctx, view)
                except BaseException:
                    view.release()
                    raise
                bound.append(_bind(prepared, type(prepared), DeviceRead))
        except BaseException as exc:
            # Nothing was admitted: the caller's package is whole again, whatever was raised
            # (an interrupt propagates with ``inputs`` usable; any other error is a refusal).
            for b in bound:
                b.release()
            inputs._give_back(package)
            if not isinstance(exc, Exception):
                raise
            message = str(exc) if isinstance(exc, AccessError | BindError) else (
                f"{type(exc).__name__}: {exc}")
            self._refuse(inputs, SubmitErrorKind.BIND_FAILED, message)
        event = ProviderEvent(ctx)
        bindings = tuple(b._successor(ProviderRetirementBinding, "enqueue") for b in bound)
        record = RetirementRecord(ctx, event, bindings, package._roots())
        work = _Work()
        work.program = program
        work.package = package
        work.record = record
        work.results = None
        work.scratch = 0
        work.thread = threading.get_ident()
        work.inputs = None
        work.donated_ptrs = {}
        cell = OutcomeCell()
        cell._done = _ReadyEvent(  # type: ignore[assignment]
            lambda: self._retire(work), lambda: _ready(work))
        work.cell = cell
        self.counters.submissions += 1
        # Admission boundary: from here on every failure is an outcome (Draining): a
        # failed input preparation or enqueue is PROVIDER_FAILED, the executable's own
        # failure KERNEL_FAILED; the record and package retire through the reaper.
        work.where = "input preparation"
        interrupt: BaseException | None = None
        try:
            ctx.count(enqueues=1, dispatches=1)
            operation = program.name or "xla program"
            work.inputs = [self._import(b, operation) for b in bindings]
            work.donated_ptrs = {
                k: work.inputs[k].unsafe_buffer_pointer() for k in program.donated
            }
            if program.scratch_bytes:
                work.scratch = LEDGER.allocate(
                    AllocationReason.OPERATION_OUTPUT, program.scratch_bytes,
                    f"{operation} scratch @{self.domain.name}",
                )
            work.where = "enqueue"
            if ctx._fault("enqueue"):
                raise RuntimeError(f"{ctx.name}: injected enqueue failure")
            work.where = ""
            work.results = call_x64(self._jax, program.executable, *work.inputs)
            self.counters.executions += 1
        except BaseException as exc:  # a post-admission failure of any type: Draining
            if not isinstance(exc, Exception):
                if work.where:  # an interrupt before the executable ran: nothing enqueued
                    hand_back(work, inputs)
                    raise
                interrupt = exc
            work.results = exc
        with self._lock:
            self._pending += 1
            if self._worker is None:
                self._worker = threading.Thread(
                    target=self._reap, name=f"{ctx.name}-reaper", daemon=True
                )
                self._worker.start()
        self._queue.put(work)
        if interrupt is not None:
            # An interrupt while the executable was being enqueued (it may have run): the
            # reaper retires the work as for a dropped handle (record released once, the
            # package's owners dropped with the outcome); the interrupt propagates (this
            # frame's reference to it dropped: its traceback holds the frame).
            try:
                raise interrupt
            finally:
                del interrupt
        return ExecutionHandle._make(engine, cell)

    def prepare_scoped(
        self, program: object, signature: Sequence[tuple[tuple[int, ...], DType]]
    ) -> ScopedCall | None:
        """A :class:`ScopedCall` of ``program`` over whole owners of ``signature`` (each
        input's shape and dtype): the checks that depend only on the program done once
        (``None``: not this engine's program, or it donates -- use
        ``runtime.execute_scoped_read_only``).

        Cost: allocates the :class:`ScopedCall` record (formats its labels once); no copy; no
        sync; no dispatch (nothing runs until it is called); O(inputs).
        Raises: nothing."""
        if not self.accepts(program):
            return None
        assert isinstance(program, ExecutableProgram)
        return None if program.donated else ScopedCall(self, program, signature)

    def execute_scoped(
        self, engine: EngineId, program: Any, inputs: ScopedReadInputs
    ) -> ScopedExecutionOutcome:
        """Run over the caller's borrowed views and wait for the buffers before returning
        (the work retires inside the call, so no borrow is outlived).

        Inputs are imported as in :meth:`submit_detached`; every failure (a needed ``TRANSFER``
        inside ``ledger.forbid_copies()`` included) is the returned ``RetiredFailed``; an
        interrupt propagates once XLA is done with the views.

        Cost: allocates one XLA buffer per fresh result and the scratch allocation (released
        before the return); transfers only inputs that cannot be imported in place (one
        recorded ``TRANSFER`` each), no copy otherwise; synchronizes: waits for the result
        buffers (``block_until_ready``); dispatches the executable on the device; O(views + the
        program's work).
        Raises: nothing."""
        return execute_scoped(self, program, inputs)

    # -- completion ---------------------------------------------------------------------------
    def _reap(self) -> None:
        while True:
            work = self._queue.get()
            if work is None:
                return
            try:
                self._retire(work)
            finally:
                del work
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def _retire(self, work: _Work) -> None:
        """Prove completion (buffer readiness), release the record, publish the outcome.
        Runs once per work item, in the reaper or the first waiter, whichever is first."""
        if not work.lock.acquire(blocking=False):
            return  # the other side is retiring it; the waiter then waits for the event
        try:
            if work.record is None:
                return
            with attributed_to(work.thread):
                finish(self, work)
        finally:
            work.lock.release()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every admitted execution retired (tests). O(pending).

        ``True`` once idle, ``False`` when ``timeout`` (seconds; ``None``: no limit) passed first.

        Cost: no allocation; no copy; synchronizes: blocks until the reaper (or a waiter) proved
        every admitted execution's readiness and retired it; no dispatch; O(1) besides the wait.
        Raises: nothing."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def __repr__(self) -> str:
        return f"XlaProvider({self.platform}:{self.device.id})"


def xla_providers() -> list[ExecutionProvider]:
    """One :class:`XlaProvider` per JAX device this process addresses (``jax.local_devices()``;
    none without jax).  Imports jax and starts its backends.

    Cost: no allocation; no copy; no sync; no dispatch; O(JAX devices); imports jax.
    Raises: nothing."""
    jax = jax_module()
    if jax is None:
        return []
    return [XlaProvider(d) for d in jax.local_devices()]


__all__ = ["ALIGNMENT", "XlaCounters", "XlaProvider", "jax_module", "xla_providers"]
