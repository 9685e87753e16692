"""Reliability suites (edge points, dtypes, the API fuzzer): JAX, the oracle, in x64 mode so
float64 and complex128 exist there as they do here."""

from __future__ import annotations

import jax

jax.config.update("jax_enable_x64", True)
