"""Tutorial 7: the idioms of a real program — dict params, a minibatch loop, logging with
f-strings, testing results, and where copies happen (and how to avoid them).

Logistic regression trained with minibatch Adam, written as you would write it in JAX or
PyTorch.  Every tenferro value (owner, view, op result) reads like a numpy array:
``float(x)``, ``f"{x:.3f}"``, ``x.sum()``, ``np.mean(x)``, ``x.tolist()``; none of these
copies.  What *is* a copy is always recorded: importing numpy data (``ad.asarray``), and
nothing else in the loop.
Run: ``python tutorials/07_real_programs.py``
"""

import numpy as np

import tenferro_ad as ad
import tenferro_ad.testing as tt
from tenferro_storage import CopyReason, ledger

rng = np.random.default_rng(0)
N, D = 256, 5
true_w = rng.normal(size=(D, 1))
X_np = rng.normal(size=(N, D))
Y_np = (X_np @ true_w + 0.3 * rng.normal(size=(N, 1)) > 0).astype(np.float64)

# %% Import the data once (one recorded TRANSFER each): hoisting the import out of the
# loop is the JAX idiom `jnp.asarray(data)` too.  Passing X_np itself to the loss every
# step would import (copy) it on every call; the ledger would show each one.
with ledger.capture() as rec:
    X, Y = ad.asarray(X_np), ad.asarray(Y_np)
assert rec.copies == {CopyReason.TRANSFER: 2}

# %% Parameters: a dict of owners of different ranks (typed as Tensor[Any, AnyRank]).
params = {"w": ad.zeros((D, 1)), "b": ad.zeros(1)}
for name, p in params.items():
    print(f"{name}: shape {p.shape}, dtype {p.dtype.name}")


def loss_fn(params, x, y):
    logits = x @ params["w"] + params["b"]
    # the numerically stable binary cross-entropy: log(1 + e^z) - y z
    return ad.mean(ad.logaddexp(0.0, logits) - y * logits)


def accuracy(params, x, y):
    pred = (x @ params["w"] + params["b"]) > 0.0
    return float(np.mean(pred == (y > 0.5)))  # np.mean runs the recorded op: no copy


# %% A minibatch loop: views of the dataset (zero-copy slices) feed each step.
opt = ad.optim.Adam(lr=0.1)
batch = 32
for epoch in range(8):
    order = rng.permutation(N // batch)
    with ledger.capture() as rec:
        for b in order:
            xb, yb = X[b * batch : (b + 1) * batch], Y[b * batch : (b + 1) * batch]
            value, grads = ad.value_and_grad(loss_fn)(params, xb, yb)
            opt.step(params, grads)  # in place, through exclusive borrows
            del xb, yb  # the views end here (the owners can be written again)
    assert rec.copies == {}, rec.copies  # an epoch copies nothing
    if epoch % 2 == 0 or epoch == 7:
        full_loss = loss_fn(params, X, Y)
        print(f"epoch {epoch}: loss {full_loss:.4f}  accuracy {accuracy(params, X, Y):.3f}  "
              f"|w| {np.linalg.norm(params['w']):.3f}")

# %% Testing results: tenferro_ad.testing is numpy.testing reading values in place
# (np.testing.assert_allclose(owner, ...) is refused: it would be an implicit copy).
with tt.borrowed(params["w"]) as w:  # read in place under a borrow: no copy
    cosine = float(w.ravel() @ true_w.ravel()) / np.linalg.norm(w) / np.linalg.norm(true_w)
tt.assert_allclose(cosine, 1.0, atol=0.05)
assert accuracy(params, X, Y) > 0.85
print(f"w = {params['w'].ravel():.3f}")
print(f"b = {float(params['b'][0]):+.3f}, final loss {float(loss_fn(params, X, Y)):.4f}")

# %% The same numbers through a plain numpy reference: the gradient at the solution.
with tt.borrowed(params) as p:
    z = X_np @ p["w"] + p["b"]
g_ref = X_np.T @ (1.0 / (1.0 + np.exp(-z)) - Y_np) / N
tt.assert_allclose(ad.grad(loss_fn)(params, X, Y)["w"], g_ref, rtol=1e-10, atol=1e-12)
print("gradient matches the numpy reference")
