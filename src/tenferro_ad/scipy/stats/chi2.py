"""Chi-squared distribution (``jax.scipy.stats.chi2``): ``logpdf``/``pdf``/``cdf``/``sf``
(derived: a gamma with shape ``df/2`` and scale ``2``)."""

from __future__ import annotations

from typing import Any

from ...ops import elementwise as ew
from . import gamma as _gamma
from ._promote import promote

__all__ = ["cdf", "logcdf", "logpdf", "pdf", "sf"]


def logpdf(x: Any, df: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``gamma.logpdf(x, df/2, loc, 2 scale)``."""
    x, df, loc, scale = promote(x, df, loc, scale)
    return _gamma.logpdf(x, ew.mul(df, 0.5), loc, ew.mul(scale, 2.0))


def pdf(x: Any, df: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``exp(logpdf)``."""
    x, df, loc, scale = promote(x, df, loc, scale)
    return ew.exp(logpdf(x, df, loc, scale))


def cdf(x: Any, df: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``gammainc(df/2, y/2)``."""
    x, df, loc, scale = promote(x, df, loc, scale)
    return _gamma.cdf(x, ew.mul(df, 0.5), loc, ew.mul(scale, 2.0))


def logcdf(x: Any, df: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``log cdf``."""
    x, df, loc, scale = promote(x, df, loc, scale)
    return ew.log(cdf(x, df, loc, scale))


def sf(x: Any, df: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``gammaincc(df/2, y/2)``."""
    x, df, loc, scale = promote(x, df, loc, scale)
    return _gamma.sf(x, ew.mul(df, 0.5), loc, ew.mul(scale, 2.0))
