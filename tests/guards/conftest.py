"""Guard tests (issue 16): JAX, the oracle, runs in float64."""

from __future__ import annotations

import jax

jax.config.update("jax_enable_x64", True)
