"""Shape and indexing primitives.

Metadata-only outputs are *aliases* (``alias=True``): ``reshape`` of a contiguous value,
``transpose``, ``broadcast_to`` and basic slicing produce another descriptor over the
input's retention group — no allocation, no copy.  Integer-array indexing is a gather
(fresh output) whose VJP is a scatter-add; index arrays are static parameters (like
numpy's, they are not values and are neither copied nor differentiated).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dispatch import bind
from .._handle import EagerTensor
from .._primitive import defprimitive

Array = Any


def _shape(x: Any) -> tuple[int, ...]:
    if isinstance(x, EagerTensor):
        return tuple(x._r("shape").a.shape)
    s = getattr(x, "shape", None)
    return tuple(np.shape(x) if s is None else s)


# -- reshape: an alias when the input is contiguous, a fresh output otherwise ---
def _reshape_vjp(ops: Any, g: Array, *, shape: tuple[int, ...], src: tuple[int, ...]) -> Array:
    return ops.reshape(g, src)


def _reshape_jvp(ops: Any, t: Array, *, shape: tuple[int, ...], src: tuple[int, ...]) -> Array:
    return ops.reshape(t, shape)


RESHAPE = defprimitive(
    "reshape",
    lambda a, *, shape, src: np.reshape(a, shape),
    1,
    alias=True,
    vjp=(_reshape_vjp,),
    jvp=(_reshape_jvp,),
)
RESHAPE_COPY = defprimitive(
    "reshape_copy",
    lambda a, *, shape, src: np.reshape(np.ascontiguousarray(a), shape).copy(),
    1,
    vjp=(_reshape_vjp,),
    jvp=(_reshape_jvp,),
)


def reshape(x: Any, *shape: Any) -> EagerTensor:
    """Reshape.  A metadata-only alias (no allocation, no copy) of a contiguous value; a
    strided value (e.g. a transpose) is laid out afresh (one allocation, a kernel write)."""
    if len(shape) == 1 and isinstance(shape[0], tuple | list):
        shape = tuple(shape[0])
    src = _shape(x)
    n = 1
    for s in src:
        n *= s
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        shape = tuple(n // known if s == -1 else s for s in shape)
    contiguous = isinstance(x, EagerTensor) and x._r("reshape").a.flags.c_contiguous
    prim = RESHAPE if contiguous else RESHAPE_COPY
    return bind(prim, x, shape=tuple(shape), src=src)


# -- transpose ---
def _inverse(axes: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(axes)
    for i, a in enumerate(axes):
        inv[a] = i
    return tuple(inv)


TRANSPOSE = defprimitive(
    "transpose",
    lambda a, *, axes: np.transpose(a, axes),
    1,
    alias=True,
    vjp=(lambda ops, g, *, axes: ops.transpose(g, _inverse(axes)),),
    jvp=(lambda ops, t, *, axes: ops.transpose(t, axes),),
)


def transpose(x: Any, *axes: Any) -> EagerTensor:
    """Permute axes (default: reverse).  A metadata-only alias: no allocation, no copy."""
    nd = len(_shape(x))
    if len(axes) == 1 and isinstance(axes[0], tuple | list):
        axes = tuple(axes[0])
    ax = tuple(range(nd - 1, -1, -1)) if not axes else tuple(int(a) % nd for a in axes)
    return bind(TRANSPOSE, x, axes=ax)


def swapaxes(x: Any, a: int, b: int) -> EagerTensor:
    """Swap two axes (a transpose alias)."""
    nd = len(_shape(x))
    ax = list(range(nd))
    ax[a % nd], ax[b % nd] = ax[b % nd], ax[a % nd]
    return bind(TRANSPOSE, x, axes=tuple(ax))


# -- broadcast_to ---
BROADCAST_TO = defprimitive(
    "broadcast_to",
    lambda a, *, shape, src: np.broadcast_to(a, shape),
    1,
    alias=True,
    vjp=(lambda ops, g, *, shape, src: ops.unbroadcast(g, src),),
    jvp=(lambda ops, t, *, shape, src: ops.broadcast_to(t, shape),),
)


def broadcast_to(x: Any, shape: tuple[int, ...]) -> EagerTensor:
    """Broadcast to ``shape``: a read-only metadata alias (zero strides), no allocation."""
    return bind(BROADCAST_TO, x, shape=tuple(shape), src=_shape(x))


# -- basic slicing (alias) and its linear transpose (pad into zeros) ---
def _slice_pad_impl(g: Array, *, key: Any, shape: tuple[int, ...]) -> Array:
    z = np.zeros(shape, np.result_type(g))
    z[key] = g
    return z


SLICE_PAD = defprimitive(
    "slice_pad",
    _slice_pad_impl,
    1,
    vjp=(lambda ops, g, *, key, shape: ops.gather(g, key=key),),
    jvp=(lambda ops, t, *, key, shape: ops.slice_pad(t, key=key, shape=shape),),
)
def _slice_impl(a: Array, *, key: Any, shape: tuple[int, ...]) -> Array:
    out = a[key]
    if type(out) is not np.ndarray:  # a full integer index gives a scalar: take the 0-d view
        out = a[(*key, Ellipsis) if isinstance(key, tuple) else (key, Ellipsis)]
    return out


SLICE = defprimitive(
    "slice",
    _slice_impl,
    1,
    alias=True,
    vjp=(lambda ops, g, *, key, shape: ops.slice_pad(g, key=key, shape=shape),),
    jvp=(lambda ops, t, *, key, shape: ops.gather(t, key=key),),
)


# -- gather / scatter-add ---
def _scatter_impl(g: Array, *, key: Any, shape: tuple[int, ...]) -> Array:
    z = np.zeros(shape, np.result_type(g))
    np.add.at(z, key, g)
    return z


def _gather_impl(a: Array, *, key: Any, shape: tuple[int, ...]) -> Array:
    return np.asarray(a)[key]


SCATTER_ADD = defprimitive(
    "scatter_add",
    _scatter_impl,
    1,
    vjp=(lambda ops, g, *, key, shape: ops.gather(g, key=key),),
    jvp=(lambda ops, t, *, key, shape: ops.scatter_add(t, key=key, shape=shape),),
)
GATHER = defprimitive(
    "gather",
    _gather_impl,
    1,
    vjp=(lambda ops, g, *, key, shape: ops.scatter_add(g, key=key, shape=shape),),
    jvp=(lambda ops, t, *, key, shape: ops.gather(t, key=key),),
)


def _is_basic(key: Any) -> bool:
    items = key if isinstance(key, tuple) else (key,)
    for k in items:
        if not (
            k is None
            or k is Ellipsis
            or isinstance(k, slice)
            or (isinstance(k, int | np.integer) and not isinstance(k, bool))
        ):
            return False
    return True


def _freeze_key(key: Any) -> Any:
    items = key if isinstance(key, tuple) else (key,)
    out = []
    for k in items:
        if isinstance(k, EagerTensor):
            with k.value() as v:
                k = v.to_numpy()
        elif isinstance(k, list):
            k = np.asarray(k)
        out.append(k)
    return tuple(out) if isinstance(key, tuple) else out[0]


def getitem(x: Any, key: Any) -> EagerTensor:
    """``x[key]``.  Basic indices (ints, slices, ``...``, ``None``) give a metadata alias (no
    allocation, no copy; VJP pads into zeros).  Integer-array indices gather into a fresh
    output (VJP: scatter-add, so repeated indices accumulate)."""
    shape = _shape(x)
    if _is_basic(key):
        return bind(SLICE, x, key=key, shape=shape)
    return bind(GATHER, x, key=_freeze_key(key), shape=shape)


def gather(x: Any, key: Any) -> EagerTensor:
    """Advanced (integer-array) indexing ``x[key]`` as a fresh output; VJP scatter-adds."""
    return bind(GATHER, x, key=_freeze_key(key), shape=_shape(x))


def slice_pad(g: Any, *, key: Any, shape: tuple[int, ...]) -> EagerTensor:
    """Zeros of ``shape`` with ``g`` written at basic index ``key`` (the transpose of slicing)."""
    return bind(SLICE_PAD, g, key=key, shape=tuple(shape))


def scatter_add(g: Any, *, key: Any, shape: tuple[int, ...]) -> EagerTensor:
    """Zeros of ``shape`` with ``g`` added at index ``key`` (repeats accumulate)."""
    return bind(SCATTER_ADD, g, key=_freeze_key(key), shape=tuple(shape))


# -- concatenate / stack ---
def _concat_impl(*arrays: Array, axis: int, sizes: tuple[int, ...]) -> Array:
    return np.concatenate(arrays, axis=axis)


def _concat_vjp(ops: Any, g: Array, *, argnum: int, axis: int, sizes: tuple[int, ...]) -> Array:
    start = 0
    for s in sizes[:argnum]:
        start += s
    key = (slice(None),) * axis + (slice(start, start + sizes[argnum]),)
    return ops.apply(SLICE, g, key=key, shape=tuple(g.shape))


def _concat_jvp(ops: Any, t: Array, *, argnum: int, axis: int, sizes: tuple[int, ...]) -> Array:
    start = 0
    for s in sizes[:argnum]:
        start += s
    key = (slice(None),) * axis + (slice(start, start + sizes[argnum]),)
    shape = list(t.shape)
    shape[axis] = 0
    for s in sizes:
        shape[axis] += s
    return ops.slice_pad(t, key=key, shape=tuple(shape))


CONCATENATE = defprimitive(
    "concatenate",
    _concat_impl,
    -1,
    variadic=True,
    vjp=(_concat_vjp,),
    jvp=(_concat_jvp,),
)


def concatenate(xs: Any, axis: int = 0) -> EagerTensor:
    """Join values along ``axis``. One allocation (a kernel write of the joined values)."""
    xs = list(xs)
    shapes = [_shape(x) for x in xs]
    nd = len(shapes[0])
    ax = axis % nd
    return bind(CONCATENATE, *xs, axis=ax, sizes=tuple(s[ax] for s in shapes))


def expand_dims(x: Any, axis: int) -> EagerTensor:
    """Insert a length-1 axis (a reshape: an alias when contiguous)."""
    shape = list(_shape(x))
    shape.insert(axis % (len(shape) + 1), 1)
    return reshape(x, tuple(shape))


def stack(xs: Any, axis: int = 0) -> EagerTensor:
    """Stack values along a new ``axis`` (derived: expand_dims + concatenate)."""
    return concatenate([expand_dims(x, axis) for x in xs], axis=axis)
