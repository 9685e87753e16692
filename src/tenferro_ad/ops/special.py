"""Special functions (``scipy.special`` kernels): primal kernel, residuals, VJP and JVP.

Each primitive runs scipy's kernel (one ``OPERATION_OUTPUT`` allocation; float32 stays
float32) and differentiates to any order: every derivative is itself written with
primitives of this family (``gammaln' = digamma``, ``digamma' = polygamma(1, .)``,
``polygamma(n, .)' = polygamma(n + 1, .)``, ``erfinv' = sqrt(pi)/2 exp(erfinv^2)``...).
Derivatives follow JAX at the edge points (``xlogy``'s ``d/dx`` is ``log y`` even where
``x == 0``).  The regularized incomplete gamma functions are differentiable in ``x`` only;
asking for the derivative in ``a`` raises :class:`~tenferro_ad.errors.MissingRuleError`
rather than returning a wrong zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.special as sps

from .._core._dispatch import bind
from .._core._handle import EagerTensor
from .._core._primitive import Primitive, defpointwise, defprimitive
from .._traced._batch_rules import defbatch, elementwise, leading
from ..errors import ArgumentError
from ._util import guard_module, weak

Array = Any

__all__ = [
    "betaln", "digamma", "erf", "erfc", "erfinv", "expit", "gammainc", "gammaincc", "gammaln",
    "log_ndtr", "logit", "ndtr", "ndtri", "polygamma", "xlog1py", "xlogy",
]

_SQRT_PI = math.sqrt(math.pi)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _dtype_of(*xs: Any) -> Any:
    dt = np.result_type(*xs)
    return dt if dt.kind in "fc" else np.dtype(np.float64)


def _keep(f: Callable[..., Any]) -> Callable[..., Array]:
    """Wrap a scipy kernel so the output keeps the inputs' floating dtype (fresh array)."""

    def impl(*xs: Any, **params: Any) -> Array:
        with np.errstate(all="ignore"):
            out = f(*xs)
        return np.asarray(out).astype(_dtype_of(*xs), copy=False)

    return impl


def _unary(name: str, kernel: Callable[..., Any], d: Callable[..., Array], *, out: bool = False
           ) -> Primitive:
    """A unary primitive with derivative factor ``d(ops, x_or_out)`` (VJP = JVP = mul); its
    batching rule (elementwise) is registered here."""
    return defbatch(defpointwise(name, _keep(kernel), 1, (d,), save_out=out), leading(name))


# -- gamma family ---
def _polygamma_impl(x: Array, *, n: int) -> Array:
    with np.errstate(all="ignore"):
        out = sps.polygamma(n, x)
    return np.asarray(out).astype(_dtype_of(x), copy=False)


POLYGAMMA: Primitive = defpointwise(
    "polygamma", _polygamma_impl, 1, (lambda ops, x, *, n: ops.apply(POLYGAMMA, x, n=n + 1),),
)
DIGAMMA = _unary("digamma", sps.digamma, lambda ops, x: ops.apply(POLYGAMMA, x, n=1))
GAMMALN = _unary("gammaln", sps.gammaln, lambda ops, x: ops.apply(DIGAMMA, x))


def _betaln_d(ops: Any, a: Array, b: Array) -> Array:
    return ops.sub(ops.apply(DIGAMMA, a), ops.apply(DIGAMMA, ops.add(a, b)))


BETALN = defpointwise(
    "betaln", _keep(sps.betaln), 2,
    (lambda ops, a, b: _betaln_d(ops, a, b), lambda ops, a, b: _betaln_d(ops, b, a)),
    broadcasts=True,
)


