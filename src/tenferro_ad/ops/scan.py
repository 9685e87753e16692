"""Statistics, scans, sorting and norms.

Primitives: ``cumsum`` (linear; its transpose is the reversed cumulative sum),
``cumprod`` (rules exact at zeros: associative scans of products, no division),
and the non-differentiable index producers ``argsort``, ``argpartition``, ``argmax``,
``argmin``.  Everything else is derived from existing primitives at no loss of speed or
precision: ``sort``/``partition``/``take_along_axis`` are a gather by the (stable)
argsort indices, so their VJP is a scatter-add as in JAX; ``var``/``std`` center first
(two-pass, like numpy); ``diff`` is a difference of two slices; ``norm`` follows
``numpy.linalg.norm``'s ``ord`` table; ``logsumexp`` is JAX's (``b=``, ``return_sign``).
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from .._core._dispatch import bind
from .._core._handle import EagerTensor
from .._core._primitive import Primitive, deflinear, defprimitive, nondifferentiable
from .._core._state import no_grad
from .._traced._batch_rules import defbatch, flat_index, leading
from .._traced._trace import Tracer
from ..errors import ArgumentError, ArgumentTypeError, IndexOutOfBoundsError
from . import elementwise as ew
from . import reduce as rd
from . import shape as sh
from ._along import TAKE_ALONG
from ._util import axes as _axes
from ._util import axis as _axis
from ._util import dtype_of, guard_module, shape_of, value_arg
from .complex import conj, is_complex, real
from .manip import flip, full_like
from .math import isfinite, isnan

Array = Any

__all__ = [
    "all", "any", "argmax", "argmin", "argpartition", "argsort", "average", "cumprod", "cumsum",
    "diff", "logsumexp", "median", "nanmean", "nansum", "partition", "sort", "std",
    "take_along_axis", "var",
]


# -- cumsum (linear) ---
def _cumsum_impl(x: Array, *, axis: int, reverse: bool) -> Array:
    x = np.asarray(x)
    if reverse:
        return np.flip(np.cumsum(np.flip(x, axis), axis=axis), axis).copy()
    return np.cumsum(x, axis=axis)


CUMSUM: Primitive = deflinear(
    defprimitive("cumsum", _cumsum_impl, 1),
    lambda ops, g, *, axis, reverse: ops.apply(CUMSUM, g, axis=axis, reverse=not reverse),
)


# -- cumprod ---
# Both rules are exact at zeros (no division by the input, as JAX's): with ``P`` the
# exclusive cumulative product (``out`` shifted by one, 1 first),
#   jvp:  dout_j = sum_{i<=j} P_i t_i prod_{i<k<=j} x_k  (h_j = P_j t_j + x_j h_{j-1})
#   vjp:  dx_i  = P_i sum_{j>=i} g_j prod_{i<k<=j} x_k  (s_i = g_i + x_{i+1} s_{i+1})
# Each first-order linear recurrence is an associative scan (Hillis-Steele): ceil(log2 n)
# rounds of shifted products and sums, written with the rule namespace's ops, so the
# rules are differentiable again (hessians of cumprod are exact at zeros too).
def _shift(ops: Any, v: Array, axis: int, n: int, d: int, reverse: bool) -> Array:
    """``v`` moved by ``d`` along ``axis`` (towards higher indices, or lower when
    ``reverse``), zeros shifted in."""
    pre = (builtins.slice(None),) * axis
    src, dst = builtins.slice(0, n - d), builtins.slice(d, n)
    if reverse:
        src, dst = dst, src
    return ops.slice_pad(ops.gather(v, key=(*pre, src)), key=(*pre, dst), shape=tuple(v.shape))


def _linear_scan(ops: Any, a: Array, b: Array, axis: int, reverse: bool) -> Array:
    """``h`` with ``h_i = b_i + a_i h_{i-1}`` (``h_{i+1}`` when ``reverse``), ``h`` zero
    outside. O(n log n) elementwise work in ceil(log2 n) rounds, no division."""
    n = int(b.shape[axis])
    d = 1
    while d < n:
        b = ops.add(b, ops.mul(a, _shift(ops, b, axis, n, d, reverse)))
        d *= 2
        if d < n:  # (an entry ``i < d`` of ``a`` is never read again: its ``b`` shift is 0)
            a = ops.mul(a, _shift(ops, a, axis, n, d // 2, reverse))
    return b


def _exclusive(ops: Any, out: Array, v: Array, axis: int) -> Array:
    """``P * v`` where ``P`` is the exclusive cumulative product (``out`` shifted by one
    along ``axis``, 1 at index 0)."""
    n = int(v.shape[axis])
    first = (builtins.slice(None),) * axis + (builtins.slice(0, 1),)
    head = ops.slice_pad(ops.gather(v, key=first), key=first, shape=tuple(v.shape))
    return ops.add(ops.mul(_shift(ops, out, axis, n, 1, False), v), head)


def _cumprod_vjp(ops: Any, g: Array, x: Array, out: Array, *, axis: int) -> Array:
    n = int(x.shape[axis])
    if n <= 1:
        return g if n == 0 else _exclusive(ops, out, g, axis)
    s = _linear_scan(ops, _shift(ops, x, axis, n, 1, True), g, axis, True)
    return _exclusive(ops, out, s, axis)


def _cumprod_jvp(ops: Any, t: Array, x: Array, out: Array, *, axis: int) -> Array:
    n = int(x.shape[axis])
    if n <= 1:
        return t if n == 0 else _exclusive(ops, out, t, axis)
    return _linear_scan(ops, x, _exclusive(ops, out, t, axis), axis, False)


CUMPROD = defprimitive(
    "cumprod",
    lambda x, *, axis: np.cumprod(x, axis=axis),
    1,
    save_in=(0,),
    save_out=True,
    vjp=(_cumprod_vjp,),
    jvp=(_cumprod_jvp,),
)

# -- index producers (non-differentiable) ---
def _argsort_impl(x: Array, axis: int, descending: bool) -> Array:
    x = np.asarray(x)
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    # stable descending order (JAX's): sort the negated keys stably
    n = x.shape[axis]
    idx = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return np.flip(n - 1 - idx, axis).copy()


ARGSORT = nondifferentiable(
    defprimitive(
        "argsort", lambda x, *, axis, descending: _argsort_impl(x, axis, descending), 1
    )
)
ARGPARTITION = nondifferentiable(
    defprimitive(
        "argpartition", lambda x, *, kth, axis: np.argpartition(x, kth, axis=axis), 1
    )
)
ARGMAX = nondifferentiable(
    defprimitive(
        "argmax", lambda x, *, axis, keepdims: np.argmax(x, axis=axis, keepdims=keepdims), 1
    )
)
ARGMIN = nondifferentiable(
    defprimitive(
        "argmin", lambda x, *, axis, keepdims: np.argmin(x, axis=axis, keepdims=keepdims), 1
    )
)


def _index_array(x: Any, name: str) -> np.ndarray[Any, Any]:
    if not isinstance(x, EagerTensor | np.ndarray | list | tuple | int | np.integer):
        x = ew.stop_gradient(x)  # an owner or view: one copy, read under a borrow
    if isinstance(x, EagerTensor):
        return np.array(x._r(name).a)  # integer indices: host metadata for the gather key
    return np.asarray(x)


def _kth(kth: Any, n: int) -> Any:
    """``argpartition``'s ``kth`` checked as numpy does (an int or a non-empty sequence of
    ints, each in ``[-n, n)`` when the axis is not empty), naming the argument. O(len)."""
    items = kth if isinstance(kth, list | tuple) else [kth]
    if isinstance(kth, np.ndarray) and kth.ndim <= 1 and kth.dtype.kind in "iu":
        items = [int(k) for k in kth.reshape(-1)]
    if not items:
        raise ArgumentTypeError("argpartition: argument 'kth' is empty; give an int or ints")
    for k in items:
        if isinstance(k, bool | np.bool_) or not isinstance(k, int | np.integer):
            raise ArgumentTypeError(
                f"argpartition: argument 'kth' must be an int or a sequence of ints, got "
                f"{type(k).__name__}"
            )
        if n and not -n <= int(k) < n:
            raise ArgumentError(
                f"argpartition: arguments 'x' and 'kth' do not fit: kth {int(k)} is out of "
                f"bounds for the partitioned axis of 'x' ({n} entries)"
            )
    return kth


def _flat(x: Any) -> Any:
    return sh.reshape(x, (-1,))


# -- public functions ---
def cumsum(x: Any, axis: int | None = None) -> EagerTensor:
    """Cumulative sum along ``axis`` (``None``: of the flattened value). One allocation;
    linear (retains nothing); the VJP is the reversed cumulative sum.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    if axis is None:
        x, axis = _flat(x), 0
    ax = _axis("cumsum", axis, len(shape_of(x)))
    return bind(CUMSUM, x, axis=ax, reverse=False)


