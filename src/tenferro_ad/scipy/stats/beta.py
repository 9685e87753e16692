"""Beta distribution (``jax.scipy.stats.beta``): ``logpdf``/``pdf`` (derived from ``xlogy``,
``xlog1py`` and ``betaln``; ``-inf`` outside ``[0, 1]``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ops import elementwise as ew
from ...ops import math as m
from ...ops import special as sp
from ._promote import promote

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, a: Any, b: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``xlogy(a-1, y) + xlog1py(b-1, -y) - betaln(a, b) - log(scale)`` (JAX's)."""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    y = ew.div(ew.sub(x, loc), scale)
    lin = ew.add(sp.xlogy(ew.sub(a, 1.0), y), sp.xlog1py(ew.sub(b, 1.0), ew.neg(y)))
    norm = ew.add(ew.log(scale), sp.betaln(a, b))
    outside = m.logical_or(ew.greater(y, 1.0), ew.less(y, 0.0))
    return ew.where(outside, -np.inf, ew.sub(lin, norm))


def pdf(x: Any, a: Any, b: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``exp(logpdf)``."""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    return ew.exp(logpdf(x, a, b, loc, scale))
