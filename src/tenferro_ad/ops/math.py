"""More elementwise math: trigonometric, hyperbolic, logarithmic, rounding, NaN-aware and
activation functions, with primal kernel, residuals, VJP and JVP side by side.

Where precision matters the value has its own numpy kernel (``tan`` is not ``sin/cos``,
``log2`` is not ``log/log 2``, ``logaddexp`` does not overflow) and one primitive; where a
composition is exactly as precise and as fast it is derived (``square = x*x``,
``relu = where(x > 0, x, 0)``, ``softplus = logaddexp(x, 0)``, ``silu = x*sigmoid(x)``).
Derivatives follow JAX, including the edge points: ``relu'(0) = 0``, ``fmax`` sends the
whole gradient to the argument it picked, ``logaddexp`` of two infinities, ``sinc``'s
derivatives at 0, and rounding functions have a zero derivative.  Holomorphic functions
(``tan``, ``sinh``, ``arcsin``...) accept complex values with JAX's convention.  Python
scalars in rules are weakly typed, so float32 stays float32.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from tenferro_storage.errors import shown

from .._core._dispatch import bind, bind1
from .._core._handle import EagerTensor
from .._core._primitive import Primitive, defpointwise, defprimitive, nondifferentiable
from .._traced._batch_rules import defbatch, elementwise, leading
from ..errors import ArgumentError, ArgumentTypeError
from . import elementwise as ew
from ._util import dtype_of, guard_module, stored_value_arg, weak
from .complex import complex as mkcomplex
from .complex import imag, is_complex, real
from .special import ERF, EXPIT

Array = Any

__all__ = [
    "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh", "cbrt", "ceil",
    "cosh", "deg2rad", "degrees", "elu", "exp2", "fix", "floor", "fmax", "fmin", "fmod",
    "gelu", "hypot", "isfinite", "isinf", "isnan", "leaky_relu", "log10", "log2",
    "log_sigmoid", "logaddexp", "logaddexp2", "logical_and", "logical_not", "logical_or",
    "logical_xor", "mod", "nan_to_num", "rad2deg", "radians", "reciprocal", "relu", "remainder",
    "rint", "round", "sigmoid", "silu", "sinc", "sinh", "softplus", "square", "swish", "tan",
    "trunc",
]

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


def _unary(
    name: str, kernel: Callable[..., Any], d: Callable[[Any, Array], Array], *, out: bool = False
) -> Primitive:
    """A unary primitive whose VJP and JVP both multiply by ``d(ops, x)`` (``d(ops, out)``
    with ``out=True``).  Holomorphic rules: no conjugation (JAX's convention).  Bool and
    integer inputs compute in JAX's floating type (bool -> float32, never numpy's float16).
    Its batching rule (elementwise) is registered here."""
    return defbatch(defpointwise(name, ew._float_only(kernel), 1, (d,), save_out=out),
                    leading(name))


def _sq(ops: Any, x: Array) -> Array:
    return ops.mul(x, x)


# -- trigonometric / hyperbolic ---
TAN = _unary("tan", np.tan, lambda ops, o: ops.add(1.0, _sq(ops, o)), out=True)
SINH: Primitive = _unary("sinh", np.sinh, lambda ops, x: ops.apply(COSH, x))
COSH: Primitive = _unary("cosh", np.cosh, lambda ops, x: ops.apply(SINH, x))
ARCSIN = _unary(
    "arcsin", np.arcsin, lambda ops, x: ops.div(1.0, ops.sqrt(ops.sub(1.0, _sq(ops, x))))
)
ARCCOS = _unary(
    "arccos", np.arccos, lambda ops, x: ops.div(-1.0, ops.sqrt(ops.sub(1.0, _sq(ops, x))))
)
ARCTAN = _unary("arctan", np.arctan, lambda ops, x: ops.div(1.0, ops.add(1.0, _sq(ops, x))))
ARCSINH = _unary(
    "arcsinh", np.arcsinh, lambda ops, x: ops.div(1.0, ops.sqrt(ops.add(_sq(ops, x), 1.0)))
)
ARCCOSH = _unary(  # JAX: 1/sqrt((x - 1)(x + 1)) (also its complex branch)
    "arccosh",
    np.arccosh,
    lambda ops, x: ops.div(1.0, ops.sqrt(ops.mul(ops.sub(x, 1.0), ops.add(x, 1.0)))),
)
ARCTANH = _unary("arctanh", np.arctanh, lambda ops, x: ops.div(1.0, ops.sub(1.0, _sq(ops, x))))


def _atan2_den(ops: Any, y: Array, x: Array) -> Array:
    return ops.add(_sq(ops, x), _sq(ops, y))


ARCTAN2 = defprimitive(
    "arctan2", np.arctan2, 2, broadcasts=True, save_in=(0, 1),
    vjp=(
        lambda ops, g, y, x: ops.div(ops.mul(g, x), _atan2_den(ops, y, x)),
        lambda ops, g, y, x: ops.neg(ops.div(ops.mul(g, y), _atan2_den(ops, y, x))),
    ),
    jvp=(
        lambda ops, t, y, x: ops.div(ops.mul(t, x), _atan2_den(ops, y, x)),
        lambda ops, t, y, x: ops.neg(ops.div(ops.mul(t, y), _atan2_den(ops, y, x))),
    ),
)


def _hypot_d(ops: Any, x: Array, out: Array) -> Array:
    # x / hypot; at the origin JAX's formulation (max/min with split ties) gives 1/2
    zero = ops.eq(out, 0.0)
    return ops.where(zero, 0.5, ops.div(x, ops.where(zero, 1.0, out)))


HYPOT = defpointwise(
    "hypot", np.hypot, 2,
    (lambda ops, x, y, out: _hypot_d(ops, x, out), lambda ops, x, y, out: _hypot_d(ops, y, out)),
    broadcasts=True, save_in=(0, 1), save_out=True,
)

# -- logarithms and exponentials in other bases ---
LOG2 = _unary("log2", np.log2, lambda ops, x: ops.div(1.0, ops.mul(x, _LN2)))
LOG10 = _unary("log10", np.log10, lambda ops, x: ops.div(1.0, ops.mul(x, _LN10)))
EXP2 = _unary("exp2", np.exp2, lambda ops, o: ops.mul(o, _LN2), out=True)
CBRT = _unary("cbrt", np.cbrt, lambda ops, o: ops.div(1.0, ops.mul(_sq(ops, o), 3.0)), out=True)


def _no_inf(ops: Any, x: Array) -> Array:
    # JAX's _replace_inf: only +inf becomes 0 (so -inf - -inf stays NaN, as in JAX)
    return ops.where(ops.eq(x, math.inf), 0.0, x)


def _lae_d(ops: Any, x: Array, out: Array, base2: bool) -> Array:
    e = ops.sub(_no_inf(ops, x), _no_inf(ops, out))
    return ops.apply(EXP2, e) if base2 else ops.exp(e)


ISNAN = nondifferentiable(defprimitive("isnan", np.isnan, 1))
ISINF = nondifferentiable(defprimitive("isinf", np.isinf, 1))
ISFINITE = nondifferentiable(defprimitive("isfinite", np.isfinite, 1))

LOGADDEXP = defpointwise(
    "logaddexp", np.logaddexp, 2,
    (
        lambda ops, x, y, out: _lae_d(ops, x, out, False),
        lambda ops, x, y, out: _lae_d(ops, y, out, False),
    ),
    broadcasts=True, save_in=(0, 1), save_out=True,
)
LOGADDEXP2 = defpointwise(
    "logaddexp2", np.logaddexp2, 2,
    (
        lambda ops, x, y, out: _lae_d(ops, x, out, True),
        lambda ops, x, y, out: _lae_d(ops, y, out, True),
    ),
    broadcasts=True, save_in=(0, 1), save_out=True,
)


# -- sinc: sin(pi x)/(pi x) with exact derivatives at 0 (JAX: 0 and -pi^2/3) ---
def _sinc_d_impl(x: Array) -> Array:
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        px = np.pi * x
        d = (np.cos(px) - np.sinc(x)) / x
    return np.where(x == 0, np.zeros((), d.dtype), d).astype(d.dtype, copy=False)


def _sinc_dd(ops: Any, x: Array) -> Array:
    # d/dx [(cos(pi x) - sinc x) / x] = (-pi sin(pi x) - 2 sinc'(x)) / x ; -pi^2/3 at 0
    zero = ops.eq(x, 0.0)
    safe = ops.where(zero, 1.0, x)
    num = ops.sub(ops.mul(ops.sin(ops.mul(x, math.pi)), -math.pi),
                  ops.mul(ops.apply(SINC_D, x), 2.0))
    return ops.where(zero, -(math.pi**2) / 3.0, ops.div(num, safe))


SINC_D: Primitive = _unary("sinc_derivative", _sinc_d_impl, _sinc_dd)
SINC = _unary("sinc", np.sinc, lambda ops, x: ops.apply(SINC_D, x))

# -- rounding (zero derivative, as in JAX) ---
FLOOR = nondifferentiable(defprimitive("floor", np.floor, 1))
CEIL = nondifferentiable(defprimitive("ceil", np.ceil, 1))
TRUNC = nondifferentiable(defprimitive("trunc", np.trunc, 1))
RINT = nondifferentiable(defprimitive("rint", np.rint, 1))
ROUND = nondifferentiable(defprimitive("round", lambda x, *, decimals: np.round(x, decimals), 1))

# -- modulo: d/dx = 1, d/dy = -floor(x/y) (mod) or -trunc(x/y) (fmod) ---
MOD = defprimitive(
    "mod", np.mod, 2, broadcasts=True, save_in=(0, 1),
    vjp=(
        lambda ops, g, x, y: g,
        lambda ops, g, x, y: ops.neg(ops.mul(g, ops.apply(FLOOR, ops.div(x, y)))),
    ),
    jvp=(
        lambda ops, t, x, y: t,
        lambda ops, t, x, y: ops.neg(ops.mul(t, ops.apply(FLOOR, ops.div(x, y)))),
    ),
)
FMOD = defprimitive(
    "fmod", np.fmod, 2, broadcasts=True, save_in=(0, 1),
    vjp=(
        lambda ops, g, x, y: g,
        lambda ops, g, x, y: ops.neg(ops.mul(g, ops.apply(TRUNC, ops.div(x, y)))),
    ),
    jvp=(
        lambda ops, t, x, y: t,
        lambda ops, t, x, y: ops.neg(ops.mul(t, ops.apply(TRUNC, ops.div(x, y)))),
    ),
)


# -- fmax / fmin: NaN-ignoring; the picked argument gets the whole gradient (JAX) ---
def _fmax_mask_impl(x: Array, y: Array, *, lt: bool) -> Array:
    with np.errstate(invalid="ignore"):
        return np.logical_or(np.less(x, y) if lt else np.greater(x, y), np.isnan(y))


FPICK = nondifferentiable(defprimitive("fmax_mask", _fmax_mask_impl, 2))


def _fpick(ops: Any, g: Array, x: Array, y: Array, lt: bool, first: bool) -> Array:
    m = ops.apply(FPICK, x, y, lt=lt)
    return ops.where(m, g, 0.0) if first else ops.where(m, 0.0, g)


FMAX = defprimitive(
    "fmax", np.fmax, 2, broadcasts=True, save_in=(0, 1),
    vjp=(
        lambda ops, g, x, y: _fpick(ops, g, x, y, False, True),
        lambda ops, g, x, y: _fpick(ops, g, x, y, False, False),
    ),
    jvp=(
        lambda ops, t, x, y: _fpick(ops, t, x, y, False, True),
        lambda ops, t, x, y: _fpick(ops, t, x, y, False, False),
    ),
)
FMIN = defprimitive(
    "fmin", np.fmin, 2, broadcasts=True, save_in=(0, 1),
    vjp=(
        lambda ops, g, x, y: _fpick(ops, g, x, y, True, True),
        lambda ops, g, x, y: _fpick(ops, g, x, y, True, False),
    ),
    jvp=(
        lambda ops, t, x, y: _fpick(ops, t, x, y, True, True),
        lambda ops, t, x, y: _fpick(ops, t, x, y, True, False),
    ),
)

# -- logical (non-differentiable) ---
LOGICAL_AND = nondifferentiable(defprimitive("logical_and", np.logical_and, 2))
LOGICAL_OR = nondifferentiable(defprimitive("logical_or", np.logical_or, 2))
LOGICAL_XOR = nondifferentiable(defprimitive("logical_xor", np.logical_xor, 2))
LOGICAL_NOT = nondifferentiable(defprimitive("logical_not", np.logical_not, 1))


# -- relu: max(x, 0) (NaN propagates), derivative 0 at 0 (JAX's custom rule) ---
def _relu_d(ops: Any, g: Any, x: Any) -> Any:
    """``g`` where ``x > 0``, else 0 (``elementwise.masked``)."""
    return ew.masked(ops, g, ops.gt(x, 0.0))


RELU = defprimitive(
    "relu",
    lambda x: np.maximum(x, np.zeros((), np.asarray(x).dtype)),
    1,
    save_in=(0,),
    vjp=(_relu_d,),
    jvp=(_relu_d,),
)


# -- public functions ---
def tan(x: Any) -> EagerTensor:
    """Tangent (its own kernel: precise near the poles). One allocation; retains the output.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(TAN, x)