def _gammainc_dx(ops: Any, a: Array, x: Array) -> Array:
    # d/dx P(a, x) = x^(a-1) e^(-x) / Gamma(a), computed in log space
    logx = ops.log(x)
    # a scalar ``a`` is computed on in Python (weakly typed: float32 stays float32)
    if isinstance(a, int | float | np.generic):
        am1: Any = float(a) - 1.0
        lga: Any = math.lgamma(float(a))
    else:
        am1, lga = ops.sub(a, 1.0), ops.apply(GAMMALN, a)
    return ops.exp(ops.sub(ops.sub(ops.mul(am1, logx), x), lga))


GAMMAINC = defpointwise(
    "gammainc", _keep(sps.gammainc), 2, (None, _gammainc_dx), broadcasts=True
)
GAMMAINCC = defpointwise(  # g * (-d) is -(g * d) exactly (IEEE products are sign-symmetric)
    "gammaincc", _keep(sps.gammaincc), 2,
    (None, lambda ops, a, x: ops.neg(_gammainc_dx(ops, a, x))),
    broadcasts=True,
)

# -- error function family ---
ERF = _unary(
    "erf", sps.erf, lambda ops, x: ops.mul(ops.exp(ops.neg(ops.mul(x, x))), 2.0 / _SQRT_PI)
)
ERFC = _unary(
    "erfc", sps.erfc, lambda ops, x: ops.mul(ops.exp(ops.neg(ops.mul(x, x))), -2.0 / _SQRT_PI)
)
ERFINV = _unary(
    "erfinv", sps.erfinv, lambda ops, o: ops.mul(ops.exp(ops.mul(o, o)), _SQRT_PI / 2.0), out=True
)
NDTR = _unary(
    "ndtr", sps.ndtr, lambda ops, x: ops.div(ops.exp(ops.mul(ops.mul(x, x), -0.5)), _SQRT_2PI)
)
NDTRI = _unary(
    "ndtri", sps.ndtri, lambda ops, o: ops.mul(ops.exp(ops.mul(ops.mul(o, o), 0.5)), _SQRT_2PI),
    out=True,
)


def _log_ndtr_d(ops: Any, x: Array, out: Array) -> Array:
    # phi(x) / Phi(x) = exp(-x^2/2 - log sqrt(2 pi) - log Phi(x)): stable far in the left tail
    e = ops.sub(ops.sub(ops.mul(ops.mul(x, x), -0.5), _LOG_SQRT_2PI), out)
    return ops.exp(e)


LOG_NDTR = defpointwise(
    "log_ndtr", _keep(sps.log_ndtr), 1, (_log_ndtr_d,), save_in=(0,), save_out=True
)

# -- logistic ---
EXPIT = _unary("expit", sps.expit, lambda ops, o: ops.mul(o, ops.sub(1.0, o)), out=True)
LOGIT = _unary("logit", sps.logit, lambda ops, x: ops.div(1.0, ops.mul(x, ops.sub(1.0, x))))


# -- x log y ---
XLOGY = defprimitive(
    "xlogy", _keep(sps.xlogy), 2, broadcasts=True, save_in=(0, 1),
    vjp=(
        lambda ops, g, x, y: ops.mul(g, ops.log(y)),
        lambda ops, g, x, y: ops.div(ops.mul(g, x), y),
    ),
    jvp=(
        lambda ops, t, x, y: ops.mul(t, ops.log(y)),
        lambda ops, t, x, y: ops.div(ops.mul(t, x), y),
    ),
)
XLOG1PY = defprimitive(
    "xlog1py", _keep(sps.xlog1py), 2, broadcasts=True, save_in=(0, 1),
    vjp=(
        lambda ops, g, x, y: ops.mul(g, ops.log(ops.add(y, 1.0))),
        lambda ops, g, x, y: ops.div(ops.mul(g, x), ops.add(y, 1.0)),
    ),
    jvp=(
        lambda ops, t, x, y: ops.mul(t, ops.log(ops.add(y, 1.0))),
        lambda ops, t, x, y: ops.div(ops.mul(t, x), ops.add(y, 1.0)),
    ),
)


