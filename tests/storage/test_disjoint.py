"""The central disjointness proof (``_disjoint.py``) through ``AllocationGroup.split_mut`` (G2).

Deterministic cases follow the contract's G2 list (N = 0, 1, 2, >2; empty and
reverse-stride descriptors; a repeated slot; interleaved strided requests; the
counters).  The property tests re-check every accepted split by enumerating element
addresses, confirm that every ``OVERLAP`` verdict names bytes that really are
shared, and show the outcome does not depend on the order of the requested slots.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tenferro_storage as ts
from tenferro_storage import AllocationGroup, DescriptorSlot, host_provider, ledger
from tenferro_storage import _descriptor as D
from tenferro_storage._layout import prove_injective
from tenferro_storage.errors import (
    BorrowError,
    DisjointCause,
    DisjointViewError,
    GroupError,
    OwnershipError,
)
from tests.strategies import LayoutCase, injective_layouts, layouts


def _matrix_group() -> tuple[AllocationGroup, DescriptorSlot]:
    """A group holding one 4x6 float64 matrix with values 0..23."""
    group = AllocationGroup()
    return group, group.insert(ts.from_numpy(np.arange(24.0).reshape(4, 6)))


def _rows(group: AllocationGroup, base: DescriptorSlot, n: int = 4) -> list[DescriptorSlot]:
    return [group.alias(base, shape=(6,), strides=(1,), offset=6 * i) for i in range(n)]


def _cause(group: AllocationGroup, slots: list[DescriptorSlot]) -> DisjointCause:
    with pytest.raises(DisjointViewError) as info:
        group.split_mut(slots)
    return info.value.cause


def _usable(group: AllocationGroup, slot: DescriptorSlot) -> None:
    """The group holds no borrow: an exclusive borrow can be taken and given back."""
    group.view_mut(slot).release()


# -- N-way splits -----------------------------------------------------------------------


def test_split_of_no_slots_returns_nothing_and_holds_no_borrow() -> None:
    group, base = _matrix_group()
    assert group.split_mut([]) == []
    _usable(group, base)


def test_split_of_one_slot_is_a_mutable_view_holding_the_group() -> None:
    group, base = _matrix_group()
    (child,) = group.split_mut([base])
    child.fill(2.0)
    with pytest.raises(BorrowError, match="1 split_mut children"):
        group.view(base)
    child.release()
    with group.view(base) as v:
        assert v.to_numpy().sum() == 48.0


def test_split_of_two_halves_writes_both_and_frees_the_group_after_the_last_child() -> None:
    group, base = _matrix_group()
    top = group.alias(base, shape=(2, 6), strides=(6, 1))
    bottom = group.alias(base, shape=(2, 6), strides=(6, 1), offset=12)
    a, b = group.split_mut([top, bottom])
    a.fill(-1.0)
    b.fill(1.0)
    a.release()
    with pytest.raises(BorrowError):
        group.view(base)  # the other child still holds the group
    del b  # dropping the last child ends the borrow (CPython reference counting)
    with group.view(base) as v:
        assert v.to_numpy().tolist() == [[-1.0] * 6] * 2 + [[1.0] * 6] * 2


def test_split_of_many_rows_returns_children_in_request_order() -> None:
    group, base = _matrix_group()
    rows = _rows(group, base)
    order = [rows[2], rows[0], rows[3], rows[1]]
    children = group.split_mut(order)
    assert [c.to_numpy()[0] for c in children] == [12.0, 0.0, 18.0, 6.0]
    for i, child in enumerate(children):
        child.fill(float(i))
    del children, child
    with group.view(base) as v:
        assert v.to_numpy()[:, 0].tolist() == [1.0, 3.0, 0.0, 2.0]


def test_children_are_not_copyable_and_block_every_group_operation() -> None:
    group, base = _matrix_group()
    rows = _rows(group, base, 2)
    children = group.split_mut(rows)
    with pytest.raises(OwnershipError):
        copy.copy(children[0])
    pending = ts.zeros((2,))
    for attempt in (
        lambda: group.view(base),
        lambda: group.view_mut(base),
        lambda: group.split_mut([base]),
        lambda: group.remove(rows[0]),
        lambda: group.try_extract(base),
        lambda: group.into_tensor(base),
        lambda: group.insert(pending),
        lambda: group.alias(base, shape=(1,), strides=(1,)),
    ):
        with pytest.raises(BorrowError):
            attempt()
    del children
    _usable(group, base)


def test_prepared_write_access_keeps_the_split_borrow() -> None:
    group, base = _matrix_group()
    (row,) = group.split_mut(_rows(group, base, 1))
    prepared = row.prepare_host_mut()
    del row
    with pytest.raises(BorrowError):
        group.view(base)
    assert isinstance(prepared, ts.PreparedContiguousWrite)
    prepared.as_slice_mut()[:] = 9.0
    prepared.release()
    with group.view(base) as v:
        assert v.to_numpy()[0].tolist() == [9.0] * 6


# -- empty and reverse-stride descriptors -----------------------------------------------


def test_empty_descriptors_are_disjoint_from_everything_even_repeated() -> None:
    group, base = _matrix_group()
    empty = group.alias(base, shape=(0, 6), strides=(6, 1), offset=7)
    other_empty = group.alias(base, shape=(3, 0), strides=(-1, 1), offset=9)
    children = group.split_mut([empty, base, empty, other_empty, empty])
    assert [c.size for c in children] == [0, 24, 0, 0, 0]
    del children
    _usable(group, base)


def test_reverse_stride_descriptors_split_when_disjoint() -> None:
    group, base = _matrix_group()
    rev_top = group.alias(base, shape=(2, 6), strides=(-6, -1), offset=11)
    rev_bottom = group.alias(base, shape=(2, 6), strides=(6, -1), offset=17)
    a, b = group.split_mut([rev_top, rev_bottom])
    assert a.to_numpy()[0].tolist() == [11.0, 10.0, 9.0, 8.0, 7.0, 6.0]
    assert b.to_numpy()[1].tolist() == [23.0, 22.0, 21.0, 20.0, 19.0, 18.0]
    a.fill(0.0)
    b.fill(1.0)
    del a, b
    with group.view(base) as v:
        assert v.to_numpy().sum() == 12.0
    rows = _rows(group, base)
    assert _cause(group, [rev_top, rows[1]]) is DisjointCause.OVERLAP


# -- refusals -----------------------------------------------------------------------------


def test_a_repeated_non_empty_slot_is_an_overlap() -> None:
    group, base = _matrix_group()
    rows = _rows(group, base)
    with pytest.raises(DisjointViewError, match="requested twice") as info:
        group.split_mut([rows[0], rows[1], rows[0]])
    assert info.value.cause is DisjointCause.OVERLAP
    assert info.value.slots == (rows[0], rows[0])
    _usable(group, base)


def test_records_that_surely_share_bytes_are_an_overlap() -> None:
    group, base = _matrix_group()
    rows = _rows(group, base)
    same = group.alias(base, shape=(6,), strides=(1,))  # an exact duplicate of row 0
    col0 = group.alias(base, shape=(4,), strides=(6,))
    assert _cause(group, [rows[0], same]) is DisjointCause.OVERLAP
    assert _cause(group, [base, rows[2]]) is DisjointCause.OVERLAP
    assert _cause(group, [col0, rows[3]]) is DisjointCause.OVERLAP  # its last element


def test_interleaved_strided_views_are_refused_conservatively() -> None:
    group, base = _matrix_group()
    even = group.alias(base, shape=(12,), strides=(2,))
    odd = group.alias(base, shape=(12,), strides=(2,), offset=1)
    col0 = group.alias(base, shape=(4,), strides=(6,))
    col1 = group.alias(base, shape=(4,), strides=(6,), offset=1)
    with pytest.raises(DisjointViewError, match="not provably disjoint") as info:
        group.split_mut([even, odd])
    assert info.value.cause is DisjointCause.NOT_PROVABLY_DISJOINT
    assert set(info.value.slots) == {even, odd}
    assert _cause(group, [col1, col0]) is DisjointCause.NOT_PROVABLY_DISJOINT
    _usable(group, base)


def test_a_non_injective_record_is_refused() -> None:
    group, base = _matrix_group()
    bcast = group.alias(base, shape=(3, 6), strides=(0, 1))
    rows = _rows(group, base)
    with pytest.raises(DisjointViewError, match="read-only aliases") as info:
        group.split_mut([rows[3], bcast])
    assert info.value.cause is DisjointCause.NON_INJECTIVE and info.value.slots == (bcast,)


def test_invalid_slots_are_refused_with_the_group_error_chained() -> None:
    group, base = _matrix_group()
    vacant = group.alias(base, shape=(1,), strides=(1,))
    group.remove(vacant)
    foreign = AllocationGroup().insert(ts.zeros((1,)))
    for bad in (vacant, foreign, "slot"):
        with pytest.raises(DisjointViewError) as info:
            group.split_mut([base, bad])  # type: ignore[list-item]
        assert info.value.cause is DisjointCause.INVALID_SLOT
        assert info.value.slots == (bad,)
        assert isinstance(info.value.__cause__, GroupError)
    _usable(group, base)


def test_split_mut_while_a_group_view_lives_raises_and_changes_nothing() -> None:
    group, base = _matrix_group()
    rows = _rows(group, base, 2)
    with group.view(rows[0]) as view:
        with pytest.raises(BorrowError, match="TensorView created at"):
            group.split_mut(rows)
        with pytest.raises(BorrowError):
            group.split_mut([])
        with pytest.raises(BorrowError):
            group.view_mut(rows[1])
        assert view.to_numpy()[0] == 0.0
    assert len(group.split_mut(rows)) == 2


# -- distinct allocations ---------------------------------------------------------------


def test_records_of_distinct_allocations_never_conflict() -> None:
    group = AllocationGroup()
    a = group.insert(ts.zeros((5,)))
    b = group.insert(ts.zeros((5,)))
    a_even = group.alias(a, shape=(3,), strides=(2,))
    b_odd = group.alias(b, shape=(2,), strides=(2,), offset=1)
    assert len(group.split_mut([a, b_odd])) == 2
    assert len(group.split_mut([a_even, b])) == 2


def test_owners_split_from_one_root_are_disjoint_entries() -> None:
    left, right = ts.allocate_storage(64).split(32)
    group = AllocationGroup()
    sl = group.insert(ts.Tensor.from_storage(left, dtype="float64", shape=(4,)))
    sr = group.insert(ts.Tensor.from_storage(right, dtype="float64", shape=(4,)))
    x, y = group.split_mut([sr, sl])
    x.fill(1.0)
    y.fill(2.0)
    del x, y
    with group.view(sl) as v, group.view(sr) as w:
        assert v.to_numpy().tolist() == [2.0] * 4 and w.to_numpy().tolist() == [1.0] * 4


# -- retained metadata only ---------------------------------------------------------------


def test_split_mut_view_and_view_mut_rerun_no_validation() -> None:
    group, base = _matrix_group()
    rows = _rows(group, base)
    empty = group.alias(base, shape=(0,), strides=(1,))
    rev = group.alias(base, shape=(6,), strides=(-1,), offset=23)  # the last row, reversed
    counters = host_provider.counters
    before = counters.snapshot()
    with ledger.capture() as rec:
        for n in (0, 1, 2, 4):
            group.split_mut(rows[:n]).clear()
        group.split_mut([empty, rows[0], empty, rev]).clear()
        group.view(rows[1]).release()
        group.view_mut(rev).release()
    assert counters.snapshot() == before, "no validation, resolution, map or dispatch"
    assert not rec.events, "no allocation, copy or release"


@pytest.fixture
def injectivity_proofs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, ...]]]:
    """Count every computation of a write-injectivity proof (by the layouts it proved)."""
    calls: list[tuple[int, ...]] = []
    real = prove_injective

    def counting(shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
        calls.append(shape)
        return real(shape, strides)

    monkeypatch.setattr(D, "prove_injective", counting)  # the name descriptors call
    yield calls


def test_write_injectivity_is_computed_only_when_a_record_lacks_it(
    injectivity_proofs: list[tuple[int, ...]],
) -> None:
    group, base = _matrix_group()
    rows = _rows(group, base, 2)
    group.split_mut([base]).clear()
    assert injectivity_proofs == [], "an inserted owner retains its proof"
    group.split_mut(rows).clear()
    assert len(injectivity_proofs) == 2, "each alias proves injectivity once"
    group.split_mut(rows).clear()
    group.view_mut(rows[0]).release()
    bcast = group.alias(base, shape=(2, 6), strides=(0, 1))
    for _ in range(2):
        with pytest.raises(DisjointViewError):
            group.split_mut([bcast])
    assert len(injectivity_proofs) == 3, "proofs (and refutations) are retained"


# -- properties ---------------------------------------------------------------------------

SPAN = 48  # float64 elements per allocation in the property tests


def _addresses(child: ts.TensorViewMut[Any, Any]) -> set[tuple[int, int]]:
    """Every (root, byte) a mutable child can write, by brute-force enumeration."""
    d = child._desc
    root = id(child._storage.root)
    item = d.dtype.itemsize
    out: set[tuple[int, int]] = set()
    for coord in itertools.product(*(range(n) for n in d.shape)):
        elem = d.offset + sum(i * s for i, s in zip(coord, d.strides, strict=True))
        base = d.start + elem * item
        out.update((root, b) for b in range(base, base + item))
    return out


def _record_addresses(group: AllocationGroup, slot: DescriptorSlot) -> set[tuple[int, int]]:
    with group.view(slot) as v:
        d = v._desc
        root = id(v._storage.root)
    item = d.dtype.itemsize
    out: set[tuple[int, int]] = set()
    for coord in itertools.product(*(range(n) for n in d.shape)):
        elem = d.offset + sum(i * s for i, s in zip(coord, d.strides, strict=True))
        base = d.start + elem * item
        out.update((root, b) for b in range(base, base + item))
    return out


_dtypes = st.sampled_from(("float64", "complex128"))
_shapes = st.lists(st.integers(0, 4), max_size=3).map(tuple)
small_layouts = st.one_of(
    layouts(dtype=_dtypes, shape=_shapes, max_slack=2),
    injective_layouts(dtype=_dtypes, shape=_shapes, max_slack=2),
).filter(lambda c: c.span_elems * c.itemsize <= SPAN * 8)


@st.composite
def placed_layouts(draw: st.DrawFn) -> LayoutCase:
    """A small layout moved to a random place inside a ``SPAN``-element float64 allocation."""
    case = draw(small_layouts)
    room = SPAN * 8 // case.itemsize - case.span_elems
    shift = draw(st.integers(0, room))
    return attrs.evolve(case, offset=case.offset + shift, span_elems=case.span_elems + shift)


@st.composite
def split_requests(draw: st.DrawFn) -> tuple[list[tuple[int, LayoutCase]], list[int]]:
    """Aliases over one or two allocations, and a request naming all of them (maybe one twice)."""
    n_alloc = draw(st.integers(1, 2))
    aliases = draw(
        st.lists(st.tuples(st.integers(0, n_alloc - 1), placed_layouts()), min_size=2, max_size=5)
    )
    request = list(range(len(aliases)))
    if draw(st.booleans()):
        request.append(draw(st.integers(0, len(aliases) - 1)))  # one record twice
    return aliases, request


def _build(aliases: list[tuple[int, LayoutCase]]) -> tuple[AllocationGroup, list[DescriptorSlot]]:
    group = AllocationGroup()
    bases = [group.insert(ts.zeros((SPAN,))) for _ in range(2)]
    slots = [
        group.alias(
            bases[a], shape=c.shape, strides=c.strides, offset=c.offset, dtype=c.dtype
        )
        for a, c in aliases
    ]
    return group, slots


def _outcome(group: AllocationGroup, slots: list[DescriptorSlot]) -> Any:
    """``("ok", addresses per slot)`` or ``(cause, frozenset of named slots)``."""
    try:
        children = group.split_mut(slots)
    except DisjointViewError as exc:
        return exc.cause, frozenset(exc.slots)
    try:
        return "ok", {s: frozenset(_addresses(c)) for s, c in zip(slots, children, strict=True)}
    finally:
        del children


@given(split_requests())
def test_accepted_splits_are_truly_disjoint_and_overlap_verdicts_are_exact(
    case: tuple[list[tuple[int, LayoutCase]], list[int]],
) -> None:
    aliases, request = case
    group, slots = _build(aliases)
    requested = [slots[i] for i in request]
    try:
        children = group.split_mut(requested)
    except DisjointViewError as exc:
        _usable(group, group.slots()[0])  # refusal left no borrow behind (the base record)
        if exc.cause is DisjointCause.OVERLAP:
            x, y = exc.slots
            assert _record_addresses(group, x) & _record_addresses(group, y), (
                "an OVERLAP verdict must name records that really share a byte"
            )
        return
    sets = [_addresses(c) for c in children]
    for i, j in itertools.combinations(range(len(sets)), 2):
        assert not sets[i] & sets[j], f"children {i} and {j} share bytes"
    del children


@given(split_requests(), st.randoms(use_true_random=False))
def test_the_outcome_does_not_depend_on_slot_order(
    case: tuple[list[tuple[int, LayoutCase]], list[int]], rnd: Any
) -> None:
    aliases, request = case
    group, slots = _build(aliases)
    requested = [slots[i] for i in request]
    shuffled = list(requested)
    rnd.shuffle(shuffled)
    assert _outcome(group, requested) == _outcome(group, shuffled)
    assert _outcome(group, requested[::-1]) == _outcome(group, requested)


def test_records_that_only_touch_are_never_called_an_overlap() -> None:
    """A contiguous record lying exactly in the gap of a strided one (it starts where the
    strided record's first element ends and ends where its last begins) shares no byte:
    refused only as not provably disjoint, never as an overlap (an OVERLAP claims a byte
    written twice).  Both request orders.  Mutant: ``_surely_shared``'s half-open
    intersection ``x[0] < hi`` turned into ``<=`` (the contiguous record first)."""
    group, base = _matrix_group()
    for contiguous_first in (True, False):  # (the pair is examined in record order)
        if contiguous_first:
            gap = group.alias(base, shape=(1,), strides=(1,), offset=1)  # bytes [8,16)
            ends = group.alias(base, shape=(2,), strides=(2,))  # bytes [0,8) and [16,24)
        else:
            ends = group.alias(base, shape=(2,), strides=(2,))
            gap = group.alias(base, shape=(1,), strides=(1,), offset=1)
        assert _cause(group, [ends, gap]) is DisjointCause.NOT_PROVABLY_DISJOINT
        assert _cause(group, [gap, ends]) is DisjointCause.NOT_PROVABLY_DISJOINT
    _usable(group, base)
