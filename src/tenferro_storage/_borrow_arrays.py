"""Read several owners as numpy arrays inside one borrow scope, without copying.

``with borrow_arrays(tree) as arrays:`` takes one shared borrow per owner or view in
``tree`` (an owner or view, or a pytree of them: tuples, lists, dicts, namedtuples,
registered nodes and dataclasses nested freely, ``None`` holding nothing; the structure
``tenferro_ad.grad`` returns, walked by the one pytree module ``._pytree``), runs the
provider's access-time work for each (what ``prepare_host`` runs: map, synchronize), and
yields the same structure of read-only numpy arrays over the values (each value's own
cached read-only array).  The borrows are held until the block ends, so mutating or
consuming one of the owners meanwhile raises ``BorrowError`` naming ``borrow_arrays``.
No copy and no ledger event (logging gradients every step costs no ``TRANSFER``).  In
borrow debug mode the arrays are staged and poisoned at the end of the block like every
prepared access's.
"""

from __future__ import annotations

from typing import Any, Generic, NoReturn, TypeVar, overload

import numpy as np

from ._access import PreparedContiguousRead, PreparedStridedRead, _debug_borrows
from ._linear import Lender, NoCopy
from ._pytree import keystr, tree_flatten, tree_flatten_with_path, tree_unflatten
from ._tensor import Tensor, TensorView, TensorViewMut
from .errors import AccessError
from .kernel import borrow_named

T = TypeVar("T")
K = TypeVar("K")

_OP = "borrow_arrays"
_Leaf = Tensor[Any, Any] | TensorView[Any, Any] | TensorViewMut[Any, Any]
# what holds one leaf's borrow: its lender itself (normal mode: the scope gives the shared
# borrow back) or a prepared access (debug mode)
_Held = Lender | PreparedContiguousRead[Any, Any] | PreparedStridedRead[Any, Any]
_LEAVES: frozenset[type] = frozenset((Tensor, TensorView, TensorViewMut))


class BorrowedArrays(NoCopy, Generic[T]):
    """The context manager :func:`borrow_arrays` returns.  Move-only (no copy, no pickle).

    Entering takes the borrows and returns the arrays; leaving releases every borrow
    (in debug mode the arrays are poisoned then).  It can be entered again after it was
    left, never while it is entered.
    """

    __slots__ = ("_accesses", "_staged", "_tree")

    _tree: Any
    _accesses: list[_Held] | None
    _staged: bool  # the mode the scope was entered in (debug mode: prepared accesses)

    def __init__(self, tree: Any) -> None:
        self._tree = tree
        self._accesses = None
        self._staged = False

    def __enter__(self) -> T:
        if self._accesses is not None:
            raise RuntimeError(f"{_OP}: this scope is already entered; leave it first")
        held: list[_Held] = []
        staged = _debug_borrows()
        leaf_fn = _staged_leaf if staged else _leaf
        try:
            leaves, treedef = tree_flatten(self._tree)
            arrays: list[np.ndarray[Any, Any]] = []
            for x in leaves:
                if type(x) in _LEAVES or isinstance(x, Tensor | TensorView | TensorViewMut):
                    arrays.append(leaf_fn(x, held))
                else:
                    _refuse(self._tree, len(arrays), x)
            out = tree_unflatten(treedef, arrays)
        except BaseException:
            _give_back(held, staged)  # nothing stays borrowed after a refusal
            raise
        self._accesses = held
        self._staged = staged
        return out  # type: ignore[no-any-return]

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Release every borrow of this scope now (idempotent). O(number of leaves)."""
        held, self._accesses = self._accesses, None
        if held:
            _give_back(held, self._staged)

    def __del__(self) -> None:
        if getattr(self, "_accesses", None):
            self.release()

    def __repr__(self) -> str:
        state = "entered" if self._accesses is not None else "not entered"
        return f"BorrowedArrays({state})"


def _refuse(tree: Any, index: int, leaf: object) -> NoReturn:
    """Refuse leaf number ``index`` of ``tree``, naming its key path (``tree[1]['a']``;
    found again only now, on the error path)."""
    path = keystr(tree_flatten_with_path(tree)[0][index][0])
    raise TypeError(
        f"{_OP}: tree{path} is a {type(leaf).__name__}; expected a Tensor, TensorView "
        "or TensorViewMut (or None), or a pytree of them (tuples, lists, dicts, "
        "namedtuples, registered nodes and dataclasses). Nothing was borrowed"
    )


def _leaf(leaf: _Leaf, held: list[_Held]) -> np.ndarray[Any, Any]:
    """One leaf in normal mode: a shared borrow of its lender named ``borrow_arrays`` (no
    call-site capture: a conflicting borrow's error names the holder), held by the scope
    itself (the lender goes into ``held``; no view object), then the provider's
    access-time work (map/synchronize, as ``prepare_host`` does).  Returns the value's
    cached read-only array.  The same checks, refusals, counters and holder names as
    ``kernel.borrow_named`` followed by ``prepare_host``'s map; a provider failure raises
    the same ``AccessError`` (naming ``prepare_host``, carrying the released view), and
    any refusal leaves this leaf unborrowed. O(1)."""
    t = type(leaf)
    o: Any = leaf  # (narrowed by the exact type tests below)
    if t is Tensor:  # the common leaf (a gradient or parameter owner): checks inlined
        if o._moved_by is not None or o._exclusive is not None:
            o._readable("borrow")  # raises: consumed or exclusively borrowed
        d = o._desc
        lender: Any = o
    elif t is TensorView:
        lender = o._lender
        if lender is None:
            o._dead("borrow")
        d = o._desc
    elif isinstance(leaf, Tensor):
        d = leaf._meta("borrow")
        lender = leaf
    elif isinstance(leaf, TensorViewMut):  # a shared reborrow of the mutable view
        d = leaf._d("borrow")
        leaf._readable("borrow")
        lender = leaf
    else:
        d = leaf._d("borrow")
        lender = leaf._lender
    storage: Any = leaf._storage
    if t is Tensor:  # the shared borrow, named: Lender._lend_named inlined for an owner
        o._shared += 1
        o._who = _OP
        o._site = None
        named = o._named
        if named is None:
            o._named = {_OP: 1}
        else:
            named[_OP] = named.get(_OP, 0) + 1
    else:
        lender._lend_named(_OP)  # (as kernel.borrow_named takes it)
    held.append(lender)
    try:
        # a live owner's storage is live: its root directly (a view's through the checks)
        root = storage._root if t is Tensor else storage.claim.root
        root.provider.map_host()
    except Exception as exc:
        held.pop()  # the borrow moves to the view the error carries, released there
        raise _map_failed(lender, storage, d, exc) from exc
    try:
        ro: np.ndarray[Any, Any] | None = d._readonly
        return d.readonly() if ro is None else ro
    except BaseException:  # (a host array refused): this leaf stays unborrowed
        held.pop()
        lender._unlend_named(_OP)
        raise


def _map_failed(lender: Any, storage: Any, d: Any, exc: Exception) -> AccessError:
    """The provider's refusal, exactly as ``prepare_host`` reports it: an ``AccessError``
    naming ``prepare_host`` and the span, carrying the leaf's named view (released, as
    the general path leaves it).  Takes over the leaf's borrow and ends it. O(1)."""
    view: TensorView[Any, Any] = TensorView._make(lender, storage, d)
    view._holder = _OP
    view.release()
    return AccessError(
        f"prepare_host: provider could not map {storage.span} for reading: {exc}", view, exc
    )


