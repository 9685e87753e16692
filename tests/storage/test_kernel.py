"""The op-implementer surface (``tenferro_storage.kernel``): one owner per allocation.

``adopt_output`` never adopts memory an existing value holds (a kernel that returned one
of its inputs would otherwise make a second owner of one buffer, and the ledger would
count its bytes twice); ``materialize_output`` is the visible, recorded alternative.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import _root, kernel, ledger
from tenferro_storage.errors import AliasedOutputError, CopyForbiddenError, DTypeError, LayoutError

A = ledger.AllocationReason
C = ledger.CopyReason


def _refused_without_trace(array: Any, match: str) -> None:
    """adopt_output(array) raises AliasedOutputError and records/allocates nothing."""
    live = ledger.live_bytes()
    with ledger.capture() as rec, pytest.raises(AliasedOutputError, match=match) as info:
        kernel.adopt_output(array)
    assert rec.events == []
    assert ledger.live_bytes() == live
    assert isinstance(info.value, LayoutError) and isinstance(info.value, ValueError)


def test_a_kernel_returning_its_read_array_input_is_refused() -> None:
    """``lambda a: a`` over read_array's (read-only) array is refused, not a second owner."""
    t = ts.from_numpy(np.arange(3.0))
    kernel_fn = lambda a: a  # noqa: E731
    _refused_without_trace(kernel_fn(kernel.read_array(t)), "returned one of its inputs")
    assert t.to_numpy().tolist() == [0.0, 1.0, 2.0]


def test_a_kernel_returning_an_adopted_buffer_is_refused() -> None:
    """The array an owner adopted (still writable, owning its memory) cannot be adopted twice."""
    raw = np.ones(4)
    owner = kernel.adopt_output(raw)
    _refused_without_trace(raw, r"is the buffer of alloc#\d+")
    del owner


def test_a_view_of_a_live_buffer_is_refused_naming_the_allocation() -> None:
    """A slice of another owner's buffer is refused as existing memory (not just 'a view')."""
    raw = np.arange(6.0)
    owner = kernel.adopt_output(raw)
    _refused_without_trace(raw[2:], r"is a view of the buffer of alloc#\d+")
    del owner


def test_a_read_only_fresh_array_is_refused() -> None:
    """A read-only array is taken for an input handed out by read_array and refused."""
    arr = np.zeros(3)
    arr.flags.writeable = False
    _refused_without_trace(arr, "read-only")


@pytest.mark.parametrize("make", ["strided", "broadcast"])
def test_an_unrelated_view_is_still_a_layout_error(make: str) -> None:
    """A view of memory no owner holds keeps the plain LayoutError (not an alias error)."""
    base = np.zeros(6)
    view = base[::2] if make == "strided" else np.broadcast_to(base, (2, 6))  # read-only
    with pytest.raises(LayoutError, match="fresh C-contiguous") as info:
        kernel.adopt_output(view)
    assert not isinstance(info.value, AliasedOutputError)


def test_a_fresh_array_is_adopted_zero_copy() -> None:
    """A fresh writable array becomes the owner's buffer itself: one allocation, no copy."""
    arr = np.arange(4.0)
    with ledger.capture() as rec:
        t = kernel.adopt_output(arr)
    assert rec.allocations == {A.OPERATION_OUTPUT: 1} and rec.copies == {}
    assert np.shares_memory(kernel.read_array(t), arr)
    del t


def test_the_buffer_registry_forgets_a_buffer_when_its_root_dies() -> None:
    """Live-buffer entries live exactly as long as their root (no growth, no stale entries)."""
    before = len(_root._BUFFERS)
    owners = [kernel.adopt_output(np.zeros(2)) for _ in range(5)]
    assert len(_root._BUFFERS) == before + 5
    del owners
    assert len(_root._BUFFERS) == before


def test_adopting_again_after_the_owner_died_is_allowed() -> None:
    """Once its owner is gone, an array is no longer memory another value holds."""
    arr = np.zeros(3)
    first = kernel.adopt_output(arr)
    del first
    second = kernel.adopt_output(arr)
    assert second.to_numpy().tolist() == [0.0, 0.0, 0.0]
    del second


# -- adopt_output_deferred / claim_deferred ------------------------------------------------


def test_a_deferred_adoption_records_the_allocation_and_mints_one_owner_later() -> None:
    """The allocation event happens at adoption (the ledger sees the bytes at once); the
    owner minted later is over that same buffer, and only one owner is ever minted."""
    arr = np.arange(4.0)
    with ledger.capture() as rec:
        root = kernel.adopt_output_deferred(arr)
    assert isinstance(root, ts.RootResource)
    assert rec.allocations == {A.OPERATION_OUTPUT: 1} and rec.copies == {}
    with ledger.capture() as rec:
        owner = kernel.claim_deferred(root, "test")
    assert rec.events == []
    assert np.shares_memory(kernel.read_array(owner), arr)
    with pytest.raises(ts.errors.OwnershipError, match="already has its owner"):
        kernel.claim_deferred(root, "test")
    assert owner.to_numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    del owner, root


def _live_buffer() -> tuple[Any, np.ndarray[Any, Any]]:
    raw = np.ones(3)
    return kernel.adopt_output(raw), raw


