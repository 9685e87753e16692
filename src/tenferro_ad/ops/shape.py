"""Shape and indexing primitives.

Metadata-only outputs are *aliases* (``alias=True``): ``reshape`` of a contiguous value,
``transpose``, ``broadcast_to`` and basic slicing produce another descriptor over the
input's retention group — no allocation, no copy.  Integer-array indexing is a gather
(fresh output) whose VJP is a scatter-add; index arrays are static parameters (like
numpy's, they are not values and are neither copied nor differentiated).

Every public function validates its static arguments before anything is computed or
recorded: axes follow numpy (``AxisError`` out of range), shapes and keys that do not fit
raise ``ArgumentError`` / ``IndexOutOfBoundsError`` / ``ArgumentTypeError`` naming the op.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_storage as ts

from .._core._dispatch import bind
from .._core._handle import EagerTensor
from .._core._primitive import REGISTRY, defprimitive
from .._traced._batch_rules import (
    BatchRule,
    broadcast_batch,
    defbatch,
    emit,
    expand_batched,
    leading,
    loop_fallback,
    shape_of,
)
from ..errors import ArgumentError, ArgumentTypeError, IndexOutOfBoundsError
from ._axes import KERNEL_ERRORS, axis_index, permutation
from ._util import op, stored_value_arg

Array = Any


def _shape_arg(operation: str, shape: Any, what: str = "shape") -> tuple[int, ...]:
    """A shape argument (an int or a sequence of ints) as a tuple of Python ints."""
    if isinstance(shape, int | np.integer) and not isinstance(shape, bool | np.bool_):
        return (int(shape),)
    if not isinstance(shape, tuple | list):
        raise ArgumentTypeError(
            f"{operation}: argument {what!r} must be a tuple of ints, got "
            f"{type(shape).__name__} {shape!r}"
        )
    out = []
    for n in shape:
        if isinstance(n, bool | np.bool_) or not isinstance(n, int | np.integer):
            raise ArgumentTypeError(
                f"{operation}: argument {what!r} must be a tuple of ints, got {shape!r}"
            )
        out.append(int(n))
    return tuple(out)


def _key_text(key: Any) -> str:
    """An index as a message shows it: its repr when short and free of object addresses,
    else its type (an array index as ``an ndarray of shape (3,) and dtype float64``)."""
    if isinstance(key, np.ndarray):
        return f"(an ndarray of shape {key.shape} and dtype {key.dtype})"
    r = repr(key)
    if len(r) <= 60 and " at 0x" not in r:
        return r
    return f"(a value of type {type(key).__name__})"


def _check_key(operation: str, shape: tuple[int, ...], key: Any) -> None:
    """Refuse an index that does not fit ``shape`` before anything is computed: an index of
    a wrong kind names argument ``'key'``; one that selects outside the value names
    ``'x'`` and ``'key'`` (it is about both).

    Runs the index on a zero-byte broadcast stand-in of ``shape`` (no allocation for basic
    indices; advanced indices build one small int8 result)."""
    stand_in = np.broadcast_to(np.zeros((), np.int8), shape)
    try:
        stand_in[key]
    except IndexError as e:
        if not any(w in str(e) for w in ("out of bounds", "too many", "did not match")):
            raise ArgumentTypeError(
                f"{operation}: argument 'key' {_key_text(key)} is not a valid index: {e}"
            ) from None
        raise IndexOutOfBoundsError(
            f"{operation}: arguments 'x' and 'key': index {_key_text(key)} does not fit a "
            f"value of shape {shape}: {e}"
        ) from None
    except (TypeError, ValueError) as e:
        raise ArgumentTypeError(
            f"{operation}: argument 'key' {_key_text(key)} is not a valid index for a value of "
            f"shape {shape}: {e}"
        ) from None


def value_of(op: str, x: Any) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """Shape and dtype of the value argument ``'x'`` of ``op``, refused up front when it is
    not a value tenferro can take (:func:`~tenferro_ad.ops._util.stored_value_arg`).  A live
    handle (always of a stored dtype) takes a fast path: two attribute reads, O(1)."""
    if type(x) is EagerTensor:
        rec = x._rec
        if rec is not None:
            return tuple(rec.a.shape), rec.a.dtype
    return stored_value_arg(op, "x", x)


def _item_shape(op: str, x: Any, i: int) -> tuple[int, ...]:
    """The shape of item ``i`` of the value list ``'xs'`` of ``op``, refused up front as
    :func:`value_of` refuses a value, the message naming ``'xs'[i]``."""
    if type(x) is EagerTensor:
        rec = x._rec
        if rec is not None:
            return tuple(rec.a.shape)
    return stored_value_arg(op, "xs", x, i)[0]


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
defbatch(RESHAPE, leading("reshape", prefix=("shape", "src")))
def _reshape_copy(a: Array, *, shape: tuple[int, ...], src: tuple[int, ...]) -> Array:
    """``a`` laid out afresh in ``shape`` (row-major): one fresh array, written once (a
    kernel write, no intermediate copy)."""
    out = np.empty(shape, np.asarray(a).dtype)
    out.reshape(np.shape(a))[...] = a  # (a view of the fresh contiguous ``out``)
    return out


RESHAPE_COPY = defprimitive(
    "reshape_copy",
    _reshape_copy,
    1,
    vjp=(_reshape_vjp,),
    jvp=(_reshape_jvp,),
)
defbatch(RESHAPE_COPY, leading("reshape_copy", prefix=("shape", "src")))


@op("reshape")
def reshape(x: Any, *shape: Any) -> EagerTensor:
    """Reshape.  A metadata-only alias (no allocation, no copy) of a contiguous value; a
    strided value (e.g. a transpose) is laid out afresh (one allocation, a kernel write).

    Cost: allocates unless an alias; no copy; no sync; no dispatch; O(n), O(1) as an alias.
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    if len(shape) == 1 and isinstance(shape[0], tuple | list | int | np.integer):
        shape = _shape_arg("reshape", shape[0])
    else:
        shape = _shape_arg("reshape", shape)
    src = value_of("reshape", x)[0]
    n = 1
    for s in src:
        n *= s
    if shape.count(-1) > 1 or any(s < -1 for s in shape):
        raise ArgumentError(
            f"reshape: argument 'shape' {shape} may hold one -1 and otherwise non-negative "
            "extents"
        )
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if -1 in shape:
        if known == 0 or n % known:
            raise ArgumentError(
                f"reshape: cannot reshape argument 'x' of shape {src} ({n} elements) into "
                f"argument 'shape' {shape}"
            )
        shape = tuple(n // known if s == -1 else s for s in shape)
    elif known != n:
        raise ArgumentError(
            f"reshape: cannot reshape argument 'x' of shape {src} ({n} elements) into "
            f"argument 'shape' {shape} "
            f"({known} elements)"
        )
    if isinstance(x, EagerTensor):
        contiguous = x._r("reshape").a.flags.c_contiguous
    elif isinstance(x, ts.Tensor | ts.TensorView | ts.TensorViewMut):  # borrowed: a view
        contiguous = ts.kernel.read_array(x).flags.c_contiguous
    else:
        contiguous = False
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


def _batch_transpose(
    args: list[Any], batched: list[bool], size: int, *, axes: Any
) -> tuple[Any, bool]:
    return emit("transpose", args[0], axes=(0, *(a + 1 for a in axes))), True


defbatch(TRANSPOSE, _batch_transpose)


@op("transpose")
def transpose(x: Any, *axes: Any, **keywords: Any) -> EagerTensor:
    """Permute axes (default: reverse).  A metadata-only alias: no allocation, no copy.

    The permutation as numpy takes it: ``transpose(x, (1, 0))``, ``transpose(x, 1, 0)``
    (``ndarray.transpose``'s form) or ``transpose(x, axes=(1, 0))`` (``numpy.transpose``'s
    keyword); ``None`` or nothing reverses the axes.

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    nd = len(value_of("transpose", x)[0])
    if keywords:  # numpy.transpose(a, axes=...): the one keyword (``*axes`` holds the rest)
        if set(keywords) != {"axes"}:
            raise ArgumentTypeError(
                f"transpose: unexpected keyword argument {sorted(set(keywords) - {'axes'})[0]!r}"
            )
        if axes:
            raise ArgumentTypeError(
                "transpose: argument 'axes' given both by position and by keyword"
            )
        axes = (keywords["axes"],)
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], tuple | list)):
        axes = () if axes[0] is None else tuple(axes[0])
    ax = tuple(range(nd - 1, -1, -1)) if not axes else permutation("transpose", axes, nd)
    return bind(TRANSPOSE, x, axes=ax)


@op("swapaxes")
def swapaxes(x: Any, axis1: int, axis2: int) -> EagerTensor:
    """Swap two axes (a transpose alias; numpy's argument names). ``AxisError`` for an axis
    out of range. O(1): metadata only.

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    nd = len(value_of("swapaxes", x)[0])
    i = axis_index("swapaxes", axis1, nd, "axis1")
    j = axis_index("swapaxes", axis2, nd, "axis2")
    ax = list(range(nd))
    ax[i], ax[j] = ax[j], ax[i]
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


def _batch_broadcast_to(
    args: list[Any], batched: list[bool], size: int, *, shape: Any, src: Any
) -> tuple[Any, bool]:
    x = expand_batched(args[0], len(shape))
    return emit("broadcast_to", x, shape=(size, *shape), src=shape_of(x)), True


defbatch(BROADCAST_TO, _batch_broadcast_to)


@op("broadcast_to")
def broadcast_to(x: Any, shape: tuple[int, ...]) -> EagerTensor:
    """Broadcast to ``shape``: a read-only metadata alias (zero strides), no allocation.
    ``ArgumentError`` when the value's shape does not broadcast to ``shape``.

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    src = value_of("broadcast_to", x)[0]
    target = _shape_arg("broadcast_to", shape)
    if any(n < 0 for n in target):
        raise ArgumentError(
            f"broadcast_to: argument 'shape' {target} holds a negative extent"
        )
    if len(target) < len(src) or any(
        a != 1 and a != b for a, b in zip(src[::-1], target[::-1], strict=False)
    ):
        raise ArgumentError(
            f"broadcast_to: argument 'x' of shape {src} cannot be broadcast to argument "
            f"'shape' {target}"
        )
    return bind(BROADCAST_TO, x, shape=target, src=src)

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


def _batch_key(key: Any) -> tuple[Any, ...]:
    return (slice(None), *(key if isinstance(key, tuple) else (key,)))


def _batch_indexing(name: str) -> BatchRule:
    """slice / gather / slice_pad / scatter_add: a leading full slice in the key.  Falls back
    to the loop when numpy would move the batch axis (separated advanced indices)."""

    def rule(
        args: list[Any], batched: list[bool], size: int, *, key: Any, shape: Any
    ) -> tuple[Any, bool]:
        probe = np.broadcast_to(np.zeros((), np.int8), shape)
        want = (size, *probe[key].shape)
        got = np.broadcast_to(np.zeros((), np.int8), (size, *shape))[_batch_key(key)].shape
        params = {"key": key, "shape": shape}
        if name in ("slice", "gather") and got != want:
            return loop_fallback(REGISTRY[name], args, batched, size, params), True
        if name in ("slice_pad", "scatter_add") and got != shape_of(args[0]):
            return loop_fallback(REGISTRY[name], args, batched, size, params), True
        return emit(name, args[0], key=_batch_key(key), shape=(size, *shape)), True

    return rule


defbatch(SLICE_PAD, _batch_indexing("slice_pad"))


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

defbatch(SLICE, _batch_indexing("slice"))


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

defbatch(SCATTER_ADD, _batch_indexing("scatter_add"))
GATHER = defprimitive(
    "gather",
    _gather_impl,
    1,
    vjp=(lambda ops, g, *, key, shape: ops.scatter_add(g, key=key, shape=shape),),
    jvp=(lambda ops, t, *, key, shape: ops.gather(t, key=key),),
)

defbatch(GATHER, _batch_indexing("gather"))


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


def _freeze_key(key: Any, operation: str = "getitem") -> Any:
    items = key if isinstance(key, tuple) else (key,)
    out = []
    for k in items:
        if isinstance(k, EagerTensor):  # the rule keeps the index: a recorded TRANSFER
            with k.value() as v:
                k = v.to_numpy()
        elif isinstance(k, ts.Tensor | ts.TensorView | ts.TensorViewMut):
            k = k.to_numpy()  # an owner used as an index: one recorded TRANSFER
        elif isinstance(k, list):
            try:
                k = np.asarray(k)
            except (ValueError, TypeError, ts.errors.TenferroError) as e:
                raise ArgumentTypeError(
                    f"{operation}: argument 'key' holds a list numpy cannot turn into an index "
                    f"array: {e}"
                ) from None
        out.append(k)
    return tuple(out) if isinstance(key, tuple) else out[0]


@op("getitem")
def getitem(x: Any, key: Any) -> EagerTensor:
    """``x[key]``.  Basic indices (ints, slices, ``...``, ``None``) give a metadata alias (no
    allocation, no copy; VJP pads into zeros).  Integer-array indices gather into a fresh
    output (VJP: scatter-add, so repeated indices accumulate).

    Cost: allocates unless an alias; no copy; no sync; no dispatch; O(n), O(1) as an alias.
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    shape = value_of("getitem", x)[0]
    if _is_basic(key):
        return _indexed("getitem", SLICE, x, key, shape)
    return _indexed("getitem", GATHER, x, _freeze_key(key), shape)


def _indexed(op: str, prim: Any, x: Any, key: Any, shape: tuple[int, ...]) -> EagerTensor:
    """``bind(prim, x)`` at ``key``, the key refused by :func:`_check_key` (naming it) before
    anything happens.  For a handle the kernel's own indexing is the check, and
    ``_check_key`` runs only to word its refusal (a failed bind records nothing); other
    values (owners, tracers) are checked first."""
    if type(x) is EagerTensor:
        try:
            return bind(prim, x, key=key, shape=shape)
        except KERNEL_ERRORS:
            _check_key(op, shape, key)
            raise
    _check_key(op, shape, key)
    return bind(prim, x, key=key, shape=shape)


@op("gather")
def gather(x: Any, key: Any) -> EagerTensor:
    """Advanced (integer-array) indexing ``x[key]`` as a fresh output; VJP scatter-adds.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    shape = value_of("gather", x)[0]
    return _indexed("gather", GATHER, x, _freeze_key(key, "gather"), shape)


@op("slice_pad")
def slice_pad(g: Any, *, key: Any, shape: tuple[int, ...]) -> EagerTensor:
    """Zeros of ``shape`` with ``g`` written at basic index ``key`` (the transpose of slicing).

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError."""
    return bind(SLICE_PAD, g, key=key, shape=tuple(shape))


@op("scatter_add")
def scatter_add(g: Any, *, key: Any, shape: tuple[int, ...]) -> EagerTensor:
    """Zeros of ``shape`` with ``g`` added at index ``key`` (repeats accumulate).

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError."""
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


def _batch_concatenate(
    args: list[Any], batched: list[bool], size: int, *, axis: int, sizes: Any
) -> tuple[Any, bool]:
    new = [a if bt else broadcast_batch(a, size) for a, bt in zip(args, batched, strict=True)]
    return emit("concatenate", *new, axis=axis + 1, sizes=sizes), True


defbatch(CONCATENATE, _batch_concatenate)


@op("concatenate")
def concatenate(xs: Any, axis: int = 0) -> EagerTensor:
    """Join values along ``axis``. One allocation (a kernel write of the joined values).

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    xs = _values_arg("concatenate", xs)
    shapes = [_item_shape("concatenate", x, i) for i, x in enumerate(xs)]
    nd = len(shapes[0])
    if nd == 0:
        raise ArgumentError(
            "concatenate: argument 'xs' holds 0-d values, which have no axis to join along "
            "(use stack)"
        )
    ax = axis_index("concatenate", axis, nd)
    for i, s in enumerate(shapes):
        if len(s) != nd or any(
            a != b for k, (a, b) in enumerate(zip(s, shapes[0], strict=True)) if k != ax
        ):
            raise ArgumentError(
                f"concatenate: argument 'xs'[{i}] has shape {s}, which does not fit "
                f"'xs'[0]'s shape {shapes[0]} outside axis {ax}"
            )
    return bind(CONCATENATE, *xs, axis=ax, sizes=tuple(s[ax] for s in shapes))


def _values_arg(operation: str, xs: Any) -> list[Any]:
    if isinstance(xs, EagerTensor | np.ndarray) or not isinstance(xs, tuple | list):
        raise ArgumentTypeError(
            f"{operation}: argument 'xs' must be a list or tuple of values, got "
            f"{type(xs).__name__}"
        )
    if not xs:
        raise ArgumentError(f"{operation}: argument 'xs' is empty; give at least one value")
    return list(xs)


@op("expand_dims")
def expand_dims(x: Any, axis: Any) -> EagerTensor:
    """Insert length-1 axes at ``axis`` (an int or a tuple, positions in the result, as
    numpy).  A reshape: an alias when contiguous.  ``AxisError`` for an axis out of range.

    Cost: allocates unless an alias; no copy; no sync; no dispatch; O(n), O(1) as an alias.
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    shape = list(value_of("expand_dims", x)[0])
    axes = tuple(axis) if isinstance(axis, tuple | list) else (axis,)
    nd = len(shape) + len(axes)
    pos = sorted(axis_index("expand_dims", a, nd) for a in axes)
    if len(set(pos)) != len(pos):
        raise ArgumentError(f"expand_dims: argument 'axis' {axis!r} repeats an axis")
    for p in pos:
        shape.insert(p, 1)
    return reshape(x, tuple(shape))


@op("stack")
def stack(xs: Any, axis: int = 0) -> EagerTensor:
    """Stack values of one shape along a new ``axis`` (derived: expand_dims + concatenate).
    ``ArgumentError`` for an empty list or unequal shapes; ``AxisError`` out of range.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    xs = _values_arg("stack", xs)
    shapes = [_item_shape("stack", x, i) for i, x in enumerate(xs)]
    ax = axis_index("stack", axis, len(shapes[0]) + 1)
    for i, s in enumerate(shapes):
        if s != shapes[0]:
            raise ArgumentError(
                f"stack: argument 'xs'[{i}] has shape {s}, 'xs'[0] has {shapes[0]}; stacked "
                "values must have one shape"
            )
    return concatenate([expand_dims(x, ax) for x in xs], axis=ax)
