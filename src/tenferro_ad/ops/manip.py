"""numpy's array-manipulation functions, derived from the shape primitives.

Nothing here has rules of its own: every function is a composition of ``reshape``,
``transpose``, basic slicing (metadata-only aliases: no allocation, no copy),
``broadcast_to``, ``concatenate``, ``gather`` / ``scatter_add`` and ``slice_pad`` (one
allocation each), so VJPs and JVPs (any order) come from those primitives' rules.
Constructors (``eye``, ``zeros_like``, ``full_like``...) return constants (never tracked).
"""

from __future__ import annotations

import builtins
import itertools
import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from tenferro_storage._dtypes import checked_cast
from tenferro_storage.errors import AllocationFailedError, DTypeError, TenferroError, shown

from .._core._dispatch import bind
from .._core._handle import EagerTensor
from .._core._primitive import defprimitive, nondifferentiable
from .._traced._batch_rules import defbatch, filled, unbatched_result
from ..errors import ArgumentError, ArgumentTypeError, AxisError
from . import elementwise as ew
from . import shape as sh
from ._util import (
    _STORED_DTYPES,
    dtype_arg,
    dtype_of,
    guard_module,
    shape_of,
    stored_value_arg,
    value_arg,
)
from ._util import axis as _axis
from .reduce import sum as rsum

Array = Any

__all__ = [
    "append", "array_split", "atleast_1d", "atleast_2d", "atleast_3d", "column_stack",
    "diag", "diagflat", "diagonal", "dsplit", "dstack", "eye", "flatten", "flip", "fliplr",
    "flipud", "full_like", "hsplit", "hstack", "linspace", "moveaxis", "ones_like", "pad",
    "c_", "r_", "ravel", "repeat", "roll", "rollaxis", "rot90", "select", "split", "squeeze",
    "tile",
    "trace", "tril", "triu", "vsplit", "vstack", "zeros_like",
]


def _nd(x: Any) -> int:
    return len(shape_of(x))


# -- argument checks (run before anything is computed or recorded; O(1) unless noted) ---
def _value(op: str, x: Any, name: str = "x") -> tuple[int, ...]:
    """The shape of the value argument ``name`` of ``op``; a refusal names both."""
    return stored_value_arg(op, name, x)[0]


def _int(op: str, what: str, v: Any) -> int:
    """An integer argument (a Python or numpy integer, or a bool, as numpy's
    ``operator.index``); ``what`` is how the message names it (``"argument 'n'"``)."""
    try:
        return operator.index(v)
    except (TypeError, TenferroError):
        raise ArgumentTypeError(f"{op}: {what} must be an int, got {shown(v)}") from None


def _count(op: str, what: str, v: Any) -> int:
    """A count numpy also takes as an integral float (``split(x, 2.0)``, ``repeat(x, 2.0)``);
    a fractional, NaN or infinite one is refused."""
    if isinstance(v, float | np.floating) and not isinstance(v, bool):
        if not np.isfinite(v) or v != int(v):
            raise ArgumentTypeError(f"{op}: {what} must be an integer, got {shown(v)}")
        return int(v)
    return _int(op, what, v)


_MAX_BYTES = int(np.iinfo(np.intp).max)
_MAX_DIMS = 32  # the storage's limit on a value's rank (numpy's is 64)


def _fits(op: str, what: str, shape: tuple[int, ...], itemsize: int) -> None:
    """Refuse a result numpy could never allocate (more bytes than an ``intp`` counts, as
    numpy's "array is too big"), naming the argument(s) ``what`` that asked for it."""
    if math.prod(shape) * itemsize > _MAX_BYTES:
        raise ArgumentError(
            f"{op}: {what} {_ask(what)} for a result of shape {shape}, larger than any array "
            "can be"
        )


def _ask(what: str) -> str:
    return "ask" if what.startswith("arguments") else "asks"


def _allocating(op: str, what: str, f: Any, *args: Any, **kwargs: Any) -> Any:
    """``f(*args, **kwargs)`` with the host's ``MemoryError`` raised as
    :class:`~tenferro_storage.errors.AllocationFailedError` naming ``what`` (nothing was
    allocated or recorded)."""
    try:
        return f(*args, **kwargs)
    except MemoryError as e:
        if isinstance(e, TenferroError):
            raise
        raise AllocationFailedError(
            f"{op}: {what} {_ask(what)} for more memory than the host can provide: {e}"
        ) from None


def _dtype_arg(op: str, dtype: Any) -> np.dtype[Any]:
    """``dtype=`` (:func:`~._util.dtype_arg`) as a numpy dtype tenferro stores."""
    dt = dtype_arg(op, dtype)
    if dt not in _STORED_DTYPES:
        raise DTypeError(
            f"{op}: argument 'dtype' {dt} is not a dtype tenferro stores; supported: bool, "
            "int32, int64, float32, float64, complex64, complex128"
        )
    return dt


# -- flattening / squeezing / axes ---
def ravel(x: Any) -> EagerTensor:
    """Flatten to 1-D: an alias of a contiguous value (no allocation), else one copy.

    Cost: allocates unless an alias; no copy; no sync; no dispatch; O(n), O(1) as an alias.
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return sh.reshape(x, (-1,))


def flatten(x: Any) -> EagerTensor:
    """Flatten to 1-D (like :func:`ravel`; differentiable, values never shared with writes:
    handles are read-only).

    Cost: allocates unless an alias; no copy; no sync; no dispatch; O(n), O(1) as an alias.
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return sh.reshape(x, (-1,))


