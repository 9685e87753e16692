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
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from tenferro_storage.errors import TenferroError

from .._dispatch import bind
from .._handle import EagerTensor
from .._primitive import defprimitive, nondifferentiable
from ..errors import ArgumentError, ArgumentTypeError
from . import elementwise as ew
from . import shape as sh
from ._util import axis as _axis
from ._util import dtype_of, guard_module, shape_of

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


# -- flattening / squeezing / axes ---
def ravel(x: Any) -> EagerTensor:
    """Flatten to 1-D: an alias of a contiguous value (no allocation), else one copy."""
    return sh.reshape(x, (-1,))


def flatten(x: Any) -> EagerTensor:
    """Flatten to 1-D (like :func:`ravel`; differentiable, values never shared with writes:
    handles are read-only)."""
    return sh.reshape(x, (-1,))


def squeeze(x: Any, axis: Any = None) -> EagerTensor:
    """Remove length-1 axes (all, or the given ones; a non-1 axis is an error). An alias."""
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
    """Move axes to new positions (a transpose alias)."""
    nd = _nd(x)
    src = _axis_list("moveaxis", source, "source")
    dst = _axis_list("moveaxis", destination, "destination")
    if len(src) != len(dst):
        raise ArgumentError(
            "moveaxis: arguments 'source' and 'destination' must have the same length"
        )
    s = [_axis("moveaxis", a, nd, "source") for a in src]
    d = [_axis("moveaxis", a, nd, "destination") for a in dst]
    order = [i for i in range(nd) if i not in s]
    for dd, ss in sorted(zip(d, s, strict=True)):
        order.insert(dd, ss)
    return sh.transpose(x, tuple(order))


def rollaxis(x: Any, axis: int, start: int = 0) -> EagerTensor:
    """``numpy.rollaxis`` (a transpose alias)."""
    nd = _nd(x)
    a = _axis("rollaxis", axis, nd)
    if start < 0:
        start += nd
    if not 0 <= start <= nd:
        from ..errors import AxisError

        raise AxisError("rollaxis", start, nd + 1, "start")
    if a < start:
        start -= 1
    order = [i for i in range(nd) if i != a]
    order.insert(start, a)
    return sh.transpose(x, tuple(order))


# -- repetition ---
def repeat(x: Any, repeats: Any, axis: int | None = None) -> EagerTensor:
    """Repeat elements (a gather; VJP sums the copies). One allocation."""
    if axis is None:
        x, axis = ravel(x), 0
    shape = shape_of(x)
    ax = _axis("repeat", axis, len(shape))
    idx = np.repeat(np.arange(shape[ax]), repeats)
    key = (slice(None),) * ax + (idx,)
    return sh.gather(x, key)


def tile(x: Any, reps: Any) -> EagerTensor:
    """Tile ``x`` (a broadcast alias and one reshape copy). One allocation."""
    try:
        reps_t = (operator.index(reps),) if isinstance(reps, int | np.integer) else tuple(
            operator.index(r) for r in reps
        )
    except TypeError:
        raise ArgumentTypeError(
            f"tile: argument 'reps' must be an int or a sequence of ints, got {reps!r}"
        ) from None
    shape = shape_of(x)
    nd = builtins.max(len(shape), len(reps_t))
    shape = (1,) * (nd - len(shape)) + shape
    reps_t = (1,) * (nd - len(reps_t)) + reps_t
    x = sh.reshape(x, tuple(v for n in shape for v in (1, n)))
    x = sh.broadcast_to(x, tuple(v for r, n in zip(reps_t, shape, strict=True) for v in (r, n)))
    return sh.reshape(x, tuple(r * n for r, n in zip(reps_t, shape, strict=True)))


# -- flips and rotations ---
def flip(x: Any, axis: Any = None) -> EagerTensor:
    """Reverse the order along ``axis`` (``None``: all): a negative-stride alias."""
    nd = _nd(x)
    if axis is None:
        ax = set(range(nd))
    else:
        items = axis if isinstance(axis, tuple | list) else (axis,)
        ax = {_axis("flip", a, nd) for a in items}
    return sh.getitem(x, tuple(slice(None, None, -1) if i in ax else slice(None)
                               for i in range(nd)))


