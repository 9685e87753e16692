"""Elementwise primitives: primal kernel, residuals, VJP and JVP side by side.

Binary ops broadcast numpy-style (``broadcasts=True``: the core sums cotangents back to
each argument's shape).  A Python/numpy scalar argument is a parameter: no allocation,
no copy, no gradient.  Comparisons, ``sign`` and ``stop_gradient`` are
non-differentiable.

Dtypes follow JAX: rules keep the dtype of their arguments (Python scalars stay weakly
typed, never 0-d float64 constants); the float-only ops (``exp``, ``log``, ``sin``, ``div``,
...) compute bool and int32 inputs in float32 and int64 inputs in float64, as JAX does.
Edge points follow JAX too: ``abs'(0) = 1``; ``d/dy x**y`` is ``nan`` for ``x < 0`` and 0
at ``x = 0``; ``d/dx x**y`` is ``y * x**(y-1)`` everywhere (``nan`` for ``x**0`` at 0).
"""

from __future__ import annotations

import cmath
import math
import os
import sys
import warnings
from typing import Any, Final

import numpy as np

from tenferro_storage import dtype as resolve
from tenferro_storage.errors import DTypeError

from .._core._dispatch import bind, bind1
from .._core._handle import EagerTensor
from .._core._namespace import NUMPY_NS
from .._core._primitive import (
    NONDIFF,
    Zero,
    defbilinear,
    deflinear,
    defpointwise,
    defprimitive,
    nondifferentiable,
)
from .._core._tape import DONATED_REFS as _DONATED_REFS
from .._traced._batch_rules import defbatch, elementwise, leading
from ..errors import ArgumentError
from ._util import bind_op, op, value_arg

Array = Any

_PY_SCALARS = (int, float, complex)
_INEXACT_OF = {"b": np.float32, "i4": np.float32, "i8": np.float64}


def _inexact(a: Any) -> Any:
    """``a`` in the floating type JAX computes a float-only op in (bool, int32 -> float32,
    int64 -> float64); floating and complex values and Python scalars unchanged. O(1) for
    those; one conversion otherwise."""
    if isinstance(a, bool):  # a Python bool: float32, as JAX (numpy would pick float16)
        return np.float32(a)
    dt = getattr(a, "dtype", None)
    if dt is None or dt.kind in "fc":
        return a
    target = _INEXACT_OF.get("b" if dt.kind == "b" else dt.str[1:], np.float64)
    return np.asarray(a).astype(target)


def _float_only(f: Any) -> Any:
    def impl(*args: Any) -> Any:
        if len(args) == 1:  # the common unary case: no conversion for inexact values
            dt = getattr(args[0], "dtype", None)
            if dt.kind in "fc" if dt is not None else not isinstance(args[0], bool):
                return f(args[0])
        return f(*[_inexact(a) for a in args])

    impl.__name__ = getattr(f, "__name__", "impl")
    impl.inexact_kernel = f  # type: ignore[attr-defined]  # Primitive.fast: skip this frame
    return impl


def _div_impl(a: Any, b: Any) -> Any:
    if np.result_type(a, b).kind in "fc":
        return np.true_divide(a, b)
    return np.true_divide(_inexact(a), _inexact(b))

# -- add / sub / neg (linear) ---
ADD = defprimitive(
    "add",
    np.add,
    2,
    broadcasts=True,
    vjp=(lambda ops, g: g, lambda ops, g: g),
    jvp=(lambda ops, t: t, lambda ops, t: t),
)
defbatch(ADD, elementwise("add"))
SUB = defprimitive(
    "sub",
    np.subtract,
    2,
    broadcasts=True,
    vjp=(lambda ops, g: g, lambda ops, g: ops.neg(g)),
    jvp=(lambda ops, t: t, lambda ops, t: ops.neg(t)),
)
defbatch(SUB, elementwise("sub"))
NEG = deflinear(defprimitive("neg", np.negative, 1), lambda ops, g: ops.neg(g))
defbatch(NEG, leading("neg"))

# -- mul (bilinear) / div / pow ---
MUL = defbilinear(
    defprimitive("mul", np.multiply, 2, broadcasts=True),
    lambda ops, g, x, y: into_g(ops, "mul", g, y),
    lambda ops, g, x, y: into_g(ops, "mul", g, x),
)
defbatch(MUL, elementwise("mul"))
DIV = defprimitive(
    "div",
    _div_impl,
    2,
    broadcasts=True,
    save_in=(0, 1),
    vjp=(
        lambda ops, g, x, y: into_g(ops, "div", g, y),
        lambda ops, g, x, y: _div_dy(ops, g, x, y),
    ),
    jvp=(
        lambda ops, t, x, y: ops.div(t, y),
        lambda ops, t, x, y: _div_dy(ops, t, x, y),
    ),
)
defbatch(DIV, elementwise("div"))


