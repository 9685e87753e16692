"""The contract's edges on the XLA engine: a shared borrow of an XLA CPU buffer never
becomes write access, nothing is lost when a submission is interrupted or fails after
admission (G3's ``Admitted -> Running`` failure column), and the copies it makes are
recorded.

* every array handed out under a shared borrow of an XLA CPU buffer (``prepare_host()``,
  ``kernel.read_array`` of the owner or a strided view, ``borrow_arrays``) lies over a
  read-only buffer: no public numpy API makes it writable (host-engine kernels never get
  one: the host engine refuses an XLA-resident input before admission);
* a ``KeyboardInterrupt`` before the executable is called (before admission, or after
  it at an input import or the enqueue) gives the caller's package back whole and
  propagates; from the executable call itself (work may be enqueued) the reaper retires
  the work as for a dropped handle (the record released once, no binding left held, no
  byte left live); in a scoped call the caller's views are theirs again and usable;
* a failed input preparation (a strided input under ``forbid_copies()``) or a failed
  enqueue after admission is not a rejection: the submission drains and the outcome is
  ``RetiredFailed`` (``PROVIDER_FAILED``) with the exact package, the record released once.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import jax
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage import runtime as rt
from tenferro_storage.errors import UseAfterMoveError
from tenferro_storage.providers import XlaProvider
from tenferro_storage.runtime._engine import lookup
from tests.runtime.support import inputs, live_bytes
from tests.storage.test_frozen_arrays import ATTACKS, VALUES

pytestmark = pytest.mark.both_borrow_modes


def _provider(engine: Any) -> XlaProvider:
    p = lookup(engine)
    assert isinstance(p, XlaProvider)
    return p


def _resident(engine: Any) -> ts.Tensor[Any, Any]:
    t = rt.upload(engine, ts.from_numpy(VALUES))
    assert ts.providers.domain_of(t).startswith("xla-cpu")
    return t


@contextmanager
def _prepared(t: ts.Tensor[Any, Any]) -> Iterator[Any]:
    with t.as_view().prepare_host() as p:
        yield p.as_array()


@contextmanager
def _prepared_slice(t: ts.Tensor[Any, Any]) -> Iterator[Any]:
    with t.as_view().prepare_host() as p:
        yield p.as_slice()


@contextmanager
def _read_array(t: ts.Tensor[Any, Any]) -> Iterator[Any]:
    yield ts.kernel.read_array(t)


@contextmanager
def _view_read_array(t: ts.Tensor[Any, Any]) -> Iterator[Any]:
    with t.as_view()[::-1] as v:
        yield ts.kernel.read_array(v)


@contextmanager
def _borrow_arrays(t: ts.Tensor[Any, Any]) -> Iterator[Any]:
    with ts.borrow_arrays({"t": t}) as arrays:
        yield arrays["t"]


PATHS = {
    "prepare_host().as_array()": _prepared,
    "prepare_host().as_slice()": _prepared_slice,
    "kernel.read_array(owner)": _read_array,
    "kernel.read_array(strided view)": _view_read_array,
    "borrow_arrays()": _borrow_arrays,
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_shared_borrow_of_an_xla_cpu_buffer_cannot_be_made_writable(
    xla_engine: Any, path: str, attack: str
) -> None:
    """The host reads an XLA CPU buffer in place; every public numpy way to write through
    that array raises ``ValueError`` and the buffer's values are unchanged."""
    t = _resident(xla_engine)
    with PATHS[path](t) as a:
        assert not a.flags.writeable
        with pytest.raises(ValueError):
            ATTACKS[attack](a)
    np.testing.assert_array_equal(t.to_numpy(), VALUES)


def _axpy(engine: Any) -> Any:
    x, y = ts.arange(3.0), ts.ones(3)
    return ad.jit(lambda a, b: a * a + b, engine="xla").lower(x, y).program


def _values(pkg: rt.ExecutionInputs) -> list[list[float]]:
    return [pkg.group.view(s).to_numpy().tolist() for s in pkg.bindings]