def squeeze(x: Any, axis: Any = None) -> EagerTensor:
    """Remove length-1 axes (all, or the given ones; a non-1 axis is an error). An alias.

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    shape = shape_of(x)
    if axis is None:
        drop = {i for i, n in enumerate(shape) if n == 1}
    else:
        items = axis if isinstance(axis, tuple | list) else (axis,)
        drop = {_axis("squeeze", a, len(shape)) for a in items}
        for a in drop:
            if shape[a] != 1:
                raise ArgumentError(
                    f"squeeze: argument 'axis' selects axis {a} of extent {shape[a]}, not 1"
                )
    return sh.reshape(x, tuple(n for i, n in enumerate(shape) if i not in drop))


def _axis_list(op: str, axes: Any, what: str) -> list[Any]:
    if isinstance(axes, int | np.integer):
        return [axes]
    if not isinstance(axes, tuple | list):
        raise ArgumentTypeError(
            f"{op}: argument {what!r} must be an int or a sequence of ints, got "
            f"{type(axes).__name__}"
        )
    return list(axes)


def moveaxis(x: Any, source: Any, destination: Any) -> EagerTensor:
    """Move axes to new positions (a transpose alias).  A repeated axis in ``source`` or
    ``destination`` is refused (``ArgumentError``), as numpy does.

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    nd = len(_value("moveaxis", x))
    src = _axis_list("moveaxis", source, "source")
    dst = _axis_list("moveaxis", destination, "destination")
    if len(src) != len(dst):
        raise ArgumentError(
            f"moveaxis: arguments 'source' and 'destination' must have the same length, got "
            f"{len(src)} and {len(dst)} axes"
        )
    s = [_axis("moveaxis", a, nd, "source") for a in src]
    d = [_axis("moveaxis", a, nd, "destination") for a in dst]
    for what, given in (("source", s), ("destination", d)):
        if len(set(given)) != len(given):
            raise ArgumentError(f"moveaxis: argument {what!r} repeats an axis")
    order = [i for i in range(nd) if i not in s]
    for dd, ss in sorted(zip(d, s, strict=True)):
        order.insert(dd, ss)
    return sh.transpose(x, tuple(order))


def rollaxis(x: Any, axis: int, start: int = 0) -> EagerTensor:
    """``numpy.rollaxis`` (a transpose alias).

    ``start`` is an integer in ``[-ndim, ndim]`` (numpy's range, one more than an axis).

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).

    Raises:
        AxisError: ``axis`` or ``start`` is out of range for ``x``'s rank (the message
            names ``rollaxis``, the argument and the value as passed).
        ArgumentTypeError: ``axis`` or ``start`` is not an integer (a string, a float), or
            ``x`` is not a value.
        ArgumentError: ``x`` cannot be read as an array.
        UseAfterMoveError: ``x`` is a consumed owner."""
    nd = _nd(x)
    a = _axis("rollaxis", axis, nd)
    given = _int("rollaxis", "argument 'start'", start)
    start = given + nd if given < 0 else given
    if not 0 <= start <= nd:
        raise AxisError(
            "rollaxis", given, nd + 1, "start", detail=f"'start' must be in [{-nd}, {nd}]"
        )
    if a < start:
        start -= 1
    order = [i for i in range(nd) if i != a]
    order.insert(start, a)
    return sh.transpose(x, tuple(order))


# -- repetition ---
def _repeats(repeats: Any, n: int) -> np.ndarray[Any, Any] | int:
    """``repeats`` of :func:`repeat` (an int, or one count per element along the axis) checked
    against the axis extent ``n``: O(len(repeats))."""
    if not isinstance(repeats, list | tuple | np.ndarray):
        r = _count("repeat", "argument 'repeats'", repeats)
        if r < 0:
            raise ArgumentError(f"repeat: argument 'repeats' must be non-negative, got {r}")
        return r
    try:
        arr = np.asarray(repeats)
    except (ValueError, TypeError, TenferroError) as e:
        raise ArgumentTypeError(
            f"repeat: argument 'repeats' is a {type(repeats).__name__} numpy cannot turn into "
            f"an array of counts: {e}"
        ) from None
    bad = arr.dtype.kind not in "biuf" or arr.ndim > 1
    if not bad and arr.dtype.kind == "f":
        bad = not bool(np.all(np.isfinite(arr) & (arr == np.trunc(arr))))
    if bad:
        raise ArgumentTypeError(
            "repeat: argument 'repeats' must be an int or a 1-D sequence of integers, got a "
            f"{type(repeats).__name__} of dtype {arr.dtype} and shape {arr.shape}"
        )
    counts = arr.reshape(-1).astype(np.int64)
    if counts.size and int(counts.min()) < 0:
        raise ArgumentError("repeat: argument 'repeats' holds a negative count")
    if counts.size not in (1, n):
        raise ArgumentError(
            f"repeat: arguments 'x' and 'repeats' do not fit: {counts.size} counts for an axis "
            f"of extent {n} (give one count, or one per element)"
        )
    return int(counts[0]) if counts.size == 1 else counts


