"""``tenferro_ad.scipy.special``: special functions with VJP and JVP rules to any order.

The kernels are scipy's (one allocation per call; float32 stays float32); the rules are
JAX's, cross-validated against ``jax.scipy.special``.  See :mod:`tenferro_ad.ops.special`.
"""

from ..ops.scan import logsumexp
from ..ops.special import (
    betaln,
    digamma,
    erf,
    erfc,
    erfinv,
    expit,
    gammainc,
    gammaincc,
    gammaln,
    log_ndtr,
    logit,
    ndtr,
    ndtri,
    polygamma,
    xlog1py,
    xlogy,
)

__all__ = [
    "betaln",
    "digamma",
    "erf",
    "erfc",
    "erfinv",
    "expit",
    "gammainc",
    "gammaincc",
    "gammaln",
    "log_ndtr",
    "logit",
    "logsumexp",
    "ndtr",
    "ndtri",
    "polygamma",
    "xlog1py",
    "xlogy",
]
