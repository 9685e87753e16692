"""Module-level creation functions.  Each returns a fresh owner and records exactly one
allocation event; imports from numpy also record one ``TRANSFER`` copy."""

from __future__ import annotations

from typing import Any, overload

import numpy as np

from ._dtypes import ConversionError, from_numpy_dtype
from ._dtypes import dtype as resolve_dtype
from ._ledger import LEDGER, AllocationReason, CopyReason
from ._rank import DynRank, Rank0, Rank1, Rank2, Rank3, Rank4
from ._root import OwnedStorage, allocate
from ._tensor import Tensor
from .errors import DTypeError, LayoutError

_OUT = AllocationReason.OPERATION_OUTPUT

Shape = int | tuple[int, ...]


def _checked_cast(
    operation: str, src: np.ndarray[Any, Any], target: np.dtype[Any]
) -> np.ndarray[Any, Any]:
    """Refuse a conversion that would silently change values: NaN or +-inf into an integer
    or bool dtype (numpy gives INT_MIN), a nonzero imaginary part into a real dtype (numpy
    drops it), or a float into an integer dtype outside its range.  O(size) only when the
    conversion is lossy by kind; nothing is allocated or recorded on refusal.  Returns the
    source to convert (its real part when a complex source has no imaginary part)."""
    kind = src.dtype.kind
    if kind == "c" and target.kind != "c":
        if np.any(np.imag(src) != 0):
            raise ConversionError(
                f"{operation}: converting complex values to {target} would drop nonzero "
                "imaginary parts; take .real explicitly (or keep a complex dtype)"
            )
        src = np.real(src)
        kind = src.dtype.kind
    if kind in "fc" and target.kind in "iub":
        finite = np.isfinite(src)
        if not np.all(finite):
            raise ConversionError(
                f"{operation}: the values hold NaN or +-inf, which {target} cannot represent "
                "(numpy would store garbage); replace them first or keep a floating dtype"
            )
        if target.kind in "iu" and src.size:
            info = np.iinfo(target)
            if np.min(src) < info.min or np.max(src) > info.max:
                raise ConversionError(
                    f"{operation}: values outside the range of {target} "
                    f"[{info.min}, {info.max}] cannot be converted"
                )
    if kind in "iu" and target.kind in "iu" and src.size:
        info = np.iinfo(target)
        if np.min(src) < info.min or np.max(src) > info.max:
            raise ConversionError(
                f"{operation}: values outside the range of {target} "
                f"[{info.min}, {info.max}] cannot be converted"
            )
    return src


def _shape(operation: str, shape: object) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer) and not isinstance(shape, bool):
        shape = (int(shape),)
    if isinstance(shape, list):
        shape = tuple(shape)
    if not isinstance(shape, tuple) or not all(
        isinstance(n, int | np.integer) and not isinstance(n, bool) and n >= 0 for n in shape
    ):
        raise LayoutError(
            operation,
            f"argument 'shape' must be a non-negative int or tuple of them, got {shape!r}",
        )
    return tuple(int(n) for n in shape)


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
    """A new owner filled with zeros. One ``OPERATION_OUTPUT`` allocation. O(size)."""
    dt = resolve_dtype(dtype)
    return Tensor._adopt(np.zeros(_shape("zeros", shape), dt.numpy), dt, _OUT, "zeros")  # type: ignore[no-any-return]


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
    """A new owner filled with ones. One ``OPERATION_OUTPUT`` allocation. O(size)."""
    dt = resolve_dtype(dtype)
    return Tensor._adopt(np.ones(_shape("ones", shape), dt.numpy), dt, _OUT, "ones")  # type: ignore[no-any-return]


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
    """A new owner filled with ``fill_value``. One ``OPERATION_OUTPUT`` allocation. O(size)."""
    dt = resolve_dtype(dtype)
    shape_t = _shape("full", shape)
    try:
        fill = np.asarray(fill_value)
    except Exception as e:
        raise DTypeError(
            f"full: argument 'fill_value' {fill_value!r} is not a scalar: {e}"
        ) from None
    if fill.ndim != 0 or fill.dtype.kind not in "biufc":
        raise DTypeError(
            f"full: argument 'fill_value' must be a numeric scalar, got {fill_value!r}"
        )
    fill = _checked_cast("full", fill, dt.numpy)
    arr = np.full(shape_t, fill, dtype=dt.numpy)
    return Tensor._adopt(arr, dt, _OUT, "full")  # type: ignore[no-any-return]


def arange(
    start: float, stop: float | None = None, step: float = 1, dtype: object = None
) -> Tensor[Any, Rank1]:
    """Evenly spaced values as in ``numpy.arange``. One ``OPERATION_OUTPUT`` allocation.

    ``dtype`` defaults to int64 for integer arguments and float64 otherwise.
    """
    if stop is None:
        start, stop = 0, start
    for name, v in (("start", start), ("stop", stop), ("step", step)):
        real = isinstance(v, int | float | np.integer | np.floating)
        if isinstance(v, bool | np.bool_) or not real:
            raise DTypeError(f"arange: argument {name!r} must be a real number, got {v!r}")
        if not np.isfinite(v):
            raise ConversionError(f"arange: argument {name!r} must be finite, got {v!r}")
    if step == 0:
        raise ConversionError("arange: argument 'step' must not be 0")
    if dtype is None:
        ints = all(isinstance(v, int | np.integer) for v in (start, stop, step))
        dtype = "int64" if ints else "float64"
    dt = resolve_dtype(dtype)
    arr = np.arange(start, stop, step, dtype=dt.numpy)
    return Tensor._adopt(arr, dt, _OUT, "arange")  # type: ignore[no-any-return]


def from_numpy(array: Any, dtype: object = None) -> Tensor[Any, DynRank]:
    """Copy a numpy array (or array-like) into a new owner.

    Records one ``TRANSFER`` copy and one ``TRANSFER_DESTINATION`` allocation; the
    source is not referenced afterwards.  ``dtype`` converts on the way in (the
    conversion is part of the same transfer).  Unsupported dtypes raise ``DTypeError``.
    """
    src = np.asarray(array)
    dt = resolve_dtype(dtype) if dtype is not None else from_numpy_dtype(src.dtype, "from_numpy")
    if dtype is not None and src.dtype.kind not in "biufc":
        raise DTypeError(f"from_numpy: cannot convert numpy dtype {src.dtype} to {dt.name}")
    src = _checked_cast("from_numpy", src, dt.numpy)
    LEDGER.check_copy_allowed("from_numpy")
    arr = np.array(src, dtype=dt.numpy, copy=True, order="C")
    t: Tensor[Any, DynRank] = Tensor._adopt(
        arr, dt, AllocationReason.TRANSFER_DESTINATION, "from_numpy"
    )
    LEDGER.copy(CopyReason.TRANSFER, arr.nbytes, "from_numpy")
    return t


def allocate_storage(
    nbytes: int, reason: AllocationReason = AllocationReason.OPERATION_OUTPUT
) -> OwnedStorage:
    """Allocate ``nbytes`` of uninitialized host memory as a new owner (one allocation event).

    Build tensors over it (or over pieces of it, after ``split``) with
    :meth:`Tensor.from_storage`.
    """
    if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 0:
        raise ValueError(f"allocate_storage: nbytes must be a non-negative int, got {nbytes!r}")
    return allocate(nbytes, reason, "allocate_storage")
