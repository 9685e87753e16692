"""Checked descriptors: a dtype and layout validated once against an exact root-bound span.

A :class:`CheckedDescriptor` retains every construction-time proof (arithmetic,
bounds, dtype size, alignment, provider compatibility, and — when first asked for
writing — write injectivity).  Derived descriptors (slices, transposes,
reinterpretations) check only their new arithmetic.  The numpy array a descriptor
describes is built at most once and cached, so later reads hand out that array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._dtypes import DType
from ._frozen import readonly_over
from ._layout import (
    INTP_MAX,
    CheckedInjectiveStrided,
    CheckedLayout,
    CheckedStrided,
    Contiguous,
    Strided,
    WriteInjectivityProof,
    c_strides,
    check_arithmetic,
    classify,
    prove_injective,
    whole,
)
from ._root import ALIGNMENT, RootResource
from .errors import LayoutError

_PROOF_FRESH = prove_injective((), ())  # a fresh C-contiguous array is trivially injective


class CheckedDescriptor:
    """A typed, validated interpretation of part of one root.

    ``start``/``stop`` are the exact root-bound span (bytes) the layout was checked
    against; ``shape``/``strides``/``offset`` are in elements of ``dtype``, offset
    counted from ``start``.  ``lo``/``hi`` are the reachable element envelope.
    Non-owning metadata: it grants nothing by itself.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = (
        "_array",
        "_flat",
        "_flat_readonly",
        "_imported",
        "_injective",
        "_readonly",
        "_zero_copy",
        "buffer",
        "dtype",
        "hi",
        "layout",
        "lo",
        "offset",
        "shape",
        "size",
        "start",
        "stop",
        "strides",
    )

    dtype: DType
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    size: int
    lo: int
    hi: int
    start: int
    stop: int
    layout: CheckedLayout
    buffer: np.ndarray[Any, Any]
    _array: np.ndarray[Any, Any] | None
    _flat: np.ndarray[Any, Any]  # lazily set by flat()
    _flat_readonly: np.ndarray[Any, Any]  # lazily set by flat()
    _readonly: np.ndarray[Any, Any] | None
    _zero_copy: bool  # lazily set by importable_in_place()
    _imported: tuple[Any, Any]  # lazily set by a runtime's in-place import: (importer, handle)
    _injective: WriteInjectivityProof | bool | None

    # -- byte envelope (for disjointness) ------------------------------------------
    @property
    def byte_envelope(self) -> tuple[int, int]:
        """Half-open root byte range ``[lo, hi)`` reachable by this layout (empty if size 0)."""
        if self.size == 0:
            return (self.start, self.start)
        item = self.dtype.itemsize
        return (self.start + self.lo * item, self.start + (self.hi + 1) * item)

    def injectivity(self) -> WriteInjectivityProof | None:
        """The retained write-injectivity proof, computed on first request. O(rank log rank).

        ``None`` when the layout is not write-injective.

        Cost: no allocation; no copy; no sync; no dispatch; O(rank log rank) once, then O(1).
        Raises: nothing."""
        proof = self._injective
        if proof is False:
            proof = self._injective = prove_injective(self.shape, self.strides)
        return proof  # type: ignore[return-value]

    @property
    def has_injectivity_proof(self) -> bool:
        """Whether the proof question was already answered (retained)."""
        return self._injective is not False

    def injective_plan(self) -> CheckedInjectiveStrided:
        """The strided traversal plan carrying the write-injectivity proof.

        Only for a ``Strided`` layout that is write-injective (asserted, not checked).

        Cost: no allocation; no copy; no sync; no dispatch; O(rank log rank) once for the
        proof, then O(1).
        Raises: nothing."""
        proof = self.injectivity()
        assert proof is not None and isinstance(self.layout, Strided)
        return CheckedInjectiveStrided.from_plan(self.layout.plan, proof)

    # -- arrays --------------------------------------------------------------------
    def _geometry(self) -> tuple[int, tuple[int, ...]]:
        """The byte offset into the buffer and the numpy byte strides of this layout.

        An axis of extent <= 1 (or any axis of an empty layout) never steps, so its stride
        is irrelevant to numpy; validation does not bound it (a slice with step 2**62 is
        legal), so numpy gets 0 there instead of a byte stride past intp. O(rank)."""
        item = self.dtype.itemsize
        size = self.size
        return (
            self.start + self.offset * item if size else self.start,
            tuple(
                s * item if size and n > 1 else 0
                for n, s in zip(self.shape, self.strides, strict=True)
            ),
        )

    def array(self) -> np.ndarray[Any, Any]:
        """The writable numpy array over exactly this layout (built once, cached).

        Cost: no allocation (a numpy array over the root's buffer); no copy; no sync; no
        dispatch; O(rank) once, then O(1).
        Raises: DeviceResidentError (device or external memory: no writable host array)."""
        arr = self._array
        if arr is None:
            if type(self.buffer) is not np.ndarray:  # device memory: no writable host array
                self.buffer.refuse_host(None, "write")  # type: ignore[attr-defined]
            offset, strides = self._geometry()
            arr = np.ndarray(
                self.shape, dtype=self.dtype.numpy, buffer=self.buffer, offset=offset,
                strides=strides,
            )
            self._array = arr
        return arr

    def importable_in_place(self) -> bool:
        """Whether a runtime that imports host memory in place (XLA) can read this layout
        without a copy: host memory, C-contiguous and starting on an ``ALIGNMENT`` (64-byte)
        boundary.  Answered once and cached (a descriptor's buffer and layout never
        change). O(1) after the first call.

        Cost: no allocation; no copy; no sync; no dispatch; O(rank) once, then O(1).
        Raises: nothing."""
        try:
            return self._zero_copy
        except AttributeError:
            pass
        ok = False
        if type(self.buffer) is np.ndarray:
            arr = self.array()
            ok = bool(arr.flags.c_contiguous) and arr.ctypes.data % ALIGNMENT == 0
        self._zero_copy = ok
        return ok

    def readonly(self) -> np.ndarray[Any, Any]:
        """The read-only numpy array over this layout (built once, cached), over a
        read-only buffer: no numpy API can make it (or a view of it) writable, so what a
        shared borrow hands out never becomes write access.  For an external buffer the
        host can read (an XLA CPU buffer) it lies over that buffer's zero-copy read-only
        host view, frozen the same way. O(rank) once, no copy.

        Cost: no allocation (a read-only numpy array over the buffer); no copy; no sync; no
        dispatch; O(rank) once, then O(1).
        Raises: DeviceResidentError (device memory the host cannot read)."""
        ro = self._readonly
        if ro is None:
            buffer = self.buffer
            device = type(buffer) is not np.ndarray
            if device:  # device memory: its host view, or refused
                buffer = buffer.host_readonly()  # type: ignore[attr-defined]
                assert isinstance(buffer, np.ndarray)
                if self.start == 0 and self.offset == 0 and buffer.shape == self.shape and \
                        buffer.dtype is self.dtype.numpy:  # cheap tests first
                    whole = _WHOLE_META.get(self.shape)
                    if whole is not None and self.strides == whole[0] and \
                            buffer.flags.c_contiguous:  # the whole buffer in C order (a
                        self._readonly = buffer  # fresh result's): its frozen view as is
                        return buffer
            offset, strides = self._geometry()
            if device:
                if (offset == 0 and buffer.shape == self.shape and buffer.strides == strides
                        and buffer.dtype == self.dtype.numpy):
                    self._readonly = buffer  # the whole buffer: its frozen view as is
                    return buffer
            ro = readonly_over(buffer, self.shape, self.dtype.numpy, offset, strides)
            self._readonly = ro
        return ro

    def flat(self, writable: bool) -> np.ndarray[Any, Any]:
        """The 1-D array over the contiguous element range (only for ``Contiguous``).

        Built once per mode and cached, like :meth:`array`.  The cache slots are left
        unset until first use, so building a descriptor pays nothing for them.

        Cost: no allocation (a numpy array over the buffer); no copy; no sync; no dispatch;
        O(1).
        Raises: DeviceResidentError (device memory the host cannot map this way).
        """
        try:
            return self._flat if writable else self._flat_readonly
        except AttributeError:
            pass
        assert isinstance(self.layout, Contiguous)
        buffer = self.buffer
        if type(buffer) is not np.ndarray:  # device memory: at most a read-only host view
            if writable:
                buffer.refuse_host(None, "write")  # type: ignore[attr-defined]
            buffer = buffer.host_readonly()  # type: ignore[attr-defined]
        r = self.layout.element_range
        item = self.dtype.itemsize
        offset = self.start + r.start * item if len(r) else self.start
        if writable:
            arr: np.ndarray[Any, Any] = np.ndarray(
                (len(r),), dtype=self.dtype.numpy, buffer=buffer, offset=offset
            )
            self._flat = arr
        else:  # over a read-only buffer, like readonly()
            arr = readonly_over(buffer, (len(r),), self.dtype.numpy, offset)
            self._flat_readonly = arr
        return arr

    def __repr__(self) -> str:
        return (
            f"CheckedDescriptor({self.dtype.name}, shape={self.shape}, strides={self.strides}, "
            f"offset={self.offset}, layout={type(self.layout).__name__})"
        )


