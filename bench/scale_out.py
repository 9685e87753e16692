"""The data-parallel training step on a mesh of 1, 2 and 4 host devices: tenferro's
sharded ``ad.jit`` against JAX's ``jax.jit`` with the same shardings, in one process.

The step is one SPMD program: the loss's gradient over a batch sharded on ``"data"``
and the SGD update of replicated parameters (``p - lr * g``), returning the new
parameters (replicated) and the loss.  MLP 256-512-512-16, batch 2048, float32.
tenferro takes and returns ``ShardedTensor`` owners (one ledger allocation per shard
and output, scratch recorded per device); JAX takes and returns ``jax.Array`` values.
The 4 host devices come from ``XLA_FLAGS=--xla_force_host_platform_device_count=4``,
set here before jax is imported.  Figures: median ms per step, interleaved rounds,
and the ratio tenferro/JAX (the target is <= 1.1 at every size).

    python bench/scale_out.py [--number 20] [--rounds 5] [--small]

``--small`` (MLP 8-16-16-2, batch 64) shows the per-call bookkeeping instead: one
allocation event per output shard and per device's scratch, the argument checks.
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=4").strip()

import argparse
import itertools
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import tenferro_ad as ad
from tenferro_storage import sharding as sh

SIZES = [256, 512, 512, 16]
BATCH = [2048]
LR = 0.01


def make_step(m: Any) -> Callable[..., Any]:
    grad = ad.value_and_grad if m is ad else jax.value_and_grad

    def loss(params: Any, x: Any, y: Any) -> Any:
        h = x
        for w in params[:-1]:
            h = m.tanh(h @ w)
        return m.mean((h @ params[-1] - y) ** 2.0)

    def step(params: Any, x: Any, y: Any) -> Any:
        value, grads = grad(loss)(params, x, y)
        return [p - LR * g for p, g in zip(params, grads, strict=True)], value

    return step


def cases(n: int, rng: np.random.Generator) -> dict[str, Callable[[], Any]]:
    devices = np.array(jax.devices()[:n])
    ws = [(rng.normal(size=(a, b)) * 0.05).astype(np.float32)
          for a, b in itertools.pairwise(SIZES)]
    x = rng.normal(size=(BATCH[0], SIZES[0])).astype(np.float32)
    y = rng.normal(size=(BATCH[0], SIZES[-1])).astype(np.float32)
    mesh = sh.Mesh(devices, ("data",))
    specs = [P()] * len(ws)
    ours = ad.jit(make_step(ad), mesh=mesh, in_shardings=(specs, P("data"), P("data")),
                  out_shardings=(specs, P()))
    state: dict[str, Any] = {"params": [sh.shard(w, mesh, P()) for w in ws],
                             "x": sh.shard(x, mesh, P("data")), "y": sh.shard(y, mesh, P("data"))}

    def tenferro() -> Any:
        state["params"], value = ours(state["params"], state["x"], state["y"])
        return value

    jmesh = mesh.jax_mesh
    rep, dat = NamedSharding(jmesh, P()), NamedSharding(jmesh, P("data"))
    theirs = jax.jit(make_step(jnp), in_shardings=([rep] * len(ws), dat, dat),
                     out_shardings=([rep] * len(ws), rep))
    jstate: dict[str, Any] = {"params": [jax.device_put(w, rep) for w in ws],
                              "x": jax.device_put(x, dat), "y": jax.device_put(y, dat)}

    def jax_() -> Any:
        jstate["params"], value = theirs(jstate["params"], jstate["x"], jstate["y"])
        return jax.block_until_ready(value)

    tenferro()
    jax_()  # compile both
    return {"tenferro": tenferro, "jax": jax_}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--number", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--small", action="store_true",
                    help="MLP 8-16-16-2, batch 64: dispatch and bookkeeping dominate")
    args = ap.parse_args()
    if args.small:
        SIZES[:] = [8, 16, 16, 2]
        BATCH[0] = 64
    rng = np.random.default_rng(0)
    print(f"{'devices':>8} {'tenferro ms':>12} {'jax ms':>8} {'ratio':>6}")
    for n in (1, 2, 4):
        fs = cases(n, rng)
        per: dict[str, list[float]] = {k: [] for k in fs}
        for _ in range(args.rounds):
            for k, f in fs.items():
                t0 = time.perf_counter()
                for _ in range(args.number):
                    f()
                per[k].append(1e3 * (time.perf_counter() - t0) / args.number)
        ours, theirs = statistics.median(per["tenferro"]), statistics.median(per["jax"])
        print(f"{n:>8} {ours:>12.3f} {theirs:>8.3f} {ours / theirs:>6.2f}")


if __name__ == "__main__":
    main()
