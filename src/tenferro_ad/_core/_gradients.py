"""``Gradients``: the result of ``Tape.backward`` — a specialization of ``AllocationGroup``.

One allocation entry per distinct gradient array; each requested value maps to a
descriptor slot.  Two gradients that are *the same cotangent* (e.g. ``z = x + y``: add's
VJP hands the one cotangent array to both) share one allocation: the second is a
group alias, so nothing is copied — and ``take_grad`` of either raises ``ExtractError``
(``reason="aliased"``) leaving the bundle unchanged, while ``grad`` borrows both fine.
Symbolic zeros are never materialized: ``grad(x)``/``take_grad(x)`` return ``None``.

Allocation accounting: every gradient array delivered here is adopted as one
``OPERATION_OUTPUT`` allocation (no copy event); a cotangent that is a non-contiguous
view (the VJP of a transpose or broadcast) is materialized by a kernel write first.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_storage as ts
from tenferro_storage.errors import AliasedOutputError, ExtractError, GroupError, LayoutError

from ..errors import IntoValueError
from ._handle import EagerTensor
from ._state import STATE


def materialize(ct: Any) -> np.ndarray[Any, Any]:
    """A fresh C-contiguous array holding ``ct`` (itself when it already is one)."""
    if type(ct) is not np.ndarray:
        return np.asarray(ct).copy()
    if ct.base is not None or not ct.flags.c_contiguous or not ct.flags.writeable:
        return np.array(ct, order="C")
    return ct


def _root(a: Any) -> Any:
    """The object that owns ``a``'s memory (``a`` itself when it is not a view): the end of
    its ``base`` chain, through the read-only memoryview a borrowed array lies over (to the
    array that exported it). O(length of the chain)."""
    while True:
        if type(a) is np.ndarray:
            if a.base is None:
                return a
            a = a.base
        elif type(a) is memoryview:
            a = a.obj
        else:
            return a


def foreign_roots(seeds: Any) -> set[int]:
    """Identities of the caller's own arrays among the seeds: a delivered gradient must
    never adopt them.  (Memory of live values — residuals, handles' arrays — is refused
    by ``adopt_output`` itself.)  O(seeds)."""
    return {id(_root(s)) for s in seeds if type(s) is np.ndarray}


def is_foreign(ct: Any, foreign: set[int]) -> bool:
    """Whether ``ct`` holds bytes of a caller's seed as they are: the seed itself or any
    view of it that repeats no element (reshaped, transposed, sliced, strided -- also
    when the seed is itself a slice of a larger caller array).  Delivering it is a
    byte-preserving copy.  A broadcast (an axis of stride 0 repeating an element) is new
    data (a kernel write). O(rank)."""
    if type(ct) is not np.ndarray or not foreign or id(_root(ct)) not in foreign:
        return False
    return all(s != 0 or n <= 1 for n, s in zip(ct.shape, ct.strides, strict=True))


def own(
    ct: Any, foreign: set[int], operation: str, reason: ts.AllocationReason | None = None
) -> ts.Tensor[Any, Any]:
    """A fresh owner for a delivered cotangent or tangent.

    Scratch computed by the sweep is adopted (no copy).  Memory that belongs to another
    value — a caller's seed (``foreign``), a residual or any live value, or a cotangent
    already delivered to another argument — is copied into a fresh owner with a
    recorded ``MATERIALIZE`` copy; a view of scratch is laid out afresh (a kernel
    write).  ``reason``: the allocation reason (default: the current one, a thread-local
    read a caller delivering many gradients makes once). O(1) bookkeeping plus the copy
    if any.
    """
    if reason is None:
        reason = STATE.reason
    if foreign and is_foreign(ct, foreign):
        return ts.kernel.materialize_output(ct, reason, operation)
    if type(ct) is np.ndarray:
        try:
            return ts.kernel.adopt_output(ct, reason, operation)
        except AliasedOutputError:  # a live value's memory (or a view of it)
            return ts.kernel.materialize_output(ct, reason, operation)
        except LayoutError:
            pass  # a view of scratch, or not contiguous: laid out afresh below
    return ts.kernel.adopt_output(materialize(ct), reason, operation)


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out: list[int] = []
    acc = 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


class Gradients(ts.AllocationGroup):
    """Gradients by value handle.  ``grad(x)`` borrows, ``take_grad(x)`` moves out.

    ``handle(x)`` (only after ``backward(..., create_graph=True)``) is the gradient as a
    handle recorded on the tape, for higher-order derivatives.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (``backward`` builds it).
    Raises: nothing."""

    __slots__ = ("_handles", "_key", "_map")

    _key: object
    _map: dict[int, Any]
    _handles: dict[int, EagerTensor] | None

    @classmethod
    def _build(
        cls,
        key: object,
        wids: list[int],
        cts: dict[int, Any],
        create_graph: bool,
        foreign: set[int],
    ) -> Any:
        """The bundle for ``cts``; ``foreign``: memory roots (seed, residuals) that must be
        copied (recorded ``MATERIALIZE``), never adopted, and seed handle identities."""
        g = cls()
        g._key = key
        g._map = {}
        g._handles = None
        if create_graph:
            g._handles = {}
            for vid in wids:
                h = cts.get(vid)
                g._map[vid] = None
                if h is not None:  # never the caller's own seed handle object
                    g._handles[vid] = h.clone() if id(h) in foreign else h
            return g
        seen: dict[int, Any] = {}
        for vid in wids:
            ct = cts.get(vid)
            if ct is None:
                g._map[vid] = None
                continue
            prev = seen.get(id(ct))
            if prev is not None:  # the same cotangent for two values: one allocation
                shape = tuple(np.shape(ct))
                g._map[vid] = g.alias(prev, shape=shape, strides=_c_strides(shape))
                continue
            slot = g.insert(own(ct, foreign, "backward"))
            seen[id(ct)] = slot
            g._map[vid] = slot
        return g

    def _vid(self, x: Any, operation: str) -> int:
        if not isinstance(x, EagerTensor) or x._tape is not self._key or x._id not in self._map:
            raise GroupError(
                f"{operation}: {x!r} is not one of the values this Gradients bundle was "
                "computed for (pass wrt=... to backward, and use handles of the same tape)"
            )
        return x._id

    def grad(self, x: EagerTensor) -> ts.TensorView[Any, Any] | None:
        """The gradient for ``x`` as a borrowed read-only view, or ``None`` for no gradient.
        O(1), no allocation, no copy.

        While the view lives the bundle is borrowed: ``take_grad`` raises ``BorrowError``.
        After ``take_grad(x)`` the gradient is gone and this returns ``None``.

        Cost: no allocation; no copy (a view of the bundle's allocation, or of the gradient
        handle's value after ``create_graph=True``); no sync; no dispatch; O(1).

        Raises:
            GroupError: ``x`` is not one of the values the bundle was computed for.
            UseAfterMoveError: the bundle was consumed (``into_tensor``).
            BorrowError: the bundle is exclusively borrowed."""
        vid = self._vid(x, "Gradients.grad")
        if self._handles is not None:
            h = self._handles.get(vid)
            if h is None:
                return None
            rec = h._r("Gradients.grad")
            return rec.view("Gradients.grad")
        slot = self._map[vid]
        return None if slot is None else self.view(slot)

    def take_grad(self, x: EagerTensor) -> ts.Tensor[Any, Any] | None:
        """Move the gradient for ``x`` out as an owner; ``None`` when there is none.

        Raises ``ExtractError`` and leaves the bundle unchanged when the allocation is
        shared with another gradient (``reason="aliased"``, see the module docstring) or,
        after ``create_graph=True``, when the tape still retains the gradient value
        (``reason="shared"``; use ``handle(x)``).  O(1), no copy.

        A second ``take_grad(x)`` returns ``None`` (the gradient was moved out).

        Cost: no allocation; no copy (the owner moves out of the bundle); no sync; no
        dispatch; O(1).

        Raises:
            GroupError: ``x`` is not one of the values the bundle was computed for.
            ExtractError: the allocation is shared (``"aliased"``/``"shared"``).
            BorrowError: a ``grad(...)`` view of the bundle is still alive.
        """
        vid = self._vid(x, "Gradients.take_grad")
        if self._handles is not None:
            h = self._handles.get(vid)
            if h is None:
                return None

            del self._handles[vid]
            try:
                owner = h.into_value()
            except IntoValueError as e:
                self._handles[vid] = e.value
                raise ExtractError(
                    "shared",
                    f"Gradients.take_grad: the gradient is still held elsewhere ({e}); use "
                    "grads.handle(x) or duplicate_value()",
                ) from None
            return owner
        slot = self._map[vid]
        if slot is None:
            return None
        owner = self.try_extract(slot)
        self._map[vid] = None
        return owner

    def handle(self, x: EagerTensor) -> EagerTensor | None:
        """The gradient as a handle on the tape (``create_graph=True`` only), or ``None``.

        The bundle's own handle (not a clone): ``take_grad(x)`` later needs it unique.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: GroupError (``x`` is not in the bundle or ``backward`` had no
        ``create_graph``)."""
        vid = self._vid(x, "Gradients.handle")
        if self._handles is None:
            raise GroupError(
                "Gradients.handle: gradients are handles only after "
                "backward(..., create_graph=True)"
            )
        return self._handles.get(vid)

    def __repr__(self) -> str:
        n = sum(1 for s in self._map.values() if s is not None)
        if self._handles is not None:
            n = len(self._handles)
        return f"Gradients({n} of {len(self._map)} values have a gradient)"
