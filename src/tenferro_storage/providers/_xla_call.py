"""Scoped calls of XLA programs: ``execute_scoped``, the general path over borrowed
views, and :class:`ScopedCall`, a prepared call of one program: what
``runtime.execute_scoped_read_only`` checks and builds on every call, done once per
program, so a call with whole owners as inputs costs little more than XLA's own dispatch.

Once (:meth:`XlaProvider.prepare_scoped <._xla.XlaProvider.prepare_scoped>`): the
program is this engine's, donates nothing and its arity is known; the ledger labels and
the borrow holder's name are formatted; each result's type is read from the first
execution.  Per call, in one pass: each input is a live owner nobody borrows
exclusively, of the prepared signature's shape and dtype, in a domain the engine reads
(else the call declines and the caller takes the general path, which raises the
precise error, or prepares the other signature -- nothing was recorded); one shared
borrow per input until
retirement; the same events as the general path (one ``OPERATION_OUTPUT`` allocation per
result, the scratch allocation and release, one ``TRANSFER`` per input that is not
imported zero-copy) and the same counters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _descriptor
from .._descriptor import CheckedDescriptor
from .._dtypes import _BY_NUMPY, DType, from_numpy_dtype
from .._ledger import LEDGER, AllocationReason
from .._root import adopt_external_many
from .._tensor import Tensor
from ..runtime._executable import ExecutableProgram
from ..runtime._submission import (
    Completed,
    ExecutionError,
    ExecutionErrorKind,
    RetiredFailed,
    ScopedExecutionOutcome,
    ScopedReadInputs,
    execution_error,
    scoped_bundle,
)
from ._xla_support import call_x64

_OUTPUT = AllocationReason.OPERATION_OUTPUT


class ScopedCall:
    """One XLA program ready to run over borrowed owners of one input signature (see the
    module docstring).

    Calling it with the input owners returns the fresh result owners in the program's
    result order, an :class:`~tenferro_storage.runtime.ExecutionError` when the
    execution failed (no result was kept, the inputs are unchanged), or ``None`` when
    an input is not a readable owner of the prepared shape and dtype that this fast path
    takes (nothing was done: run the general ``execute_scoped_read_only`` path, which
    reports why, or prepare the call of the other signature)."""

    __slots__ = (
        "_exe", "_holder", "_label", "_names", "_op", "_provider", "_results", "_scratch",
        "_scratch_label", "_signature", "n_inputs",
    )

    def __init__(
        self, provider: Any, program: ExecutableProgram,
        signature: Sequence[tuple[tuple[int, ...], DType]],
    ) -> None:
        if len(signature) != program.n_inputs:
            raise ValueError(
                f"prepare_scoped: the signature has {len(signature)} inputs, the program "
                f"{program.name!r} {program.n_inputs}"
            )
        self._provider = provider
        self._exe = program.executable
        self.n_inputs = program.n_inputs
        self._signature = tuple(signature)
        self._op = op = program.name or "xla program"
        domain = provider.domain.name
        self._label = f"{op} @{domain}"
        self._scratch = program.scratch_bytes
        self._scratch_label = f"{op} scratch @{domain}"
        self._holder = f"jit({op}): a running call on {domain}"
        self._names = provider.domain_names()
        # per result, read from the first execution: (dtype, shape, bytes, strides, layout, size)
        self._results: list[tuple[Any, ...]] | None = None

    def __call__(self, owners: Sequence[Tensor[Any, Any]]) -> list[Any] | ExecutionError | None:
        if len(owners) != self.n_inputs:
            return None
        names = self._names
        descs = []
        for x, (shape, dt) in zip(owners, self._signature, strict=True):
            # one pass: a live owner nobody borrows exclusively, of the prepared signature,
            # in a domain this engine reads
            if type(x) is not Tensor or x._moved_by is not None or x._exclusive is not None:
                return None
            d = x._desc
            if d.dtype is not dt or d.shape != shape:
                return None
            root = x._storage._root  # type: ignore[union-attr]  # live: checked above
            if root is not None and root.provider.placement not in names:
                return None
            descs.append(d)
        provider = self._provider
        holder = self._holder
        op = self._op
        counters = provider.counters
        counters.submissions += 1
        context = provider.context
        with context.lock:  # ProviderContext.count(enqueues=1, dispatches=1), inlined
            context.counters.enqueues += 1
            context.counters.dispatches += 1
        zero_copy = -1 if provider.verify_zero_copy else 0  # -1: no in-place shortcut
        lent = 0
        scratch = 0
        handles: list[Any] = []
        try:
            put = handles.append
            for x, d in zip(owners, descs, strict=True):
                x._shared += 1  # Lender._lend_named, inlined (one borrow per input)
                x._who = holder
                x._site = None
                named = x._named
                if named is None:
                    x._named = {holder: 1}
                else:
                    named[holder] = named.get(holder, 0) + 1
                lent += 1
                # host bytes XLA imports in place (_import_desc's common case, inlined):
                # through the layout's in-place import, made on its first call and cached
                try:
                    importer, h = d._imported
                except AttributeError:
                    importer = h = None
                if zero_copy < 0:
                    put(provider._import_desc(d, op))
                elif importer is provider and h is not None:
                    zero_copy += 1
                    put(h)
                elif type(d.buffer) is np.ndarray and d.importable_in_place():
                    zero_copy += 1
                    if importer is None:
                        importer, h = d._imported = (provider, provider._alias(d, op))
                    put(h if importer is provider and h is not None else d._array)
                else:
                    put(provider._import_desc(d, op))
            if zero_copy > 0:
                counters.imports_zero_copy += zero_copy
            if self._scratch:
                scratch = LEDGER.allocate(_OUTPUT, self._scratch, self._scratch_label)
            results = call_x64(provider._jax, self._exe, *handles)
            counters.executions += 1
            provider._jax.block_until_ready(results)
        except Exception as exc:
            return execution_error(ExecutionErrorKind.KERNEL_FAILED, op, exc)
        finally:  # also on an interrupt, which propagates: no borrow or scratch outlives it
            handles.clear()  # the zero-copy imports of this call end here
            if scratch:
                LEDGER.release(_OUTPUT, self._scratch, scratch)
            for i in range(lent):  # Lender._unlend_named, inlined
                x = owners[i]
                x._shared -= 1
                named = x._named
                k = named.get(holder, 0) - 1  # type: ignore[union-attr]  # set when lent
                if k > 0:
                    named[holder] = k  # type: ignore[index]
                else:
                    named.pop(holder, None)  # type: ignore[union-attr]
        counters.retirements += 1
        return self._own(results)

    def _own(self, results: Sequence[Any]) -> list[Tensor[Any, Any]]:
        """One owner per result buffer: one allocation event each (``adopt_external_many``:
        one pass, the domain's lock taken once), its whole-buffer descriptor built from the
        per-result template read at the first call. O(results)."""
        types = self._results
        if types is None:
            types = self._results = []
            for r in results:
                dt = _BY_NUMPY.get(r.dtype) or from_numpy_dtype(r.dtype, self._op)
                shape = tuple(r.shape)
                strides, layout, size = _descriptor._whole_meta(shape)
                types.append((dt, shape, int(r.nbytes), strides, layout, size))
        domain = self._provider.domain
        storages = adopt_external_many(domain, results, [t[2] for t in types], _OUTPUT,
                                       self._label)
        out: list[Tensor[Any, Any]] = []
        new_desc = CheckedDescriptor.__new__
        new_tensor = Tensor.__new__
        fresh = _descriptor._PROOF_FRESH
        for storage, (dt, shape, nbytes, strides, layout, size) in zip(
            storages, types, strict=True
        ):
            d = new_desc(CheckedDescriptor)  # _descriptor.fresh_shaped, inlined
            d.dtype = dt
            d.shape = shape
            d.strides = strides
            d.offset = 0
            d.size = size
            d.lo = 0
            d.hi = size - 1
            d.start = 0
            d.stop = nbytes
            d.buffer = storage._root._allocation  # type: ignore[union-attr]
            d.layout = layout
            d._array = None
            d._readonly = None
            d._injective = fresh
            t: Tensor[Any, Any] = new_tensor(Tensor)
            t._moved_by = None  # Lender._init_lender, inlined
            t._shared = 0
            t._exclusive = None
            t._named = None
            t._storage = storage
            t._desc = d
            out.append(t)
        domain.counters.validations += len(out)
        return out


def execute_scoped(
    provider: Any, program: Any, inputs: ScopedReadInputs
) -> ScopedExecutionOutcome:
    """``provider``'s scoped read-only execution of ``program`` over the caller's borrowed
    views (``XlaProvider.execute_scoped``): the views are imported (zero-copy where XLA
    can read them in place, else one recorded ``TRANSFER``), the call waits for the
    results, and each result becomes a fresh owner (one ``OPERATION_OUTPUT`` allocation).
    A failed execution is ``RetiredFailed`` with the caller's inputs; an interrupt waits
    for what was enqueued, leaves the views the caller's and propagates."""
    operation = program.name or "xla program"
    counters = provider.counters
    counters.submissions += 1
    provider.context.count(enqueues=1, dispatches=1)
    inputs._moved_by = "runtime.execute_scoped_read_only"
    scratch = 0
    handles: list[Any] | None = None
    results: Any = None
    try:
        handles = [provider._import_desc(v._desc, operation) for v in inputs._views]
        if program.scratch_bytes:
            scratch = LEDGER.allocate(
                AllocationReason.OPERATION_OUTPUT, program.scratch_bytes,
                f"{operation} scratch @{provider.domain.name}",
            )
        results = call_x64(provider._jax, program.executable, *handles)
        counters.executions += 1
        provider._jax.block_until_ready(results)
    except Exception as exc:
        inputs._moved_by = None
        where = program.name or "xla program"
        return RetiredFailed(execution_error(ExecutionErrorKind.KERNEL_FAILED, where, exc),
                             inputs)
    except BaseException:
        # An interrupt: XLA must be done reading the caller's views before they are the
        # caller's again (results enqueued: wait for them; none: nothing was enqueued).
        if results is not None:
            provider._jax.block_until_ready(results)
        results = None
        inputs._moved_by = None
        raise
    finally:
        handles = None
        if scratch:
            LEDGER.release(AllocationReason.OPERATION_OUTPUT, program.scratch_bytes, scratch)
    counters.retirements += 1
    inputs._moved_by = None
    fresh = {
        program.n_inputs + k: provider._own(h, AllocationReason.OPERATION_OUTPUT, operation)
        for k, h in enumerate(results)
    }
    del results
    return Completed(scoped_bundle(program, inputs, fresh))


__all__ = ["ScopedCall", "execute_scoped"]
