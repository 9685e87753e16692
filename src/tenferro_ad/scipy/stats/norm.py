"""Normal distribution (``jax.scipy.stats.norm``): derived from ``log_ndtr``/``ndtr``/
``ndtri`` and elementwise ops; every function broadcasts its arguments."""

from __future__ import annotations

import math
from typing import Any

from ...ops import elementwise as ew
from ...ops import special as sp
from ._promote import promote

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _z(x: Any, loc: Any, scale: Any) -> Any:
    return ew.div(ew.sub(x, loc), scale)


def logpdf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``log N(x; loc, scale^2)``. Derived (a few allocations)."""
    x, loc, scale = promote(x, loc, scale)
    z = _z(x, loc, scale)
    return ew.sub(ew.sub(ew.mul(ew.mul(z, z), -0.5), ew.log(scale)),
                  _LOG_SQRT_2PI)


def pdf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``exp(logpdf)``."""
    x, loc, scale = promote(x, loc, scale)
    return ew.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``ndtr((x - loc) / scale)``."""
    x, loc, scale = promote(x, loc, scale)
    return sp.ndtr(_z(x, loc, scale))


def logcdf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``log_ndtr((x - loc) / scale)`` (accurate in the left tail)."""
    x, loc, scale = promote(x, loc, scale)
    return sp.log_ndtr(_z(x, loc, scale))


def sf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """Survival function ``1 - cdf``, computed as ``ndtr(-z)`` (no cancellation)."""
    x, loc, scale = promote(x, loc, scale)
    return sp.ndtr(ew.neg(_z(x, loc, scale)))


def logsf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``log sf`` as ``log_ndtr(-z)``."""
    x, loc, scale = promote(x, loc, scale)
    return sp.log_ndtr(ew.neg(_z(x, loc, scale)))


def ppf(q: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """Quantile function ``loc + scale * ndtri(q)``."""
    q, loc, scale = promote(q, loc, scale)
    return ew.add(ew.mul(sp.ndtri(q), scale), loc)


def isf(q: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """Inverse survival function ``ppf(1 - q)`` as ``loc - scale * ndtri(q)``."""
    q, loc, scale = promote(q, loc, scale)
    return ew.sub(loc, ew.mul(sp.ndtri(q), scale))
