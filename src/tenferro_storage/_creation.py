"""Module-level creation functions.  Each returns a fresh owner and records exactly one
allocation event; imports from numpy also record one ``TRANSFER`` copy."""

from __future__ import annotations

from typing import Any, overload

import numpy as np

from ._dtypes import DType, checked_cast, from_numpy_dtype
from ._dtypes import resolve as resolve_dtype_for
from ._layout import INTP_MAX
from ._ledger import LEDGER, AllocationReason, CopyReason
from ._rank import DynRank, Rank0, Rank1, Rank2, Rank3, Rank4
from ._root import OwnedStorage, aligned_copy, aligned_empty, allocate
from ._tensor import Tensor, TensorView, TensorViewMut
from .errors import (
    AllocationFailedError,
    ConversionError,
    DTypeError,
    LayoutError,
    OwnershipError,
    shown,
)

_OUT = AllocationReason.OPERATION_OUTPUT

Shape = int | tuple[int, ...]


def _shape(operation: str, shape: object, dt: DType | None = None) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer) and not isinstance(shape, bool):
        shape = (int(shape),)
    if isinstance(shape, list):
        shape = tuple(shape)
    if not isinstance(shape, tuple) or not all(
        isinstance(n, int | np.integer) and not isinstance(n, bool) and n >= 0 for n in shape
    ):
        raise LayoutError(
            operation,
            f"argument 'shape' must be a non-negative int or tuple of them, got {shown(shape)}",
        )
    out = tuple(int(n) for n in shape)
    size = (dt.itemsize if dt is not None else 1) * int(np.prod(out, dtype=object))
    if size > INTP_MAX:
        raise LayoutError(
            operation, f"argument 'shape' {out} needs {size} bytes, more than can be addressed"
        )
    return out


@overload
def zeros(shape: tuple[()], dtype: object = ...) -> Tensor[Any, Rank0]: ...  # type: ignore[overload-overlap]
@overload
def zeros(shape: int | tuple[int], dtype: object = ...) -> Tensor[Any, Rank1]: ...  # type: ignore[overload-overlap]
@overload
def zeros(shape: tuple[int, int], dtype: object = ...) -> Tensor[Any, Rank2]: ...  # type: ignore[overload-overlap]
@overload
def zeros(shape: tuple[int, int, int], dtype: object = ...) -> Tensor[Any, Rank3]: ...  # type: ignore[overload-overlap]
@overload
def zeros(shape: tuple[int, int, int, int], dtype: object = ...) -> Tensor[Any, Rank4]: ...  # type: ignore[overload-overlap]
@overload
def zeros(shape: tuple[int, ...], dtype: object = ...) -> Tensor[Any, DynRank]: ...
def zeros(shape: Shape, dtype: object = "float64") -> Tensor[Any, Any]:
    """A new owner filled with zeros. One ``OPERATION_OUTPUT`` allocation. O(size).

    Cost: allocates one owner; no copy; no sync; no dispatch; O(n) to fill.
    Raises: DTypeError, LayoutError."""
    dt = resolve_dtype_for(dtype, "zeros")
    arr = aligned_empty(_shape("zeros", shape, dt), dt.numpy)
    arr.fill(0)
    return Tensor._adopt(arr, dt, _OUT, "zeros")  # type: ignore[no-any-return]


@overload
def ones(shape: tuple[()], dtype: object = ...) -> Tensor[Any, Rank0]: ...  # type: ignore[overload-overlap]
@overload
def ones(shape: int | tuple[int], dtype: object = ...) -> Tensor[Any, Rank1]: ...  # type: ignore[overload-overlap]
@overload
def ones(shape: tuple[int, int], dtype: object = ...) -> Tensor[Any, Rank2]: ...  # type: ignore[overload-overlap]
@overload
def ones(shape: tuple[int, int, int], dtype: object = ...) -> Tensor[Any, Rank3]: ...  # type: ignore[overload-overlap]
@overload
def ones(shape: tuple[int, int, int, int], dtype: object = ...) -> Tensor[Any, Rank4]: ...  # type: ignore[overload-overlap]
@overload
def ones(shape: tuple[int, ...], dtype: object = ...) -> Tensor[Any, DynRank]: ...
def ones(shape: Shape, dtype: object = "float64") -> Tensor[Any, Any]:
    """A new owner filled with ones. One ``OPERATION_OUTPUT`` allocation. O(size).

    Cost: allocates one owner; no copy; no sync; no dispatch; O(n) to fill.
    Raises: DTypeError, LayoutError."""
    dt = resolve_dtype_for(dtype, "ones")
    arr = aligned_empty(_shape("ones", shape, dt), dt.numpy)
    arr.fill(1)
    return Tensor._adopt(arr, dt, _OUT, "ones")  # type: ignore[no-any-return]


