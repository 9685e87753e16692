"""Where a training step's time goes: bookkeeping against kernels, per framework.

Runs the classifier MLP (``mlp_classifier.py``) and the residual MLP (``resnet.py``) twice:
at *toy* size (width 4, batch 2: every array op costs about a numpy call, so a
framework's step minus hand-written numpy's is its bookkeeping -- dispatch, tape,
ownership) and at *full* size (the benchmarks' own shapes).  For each framework it prints

* ``bookkeeping`` = toy step - numpy's toy step,
* ``excess`` = full step - numpy's full step,
* ``kernel gain`` = bookkeeping - excess: how much faster than numpy's this framework's
  kernels and allocator run the full-size arrays (negative: slower, e.g. bookkeeping that
  costs more when the arrays have evicted it from the caches).

A framework whose kernels are numpy's (tenferro) can only match a framework with faster
kernels by keeping its bookkeeping below that framework's ``excess``.  Same harness as the
workload scripts (interleaved rounds, medians, one thread).

    python bench/bookkeeping.py [--cpu] [--rounds 5]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # first: pins BLAS threads before numpy loads
import mlp_classifier as M
import resnet as R

TOY = {"mlp": {"DIMS": (4, 4, 4, 3), "BATCH": 2}, "resnet": {"WIDTH": 4, "BATCH": 2}}
MODULES: dict[str, Any] = {"mlp": M, "resnet": R}


def _cases(name: str, toy: bool) -> dict[str, Callable[[], Any]]:
    """numpy, tenferro and (when installed) PyTorch eager for one workload and size."""
    mod = MODULES[name]
    saved = {k: getattr(mod, k) for k in TOY[name]}
    if toy:
        for k, v in TOY[name].items():
            setattr(mod, k, v)
    try:
        out: dict[str, Callable[[], Any]] = {
            H.BASE: mod.numpy_case(),
            "tenferro": mod.tenferro_cases()["tenferro"],
        }
        torch = H.torch_or_none()
        if torch is not None:
            out["PyTorch eager"] = (
                mod.torch_case(torch) if name == "mlp" else mod.torch_cases(torch)["PyTorch eager"]
            )
        return out
    finally:
        for k, v in saved.items():
            setattr(mod, k, v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cpu", action="store_true", help="time this process's CPU time")
    args = ap.parse_args()
    clock = H.clock(args.cpu)
    print(f"bookkeeping against kernels, ms per step (commit {H.commit()})")
    for name in MODULES:
        toy = H.interleaved_ms(_cases(name, True), rounds=args.rounds, number=20, clock=clock)
        full = H.interleaved_ms(_cases(name, False), rounds=args.rounds, number=3, clock=clock)
        print(f"{name}:")
        print(f"   {'':24s}{'toy':>9s}{'full':>9s}{'bookkeeping':>13s}{'excess':>9s}"
              f"{'kernel gain':>13s}")
        for fw in toy:
            book = toy[fw] - toy[H.BASE]
            excess = full[fw] - full[H.BASE]
            print(f"   {fw:24s}{toy[fw]:9.3f}{full[fw]:9.3f}{book:13.3f}{excess:9.3f}"
                  f"{book - excess:13.3f}")


if __name__ == "__main__":
    main()
