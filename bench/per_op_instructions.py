"""Python bytecode instructions per eager op (forward + backward): the per-op overhead,
counted instead of timed, so progress is visible through a shared machine's noise.

Counts every bytecode instruction the interpreter executes (``sys.settrace`` with
``f_trace_opcodes``) while ``ad.grad`` runs a 50-op chain on 4x4 float64 values — through
the functional API with a borrowed constant, and through an explicit tape — and divides
by 50.  numpy's C kernels are not counted (they are the same for every framework); what is
counted is exactly the Python-level bookkeeping the project controls.

    python bench/per_op_instructions.py                 # this checkout
    PYTHONPATH=/path/to/other/src python bench/per_op_instructions.py   # another tree

Deterministic: two runs of one tree print the same numbers.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts

N_OPS = 50


def _chain(x: Any, c: Any) -> Any:
    for _ in range(N_OPS // 5):
        x = ad.sin(x) * c + 1.0
        x = ad.exp(x * 0.1) - x
    return ad.sum(x)


def _count(fn: Callable[[], Any]) -> int:
    n = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal n
        if event == "call":
            frame.f_trace_opcodes = True
        elif event == "opcode":
            n += 1
        return tracer

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return n


def main() -> None:
    x = ts.from_numpy(np.random.default_rng(0).normal(size=(4, 4)))
    c = ts.from_numpy(np.full((4, 4), 0.5))
    g = ad.grad(_chain)

    def functional() -> None:
        g(x, c)

    def functional_scalar() -> None:  # comparable with trees before ops borrowed owners
        g(x, 0.5)

    def tape() -> None:
        with ad.Tape() as t:
            h = t.watch(x.duplicate())
            loss = _chain(h, 0.5)
        t.backward(loss, wrt=[h])

    cases = [
        ("ad.grad(f)(x, c), c a borrowed owner", functional),
        ("ad.grad(f)(x, 0.5)", functional_scalar),
        ("explicit tape, scalar constant", tape),
    ]
    for name, fn in cases:
        fn()  # warm caches (einsum paths, lazy imports)
        counts = {_count(fn) for _ in range(2)}
        per_op = max(counts) / N_OPS
        print(f"{name:<40} {per_op:8.1f} bytecode instructions per op (fwd+bwd)")


if __name__ == "__main__":
    main()
