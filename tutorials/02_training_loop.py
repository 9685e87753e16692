"""Tutorial 2: a training loop — an MLP on synthetic data whose loss falls.

Ops *borrow* the owners they are given: the dataset owners feed every step, a constant
captured in a closure is reused freely, and the loss can be logged by calling the same
function directly.  Parameters are owners updated *in place* by the optimizer through
exclusive borrows: no copies, and the ledger proves it.
Run: ``python tutorials/02_training_loop.py``
"""

import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage import ledger

rng = np.random.default_rng(0)
X = rng.normal(size=(64, 4))
Y = np.sin(X @ np.array([1.0, -2.0, 0.5, 1.5]))[:, None]
x, y = ts.from_numpy(X), ts.from_numpy(Y)  # the dataset: two owners, used every step

params = [
    ts.random.default_rng(1).normal((4, 16), scale=0.5),
    ts.zeros(16),
    ts.random.default_rng(2).normal((16, 1), scale=0.5),
]
scale = ts.from_numpy(np.full(16, 0.9))  # a constant the loss closes over (borrowed)


def loss_fn(p: list, xb: ts.Tensor, yb: ts.Tensor) -> ad.EagerTensor:
    h = ad.tanh(xb @ p[0] + p[1]) * scale
    return ad.mean((h @ p[2] - yb) ** 2.0)


# %% Called directly on owners, the function just computes (as in JAX): log it freely.
print(f"initial loss {loss_fn(params, x, y).item():.4f}")

opt = ad.optim.Adam(lr=0.05)
losses = []
for step in range(60):
    with ledger.capture() as rec:
        value, grads = ad.value_and_grad(loss_fn)(params, x, y)
        # Read all gradients in place, inside one borrow scope: no copy, no TRANSFER.
        with ts.borrow_arrays(grads) as arrays:
            gnorm = float(np.sqrt(sum(float((a * a).sum()) for a in arrays)))
        opt.step(params, grads)
    assert rec.copies == {}, rec.copies  # a training step copies nothing
    losses.append(float(value.item()))
    if step % 20 == 0:
        print(
            f"step {step:3d}  loss {losses[-1]:.4f}  |grad| {gnorm:.3f}  "
            f"allocations {sum(rec.allocations.values())}"
        )

print(f"final loss {losses[-1]:.4f} (from {losses[0]:.4f})")
assert losses[-1] < 0.5 * losses[0]
# The dataset and the constant are still the caller's: nothing consumed, nothing copied.
assert x.shape == (64, 4) and scale.to_numpy()[0] == 0.9

# %% While a tape needs a borrowed owner for backward, writing to it is refused —
# the error names the tape and the op.  After backward the tape lets go.
with ad.Tape(name="demo tape") as tape:
    w = tape.watch(ts.from_numpy(np.ones(16)))
    out = ad.sum(w * scale)
try:
    scale.fill(0.0)
except ts.errors.BorrowError as e:
    print("refused:", str(e).split(";")[0])
tape.backward(out)
scale.fill(1.0)  # fine now