def _div_dy(ops: Any, g: Array, x: Array, y: Array) -> Array:
    """``-(g x) / y^2``.  In the no-record backward the quotient and its negation are
    written over the fresh ``g x`` when that has the result's dtype (the same values, two
    allocations fewer; a GP step divides 300x300 matrices)."""
    gx = ops.mul(g, x)
    yy = ops.mul(y, y)
    if ops is NUMPY_NS and type(gx) is np.ndarray and np.result_type(gx, yy) == gx.dtype:
        np.divide(gx, yy, out=gx)
        return np.negative(gx, out=gx)
    return ops.neg(ops.div(gx, yy))


def _pow_dx(ops: Any, x: Array, y: Array, out: Array) -> Array:
    # JAX: y * x**(y - 1) (so d/dx x**0 at x = 0 is 0 * inf = nan, as JAX).  A Python-scalar
    # y stays a Python scalar (weakly typed): ``ops.sub(2.0, 1)`` would be a float64 numpy
    # scalar and turn a float32 gradient into float64.
    ym1 = y - 1 if isinstance(y, _PY_SCALARS) else ops.sub(y, 1)
    return ops.mul(y, ops.apply(POW, x, ym1))


def _log_or_zero(ops: Any, x: Array) -> Array:
    """``log(x)`` with ``log(0)`` replaced by 0 (JAX's ``_replace_zero``): ``nan`` for
    ``x < 0``, so ``d/dy (-2)**y`` is ``nan`` as in JAX."""
    if isinstance(x, _PY_SCALARS):  # stays a Python scalar: weakly typed, keeps g's dtype
        if x == 0:
            return 0
        if isinstance(x, complex):
            return cmath.log(x)
        return math.log(x) if x > 0 else math.nan
    return ops.log(ops.where(ops.eq(x, 0), 1, x))


def _pow_impl(x: Any, y: Any) -> Any:
    """``np.power`` with C99/XLA's values at ``x = -inf`` for non-integer ``y`` (numpy gives
    nan; C, XLA and JAX give ``+inf`` for ``y > 0`` and ``+0`` for ``y < 0``)."""
    try:
        out = np.power(x, y)
    except ValueError as e:  # integers to negative integer powers
        raise ArgumentError(f"pow: {e}; use a floating-point base") from None
    if np.result_type(x).kind == "f" and np.any(np.isneginf(x)):
        with np.errstate(invalid="ignore"):
            fix = np.isneginf(x) & np.isnan(out) & ~np.isnan(y)
        if np.any(fix):
            out = np.where(fix, np.where(np.greater(y, 0), np.inf, 0.0), out).astype(out.dtype)
    return out


POW = defpointwise(
    "pow",
    _pow_impl,
    2,
    (_pow_dx, lambda ops, x, y, out: ops.mul(out, _log_or_zero(ops, x))),
    broadcasts=True,
    save_in=(0, 1),
    save_out=True,
)
defbatch(POW, elementwise("pow"))

# -- unary transcendental ---
EXP = defprimitive(
    "exp",
    _float_only(np.exp),
    1,
    save_out=True,
    vjp=(lambda ops, g, out: into_g(ops, "mul", g, out),),
    jvp=(lambda ops, t, out: ops.mul(t, out),),
)
defbatch(EXP, leading("exp"))
LOG = defprimitive(
    "log",
    _float_only(np.log),
    1,
    save_in=(0,),
    vjp=(lambda ops, g, x: into_g(ops, "div", g, x),),
    jvp=(lambda ops, t, x: ops.div(t, x),),
)
defbatch(LOG, leading("log"))
LOG1P = defprimitive(
    "log1p",
    _float_only(np.log1p),
    1,
    save_in=(0,),
    vjp=(lambda ops, g, x: ops.div(g, ops.add(x, 1.0)),),
    jvp=(lambda ops, t, x: ops.div(t, ops.add(x, 1.0)),),
)
defbatch(LOG1P, leading("log1p"))
EXPM1 = defpointwise(
    "expm1", _float_only(np.expm1), 1, (lambda ops, out: ops.add(out, 1.0),), save_out=True
)
defbatch(EXPM1, leading("expm1"))