def _new(
    dt: DType,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    offset: int,
    size: int,
    lo: int,
    hi: int,
    start: int,
    stop: int,
    buffer: np.ndarray[Any, Any],
    layout: CheckedLayout | None = None,
) -> CheckedDescriptor:
    d = CheckedDescriptor.__new__(CheckedDescriptor)
    d.dtype = dt
    d.shape = shape
    d.strides = strides
    d.offset = offset
    d.size = size
    d.lo = lo
    d.hi = hi
    d.start = start
    d.stop = stop
    d.buffer = buffer
    d.layout = classify(shape, strides, offset, size) if layout is None else layout
    d._array = None
    d._readonly = None
    d._injective = False
    return d


def build(
    operation: str,
    root: RootResource,
    start: int,
    stop: int,
    dt: DType,
    shape: object,
    strides: object,
    offset: object,
    placement: str = "host",
) -> CheckedDescriptor:
    """Validate a full request against the span ``[start, stop)`` of ``root`` (the six checks).

    Checks 1-5 run here; check 6 (write injectivity) runs on first write request
    and is retained.  Counts one validation on the root's provider.
    """
    span = root.span(start, stop)
    shape_t, strides_t, off, size, lo, hi = check_arithmetic(
        operation, shape, strides, offset, dtype=dt.name, span=span
    )

    def fail(reason: str) -> LayoutError:
        return LayoutError(
            operation, reason, shape=shape_t, strides=strides_t, offset=off, dtype=dt.name,
            span=span,
        )

    root.provider.counters.validations += 1
    nbytes = stop - start
    item = dt.itemsize
    # Check 1 (bytes): the logical byte size must be representable, or numpy refuses it.
    if size * item > INTP_MAX:
        raise fail(
            f"arguments 'shape' and 'dtype': {size} elements of {dt.name} overflow the "
            "platform byte range"
        )
    # Check 3: the span holds a whole number of elements of this dtype.
    if nbytes % item:
        raise fail(
            f"argument 'dtype': the span of {nbytes} bytes is not a multiple of the {dt.name} "
            f"size {item}"
        )
    # Check 4: alignment of the span start for this dtype.
    if start % dt.alignment:
        raise fail(f"span start byte {start} is not aligned to {dt.alignment} bytes for {dt.name}")
    # Check 2: bounds inside the exact span.
    n_elems = nbytes // item
    if size == 0:
        if not 0 <= off <= n_elems:
            raise fail(
                f"argument 'offset': offset {off} lies outside the span's {n_elems} elements"
            )
    elif lo < 0 or hi >= n_elems:
        raise fail(
            f"arguments 'dtype', 'shape', 'strides' and 'offset': the layout reaches elements "
            f"[{lo}, {hi}] but the span holds only {n_elems} {dt.name} elements"
        )
    # Check 5: storage and provider compatibility.
    if placement != root.provider.placement:
        raise fail(f"placement {placement!r} does not match provider {root.provider.placement!r}")
    return _new(dt, shape_t, strides_t, off, size, lo, hi, start, stop, root._allocation)


