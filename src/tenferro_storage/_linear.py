"""Move-only objects and borrow cells: Python stand-ins for Rust moves and borrows.

A *lender* (an owner, a mutable view, a group) carries a borrow cell: a count of
live shared borrows, or one exclusive borrow.  Borrowers (views, prepared accesses)
give their borrow back on ``release()``, on ``with`` exit, or when they die
(CPython's reference counting makes that deterministic for non-cyclic objects).
A consuming call empties the lender; any later use raises ``UseAfterMoveError``.

Borrow cells are single-threaded state like Rust's ``RefCell``: no lock on this path.
"""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

from .errors import BorrowError, ExpiredBorrowError, OwnershipError, UseAfterMoveError

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_AD_DIR = os.path.join(os.path.dirname(_PACKAGE_DIR), "tenferro_ad")


def _is_internal(filename: str, _cache: dict[str, bool] = {}) -> bool:  # noqa: B006
    hit = _cache.get(filename)
    if hit is None:
        # Demo and scenario programs live in the packages but are user code.
        hit = _cache[filename] = (
            filename.startswith(_PACKAGE_DIR) or filename.startswith(_AD_DIR)
        ) and os.path.basename(filename) not in ("demo.py", "programs.py")
    return hit


def call_site() -> tuple[Any, int] | None:
    """The (code object, line) of the first frame outside the tenferro packages.

    Cheap (no string formatting); :func:`format_site` renders it for messages.
    """
    frame: Any = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if not _is_internal(code.co_filename):
            return (code, frame.f_lineno)
        frame = frame.f_back
    return None


def format_site(site: tuple[Any, int] | None) -> str:
    if site is None:
        return "<unknown>"
    code, line = site
    return f"{os.path.basename(code.co_filename)}:{line} in {code.co_name}"


class NoCopy:
    """Mixin: copying or pickling raises ``OwnershipError`` (owners are unique)."""

    __slots__ = ()

    def __copy__(self) -> NoReturn:
        raise OwnershipError(
            f"copy.copy: {type(self).__name__} is a unique owner/capability and cannot be "
            "copied; use duplicate() for an explicit, ledger-recorded copy"
        )

    def __deepcopy__(self, memo: Any) -> NoReturn:
        raise OwnershipError(
            f"copy.deepcopy: {type(self).__name__} is a unique owner/capability and cannot be "
            "copied; use duplicate() for an explicit, ledger-recorded copy"
        )

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        raise OwnershipError(
            f"pickle: {type(self).__name__} is a unique owner/capability and cannot be "
            "pickled; export its values with to_numpy() (a recorded TRANSFER copy)"
        )


class Lender(NoCopy):
    """A move-only object with a borrow cell.

    ``_shared`` counts live shared borrows; ``_exclusive`` names the live exclusive
    borrower (or is ``None``); ``_site`` remembers who took the last borrow and
    where, for error messages.  ``_moved_by`` names the consuming operation once
    the object has been emptied.
    """

    __slots__ = ("_exclusive", "_moved_by", "_named", "_shared", "_site", "_who")

    _exclusive: str | None
    _moved_by: str | None
    _named: dict[str, int] | None
    _shared: int
    _site: tuple[Any, int] | None
    _who: str

    def _init_lender(self) -> None:
        self._moved_by = None
        self._shared = 0
        self._exclusive = None
        self._named = None  # (set: reading an unset slot of a Tensor runs its __getattr__)
        # _site and _who are set by every borrow and read only while one is live.

    # -- state checks -------------------------------------------------------------
    def _describe(self) -> str:
        return type(self).__name__

    def _live(self, operation: str) -> None:
        if self._moved_by is not None:
            raise UseAfterMoveError(
                f"{operation}: this {self._describe()} was consumed by {self._moved_by}; "
                "it holds nothing any more"
            )

    def _blocker(self) -> str:
        if self._exclusive is not None:
            return f"an exclusive borrow is live ({self._who} created at {format_site(self._site)})"
        n = self._shared
        plural = "borrow is" if n == 1 else "borrows are"
        site = format_site(self._site)
        named: dict[str, int] | None = getattr(self, "_named", None)
        holders = [h for h, k in named.items() if k > 0] if named else []
        held = f", held by {'; '.join(holders)}" if holders else ""
        return f"{n} shared {plural} live{held} (latest: {self._who} created at {site})"

    def _name_holder(self, holder: str) -> None:
        """Remember a named party holding one shared borrow (until ``_unname_holder``)."""
        named: dict[str, int] | None = getattr(self, "_named", None)
        if named is None:
            named = {}
            self._named = named
        named[holder] = named.get(holder, 0) + 1

    def _lend_named(self, holder: str) -> None:
        """Take one shared borrow for the named party ``holder`` (a conflicting borrow's
        error names it until ``_unlend_named``); no call-site capture. O(1)."""
        self._shared += 1
        self._who = holder
        self._site = None
        self._name_holder(holder)

    def _unlend_named(self, holder: str) -> None:
        """Give back a shared borrow taken by :meth:`_lend_named`. O(1)."""
        self._shared -= 1
        self._unname_holder(holder)

    def _unname_holder(self, holder: str) -> None:
        named: dict[str, int] | None = getattr(self, "_named", None)
        if named is not None:
            k = named.get(holder, 0) - 1
            if k > 0:
                named[holder] = k
            else:
                named.pop(holder, None)

    def _readable(self, operation: str) -> None:
        """Shared access to metadata or values: refused only while exclusively borrowed."""
        if self._moved_by is not None:
            self._live(operation)
        if self._exclusive is not None:
            raise BorrowError(
                f"{operation}: requested shared access to a {self._describe()}, but "
                f"{self._blocker()}; release it (leave its `with` block or drop it) first"
            )

    # -- borrowing ----------------------------------------------------------------
    def _borrow_shared(self, operation: str, who: str) -> None:
        self._readable(operation)
        self._shared += 1
        self._who = who
        self._site = call_site()

    def _borrow_exclusive(self, operation: str, who: str) -> None:
        if self._moved_by is not None:
            self._live(operation)
        if self._exclusive is not None or self._shared:
            raise BorrowError(
                f"{operation}: requested an exclusive borrow of a {self._describe()}, but "
                f"{self._blocker()}; release it (leave its `with` block or drop it) first"
            )
        self._exclusive = who
        self._who = who
        self._site = call_site()

    def _end_shared(self) -> None:
        self._shared -= 1

    def _end_exclusive(self) -> None:
        self._exclusive = None

    def _consume(self, operation: str) -> None:
        """Mark this object consumed by ``operation``; refuse while anything borrows it."""
        if self._moved_by is not None:
            self._live(operation)
        if self._exclusive is not None or self._shared:
            raise BorrowError(
                f"{operation}: cannot consume a {self._describe()} while {self._blocker()}; "
                "nothing was changed"
            )
        self._moved_by = operation

    def _unconsume(self) -> None:
        """Undo ``_consume`` when the consuming operation failed and hands the object back."""
        self._moved_by = None


