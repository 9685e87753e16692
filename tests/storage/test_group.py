"""AllocationGroup (``_group.py``): records, slots, borrows and extraction (G2).

The group's tables are private; these tests observe them only through the public
operations, the ledger (allocation/release events) and the host provider's counters.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import AllocationGroup, DescriptorSlot, host_provider, ledger
from tenferro_storage.errors import (
    BorrowError,
    ExtractError,
    GroupError,
    IntoTensorError,
    LayoutError,
    OwnershipError,
    UseAfterMoveError,
)
from tenferro_storage.ledger import EventKind


def _filled(n: int = 12, dtype: str = "float64") -> ts.Tensor[Any, Any]:
    return ts.from_numpy(np.arange(n, dtype=dtype))


def _values(group: AllocationGroup, slot: DescriptorSlot) -> np.ndarray[Any, Any]:
    with group.view(slot) as v:
        return v.to_numpy()


def _alloc_id(t: ts.Tensor[Any, Any]) -> int:
    """The allocation id of an owner (an observation label, read from its span identity)."""
    return int(t.span.split("#")[1].split("[")[0])


def _released(rec: ledger.LedgerRecord) -> list[int]:
    return [e.allocation for e in rec.events if e.kind is EventKind.RELEASE]  # type: ignore[misc]


def _state(group: AllocationGroup) -> tuple[Any, ...]:
    """Everything observable about a group: its live slots and each record's values."""
    return tuple((s, _values(group, s).tolist()) for s in group.slots())


# -- insert -----------------------------------------------------------------------------


def test_insert_consumes_the_owner_and_keeps_its_descriptor() -> None:
    t = _filled()
    before = host_provider.counters.snapshot()
    with ledger.capture() as rec:
        group = AllocationGroup()
        slot = group.insert(t)
    assert not rec.events, "insert neither allocates nor copies"
    assert host_provider.counters.snapshot() == before, "insert re-validates nothing"
    with pytest.raises(UseAfterMoveError, match=r"AllocationGroup\.insert"):
        t.shape  # noqa: B018
    assert _values(group, slot).tolist() == list(range(12))
    assert slot in group and len(group) == 1 and group.slots() == [slot]


def test_insert_refuses_a_borrowed_owner_and_changes_nothing() -> None:
    group = AllocationGroup()
    t = _filled()
    with t.as_view():
        with pytest.raises(BorrowError):
            group.insert(t)
    assert len(group) == 0
    assert t.to_numpy().tolist() == list(range(12)), "the owner is still usable"


def test_insert_refuses_consumed_owners_and_non_owners() -> None:
    group = AllocationGroup()
    t = _filled()
    group.insert(t)
    with pytest.raises(UseAfterMoveError):
        group.insert(t)
    u = _filled()
    with u.as_view() as v, pytest.raises(TypeError, match="owning Tensor"):
        group.insert(v)  # type: ignore[arg-type]
    assert len(group) == 1


def test_each_insert_makes_a_new_stable_allocation_entry() -> None:
    group = AllocationGroup()
    slots = [group.insert(ts.full((3,), float(i))) for i in range(4)]
    assert len(set(slots)) == 4
    group.remove(slots[1])
    # Nothing was renumbered: every other slot still names its own values.
    for i in (0, 2, 3):
        assert _values(group, slots[i]).tolist() == [float(i)] * 3


# -- slots ------------------------------------------------------------------------------


def test_slots_are_copyable_opaque_keys_that_grant_nothing() -> None:
    group = AllocationGroup()
    slot = group.insert(_filled())
    assert copy.copy(slot) == slot and copy.deepcopy(slot) == slot
    assert hash(copy.copy(slot)) == hash(slot)
    with pytest.raises(TypeError, match="local key"):
        pickle.dumps(slot)  # meaningless in another process, where group serials differ
    with pytest.raises(TypeError):
        DescriptorSlot()
    with pytest.raises(AttributeError):
        slot._index = 3
    # A slot holds integers only: no reference to the group, storage or root.
    assert all(isinstance(getattr(slot, name), int) for name in DescriptorSlot.__slots__)
    assert "group#" in repr(slot)