def repeat(x: Any, repeats: Any, axis: int | None = None) -> EagerTensor:
    """Repeat elements (a gather; VJP sums the copies). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    shape, dt = stored_value_arg("repeat", "x", x)
    if axis is None:
        n, ax = math.prod(shape), None
    else:
        ax = _axis("repeat", axis, len(shape))
        n = shape[ax]
    reps = _repeats(repeats, n)
    total = n * reps if isinstance(reps, int) else int(reps.sum())
    _fits("repeat", "argument 'repeats'", (total,), 8)  # the index array
    out_shape = (total,) if ax is None else (*shape[:ax], total, *shape[ax + 1 :])
    _fits("repeat", "argument 'repeats'", out_shape, dt.itemsize)
    if ax is None:
        x, ax = ravel(x), 0
    idx = _allocating("repeat", "argument 'repeats'", np.repeat, np.arange(n), reps)
    key = (slice(None),) * ax + (idx,)
    return _allocating("repeat", "argument 'repeats'", sh.gather, x, key)  # type: ignore[no-any-return]


def tile(x: Any, reps: Any) -> EagerTensor:
    """Tile ``x`` (a broadcast alias and one reshape copy). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    shape, dt = stored_value_arg("tile", "x", x)
    reps_t = _shape_param("tile", reps, "reps", "a negative count")
    nd = builtins.max(len(shape), len(reps_t))
    shape = (1,) * (nd - len(shape)) + shape
    reps_t = (1,) * (nd - len(reps_t)) + reps_t
    out_shape = tuple(r * n for r, n in zip(reps_t, shape, strict=True))
    if nd > _MAX_DIMS:
        raise ArgumentError(
            f"tile: argument 'reps' gives the result {nd} dimensions, more than the "
            f"{_MAX_DIMS} a tenferro value can have"
        )
    _fits("tile", "argument 'reps'", out_shape, dt.itemsize)
    tiled = [i for i in range(nd) if reps_t[i] != 1]
    if nd + len(tiled) > _MAX_DIMS:  # no room for a (reps, n) pair per axis: join copies
        out = sh.reshape(x, shape)
        for i in tiled:
            out = _allocating(
                "tile", "argument 'reps'", sh.concatenate, [out] * reps_t[i], axis=i
            )
        return out
    pairs = [((r, n) if r != 1 else (n,)) for r, n in zip(reps_t, shape, strict=True)]
    x = sh.reshape(x, tuple(v for p, n in zip(pairs, shape, strict=True)
                            for v in ((1, n) if len(p) == 2 else p)))
    x = sh.broadcast_to(x, tuple(v for p in pairs for v in p))
    result: EagerTensor = _allocating("tile", "argument 'reps'", sh.reshape, x, out_shape)
    return result


# -- flips and rotations ---
def flip(x: Any, axis: Any = None) -> EagerTensor:
    """Reverse the order along ``axis`` (``None``: all): a negative-stride alias.

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    nd = _nd(x)
    if axis is None:
        ax = set(range(nd))
    else:
        items = axis if isinstance(axis, tuple | list) else (axis,)
        ax = {_axis("flip", a, nd) for a in items}
    return sh.getitem(x, tuple(slice(None, None, -1) if i in ax else slice(None)
                               for i in range(nd)))


def fliplr(x: Any) -> EagerTensor:
    """Flip axis 1 (an alias).

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return flip(x, 1)


def flipud(x: Any) -> EagerTensor:
    """Flip axis 0 (an alias).

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return flip(x, 0)


def roll(x: Any, shift: Any, axis: Any = None) -> EagerTensor:
    """Roll elements cyclically (two slices and one concatenation per axis).  ``shift`` and
    ``axis`` broadcast against each other as numpy's (one shift for several axes, several
    shifts for one axis: they add up).

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    shape = _value("roll", x)
    many = isinstance(shift, tuple | list) or (isinstance(shift, np.ndarray) and shift.ndim)
    items = list(shift) if many else [shift]
    shifts = [_int("roll", "argument 'shift'", s) for s in items]
    if axis is None:
        flat = roll(ravel(x), builtins.sum(shifts), 0)
        return sh.reshape(flat, shape)
    axes_ = list(axis) if isinstance(axis, tuple | list) else [axis]
    if len(shifts) == 1:
        shifts = shifts * len(axes_)
    elif len(axes_) == 1:
        axes_ = axes_ * len(shifts)
    if len(shifts) != len(axes_):
        raise ArgumentError(
            f"roll: arguments 'shift' and 'axis' do not broadcast: {len(shifts)} shifts for "
            f"{len(axes_)} axes"
        )
    total = [0] * len(shape)
    for s, a in zip(shifts, axes_, strict=True):
        total[_axis("roll", a, len(shape))] += s
    out: EagerTensor = x
    for ax, s in enumerate(total):
        n = shape[ax]
        if n == 0:
            continue
        k = s % n
        if k == 0:
            continue
        pre = (slice(None),) * ax
        out = sh.concatenate(
            [sh.getitem(out, (*pre, slice(n - k, n))), sh.getitem(out, (*pre, slice(0, n - k)))],
            axis=ax,
        )
    return out if out is not x else sh.getitem(x, (Ellipsis,))  # no shift: an alias


