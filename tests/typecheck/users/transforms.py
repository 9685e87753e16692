"""User code: transforms (grad, jit, vmap, hessian) on owners, results read as numbers."""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_ad as ad
import tenferro_ad.testing as tt
import tenferro_storage as ts


def f(x: Any) -> Any:
    return ad.sum(ad.sin(x) ** 2.0)


x = ts.from_numpy(np.linspace(0.0, 1.0, 4))
g = ad.grad(f)(x)
h = ad.hessian(f)(x)
fast = ad.jit(f)
batched = ad.vmap(ad.sin)
n: int = g.ndim
tt.assert_allclose(g, np.sin(2.0 * np.linspace(0.0, 1.0, 4)), rtol=1e-12)
print(f"{fast(x):.6f}", h.shape, batched(x).shape, n)
