"""The host execution provider: numpy kernels, synchronous through retirement.

It wraps the storage kernel's host provider (``tenferro_storage.host_provider``): input
access goes through ``prepare_host()`` (counted resolve/map/sync on that provider) and all
work retires before ``submit`` or ``execute_scoped_read_only`` returns.  It is the only
provider that accepts scoped read-only execution.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from .._access import PreparedContiguousRead, PreparedStridedRead
from .._tensor import TensorView
from ..errors import AccessError, ScopedSubmitRejected, SubmitRejected
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

_Prepared = PreparedContiguousRead[Any, Any] | PreparedStridedRead[Any, Any]


@attrs.define
class HostRuntimeCounters:
    """Per-submission work of the host engine (flat in element count)."""

    submissions: int = 0
    rejections: int = 0
    prepares: int = 0
    dispatches: int = 0

    def snapshot(self) -> dict[str, int]:
        """A copy of the counters as a dict."""
        return attrs.asdict(self)


def _prepare_all(views: list[TensorView[Any, Any]]) -> list[_Prepared]:
    """``prepare_host()`` every view; on a failure release everything and re-raise."""
    prepared: list[_Prepared] = []
    try:
        for v in views:
            prepared.append(v.prepare_host())
    except AccessError as exc:
        exc.value.release()
        for v in views:
            v.release()
        for p in prepared:
            p.release()
        raise
    return prepared


class HostExecutionProvider(ExecutionProvider):
    """Synchronous host engine: executes in the calling thread and retires before returning."""

    kind: ClassVar[str] = "host"
    synchronous: ClassVar[bool] = True

    def __init__(self) -> None:
        self.counters = HostRuntimeCounters()

    def endpoint(self, engine: EngineId) -> AccessEndpoint:
        return AccessEndpoint(f"host-cpu:{engine.index}")

    def domains(self) -> frozenset[AllocationDomainId]:
        return frozenset({HOST_DOMAIN})

    def describe(self) -> str:
        return "numpy kernels on the host CPU; synchronous through retirement"

    def submit_detached(
        self, engine: EngineId, program: CompiledGraph, inputs: ExecutionInputs
    ) -> ExecutionHandle:
        package = inputs._take("runtime.submit")
        group = package._group
        assert group is not None
        views = [group.view(s) for s in package._bindings]
        try:
            prepared = _prepare_all(views)
        except AccessError as exc:
            inputs._give_back(package)
            self.counters.rejections += 1
            cause = SubmitError(SubmitErrorKind.BIND_FAILED, "runtime.submit", str(exc))
            raise SubmitRejected(cause, inputs) from None
        del views
        self.counters.submissions += 1
        self.counters.prepares += len(prepared)
        # Admission boundary: the first kernel call.  From here on failures are outcomes.
        cell = OutcomeCell()
        try:
            self.counters.dispatches += 1
            fresh = run_program(program, [p.as_array() for p in prepared])
        except Exception as exc:
            for p in prepared:
                p.release()
            cell.publish(
                RetiredFailed(
                    execution_error(
                        ExecutionErrorKind.KERNEL_FAILED, program.name or "program", exc
                    ),
                    package,
                )
            )
        else:
            for p in prepared:
                p.release()
            cell.publish(Completed(detached_bundle(program, package, fresh)))
        return ExecutionHandle._make(engine, cell)

    def execute_scoped(
        self, engine: EngineId, program: CompiledGraph, inputs: ScopedReadInputs
    ) -> ScopedExecutionOutcome:
        operation = "runtime.execute_scoped_read_only"
        views = [v.as_view() for v in inputs._views]  # reborrows: the caller's views stay
        try:
            prepared = _prepare_all(views)
        except AccessError as exc:
            self.counters.rejections += 1
            cause = SubmitError(SubmitErrorKind.BIND_FAILED, operation, str(exc))
            raise ScopedSubmitRejected(cause, inputs) from None
        del views
        self.counters.submissions += 1
        self.counters.prepares += len(prepared)
        inputs._moved_by = operation
        try:
            self.counters.dispatches += 1
            fresh = run_program(program, [p.as_array() for p in prepared])
        except Exception as exc:
            for p in prepared:
                p.release()
            inputs._moved_by = None
            failure = execution_error(
                ExecutionErrorKind.KERNEL_FAILED, program.name or "program", exc
            )
            return RetiredFailed(failure, inputs)
        for p in prepared:
            p.release()
        return Completed(scoped_bundle(program, inputs, fresh))

    def __repr__(self) -> str:
        return "HostExecutionProvider()"