def rot90(x: Any, k: int = 1, axes: tuple[int, int] = (0, 1)) -> EagerTensor:
    """Rotate by 90 degrees ``k`` times in the plane ``axes`` (flips and a transpose).

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    nd = len(_value("rot90", x))
    k = _int("rot90", "argument 'k'", k)
    if not isinstance(axes, tuple | list) or len(axes) != 2:
        raise ArgumentError(
            f"rot90: argument 'axes' must be a pair of axes, got {shown(axes)}"
        )
    a0, a1 = _axis("rot90", axes[0], nd, "axes"), _axis("rot90", axes[1], nd, "axes")
    if a0 == a1:
        raise ArgumentError(f"rot90: argument 'axes' must be two different axes, got {axes}")
    k %= 4
    if k == 0:
        return sh.getitem(x, (Ellipsis,))
    if k == 2:
        return flip(flip(x, a0), a1)
    perm = list(range(nd))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return sh.transpose(flip(x, a1), tuple(perm))
    return flip(sh.transpose(x, tuple(perm)), a1)


# -- padding ---
_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


def _as_pairs(arr: np.ndarray[Any, Any], nd: int, what: str) -> np.ndarray[Any, Any]:
    """numpy's ``_as_pairs``: one value, one ``(before, after)`` pair, or one pair per axis,
    as an ``(nd, 2)`` array (a broadcast view: no copy)."""
    if arr.ndim < 3 and arr.size == 1:
        return np.broadcast_to(arr.reshape(1, 1), (nd, 2))
    if arr.ndim < 3 and arr.size == 2 and arr.shape != (2, 1):
        return np.broadcast_to(arr.reshape(1, 2), (nd, 2))
    try:
        return np.broadcast_to(arr, (nd, 2))
    except ValueError:
        raise ArgumentError(
            f"pad: arguments 'x' and {what!r} do not fit: {what!r} of shape {arr.shape} gives "
            f"neither one (before, after) pair nor one per axis of the {nd}-d value"
        ) from None


def _pad_array(v: Any, what: str) -> np.ndarray[Any, Any]:
    try:
        arr = np.asarray(v)
    except TenferroError:  # an owner or handle: numpy cannot read it without a copy
        raise ArgumentTypeError(
            f"pad: argument {what!r} must be numbers (an int, a tuple or a numpy array), got "
            f"{type(v).__name__}"
        ) from None
    except (TypeError, ValueError) as e:
        raise ArgumentTypeError(f"pad: argument {what!r} is not an array of numbers: {e}") from None
    return arr


def _pad_width(pw: Any, nd: int) -> list[tuple[int, int]]:
    arr = _pad_array(pw, "pad_width")
    if arr.dtype.kind not in "iu":
        raise ArgumentTypeError(
            f"pad: argument 'pad_width' must be of integral type, got dtype {arr.dtype}"
        )
    pairs = _as_pairs(arr, nd, "pad_width")
    if pairs.size and int(pairs.min()) < 0:
        raise ArgumentError(f"pad: argument 'pad_width' holds a negative width: {shown(pw)}")
    return [(int(a), int(b)) for a, b in pairs]


def pad(x: Any, pad_width: Any, mode: str = "constant", constant_values: Any = 0) -> EagerTensor:
    """``numpy.pad`` for modes ``constant`` (slice-pad into zeros, plus the constant), and
    ``edge``/``reflect``/``symmetric``/``wrap`` (a gather per padded axis; VJP scatter-adds).
    ``constant_values`` must be numbers that ``x``'s dtype holds exactly (no NaN into an
    integer value, no dropped imaginary part).

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    shape, dt = stored_value_arg("pad", "x", x)
    nd = len(shape)
    if not isinstance(mode, str) or mode not in _PAD_MODES:
        raise ArgumentError(
            f"pad: argument 'mode' {shown(mode)} is not supported; supported: "
            f"{', '.join(_PAD_MODES)}"
        )
    pw = _pad_width(pad_width, nd)
    out_shape = tuple(n + a + b for n, (a, b) in zip(shape, pw, strict=True))
    _fits("pad", "argument 'pad_width'", out_shape, dt.itemsize)
    if mode == "constant":
        cv = _pad_array(constant_values, "constant_values")
        if cv.dtype.kind not in "biufc":
            raise ArgumentTypeError(
                f"pad: argument 'constant_values' must be numbers, got {shown(constant_values)}"
            )
        cvs = checked_cast(
            "pad: arguments 'x' and 'constant_values'",
            _as_pairs(cv, nd, "constant_values"),
            dt,
        ).astype(dt)
        key = tuple(slice(a, a + n) for n, (a, _) in zip(shape, pw, strict=True))
        out = _allocating(
            "pad", "argument 'pad_width'", sh.slice_pad, x, key=key, shape=out_shape
        )
        if not np.any(cvs):
            return out  # type: ignore[no-any-return]
        fill = np.zeros(out_shape, dtype=dt)
        for i, (a, b) in enumerate(pw):  # numpy's order: later axes overwrite corners
            lo = (slice(None),) * i + (slice(0, a),)
            hi = (slice(None),) * i + (slice(out_shape[i] - b, out_shape[i]),)
            fill[lo] = cvs[i][0]
            fill[hi] = cvs[i][1]
        fill[key] = 0
        return ew.add(out, fill)
    out = x
    for i, (a, b) in enumerate(pw):
        if a == 0 and b == 0:
            continue
        if shape[i] == 0:
            raise ArgumentError(
                f"pad: arguments 'x', 'pad_width' and 'mode': axis {i} of 'x' is empty, which "
                f"mode {mode!r} cannot extend (only 'constant' can)"
            )
        idx = np.pad(np.arange(shape[i]), (a, b), mode=mode)  # type: ignore[call-overload]
        out = _allocating("pad", "argument 'pad_width'", sh.gather, out,
                          (slice(None),) * i + (idx,))
    return out if out is not x else sh.getitem(x, (Ellipsis,))  # no padding: an alias