def sinh(x: Any) -> EagerTensor:
    """Hyperbolic sine. One allocation; retains the input.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(SINH, x)


def cosh(x: Any) -> EagerTensor:
    """Hyperbolic cosine. One allocation; retains the input.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(COSH, x)


def arcsin(x: Any) -> EagerTensor:
    """Inverse sine. One allocation; retains the input (derivative ``inf`` at +-1).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(ARCSIN, x)


def arccos(x: Any) -> EagerTensor:
    """Inverse cosine. One allocation; retains the input.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(ARCCOS, x)


def arctan(x: Any) -> EagerTensor:
    """Inverse tangent. One allocation; retains the input.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(ARCTAN, x)


def arcsinh(x: Any) -> EagerTensor:
    """Inverse hyperbolic sine. One allocation; retains the input.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(ARCSINH, x)


def arccosh(x: Any) -> EagerTensor:
    """Inverse hyperbolic cosine. One allocation; retains the input.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(ARCCOSH, x)


def arctanh(x: Any) -> EagerTensor:
    """Inverse hyperbolic tangent. One allocation; retains the input.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(ARCTANH, x)


def arctan2(y: Any, x: Any) -> EagerTensor:
    """Quadrant-aware ``arctan(y / x)`` (broadcasting). One allocation; retains both inputs
    (the derivative at the origin is ``nan``, as in JAX).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    y, x = weak(y, x)
    return bind(ARCTAN2, y, x)


def hypot(x: Any, y: Any) -> EagerTensor:
    """``sqrt(x**2 + y**2)`` without overflow (broadcasting). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    x, y = weak(x, y)
    return bind(HYPOT, x, y)