@pytest.mark.parametrize("operation", ["view", "view_mut", "remove", "alias"])
def test_a_foreign_slot_is_a_group_error(operation: str) -> None:
    mine, other = AllocationGroup(), AllocationGroup()
    mine.insert(_filled())
    foreign = other.insert(_filled())
    kwargs: dict[str, Any] = {"shape": (2,), "strides": (1,)} if operation == "alias" else {}
    with pytest.raises(GroupError, match="another group"):
        getattr(mine, operation)(foreign, **kwargs)
    assert len(mine) == 1 and len(other) == 1


@pytest.mark.parametrize("operation", ["view", "view_mut", "remove", "alias"])
def test_a_vacant_slot_is_a_group_error_and_is_never_reused(operation: str) -> None:
    group = AllocationGroup()
    slot = group.insert(_filled())
    keep = group.alias(slot, shape=(12,), strides=(1,))
    group.remove(slot)
    kwargs: dict[str, Any] = {"shape": (2,), "strides": (1,)} if operation == "alias" else {}
    with pytest.raises(GroupError, match="vacant"):
        getattr(group, operation)(slot, **kwargs)
    new = group.alias(keep, shape=(12,), strides=(1,))
    assert new != slot and slot not in group and new in group
    assert group.slots() == [keep, new]


def test_a_non_slot_is_a_group_error() -> None:
    group = AllocationGroup()
    group.insert(_filled())
    with pytest.raises(GroupError, match="expected a DescriptorSlot"):
        group.view(0)  # type: ignore[arg-type]
    assert 0 not in group


# -- alias ------------------------------------------------------------------------------


def test_alias_is_validated_once_and_counts_from_the_allocation_start() -> None:
    storage = ts.allocate_storage(8 * 8)
    t = ts.Tensor.from_storage(storage, dtype="float64", shape=(4,), offset=4)
    t.fill(7.0)
    group = AllocationGroup()
    slot = group.insert(t)
    before = host_provider.counters.validations
    head = group.alias(slot, shape=(2, 2), strides=(1, 2), offset=3)
    assert host_provider.counters.validations == before + 1
    v = group.view(head)
    assert v.shape == (2, 2) and v.strides == (1, 2) and v.offset == 3
    # Element 3 precedes the tensor's own range; elements 4 and 5 are its first values.
    assert v.to_numpy()[1].tolist() == [7.0, 7.0]


def test_a_bad_alias_is_refused_and_changes_nothing() -> None:
    group = AllocationGroup()
    slot = group.insert(_filled())
    with pytest.raises(LayoutError, match="12 float64 elements"):
        group.alias(slot, shape=(13,), strides=(1,))
    with pytest.raises(LayoutError):
        group.alias(slot, shape=(3,), strides=(-1,), offset=1)
    assert group.slots() == [slot]


def test_alias_dtype_must_be_the_allocation_dtype_or_its_sealed_partner() -> None:
    group = AllocationGroup()
    c = group.insert(ts.from_numpy(np.array([1 + 2j, 3 + 4j])))
    real = group.alias(c, shape=(2, 2), strides=(2, 1), dtype="float64")
    assert _values(group, real).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    back = group.alias(real, shape=(2,), strides=(1,), dtype="complex128")
    assert _values(group, back).tolist() == [1 + 2j, 3 + 4j]
    with pytest.raises(LayoutError, match="complex128 or float64"):
        group.alias(c, shape=(2,), strides=(1,), dtype="int64")
    i = group.insert(ts.zeros((4,), "int64"))
    with pytest.raises(LayoutError, match="use int64"):
        group.alias(i, shape=(2,), strides=(1,), dtype="float64")


def test_aliases_may_overlap_freely_and_duplicate_exactly() -> None:
    group = AllocationGroup()
    slot = group.insert(_filled())
    same = group.alias(slot, shape=(12,), strides=(1,))
    bcast = group.alias(slot, shape=(3, 4), strides=(0, 1))
    with group.view(slot) as a, group.view(same) as b, group.view(bcast) as c:
        assert a.to_numpy().tolist() == b.to_numpy().tolist()
        assert c.to_numpy().tolist() == [[0.0, 1.0, 2.0, 3.0]] * 3


# -- borrows ----------------------------------------------------------------------------