# -- public functions ---
def gammaln(x: Any) -> EagerTensor:
    """``log |Gamma(x)|``; derivative ``digamma``. One allocation; retains the input."""
    return bind(GAMMALN, x)


def digamma(x: Any) -> EagerTensor:
    """``psi(x) = d/dx log Gamma(x)``; derivative ``polygamma(1, x)``. One allocation."""
    return bind(DIGAMMA, x)


def polygamma(n: int, x: Any) -> EagerTensor:
    """``psi^(n)(x)`` for an integer order ``n >= 0`` (not differentiated). One allocation."""
    if isinstance(n, EagerTensor):
        n = int(n)
    if int(n) != n or n < 0:
        raise ArgumentError(f"polygamma: argument 'n' must be a non-negative integer, got {n!r}")
    return bind(POLYGAMMA, x, n=int(n))


def betaln(a: Any, b: Any) -> EagerTensor:
    """``log |B(a, b)|`` (scipy's kernel, no cancellation). One allocation."""
    a, b = weak(a, b)
    return bind(BETALN, a, b)


def gammainc(a: Any, x: Any) -> EagerTensor:
    """Regularized lower incomplete gamma ``P(a, x)``; differentiable in ``x`` only."""
    a, x = weak(a, x)
    return bind(GAMMAINC, a, x)


def gammaincc(a: Any, x: Any) -> EagerTensor:
    """Regularized upper incomplete gamma ``Q(a, x)``; differentiable in ``x`` only."""
    a, x = weak(a, x)
    return bind(GAMMAINCC, a, x)


def erf(x: Any) -> EagerTensor:
    """Error function. One allocation; retains the input."""
    return bind(ERF, x)


def erfc(x: Any) -> EagerTensor:
    """Complementary error function ``1 - erf(x)`` (scipy's kernel: no cancellation)."""
    return bind(ERFC, x)


def erfinv(x: Any) -> EagerTensor:
    """Inverse error function on ``(-1, 1)``. One allocation; retains the output."""
    return bind(ERFINV, x)


def ndtr(x: Any) -> EagerTensor:
    """Standard normal CDF. One allocation; retains the input."""
    return bind(NDTR, x)


def ndtri(p: Any) -> EagerTensor:
    """Inverse of :func:`ndtr`. One allocation; retains the output."""
    return bind(NDTRI, p)


def log_ndtr(x: Any) -> EagerTensor:
    """``log ndtr(x)``, accurate far in the left tail (derivative too)."""
    return bind(LOG_NDTR, x)


def expit(x: Any) -> EagerTensor:
    """Logistic sigmoid ``1 / (1 + exp(-x))``. One allocation; retains the output."""
    return bind(EXPIT, x)


def logit(p: Any) -> EagerTensor:
    """``log(p / (1 - p))``. One allocation; retains the input."""
    return bind(LOGIT, p)


def xlogy(x: Any, y: Any) -> EagerTensor:
    """``x * log(y)``, 0 where ``x == 0``; JAX's derivative (``log y`` in ``x``)."""
    x, y = weak(x, y)
    return bind(XLOGY, x, y)


def xlog1py(x: Any, y: Any) -> EagerTensor:
    """``x * log1p(y)``, 0 where ``x == 0``; JAX's derivative."""
    x, y = weak(x, y)
    return bind(XLOG1PY, x, y)


# argument errors from numpy/scipy/the kernel name the op (the package's error classes)
guard_module(globals(), __all__)

# batching rules: elementwise (unary ones act on the batched value, binary ones broadcast)
defbatch(POLYGAMMA, leading("polygamma"))
defbatch(LOG_NDTR, leading("log_ndtr"))
defbatch(BETALN, elementwise("betaln"))
defbatch(GAMMAINC, elementwise("gammainc"))
defbatch(GAMMAINCC, elementwise("gammaincc"))
defbatch(XLOGY, elementwise("xlogy"))
defbatch(XLOG1PY, elementwise("xlog1py"))