@overload
def full(shape: tuple[()], fill_value: Any, dtype: object = ...) -> Tensor[Any, Rank0]: ...
@overload
def full(shape: int | tuple[int], fill_value: Any, dtype: object = ...) -> Tensor[Any, Rank1]: ...
@overload
def full(shape: tuple[int, int], fill_value: Any, dtype: object = ...) -> Tensor[Any, Rank2]: ...
@overload
def full(
    shape: tuple[int, int, int], fill_value: Any, dtype: object = ...
) -> Tensor[Any, Rank3]: ...
@overload
def full(
    shape: tuple[int, int, int, int], fill_value: Any, dtype: object = ...
) -> Tensor[Any, Rank4]: ...
@overload
def full(shape: tuple[int, ...], fill_value: Any, dtype: object = ...) -> Tensor[Any, DynRank]: ...
def full(shape: Shape, fill_value: Any, dtype: object = "float64") -> Tensor[Any, Any]:
    """A new owner filled with ``fill_value``. One ``OPERATION_OUTPUT`` allocation. O(size).

    Cost: allocates one owner; no copy; no sync; no dispatch; O(n) to fill.
    Raises: DTypeError, LayoutError."""
    dt = resolve_dtype_for(dtype, "full")
    return _filled("full", _shape("full", shape, dt), fill_value, dt)


def _filled(
    operation: str, shape_t: tuple[int, ...], fill_value: Any, dt: Any
) -> Tensor[Any, Any]:
    """A new owner of ``shape_t`` filled with the numeric scalar ``fill_value`` (cast to
    ``dt`` as numpy casts, refused when that loses the value); ``DTypeError`` names
    ``operation`` and the argument. One ``OPERATION_OUTPUT`` allocation. O(size)."""
    try:
        fill = np.asarray(fill_value)
    except Exception as e:
        raise DTypeError(
            f"{operation}: argument 'fill_value' {shown(fill_value)} is not a scalar: {e}"
        ) from None
    if fill.ndim != 0 or fill.dtype.kind not in "biufc":
        raise DTypeError(
            f"{operation}: argument 'fill_value' must be a numeric scalar, got "
            f"{shown(fill_value)}"
        )
    fill = checked_cast(f"{operation}: argument 'fill_value'", fill, dt.numpy)
    arr = aligned_empty(shape_t, dt.numpy)
    arr.fill(fill)
    return Tensor._adopt(arr, dt, _OUT, operation)  # type: ignore[no-any-return]


def arange(
    start: float, stop: float | None = None, step: float = 1, dtype: object = None
) -> Tensor[Any, Rank1]:
    """Evenly spaced values as in ``numpy.arange``. One ``OPERATION_OUTPUT`` allocation.

    ``dtype`` defaults to int64 for integer arguments and float64 otherwise.

    Cost: allocates one owner; no copy; no sync; no dispatch; O(n) to fill.
    Raises: DTypeError, LayoutError."""
    # with one argument it is the stop (numpy's convention), but a refusal names the
    # parameter the caller passed it as
    given = (("start", start), ("step", step)) if stop is None else (
        ("start", start), ("stop", stop), ("step", step)
    )
    for name, v in given:
        real = isinstance(v, int | float | np.integer | np.floating)
        if isinstance(v, bool | np.bool_) or not real:
            raise DTypeError(f"arange: argument {name!r} must be a real number, got {shown(v)}")
        if not np.isfinite(v):
            raise ConversionError(f"arange: argument {name!r} must be finite, got {v!r}")
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ConversionError("arange: argument 'step' must not be 0")
    if dtype is None:
        ints = all(isinstance(v, int | np.integer) for v in (start, stop, step))
        dtype = "int64" if ints else "float64"
    dt = resolve_dtype_for(dtype, "arange")
    with np.errstate(all="ignore"):  # float arithmetic: no integer overflow, no warning
        n = np.ceil((np.float64(stop) - np.float64(start)) / np.float64(step))
    if not n * dt.itemsize <= INTP_MAX:
        count = f"{int(n)}" if np.isfinite(n) else "unboundedly many"
        raise LayoutError(
            "arange",
            f"arguments 'start', 'stop' and 'step' ask for {count} elements, which need more "
            "memory than can be addressed",
        )
    arr = aligned_copy(np.arange(start, stop, step, dtype=dt.numpy), dt.numpy)
    return Tensor._adopt(arr, dt, _OUT, "arange")  # type: ignore[no-any-return]


