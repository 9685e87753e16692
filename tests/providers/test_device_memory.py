"""Device memory that is not host-visible (issue 14, G1 "Provider use and retirement", G5).

A simulated device (``SimulatedAsyncProvider()``) owns a device allocation domain.  Values
there (uploads, program outputs) refuse every host read and write; ``runtime.download``
and ``runtime.upload`` are the only ways across, each one recorded ``TRANSFER``.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import ledger, providers
from tenferro_storage import runtime as rt
from tenferro_storage.errors import (
    AccessError,
    BindError,
    CopyForbiddenError,
    DeviceResidentError,
    OwnershipError,
    SubmitRejected,
    TransferError,
)
from tenferro_storage.providers import (
    DeviceRead,
    DeviceWrite,
    PreparedDeviceRead,
    PreparedDeviceWrite,
    SimulatedAsyncProvider,
    bind_read,
    bind_write,
    prepare_read,
    prepare_write,
)
from tests.runtime.support import live_bytes, sim_provider

VALUES = np.arange(6.0).reshape(2, 3)


@pytest.fixture
def sim() -> Iterator[SimulatedAsyncProvider]:
    with sim_provider() as provider:
        yield provider


def _device(
    sim: SimulatedAsyncProvider, values: np.ndarray[Any, Any] = VALUES
) -> ts.Tensor[Any, Any]:
    assert sim.engine is not None
    return rt.upload(sim.engine, ts.from_numpy(values))


HOST_READS: dict[str, Callable[[ts.Tensor[Any, Any]], Any]] = {
    "to_numpy": lambda t: t.to_numpy(),
    "view.to_numpy": lambda t: t.as_view().to_numpy(),
    "slice.to_numpy": lambda t: t[1:].to_numpy(),
    "prepare_host": lambda t: t.prepare_host(),
    "view.prepare_host": lambda t: t.as_view().prepare_host(),
    "prepare_host_mut": lambda t: t.prepare_host_mut(),
    "fill": lambda t: t.fill(1.0),
    "duplicate": lambda t: t.duplicate(),
    "borrow_arrays": lambda t: ts.borrow_arrays([t]).__enter__(),
    "read_array": lambda t: ts.kernel.read_array(t),
    "view.read_array": lambda t: ts.kernel.read_array(t.as_view()),
}


@pytest.mark.parametrize("name", sorted(HOST_READS))
def test_a_host_read_of_a_device_value_is_refused_and_changes_nothing(
    sim: SimulatedAsyncProvider, name: str
) -> None:
    """Every host access path refuses a device-resident value with an error naming the
    operation, the domain and the download call; no event, no borrow left, value intact."""
    assert sim.domain is not None
    t = _device(sim)
    gc.collect()
    before = (ts.ledger.live_bytes(), sim.domain.live_bytes)
    with ledger.capture() as rec:
        with pytest.raises((DeviceResidentError, AccessError)) as err:
            HOST_READS[name](t)
    message = str(err.value)
    del err
    gc.collect()
    assert sim.domain.name in message and "runtime.download" in message
    op = name.split(".")[-1]
    assert op in message or (op == "borrow_arrays" and "prepare_host" in message)
    assert rec.events == [] and (ts.ledger.live_bytes(), sim.domain.live_bytes) == before
    t.as_view_mut().release()  # no borrow was left behind
    np.testing.assert_array_equal(rt.download(t).to_numpy(), VALUES)


def test_item_of_a_one_element_device_value_is_refused(sim: SimulatedAsyncProvider) -> None:
    """``item()`` reads the host array directly: refused, naming item and the domain."""
    t = _device(sim, np.array([4.0]))
    with pytest.raises(DeviceResidentError, match=r"item: .*device-resident.*runtime\.download"):
        t.item()
    assert rt.download(t).item() == 4.0


def test_operators_on_a_device_value_are_refused(sim: SimulatedAsyncProvider) -> None:
    """Arithmetic (tenferro_ad's operators read through kernel.read_array) is a host read."""
    pytest.importorskip("tenferro_ad")
    import tenferro_ad  # noqa: F401  (registers the operators)

    t = _device(sim)
    with pytest.raises(DeviceResidentError, match=r"read_array .*device-resident"):
        t + 1.0
    np.testing.assert_array_equal(rt.download(t).to_numpy(), VALUES)


def test_a_device_root_has_no_host_buffer_through_any_public_path(
    sim: SimulatedAsyncProvider,
) -> None:
    """The root's allocation is an opaque handle: no buffer protocol, no array; numpy
    conversion is refused; repr shows a placeholder instead of values or an error."""
    t = _device(sim)
    with t.as_view() as v:
        root = v._storage.claim.root
        assert root.domain == providers.domain_of(t) == sim.domain.name  # type: ignore[union-attr]
        with pytest.raises(AttributeError, match="private"):
            root.allocation  # noqa: B018
        memory = root._allocation
        with pytest.raises(TypeError):
            memoryview(memory)
        with pytest.raises(TypeError):
            np.frombuffer(memory)
    with pytest.raises(OwnershipError):
        np.asarray(t)
    assert "device-resident" in repr(t)
    del root, memory


def test_download_is_one_recorded_transfer_with_the_value_bytes(
    sim: SimulatedAsyncProvider,
) -> None:
    """download: one TRANSFER_DESTINATION allocation on the host and one TRANSFER copy of
    the logical bytes (a strided view downloads contiguous); the source is unchanged."""
    t = _device(sim)
    with ledger.capture() as rec:
        host = rt.download(t)
    assert rec.allocations == {ts.AllocationReason.TRANSFER_DESTINATION: 1}
    assert rec.copies == {ts.CopyReason.TRANSFER: 1}
    assert rec.copy_bytes == {ts.CopyReason.TRANSFER: VALUES.nbytes}
    assert [e.operation for e in rec.events if e.kind is ts.ledger.EventKind.COPY] == [
        f"download {sim.domain.name} -> host"  # type: ignore[union-attr]
    ]
    assert providers.domain_of(host) == "host"
    np.testing.assert_array_equal(host.to_numpy(), VALUES)
    with ledger.capture() as rec2:
        transposed = rt.download(t.T)
    assert rec2.copy_bytes == {ts.CopyReason.TRANSFER: VALUES.nbytes}
    with transposed.as_view() as tv:
        assert tv.layout == ts.Contiguous(range(6))
    np.testing.assert_array_equal(transposed.to_numpy(), VALUES.T)
    assert providers.domain_of(t) == sim.domain.name  # type: ignore[union-attr]
    del host, transposed


def test_upload_is_one_recorded_transfer_into_the_device_domain(
    sim: SimulatedAsyncProvider,
) -> None:
    """upload: one TRANSFER_DESTINATION allocation recorded under the device domain and one
    TRANSFER copy; the domain's live bytes follow the device owner's lifetime."""
    assert sim.engine is not None and sim.domain is not None
    x = ts.from_numpy(VALUES)
    base = sim.domain.live_bytes
    with ledger.capture() as rec:
        d = rt.upload(sim.engine, x)
    (alloc,) = [e for e in rec.events if e.kind is ts.ledger.EventKind.ALLOCATE]
    assert alloc.reason is ts.AllocationReason.TRANSFER_DESTINATION
    assert alloc.operation == f"upload @{sim.domain.name}" and alloc.nbytes == VALUES.nbytes
    assert rec.copy_bytes == {ts.CopyReason.TRANSFER: VALUES.nbytes}
    assert sim.domain.live_bytes == base + VALUES.nbytes and sim.domain.live_allocations == 1
    x.fill(7.0)  # the device copy does not alias the host owner
    np.testing.assert_array_equal(rt.download(d).to_numpy(), VALUES)
    del d
    gc.collect()
    assert sim.domain.live_bytes == base and sim.domain.counters.releases >= 1


def test_forbid_copies_refuses_download_and_upload_before_anything_happens(
    sim: SimulatedAsyncProvider,
) -> None:
    """Inside ledger.forbid_copies() both transfers raise CopyForbiddenError: no event,
    no allocation, no borrow left behind."""
    assert sim.engine is not None and sim.domain is not None
    t = _device(sim)
    x = ts.from_numpy(VALUES)
    gc.collect()
    before = (ts.ledger.live_bytes(), sim.domain.live_bytes)
    with ledger.capture() as rec, ledger.forbid_copies():
        with pytest.raises(CopyForbiddenError, match="download"):
            rt.download(t)
        with pytest.raises(CopyForbiddenError, match="upload"):
            rt.upload(sim.engine, x)
    gc.collect()
    assert rec.events == [] and (ts.ledger.live_bytes(), sim.domain.live_bytes) == before
    t.as_view_mut().release()
    x.as_view_mut().release()


def test_transfers_without_meaning_are_refused(sim: SimulatedAsyncProvider) -> None:
    """Downloading a host value, uploading a device value, uploading to an engine without
    device memory: TransferError (a ValueError), nothing recorded."""
    assert sim.engine is not None
    x = ts.from_numpy(VALUES)
    t = _device(sim)
    with ledger.capture() as rec:
        with pytest.raises(TransferError, match="host domain"):
            rt.download(x)
        with pytest.raises(TransferError, match="download"):
            rt.upload(sim.engine, t)
        with pytest.raises(TransferError, match="no device memory"):
            rt.upload(rt.host_engine(), x)
    assert rec.events == []


def _double() -> rt.CompiledGraph:
    b = rt.ProgramBuilder(1, name="double")
    (x,) = b.inputs
    return b.build(b.apply(np.add, x, x))


def test_device_program_outputs_stay_device_resident_until_downloaded(
    sim: SimulatedAsyncProvider,
) -> None:
    """A device engine's outputs live in its domain (borrowed output views too) and refuse
    host reads; download gives the values."""
    assert sim.engine is not None and sim.domain is not None
    for make in (lambda: ts.from_numpy(VALUES), lambda: _device(sim)):  # host or device input
        g = ts.AllocationGroup()
        s = g.insert(make())
        out = rt.submit(sim.engine, _double(), rt.ExecutionInputs(g, [s])).wait(5)
        assert isinstance(out, rt.Completed)
        view = out.bundle.output(0)
        assert isinstance(view, ts.TensorView)
        assert providers.domain_of(view) == sim.domain.name
        with pytest.raises(AccessError, match="device-resident"):
            view.to_numpy()
        np.testing.assert_array_equal(rt.download(view).to_numpy(), 2 * VALUES)
        view.release()
        owner = out.bundle.into_output(0)
        with pytest.raises(DeviceResidentError):
            ts.kernel.read_array(owner)
        del out, owner


def test_a_device_kernel_returning_its_input_is_refused_not_aliased(
    sim: SimulatedAsyncProvider,
) -> None:
    """A kernel that hands back its (device-resident) input would make a second owner of
    device bytes: the run fails (RetiredFailed, AliasedOutputError) and the input comes
    back unchanged."""
    assert sim.engine is not None
    b = rt.ProgramBuilder(1, name="leak")
    (x,) = b.inputs
    program = b.build(b.apply(lambda a: a, x))
    g = ts.AllocationGroup()
    s = g.insert(_device(sim))
    out = rt.submit(sim.engine, program, rt.ExecutionInputs(g, [s])).wait(5)
    assert isinstance(out, rt.RetiredFailed)
    assert out.cause.error_type == "AliasedOutputError"
    with out.inputs.group.view(s) as v:
        np.testing.assert_array_equal(rt.download(v).to_numpy(), VALUES)
    del out


def test_the_host_engine_refuses_device_inputs_before_admission(
    sim: SimulatedAsyncProvider,
) -> None:
    """Detached and scoped submission to the host engine refuse a device-resident input
    (DOMAIN) with the exact package back; the message points to download."""
    g = ts.AllocationGroup()
    s = g.insert(_device(sim))
    pkg = rt.ExecutionInputs(g, [s])
    with pytest.raises(SubmitRejected) as err:
        rt.submit(rt.host_engine(), _double(), pkg)
    assert err.value.value is pkg and err.value.cause.kind is rt.SubmitErrorKind.DOMAIN
    assert "download" in str(err.value)
    t = _device(sim)
    view = t.as_view()
    scoped = rt.ScopedReadInputs([view])
    with pytest.raises(SubmitRejected) as err2:
        rt.execute_scoped_read_only(rt.host_engine(), _double(), scoped)
    assert err2.value.value is scoped and err2.value.cause.kind is rt.SubmitErrorKind.DOMAIN
    del err, err2
    view.release()


def test_bind_failure_returns_the_exact_device_payload(sim: SimulatedAsyncProvider) -> None:
    """A device-resident value prepares and binds on its own provider; a bind failure hands
    back the exact PreparedDeviceRead, still holding its borrow; another device's context
    cannot prepare it (AccessError with the view back)."""
    t = _device(sim)
    prepared = prepare_read(sim.context, t.as_view())
    sim.context.fail_next("bind")
    with pytest.raises(BindError) as err:
        bind_read(prepared)
    assert err.value.value is prepared and type(prepared) is PreparedDeviceRead
    del err
    assert prepared.shape == VALUES.shape  # unchanged and live
    with pytest.raises(ts.errors.BorrowError):
        t.as_view_mut()
    bound = bind_read(prepared)
    assert type(bound) is DeviceRead
    bound.release()
    with sim_provider() as other:
        view = t.as_view()
        with pytest.raises(AccessError, match="cannot reach") as err2:
            prepare_read(other.context, view)
        assert err2.value.value is view
        del err2
        view.release()
    t.as_view_mut().release()


def test_device_write_access_comes_only_from_an_exclusive_borrow_of_a_device_value(
    sim: SimulatedAsyncProvider,
) -> None:
    """A shared view of a device value cannot prepare write access; an exclusive one yields
    PreparedDeviceWrite (no host array) and binds to DeviceWrite; host write access to the
    same value is refused meanwhile and afterwards."""
    t = _device(sim)
    shared = t.as_view()
    with pytest.raises(TypeError, match="exclusive"):
        prepare_write(sim.context, shared)  # type: ignore[arg-type]
    shared.release()
    prepared = prepare_write(sim.context, t.as_view_mut())
    assert type(prepared) is PreparedDeviceWrite
    assert not any(hasattr(prepared, n) for n in ("as_array", "as_slice_mut", "iter_strided"))
    with pytest.raises(ts.errors.BorrowError):
        t.as_view()  # the payload carries the exclusive borrow
    bound = bind_write(prepared)
    assert type(bound) is DeviceWrite
    bound.release()
    with pytest.raises(AccessError, match="device-resident"):
        t.prepare_host_mut()
    np.testing.assert_array_equal(rt.download(t).to_numpy(), VALUES)


def test_prepare_access_selects_the_host_or_device_variant_and_refuses_host_for_device(
    sim: SimulatedAsyncProvider,
) -> None:
    """One entry, two targets: HOST gives a host traversal variant, DEVICE the device
    payload; a device value asked for HOST is refused with the exact view back."""
    x = ts.from_numpy(VALUES)
    with providers.prepare_access(x.as_view(), providers.AccessTarget.HOST) as host_read:
        assert type(host_read) is ts.PreparedContiguousRead
    dev_read = providers.prepare_access(x.as_view(), providers.AccessTarget.DEVICE, sim.context)
    assert type(dev_read) is PreparedDeviceRead
    dev_read.release()
    dev_write = providers.prepare_access(
        x.as_view_mut(), providers.AccessTarget.DEVICE, sim.context
    )
    assert type(dev_write) is PreparedDeviceWrite
    dev_write.release()
    t = _device(sim)
    view = t.as_view()
    with pytest.raises(AccessError, match="device-resident") as err:
        providers.prepare_access(view, providers.AccessTarget.HOST)
    assert err.value.value is view
    del err
    with pytest.raises(TypeError, match="context"):
        providers.prepare_access(view, providers.AccessTarget.DEVICE)
    view.release()


def test_derived_views_of_a_device_value_have_no_host_array(sim: SimulatedAsyncProvider) -> None:
    """Slices and transposes keep the device memory handle as their buffer: numpy cannot
    build a host array over it, so every read path still refuses (the prepared-access
    paths with the device message), and download of a slice gives its values."""
    t = _device(sim)
    for derive in (lambda: t[1:], lambda: t.T, lambda: t[0, ::2]):
        v = derive()
        with pytest.raises((DeviceResidentError, TypeError)):
            ts.kernel.read_array(v)
        with pytest.raises(AccessError, match="device-resident"):
            v.to_numpy()
        v.release()
    np.testing.assert_array_equal(rt.download(t[0, ::2]).to_numpy(), VALUES[0, ::2])


@pytest.mark.parametrize("size", [10**2, 10**4, 10**6, 10**7])
def test_device_counters_are_flat_from_10e2_to_10e7_elements(size: int) -> None:
    """Per submission over a device-resident input and output: one prepare, map, bind,
    enqueue and dispatch, no re-validation; one descriptor validation on the domain (the
    fresh output's), whatever the element count."""
    with sim_provider() as sim:
        assert sim.engine is not None and sim.domain is not None
        g = ts.AllocationGroup()
        s = g.insert(rt.upload(sim.engine, ts.ones(size, dtype="float32")))
        b = rt.ProgramBuilder(1)
        (x,) = b.inputs
        program = b.build(b.apply(np.negative, x))
        host_validations = ts.host_provider.counters.validations
        domain_validations = sim.domain.counters.validations
        out = rt.submit(sim.engine, program, rt.ExecutionInputs(g, [s])).wait(60)
        assert isinstance(out, rt.Completed)
        c = sim.counters
        assert (c.prepares, c.maps, c.binds, c.enqueues, c.dispatches, c.validations) == (
            1, 1, 1, 1, 1, 0,
        )
        assert sim.domain.counters.validations - domain_validations == 1
        assert ts.host_provider.counters.validations == host_validations
        assert providers.domain_of(out.bundle.output(0)) == sim.domain.name  # type: ignore[arg-type]
        del out, g


def test_unproven_completion_retains_device_bytes_permanently() -> None:
    """A device input and output of a submission whose completion is unproven stay
    allocated in the domain for good: live bytes = baseline + the retained bytes."""
    base = live_bytes()
    with sim_provider(completion_timeout=0.01) as sim:
        assert sim.engine is not None and sim.domain is not None
        g = ts.AllocationGroup()
        s = g.insert(rt.upload(sim.engine, ts.ones(8)))
        sim.inject(providers.Fault.EVENT_NEVER_COMPLETES)
        out = rt.submit(sim.engine, _double(), rt.ExecutionInputs(g, [s])).wait(5)
        assert isinstance(out, rt.CompletionUnproven)
        del out, g
        assert sim.drain(5)
        assert sim.domain.live_bytes == 2 * 64 == sim.counters.retained_bytes
        assert live_bytes() == base + sim.counters.retained_bytes


@pytest.mark.parametrize(
    ("deltas", "message"),
    [
        ({"binds": 1, "unknown": 1}, "keyword 'unknown' is not a counter"),
        ({"maps": 2, "binds": 1.5}, "keyword 'binds' must be an int delta, got float"),
    ],
)
def test_count_validates_every_keyword_before_adding_any(
    deltas: dict[str, Any], message: str
) -> None:
    ctx = providers.ProviderContext("count-test")
    before = ctx.counters.snapshot()
    with pytest.raises(TypeError, match=rf"ProviderContext\.count: {message}"):
        ctx.count(**deltas)
    assert ctx.counters.snapshot() == before  # nothing added, not even the valid deltas
    ctx.count(binds=2, maps=1)
    assert (ctx.counters.binds, ctx.counters.maps) == (2, 1)
