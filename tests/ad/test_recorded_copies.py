"""Every byte-preserving copy is a recorded ledger event, and nothing else copies.

* a backward seed that is a slice or strided view of a larger caller array is delivered
  as a gradient with one recorded ``MATERIALIZE`` (like a whole-array seed), refused under
  ``forbid_copies()``;
* a traced or jitted function that closes over an owner or a handle borrows it (no copy:
  the program reads it in place; writing the owner meanwhile raises ``BorrowError``
  naming the holder); a large numpy array it closes over is imported (one ``TRANSFER``);
* ``reshape_copy`` (reshaping a strided value) writes its result once;
* a sweep with ``tracemalloc`` over these paths: numpy allocates more than a small bound
  only what the ledger records.
"""

from __future__ import annotations

import functools
import gc
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage import runtime as rt
from tenferro_storage.errors import BorrowError, CopyForbiddenError

N = 250_000  # 2 MB of float64: far above the sweep's slack
BIG = 8 * N
SLACK = 256 * 1024  # bookkeeping, small literals, tracing and compiling


def _seeds() -> dict[str, np.ndarray[Any, Any]]:
    big = np.arange(16.0)
    return {"whole": big[:4].copy(), "strided": big[::4], "slice": big[3:7]}


def _identity_tape(n: int) -> tuple[ad.Tape, Any, Any]:
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.ones(n)))
        y = x + 0.0  # add's VJP hands the seed itself to x
    return tape, x, y


@pytest.mark.parametrize("kind", ["whole", "strided", "slice"])
def test_a_seed_view_delivered_as_a_gradient_is_one_recorded_materialize(kind: str) -> None:
    """The gradient holds the seed's bytes: one ``MATERIALIZE`` for a slice or strided
    view of a larger caller array, as for a whole-array seed; the caller's array is
    untouched and shares no memory with the gradient."""
    seed = _seeds()[kind]
    tape, x, y = _identity_tape(seed.size)
    with ledger.capture() as rec:
        grads = tape.backward(y, cotangent=seed)
    assert rec.copies == {ledger.CopyReason.MATERIALIZE: 1}
    g = grads.take_grad(x)
    assert g is not None
    np.testing.assert_array_equal(g.to_numpy(), seed)


@pytest.mark.parametrize("kind", ["whole", "strided", "slice"])
def test_a_seed_view_delivered_as_a_gradient_is_refused_under_forbid_copies(kind: str) -> None:
    seed = _seeds()[kind]
    tape, _x, y = _identity_tape(seed.size)
    with ledger.forbid_copies(), pytest.raises(CopyForbiddenError):
        tape.backward(y, cotangent=seed)


@pytest.mark.parametrize("kind", ["strided", "slice"])
def test_a_seed_view_through_vjp_is_recorded_like_a_whole_seed(kind: str) -> None:
    def f(x: Any) -> Any:
        return x + 0.0

    def copies(seed: np.ndarray[Any, Any]) -> Any:
        with ledger.capture() as rec:
            _out, pullback = ad.vjp(f, ts.from_numpy(np.ones(4)))
            pullback(seed)
        return rec.copies

    assert copies(_seeds()[kind]) == copies(_seeds()["whole"])


