"""Retirement of the XLA provider's detached work (``_xla.XlaProvider``): an admitted
submission is finished here once its buffers are ready -- or handed back whole when an
interrupt came before anything was enqueued.  Kept apart from the provider class so each
module stays readable; both functions run under the work item's lock."""

from __future__ import annotations

from typing import Any

from .._ledger import LEDGER, AllocationReason
from .._root import replace_external
from .._tensor import Tensor
from ..runtime._executable import ExecutableProgram
from ..runtime._submission import (
    Completed,
    ExecutionErrorKind,
    ExecutionInputs,
    RetiredFailed,
    detached_bundle,
    execution_error,
)
from ._xla_support import _Work


def finish(provider: Any, work: _Work) -> None:
    """Retire ``work`` on ``provider``: prove completion (buffer readiness), release the
    scratch and the record, own the fresh results (a donated input's record takes its
    result), publish the outcome. Runs once per work item (see ``XlaProvider._retire``)."""
    program: ExecutableProgram = work.program
    record = work.record
    assert record is not None
    results = work.results
    cause = None
    if isinstance(results, BaseException):
        kind = (ExecutionErrorKind.PROVIDER_FAILED if work.where
                else ExecutionErrorKind.KERNEL_FAILED if isinstance(results, Exception)
                else ExecutionErrorKind.PANIC)
        cause = execution_error(kind, work.where or program.name or "xla program", results)
        results = None
    else:
        try:
            provider._jax.block_until_ready(results)
        except Exception as exc:
            cause = execution_error(ExecutionErrorKind.PROVIDER_FAILED, "xla", exc)
    # a donated buffer XLA took (deleted on its side) holds what the program left
    clobbered = () if cause is None else tuple(
        k for k in program.donated
        if work.inputs is not None and k < len(work.inputs) and
        getattr(work.inputs[k], "is_deleted", lambda: False)()
    )
    work.inputs = None  # the imported buffers (zero-copy host imports end here)
    if work.scratch:
        LEDGER.release(AllocationReason.OPERATION_OUTPUT, program.scratch_bytes, work.scratch)
        work.scratch = 0
    assert record.event is not None
    record.event.complete()
    package = work.package
    fresh: dict[int, Tensor[Any, Any]] = {}
    if cause is None and results is not None:
        group = package._group
        for k, handle in enumerate(results):
            v = program.n_inputs + k
            src = program.backing_input(v)
            if src is None:
                fresh[v] = provider._own(handle, AllocationReason.OPERATION_OUTPUT,
                                     program.name or "xla")
                continue
            # donation: the result is in the donated input's bytes; its record holds it
            group = package._group
            storage = group._allocations[group._rec_alloc[package._bindings[src]._index]]
            replace_external(storage._root, handle)
            if handle.unsafe_buffer_pointer() == work.donated_ptrs.get(src):
                provider.counters.donations_reused += 1
    results = None
    work.results = None
    record.release()
    work.record = None
    work.package = None
    provider.counters.retirements += 1
    outcome: Any
    if cause is None:
        outcome = Completed(detached_bundle(program, package, fresh))
    else:
        fresh.clear()
        package._clobbered = clobbered
        outcome = RetiredFailed(cause, package, clobbered)
    del package
    cell = work.cell
    work.cell = None
    assert cell is not None
    cell.publish(outcome)


def hand_back(work: _Work, inputs: ExecutionInputs) -> None:
    """Nothing was enqueued (an interrupt during input preparation or at the enqueue):
    completion is proven, so the record is released once and the exact package goes
    back into the caller's ``inputs``. O(bindings)."""
    work.inputs = None  # the zero-copy imports end: nothing reads them
    if work.scratch:
        LEDGER.release(AllocationReason.OPERATION_OUTPUT, work.program.scratch_bytes,
                       work.scratch)
        work.scratch = 0
    record = work.record
    assert record is not None and record.event is not None
    record.event.complete()
    record.release()
    work.record = None
    package, work.package, work.cell = work.package, None, None
    inputs._give_back(package)


__all__ = ["finish", "hand_back"]
