"""G5 raw handles and reclamation on the simulated asynchronous provider.

Rows of the G5 raw-handle table proven here (the two borrowed-submission rows are in
``tests/providers/test_borrowed_submission.py``):

* ``checked shared pairing -> PreparedRead::Device``:
  test_shared_view_prepares_device_read_without_revalidation
* ``checked exclusive pairing -> PreparedWrite::Device``:
  test_only_an_exclusive_view_prepares_device_write
* ``PreparedDevice* -> device binding``:
  test_bind_consumes_the_prepared_payload_and_failure_returns_it_exactly
* ``prepared submission -> proven pre-admission rejection``:
  test_pre_admission_rejection_returns_the_exact_package_and_creates_no_record
* ``enqueue may have happened -> G3 Draining``:
  test_after_enqueue_failures_drain_and_return_no_owner_immediately
* ``G3 Draining -> RetiredFailed``:
  test_retired_failed_releases_bindings_event_roots_context_exactly_once
* ``G3 Draining -> Completed``:
  test_completed_releases_bindings_event_roots_context_exactly_once
* ``retirement -> CompletionUnproven``:
  test_completion_unproven_retains_bindings_event_roots_context_permanently

Run alone with ``python3 -m pytest tests/providers/test_simulated_async_provider.py``.
"""

from __future__ import annotations

import gc
import inspect
import sys

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import ledger, providers
from tenferro_storage import runtime as rt
from tenferro_storage.errors import (
    AccessError,
    BindError,
    BorrowError,
    SubmitRejected,
    UseAfterMoveError,
)
from tenferro_storage.providers import (
    DeviceRead,
    DeviceWrite,
    Fault,
    PreparedDeviceRead,
    PreparedDeviceWrite,
    ProviderContext,
    bind_read,
    bind_write,
    prepare_read,
    prepare_write,
)
from tests.runtime.support import axpy_program, failing_program, inputs, live_bytes, sim_provider

HOST_ACCESSORS = ("as_array", "as_slice", "as_slice_mut", "iter_contiguous", "iter_strided")


def test_shared_view_prepares_device_read_without_revalidation() -> None:
    ctx = ProviderContext("t")
    x = ts.arange(6.0)
    view = x[::2]
    layout = view.layout
    validations = ts.host_provider.counters.validations
    prepared = prepare_read(ctx, view)
    assert type(prepared) is PreparedDeviceRead
    assert ts.host_provider.counters.validations == validations  # retained proofs only
    assert ctx.counters.prepares == ctx.counters.maps == 1 and ctx.counters.validations == 0
    assert prepared.shape == (3,) and prepared.layout is layout  # the retained plan
    assert not any(hasattr(prepared, name) for name in HOST_ACCESSORS)  # no host surface
    with pytest.raises(UseAfterMoveError):
        view.shape  # noqa: B018 - consumed into the prepared payload
    with pytest.raises(BorrowError):
        x.as_view_mut()  # the payload carries the shared borrow
    prepared.release()
    x.as_view_mut().release()
    # A provider failure hands the exact view back, still live.
    ctx.fail_next("prepare")
    v2 = x.as_view()
    with pytest.raises(AccessError) as err:
        prepare_read(ctx, v2)
    assert err.value.value is v2 and v2.shape == (6,)
    del err
    v2.release()


def test_only_an_exclusive_view_prepares_device_write() -> None:
    ctx = ProviderContext("t")
    x = ts.zeros(4)
    shared = x.as_view()
    with pytest.raises(TypeError, match="exclusive"):
        prepare_write(ctx, shared)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        prepare_write(ctx, x)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        prepare_write(ctx, ctx)  # type: ignore[arg-type]  # a context mints nothing
    shared.release()
    m = x.as_view_mut()
    pw = prepare_write(ctx, m)
    assert type(pw) is PreparedDeviceWrite
    with pytest.raises(BorrowError):
        x.as_view()  # exclusive borrow carried by the payload
    bound = bind_write(pw)
    assert type(bound) is DeviceWrite
    bound.release()
    x.as_view().release()


