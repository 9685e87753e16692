"""Shared helpers for the runtime and provider suites: programs, inputs, providers."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import tenferro_storage as ts
from tenferro_storage import runtime as rt
from tenferro_storage.providers import SimulatedAsyncProvider


def axpy_program() -> rt.CompiledGraph:
    """``(x*x + y, x, x*x + y, metadata)``: fresh, identity, repeated and metadata outputs."""
    b = rt.ProgramBuilder(2, name="axpy")
    x, y = b.inputs
    t = b.apply(np.multiply, x, x)
    z = b.apply(np.add, t, y)
    return b.build(z, x, z, b.metadata(("shape", 3)))


def failing_program() -> rt.CompiledGraph:
    """A kernel that raises after an intermediate was made."""

    def boom(a: Any) -> Any:
        raise ValueError("kernel boom")

    b = rt.ProgramBuilder(1, name="failing")
    (x,) = b.inputs
    t = b.apply(np.negative, x)
    return b.build(b.apply(boom, t))


def inputs(n: int = 3, *, dtype: str = "float64") -> tuple[rt.ExecutionInputs, Any, Any]:
    """Owning inputs ``(x = arange(n), y = ones(n))``; returns the package and both slots."""
    g = ts.AllocationGroup()
    sx = g.insert(ts.arange(float(n), dtype=dtype))
    sy = g.insert(ts.ones(n, dtype=dtype))
    return rt.ExecutionInputs(g, [sx, sy]), sx, sy


@contextmanager
def sim_provider(completion_timeout: float = 0.05) -> Iterator[SimulatedAsyncProvider]:
    """A fresh simulated asynchronous engine, registered for the block, closed after.

    Records it retained permanently outlive it (the process keeps them; the suite's leak
    check counts them through ``providers.permanently_retained()``).
    """
    provider = SimulatedAsyncProvider(completion_timeout=completion_timeout, name="test-sim")
    with provider:
        yield provider
    del provider
    gc.collect()


def live_bytes() -> int:
    """Live ledger bytes after collecting cycles."""
    gc.collect()
    return ts.ledger.live_bytes()
