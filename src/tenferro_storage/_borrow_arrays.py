"""Read several owners as numpy arrays inside one borrow scope, without copying.

``with borrow_arrays(tree) as arrays:`` takes one shared borrow per owner or view in
``tree`` (an owner or view, or a tuple/list/dict of them, nested freely: the structure
``tenferro_ad.grad`` returns), runs the provider's access-time work for each (what
``prepare_host`` runs: map, synchronize), and yields the same structure of read-only numpy
arrays over the values (each value's own cached read-only array).  The borrows are held
until the block ends, so mutating or consuming one of the owners meanwhile raises
``BorrowError`` naming ``borrow_arrays``.  No copy and no ledger event (logging gradients every step
costs no ``TRANSFER``).  In borrow debug mode the arrays are staged and poisoned at the
end of the block like every prepared access's.
"""

from __future__ import annotations

from typing import Any, Generic, NoReturn, TypeVar, overload

import numpy as np

from ._access import PreparedContiguousRead, PreparedStridedRead, _debug_borrows
from ._linear import NoCopy
from ._tensor import Tensor, TensorView, TensorViewMut, _map_host
from .kernel import borrow_named, read_array

T = TypeVar("T")
K = TypeVar("K")

_OP = "borrow_arrays"
_Leaf = Tensor[Any, Any] | TensorView[Any, Any] | TensorViewMut[Any, Any]
# what holds one leaf's borrow: its named view (normal mode) or a prepared access (debug)
_Held = TensorView[Any, Any] | PreparedContiguousRead[Any, Any] | PreparedStridedRead[Any, Any]
_LEAVES: frozenset[type] = frozenset((Tensor, TensorView, TensorViewMut))


class BorrowedArrays(NoCopy, Generic[T]):
    """The context manager :func:`borrow_arrays` returns.  Move-only (no copy, no pickle).

    Entering takes the borrows and returns the arrays; leaving releases every borrow
    (in debug mode the arrays are poisoned then).  It can be entered again after it was
    left, never while it is entered.
    """

    __slots__ = ("_accesses", "_tree")

    _tree: Any
    _accesses: list[_Held] | None

    def __init__(self, tree: Any) -> None:
        self._tree = tree
        self._accesses = None

    def __enter__(self) -> T:
        if self._accesses is not None:
            raise RuntimeError(f"{_OP}: this scope is already entered; leave it first")
        accesses: list[_Held] = []
        try:
            arrays = _map(self._tree, accesses, "tree")
        except BaseException:
            _unname(accesses)
            for p in reversed(accesses):  # nothing stays borrowed after a refusal
                p.release()
            raise
        self._accesses = accesses
        return arrays  # type: ignore[no-any-return]

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Release every borrow of this scope now (idempotent). O(number of leaves)."""
        accesses, self._accesses = self._accesses, None
        if accesses:
            _unname(accesses)
            for p in reversed(accesses):
                p.release()

    def __del__(self) -> None:
        if getattr(self, "_accesses", None):
            self.release()

    def __repr__(self) -> str:
        state = "entered" if self._accesses is not None else "not entered"
        return f"BorrowedArrays({state})"


def _refuse(path: Any, leaf: object) -> NoReturn:
    raise TypeError(
        f"{_OP}: {_spelled(path)} is a {type(leaf).__name__}; expected a Tensor, TensorView "
        "or TensorViewMut (or None), or a tuple/list/dict of them. Nothing was borrowed"
    )


def _spelled(path: Any) -> str:
    """``tree[1]['a']`` from the key chain ``(("tree", 1), 'a')`` (built only on refusal)."""
    if type(path) is str:
        return path
    parent, key = path
    return f"{_spelled(parent)}[{key!r}]"


def _leaf(leaf: _Leaf, accesses: list[_Held]) -> np.ndarray[Any, Any]:
    """One leaf: a shared borrow named ``borrow_arrays`` (no call-site capture: a conflicting
    borrow's error names the holder) and the provider's access-time work (map/synchronize,
    as ``prepare_host`` does; a failure raises its ``AccessError``).  The array is the
    view's cached read-only array; the view itself holds the borrow until the scope ends.
    In debug mode the view is consumed into a prepared access instead, which stages the
    array and poisons it at the end.  O(1)."""
    view = borrow_named(leaf, _OP)
    try:
        if _debug_borrows():
            p = view.prepare_host()
            accesses.append(p)
            return p.as_array()
        _map_host(view, "prepare_host", "reading")
        arr = read_array(view)
    except BaseException:
        view.release()
        raise
    accesses.append(view)
    return arr


def _unname(accesses: list[_Held]) -> None:
    """Take the holder name ``borrow_arrays`` off the lenders of the prepared accesses
    (debug mode: the access that ends the borrow does not carry the name a view carries),
    so a later conflict's error does not name a scope that has ended.  Before the
    accesses are released. O(number of leaves)."""
    for p in accesses:
        if type(p) is not TensorView:
            lender = p._lender
            if lender is not None:
                lender._unname_holder(_OP)


def _map(tree: Any, accesses: list[_Held], path: Any) -> Any:
    """The tree's structure with an array per leaf.  The leaves of a list or tuple (a
    ``grad`` result) are borrowed in the same loop; ``path`` is a key chain spelled out
    only when a leaf is refused."""
    if type(tree) in _LEAVES or isinstance(tree, Tensor | TensorView | TensorViewMut):
        return _leaf(tree, accesses)
    if tree is None:
        return None
    if isinstance(tree, dict):
        return {k: _map(v, accesses, (path, k)) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        items = [
            _leaf(v, accesses) if type(v) in _LEAVES else _map(v, accesses, (path, i))
            for i, v in enumerate(tree)
        ]
        if isinstance(tree, list):
            return items
        if hasattr(tree, "_fields"):  # a namedtuple keeps its type
            return type(tree)(*items)
        return tuple(items)
    _refuse(path, tree)


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
    or a tuple/list/dict (namedtuples too) of those, nested freely; the block gets the
    same structure with a read-only numpy array per owner/view (``None`` stays ``None``).

    On entry each leaf gets a shared borrow named ``borrow_arrays`` (a mutable view is
    reborrowed: writes through it wait), held until the block ends: meanwhile
    ``as_view_mut()``, ``fill``, consuming calls etc. on those owners raise
    ``BorrowError`` naming ``borrow_arrays`` and where the block began.  Entry refuses
    (``BorrowError``/``UseAfterMoveError``/``ExpiredBorrowError`` for a mutably borrowed,
    consumed or released leaf, ``TypeError`` for anything else) and then holds nothing.

    Cost: O(number of leaves); no copy, no allocation, no ledger event (borrow debug mode
    stages each array like any prepared access, and poisons it when the block ends).
    The arrays must not be used after the block.
    """
    return BorrowedArrays(tree)
