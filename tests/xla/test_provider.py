"""The XLA provider: buffers as owners (ledger events, zero-copy host reads, refused host
writes, deterministic release), inputs imported zero-copy or as one recorded TRANSFER,
donation that reuses the buffer, asynchronous completion and retirement, no host
fallback, and the engine ``ad.jit`` picks."""

from __future__ import annotations

import subprocess
import sys
import types
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import DonationError
from tenferro_storage import ledger
from tenferro_storage import runtime as rt
from tenferro_storage.errors import DeviceResidentError, SubmitRejected
from tenferro_storage.ledger import AllocationReason, CopyReason
from tenferro_storage.providers import XlaProvider
from tenferro_storage.runtime._engine import lookup

OUT = AllocationReason.OPERATION_OUTPUT


def _split(rec: Any) -> tuple[int, int]:
    """(fresh output allocations, scratch allocations) of a capture."""
    allocs = [e for e in rec.events if e.kind.name == "ALLOCATE" and e.reason is OUT]
    scratch = sum(1 for e in allocs if " scratch @" in e.operation)
    return len(allocs) - scratch, scratch


def _provider(engine: Any) -> XlaProvider:
    p = lookup(engine)
    assert isinstance(p, XlaProvider)
    return p


def _mlp(w1: Any, w2: Any, x: Any) -> Any:
    return ad.sum(ad.tanh(x @ w1) @ w2)


def test_jit_defaults_to_the_xla_engine_and_names_it(xla_engine: Any) -> None:
    f = ad.jit(ad.sin)
    assert f.engine == xla_engine and "engine=xla:0" in repr(f)
    assert ad.jit(ad.sin, engine="host").engine == rt.host_engine()
    y = f(np.ones(3))
    assert ts.providers.domain_of(y) == "xla-cpu:0"


def test_each_fresh_output_is_one_allocation_in_the_engine_domain_plus_one_scratch(
    xla_engine: Any,
) -> None:
    f = ad.jit(lambda a: (ad.sin(a) @ ad.cos(a), ad.exp(a) + 1.0), engine="xla")
    x = ts.from_numpy(np.random.default_rng(0).normal(size=(16, 16)))
    f(x)  # compile
    scratch = f.lower(x).program.scratch_bytes
    with ledger.capture() as rec:
        a, b = f(x)
    assert _split(rec) == (2, 1 if scratch else 0) and rec.copies == {}
    events = [e for e in rec.events if e.kind.name == "ALLOCATE" and e.reason is OUT]
    assert all(e.operation.endswith("@xla-cpu:0") for e in events)
    assert ledger.live_bytes() >= a.nbytes + b.nbytes
    del a, b


def test_a_cpu_buffer_is_read_in_place_and_never_written_on_the_host(xla_engine: Any) -> None:
    y = ad.jit(lambda a: a * 2.0, engine="xla")(np.arange(4.0))
    handle = y._storage._root._allocation._handle
    arr = y._desc.readonly()  # what every host read borrows: the XLA buffer in place
    assert arr.ctypes.data == handle.unsafe_buffer_pointer()
    assert not arr.flags.writeable
    with ts.borrow_arrays(y) as got:
        np.testing.assert_array_equal(got, [0.0, 2.0, 4.0, 6.0])
    with pytest.raises(DeviceResidentError, match="never writes it"):
        with y.as_view_mut() as m:
            m.fill(1.0)
    with ledger.capture() as rec:
        host = rt.download(y)  # the way to a writable host owner: one recorded TRANSFER
    assert rec.copies[CopyReason.TRANSFER] == 1 and ts.providers.domain_of(host) == "host"
    with host.as_view_mut() as m:
        m.fill(1.0)


def test_upload_is_one_recorded_transfer_into_an_engine_buffer(xla_engine: Any) -> None:
    x = ts.from_numpy(np.arange(6.0))
    with ledger.capture() as rec:
        y = rt.upload(xla_engine, x)
    assert rec.copies == {CopyReason.TRANSFER: 1}
    assert rec.allocations == {AllocationReason.TRANSFER_DESTINATION: 1}
    assert ts.providers.domain_of(y) == "xla-cpu:0"
    np.testing.assert_array_equal(ad.jit(lambda a: a * 2.0)(y).to_numpy(), np.arange(6.0) * 2)


def test_releasing_the_owner_frees_the_xla_buffer_at_once(xla_engine: Any) -> None:
    domain = _provider(xla_engine).domain
    before = domain.live_allocations
    y = ad.jit(lambda a: a + 1.0, engine="xla")(np.zeros(8))
    handle = y._storage._root._allocation._handle
    assert domain.live_allocations == before + 1 and not handle.is_deleted()
    with ledger.capture() as rec:
        del y
    assert handle.is_deleted() and domain.live_allocations == before
    assert rec.releases == 0 and sum(1 for e in rec.events if e.kind.name == "RELEASE") == 1