def fresh(
    dt: DType, array: np.ndarray[Any, Any], root: RootResource, count: bool = True
) -> CheckedDescriptor:
    """The descriptor of a fresh C-contiguous array that is the whole root (trivially valid).

    The caller hands in a *view* of the root's buffer; it becomes the cached array.
    """
    if count:
        root.provider.counters.validations += 1
    shape = array.shape
    meta = _WHOLE_META.get(shape)
    if meta is None:
        meta = _whole_meta(shape)
    strides, layout, size = meta
    d = CheckedDescriptor.__new__(CheckedDescriptor)
    d.dtype = dt
    d.shape = shape
    d.strides = strides
    d.offset = 0
    d.size = size
    d.lo = 0
    d.hi = size - 1
    d.start = 0
    buffer = root._allocation
    d.stop = buffer.nbytes  # (RootResource.capacity_bytes)
    d.buffer = buffer
    d.layout = layout
    d._array = array
    d._readonly = None
    d._injective = _PROOF_FRESH
    return d


def fresh_shaped(dt: DType, shape: tuple[int, ...], root: RootResource) -> CheckedDescriptor:
    """The whole-root C-contiguous descriptor of ``shape`` for a root with no host array
    (an external device buffer): :func:`fresh` without the cached array. O(1)."""
    meta = _WHOLE_META.get(shape)
    if meta is None:
        meta = _whole_meta(shape)
    strides, layout, size = meta
    d = CheckedDescriptor.__new__(CheckedDescriptor)
    d.dtype = dt
    d.shape = shape
    d.strides = strides
    d.offset = 0
    d.size = size
    d.lo = 0
    d.hi = size - 1
    d.start = 0
    buffer = root._allocation
    d.stop = buffer.nbytes
    d.buffer = buffer
    d.layout = layout
    d._array = None
    d._readonly = None
    d._injective = _PROOF_FRESH
    return d


# per shape: the row-major strides, the shared whole layout and the size of a fresh array
# of that shape (shapes repeat every step: one lookup instead of two helper calls)
_WHOLE_META: dict[tuple[int, ...], tuple[tuple[int, ...], Contiguous, int]] = {}


def _whole_meta(shape: tuple[int, ...]) -> tuple[tuple[int, ...], Contiguous, int]:
    size = 1
    for n in shape:
        size *= n
    if len(_WHOLE_META) > 4096:
        _WHOLE_META.clear()
    meta = _WHOLE_META[shape] = (c_strides(shape), whole(size), size)
    return meta


# -- derivations (only the new arithmetic is checked) ---------------------------------


__all__ = [
    "CheckedDescriptor",
    "CheckedInjectiveStrided",
    "CheckedStrided",
    "build",
    "fresh",
]
