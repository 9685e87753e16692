"""Tutorial 6: traced mode — a graph you can print, transform, compile and checkpoint.

``ad.trace(f)(*args)`` runs ``f`` once on *tracers* (values that have a shape and a
dtype, but no data) and records every op as an equation of an inert, immutable
:class:`~tenferro_ad.traced.Graph`.  Graph-to-graph transformations (``grad``, ``jvp``,
``vmap`` ...) use the same per-primitive rules as eager mode; ``ad.jit`` compiles a
graph to the runtime's program format (each intermediate released at its last use) and
runs it through an engine.  ``ad.checkpoint`` works inside traced code too: the region
becomes a block of the graph, and the backward program recomputes its interior.

Run it: ``python tutorials/06_traced.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import traced
from tenferro_storage.ledger import AllocationReason, capture

rng = np.random.default_rng(0)
x0 = rng.normal(size=(8, 16))
w0 = rng.normal(size=(16, 16)) * 0.3


# %% [1] Trace a function: only the shapes and dtypes of the arguments are used.
def layer(x: Any, w: Any) -> Any:
    return ad.tanh(x @ w) * x


def loss(x: Any, w: Any) -> Any:
    return ad.sum(layer(layer(x, w), w) ** 2.0)


graph = ad.trace(loss)(x0, w0)
print("[1] the traced graph:")
print(graph)
traced.check(graph)  # type-checks every equation (raises GraphTypeError, showing where)

# Python control flow on *values* cannot be traced: it would need data the tracer lacks.
try:
    ad.trace(lambda x: x if ad.sum(x) > 0 else -x)(x0)
except traced.TracerError as exc:
    print("    refused:", str(exc).split(".")[0])

# %% [2] Take its gradient: another graph, built with the primitives' own VJP rules.
dgraph = traced.grad(graph, argnums=1)
gw = traced.eval_graph(dgraph, x0, w0)  # numpy kernels in order -> a fresh Tensor owner
eager_gw = ad.grad(loss, argnums=1)(ts.from_numpy(x0), ts.from_numpy(w0))
print(f"\n[2] grad graph: {len(dgraph.eqns)} equations; |traced - eager| =",
      np.abs(gw.to_numpy() - eager_gw.to_numpy()).max())

# %% [3] vmap it: per-example gradients, one batched graph (no Python loop at run time).
xs = rng.normal(size=(5, 8, 16))
per_example = traced.eval_graph(traced.vmap(dgraph, 5, in_axes=(0, None)), xs, w0)
print("\n[3] per-example gradients:", per_example.shape)

# %% [4] jit it: trace once per signature, compile, run through the runtime.
step = ad.jit(ad.value_and_grad(loss, argnums=1))
x_t, w_t = ts.from_numpy(x0), ts.from_numpy(w0)
print("\n[4] the compiled program (views are folded into their readers):")
print(step.lower(x_t, w_t).program)
value, g = step(x_t, w_t)
print("    loss:", value.item(), "  signatures compiled:", step.cache_size)
print("    what the program keeps between its forward and backward halves:")
for entry in step.retained(x_t, w_t):
    print(f"      {entry.var} ({entry.producer}, {entry.nbytes} bytes) <- {entry.needed_by}")


# %% [5] Checkpoint inside traced code: the same ad.checkpoint and policies as eager.
def loss_ckpt(x: Any, w: Any) -> Any:
    h = ad.checkpoint(layer)(x, w)  # keep the boundary (x, w), recompute the interior
    return ad.sum(layer(h, w) ** 2.0)


print("\n[5] the checkpointed gradient graph (the recompute block runs in backward):")
print(traced.grad(ad.trace(loss_ckpt)(x0, w0), argnums=1))
step_ckpt = ad.jit(ad.value_and_grad(loss_ckpt, argnums=1), reuse=False)
step_plain = ad.jit(ad.value_and_grad(loss, argnums=1), reuse=False)
for name, fn in (("plain", step_plain), ("checkpointed", step_ckpt)):
    fn.lower(x_t, w_t)  # trace + compile before the capture
    with capture() as rec:
        _, g2 = fn(x_t, w_t)
    kept = sum(e.nbytes for e in fn.retained(x_t, w_t) if e.producer != "input")
    recomputed = rec.allocations[AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT]
    print(f"    {name:13s} keeps {kept:5d} bytes of intermediates, recomputes {recomputed} "
          f"values; |grad - eager| = {np.abs(g2.to_numpy() - eager_gw.to_numpy()).max():.1e}")
    del g2