def test_views_share_the_group_and_reuse_the_retained_descriptor() -> None:
    group = AllocationGroup()
    slot = group.insert(_filled())
    alias = group.alias(slot, shape=(3, 4), strides=(4, 1))
    before = host_provider.counters.snapshot()
    with ledger.capture() as rec:
        a, b, c = group.view(slot), group.view(slot), group.view(alias)
        assert c.to_numpy()[2].tolist() == [8.0, 9.0, 10.0, 11.0]
        assert a.span == b.span == c.span
        del a, b, c
    assert not rec.allocations and rec.copies == {ledger.CopyReason.TRANSFER: 1}
    after = host_provider.counters.snapshot()
    delta = {k: after[k] - before[k] for k in after if after[k] != before[k]}
    # no validation (the descriptors are retained); to_numpy maps once, like prepare_host
    assert delta == {"resolutions": 1, "maps": 1, "syncs": 1}


def test_view_mut_is_exclusive_over_the_whole_group() -> None:
    group = AllocationGroup()
    slot = group.insert(_filled())
    other = group.insert(_filled(3))
    with group.view_mut(slot) as m:
        m.fill(1.0)
        with pytest.raises(BorrowError, match="TensorViewMut"):
            group.view(other)
        with pytest.raises(BorrowError):
            group.view_mut(other)
    assert _values(group, slot).tolist() == [1.0] * 12
    assert _values(group, other).tolist() == [0.0, 1.0, 2.0]


def test_view_mut_refuses_a_non_injective_alias_and_changes_nothing() -> None:
    group = AllocationGroup()
    slot = group.insert(_filled())
    bcast = group.alias(slot, shape=(3, 4), strides=(0, 1))
    with pytest.raises(LayoutError, match="read-only alias"):
        group.view_mut(bcast)
    with group.view_mut(slot):
        pass  # no borrow was left behind


@pytest.mark.parametrize(
    "operation",
    ["view_mut", "split_mut", "remove", "try_extract", "into_tensor"],
)
def test_exclusive_operations_while_a_group_view_lives_raise_borrow_error(operation: str) -> None:
    group = AllocationGroup()
    slot = group.insert(_filled())
    state = _state(group)
    view = group.view(slot)
    arg: Any = [slot] if operation == "split_mut" else slot
    with pytest.raises(BorrowError, match="TensorView created at"):
        getattr(group, operation)(arg)
    assert view.to_numpy().tolist() == list(range(12)), "the view is still valid"
    view.release()
    assert _state(group) == state, "nothing changed"


def test_appending_is_allowed_under_shared_borrows_but_not_under_mutable_ones() -> None:
    group = AllocationGroup()
    slot = group.insert(_filled())
    with group.view(slot) as v:
        alias = group.alias(slot, shape=(6,), strides=(2,))
        extra = group.insert(_filled(2))
        assert v.to_numpy().tolist() == list(range(12))
    assert _values(group, alias).tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    pending = _filled(2)
    with group.view_mut(extra):
        with pytest.raises(BorrowError, match="mutably borrowed"):
            group.insert(pending)
        with pytest.raises(BorrowError, match="mutably borrowed"):
            group.alias(slot, shape=(1,), strides=(1,))
    assert pending.to_numpy().tolist() == [0.0, 1.0], "the refused owner was not consumed"
    assert len(group) == 3


def test_a_group_is_move_only() -> None:
    group = AllocationGroup()
    group.insert(_filled())
    for attempt in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(OwnershipError):
            attempt(group)


# -- remove -----------------------------------------------------------------------------


def test_removing_the_last_record_releases_the_allocation_exactly_once() -> None:
    with ledger.capture() as rec:
        group = AllocationGroup()
        t = _filled()
        ident = _alloc_id(t)
        slot = group.insert(t)
        alias = group.alias(slot, shape=(6,), strides=(2,))
        group.remove(slot)
        assert _released(rec) == [], "an alias still refers to the allocation"
        group.remove(alias)
        assert _released(rec) == [ident]
        del group
    assert _released(rec) == [ident]
    assert rec.releases == 1


# -- try_extract ------------------------------------------------------------------------


