"""Tutorial 2: a training loop — an MLP on synthetic data whose loss falls.

Parameters are owners updated *in place* by the optimizer through exclusive borrows:
no copies, and the ledger proves it.  Run: ``python tutorials/02_training_loop.py``
"""

import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage import ledger

rng = np.random.default_rng(0)
X = rng.normal(size=(64, 4))
Y = np.sin(X @ np.array([1.0, -2.0, 0.5, 1.5]))[:, None]
x, y = ts.from_numpy(X), ts.from_numpy(Y)

params = [
    ts.random.normal((4, 16), seed=1, std=0.5),
    ts.zeros(16),
    ts.random.normal((16, 1), seed=2, std=0.5),
]


def loss_fn(p: list, xb: ts.Tensor, yb: ts.Tensor) -> ad.EagerTensor:
    h = ad.tanh(xb @ p[0] + p[1])
    return ad.mean((h @ p[2] - yb) ** 2.0)


opt = ad.optim.Adam(lr=0.05)
losses = []
for step in range(60):
    with ledger.capture() as rec:
        value, grads = ad.value_and_grad(loss_fn)(params, x, y)
        opt.step(params, grads)
    assert rec.copies == {}, rec.copies  # a training step copies nothing
    losses.append(float(value.item()))
    if step % 20 == 0:
        print(f"step {step:3d}  loss {losses[-1]:.4f}  allocations {sum(rec.allocations.values())}")

print(f"final loss {losses[-1]:.4f} (from {losses[0]:.4f})")
assert losses[-1] < 0.5 * losses[0]
