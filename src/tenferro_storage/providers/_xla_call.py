"""A prepared scoped call of one XLA program: what ``runtime.execute_scoped_read_only``
checks and builds on every call, done once per program, so a call with whole owners as
inputs costs little more than XLA's own dispatch.

Once (:meth:`XlaProvider.prepare_scoped <._xla.XlaProvider.prepare_scoped>`): the
program is this engine's, donates nothing and its arity is known; the ledger labels and
the borrow holder's name are formatted; each result's type is read from the first
execution.  Per call: each input is a live owner nobody borrows exclusively, in a domain
the engine reads (else the call declines and the caller takes the general path, which
raises the precise error -- nothing was recorded); one shared borrow per input until
retirement; the same events as the general path (one ``OPERATION_OUTPUT`` allocation per
result, the scratch allocation and release, one ``TRANSFER`` per input that is not
imported zero-copy) and the same counters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _descriptor
from .._dtypes import _BY_NUMPY, from_numpy_dtype
from .._ledger import LEDGER, AllocationReason
from .._root import adopt_external_many
from .._tensor import Tensor
from ..runtime._executable import ExecutableProgram
from ..runtime._submission import ExecutionError, ExecutionErrorKind, execution_error
from ._xla_support import call_x64

_OUTPUT = AllocationReason.OPERATION_OUTPUT


class ScopedCall:
    """One XLA program ready to run over borrowed owners (see the module docstring).

    Calling it with the input owners returns the fresh result owners in the program's
    result order, an :class:`~tenferro_storage.runtime.ExecutionError` when the
    execution failed (no result was kept, the inputs are unchanged), or ``None`` when
    an input is not a readable owner this fast path takes (nothing was done: run the
    general ``execute_scoped_read_only`` path, which reports why)."""

    __slots__ = (
        "_exe", "_holder", "_label", "_names", "_op", "_provider", "_results", "_scratch",
        "_scratch_label", "_sizes", "n_inputs",
    )

    def __init__(self, provider: Any, program: ExecutableProgram) -> None:
        self._provider = provider
        self._exe = program.executable
        self.n_inputs = program.n_inputs
        self._op = op = program.name or "xla program"
        domain = provider.domain.name
        self._label = f"{op} @{domain}"
        self._scratch = program.scratch_bytes
        self._scratch_label = f"{op} scratch @{domain}"
        self._holder = f"jit({op}): a running call on {domain}"
        self._names = provider.domain_names()
        self._results: list[tuple[Any, tuple[int, ...]]] | None = None
        self._sizes: list[int] = []

    def __call__(self, owners: Sequence[Tensor[Any, Any]]) -> list[Any] | ExecutionError | None:
        if len(owners) != self.n_inputs:
            return None
        names = self._names
        for x in owners:
            if type(x) is not Tensor or x._moved_by is not None or x._exclusive is not None:
                return None
            root = x._storage._root  # type: ignore[union-attr]  # live: checked above
            if root is not None and root.provider.placement not in names:
                return None
        provider = self._provider
        holder = self._holder
        op = self._op
        counters = provider.counters
        counters.submissions += 1
        provider.context.count(enqueues=1, dispatches=1)
        lent = 0
        scratch = 0
        try:
            handles: list[Any] | None = []
            for x in owners:
                x._lend_named(holder)
                lent += 1
                handles.append(provider._import_desc(x._desc, op))  # type: ignore[union-attr]
            if self._scratch:
                scratch = LEDGER.allocate(_OUTPUT, self._scratch, self._scratch_label)
            results = call_x64(provider._jax, self._exe, *handles)  # type: ignore[misc]
            counters.executions += 1
            provider._jax.block_until_ready(results)
        except Exception as exc:
            return execution_error(ExecutionErrorKind.KERNEL_FAILED, op, exc)
        finally:  # also on an interrupt, which propagates: no borrow or scratch outlives it
            handles = None  # the zero-copy imports end here
            if scratch:
                LEDGER.release(_OUTPUT, self._scratch, scratch)
            for x in owners[:lent]:
                x._unlend_named(holder)
        counters.retirements += 1
        return self._own(results)

    def _own(self, results: Sequence[Any]) -> list[Tensor[Any, Any]]:
        """One owner per result buffer: one allocation event each. O(results)."""
        types = self._results
        if types is None:
            types = self._results = [
                (_BY_NUMPY.get(r.dtype) or from_numpy_dtype(r.dtype, self._op), tuple(r.shape))
                for r in results
            ]
            self._sizes = [int(r.nbytes) for r in results]
        domain = self._provider.domain
        storages = adopt_external_many(domain, results, self._sizes, _OUTPUT, self._label)
        out: list[Tensor[Any, Any]] = []
        fresh = _descriptor.fresh_shaped
        for storage, (dt, shape) in zip(storages, types, strict=True):
            t: Tensor[Any, Any] = Tensor.__new__(Tensor)
            t._init_lender()
            t._storage = storage
            t._desc = fresh(dt, shape, storage._root)  # type: ignore[arg-type]
            out.append(t)
        domain.counters.validations += len(out)
        return out


__all__ = ["ScopedCall"]
