"""``EagerTensor``: a clonable, read-only reference to an :class:`AdValueRecord`.

A handle holds one strong count on its record (given back when the handle dies or is
consumed by ``into_value``), the identity token of the tape it was recorded on, and its
value id there (``-1``: a constant, nothing to differentiate).  It grants no write
authority: there is no method returning a mutable view, and the only owner-returning
paths are ``into_value()`` (consuming, G2 extraction after a uniqueness check) and
``duplicate_value()`` (an explicit, recorded copy).

Handles are hashable by identity (``__hash__`` is ``object.__hash__``) although ``==``,
``<`` ... are elementwise, non-differentiable ops returning boolean handles.

``np.asarray(handle)`` is refused with the ``OwnershipError`` owners and views give
(``tenferro_storage``'s ``refuse_array``: ``to_numpy()``, the testing module, a borrow);
scalar conversions, ``format`` and ``tolist`` are the host reads owners and views share.
Operators (``+ - * / @ ** -x``, comparisons, ``x[...]``) are installed by
``tenferro_ad.ops``; the stubs below only fix their signatures.
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

import tenferro_storage as ts
from tenferro_storage.errors import ExtractError, UseAfterMoveError

from ..errors import ArgumentTypeError, Extract, NotUnique
from ._nocopy import NoCopy
from ._retention import AdValueRecord, RetentionContainer
from ._state import STATE

_claim = ts.kernel.claim_deferred
scalar = ts.kernel.scalar
formatted = ts.kernel.formatted
html = ts.kernel.html
refuse_array = ts.kernel.refuse_array
values_text = ts.kernel.values_text


def _identity(v: Any) -> Any:
    return v


def _ops_missing(*args: Any) -> Any:  # pragma: no cover - replaced when ops load
    raise RuntimeError("tenferro_ad.ops is not loaded")


class ValueGuard(NoCopy):
    """A shared borrow of a value's storage; ``guard.view`` is the ``TensorView``.

    Use as ``with x.value() as v: ...`` (``v`` is the ``TensorView``).  The borrow ends on
    ``release()``, on ``with`` exit, or when the guard dies.  O(1): no allocation, no
    copy, no new owner, no re-validation.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = ("_rec", "_view")

    def __init__(self, rec: AdValueRecord, view: ts.TensorView[Any, Any]) -> None:
        self._rec: AdValueRecord | None = None
        self._view: ts.TensorView[Any, Any] | None = None
        if type(rec) is not AdValueRecord or type(view) is not ts.TensorView:
            raise ArgumentTypeError(
                "ValueGuard: made by EagerTensor.value(), not constructed directly"
            )
        # one more direct owner of the record while the borrow lives: into_value() of the
        # value is NotUnique until the guard is released (G7)
        rec.count += 1
        self._rec = rec
        self._view = view

    @property
    def view(self) -> ts.TensorView[Any, Any]:
        """The borrowed read-only view (``ExpiredBorrowError`` after release)."""
        v = self._view
        if v is None:
            raise ts.errors.ExpiredBorrowError(
                "ValueGuard.view: the guard was released; call handle.value() again"
            )
        return v

    def release(self) -> None:
        """End the borrow now (idempotent); ``into_value()`` of the value may then succeed.
        Views derived from ``guard.view`` hold their own borrows and stay valid.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        v = self._view
        if v is not None:
            self._view = None
            v.release()
        rec = self._rec
        if rec is not None:
            self._rec = None
            rec.count -= 1

    def __del__(self) -> None:
        self.release()

    def __enter__(self) -> ts.TensorView[Any, Any]:
        return self.view

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"ValueGuard({self._view!r})"


class EagerTensor:
    """A read-only handle to an AD value (see the module docstring).

    Cheap to clone (``clone()``/``copy.copy``: one more reference to the same record, no
    allocation, no copy).  Create by ``tape.watch(owner)`` or as the result of an op.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (ops build handles; do not construct
    one).
    Raises: nothing."""

    __slots__ = ("__weakref__", "_id", "_rec", "_tape")

    _rec: AdValueRecord | None
    _tape: object | None
    _id: int

    def __init__(self) -> None:
        raise ArgumentTypeError(
            "EagerTensor: not constructed directly; use tape.watch(owner), ad.constant(...) "
            "or ops"
        )

    def __del__(self) -> None:
        try:
            rec = self._rec
        except AttributeError:  # never built (a refused direct construction)
            return
        if rec is not None:
            rec.count -= 1

    def _r(self, operation: str) -> AdValueRecord:
        rec = self._rec
        if rec is None:
            raise UseAfterMoveError(
                f"{operation}: this EagerTensor was consumed by into_value(); use the owner "
                "it returned"
            )
        return rec

    # -- metadata (O(1), no ledger event) -------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """Extents per axis."""
        return tuple(self._r("shape").a.shape)

    @property
    def ndim(self) -> int:
        return int(self._r("ndim").a.ndim)

    @property
    def size(self) -> int:
        return int(self._r("size").a.size)

    @property
    def dtype(self) -> ts.DType:
        return ts.dtype(self._r("dtype").a.dtype.name)

    @property
    def nbytes(self) -> int:
        return int(self._r("nbytes").a.nbytes)

    @property
    def is_tracked(self) -> bool:
        """Whether this value is recorded on a tape (``False`` for constants)."""
        return self._id >= 0

    def __len__(self) -> int:
        s = self._r("len").a.shape
        if not s:
            raise ts.errors.RankError("len", "len() of a rank-0 value (it has no first axis)")
        return int(s[0])

    # -- cloning ---------------------------------------------------------------------------
    def clone(self) -> EagerTensor:
        """Another handle to the same record (one more direct owner, so ``into_value()``
        is ``NotUnique`` while both live).  Inside a checkpoint block the clone is noted
        (a clone is not a region output).

        Cost: no allocation (a Python handle object only); no copy; no sync; no dispatch;
        O(1).
        Raises: UseAfterMoveError (``self`` was consumed by ``into_value()``)."""
        rec = self._r("clone")
        h = EagerTensor.__new__(EagerTensor)
        h._rec = rec
        h._tape = self._tape
        h._id = self._id
        rec.count += 1
        region = STATE.region
        if region is not None:
            region.cloned(self, h)  # a clone inside a checkpoint block can be its output
        return h

    __copy__ = clone

    def __deepcopy__(self, memo: Any) -> EagerTensor:
        return self.clone()

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        raise ts.errors.OwnershipError(
            "pickle: an EagerTensor is a reference into a tape's retention; export the values "
            "with to_numpy() (a recorded TRANSFER copy)"
        )

    # -- G7 public API ---------------------------------------------------------------------
    def value(self) -> ValueGuard:
        """A guard exposing a borrowed ``TensorView`` of the value: a read in place, not a
        copy.  A fused record mints its owner first (once, over the same allocation).
        While the guard lives it is one more direct owner: ``into_value()`` is
        ``NotUnique``.

        Cost: no allocation; no copy; no sync (reading the view's values maps the memory
        then); no dispatch; O(1).
        Raises: UseAfterMoveError (``self`` was consumed by ``into_value()``)."""
        rec = self._r("value")
        return ValueGuard(rec, rec.view("value"))

    def duplicate_value(self) -> ts.Tensor[Any, Any]:
        """A new owner with a copy of the value: one ``EXPLICIT_DUPLICATE`` copy and one
        ``EXPLICIT_DUPLICATE_DESTINATION`` allocation. O(size).

        Cost: allocates one owner; copies the bytes once (recorded); synchronizes once (the
        provider's host map before the read: counted, O(1) for host memory); no dispatch
        (a host copy); O(size).

        Raises:
            UseAfterMoveError: ``self`` was consumed by ``into_value()``.
            CopyForbiddenError: inside ``ledger.forbid_copies()`` (nothing copied).
            AccessError: the provider could not map the memory for reading."""
        rec = self._r("duplicate_value")
        with rec.view("duplicate_value") as v:
            return v.duplicate()

    def into_value(self) -> ts.Tensor[Any, Any]:
        """Consume this handle and return the value's owner (no copy).

        Raises :class:`~tenferro_ad.errors.NotUnique` — checked first, before any group
        extraction — when anything else still directly owns the value (another handle, a
        tape residual, a checkpoint record, an alias record of the same container), and
        :class:`~tenferro_ad.errors.Extract` when the group refuses the extraction (the
        allocation is aliased by another descriptor, or the value borrows a caller's
        owner).  In both cases ``err.value`` is this same handle, still usable. O(1).

        Cost: no allocation; no copy (the owner moves out); no sync; no dispatch; O(1).

        Raises:
            NotUnique: another direct owner holds the value (nothing changes).
            Extract: the allocation cannot be moved out (nothing changes).
            UseAfterMoveError: ``self`` was already consumed.
        """
        rec = self._r("into_value")
        c = rec.container
        if type(c) is not RetentionContainer:  # fused: this record alone holds the value
            if rec.count != 1:
                raise NotUnique(self)
            owner = _claim(c, "into_value")
            rec.container = None
            self._rec = None
            rec.count -= 1
            return owner
        if rec.count != 1 or c.count != 1:
            raise NotUnique(self)
        slot = rec.slot
        if c.owner is not None and slot is None:
            owner = c.owned("into_value")
            c.owner = None
        elif c.group is not None and type(slot) is not ts.TensorView:
            c.flush()  # aliases that died while the group was viewed
            try:
                owner = c.group.try_extract(c.base_slot if slot is None else slot)
            except ExtractError as e:
                raise Extract(self, e) from None
            rec.slot = None  # extracted: nothing left for the record to drop
        else:
            raise Extract(
                self,
                ExtractError(
                    "borrowed",
                    "into_value: the value borrows an owner that the caller still holds "
                    "(an op argument or a functional-API argument); it has no owner to move "
                    "out. Use duplicate_value() for an explicit copy",
                ),
            )
        self._rec = None
        rec.count -= 1
        c.count -= 1
        return owner

    # -- host reads ------------------------------------------------------------------------
    def to_numpy(self) -> np.ndarray[Any, Any]:
        """Copy the values into a new numpy array (one ``TRANSFER`` copy event). O(size).

        A copy, never a borrow: the array is C-contiguous, writable and the caller's;
        writing it never changes the value (read in place with ``value()`` instead).

        Cost: allocates the numpy array (outside the ledger: no allocation event); copies
        the bytes once (a recorded ``TRANSFER``); synchronizes once (the provider's host
        map: counted, O(1) for host memory); no dispatch (a host copy); O(size).

        Raises:
            UseAfterMoveError: ``self`` was consumed by ``into_value()``.
            CopyForbiddenError: inside ``ledger.forbid_copies()`` (nothing copied).
            AccessError: the provider could not map the memory for reading."""
        rec = self._r("to_numpy")
        with rec.view("to_numpy") as v:
            return v.to_numpy()

    def item(self) -> Any:
        """The single element as a Python scalar (a host read; no ledger event).

        Cost: no allocation; no copy (reads the record's array in place); no sync; no
        dispatch; O(1).

        Raises:
            UseAfterMoveError: ``self`` was consumed by ``into_value()``.
            LayoutError: the value has more or fewer than one element."""
        return scalar(self._r("item").a, "item", _identity)

    def __float__(self) -> float:
        return scalar(self._r("float").a, "float", float)  # type: ignore[no-any-return]

    def __int__(self) -> int:
        return scalar(self._r("int").a, "int", int)  # type: ignore[no-any-return]

    def __bool__(self) -> bool:
        return scalar(self._r("bool").a, "bool", bool)  # type: ignore[no-any-return]

    def __complex__(self) -> complex:
        return scalar(self._r("complex").a, "complex", complex)  # type: ignore[no-any-return]

    def __format__(self, spec: str) -> str:
        return formatted(self._r("format").a, spec)

    def tolist(self) -> Any:
        """The values as nested Python lists (a scalar for rank 0), like ``ndarray.tolist``.
        A host read: O(size) Python objects, no ledger event.

        Cost: no allocation (Python objects only, no ledger event); no copy (reads the
        record's array in place); no sync; no dispatch; O(size).
        Raises: UseAfterMoveError (``self`` was consumed by ``into_value()``)."""
        return self._r("tolist").a.tolist()

    def _repr_html_(self) -> str:
        return html(repr(self))

    def __array__(self, *args: Any, **kwargs: Any) -> NoReturn:
        refuse_array(self)

    # numpy defers to our reflected operators (``ndarray + handle`` -> ``handle.__radd__``),
    # which import the array with a recorded TRANSFER instead of numpy refusing the handle.
    __array_ufunc__ = None

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        rec = self._rec
        if rec is None:
            return "EagerTensor(<consumed by into_value>)"
        a = rec.a
        kind = "tracked" if self._id >= 0 else "constant"
        values = values_text(a)
        return f"EagerTensor({a.dtype.name}, shape={tuple(a.shape)}, values={values}, {kind})"

    # -- operators (installed by tenferro_ad.ops) --------------------------------------------
    def __add__(self, other: Any) -> EagerTensor:
        return _ops_missing(self, other)  # type: ignore[no-any-return]

    def __radd__(self, other: Any) -> EagerTensor:
        return _ops_missing(other, self)  # type: ignore[no-any-return]

    def __sub__(self, other: Any) -> EagerTensor:
        return _ops_missing(self, other)  # type: ignore[no-any-return]

    def __rsub__(self, other: Any) -> EagerTensor:
        return _ops_missing(other, self)  # type: ignore[no-any-return]

    def __mul__(self, other: Any) -> EagerTensor:
        return _ops_missing(self, other)  # type: ignore[no-any-return]

    def __rmul__(self, other: Any) -> EagerTensor:
        return _ops_missing(other, self)  # type: ignore[no-any-return]

    def __truediv__(self, other: Any) -> EagerTensor:
        return _ops_missing(self, other)  # type: ignore[no-any-return]

    def __rtruediv__(self, other: Any) -> EagerTensor:
        return _ops_missing(other, self)  # type: ignore[no-any-return]

    def __pow__(self, other: Any) -> EagerTensor:
        return _ops_missing(self, other)  # type: ignore[no-any-return]

    def __rpow__(self, other: Any) -> EagerTensor:
        return _ops_missing(other, self)  # type: ignore[no-any-return]

    def __matmul__(self, other: Any) -> EagerTensor:
        return _ops_missing(self, other)  # type: ignore[no-any-return]

    def __rmatmul__(self, other: Any) -> EagerTensor:
        return _ops_missing(other, self)  # type: ignore[no-any-return]

    def __neg__(self) -> EagerTensor:
        return _ops_missing(self)  # type: ignore[no-any-return]

    def __abs__(self) -> EagerTensor:
        return _ops_missing(self)  # type: ignore[no-any-return]

    def __eq__(self, other: object) -> EagerTensor:  # type: ignore[override]
        return _ops_missing(self, other)  # type: ignore[no-any-return]

    def __ne__(self, other: object) -> EagerTensor:  # type: ignore[override]
        return _ops_missing(self, other)  # type: ignore[no-any-return]

    def __lt__(self, other: Any) -> EagerTensor:
        return _ops_missing(self, other)  # type: ignore[no-any-return]

    def __le__(self, other: Any) -> EagerTensor:
        return _ops_missing(self, other)  # type: ignore[no-any-return]

    def __gt__(self, other: Any) -> EagerTensor:
        return _ops_missing(self, other)  # type: ignore[no-any-return]

    def __ge__(self, other: Any) -> EagerTensor:
        return _ops_missing(self, other)  # type: ignore[no-any-return]

    def __getitem__(self, key: Any) -> EagerTensor:
        return _ops_missing(self, key)  # type: ignore[no-any-return]

    def reshape(self, *shape: Any) -> EagerTensor:
        return _ops_missing(self, shape)  # type: ignore[no-any-return]

    def transpose(self, *axes: int) -> EagerTensor:
        return _ops_missing(self, axes)  # type: ignore[no-any-return]

    @property
    def T(self) -> EagerTensor:
        return self.transpose()

    def sum(self, axis: Any = None, keepdims: bool = False) -> EagerTensor:
        return _ops_missing(self, axis, keepdims)  # type: ignore[no-any-return]

    def mean(self, axis: Any = None, keepdims: bool = False) -> EagerTensor:
        return _ops_missing(self, axis, keepdims)  # type: ignore[no-any-return]

    def astype(self, dtype: Any) -> EagerTensor:
        return _ops_missing(self, dtype)  # type: ignore[no-any-return]


def make_handle(rec: AdValueRecord, key: object | None, vid: int) -> EagerTensor:
    """A new handle holding one count on ``rec``. O(1)."""
    h = EagerTensor.__new__(EagerTensor)
    h._rec = rec
    h._tape = key
    h._id = vid
    rec.count += 1
    return h
