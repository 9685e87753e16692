"""Every runtime path between admission and retirement, for every exception type, on every
provider: nothing a submission was given is lost.

The matrix is (provider path x exception type).  A fault is injected at one step --
before admission (input mapping, device preparation, binding), at the enqueue-capable
call, in post-admission write preparation, in a kernel -- and raises either an ordinary
``Exception`` or an interrupt (``KeyboardInterrupt``, ``SystemExit``, a custom
``BaseException``).  Whatever happens, the submission ends in the outcome its state table
names, and the caller's inputs are accounted for:

* an ordinary error before admission: ``SubmitRejected``/``ScopedSubmitRejected`` carrying
  this exact package (``Prepared -> submit result``, ``scoped call rejected``);
* an ordinary error after admission: the handle's ``RetiredFailed`` with this exact
  package (``Admitted -> Running``'s failure column: post-admission preparation or enqueue
  failure enters Draining; ``Running -> Draining``);
* an interrupt in the caller's thread: it propagates, and this exact ``inputs`` object
  holds its package again (nothing ran, or the synchronous host work already retired);
  an interrupt in the simulated device's worker is contained there (``RetiredFailed``).

Every case then checks the input values are intact, the provider's record counters add
up, and that dropping everything releases every byte.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import providers
from tenferro_storage import runtime as rt
from tenferro_storage.errors import ScopedSubmitRejected, SubmitRejected
from tenferro_storage.providers import SimulatedAsyncProvider

from .support import live_bytes, sim_provider


class CustomInterrupt(BaseException):
    """A ``BaseException`` that is neither ``KeyboardInterrupt`` nor ``SystemExit``."""


ERRORS: list[type[BaseException]] = [ValueError, KeyboardInterrupt, SystemExit, CustomInterrupt]

# (provider path, step, whether the step is after admission)
DETACHED_PATHS = [
    ("host", "map", False),
    ("host", "write-prepare", True),
    ("host", "kernel", True),
    ("sim", "prepare", False),
    ("sim", "bind", False),
    ("sim", "enqueue", True),
    ("sim", "kernel", True),
]
SCOPED_PATHS = [("host-scoped", "map", False), ("host-scoped", "kernel", True)]

X = np.arange(1.0, 7.0)


def _raiser(error: type[BaseException]) -> Any:
    def boom(a: Any) -> Any:
        raise error("injected kernel failure")

    return boom


def _program(kernel_error: type[BaseException] | None, *, donate: bool) -> rt.CompiledGraph:
    """``exp(-x)``, the negation written into the donated input when ``donate``; the second
    kernel raises ``kernel_error`` when given."""
    second = _raiser(kernel_error) if kernel_error is not None else np.exp
    instructions = (
        rt.Instruction(np.negative, (0,), (1,), name="negative", into=0 if donate else None),
        rt.Instruction(second, (1,), (2,), release_after=(1,), name="second"),
    )
    output = (rt.ProgramOutput(rt.OutputKind.FRESH, value=2),)
    return rt.CompiledGraph(
        1, 3, instructions, output, "exp_neg", donated=(0,) if donate else ()
    )


@contextmanager
def _engine(kind: str) -> Iterator[tuple[rt.EngineId, SimulatedAsyncProvider | None]]:
    if kind == "sim":
        with sim_provider(completion_timeout=2.0) as p:
            assert p.engine is not None
            yield p.engine, p
    else:
        yield rt.host_engine(), None


def _arm(step: str, error: type[BaseException], sim: SimulatedAsyncProvider | None) -> None:
    if step == "map":
        ts.host_provider.fail_next("map", error=error)
    elif step == "write-prepare":
        ts.host_provider.fail_next("map-write", error=error)
    elif step in ("prepare", "bind", "enqueue"):
        assert sim is not None
        sim.context.fail_next(step, error=error)


def _values(pkg: rt.ExecutionInputs) -> np.ndarray[Any, Any]:
    (slot,) = pkg.bindings
    with pkg.group.view(slot) as v:
        return v.to_numpy()


def _disarm() -> None:
    ts.host_provider._faults.clear()


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: e.__name__)
@pytest.mark.parametrize(("kind", "step", "admitted"), DETACHED_PATHS)
def test_detached_failure_of_any_type_on_any_path_loses_no_input(
    kind: str, step: str, admitted: bool, error: type[BaseException]
) -> None:
    base = live_bytes()
    donate = step == "write-prepare"
    program = _program(error if step == "kernel" else None, donate=donate)
    with _engine(kind) as (engine, sim):
        g = ts.AllocationGroup()
        slot = g.insert(ts.from_numpy(X.copy()))
        pkg = rt.ExecutionInputs(g, [slot])
        _arm(step, error, sim)
        interrupt = not issubclass(error, Exception)
        in_worker = kind == "sim" and step == "kernel"  # contained by the device's worker
        try:
            if interrupt and not in_worker:
                with pytest.raises(error):
                    rt.submit(engine, program, pkg)
                back = pkg  # the exact package is the caller's again
            elif not admitted:
                with pytest.raises(SubmitRejected) as rejected:
                    rt.submit(engine, program, pkg)
                cause, back = rejected.value.into_parts()
                assert cause.kind is rt.SubmitErrorKind.BIND_FAILED
                del rejected
            else:
                outcome = rt.submit(engine, program, pkg).wait(10)
                assert isinstance(outcome, rt.RetiredFailed), outcome
                assert outcome.clobbered == ()
                back = outcome.inputs
                assert back.bindings == (slot,)
                del outcome
        finally:
            _disarm()
        # Same package content, same values: nothing was freed, written or swapped.
        assert back.bindings == (slot,) and back.clobbered == ()
        np.testing.assert_array_equal(_values(back), X)
        # ... and it is usable: resubmitting it completes.
        done = rt.submit(engine, _program(None, donate=False), back).wait(10)
        assert isinstance(done, rt.Completed)
        result = done.bundle.into_output(0)
        if providers.domain_of(result) != "host":
            result = rt.download(result)
        np.testing.assert_allclose(result.to_numpy(), np.exp(-X))
        del done, result, back, pkg, g
        if sim is not None:
            assert sim.drain(10)
            c = sim.counters
            assert c.records_created == c.records_released and c.records_retained == 0
    assert live_bytes() == base


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: e.__name__)
@pytest.mark.parametrize(("kind", "step", "admitted"), SCOPED_PATHS)
def test_scoped_failure_of_any_type_leaves_the_borrowed_package_usable(
    kind: str, step: str, admitted: bool, error: type[BaseException]
) -> None:
    base = live_bytes()
    x = ts.from_numpy(X.copy())
    program = _program(error if step == "kernel" else None, donate=False)
    with x.as_view() as view:
        pkg = rt.ScopedReadInputs([view])
        _arm(step, error, None)
        try:
            if not issubclass(error, Exception):
                with pytest.raises(error):
                    rt.execute_scoped_read_only(rt.host_engine(), program, pkg)
                back = pkg
            elif not admitted:
                with pytest.raises(ScopedSubmitRejected) as rejected:
                    rt.execute_scoped_read_only(rt.host_engine(), program, pkg)
                _, back = rejected.value.into_parts()
                del rejected
            else:
                outcome = rt.execute_scoped_read_only(rt.host_engine(), program, pkg)
                assert isinstance(outcome, rt.RetiredFailed)
                back = outcome.inputs
                del outcome
        finally:
            _disarm()
        assert back is pkg and back.views == (view,)
        done = rt.execute_scoped_read_only(rt.host_engine(), _program(None, donate=False), back)
        assert isinstance(done, rt.Completed)
        with done.bundle as bundle:
            np.testing.assert_allclose(bundle.output(0).to_numpy(), np.exp(-X))
        del done
    np.testing.assert_array_equal(x.to_numpy(), X)
    del x, view, pkg, back
    assert live_bytes() == base