def test_bind_consumes_the_prepared_payload_and_failure_returns_it_exactly() -> None:
    ctx = ProviderContext("t")
    x = ts.arange(4.0)
    prepared = prepare_read(ctx, x.as_view())
    ctx.fail_next("bind")
    with pytest.raises(BindError) as err:
        bind_read(prepared)
    cause, back = err.value.into_parts()
    del err
    assert back is prepared and "could not bind" in cause
    assert prepared.shape == (4,)  # unchanged, still live, still holding its borrow
    assert ctx.counters.binds == 0
    bound = bind_read(prepared)
    assert type(bound) is DeviceRead and ctx.counters.binds == 1
    with pytest.raises(UseAfterMoveError):
        prepared.shape  # noqa: B018
    with pytest.raises(TypeError):
        bind_read(bound)  # type: ignore[arg-type]  # a bound access is not a prepared one
    with pytest.raises(TypeError):
        bind_write(prepare_read(ctx, x.as_view()))  # type: ignore[arg-type]
    bound.release()
    del back, prepared


def test_binding_and_enqueue_accept_no_replacement_request() -> None:
    """API shape: bind takes only the payload; the payloads carry no host guard."""
    for fn in (bind_read, bind_write):
        assert list(inspect.signature(fn).parameters) == ["prepared"]
    for cls in (PreparedDeviceRead, PreparedDeviceWrite, DeviceRead, DeviceWrite):
        public = {n for n in dir(cls) if not n.startswith("_")}
        assert public <= {"shape", "dtype", "layout", "context", "release"}
        with pytest.raises(TypeError):
            cls()


def test_pre_admission_rejection_returns_the_exact_package_and_creates_no_record() -> None:
    with sim_provider() as sim:
        for fault in (Fault.REJECT_BEFORE_ADMISSION, Fault.BIND_FAILURE):
            pkg, _, _ = inputs()
            sim.inject(fault)
            with pytest.raises(SubmitRejected) as err:
                rt.submit(sim.engine, axpy_program(), pkg)  # type: ignore[arg-type]
            assert err.value.value is pkg
            del err
            assert sim.counters.records_created == 0 and sim.counters.events_created == 0
            assert sim.counters.enqueues == 0
            with pkg.group.view(pkg.bindings[0]) as v:  # borrows were all given back
                assert v.to_numpy().tolist() == [0.0, 1.0, 2.0]
            pkg.group.view_mut(pkg.bindings[1]).release()


def test_after_enqueue_failures_drain_and_return_no_owner_immediately() -> None:
    with sim_provider() as sim:
        pkg, _, _ = inputs()
        with sim.hold():
            sim.inject(Fault.FAIL_AFTER_ENQUEUE)
            handle = rt.submit(sim.engine, axpy_program(), pkg)  # type: ignore[arg-type]
            assert not handle.done()
            assert sim.counters.enqueues == 1 and sim.counters.records_created == 1
            with pytest.raises(UseAfterMoveError):
                pkg.group  # noqa: B018
            # the worker holds the retirement bindings (live borrows) while it drains
            assert sim.context.held_bindings() == 2
        out = handle.wait(5)
        assert isinstance(out, rt.RetiredFailed)
        assert sim.drain(5)
        assert sim.context.held_bindings() == 0 and sim.counters.bindings_released == 2
        del out


def test_completed_releases_bindings_event_roots_context_exactly_once() -> None:
    with sim_provider() as sim:
        pkg, _, _ = inputs()
        root = pkg.group._allocations[0]._root  # type: ignore[union-attr]
        refs = sys.getrefcount(root)
        with sim.hold():
            handle = rt.submit(sim.engine, axpy_program(), pkg)  # type: ignore[arg-type]
            assert sys.getrefcount(root) == refs + 1  # the record holds the root
        out = handle.wait(5)
        assert isinstance(out, rt.Completed)
        c = sim.counters
        assert (c.records_released, c.bindings_released, c.events_released) == (1, 2, 1)
        assert c.roots_released == 2
        assert sys.getrefcount(root) == refs  # the record's reference went exactly once
        rt.download(out.bundle.into_output(0)).to_numpy()
        del out, root


def test_retired_failed_releases_bindings_event_roots_context_exactly_once() -> None:
    with sim_provider() as sim:
        for fault in (None, Fault.FAIL_AFTER_ENQUEUE, Fault.PANIC_PROVEN):
            g = ts.AllocationGroup()
            s = g.insert(ts.arange(3.0))
            if fault is not None:
                sim.inject(fault)
            out = rt.submit(
                sim.engine, failing_program(), rt.ExecutionInputs(g, [s])  # type: ignore[arg-type]
            ).wait(5)
            assert isinstance(out, rt.RetiredFailed)
            out.inputs.group.view_mut(s).release()  # no binding borrow remains
            del out
        assert sim.drain(5)
        c = sim.counters
        assert (c.records_created, c.records_released, c.records_retained) == (3, 3, 0)
        assert c.bindings_released == 3 and c.events_released == 3


