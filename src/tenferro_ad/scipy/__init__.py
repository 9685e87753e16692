"""``tenferro_ad.scipy``: differentiable counterparts of ``scipy.special`` and
``scipy.stats`` (JAX's ``jax.scipy`` surface), running scipy's kernels eagerly."""

from . import special, stats

__all__ = ["special", "stats"]
