"""G3 scoped read-only execution: host-only, synchronous to retirement, exact rejection.

Rows of the G3 state table proven here:

* ``scoped call rejected``:
  test_scoped_call_rejected_returns_the_exact_borrowed_inputs
* ``scoped admitted call``:
  test_scoped_admitted_call_retires_before_return

Run alone with ``python3 -m pytest tests/runtime/test_scoped_execution.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage import runtime as rt
from tenferro_storage.errors import (
    BorrowError,
    ScopedOutputExtractError,
    ScopedSubmitRejected,
    UseAfterMoveError,
)

from .support import axpy_program, failing_program, live_bytes, sim_provider


def _owners() -> tuple[Any, Any]:
    return ts.arange(3.0), ts.ones(3)


def test_scoped_admitted_call_retires_before_return() -> None:
    x, y = _owners()
    vx, vy = x.as_view(), y.as_view()
    with ledger.capture() as rec:
        out = rt.execute_scoped_read_only(
            rt.host_engine(), axpy_program(), rt.ScopedReadInputs([vx, vy])
        )
    assert isinstance(out, rt.Completed)
    bundle = out.bundle
    # All work retired: the only allocations are the two kernel results (one fresh output
    # kept, the intermediate already released); nothing was copied.
    assert rec.allocations == {ts.AllocationReason.OPERATION_OUTPUT: 2}
    assert rec.releases == 1 and rec.copies == {}
    assert ts.host_provider.counters.maps >= 2
    assert bundle.kinds == axpy_program().output_kinds
    assert [bundle.is_borrowed(i) for i in range(3)] == [False, True, False]
    fresh = bundle.output(0)
    assert isinstance(fresh, ts.TensorView)
    np.testing.assert_array_equal(fresh.to_numpy(), [1.0, 2.0, 5.0])
    fresh.release()
    same = bundle.output(1)
    assert isinstance(same, ts.TensorView) and same.span == vx.span  # borrowed, no copy
    same.release()
    assert bundle.output(3) == rt.OutputMetadata(("shape", 3))
    # The caller's views are untouched and still usable; the owners stay readable.
    assert vx.to_numpy().tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(BorrowError):
        x.as_view_mut()  # the borrowed output still reads x
    bundle.release()
    vx.release()
    vy.release()
    x.as_view_mut().release()  # every borrow ended
    del out, bundle


def _asynchronous(views: list[Any]) -> tuple[Callable[[rt.ScopedReadInputs], Any], Any]:
    def run(pkg: rt.ScopedReadInputs) -> Any:
        with sim_provider() as sim:
            return rt.execute_scoped_read_only(sim.engine, axpy_program(), pkg)  # type: ignore[arg-type]

    return run, rt.SubmitErrorKind.UNSUPPORTED


def _arity(views: list[Any]) -> tuple[Callable[[rt.ScopedReadInputs], Any], Any]:
    def run(pkg: rt.ScopedReadInputs) -> Any:
        return rt.execute_scoped_read_only(rt.host_engine(), failing_program(), pkg)

    return run, rt.SubmitErrorKind.ARITY


def _released(views: list[Any]) -> tuple[Callable[[rt.ScopedReadInputs], Any], Any]:
    views[1].release()

    def run(pkg: rt.ScopedReadInputs) -> Any:
        return rt.execute_scoped_read_only(rt.host_engine(), axpy_program(), pkg)

    return run, rt.SubmitErrorKind.INVALID_BINDING


def _unknown(views: list[Any]) -> tuple[Callable[[rt.ScopedReadInputs], Any], Any]:
    def run(pkg: rt.ScopedReadInputs) -> Any:
        return rt.execute_scoped_read_only(rt.EngineId("host", 999), axpy_program(), pkg)

    return run, rt.SubmitErrorKind.UNKNOWN_ENGINE


def _map_fails(views: list[Any]) -> tuple[Callable[[rt.ScopedReadInputs], Any], Any]:
    def run(pkg: rt.ScopedReadInputs) -> Any:
        ts.host_provider.fail_next("map")
        return rt.execute_scoped_read_only(rt.host_engine(), axpy_program(), pkg)

    return run, rt.SubmitErrorKind.BIND_FAILED


@pytest.mark.parametrize("case", [_asynchronous, _arity, _released, _unknown, _map_fails])
def test_scoped_call_rejected_returns_the_exact_borrowed_inputs(case: Any) -> None:
    x, y = _owners()
    views = [x.as_view(), y.as_view()]
    run, kind = case(views)
    pkg = rt.ScopedReadInputs(views)
    with ledger.capture() as rec, pytest.raises(ScopedSubmitRejected) as err:
        run(pkg)
    cause, back = err.value.into_parts()
    del err
    assert back is pkg and cause.kind is kind
    assert back.views[0] is views[0] and back.views[1] is views[1]
    assert rec.allocations == {} and rec.copies == {}
    assert views[0].to_numpy().tolist() == [0.0, 1.0, 2.0]  # the borrow is still valid
    for v in views:
        v.release()
    x.as_view_mut().release()  # no borrow was left behind by the rejected call
    del back, pkg


def test_scoped_retired_failure_returns_the_exact_package_after_retirement() -> None:
    (x,) = (ts.arange(3.0),)
    view = x.as_view()
    pkg = rt.ScopedReadInputs([view])
    base = live_bytes()
    out = rt.execute_scoped_read_only(rt.host_engine(), failing_program(), pkg)
    assert isinstance(out, rt.RetiredFailed)
    assert out.inputs is pkg and out.cause.kind is rt.ExecutionErrorKind.KERNEL_FAILED
    assert "kernel boom" in out.cause.message
    assert live_bytes() == base  # the intermediate made before the failure retired
    assert pkg.views[0] is view
    view.release()
    del out, pkg


def test_into_owned_output_only_for_owned_outputs_and_refusals_return_the_exact_bundle() -> None:
    x, y = _owners()
    vx, vy = x.as_view(), y.as_view()
    out = rt.execute_scoped_read_only(
        rt.host_engine(), axpy_program(), rt.ScopedReadInputs([vx, vy])
    )
    assert isinstance(out, rt.Completed)
    bundle = out.bundle
    del out
    for index, reason in [(1, "borrowed_output"), (3, "metadata_output"), (9, "invalid_output")]:
        with ledger.capture() as rec, pytest.raises(ScopedOutputExtractError) as err:
            bundle.into_owned_output(index)
        got, back = err.value.into_parts()
        del err
        assert got == reason and back is bundle
        assert rec.copies == {} and rec.allocations == {}
    base = live_bytes()
    owned = bundle.into_owned_output(2)  # the repeated fresh output
    assert owned.to_numpy().tolist() == [1.0, 2.0, 5.0]
    assert live_bytes() == base  # the same allocation, now owned by the caller
    with pytest.raises(UseAfterMoveError):
        bundle.output(0)
    vx.release()
    vy.release()
    x.as_view_mut().release()  # the bundle's borrowed outputs ended with it
    del owned, back, bundle


def test_into_owned_group_keeps_every_fresh_output_without_a_copy() -> None:
    """The whole owned group and the output map: fresh outputs are group slots (a repeated
    one names the same slot), borrowed ones the caller's views, metadata itself; a bundle
    whose owned group is borrowed refuses and stays usable."""
    x, y = _owners()
    vx, vy = x.as_view(), y.as_view()
    out = rt.execute_scoped_read_only(
        rt.host_engine(), axpy_program(), rt.ScopedReadInputs([vx, vy])
    )
    assert isinstance(out, rt.Completed)
    bundle = out.bundle
    del out
    held = bundle.output(0)  # a view of the owned group
    with pytest.raises(BorrowError):
        bundle.into_owned_group()
    held.release()
    base = live_bytes()
    with ledger.capture() as rec:
        group, refs = bundle.into_owned_group()
    assert rec.copies == {} and rec.allocations == {}
    assert refs[0] == refs[2] and isinstance(refs[0], ts.DescriptorSlot)
    assert isinstance(refs[1], ts.TensorView) and refs[1].span == vx.span
    assert isinstance(refs[3], rt.OutputMetadata)
    with pytest.raises(UseAfterMoveError):
        bundle.output(0)
    owned = group.try_extract(refs[0])
    assert owned.to_numpy().tolist() == [1.0, 2.0, 5.0]
    assert live_bytes() == base  # the same allocation, now owned by the caller
    refs[1].release()
    vx.release()
    vy.release()
    x.as_view_mut().release()
    del owned, group, refs, bundle


def test_scoped_inputs_accept_only_read_only_views() -> None:
    x = ts.arange(3.0)
    with pytest.raises(TypeError, match="read-only TensorView"):
        rt.ScopedReadInputs([x])  # type: ignore[list-item]
    m = x.as_view_mut()
    with pytest.raises(TypeError, match="scoped execution never writes"):
        rt.ScopedReadInputs([m])  # type: ignore[list-item]
    m.release()


def test_an_interrupt_inside_a_scoped_kernel_leaves_no_borrowed_work_behind() -> None:
    def interrupt(a: Any) -> Any:
        raise KeyboardInterrupt

    b = rt.ProgramBuilder(1)
    (x,) = b.inputs
    program = b.build(b.apply(interrupt, b.apply(np.negative, x)))
    owner = ts.arange(3.0)
    view = owner.as_view()
    pkg = rt.ScopedReadInputs([view])
    base = live_bytes()
    with pytest.raises(KeyboardInterrupt):
        rt.execute_scoped_read_only(rt.host_engine(), program, pkg)
    assert live_bytes() == base  # the intermediate retired with the call
    assert pkg.views[0] is view  # the package is usable again
    view.release()
    owner.as_view_mut().release()  # no borrow outlived the call


def test_bundles_carry_no_extracted_state_flags() -> None:
    """Consumption is the object's moved state, never a per-output flag."""
    for cls in (rt.ExecutionBundle, rt.ScopedExecutionBundle):
        slots = set(cls.__slots__)
        assert slots <= {"_group", "_owned", "_outputs", "_kinds"}, slots
