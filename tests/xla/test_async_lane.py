"""G7's asynchronous lane on the XLA engine: the retention contract of jitted forward,
backward and checkpointed programs with allocation, copy and retirement counters (the
host engine beside it), no hidden host fallback, and the G3/G5 rows that apply to an
asynchronous provider with faults injected around its events (a failing kernel, failing
completion, an interrupt while enqueueing or executing, release before completion,
donation on failure); plus what the engine's per-signature fast call must keep: the
general path's ledger events, its errors, and float64 without the user's x64 flag."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import attrs
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import extend
from tenferro_ad._core._primitive import REGISTRY
from tenferro_ad._traced._jit_run import Compiled
from tenferro_ad.errors import ExecutionFailed, LoweringError
from tenferro_storage import ledger
from tenferro_storage import runtime as rt
from tenferro_storage._ledger import LEDGER
from tenferro_storage.ledger import AllocationReason
from tenferro_storage.providers import XlaProvider
from tenferro_storage.runtime._engine import lookup

OUT = AllocationReason.OPERATION_OUTPUT


def _provider(engine: Any) -> XlaProvider:
    p = lookup(engine)
    assert isinstance(p, XlaProvider)
    return p


def _mlp(w1: Any, w2: Any, x: Any) -> Any:
    return ad.sum(ad.tanh(x @ w1) @ w2)


def _chain(x: Any) -> Any:
    for _ in range(6):
        x = ad.tanh(ad.sin(x))
    return x


def _checkpointed(x: Any) -> Any:
    return ad.sum(ad.checkpoint(_chain, policy=ad.save_nothing)(x) * 2.0)


def _params() -> list[ts.Tensor[Any, Any]]:
    rng = np.random.default_rng(0)
    return [ts.from_numpy(rng.normal(size=s)) for s in ((8, 16), (16, 1), (32, 8))]


def _fault(f: Any, make: Callable[[Any], Any]) -> None:
    """Every compiled program of ``f`` runs ``make(real executable)`` instead."""
    for key, entry in list(f._cache.items()):
        program = attrs.evolve(entry.program, executable=make(entry.program.executable))
        f._cache[key] = Compiled(entry.graph, program, entry.compile_seconds)
    f._fast.clear()


def _raising(exc: BaseException) -> Callable[[Any], Any]:
    def make(real: Any) -> Any:
        def run(*args: Any) -> Any:
            raise exc

        return run

    return make


class _NeverReady:
    """A result whose readiness cannot be proven (completion fails)."""

    def block_until_ready(self) -> None:
        raise RuntimeError("injected: the device lost the stream")


def _unprovable(real: Any) -> Any:
    def run(*args: Any) -> Any:
        results = real(*args)  # really runs (and takes donated buffers) ...
        return [_NeverReady() for _ in results]  # ... but completion fails

    return run


def _close(got: Any, want: Any) -> None:
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want),
                    strict=True):
        np.testing.assert_allclose(a.to_numpy(), b.to_numpy(), rtol=1e-12)


# -- the retention contract, per engine -----------------------------------------------------
@pytest.mark.parametrize("engine", ["host", "xla"])
@pytest.mark.parametrize("case", ["forward", "backward", "checkpoint"])
def test_g7_lane_jitted_programs_make_no_retention_copies_and_retire_once(
    engine: str, case: str
) -> None:
    """Owners in: no byte-preserving copy (EXPLICIT_DUPLICATE or TRANSFER) on either
    engine; on XLA exactly one OPERATION_OUTPUT allocation per fresh result plus the
    scratch allocation (released at retirement), one execution and one retirement."""
    w1, w2, x = _params()
    fn = {
        "forward": _mlp,
        "backward": ad.value_and_grad(_mlp, argnums=(0, 1)),
        "checkpoint": ad.value_and_grad(_checkpointed),
    }[case]
    args = (w1, w2, x) if case != "checkpoint" else (x,)
    f = ad.jit(fn, engine=engine)
    want = fn(*args)  # eager
    f(*args)  # compile
    live = dict(LEDGER.live)
    xla = isinstance(lookup(f.engine), XlaProvider)
    before = _provider(f.engine).counters.snapshot() if xla else {}
    with ledger.capture() as rec:
        got = f(*args)
    assert rec.copies == {}
    allocs = [e for e in rec.events if e.kind.name == "ALLOCATE"]
    assert {e.reason for e in allocs} <= {OUT, AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT}
    if xla:
        program = f.lower(*args).program
        n_fresh = sum(1 for k in program.output_kinds if k is rt.OutputKind.FRESH)
        scratch = [e for e in allocs if " scratch @" in e.operation]
        assert len(allocs) - len(scratch) == n_fresh
        assert len(scratch) == (1 if program.scratch_bytes else 0)
        assert all(e.allocation not in LEDGER.live for e in scratch)  # released at retirement
        after = _provider(f.engine).counters.snapshot()
        assert {k: after[k] - before[k] for k in ("executions", "retirements")} == {
            "executions": 1, "retirements": 1}
        assert after["imports_transferred"] == before["imports_transferred"]
    _close(got, want)
    del got
    assert dict(LEDGER.live) == live  # nothing retained past the call's results


def test_g7_lane_checkpoint_retains_the_same_boundary_on_both_engines() -> None:
    x = ts.from_numpy(np.linspace(-1.0, 1.0, 32))
    fn = ad.value_and_grad(_checkpointed)
    host = ad.jit(fn, engine="host").retained(x)
    xla = ad.jit(fn, engine="xla").retained(x)
    def shown(entries: Any) -> list[tuple[Any, ...]]:
        return [(e.producer, e.needed_by, e.nbytes, e.shape) for e in entries]

    assert shown(host) == shown(xla)
    assert any("checkpoint.vjp" in e.needed_by for e in xla)
    assert all(e.producer not in ("tanh", "sin") or "checkpoint.vjp" in e.needed_by
               for e in xla)  # no interior value of the region is kept


def test_g7_lane_a_program_with_a_host_only_kernel_fails_and_nothing_runs_on_the_host(
    xla_engine: Any,
) -> None:
    """A primitive with numpy kernels but no lowering rule: the XLA lane refuses the
    program (LoweringError) -- no host execution, no allocation, no copy."""
    prim = extend.defprimitive("xla_lane_host_only", lambda a: a + 1.0, 1)
    try:
        f = ad.jit(lambda v: ad.sum(extend.bind(prim, v)), engine=xla_engine)
        host = lookup(rt.host_engine()).counters.snapshot()  # type: ignore[union-attr]
        xla = _provider(xla_engine).counters.snapshot()
        x = ts.from_numpy(np.ones(4))
        with ledger.capture() as rec, pytest.raises(LoweringError, match="xla_lane_host_only"):
            f(x)
        assert lookup(rt.host_engine()).counters.snapshot() == host  # type: ignore[union-attr]
        assert _provider(xla_engine).counters.snapshot() == xla
        assert rec.copies == {} and not [e for e in rec.events if e.kind.name == "ALLOCATE"]
    finally:
        REGISTRY.pop("xla_lane_host_only")


# -- the fast call keeps the general path's events and errors -------------------------------
def test_a_call_over_owners_records_what_the_general_path_records(xla_engine: Any) -> None:
    w1, w2, x = _params()
    f = ad.jit(ad.value_and_grad(_mlp, argnums=(0, 1)), engine=xla_engine)
    f(w1, w2, x)

    def events(*args: Any) -> Counter[tuple[Any, ...]]:
        with ledger.capture() as rec:
            out = f(*args)
        del out
        return Counter((e.kind.name, e.reason, e.nbytes, e.operation) for e in rec.events)

    fast = events(w1, w2, x)
    with w1.as_view() as v1:  # a view leaf takes the general execute_scoped path
        general = events(v1, w2, x)
    assert fast == general and f._fast  # the owners' call was planned


def test_one_structure_called_with_owners_of_several_signatures_runs_each_its_own_program(
    xla_engine: Any,
) -> None:
    """The structure's latest prepared call declines owners of another shape or dtype
    (its one input pass checks them), so the call compiles or reuses that signature's
    program instead of feeding the wrong executable."""
    f = ad.jit(lambda a, b: ad.sum(ad.sin(a) * b), engine=xla_engine)
    for n, dt in [(4, np.float64), (3, np.float64), (4, np.float32), (4, np.float64),
                  (3, np.float64), (4, np.float32)]:
        xs = np.linspace(0.1, 1.0, n).astype(dt)
        got = f(ts.from_numpy(xs), ts.from_numpy(xs * 2))
        assert got.dtype.numpy == dt
        np.testing.assert_allclose(got.item(), np.sum(np.sin(xs) * xs * 2), rtol=1e-6)
    assert f.cache_info().misses == 3 and f.cache_info().size == 3


def test_an_owner_written_in_place_between_calls_is_read_anew_without_a_copy(
    xla_engine: Any,
) -> None:
    """The prepared call imports an owner's aligned host bytes in place once per layout
    and XLA reads them at each execution: a write between calls is seen, nothing is
    copied, and each call counts its zero-copy import."""
    f = ad.jit(lambda a: a * 2.0, engine=xla_engine)
    x = ts.from_numpy(np.ones((4, 4)))
    f(x)
    provider = _provider(xla_engine)
    for k in range(3):
        with x.prepare_host_mut() as p:
            p.as_array()[...] = np.arange(16.0).reshape(4, 4) + k
        before = provider.counters.imports_zero_copy
        with ledger.capture() as rec, ledger.forbid_copies():
            y = f(x)
        assert rec.copies == {} and provider.counters.imports_zero_copy == before + 1
        np.testing.assert_array_equal(y.to_numpy(), 2 * (np.arange(16.0).reshape(4, 4) + k))


def test_a_call_over_an_exclusively_borrowed_or_consumed_owner_raises_as_before(
    xla_engine: Any,
) -> None:
    f = ad.jit(lambda a: ad.sin(a) * 2.0, engine=xla_engine)
    x = ts.from_numpy(np.ones(4))
    f(x)
    with x.as_view_mut(), pytest.raises(ts.errors.BorrowError, match="exclusive"):
        f(x)
    ts.AllocationGroup().insert(x)  # consumes the owner
    with pytest.raises(ts.errors.UseAfterMoveError):
        f(x)


def test_float64_stays_float64_without_the_users_x64_flag(xla_engine: Any) -> None:
    """The engine turns x64 on around its own compile/execute only: inside a thread with
    x64 off, a float64 program computes in float64 and the user's JAX code stays 32-bit."""
    x = ts.from_numpy(np.linspace(0.0, 1.0, 7))
    with jax.enable_x64(False):
        f = ad.jit(ad.value_and_grad(lambda a: ad.sum(ad.sin(a) * a)), engine=xla_engine)
        f(x)  # compiles and runs
        value, grad = f(x)  # the fast call
        from_numpy = ad.jit(lambda a: a * 3.0, engine=xla_engine)(np.linspace(0.0, 1.0, 7))
        assert jnp.ones(2).dtype == jnp.float32  # the user's setting is untouched
    assert grad.dtype.numpy == np.float64 and from_numpy.dtype.numpy == np.float64
    assert value.dtype.numpy == np.float64
    xs = np.linspace(0.0, 1.0, 7)
    np.testing.assert_allclose(grad.to_numpy(), np.sin(xs) + xs * np.cos(xs), rtol=1e-15)