def fliplr(x: Any) -> EagerTensor:
    """Flip axis 1 (an alias)."""
    return flip(x, 1)


def flipud(x: Any) -> EagerTensor:
    """Flip axis 0 (an alias)."""
    return flip(x, 0)


def roll(x: Any, shift: Any, axis: Any = None) -> EagerTensor:
    """Roll elements cyclically (two slices and one concatenation per axis)."""
    if axis is None:
        return sh.reshape(roll(ravel(x), shift, 0), shape_of(x))
    shifts = shift if isinstance(shift, tuple | list) else (shift,)
    axes_ = axis if isinstance(axis, tuple | list) else (axis,)
    if len(shifts) == 1 and len(axes_) > 1:
        shifts = tuple(shifts) * len(axes_)
    if len(shifts) != len(axes_):
        raise ArgumentError("roll: arguments 'shift' and 'axis' must have the same length")
    out: EagerTensor = x
    for s, a in zip(shifts, axes_, strict=True):
        shape = shape_of(out)
        ax = _axis("roll", a, len(shape))
        n = shape[ax]
        if n == 0:
            continue
        k = int(s) % n
        if k == 0:
            continue
        pre = (slice(None),) * ax
        out = sh.concatenate(
            [sh.getitem(out, (*pre, slice(n - k, n))), sh.getitem(out, (*pre, slice(0, n - k)))],
            axis=ax,
        )
    return out


def rot90(x: Any, k: int = 1, axes: tuple[int, int] = (0, 1)) -> EagerTensor:
    """Rotate by 90 degrees ``k`` times in the plane ``axes`` (flips and a transpose)."""
    nd = _nd(x)
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
def _pad_width(pw: Any, nd: int) -> list[tuple[int, int]]:
    arr = np.broadcast_to(np.asarray(pw, dtype=np.int64).reshape(-1, 2) if np.ndim(pw) > 0
                          else np.full((1, 2), int(pw)), (nd, 2)) if nd else np.zeros((0, 2), int)
    return [(int(a), int(b)) for a, b in arr]


def pad(x: Any, pad_width: Any, mode: str = "constant", constant_values: Any = 0) -> EagerTensor:
    """``numpy.pad`` for modes ``constant`` (slice-pad into zeros, plus the constant), and
    ``edge``/``reflect``/``symmetric``/``wrap`` (a gather per padded axis; VJP scatter-adds)."""
    shape = shape_of(x)
    nd = len(shape)
    pw = _pad_width(pad_width, nd)
    if mode == "constant":
        out_shape = tuple(n + a + b for n, (a, b) in zip(shape, pw, strict=True))
        key = tuple(slice(a, a + n) for n, (a, _) in zip(shape, pw, strict=True))
        out = sh.slice_pad(x, key=key, shape=out_shape)
        cv = np.asarray(constant_values)
        if cv.ndim == 0 and float(cv) == 0.0:
            return out
        fill = np.zeros(out_shape, dtype=dtype_of(x))
        cvs = np.broadcast_to(cv, (nd, 2)) if cv.ndim else np.full((nd, 2), cv)
        for i, (a, b) in enumerate(pw):  # numpy's order: later axes overwrite corners
            lo = (slice(None),) * i + (slice(0, a),)
            hi = (slice(None),) * i + (slice(out_shape[i] - b, out_shape[i]),)
            fill[lo] = cvs[i][0]
            fill[hi] = cvs[i][1]
        inner = np.ones(out_shape, dtype=bool)
        inner[key] = False
        fill[~inner] = 0
        return ew.add(out, fill)
    if mode not in ("edge", "reflect", "symmetric", "wrap"):
        raise ArgumentError(f"pad: mode {mode!r} is not supported")
    out = x
    for i, (a, b) in enumerate(pw):
        if a == 0 and b == 0:
            continue
        idx = np.pad(np.arange(shape[i]), (a, b), mode=mode)  # type: ignore[call-overload]
        out = sh.gather(out, (slice(None),) * i + (idx,))
    return out


