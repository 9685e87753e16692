"""A shared borrow never becomes write access: every array handed to user or kernel code
under a shared borrow lies over a read-only buffer, so no public numpy API makes it
writable (``flags.writeable = True``, ``setflags``), and ``np.copyto``, ufunc ``out=`` and
item assignment all refuse -- on every path, in normal and in borrow-debug mode.

A read-only *view of a writable array* could be flipped writable with one line of public
numpy; writes then landed under other live shared borrows, a tape's residual included
(backward returned ``[0, 0]`` instead of ``[2, 3]``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage import _access, kernel
from tenferro_storage import runtime as rt
from tenferro_storage._frozen import frozen, is_frozen, readonly_over
from tenferro_storage.errors import AliasedOutputError
from tests.runtime.support import sim_provider

VALUES = np.array([2.0, 3.0, 5.0, 7.0])


def _flag(a: Any) -> None:
    a.flags.writeable = True
    a[...] = 0


def _setflags(a: Any) -> None:
    a.setflags(write=True)
    np.copyto(a, 0)


def _derived_flag(a: Any) -> None:
    v = a[::-1]
    v.flags.writeable = True
    np.multiply(v, 0, out=v)


def _copyto(a: Any) -> None:
    np.copyto(a, 0)


def _ufunc_out(a: Any) -> None:
    np.multiply(a, 0, out=a)


def _setitem(a: Any) -> None:
    a[...] = 0


ATTACKS: dict[str, Callable[[Any], None]] = {
    "flags.writeable=True": _flag,
    "setflags(write=True)": _setflags,
    "derived view flags.writeable=True": _derived_flag,
    "np.copyto": _copyto,
    "ufunc out=": _ufunc_out,
    "item assignment": _setitem,
}


@contextmanager
def _prepared_array(t: ts.Tensor[Any, Any]) -> Iterator[Any]:
    with t.as_view().prepare_host() as p:
        yield p.as_array()


@contextmanager
def _prepared_slice(t: ts.Tensor[Any, Any]) -> Iterator[Any]:
    with t.as_view().prepare_host() as p:
        yield p.as_slice()


@contextmanager
def _prepared_strided(t: ts.Tensor[Any, Any]) -> Iterator[Any]:
    with t.as_view()[::-1].prepare_host() as p:  # a strided layout
        yield p.as_array()


@contextmanager
def _write_access_slice(t: ts.Tensor[Any, Any]) -> Iterator[Any]:
    with t.as_view_mut() as m, m.prepare_host_mut() as p:  # its read-only half
        yield p.as_slice()


@contextmanager
def _read_array(t: ts.Tensor[Any, Any]) -> Iterator[Any]:
    yield kernel.read_array(t)


@contextmanager
def _view_read_array(t: ts.Tensor[Any, Any]) -> Iterator[Any]:
    with t.as_view() as v:
        yield kernel.read_array(v)


@contextmanager
def _borrow_arrays(t: ts.Tensor[Any, Any]) -> Iterator[Any]:
    with ts.borrow_arrays({"t": t}) as arrays:
        yield arrays["t"]


PATHS: dict[str, Callable[[ts.Tensor[Any, Any]], Any]] = {
    "prepare_host().as_array()": _prepared_array,
    "prepare_host().as_slice()": _prepared_slice,
    "prepare_host() strided as_array()": _prepared_strided,
    "prepare_host_mut().as_slice()": _write_access_slice,
    "kernel.read_array(owner)": _read_array,
    "kernel.read_array(view)": _view_read_array,
    "borrow_arrays()": _borrow_arrays,
}


@pytest.fixture(params=["debug mode", "normal mode"])
def mode(request: pytest.FixtureRequest) -> Iterator[str]:
    previous = _access._set_debug_borrows(request.param == "debug mode")
    try:
        yield str(request.param)
    finally:
        _access._set_debug_borrows(previous)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_shared_borrow_array_cannot_be_made_writable(path: str, attack: str, mode: str) -> None:
    """Every public numpy way to write through a shared-borrow array raises ValueError and
    the owner's values are unchanged."""
    t = ts.from_numpy(VALUES)
    with PATHS[path](t) as a:
        assert not a.flags.writeable
        with pytest.raises(ValueError):
            ATTACKS[attack](a)
        np.testing.assert_array_equal(np.sort(a.ravel()), VALUES)
    np.testing.assert_array_equal(t.to_numpy(), VALUES)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_tape_residual_stays_intact_when_a_shared_borrow_array_is_attacked(
    path: str, mode: str
) -> None:
    """The audit's repro: ``x`` is ``mul``'s residual (the tape borrows it); flipping an
    array of ``x`` writable and zeroing it made backward return ``[0, 0]``."""
    x = ts.from_numpy(np.array([2.0, 3.0]))
    with ad.Tape() as tape:
        w = tape.watch(ts.from_numpy(np.ones(2)))
        loss = ad.sum(w * x)
    if path != "prepare_host_mut().as_slice()":  # (x is borrowed by the tape: no writer)
        with PATHS[path](x) as a:
            with pytest.raises(ValueError):
                _flag(a)
    grads = tape.backward(loss)
    np.testing.assert_array_equal(grads.grad(w).to_numpy(), [2.0, 3.0])


