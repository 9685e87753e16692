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
borrow per input until retirement; the same events as the general path (one
``OPERATION_OUTPUT`` allocation per result, the scratch allocation and release, one
``TRANSFER`` per input that is not imported zero-copy) and the same counters.

The result owners are built while the executable runs (XLA's CPU dispatch is
asynchronous: the Python work overlaps the kernels instead of following them) but
recorded only once the execution is proven (``_root.record_external``): a failed call
drops them unrecorded, so it records no result allocation, and the events come in the
general path's order (the scratch released, then one allocation per result in result
order).  The wait for the results is one batched call; a failure or an interrupt after
the executable was enqueued waits for it before the input borrows end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _descriptor
from .._descriptor import CheckedDescriptor
from .._dtypes import _BY_NUMPY, DType, from_numpy_dtype
from .._ledger import LEDGER, AllocationReason
from .._root import external_claims, record_external
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
from ._xla_support import array_waiter, call_x64, settle

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
        "_array_type", "_block", "_exe", "_holder", "_label", "_names", "_op", "_provider",
        "_results", "_scratch", "_scratch_label", "_signature", "_sizes", "n_inputs",
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
        self._sizes: list[int] = []
        self._array_type, self._block = array_waiter(provider._jax)

    def __call__(self, owners: Sequence[Tensor[Any, Any]]) -> list[Any] | ExecutionError | None:
        n = self.n_inputs
        if len(owners) != n:
            return None
        provider = self._provider
        names = self._names
        holder = self._holder
        verify = provider.verify_zero_copy  # on: every input through _import_desc (tests)
        mine = None if verify else provider  # whose cached in-place aliases are taken
        handles: list[Any] = []
        put = handles.append
        lent = 0
        zero_copy = 0
        slow = False  # an input whose XLA argument is not its layout's cached alias
        scratch = 0
        results: Any = None
        try:
            # One pass: each owner is checked (live, nobody borrows it exclusively, of the
            # prepared signature, in a domain this engine reads; else the call declines:
            # the borrows taken so far are given back in ``finally``, nothing was
            # recorded), lent once (Lender._lend_named, inlined) and, in the common case,
            # passed as its layout's cached in-place alias.
            for x, (shape, dt) in zip(owners, self._signature, strict=True):
                if type(x) is not Tensor or x._moved_by is not None or \
                        x._exclusive is not None:
                    return None
                d = x._desc
                if d.dtype is not dt or d.shape != shape:
                    return None
                x._shared += 1
                x._who = holder
                x._site = None
                named = x._named
                if named is None:
                    x._named = {holder: 1}
                else:
                    named[holder] = named.get(holder, 0) + 1
                lent += 1
                try:
                    importer, h = d._imported
                except AttributeError:
                    importer = h = None
                if importer is mine and h is not None:  # host bytes: a domain it reads
                    zero_copy += 1
                    put(h)
                else:
                    root = x._storage._root  # type: ignore[union-attr]  # live: checked
                    if root is not None and root.provider.placement not in names:
                        return None
                    slow = True
                    put(None)
            counters = provider.counters
            counters.submissions += 1
            context = provider.context
            with context.lock:  # ProviderContext.count(enqueues=1, dispatches=1), inlined
                context.counters.enqueues += 1
                context.counters.dispatches += 1
            if slow:
                zero_copy += self._import_rest(owners, handles, verify)
            if zero_copy:
                counters.imports_zero_copy += zero_copy
            if self._scratch:
                scratch = LEDGER.allocate(_OUTPUT, self._scratch, self._scratch_label)
            results = call_x64(provider._jax, self._exe, *handles)
            counters.executions += 1
            # the owners are built while the executable runs (recorded once it is done)
            claims, out, arrays = self._owners(results)
            if arrays:
                self._block(results)
            else:
                provider._jax.block_until_ready(results)
        except BaseException as exc:
            if results is not None:  # enqueued: XLA may read the inputs until it is done
                settle(provider._jax, results)
            if not isinstance(exc, Exception):
                raise
            return execution_error(ExecutionErrorKind.KERNEL_FAILED, self._op, exc)
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
        domain = provider.domain
        record_external(domain, claims)  # one allocation event per result, in order
        domain.counters.validations += len(out)
        return out

    def _import_rest(self, owners: Sequence[Tensor[Any, Any]], handles: list[Any],
                     verify: bool) -> int:
        """The XLA argument of each input the first pass left open (``None``): host bytes
        XLA imports in place -- through the layout's in-place alias, made on its first call
        and cached on the descriptor -- or ``_import_desc``'s general case (resident
        buffer, zero-copy import, or one recorded ``TRANSFER``).  Returns how many were
        imported in place here. O(inputs)."""
        provider = self._provider
        op = self._op
        zero_copy = 0
        for i, h in enumerate(handles):
            if h is not None:
                continue
            d = owners[i]._desc
            if verify:
                handles[i] = provider._import_desc(d, op)
            elif type(d.buffer) is np.ndarray and d.importable_in_place():
                zero_copy += 1
                try:
                    importer, h = d._imported
                except AttributeError:
                    importer, h = d._imported = (provider, provider._alias(d, op))
                handles[i] = h if importer is provider and h is not None else d._array
            else:
                handles[i] = provider._import_desc(d, op)
        return zero_copy

    def _owners(self, results: Sequence[Any]) -> tuple[list[Any], list[Tensor[Any, Any]], bool]:
        """One owner per result buffer, built but not yet recorded (``external_claims``),
        its whole-buffer descriptor from the per-result template read at the first call;
        and whether every result is a jax array (then one batched readiness wait). The
        caller records the claims once the execution is proven. O(results)."""
        types = self._results
        if types is None:
            types = self._results = []
            for r in results:
                dt = _BY_NUMPY.get(r.dtype) or from_numpy_dtype(r.dtype, self._op)
                shape = tuple(r.shape)
                strides, layout, size = _descriptor._whole_meta(shape)
                types.append((dt, shape, int(r.nbytes), strides, layout, size))
            self._sizes = [t[2] for t in types]
        claims = external_claims(self._provider.domain, results, self._sizes, _OUTPUT,
                                 self._label)
        out: list[Tensor[Any, Any]] = []
        put = out.append
        new_desc = CheckedDescriptor.__new__
        new_tensor = Tensor.__new__
        fresh = _descriptor._PROOF_FRESH
        arrays = True
        array_type = self._array_type
        for handle, storage, (dt, shape, nbytes, strides, layout, size) in zip(
            results, claims, types, strict=True
        ):
            if type(handle) is not array_type:
                arrays = False
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
            put(t)
        return claims, out, arrays


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
