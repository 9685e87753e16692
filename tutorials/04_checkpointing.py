"""Tutorial 4: checkpointing whose saving you can prove.

A checkpoint region keeps only its *boundary* (its inputs, plus whatever its policy
saves) and drops every interior value right after the forward pass used it; backward
recomputes the interior.  The ledger records every recomputed allocation with the
reason ``CHECKPOINT_RECOMPUTE_OUTPUT``, so the saving — and its price — are facts you
can assert in a test.

Run it: ``python tutorials/04_checkpointing.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage.ledger import AllocationReason, capture

N = 10_000  # values per array: 80,000 bytes in float64
DEPTH, SEGMENTS = 36, 6


# %% [1] A deep elementwise chain, split into segments.
def segment(v: Any) -> Any:
    for _ in range(DEPTH // SEGMENTS):
        v = ad.sin(v) * 0.9
    return v


def loss_fn(x: Any, checkpointed: bool) -> Any:
    seg = ad.checkpoint(segment) if checkpointed else segment  # the function form
    for _ in range(SEGMENTS):
        x = seg(x)
    return ad.sum(x)


# %% [2] Run forward + backward under a ledger capture, with and without checkpointing.
def run(checkpointed: bool) -> tuple[np.ndarray[Any, Any], Any]:
    x0 = ts.random.default_rng(0).normal((N,))  # made before the capture: not counted
    with capture() as rec:
        with ad.Tape() as tape:
            x = tape.watch(x0)
            loss = loss_fn(x, checkpointed)
        grads = tape.backward(loss, wrt=[x])
        g = grads.take_grad(x)
        del grads, loss, tape
    assert g is not None
    out = ts.kernel.read_array(g).copy()
    del g, x
    return out, rec


g_plain, plain = run(False)
g_ckpt, ckpt = run(True)
print("plain:        ", plain)
print("checkpointed: ", ckpt)

# %% [3] Same gradients; fewer peak bytes; the price is visible in the ledger.
np.testing.assert_allclose(g_ckpt, g_plain, rtol=1e-12)
n = N * 8
# Each step is sin (keeps its input for backward) then a scaling (keeps nothing), so the
# plain tape holds one value per step: DEPTH values.  Checkpointed, it holds the
# SEGMENTS - 1 segment boundaries, plus one segment's recomputed values during backward.
print(
    f"peak: {plain.peak_bytes:,} -> {ckpt.peak_bytes:,} bytes "
    f"({plain.peak_bytes / ckpt.peak_bytes:.1f}x less)"
)
assert ckpt.peak_bytes < plain.peak_bytes / 2
recomputed = ckpt.allocations[AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT]
# every sin and every scaling is recomputed once, except each segment's last scaling:
# nothing reads its output (the next segment starts from its retained boundary, and a
# scaling's backward needs only its input)
assert recomputed == 2 * DEPTH - SEGMENTS
assert plain.copies == ckpt.copies == {}  # checkpointing never copies
print(f"recomputed allocations: {recomputed} ({recomputed * n:,} bytes)")

# %% [4] The tape explains what it retains: only region inputs, needed by the
# checkpoint's recompute (no interior value appears here).
with ad.Tape() as tape:
    x = tape.watch(ts.random.default_rng(0).normal((N,)))
    loss = loss_fn(x, True)
    for entry in tape.retained():
        print(f"retained: {entry.producer:<8} needed by {entry.needed_by}  {entry.nbytes:,} B")
    assert {e.needed_by for e in tape.retained()} == {("checkpoint.vjp",)}
del loss, x, tape

# %% [5] The block form and policies.  In `with tape.checkpoint(...)`, handles created
# inside the block and still referenced when it exits are the region's outputs.
# ad.save_named("h") keeps values named with ad.name(...) instead of recomputing them.
with ad.Tape() as tape:
    x = tape.watch(ts.random.default_rng(1).normal((4, 4)))
    with tape.checkpoint(policy=ad.save_named("h")):
        h = ad.name(ad.tanh(x @ x), "h")  # saved: a region boundary
        y = ad.exp(h) * 2.0  # interior values of y are recomputed
    loss = ad.sum(y)
with capture() as rec:
    grads = tape.backward(loss, wrt=[x])
print("block form backward:\n" + str(rec.allocations))
# exp is recomputed from the saved h (the scaling's backward reads it; the scaling itself
# is not re-run: nothing reads its output); neither tanh nor x @ x is re-run: tanh's backward
# needs only its saved output h, and the product's backward only x, the region's input
assert rec.allocations[AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT] == 1
del grads, loss, y, h, x, tape
print("ok")