def test_a_fresh_process_without_jax_enable_x64_runs_float64_programs() -> None:
    code = (
        "import os; os.environ.pop('JAX_ENABLE_X64', None)\n"
        "import numpy as np, jax, tenferro_ad as ad, tenferro_storage as ts\n"
        "assert not jax.config.jax_enable_x64\n"
        "f = ad.jit(lambda a: ad.sum(ad.exp(a)), engine='xla')\n"
        "y = f(ts.from_numpy(np.full(3, 0.1)))\n"
        "assert y.dtype.numpy == np.float64, y.dtype\n"
        "assert abs(y.item() - 3 * np.exp(0.1)) < 1e-14\n"
        "assert not jax.config.jax_enable_x64\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


# -- faults around the provider's events ---------------------------------------------------
def test_a_failing_kernel_leaves_the_inputs_whole_and_releases_the_scratch(
    xla_engine: Any,
) -> None:
    f = ad.jit(lambda a: ad.sum(ad.tanh(a @ a)), engine=xla_engine)
    x = ts.from_numpy(np.eye(8))
    f(x)
    _fault(f, _raising(RuntimeError("injected kernel failure")))
    live = dict(LEDGER.live)
    with pytest.raises(ExecutionFailed, match="injected kernel failure") as err:
        f(x)
    assert err.value.cause.kind is rt.ExecutionErrorKind.KERNEL_FAILED
    assert dict(LEDGER.live) == live
    with x.as_view_mut():  # no borrow outlived the call
        pass
    np.testing.assert_array_equal(x.to_numpy(), np.eye(8))


@pytest.mark.parametrize("through", ["owners", "views"])
def test_an_interrupt_during_execution_propagates_and_leaves_no_borrow_or_scratch(
    xla_engine: Any, through: str
) -> None:
    f = ad.jit(lambda a: ad.sum(ad.tanh(a @ a)), engine=xla_engine)
    x = ts.from_numpy(np.eye(8))
    f(x)
    _fault(f, _raising(KeyboardInterrupt()))
    live = dict(LEDGER.live)
    with pytest.raises(KeyboardInterrupt):
        if through == "owners":
            f(x)
        else:
            with x.as_view() as v:
                f(v)
    assert dict(LEDGER.live) == live
    with x.as_view_mut():
        pass


def test_an_interrupt_in_a_scoped_execution_leaves_the_callers_package_usable(
    xla_engine: Any,
) -> None:
    program = ad.jit(lambda a: ad.tanh(a) * 2.0, engine=xla_engine).lower(np.ones(8)).program
    broken = attrs.evolve(program, executable=_raising(KeyboardInterrupt())(None))
    x = ts.from_numpy(np.full(8, 0.5))
    with x.as_view() as v:
        inputs = rt.ScopedReadInputs([v])
        with pytest.raises(KeyboardInterrupt):
            rt.execute_scoped_read_only(xla_engine, broken, inputs)
        outcome = rt.execute_scoped_read_only(xla_engine, program, inputs)  # not consumed
        assert isinstance(outcome, rt.Completed)
        group, refs = outcome.bundle.into_owned_group()
        np.testing.assert_allclose(group.try_extract(refs[0]).to_numpy(), 2 * np.tanh(0.5))


def test_failing_completion_is_a_provider_failure_retired_exactly_once(
    xla_engine: Any,
) -> None:
    provider = _provider(xla_engine)
    program = ad.jit(lambda a: ad.tanh(a) * 2.0, engine=xla_engine).lower(np.ones(64)).program
    broken = attrs.evolve(program, executable=_unprovable(program.executable))
    ctx = provider.context.counters
    created, released = ctx.records_created, ctx.records_released
    group = ts.AllocationGroup()
    slots = [group.insert(ts.from_numpy(np.full(64, 3.0)))]
    outcome = rt.submit(xla_engine, broken, rt.ExecutionInputs(group, slots)).wait()
    assert isinstance(outcome, rt.RetiredFailed)
    assert outcome.cause.kind is rt.ExecutionErrorKind.PROVIDER_FAILED
    assert "lost the stream" in outcome.cause.message
    assert provider.drain(10.0)
    assert ctx.records_created == created + 1 and ctx.records_released == released + 1
    back, bindings = outcome.inputs.into_parts()
    np.testing.assert_array_equal(back.try_extract(bindings[0]).to_numpy(), np.full(64, 3.0))


def test_releasing_the_handle_before_completion_still_retires_and_frees_everything(
    xla_engine: Any,
) -> None:
    provider = _provider(xla_engine)
    program = ad.jit(lambda a: ad.tanh(a @ a), engine=xla_engine).lower(np.ones((64, 64))).program
    ctx = provider.context.counters
    created, released = ctx.records_created, ctx.records_released
    live = dict(LEDGER.live)
    for k in range(3):
        group = ts.AllocationGroup()
        slots = [group.insert(ts.from_numpy(np.full((64, 64), 0.01 * k)))]
        handle = rt.submit(xla_engine, program, rt.ExecutionInputs(group, slots))
        del handle, group  # released before completion: the reaper owns the work
    assert provider.drain(10.0)
    assert ctx.records_created == created + 3 and ctx.records_released == released + 3
    assert dict(LEDGER.live) == live  # inputs, results and scratch all released


def test_donation_on_failure_hands_the_donated_owner_back(xla_engine: Any) -> None:
    """Issue 25's semantics on XLA: a failed program that never took the donated buffer
    moves the owner back into the caller's object, unchanged; one whose completion failed
    after XLA took the buffer hands the owner over in ``.donated`` (``.clobbered``)."""
    make = ad.jit(lambda a: a + 0.0, engine=xla_engine)

    def step() -> Any:
        return ad.jit(lambda p, g: p - 0.5 * g, engine=xla_engine, donate_argnums=0)

    p = make(np.full(16, 4.0))
    failing = step()
    failing.lower(p, np.ones(16))
    _fault(failing, _raising(RuntimeError("injected before the donation")))
    with pytest.raises(ExecutionFailed) as err:
        failing(p, np.ones(16))
    assert err.value.donated == {} and err.value.clobbered == ()
    np.testing.assert_array_equal(p.to_numpy(), np.full(16, 4.0))  # back and unchanged

    q = make(np.full(16, 4.0))
    lost = step()
    lost.lower(q, np.ones(16))
    _fault(lost, _unprovable)
    with pytest.raises(ExecutionFailed, match=r"hold what the program wrote") as err:
        lost(q, np.ones(16))
    assert err.value.clobbered == (0,) and set(err.value.donated) == {0}
    with pytest.raises(ts.errors.UseAfterMoveError):
        q.to_numpy()  # the caller's object stays consumed
    assert _provider(xla_engine).drain(10.0)


def test_every_scoped_execution_counts_one_submission_on_the_provider(
    xla_engine: Any,
) -> None:
    """A scoped read-only execution on the XLA engine is one submission, one enqueue and one
    dispatch in the provider's counters, as a detached one is (the counters are how the
    engine's work is audited).  Mutant: ``execute_scoped``'s ``submissions += 1`` made
    ``+= 0``."""
    provider = _provider(xla_engine)
    program = ad.jit(lambda a: ad.tanh(a) * 2.0, engine=xla_engine).lower(np.ones(8)).program
    x = ts.from_numpy(np.full(8, 0.5))
    with x.as_view() as v:
        before = provider.counters.submissions
        for k in range(1, 3):
            outcome = rt.execute_scoped_read_only(xla_engine, program, rt.ScopedReadInputs([v]))
            assert isinstance(outcome, rt.Completed)
            assert provider.counters.submissions == before + k
            outcome.bundle.release()


class _Slow:
    """A real result buffer that reports itself ready only ``delay`` seconds after the call
    (a slow kernel): ``is_ready()`` answers at once, ``block_until_ready`` sleeps."""

    def __init__(self, real: Any, delay: float) -> None:
        self._real, self._at = real, time.monotonic() + delay

    def is_ready(self) -> bool:
        return time.monotonic() >= self._at

    def block_until_ready(self) -> Any:
        time.sleep(max(0.0, self._at - time.monotonic()))
        return self

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        return self._real.__array__(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _sleeping(delay: float) -> Callable[[Any], Any]:
    def make(real: Any) -> Any:
        def run(*args: Any) -> Any:
            return [_Slow(r, delay) for r in real(*args)]

        return run

    return make


def test_a_wait_with_a_timeout_never_outlasts_it_on_a_slow_execution(xla_engine: Any) -> None:
    provider = _provider(xla_engine)
    program = ad.jit(lambda a: a * 2.0, engine=xla_engine).lower(np.ones(8)).program
    slow = attrs.evolve(program, executable=_sleeping(1.0)(program.executable))

    def submit(v: float) -> Any:
        group = ts.AllocationGroup()
        slots = [group.insert(ts.from_numpy(np.full(8, v)))]
        return rt.submit(xla_engine, slow, rt.ExecutionInputs(group, slots))

    first = submit(1.0)  # keeps the reaper busy, so the waiter below comes before it
    second = submit(2.0)
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"ExecutionHandle\.wait: no terminal outcome"):
        second.wait(0.05)
    assert time.monotonic() - start < 0.5  # the timeout, not the slow kernel's second
    assert not second.done()  # unchanged: wait again
    for handle, v in ((second, 2.0), (first, 1.0)):
        outcome = handle.wait(10.0)
        assert isinstance(outcome, rt.Completed)
        out = outcome.bundle.into_output(0)
        np.testing.assert_array_equal(out.to_numpy(), np.full(8, 2 * v))
        del out, outcome
    assert provider.drain(10.0)
