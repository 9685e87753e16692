"""The XLA engine's prepared call over whole owners (``ScopedCall``): it builds the result
owners while the executable runs and records them only once the execution is proven, so
a call records exactly one allocation per fresh result (in output order, after the
scratch's events) and one release each, a call whose completion fails records none, and
an interrupted wait keeps the inputs borrowed until XLA is done with them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad._traced._jit_run import Compiled
from tenferro_ad.errors import ExecutionFailed
from tenferro_storage import ledger
from tenferro_storage._ledger import LEDGER
from tenferro_storage.ledger import AllocationReason
from tenferro_storage.providers import XlaProvider
from tenferro_storage.runtime._engine import lookup

OUT = AllocationReason.OPERATION_OUTPUT


def _provider(engine: Any) -> XlaProvider:
    p = lookup(engine)
    assert isinstance(p, XlaProvider)
    return p


def _fault(f: Any, make: Callable[[Any], Any]) -> None:
    """Every compiled program of ``f`` runs ``make(real executable)`` instead."""
    for key, entry in list(f._cache.items()):
        program = attrs.evolve(entry.program, executable=make(entry.program.executable))
        f._cache[key] = Compiled(entry.graph, program, entry.compile_seconds)
    f._fast.clear()


def _outputs(n: int) -> Callable[[Any, Any], tuple[Any, ...]]:
    """A program with ``n`` fresh results of different shapes (a matmul: scratch)."""

    def f(a: Any, b: Any) -> tuple[Any, ...]:
        outs = [a @ b, ad.sin(a), ad.sum(b), ad.exp(b) + 1.0, a * 2.0, ad.tanh(b), a - 1.0]
        return tuple(outs[:n])

    return f


@pytest.mark.parametrize("n", [1, 3, 7])
def test_a_multi_output_call_records_one_allocation_per_result_and_one_release_each(
    xla_engine: Any, n: int
) -> None:
    f = ad.jit(_outputs(n), engine=xla_engine)
    rng = np.random.default_rng(n)
    a, b = ts.from_numpy(rng.normal(size=(6, 5))), ts.from_numpy(rng.normal(size=(5, 5)))
    f(a, b)  # compiles and plans the owners' call
    assert f._fast
    domain = _provider(xla_engine).domain
    live = domain.live_allocations
    with ledger.capture() as rec:
        outs = f(a, b)
        ids = [t._storage._root.alloc_id for t in outs]
        sizes = [t.nbytes for t in outs]
        assert domain.live_allocations == live + n
        del outs
    assert domain.live_allocations == live
    events = [e for e in rec.events if " scratch @" not in e.operation]
    allocs = [e for e in events if e.kind.name == "ALLOCATE"]
    releases = [e for e in events if e.kind.name == "RELEASE"]
    assert [e.allocation for e in allocs] == ids  # one each, in output order
    assert [e.nbytes for e in allocs] == sizes and all(e.reason is OUT for e in allocs)
    assert all(e.operation.endswith(f"@{domain.name}") for e in allocs)
    assert len(releases) == n and {e.allocation for e in releases} == set(ids)  # one each
    assert rec.copies == {}
    # the results are recorded after the scratch is released, as on the general path
    first = rec.events.index(allocs[0])
    assert all(e.kind.name == "ALLOCATE" and e in allocs for e in rec.events[first:first + n])
    assert not [e for e in rec.events[first:] if " scratch @" in e.operation]


class _Result:
    """A real result's type (dtype, shape, bytes) whose readiness a test decides."""

    def __init__(self, real: Any) -> None:
        self.dtype, self.shape, self.nbytes = real.dtype, real.shape, real.nbytes


class _Unproven(_Result):
    """A result whose completion fails when it is waited for."""

    def block_until_ready(self) -> None:
        raise RuntimeError("injected: completion failed")


def test_a_call_whose_completion_fails_records_no_allocation_for_the_owners_it_built(
    xla_engine: Any,
) -> None:
    f = ad.jit(lambda a: (ad.sin(a), ad.cos(a), ad.sum(a)), engine=xla_engine)
    x = ts.from_numpy(np.linspace(0.0, 1.0, 12))
    f(x)

    def make(real: Any) -> Any:
        def run(*args: Any) -> Any:
            return [_Unproven(r) for r in real(*args)]  # runs, but is never proven

        return run

    _fault(f, make)
    domain = _provider(xla_engine).domain
    live, in_domain = dict(LEDGER.live), domain.live_allocations
    with ledger.capture() as rec, pytest.raises(ExecutionFailed, match="completion failed"):
        f(x)
    assert [e for e in rec.events if e.kind.name == "ALLOCATE" and
            " scratch @" not in e.operation] == []
    assert dict(LEDGER.live) == live and domain.live_allocations == in_domain
    with x.as_view_mut():  # no borrow outlived the call
        pass


def test_an_interrupted_wait_keeps_the_inputs_borrowed_until_xla_is_done(
    xla_engine: Any,
) -> None:
    """``KeyboardInterrupt`` while the call waits for its results: it propagates, but only
    after XLA finished with the inputs (the borrows end after the wait, never before)."""
    f = ad.jit(lambda a: ad.tanh(a) * 2.0, engine=xla_engine)
    x = ts.from_numpy(np.full(16, 0.5))
    f(x)
    borrowed_while_waiting: list[int] = []

    class _Interrupted(_Result):
        calls = 0

        def block_until_ready(self) -> None:
            _Interrupted.calls += 1
            if _Interrupted.calls == 1:
                raise KeyboardInterrupt
            borrowed_while_waiting.append(x._shared)

    _fault(f, lambda real: lambda *args: [_Interrupted(r) for r in real(*args)])
    live = dict(LEDGER.live)
    with pytest.raises(KeyboardInterrupt):
        f(x)
    assert borrowed_while_waiting == [1]  # waited once more, the input still lent
    assert x._shared == 0 and dict(LEDGER.live) == live
    with x.as_view_mut():
        pass
