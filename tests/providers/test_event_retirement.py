"""G1 provider use and retirement: event tests on the simulated asynchronous provider.

Rows 6-9 of the G1 transition table:

* ``prepared device access -> pre-admission rejection``:
  test_device_access_pre_admission_rejection_keeps_the_owners_and_creates_no_record
* ``possible enqueue -> draining``:
  test_possible_enqueue_to_draining_immediate_handle_drop_keeps_the_record_owned
* ``draining -> retired completed/failed``:
  test_draining_to_retired_completed_or_failed_releases_the_record_once
* ``draining -> completion unproven``:
  test_draining_to_completion_unproven_keeps_the_record_for_good

plus the event scenarios G1 names: successful completion, execution failure, panic after
a possible enqueue (proven and unproven), and
test_unproven_retention_outlives_the_dropped_provider_and_keeps_host_inputs_readable
(the permanent record is the process's, not the provider object's).

Run alone with ``python3 -m pytest tests/providers/test_event_retirement.py``.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import providers
from tenferro_storage import runtime as rt
from tenferro_storage._ledger import LEDGER
from tenferro_storage.errors import SubmitRejected
from tenferro_storage.providers import Fault
from tests.runtime.support import axpy_program, inputs, live_bytes, sim_provider


def test_device_access_pre_admission_rejection_keeps_the_owners_and_creates_no_record() -> None:
    with sim_provider() as sim:
        pkg, sx, sy = inputs()
        sim.inject(Fault.BIND_FAILURE)
        with pytest.raises(SubmitRejected) as err:
            rt.submit(sim.engine, axpy_program(), pkg)  # type: ignore[arg-type]
        assert err.value.value is pkg
        del err
        c = sim.counters
        assert c.records_created == c.events_created == c.enqueues == 0
        assert c.prepares >= 1  # device preparation happened and was undone
        g = pkg.group
        g.view_mut(sx).release()  # every prepared borrow was given back
        g.view_mut(sy).release()


def test_possible_enqueue_to_draining_immediate_handle_drop_keeps_the_record_owned() -> None:
    with sim_provider() as sim:
        base = live_bytes()
        pkg, _, _ = inputs(50)
        with sim.hold():
            rt.submit(sim.engine, axpy_program(), pkg)  # type: ignore[arg-type]  # dropped now
            gc.collect()
            c = sim.counters
            assert c.records_created == 1 and c.records_released == 0
            assert c.events_created == 1 and c.events_completed == 0
            assert live_bytes() == base + 800  # owners live on, owned by the record/worker
            # ... and so do the retirement bindings: their borrows are live while draining
            assert sim.context.held_bindings() == 2
        assert sim.drain(5)
        c = sim.counters
        assert c.records_released == 1 and c.events_completed == 1
        assert sim.context.held_bindings() == 0 and c.bindings_released == 2
        del pkg
        assert live_bytes() == base


@pytest.mark.parametrize("fault", [None, Fault.FAIL_AFTER_ENQUEUE, Fault.PANIC_PROVEN])
def test_draining_to_retired_completed_or_failed_releases_the_record_once(
    fault: Fault | None,
) -> None:
    with sim_provider() as sim:
        pkg, _, _ = inputs()
        if fault is not None:
            sim.inject(fault)
        out = rt.submit(sim.engine, axpy_program(), pkg).wait(5)  # type: ignore[arg-type]
        expected = rt.Completed if fault is None else rt.RetiredFailed
        assert isinstance(out, expected)
        c = sim.counters
        assert (c.records_released, c.bindings_released, c.events_released) == (1, 2, 1)
        assert c.records_retained == 0
        if isinstance(out, rt.RetiredFailed):
            kind = (
                rt.ExecutionErrorKind.PANIC
                if fault is Fault.PANIC_PROVEN
                else rt.ExecutionErrorKind.PROVIDER_FAILED
            )
            assert out.cause.kind is kind
        del out


@pytest.mark.parametrize("fault", [Fault.EVENT_NEVER_COMPLETES, Fault.PANIC_UNPROVEN])
def test_draining_to_completion_unproven_keeps_the_record_for_good(fault: Fault) -> None:
    base = live_bytes()
    with sim_provider(completion_timeout=0.01) as sim:
        pkg, _, _ = inputs(25)
        sim.inject(fault)
        out = rt.submit(sim.engine, axpy_program(), pkg).wait(5)  # type: ignore[arg-type]
        assert isinstance(out, rt.CompletionUnproven)
        del out, pkg
        # Later traffic does not disturb the retained record, and nothing releases it.
        for _ in range(3):
            more, _, _ = inputs(25)
            assert isinstance(rt.submit(sim.engine, axpy_program(), more).wait(5), rt.Completed)  # type: ignore[arg-type]
        assert sim.drain(5)
        c = sim.counters
        assert c.records_created == 4 and c.records_released == 3 and c.records_retained == 1
        assert sim.retained_records == 1
        assert live_bytes() == base + c.retained_bytes
        retained = c.retained_bytes
    del sim
    # "Permanently" means for the rest of the process: closing and dropping the provider
    # releases nothing the unproven record holds (the device may still use it).
    assert live_bytes() == base + retained
    assert ts.ledger.double_releases() == ()


def test_unproven_retention_outlives_the_dropped_provider_and_keeps_host_inputs_readable() -> None:
    """CompletionUnproven's record is kept for the rest of the process, not for the life of
    the provider object: after the provider is closed, unregistered and dropped, the host
    input the device may still be reading is not freed and the record is still held."""
    before = providers.permanently_retained()
    base = live_bytes()
    with sim_provider(completion_timeout=0.01) as sim:
        g = ts.AllocationGroup()
        x = ts.from_numpy(np.arange(64.0))
        alloc_id, host_bytes = x._storage._root.alloc_id, x._storage._root.capacity_bytes
        sx = g.insert(x)
        sim.inject(Fault.EVENT_NEVER_COMPLETES)
        out = rt.submit(sim.engine, _negate(), rt.ExecutionInputs(g, [sx])).wait(5)  # type: ignore[arg-type]
        assert isinstance(out, rt.CompletionUnproven)
        assert sim.drain(5)
        del out, g
    del sim
    gc.collect()
    after = providers.permanently_retained()
    assert after.records == before.records + 1
    assert after.roots >= before.roots + 1 and after.nbytes >= before.nbytes + host_bytes
    # The host input's root is still allocated (nothing here holds it but the record).
    assert alloc_id in LEDGER.live
    assert live_bytes() == base + (after.nbytes - before.nbytes)


def _negate() -> rt.CompiledGraph:
    b = rt.ProgramBuilder(1, name="negate")
    (x,) = b.inputs
    return b.build(b.apply(np.negative, x))
