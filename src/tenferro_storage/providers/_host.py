"""The host execution provider: numpy kernels, synchronous through retirement.

It wraps the storage kernel's host provider (``tenferro_storage.host_provider``): input
access goes through ``prepare_host()`` (counted resolve/map/sync on that provider) and all
work retires before ``submit`` or ``execute_scoped_read_only`` returns.  It is the only
provider that accepts scoped read-only execution.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np

from .._provider import HostProvider
from ..errors import ScopedSubmitRejected, SubmitRejected
from ..runtime._engine import (
    HOST_DOMAIN,
    AccessEndpoint,
    AllocationDomainId,
    EngineId,
    ExecutionProvider,
)
from ..runtime._program import CompiledGraph, run_program
from ..runtime._submission import (
    Completed,
    ExecutionErrorKind,
    ExecutionHandle,
    ExecutionInputs,
    OutcomeCell,
    RetiredFailed,
    ScopedExecutionOutcome,
    ScopedReadInputs,
    SubmitError,
    SubmitErrorKind,
    detached_bundle,
    execution_error,
    scoped_bundle,
)


@attrs.define
class HostRuntimeCounters:
    """Per-submission work of the host engine (flat in element count).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    submissions: int = 0
    rejections: int = 0
    prepares: int = 0
    dispatches: int = 0

    def snapshot(self) -> dict[str, int]:
        """A copy of the counters as a dict.

        Cost: allocates one dict; no copy of tensor bytes; no sync; no dispatch; O(counters).
        Raises: nothing."""
        return attrs.asdict(self)


def _package_arrays(package: ExecutionInputs) -> list[np.ndarray[Any, Any]]:
    """Host access to every binding of a package the task owns exclusively.

    Per binding: one provider map/synchronize (may fail, before any kernel runs) and the
    descriptor's cached read-only array; nothing is re-validated. O(bindings).
    """
    group = package._group
    assert group is not None
    descs, allocations, rec_alloc = group._descs, group._allocations, group._rec_alloc
    arrays = []
    for slot in package._bindings:
        i = slot._index
        storage = allocations[rec_alloc[i]]
        desc = descs[i]
        assert storage is not None and storage._root is not None and desc is not None
        storage._root.provider.map_host()
        arrays.append(desc.readonly())
    return arrays


def _donated_arrays(
    program: CompiledGraph, package: ExecutionInputs
) -> dict[int, np.ndarray[Any, Any]] | None:
    """Writable arrays of the donated bindings (the task owns the package exclusively and
    submission checked that nothing else in it sees those bytes): one provider write
    mapping each (may fail: a post-admission preparation failure). O(donated)."""
    if not program.donated:
        return None
    group = package._group
    assert group is not None
    descs, allocations, rec_alloc = group._descs, group._allocations, group._rec_alloc
    out = {}
    for k in program.donated:
        i = package._bindings[k]._index
        storage, desc = allocations[rec_alloc[i]], descs[i]
        assert storage is not None and storage._root is not None and desc is not None
        provider = storage._root.provider
        assert isinstance(provider, HostProvider)  # submission checked the domain
        provider.map_host_write()
        out[k] = desc.array()
    return out


def _view_arrays(inputs: ScopedReadInputs) -> list[np.ndarray[Any, Any]]:
    """Host access under the caller's own live view borrows (held for the whole call)."""
    arrays = []
    for v in inputs._views:
        root = v._storage._root
        assert root is not None
        root.provider.map_host()
        arrays.append(v._desc.readonly())
    return arrays