@pytest.mark.parametrize("n", [1, 3, 5, 7, 13, 33, 100, 1000])
def test_tenferro_host_allocations_are_64_byte_aligned(n: int) -> None:
    """Every constructor's owner starts at 64 bytes (numpy's own small buffers: 16)."""
    src = np.arange(float(n))
    made = [ts.from_numpy(src), ts.zeros((n,)), ts.ones((n,)), ts.full((n,), 2.0),
            ts.arange(float(n)), ts.random.default_rng(0).normal((n,)),
            ts.random.default_rng(0).uniform((n,), dtype="float32"),
            ts.random.default_rng(0).normal((n,), dtype="complex128"),
            ts.from_numpy(src).duplicate()]
    for t in made:
        assert t._desc.readonly().ctypes.data % 64 == 0, t
    storage = ts.allocate_storage(8 * n)
    view = ts.Tensor.from_storage(storage, dtype="float64", shape=(n,))
    assert view._desc.readonly().ctypes.data % 64 == 0
    assert src.nbytes == made[0].nbytes  # the ledger records the value's bytes, not the pad


def test_aligned_owners_cross_zero_copy_and_a_training_loop_copies_nothing(
    xla_engine: Any,
) -> None:
    """forbid_copies around a whole training loop on the XLA engine: aligned host owners
    in, parameters kept on the engine between steps."""
    rng = np.random.default_rng(0)
    x = ts.from_numpy(rng.normal(size=(32, 8)))
    w1 = ts.from_numpy(rng.normal(size=(8, 16)) * 0.1)
    w2 = ts.from_numpy(rng.normal(size=(16, 1)) * 0.1)
    step = ad.jit(lambda a, b, d: [p - 0.01 * g for p, g in
                                   zip((a, b), ad.grad(_mlp, argnums=(0, 1))(a, b, d),
                                       strict=True)], engine="xla")
    loss = ad.jit(_mlp, engine="xla")
    losses = [loss(w1, w2, x).item()]
    w1, w2 = step(w1, w2, x)  # compile both signatures (host owners, then engine buffers)
    step(w1, w2, x)
    provider = _provider(xla_engine)
    counters = provider.counters
    before = counters.snapshot()
    provider.verify_zero_copy = True  # import with device_put and compare addresses
    try:
        with ledger.forbid_copies():
            for _ in range(5):
                w1, w2 = step(w1, w2, x)
                losses.append(loss(w1, w2, x).item())
    finally:
        provider.verify_zero_copy = False
    after = counters.snapshot()
    assert after["imports_transferred"] == before["imports_transferred"]
    assert after["imports_zero_copy"] > before["imports_zero_copy"]
    assert losses[-1] < losses[0]
    assert ts.providers.domain_of(w1) == "xla-cpu:0"


def test_an_unaligned_or_strided_input_is_exactly_one_recorded_transfer(
    xla_engine: Any,
) -> None:
    f = ad.jit(lambda a: ad.sum(a * a), engine="xla")
    kept = [np.arange(5.0) for _ in range(64)]  # numpy's own buffers: 16-byte aligned
    misaligned = next(a for a in kept if a.ctypes.data % 64)
    unaligned = ts.kernel.adopt_output(misaligned)  # an owner of numpy's buffer, as is
    strided = ts.from_numpy(np.arange(10.0))[::2]
    for value in (unaligned, strided):
        f(value)
        with ledger.capture() as rec:
            got = f(value)
        assert rec.copies[CopyReason.TRANSFER] == 1 and sum(rec.copies.values()) == 1
        assert got.item() == float(np.sum(value.to_numpy() ** 2))


def test_donation_consumes_the_owner_and_xla_reuses_its_buffer(xla_engine: Any) -> None:
    counters = _provider(xla_engine).counters
    step = ad.jit(lambda p, g: p - 0.5 * g, engine="xla", donate_argnums=0)
    p = ad.jit(lambda a: a + 0.0, engine="xla")(np.ones(64))  # an engine buffer
    pointer = p._storage._root._allocation._handle.unsafe_buffer_pointer()
    reused = counters.donations_reused
    with ledger.capture() as rec:
        q = step(p, np.full(64, 2.0))
    # written into p's buffer: no output allocation; the one copy is the numpy companion's
    # import (from_numpy), as for every numpy argument
    assert _split(rec)[0] == 0 and rec.copies == {CopyReason.TRANSFER: 1}
    assert counters.donations_reused == reused + 1
    assert q._storage._root._allocation._handle.unsafe_buffer_pointer() == pointer
    with pytest.raises(Exception, match="consumed"):
        p.to_numpy()
    np.testing.assert_array_equal(q.to_numpy(), np.zeros(64))
    with pytest.raises(DonationError, match="reuses only its own buffers"):
        step(ts.from_numpy(np.ones(64)), np.ones(64))
    viewed = ad.jit(lambda a: a + 0.0, engine="xla")(np.ones(64))
    viewed.to_numpy()  # a host read made a zero-copy view: XLA could not reuse it
    with pytest.raises(DonationError, match="read its buffer in place"):
        step(viewed, np.ones(64))