def cumprod(x: Any, axis: int | None = None) -> EagerTensor:
    """Cumulative product along ``axis`` (``None``: flattened). One allocation; retains the
    input and output; the derivative assumes nonzero inputs (as ``prod``).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    if axis is None:
        x, axis = _flat(x), 0
    ax = _axis("cumprod", axis, len(shape_of(x)))
    return bind(CUMPROD, x, axis=ax)


def argsort(x: Any, axis: int | None = -1, descending: bool = False) -> EagerTensor:
    """Indices that sort ``x`` stably along ``axis`` (``None``: flattened); int64,
    non-differentiable. One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n log n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    if axis is None:
        x, axis = _flat(x), 0
    ax = _axis("argsort", axis, len(shape_of(x)))
    return bind(ARGSORT, x, axis=ax, descending=bool(descending))


def argmax(x: Any, axis: int | None = None, keepdims: bool = False) -> EagerTensor:
    """Index of the first maximum (non-differentiable, int64). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    ax = None if axis is None else _axis("argmax", axis, len(shape_of(x)))
    return bind(ARGMAX, x, axis=ax, keepdims=keepdims)


def argmin(x: Any, axis: int | None = None, keepdims: bool = False) -> EagerTensor:
    """Index of the first minimum (non-differentiable, int64). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    ax = None if axis is None else _axis("argmin", axis, len(shape_of(x)))
    return bind(ARGMIN, x, axis=ax, keepdims=keepdims)


