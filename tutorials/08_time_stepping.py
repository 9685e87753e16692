"""Tutorial 8: a time-stepping model with ``lax.scan`` and a checkpointed step.

A Python ``for`` loop inside ``ad.jit`` unrolls: 300 time steps become 300 copies of the
step in the graph, slow to compile.  ``tenferro_ad.lax.scan(step, carry, xs)`` (JAX's
signature) is ONE equation whose body is the step's sub-graph: it compiles once whatever
the number of steps, the host engine loops over the sub-program and the XLA engine lowers
it to ``lax.scan``.  Called eagerly, the same ``scan`` is a plain loop of recorded ops.

Here: fit a small neural vector field ``dz/dt = f(z)`` integrated with RK4 so that the
final states match targets.  ``ad.checkpoint(step)`` inside the scan keeps only each
step's carry (the state) for the backward pass, and the ledger shows it.

Run it: ``python tutorials/08_time_stepping.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_ad as ad
from tenferro_ad import lax
from tenferro_storage import ledger

rng = np.random.default_rng(0)
D, HIDDEN, BATCH, STEPS, DT = 2, 16, 8, 100, 0.01
params = [rng.normal(size=(D, HIDDEN)) * 0.5, np.zeros(HIDDEN),
          rng.normal(size=(HIDDEN, D)) * 0.5, np.zeros(D)]
z0 = rng.normal(size=(BATCH, D))
target = z0 @ np.array([[0.0, -1.0], [1.0, 0.0]])  # a quarter turn


def make_loss(checkpointed: bool) -> Any:
    def loss(params: Any, z0: Any, target: Any) -> Any:
        w1, b1, w2, b2 = params

        def field(z: Any) -> Any:
            return ad.tanh(z @ w1 + b1) @ w2 + b2

        def step(z: Any, _: Any) -> Any:  # one RK4 step: (carry, x) -> (carry, y)
            k1 = field(z)
            k2 = field(z + 0.5 * DT * k1)
            k3 = field(z + 0.5 * DT * k2)
            k4 = field(z + DT * k3)
            return z + DT / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4), None

        body = ad.checkpoint(step) if checkpointed else step
        z, _ = lax.scan(body, z0, None, length=STEPS)
        return ad.mean((z - target) ** 2)

    return loss


# %% [1] Traced, the whole time loop is one equation with its body printed under it.
graph = ad.trace(make_loss(False))(params, z0, target)
print(f"[1] {STEPS} RK4 steps traced to {len(graph.eqns)} equations; the scan:")
print("\n".join(line for line in str(graph).splitlines()[:12]))

# %% [2] Eagerly, the scan is a Python loop on the tape: the same loss and gradient.
vg_eager = ad.value_and_grad(make_loss(False))
vg_jit = ad.jit(ad.value_and_grad(make_loss(True)), engine="host")
value_e, grads_e = vg_eager(params, z0, target)
value_j, grads_j = vg_jit(params, z0, target)
print(f"[2] loss eager {value_e.item():.6f}, jitted (checkpointed body) "
      f"{value_j.to_numpy().item():.6f}")
for ge, gj in zip(grads_e, grads_j, strict=True):
    np.testing.assert_allclose(ge.to_numpy(), gj.to_numpy(), rtol=1e-9, atol=1e-12)

# %% [3] The checkpointed step keeps only the carry per step: compare the ledger's peaks.
for checkpointed in (False, True):
    with ledger.capture() as rec:
        out = ad.value_and_grad(make_loss(checkpointed))(params, z0, target)
    del out
    kind = "checkpointed" if checkpointed else "plain       "
    print(f"[3] eager, {kind} step: ledger peak {rec.peak_bytes / 1024:8.1f} KiB")

# %% [4] Train: the jitted step compiles once; its cache says so.
lr = 0.5
for _ in range(30):
    value, grads = vg_jit(params, z0, target)
    params = [p - lr * g.to_numpy() for p, g in zip(params, grads, strict=True)]
print(f"[4] after 30 steps the loss is {value.to_numpy().item():.6f}; "
      f"jit cache: {vg_jit.cache_info()}")

# %% [5] Branches and while loops have their constructs too (cond, switch, while_loop).
def damped(z: Any) -> Any:
    return lax.cond(ad.sum(z * z) > 1.0, lambda z: z * 0.5, lambda z: z, z)


print("[5] cond under jit:", ad.jit(damped, engine="host")(np.array([2.0, 0.0])).to_numpy())
