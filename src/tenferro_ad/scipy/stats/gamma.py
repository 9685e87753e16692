"""Gamma distribution (``jax.scipy.stats.gamma``): ``logpdf``/``pdf``/``cdf``/``logcdf``/
``sf`` (derived; ``cdf`` through ``gammainc``, differentiable in ``x``, ``loc``, ``scale``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ops import elementwise as ew
from ...ops import math as m
from ...ops import special as sp
from ._promote import promote

__all__ = ["cdf", "logcdf", "logpdf", "pdf", "sf"]


def logpdf(x: Any, a: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``xlogy(a - 1, y) - y - gammaln(a) - log(scale)`` with ``y = (x - loc)/scale``;
    ``-inf`` where ``y < 0`` (JAX's)."""
    x, a, loc, scale = promote(x, a, loc, scale)
    y = ew.div(ew.sub(x, loc), scale)
    lin = ew.sub(sp.xlogy(ew.sub(a, 1.0), y), y)
    shape_terms = ew.add(sp.gammaln(a), ew.log(scale))
    return ew.where(ew.less(y, 0.0), -np.inf, ew.sub(lin, shape_terms))


def pdf(x: Any, a: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``exp(logpdf)``."""
    x, a, loc, scale = promote(x, a, loc, scale)
    return ew.exp(logpdf(x, a, loc, scale))


def cdf(x: Any, a: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``gammainc(a, max(y, 0))``."""
    x, a, loc, scale = promote(x, a, loc, scale)
    y = ew.div(ew.sub(x, loc), scale)
    return sp.gammainc(a, m.relu(y))


def logcdf(x: Any, a: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``log cdf``."""
    x, a, loc, scale = promote(x, a, loc, scale)
    return ew.log(cdf(x, a, loc, scale))


def sf(x: Any, a: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``gammaincc(a, max(y, 0))``."""
    x, a, loc, scale = promote(x, a, loc, scale)
    y = ew.div(ew.sub(x, loc), scale)
    return sp.gammaincc(a, m.relu(y))