def argpartition(x: Any, kth: Any, axis: int | None = -1) -> EagerTensor:
    """``numpy.argpartition`` indices (non-differentiable). One allocation.  ``x``,
    ``kth`` and ``axis`` are checked first (an error names the argument).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n log n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    shape = value_arg("argpartition", "x", x, imported=True)[0]
    if axis is None:
        _kth(kth, _count(shape, tuple(range(len(shape)))))
        x, axis = _flat(x), 0
        shape = (_count(shape, tuple(range(len(shape)))),)
    ax = _axis("argpartition", axis, len(shape))
    _kth(kth, shape[ax])
    return bind(ARGPARTITION, x, kth=kth, axis=ax)


def take_along_axis(x: Any, indices: Any, axis: int | None) -> EagerTensor:
    """``numpy.take_along_axis``: a gather (one allocation); VJP scatter-adds.  ``x``,
    ``indices`` (integers, one dim per axis of ``x``, in range along ``axis``, broadcasting
    with ``x`` elsewhere) and ``axis`` are checked first; an error names the argument.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    op = "take_along_axis"
    shape = value_arg(op, "x", x, imported=True)[0]
    value_arg(op, "indices", indices)
    if axis is not None:
        ax = _axis(op, axis, len(shape))
    else:
        shape, ax = (_count(shape, tuple(range(len(shape)))),), 0
    if isinstance(indices, Tracer):  # traced indices: no value to check or key by
        return _take_traced(x, indices, shape, ax, axis is None)
    idx = _index_array(indices, op)
    if idx.dtype.kind not in "iu":
        raise ArgumentTypeError(
            f"{op}: argument 'indices' must hold integers, got dtype {idx.dtype}"
        )
    if idx.ndim != len(shape):
        if axis is None:
            raise ArgumentError(
                f"{op}: arguments 'indices' and 'axis' do not fit: with axis=None 'x' is "
                f"flattened, so 'indices' must be 1-D, got {idx.ndim} dims"
            )
        raise ArgumentError(
            f"{op}: arguments 'x' and 'indices' do not fit: 'indices' must have as many dims "
            f"as 'x' ({len(shape)}), got {idx.ndim}"
        )
    for i, n in enumerate(shape):
        if i != ax and idx.shape[i] != n and 1 not in (n, idx.shape[i]):
            raise ArgumentError(
                f"{op}: arguments 'x' and 'indices' do not broadcast: axis {i} has {n} entries "
                f"in 'x' and {idx.shape[i]} in 'indices'"
            )
    n_ax = shape[ax]
    if idx.size and (int(idx.min()) < -n_ax or int(idx.max()) >= n_ax):
        raise IndexOutOfBoundsError(
            f"{op}: arguments 'x' and 'indices' do not fit: 'indices' holds values from "
            f"{int(idx.min())} to {int(idx.max())}, out of range for axis {ax} of 'x' "
            f"({n_ax} entries)"
        )
    if axis is None:
        x = _flat(x)
    key: list[Any] = []
    for i, n in enumerate(shape):
        if i == ax:
            key.append(idx)
        else:
            sh_i = [1] * len(shape)
            sh_i[i] = n
            key.append(np.arange(n).reshape(sh_i))
    return sh.gather(x, tuple(key))