_IN_PLACE_MIN = 4096  # elements: below this a fresh buffer is cheaper than the checks


def _times(ops: Any, g: Array, fresh: Array) -> Array:
    """``g * fresh`` where ``fresh`` is a rule's own scratch: in the no-record backward the
    product is written over ``fresh`` when it is large and fits (one allocation fewer per
    rule; on 10^6-element values a fresh buffer costs as much as the arithmetic)."""
    if (
        type(fresh) is np.ndarray  # first: a small value is decided in two checks
        and fresh.size >= _IN_PLACE_MIN
        and ops is NUMPY_NS
        and type(g) is np.ndarray
        and g.shape == fresh.shape
        and g.dtype == fresh.dtype
        and fresh.flags.writeable
    ):
        return np.multiply(g, fresh, out=fresh)
    return ops.mul(g, fresh)


def into_g(ops: Any, op: str, g: Array, other: Any) -> Array:
    """``ops.mul(g, other)`` (``op="mul"``) or ``ops.div(g, other)`` (``"div"``) for a VJP
    rule that reads ``g`` no more after this call.

    In the no-record backward the result is written over ``g`` itself when the sweep
    donated it (``ops.donated``: the sweep reads it no more either), it is large, owns its
    writable memory, keeps its shape and dtype in the result (``other`` a Python float or
    int, or an array of ``g``'s shape and dtype), and nothing else holds it (by CPython's
    reference count: no other value's cotangent entry, no caller, no residual, no view).
    A residual ``other`` (``exp``'s output, ``mul``'s other argument, ``log``'s input)
    cannot be written over, so this saves the rule's only allocation. Otherwise a new
    array. O(size)."""
    if (
        ops is NUMPY_NS  # first: tangents, handles, tracers and other namespaces in two checks
        and ops.donated is g
        and type(g) is np.ndarray
        and g.size >= _IN_PLACE_MIN
        and g.base is None
        and g.flags.writeable
        and (
            (type(other) in _PY_REAL and g.dtype.kind in "fc")
            or (
                type(other) is np.ndarray
                and other.shape == g.shape
                and other.dtype == g.dtype
            )
        )
        and sys.getrefcount(g) <= _DONATED_REFS
    ):
        if op == "mul":
            return np.multiply(g, other, out=g)
        return np.true_divide(g, other, out=g)
    return ops.mul(g, other) if op == "mul" else ops.div(g, other)


_PY_REAL: Final = (float, int)


SIN = defprimitive(
    "sin",
    _float_only(np.sin),
    1,
    save_in=(0,),
    vjp=(lambda ops, g, x: _times(ops, g, ops.cos(x)),),
    jvp=(lambda ops, t, x: _times(ops, t, ops.cos(x)),),
)
defbatch(SIN, leading("sin"))
COS = defprimitive(
    "cos",
    _float_only(np.cos),
    1,
    save_in=(0,),
    vjp=(lambda ops, g, x: ops.neg(ops.mul(g, ops.sin(x))),),
    jvp=(lambda ops, t, x: ops.neg(ops.mul(t, ops.sin(x))),),
)
defbatch(COS, leading("cos"))


def _tanh_d(ops: Any, g: Array, out: Array) -> Array:
    if type(out) is np.ndarray and out.size >= _IN_PLACE_MIN and ops is NUMPY_NS:
        d = np.multiply(out, out)  # 1 - out^2 in one buffer (large values only, as _times)
        return _times(ops, g, np.subtract(1.0, d, out=d))
    return ops.mul(g, ops.sub(1.0, ops.mul(out, out)))


TANH = defprimitive(
    "tanh", _float_only(np.tanh), 1, save_out=True, vjp=(_tanh_d,), jvp=(_tanh_d,)
)
defbatch(TANH, leading("tanh"))
SQRT = defprimitive(
    "sqrt",
    _float_only(np.sqrt),
    1,
    save_out=True,
    vjp=(lambda ops, g, out: ops.div(g, ops.mul(out, 2.0)),),
    jvp=(lambda ops, t, out: ops.div(t, ops.mul(out, 2.0)),),
)
defbatch(SQRT, leading("sqrt"))
ABS = defpointwise("abs", np.abs, 1, (lambda ops, x: ops.sign(x),))
defbatch(ABS, leading("abs"))
SIGN = nondifferentiable(defprimitive("sign", np.sign, 1))
defbatch(SIGN, leading("sign"))