# -- splitting ---
def _split_points(n: int, sections: Any, name: str, exact: bool, what: str) -> list[int]:
    if isinstance(sections, int | np.integer):
        k = int(sections)
        if k <= 0:
            raise ArgumentError(
                f"{name}: argument {what!r} (the number of sections) must be positive, got {k}"
            )
        if exact and n % k:
            raise ArgumentError(f"{name}: array split does not result in an equal division "
                                f"({n} into {k}) (argument {what!r})")
        if k > builtins.max(n, _MAX_EMPTY_SECTIONS):
            raise ArgumentError(
                f"{name}: argument {what!r} asks for {k} sections of an axis of extent {n}; "
                f"more than {_MAX_EMPTY_SECTIONS} (or the extent) is refused"
            )
        q, r = divmod(n, k)
        pts, acc = [], 0
        for i in range(k - 1):
            acc += q + (1 if i < r else 0)
            pts.append(acc)
        return pts
    try:
        return [operator.index(s) for s in sections]
    except TypeError:
        raise ArgumentTypeError(
            f"{name}: argument {what!r} must be an int or a sequence of ints, got "
            f"{type(sections).__name__} {sections!r}"
        ) from None


_MAX_EMPTY_SECTIONS = 1 << 16


def _split(
    x: Any, sections: Any, axis: int, name: str, exact: bool, what: str = "indices_or_sections"
) -> list[EagerTensor]:
    shape = shape_of(x)
    ax = _axis(name, axis, len(shape))
    n = shape[ax]
    pts = _split_points(n, sections, name, exact, what)
    bounds = [0, *pts, n]
    pre = (slice(None),) * ax
    return [
        sh.getitem(x, (*pre, slice(builtins.min(lo, n), builtins.min(builtins.max(hi, lo), n))))
        for lo, hi in itertools.pairwise(bounds)
    ]


def split(x: Any, indices_or_sections: Any, axis: int = 0) -> list[EagerTensor]:
    """Split into equal sections or at indices: basic slices (aliases, no allocation)."""
    return _split(x, indices_or_sections, axis, "split", True)


def array_split(x: Any, indices_or_sections: Any, axis: int = 0) -> list[EagerTensor]:
    """Like :func:`split`, allowing unequal sections."""
    return _split(x, indices_or_sections, axis, "array_split", False)


def vsplit(x: Any, s: Any) -> list[EagerTensor]:
    """Split along axis 0."""
    return _split(x, s, 0, "vsplit", True, "s")


def hsplit(x: Any, s: Any) -> list[EagerTensor]:
    """Split along axis 1 (axis 0 for 1-D)."""
    return _split(x, s, 1 if _nd(x) > 1 else 0, "hsplit", True, "s")


def dsplit(x: Any, s: Any) -> list[EagerTensor]:
    """Split along axis 2."""
    return _split(x, s, 2, "dsplit", True, "s")


# -- at-least-nd and stacking ---
def atleast_1d(*xs: Any) -> Any:
    """View inputs with at least one axis (aliases)."""
    out = [x if _nd(x) >= 1 else sh.reshape(x, (1,)) for x in xs]
    return out[0] if len(out) == 1 else out


def atleast_2d(*xs: Any) -> Any:
    """View inputs with at least two axes (aliases)."""
    out = []
    for x in xs:
        s = shape_of(x)
        out.append(x if len(s) >= 2 else sh.reshape(x, (1,) * (2 - len(s)) + s))
    return out[0] if len(out) == 1 else out


def atleast_3d(*xs: Any) -> Any:
    """View inputs with at least three axes (numpy's placement: (n,) -> (1, n, 1))."""
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
    """Concatenate along axis 0 after :func:`atleast_2d`. One allocation."""
    return sh.concatenate([atleast_2d(x) for x in _seq(xs)], axis=0)


