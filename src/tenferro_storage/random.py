"""Seeded random initializers.  Each returns a fresh owner (one ``OPERATION_OUTPUT``
allocation, no copy event: the values are computed, not copied)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._creation import _shape
from ._dtypes import dtype as resolve_dtype
from ._ledger import AllocationReason
from ._rank import DynRank
from ._tensor import Tensor

__all__ = ["normal", "uniform"]


def _rng(seed: int | np.random.Generator) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def normal(
    shape: int | tuple[int, ...],
    *,
    seed: int | np.random.Generator = 0,
    mean: float = 0.0,
    std: float = 1.0,
    dtype: object = "float64",
) -> Tensor[Any, DynRank]:
    """Normally distributed values. ``seed`` is an int or a ``numpy.random.Generator``. O(size)."""
    dt = resolve_dtype(dtype)
    if not dt.is_floating or dt.is_complex:
        raise TypeError(f"random.normal: dtype must be float32 or float64, got {dt.name}")
    arr = _rng(seed).normal(mean, std, _shape("random.normal", shape)).astype(dt.numpy, copy=False)
    return Tensor._adopt(  # type: ignore[no-any-return]
        np.asarray(arr, order="C"), dt, AllocationReason.OPERATION_OUTPUT, "random.normal"
    )


def uniform(
    shape: int | tuple[int, ...],
    *,
    seed: int | np.random.Generator = 0,
    low: float = 0.0,
    high: float = 1.0,
    dtype: object = "float64",
) -> Tensor[Any, DynRank]:
    """Uniform values in ``[low, high)``. ``seed`` is an int or a ``numpy.random.Generator``."""
    dt = resolve_dtype(dtype)
    if not dt.is_floating or dt.is_complex:
        raise TypeError(f"random.uniform: dtype must be float32 or float64, got {dt.name}")
    draws = _rng(seed).uniform(low, high, _shape("random.uniform", shape))
    arr = draws.astype(dt.numpy, copy=False)
    return Tensor._adopt(  # type: ignore[no-any-return]
        np.asarray(arr, order="C"), dt, AllocationReason.OPERATION_OUTPUT, "random.uniform"
    )
