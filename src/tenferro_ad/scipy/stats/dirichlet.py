"""Dirichlet distribution (``jax.scipy.stats.dirichlet``): ``logpdf``/``pdf`` (derived).

``x`` has the categories on axis 0 (shape ``(K,)`` or ``(K, ...)``), ``alpha`` shape ``(K,)``.
"""

from __future__ import annotations

from typing import Any

from ...ops import elementwise as ew
from ...ops import reduce as rd
from ...ops import shape as sh
from ...ops import special as sp
from ...ops._util import shape_of
from ._promote import promote

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, alpha: Any) -> Any:
    """``sum(xlogy(alpha - 1, x), axis=0) - (sum(gammaln(alpha)) - gammaln(sum(alpha)))``."""
    x, alpha = promote(x, alpha)
    xs = shape_of(x)
    a = alpha
    if len(xs) > 1:
        a = sh.reshape(alpha, (xs[0],) + (1,) * (len(xs) - 1))
    norm = ew.sub(rd.sum(sp.gammaln(alpha)), sp.gammaln(rd.sum(alpha)))
    return ew.sub(rd.sum(sp.xlogy(ew.sub(a, 1.0), x), axis=0), norm)


def pdf(x: Any, alpha: Any) -> Any:
    """``exp(logpdf)``."""
    return ew.exp(logpdf(x, alpha))
