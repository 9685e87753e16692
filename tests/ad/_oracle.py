"""Helpers shared by the einsum / linalg / complex / tensor-network suites."""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts

Arr = np.ndarray[Any, Any]


def to_np(x: Any) -> Arr:
    """A numpy copy of a handle, owner or array (for comparisons)."""
    if isinstance(x, ad.EagerTensor):
        return np.array(x.to_numpy())
    if isinstance(x, ts.Tensor):
        return np.array(ts.kernel.read_array(x))
    return np.asarray(x)


def rand(rng: np.random.Generator, shape: tuple[int, ...], cplx: bool) -> Arr:
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if cplx else x


def close(got: Any, want: Any, rtol: float = 1e-8, atol: float = 1e-9) -> None:
    np.testing.assert_allclose(to_np(got), np.asarray(want), rtol=rtol, atol=atol)


def real_loss_weights(rng: np.random.Generator, shape: tuple[int, ...]) -> Arr:
    return rng.standard_normal(shape)