def test_an_interrupt_before_admission_gives_the_package_back_whole(xla_engine: Any) -> None:
    """``KeyboardInterrupt`` while preparing an input (before admission): it propagates,
    the caller's ``inputs`` holds its exact package again, no record was made, and the
    same package then runs."""
    p = _provider(xla_engine)
    program = _axpy(xla_engine)
    pkg, _sx, _sy = inputs()
    held = p.context.held_bindings()
    p.context.fail_next("prepare", error=KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        rt.submit(xla_engine, program, pkg)
    assert _values(pkg) == [[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]]
    assert p.context.held_bindings() == held
    outcome = rt.submit(xla_engine, program, pkg).wait(10)
    assert isinstance(outcome, rt.Completed)
    with outcome.bundle.output(0) as out:  # type: ignore[union-attr]
        np.testing.assert_array_equal(out.to_numpy(), [1.0, 2.0, 5.0])
    del outcome


@pytest.mark.parametrize("stage", ["input preparation", "enqueue"])
def test_an_interrupt_after_admission_before_the_enqueue_gives_the_package_back(
    xla_engine: Any, stage: str
) -> None:
    """``KeyboardInterrupt`` after admission but before the executable was called (an
    input import, the enqueue): nothing was enqueued, so completion is proven -- the record
    is released once, the caller's ``inputs`` holds its exact package again (usable: it
    then runs) and the interrupt propagates."""
    p = _provider(xla_engine)
    program = _axpy(xla_engine)
    retirements = p.counters.retirements
    pkg, _sx, _sy = inputs()
    if stage == "enqueue":
        p.context.fail_next("enqueue", error=KeyboardInterrupt)
        with pytest.raises(KeyboardInterrupt):
            rt.submit(xla_engine, program, pkg)
    else:
        with _interrupted_import(p), pytest.raises(KeyboardInterrupt):
            rt.submit(xla_engine, program, pkg)
    assert _values(pkg) == [[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]]
    assert p.context.held_bindings() == 0 and p.counters.retirements == retirements
    outcome = rt.submit(xla_engine, program, pkg).wait(10)
    assert isinstance(outcome, rt.Completed)
    del outcome


def test_an_interrupt_while_the_executable_is_enqueued_is_retired_by_the_reaper(
    xla_engine: Any,
) -> None:
    """``KeyboardInterrupt`` from the executable call itself (it may have been enqueued):
    it propagates, the package stays consumed, and the reaper retires the submission as
    for a dropped handle -- the record released once, no binding left held, every byte of
    the package freed: nothing leaked, nothing freed while the device could read it."""
    p = _provider(xla_engine)

    def interrupted(*_args: Any) -> Any:
        raise KeyboardInterrupt

    program = attrs.evolve(_axpy(xla_engine), executable=interrupted)
    base = live_bytes()
    retirements = p.counters.retirements
    pkg, _sx, _sy = inputs()
    with pytest.raises(KeyboardInterrupt):
        rt.submit(xla_engine, program, pkg)
    with pytest.raises(UseAfterMoveError):
        pkg.bindings  # noqa: B018 - admitted: it comes back only through an outcome
    del pkg
    assert p.drain(10)
    gc.collect()
    assert p.counters.retirements == retirements + 1
    assert p.context.held_bindings() == 0
    assert live_bytes() == base


@contextmanager
def _interrupted_import(p: XlaProvider) -> Iterator[None]:
    """The provider's next input imports raise ``KeyboardInterrupt`` (an instance patch,
    removed on exit)."""

    def interrupted(d: Any, operation: str) -> Any:
        raise KeyboardInterrupt

    p._import_desc = interrupted  # type: ignore[method-assign]
    try:
        yield
    finally:
        del p._import_desc


def test_an_interrupt_in_a_scoped_call_leaves_the_callers_views_usable(
    xla_engine: Any,
) -> None:
    """``KeyboardInterrupt`` at an input import of a scoped call: it propagates and the
    caller's views are theirs again (the scoped inputs are not left moved)."""
    p = _provider(xla_engine)
    program = _axpy(xla_engine)
    x, y = ts.arange(3.0), ts.ones(3)
    with x.as_view() as vx, y.as_view() as vy:
        scoped = rt.ScopedReadInputs([vx, vy])
        with _interrupted_import(p), pytest.raises(KeyboardInterrupt):
            rt.execute_scoped_read_only(xla_engine, program, scoped)
        outcome = rt.execute_scoped_read_only(xla_engine, program, scoped)
        assert isinstance(outcome, rt.Completed)
        np.testing.assert_array_equal(outcome.bundle.output(0).to_numpy(), [1.0, 2.0, 5.0])
        outcome.bundle.release()


@pytest.mark.parametrize("stage", ["input preparation", "enqueue"])
def test_admitted_to_running_post_admission_preparation_or_enqueue_failure_enters_draining(
    xla_engine: Any, stage: str
) -> None:
    """G3's ``Admitted -> Running`` failure column on XLA: a failed input preparation (a
    strided input that would need a copy under ``forbid_copies()``) or a failed enqueue is
    not a rejection: the handle's outcome is ``RetiredFailed`` (``PROVIDER_FAILED``, naming
    the stage) with the exact package, unchanged, after the record is released once."""
    p = _provider(xla_engine)
    program = _axpy(xla_engine)
    g = ts.AllocationGroup()
    sx = g.insert(ts.arange(6.0))
    sy = g.insert(ts.ones(3))
    # input preparation: x is every other element of a 6-element allocation (strided:
    # XLA needs it copied, which forbid_copies() refuses after admission)
    x = g.alias(sx, shape=(3,), strides=(2,)) if stage == "input preparation" else sx
    if stage == "enqueue":
        x = g.alias(sx, shape=(3,), strides=(1,))
        p.context.fail_next("enqueue")
    retirements = p.counters.retirements
    pkg = rt.ExecutionInputs(g, [x, sy])
    with ledger.forbid_copies() if stage == "input preparation" else _nothing():
        handle = rt.submit(xla_engine, program, pkg)  # admitted: no SubmitRejected
    with pytest.raises(UseAfterMoveError):
        pkg.bindings  # noqa: B018 - nothing comes back except through the outcome
    outcome = handle.wait(10)
    assert isinstance(outcome, rt.RetiredFailed)
    assert outcome.cause.kind is rt.ExecutionErrorKind.PROVIDER_FAILED
    assert stage in outcome.cause.where
    assert outcome.inputs.bindings == (x, sy) and outcome.clobbered == ()
    assert _values(outcome.inputs)[1] == [1.0, 1.0, 1.0]
    assert p.counters.retirements == retirements + 1
    assert p.context.held_bindings() == 0
    del outcome


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def test_a_program_runs_when_the_process_uses_jax_in_32_bit_mode(xla_engine: Any) -> None:
    """Programs are compiled in 64-bit mode; a process that never enabled
    ``jax_enable_x64`` (a plain user script) still runs them on float64 values (it was
    ``ExecutionFailed``: the executable refused the float64 arguments)."""
    jax.config.update("jax_enable_x64", False)
    try:
        y = ad.jit(lambda a: ad.sin(a) * 2.0, engine="xla")(ts.from_numpy(np.ones(3)))
        np.testing.assert_allclose(y.to_numpy(), 2 * np.sin(np.ones(3)))
        assert y.dtype == ts.float64
    finally:
        jax.config.update("jax_enable_x64", True)