# -- splitting ---
def _split_points(
    n: int, sections: Any, name: str, exact: bool, what: str, names: str
) -> list[int]:
    """Where to cut an axis of extent ``n``: ``sections`` equal parts (an int) or the
    indices given (a sequence).  ``names`` names the arguments an unequal division is about
    (``"arguments 'x', 'indices_or_sections' and 'axis'"``)."""
    if isinstance(sections, list | tuple) or (
        isinstance(sections, np.ndarray) and sections.ndim
    ):
        pts = []
        for s in sections:
            try:
                pts.append(operator.index(s))
            except (TypeError, TenferroError):
                raise ArgumentTypeError(
                    f"{name}: argument {what!r} must be an int or a sequence of ints, got an "
                    f"item {shown(s)}"
                ) from None
        return pts
    k = _count(name, f"argument {what!r}", sections)
    if k <= 0:
        raise ArgumentError(
            f"{name}: argument {what!r} (the number of sections) must be positive, got {k}"
        )
    if exact and n % k:
        raise ArgumentError(
            f"{name}: array split does not result in an equal division: {names} ask for {k} "
            f"sections of an axis of extent {n} (array_split allows unequal ones)"
        )
    if k > builtins.max(n, _MAX_EMPTY_SECTIONS):
        raise ArgumentError(
            f"{name}: argument {what!r} asks for {k} sections of an axis of extent {n}; "
            f"more than {_MAX_EMPTY_SECTIONS} (or the extent) is refused"
        )
    q, r = divmod(n, k)
    out, acc = [], 0
    for i in range(k - 1):
        acc += q + (1 if i < r else 0)
        out.append(acc)
    return out


_MAX_EMPTY_SECTIONS = 1 << 16
_HSPLIT = object()  # the axis of hsplit: 1, or 0 for a 1-D value


def _split(
    x: Any,
    sections: Any,
    axis: Any,
    name: str,
    exact: bool,
    what: str = "indices_or_sections",
    min_nd: int = 0,
) -> list[EagerTensor]:
    shape = _value(name, x)
    if len(shape) < min_nd:
        raise ArgumentError(
            f"{name}: argument 'x' has {len(shape)} dimension(s); {name} needs {min_nd} or more"
        )
    if axis is _HSPLIT:  # axis 1, or 0 for a 1-D value
        axis = 1 if len(shape) > 1 else 0
        names = f"arguments 'x' and {what!r}"
    else:
        names = f"arguments 'x', {what!r} and 'axis'" if what == "indices_or_sections" else (
            f"arguments 'x' and {what!r}"
        )
    ax = _axis(name, axis, len(shape))
    n = shape[ax]
    pts = _split_points(n, sections, name, exact, what, names)
    bounds = [0, *pts, n]
    pre = (slice(None),) * ax
    return [
        sh.getitem(x, (*pre, slice(builtins.min(lo, n), builtins.min(builtins.max(hi, lo), n))))
        for lo, hi in itertools.pairwise(bounds)
    ]


def split(x: Any, indices_or_sections: Any, axis: int = 0) -> list[EagerTensor]:
    """Split into equal sections or at indices: basic slices (aliases, no allocation).

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return _split(x, indices_or_sections, axis, "split", True)


def array_split(x: Any, indices_or_sections: Any, axis: int = 0) -> list[EagerTensor]:
    """Like :func:`split`, allowing unequal sections.

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return _split(x, indices_or_sections, axis, "array_split", False)


def vsplit(x: Any, s: Any) -> list[EagerTensor]:
    """Split along axis 0 (a value of 2 or more dimensions, as numpy).

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return _split(x, s, 0, "vsplit", True, "s", 2)


def hsplit(x: Any, s: Any) -> list[EagerTensor]:
    """Split along axis 1 (axis 0 for 1-D; a 0-d value is refused, as numpy).

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return _split(x, s, _HSPLIT, "hsplit", True, "s", 1)


def dsplit(x: Any, s: Any) -> list[EagerTensor]:
    """Split along axis 2 (a value of 3 or more dimensions, as numpy).

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return _split(x, s, 2, "dsplit", True, "s", 3)


# -- at-least-nd and stacking ---
def atleast_1d(*xs: Any) -> Any:
    """View inputs with at least one axis (aliases).

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    out = [x if _nd(x) >= 1 else sh.reshape(x, (1,)) for x in xs]
    return out[0] if len(out) == 1 else out


