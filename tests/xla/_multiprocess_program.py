"""Run by tests/xla/test_multiprocess.py: one process of a ``jax.distributed`` run over
127.0.0.1 (``port process_id num_processes mode``), 4 devices in all; mode ``train``
trains the replicated-parameter data-parallel model for 10 steps and prints the loss of
every step and this process's ledger of one step as a JSON line; mode ``die<k>`` makes
process k kill itself (SIGKILL) before its fourth step; ``alone``: only this process of
2 is started."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

import numpy as np
from jax.sharding import PartitionSpec as P

from tenferro_storage import ledger
from tenferro_storage import runtime as rt
from tenferro_storage import sharding as sh
from tenferro_storage.errors import DistributedError


def main() -> None:
    port, pid, nproc, mode = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    t0 = time.monotonic()
    if nproc > 1:
        try:
            sh.initialize(f"127.0.0.1:{port}", nproc, pid, initialization_timeout=5,
                          heartbeat_timeout=3)
        except DistributedError as exc:
            sys.stdout.write(json.dumps({"error": str(exc),
                                         "seconds": time.monotonic() - t0}) + "\n")
            sys.exit(3)
    import jax  # after initialize: the engines are this process's devices

    import tenferro_ad as ad

    jax.config.update("jax_enable_x64", True)
    mesh = sh.Mesh(np.array(jax.devices()), ("data",))
    rng = np.random.default_rng(0)
    w = [rng.normal(size=(4, 8)) * 0.5, rng.normal(size=(8, 2)) * 0.5]
    x = rng.normal(size=(32, 4))
    y = np.sin(x[:, :2])

    def loss(params: Any, x: Any, y: Any) -> Any:
        w1, w2 = params
        return ad.mean((ad.tanh(x @ w1) @ w2 - y) ** 2.0)

    params = [sh.shard(a, mesh, P()) for a in w]
    # each process uploads only its addressable rows of the global batch
    xs, ys = sh.shard(x, mesh, P("data")), sh.shard(y, mesh, P("data"))
    step = ad.jit(ad.value_and_grad(loss), mesh=mesh, in_shardings=([P(), P()], P("data"),
                                                                     P("data")))
    opt = ad.optim.SGD(0.1, momentum=0.9)
    losses: list[float] = []
    out: dict[str, Any] = {"process": sh.process_index(), "processes": sh.process_count(),
                           "local_shards": len(xs.shard_domains),
                           "xla_engines": sum(1 for e in rt.engines() if e.id.kind == "xla"),
                           "mesh_engines": len(mesh.engines)}
    for k in range(10):
        if mode.startswith("die") and pid == int(mode[3:]) and k == 3:
            os.kill(os.getpid(), signal.SIGKILL)  # killed mid-run: no goodbye to the others
        with ledger.capture() as rec:
            value, grads = step(params, xs, ys)
        if k == 1:
            out["step_allocations"] = sum(n for n in rec.allocations.values())
            out["step_copies"] = {r.value: n for r, n in rec.copies.items()}
        losses.append(float(value.gather().to_numpy()))
        opt.step(params, grads)
        del grads, value
        sys.stderr.write(f"process {pid} step {k}\n")
        sys.stderr.flush()
        if mode.startswith("die"):
            time.sleep(1.0)
    out["losses"] = losses
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
