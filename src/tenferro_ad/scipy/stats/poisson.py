"""Poisson distribution (``jax.scipy.stats.poisson``): ``logpmf``/``pmf``/``cdf``
(derived; differentiable in ``mu``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ops import elementwise as ew
from ...ops import math as m
from ...ops import special as sp
from ._promote import promote

__all__ = ["cdf", "logpmf", "pmf"]


def logpmf(k: Any, mu: Any, loc: Any = 0.0) -> Any:
    """``xlogy(k, mu) - gammaln(k + 1) - mu``; ``-inf`` for negative or non-integer ``k``."""
    k, mu, loc = promote(k, mu, loc)
    x = ew.sub(k, loc)
    lp = ew.sub(ew.sub(sp.xlogy(x, mu), sp.gammaln(ew.add(x, 1.0))), mu)
    bad = m.logical_or(ew.less(x, 0.0), ew.not_equal(x, m.round(x)))
    return ew.where(bad, -np.inf, lp)


def pmf(k: Any, mu: Any, loc: Any = 0.0) -> Any:
    """``exp(logpmf)``."""
    k, mu, loc = promote(k, mu, loc)
    return ew.exp(logpmf(k, mu, loc))


def cdf(k: Any, mu: Any, loc: Any = 0.0) -> Any:
    """``gammaincc(floor(k) + 1, mu)``; 0 for ``k < 0``."""
    k, mu, loc = promote(k, mu, loc)
    x = ew.sub(k, loc)
    p = sp.gammaincc(ew.add(m.floor(m.relu(x)), 1.0), mu)
    return ew.where(ew.less(x, 0.0), 0.0, p)
