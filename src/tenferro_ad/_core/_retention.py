"""Retention containers and value records: who directly owns an AD value's bytes.

Ownership shape (G7 "Ownership root")::

    EagerTensor ─▶ AdValueRecord ─▶ RetentionContainer ─▶ Tensor | AllocationGroup
    TapeNode (residual) ─▶ AdValueRecord          (every arrow is a strong reference)

* *Fused form* (the common case, one op output that nothing aliases): the record is the
  allocation's only holder and holds it itself, in its ``container`` field — no container
  object, no group objects.  An op output's record holds the allocation's
  ``RootResource`` until the owner is first needed (a view, a group, an extraction),
  when the one claim and owner are minted over it (``kernel.claim_deferred``) and
  replace the root there; most outputs die before that and never pay for them.
* :class:`RetentionContainer` directly owns an allocation that several records share or
  that is borrowed; a fused record makes one (``AdValueRecord.retention``, moving its
  root or owner in) the first time another record needs to share it.
  *Group form*: the first time a metadata-only op (reshape, transpose, basic slicing,
  broadcast_to) aliases the value, the owner is moved into a
  ``tenferro_storage.AllocationGroup`` (``insert``) and each alias becomes another
  descriptor of that group (``alias``): no allocation, no copy.
  *Borrowed form*: it holds a shared ``TensorView`` of a caller's owner (an op argument
  that a tape, region or handle still needs, or a functional-API argument) for as long as
  something needs it; nothing can be extracted from it.  Aliases of a borrowed value hold
  their own derived ``TensorView`` (their ``slot``) over the same span: zero-copy too.
* :class:`AdValueRecord` is one logical value: the container (or, fused, the root or
  owner), the descriptor slot inside it (``None``: the container's base value), and the
  numpy array kernels read.
* Both carry an explicit strong ``count`` of their *direct owners*: a record's owners are
  the handles and tape/checkpoint residual entries that hold it; a container's owners are
  the records that hold it (a fused record is its allocation's one holder).
  ``into_value`` checks both counts before any extraction (``NotUnique``); no side table
  is involved — Python's own references keep the objects alive, the counts only decide
  uniqueness.  An alias record removes its group descriptor when it dies
  (``drop_alias``; the group's table entry goes with it), so the base of a value can be
  extracted again once its aliases are gone; while one lives, extracting the base raises
  ``Extract`` (aliased allocation).

Retention itself never allocates or copies: a residual is one more reference to a record.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_storage as ts
from tenferro_storage._dtypes import STORED_NUMPY as _STORED
from tenferro_storage.errors import (
    BorrowError,
    DTypeError,
    ExtractError,
    GroupError,
    UseAfterMoveError,
)

from ..errors import ArgumentTypeError, UnsupportedDTypeError

_TV = ts.TensorView
_claim = ts.kernel.claim_deferred
_borrow_named = ts.kernel.borrow_named
_read_array = ts.kernel.read_array


class RetentionContainer:
    """Directly owns one allocation (fused ``owner``, an ``AllocationGroup``, or a borrow).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = ("addr", "base_slot", "borrow", "count", "group", "owner", "pending")

    def __init__(self) -> None:
        self.addr = 0
        self.pending: list[Any] = []  # set when grouped; fused containers never read it
        # the fused owner; an op output's is its allocation's root until first needed
        # (``owned``: most outputs die without a view or an extraction, never paying for it)
        self.owner: ts.Tensor[Any, Any] | ts.RootResource | None = None
        self.group: ts.AllocationGroup | None = None
        self.base_slot: Any = None  # the slot of the owner once a group exists
        self.borrow: ts.TensorView[Any, Any] | None = None
        self.count = 0

    def _ensure_group(self) -> ts.AllocationGroup | None:
        """Upgrade the fused cell to a group (moves the owner in; no allocation, no copy).

        ``None`` for a borrowed container (it has no owner to move in)."""
        if self.group is None:
            if self.owner is None:
                return None
            group = ts.AllocationGroup()
            self.pending = []
            self.base_slot = group.insert(self.owned("AllocationGroup.insert"))
            self.owner = None
            self.group = group
        return self.group

    def view(self, slot: Any, operation: str) -> ts.TensorView[Any, Any]:
        """A shared borrowed view of one descriptor of this container (``slot`` ``None``:
        the base value; a fused owner is minted first, once). O(1).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).

        Raises:
            GroupError: ``slot`` is not a live descriptor of the group.
            BorrowError: the group is exclusively borrowed (an extraction in progress), or
                the borrow an alias reads through has ended (``ExpiredBorrowError``).
            ExtractError: the container has no readable descriptor (never in practice)."""
        if slot is None:
            if self.owner is not None:
                return self.owned(operation).as_view()
            if self.borrow is not None:
                return self.borrow.as_view()
        elif type(slot) is ts.TensorView:  # an alias over a borrowed value
            return slot.as_view()
        if self.group is not None:
            return self.group.view(self.base_slot if slot is None else slot)
        raise ExtractError(  # pragma: no cover - every record has one of the forms above
            "invalid_slot", f"{operation}: this value has no readable descriptor"
        )

    def owned(self, operation: str) -> ts.Tensor[Any, Any]:
        """The fused owner, minted over the allocation's root the first time it is needed
        (``kernel.claim_deferred``; once).  Only for a container whose ``owner`` is set.
        O(1).

        Cost: no allocation (the owner is minted over the existing allocation); no copy; no
        sync; no dispatch; O(1).
        Raises: OwnershipError (``owner`` is not set)."""
        o = _claim(self.owner, operation)  # type: ignore[arg-type]
        self.owner = o
        return o

    def release_borrow(self) -> None:
        """End the borrow of a borrowed container (functional API exit). Idempotent.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        b = self.borrow
        if b is not None:
            self.borrow = None
            b.release()

    def drop_alias(self, slot: Any) -> None:
        """Forget the group descriptor of an alias whose last record died.

        Removal needs exclusive access to the group; while someone views it the slot
        waits in ``pending`` and goes with the next removal. O(1) amortized.

        Cost: no allocation; no copy; no sync; no dispatch; O(1) amortized (plus the
        pending removals it retries).
        Raises: nothing.
        """
        if self.group is not None:
            self.pending.append(slot)
            self.flush()

    def flush(self) -> None:
        """Remove the alias descriptors whose removal had to wait (see ``drop_alias``).

        While the group is viewed they stay pending (its ``BorrowError`` is handled here);
        once the group or a slot is gone there is nothing left to drop and the list is
        cleared.

        Cost: no allocation; no copy; no sync; no dispatch; O(pending descriptors).
        Raises: nothing."""
        group = self.group
        pending = self.pending
        if group is None or not pending:
            return
        try:
            while pending:
                group.remove(pending[-1])
                pending.pop()
        except BorrowError:
            pass  # someone views the group right now: retried by the next alias death
        except (GroupError, UseAfterMoveError):
            pending.clear()  # the group was consumed or the slot extracted: nothing to drop


class AdValueRecord:
    """One logical AD value: its container, its descriptor slot there, the kernel array.

    ``a`` is the numpy array that later kernels and no-record backward rules read; it is
    the kernel's own output array (or a numpy view of it for aliases) and is never handed
    to users, who read through ``EagerTensor.value()``.  ``op`` names the producing
    operation (for ``tape.retained()``).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = ("a", "container", "count", "op", "slot")

    # ``container``: a RetentionContainer, or -- fused -- the allocation's RootResource or
    # owner Tensor, which this record alone holds (``None`` once ``into_value`` moved it out)
    container: Any

    def __init__(self, a: Any, container: RetentionContainer, slot: Any, op: str) -> None:
        if type(container) is not RetentionContainer:
            raise ArgumentTypeError(
                "AdValueRecord: made by the tape and the ops over a RetentionContainer, not "
                f"constructed directly (got a {type(container).__name__})"
            )
        self.a = a
        self.container = container
        self.slot = slot
        self.op = op
        self.count = 0
        container.count += 1

    def __del__(self) -> None:
        # a record is one direct owner of its container: give the count back
        try:
            c = self.container
        except AttributeError:  # construction was refused: nothing to give back
            return
        if type(c) is RetentionContainer:  # (a fused record shares nothing)
            c.count -= 1
            slot = self.slot
            if slot is not None and type(slot) is not _TV:
                c.drop_alias(slot)  # the alias descriptor goes with its last record

    def retention(self) -> RetentionContainer:
        """This record's container; a fused record makes it now, moving its root or owner
        in (so another record can share the allocation). O(1), no allocation, no copy.

        Cost: no allocation (one small Python container object at most); no copy; no sync;
        no dispatch; O(1).
        Raises: nothing."""
        c = self.container
        if type(c) is RetentionContainer:
            return c
        n = self.container = _container(c, None)  # (its one record: this one)
        return n

    def view(self, operation: str) -> ts.TensorView[Any, Any]:
        """A shared borrowed view of this value (a fused record mints its owner first,
        once). O(1), no allocation, no copy.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).

        Raises:
            BorrowError: as :meth:`RetentionContainer.view` (the group or the borrow an
                alias reads through is unavailable).
            GroupError: as :meth:`RetentionContainer.view`.
            OwnershipError: the record's owner was already moved out."""
        c = self.container
        if type(c) is RetentionContainer:
            return c.view(self.slot, operation)
        o = _claim(c, operation)
        self.container = o
        return o.as_view()

    @property
    def nbytes(self) -> int:
        """Bytes of the logical elements this record describes."""
        return int(self.a.nbytes)

    def __repr__(self) -> str:
        return f"AdValueRecord({self.op}, shape={tuple(self.a.shape)}, owners={self.count})"


