"""The tensor triad: :class:`Tensor` (owner), :class:`TensorView`, :class:`TensorViewMut`.

Method homes (the API-parity contract, pinned by ``tests/storage/test_api_parity.py``):

* read-only behaviour is implemented once, on :class:`TensorView`; the owner and the
  mutable view delegate through ``as_view()`` (metadata reads go straight to the
  shared descriptor, which is what ``as_view()`` would return);
* mutation is implemented once, on :class:`TensorViewMut`; the owner delegates
  through ``as_view_mut()``;
* consuming operations exist only on the owner (and on groups).

Strides and offsets are counted in elements everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, overload

import numpy as np

from . import _derived as DV
from . import _descriptor as D
from ._access import (
    PreparedContiguousRead,
    PreparedContiguousWrite,
    PreparedStridedRead,
    PreparedStridedWrite,
)
from ._descriptor import CheckedDescriptor
from ._dtypes import _BY_NUMPY, DType, checked_cast, from_numpy_dtype
from ._dtypes import resolve as resolve_dtype_for
from ._layout import CheckedLayout, Contiguous, c_strides
from ._ledger import LEDGER, AllocationReason, CopyReason
from ._linear import Borrow, Lender
from ._numpy_surface import NUMPY_METHODS, NUMPY_PROPERTIES, _identity, scalar, values_text
from ._operators import BasicKey, OperatorMixin, advanced_getitem, is_basic_key
from ._provider import HOST as _HOST
from ._rank import DynRank, Rank0, Rank1, Rank2, Rank3, Rank4
from ._reinterpret_rules import Refused, to_complex, to_real
from ._root import (
    OwnedStorage,
    RootResource,
    adopt,
    adopt_fresh_claim,
    aligned_copy,
    claim_unclaimed,
    set_general_adopt,
)
from .errors import (
    AccessError,
    BorrowError,
    DTypeError,
    LayoutError,
    OwnershipError,
    ReinterpretError,
    UseAfterMoveError,
    shown,
)

DT = TypeVar("DT", covariant=True)  # phantom markers: a Tensor[F, Rank2] is a
R = TypeVar("R", covariant=True)  # Tensor[F, AnyRank] (dicts of mixed ranks infer that)
Out = TypeVar("Out")

# The canonical method lists (one source of truth for the API-parity contract).
READ_ONLY_API: Final = (
    "shape",
    "strides",
    "offset",
    "dtype",
    "ndim",
    "size",
    "nbytes",
    "layout",
    "span",
    "as_view",
    "to_numpy",
    "duplicate",
    "item",
    "prepare_host",
)
# Derivations: read-only on the view and the owner; exclusive reborrows on the mutable view.
DERIVING_API: Final = ("__getitem__", "transpose", "T", "reshape")
MUTATION_API: Final = ("prepare_host_mut", "fill")
CONSUMING_API: Final = ("into_storage", "into_real", "into_complex", "take")
# numpy's surface (host reads and ndarray-style methods running registered ops): one home,
# ``_numpy_surface.NumpySurface``, inherited by all three (and shared with handles).
NUMPY_API: Final = ("tolist", *NUMPY_METHODS, *NUMPY_PROPERTIES)

_OPERATION_OUTPUT: Final = AllocationReason.OPERATION_OUTPUT


def _fill_value(value: Any, d: CheckedDescriptor) -> np.ndarray[Any, Any]:
    """``value`` checked for ``fill``: numeric, broadcastable to the view, representable in
    its dtype (no NaN into integers, no dropped imaginary parts).  Raises before anything is
    mapped, written or counted."""
    try:
        v = np.asarray(value)
    except Exception as e:  # numpy's errors for ragged or odd objects
        raise DTypeError(f"fill: argument 'value' {shown(value)} is not numeric: {e}") from None
    if v.dtype.kind not in "biufc":
        raise DTypeError(f"fill: argument 'value' must be numeric, got {shown(value)}")
    shape = d.shape
    if v.ndim > len(shape) or any(
        a != 1 and a != b for a, b in zip(v.shape[::-1], shape[::-1], strict=False)
    ):
        raise LayoutError(
            "fill", f"argument 'value' of shape {v.shape} does not broadcast to the view",
            shape=shape,
        )
    return checked_cast("fill: argument 'value'", v, d.dtype.numpy)


def _map_host(
    view: TensorView[Any, Any] | TensorViewMut[Any, Any], operation: str, what: str
) -> None:
    """Access-time provider work (resolve, map, synchronize; counted once per call).

    A provider failure raises :class:`AccessError` carrying ``view`` unchanged.
    """
    try:
        view._storage.claim.root.provider.map_host()
    except Exception as exc:
        raise AccessError(
            f"{operation}: provider could not map {view._storage.span} for {what}: {exc}",
            view,
            exc,
        ) from exc


def _through_view(
    lender: Tensor[Any, Any] | TensorViewMut[Any, Any], method: Callable[..., Out], *args: Any
) -> Out:
    """``method(view, *args)`` on a temporary shared view of ``lender``: how the owner and
    the mutable view delegate read-only behaviour to :class:`TensorView`.  A result that is
    a view holds its own borrow; the temporary one ends when this call returns, and on an
    error right away (a kept traceback must not keep it). O(1) besides ``method``."""
    v = lender.as_view()
    try:
        return method(v, *args)
    except BaseException:
        v.release()
        raise


def _repr(kind: str, desc: CheckedDescriptor, span: str) -> str:
    head = f"{kind}({desc.dtype.name}, shape={desc.shape}"
    if type(desc.buffer) is not np.ndarray:  # device memory: the host cannot show values
        head += ", device-resident"
    else:  # numpy's summary above 16 elements (first and last three per axis)
        head += f", values={values_text(desc.readonly())}"
    return f"{head}, {span})"


class TensorView(OperatorMixin, Borrow, Generic[DT, R]):
    """A shared, read-only borrow of a tensor's values.

    Any number of views may coexist; while one lives the owner cannot be mutated or
    consumed.  Deriving a view (slicing, transposing) does not consume this one.
    The borrow ends on :meth:`release`, on ``with`` exit, or when the view dies.

    Cost: no allocation; no copy; no sync; no dispatch; O(1): a shared borrow (made by ``as_view()``
    or slicing).
    Raises: nothing."""

    __slots__ = ("_desc", "_ended", "_exclusive_borrow", "_holder", "_lender", "_storage")

    _holder: str | None  # the named party holding this borrow (kernel.name_borrow)
    _desc: CheckedDescriptor
    _storage: OwnedStorage

    def __init__(self) -> None:
        raise OwnershipError(
            "TensorView() cannot be constructed directly; borrow one with owner.as_view() "
            "(or view.as_view(), or slice an owner or view)"
        )

    @classmethod
    def _make(cls, lender: Lender, storage: OwnedStorage, desc: CheckedDescriptor) -> Any:
        """Wrap a shared borrow the caller has already taken on ``lender``."""
        v = cls.__new__(cls)
        v._lender = lender
        v._exclusive_borrow = False
        v._ended = None
        v._storage = storage
        v._desc = desc
        v._holder = None
        return v

    def _d(self, operation: str) -> CheckedDescriptor:
        if self._lender is None:
            self._dead(operation)
        return self._desc

    def _derive(self, desc: CheckedDescriptor, operation: str) -> Any:
        lender = self._lender
        if lender is None:
            self._dead(operation)
        lender._borrow_shared(operation, "TensorView")
        return TensorView._make(lender, self._storage, desc)

    # -- metadata ------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """Extents per axis. O(1)."""
        return self._d("shape").shape

    @property
    def strides(self) -> tuple[int, ...]:
        """Strides per axis, in elements (not bytes). O(1)."""
        return self._d("strides").strides

    @property
    def offset(self) -> int:
        """Offset of element ``[0, ..., 0]`` from the span start, in elements. O(1)."""
        return self._d("offset").offset

    @property
    def dtype(self) -> DType:
        """The element type. O(1)."""
        return self._d("dtype").dtype

    @property
    def ndim(self) -> int:
        """Number of axes. O(1)."""
        return len(self._d("ndim").shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return self._d("size").size

    @property
    def nbytes(self) -> int:
        """Bytes of the logical elements (``size * itemsize``)."""
        d = self._d("nbytes")
        return d.size * d.dtype.itemsize

    @property
    def layout(self) -> CheckedLayout:
        """The checked layout: ``Contiguous`` (row-major, logical order) or ``Strided``."""
        return self._d("layout").layout

    @property
    def span(self) -> str:
        """The resolved span identity, e.g. ``alloc#7[0:96)`` (never an address)."""
        self._d("span")
        return self._storage.span

    # -- derivations -----------------------------------------------------------------
    def as_view(self) -> TensorView[DT, R]:
        """Another shared view of the same values (O(1), no allocation).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: ExpiredBorrowError, UseAfterMoveError, BorrowError."""
        return self._derive(self._d("as_view"), "TensorView.as_view")  # type: ignore[no-any-return]

    @overload
    def __getitem__(self, key: slice | tuple[slice, ...]) -> TensorView[DT, R]: ...  # type: ignore[overload-overlap]
    @overload
    def __getitem__(self, key: BasicKey) -> TensorView[DT, DynRank]: ...
    @overload
    def __getitem__(self, key: Any) -> Any: ...
    def __getitem__(self, key: Any) -> Any:
        """Basic indexing as in numpy (ints drop an axis); a new checked view, no copy.

        Any other key (integer arrays, lists, owners, boolean masks) is advanced indexing:
        it goes to the registered ``getitem`` operator (``tenferro_ad``'s gather), and
        without one raises ``TypeError``.
        """
        if not is_basic_key(key):
            return advanced_getitem(self, key, "TensorView[...]")
        desc = DV.index(self._d("TensorView[...]"), key, "TensorView[...]")
        return self._derive(desc, "TensorView[...]")

    def transpose(self, *axes: int) -> TensorView[DT, R]:
        """Permute axes (default: reverse). O(rank), no copy.

        Cost: no allocation (a new view); no copy; no sync; no dispatch; O(rank).
        Raises: LayoutError, ExpiredBorrowError, UseAfterMoveError, BorrowError."""
        d = self._d("TensorView.transpose")
        desc = DV.transpose(d, DV.check_axes("TensorView.transpose", axes, len(d.shape)))
        return self._derive(desc, "TensorView.transpose")  # type: ignore[no-any-return]

    @property
    def T(self) -> TensorView[DT, R]:
        """The reversed-axes view (``transpose()``)."""
        return self.transpose()

    def reshape(self, *shape: int | tuple[int, ...]) -> TensorView[DT, DynRank]:
        """A reshaped view of a ``Contiguous`` layout (no copy); strided layouts are refused.

        Cost: no allocation (a new view); no copy; no sync; no dispatch; O(rank).
        Raises: LayoutError, ExpiredBorrowError, UseAfterMoveError, BorrowError."""
        d = self._d("TensorView.reshape")
        desc = DV.reshape(d, _shape_arg(shape), "TensorView.reshape")
        return self._derive(desc, "TensorView.reshape")  # type: ignore[no-any-return]

    # -- values ----------------------------------------------------------------------
    def to_numpy(self) -> np.ndarray[Any, Any]:
        """Copy the values out into a new numpy array (one ``TRANSFER`` copy event; no
        allocation event since the array is outside the ledger). O(size).

        Cost: allocates the numpy array (no ledger allocation); copies (one ``TRANSFER``);
        synchronizes (one provider map: resolve, map, sync); no dispatch; O(size).

        Raises:
            CopyForbiddenError: inside ``ledger.forbid_copies()`` (nothing mapped or copied).
            AccessError: the provider cannot map the bytes (device-resident memory included).
            ExpiredBorrowError: the view was released.
            UseAfterMoveError: the view was consumed."""
        d = self._d("to_numpy")
        LEDGER.check_copy_allowed("to_numpy")  # a refused copy maps, copies and records nothing
        _map_host(self, "to_numpy", "reading")
        out = np.array(d.readonly(), copy=True, order="C")
        LEDGER.copy(CopyReason.TRANSFER, out.nbytes, "to_numpy")
        return out

    def duplicate(self) -> Tensor[DT, R]:
        """An explicit copy into a new owner: one ``EXPLICIT_DUPLICATE`` copy event and one
        ``EXPLICIT_DUPLICATE_DESTINATION`` allocation event. O(size).

        Cost: allocates the new owner; copies (one ``EXPLICIT_DUPLICATE``); synchronizes (one
        provider map); no dispatch; O(size).

        Raises:
            CopyForbiddenError: inside ``ledger.forbid_copies()`` (nothing mapped or copied).
            AccessError: the provider cannot map the bytes (device-resident memory included).
            ExpiredBorrowError: the view was released.
            UseAfterMoveError: the view was consumed."""
        d = self._d("duplicate")
        LEDGER.check_copy_allowed("duplicate")  # a refused copy maps, copies and records nothing
        _map_host(self, "duplicate", "reading")
        arr = aligned_copy(d.readonly(), d.dtype.numpy)
        t: Tensor[DT, R] = Tensor._adopt(
            arr, d.dtype, AllocationReason.EXPLICIT_DUPLICATE_DESTINATION, "duplicate"
        )
        LEDGER.copy(CopyReason.EXPLICIT_DUPLICATE, arr.nbytes, "duplicate")
        return t

    def item(self) -> Any:
        """The single element as a Python scalar (a host read; no ledger event).

        Cost: no allocation; no copy (reads in place); no sync (no provider map); no dispatch;
        O(1).

        Raises:
            LayoutError: the view has more or fewer than one element.
            DeviceResidentError: the values are device memory the host cannot read.
            ExpiredBorrowError: the view was released.
            UseAfterMoveError: the view was consumed."""
        return scalar(self._d("item").readonly(), "item", _identity)

    def prepare_host(self) -> PreparedContiguousRead[DT, R] | PreparedStridedRead[DT, R]:
        """Consume this view into prepared host read access. O(1) in element count.

        Performs only access-time provider work (resolve, map, synchronize); the
        layout proofs were retained at construction.  Returns
        :class:`PreparedContiguousRead` or :class:`PreparedStridedRead` (the class is the
        state).  On failure raises :class:`AccessError` whose ``.value`` is this view,
        unchanged and still usable.

        Cost: no allocation; no copy; synchronizes (one provider map: resolve, map, sync); no
        dispatch; O(1).

        Raises:
            AccessError: the provider cannot map the bytes (device-resident memory included).
            ExpiredBorrowError: the view was released.
            UseAfterMoveError: the view was already consumed.
        """
        d = self._d("prepare_host")
        _map_host(self, "prepare_host", "reading")
        lender = self._transfer("prepare_host")
        cls = PreparedContiguousRead if isinstance(d.layout, Contiguous) else PreparedStridedRead
        return cls._make(lender, d, False)  # type: ignore[no-any-return]

    # -- protocol ----------------------------------------------------------------------
    def __enter__(self) -> TensorView[DT, R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        if self._lender is None:
            return f"TensorView(<{self._ended}>)"
        return _repr("TensorView", self._desc, self._storage.span)


class _ViewMetadata:
    """Read-only metadata for ``TensorViewMut`` and ``Tensor``: ``TensorView``'s own
    property implementations, read through the object's ``_d`` borrow check (one
    implementation, three homes: the G4 method-home rule). O(1) each."""

    __slots__ = ()

    if TYPE_CHECKING:  # typed as the properties they are (a bare alias reads as a method)

        @property
        def shape(self) -> tuple[int, ...]: ...
        @property
        def strides(self) -> tuple[int, ...]: ...
        @property
        def offset(self) -> int: ...
        @property
        def dtype(self) -> DType: ...
        @property
        def ndim(self) -> int: ...
        @property
        def size(self) -> int: ...
        @property
        def nbytes(self) -> int: ...
        @property
        def layout(self) -> CheckedLayout: ...
        @property
        def span(self) -> str: ...

    else:
        shape = TensorView.shape
        strides = TensorView.strides
        offset = TensorView.offset
        dtype = TensorView.dtype
        ndim = TensorView.ndim
        size = TensorView.size
        nbytes = TensorView.nbytes
        layout = TensorView.layout
        span = TensorView.span


class TensorViewMut(_ViewMetadata, OperatorMixin, Lender, Borrow, Generic[DT, R]):
    """An exclusive borrow of a tensor: the only way to write its values.

    While it lives nothing else can read or write the owner.  It can itself lend:
    ``as_view()`` is a shared reborrow (writes through this view wait until it ends)
    and slicing/transposing make exclusive child reborrows.

    Cost: no allocation; no copy; no sync; no dispatch; O(1): an exclusive borrow (made by
    ``as_view_mut()``).
    Raises: nothing."""

    __slots__ = ("_desc", "_ended", "_exclusive_borrow", "_lender", "_storage")

    _desc: CheckedDescriptor
    _storage: OwnedStorage

    def __init__(self) -> None:
        raise OwnershipError(
            "TensorViewMut() cannot be constructed directly; borrow one with owner.as_view_mut()"
        )

    @classmethod
    def _make(cls, lender: Lender, storage: OwnedStorage, desc: CheckedDescriptor) -> Any:
        """Wrap an exclusive borrow the caller has already taken; ``desc`` must be injective."""
        v = cls.__new__(cls)
        v._init_lender()
        v._lender = lender
        v._exclusive_borrow = True
        v._ended = None
        v._storage = storage
        v._desc = desc
        return v

    def _describe(self) -> str:
        return "TensorViewMut"

    def _d(self, operation: str) -> CheckedDescriptor:
        # Like the owner: any read (metadata included) is refused while an exclusive
        # child reborrow (a mutable slice/transpose) is live; shared reborrows allow it.
        if self._lender is None:
            self._dead(operation)
        if self._exclusive is not None:
            self._readable(operation)  # raises BorrowError naming both borrows
        return self._desc

    def _writable(self, operation: str) -> CheckedDescriptor:
        if self._lender is None:
            self._dead(operation)
        if self._exclusive is not None or self._shared:
            raise BorrowError(
                f"{operation}: requested write access through a TensorViewMut, but "
                f"{self._blocker()}; release the reborrow first"
            )
        return self._desc

    def _for_reborrow(self, operation: str) -> CheckedDescriptor:
        """The descriptor to derive an exclusive child from; refuses while anything reborrows."""
        if self._lender is None:
            self._dead(operation)
        if self._exclusive is not None or self._shared:
            self._borrow_exclusive(operation, "TensorViewMut")  # raises BorrowError naming both
        return self._desc

    def _reborrow_mut(self, desc: CheckedDescriptor, operation: str) -> Any:
        self._borrow_exclusive(operation, "TensorViewMut")
        return TensorViewMut._make(self, self._storage, desc)

    def release(self) -> None:
        """End the exclusive borrow now (idempotent). O(1).

        Refused with ``BorrowError`` while a reborrow of this view (a shared
        ``as_view()`` or a mutable slice) is live: ending the borrow then would let
        the owner lend again while the reborrow still reads or writes its values.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: BorrowError.
        """
        if self._exclusive is not None or self._shared:
            raise BorrowError(
                f"TensorViewMut.release: cannot end this exclusive borrow while "
                f"{self._blocker()}; release the reborrow first"
            )
        Borrow.release(self)

    def __del__(self) -> None:
        # Unreachable while a reborrow lives (reborrows reference this view), so
        # dying ends the borrow unconditionally (also inside a collected cycle).
        if getattr(self, "_lender", None) is not None:
            Borrow.release(self)

    # -- read-only behaviour delegates to TensorView -----------------------------------
    def as_view(self) -> TensorView[DT, R]:
        """A shared reborrow: writes through this view are refused until it ends. O(1).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: BorrowError, ExpiredBorrowError, UseAfterMoveError."""
        d = self._d("TensorViewMut.as_view")
        self._borrow_shared("TensorViewMut.as_view", "TensorView")
        return TensorView._make(self, self._storage, d)  # type: ignore[no-any-return]

    def to_numpy(self) -> np.ndarray[Any, Any]:
        """Copy the values out into a new numpy array (``TensorView.to_numpy`` through a
        temporary shared reborrow).

        Cost: allocates the numpy array (no ledger allocation); copies (one ``TRANSFER``);
        synchronizes (one provider map); no dispatch; O(size).

        Raises:
            BorrowError: an exclusive child reborrow of this view is live.
            CopyForbiddenError: inside ``ledger.forbid_copies()``.
            AccessError: the provider cannot map the bytes.
            ExpiredBorrowError: this view was released.
            UseAfterMoveError: this view was consumed."""
        return _through_view(self, TensorView.to_numpy)

    def duplicate(self) -> Tensor[DT, R]:
        """An explicit copy into a new owner (``TensorView.duplicate`` through a temporary
        shared reborrow).

        Cost: allocates the new owner; copies (one ``EXPLICIT_DUPLICATE``); synchronizes (one
        provider map); no dispatch; O(size).

        Raises:
            BorrowError: an exclusive child reborrow of this view is live.
            CopyForbiddenError: inside ``ledger.forbid_copies()``.
            AccessError: the provider cannot map the bytes.
            ExpiredBorrowError: this view was released.
            UseAfterMoveError: this view was consumed."""
        return _through_view(self, TensorView.duplicate)

    def item(self) -> Any:
        """The single element as a Python scalar (``TensorView.item`` through a temporary
        shared reborrow; a host read, no ledger event).

        Cost: no allocation; no copy (reads in place); no sync; no dispatch; O(1).

        Raises:
            BorrowError: an exclusive child reborrow of this view is live.
            LayoutError: the view has more or fewer than one element.
            DeviceResidentError: the values are device memory the host cannot read.
            ExpiredBorrowError: this view was released.
            UseAfterMoveError: this view was consumed."""
        return _through_view(self, TensorView.item)

    def prepare_host(self) -> PreparedContiguousRead[DT, R] | PreparedStridedRead[DT, R]:
        """Prepared read access through a shared reborrow (see ``TensorView.prepare_host``).

        Cost: no allocation; no copy; synchronizes (one provider map); no dispatch; O(1).

        Raises:
            BorrowError: an exclusive child reborrow of this view is live.
            AccessError: the provider cannot map the bytes.
            ExpiredBorrowError: this view was released.
            UseAfterMoveError: this view was consumed."""
        return self.as_view().prepare_host()

    # -- mutation (implemented once, here) ---------------------------------------------
    @overload
    def __getitem__(self, key: slice | tuple[slice, ...]) -> TensorViewMut[DT, R]: ...  # type: ignore[overload-overlap]
    @overload
    def __getitem__(self, key: BasicKey) -> TensorViewMut[DT, DynRank]: ...
    @overload
    def __getitem__(self, key: Any) -> Any: ...
    def __getitem__(self, key: Any) -> Any:
        """Mutable basic indexing: an exclusive child reborrow (this view waits for it).

        An advanced key reads (a gather through the registered ``getitem`` operator, as
        on ``TensorView``); without one it raises ``TypeError``.
        """
        if not is_basic_key(key):
            return advanced_getitem(self, key, "TensorViewMut[...]")
        d = self._for_reborrow("TensorViewMut[...]")
        child = DV.index(d, key, "TensorViewMut[...]")
        child._injective = d._injective  # a sub-lattice of an injective layout stays injective
        return self._reborrow_mut(child, "TensorViewMut[...]")

    def transpose(self, *axes: int) -> TensorViewMut[DT, R]:
        """A transposed exclusive child reborrow. O(rank).

        Cost: no allocation (a new view); no copy; no sync; no dispatch; O(rank).

        Raises:
            LayoutError: ``axes`` is not a permutation of the axes.
            BorrowError: a reborrow of this view is live.
            ExpiredBorrowError: this view was released.
            UseAfterMoveError: this view was consumed."""
        d = self._for_reborrow("TensorViewMut.transpose")
        child = DV.transpose(d, DV.check_axes("TensorViewMut.transpose", axes, len(d.shape)))
        child._injective = d._injective
        return self._reborrow_mut(child, "TensorViewMut.transpose")  # type: ignore[no-any-return]

    @property
    def T(self) -> TensorViewMut[DT, R]:
        return self.transpose()

    def reshape(self, *shape: int | tuple[int, ...]) -> TensorViewMut[DT, DynRank]:
        """A reshaped exclusive child reborrow of a ``Contiguous`` layout.

        Cost: no allocation (a new view); no copy; no sync; no dispatch; O(rank).

        Raises:
            LayoutError: a bad extent, another size, or a strided layout.
            BorrowError: a reborrow of this view is live.
            ExpiredBorrowError: this view was released.
            UseAfterMoveError: this view was consumed."""
        d = self._for_reborrow("TensorViewMut.reshape")
        child = DV.reshape(d, _shape_arg(shape), "TensorViewMut.reshape")
        child._injective = d._injective
        return self._reborrow_mut(child, "TensorViewMut.reshape")  # type: ignore[no-any-return]

    def prepare_host_mut(self) -> PreparedContiguousWrite[DT, R] | PreparedStridedWrite[DT, R]:
        """Consume this mutable view into prepared host write access. O(1) in element count.

        On failure raises :class:`AccessError` whose ``.value`` is this view, unchanged.

        Cost: no allocation; no copy; synchronizes (one provider map); no dispatch; O(1).

        Raises:
            AccessError: the provider cannot map the bytes (device-resident memory included).
            BorrowError: a reborrow of this view is live.
            ExpiredBorrowError: this view was released.
            UseAfterMoveError: this view was already consumed.
        """
        d = self._writable("prepare_host_mut")
        _map_host(self, "prepare_host_mut", "writing")
        lender = self._transfer("prepare_host_mut")
        cls = PreparedContiguousWrite if isinstance(d.layout, Contiguous) else PreparedStridedWrite
        return cls._make(lender, d, True)  # type: ignore[no-any-return]

    def fill(self, value: Any) -> None:
        """Write ``value`` into every element (a kernel write: no ledger event). O(size).

        On a provider failure raises :class:`AccessError` whose ``.value`` is this view,
        unchanged (nothing written, no dispatch counted).

        Cost: no allocation (only ``value`` is converted on the host); no copy event (a
        kernel write); synchronizes (one provider map); dispatches (one counted provider
        dispatch); O(size).

        Raises:
            DTypeError: ``value`` is not numeric.
            ConversionError: ``value`` is not representable in the dtype (NaN into an
                integer, a dropped imaginary part, an out-of-range integer).
            LayoutError: ``value`` does not broadcast to the shape.
            AccessError: the provider cannot map the bytes (nothing written).
            BorrowError: a reborrow of this view is live.
            ExpiredBorrowError: this view was released.
            UseAfterMoveError: this view was consumed.
        """
        d = self._writable("fill")
        v = _fill_value(value, d)
        _map_host(self, "fill", "writing")
        self._storage.claim.root.provider.counters.dispatches += 1
        d.array()[...] = v

    def __enter__(self) -> TensorViewMut[DT, R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        if self._lender is None:
            return f"TensorViewMut(<{self._ended}>)"
        if self._shared or self._exclusive is not None:  # reborrowed: not readable now
            d = self._desc
            return f"TensorViewMut({d.dtype.name}, shape={d.shape}, {self._storage.span})"
        return _repr("TensorViewMut", self._desc, self._storage.span)


class Tensor(_ViewMetadata, OperatorMixin, Lender, Generic[DT, R]):
    """The unique owner of a tensor's allocation.  Move-only: no copy, no pickle.

    Create with :func:`zeros`, :func:`ones`, :func:`full`, :func:`arange`,
    :func:`from_numpy` or :meth:`from_storage`.  Read through ``as_view()`` (or the
    delegating read methods), write through ``as_view_mut()``; consuming methods
    (``into_*``) empty this object, and later use raises ``UseAfterMoveError``.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (create owners with the creation
    functions, which allocate).
    Raises: nothing."""

    __slots__ = ("_desc", "_storage")

    _desc: CheckedDescriptor
    _storage: OwnedStorage | None

    def __init__(self) -> None:
        raise OwnershipError(
            "Tensor() cannot be constructed directly; use tenferro_storage.zeros/ones/full/"
            "arange/from_numpy or Tensor.from_storage"
        )

    @classmethod
    def _adopt(
        cls, array: np.ndarray[Any, Any], dt: DType, reason: AllocationReason, operation: str
    ) -> Any:
        """Own a fresh C-contiguous array (one allocation event with ``reason``)."""
        storage = adopt(array, reason, operation)
        t = cls.__new__(cls)
        t._init_lender()
        t._storage = storage
        t._desc = D.fresh(dt, array.view(), storage._root)  # type: ignore[arg-type]
        return t

    def _take_back(self, source: Tensor[Any, Any], operation: str) -> None:
        """Undo the move that consumed this object: it takes over ``source``'s owner (the
        same storage and descriptor; no copy, no ledger event) and ``source`` is consumed.
        For a runtime that hands a moved-in owner back after a failed run that never
        wrote it.  ``self`` must be consumed and ``source`` live. O(1)."""
        if self._moved_by is None or self._storage is not None:
            raise UseAfterMoveError(f"{operation}: the tensor to restore was not moved out")
        source._consume(operation)
        self._storage, self._desc = source._storage, source._desc
        source._storage = None
        self._unconsume()

    @classmethod
    def from_storage(
        cls,
        storage: OwnedStorage,
        *,
        dtype: object,
        shape: int | tuple[int, ...],
        strides: tuple[int, ...] | None = None,
        offset: int = 0,
    ) -> Tensor[Any, DynRank]:
        """Consume ``storage`` into a tensor with the given layout (strides/offset in elements).

        Runs all six layout checks once (arithmetic, bounds in the exact span, dtype
        size, alignment, provider compatibility, write injectivity — an owner can
        write).  On ``LayoutError`` the storage is not consumed.  No allocation, no copy.

        Cost: no allocation; no copy; no sync; no dispatch (counts one provider validation);
        O(rank log rank) (the injectivity proof).

        Raises:
            OwnershipError: ``storage`` is not an ``OwnedStorage``.
            DTypeError: ``dtype`` names no supported dtype.
            LayoutError: a layout check fails (the storage is not consumed).
            UseAfterMoveError: ``storage`` was already consumed.
            BorrowError: ``storage`` is borrowed (``as_ref``/``as_mut``).
        """
        if not isinstance(storage, OwnedStorage):
            raise OwnershipError(
                f"Tensor.from_storage: argument 'storage' must be an OwnedStorage (from "
                f"allocate_storage or Tensor.into_storage), got {type(storage).__name__}"
            )
        dt = resolve_dtype_for(dtype, "Tensor.from_storage")
        shape_t = (shape,) if isinstance(shape, int) else shape
        claim = storage.claim
        if strides is None and isinstance(shape_t, tuple) and all(
            isinstance(n, int) and not isinstance(n, bool) for n in shape_t
        ):
            strides_t: object = c_strides(shape_t)
        else:
            strides_t = strides
        desc = D.build(
            "Tensor.from_storage", claim.root, claim.start, claim.stop, dt, shape_t, strides_t,
            offset,
        )
        if desc.injectivity() is None:
            raise LayoutError(
                "Tensor.from_storage",
                "arguments 'shape' and 'strides': the layout is not write-injective (two "
                "coordinates reach one element); an owner must be writable. Use an "
                "AllocationGroup alias for read-only overlapping layouts",
                shape=desc.shape,
                strides=desc.strides,
                offset=desc.offset,
                dtype=dt.name,
                span=storage.span,
            )
        inner = storage.into_claim()
        storage._moved_by = "Tensor.from_storage"
        t: Tensor[Any, DynRank] = Tensor.__new__(Tensor)
        t._init_lender()
        t._storage = OwnedStorage._wrap(inner)
        t._desc = desc
        return t

    if not TYPE_CHECKING:  # hidden from mypy so unknown attributes stay type errors

        def __getattr__(self, name: str) -> Any:
            # A fresh kernel output (adopt_output) defers its whole-array descriptor until
            # something reads it: most AD op outputs are never viewed, so the per-op path
            # skips building it.  Only reached while the ``_desc`` slot is still unset.
            if name == "_desc":
                storage = self._storage
                if storage is not None and storage._root is not None:
                    root = storage._root
                    arr = root._allocation
                    d = D.fresh(_BY_NUMPY[arr.dtype], arr.view(), root, count=False)
                    self._desc = d
                    return d
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _describe(self) -> str:
        return "Tensor"

    def _meta(self, operation: str) -> CheckedDescriptor:
        if self._moved_by is not None or self._exclusive is not None:
            self._readable(operation)
        return self._desc

    _d = _meta  # the hook TensorView's shared read-only implementations call

    # -- borrows -------------------------------------------------------------------------
    def as_view(self) -> TensorView[DT, R]:
        """A shared borrow as a read-only view. O(1): no ledger event, no buffer, no new
        reference to the root.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: BorrowError, UseAfterMoveError."""
        self._borrow_shared("Tensor.as_view", "TensorView")
        return TensorView._make(  # type: ignore[no-any-return]
            self, self._storage, self._desc  # type: ignore[arg-type]  # None only once consumed
        )

    def as_view_mut(self) -> TensorViewMut[DT, R]:
        """An exclusive borrow as a mutable view. O(1), allocation-free.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: BorrowError, UseAfterMoveError."""
        self._borrow_exclusive("Tensor.as_view_mut", "TensorViewMut")
        return TensorViewMut._make(  # type: ignore[no-any-return]
            self, self._storage, self._desc  # type: ignore[arg-type]  # None only once consumed
        )

    # -- read-only behaviour delegates to TensorView ----------------------------------
    def to_numpy(self) -> np.ndarray[Any, Any]:
        """Copy the values out into a new numpy array (``TensorView.to_numpy`` through a
        temporary shared borrow).

        Cost: allocates the numpy array (no ledger allocation); copies (one ``TRANSFER``);
        synchronizes (one provider map); no dispatch; O(size).

        Raises:
            CopyForbiddenError: inside ``ledger.forbid_copies()``.
            AccessError: the provider cannot map the bytes.
            BorrowError: the owner is exclusively borrowed (``as_view_mut``).
            UseAfterMoveError: the owner was consumed."""
        return _through_view(self, TensorView.to_numpy)

    def duplicate(self) -> Tensor[DT, R]:
        """An explicit copy into a new owner (``TensorView.duplicate`` through a temporary
        shared borrow).

        Cost: allocates the new owner; copies (one ``EXPLICIT_DUPLICATE``); synchronizes (one
        provider map); no dispatch; O(size).

        Raises:
            CopyForbiddenError: inside ``ledger.forbid_copies()``.
            AccessError: the provider cannot map the bytes.
            BorrowError: the owner is exclusively borrowed (``as_view_mut``).
            UseAfterMoveError: the owner was consumed."""
        return _through_view(self, TensorView.duplicate)

    def item(self) -> Any:
        """The single element as a Python scalar (``TensorView.item`` through a temporary
        shared borrow; a host read, no ledger event).

        Cost: no allocation; no copy (reads in place); no sync; no dispatch; O(1).

        Raises:
            LayoutError: the owner has more or fewer than one element.
            DeviceResidentError: the values are device memory the host cannot read.
            BorrowError: the owner is exclusively borrowed (``as_view_mut``).
            UseAfterMoveError: the owner was consumed."""
        return _through_view(self, TensorView.item)

    def prepare_host(self) -> PreparedContiguousRead[DT, R] | PreparedStridedRead[DT, R]:
        """Prepared read access holding a shared borrow of this owner (see ``TensorView``).

        Cost: no allocation; no copy; synchronizes (one provider map); no dispatch; O(1).

        Raises:
            AccessError: the provider cannot map the bytes.
            BorrowError: the owner is exclusively borrowed (``as_view_mut``).
            UseAfterMoveError: the owner was consumed."""
        return self.as_view().prepare_host()

    @overload
    def __getitem__(self, key: slice | tuple[slice, ...]) -> TensorView[DT, R]: ...  # type: ignore[overload-overlap]
    @overload
    def __getitem__(self, key: BasicKey) -> TensorView[DT, DynRank]: ...
    @overload
    def __getitem__(self, key: Any) -> Any: ...
    def __getitem__(self, key: Any) -> Any:
        if not is_basic_key(key):
            return advanced_getitem(self, key, "Tensor[...]")
        # the key is checked first (a refusal borrows nothing), then one shared borrow
        desc = DV.index(self._d("Tensor[...]"), key, "Tensor[...]")
        self._borrow_shared("Tensor[...]", "TensorView")
        return TensorView._make(self, self._storage, desc)  # type: ignore[arg-type]  # live

    def transpose(self, *axes: int) -> TensorView[DT, R]:
        """A view with permuted axes (default: reverse; ``TensorView.transpose``).

        Cost: no allocation (a new view); no copy; no sync; no dispatch; O(rank).

        Raises:
            LayoutError: ``axes`` is not a permutation of the axes.
            BorrowError: the owner is exclusively borrowed (``as_view_mut``).
            UseAfterMoveError: the owner was consumed."""
        return _through_view(self, TensorView.transpose, *axes)

    @property
    def T(self) -> TensorView[DT, R]:
        return self.as_view().T

    def reshape(self, *shape: int | tuple[int, ...]) -> TensorView[DT, DynRank]:
        """A reshaped view of a ``Contiguous`` layout (``TensorView.reshape``).

        Cost: no allocation (a new view); no copy; no sync; no dispatch; O(rank).

        Raises:
            LayoutError: a bad extent, another size, or a strided layout.
            BorrowError: the owner is exclusively borrowed (``as_view_mut``).
            UseAfterMoveError: the owner was consumed."""
        return _through_view(self, TensorView.reshape, *shape)

    # -- mutation delegates to TensorViewMut ---------------------------------------------
    def prepare_host_mut(self) -> PreparedContiguousWrite[DT, R] | PreparedStridedWrite[DT, R]:
        """Prepared write access holding an exclusive borrow of this owner.

        Cost: no allocation; no copy; synchronizes (one provider map); no dispatch; O(1).

        Raises:
            AccessError: the provider cannot map the bytes.
            BorrowError: the owner is borrowed.
            UseAfterMoveError: the owner was consumed."""
        return self.as_view_mut().prepare_host_mut()

    def fill(self, value: Any) -> None:
        """Write ``value`` into every element (``TensorViewMut.fill`` through a temporary
        exclusive borrow; a kernel write, no ledger event).

        Cost: no allocation; no copy event; synchronizes (one provider map); dispatches
        (one counted provider dispatch); O(size).

        Raises:
            DTypeError: ``value`` is not numeric.
            ConversionError: ``value`` is not representable in the dtype (NaN into an
                integer, a dropped imaginary part, an out-of-range integer).
            LayoutError: ``value`` does not broadcast to the shape.
            AccessError: the provider cannot map the bytes (nothing written).
            BorrowError: the owner is borrowed.
            UseAfterMoveError: the owner was consumed."""
        m = self.as_view_mut()
        try:
            m.fill(value)
        finally:
            m.release()

    # -- consuming -------------------------------------------------------------------------
    def into_storage(self) -> OwnedStorage:
        """Consume the tensor and return its storage (the layout is dropped). O(1).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: BorrowError, UseAfterMoveError."""
        self._consume("Tensor.into_storage")
        storage = self._storage
        self._storage = None
        assert storage is not None
        return storage

    def take(self, consumer: str = "Tensor.take") -> Tensor[DT, R]:
        """Move this owner into a new owner object and empty this one. O(1), no copy.

        The new object owns the same storage and layout; later use of this object raises
        ``UseAfterMoveError`` naming ``consumer`` (e.g. the op the owner was moved into).
        A borrowed owner is refused with ``BorrowError`` and a ``consumer`` that is not a
        str with ``OwnershipError``; nothing changes then.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: OwnershipError, BorrowError, UseAfterMoveError.
        """
        if not isinstance(consumer, str):
            raise OwnershipError(
                "Tensor.take: argument 'consumer' must be a str naming the operation the owner "
                f"is moved into, got {type(consumer).__name__}"
            )
        desc = self._meta(consumer)
        self._consume(consumer)
        out: Tensor[DT, R] = Tensor.__new__(Tensor)
        out._init_lender()
        out._storage = self._storage
        out._desc = desc
        self._storage = None
        return out

    # Rank policy (see _reinterpret.py; the pair rules are in _reinterpret_rules.py):
    # into_real adds a trailing axis of extent 2, into_complex removes it.  Rank4 ->
    # DynRank because there is no Rank5 marker.
    @overload
    def into_real(self: Tensor[Any, Rank0]) -> Tensor[Any, Rank1]: ...
    @overload
    def into_real(self: Tensor[Any, Rank1]) -> Tensor[Any, Rank2]: ...
    @overload
    def into_real(self: Tensor[Any, Rank2]) -> Tensor[Any, Rank3]: ...
    @overload
    def into_real(self: Tensor[Any, Rank3]) -> Tensor[Any, Rank4]: ...
    @overload
    def into_real(self: Tensor[Any, Rank4]) -> Tensor[Any, DynRank]: ...
    @overload
    def into_real(self: Tensor[Any, DynRank]) -> Tensor[Any, DynRank]: ...
    def into_real(self) -> Tensor[Any, Any]:
        """Consume a complex tensor into a real owner of the same storage, with a trailing
        axis of extent 2 (real, imaginary). Zero-copy, no ledger event, O(rank).

        On refusal raises ``ReinterpretError`` whose ``.value`` is this tensor, unconsumed.

        Cost: no allocation; no copy; no sync; no dispatch; O(rank).
        Raises: ReinterpretError, BorrowError, UseAfterMoveError.
        """
        return _reinterpret_owner(self, to_real, "Tensor.into_real")

    @overload
    def into_complex(self: Tensor[Any, Rank1]) -> Tensor[Any, Rank0]: ...
    @overload
    def into_complex(self: Tensor[Any, Rank2]) -> Tensor[Any, Rank1]: ...
    @overload
    def into_complex(self: Tensor[Any, Rank3]) -> Tensor[Any, Rank2]: ...
    @overload
    def into_complex(self: Tensor[Any, Rank4]) -> Tensor[Any, Rank3]: ...
    @overload
    def into_complex(self: Tensor[Any, DynRank]) -> Tensor[Any, DynRank]: ...
    def into_complex(self) -> Tensor[Any, Any]:
        """Consume a real tensor whose trailing axis is (extent 2, stride 1) into a complex
        owner of the same storage, dropping that axis. Zero-copy, no ledger event, O(rank).

        On refusal raises ``ReinterpretError`` whose ``.value`` is this tensor, unconsumed.

        Cost: no allocation; no copy; no sync; no dispatch; O(rank).
        Raises: ReinterpretError, BorrowError, UseAfterMoveError.
        """
        return _reinterpret_owner(self, to_complex, "Tensor.into_complex")

    # -- protocol ----------------------------------------------------------------------------
    def __repr__(self) -> str:
        if self._moved_by is not None:
            return f"Tensor(<consumed by {self._moved_by}>)"
        if self._exclusive is not None:
            return f"Tensor({self._desc.dtype.name}, shape={self._desc.shape}, <mutably borrowed>)"
        assert self._storage is not None
        return _repr("Tensor", self._desc, self._storage.span)


def _shape_arg(shape: tuple[int | tuple[int, ...], ...]) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], tuple | list):
        return tuple(shape[0])
    return tuple(shape)  # type: ignore[arg-type]


