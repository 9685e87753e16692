"""User code: a params dict of owners of different ranks, read through their metadata."""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_storage as ts


def init(n_in: int, n_out: int) -> dict[str, ts.Tensor[Any, ts.AnyRank]]:
    return {"w": ts.zeros((n_in, n_out)), "b": ts.zeros(n_out)}


params = {"w": ts.zeros((3, 2)), "b": ts.zeros(2)}
for name, p in params.items():
    shape: tuple[int, ...] = p.shape
    rank: int = p.ndim
    count: int = p.size
    print(f"{name}: shape={shape} rank={rank} size={count} dtype={p.dtype.name}")
total = sum(p.size for p in params.values())
other = init(4, 1)
print(total, other["w"].shape[0], np.float64(float(ts.zeros(()))))