def atleast_2d(*xs: Any) -> Any:
    """View inputs with at least two axes (aliases).

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    out = []
    for x in xs:
        s = shape_of(x)
        out.append(x if len(s) >= 2 else sh.reshape(x, (1,) * (2 - len(s)) + s))
    return out[0] if len(out) == 1 else out


def atleast_3d(*xs: Any) -> Any:
    """View inputs with at least three axes (numpy's placement: (n,) -> (1, n, 1)).

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    out = []
    for x in xs:
        s = shape_of(x)
        if len(s) == 0:
            x = sh.reshape(x, (1, 1, 1))
        elif len(s) == 1:
            x = sh.reshape(x, (1, s[0], 1))
        elif len(s) == 2:
            x = sh.reshape(x, (*s, 1))
        out.append(x)
    return out[0] if len(out) == 1 else out


def _seq(xs: Sequence[Any]) -> list[Any]:
    xs = list(xs)
    if not xs:
        raise ArgumentError("stack: need at least one value")
    return xs


def vstack(xs: Sequence[Any]) -> EagerTensor:
    """Concatenate along axis 0 after :func:`atleast_2d`. One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return sh.concatenate([atleast_2d(x) for x in _seq(xs)], axis=0)


def hstack(xs: Sequence[Any]) -> EagerTensor:
    """Concatenate along axis 1 (axis 0 for 1-D values). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    xs = [atleast_1d(x) for x in _seq(xs)]
    return sh.concatenate(xs, axis=0 if _nd(xs[0]) == 1 else 1)


def dstack(xs: Sequence[Any]) -> EagerTensor:
    """Concatenate along axis 2 after :func:`atleast_3d`. One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return sh.concatenate([atleast_3d(x) for x in _seq(xs)], axis=2)


def column_stack(xs: Sequence[Any]) -> EagerTensor:
    """Stack 1-D values as columns (2-D values as they are). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    cols = []
    for x in _seq(xs):
        s = shape_of(x)
        cols.append(sh.reshape(x, (s[0], 1)) if len(s) == 1 else atleast_2d(x))
    return sh.concatenate(cols, axis=1)


def append(x: Any, values: Any, axis: int | None = None) -> EagerTensor:
    """``numpy.append``: concatenate (flattened when ``axis`` is ``None``). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    xs = _value("append", x)
    vs = _value("append", values, "values")
    if axis is None:
        return sh.concatenate([ravel(x), ravel(values)], axis=0)
    ax = _axis("append", axis, len(xs))
    if len(vs) != len(xs) or any(
        a != b for i, (a, b) in enumerate(zip(xs, vs, strict=True)) if i != ax
    ):
        raise ArgumentError(
            f"append: arguments 'x' and 'values' do not fit: shapes {xs} and {vs} differ "
            f"outside axis {ax}"
        )
    return sh.concatenate([x, values], axis=ax)


# -- diagonals ---
def _diag_index(n: int, k: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    i = np.arange(n)
    return (i, i + k) if k >= 0 else (i - k, i)


def diagonal(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> EagerTensor:
    """``numpy.diagonal``: a gather (one allocation; VJP scatter-adds), the diagonal last.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    shape = shape_of(x)
    nd = len(shape)
    a1, a2 = _axis("diagonal", axis1, nd, "axis1"), _axis("diagonal", axis2, nd, "axis2")
    if a1 == a2:
        raise ArgumentError("diagonal: arguments 'axis1' and 'axis2' must differ")
    return _diagonal(x, shape, _int("diagonal", "argument 'offset'", offset), a1, a2)


def _diagonal(x: Any, shape: tuple[int, ...], k: int, a1: int, a2: int) -> EagerTensor:
    nd = len(shape)
    rest = [i for i in range(nd) if i not in (a1, a2)]
    xt = sh.transpose(x, (*rest, a1, a2))
    n1, n2 = shape[a1], shape[a2]
    n = builtins.max(0, builtins.min(n1, n2 - k) if k >= 0 else builtins.min(n1 + k, n2))
    r, c = _diag_index(n, k)
    return sh.gather(xt, (Ellipsis, r, c))


def trace(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> EagerTensor:
    """``numpy.trace``: the sum of :func:`diagonal`.  Reached through ``tenferro_ad.trace(x,
    *args)``, so a refusal names ``offset``, ``axis1`` and ``axis2`` by position too
    (arguments 1, 2 and 3)."""
    shape = _value("trace", x)
    k = _int("trace", "argument 1 ('offset')", offset)
    nd = len(shape)
    for i, (what, a) in enumerate((("axis1", axis1), ("axis2", axis2)), 2):
        if isinstance(a, bool | np.bool_) or not isinstance(a, int | np.integer):
            raise ArgumentTypeError(
                f"trace: argument {i} ({what!r}) must be an int, got {shown(a)}"
            )
    a1, a2 = _axis("trace", axis1, nd, "axis1"), _axis("trace", axis2, nd, "axis2")
    if a1 == a2:
        raise ArgumentError(
            f"trace: arguments 2 and 3 ('axis1' and 'axis2') must be different axes, got {a1}"
        )
    return rsum(_diagonal(x, shape, k, a1, a2), axis=-1)


def _diag(op: str, v: Any, s: tuple[int, ...], dt: np.dtype[Any], k: Any) -> EagerTensor:
    kk = _int(op, "argument 'k'", k)
    if len(s) == 1:
        n = s[0] + builtins.abs(kk)
        _fits(op, "arguments 'v' and 'k'", (n, n), dt.itemsize)
        r, c = _diag_index(s[0], kk)
        out: EagerTensor = _allocating(
            op, "arguments 'v' and 'k'", sh.scatter_add, v, key=(r, c), shape=(n, n)
        )
        return out
    if len(s) == 2:
        return _diagonal(v, s, kk, 0, 1)
    raise ArgumentError(f"{op}: argument 'v' must be 1-D or 2-D, got shape {s}")


def diag(v: Any, k: int = 0) -> EagerTensor:
    """``numpy.diag``: a 1-D value becomes a 2-D matrix with it on diagonal ``k`` (a
    scatter into zeros); a 2-D value gives its ``k``-th diagonal (a gather).

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return _diag("diag", v, *stored_value_arg("diag", "v", v), k)


def diagflat(v: Any, k: int = 0) -> EagerTensor:
    """``numpy.diagflat``: :func:`diag` of the flattened input.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    s, dt = stored_value_arg("diagflat", "v", v)
    n = math.prod(s) + builtins.abs(_int("diagflat", "argument 'k'", k))
    _fits("diagflat", "arguments 'v' and 'k'", (n, n), dt.itemsize)  # before ravel runs
    return _diag("diagflat", ravel(v), (math.prod(s),), dt, k)


def _tri_mask(shape: tuple[int, ...], k: int, lower: bool) -> np.ndarray[Any, Any]:
    n, m = shape[-2], shape[-1]
    mask = np.tri(n, m, k, dtype=bool)
    return mask if lower else ~np.tri(n, m, k - 1, dtype=bool)


def tril(x: Any, k: int = 0) -> EagerTensor:
    """Lower triangle (a ``where`` with a constant mask). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return ew.where(_tri_mask(shape_of(x), k, True), x, 0.0)


def triu(x: Any, k: int = 0) -> EagerTensor:
    """Upper triangle (a ``where`` with a constant mask). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return ew.where(_tri_mask(shape_of(x), k, False), x, 0.0)


# -- constructors (constants) ---
def _fill_impl(v: Any, *, shape: tuple[int, ...], dtype: Any) -> Array:
    return np.full(shape, v, dtype=dtype)


FILL = nondifferentiable(defprimitive("fill", _fill_impl, 1))
EYE = nondifferentiable(
    defprimitive("eye", lambda v, *, n, m, k, dtype: np.eye(n, m, k, dtype=dtype), 1)
)


def _shape_param(
    op: str, shape: Any, what: str = "shape", holds: str = "a negative extent"
) -> tuple[int, ...]:
    """A ``shape=``-like argument ``what`` (an int or a sequence of non-negative ints)."""
    try:
        if isinstance(shape, list | tuple) or (isinstance(shape, np.ndarray) and shape.ndim):
            s = tuple(operator.index(n) for n in shape)
        else:
            s = (operator.index(shape),)
    except (TypeError, TenferroError):
        raise ArgumentTypeError(
            f"{op}: argument {what!r} must be an int or a sequence of ints, got {shown(shape)}"
        ) from None
    if any(n < 0 for n in s):
        raise ArgumentError(f"{op}: argument {what!r} {s} holds {holds}")
    return s


def _full_like(op: str, x: Any, fill_value: Any, dtype: Any, shape: Any) -> EagerTensor:
    xs, xdt = value_arg(op, "x", x)
    if dtype is not None:
        dt = _dtype_arg(op, dtype)
    elif xdt not in _STORED_DTYPES:
        raise DTypeError(
            f"{op}: argument 'x' has dtype {xdt}, which tenferro does not store (pass dtype=)"
        )
    else:
        dt = xdt
    s = xs if shape is None else _shape_param(op, shape)
    _fits(op, "argument 'x'" if shape is None else "argument 'shape'", s, dt.itemsize)
    if not isinstance(fill_value, bool | int | float | complex | np.number | np.bool_):
        raise ArgumentTypeError(
            f"{op}: argument 'fill_value' must be a number, got {shown(fill_value)}"
        )
    if isinstance(fill_value, int) and not -(2**63) <= fill_value < 2**64:
        raise ArgumentError(
            f"{op}: argument 'fill_value' {fill_value} does not fit in 64 bits"
        )
    if fill_value == 0:
        value: Any = 0.0
    else:
        both = "arguments 'fill_value' and " + ("'dtype'" if dtype is not None else "'x'")
        value = checked_cast(f"{op}: {both}", np.asarray(fill_value), dt).astype(dt)
    out: EagerTensor = _allocating(
        op, "argument 'x'" if shape is None else "argument 'shape'", bind, FILL, value,
        shape=s, dtype=dt,
    )
    return out


def full_like(x: Any, fill_value: Any, dtype: Any = None, shape: Any = None) -> EagerTensor:
    """A constant of ``x``'s shape and dtype (or ``shape``/``dtype``) filled with
    ``fill_value`` (never tracked).  One allocation.  ``fill_value`` must be a number the
    dtype holds exactly (no NaN into an integer dtype, no dropped imaginary part).

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return _full_like("full_like", x, fill_value, dtype, shape)


def zeros_like(x: Any, dtype: Any = None, shape: Any = None) -> EagerTensor:
    """Zeros shaped like ``x`` (a constant). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return _full_like("zeros_like", x, 0, dtype, shape)


def ones_like(x: Any, dtype: Any = None, shape: Any = None) -> EagerTensor:
    """Ones shaped like ``x`` (a constant). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return _full_like("ones_like", x, 1, dtype, shape)


def eye(n: int, m: int | None = None, k: int = 0, dtype: Any = None) -> EagerTensor:
    """Identity-like constant matrix. One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError."""
    dt = np.dtype(np.float64) if dtype is None else _dtype_arg("eye", dtype)
    rows = _int("eye", "argument 'n'", n)
    cols = rows if m is None else _int("eye", "argument 'm'", m)
    diag_k = _int("eye", "argument 'k'", k)
    for what, v in (("n", rows), ("m", cols)):
        if v < 0:
            raise ArgumentError(f"eye: argument {what!r} must be non-negative, got {v}")
    what = "argument 'n'" if m is None else "arguments 'n' and 'm'"
    _fits("eye", what, (rows, cols), dt.itemsize)
    out: EagerTensor = _allocating(
        "eye", what, bind, EYE, 0.0, n=rows, m=cols, k=diag_k, dtype=dt
    )
    return out


def linspace(
    start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: Any = None
) -> EagerTensor:
    """``num`` evenly spaced values; differentiable in ``start`` and ``stop`` (JAX's):
    ``start + (stop - start) * t`` with constant ``t`` (one allocation each).

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError."""
    ss, sdt = stored_value_arg("linspace", "start", start)
    es, edt = stored_value_arg("linspace", "stop", stop)
    num = _int("linspace", "argument 'num'", num)
    if num < 0:
        raise ArgumentError(f"linspace: argument 'num' must be non-negative, got {num}")
    try:
        bshape = np.broadcast_shapes(ss, es)
    except ValueError:
        raise ArgumentError(
            f"linspace: arguments 'start' and 'stop' do not broadcast: shapes {ss} and {es}"
        ) from None
    dts = [d for v, d in ((start, sdt), (stop, edt)) if not isinstance(v, int | float)]
    dt = _dtype_arg("linspace", dtype) if dtype is not None else (
        np.result_type(*dts) if dts else np.dtype(np.float64)
    )
    if dt.kind not in "fc":
        dt = np.dtype(np.float64)
    _fits("linspace", "argument 'num'", (num, *bshape), dt.itemsize)
    div = (num - 1) if endpoint else num
    frac = np.arange(num, dtype=np.float64) / div if div > 0 else np.zeros(num)
    t = frac.reshape((num,) + (1,) * len(bshape)).astype(dt)
    out = ew.add(start, ew.mul(ew.sub(stop, start), t))
    if endpoint and num > 1:  # the last entry is exactly ``stop`` (numpy/JAX)
        last = np.zeros((num,) + (1,) * len(bshape), dtype=bool)
        last[-1] = True
        out = ew.where(last, ew.add(ew.mul(start, 0.0), stop), out)
    if dtype is not None:
        out = ew.astype(out, dt)
    return out


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> EagerTensor:
    """``numpy.select``: the first true condition picks its choice (nested ``where``;
    conditions are not differentiated).

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    for what, given in (("condlist", condlist), ("choicelist", choicelist)):
        if not isinstance(given, tuple | list):
            raise ArgumentTypeError(
                f"select: argument {what!r} must be a list of values, got {type(given).__name__}"
            )
    if len(condlist) != len(choicelist):
        raise ArgumentError(
            "select: arguments 'condlist' and 'choicelist' must have the same length"
        )
    if not condlist:
        raise ArgumentError("select: argument 'condlist' must not be empty")
    out: Any = default
    for c, v in zip(reversed(list(condlist)), reversed(list(choicelist)), strict=True):
        out = ew.where(c, v, out)
    return out  # type: ignore[no-any-return]


# -- r_ / c_ index tricks (the common forms) ---
def _index_part(item: Any, name: str) -> Any:
    if isinstance(item, str):
        raise ArgumentError(f"{name}: string directives ({item!r}) are not supported")
    if isinstance(item, slice):
        start = 0 if item.start is None else item.start
        step = 1 if item.step is None else item.step
        if isinstance(step, complex):
            return np.linspace(start, item.stop, int(abs(step)))
        return np.arange(start, item.stop, step)
    if isinstance(item, EagerTensor):
        return atleast_1d(item)
    return np.atleast_1d(np.asarray(item))


def _weak_parts(parts: list[Any]) -> list[Any]:
    """numpy parts (ranges, scalars) take the handles' dtype, as JAX's weak types do."""
    dts = [dtype_of(p) for p in parts if isinstance(p, EagerTensor)]
    if not dts:
        return parts
    dt = np.result_type(*dts)
    return [p if isinstance(p, EagerTensor) else np.asarray(p).astype(dt) for p in parts]


class _RClass:
    """``r_[a, b, 0:3, ...]``: concatenate along axis 0 (slices become ranges; ``start:stop:nj``
    a linspace); differentiable in the handle parts. One allocation."""

    def __getitem__(self, key: Any) -> EagerTensor:
        items = key if isinstance(key, tuple) else (key,)
        return sh.concatenate(_weak_parts([_index_part(it, "r_") for it in items]), axis=0)


class _CClass:
    """``c_[a, b, ...]``: 1-D parts become columns, concatenated along the last axis."""

    def __getitem__(self, key: Any) -> EagerTensor:
        items = key if isinstance(key, tuple) else (key,)
        parts = []
        for it in items:
            p = _index_part(it, "c_")
            s = shape_of(p)
            if len(s) == 1:
                p = sh.reshape(p, (s[0], 1)) if isinstance(p, EagerTensor) else p.reshape(-1, 1)
            parts.append(p)
        return sh.concatenate(_weak_parts(parts), axis=-1)


r_ = _RClass()
c_ = _CClass()


# argument errors from numpy/scipy/the kernel name the op (the package's error classes)
guard_module(globals(), __all__)

# batching rules: ``eye`` ignores its argument's value; ``fill`` fills per example
defbatch(EYE, unbatched_result("eye"))
defbatch(FILL, filled("fill"))
