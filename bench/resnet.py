"""50-block residual MLP training step, width 64, batch 256, float32; plain and checkpointed.

Block ``i``: ``h <- h + tanh(h @ W_i + b_i)``; loss ``mean(h^2)`` after 50 blocks; one step
= loss + the gradients of all 100 parameters.  "checkpointed" wraps every block in the
framework's checkpoint (tenferro ``ad.checkpoint``, ``torch.utils.checkpoint``,
``jax.checkpoint``): the interior (``h @ W + b``, ``tanh``) is recomputed in backward.
Frameworks: hand-written numpy (plain only; the reference), tenferro, PyTorch eager, HIPS
autograd (plain) and JAX (jit) when installed.  Single-threaded, interleaved rounds,
medians (``_harness``).

    python bench/resnet.py [--rounds 7] [--number 3]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # first: pins BLAS threads before numpy loads
import numpy as np

BLOCKS, WIDTH, BATCH = 50, 64, 256
F32 = np.float32


def data() -> tuple[list[Any], Any]:
    """``[W_0, b_0, ..., W_49, b_49]`` and the input batch ``(256, 64)``."""
    rng = np.random.default_rng(0)
    p: list[Any] = []
    for _ in range(BLOCKS):
        p.append((rng.normal(size=(WIDTH, WIDTH)) * (0.5 / np.sqrt(WIDTH))).astype(F32))
        p.append((0.01 * rng.normal(size=WIDTH)).astype(F32))
    return p, rng.normal(size=(BATCH, WIDTH)).astype(F32)


def numpy_case() -> Callable[[], Any]:
    p, x = data()

    def step() -> Any:
        hs, ts_ = [x], []
        h = x
        for i in range(BLOCKS):
            t = np.tanh(h @ p[2 * i] + p[2 * i + 1])
            ts_.append(t)
            h = h + t
            hs.append(h)
        loss = float(np.mean(h * h))
        g = h * F32(2.0 / h.size)
        grads: list[Any] = [None] * (2 * BLOCKS)
        for i in reversed(range(BLOCKS)):
            gz = g * (1 - ts_[i] * ts_[i])
            grads[2 * i] = hs[i].T @ gz
            grads[2 * i + 1] = gz.sum(0)
            g = g + gz @ p[2 * i].T
        return loss, grads

    return step


def tenferro_cases() -> dict[str, Callable[[], Any]]:
    import tenferro_ad as ad
    import tenferro_storage as ts

    p, x = data()
    tp = [ts.from_numpy(a) for a in p]
    tx = ts.from_numpy(x)

    def block(h: Any, w: Any, b: Any) -> Any:
        return h + ad.tanh(h @ w + b)

    cblock = ad.checkpoint(block)

    def make(blk: Callable[..., Any]) -> Callable[[], Any]:
        def loss(q: list[Any], xb: Any) -> Any:
            h = xb
            for i in range(BLOCKS):
                h = blk(h, q[2 * i], q[2 * i + 1])
            return ad.mean(h * h)

        vg = ad.value_and_grad(loss)

        def step(copy: bool = False) -> Any:
            v, g = vg(tp, tx)
            with ts.borrow_arrays(g) as arrays:  # all 100 gradients as numpy, zero-copy
                grads = [a.copy() for a in arrays] if copy else len(arrays)
            return v.item(), grads  # the loss as a Python float (no copy; PyTorch: .item())

        return step

    return {"tenferro": make(block), "tenferro checkpointed": make(cblock)}


def torch_cases(torch: Any) -> dict[str, Callable[[], Any]]:
    from torch.utils.checkpoint import checkpoint

    p, x = data()
    tp = [torch.tensor(a, requires_grad=True) for a in p]
    tx = torch.tensor(x)

    def block(h: Any, w: Any, b: Any) -> Any:
        return h + torch.tanh(h @ w + b)

    def make(ckpt: bool) -> Callable[[], Any]:
        def step() -> Any:
            for t in tp:
                t.grad = None
            h = tx
            for i in range(BLOCKS):
                w, b = tp[2 * i], tp[2 * i + 1]
                h = checkpoint(block, h, w, b, use_reentrant=False) if ckpt else block(h, w, b)
            v = (h * h).mean()
            v.backward()
            return v.item(), [t.grad.numpy() for t in tp]

        return step

    return {"PyTorch eager": make(False), "PyTorch checkpointed": make(True)}


def autograd_case(autograd: Any) -> Callable[[], Any]:
    import autograd.numpy as anp  # type: ignore[import-untyped]

    p, x = data()

    def loss(q: list[Any]) -> Any:
        h = x
        for i in range(BLOCKS):
            h = h + anp.tanh(h @ q[2 * i] + q[2 * i + 1])
        return anp.mean(h * h)

    vg = autograd.value_and_grad(loss)

    def step() -> Any:
        v, g = vg(p)
        return float(v), g

    return step


def jax_cases(jax: Any) -> dict[str, Callable[[], Any]]:
    import jax.numpy as jnp

    p, x = data()
    jp = [jnp.asarray(a) for a in p]
    jx = jnp.asarray(x)

    def block(h: Any, w: Any, b: Any) -> Any:
        return h + jnp.tanh(h @ w + b)

    def make(blk: Callable[..., Any]) -> Callable[[], Any]:
        def loss(q: list[Any]) -> Any:
            h = jx
            for i in range(BLOCKS):
                h = blk(h, q[2 * i], q[2 * i + 1])
            return jnp.mean(h * h)

        vg = jax.jit(jax.value_and_grad(loss))

        def step() -> Any:
            v, g = vg(jp)
            return float(v), [np.asarray(t) for t in g]

        return step

    return {"JAX (jit)": make(block), "JAX (jit) checkpointed": make(jax.checkpoint(block))}


def cases() -> dict[str, Callable[[], Any]]:
    out: dict[str, Callable[[], Any]] = {H.BASE: numpy_case(), **tenferro_cases()}
    torch = H.torch_or_none()
    if torch is not None:
        out.update(torch_cases(torch))
    autograd = H.autograd_or_none()
    if autograd is not None:
        out["HIPS autograd"] = autograd_case(autograd)
    jax = H.jax_or_none()
    if jax is not None:
        out.update(jax_cases(jax))
    return out


def check(cs: dict[str, Callable[[], Any]]) -> None:
    """Every variant computes the same loss and gradients (float32 tolerances)."""
    v0, g0 = cs[H.BASE]()[:2]
    for name, fn in cs.items():
        call: Any = fn
        v, g = (call(copy=True) if name.startswith("tenferro") else call())[:2]
        np.testing.assert_allclose(v, v0, rtol=1e-4, err_msg=name)
        for a, b in zip(g, g0, strict=True):
            np.testing.assert_allclose(a, b, rtol=2e-3, atol=1e-5, err_msg=name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--number", type=int, default=3)
    ap.add_argument(
        "--cpu", action="store_true", help="time CPU time of this process (steadier under load)"
    )
    args = ap.parse_args()
    cs = cases()
    check(cs)
    res = H.interleaved_ms(
        cs, rounds=args.rounds, number=args.number, clock=H.clock(args.cpu)
    )
    H.report(
        f"residual MLP step, {BLOCKS} blocks, width {WIDTH}, batch {BATCH}, float32 "
        f"(commit {H.commit()})",
        res,
    )


if __name__ == "__main__":
    main()
