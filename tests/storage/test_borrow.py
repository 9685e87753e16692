"""The borrow-misuse matrix (``_linear.py`` borrow cells, as used by owners, views and storage).

Every conflicting pair of shared / exclusive / consume / release on each lender (owner
``Tensor``, mutable view ``TensorViewMut``, ``OwnedStorage``) raises the named error,
naming both parties, and leaves every object usable as before.  Borrowers used after
release raise ``ExpiredBorrowError``; objects used after a consuming call raise
``UseAfterMoveError`` naming the consumer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import _access
from tenferro_storage.errors import BorrowError, ExpiredBorrowError, UseAfterMoveError

pytestmark = pytest.mark.both_borrow_modes  # debug mode and the default mode


def test_a_marked_module_runs_each_test_once_in_debug_mode_and_once_in_the_default_mode(
    borrow_mode: str, request: pytest.FixtureRequest
) -> None:
    """The marker's promise, checked where it is used: this test (as every test of a
    marked module) is collected twice, and each run prepares accesses in its own mode --
    the default one with borrow debug mode off, as users get it."""
    assert _access._debug_borrows() is (borrow_mode == "debug")
    runs = [i for i in request.session.items if i.name.startswith(request.node.originalname)]
    modes = sorted(i.callspec.params["borrow_mode"] for i in runs)  # type: ignore[attr-defined]
    assert modes == ["debug", "default"]


@attrs.define
class Lending:
    """One lender and how to ask it for each kind of access."""

    lender: Any
    shared: Callable[[], Any]
    exclusive: Callable[[], Any]
    consume: Callable[[], Any]
    release: Callable[[], Any] | None  # only borrowers that also lend can be released
    probe: Callable[[], Any]  # a read that proves the lender still holds its values
    keep: list[Any] = attrs.field(factory=list)  # parents that must outlive the lender


def owner() -> Lending:
    t = ts.arange(6).reshape(2, 3).duplicate()
    return Lending(
        t, t.as_view, t.as_view_mut, t.into_storage, None, lambda: t.to_numpy().tolist()
    )


def view_mut() -> Lending:
    t = ts.arange(6).reshape(2, 3).duplicate()
    m = t.as_view_mut()
    return Lending(
        m, m.as_view, lambda: m[0:1], m.prepare_host_mut, m.release,
        lambda: m.to_numpy().tolist(), [t],
    )


def storage() -> Lending:
    s = ts.allocate_storage(48)
    return Lending(s, s.as_ref, s.as_mut, s.into_claim, None, lambda: s.byte_range)


LENDERS = {"owner": owner, "view_mut": view_mut, "storage": storage}
HELD = ("shared", "exclusive")
REQUESTS = ("shared", "exclusive", "consume", "release")

# The message fragment naming the *requested* access, per request kind.
REQUESTED = {
    "shared": "requested",
    "exclusive": "requested an exclusive borrow",
    "consume": "(consume|requested write access)",
    "release": "cannot end this exclusive borrow",
}
BLOCKER = {"shared": "shared", "exclusive": "an exclusive borrow is live"}


def _conflicts(held: str, request: str) -> bool:
    return not (held == "shared" and request == "shared")


MATRIX = [
    (name, held, request)
    for name in LENDERS
    for held in HELD
    for request in REQUESTS
    if _conflicts(held, request) and (request != "release" or name == "view_mut")
]


@pytest.mark.parametrize(("lender", "held", "requested"), MATRIX)
def test_conflicting_request_raises_borrow_error_and_changes_nothing(
    lender: str, held: str, requested: str
) -> None:
    """A request conflicting with a live borrow raises BorrowError naming both; nothing changes."""
    case = LENDERS[lender]()
    before = case.probe()
    holder = getattr(case, held)()
    op = getattr(case, requested)
    with pytest.raises(BorrowError) as info:
        op()
    err = info.value
    assert type(err) is BorrowError
    message = str(err)
    assert re.search(REQUESTED[requested], message)
    assert BLOCKER[held] in message
    assert type(holder).__name__ in message, "the blocking borrower must be named"
    assert "test_borrow.py" in message, "the blocking borrow's creation site must be named"
    # The holder is still live and usable, the lender unchanged.
    assert holder._lender is not None
    repr(holder)
    holder.release()
    assert case.probe() == before
    # With the conflict gone the same request succeeds.
    result = op()
    if hasattr(result, "release"):
        result.release()
    del holder, result, case


@pytest.mark.parametrize("lender", list(LENDERS))
def test_shared_borrows_coexist(lender: str) -> None:
    """Any number of shared borrows may be live together; the lender stays readable."""
    case = LENDERS[lender]()
    a, b, c = case.shared(), case.shared(), case.shared()
    assert case.probe() == case.probe()
    for x in (a, b, c):
        x.release()
    case.exclusive().release()


@pytest.mark.parametrize("lender", list(LENDERS))
def test_borrow_ends_when_the_borrower_dies(lender: str) -> None:
    """Dropping the last reference to a borrower ends its borrow (CPython refcounting)."""
    case = LENDERS[lender]()
    x = case.exclusive()
    del x
    y = case.shared()
    del y
    case.exclusive().release()


@pytest.mark.parametrize("lender", list(LENDERS))
def test_with_block_scopes_the_borrow(lender: str) -> None:
    """Leaving the ``with`` block ends the borrow even when the block raises."""
    case = LENDERS[lender]()
    with pytest.raises(KeyError), case.exclusive():
        raise KeyError("inside")
    with case.shared():
        pass
    case.exclusive().release()


# -- borrowers after release ---------------------------------------------------------------

def _released_borrowers() -> dict[str, Callable[[], tuple[Any, list[Callable[[Any], Any]]]]]:
    def view() -> tuple[Any, list[Callable[[Any], Any]]]:
        t = ts.zeros((2, 3))
        v = t.as_view()
        v.release()
        return (v, t), [
            lambda v: v.shape, lambda v: v.to_numpy(), lambda v: v[0], lambda v: v.T,
            lambda v: v.as_view(), lambda v: v.prepare_host(), lambda v: v.duplicate(),
            lambda v: v.span,
        ]

    def mut() -> tuple[Any, list[Callable[[Any], Any]]]:
        t = ts.zeros((2, 3))
        m = t.as_view_mut()
        m.release()
        return (m, t), [
            lambda m: m.shape, lambda m: m.fill(1.0), lambda m: m[0], lambda m: m.as_view(),
            lambda m: m.prepare_host_mut(), lambda m: m.to_numpy(),
        ]

    def prepared() -> tuple[Any, list[Callable[[Any], Any]]]:
        t = ts.zeros((2, 3))
        p = t.as_view().prepare_host()
        p.release()
        return (p, t), [lambda p: p.as_slice(), lambda p: p.as_array(), lambda p: p.shape]

    def prepared_mut() -> tuple[Any, list[Callable[[Any], Any]]]:
        t = ts.zeros((2, 3))
        p = t.as_view_mut().T.prepare_host_mut()
        p.release()
        return (p, t), [lambda p: p.as_array(), lambda p: p.plan, lambda p: list(p.iter_strided())]

    def storage_ref() -> tuple[Any, list[Callable[[Any], Any]]]:
        s = ts.allocate_storage(16)
        r = s.as_mut()
        r.release()
        return (r, s), [lambda r: r.byte_range, lambda r: r.span]

    return {"view": view, "view_mut": mut, "prepared": prepared, "prepared_mut": prepared_mut,
            "storage_mut": storage_ref}


@pytest.mark.parametrize("kind", list(_released_borrowers()))
def test_released_borrower_raises_expired_borrow_error(kind: str) -> None:
    """Every method of a released view, guard or prepared access raises ExpiredBorrowError."""
    (obj, parent), uses = _released_borrowers()[kind]()
    for use in uses:
        with pytest.raises(ExpiredBorrowError, match="released"):
            use(obj)
    obj.release()  # idempotent
    del obj, parent


def test_release_is_idempotent_and_frees_the_lender_once() -> None:
    """Releasing twice ends one borrow once: the shared count never goes negative."""
    t = ts.zeros(3)
    v, w = t.as_view(), t.as_view()
    v.release()
    v.release()
    with pytest.raises(BorrowError):
        t.as_view_mut()  # w is still live
    w.release()
    t.as_view_mut().release()


# -- use after move --------------------------------------------------------------------------


def test_consumed_owner_raises_use_after_move_naming_the_consumer() -> None:
    """After into_storage every use of the tensor raises UseAfterMoveError naming it."""
    t = ts.ones((2, 2))
    storage = t.into_storage()
    for use in (lambda: t.shape, lambda: t.as_view(), lambda: t.as_view_mut(),
                lambda: t.to_numpy(), lambda: t.into_storage(), lambda: t.fill(0.0),
                lambda: t[0]):
        with pytest.raises(UseAfterMoveError, match=r"consumed by Tensor\.into_storage"):
            use()
    assert "consumed by Tensor.into_storage" in repr(t)
    assert storage.nbytes == 32


def test_prepared_view_cannot_be_used_again() -> None:
    """prepare_host() consumes the view: later use raises UseAfterMoveError naming it."""
    t = ts.zeros(4)
    v = t.as_view()
    p = v.prepare_host()
    with pytest.raises(UseAfterMoveError, match="prepare_host"):
        v.shape  # noqa: B018
    with pytest.raises(UseAfterMoveError, match="prepare_host"):
        v.prepare_host()
    # The borrow moved into the prepared access: the owner is still shared-borrowed.
    with pytest.raises(BorrowError):
        t.as_view_mut()
    p.release()
    v.release()  # a consumed borrower's release is a no-op
    t.as_view_mut().release()


def test_prepared_mut_view_cannot_be_used_again() -> None:
    """prepare_host_mut() consumes the mutable view; the exclusive borrow moves along."""
    t = ts.zeros(4)
    m = t.as_view_mut()
    p = m.prepare_host_mut()
    with pytest.raises(UseAfterMoveError, match="prepare_host_mut"):
        m.fill(1.0)
    with pytest.raises(BorrowError, match="exclusive"):
        t.as_view()
    with p:
        p.as_array()[...] = 7.0
    assert t.to_numpy().tolist() == [7.0] * 4


def test_consumed_storage_and_claims_name_their_consumer() -> None:
    """split/narrow/into_claim empty the storage; later use names the consuming call."""
    s = ts.allocate_storage(32)
    a, b = s.split(16)
    with pytest.raises(UseAfterMoveError, match=r"consumed by OwnedStorage\.split"):
        s.as_ref()  # the method the user called on the storage, not its claim's
    c = a.narrow(0, 8)
    with pytest.raises(UseAfterMoveError, match=r"consumed by OwnedStorage\.narrow"):
        a.split(0)
    claim = b.into_claim()
    with pytest.raises(UseAfterMoveError, match=r"OwnedStorage\.into_claim"):
        b.root  # noqa: B018
    assert (c.byte_range, claim.byte_range) == (range(0, 8), range(16, 32))


# -- reborrows of a mutable view -------------------------------------------------------------


def test_mutable_view_waits_for_its_shared_reborrow() -> None:
    """While view_mut.as_view() lives, writes through the mutable view are refused."""
    t = ts.zeros(3)
    m = t.as_view_mut()
    v = m.as_view()
    with pytest.raises(BorrowError, match="fill"):
        m.fill(1.0)
    with pytest.raises(BorrowError, match="prepare_host_mut"):
        m.prepare_host_mut()
    assert v.to_numpy().tolist() == [0.0] * 3
    v.release()
    m.fill(2.0)
    m.release()
    assert t.to_numpy().tolist() == [2.0] * 3


def test_mutable_slice_reborrows_exclusively_until_it_dies() -> None:
    """Slicing a mutable view blocks the parent until the child is gone; writes land."""
    t = ts.zeros((2, 3))
    m = t.as_view_mut()
    row = m[1]
    with pytest.raises(BorrowError, match="TensorViewMut"):
        m.as_view()
    with pytest.raises(BorrowError):
        m[0]
    row.fill(5.0)
    del row
    m[0, ::2].fill(1.0)
    m.release()
    np.testing.assert_array_equal(t.to_numpy(), [[1, 0, 1], [5, 5, 5]])


def test_releasing_a_mutable_view_with_a_live_reborrow_is_refused() -> None:
    """Ending the parent borrow early would let the owner lend while the child writes."""
    t = ts.zeros(4)
    m = t.as_view_mut()
    child = m[0:2]
    with pytest.raises(BorrowError, match="reborrow"):
        m.release()
    with pytest.raises(BorrowError):
        t.as_view()  # the owner is still exclusively borrowed
    child.fill(3.0)
    child.release()
    m.release()
    assert t.to_numpy().tolist() == [3.0, 3.0, 0.0, 0.0]


def test_shared_views_derive_without_consuming() -> None:
    """Slicing or transposing a shared view leaves it usable; each child holds its own borrow."""
    t = ts.arange(6).reshape(2, 3).duplicate()
    v = t.as_view()
    child = v[1:, ::-1].T
    v.release()
    with pytest.raises(BorrowError, match="shared"):
        t.as_view_mut()
    assert child.to_numpy().tolist() == [[5], [4], [3]]
    del child
    t.as_view_mut().release()


def test_owner_metadata_is_refused_while_mutably_borrowed() -> None:
    """Reading an owner while a mutable view is live raises BorrowError naming the view."""
    t = ts.zeros(2)
    m = t.as_view_mut()
    with pytest.raises(BorrowError, match="TensorViewMut created at"):
        t.shape  # noqa: B018
    m.release()
    assert t.shape == (2,)


def test_mutable_view_metadata_is_refused_while_an_exclusive_child_lives() -> None:
    """Like the owner: a TensorViewMut with a live mutable child refuses every read (metadata
    too) with BorrowError naming both borrows; a shared reborrow still allows metadata."""
    t = ts.arange(6).reshape(2, 3).duplicate()
    m = t.as_view_mut()
    child = m[1]
    reads: dict[str, Callable[[], object]] = {
        "shape": lambda: m.shape,
        "strides": lambda: m.strides,
        "offset": lambda: m.offset,
        "dtype": lambda: m.dtype,
        "ndim": lambda: m.ndim,
        "size": lambda: m.size,
        "nbytes": lambda: m.nbytes,
        "layout": lambda: m.layout,
        "span": lambda: m.span,
        "to_numpy": lambda: m.to_numpy(),
        "item": lambda: m.item(),
    }
    for name, read in reads.items():
        with pytest.raises(BorrowError) as info:
            read()
        message = str(info.value)
        assert type(info.value) is BorrowError, name
        assert "shared access to a TensorViewMut" in message, (name, message)
        assert "exclusive borrow is live (TensorViewMut created at" in message, (name, message)
        assert "test_borrow.py" in message, (name, message)
    del info
    assert child.shape == (3,)  # the child itself reads and writes normally
    child.fill(7)
    del child
    assert m.shape == (2, 3) and m.strides == (3, 1)  # the parent is readable again
    with m.as_view() as v:  # a shared reborrow leaves metadata (and values) readable
        assert (m.shape, m.dtype.name, m.size) == ((2, 3), "int64", 6)
        assert m.to_numpy().tolist() == v.to_numpy().tolist() == [[0, 1, 2], [7, 7, 7]]
    m.release()