# -- maximum / minimum (ties split the gradient evenly, as JAX does) ---
def masked(ops: Any, g: Array, keep: Array) -> Array:
    """``g`` where ``keep`` (a boolean mask), else 0: the cotangent through a mask (relu,
    maximum/minimum without ties).  In the no-record backward with a finite ``g``, ``g``
    times the mask: the where's values (0 * inf would be nan; a sum of squares that
    overflows only takes the where), and np.where over a random mask is ~10x slower.
    The mask is cast to ``g``'s dtype first and multiplied in place: numpy's mixed
    float-times-bool loop casts in buffered chunks and costs ~1.4x more. O(size)."""
    if ops is NUMPY_NS and np.isfinite(np.vdot(g, g)):
        if type(keep) is not np.ndarray or keep.shape != np.shape(g):  # (rank 0, broadcast)
            return np.multiply(g, keep)
        out = keep.astype(g.dtype)
        return np.multiply(out, g, out=out)
    return ops.where(keep, g, 0.0)


def _pick(ops: Any, g: Array, x: Array, y: Array) -> Array:
    if ops is NUMPY_NS and not np.equal(x, y).any():  # no ties: the mask of the larger
        return masked(ops, g, np.greater(x, y))
    half = ops.mul(g, 0.5)
    return ops.where(ops.gt(x, y), g, ops.where(ops.eq(x, y), half, 0.0))


MAXIMUM = defprimitive(
    "maximum",
    np.maximum,
    2,
    broadcasts=True,
    save_in=(0, 1),
    vjp=(
        lambda ops, g, x, y: _pick(ops, g, x, y),
        lambda ops, g, x, y: _pick(ops, g, y, x),
    ),
    jvp=(
        lambda ops, t, x, y: _pick(ops, t, x, y),
        lambda ops, t, x, y: _pick(ops, t, y, x),
    ),
)
defbatch(MAXIMUM, elementwise("maximum"))
MINIMUM = defprimitive(
    "minimum",
    np.minimum,
    2,
    broadcasts=True,
    save_in=(0, 1),
    vjp=(
        lambda ops, g, x, y: _pick(ops, g, y, x),
        lambda ops, g, x, y: _pick(ops, g, x, y),
    ),
    jvp=(
        lambda ops, t, x, y: _pick(ops, t, y, x),
        lambda ops, t, x, y: _pick(ops, t, x, y),
    ),
)
defbatch(MINIMUM, elementwise("minimum"))

# -- where (the condition is never differentiated) ---
def _where(c: Any, x: Any, y: Any) -> Any:
    """``np.where(c, x, y)``.  For ``where(mask, g, 0)`` -- what a cotangent through a mask
    becomes in a traced graph (``masked``: relu, maximum) -- with a finite float ``g`` of the
    mask's shape: ``g`` times the mask cast to ``g``'s dtype, the eager backward's form (the
    same values, a dropped entry being a signed zero; np.where over a random mask is ~10x
    slower).  O(size)."""
    if (
        type(y) in _PY_REAL
        and y == 0
        and type(x) is np.ndarray
        and type(c) is np.ndarray
        and c.dtype == np.bool_
        and x.dtype.kind == "f"
        and c.shape == x.shape
        and np.isfinite(np.vdot(x, x))
    ):
        out = c.astype(x.dtype)
        return np.multiply(out, x, out=out)
    return np.where(c, x, y)


WHERE = defprimitive(
    "where",
    _where,
    3,
    broadcasts=True,
    save_in=(0,),
    vjp=(
        NONDIFF,
        lambda ops, g, c: ops.where(c, g, 0.0),
        lambda ops, g, c: ops.where(c, 0.0, g),
    ),
    jvp=(
        NONDIFF,
        lambda ops, t, c: ops.where(c, t, 0.0),
        lambda ops, t, c: ops.where(c, 0.0, t),
    ),
)
defbatch(WHERE, elementwise("where"))

# -- comparisons (non-differentiable) ---
LT = nondifferentiable(defprimitive("lt", np.less, 2))
defbatch(LT, elementwise("lt"))
LE = nondifferentiable(defprimitive("le", np.less_equal, 2))
defbatch(LE, elementwise("le"))
GT = nondifferentiable(defprimitive("gt", np.greater, 2))
defbatch(GT, elementwise("gt"))
GE = nondifferentiable(defprimitive("ge", np.greater_equal, 2))
defbatch(GE, elementwise("ge"))
EQ = nondifferentiable(defprimitive("eq", np.equal, 2))
defbatch(EQ, elementwise("eq"))
NE = nondifferentiable(defprimitive("ne", np.not_equal, 2))
defbatch(NE, elementwise("ne"))


