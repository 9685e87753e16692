"""Tensor-network test configuration: the optional ``[tn]`` extra (autoray, quimb, cotengra)
must be installed, else the folder is skipped; JAX (the oracle) runs in float64."""

from __future__ import annotations

import pytest

pytest.importorskip("autoray")
pytest.importorskip("quimb")
pytest.importorskip("cotengra")
jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