def _container(
    owner: ts.Tensor[Any, Any] | ts.RootResource | None, borrow: ts.TensorView[Any, Any] | None
) -> RetentionContainer:
    """A container for one record: the fused ``owner`` (or root) or a ``borrow``. O(1)."""
    c = RetentionContainer.__new__(RetentionContainer)
    c.owner = owner
    c.group = None
    c.base_slot = None
    c.borrow = borrow
    c.count = 1
    c.addr = 0
    return c


def move_owner(t: ts.Tensor[Any, Any], consumer: str) -> ts.Tensor[Any, Any]:
    """Move a caller's owner in: the caller's object is consumed (later use raises
    ``UseAfterMoveError`` naming ``consumer``) and a new owner holds the same storage.
    No copy, no allocation."""
    return t.take(consumer)


def record_owner(tensor: ts.Tensor[Any, Any], array: Any, op: str) -> AdValueRecord:
    """A fused record owning ``tensor`` (whose kernel array is ``array``). O(1)."""
    rec = AdValueRecord.__new__(AdValueRecord)
    rec.a = array
    rec.container = tensor
    rec.slot = None
    rec.op = op
    rec.count = 0
    return rec


def record_borrow(
    tensor: ts.Tensor[Any, Any] | ts.TensorView[Any, Any] | ts.TensorViewMut[Any, Any],
    op: str,
    holder: str,
) -> AdValueRecord:
    """A record holding a shared borrow of a caller's owner or view.

    The borrow lasts until ``release_borrow`` or until the record's last owner dies;
    meanwhile a conflicting borrow of the owner raises ``BorrowError`` naming ``holder``.
    O(1), no allocation, no copy.
    """
    view = _borrow_named(tensor, holder)
    c = _container(None, view)  # (its one record: the one below)
    rec = AdValueRecord.__new__(AdValueRecord)
    rec.a = _read_array(view)
    rec.container = c
    rec.slot = None
    rec.op = op
    rec.count = 0
    return rec