def from_numpy(array: Any, dtype: object = None) -> Tensor[Any, DynRank]:
    """Copy a numpy array (or array-like) into a new owner.

    Records one ``TRANSFER`` copy and one ``TRANSFER_DESTINATION`` allocation; the
    source is not referenced afterwards.  ``dtype`` converts on the way in (the
    conversion is part of the same transfer).  Unsupported dtypes raise ``DTypeError``.

    Cost: allocates one owner; copies the array once (a recorded TRANSFER); no sync; no dispatch;
    O(n).
    Raises: DTypeError, ConversionError, CopyForbiddenError."""
    if isinstance(array, Tensor | TensorView | TensorViewMut):
        raise OwnershipError(
            f"from_numpy: argument 'array' is a {type(array).__name__}, not a numpy array; "
            "use .duplicate() for an explicit copy of a tenferro value"
        )
    try:
        src = np.asarray(array)
    except Exception as e:  # ragged lists, objects numpy cannot convert
        raise DTypeError(f"from_numpy: argument 'array' cannot become an array: {e}") from None
    dt = (
        resolve_dtype_for(dtype, "from_numpy")
        if dtype is not None
        # another byte order (big-endian data) is the same type: the copy below converts
        # it, as numpy's own operations do
        else from_numpy_dtype(
            src.dtype if src.dtype.isnative else src.dtype.newbyteorder("="),
            "from_numpy: argument 'array'",
        )
    )
    if dtype is not None and src.dtype.kind not in "biufc":
        raise DTypeError(f"from_numpy: cannot convert numpy dtype {src.dtype} to {dt.name}")
    return _transfer(checked_cast("from_numpy: argument 'array'", src, dt.numpy), dt,
                     "from_numpy")


def _transfer(src: np.ndarray[Any, Any], dt: Any, operation: str) -> Tensor[Any, DynRank]:
    """``src`` copied into a new owner: one ``TRANSFER`` copy, one ``TRANSFER_DESTINATION``
    allocation (nothing when copies are forbidden: ``CopyForbiddenError`` first). O(size)."""
    LEDGER.check_copy_allowed(operation)
    arr = aligned_copy(src, dt.numpy)
    t: Tensor[Any, DynRank] = Tensor._adopt(
        arr, dt, AllocationReason.TRANSFER_DESTINATION, operation
    )
    LEDGER.copy(CopyReason.TRANSFER, arr.nbytes, operation)
    return t


def from_dlpack(x: Any) -> Tensor[Any, DynRank]:
    """Import any DLPack producer (a torch tensor, a JAX array, a numpy array, another
    tenferro value) into a new owner: **one recorded** ``TRANSFER`` copy and one
    ``TRANSFER_DESTINATION`` allocation, read straight from the producer's memory (numpy's
    zero-copy ``np.from_dlpack``, released right after).

    Why a copy and not adoption: the producer keeps its tensor, so its memory stays
    reachable (and, for torch, writable) from outside; an owner here must be the only way
    to its bytes.  A producer on another device than the CPU, or of a dtype tenferro does
    not store, raises ``DTypeError`` naming ``from_dlpack``; nothing is allocated then.
    O(size).

    Cost: allocates one owner; copies once (a recorded TRANSFER); no sync; no dispatch; O(n).
    Raises: DTypeError, ConversionError, CopyForbiddenError."""
    if not hasattr(x, "__dlpack__"):
        raise DTypeError(
            f"from_dlpack: argument 'x' is a {type(x).__name__}, which does not implement "
            "the DLPack protocol (__dlpack__); use from_numpy for arrays and lists"
        )
    try:
        src = np.from_dlpack(x)
    except (BufferError, RuntimeError, TypeError, ValueError) as e:
        raise DTypeError(f"from_dlpack: argument 'x' cannot be read on the host: {e}") from None
    dt = from_numpy_dtype(src.dtype, "from_dlpack: argument 'x'")
    try:
        return _transfer(src, dt, "from_dlpack")
    finally:
        del src  # the producer's capsule (and a tenferro export's borrow) ends here


def allocate_storage(
    nbytes: int, reason: AllocationReason = AllocationReason.OPERATION_OUTPUT
) -> OwnedStorage:
    """Allocate ``nbytes`` of uninitialized host memory as a new owner (one allocation event).

    Build tensors over it (or over pieces of it, after ``split``) with
    :meth:`Tensor.from_storage`.

    Cost: allocates ``nbytes`` (one allocation event); no copy; no sync; no dispatch; O(1)
    (uninitialized memory).
    Raises: AllocationFailedError, ValueError."""
    if not isinstance(nbytes, int) or isinstance(nbytes, bool) or not 0 <= nbytes <= INTP_MAX:
        raise LayoutError(
            "allocate_storage", f"argument 'nbytes' must be a non-negative int, got {shown(nbytes)}"
        )
    try:
        return allocate(nbytes, reason, "allocate_storage")
    except MemoryError as e:
        raise AllocationFailedError(
            f"allocate_storage: argument 'nbytes': the host cannot provide {nbytes} bytes ({e})"
        ) from None


