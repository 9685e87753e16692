"""Compiled (traced) AD against eager and hand-written numpy, measured in one run.

1) the 50-op small chain of ``per_op.py`` (4x4 float64, forward + backward), per op:
   hand-written numpy, tenferro eager, ``ad.jit(ad.grad(f))`` (every intermediate a
   ledger owner, buffers reused), the same with ``scratch_bytes`` fusion (small
   intermediates as numpy scratch), PyTorch eager and JAX jit when installed;
2) a 30-op chain on 10^6 float64 (same op mix, forward + backward): time and peak memory
   -- the ledger's peak and ``OPERATION_OUTPUT`` count of one call, and tracemalloc's peak
   (numpy-level, covers numpy and tenferro) -- for eager, compiled with buffer reuse, and
   compiled without it;
3) compile time per signature (trace + transform + compile, first call of a signature).

    python bench/traced_chain.py [--rounds 5] [--number 40] [--big-number 3]
"""

from __future__ import annotations

import argparse
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as h
import numpy as np
import per_op

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage import AllocationReason, ledger

BIG_OPS = 30
BIG_N = 10**6
BIG_KINDS = [["sin", "tanh", "mul", "add", "cos"][i % 5] for i in range(BIG_OPS - 1)]  # + sum


def _tf_grad(kinds: list[str]) -> Callable[[Any], Any]:
    fns = {"sin": ad.sin, "tanh": ad.tanh, "cos": ad.cos}
    return ad.grad(lambda x: ad.sum(per_op.chain(x, fns, kinds)))


def _torch(x0: np.ndarray[Any, Any], kinds: list[str]) -> Callable[[], Any] | None:
    torch = h.torch_or_none()
    if torch is None:
        return None
    px = torch.tensor(x0)
    fns = {"sin": torch.sin, "tanh": torch.tanh, "cos": torch.cos}

    def run() -> Any:
        x = px.detach().requires_grad_(True)
        per_op.chain(x, fns, kinds).sum().backward()
        return x.grad

    return run


def _jax(x0: np.ndarray[Any, Any], kinds: list[str]) -> Callable[[], Any] | None:
    jax = h.jax_or_none()
    if jax is None:
        return None
    import jax.numpy as jnp

    fns = {"sin": jnp.sin, "tanh": jnp.tanh, "cos": jnp.cos}
    g = jax.jit(jax.grad(lambda x: jnp.sum(per_op.chain(x, fns, kinds))))
    jx = jnp.asarray(x0)
    g(jx).block_until_ready()
    return lambda: g(jx).block_until_ready()


def cases(x0: np.ndarray[Any, Any], kinds: list[str], fused: bool) -> dict[str, Any]:
    x = ts.from_numpy(x0)
    eager = _tf_grad(kinds)
    compiled = ad.jit(_tf_grad(kinds))
    plain = ad.jit(_tf_grad(kinds), reuse=False)
    out: dict[str, Any] = {
        h.BASE: per_op.numpy_fwd_bwd(x0, kinds),
        "tenferro eager": lambda: eager(x),
        "tenferro jit (buffer reuse)": lambda: compiled(x),
        "tenferro jit (no reuse)": lambda: plain(x),
    }
    if fused:
        small = ad.jit(_tf_grad(kinds), scratch_bytes=4096)
        out["tenferro jit (scratch_bytes=4096)"] = lambda: small(x)
    for name, fn in (("PyTorch eager", _torch(x0, kinds)), ("JAX jit", _jax(x0, kinds))):
        if fn is not None:
            out[name] = fn
    want = per_op.numpy_fwd_bwd(x0, kinds)()
    for name, fn in out.items():  # every case computes the same gradient
        got = fn()
        got = got.to_numpy() if hasattr(got, "to_numpy") else np.asarray(got)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, err_msg=name)
    return out


def memory(fn: Callable[[], Any]) -> tuple[int, int, int]:
    """(ledger peak bytes, OPERATION_OUTPUT allocations, tracemalloc peak bytes) of a call."""
    fn()
    with ledger.capture() as rec:
        r = fn()
    del r
    tracemalloc.start()
    r = fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del r
    return rec.peak_bytes, rec.allocations[AllocationReason.OPERATION_OUTPUT], peak


def compile_times() -> list[tuple[str, float, int]]:
    """Seconds of the first call per signature (trace + grad transform + compile)."""
    rows = []
    for label, shape, kinds in (
        (f"grad, {per_op.N_OPS}-op chain, 4x4", per_op.SHAPE, per_op.KINDS),
        (f"grad, {BIG_OPS}-op chain, 10^6", (BIG_N,), BIG_KINDS),
        (f"grad, {per_op.N_OPS}-op chain, 8x8 (new signature)", (8, 8), per_op.KINDS),
    ):
        jf = ad.jit(_tf_grad(kinds))
        entry = jf.lower(np.zeros(shape))
        rows.append((label, entry.compile_seconds, len(entry.program.instructions)))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--number", type=int, default=40)
    p.add_argument("--big-number", type=int, default=3)
    args = p.parse_args()
    print(f"commit {h.commit()}")

    small = cases(np.random.default_rng(0).normal(size=per_op.SHAPE), per_op.KINDS, True)
    res = h.interleaved_ms(small, rounds=args.rounds, number=args.number)
    b = res[h.BASE]
    print(f"1) {per_op.N_OPS}-op chain, {per_op.SHAPE} float64, fwd+bwd: us/op, ratio to numpy")
    for name, ms in res.items():
        print(f"   {name:36s} {ms * 1e3 / per_op.N_OPS:8.2f} us/op  {ms / b:7.2f}x")

    big = cases(np.random.default_rng(1).normal(size=BIG_N), BIG_KINDS, False)
    res = h.interleaved_ms(big, rounds=args.rounds, number=args.big_number)
    b = res[h.BASE]
    print(f"2) {BIG_OPS}-op chain, 10^6 float64, fwd+bwd: ms, ratio to numpy; peak memory")
    print(f"   {'':36s} {'ms':>9s}  {'ratio':>7s}  {'ledger peak':>12s} {'op allocs':>9s} "
          f"{'tracemalloc peak':>16s}")
    for name, ms in res.items():
        mem = ""
        if name.startswith(("tenferro", "numpy")):
            lp, n_alloc, tp = memory(big[name])
            led = f"{lp / 2**20:9.1f} MiB {n_alloc:9d}" if name.startswith("tenferro") else " " * 23
            mem = f"{led} {tp / 2**20:13.1f} MiB"
        print(f"   {name:36s} {ms:9.2f}  {ms / b:6.2f}x  {mem}")

    print("3) compile time per signature (first call: trace + grad + compile)")
    for label, sec, n in compile_times():
        print(f"   {label:44s} {sec * 1e3:8.1f} ms  ({n} instructions)")


if __name__ == "__main__":
    main()
