"""The 4x4 chain's gradient (``compiled.py``'s smallest workload) called back to back, as a
training loop calls its step: ``ad.jit`` on the XLA engine (an owner in, an owner out,
released at once) against JAX ``jit`` (a resident array in, ``block_until_ready``), each in
its own loop of ``--calls`` calls after a warm-up, alternating ``--rounds`` times; per call,
the median CPU time (this process, XLA's threads included) and wall time.

``compiled.py`` times a few calls per case between the other frameworks' cases, so its
figures for a ~20 us call include cold caches and XLA's worker threads waking up or spinning
on either side of the timed window; this loop measures the steady state.

    python bench/xla_steady_state.py [--calls 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # first: pins BLAS threads before numpy loads
import numpy as np
import per_op as P
import traced_chain as T

import tenferro_ad as ad
import tenferro_storage as ts


def _per_call(f: Callable[[], object], calls: int) -> tuple[float, float]:
    """(CPU us, wall us) per call of ``calls`` back-to-back calls of ``f``."""
    for _ in range(min(calls, 200)):
        f()
    c, w = time.process_time(), time.perf_counter()
    for _ in range(calls):
        f()
    return ((time.process_time() - c) / calls * 1e6, (time.perf_counter() - w) / calls * 1e6)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if H.jax_or_none() is None:
        print("jax is not installed: no XLA engine to measure")
        return
    x0 = np.random.default_rng(0).normal(size=P.SHAPE)
    x = ts.from_numpy(x0)
    chain = ad.jit(T._tf_grad(P.KINDS), engine="xla")

    def ours() -> None:
        g = chain(x)
        del g  # released at once: its buffer freed, as a loop drops the last step's result

    theirs = T._jax(x0, P.KINDS)
    assert theirs is not None
    cases = {"tenferro ad.jit (xla)": ours, "JAX jit": theirs}
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
    for _ in range(args.rounds):
        for name, f in cases.items():
            got[name].append(_per_call(f, args.calls))
    print(f"commit {H.commit()}; 50-op chain on 4x4 float64, fwd+bwd; {args.calls} calls per "
          f"loop, median of {args.rounds} loops")
    base = {k: statistics.median(v[k] for v in got["JAX jit"]) for k in (0, 1)}
    for name, runs in got.items():
        cpu = statistics.median(r[0] for r in runs)
        wall = statistics.median(r[1] for r in runs)
        print(f"   {name:24s} CPU {cpu:6.1f} us ({cpu / base[0]:.2f}x JAX)   "
              f"wall {wall:6.1f} us ({wall / base[1]:.2f}x JAX)")


if __name__ == "__main__":
    main()
