"""AllocationGroup: one owner per allocation, any number of descriptors over each.

A group is the only way to hold one allocation under several logical values (a
tensor and its transposed alias, a complex value and its real reinterpretation, a
bundle of gradients).  It keeps two private tables:

* *allocation entries*, one :class:`~tenferro_storage.OwnedStorage` each.  Entries
  are stable: moving an owner out leaves a vacancy and no other entry moves;
* *descriptor records*, append-only.  A record names its allocation entry and
  retains the :class:`~tenferro_storage.CheckedDescriptor` validated against that
  entry's exact span when the record was made.  Removing a record leaves its entry
  vacant for the rest of the group's life; its slot is never reused.

A :class:`DescriptorSlot` is the local key of one record.  It holds two integers
(the issuing group's serial number and the record's position) and no reference to
the group, the storage or the root, so holding or copying one grants nothing:
storage is reached only by resolving the slot through a borrow of the group.

Borrows follow the owner's rules (``view`` shared; ``view_mut``, ``split_mut``,
``remove``, ``try_extract`` exclusive; ``into_tensor`` consuming).  ``insert`` and
``alias`` only append metadata, which cannot disturb a live read view, so they are
allowed while shared views live and refused only while the group is mutably
borrowed.  Resolving a slot checks the table position and occupancy only; the
record's construction-time validation is never repeated.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Final, NoReturn

from . import _descriptor as D
from ._descriptor import CheckedDescriptor
from ._disjoint import prove_disjoint
from ._dtypes import dtype as resolve_dtype
from ._linear import Borrow, Lender
from ._rank import DynRank
from ._root import OwnedStorage
from ._tensor import Tensor, TensorView, TensorViewMut
from .errors import (
    BorrowError,
    ExtractError,
    GroupError,
    IntoTensorError,
    LayoutError,
    OwnershipError,
)

_GROUP_IDS: Final = itertools.count(1)


class DescriptorSlot:
    """The opaque, copyable local key of one descriptor record of one group.

    It carries no allocation, root, provider or write authority: it is meaningful
    only when passed to a method of the group that issued it.  Using it with another
    group, or after its record was removed or extracted, raises ``GroupError``.
    Slots compare equal when they name the same record of the same group.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = ("_group", "_index")

    _group: int
    _index: int

    def __init__(self) -> None:
        raise OwnershipError(
            "DescriptorSlot() cannot be constructed; AllocationGroup.insert() and "
            "AllocationGroup.alias() return the slots of the records they create"
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not DescriptorSlot:
            return NotImplemented
        return self._group == other._group and self._index == other._index

    def __hash__(self) -> int:
        return hash((self._group, self._index))

    def __copy__(self) -> DescriptorSlot:
        return self

    def __deepcopy__(self, memo: Any) -> DescriptorSlot:
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"DescriptorSlot is immutable (tried to set {name!r})")

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        raise TypeError(
            "pickle: a DescriptorSlot is a local key of one group in this process; it means "
            "nothing elsewhere. Pickle the values (to_numpy()) instead"
        )

    def __repr__(self) -> str:
        return f"DescriptorSlot(group#{self._group}, record {self._index})"


_SET_GROUP: Final[Any] = DescriptorSlot.__dict__["_group"].__set__
_SET_INDEX: Final[Any] = DescriptorSlot.__dict__["_index"].__set__


def _slot(group: int, index: int) -> DescriptorSlot:
    # The slot descriptors' own setters bypass the immutability guard (no attribute lookup).
    s = object.__new__(DescriptorSlot)
    _SET_GROUP(s, group)
    _SET_INDEX(s, index)
    return s


class _SplitBorrow(Lender, Borrow):
    """The exclusive group borrow shared by the children of one ``split_mut``.

    Each child holds this object as its lender.  It counts the live children and
    gives the group's exclusive borrow back when the last child is released or dies,
    so the group stays unusable while any child lives.
    """

    __slots__ = ("_children", "_ended", "_exclusive_borrow", "_lender")

    _children: int

    def _describe(self) -> str:
        return "split_mut borrow"

    def _end_exclusive(self) -> None:
        self._children -= 1
        if self._children == 0:
            self.release()