def _peak(fn: Callable[[], Any]) -> tuple[int, Any, Any]:
    """``fn()``'s peak numpy/Python allocation (bytes above the start), its ledger record
    and its result."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        with ledger.capture() as rec:
            out = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return peak, rec, out


def test_a_jitted_function_closing_over_an_owner_borrows_it() -> None:
    """No snapshot (the audit saw 16 MB of numpy allocation and 0 events for an 8 MB
    weight): the program reads the owner in place; while the jitted function lives,
    writing the owner raises ``BorrowError`` naming the traced graph; then it is free."""
    w = ts.from_numpy(np.full(N, 2.0))
    f = ad.jit(lambda x: x * w)
    x = ts.from_numpy(np.ones(N))
    peak, rec, y = _peak(functools.partial(f, x))
    assert rec.copies == {}
    assert peak <= BIG + SLACK  # the result only
    np.testing.assert_array_equal(y.to_numpy()[:3], [2.0, 2.0, 2.0])
    with pytest.raises(BorrowError, match="traced graph"):
        w.fill(3.0)
    del f
    gc.collect()
    w.fill(3.0)


def test_a_traced_graph_closing_over_a_handle_borrows_its_value() -> None:
    """A handle captured by a trace: no copy; its value cannot be moved out while the graph
    lives (``into_value`` is ``NotUnique``)."""
    h = ad.sin(ts.from_numpy(np.zeros(N)) + 1.0)
    f = ad.jit(lambda x: x + h)
    x = ts.from_numpy(np.ones(N))
    peak, rec, _y = _peak(functools.partial(f, x))
    assert rec.copies == {} and peak <= BIG + SLACK
    with pytest.raises(ad.errors.NotUnique):
        h.into_value()
    del f
    gc.collect()
    h.into_value()


def test_a_large_numpy_array_closed_over_is_imported_with_one_transfer() -> None:
    c = np.full(N, 2.0)
    f = ad.jit(lambda x: x * c)
    x = ts.from_numpy(np.ones(N))
    peak, rec, _y = _peak(functools.partial(f, x))
    assert rec.copies == {ledger.CopyReason.TRANSFER: 1}
    assert peak <= 2 * BIG + SLACK  # the import and the result
    c[:] = 0.0  # the program kept its own recorded snapshot
    np.testing.assert_array_equal(f(x).to_numpy()[:2], [2.0, 2.0])


def test_reshape_copy_writes_its_result_once() -> None:
    """Reshaping a strided (transposed) value lays it out afresh in one buffer: the peak is
    the result, not the result plus an intermediate contiguous copy."""
    t = ts.from_numpy(np.arange(float(N)).reshape(500, 500))
    peak, rec, y = _peak(lambda: ad.reshape(t.T, (N,)))
    assert rec.copies == {}
    assert peak <= BIG + SLACK
    np.testing.assert_array_equal(y.to_numpy(), np.arange(float(N)).reshape(500, 500).T.ravel())


def _sweep_cases() -> dict[str, Callable[[], Callable[[], Any]]]:
    """Per path: a setup (the caller's own arrays and owners, made outside the
    measurement) returning the call that is measured."""

    def seed_slice() -> Callable[[], Any]:
        big = np.arange(float(2 * N))
        tape, _x, y = _identity_tape(N)
        return lambda: tape.backward(y, cotangent=big[::2])

    def closure_owner() -> Callable[[], Any]:
        w, x = ts.from_numpy(np.ones(N)), ts.from_numpy(np.ones(N))
        return lambda: ad.jit(lambda a: a * w)(x)

    def closure_handle() -> Callable[[], Any]:
        h, x = ad.sin(ts.from_numpy(np.ones(N))), ts.from_numpy(np.ones(N))
        return lambda: ad.jit(lambda a: a * h)(x)

    def closure_numpy() -> Callable[[], Any]:
        c, x = np.ones(N), ts.from_numpy(np.ones(N))
        return lambda: ad.jit(lambda a: a * c)(x)

    def traced_literal() -> Callable[[], Any]:
        x = ts.from_numpy(np.ones(N))
        return lambda: ad.jit(lambda a: a + 1.5)(x)

    def program_constant() -> Callable[[], Any]:
        caller, x = np.ones(N), ts.zeros(1)
        prog = rt.CompiledGraph(
            1, 3,
            (rt.Instruction(np.negative, (1,), (2,), name="neg"),),
            (rt.ProgramOutput(rt.OutputKind.FRESH, value=2),),
            "constant",
            (rt.Constant(1, caller),),
        )

        def run() -> Any:
            with x.as_view() as v:
                out = rt.execute_scoped_read_only(
                    rt.host_engine(), prog, rt.ScopedReadInputs([v])
                )
                assert isinstance(out, rt.Completed)
                return out.bundle.into_owned_output(0)

        return run

    def imports() -> Callable[[], Any]:
        a = np.ones(N)
        return lambda: ts.from_numpy(a)

    return {
        "seed slice": seed_slice,
        "closure over an owner": closure_owner,
        "closure over a handle": closure_handle,
        "closure over a numpy array": closure_numpy,
        "traced literal": traced_literal,
        "program constant": program_constant,
        "import": imports,
    }


@pytest.mark.parametrize("case", sorted(_sweep_cases()))
def test_numpy_allocates_beyond_a_small_bound_only_what_the_ledger_records(case: str) -> None:
    """The ledger's allocations of the case (every event's bytes: owners, imports,
    duplicates, materializations) bound what numpy allocated, up to a small slack --
    no unrecorded snapshot of a large value on any of these paths."""
    peak, rec, out = _peak(_sweep_cases()[case]())
    recorded = sum(
        e.nbytes for e in rec.events if e.kind is ledger.EventKind.ALLOCATE
    )
    assert peak <= recorded + SLACK, (case, peak, recorded, rec.copies)
    del out


def test_a_caller_seed_reaching_a_custom_vjp_rule_is_copied_on_record_not_adopted() -> None:
    """The cotangent a ``custom_vjp`` rule receives is a handle; when it is the caller's
    own seed array, that handle is a recorded ``MATERIALIZE`` copy -- the caller's array
    never becomes an owner's memory (it was adopted, a second owner, with no event)."""

    @ad.custom_vjp
    def f(x: Any) -> Any:
        return x * 2.0

    f.defvjp(lambda x: (f(x), ()), lambda res, g: (g * 2.0,))
    seed = np.array([1.0, 2.0])
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.ones(2)))
        y = f(x)
    with ledger.capture() as rec:
        grads = tape.backward(y, cotangent=seed)
    assert rec.copies == {ledger.CopyReason.MATERIALIZE: 1}
    np.testing.assert_array_equal(grads.grad(x).to_numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(seed, [1.0, 2.0])