def test_no_hidden_host_fallback_each_engine_runs_only_its_own_program_kind(
    xla_engine: Any,
) -> None:
    host_program = ad.jit(ad.sin, engine="host").lower(np.ones(3)).program
    xla_program = ad.jit(ad.sin, engine="xla").lower(np.ones(3)).program
    for engine, program in ((xla_engine, host_program), (rt.host_engine(), xla_program)):
        group = ts.AllocationGroup()
        slots = [group.insert(ts.from_numpy(np.ones(3)))]
        inputs = rt.ExecutionInputs(group, slots)
        with pytest.raises(SubmitRejected) as err:
            rt.submit(engine, program, inputs)
        cause, back = err.value.into_parts()
        assert cause.kind is rt.SubmitErrorKind.INVALID_PROGRAM and back is inputs
        assert "never falls back" in cause.message


def test_asynchronous_submission_retires_every_record_exactly_once(xla_engine: Any) -> None:
    provider = _provider(xla_engine)
    program = ad.jit(lambda a: ad.tanh(a) * 2.0, engine="xla").lower(np.ones(1000)).program
    ctx = provider.context.counters
    created, released = ctx.records_created, ctx.records_released
    handles = []
    for k in range(4):
        group = ts.AllocationGroup()
        slots = [group.insert(ts.from_numpy(np.full(1000, float(k))))]
        handles.append(rt.submit(xla_engine, program, rt.ExecutionInputs(group, slots)))
    outcome = handles[0].wait()
    assert isinstance(outcome, rt.Completed)
    out = outcome.bundle.group.try_extract(outcome.bundle.outputs[0])
    np.testing.assert_allclose(out.to_numpy(), 2 * np.tanh(np.zeros(1000)))
    handles[1].detach()
    del handles[1:]  # dropped: the reaper retires them anyway
    assert provider.drain(10.0)
    assert ctx.records_created == created + 4 and ctx.records_released == released + 4