# -- astype / stop_gradient ---
def _astype_impl(a: Array, *, dtype: Any, src: Any) -> Array:
    arr = np.asarray(a)
    if arr.dtype.kind == "c" and np.dtype(dtype).kind != "c":
        arr = arr.real  # complex -> real keeps the real part (JAX), without numpy's warning
    return arr.astype(dtype)


def _astype_rule(ops: Any, g: Array, *, dtype: Any, src: Any) -> Array:
    if np.dtype(src).kind not in "fc":
        return Zero((), src)
    return ops.astype(g, src)


ASTYPE = defprimitive(
    "astype",
    _astype_impl,
    1,
    vjp=(_astype_rule,),
    jvp=(lambda ops, t, *, dtype, src: ops.astype(t, dtype),),
)
defbatch(ASTYPE, leading("astype"))
SAME = defprimitive(  # the value itself: a metadata alias (no allocation, no copy)
    "same",
    lambda a: np.asarray(a).view(),
    1,
    alias=True,
    vjp=(lambda ops, g: g,),
    jvp=(lambda ops, t: t,),
)
STOP_GRADIENT = nondifferentiable(
    defprimitive("stop_gradient", lambda a: np.asarray(a).view(), 1, alias=True)
)
defbatch(STOP_GRADIENT, leading("stop_gradient"))


