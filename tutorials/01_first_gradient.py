"""Tutorial 1: your first gradient — and proof of what it cost.

Run: ``python tutorials/01_first_gradient.py``
"""

import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage import ledger

# %% A tape records the ops on watched values.  watch() *moves* the owner into the tape;
# ops that are given an owner only borrow it (it stays yours).
with ledger.capture() as rec:
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.array([0.5, 1.0, 2.0])))  # one recorded TRANSFER
        y = ad.sin(x) * x  # sin retains x; mul retains sin(x) and x
        loss = ad.sum(y)

    # %% The tape explains what it keeps, and why.
    for entry in tape.retained():
        print(f"retained: {entry.producer:6s} needed by {entry.needed_by}, {entry.nbytes} bytes")

    # %% backward returns a Gradients bundle; take_grad moves the owner out (no copy).
    grads = tape.backward(loss)
    g = grads.take_grad(x)
    assert g is not None
    expected = np.sin([0.5, 1.0, 2.0]) + np.array([0.5, 1.0, 2.0]) * np.cos([0.5, 1.0, 2.0])
    np.testing.assert_allclose(g.to_numpy(), expected)
    print("gradient:", g.to_numpy())

print("allocations:\n" + str(rec.allocations))
print("copies:\n" + str(rec.copies))  # only the import and our to_numpy() reads
assert ts.CopyReason.EXPLICIT_DUPLICATE not in rec.copies

# %% The functional API borrows its arguments: nothing is consumed.
w = ts.from_numpy(np.array([1.0, -1.0]))
dw = ad.grad(lambda v: ad.sum(ad.tanh(v) ** 2.0))(w)
print("d/dw sum(tanh(w)^2) =", dw.to_numpy(), "and w is still usable:", w.to_numpy())