class AllocationGroup(Lender):
    """Owns allocations and descriptor records over them.  Move-only.

    * ``insert(tensor)`` consumes an owner: its storage becomes a new allocation entry
      and its descriptor the entry's first record.
    * ``alias(slot, shape=..., strides=..., offset=..., dtype=...)`` appends another
      record over the allocation of ``slot``, validated once against its exact span.
    * ``view``/``view_mut``/``split_mut`` borrow the whole group (shared, exclusive,
      exclusive split into proven-disjoint children).
    * ``remove``/``try_extract`` vacate a record (and move its owner out, for
      ``try_extract``); ``into_tensor`` consumes the group.

    Every refused operation leaves the group unchanged.  Each operation is O(1) in
    element count (``split_mut`` is O(N log N) in the number of requested slots).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (an empty group);
    ``insert`` moves owners in.
    Raises: nothing."""

    __slots__ = ("_allocations", "_descs", "_gid", "_next", "_rec_alloc", "_refs")

    _gid: int
    _allocations: list[OwnedStorage | None]  # stable entries; None = vacancy
    _refs: list[int]  # live records per allocation entry
    # The live records by index, in creation order.  An index is never reused (a stale
    # slot stays detectable), but a removed record's entry goes: a value sliced in every
    # step of a long loop keeps its table at the size of its live records.
    _descs: dict[int, CheckedDescriptor]
    _rec_alloc: dict[int, int]  # the allocation entry of each live record
    _next: int  # the index of the next record

    def __init__(self) -> None:
        """An empty group. O(1)."""
        self._init_lender()
        self._gid = next(_GROUP_IDS)
        self._allocations = []
        self._refs = []
        self._descs = {}
        self._rec_alloc = {}
        self._next = 0

    def _describe(self) -> str:
        return f"AllocationGroup(group#{self._gid})"

    # -- state and slot resolution --------------------------------------------------
    def _exclusive_access(self, operation: str) -> None:
        """Refuse unless the group is live and nothing borrows it (no state change)."""
        if self._moved_by is not None:
            self._live(operation)
        if self._exclusive is not None or self._shared:
            raise BorrowError(
                f"{operation}: requires exclusive access to {self._describe()}, but "
                f"{self._blocker()}; release it (leave its `with` block or drop it) first. "
                "Nothing was changed"
            )

    def _appendable(self, operation: str) -> None:
        """Appending a record only needs the group free of mutable borrows."""
        if self._moved_by is not None:
            self._live(operation)
        if self._exclusive is not None:
            raise BorrowError(
                f"{operation}: {self._describe()} is mutably borrowed: {self._blocker()}; "
                "release the mutable views first. Nothing was changed"
            )

    def _resolve(self, slot: object, operation: str) -> int:
        """The record index of ``slot`` (position and occupancy only), else ``GroupError``."""
        if type(slot) is not DescriptorSlot:
            raise GroupError(
                f"{operation}: expected a DescriptorSlot returned by insert() or alias(), "
                f"got {type(slot).__name__}"
            )
        if slot._group != self._gid:
            raise GroupError(
                f"{operation}: {slot!r} was issued by another group, not group#{self._gid}; "
                "a slot is a local key, meaningful only with the group that issued it"
            )
        index = slot._index
        if index not in self._descs:
            raise GroupError(
                f"{operation}: {slot!r} is vacant: its record was removed or extracted, and "
                "slots are never reused. Use a slot of a live record (see slots())"
            )
        return index

    # -- building ----------------------------------------------------------------------
    def insert(self, tensor: Tensor[Any, Any]) -> DescriptorSlot:
        """Consume ``tensor`` into a new allocation entry; return the slot of its record.

        The tensor's retained descriptor becomes the record (nothing is re-validated,
        copied or allocated).  A borrowed or consumed tensor is refused
        (``BorrowError``/``UseAfterMoveError``) and nothing changes. O(1).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).

        Raises:
            TypeError: ``tensor`` is not an owning ``Tensor``.
            BorrowError: the group is mutably borrowed, or ``tensor`` is borrowed.
            UseAfterMoveError: the group or ``tensor`` was consumed.
        """
        self._appendable("AllocationGroup.insert")
        if not isinstance(tensor, Tensor):
            raise TypeError(
                f"AllocationGroup.insert: expected an owning Tensor, got {type(tensor).__name__}; "
                "views cannot be inserted (a group owns what it holds)"
            )
        tensor._consume("AllocationGroup.insert")
        desc = tensor._desc  # read before the storage moves out (it may be built lazily)
        storage = tensor._storage
        tensor._storage = None
        a = len(self._allocations)
        self._allocations.append(storage)
        self._refs.append(1)
        index = self._next
        self._next = index + 1
        self._descs[index] = desc
        self._rec_alloc[index] = a
        return _slot(self._gid, index)

    def alias(
        self,
        slot: DescriptorSlot,
        *,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        offset: int = 0,
        dtype: object = None,
    ) -> DescriptorSlot:
        """Append a descriptor over the allocation of ``slot``; return its new slot.

        ``strides`` and ``offset`` are in elements of the alias's ``dtype``, counted from
        the start of the allocation.  ``dtype`` (default: that of ``slot``'s record) must
        be the allocation's dtype or its sealed reinterpretation partner
        (complex64<->float32, complex128<->float64).  The request is validated once,
        here, against the allocation's exact span (``LayoutError`` otherwise; nothing
        changes).  Aliases may overlap freely, even exactly; an alias that is not
        write-injective can be viewed but never mutably borrowed or extracted.
        No allocation, no copy. O(rank).

        Cost: no allocation; no copy; no sync; no dispatch (counts one provider validation);
        O(rank).

        Raises:
            GroupError: ``slot`` is not a live slot of this group.
            DTypeError: ``dtype`` names no supported dtype.
            LayoutError: a layout check fails, or ``dtype`` is not the allocation's dtype or
                its partner.
            BorrowError: the group is mutably borrowed.
            UseAfterMoveError: the group was consumed.
        """
        operation = "AllocationGroup.alias"
        self._appendable(operation)
        index = self._resolve(slot, operation)
        base = self._descs[index]
        a = self._rec_alloc[index]
        storage = self._allocations[a]
        assert storage is not None
        dt = base.dtype if dtype is None else resolve_dtype(dtype)
        if dt is not base.dtype and dt is not base.dtype.partner:
            partner = base.dtype.partner
            allowed = base.dtype.name if partner is None else f"{base.dtype.name} or {partner.name}"
            raise LayoutError(
                operation,
                f"dtype {dt.name} is neither the allocation's dtype nor its sealed "
                f"reinterpretation partner; use {allowed}",
                dtype=dt.name,
                span=storage.span,
            )
        root = storage._root
        assert root is not None
        desc = D.build(operation, root, storage.start, storage.stop, dt, shape, strides, offset)
        new = self._next
        self._next = new + 1
        self._descs[new] = desc
        self._rec_alloc[new] = a
        self._refs[a] += 1
        return _slot(self._gid, new)

    def remove(self, slot: DescriptorSlot) -> None:
        """Vacate the record of ``slot`` for good (its slot is never reused; the record's
        table entry goes, so the group's size follows its live records). O(1).

        When it was the last record of its allocation, the allocation entry becomes
        vacant too and its owner is dropped (released under G1's rules), since nothing
        could reach it any more.  Needs exclusive access; a bad slot raises
        ``GroupError`` and nothing changes.

        Cost: no allocation; no copy; no sync; no dispatch; O(1) (dropping the last record
        of an allocation releases its owner).
        Raises: GroupError, BorrowError, UseAfterMoveError.
        """
        self._exclusive_access("AllocationGroup.remove")
        index = self._resolve(slot, "AllocationGroup.remove")
        del self._descs[index]
        a = self._rec_alloc.pop(index)
        refs = self._refs[a] - 1
        self._refs[a] = refs
        if refs == 0:
            self._allocations[a] = None

    # -- borrows -----------------------------------------------------------------------
    def view(self, slot: DescriptorSlot) -> TensorView[Any, DynRank]:
        """A read-only view of ``slot``'s record under a shared borrow of the group. O(1).

        Any number of views (of any records) may coexist; while one lives the group
        cannot be mutably borrowed, split, extracted from or consumed.  A bad slot
        raises ``GroupError`` and nothing changes.  No validation is repeated.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: GroupError, BorrowError, UseAfterMoveError.
        """
        self._readable("AllocationGroup.view")
        index = self._resolve(slot, "AllocationGroup.view")
        self._borrow_shared("AllocationGroup.view", "TensorView")
        return TensorView._make(self, self._allocations[self._rec_alloc[index]], self._descs[index])  # type: ignore[arg-type, no-any-return]

    def view_mut(self, slot: DescriptorSlot) -> TensorViewMut[Any, DynRank]:
        """A mutable view of ``slot``'s record under the exclusive borrow of the whole group.

        One mutable view at a time; the group is unusable until it ends.  Needs the
        record's write-injectivity proof (computed once if absent, then retained); a
        non-injective alias raises ``LayoutError``.  A bad slot raises ``GroupError``.
        Every refusal leaves the group unchanged. O(1) in element count.

        Cost: no allocation; no copy; no sync; no dispatch; O(1) (O(rank log rank) once for
        a record without its injectivity proof).
        Raises: GroupError, LayoutError, BorrowError, UseAfterMoveError.
        """
        operation = "AllocationGroup.view_mut"
        self._exclusive_access(operation)
        index = self._resolve(slot, operation)
        desc = self._descs[index]
        if desc.injectivity() is None:
            raise LayoutError(
                operation,
                f"{slot!r} is a read-only alias: its layout reaches one element from two "
                "coordinates, so it cannot be written. Use view() to read it, or write "
                "through an injective record of the same allocation",
                shape=desc.shape,
                strides=desc.strides,
                offset=desc.offset,
                dtype=desc.dtype.name,
            )
        self._borrow_exclusive(operation, "TensorViewMut")
        return TensorViewMut._make(self, self._allocations[self._rec_alloc[index]], desc)  # type: ignore[arg-type, no-any-return]

    def split_mut(self, slots: Sequence[DescriptorSlot]) -> list[TensorViewMut[Any, DynRank]]:
        """Mutable views of several records at once, proven pairwise disjoint first.

        The children (in the order of ``slots``) together hold the group's exclusive
        borrow: the group is unusable until every child is released or gone.  The
        proof (``tenferro_storage._disjoint``) reads only retained metadata; refusals
        raise ``DisjointViewError`` with a :class:`~tenferro_storage.errors.DisjointCause`
        and change nothing.  A borrowed group raises ``BorrowError``.  ``split_mut([])``
        returns ``[]`` and holds no borrow.  O(N log N) in ``len(slots)``, O(1) in
        element count.

        Cost: no allocation; no copy; no sync; no dispatch; O(N log N) in ``len(slots)``.
        Raises: DisjointViewError, BorrowError, UseAfterMoveError.
        """
        operation = "AllocationGroup.split_mut"
        self._exclusive_access(operation)
        requested = tuple(slots)
        proven = prove_disjoint(
            requested, lambda s: self._resolve(s, operation), self._descs, self._rec_alloc
        )
        if not proven:
            return []
        token = _SplitBorrow.__new__(_SplitBorrow)
        token._init_lender()
        token._children = len(proven)
        self._borrow_exclusive(operation, f"{len(proven)} split_mut children")
        token._lender = self
        token._exclusive_borrow = True
        token._ended = None
        allocations = self._allocations
        # Every proven record's allocation entry is occupied (records keep it so).
        return [TensorViewMut._make(token, allocations[a], desc) for a, desc in proven]  # type: ignore[arg-type]

    # -- extraction --------------------------------------------------------------------
    def try_extract(self, slot: DescriptorSlot) -> Tensor[Any, DynRank]:
        """Move the owner of ``slot``'s allocation out, when ``slot`` is its only record.

        On success the record and the allocation entry become vacant (nothing is
        renumbered; the slot is never reused) and the returned tensor owns the
        allocation with the record's descriptor.  Otherwise ``ExtractError`` with
        ``.reason`` ``"aliased"`` (another record refers to the allocation),
        ``"invalid_slot"`` or ``"non_injective"``; the group is unchanged.  Needs
        exclusive access (``BorrowError`` otherwise).  No copy. O(1).

        Cost: no allocation; no copy; no sync; no dispatch; O(1) (O(rank log rank) once for
        a record without its injectivity proof).
        Raises: ExtractError, BorrowError, UseAfterMoveError.
        """
        operation = "AllocationGroup.try_extract"
        self._exclusive_access(operation)
        try:
            index = self._resolve(slot, operation)
        except GroupError as exc:
            raise ExtractError("invalid_slot", str(exc)) from exc
        a = self._rec_alloc[index]
        desc = self._descs[index]
        refs = self._refs[a]
        if refs != 1:
            raise ExtractError(
                "aliased",
                f"{operation}: {slot!r} is not the only record of its allocation "
                f"({refs - 1} other record(s) refer to it); extraction never copies. remove() "
                "the aliases first, consume the group with into_tensor(), or duplicate() a view",
            )
        self._check_owner_layout(desc, slot, operation)
        storage = self._allocations[a]
        del self._descs[index]
        del self._rec_alloc[index]
        self._refs[a] = 0
        self._allocations[a] = None
        return _owner(storage, desc)  # type: ignore[arg-type]

    def into_tensor(self, slot: DescriptorSlot) -> Tensor[Any, DynRank]:
        """Consume the group into the owner of ``slot``'s allocation, discarding every other
        record.

        Other records are dropped; allocations no longer referenced are released
        exactly once (G1).  Aliases of the selected allocation are discarded, never
        duplicated.  On refusal raises ``IntoTensorError`` whose ``.value`` is this group,
        unconsumed and unchanged (``.reason`` ``"invalid_slot"`` or ``"non_injective"``);
        a borrowed group raises ``BorrowError``.  O(number of allocations).

        Cost: no allocation; no copy; no sync; no dispatch; O(number of allocations) (the
        other allocations' owners are released).
        Raises: IntoTensorError, BorrowError, UseAfterMoveError.
        """
        operation = "AllocationGroup.into_tensor"
        self._exclusive_access(operation)
        try:
            index = self._resolve(slot, operation)
        except GroupError as exc:
            raise IntoTensorError("invalid_slot", str(exc), self) from exc
        desc = self._descs[index]
        try:
            self._check_owner_layout(desc, slot, operation)
        except ExtractError as exc:
            raise IntoTensorError(exc.reason, str(exc), self) from None
        storage = self._allocations[self._rec_alloc[index]]
        self._moved_by = operation
        self._descs = {}
        self._rec_alloc = {}
        self._refs = []
        self._allocations = []  # drops every other owner exactly once
        return _owner(storage, desc)  # type: ignore[arg-type]

    @staticmethod
    def _check_owner_layout(desc: CheckedDescriptor, slot: DescriptorSlot, operation: str) -> None:
        if desc.injectivity() is None:
            raise ExtractError(
                "non_injective",
                f"{operation}: {slot!r} is a read-only alias (its layout reaches one element "
                "from two coordinates) and cannot become a writable owner; select an "
                "injective record",
            )

    # -- inspection ----------------------------------------------------------------------
    def slots(self) -> list[DescriptorSlot]:
        """The slots of the live records, in creation order. O(records).

        Cost: allocates the list of slots (no ledger event); no copy; no sync; no dispatch;
        O(records).
        Raises: BorrowError, UseAfterMoveError."""
        self._readable("AllocationGroup.slots")
        gid = self._gid
        return [_slot(gid, i) for i in self._descs]

    def __contains__(self, slot: object) -> bool:
        """Whether ``slot`` names a live record of this group. O(1)."""
        return (
            type(slot) is DescriptorSlot
            and slot._group == self._gid
            and self._moved_by is None
            and slot._index in self._descs
        )

    def __len__(self) -> int:
        """The number of live descriptor records. O(1)."""
        self._live("len(AllocationGroup)")
        return len(self._descs)

    def __repr__(self) -> str:
        if self._moved_by is not None:
            return f"AllocationGroup(group#{self._gid}, <consumed by {self._moved_by}>)"
        n_alloc = sum(1 for s in self._allocations if s is not None)
        return (
            f"AllocationGroup(group#{self._gid}, {len(self)} records over {n_alloc} "
            f"allocations)"
        )


def _owner(storage: OwnedStorage, desc: CheckedDescriptor) -> Tensor[Any, DynRank]:
    t: Tensor[Any, DynRank] = Tensor.__new__(Tensor)
    t._init_lender()
    t._storage = storage
    t._desc = desc
    return t


__all__ = ["AllocationGroup", "DescriptorSlot"]