def _count(operation: str, name: str, v: object) -> int:
    """A non-negative int argument, or ``LayoutError`` naming it. O(1)."""
    if not isinstance(v, int | np.integer) or isinstance(v, bool) or v < 0:
        raise LayoutError(
            operation, f"argument {name!r} must be a non-negative int, got {shown(v)}"
        )
    return int(v)


def eye(n: int, m: int | None = None, k: int = 0, dtype: object = "float64") -> Tensor[Any, Rank2]:
    """A new ``n x m`` owner with ones on diagonal ``k`` (``numpy.eye``). One
    ``OPERATION_OUTPUT`` allocation. O(n*m).  ``tenferro_ad.eye`` is the same as a value.

    Cost: allocates one owner; no copy; no sync; no dispatch; O(n) to fill.
    Raises: DTypeError, LayoutError."""
    dt = resolve_dtype_for(dtype, "eye")
    rows = _count("eye", "n", n)
    cols = rows if m is None else _count("eye", "m", m)
    if not isinstance(k, int | np.integer) or isinstance(k, bool):
        raise LayoutError("eye", f"argument 'k' must be an int, got {shown(k)}")
    _shape("eye", (rows, cols), dt)  # addressable
    return Tensor._adopt(np.eye(rows, cols, int(k), dtype=dt.numpy), dt, _OUT, "eye")  # type: ignore[no-any-return]


def linspace(
    start: float, stop: float, num: int = 50, endpoint: bool = True, dtype: object = "float64"
) -> Tensor[Any, Rank1]:
    """``num`` evenly spaced numbers from ``start`` to ``stop`` (``numpy.linspace``) in a new
    owner. One ``OPERATION_OUTPUT`` allocation. O(num).  (``tenferro_ad.linspace`` is the
    differentiable one, for ``start``/``stop`` that are values.)

    Cost: allocates one owner; no copy; no sync; no dispatch; O(n) to fill.
    Raises: DTypeError, LayoutError."""
    dt = resolve_dtype_for(dtype, "linspace")
    count = _count("linspace", "num", num)
    _shape("linspace", (count,), dt)  # addressable
    for name, v in (("start", start), ("stop", stop)):
        real = isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)
        if not real or not np.isfinite(v):
            raise DTypeError(f"linspace: argument {name!r} must be a finite real number, got "
                             f"{shown(v)}")
    # numpy's linspace returns a view of its own temporary: own the data (a kernel temporary,
    # never a user's memory, so no copy event)
    arr = np.require(np.linspace(start, stop, count, endpoint=bool(endpoint), dtype=dt.numpy),
                     requirements=["O", "C"])
    return Tensor._adopt(arr, dt, _OUT, "linspace")  # type: ignore[no-any-return]


def full_like(x: Any, fill_value: Any, dtype: object = None) -> Tensor[Any, DynRank]:
    """A new owner of ``x``'s shape (and dtype, unless ``dtype``) filled with ``fill_value``;
    ``x`` is any value with ``shape`` and ``dtype`` (owner, view, handle, array; only its
    metadata is read). One ``OPERATION_OUTPUT`` allocation. O(size).

    Cost: allocates one owner; no copy; no sync; no dispatch; O(n) to fill.
    Raises: DTypeError."""
    return _like("full_like", x, fill_value, dtype)


def _like(operation: str, x: Any, fill_value: Any, dtype: object) -> Tensor[Any, DynRank]:
    shape = getattr(x, "shape", None) if not isinstance(x, type) else None
    dt_x = getattr(x, "dtype", None) if not isinstance(x, type) else None
    if not isinstance(shape, tuple) or dt_x is None:
        raise LayoutError(
            operation, f"argument 'x' must be a value with a shape and a dtype, got {shown(x)}"
        )
    dt = resolve_dtype_for(dt_x if dtype is None else dtype, operation)
    return _filled(operation, _shape(operation, shape, dt), fill_value, dt)


def zeros_like(x: Any, dtype: object = None) -> Tensor[Any, DynRank]:
    """A new owner of ``x``'s shape and dtype (or ``dtype``) filled with 0: one
    ``OPERATION_OUTPUT`` allocation. O(size).

    Cost: allocates one owner; no copy; no sync; no dispatch; O(n) to fill.
    Raises: DTypeError."""
    return _like("zeros_like", x, 0, dtype)


def ones_like(x: Any, dtype: object = None) -> Tensor[Any, DynRank]:
    """A new owner of ``x``'s shape and dtype (or ``dtype``) filled with 1: one
    ``OPERATION_OUTPUT`` allocation. O(size).

    Cost: allocates one owner; no copy; no sync; no dispatch; O(n) to fill.
    Raises: DTypeError."""
    return _like("ones_like", x, 1, dtype)
