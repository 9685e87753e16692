"""Benchmark: submission overhead per program, next to a plain numpy call of the same kernel.

Run from the repository root (a few seconds; not part of the test suite)::

    python bench/submission_overhead.py

The program is one ``np.add`` over two float64 inputs of ``N`` elements.
Each figure is the median over repeats of the mean time per program, in microseconds:

* ``numpy``: ``np.add(a, b)`` alone;
* ``host scoped``: ``execute_scoped_read_only`` over two borrowed views, plus taking the
  owned output;
* ``host detached``: build ``ExecutionInputs``, ``submit``, ``wait``, take the group back
  and drop the fresh output (the inputs are reused);
* ``sim detached``: the same on the simulated asynchronous engine with device memory (a
  worker-thread round trip per program; the output is device-resident);
* ``sim unified``: the same with ``memory="host-visible"`` (outputs are host owners).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable

# One thread, like every script here (set before numpy loads).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

import tenferro_storage as ts
from tenferro_storage import runtime as rt
from tenferro_storage.providers import SimulatedAsyncProvider

N = 8


def _program() -> rt.CompiledGraph:
    b = rt.ProgramBuilder(2, name="add")
    x, y = b.inputs
    return b.build(b.apply(np.add, x, y))


def _time(fn: Callable[[int], None], iterations: int, repeats: int = 5) -> float:
    fn(max(1, iterations // 10))  # warm up
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(iterations)
        samples.append((time.perf_counter() - t0) / iterations * 1e6)
    return statistics.median(samples)


def _detached(engine: rt.EngineId, program: rt.CompiledGraph) -> Callable[[int], None]:
    group = ts.AllocationGroup()
    slots = [group.insert(ts.arange(float(N))), group.insert(ts.ones(N))]
    state = [group]

    def run(n: int) -> None:
        g = state[0]
        for _ in range(n):
            out = rt.submit(engine, program, rt.ExecutionInputs(g, slots)).wait()
            assert isinstance(out, rt.Completed)
            g, outputs = out.bundle.into_group()
            g.remove(outputs[0])  # type: ignore[arg-type]
        state[0] = g

    return run


def main() -> int:
    program = _program()
    a, b = np.arange(float(N)), np.ones(N)
    x, y = ts.arange(float(N)), ts.ones(N)
    vx, vy = x.as_view(), y.as_view()
    host = rt.host_engine()

    def plain(n: int) -> None:
        for _ in range(n):
            np.add(a, b)

    def scoped(n: int) -> None:
        for _ in range(n):
            out = rt.execute_scoped_read_only(host, program, rt.ScopedReadInputs([vx, vy]))
            assert isinstance(out, rt.Completed)
            out.bundle.into_owned_output(0)

    results = {
        "numpy": _time(plain, 20000),
        "host scoped": _time(scoped, 2000),
        "host detached": _time(_detached(host, program), 2000),
    }
    with SimulatedAsyncProvider(name="bench-sim") as sim:  # device memory: outputs there
        assert sim.engine is not None
        results["sim detached"] = _time(_detached(sim.engine, program), 1000)
    with SimulatedAsyncProvider(name="bench-unified", memory="host-visible") as unified:
        assert unified.engine is not None
        results["sim unified"] = _time(_detached(unified.engine, program), 1000)
    base = results["numpy"]
    print(f"submission overhead per program (np.add over {N} float64), median us/program:")
    for name, us in results.items():
        extra = "" if name == "numpy" else f"   (+{us - base:.1f} us over numpy)"
        print(f"  {name:14s} {us:8.2f}{extra}")
    vx.release()
    vy.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