def _take_traced(
    x: Any, idx: Tracer, shape: tuple[int, ...], ax: int, flat: bool
) -> EagerTensor:
    """``take_along_axis`` by traced indices: the ``take_along`` primitive (metadata checks
    only; an out-of-range index raises when the program runs)."""
    op = "take_along_axis"
    if idx.dtype.kind not in "iu":
        raise ArgumentTypeError(
            f"{op}: argument 'indices' must hold integers, got dtype {idx.dtype}"
        )
    if idx.ndim != len(shape):
        raise ArgumentError(
            f"{op}: arguments 'x' and 'indices' do not fit: 'indices' must have as many dims "
            f"as 'x' ({len(shape)}{', flattened' if flat else ''}), got {idx.ndim}"
        )
    return bind(TAKE_ALONG, _flat(x) if flat else x, idx, axis=ax)


def sort(x: Any, axis: int | None = -1, descending: bool = False) -> EagerTensor:
    """Sorted copy along ``axis`` (``None``: flattened): a gather by the stable argsort, so
    the gradient routes each cotangent back to its source element (JAX's). One sort, one
    gather allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n log n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    if axis is None:
        x, axis = _flat(x), 0
    else:  # checked here, so a refusal is worded for sort, not for the argsort inside
        _axis("sort", axis, len(shape_of(x)))
    with no_grad():
        idx = argsort(x, axis=axis)
        if descending:  # JAX's descending sort is the reversed ascending one (ties too)

            idx = flip(idx, axis)
    return take_along_axis(x, idx, axis)


def partition(x: Any, kth: int, axis: int = -1) -> EagerTensor:
    """``numpy.partition``: element ``kth`` in sorted position, smaller before, larger after
    (order within each side unspecified). A gather by ``argpartition``.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n log n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    if axis is not None:  # checked here: worded for partition, not argpartition
        _axis("partition", axis, len(shape_of(x)))
    with no_grad():
        idx = argpartition(x, kth, axis=axis)
    return take_along_axis(x, idx, axis)


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def _abs2(x: Any) -> Any:
    if is_complex(x):
        return real(ew.mul(x, conj(x)))
    return ew.mul(x, x)


