"""Run by tests/xla/test_sharded.py in a subprocess with 4 host devices (XLA_FLAGS set by
the caller before jax is imported): three training scenarios on a mesh against the same
training on one device, the ledger of one step, printed as one JSON line."""

from __future__ import annotations

import json
import sys
from typing import Any

import jax
import numpy as np
from jax.sharding import PartitionSpec as P

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage import runtime as rt
from tenferro_storage import sharding as sh
from tenferro_storage.errors import ShardingError

jax.config.update("jax_enable_x64", True)
STEPS = 10


def loss(params: Any, x: Any, y: Any) -> Any:
    w1, w2 = params
    return ad.mean((ad.tanh(x @ w1) @ w2 - y) ** 2.0)


def data() -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    w = [rng.normal(size=(4, 8)) * 0.5, rng.normal(size=(8, 2)) * 0.5]
    x = rng.normal(size=(32, 4))
    return w, x, np.sin(x[:, :2])


def make_opt(kind: str) -> Any:
    return ad.optim.Adam(0.05) if kind == "adam" else ad.optim.SGD(0.1, momentum=0.9)


def single(kind: str) -> list[np.ndarray]:
    w, x, y = data()
    params = [ts.from_numpy(a) for a in w]
    opt = make_opt(kind)
    g = ad.jit(ad.grad(loss), engine="xla")
    for _ in range(STEPS):
        grads = g(params, x, y)
        host = [rt.download(t) for t in grads]
        opt.step(params, host)
    return [p.to_numpy() for p in params]


def events_by_domain(rec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for e in rec.events:
        if e.kind.name == "ALLOCATE":
            domain = e.operation.rsplit("@", 1)[-1]
            key = "scratch" if " scratch @" in e.operation else e.reason.value
            out.setdefault(domain, {}).setdefault(key, 0)
            out[domain][key] += 1
    return out


def sharded(kind: str, mesh: sh.Mesh, specs: list[Any], batch: Any, grad_specs: Any) -> dict:
    w, x, y = data()
    params = [sh.shard(a, mesh, s) for a, s in zip(w, specs, strict=True)]
    xs, ys = sh.shard(x, mesh, batch), sh.shard(y, mesh, batch)
    opt = make_opt(kind)
    g = ad.jit(ad.grad(loss), mesh=mesh, in_shardings=(specs, batch, batch),
               out_shardings=grad_specs)
    record: dict[str, Any] = {}
    for k in range(STEPS):
        if k == 1:
            with ledger.capture() as rec:
                grads = g(params, xs, ys)
            record["grad_copies"] = {r.value: n for r, n in rec.copies.items()}
            record["grad_allocations"] = events_by_domain(rec)
            record["grad_domains"] = [list(t.shard_domains) for t in grads]
            with ledger.capture() as rec:
                opt.step(params, grads)
            record["step_copies"] = {r.value: n for r, n in rec.copies.items()}
            record["step_allocations"] = events_by_domain(rec)
        else:
            grads = g(params, xs, ys)
            opt.step(params, grads)
        del grads
    # every live byte of every device domain is a shard some owner holds
    live = {d: 0 for d in mesh.domains}
    for t in [*params, xs, ys]:
        for i, d in enumerate(t.shard_domains):
            view = t.shard_view(i)
            live[d] += view.nbytes
            view.release()
    domains = {p.domain.name: p.domain for _, p in mesh._local().values()}
    record["live_matches_owned"] = all(
        sum(domains[d]._live.values()) == n for d, n in live.items())
    record["params"] = [p.gather().to_numpy().tolist() for p in params]
    record["specs"] = [str(p.spec) for p in params]
    hlo = g.lower(params, xs, ys).executable.as_text()
    record["all_reduces"] = hlo.count("all-reduce(") + hlo.count("all-reduce-start(")
    return record


def storage(mesh: sh.Mesh) -> dict[str, Any]:
    """Upload, gather, reshard and a refused layout on 4 devices, with their ledgers."""
    out: dict[str, Any] = {}
    x = np.arange(48.0).reshape(8, 6)
    with ledger.capture() as rec:
        s = sh.shard(x, mesh, P("data"))
    out["shard"] = [{r.value: n for r, n in rec.allocations.items()},
                    {r.value: n for r, n in rec.copies.items()}, list(s.shard_domains)]
    with ledger.capture() as rec:
        host = s.gather()
    out["gather"] = [{r.value: n for r, n in rec.copies.items()},
                     bool(np.array_equal(host.to_numpy(), x))]
    with ledger.capture() as rec:
        r = s.reshard(P())
    out["reshard"] = [{k.value: n for k, n in rec.allocations.items()},
                      {k.value: n for k, n in rec.copies.items()}, str(r.spec)]
    with ledger.capture() as rec:
        host = r.gather()  # four replicas, one read
    out["gather_replicated"] = [{k.value: n for k, n in rec.copies.items()},
                                bool(np.array_equal(host.to_numpy(), x))]
    f = ad.jit(lambda a: a * 2.0, mesh=mesh, in_shardings=(P("data"),), out_shardings=P("data"))
    two = ad.jit(lambda b, a: a * b, mesh=mesh, in_shardings=(P(), P("data")))
    with ledger.capture() as rec:
        try:
            f(r)
        except ShardingError as exc:
            out["refused"] = str(exc)
        try:  # the numpy argument before it is not uploaded either
            two(np.ones((8, 6)), r)
        except ShardingError as exc:
            out["refused_two"] = str(exc)
    out["refused_events"] = len(rec.events)
    with ledger.capture() as rec:
        y = f(s)
    out["elementwise"] = [{k.value: n for k, n in rec.copies.items()},
                          bool(np.array_equal(y.gather().to_numpy(), 2 * x))]
    with ledger.capture() as rec:
        del s, r, y
    out["released"] = sum(1 for e in rec.events if e.kind.name == "RELEASE")
    return out


def main() -> None:
    devices = np.array(jax.devices())
    assert devices.size == 4, devices
    out: dict[str, Any] = {}
    data_mesh = sh.Mesh(devices, ("data",))
    out["storage"] = storage(data_mesh)
    out["single_adam"] = [a.tolist() for a in single("adam")]
    out["single_sgd"] = [a.tolist() for a in single("sgd")]
    # data parallel, parameters and gradients sharded over the batch axis (ZeRO-style)
    out["dp_sharded"] = sharded("adam", data_mesh, [P("data"), P("data")], P("data"),
                                [P("data"), P("data")])
    # data parallel, batch sharded, parameters and gradients replicated
    out["dp_replicated"] = sharded("sgd", data_mesh, [P(), P()], P("data"), P())
    # model parallel: the first weight split on its output axis, batch over "data"
    grid = sh.Mesh(devices.reshape(2, 2), ("data", "model"))
    mp = [P(None, "model"), P("model", None)]
    out["model_parallel"] = sharded("sgd", grid, mp, P("data"), mp)
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