def _staged_leaf(leaf: _Leaf, held: list[_Held]) -> np.ndarray[Any, Any]:
    """One leaf in borrow debug mode: its named view is consumed into a prepared access,
    which stages the array and poisons it at the end of the scope. O(1) bookkeeping."""
    view = borrow_named(leaf, _OP)
    try:
        p = view.prepare_host()
    except BaseException:
        view.release()
        raise
    held.append(p)
    return p.as_array()


def _give_back(held: list[_Held], staged: bool) -> None:
    """End the scope's borrows, last first, and take the holder name ``borrow_arrays`` off
    their lenders (so a later conflict's error does not name a scope that has ended).
    Normal mode holds the lenders themselves; debug mode prepared accesses (whose release
    does not carry the name a view carries: unnamed first, then released).
    O(number of leaves)."""
    lenders: list[Any] = held
    if not staged:
        for lender in reversed(lenders):
            if type(lender) is Tensor:  # Lender._unlend_named inlined for an owner
                lender._shared -= 1
                named: Any = lender._named  # set: this scope's borrow named it
                k = named.get(_OP, 0) - 1
                if k > 0:
                    named[_OP] = k
                else:
                    named.pop(_OP, None)
            else:
                lender._unlend_named(_OP)
        return
    for p in lenders:  # prepared accesses
        lender = p._lender
        if lender is not None:
            lender._unname_holder(_OP)
    for p in reversed(lenders):
        p.release()


@overload
def borrow_arrays(tree: _Leaf) -> BorrowedArrays[np.ndarray[Any, Any]]: ...
@overload
def borrow_arrays(tree: dict[K, Any]) -> BorrowedArrays[dict[K, Any]]: ...
@overload
def borrow_arrays(tree: list[Any]) -> BorrowedArrays[list[Any]]: ...
@overload
def borrow_arrays(tree: tuple[Any, ...]) -> BorrowedArrays[tuple[Any, ...]]: ...
@overload
def borrow_arrays(tree: None) -> BorrowedArrays[None]: ...
def borrow_arrays(tree: Any) -> BorrowedArrays[Any]:
    """Zero-copy, read-only numpy arrays of several owners/views, for one ``with`` block.

    ``tree`` is an owner or view (``Tensor``, ``TensorView``, ``TensorViewMut``), ``None``,
    or a pytree of those (tuples, lists, dicts, namedtuples, classes registered with
    ``tenferro_ad.tree_util``, nested freely); the block gets the same structure (as
    ``tree_unflatten`` rebuilds it: a dict's keys in sorted order) with a read-only numpy
    array per owner/view (``None`` stays ``None``).

    On entry each leaf gets a shared borrow named ``borrow_arrays`` (a mutable view is
    reborrowed: writes through it wait), held until the block ends: meanwhile
    ``as_view_mut()``, ``fill``, consuming calls etc. on those owners raise
    ``BorrowError`` naming ``borrow_arrays`` and where the block began.  Entry refuses
    (``BorrowError``/``UseAfterMoveError``/``ExpiredBorrowError`` for a mutably borrowed,
    consumed or released leaf, ``TypeError`` for anything else) and then holds nothing.
    The arrays must not be used after the block.

    Cost: no allocation (no storage, no ledger event: read-only arrays over the owners'
    memory; borrow debug mode stages each array like any prepared access, and poisons it
    when the block ends); no copy; no sync; no dispatch; O(leaves): one flatten and one
    unflatten of ``tree``.

    Raises:
        BorrowError: on entry, a leaf is mutably borrowed.
        UseAfterMoveError: on entry, a leaf was consumed.
        ExpiredBorrowError: on entry, a view leaf was released.
        TypeError: on entry, a leaf is not an owner, a view or ``None``.
        AccessError: on entry, a leaf's provider refuses host access (a device-resident
            value: download it first)."""
    return BorrowedArrays(tree)