def _read_only() -> tuple[None, np.ndarray[Any, Any]]:
    ro = np.zeros(3)
    ro.flags.writeable = False
    return None, ro


@pytest.mark.parametrize(
    "make",
    [
        lambda: (None, np.arange(6.0)[::2]),  # a view
        lambda: (None, np.asfortranarray(np.ones((2, 3)))),  # another layout
        lambda: (None, np.ones(3, np.float16)),  # a dtype tenferro does not store
        _read_only,  # memory a value holds (read_array's kind)
        _live_buffer,  # a live root's own buffer
    ],
)
def test_adopt_fresh_root_declines_what_is_not_a_fresh_output_and_records_nothing(
    make: Any,
) -> None:
    """The per-op fast path takes fresh kernel outputs only; anything else is ``None`` with
    no allocation event (the caller's general path owns it another way or refuses it)."""
    keep, arr = make()
    with ledger.capture() as rec:
        assert kernel.adopt_fresh_root(arr) is None
    assert rec.events == []
    del keep


def test_a_root_that_was_never_unclaimed_cannot_be_claimed() -> None:
    """Only a deferred adoption's root can be claimed: a root whose owner exists refuses."""
    storage = ts.allocate_storage(16)
    with pytest.raises(ts.errors.OwnershipError, match="already has its owner"):
        kernel.claim_deferred(storage.root, "test")
    del storage


@pytest.mark.parametrize("bad", [None, np.zeros(2), "root"])
def test_claim_deferred_refuses_anything_but_a_root_or_an_owner(bad: Any) -> None:
    """Only what adopt_output_deferred returns can be claimed: the argument is named."""
    with pytest.raises(ts.errors.OwnershipError, match="argument 'adopted'"):
        kernel.claim_deferred(bad, "test")


def test_a_deferred_adoption_refuses_what_adopt_output_refuses() -> None:
    """The deferred path keeps every refusal: an adopted buffer, a read-only array."""
    raw = np.ones(3)
    owner = kernel.adopt_output(raw)
    with pytest.raises(AliasedOutputError):
        kernel.adopt_output_deferred(raw)
    ro = np.zeros(3)
    ro.flags.writeable = False
    with pytest.raises(AliasedOutputError):
        kernel.adopt_output_deferred(ro)
    del owner


def test_an_unclaimed_roots_buffer_is_registered_and_forgotten_with_it() -> None:
    """A deferred root counts as live memory (adopting its buffer again is refused) and
    its live bytes go when it dies unclaimed."""
    live = ledger.live_bytes()
    arr = np.zeros(5)
    root = kernel.adopt_output_deferred(arr)
    assert ledger.live_bytes() == live + 40
    with pytest.raises(AliasedOutputError):
        kernel.adopt_output(arr)
    del root
    assert ledger.live_bytes() == live


# -- materialize_output -------------------------------------------------------------------


def test_materialize_output_records_one_copy_and_one_allocation() -> None:
    """The refused input becomes a fresh owner: one MATERIALIZE copy + its allocation."""
    t = ts.from_numpy(np.arange(3.0))
    src = kernel.read_array(t)
    with ledger.capture() as rec:
        m = kernel.materialize_output(src, A.OPERATION_OUTPUT, "identity")
    assert rec.copies == {C.MATERIALIZE: 1}
    assert rec.copy_bytes == {C.MATERIALIZE: 24}
    assert rec.allocations == {A.OPERATION_OUTPUT: 1}
    assert [e.operation for e in rec.events] == ["identity", "identity"]
    assert m.to_numpy().tolist() == [0.0, 1.0, 2.0]
    assert not np.shares_memory(kernel.read_array(m), src)
    with m.as_view_mut() as w:
        w.fill(7.0)
    assert t.to_numpy().tolist() == [0.0, 1.0, 2.0]  # the source is untouched


def test_materialize_output_keeps_the_requested_allocation_reason() -> None:
    """A materialized checkpoint-recompute output is still recorded as a recompute output."""
    with ledger.capture() as rec:
        m = kernel.materialize_output(np.ones((2, 2))[::-1], A.CHECKPOINT_RECOMPUTE_OUTPUT)
    assert rec.allocations == {A.CHECKPOINT_RECOMPUTE_OUTPUT: 1}
    assert m.layout == ts.Contiguous(range(0, 4))
    del m


def test_materialize_output_is_refused_inside_forbid_copies() -> None:
    """forbid_copies() refuses a materialization before anything is allocated or recorded."""
    t = ts.ones(2)
    live = ledger.live_bytes()
    with ledger.capture() as rec, ledger.forbid_copies():
        with pytest.raises(CopyForbiddenError, match="materialize_output"):
            kernel.materialize_output(kernel.read_array(t))
    assert rec.events == [] and ledger.live_bytes() == live


def test_materialize_output_refuses_an_unsupported_dtype_without_trace() -> None:
    """An unsupported dtype raises DTypeError before any copy or allocation."""
    with ledger.capture() as rec, pytest.raises(DTypeError):
        kernel.materialize_output(np.zeros(3, dtype=np.uint8))
    assert rec.events == []


def test_materialize_is_a_copy_reason_by_its_value() -> None:
    """Scenario files name the reason by its value, 'materialize'."""
    assert C("materialize") is C.MATERIALIZE