def test_completion_unproven_retains_bindings_event_roots_context_permanently() -> None:
    base = live_bytes()
    with sim_provider(completion_timeout=0.01) as sim:
        pkg, _, _ = inputs(10)
        sim.inject(Fault.EVENT_NEVER_COMPLETES)
        out = rt.submit(sim.engine, axpy_program(), pkg).wait(5)  # type: ignore[arg-type]
        assert isinstance(out, rt.CompletionUnproven)
        assert not hasattr(out, "inputs") and not hasattr(out, "bundle")
        del out, pkg
        gc.collect()
        record = sim.context._permanent[0]
        assert record.state == "retained" and len(record.bindings) == 2
        assert record.event is not None and not record.event.is_complete()
        assert record.context is sim.context and len(record.roots) == 3
        with pytest.raises(RuntimeError, match="already retained"):
            record.release()  # no path releases it
        del record
        assert live_bytes() == base + sim.counters.retained_bytes
        # No public API returns the retained owners: the provider exposes only counts.
        public = {n for n in dir(sim) if not n.startswith("_")}
        assert not any("recover" in n or "retry" in n for n in public)


@pytest.mark.parametrize("size", [10**2, 10**4, 10**6, 10**7])
def test_provider_counters_are_flat_in_element_count(size: int) -> None:
    """prepare/map/bind/enqueue/dispatch per submission do not depend on element count."""
    with sim_provider() as sim:
        g = ts.AllocationGroup()
        s = g.insert(ts.ones(size, dtype="float32"))
        b = rt.ProgramBuilder(1)
        (x,) = b.inputs
        program = b.build(b.apply(np.negative, x))
        validations = ts.host_provider.counters.validations
        out = rt.submit(sim.engine, program, rt.ExecutionInputs(g, [s])).wait(30)  # type: ignore[arg-type]
        assert isinstance(out, rt.Completed)
        c = sim.counters
        work = (c.prepares, c.maps, c.binds, c.enqueues, c.dispatches, c.validations)
        assert work == (1, 1, 1, 1, 1, 0)
        # The one fresh output's whole-array descriptor is the only host validation.
        assert ts.host_provider.counters.validations - validations <= 1
        del out


def test_raw_handles_cannot_mint_write_authority() -> None:
    """Events, contexts, records and root references expose no write path."""
    for cls in (providers.ProviderEvent, providers.ProviderContext, providers.RetirementRecord):
        public = {n for n in dir(cls) if not n.startswith("_")}
        assert not public & {"as_mut", "as_view_mut", "prepare_write", "view_mut", "storage"}
    for module in (providers._device, providers._retirement):
        src = inspect.getsource(module)
        assert "StorageMut" not in src.replace("``StorageMut``", "")
    x = ts.zeros(2)
    with ledger.capture() as rec:
        ctx = ProviderContext("t")
        providers.ProviderEvent(ctx).complete()
    assert rec.allocations == {}
    del x


def test_a_closed_provider_rejects_before_admission_and_finishes_admitted_work() -> None:
    with sim_provider() as sim:
        pkg, _, _ = inputs()
        with sim.hold():
            handle = rt.submit(sim.engine, axpy_program(), pkg)  # type: ignore[arg-type]
            sim.close(timeout=0)  # admitted work still reaches its outcome
        assert isinstance(handle.wait(5), rt.Completed)
        late, _, _ = inputs()
        with pytest.raises(SubmitRejected) as err:
            rt.submit(sim.engine, axpy_program(), late)  # type: ignore[arg-type]
        assert err.value.value is late
        assert err.value.cause.kind is rt.SubmitErrorKind.PROVIDER_REJECTED
        del err


def test_a_failure_of_the_reaper_itself_is_contained_as_completion_unproven(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Even a bug in the draining code cannot release owners early or hang a waiter."""
    with sim_provider() as sim:
        pkg, _, _ = inputs()

        def broken(*args: object) -> None:
            raise RuntimeError("reaper bug")

        from tenferro_storage.providers import _simulated

        monkeypatch.setattr(_simulated, "detached_bundle", broken)
        out = rt.submit(sim.engine, axpy_program(), pkg).wait(5)  # type: ignore[arg-type]
        assert isinstance(out, rt.CompletionUnproven)
        assert "reaper bug" in out.cause.message
        assert sim.drain(5)
        # Completion had been proven and the record released before the failure; the
        # outcome still claims nothing and no owner leaks out.
        assert sim.counters.records_released == 1 and sim.retained_records == 0
        del out, pkg