class Borrow(NoCopy):
    """A borrower: holds a shared or exclusive borrow of ``_lender`` until released.

    Concrete subclasses declare the slots ``_lender``, ``_exclusive_borrow`` and
    ``_ended`` (kept out of this base so a class can be both lender and borrower).
    ``_ended`` names what ended the borrow: ``"release"`` (later use raises
    ``ExpiredBorrowError``) or a consuming operation (``UseAfterMoveError``).
    """

    __slots__ = ()

    _lender: Lender | None
    _exclusive_borrow: bool
    _ended: str | None
    _holder: str | None  # declared by borrowers that can be named (TensorView)

    def _dead(self, operation: str) -> NoReturn:
        ended = self._ended
        if ended is not None and ended != "release":
            raise UseAfterMoveError(
                f"{operation}: this {type(self).__name__} was consumed by {ended}; use the "
                "object it returned instead"
            )
        raise ExpiredBorrowError(
            f"{operation}: this {type(self).__name__} was released; its borrow has ended. "
            "Take a new view from the owner"
        )

    def _transfer(self, operation: str) -> Lender:
        """End this object's use and hand its borrow to a successor (a consuming call)."""
        lender = self._lender
        if lender is None:
            self._dead(operation)
        self._lender = None  # type: ignore[misc]  # subclass slots
        self._ended = operation  # type: ignore[misc]  # subclass slots
        return lender

    def _restore(self, lender: Lender) -> None:
        """Undo ``_transfer`` when the consuming call failed (the object is handed back)."""
        self._lender = lender  # type: ignore[misc]  # subclass slots
        self._ended = None  # type: ignore[misc]  # subclass slots

    def release(self) -> None:
        """End the borrow now (idempotent). O(1).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        lender = self._lender
        if lender is not None:
            self._lender = None  # type: ignore[misc]  # subclass slots
            self._ended = "release"  # type: ignore[misc]  # subclass slots
            if self._exclusive_borrow:
                lender._end_exclusive()
            else:
                holder = getattr(self, "_holder", None)
                if holder is None:
                    lender._end_shared()
                else:  # a named holder (kernel.name_borrow) lets go
                    self._holder = None  # type: ignore[misc]  # the slot is on TensorView
                    lender._unlend_named(holder)

    def __del__(self) -> None:
        if getattr(self, "_lender", None) is not None:
            self.release()


def name_borrow(view: Any, holder: str) -> None:
    """Name the party that holds ``view``'s shared borrow (shown by ``BorrowError``
    when someone asks for a conflicting borrow while it lives). O(1).  Published as
    ``tenferro_storage.kernel.name_borrow``.

    Cost: no allocation; no copy; no sync; no dispatch; O(1).
    Raises: nothing."""
    lender = view._lender
    if lender is not None:
        lender._who = holder
        lender._name_holder(holder)
        view._holder = holder  # ended with the view (Borrow.release)
