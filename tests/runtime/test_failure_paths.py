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


# -- donated inputs a failed program wrote (RetiredFailed.clobbered) ------------------------


def _donating_then_failing() -> rt.CompiledGraph:
    """Writes ``-x`` into the donated input, then a kernel fails."""
    return _program(ValueError, donate=True)


def test_retired_failed_marks_donated_inputs_the_failed_program_wrote_as_clobbered() -> None:
    base = live_bytes()
    g = ts.AllocationGroup()
    slot = g.insert(ts.from_numpy(X.copy()))
    pkg = rt.ExecutionInputs(g, [slot])
    outcome = rt.submit(rt.host_engine(), _donating_then_failing(), pkg).wait()
    assert isinstance(outcome, rt.RetiredFailed)
    assert outcome.clobbered == (0,)
    back = outcome.inputs
    assert back.clobbered == (0,)
    np.testing.assert_array_equal(_values(back), -X)  # what the failed program left there
    del outcome
    # A retry cannot silently compute on those bytes: the package is refused as it is ...
    with pytest.raises(SubmitRejected) as rejected:
        rt.submit(rt.host_engine(), _program(None, donate=False), back)
    cause, again = rejected.value.into_parts()
    assert again is back and cause.kind is rt.SubmitErrorKind.CLOBBERED
    assert "clear_clobbered" in str(cause)
    del rejected
    # ... until the caller says the values are valid again.
    back.clear_clobbered()
    done = rt.submit(rt.host_engine(), _program(None, donate=False), back).wait()
    assert isinstance(done, rt.Completed)
    np.testing.assert_allclose(done.bundle.output(0).to_numpy(), np.exp(X))
    del done, back, again, pkg, g
    assert live_bytes() == base


def test_a_failure_before_the_donated_write_leaves_the_input_unmarked() -> None:
    """The write preparation fails after admission: RetiredFailed, nothing clobbered."""
    g = ts.AllocationGroup()
    slot = g.insert(ts.from_numpy(X.copy()))
    ts.host_provider.fail_next("map-write")
    try:
        pkg = rt.ExecutionInputs(g, [slot])
        outcome = rt.submit(rt.host_engine(), _donating_then_failing(), pkg).wait()
    finally:
        _disarm()
    assert isinstance(outcome, rt.RetiredFailed) and outcome.clobbered == ()
    assert outcome.cause.kind is rt.ExecutionErrorKind.PROVIDER_FAILED
    np.testing.assert_array_equal(_values(outcome.inputs), X)
    del outcome


@pytest.mark.parametrize("error", [KeyboardInterrupt, SystemExit, CustomInterrupt])
def test_an_interrupt_after_the_donated_write_hands_the_package_back_marked(
    error: type[BaseException],
) -> None:
    g = ts.AllocationGroup()
    slot = g.insert(ts.from_numpy(X.copy()))
    pkg = rt.ExecutionInputs(g, [slot])
    with pytest.raises(error):
        rt.submit(rt.host_engine(), _program(error, donate=True), pkg)
    assert pkg.clobbered == (0,)
    np.testing.assert_array_equal(_values(pkg), -X)
    with pytest.raises(SubmitRejected):
        rt.submit(rt.host_engine(), _program(None, donate=False), pkg)
