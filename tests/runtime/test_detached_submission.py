"""G3 detached owning submission: one test per lifecycle row, plus bundle semantics.

Rows of the G3 state table and the test that proves each (see
docs/design/storage-ownership-contracts.md):

* ``Prepared -> submit result``:
  test_prepared_to_submit_result_rejection_returns_the_exact_unadmitted_inputs
* ``Admitted -> Running``:
  test_admitted_to_running_handle_drop_detaches_and_the_worker_keeps_everything and, for
  its failure column,
  test_admitted_to_running_post_admission_preparation_or_enqueue_failure_enters_draining
* ``Running -> Draining``:
  test_running_to_draining_failure_and_panic_never_return_owners_immediately
* ``Draining -> Retired(Completed)``:
  test_draining_to_completed_returns_the_bundle_after_retirement
* ``Draining -> Retired(Failed)``:
  test_draining_to_retired_failed_returns_the_exact_input_owners
* ``Draining -> CompletionUnproven``:
  test_draining_to_completion_unproven_returns_no_owner_and_retains_permanently

Run alone with ``python3 -m pytest tests/runtime/test_detached_submission.py``.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import ledger, providers
from tenferro_storage import runtime as rt
from tenferro_storage.errors import (
    BorrowError,
    GroupError,
    OutputAccessError,
    OutputExtractError,
    SubmitRejected,
    UseAfterMoveError,
)
from tenferro_storage.providers import Fault, SimulatedAsyncProvider

from .support import axpy_program, failing_program, inputs, live_bytes, sim_provider

ENGINES = ["host", "sim"]


@contextmanager
def engine_for(kind: str) -> Iterator[tuple[rt.EngineId, SimulatedAsyncProvider | None]]:
    if kind == "host":
        yield rt.host_engine(), None
    else:
        with sim_provider() as p:
            assert p.engine is not None
            yield p.engine, p


def values_of(pkg: rt.ExecutionInputs) -> list[list[float]]:
    g = pkg.group
    out = []
    for s in pkg.bindings:
        with g.view(s) as v:
            out.append(v.to_numpy().tolist())
    return out


# -- Prepared -> submit result ---------------------------------------------------------------


def _wrong_arity(pkg: rt.ExecutionInputs, sim: SimulatedAsyncProvider) -> Any:
    b = rt.ProgramBuilder(1)
    return rt.submit(sim.engine, b.build(*b.inputs), pkg)  # type: ignore[arg-type]


def _borrowed(pkg: rt.ExecutionInputs, sim: SimulatedAsyncProvider) -> Any:
    view = pkg.group.view(pkg.bindings[0])
    try:
        return rt.submit(sim.engine, axpy_program(), pkg)  # type: ignore[arg-type]
    finally:
        view.release()


def _not_a_program(pkg: rt.ExecutionInputs, sim: SimulatedAsyncProvider) -> Any:
    return rt.submit(sim.engine, "not a program", pkg)  # type: ignore[arg-type]


def _provider_refuses(pkg: rt.ExecutionInputs, sim: SimulatedAsyncProvider) -> Any:
    sim.inject(Fault.REJECT_BEFORE_ADMISSION)
    return rt.submit(sim.engine, axpy_program(), pkg)  # type: ignore[arg-type]


def _bind_fails(pkg: rt.ExecutionInputs, sim: SimulatedAsyncProvider) -> Any:
    sim.inject(Fault.BIND_FAILURE)
    return rt.submit(sim.engine, axpy_program(), pkg)  # type: ignore[arg-type]


def _host_map_fails(pkg: rt.ExecutionInputs, sim: SimulatedAsyncProvider) -> Any:
    ts.host_provider.fail_next("map")
    return rt.submit(rt.host_engine(), axpy_program(), pkg)


REJECTIONS: dict[str, tuple[Callable[..., Any], rt.SubmitErrorKind]] = {
    "arity": (_wrong_arity, rt.SubmitErrorKind.ARITY),
    "borrowed": (_borrowed, rt.SubmitErrorKind.BORROWED),
    "not_a_program": (_not_a_program, rt.SubmitErrorKind.INVALID_PROGRAM),
    "provider_refuses": (_provider_refuses, rt.SubmitErrorKind.PROVIDER_REJECTED),
    "bind_fails": (_bind_fails, rt.SubmitErrorKind.BIND_FAILED),
    "host_map_fails": (_host_map_fails, rt.SubmitErrorKind.BIND_FAILED),
}


@pytest.mark.parametrize("case", sorted(REJECTIONS))
def test_prepared_to_submit_result_rejection_returns_the_exact_unadmitted_inputs(
    case: str,
) -> None:
    attempt, kind = REJECTIONS[case]
    with sim_provider() as sim:
        pkg, sx, sy = inputs()
        group = pkg.group
        before = values_of(pkg)
        with ledger.capture() as rec, pytest.raises(SubmitRejected) as err:
            attempt(pkg, sim)
        cause, back = err.value.into_parts()
        del err
        assert back is pkg and cause.kind is kind
        assert back.group is group and back.bindings == (sx, sy)
        assert values_of(back) == before
        assert rec.allocations == {} and rec.copies == {}
        assert sim.drain(5) and sim.counters.records_created == 0
        assert sim.counters.enqueues == 0
        # Nothing was admitted: the same package is still fully usable.
        out = rt.submit(sim.engine, axpy_program(), back).wait()  # type: ignore[arg-type]
        assert isinstance(out, rt.Completed)
        del out, back, pkg, group


def test_a_vacant_binding_is_rejected_with_the_exact_package() -> None:
    pkg, _, sy = inputs()
    pkg.group.remove(sy)
    with pytest.raises(SubmitRejected) as err:
        rt.submit(rt.host_engine(), axpy_program(), pkg)
    cause, back = err.value.into_parts()
    del err
    assert back is pkg and cause.kind is rt.SubmitErrorKind.INVALID_BINDING
    assert "binding 1" in cause.message
    del back


# -- Admitted -> Running ---------------------------------------------------------------------


def test_admitted_to_running_handle_drop_detaches_and_the_worker_keeps_everything() -> None:
    with sim_provider() as sim:
        base = live_bytes()
        pkg, _, _ = inputs(1000)
        with sim.hold():
            handle = rt.submit(sim.engine, axpy_program(), pkg)  # type: ignore[arg-type]
            with pytest.raises(UseAfterMoveError):
                pkg.group  # noqa: B018 - the caller's package was consumed at admission
            assert not handle.done()
            assert sim.counters.records_created == 1 and sim.counters.records_released == 0
            assert sim.context.held_bindings() == 2  # bindings crossed the enqueue boundary
            del handle  # detach observation only
            gc.collect()
            assert live_bytes() == base + 2 * 8000  # the worker still owns both inputs
            assert sim.counters.records_released == 0
            # the prepared bindings became retirement bindings the worker holds, live
            assert sim.context.held_bindings() == 2
        assert sim.drain(5)
        assert sim.counters.records_released == 1
        assert sim.context.held_bindings() == 0 and sim.counters.bindings_released == 2
        del pkg
        assert live_bytes() == base  # the reaper dropped the unobserved outcome's owners


def _donating_negate() -> rt.CompiledGraph:
    """``exp(-x)`` with ``-x`` written into the donated input 0 (input 1 is only read)."""
    instructions = (
        rt.Instruction(np.negative, (0,), (2,), name="negative", into=0),
        rt.Instruction(np.exp, (2,), (3,), release_after=(2,), name="exp"),
    )
    return rt.CompiledGraph(
        2, 4, instructions, (rt.ProgramOutput(rt.OutputKind.FRESH, value=3),), "donating",
        donated=(0,),
    )


@pytest.mark.parametrize("kind", ENGINES)
def test_admitted_to_running_post_admission_preparation_or_enqueue_failure_enters_draining(
    kind: str,
) -> None:
    """The failure column of ``Admitted -> Running``: after admission, a failed preparation
    (the host's write mapping of a donated input) or a failed enqueue-capable call (the
    simulated device's queue) is not a rejection: the submission drains and the handle's
    outcome is ``RetiredFailed`` with the exact package, after the record is released once.
    Its success column first (asynchronous engine): once admitted, the prepared bindings are
    retirement bindings the worker holds live until retirement -- not released at enqueue."""
    with engine_for(kind) as (engine, sim):
        if sim is not None:
            ok, _, _ = inputs()
            with sim.hold():
                running = rt.submit(engine, axpy_program(), ok)
                assert sim.context.held_bindings() == 2  # Running: held, not released
            assert isinstance(running.wait(5), rt.Completed)
            assert sim.drain(5) and sim.context.held_bindings() == 0
            del running
        pkg, sx, sy = inputs()
        if sim is None:
            program = _donating_negate()
            ts.host_provider.fail_next("map-write")
        else:
            program = axpy_program()
            sim.context.fail_next("enqueue")
        handle = rt.submit(engine, program, pkg)  # admitted: no SubmitRejected
        with pytest.raises(UseAfterMoveError):
            pkg.bindings  # noqa: B018 - nothing comes back except through the outcome
        outcome = handle.wait(5)
        assert isinstance(outcome, rt.RetiredFailed)
        assert outcome.cause.kind is rt.ExecutionErrorKind.PROVIDER_FAILED
        assert outcome.inputs.bindings == (sx, sy) and outcome.clobbered == ()
        with outcome.inputs.group.view(sx) as v:
            np.testing.assert_array_equal(v.to_numpy(), np.arange(3.0))
        if sim is not None:
            assert sim.drain(5)
            c = sim.counters
            # (the success-column submission above, then this one)
            assert (c.records_created, c.records_released, c.bindings_released) == (2, 2, 4)
            assert sim.context.held_bindings() == 0 and c.rejections == 0
        del outcome


# -- Running -> Draining ---------------------------------------------------------------------


@pytest.mark.parametrize("fault", [Fault.FAIL_AFTER_ENQUEUE, Fault.PANIC_PROVEN])
def test_running_to_draining_failure_and_panic_never_return_owners_immediately(
    fault: Fault,
) -> None:
    with sim_provider() as sim:
        pkg, _, _ = inputs()
        sim.inject(fault)
        handle = rt.submit(sim.engine, axpy_program(), pkg)  # type: ignore[arg-type]  # no raise
        with pytest.raises(UseAfterMoveError):
            pkg.bindings  # noqa: B018 - nothing came back immediately
        outcome = handle.wait(5)
        assert isinstance(outcome, rt.RetiredFailed)
        expected = (
            rt.ExecutionErrorKind.PROVIDER_FAILED
            if fault is Fault.FAIL_AFTER_ENQUEUE
            else rt.ExecutionErrorKind.PANIC
        )
        assert outcome.cause.kind is expected
        del outcome, handle


# -- Draining -> Retired(Completed) ------------------------------------------------------------


@pytest.mark.parametrize("kind", ENGINES)
def test_draining_to_completed_returns_the_bundle_after_retirement(kind: str) -> None:
    with engine_for(kind) as (engine, sim):
        pkg, sx, _ = inputs()
        with ledger.capture() as rec:
            outcome = rt.submit(engine, axpy_program(), pkg).wait(5)
        assert isinstance(outcome, rt.Completed)
        bundle = outcome.bundle
        if sim is not None:  # retirement happened before the outcome was published
            c = sim.counters
            assert (c.records_created, c.records_released, c.records_retained) == (1, 1, 0)
            assert c.events_completed == c.events_released == 1
        assert bundle.kinds == axpy_program().output_kinds
        assert bundle.outputs[1] == sx and bundle.outputs[0] == bundle.outputs[2]
        assert rec.copies == {}
        if sim is None:  # ledger captures see their own thread's events (the host engine's)
            assert rec.allocations == {ts.AllocationReason.OPERATION_OUTPUT: 2}
        first = bundle.output(0)
        assert isinstance(first, ts.TensorView)
        if sim is not None:  # a device engine's output is device-resident: download it
            assert providers.domain_of(first) == sim.domain.name  # type: ignore[union-attr]
            np.testing.assert_array_equal(rt.download(first).to_numpy(), [1.0, 2.0, 5.0])
        else:
            np.testing.assert_array_equal(first.to_numpy(), [1.0, 2.0, 5.0])
        first.release()
        assert bundle.output(3) == rt.OutputMetadata(("shape", 3))
        del outcome, bundle


# -- Draining -> Retired(Failed) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "fault"),
    [("host", None), ("sim", None), ("sim", Fault.FAIL_AFTER_ENQUEUE), ("sim", Fault.PANIC_PROVEN)],
)
def test_draining_to_retired_failed_returns_the_exact_input_owners(
    kind: str, fault: Fault | None
) -> None:
    with engine_for(kind) as (engine, sim):
        program = failing_program() if fault is None else axpy_program()
        g = ts.AllocationGroup()
        slots = [g.insert(ts.arange(3.0))]
        if program.n_inputs == 2:
            slots.append(g.insert(ts.ones(3)))
        pkg = rt.ExecutionInputs(g, slots)
        group = pkg.group
        if sim is not None and fault is not None:
            sim.inject(fault)
        with ledger.capture() as rec:
            outcome = rt.submit(engine, program, pkg).wait(5)
        assert isinstance(outcome, rt.RetiredFailed)
        back = outcome.inputs
        assert back.group is group and back.bindings == tuple(slots)
        assert values_of(back)[0] == [0.0, 1.0, 2.0]
        assert rec.live_bytes == 0  # every intermediate made before the failure is gone
        if sim is not None:
            assert sim.counters.records_released == 1
        assert "boom" in str(outcome.cause) or fault is not None
        group_back, slots_back = back.into_parts()
        assert group_back is group and slots_back == tuple(slots)
        del outcome, back, group_back, group


# -- Draining -> CompletionUnproven -----------------------------------------------------------


@pytest.mark.parametrize("fault", [Fault.EVENT_NEVER_COMPLETES, Fault.PANIC_UNPROVEN])
def test_draining_to_completion_unproven_returns_no_owner_and_retains_permanently(
    fault: Fault,
) -> None:
    base = live_bytes()
    with sim_provider(completion_timeout=0.01) as sim:
        pkg, _, _ = inputs(100)
        sim.inject(fault)
        outcome = rt.submit(sim.engine, axpy_program(), pkg).wait(5)  # type: ignore[arg-type]
        assert isinstance(outcome, rt.CompletionUnproven)
        assert [f.name for f in attrs.fields(rt.CompletionUnproven)] == [
            "cause",
            "diagnostic_keys",
        ]
        expected = (
            rt.CompletionErrorKind.PANIC
            if fault is Fault.PANIC_UNPROVEN
            else rt.CompletionErrorKind.EVENT_TIMEOUT
        )
        assert outcome.cause.kind is expected
        keys = {k.name: k.value for k in outcome.diagnostic_keys}
        assert keys["bindings"] == "2" and keys["engine"] == str(sim.engine)
        del outcome, pkg
        assert sim.drain(5)
        c = sim.counters
        assert (c.records_created, c.records_released, c.records_retained) == (1, 0, 1)
        assert c.bindings_released == 0 and c.events_released == 0
        assert sim.retained_records == 1
        # Inputs (2 x 800 bytes); when the kernel ran, its fresh output (800) is kept too.
        kept = 1600 if fault is Fault.PANIC_UNPROVEN else 2400
        assert live_bytes() == base + c.retained_bytes == base + kept
        assert ledger.double_releases() == ()


# -- bundle semantics --------------------------------------------------------------------------


def test_into_output_consumes_the_bundle_and_repeated_and_duplicate_aliases_go_together() -> None:
    b = rt.ProgramBuilder(2, name="dup")
    x, y = b.inputs
    z = b.apply(np.add, x, y)
    program = b.build(z, x, y, z)  # x and y are bound to the same slot: duplicates
    g = ts.AllocationGroup()
    s = g.insert(ts.arange(3.0))
    base = live_bytes()
    out = rt.submit(rt.host_engine(), program, rt.ExecutionInputs(g, [s, s])).wait()
    assert isinstance(out, rt.Completed)
    bundle = out.bundle
    del out
    assert bundle.outputs[1] == bundle.outputs[2] == s
    with ledger.capture() as rec:
        t = bundle.into_output(1)
    assert rec.copies == {} and rec.allocations == {}
    assert t.to_numpy().tolist() == [0.0, 1.0, 2.0]
    assert live_bytes() == base  # the fresh z and every alias went with the bundle
    with pytest.raises(UseAfterMoveError):
        bundle.output(0)
    del t


def test_into_output_failure_returns_the_exact_bundle() -> None:
    g = ts.AllocationGroup()
    s = g.insert(ts.arange(4.0))
    bcast = g.alias(s, shape=(2, 2), strides=(0, 1))  # a read-only (non-injective) alias
    b = rt.ProgramBuilder(1)
    (x,) = b.inputs
    program = b.build(x, b.metadata("m"))
    out = rt.submit(rt.host_engine(), program, rt.ExecutionInputs(g, [bcast])).wait()
    assert isinstance(out, rt.Completed)
    bundle = out.bundle
    del out
    for index, reason in [(1, "metadata_output"), (7, "invalid_output"), (0, "extract")]:
        with ledger.capture() as rec, pytest.raises(OutputExtractError) as err:
            bundle.into_output(index)
        got_reason, back = err.value.into_parts()
        del err
        assert got_reason == reason and back is bundle
        assert rec.copies == {} and rec.allocations == {}
    view = bundle.output(0)
    assert isinstance(view, ts.TensorView)
    assert view.to_numpy().tolist() == [[0.0, 1.0], [0.0, 1.0]]
    with pytest.raises(BorrowError):
        bundle.into_output(0)  # a live output view blocks consumption; nothing changes
    view.release()
    with pytest.raises(OutputAccessError):
        bundle.output(-1)
    del view, back, bundle


def test_execution_inputs_move_the_group_and_refuse_without_changing_it() -> None:
    g = ts.AllocationGroup()
    s = g.insert(ts.zeros(2))
    view = g.view(s)
    with pytest.raises(BorrowError):
        rt.ExecutionInputs(g, [s])
    view.release()
    other = ts.AllocationGroup()
    foreign = other.insert(ts.zeros(1))
    with pytest.raises(GroupError):
        rt.ExecutionInputs(g, [foreign])
    assert g.slots() == [s]  # unchanged after both refusals
    pkg = rt.ExecutionInputs(g, [s])
    with pytest.raises(UseAfterMoveError):
        g.view(s)
    assert s in pkg.group
    with pytest.raises(TypeError):
        rt.submit(rt.host_engine(), axpy_program(), g)  # type: ignore[arg-type]
    del pkg, other


def test_a_consumed_package_is_rejected_and_wait_consumes_the_handle() -> None:
    pkg, _, _ = inputs()
    handle = rt.submit(rt.host_engine(), axpy_program(), pkg)
    again = None
    with pytest.raises(SubmitRejected) as err:
        rt.submit(rt.host_engine(), axpy_program(), pkg)
    cause, again = err.value.into_parts()
    del err
    assert cause.kind is rt.SubmitErrorKind.CONSUMED and again is pkg
    assert handle.done()
    out = handle.wait()
    with pytest.raises(UseAfterMoveError):
        handle.wait()
    match out:
        case rt.Completed(bundle):
            assert len(bundle) == 4
        case _:
            pytest.fail(f"unexpected outcome {out!r}")
    del out, bundle


def test_wait_with_a_timeout_keeps_the_handle() -> None:
    with sim_provider() as sim:
        pkg, _, _ = inputs()
        with sim.hold():
            handle = rt.submit(sim.engine, axpy_program(), pkg)  # type: ignore[arg-type]
            with pytest.raises(TimeoutError):
                handle.wait(0.01)
            assert "pending" in repr(handle)
        outcome = handle.wait(5)
        assert isinstance(outcome, rt.Completed)
        del outcome


def test_detach_is_the_same_as_dropping_the_handle() -> None:
    with sim_provider() as sim:
        pkg, _, _ = inputs()
        handle = rt.submit(sim.engine, axpy_program(), pkg)  # type: ignore[arg-type]
        handle.detach()
        with pytest.raises(UseAfterMoveError):
            handle.done()
        assert sim.drain(5) and sim.counters.records_released == 1


def test_into_group_hands_back_the_whole_group_for_resubmission() -> None:
    pkg, sx, sy = inputs()
    out = rt.submit(rt.host_engine(), axpy_program(), pkg).wait()
    assert isinstance(out, rt.Completed)
    group, outputs = out.bundle.into_group()
    with pytest.raises(UseAfterMoveError):
        out.bundle.output(0)
    fresh = outputs[0]
    assert isinstance(fresh, ts.DescriptorSlot) and outputs[1] == sx
    again = rt.submit(rt.host_engine(), axpy_program(), rt.ExecutionInputs(group, [fresh, sy]))
    second = again.wait()
    assert isinstance(second, rt.Completed)
    view = second.bundle.output(0)
    assert isinstance(view, ts.TensorView)
    assert view.to_numpy().tolist() == [2.0, 5.0, 26.0]  # (x*x+y)^2 + y
    view.release()
    del out, second, group