def _attacking_kernel(errors: list[BaseException]) -> Callable[[Any], Any]:
    def attack(a: Any) -> Any:
        for name in sorted(ATTACKS):
            try:
                ATTACKS[name](a)
            except ValueError as exc:
                errors.append(exc)
        return np.array(a, copy=True)

    return attack


def _attacking_program(errors: list[BaseException]) -> rt.CompiledGraph:
    b = rt.ProgramBuilder(1, name="attack")
    (x,) = b.inputs
    return b.build(b.apply(_attacking_kernel(errors), x))


def test_runtime_scoped_read_only_inputs_cannot_be_made_writable(mode: str) -> None:
    """A kernel run by ``execute_scoped_read_only`` gets the caller's storage under the
    caller's shared borrow: every attack raises inside the kernel; the value is intact."""
    errors: list[BaseException] = []
    t = ts.from_numpy(VALUES)
    with t.as_view() as v:
        outcome = rt.execute_scoped_read_only(
            rt.host_engine(), _attacking_program(errors), rt.ScopedReadInputs([v])
        )
        assert isinstance(outcome, rt.Completed)
        outcome.bundle.release()
    assert len(errors) == len(ATTACKS)
    np.testing.assert_array_equal(t.to_numpy(), VALUES)


@pytest.mark.parametrize("engine", ["host", "simulated"])
def test_detached_submission_inputs_cannot_be_made_writable(engine: str) -> None:
    """A detached submission's (non-donated) inputs are read by kernels under the task's
    own shared access: read-only buffers on the host engine and the simulated device."""
    errors: list[BaseException] = []
    g = ts.AllocationGroup()
    slot = g.insert(ts.from_numpy(VALUES))
    with sim_provider() as sim:
        eid = rt.host_engine() if engine == "host" else sim.engine
        assert eid is not None
        outcome = rt.submit(eid, _attacking_program(errors), rt.ExecutionInputs(g, [slot])).wait()
        assert isinstance(outcome, rt.Completed)
        group = outcome.bundle.group
        assert len(errors) == len(ATTACKS)
        np.testing.assert_array_equal(group.view(slot).to_numpy(), VALUES)
        del group, outcome


def test_program_constants_reach_kernels_over_a_read_only_buffer() -> None:
    """A hand-built ``Constant`` over a writable caller array: the kernel cannot write it."""
    errors: list[BaseException] = []
    caller = VALUES.copy()
    prog = rt.CompiledGraph(
        1, 3,
        (rt.Instruction(_attacking_kernel(errors), (1,), (2,)),),
        (rt.ProgramOutput(rt.OutputKind.FRESH, value=2),),
        "constant attack",
        (rt.Constant(1, caller),),
    )
    t = ts.from_numpy(np.zeros(1))
    with t.as_view() as v:
        outcome = rt.execute_scoped_read_only(rt.host_engine(), prog, rt.ScopedReadInputs([v]))
        assert isinstance(outcome, rt.Completed)
        outcome.bundle.release()
    assert len(errors) == len(ATTACKS)
    np.testing.assert_array_equal(caller, VALUES)


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a[::2],
        lambda a: a.T,
        lambda a: a.reshape(2, 2),
        lambda a: a.view(np.int64),
        lambda a: np.asarray(a),
        lambda a: a[None],
    ],
    ids=["slice", "transpose", "reshape", "dtype view", "asarray", "newaxis"],
)
def test_views_derived_from_a_read_only_buffer_array_stay_frozen(make: Any) -> None:
    """numpy carries the read-only buffer into every derived view."""
    t = ts.from_numpy(VALUES)
    derived = make(kernel.read_array(t))
    assert is_frozen(derived)
    with pytest.raises(ValueError):
        derived.flags.writeable = True


def test_frozen_keeps_layout_and_memory_without_copying() -> None:
    """``frozen`` of a strided, offset, negative-stride view: same shape, strides and
    address; no copy; writes to the original show through."""
    base = np.arange(24.0).reshape(4, 6)
    for view in (base, base[1:, ::-2], base.T, base[2], np.asfortranarray(base)[1:]):
        f = frozen(view)
        assert f.shape == view.shape and f.strides == view.strides
        assert f.__array_interface__["data"][0] == view.__array_interface__["data"][0]
        np.testing.assert_array_equal(f, view)
        assert is_frozen(f) and frozen(f) is f
    ro = readonly_over(np.zeros(4), (2,), np.float64, 8)
    with pytest.raises(ValueError):
        ro.flags.writeable = True


def test_adopting_a_frozen_array_is_refused_as_aliased() -> None:
    """What a shared borrow or a constant hands out is not a fresh result: adopting it (or
    a view of it) raises ``AliasedOutputError``, naming the buffer's owner when there is
    one."""
    t = ts.from_numpy(VALUES)
    with pytest.raises(AliasedOutputError, match="buffer of alloc#"):
        kernel.adopt_output(kernel.read_array(t))
    with pytest.raises(AliasedOutputError, match="read-only"):
        kernel.adopt_output(frozen(np.ones(3)))
