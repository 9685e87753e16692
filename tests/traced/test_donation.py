"""Donation: ``jit(f, donate_argnums=...)`` consumes an argument and writes a result into
its buffer in place -- no allocation for that result, no copy -- and raises
``DonationError`` (nothing run, nothing consumed) whenever that cannot happen."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import DonationError, ExecutionFailed
from tenferro_storage import AllocationReason, ledger
from tenferro_storage import runtime as rt
from tenferro_storage.errors import ScopedSubmitRejected, SubmitRejected, UseAfterMoveError
from tests.traced._specs import close

# these tests are about the host program (its instructions, buffers and ledger):
# they name the host engine, which jit no longer picks by default when jax is installed
host_jit = functools.partial(ad.jit, engine="host")

RNG = np.random.default_rng(3)
X = RNG.normal(size=(8, 8))
OP = AllocationReason.OPERATION_OUTPUT


def _chain(a: Any) -> Any:
    return ad.cos(ad.sin(a) * 2.0)


def test_a_donated_owner_is_consumed_and_the_whole_chain_runs_in_its_buffer() -> None:
    """sin reads x for the last time and writes into it; the rest follows in place: the
    call allocates and copies nothing, and the caller's owner is consumed."""
    jf = host_jit(_chain, donate_argnums=0)
    jf.lower(X)
    x = ts.from_numpy(X)
    with ledger.capture() as rec:
        out = jf(x)
    close(out, np.cos(np.sin(X) * 2.0))
    assert not rec.allocations and not rec.copies
    with pytest.raises(UseAfterMoveError):
        x.to_numpy()


def test_a_donated_numpy_argument_is_imported_and_the_import_overwritten() -> None:
    """numpy in: one TRANSFER (the import, as for every numpy argument), no kernel
    allocation; the caller's array is untouched."""
    jf = host_jit(_chain, donate_argnums=(0,))
    x = X.copy()
    jf(x)
    with ledger.capture() as rec:
        out = jf(x)
    close(out, np.cos(np.sin(X) * 2.0))
    assert OP not in rec.allocations
    assert sum(rec.allocations.values()) == 1
    np.testing.assert_array_equal(x, X)


def test_the_write_waits_for_the_last_read_of_the_donated_input() -> None:
    """x is read again by the add: the add (its last read) writes into it, not the sin."""
    def f(a: Any, b: Any) -> Any:
        return ad.sin(a) * b + a

    jf = host_jit(f, donate_argnums=0)
    program = jf.lower(X, X).program
    assert program.donated == (0,)
    ins = program.instructions
    assert [(i.name, i.into) for i in ins] == [("sin", None), ("mul", 2), ("add", 0)]
    x, y = ts.from_numpy(X), np.ones_like(X)
    close(jf(x, y), np.sin(X) + X)
    assert "(donated)" in str(program) and "into v0" in str(program)


@pytest.mark.parametrize(
    ("f", "why"),
    [
        (lambda a: ad.sum(a), "no elementwise result"),  # only another shape
        (lambda a: ad.sin(ad.astype(a, np.float32)), "no elementwise result"),  # other dtype
        (lambda a: (a, ad.sin(a)), "returned as is"),
    ],
)
def test_donation_that_cannot_happen_is_an_error_and_consumes_nothing(f: Any, why: str) -> None:
    """Shape or dtype mismatch, or the argument returned as is: DonationError at the
    call, and the caller's owner is still usable."""
    x = ts.from_numpy(X)
    with pytest.raises(DonationError, match=why):
        host_jit(f, donate_argnums=0)(x)
    np.testing.assert_array_equal(x.to_numpy(), X)


def test_a_borrowed_owner_cannot_be_donated() -> None:
    """An owner with a live view: DonationError; the owner and its view are unchanged."""
    jf = host_jit(_chain, donate_argnums=0)
    x = ts.from_numpy(X)
    view = x.as_view()
    with pytest.raises(DonationError, match="leaf 0 cannot be consumed"):
        jf(x)
    np.testing.assert_array_equal(view.to_numpy(), X)
    view.release()
    close(jf(x), np.cos(np.sin(X) * 2.0))  # unborrowed now: donated


