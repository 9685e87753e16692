"""The op-implementer surface: how a kernel turns fresh numpy results into owners and
reads its inputs during one call.

This is the audited boundary between numpy kernels and the ownership kernel, used
by ``tenferro_ad``'s primitives and by user extensions.  It grants nothing that the
public API does not already imply: an input array is read-only -- over a read-only
buffer, so no numpy API makes it writable -- and valid only while the caller holds the
owner or view it came from; an output must be a fresh array nobody else references.
``frozen(array)`` gives any array that same read-only form (no copy).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _descriptor as D
from ._dtypes import dtype as resolve_dtype
from ._dtypes import from_numpy_dtype
from ._frozen import frozen, is_frozen
from ._ledger import LEDGER, AllocationReason, CopyReason
from ._linear import name_borrow
from ._numpy_surface import (
    NUMPY_KEYS,
    formatted,
    html,
    refuse_array,
    register_numpy,
    scalar,
    values_text,
)
from ._operators import OPERATOR_KEYS, register_operators
from ._rank import DynRank
from ._root import adopt_fresh_root, adopt_output_deferred
from ._tensor import (
    Tensor,
    TensorView,
    TensorViewMut,
    adopt_output,
    claim_deferred,
)

__all__ = [
    "NUMPY_KEYS",
    "OPERATOR_KEYS",
    "adopt_fresh_root",
    "adopt_output",
    "adopt_output_deferred",
    "borrow_named",
    "claim_deferred",
    "derive_view",
    "formatted",
    "frozen",
    "html",
    "is_frozen",
    "materialize_output",
    "name_borrow",
    "read_array",
    "record_transfer",
    "refuse_array",
    "register_numpy",
    "register_operators",
    "scalar",
    "values_text",
]


def materialize_output(
    array: Any,
    reason: AllocationReason = AllocationReason.OPERATION_OUTPUT,
    operation: str = "kernel",
) -> Tensor[Any, DynRank]:
    """Copy ``array`` into a fresh owner, as a visible, recorded copy. O(size).

    For a kernel or rule result that :func:`adopt_output` refuses because it is memory
    an existing value holds (``AliasedOutputError``: the kernel returned one of its
    inputs, a residual, a cotangent it was given, ...).  Records exactly one
    ``CopyReason.MATERIALIZE`` copy event and one allocation event with ``reason``
    (the reason the value would have had if it had been fresh).  ``array`` itself is
    only read.  Inside ``ledger.forbid_copies()`` raises ``CopyForbiddenError`` before
    anything is copied, allocated or recorded; an unsupported dtype raises
    ``DTypeError`` likewise.

    Cost: allocates one owner; copies ``array`` once (a recorded copy); no sync; no dispatch;
    O(size).
    Raises: CopyForbiddenError, DTypeError."""
    LEDGER.check_copy_allowed(f"materialize_output ({operation})")
    src = np.asarray(array)
    dt = from_numpy_dtype(src.dtype, operation)
    fresh = np.array(src, copy=True, order="C")
    t: Tensor[Any, DynRank] = Tensor._adopt(fresh, dt, reason, operation)
    LEDGER.copy(CopyReason.MATERIALIZE, fresh.nbytes, operation)
    return t


def record_transfer(nbytes: int, operation: str) -> None:
    """Record that ``operation`` copies ``nbytes`` unchanged across the numpy boundary
    where no owner is made (a snapshot of a caller's array that is not a storage dtype, a
    constant that XLA embeds in an executable): one ``CopyReason.TRANSFER`` event.

    Call it *before* copying: inside ``ledger.forbid_copies()`` it raises
    ``CopyForbiddenError`` naming ``operation`` and records nothing.

    Cost: no allocation; no copy itself (it records the caller's copy as one ``TRANSFER``
    event); no sync; no dispatch; O(1).

    Raises:
        CopyForbiddenError: inside ``ledger.forbid_copies()`` (nothing is recorded).
        TypeError: ``nbytes`` is not an integer (``int(nbytes)`` refuses it).
    """
    LEDGER.check_copy_allowed(operation)
    LEDGER.copy(CopyReason.TRANSFER, int(nbytes), operation)


def read_array(
    x: Tensor[Any, Any] | TensorView[Any, Any] | TensorViewMut[Any, Any],
) -> np.ndarray[Any, Any]:
    """The read-only numpy array of an owner or view, for the duration of a kernel call.

    O(1) after the first call per descriptor (the array is cached); no ledger event.
    Refused (``BorrowError``/``UseAfterMoveError``/``ExpiredBorrowError``) when the
    owner is mutably borrowed, consumed, or the view released.  The caller must not
    keep the array beyond the borrow of ``x``.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) after the first call per descriptor
    (cached).
    Raises: BorrowError, UseAfterMoveError, ExpiredBorrowError."""
    t = type(x)
    o: Any = x  # (narrowed by the exact type tests below)
    if t is Tensor:  # the common cases first, each with its own borrow check inlined
        if o._moved_by is not None or o._exclusive is not None:
            o._readable("read_array")  # raises
        d = o._desc
    elif t is TensorView:
        if o._lender is None:
            o._dead("read_array")
        d = o._desc
    elif isinstance(x, Tensor):
        d = x._meta("read_array")
    else:
        d = x._d("read_array")
    ro: np.ndarray[Any, Any] | None = d._readonly
    return d.readonly() if ro is None else ro


def derive_view(
    view: TensorView[Any, Any],
    *,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    offset: int,
    dtype: Any = None,
    holder: str | None = None,
) -> TensorView[Any, Any]:
    """A new shared view over ``view``'s span with an explicit layout.

    ``strides`` and ``offset`` are in elements of ``dtype`` (default: the view's), counted
    from the start of the span.  The layout is validated once, here (``LayoutError``;
    nothing changes).  The new view takes its own shared borrow of the same lender, named
    ``holder`` in borrow errors.  O(rank), no allocation, no copy.

    Cost: no allocation; no copy; no sync; no dispatch; O(1): the layout is validated once, here.
    Raises: LayoutError."""
    d = view._d("derive_view")
    storage = view._storage
    root = storage._root
    assert root is not None
    dt = d.dtype if dtype is None else resolve_dtype(dtype)
    desc = D.build("derive_view", root, storage.start, storage.stop, dt, shape, strides, offset)
    out: TensorView[Any, Any] = view._derive(desc, "derive_view")
    if holder is not None:
        name_borrow(out, holder)
    return out


def borrow_named(
    x: Tensor[Any, Any] | TensorView[Any, Any] | TensorViewMut[Any, Any], holder: str
) -> TensorView[Any, Any]:
    """A shared borrow of an owner or view, held by ``holder``.

    While the returned view lives, a conflicting borrow of ``x``'s owner raises
    ``BorrowError`` naming ``holder`` (e.g. ``"Tape#3: residual of mul"``).  Refused like
    ``as_view()`` when ``x`` is consumed, released or exclusively borrowed.  O(1): no
    allocation, no copy, and (unlike ``as_view``) no call-site capture — the holder's
    name is the diagnostic.

    Cost: no allocation; no copy; no sync; no dispatch; O(1): a shared borrow.
    Raises: BorrowError, UseAfterMoveError."""
    if type(x) is Tensor:  # the common leaf (a parameter owner): one straight path
        if x._moved_by is not None or x._exclusive is not None:
            x._readable("borrow")  # raises: consumed or exclusively borrowed
        desc = x._desc
        x._lend_named(holder)
        v: TensorView[Any, Any] = TensorView.__new__(TensorView)  # TensorView._make, inlined
        v._lender = x
        v._exclusive_borrow = False
        v._ended = None
        v._storage = x._storage  # type: ignore[assignment]  # live: checked above
        v._desc = desc
        v._holder = holder
        return v
    if isinstance(x, Tensor):
        desc = x._meta("borrow")  # refuses a consumed or exclusively borrowed owner
        lender: Any = x
    elif isinstance(x, TensorViewMut):  # a shared reborrow of the mutable view
        desc = x._d("borrow")
        lender = x
        x._readable("borrow")
    else:
        desc = x._d("borrow")
        lender = x._lender
    lender._lend_named(holder)
    storage = x._storage
    assert storage is not None  # checked live above
    view: TensorView[Any, Any] = TensorView._make(lender, storage, desc)
    view._holder = holder
    return view