# -- public functions ---
add = bind_op(
    "add", ADD, 2,
    """``x + y`` (broadcasting). One ``OPERATION_OUTPUT`` allocation; no copy.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


sub = bind_op(
    "sub", SUB, 2,
    """``x - y`` (broadcasting). One allocation; no copy.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


mul = bind_op(
    "mul", MUL, 2,
    """``x * y`` (broadcasting). One allocation; the tape retains both inputs when tracked.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


div = bind_op(
    "div", DIV, 2,
    """``x / y`` (broadcasting). One allocation; retains both inputs when tracked.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


neg = bind_op(
    "neg", NEG, 1,
    """``-x``. One allocation; retains nothing.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


pow = bind_op(
    "pow", POW, 2,
    """``x ** y`` (broadcasting). One allocation; retains ``x``, ``y`` and the output.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


exp = bind_op(
    "exp", EXP, 1,
    """``e**x``. One allocation; retains the output.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


log = bind_op(
    "log", LOG, 1,
    """Natural log. One allocation; retains the input.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


log1p = bind_op(
    "log1p", LOG1P, 1,
    """``log(1 + x)``. One allocation; retains the input.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


expm1 = bind_op(
    "expm1", EXPM1, 1,
    """``exp(x) - 1``. One allocation; retains the output.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


sin = bind_op(
    "sin", SIN, 1,
    """Sine. One allocation; retains the input.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


cos = bind_op(
    "cos", COS, 1,
    """Cosine. One allocation; retains the input.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


tanh = bind_op(
    "tanh", TANH, 1,
    """Hyperbolic tangent. One allocation; retains the output.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


sqrt = bind_op(
    "sqrt", SQRT, 1,
    """Square root. One allocation; retains the output.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


abs = bind_op(
    "abs", ABS, 1,
    """Absolute value. One allocation; retains the input.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


sign = bind_op(
    "sign", SIGN, 1,
    """Sign (non-differentiable: zero gradient). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


maximum = bind_op(
    "maximum", MAXIMUM, 2,
    """Elementwise maximum; ties split the gradient evenly. One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


minimum = bind_op(
    "minimum", MINIMUM, 2,
    """Elementwise minimum; ties split the gradient evenly. One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


@op("where")
def where(cond: Any, x: Any, y: Any) -> EagerTensor:
    """``cond ? x : y`` (broadcasting; ``cond`` is not differentiated). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(WHERE, cond, x, y)


@op("clip")
def clip(x: Any, lo: Any, hi: Any) -> EagerTensor:
    """``minimum(maximum(x, lo), hi)`` (derived; the same gradient JAX's clip has).  A
    bound that is ``None`` is not applied (numpy's); with both ``None`` the value comes back
    as a fresh alias.  The three arguments are checked first (O(1) metadata reads; shapes
    are compared only when they differ), so a refused call names ``'x'``, ``'lo'`` or
    ``'hi'`` and records nothing.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    sx = value_arg("clip", "x", x, imported=True)[0]
    shapes = [("x", sx)]
    for nm, b in (("lo", lo), ("hi", hi)):
        if b is not None:
            sb = value_arg("clip", nm, b, imported=True)[0]
            if sb and sb != sx:
                shapes.append((nm, sb))
    if len(shapes) > 1:
        _clip_broadcast(shapes)
    out = x
    if lo is not None:
        out = maximum(out, lo)
    if hi is not None:
        out = minimum(out, hi)
    return out if out is not x else bind(SAME, x)


def _clip_broadcast(shapes: list[tuple[str, tuple[int, ...]]]) -> None:
    """Raise naming the first of ``clip``'s arguments whose shape does not broadcast with
    the ones before it. O(rank) per argument."""
    got = shapes[0][1]
    for i, (_, s) in enumerate(shapes[1:], 1):
        try:
            got = tuple(np.broadcast_shapes(got, s))
        except ValueError:
            names = [repr(n) for n, _ in shapes[: i + 1]]
            raise ArgumentError(
                f"clip: arguments {', '.join(names[:-1])} and {names[-1]} do not broadcast: "
                f"shapes {', '.join(str(t) for _, t in shapes[: i + 1])}"
            ) from None


less = bind_op(
    "less", LT, 2,
    """``x < y`` as a boolean constant (non-differentiable).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


less_equal = bind_op(
    "less_equal", LE, 2,
    """``x <= y`` (non-differentiable).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


greater = bind_op(
    "greater", GT, 2,
    """``x > y`` (non-differentiable).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


greater_equal = bind_op(
    "greater_equal", GE, 2,
    """``x >= y`` (non-differentiable).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


equal = bind_op(
    "equal", EQ, 2,
    """``x == y`` (non-differentiable).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


not_equal = bind_op(
    "not_equal", NE, 2,
    """``x != y`` (non-differentiable).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)


@op("astype")
def astype(x: Any, dtype: Any) -> EagerTensor:
    """Convert the dtype (a new allocation; the VJP converts back). Integer sources get no
    gradient.  To the same dtype: the value itself, as a metadata alias (no allocation, no
    copy).  Complex to real keeps the real part and warns (``ComplexWarning``), as numpy
    and JAX do.

    Cost: allocates unless an alias; no copy; no sync; no dispatch; O(n), O(1) as an alias.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return convert(x, dtype, warn=True)


def convert(x: Any, dtype: Any, warn: bool = False) -> EagerTensor:
    """:func:`astype` without its complex-to-real warning unless ``warn``: what derivative
    rules call (a real input's cotangent is the real part of a complex one, by design)."""
    src = x._r("astype").a.dtype if isinstance(x, EagerTensor) else _src_dtype(x)
    if src is None:
        src = value_arg("astype", "x", x, imported=True)[1]
    target = _target_dtype(dtype)
    if np.dtype(target) == src:
        return bind1(SAME, x)
    if warn and src.kind == "c" and target.kind != "c":  # numpy's and JAX's warning
        warnings.warn(
            f"astype: casting {src} to {target} discards the imaginary part (take "
            "tenferro_ad.real(x) first to say so)", np.exceptions.ComplexWarning,
            stacklevel=_user_level(),
        )
    return bind(ASTYPE, x, dtype=target, src=src)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _user_level() -> int:
    """The ``stacklevel`` of the first frame outside tenferro_ad (the user's call), however
    many wrappers a public op has (only on the warning path)."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def _src_dtype(x: Any) -> np.dtype[Any] | None:
    """The dtype of a numpy array or owner read in O(1); ``None`` for anything else (then
    checked by ``value_arg``, which names the argument)."""
    if type(x) is np.ndarray:
        same: np.dtype[Any] = x.dtype
        return same
    if isinstance(x, type):
        return None
    nd = getattr(getattr(x, "dtype", None), "numpy", None)  # a storage owner's DType
    return nd if isinstance(nd, np.dtype) else None


def _target_dtype(dtype: Any) -> np.dtype[Any]:
    """Any spelling of a supported dtype (``"float32"``, ``np.float32``, ``float``,
    ``np.dtype("f4")``, a storage ``DType``) as a numpy dtype; ``DTypeError`` otherwise."""
    try:
        return resolve(dtype).numpy
    except DTypeError as e:
        raise DTypeError(f"astype: argument 'dtype': {e}") from None


stop_gradient = bind_op(
    "stop_gradient", STOP_GRADIENT, 1,
    """The same value with no gradient: a metadata-only alias (no allocation, no copy).

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError.""",
    __name__,
)

defbatch(SAME, leading("same"))