def test_without_jax_the_engine_is_not_listed_and_jit_uses_the_host() -> None:
    code = (
        "import sys; sys.modules['jax'] = None\n"
        "import numpy as np, tenferro_ad as ad\n"
        "from tenferro_storage import runtime as rt\n"
        "from tenferro_ad.errors import EngineUnavailableError\n"
        "assert not [e for e in rt.engines() if e.id.kind == 'xla']\n"
        "f = ad.jit(ad.sin); assert f.engine == rt.host_engine(), f\n"
        "assert abs(f(np.ones(2)).to_numpy()[0] - np.sin(1.0)) < 1e-15\n"
        "try:\n    ad.jit(ad.sin, engine='xla')\nexcept EngineUnavailableError: print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_long_chains_ledger_peak_is_within_twice_jaxs_compiled_memory(xla_engine: Any) -> None:
    """The 30-op chain's gradient on 10^5 float64: one call's ledger peak (its result plus
    the scratch sized by XLA's memory analysis) is at most 2x JAX's compiled temporaries
    plus output for the same function (the host engine keeps every intermediate)."""

    def chain(m: Any) -> Any:
        def loss(x: Any) -> Any:
            for k in range(30):
                x = m.sin(x) * 0.9 if k % 3 == 0 else m.tanh(x) + 0.1 if k % 3 == 1 \
                    else m.exp(x * 0.1)
            return m.sum(x)

        return loss

    x = np.random.default_rng(0).normal(size=100_000)
    g = ad.jit(ad.grad(chain(ad)), engine=xla_engine)
    owner = ts.from_numpy(x)
    g(owner)
    with ledger.capture() as rec:
        got = g(owner)
    ma = jax.jit(jax.grad(chain(jnp))).lower(jnp.asarray(x)).compile().memory_analysis()
    jax_bytes = ma.temp_size_in_bytes + ma.output_size_in_bytes
    assert x.nbytes <= rec.peak_bytes <= 2 * jax_bytes
    scratch = g.lower(owner).program.scratch_bytes
    assert scratch == g.lower(owner).program.executable.memory_analysis().temp_size_in_bytes
    np.testing.assert_allclose(got.to_numpy(), np.asarray(jax.grad(chain(jnp))(x)), rtol=1e-12)


@pytest.mark.parametrize("donate", [False, True], ids=["scoped", "detached"])
def test_float64_host_inputs_stay_float64_when_jax_runs_without_x64(donate: bool) -> None:
    """A user's process does not enable jax's x64 mode: float64 host inputs must reach the
    executable as float64 (jax would otherwise narrow them to float32 at the call, and the
    executable compiled for float64 refuses them).  Run in a fresh interpreter, where x64 is
    off as a user has it; both call paths (scoped and, with donation, detached)."""
    program = (
        "import numpy as np, tenferro_ad as ad, tenferro_storage as ts\n"
        "import jax\n"
        "assert not jax.config.jax_enable_x64\n"
        f"f = ad.jit(lambda v, w: v * w, engine='xla', donate_argnums={(0,) if donate else ()})\n"
        "from tenferro_storage import runtime as rt\n"
        "v = rt.upload(f.engine, ts.from_numpy(np.full(4, 1.0 / 3.0)))\n"
        "r = f(v, np.full(4, 3.0))\n"
        "print(r.dtype, repr(float(r.sum() - 4.0)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["float64", repr(float(np.sum(np.full(4, 1.0 / 3.0) * 3.0) - 4.0))]


@pytest.mark.parametrize(
    "platform, readable",
    [("cpu", True), ("cuda", False), ("rocm", False), ("tpu", False), ("METAL", False)],
)
def test_only_a_cpu_device_s_buffers_are_host_readable_in_place(
    platform: str, readable: bool
) -> None:
    """The host reads an XLA buffer in place only on the CPU platform; any accelerator's
    buffers (JAX's platform names, Apple's ``METAL`` among them) are not host-visible, so
    a read must transfer.  A stand-in device: only its ``platform`` and ``id`` are read.
    Mutant: ``platform == "cpu"`` turned into ``<=`` (``"METAL"`` sorts before ``"cpu"``)."""
    provider = XlaProvider(types.SimpleNamespace(platform=platform, id=7))
    assert provider.domain.host_readable is readable
    assert ("host-readable in place" in provider.describe()) is readable


def test_a_donated_buffer_backs_the_result_of_its_shape_not_an_earlier_one_of_its_dtype(
    xla_engine: Any,
) -> None:
    """With a scalar result of the same dtype listed first, the donated ``(4,)`` buffer is
    paired with the ``(4,)`` result: both results read back right and the donated buffer
    is reused.  Mutant: ``_backing``'s ``shape == ... and dtype == ...`` turned into
    ``... or dtype == ...`` (the scalar paired with the buffer)."""
    counters = _provider(xla_engine).counters
    step = ad.jit(lambda p, g: (ad.sum(p * g), p - 0.5 * g), engine="xla", donate_argnums=0)
    p = ad.jit(lambda a: a + 0.0, engine="xla")(np.arange(4.0))  # an engine buffer
    reused = counters.donations_reused
    s, q = step(p, np.ones(4))
    assert s.to_numpy() == 6.0
    np.testing.assert_array_equal(q.to_numpy(), np.arange(4.0) - 0.5)
    assert counters.donations_reused == reused + 1


def test_download_of_a_buffer_the_host_cannot_read_is_one_transfer_to_an_aligned_owner() -> None:
    """As on a GPU: the host cannot read the buffer in place, download still works."""
    provider = XlaProvider(jax.devices()[0])  # a fresh provider: its domain is ours to flip
    d = provider.upload(ts.from_numpy(np.arange(6.0).reshape(2, 3)))
    provider.domain.host_readable = False
    try:
        with pytest.raises(ts.errors.AccessError, match=r"runtime\.download\(value\)"):
            d.to_numpy()  # the refusal names download as the way to the host ...
        with ledger.forbid_copies(), pytest.raises(ts.errors.CopyForbiddenError):
            rt.download(d)
        with ledger.capture() as rec:
            host = rt.download(d)  # ... and download is that way
        assert rec.copies[CopyReason.TRANSFER] == 1
        assert rec.allocations == {AllocationReason.TRANSFER_DESTINATION: 1}
        assert ts.providers.domain_of(host) == "host"
        assert not d._storage._root._allocation.host_viewed  # no host view kept: donatable
        assert host._desc.readonly().ctypes.data % 64 == 0  # the owner's own bytes: aligned
        with host.as_view_mut() as m:
            m.fill(1.0)
        np.testing.assert_array_equal(host.to_numpy(), np.ones((2, 3)))
    finally:
        provider.domain.host_readable = True
    np.testing.assert_array_equal(d.to_numpy(), np.arange(6.0).reshape(2, 3))
