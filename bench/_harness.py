"""Shared timing helpers for the workload benchmarks (gp, mlp_classifier, resnet).

Importing this module pins BLAS/OpenMP to one thread *before* numpy loads (PyTorch is
pinned with ``set_num_threads(1)`` by :func:`torch_or_none`), so every framework runs
single-threaded.  Timing is interleaved: each round runs every case ``number`` times in
turn, and the reported figure is the median over rounds -- slow drifts of a shared
machine hit every framework alike instead of whichever ran last.
"""

from __future__ import annotations

import gc
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

BASE = "numpy (hand-written)"


def torch_or_none() -> Any:
    """``torch`` pinned to one thread, or ``None`` when it is not installed."""
    try:
        import torch  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    torch.set_num_threads(1)
    return torch


def autograd_or_none() -> Any:
    """HIPS ``autograd``, or ``None`` when it is not installed."""
    try:
        import autograd  # type: ignore[import-untyped]
    except ImportError:
        return None
    return autograd


def jax_or_none() -> Any:
    """``jax`` (x64 enabled, CPU), or ``None`` when it is not installed."""
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)  # type: ignore[no-untyped-call,unused-ignore]
    return jax


def interleaved_ms(
    cases: dict[str, Callable[[], Any]],
    *,
    rounds: int = 7,
    number: int = 5,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Median over ``rounds`` of the mean milliseconds per call of every case.

    Each case is called once first (warm-up, jit compilation).  Within a round the cases
    run one after another, ``number`` timed calls each after one untimed call (the first
    call after another framework ran pays for its caches and allocator state, whichever
    framework it is).  Garbage collection is run between cases and disabled while one is
    timed (as ``timeit`` does).  ``clock``: wall time by
    default; ``time.process_time`` (this process's CPU time) is steadier on a machine
    other processes load (every case is single-threaded).
    """
    for fn in cases.values():
        fn()
    samples: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            gc.collect()
            gc.disable()
            try:
                fn()  # untimed: this case's caches back after the previous case's
                t0 = clock()
                for _ in range(number):
                    fn()
                dt = clock() - t0
            finally:
                gc.enable()
            samples[name].append(dt / number * 1e3)
    return {k: statistics.median(v) for k, v in samples.items()}


def clock(cpu: bool) -> Callable[[], float]:
    """``time.process_time`` when ``cpu`` (the ``--cpu`` flag), else ``time.perf_counter``."""
    return time.process_time if cpu else time.perf_counter


def report(title: str, res: dict[str, float], base: str = BASE) -> None:
    """Print milliseconds and the ratio to ``base`` (when present) for each case."""
    b = res.get(base)
    print(title)
    for name, ms in res.items():
        ratio = f"{ms / b:7.2f}x" if b else ""
        print(f"   {name:34s} {ms:9.3f} ms  {ratio}")


def commit() -> str:
    """The repository's current commit hash (``+dirty`` when the tree has changes)."""
    root = Path(__file__).resolve().parent.parent
    try:
        h = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
            text=True, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src", "bench"], cwd=root,
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return h + ("+dirty" if dirty else "")
