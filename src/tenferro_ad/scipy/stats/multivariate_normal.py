"""Multivariate normal (``jax.scipy.stats.multivariate_normal``): ``logpdf``/``pdf`` through
a Cholesky factor and a triangular solve (O(n^3) once, then O(n^2) per point)."""

from __future__ import annotations

import math
from typing import Any

from ... import linalg
from ...ops import elementwise as ew
from ...ops import reduce as rd
from ...ops import shape as sh
from ...ops._util import shape_of
from ._promote import promote

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, mean: Any, cov: Any) -> Any:
    """``-|L^-1 (x - mean)|^2 / 2 - n log(2 pi)/2 - sum log diag L`` with ``L L^T = cov``;
    ``x`` is ``(..., n)``."""
    x, mean, cov = promote(x, mean, cov)
    n = shape_of(cov)[-1]
    L = linalg.cholesky(cov)
    d = ew.sub(x, mean)
    y = linalg.solve_triangular(L, sh.expand_dims(d, -1), lower=True)
    y = sh.reshape(y, shape_of(y)[:-1])
    quad = rd.sum(ew.mul(y, y), axis=-1)
    logdet = rd.sum(ew.log(linalg.diagonal(L, 0, -2, -1)), axis=-1)
    return ew.sub(ew.sub(ew.mul(quad, -0.5), n * 0.5 * math.log(2 * math.pi)), logdet)


def pdf(x: Any, mean: Any, cov: Any) -> Any:
    """``exp(logpdf)``."""
    return ew.exp(logpdf(x, mean, cov))
