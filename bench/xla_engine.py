"""The XLA engine behind ``ad.jit`` against JAX's own ``jax.jit``, in one process on the CPU.

Four workloads (issue 24): the classifier MLP step (784-512-512-10, batch 128, float32,
the six gradients read as numpy), the 50-block residual MLP step (width 64, batch 256,
float32), the 50-op elementwise chain on 4x4 float64 (forward + backward) and a 30-op chain
on 10^6 float64 (gradient).  tenferro takes owners (``ts.from_numpy``: 64-byte aligned,
imported zero-copy) and returns XLA buffers; JAX takes resident device arrays.  Figures:
median ms per call over ``--number`` calls, the ratio tenferro/JAX, and the first call of
each (trace + lowering + compilation) for both.

    python bench/xla_engine.py [--number 30] [--cpu] [--only chain]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts

jax.config.update("jax_enable_x64", True)


CLOCK = time.perf_counter


def _median_ms(f: Callable[[], Any], number: int) -> float:
    times = []
    for _ in range(number):
        t0 = CLOCK()
        jax.block_until_ready(f())
        times.append(CLOCK() - t0)
    return 1e3 * statistics.median(times)


def classifier(m: Any, rng: np.random.Generator) -> tuple[Callable[..., Any], list[Any]]:
    sizes = (784, 512, 512, 10)
    ws = [rng.normal(size=(a, b)).astype(np.float32) * 0.05 for a, b in itertools.pairwise(sizes)]
    bs = [np.zeros(b, np.float32) for b in sizes[1:]]
    x = rng.normal(size=(128, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]

    def loss(params: Any, x: Any, y: Any) -> Any:
        h = x
        for i in range(3):
            h = h @ params[2 * i] + params[2 * i + 1]
            if i < 2:
                h = m.maximum(h, 0.0)
        z = h - m.max(h, axis=1, keepdims=True)
        logp = z - m.log(m.sum(m.exp(z), axis=1, keepdims=True))
        return -m.sum(logp * y) / 128.0

    params = [p for wb in zip(ws, bs, strict=True) for p in wb]
    return loss, [params, x, y]


def residual(m: Any, rng: np.random.Generator) -> tuple[Callable[..., Any], list[Any]]:
    ws = [rng.normal(size=(64, 64)).astype(np.float32) * 0.05 for _ in range(50)]
    x = rng.normal(size=(256, 64)).astype(np.float32)

    def loss(ws: Any, x: Any) -> Any:
        h = x
        for w in ws:
            h = h + m.tanh(h @ w)
        return m.sum(h * h)

    return loss, [ws, x]


def chain(n: int, size: tuple[int, ...]) -> Callable[..., Any]:
    def make(m: Any, rng: np.random.Generator) -> tuple[Callable[..., Any], list[Any]]:
        def loss(x: Any) -> Any:
            for k in range(n):
                x = m.sin(x) * 0.9 if k % 3 == 0 else m.tanh(x) + 0.1 if k % 3 == 1 \
                    else m.exp(x * 0.1)
            return m.sum(x)

        return loss, [rng.normal(size=size)]

    return make


WORKLOADS = {
    "classifier step (+ read grads)": classifier,
    "residual MLP 50 blocks": residual,
    "50-op chain 4x4 fwd+bwd": chain(50, (4, 4)),
    "30-op chain 1e6 grad": chain(30, (1_000_000,)),
}


def _read(tree: Any) -> None:
    for leaf in jax.tree_util.tree_leaves(tree):
        np.asarray(leaf) if not isinstance(leaf, ts.Tensor) else leaf._desc.readonly()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--number", type=int, default=30)
    parser.add_argument("--cpu", action="store_true",
                        help="process CPU time instead of wall time (less disturbed by load)")
    parser.add_argument("--only", default="", help="run the workloads whose name has this")
    args = parser.parse_args()
    global CLOCK
    if args.cpu:
        CLOCK = time.process_time
    print(f"{'workload':32} {'tenferro xla':>13} {'jax.jit':>9} {'ratio':>6}"
          f" {'compile tf':>11} {'compile jax':>12}")
    for name, make in WORKLOADS.items():
        if args.only not in name:
            continue
        f_ad, xs = make(ad, np.random.default_rng(0))
        f_jx, _ = make(jnp, np.random.default_rng(0))
        nargs = len(xs)
        owners = jax.tree_util.tree_map(ts.from_numpy, xs)
        resident = jax.tree_util.tree_map(jnp.asarray, xs)
        grad_ad = ad.jit(ad.value_and_grad(f_ad, argnums=tuple(range(nargs))), engine="xla")
        grad_jx = jax.jit(jax.value_and_grad(f_jx, argnums=tuple(range(nargs))))
        t0 = time.perf_counter()
        _read(grad_ad(*owners))
        c_ad = time.perf_counter() - t0
        t0 = time.perf_counter()
        _read(grad_jx(*resident))
        c_jx = time.perf_counter() - t0

        def run_ad(g: Any = grad_ad, a: Any = owners) -> Any:
            _read(g(*a))
            return 0

        def run_jx(g: Any = grad_jx, a: Any = resident) -> Any:
            _read(g(*a))
            return 0

        t_ad, t_jx = [], []
        for _ in range(3):  # interleaved rounds
            t_ad.append(_median_ms(run_ad, args.number))
            t_jx.append(_median_ms(run_jx, args.number))
        a, j = statistics.median(t_ad), statistics.median(t_jx)
        print(f"{name:32} {a:10.3f} ms {j:6.3f} ms {a / j:6.2f} {c_ad:9.2f} s {c_jx:10.2f} s")


if __name__ == "__main__":
    main()