def square(x: Any) -> EagerTensor:
    """``x * x`` (derived; the same rule as JAX's). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(ew.MUL, x, x)


def reciprocal(x: Any) -> EagerTensor:
    """``1 / x`` (derived). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(ew.DIV, 1.0, x)


def log2(x: Any) -> EagerTensor:
    """Base-2 logarithm (its own kernel: exact at powers of two). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(LOG2, x)


def log10(x: Any) -> EagerTensor:
    """Base-10 logarithm (its own kernel). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(LOG10, x)


def exp2(x: Any) -> EagerTensor:
    """``2 ** x``. One allocation; retains the output.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(EXP2, x)


def cbrt(x: Any) -> EagerTensor:
    """Real cube root. One allocation; retains the output.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(CBRT, x)


def logaddexp(x: Any, y: Any) -> EagerTensor:
    """``log(exp(x) + exp(y))`` without overflow; JAX's derivative at infinities.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    x, y = weak(x, y)
    return bind(LOGADDEXP, x, y)


def logaddexp2(x: Any, y: Any) -> EagerTensor:
    """``log2(2**x + 2**y)`` without overflow.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    x, y = weak(x, y)
    return bind(LOGADDEXP2, x, y)


def sinc(x: Any) -> EagerTensor:
    """``sin(pi x) / (pi x)`` (1 at 0) with exact first and second derivatives at 0.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(SINC, x)


def floor(x: Any) -> EagerTensor:
    """Round down (zero derivative). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(FLOOR, x)