def _address(a: np.ndarray[Any, Any]) -> int:
    return int(a.__array_interface__["data"][0])


def record_alias(base: AdValueRecord, view: np.ndarray[Any, Any], op: str) -> AdValueRecord:
    """A metadata-only output: another descriptor over ``base``'s allocation. O(rank).

    ``view`` is the numpy view the kernel produced of ``base.a``.  No allocation, no copy:
    a fused container is upgraded to a group and the layout becomes a validated group
    alias (strides/offset in elements from the allocation start).  Over a borrowed value
    -- or an owner lent out meanwhile (a trace's constant borrows it), which cannot move
    into a group -- the record shares the container through a derived view holding its
    own borrow (nothing can be extracted through it).
    """
    c = base.retention()
    lent: ts.TensorView[Any, Any] | None = None
    if c.group is None and c.owner is not None:
        c.addr = _address(base.a)  # a fused base record's array is the whole allocation
        try:
            c._ensure_group()
        except BorrowError:  # the owner is lent out (a trace's constant borrows the
            # value) and cannot move into a group: alias it through a borrow of its own
            lent = c.owned(op).as_view()
    item = view.dtype.itemsize
    if c.group is None:  # over a borrowed value: a derived view holding its own borrow
        b = c.borrow if lent is None else lent
        if b is None:
            raise ts.errors.ExpiredBorrowError(
                f"{op}: the borrowed argument this value aliases was already released"
            )
        if not c.addr:
            c.addr = _address(ts.kernel.read_array(b)) - b.offset * b.dtype.itemsize
        derived = ts.kernel.derive_view(
            b,
            shape=tuple(view.shape),
            strides=tuple(s // item for s in view.strides),
            offset=(_address(view) - c.addr) // item if view.size else 0,
            dtype=view.dtype,
            holder=f"the value of {op}",
        )
        if lent is not None:
            lent.release()  # (the derived view holds its own borrow)
        return AdValueRecord(view, c, derived, op)
    slot = c.group.alias(
        c.base_slot,
        shape=tuple(view.shape),
        strides=tuple(s // item for s in view.strides),
        offset=(_address(view) - c.addr) // item if view.size else 0,
        dtype=view.dtype,  # a sealed reinterpretation (complex<->real) keeps its own dtype
    )
    return AdValueRecord(view, c, slot, op)


def constant_record(value: Any, operation: str, argument: str = "") -> AdValueRecord:
    """Import a numpy array, list or scalar, or any DLPack producer (a JAX array, a torch
    tensor) as a constant record: one ``TRANSFER`` copy into a new owner (recorded).
    Owners and views are not imported: ops borrow them.  Anything else raises
    ``ArgumentTypeError`` naming ``operation`` and, when given, ``argument`` (as the
    message spells it: ``"argument 'value'"``)."""
    try:
        if isinstance(value, np.ndarray | list | tuple) or np.isscalar(value):
            t = ts.from_numpy(value)
        elif hasattr(type(value), "__dlpack__"):
            t = ts.from_dlpack(value)
        else:
            t = None
    except DTypeError as e:  # the error path only: named for the op, not for the import
        raise _unsupported(value, operation, argument, e) from None
    if t is None:
        named = f"{argument} has " if argument else ""
        raise ArgumentTypeError(
            f"{operation}: {named}unsupported argument type {type(value).__name__}; expected an "
            "EagerTensor, a Tensor owner or view (borrowed), a numpy array or DLPack array "
            "(JAX, torch: imported with a recorded TRANSFER copy) or a Python scalar"
        )
    return record_owner(t, ts.kernel.read_array(t), "constant")


def _unsupported(value: Any, operation: str, argument: str, e: DTypeError) -> Exception:
    """The error for a value the import refused (``e``): for its dtype,
    :class:`~tenferro_ad.errors.UnsupportedDTypeError` naming ``operation`` and
    ``argument`` (``"an argument"`` when not given: the binder names its position);
    ``e`` itself when the dtype is not why (a ragged list)."""
    try:
        dt = value.dtype if hasattr(type(value), "dtype") else np.asarray(value).dtype
        dt = np.dtype(dt)
    except Exception:  # numpy cannot read it: the import's own words
        return e
    if dt in _STORED:
        return e
    return UnsupportedDTypeError(operation, argument or "an argument", dt)


