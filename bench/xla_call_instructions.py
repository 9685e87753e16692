"""Python bytecode instructions of one ``ad.jit`` call on the XLA engine: the per-call and
per-leaf bookkeeping around the executable, counted instead of timed, so progress is
visible through a shared machine's noise (as ``per_op_instructions.py`` does for eager).

Counts every bytecode instruction (``sys.settrace`` with ``f_trace_opcodes``) of: the
4x4 chain's gradient call (one input, one result) and the release of its result; the
residual MLP step's ``value_and_grad`` call (102 owners in, 101 results out), reading
its loss and 100 gradients (``borrow_arrays``) and releasing them.  XLA's own C++ work
is not counted.  ``while running`` is the part of the call that runs between the
executable's dispatch and the wait for its results (overlapping the kernels).

    python bench/xla_call_instructions.py
    PYTHONPATH=/path/to/other/src python bench/xla_call_instructions.py

Deterministic: two runs of one tree print the same numbers.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # first: pins BLAS threads before numpy loads
import numpy as np
import per_op as P
import resnet as R
import traced_chain as T

import tenferro_ad as ad
import tenferro_storage as ts

# functions that run while the executable runs (absent from trees that build owners later)
OVERLAPPED = ("ScopedCall._owners", "external_claims")


def _count(fn: Callable[[], Any]) -> tuple[Counter[str], Any]:
    per: Counter[str] = Counter()

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "call":
            frame.f_trace_opcodes = True
        elif event == "opcode":
            per[frame.f_code.co_qualname] += 1
        return tracer

    sys.settrace(tracer)
    try:
        out = fn()
    finally:
        sys.settrace(None)
    return per, out


def _report(name: str, per: Counter[str]) -> None:
    overlapped = sum(n for k, n in per.items() if k in OVERLAPPED)
    print(f"   {name:34s} {sum(per.values()):8d}   while running {overlapped:7d}")


def main() -> None:
    H.jax_or_none()  # x64, as the other benches run JAX
    x = ts.from_numpy(np.random.default_rng(0).normal(size=P.SHAPE))
    chain = ad.jit(T._tf_grad(P.KINDS), engine="xla")
    chain(x)
    p, xb = R.data()
    tp, tx = [ts.from_numpy(a) for a in p], ts.from_numpy(xb)

    def block(h: Any, w: Any, b: Any) -> Any:
        return h + ad.tanh(h @ w + b)

    def loss(q: list[Any], h: Any) -> Any:
        for i in range(R.BLOCKS):
            h = block(h, q[2 * i], q[2 * i + 1])
        return ad.mean(h * h)

    step = ad.jit(ad.value_and_grad(loss), engine="xla")
    step(tp, tx)

    def read(out: Any) -> Any:
        v, g = out
        with ts.borrow_arrays(g) as arrays:
            return v.item(), len(arrays)

    print("bytecode instructions (XLA engine, owners in)")
    per, g = _count(lambda: chain(x))
    _report("4x4 chain: call", per)
    held = [g]
    del g
    _report("4x4 chain: release the result", _count(held.clear)[0])
    per, out = _count(lambda: step(tp, tx))
    _report("residual MLP: call", per)
    box = [out]
    del out
    _report("residual MLP: read loss + 100 grads", _count(lambda: read(box[0]))[0])
    _report("residual MLP: release 101 results", _count(box.clear)[0])


if __name__ == "__main__":
    main()