def _reinterpret_owner(
    tensor: Tensor[Any, Any],
    rule: Callable[[CheckedDescriptor, OwnedStorage, str], CheckedDescriptor],
    operation: str,
) -> Tensor[Any, DynRank]:
    """Consume ``tensor`` into a new owner of the same storage under the sealed-pair
    ``rule`` (``_reinterpret_rules``); on refusal ``ReinterpretError`` with ``tensor``
    unconsumed. Zero-copy, no ledger event, O(rank)."""
    tensor._consume(operation)  # BorrowError/UseAfterMoveError here change nothing
    storage = tensor._storage
    assert storage is not None
    try:
        desc = rule(tensor._desc, storage, operation)
    except Refused as exc:
        tensor._unconsume()
        raise ReinterpretError(str(exc), tensor, exc.cause) from None
    tensor._storage = None
    out: Tensor[Any, DynRank] = Tensor.__new__(Tensor)
    out._init_lender()
    out._storage = storage
    out._desc = desc
    return out


def adopt_output(
    array: np.ndarray[Any, Any],
    reason: AllocationReason = _OPERATION_OUTPUT,
    operation: str = "kernel",
) -> Tensor[Any, DynRank]:
    """Own a kernel's fresh output array (one allocation event; no copy). O(1).

    ``array`` must be a fresh, writable C-contiguous array that owns its memory and that
    nothing else refers to.  Memory an existing value holds is never adopted: a
    read-only array (what :func:`read_array` hands out), a live root's buffer or a view
    of one raises :class:`~tenferro_storage.errors.AliasedOutputError` (a
    ``LayoutError``): the kernel returned one of its inputs; ``materialize_output``
    makes the recorded copy instead.  Any other view or non-contiguous array raises
    ``LayoutError``.  Nothing is recorded on refusal.  Rank-0 numpy scalars are wrapped
    first.

    Cost: allocates no new memory (adopts ``array`` as a new owner: one allocation event); no
    copy; no sync; no dispatch; O(1).
    Raises: LayoutError, AliasedOutputError, DTypeError."""
    if type(array) is not np.ndarray:
        array = np.asarray(array)  # a numpy scalar from a rank-0 kernel: a fresh 0-d array
    # the fast path: exactly what Tensor._adopt -> _root.adopt -> _new_root ->
    # OwnedStorage._make -> D.fresh do (same objects, same ledger event, same counters),
    # with adopt()'s checks made by adopt_fresh_claim
    storage = adopt_fresh_claim(array, reason, operation)  # roots are made only in _root.py
    if storage is not None:
        _HOST.counters.validations += 1  # the (trivial) whole-array descriptor, lazily
        return _owner_over(storage)
    # the checked general path (raises the precise DTypeError / LayoutError / refusal)
    return Tensor._adopt(array, from_numpy_dtype(array.dtype, operation), reason, operation)  # type: ignore[no-any-return]