def ceil(x: Any) -> EagerTensor:
    """Round up (zero derivative). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(CEIL, x)


def trunc(x: Any) -> EagerTensor:
    """Round toward zero (zero derivative). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(TRUNC, x)


fix = trunc


def rint(x: Any) -> EagerTensor:
    """Round half to even (zero derivative). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(RINT, x)


def round(x: Any, decimals: int = 0) -> EagerTensor:
    """Round half to even at ``decimals`` (zero derivative, as JAX). One allocation.
    ``decimals`` is an int (numpy's: a bool too); one numpy's C ``int`` cannot hold is
    refused (``ArgumentError``) before anything runs.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    stored_value_arg("round", "x", x)
    try:
        d = operator.index(decimals)
    except TypeError:
        raise ArgumentTypeError(
            f"round: argument 'decimals' must be an int, got {shown(decimals)}"
        ) from None
    if not -(2**31) <= d < 2**31:
        raise ArgumentError(
            f"round: argument 'decimals' {d} is outside the range numpy rounds to "
            f"[{-(2**31)}, {2**31 - 1}]"
        )
    return bind(ROUND, x, decimals=d)


def mod(x: Any, y: Any) -> EagerTensor:
    """Python-style remainder (the sign of ``y``); ``d/dy = -floor(x / y)``. The ``%``
    operator. One allocation; retains both inputs.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    x, y = weak(x, y)
    return bind(MOD, x, y)


remainder = mod


def fmod(x: Any, y: Any) -> EagerTensor:
    """C-style remainder (the sign of ``x``); ``d/dy = -trunc(x / y)``.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    x, y = weak(x, y)
    return bind(FMOD, x, y)


def fmax(x: Any, y: Any) -> EagerTensor:
    """NaN-ignoring maximum; the picked argument gets the gradient (``y`` on ties).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    x, y = weak(x, y)
    return bind(FMAX, x, y)


def fmin(x: Any, y: Any) -> EagerTensor:
    """NaN-ignoring minimum; the picked argument gets the gradient (``y`` on ties).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    x, y = weak(x, y)
    return bind(FMIN, x, y)


def isnan(x: Any) -> EagerTensor:
    """Boolean ``x != x`` (non-differentiable). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(ISNAN, x)


def isinf(x: Any) -> EagerTensor:
    """Boolean ``|x| == inf`` (non-differentiable). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(ISINF, x)


def isfinite(x: Any) -> EagerTensor:
    """Boolean: neither inf nor NaN (non-differentiable). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(ISFINITE, x)


def logical_and(x: Any, y: Any) -> EagerTensor:
    """Elementwise logical and (non-differentiable).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(LOGICAL_AND, x, y)


def logical_or(x: Any, y: Any) -> EagerTensor:
    """Elementwise logical or (non-differentiable).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(LOGICAL_OR, x, y)


def logical_xor(x: Any, y: Any) -> EagerTensor:
    """Elementwise logical xor (non-differentiable).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(LOGICAL_XOR, x, y)


def logical_not(x: Any) -> EagerTensor:
    """Elementwise logical not (non-differentiable).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(LOGICAL_NOT, x)


def _finfo(x: Any) -> Any:
    dt = dtype_of(x)
    return np.finfo(dt if dt.kind == "f" else (np.float32 if dt == np.complex64 else np.float64))


def nan_to_num(
    x: Any, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
    neginf: float | None = None,
) -> EagerTensor:
    """Replace NaN and infinities by finite numbers (derived: ``where``); gradient 1 at
    finite entries and 0 at replaced ones (as JAX). A few allocations.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    for what, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
        if v is not None and not isinstance(v, int | float | np.integer | np.floating):
            raise ArgumentTypeError(
                f"nan_to_num: argument {what!r} must be a real number, got {type(v).__name__}"
            )
    if is_complex(x):
        return mkcomplex(
            nan_to_num(real(x), nan=nan, posinf=posinf, neginf=neginf),
            nan_to_num(imag(x), nan=nan, posinf=posinf, neginf=neginf),
        )
    fi = _finfo(x)
    hi = fi.dtype.type(fi.max if posinf is None else posinf)  # typed scalars: no promotion
    lo = fi.dtype.type(fi.min if neginf is None else neginf)
    r = ew.where(isnan(x), fi.dtype.type(nan), x)
    r = ew.where(bind(ISINF, x), ew.where(ew.greater(x, 0.0), hi, lo), r)
    return r


def relu(x: Any) -> EagerTensor:
    """``max(x, 0)`` (NaN stays NaN) with ``relu'(0) = 0`` (JAX). One allocation; retains
    the input.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind1(RELU, x)


def leaky_relu(x: Any, negative_slope: float = 0.01) -> EagerTensor:
    """``x`` where ``x >= 0`` else ``negative_slope * x`` (JAX's). Derived.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return ew.where(ew.greater_equal(x, 0.0), x, ew.mul(x, negative_slope))


def elu(x: Any, alpha: float = 1.0) -> EagerTensor:
    """``x`` where ``x > 0`` else ``alpha * expm1(x)`` (JAX's, safe for large ``x``).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    pos = ew.greater(x, 0.0)
    return ew.where(pos, x, ew.mul(ew.expm1(ew.where(pos, 0.0, x)), alpha))


def sigmoid(x: Any) -> EagerTensor:
    """Logistic sigmoid (``scipy.special.expit``). One allocation; retains the output.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(EXPIT, x)


def softplus(x: Any) -> EagerTensor:
    """``log(1 + exp(x))`` = ``logaddexp(x, 0)`` (JAX's definition). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(LOGADDEXP, *weak(x, 0.0))


def log_sigmoid(x: Any) -> EagerTensor:
    """``log(sigmoid(x))`` = ``-softplus(-x)``, stable for large ``|x|``.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return ew.neg(softplus(ew.neg(x)))


def silu(x: Any) -> EagerTensor:
    """``x * sigmoid(x)`` (derived). Two allocations.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return ew.mul(x, sigmoid(x))


swish = silu


def gelu(x: Any, approximate: bool = True) -> EagerTensor:
    """Gaussian error linear unit, JAX's two forms: the tanh approximation (default) or the
    exact ``x * (1 + erf(x / sqrt 2)) / 2``. Derived.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    if approximate:
        c = math.sqrt(2.0 / math.pi)
        inner = ew.mul(ew.add(x, ew.mul(ew.mul(ew.mul(x, x), x), 0.044715)), c)
        return ew.mul(x, ew.mul(ew.add(ew.tanh(inner), 1.0), 0.5))
    return ew.mul(ew.mul(x, ew.add(bind(ERF, ew.mul(x, 1.0 / math.sqrt(2.0))), 1.0)), 0.5)


def deg2rad(x: Any) -> EagerTensor:
    """Degrees to radians (``x * pi/180``). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(ew.MUL, x, math.pi / 180.0)


def rad2deg(x: Any) -> EagerTensor:
    """Radians to degrees (``x * 180/pi``). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(ew.MUL, x, 180.0 / math.pi)


radians = deg2rad
degrees = rad2deg


# argument errors from numpy/scipy/the kernel name the op (the package's error classes)
guard_module(globals(), __all__)

# batching rules: elementwise (unary ones act on the batched value, binary ones broadcast)
defbatch(ISNAN, leading("isnan"))
defbatch(ISINF, leading("isinf"))
defbatch(ISFINITE, leading("isfinite"))
defbatch(FLOOR, leading("floor"))
defbatch(CEIL, leading("ceil"))
defbatch(TRUNC, leading("trunc"))
defbatch(RINT, leading("rint"))
defbatch(ROUND, leading("round"))
defbatch(LOGICAL_NOT, leading("logical_not"))
defbatch(RELU, leading("relu"))
defbatch(ARCTAN2, elementwise("arctan2"))
defbatch(HYPOT, elementwise("hypot"))
defbatch(LOGADDEXP, elementwise("logaddexp"))
defbatch(LOGADDEXP2, elementwise("logaddexp2"))
defbatch(MOD, elementwise("mod"))
defbatch(FMOD, elementwise("fmod"))
defbatch(FPICK, elementwise("fmax_mask"))
defbatch(FMAX, elementwise("fmax"))
defbatch(FMIN, elementwise("fmin"))
defbatch(LOGICAL_AND, elementwise("logical_and"))
defbatch(LOGICAL_OR, elementwise("logical_or"))
defbatch(LOGICAL_XOR, elementwise("logical_xor"))