def var(x: Any, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> EagerTensor:
    """Variance ``sum(|x - mean|^2) / (n - ddof)`` (two-pass; real for complex input).
    A few allocations (derived).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    shape = shape_of(x)
    ax = _axes("var", axis, len(shape))
    n = _count(shape, ax)
    c = ew.sub(x, rd.mean(x, axis=ax, keepdims=True))
    s = rd.sum(_abs2(c), axis=ax, keepdims=keepdims)
    return ew.div(s, float(builtins.max(n - ddof, 0)))


def std(x: Any, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> EagerTensor:
    """Standard deviation ``sqrt(var)`` (derived; the derivative at zero spread is inf,
    as in JAX).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    _axes("std", axis, len(shape_of(x)))  # worded for std, not for the var inside
    return ew.sqrt(var(x, axis=axis, ddof=ddof, keepdims=keepdims))


def diff(
    x: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None
) -> EagerTensor:
    """``numpy.diff``: the ``n``-th discrete difference along ``axis`` (derived from two
    slices and a subtraction per order; ``prepend``/``append`` are concatenated first).
    ``x``, ``n`` and ``prepend``/``append`` (a scalar, or the shape of ``x`` off ``axis``)
    are checked before anything is computed; a refusal names the argument.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    shape = value_arg("diff", "x", x, imported=True)[0]
    if isinstance(n, bool | np.bool_) or not isinstance(n, int | np.integer):
        raise ArgumentTypeError(f"diff: argument 'n' must be an int, got {type(n).__name__}")
    ax = _axis("diff", axis, len(shape))
    if n < 0:
        raise ArgumentError(f"diff: argument 'n' must be non-negative, got {n}")
    parts = []
    for extra, first, nm in ((prepend, True, "prepend"), (append, False, "append")):
        if extra is None:
            continue
        es = value_arg("diff", nm, extra, imported=True)[0]
        if len(es) == 0:
            want = list(shape)
            want[ax] = 1
            extra = (
                np.broadcast_to(np.asarray(extra, dtype=dtype_of(x)), tuple(want)).copy()
                if isinstance(extra, np.ndarray | np.generic | int | float | complex)
                else sh.broadcast_to(extra, tuple(want))
            )
        elif len(es) != len(shape) or builtins.any(
            a != b for i, (a, b) in enumerate(zip(es, shape, strict=True)) if i != ax
        ):
            raise ArgumentError(
                f"diff: arguments 'x' and {nm!r} do not fit: {nm!r} has shape {es}, 'x' has "
                f"{shape}; they must agree on every axis but {ax} (or {nm!r} be a scalar)"
            )
        parts.append((first, extra))
    if parts:
        xs = [e for f, e in parts if f] + [x] + [e for f, e in parts if not f]
        x = sh.concatenate(xs, axis=ax)
    out: EagerTensor = x
    for _ in range(builtins.min(n, shape_of(x)[ax] + 1)):  # past the extent: stays empty
        m = shape_of(out)[ax]
        lo = (slice(None),) * ax + (slice(1, m),)
        hi = (slice(None),) * ax + (slice(0, m - 1),)
        out = ew.sub(sh.getitem(out, lo), sh.getitem(out, hi))
    if n == 0:
        out = sh.getitem(out, (Ellipsis,))
    return out



def _shown(v: Any) -> str:
    """``repr`` of an int, ``None`` or a tuple/list of ints; the type's name otherwise (no
    memory address in a message). O(len)."""
    ok = (int, np.integer, type(None))
    if isinstance(v, ok) or (
        isinstance(v, tuple | list) and builtins.all(isinstance(i, ok) for i in v)
    ):
        return repr(v)
    return type(v).__name__



def _real_dtype(x: Any) -> Any:
    dt = dtype_of(x)
    if dt.kind == "c":
        return np.float32 if dt == np.complex64 else np.float64
    return dt if dt.kind == "f" else np.float64



def logsumexp(
    a: Any, axis: Any = None, b: Any = None, keepdims: bool = False, return_sign: bool = False
) -> Any:
    """``log(sum(b * exp(a)))`` over ``axis``, stable (JAX's ``logsumexp``): shifted by the
    stop-gradient max; with ``b``, entries where ``b == 0`` are skipped; a negative sum gives
    NaN unless ``return_sign=True``, which returns ``(log|sum|, sign)``. Derived.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    shape = value_arg("logsumexp", "a", a, imported=True)[0]
    if b is not None:
        sb = value_arg("logsumexp", "b", b, imported=True)[0]
        try:
            shape = tuple(np.broadcast_shapes(shape, sb))
        except ValueError:
            raise ArgumentError(
                f"logsumexp: arguments 'a' and 'b' do not broadcast: shapes {shape} and {sb}"
            ) from None
    ax = _axes("logsumexp", axis, len(shape))
    if b is not None:
        a, b = _promote_pair(a, b)
        a = ew.where(ew.not_equal(b, 0), a, -np.inf)
    with no_grad():
        m = rd.max(a, axis=ax, keepdims=True)
        m = ew.stop_gradient(ew.where(_isfinite(m), m, 0.0))
    e = ew.exp(ew.sub(a, m))
    if b is not None:
        e = ew.mul(e, b)
    s = rd.sum(e, axis=ax, keepdims=True)
    with no_grad():
        sign = ew.sign(s)
    cplx = is_complex(s)
    if return_sign or not cplx:
        s = ew.abs(s)
    out = ew.add(ew.log(s), m)
    if not keepdims:
        keep = tuple(n for i, n in enumerate(shape) if i not in ax)
        out = sh.reshape(out, keep)
        sign = sh.reshape(sign, keep)
    if return_sign:
        return out, sign
    if b is not None and not cplx:
        out = ew.where(ew.less(sign, 0), np.nan, out)
    return out


def _promote_pair(a: Any, b: Any) -> tuple[Any, Any]:
    """JAX's ``promote_args``: both to their common dtype, through ``astype`` for handles
    (whose VJP casts the cotangent back to the argument's own dtype)."""
    if isinstance(b, int | float):
        return a, b
    da, db = dtype_of(a), dtype_of(b)
    dt = np.result_type(da, db)
    host: tuple[type, ...] = (np.ndarray, np.generic, list, tuple, int, float, complex)
    if da != dt:
        a = np.asarray(a, dtype=dt) if isinstance(a, host) else ew.astype(a, dt)
    if db != dt:
        b = np.asarray(b, dtype=dt) if isinstance(b, host) else ew.astype(b, dt)
    return a, b


def _isfinite(x: Any) -> Any:
    return isfinite(x)


ANY = nondifferentiable(
    defprimitive("any", lambda x, *, axis, keepdims: np.any(x, axis=axis, keepdims=keepdims), 1)
)
ALL = nondifferentiable(
    defprimitive("all", lambda x, *, axis, keepdims: np.all(x, axis=axis, keepdims=keepdims), 1)
)


def any(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Whether any entry is true (non-differentiable, bool). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    ax = None if axis is None else _axes("any", axis, len(shape_of(x)))
    return bind(ANY, x, axis=ax, keepdims=keepdims)


def all(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Whether every entry is true (non-differentiable, bool). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    ax = None if axis is None else _axes("all", axis, len(shape_of(x)))
    return bind(ALL, x, axis=ax, keepdims=keepdims)


def nansum(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Sum treating NaN as 0 (a ``where`` then ``sum``; NaN entries get a zero gradient).
    ``axis`` is checked before anything is computed or recorded.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    _axes("nansum", axis, len(shape_of(x)))
    return rd.sum(ew.where(isnan(x), 0.0, x), axis=axis, keepdims=keepdims)


def nanmean(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Mean over the non-NaN entries (derived).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    _axes("nanmean", axis, len(shape_of(x)))  # before anything is computed
    with no_grad():
        n = rd.sum(ew.astype(ew.equal(isnan(x), False), _real_dtype(x)), axis=axis,
                   keepdims=keepdims)
    return ew.div(nansum(x, axis=axis, keepdims=keepdims), n)


def average(
    x: Any, axis: Any = None, weights: Any = None, returned: bool = False,
    keepdims: bool = False,
) -> Any:
    """``numpy.average``: ``sum(w * x) / sum(w)`` (differentiable in ``x`` and ``w``);
    1-D weights apply along a single ``axis``. ``returned=True`` also gives ``sum(w)``.
    ``x`` and ``weights`` are checked first; an error names the argument(s).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    xs = value_arg("average", "x", x, imported=True)[0]
    if weights is not None:
        value_arg("average", "weights", weights, imported=True)
    _axes("average", axis, len(xs))  # before anything is computed, worded for average
    if weights is None:
        out = rd.mean(x, axis=axis, keepdims=keepdims)
        if returned:
            shape = shape_of(x)
            n = _count(shape, _axes("average", axis, len(shape)))

            return out, full_like(out, float(n))
        return out
    shape = shape_of(x)
    ws = shape_of(weights)
    w = weights
    if ws != shape:
        if axis is None or len(ws) != 1 or isinstance(axis, tuple | list):
            raise ArgumentError(
                f"average: arguments 'x', 'weights' and 'axis' do not fit: 'weights' of shape "
                f"{ws} is not the shape of 'x' {shape}, and 1-D weights need a single 'axis' "
                f"(got axis={_shown(axis)})"
            )
        ax = _axis("average", axis, len(shape))
        if ws[0] != shape[ax]:
            raise ArgumentError(
                f"average: arguments 'x' and 'weights' do not fit: 'weights' has length "
                f"{ws[0]}, axis {ax} of 'x' has extent {shape[ax]}"
            )
        want = [1] * len(shape)
        want[ax] = ws[0]
        w = (
            np.reshape(np.asarray(weights), want)
            if isinstance(weights, np.ndarray | list | tuple)
            else sh.reshape(weights, tuple(want))
        )
    wb = (
        np.broadcast_to(np.asarray(w), shape).copy()
        if isinstance(w, np.ndarray | list | tuple | int | float | complex | np.generic)
        else sh.broadcast_to(w, shape)
    )
    wsum = rd.sum(wb, axis=axis, keepdims=keepdims)
    out = ew.div(rd.sum(ew.mul(x, w), axis=axis, keepdims=keepdims), wsum)
    return (out, wsum) if returned else out


def median(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """``numpy.median`` (derived: sort, then the middle entry or the mean of the two middle
    entries; the gradient goes to those entries, as in JAX).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n log n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    shape = shape_of(x)
    if axis is None:
        out = median(_flat(x), axis=0)
        return sh.reshape(out, (1,) * len(shape)) if keepdims else out
    if isinstance(axis, tuple | list):
        raise ArgumentError(
            "median: argument 'axis': a tuple is not supported; pass one axis or None"
        )
    ax = _axis("median", axis, len(shape))
    n = shape[ax]
    if n == 0:
        raise ArgumentError(f"median: argument 'x' is empty along axis {ax}")
    srt = sort(x, axis=ax)
    pre = (slice(None),) * ax
    lo, hi = (n - 1) // 2, n // 2
    out = rd.mean(sh.getitem(srt, (*pre, slice(lo, hi + 1))), axis=ax, keepdims=keepdims)
    return out


# argument errors from numpy/scipy/the kernel name the op (the package's error classes)
guard_module(globals(), __all__)

# batching rules: the axis parameters move past the batch axis (``None``: every other axis)
defbatch(CUMSUM, leading("cumsum", shift=("axis",)))
defbatch(CUMPROD, leading("cumprod", shift=("axis",)))
defbatch(ARGSORT, leading("argsort", shift=("axis",)))
defbatch(ARGPARTITION, leading("argpartition", shift=("axis",)))
defbatch(ANY, leading("any", shift=("axis",)))
defbatch(ALL, leading("all", shift=("axis",)))
defbatch(ARGMAX, flat_index("argmax"))
defbatch(ARGMIN, flat_index("argmin"))
