"""Student's t distribution (``jax.scipy.stats.t``): ``logpdf``/``pdf`` (derived)."""

from __future__ import annotations

import math
from typing import Any

from ...ops import elementwise as ew
from ...ops import special as sp
from ._promote import promote

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, df: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """JAX's formula: ``-(lgamma(df/2) + log(pi df scale^2)/2 - lgamma((df+1)/2)
    + (df+1)/2 log1p(z^2/df))``."""
    x, df, loc, scale = promote(x, df, loc, scale)
    z = ew.div(ew.sub(x, loc), scale)
    half = ew.mul(df, 0.5)
    half1 = ew.add(half, 0.5)
    norm = ew.sub(
        ew.add(sp.gammaln(half), ew.mul(ew.log(ew.mul(ew.mul(ew.mul(scale, scale), math.pi), df)),
                                        0.5)),
        sp.gammaln(half1),
    )
    quad = ew.div(ew.mul(z, z), df)
    return ew.neg(ew.add(norm, ew.mul(half1, ew.log1p(quad))))


def pdf(x: Any, df: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """``exp(logpdf)``."""
    x, df, loc, scale = promote(x, df, loc, scale)
    return ew.exp(logpdf(x, df, loc, scale))