set_general_adopt(adopt_output)  # the deferred per-op path declines to this one


def _owner_over(storage: OwnedStorage) -> Tensor[Any, DynRank]:
    """The owner of a whole fresh claim (``Tensor._adopt``'s object, its descriptor built
    lazily). O(1)."""
    t: Tensor[Any, DynRank] = Tensor.__new__(Tensor)
    t._moved_by = None
    t._shared = 0
    t._exclusive = None
    t._named = None
    t._storage = storage
    return t


def claim_deferred(
    adopted: Tensor[Any, DynRank] | RootResource, operation: str = "kernel"
) -> Tensor[Any, DynRank]:
    """The owner of what :func:`adopt_output_deferred` returned: an owner as it is, or the
    owner minted over a root's whole range.  A root is claimed once: a second claim raises
    ``OwnershipError``. O(1).

    Cost: no allocation; no copy; no sync; no dispatch; O(1).
    Raises: OwnershipError."""
    if type(adopted) is not RootResource:
        if isinstance(adopted, Tensor):
            return adopted
        if isinstance(adopted, RootResource):  # another kind of root (aligned): claimed
            return _owner_over(claim_unclaimed(adopted, operation))  # once, refused here
        raise OwnershipError(
            f"{operation}: claim_deferred: argument 'adopted' must be what "
            f"adopt_output_deferred returned (a RootResource or a Tensor), got {shown(adopted)}"
        )
    storage = claim_unclaimed(adopted, operation)
    _HOST.counters.validations += 1  # the (trivial) whole-array descriptor, made now
    return _owner_over(storage)