def test_try_extract_refuses_an_aliased_allocation_and_changes_nothing() -> None:
    group = AllocationGroup()
    slot = group.insert(_filled())
    alias = group.alias(slot, shape=(4, 3), strides=(1, 4))
    state = _state(group)
    for s in (slot, alias):
        with pytest.raises(ExtractError, match="not the only record") as info:
            group.try_extract(s)
        assert info.value.reason == "aliased"
    assert _state(group) == state


def test_try_extract_moves_the_sole_record_out_without_renumbering() -> None:
    group = AllocationGroup()
    first = group.insert(_filled(4))
    second = group.insert(ts.full((2, 2), 5.0))
    third = group.insert(_filled(3))
    with ledger.capture() as rec:
        owner = group.try_extract(second)
    assert not rec.events, "extraction neither allocates, copies nor releases"
    assert owner.shape == (2, 2) and owner.to_numpy().tolist() == [[5.0, 5.0], [5.0, 5.0]]
    owner.fill(1.0)  # the extracted tensor is a full, writable owner
    assert second not in group and group.slots() == [first, third]
    assert _values(group, first).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert _values(group, third).tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ExtractError) as info:
        group.try_extract(second)
    assert info.value.reason == "invalid_slot" and isinstance(info.value.__cause__, GroupError)


def test_try_extract_after_removing_aliases_succeeds() -> None:
    group = AllocationGroup()
    slot = group.insert(_filled())
    alias = group.alias(slot, shape=(12,), strides=(-1,), offset=11)
    group.remove(slot)
    owner = group.try_extract(alias)
    assert owner.to_numpy().tolist() == list(range(11, -1, -1))
    assert len(group) == 0


def test_try_extract_refuses_a_non_injective_sole_record() -> None:
    group = AllocationGroup()
    slot = group.insert(_filled())
    bcast = group.alias(slot, shape=(2, 12), strides=(0, 1))
    group.remove(slot)
    with pytest.raises(ExtractError) as info:
        group.try_extract(bcast)
    assert info.value.reason == "non_injective"
    assert group.slots() == [bcast]


# -- into_tensor ------------------------------------------------------------------------


def test_into_tensor_discards_every_other_record_and_releases_them_once() -> None:
    with ledger.capture() as rec:
        group = AllocationGroup()
        kept, dropped = _filled(6), _filled(5)
        kept_id, dropped_id = _alloc_id(kept), _alloc_id(dropped)
        a = group.insert(kept)
        group.alias(a, shape=(3,), strides=(2,))
        b = group.insert(dropped)
        group.alias(b, shape=(5,), strides=(-1,), offset=4)
        selected = group.alias(a, shape=(2, 3), strides=(3, 1))
        owner = group.into_tensor(selected)
        assert _released(rec) == [dropped_id], "only the unselected allocation is released"
        assert owner.to_numpy().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
        with pytest.raises(UseAfterMoveError, match="into_tensor"):
            group.view(a)
        del owner
        assert _released(rec) == [dropped_id, kept_id]
    assert rec.releases == 2 and not ledger.double_releases()


def test_into_tensor_failure_returns_the_unchanged_group() -> None:
    group = AllocationGroup()
    slot = group.insert(_filled())
    bcast = group.alias(slot, shape=(2, 12), strides=(0, 1))
    state = _state(group)
    with pytest.raises(IntoTensorError) as info:
        group.into_tensor(bcast)
    reason, back = info.value.into_parts()
    assert reason == "non_injective" and back is group and info.value.value is group
    assert isinstance(info.value, ExtractError)
    foreign = AllocationGroup().insert(_filled(1))
    with pytest.raises(IntoTensorError) as info:
        group.into_tensor(foreign)
    assert info.value.reason == "invalid_slot" and info.value.value is group
    del info
    assert _state(group) == state
    assert group.into_tensor(slot).to_numpy().tolist() == list(range(12))


def test_an_empty_group_and_empty_descriptors() -> None:
    group = AllocationGroup()
    assert len(group) == 0 and group.slots() == [] and "records" in repr(group)
    slot = group.insert(ts.zeros((0, 3)))
    empty = group.alias(slot, shape=(0,), strides=(1,))
    with group.view(empty) as v:
        assert v.size == 0
    with group.view_mut(slot) as m:
        m.fill(1.0)
    group.remove(slot)
    assert group.try_extract(empty).shape == (0,)
