"""AD overhead side by side: per-op chain, MLP gradient step, large elementwise chain.

For tenferro, hand-written numpy and (when installed) HIPS autograd, PyTorch eager and
JAX (op-by-op and jit), each as a ratio to hand-written numpy measured in the same run.
Targets (reported, never asserted): per-op at or below PyTorch eager (HIPS autograd is
the floor); MLP step and large chain within 1.05x hand-written numpy.

    python bench/ad_overhead.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

# One thread everywhere (PyTorch is pinned with set_num_threads(1)): on 2 shared cores,
# BLAS threads fighting each other make every framework's timing meaningless.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import per_op


def best_ms(fn: Callable[[], Any], number: int, repeat: int) -> float:
    fn()
    gc.collect()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e3


# -- MLP step 784-512-512-10, batch 128, float32 ---------------------------------------------------
def mlp_cases() -> dict[str, Callable[[], Any]]:
    rng = np.random.default_rng(0)
    dims = [784, 512, 512, 10]
    ws = [
        (rng.normal(size=(a, b)) / np.sqrt(a)).astype(np.float32)
        for a, b in zip(dims[:-1], dims[1:], strict=True)  # noqa: RUF007
    ]
    xb = rng.normal(size=(128, 784)).astype(np.float32)
    yb = rng.normal(size=(128, 10)).astype(np.float32)

    def numpy_step() -> Any:
        h1p = xb @ ws[0]
        h1 = np.tanh(h1p)
        h2 = np.tanh(h1 @ ws[1])
        o = h2 @ ws[2]
        d = o - yb
        loss = np.mean(d * d)
        go = d * np.float32(2.0 / d.size)
        g2 = h2.T @ go
        gh2 = (go @ ws[2].T) * (1 - h2 * h2)
        g1 = h1.T @ gh2
        gh1 = (gh2 @ ws[1].T) * (1 - h1 * h1)
        g0 = xb.T @ gh1
        return loss, g0, g1, g2

    import tenferro_ad as ad
    import tenferro_storage as ts

    tw = [ts.from_numpy(w) for w in ws]
    tx, ty = ts.from_numpy(xb), ts.from_numpy(yb)

    def tf_loss(p: list[Any], x: Any, y: Any) -> Any:
        h = ad.tanh(ad.tanh(x @ p[0]) @ p[1])
        d = h @ p[2] - y
        return ad.mean(d * d)

    vg = ad.value_and_grad(tf_loss)
    cases: dict[str, Callable[[], Any]] = {
        "numpy (hand-written)": numpy_step,
        "tenferro": lambda: vg(tw, tx, ty),
    }
    try:
        import torch  # type: ignore[import-not-found]

        torch.set_num_threads(1)
        pw = [torch.tensor(w, requires_grad=True) for w in ws]
        px, py = torch.tensor(xb), torch.tensor(yb)

        def torch_step() -> Any:
            for w in pw:
                w.grad = None
            h = torch.tanh(torch.tanh(px @ pw[0]) @ pw[1])
            d = h @ pw[2] - py
            (d * d).mean().backward()

        cases["PyTorch eager"] = torch_step
    except ImportError:
        pass
    try:
        import autograd  # type: ignore[import-untyped]
        import autograd.numpy as anp  # type: ignore[import-untyped]

        def a_loss(p: list[Any]) -> Any:
            h = anp.tanh(anp.tanh(xb @ p[0]) @ p[1])
            d = h @ p[2] - yb
            return anp.mean(d * d)

        ag = autograd.grad(a_loss)
        cases["HIPS autograd"] = lambda: ag(ws)
    except ImportError:
        pass
    try:
        import jax
        import jax.numpy as jnp

        def j_loss(p: list[Any]) -> Any:
            h = jnp.tanh(jnp.tanh(xb @ p[0]) @ p[1])
            d = h @ p[2] - yb
            return jnp.mean(d * d)

        jw = [jnp.asarray(w) for w in ws]
        jg = jax.jit(jax.value_and_grad(j_loss))
        cases["jax (jit)"] = lambda: jax.block_until_ready(jg(jw))
    except ImportError:
        pass
    return cases


# -- large elementwise chain (10^6 elements) ------------------------------------------------------
def chain_cases() -> dict[str, Callable[[], Any]]:
    x0 = np.random.default_rng(1).normal(size=10**6)

    def numpy_chain() -> Any:
        a = np.sin(x0)
        b = a * x0
        c = np.tanh(b)
        s = c.sum()
        gc_ = 1 - c * c
        gb = gc_
        ga = gb * x0
        gx = gb * a + ga * np.cos(x0)
        return s, gx

    import tenferro_ad as ad
    import tenferro_storage as ts

    tx = ts.from_numpy(x0)
    g = ad.value_and_grad(lambda x: ad.sum(ad.tanh(ad.sin(x) * x)))
    cases: dict[str, Callable[[], Any]] = {
        "numpy (hand-written)": numpy_chain,
        "tenferro": lambda: g(tx),
    }
    try:
        import torch  # type: ignore[import-not-found]

        px = torch.tensor(x0)

        def torch_chain() -> Any:
            x = px.detach().requires_grad_(True)
            torch.tanh(torch.sin(x) * x).sum().backward()

        cases["PyTorch eager"] = torch_chain
    except ImportError:
        pass
    return cases


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    rep = 3 if args.quick else 5
    per = per_op.collect(50 if args.quick else 200, rep)
    base = per["numpy (hand-written)"]
    print(f"1) per-op: {per_op.N_OPS}-op chain, 4x4 float64, fwd+bwd (us/op, ratio to numpy)")
    for name, us in per.items():
        print(f"   {name:24s} {us:9.2f} us/op  {us / base:7.2f}x")
    for title, cases, number in (
        (
            "2) MLP step 784-512-512-10, batch 128, float32 (ms)",
            mlp_cases(),
            3 if args.quick else 10,
        ),
        ("3) large chain, 10^6 float64, fwd+bwd (ms)", chain_cases(), 3 if args.quick else 10),
    ):
        res = {k: best_ms(f, number, rep) for k, f in cases.items()}
        b = res["numpy (hand-written)"]
        print(title)
        for name, ms in res.items():
            print(f"   {name:24s} {ms:9.3f} ms     {ms / b:7.2f}x")


if __name__ == "__main__":
    main()
