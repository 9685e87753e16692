"""User code: a minibatch training loop with SGD, logging with f-strings."""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts


def loss(params: dict[str, Any], x: Any, y: Any) -> Any:
    pred = x @ params["w"] + params["b"]
    return ad.mean((pred - y) ** 2.0)


rng = np.random.default_rng(0)
data_x = rng.normal(size=(32, 3))
data_y = rng.normal(size=(32, 1))
params = {"w": ts.zeros((3, 1)), "b": ts.zeros(1)}
opt = ad.optim.SGD(lr=0.1)
value: Any = None
for step in range(3):
    for i in range(0, 32, 8):
        xb = ts.from_numpy(data_x[i : i + 8])
        yb = ts.from_numpy(data_y[i : i + 8])
        value, grads = ad.value_and_grad(loss)(params, xb, yb)
        opt.step(params, grads)
    print(f"step {step}: loss {float(value):.4f}, w {params['w'].shape}")
