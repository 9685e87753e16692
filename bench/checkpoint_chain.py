"""A 30-op elementwise chain on 10^6 float64 values, plain and in 5 checkpoint segments.

Segment ``s`` (6 ops): ``h <- tanh(sin(0.5 * exp(tanh(sin(h)))))``; five segments, loss
``sum(h)``; one step = loss + the gradient with respect to the input.  "checkpointed"
wraps every segment in the framework's checkpoint (tenferro ``ad.checkpoint``,
``torch.utils.checkpoint`` non-reentrant, ``jax.checkpoint``): backward keeps only the 5
segment inputs and recomputes one segment at a time.

Time: single-threaded, interleaved rounds, medians (``_harness``), as ratios to the
hand-written numpy step.  Memory: each case runs once more in a fresh subprocess (glibc's
mmap threshold fixed at 128 KiB, so freed 8 MB arrays go back to the system at once) and
the figure is the peak resident set during one step minus the resident set before it
(``/proc/self/clear_refs`` resets the high-water mark) -- the same measure for every
framework, cotangent scratch included.  For tenferro the ledger's peak of live
allocations (op outputs and recomputations, no scratch) is printed as well.

    python bench/checkpoint_chain.py [--rounds 5] [--number 2] [--no-memory]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # first: pins BLAS threads before numpy loads
import numpy as np

N = 10**6
SEGMENTS = 5
OPS_PER_SEGMENT = 6
MB = 1e6


def data() -> Any:
    return np.random.default_rng(3).normal(size=N)


def numpy_case() -> Callable[[], Any]:
    x = data()

    def step() -> Any:
        saved: list[tuple[Any, Any, Any, Any, Any]] = []
        h = x
        for _ in range(SEGMENTS):
            a = np.sin(h)
            b = np.tanh(a)
            c = np.exp(b)
            d = c * 0.5
            e = np.sin(d)
            f = np.tanh(e)
            saved.append((h, b, c, d, f))
            del a, e
            h = f
        loss = float(h.sum())
        g = np.ones_like(h)
        for h0, b, c, d, f in reversed(saved):
            g *= 1 - f * f
            g *= np.cos(d)
            g *= 0.5
            g *= c
            g *= 1 - b * b
            g *= np.cos(h0)
        return loss, [g]

    return step


def numpy_checkpointed_case() -> Callable[[], Any]:
    """The arithmetic optimum of checkpointing, by hand: forward keeps the 5 segment
    inputs; backward recomputes, per segment, only the values a derivative reads (the
    last sine and tanh only in the last segment: elsewhere the segment's output is the
    next segment's kept input)."""
    x = data()

    def step() -> Any:
        bounds = [x]
        h = x
        for _ in range(SEGMENTS):
            h = np.tanh(np.sin(0.5 * np.exp(np.tanh(np.sin(h)))))
            bounds.append(h)
        loss = float(h.sum())
        last = bounds.pop()
        g = np.ones_like(x)
        for s in reversed(range(SEGMENTS)):
            h0 = bounds.pop()
            b = np.tanh(np.sin(h0))
            c = np.exp(b)
            d = c * 0.5
            f = np.tanh(np.sin(d)) if s == SEGMENTS - 1 else last
            g *= 1 - f * f
            del f
            g *= np.cos(d)
            g *= 0.5
            g *= c
            g *= 1 - b * b
            g *= np.cos(h0)
            last = h0
        return loss, [g]

    return step


def tenferro_cases() -> dict[str, Callable[[], Any]]:
    import tenferro_ad as ad
    import tenferro_storage as ts

    tx = ts.from_numpy(data())

    def segment(h: Any) -> Any:
        return ad.tanh(ad.sin(0.5 * ad.exp(ad.tanh(ad.sin(h)))))

    csegment = ad.checkpoint(segment)

    def make(seg: Callable[[Any], Any]) -> Callable[[], Any]:
        def loss(h: Any) -> Any:
            for _ in range(SEGMENTS):
                h = seg(h)
            return ad.sum(h)

        vg = ad.value_and_grad(loss)

        def step() -> Any:
            v, g = vg(tx)
            return float(v.to_numpy()), [g.prepare_host().as_array()], g

        return step

    return {"tenferro": make(segment), "tenferro checkpointed": make(csegment)}


def torch_cases(torch: Any) -> dict[str, Callable[[], Any]]:
    from torch.utils.checkpoint import checkpoint

    px = torch.tensor(data())

    def segment(h: Any) -> Any:
        return torch.tanh(torch.sin(0.5 * torch.exp(torch.tanh(torch.sin(h)))))

    def make(ckpt: bool) -> Callable[[], Any]:
        def step() -> Any:
            x = px.detach().requires_grad_(True)
            h = x
            for _ in range(SEGMENTS):
                h = checkpoint(segment, h, use_reentrant=False) if ckpt else segment(h)
            v = h.sum()
            v.backward()
            return v.item(), [x.grad.numpy()]

        return step

    return {"PyTorch eager": make(False), "PyTorch checkpointed": make(True)}


def jax_cases(jax: Any) -> dict[str, Callable[[], Any]]:
    import jax.numpy as jnp

    jx = jnp.asarray(data())

    def segment(h: Any) -> Any:
        return jnp.tanh(jnp.sin(0.5 * jnp.exp(jnp.tanh(jnp.sin(h)))))

    def make(seg: Callable[[Any], Any]) -> Callable[[], Any]:
        def loss(h: Any) -> Any:
            for _ in range(SEGMENTS):
                h = seg(h)
            return jnp.sum(h)

        vg = jax.jit(jax.value_and_grad(loss))

        def step() -> Any:
            v, g = vg(jx)
            return float(v), [np.asarray(g)]

        return step

    return {"JAX (jit)": make(segment), "JAX (jit) checkpointed": make(jax.checkpoint(segment))}


def cases(with_jax: bool = True) -> dict[str, Callable[[], Any]]:
    out: dict[str, Callable[[], Any]] = {
        H.BASE: numpy_case(),
        "numpy checkpointed (hand-written)": numpy_checkpointed_case(),
        **tenferro_cases(),
    }
    torch = H.torch_or_none()
    if torch is not None:
        out.update(torch_cases(torch))
    if with_jax:
        jax = H.jax_or_none()
        if jax is not None:
            out.update(jax_cases(jax))
    return out


def check(cs: dict[str, Callable[[], Any]]) -> None:
    """Every variant computes the same loss and gradient."""
    v0, g0 = cs[H.BASE]()[:2]
    for name, fn in cs.items():
        v, g = fn()[:2]
        np.testing.assert_allclose(v, v0, rtol=1e-10, err_msg=name)
        np.testing.assert_allclose(g[0], g0[0], rtol=1e-9, atol=1e-12, err_msg=name)


def _rss_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(field)  # pragma: no cover


def peak_mb(name: str) -> None:
    """Child process: one warm-up step, then the peak RSS growth during one step (MB)."""
    fn = cases(with_jax=name.startswith("JAX"))[name]
    fn()
    extra = ""
    if name.startswith("tenferro"):
        from tenferro_storage.ledger import capture

        with capture() as rec:
            fn()
        extra = f" ledger={rec.peak_bytes / MB:.1f}"
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = _rss_kb("VmRSS")
    fn()
    print(f"{(_rss_kb('VmHWM') - base) * 1024 / MB:.1f}{extra}")


def memory(names: list[str]) -> None:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072", MALLOC_TRIM_THRESHOLD_="131072")
    print(f"peak memory growth during one step (MB; {N * 8 / MB:.0f} MB per array)")
    for name in names:
        out = subprocess.run(
            [sys.executable, __file__, "--peak", name], env=env, capture_output=True,
            text=True, check=True,
        ).stdout.strip()
        print(f"   {name:34s} {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--number", type=int, default=2)
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--peak", help=argparse.SUPPRESS)
    ap.add_argument(
        "--cpu", action="store_true", help="time CPU time of this process (steadier under load)"
    )
    args = ap.parse_args()
    if args.peak:
        peak_mb(args.peak)
        return
    cs = cases(with_jax=not args.no_jax)
    check(cs)
    res = H.interleaved_ms(
        cs, rounds=args.rounds, number=args.number, clock=H.clock(args.cpu)
    )
    H.report(
        f"{SEGMENTS * OPS_PER_SEGMENT}-op chain on {N} float64, plain and in {SEGMENTS} "
        f"checkpoint segments (commit {H.commit()})",
        res,
    )
    for fw in ("numpy", "tenferro", "PyTorch", "JAX (jit)"):
        plain = res.get({"numpy": H.BASE, "PyTorch": "PyTorch eager"}.get(fw, fw))
        ck = res.get("numpy checkpointed (hand-written)" if fw == "numpy" else f"{fw} checkpointed")
        if plain and ck:
            print(f"   {fw}: checkpointed / plain = {ck / plain:.2f}")
    if not args.no_memory:
        memory(list(cs))


if __name__ == "__main__":
    main()