class HostExecutionProvider(ExecutionProvider):
    """Synchronous host engine: executes in the calling thread and retires before returning.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct.
    Raises: nothing."""

    kind: ClassVar[str] = "host"
    synchronous: ClassVar[bool] = True
    supports_donation: ClassVar[bool] = True  # writes into a package's donated inputs

    def __init__(self) -> None:
        self.counters = HostRuntimeCounters()

    def endpoint(self, engine: EngineId) -> AccessEndpoint:
        """The access endpoint ``host-cpu:<index>`` of this provider registered as ``engine``.

        Cost: allocates the endpoint record; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        return AccessEndpoint(f"host-cpu:{engine.index}")

    def domains(self) -> frozenset[AllocationDomainId]:
        """The host allocation domain only.

        Cost: allocates a one-element frozenset; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        return frozenset({HOST_DOMAIN})

    def describe(self) -> str:
        """One line for discovery output.

        Cost: no allocation (a constant string); no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        return "numpy kernels on the host CPU; synchronous through retirement"

    def submit_detached(
        self, engine: EngineId, program: CompiledGraph, inputs: ExecutionInputs
    ) -> ExecutionHandle:
        """Run ``program`` on ``inputs`` in the calling thread, to retirement, before returning.

        Takes the package (admission), maps every input for host reading (one ``map_host``
        each: ``syncs`` counted, nothing waited for), then runs the kernels; the handle's
        outcome is already published (``wait()`` returns at once).  A map failure before
        admission hands the exact package back in ``SubmitRejected``; a failure after it
        (donated write mapping, a kernel, the bundle) is the ``RetiredFailed`` outcome; an
        interrupt gives the package back to ``inputs`` and propagates.

        Cost: allocates the program's fresh outputs (inputs are read in place, donated ones
        written in place); no copy; no sync to wait for (synchronous: the work retires inside
        the call); dispatches the kernels in this thread; O(bindings + the program's work).

        Raises:
            SubmitRejected: an input could not be mapped (nothing ran; ``inputs`` unchanged).
            UseAfterMoveError: ``inputs`` was consumed (only when called directly:
                ``runtime.submit`` refuses that with ``SubmitRejected`` first).
        """
        package = inputs._take("runtime.submit")
        try:
            arrays = _package_arrays(package)
        except BaseException as exc:
            # Nothing ran: the caller's package is whole again, whatever was raised.
            inputs._give_back(package)
            if not isinstance(exc, Exception):
                raise  # an interrupt propagates; ``inputs`` is usable
            self.counters.rejections += 1
            cause = SubmitError(
                SubmitErrorKind.BIND_FAILED, "runtime.submit", f"{type(exc).__name__}: {exc}"
            )
            raise SubmitRejected(cause, inputs) from None
        counters = self.counters
        counters.submissions += 1
        counters.prepares += len(arrays)
        # Admission boundary.  From here on (post-admission write preparation of donated
        # inputs, the kernels, building the bundle) a failure is a terminal outcome: the
        # work runs in this thread, so when it raises it has retired (completion proven).
        cell = OutcomeCell()
        counters.dispatches += 1
        written: set[int] = set()
        where = "write preparation"
        try:
            donated = _donated_arrays(program, package)
            where = program.name or "program"
            fresh = run_program(program, arrays, donated, written=written)
            where = "bundle"
            bundle = detached_bundle(program, package, fresh)
        except BaseException as exc:
            arrays.clear()
            package._clobbered = tuple(sorted(written))
            if not isinstance(exc, Exception):
                # An interrupt (KeyboardInterrupt, SystemExit, ...): the synchronous work
                # has retired, so the exact package goes back into the caller's ``inputs``
                # (marked clobbered where donated bytes were written) and it propagates.
                inputs._give_back(package)
                raise
            kind = (
                ExecutionErrorKind.PROVIDER_FAILED
                if where == "write preparation"
                else ExecutionErrorKind.KERNEL_FAILED
            )
            failure = execution_error(kind, where, exc)
            cell.publish(RetiredFailed(failure, package, package._clobbered))
        else:
            arrays.clear()
            cell.publish(Completed(bundle))
        return ExecutionHandle._make(engine, cell)

    def execute_scoped(
        self, engine: EngineId, program: CompiledGraph, inputs: ScopedReadInputs
    ) -> ScopedExecutionOutcome:
        """Run ``program`` over the caller's borrowed views in the calling thread, to retirement.

        Maps each view for host reading (one ``map_host`` each), runs the kernels and builds
        the :class:`ScopedExecutionBundle`; a kernel failure returns ``RetiredFailed`` with
        the exact package; an interrupt propagates after the work retired.

        Cost: allocates the program's fresh outputs; no copy (the views are read in place); no
        sync to wait for (synchronous: the work retires before the return); dispatches the
        kernels in this thread; O(views + the program's work).
        Raises: ScopedSubmitRejected (an input could not be mapped; nothing ran)."""
        operation = "runtime.execute_scoped_read_only"
        try:
            arrays = _view_arrays(inputs)
        except Exception as exc:
            self.counters.rejections += 1
            cause = SubmitError(
                SubmitErrorKind.BIND_FAILED, operation, f"{type(exc).__name__}: {exc}"
            )
            raise ScopedSubmitRejected(cause, inputs) from None
        counters = self.counters
        counters.submissions += 1
        counters.prepares += len(arrays)
        inputs._moved_by = operation
        counters.dispatches += 1
        try:
            fresh = run_program(program, arrays)
            bundle = scoped_bundle(program, inputs, fresh)
        except Exception as exc:
            arrays.clear()
            inputs._moved_by = None
            where = program.name or "program"
            failure = execution_error(ExecutionErrorKind.KERNEL_FAILED, where, exc)
            return RetiredFailed(failure, inputs)
        except BaseException:
            # KeyboardInterrupt and friends: the work already retired (it ran in this
            # thread); the package is the caller's again and the interrupt propagates.
            arrays.clear()
            inputs._moved_by = None
            raise
        arrays.clear()
        return Completed(bundle)

    def __repr__(self) -> str:
        return "HostExecutionProvider()"
