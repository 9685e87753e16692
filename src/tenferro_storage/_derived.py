"""Derived descriptors: indexing, transposing and reshaping a checked descriptor.

Each checks only the arithmetic it adds (the parent's proofs carry over) and reuses the
parent's cached numpy array when there is one, so a derived view costs O(rank).
"""

from __future__ import annotations

from operator import itemgetter

import numpy as np

from ._descriptor import CheckedDescriptor, _new
from ._layout import Contiguous, c_strides
from .errors import BadIndexError, LayoutError, shown


def transpose(parent: CheckedDescriptor, axes: tuple[int, ...]) -> CheckedDescriptor:
    """Permute axes; ``axes`` is already a checked permutation."""
    if len(axes) > 1:
        get = itemgetter(*axes)
        shape, strides = get(parent.shape), get(parent.strides)
    else:  # a permutation of at most one axis is the identity
        shape, strides = parent.shape, parent.strides
    d = _new(
        parent.dtype, shape, strides, parent.offset, parent.size, parent.lo, parent.hi,
        parent.start, parent.stop, parent.buffer,
    )
    if parent._array is not None:
        d._array = parent._array.transpose(axes)
    return d


def check_axes(operation: str, axes: tuple[object, ...], ndim: int) -> tuple[int, ...]:
    """Normalize a transpose permutation (default: reverse)."""
    if not axes:
        return tuple(range(ndim - 1, -1, -1))
    if len(axes) == 1 and isinstance(axes[0], tuple | list):
        axes = tuple(axes[0])
    norm: list[int] = []
    for a in axes:
        if not isinstance(a, int) or isinstance(a, bool) or not -ndim <= a < ndim:
            raise LayoutError(
                operation, f"argument 'axes': axis {shown(a)} is out of range for rank {ndim}"
            )
        norm.append(a % ndim)
    if sorted(norm) != list(range(ndim)):
        raise LayoutError(
            operation, f"argument 'axes' {shown(tuple(axes))} is not a permutation of {ndim} axes"
        )
    return tuple(norm)


def _slice_text(k: slice) -> str:
    """A slice as the user wrote it, without the address of a non-integer part. O(1)."""
    parts = (k.start, k.stop, k.step)
    if all(p is None or isinstance(p, int | np.integer) for p in parts):
        return f"slice {k!r}"
    kinds = ", ".join(type(p).__name__ for p in parts)
    return f"a slice with parts of types ({kinds})"


def index(parent: CheckedDescriptor, key: object, operation: str) -> CheckedDescriptor:
    """Basic indexing: ints drop an axis, slices keep it, ``...`` and ``None`` as in numpy."""
    if not isinstance(key, tuple):
        key = (key,)
    n_ell = sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise BadIndexError(
            operation, "argument 'key': an index can only have a single ellipsis ('...')"
        )
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    ndim = len(parent.shape)
    if consumed > ndim:
        raise BadIndexError(
            operation,
            f"argument 'key': too many indices: the view has {ndim} axes but {consumed} were "
            "indexed",
        )
    if n_ell:
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        key = key[:i] + (slice(None),) * (ndim - consumed) + key[i + 1 :]
    else:
        key = key + (slice(None),) * (ndim - consumed)
    shape: list[int] = []
    strides: list[int] = []
    offset = parent.offset
    empty = False
    axis = 0
    for k in key:
        if k is None:
            shape.append(1)
            strides.append(0)
            continue
        n = parent.shape[axis]
        s = parent.strides[axis]
        axis += 1
        if isinstance(k, slice):
            try:
                start, stop, step = k.indices(n)
            except (TypeError, ValueError) as e:  # non-integer parts, a zero step
                raise BadIndexError(operation, f"argument 'key': {_slice_text(k)}: {e}") from None
            length = len(range(start, stop, step))
            if length:
                offset += start * s
            else:
                empty = True
            shape.append(length)
            strides.append(s * step)
        elif isinstance(k, int | np.integer) and not isinstance(k, bool):
            i = int(k)
            if not -n <= i < n:
                raise BadIndexError(
                    operation,
                    f"argument 'key': index {i} is out of bounds for axis {axis - 1} with "
                    f"size {n}",
                )
            offset += (i % n) * s
        else:
            raise BadIndexError(
                operation,
                f"argument 'key': only basic indices (ints, slices, ..., None) make views; got "
                f"{type(k).__name__}. Integer-array indexing creates new values: use the AD "
                "ops or to_numpy()",
            )
    shape_t, strides_t = tuple(shape), tuple(strides)
    size = 1
    for n in shape_t:
        size *= n
    if empty or size == 0:
        offset = parent.offset
        return _new(
            parent.dtype, shape_t, strides_t, offset, 0, offset, offset - 1,
            parent.start, parent.stop, parent.buffer,
        )
    lo = hi = offset
    for n, s in zip(shape_t, strides_t, strict=True):
        r = s * (n - 1)
        if r < 0:
            lo += r
        else:
            hi += r
    # A basic index of a checked layout stays inside the parent's envelope.
    assert parent.lo <= lo and hi <= parent.hi, (lo, hi, parent.lo, parent.hi)
    return _new(
        parent.dtype, shape_t, strides_t, offset, size, lo, hi, parent.start, parent.stop,
        parent.buffer,
    )


def reshape(parent: CheckedDescriptor, shape: tuple[int, ...], operation: str) -> CheckedDescriptor:
    """Reshape a ``Contiguous`` descriptor (metadata only); anything else is refused.

    One extent may be ``-1`` (numpy's convention): it is inferred from the others."""
    # extents are Python or numpy integers (not bools, arrays or handles): normalised before
    # anything compares them, so a bad one is named instead of raising from its __eq__
    if not all(type(n) is int for n in shape):
        if not all(isinstance(n, int | np.integer) and not isinstance(n, bool) for n in shape):
            bad = next(n for n in shape if isinstance(n, bool) or
                       not isinstance(n, int | np.integer))
            raise LayoutError(
                operation, f"argument 'shape': extents must be integers, got {shown(bad)}"
            )
        shape = tuple(int(n) for n in shape)
    if shape.count(-1) == 1:
        rest = 1
        for n in shape:
            if isinstance(n, int) and n >= 0:
                rest *= n
        if rest and parent.size % rest == 0:
            shape = tuple(parent.size // rest if n == -1 else n for n in shape)
    size = 1
    for n in shape:
        if not isinstance(n, int) or n < 0:
            raise LayoutError(
                operation, f"argument 'shape': bad extent {shown(n)} in {shown(shape)}"
            )
        size *= n
    if size != parent.size:
        raise LayoutError(
            operation,
            f"argument 'shape': cannot reshape {parent.size} elements into shape {shown(shape)}",
            shape=shape,
        )
    if not isinstance(parent.layout, Contiguous):
        raise LayoutError(
            operation,
            "only a row-major contiguous layout can be reshaped without a copy; this layout "
            "is strided (duplicate() first for a contiguous owner)",
            shape=shape,
            strides=parent.strides,
            offset=parent.offset,
        )
    d = _new(
        parent.dtype, shape, c_strides(shape), parent.offset, size, parent.lo, parent.hi,
        parent.start, parent.stop, parent.buffer, Contiguous(parent.layout.element_range),
    )
    if parent._array is not None:
        d._array = parent._array.reshape(shape)
    return d


__all__ = ["check_axes", "index", "reshape", "transpose"]