def hstack(xs: Sequence[Any]) -> EagerTensor:
    """Concatenate along axis 1 (axis 0 for 1-D values). One allocation."""
    xs = [atleast_1d(x) for x in _seq(xs)]
    return sh.concatenate(xs, axis=0 if _nd(xs[0]) == 1 else 1)


def dstack(xs: Sequence[Any]) -> EagerTensor:
    """Concatenate along axis 2 after :func:`atleast_3d`. One allocation."""
    return sh.concatenate([atleast_3d(x) for x in _seq(xs)], axis=2)


def column_stack(xs: Sequence[Any]) -> EagerTensor:
    """Stack 1-D values as columns (2-D values as they are). One allocation."""
    cols = []
    for x in _seq(xs):
        s = shape_of(x)
        cols.append(sh.reshape(x, (s[0], 1)) if len(s) == 1 else atleast_2d(x))
    return sh.concatenate(cols, axis=1)


def append(x: Any, values: Any, axis: int | None = None) -> EagerTensor:
    """``numpy.append``: concatenate (flattened when ``axis`` is ``None``)."""
    if axis is None:
        return sh.concatenate([ravel(x), ravel(values)], axis=0)
    return sh.concatenate([x, values], axis=axis)


# -- diagonals ---
def _diag_index(n: int, k: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    i = np.arange(n)
    return (i, i + k) if k >= 0 else (i - k, i)


def diagonal(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> EagerTensor:
    """``numpy.diagonal``: a gather (one allocation; VJP scatter-adds), the diagonal last."""
    shape = shape_of(x)
    nd = len(shape)
    a1, a2 = _axis("diagonal", axis1, nd, "axis1"), _axis("diagonal", axis2, nd, "axis2")
    if a1 == a2:
        raise ArgumentError("diagonal: arguments 'axis1' and 'axis2' must differ")
    rest = [i for i in range(nd) if i not in (a1, a2)]
    xt = sh.transpose(x, (*rest, a1, a2))
    n1, n2 = shape[a1], shape[a2]
    k = int(offset)
    n = builtins.max(0, builtins.min(n1, n2 - k) if k >= 0 else builtins.min(n1 + k, n2))
    r, c = _diag_index(n, k)
    return sh.gather(xt, (Ellipsis, r, c))


def trace(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> EagerTensor:
    """``numpy.trace``: the sum of :func:`diagonal`."""
    from .reduce import sum as rsum

    return rsum(diagonal(x, offset, axis1, axis2), axis=-1)


def diag(v: Any, k: int = 0) -> EagerTensor:
    """``numpy.diag``: a 1-D value becomes a 2-D matrix with it on diagonal ``k`` (a
    scatter into zeros); a 2-D value gives its ``k``-th diagonal (a gather)."""
    s = shape_of(v)
    if len(s) == 1:
        n = s[0] + builtins.abs(int(k))
        r, c = _diag_index(s[0], int(k))
        return sh.scatter_add(v, key=(r, c), shape=(n, n))
    if len(s) == 2:
        return diagonal(v, k)
    raise ArgumentError(f"diag: input must be 1-D or 2-D, got shape {s}")


def diagflat(v: Any, k: int = 0) -> EagerTensor:
    """``numpy.diagflat``: :func:`diag` of the flattened input."""
    return diag(ravel(v), k)


def _tri_mask(shape: tuple[int, ...], k: int, lower: bool) -> np.ndarray[Any, Any]:
    n, m = shape[-2], shape[-1]
    mask = np.tri(n, m, k, dtype=bool)
    return mask if lower else ~np.tri(n, m, k - 1, dtype=bool)


def tril(x: Any, k: int = 0) -> EagerTensor:
    """Lower triangle (a ``where`` with a constant mask). One allocation."""
    return ew.where(_tri_mask(shape_of(x), k, True), x, 0.0)


def triu(x: Any, k: int = 0) -> EagerTensor:
    """Upper triangle (a ``where`` with a constant mask). One allocation."""
    return ew.where(_tri_mask(shape_of(x), k, False), x, 0.0)


# -- constructors (constants) ---
def _fill_impl(v: Any, *, shape: tuple[int, ...], dtype: Any) -> Array:
    return np.full(shape, v, dtype=dtype)


FILL = nondifferentiable(defprimitive("fill", _fill_impl, 1))
EYE = nondifferentiable(
    defprimitive("eye", lambda v, *, n, m, k, dtype: np.eye(n, m, k, dtype=dtype), 1)
)


def _dt(x: Any, dtype: Any) -> Any:
    if dtype is not None:
        return np.dtype(getattr(dtype, "numpy", dtype))
    return dtype_of(x)


def full_like(x: Any, fill_value: Any, dtype: Any = None, shape: Any = None) -> EagerTensor:
    """A constant of ``x``'s shape and dtype filled with ``fill_value`` (never tracked).
    One allocation.  A refusal names the argument it is about."""
    try:
        s = shape_of(x) if shape is None else tuple(operator.index(n) for n in shape)
    except (TypeError, ValueError, TenferroError) as e:
        what = "x" if shape is None else "shape"
        raise ArgumentTypeError(f"full_like: argument {what!r}: {e}") from None
    try:
        dt = np.dtype(getattr(dtype, "numpy", dtype)) if dtype is not None else dtype_of(x)
    except (TypeError, ValueError, TenferroError) as e:
        what = "x" if dtype is None else "dtype"
        raise ArgumentTypeError(f"full_like: argument {what!r}: {e}") from None
    if not isinstance(fill_value, int | float | complex | np.number | np.bool_):
        raise ArgumentTypeError(
            f"full_like: argument 'fill_value' must be a scalar, got {type(fill_value).__name__}"
        )
    if fill_value == 0:
        return bind(FILL, 0.0, shape=s, dtype=dt)
    value = fill_value if isinstance(fill_value, complex | np.complexfloating) else float(
        fill_value
    )
    return bind(FILL, value, shape=s, dtype=dt)


def zeros_like(x: Any, dtype: Any = None, shape: Any = None) -> EagerTensor:
    """Zeros shaped like ``x`` (a constant). One allocation."""
    return full_like(x, 0, dtype, shape)


def ones_like(x: Any, dtype: Any = None, shape: Any = None) -> EagerTensor:
    """Ones shaped like ``x`` (a constant). One allocation."""
    return full_like(x, 1, dtype, shape)


def eye(n: int, m: int | None = None, k: int = 0, dtype: Any = None) -> EagerTensor:
    """Identity-like constant matrix. One allocation."""
    dt = np.dtype(np.float64) if dtype is None else np.dtype(getattr(dtype, "numpy", dtype))
    for what, v in (("n", n), ("m", m)):
        if isinstance(v, int | np.integer) and v < 0:
            raise ArgumentError(f"eye: argument {what!r} must be non-negative, got {v}")
    return bind(EYE, 0.0, n=int(n), m=int(n if m is None else m), k=int(k), dtype=dt)


def linspace(
    start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: Any = None
) -> EagerTensor:
    """``num`` evenly spaced values; differentiable in ``start`` and ``stop`` (JAX's):
    ``start + (stop - start) * t`` with constant ``t`` (one allocation each)."""
    num = int(num)
    if num < 0:
        raise ArgumentError(f"linspace: argument 'num' must be non-negative, got {num}")
    div = (num - 1) if endpoint else num
    frac = np.arange(num, dtype=np.float64) / div if div > 0 else np.zeros(num)
    dts = [dtype_of(v) for v in (start, stop) if not isinstance(v, int | float)]
    dt = np.dtype(getattr(dtype, "numpy", dtype)) if dtype is not None else (
        np.result_type(*dts) if dts else np.dtype(np.float64)
    )
    if dt.kind not in "fc":
        dt = np.dtype(np.float64)
    ss, es = shape_of(start), shape_of(stop)
    bshape = np.broadcast_shapes(ss, es)
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
    conditions are not differentiated)."""
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