def test_views_handles_and_borrowed_companions_refuse_donation() -> None:
    """A view is a borrow (never written); a handle call binds eagerly; a donating call
    owns every input, so a borrowed owner among the other arguments is refused too."""
    x = ts.from_numpy(X)
    with x.as_view() as v, pytest.raises(DonationError, match="donate the owner"):
        host_jit(_chain, donate_argnums=0)(v)
    with pytest.raises(DonationError, match="bound eagerly"):
        ad.grad(lambda a: ad.sum(host_jit(_chain, donate_argnums=0)(a)))(X)
    jf = host_jit(lambda a, b: ad.sin(a) + b, donate_argnums=0)
    with pytest.raises(DonationError, match="argument leaf 1 is a borrowed Tensor"):
        jf(X.copy(), x)
    with pytest.raises(DonationError, match="already passed as another leaf"):
        host_jit(lambda a, b: ad.sin(a) + ad.cos(b), donate_argnums=(0, 1))(x, x)
    np.testing.assert_array_equal(x.to_numpy(), X)


def test_an_engine_that_does_not_write_into_inputs_refuses_before_consuming() -> None:
    """The simulated asynchronous engine has no donation: DonationError, owner intact."""
    sim = next(e.id for e in rt.engines() if not e.synchronous)
    x = ts.from_numpy(X)
    with pytest.raises(DonationError, match="does not write into donated inputs"):
        host_jit(_chain, engine=sim, donate_argnums=0)(x)
    np.testing.assert_array_equal(x.to_numpy(), X)


def test_donate_argnums_out_of_range_or_not_ints() -> None:
    with pytest.raises(DonationError, match="out of range"):
        host_jit(_chain, donate_argnums=3)(X)
    with pytest.raises(ad.errors.ArgumentTypeError, match="donate_argnums"):
        host_jit(_chain, donate_argnums=("x",))  # type: ignore[arg-type]


def test_the_runtime_refuses_a_donated_record_bound_twice_and_scoped_donation() -> None:
    """Submission: a donated binding whose record another binding also names is refused
    (SubmitErrorKind.DONATION) with the inputs back; scoped execution never donates."""
    program = host_jit(lambda a, b: ad.sin(a) + b, donate_argnums=0).lower(X, X).program
    group = ts.AllocationGroup()
    s = group.insert(ts.from_numpy(X))
    inputs = rt.ExecutionInputs(group, [s, s])
    with pytest.raises(SubmitRejected) as info:
        rt.submit(rt.host_engine(), program, inputs)
    cause, back = info.value.into_parts()
    assert cause.kind is rt.SubmitErrorKind.DONATION and back is inputs
    x = ts.from_numpy(X)
    with x.as_view() as v, pytest.raises(ScopedSubmitRejected, match="donated"):
        rt.execute_scoped_read_only(rt.host_engine(), program, rt.ScopedReadInputs([v, v]))
    del back, inputs


def _fails_before_writing(a: Any) -> Any:
    # a is read again after log, so the donated write (the final product) comes last:
    # log(0) raises (floating-point errors raise in this suite) before anything is written
    return ad.log(a - a) * a


def _fails_after_writing(a: Any) -> Any:
    # sin reads a for the last time and writes into it; log(0) then raises
    return ad.log(ad.sin(a) * 0.0)


def test_a_failed_donating_call_puts_an_unwritten_donated_owner_back_unchanged() -> None:
    jf = host_jit(_fails_before_writing, donate_argnums=0)
    assert jf.lower(X).program.donated == (0,)
    x = ts.from_numpy(X)
    with pytest.raises(ExecutionFailed) as err:
        jf(x)
    assert err.value.clobbered == () and err.value.donated == {}
    np.testing.assert_array_equal(x.to_numpy(), X)  # the caller's owner, usable, unchanged
    del err
    assert host_jit(_chain)(x) is not None  # and it can be used again


def test_a_failed_donating_call_hands_a_written_owner_over_marked_clobbered() -> None:
    jf = host_jit(_fails_after_writing, donate_argnums=0)
    x = ts.from_numpy(X)
    with pytest.raises(ExecutionFailed, match="hold what the program wrote") as err:
        jf(x)
    assert err.value.clobbered == (0,)
    owner = err.value.donated[0]
    assert not np.array_equal(owner.to_numpy(), X)  # what the program left, not x
    # The caller's object was not refilled with those bytes: a retry cannot use them.
    with pytest.raises(UseAfterMoveError):
        jf(x)
    del err, owner
