"""``tenferro_ad.scipy.stats``: log densities, densities and distribution functions of
common distributions (JAX's ``jax.scipy.stats`` subset), derived from differentiable
primitives.  Each distribution is a module: ``stats.norm.logpdf(x, loc, scale)``."""

from . import beta, chi2, dirichlet, gamma, multivariate_normal, norm, poisson, t

__all__ = ["beta", "chi2", "dirichlet", "gamma", "multivariate_normal", "norm", "poisson", "t"]
