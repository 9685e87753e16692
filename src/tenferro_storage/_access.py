"""Prepared host access: the state a view becomes once provider work is done.

``view.prepare_host()`` consumes the view and returns exactly one of
:class:`PreparedContiguousRead` / :class:`PreparedStridedRead` (the class is the
state: there are no ``is_contiguous``/``is_mapped`` flags); ``prepare_host_mut()``
returns one of the write variants.  Each carries the view's borrow until
``release()``, the end of its ``with`` block, or its death.  The hot loop is
numpy's: ``as_slice()``/``as_array()`` hand out arrays built once from the
retained plan.  The per-element iterators exist for completeness and small data.

Debug mode (``TENFERRO_DEBUG_BORROWS=1`` in the environment when the package is
imported; on in the test suite) catches arrays that outlive their access.  Every array
a prepared access hands out then lies over a private *staging* buffer instead of the
storage: a copy of the layout's values, made on first use.  When the access ends
(``release()``, the end of its ``with`` block, or its death), a write access copies the
staged values back into the storage, then the staging buffer is *poisoned* (NaN for
floating and complex dtypes, the dtype's maximum for integers, every bool inverted) and
the arrays handed out become read-only.  So a late write through one of them raises
numpy's read-only ``ValueError``, a late read sees poison, and the storage (which a tape
may hold) is never touched after the borrow ended.  An array *derived* inside the block
(``a[1:]``) keeps its own flags: a late write through it lands in the poisoned staging
buffer, never in the storage.  The staging copies are instrumentation: they are not
ledger events (ledger totals are identical with and without debug mode) and
``forbid_copies()`` does not refuse them.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterator
from typing import Any, Final, Generic, TypeVar

import numpy as np

from ._descriptor import CheckedDescriptor
from ._dtypes import DType
from ._frozen import readonly_over
from ._layout import CheckedInjectiveStrided, CheckedLayout, CheckedStrided, Contiguous, Strided
from ._linear import Borrow, Lender
from ._root import OwnedStorage

DT = TypeVar("DT")
R = TypeVar("R")

_OFF: Final = frozenset({"", "0", "false", "no", "off"})
_DEBUG_BORROWS: bool = os.environ.get("TENFERRO_DEBUG_BORROWS", "").strip().lower() not in _OFF
"""Debug mode, read once at import from ``TENFERRO_DEBUG_BORROWS``."""


def _set_debug_borrows(on: bool) -> bool:
    """Switch debug mode on or off for accesses prepared from now on; return the old setting.

    For tests.  An access keeps the mode it was prepared under.
    """
    global _DEBUG_BORROWS
    previous = _DEBUG_BORROWS
    _DEBUG_BORROWS = bool(on)
    return previous


def _debug_borrows() -> bool:
    """Whether accesses prepared now hand out staged arrays (debug mode)."""
    return _DEBUG_BORROWS


def _poison(typed: np.ndarray[Any, Any]) -> None:
    kind = typed.dtype.kind
    if kind == "f":
        typed.fill(np.nan)
    elif kind == "c":
        typed.fill(complex(np.nan, np.nan))
    elif kind in "iu":
        typed.fill(np.iinfo(typed.dtype).max)
    elif kind == "b":
        np.logical_not(typed, out=typed)
    else:  # pragma: no cover - every supported dtype is one of the above
        typed.fill(0)


class _Staging:
    """The private buffer behind every array one debug-mode access hands out.

    It covers the layout's element envelope ``[lo, hi]`` of the span, so the staged
    arrays keep the real layout's strides; only the layout's own elements are copied
    in (and, for a write access, back).  O(envelope) to build, O(size) to copy.
    """

    __slots__ = ("buffer", "cache", "handed", "lo")

    def __init__(self, desc: CheckedDescriptor) -> None:
        item = desc.dtype.itemsize
        self.lo = desc.lo if desc.size else 0
        n = desc.hi - desc.lo + 1 if desc.size else 0
        self.buffer: np.ndarray[Any, Any] = np.empty(n * item, dtype=np.uint8)
        self.cache: dict[str, np.ndarray[Any, Any]] = {}
        self.handed: list[np.ndarray[Any, Any]] = []
        if desc.size:
            self.n_dim(desc)[...] = desc.readonly()

    def n_dim(self, desc: CheckedDescriptor) -> np.ndarray[Any, Any]:
        """The writable staged array with the layout's shape and strides (internal)."""
        arr = self.cache.get("array")
        if arr is None:
            item = desc.dtype.itemsize
            size = desc.size
            arr = self.cache["array"] = np.ndarray(
                desc.shape,
                dtype=desc.dtype.numpy,
                buffer=self.buffer,
                offset=(desc.offset - self.lo) * item if size else 0,
                strides=tuple(
                    s * item if size and n > 1 else 0
                    for n, s in zip(desc.shape, desc.strides, strict=True)
                ),
            )
        return arr

    def hand_out(self, desc: CheckedDescriptor, kind: str, writable: bool) -> np.ndarray[Any, Any]:
        """The staged array of ``kind`` (``"array"``/``"flat"``), built once per mode; a
        read-only one lies over a read-only buffer (no numpy API makes it writable)."""
        key = f"{kind}:{'w' if writable else 'r'}"
        arr = self.cache.get(key)
        if arr is None:
            item = desc.dtype.itemsize
            if kind == "array":
                n_dim = self.n_dim(desc)
                if writable:
                    arr = n_dim.view()
                else:
                    offset = (desc.offset - self.lo) * item if desc.size else 0
                    arr = readonly_over(
                        self.buffer, n_dim.shape, n_dim.dtype, offset, n_dim.strides
                    )
            else:
                layout = desc.layout
                assert isinstance(layout, Contiguous)
                r = layout.element_range
                offset = (r.start - self.lo) * item if len(r) else 0
                if writable:
                    arr = np.ndarray(
                        (len(r),), dtype=desc.dtype.numpy, buffer=self.buffer, offset=offset
                    )
                else:
                    arr = readonly_over(self.buffer, (len(r),), desc.dtype.numpy, offset)
            self.cache[key] = arr
            self.handed.append(arr)
        return arr

    def typed(self, desc: CheckedDescriptor) -> np.ndarray[Any, Any]:
        """The whole staging buffer as a 1-D array of the dtype (for iteration/poison)."""
        item = desc.dtype.itemsize
        return np.ndarray((self.buffer.nbytes // item,), dtype=desc.dtype.numpy, buffer=self.buffer)

    def end(self, desc: CheckedDescriptor, write_back: bool) -> None:
        """Copy back (write access), poison, and freeze everything handed out."""
        try:
            if write_back and desc.size:
                desc.array()[...] = self.n_dim(desc)
        finally:
            _poison(self.typed(desc))
            for arr in self.handed:
                arr.flags.writeable = False
            self.buffer.flags.writeable = False
            self.cache.clear()


class _Prepared(Borrow, Generic[DT, R]):
    __slots__ = ("_desc", "_ended", "_exclusive_borrow", "_lender", "_stage")

    _desc: CheckedDescriptor
    # False: normal mode (arrays over the storage); True: debug mode, nothing staged yet;
    # a _Staging: debug mode, the staging buffer every array of this access lies over.
    _stage: _Staging | bool

    @classmethod
    def _make(cls, lender: Lender, desc: CheckedDescriptor, exclusive: bool) -> Any:
        p = cls.__new__(cls)
        p._lender = lender
        p._exclusive_borrow = exclusive
        p._ended = None
        p._desc = desc
        p._stage = _DEBUG_BORROWS
        return p

    def _check(self, operation: str) -> CheckedDescriptor:
        if self._lender is None:
            self._dead(operation)
        return self._desc

    def _staging(self, desc: CheckedDescriptor) -> _Staging:
        stage = self._stage
        if stage is True:
            stage = self._stage = _Staging(desc)
        assert isinstance(stage, _Staging)
        return stage

    def _array(self, operation: str, writable: bool) -> np.ndarray[Any, Any]:
        desc = self._check(operation)
        if self._stage is False:
            return desc.array() if writable else desc.readonly()
        return self._staging(desc).hand_out(desc, "array", writable)

    def _flat(self, operation: str, writable: bool) -> np.ndarray[Any, Any]:
        desc = self._check(operation)
        if self._stage is False:
            return desc.flat(writable)
        return self._staging(desc).hand_out(desc, "flat", writable)

    def _iter(self, operation: str, plan: CheckedStrided) -> Iterator[Any]:
        desc = self._check(operation)
        if self._stage is False:
            return _iter_plan(desc, plan)
        stage = self._staging(desc)
        return _iter_offsets(stage.typed(desc), plan, stage.lo)

    def release(self) -> None:
        """End the access now (idempotent). O(1) (debug mode: O(size) to copy back/poison).

        Cost: no allocation; no copy (debug mode: a write access copies its staged values
        back, no ledger event); no sync; no dispatch; O(1) (debug mode: O(size)).
        Raises: nothing."""
        stage = self._stage
        if stage is not False and stage is not True and self._lender is not None:
            self._stage = True
            try:
                stage.end(self._desc, self._exclusive_borrow)
            finally:
                Borrow.release(self)
        else:
            Borrow.release(self)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._check("shape").shape

    @property
    def dtype(self) -> Any:
        return self._check("dtype").dtype

    def __enter__(self: Any) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "released" if self._lender is None else "live"
        return f"{type(self).__name__}({self._desc.dtype.name}, shape={self._desc.shape}, {state})"


class _ReadMixin(_Prepared[DT, R]):
    __slots__ = ()

    def as_array(self) -> np.ndarray[Any, Any]:
        """The checked n-dimensional array, read-only (cached; O(1) after the first call).

        Cost: no allocation (a numpy array over the storage; debug mode: allocates and
        fills a staging buffer once, no ledger event); no copy; no sync; no dispatch; O(rank) once,
        then O(1) (debug mode: O(size) once).
        Raises: ExpiredBorrowError."""
        return self._array("as_array", False)


class PreparedContiguousRead(_ReadMixin[DT, R]):
    """Shared host access to a row-major contiguous layout.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (made by the API that returns it, never
    constructed directly).
    Raises: nothing."""

    __slots__ = ()

    @property
    def element_range(self) -> range:
        """The checked element range of the span."""
        layout = self._check("element_range").layout
        assert isinstance(layout, Contiguous)
        return layout.element_range

    def as_slice(self) -> np.ndarray[Any, Any]:
        """A read-only 1-D array over the checked element range (O(1), no copy).

        Cost: no allocation (a numpy array over the storage, cached; debug mode: allocates
        and fills a staging buffer once, no ledger event); no copy; no sync; no dispatch; O(1)
        (debug mode: O(size) once).
        Raises: ExpiredBorrowError."""
        return self._flat("as_slice", False)

    def iter_contiguous(self) -> Iterator[Any]:
        """Iterate the elements in order (a plain iterator over :meth:`as_slice`).

        Cost: no allocation; no copy; no sync; no dispatch; O(1) to create, O(size) to
        exhaust (debug mode: the values come from the staging buffer).
        Raises: ExpiredBorrowError."""
        return iter(self.as_slice())


class PreparedStridedRead(_ReadMixin[DT, R]):
    """Shared host access to a strided layout, with its retained traversal plan.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (made by the API that returns it, never
    constructed directly).
    Raises: nothing."""

    __slots__ = ()

    @property
    def plan(self) -> CheckedStrided:
        """The checked strided plan (start, extents, strides, carry)."""
        layout = self._check("plan").layout
        assert isinstance(layout, Strided)
        return layout.plan

    def iter_strided(self) -> Iterator[Any]:
        """Iterate elements in logical row-major order with an incremental carry cursor.

        Cost: no allocation; no copy; no sync; no dispatch; O(1) to create, O(size) to
        exhaust (debug mode: the values come from the staging buffer).
        Raises: ExpiredBorrowError."""
        return self._iter("iter_strided", self.plan)


class _WriteMixin(_Prepared[DT, R]):
    __slots__ = ()

    def as_array(self) -> np.ndarray[Any, Any]:
        """The checked n-dimensional array, writable (O(1), no copy).

        Cost: no allocation (a numpy array over the storage, cached; debug mode: allocates
        and fills a staging buffer once, no ledger event); no copy; no sync; no dispatch; O(rank)
        once, then O(1) (debug mode: O(size) once).
        Raises: ExpiredBorrowError, DeviceResidentError."""
        return self._array("as_array", True)


class PreparedContiguousWrite(_WriteMixin[DT, R]):
    """Exclusive host access to a row-major contiguous layout.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (made by the API that returns it, never
    constructed directly).
    Raises: nothing."""

    __slots__ = ()

    @property
    def element_range(self) -> range:
        layout = self._check("element_range").layout
        assert isinstance(layout, Contiguous)
        return layout.element_range

    def as_slice(self) -> np.ndarray[Any, Any]:
        """A read-only 1-D array over the checked element range.

        Cost: no allocation (a numpy array over the storage, cached; debug mode: allocates
        and fills a staging buffer once, no ledger event); no copy; no sync; no dispatch; O(1)
        (debug mode: O(size) once).
        Raises: ExpiredBorrowError."""
        return self._flat("as_slice", False)

    def as_slice_mut(self) -> np.ndarray[Any, Any]:
        """A writable 1-D array over the checked element range (O(1), no copy).

        Cost: no allocation (a numpy array over the storage, cached; debug mode: allocates
        and fills a staging buffer once, no ledger event); no copy; no sync; no dispatch; O(1)
        (debug mode: O(size) once).
        Raises: ExpiredBorrowError, DeviceResidentError."""
        return self._flat("as_slice_mut", True)

    def iter_contiguous(self) -> Iterator[Any]:
        """Iterate the elements in order (a plain iterator over :meth:`as_slice`).

        Cost: no allocation; no copy; no sync; no dispatch; O(1) to create, O(size) to
        exhaust (debug mode: the values come from the staging buffer).
        Raises: ExpiredBorrowError."""
        return iter(self.as_slice())


class PreparedStridedWrite(_WriteMixin[DT, R]):
    """Exclusive host access to a strided layout proven write-injective.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (made by the API that returns it, never
    constructed directly).
    Raises: nothing."""

    __slots__ = ("_plan",)

    _plan: CheckedInjectiveStrided  # lazily set by ``plan`` (preparing stays O(1))

    @property
    def plan(self) -> CheckedInjectiveStrided:
        """The injective traversal plan: each element offset is yielded at most once.

        Built on first request from the descriptor's retained plan and retained proof
        (nothing is re-proven)."""
        desc = self._check("plan")
        try:
            return self._plan
        except AttributeError:
            plan = self._plan = desc.injective_plan()
            return plan

    def iter_strided(self) -> Iterator[Any]:
        """Iterate element values in logical order (incremental carry cursor).

        Cost: no allocation; no copy; no sync; no dispatch; O(rank) to create (the injective
        plan, on first use), O(size) to exhaust.
        Raises: ExpiredBorrowError."""
        return self._iter("iter_strided", self.plan)


def _iter_plan(desc: CheckedDescriptor, plan: CheckedStrided) -> Iterator[Any]:
    # One typed 1-D array over the whole span is built outside the loop; inside, each
    # step is an index into it plus the cursor's incremental update.
    base = np.ndarray(
        ((desc.stop - desc.start) // desc.dtype.itemsize,),
        dtype=desc.dtype.numpy,
        buffer=desc.buffer,
        offset=desc.start,
    )
    for off in plan.offsets():
        yield base[off]


def _iter_offsets(typed: np.ndarray[Any, Any], plan: CheckedStrided, lo: int) -> Iterator[Any]:
    # Debug mode: the same traversal over the staging buffer (which starts at element lo).
    for off in plan.offsets():
        yield typed[off - lo]


PreparedHostRead = PreparedContiguousRead[Any, Any] | PreparedStridedRead[Any, Any]
PreparedHostWrite = PreparedContiguousWrite[Any, Any] | PreparedStridedWrite[Any, Any]


# -- the device half of the hierarchy ---------------------------------------------------------


class AccessTarget(enum.Enum):
    """Where a prepared access is for: the host (numpy arrays) or a device (bindings).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (an enum member look-up).
    Raises: ValueError."""

    HOST = "host"
    DEVICE = "device"


class _DevicePayload(Borrow):
    """The payload every device access state carries: the view's borrow, its retained
    checked descriptor, the owning storage it reaches the root through, and the provider
    context it was prepared for.  No numpy array, slice, iterator or host guard.

    The states are distinct classes (prepared, bound, retirement-held), never flags; each
    step consumes the previous object into the next one carrying the same borrow.
    """

    __slots__ = ("_context", "_desc", "_ended", "_exclusive_borrow", "_lender", "_storage")

    _desc: CheckedDescriptor
    _storage: OwnedStorage
    _context: Any  # providers.ProviderContext (lifetime only)

    def __init__(self) -> None:
        raise TypeError(
            f"{type(self).__name__} cannot be constructed directly; it is produced from a "
            "view by providers.prepare_read/prepare_write and bind_read/bind_write"
        )

    @classmethod
    def _make(
        cls,
        lender: Lender,
        exclusive: bool,
        desc: CheckedDescriptor,
        storage: OwnedStorage,
        context: Any,
    ) -> Any:
        p = cls.__new__(cls)
        p._lender = lender
        p._exclusive_borrow = exclusive
        p._ended = None
        p._desc = desc
        p._storage = storage
        p._context = context
        return p

    def _successor(self, cls: type[_DevicePayload], operation: str) -> Any:
        """Consume this payload into ``cls`` carrying the same borrow (no re-check). O(1)."""
        lender = self._transfer(operation)
        return cls._make(lender, self._exclusive_borrow, self._desc, self._storage, self._context)

    def _check(self, operation: str) -> CheckedDescriptor:
        if self._lender is None:
            self._dead(operation)
        return self._desc

    @property
    def shape(self) -> tuple[int, ...]:
        """Extents per axis (retained metadata). O(1)."""
        return self._check("shape").shape

    @property
    def dtype(self) -> DType:
        """The element type. O(1)."""
        return self._check("dtype").dtype

    @property
    def layout(self) -> CheckedLayout:
        """The retained checked layout used for launch/binding. O(1)."""
        return self._check("layout").layout

    @property
    def context(self) -> Any:
        """The provider context this payload was prepared for (lifetime only)."""
        self._check("context")
        return self._context

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "released" if self._lender is None else "live"
        d = self._desc
        name = getattr(self._context, "name", "?")
        return f"{type(self).__name__}({d.dtype.name}, shape={d.shape}, {name}, {state})"


class PreparedDeviceRead(_DevicePayload):
    """Device read access prepared from a shared view (``PreparedRead``'s device variant).

    Made by ``providers.prepare_read``; consumed by ``providers.bind_read``.  Exposes
    shape, dtype and the retained layout, never a host array.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (made by the API that returns it, never
    constructed directly).
    Raises: nothing."""

    __slots__ = ()


class PreparedDeviceWrite(_DevicePayload):
    """Device write access prepared from an exclusive mutable view (``PreparedWrite``'s
    device variant; the layout is write-injective).  Consumed by ``providers.bind_write``.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (made by the API that returns it, never
    constructed directly).
    Raises: nothing."""

    __slots__ = ()


PreparedRead = PreparedHostRead | PreparedDeviceRead
"""Prepared read access: exactly one host traversal state or the device state."""
PreparedWrite = PreparedHostWrite | PreparedDeviceWrite
"""Prepared write access: exactly one host traversal state or the device state."""
