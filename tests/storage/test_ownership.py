"""Roots, claims and move-only owners (``_root.py``, ``_linear.NoCopy``).

Owners, claims and capabilities cannot be copied or pickled; claims split and narrow
but never widen; a root is released by its provider exactly once, when the last claim
or record that refers to it is gone; only ``_root.py`` creates roots.
"""

from __future__ import annotations

import ast
import copy
import gc
import pathlib
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage.errors import DTypeError, LayoutError, OwnershipError, UseAfterMoveError

pytestmark = pytest.mark.both_borrow_modes  # debug mode and the default mode

SRC = pathlib.Path(ts.__file__).resolve().parent.parent


def _subjects() -> dict[str, Callable[[], tuple[Any, list[Any]]]]:
    """Each factory returns (subject, keep-alive parents)."""

    def tensor() -> tuple[Any, list[Any]]:
        return ts.zeros(3), []

    def view() -> tuple[Any, list[Any]]:
        t = ts.zeros(3)
        return t.as_view(), [t]

    def view_mut() -> tuple[Any, list[Any]]:
        t = ts.zeros(3)
        return t.as_view_mut(), [t]

    def prepared() -> tuple[Any, list[Any]]:
        t = ts.zeros(3)
        return t.as_view().prepare_host(), [t]

    def prepared_mut() -> tuple[Any, list[Any]]:
        t = ts.zeros(3)
        return t.as_view_mut().prepare_host_mut(), [t]

    def storage() -> tuple[Any, list[Any]]:
        return ts.allocate_storage(8), []

    def claim() -> tuple[Any, list[Any]]:
        return ts.allocate_storage(8).into_claim(), []

    def storage_ref() -> tuple[Any, list[Any]]:
        s = ts.allocate_storage(8)
        return s.as_ref(), [s]

    def storage_mut() -> tuple[Any, list[Any]]:
        s = ts.allocate_storage(8)
        return s.as_mut(), [s]

    def root() -> tuple[Any, list[Any]]:
        s = ts.allocate_storage(8)
        return s.root, [s]

    return {f.__name__: f for f in (tensor, view, view_mut, prepared, prepared_mut, storage,
                                    claim, storage_ref, storage_mut, root)}


SUBJECTS = _subjects()
DUPLICATORS: dict[str, Callable[[Any], Any]] = {
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
    "pickle": pickle.dumps,
    "pickle-protocol-0": lambda x: pickle.dumps(x, protocol=0),
}


@pytest.mark.parametrize("how", list(DUPLICATORS))
@pytest.mark.parametrize("subject", list(SUBJECTS))
def test_owners_claims_and_capabilities_cannot_be_copied_or_pickled(
    subject: str, how: str
) -> None:
    """copy.copy, copy.deepcopy and pickle raise OwnershipError (a TypeError) and change nothing."""
    obj, keep = SUBJECTS[subject]()
    with pytest.raises(OwnershipError) as info:
        DUPLICATORS[how](obj)
    assert isinstance(info.value, TypeError)
    assert type(obj).__name__ in str(info.value)
    assert "duplicate()" in str(info.value) or "to_numpy()" in str(info.value)
    repr(obj)
    del obj, keep


def test_copy_inside_a_container_is_refused_too() -> None:
    """deepcopy of a list holding an owner fails rather than duplicating the owner."""
    t = ts.zeros(2)
    with pytest.raises(OwnershipError):
        copy.deepcopy([t])


@pytest.mark.parametrize("cls", [ts.Tensor, ts.RootResource, ts.OwnedSpanClaim])
def test_owners_roots_and_claims_cannot_be_constructed_directly(cls: type) -> None:
    """Direct construction is refused with a message pointing at the real constructors."""
    before = ledger.live_allocations()
    with pytest.raises(TypeError, match="cannot be constructed directly"):
        cls()
    gc.collect()
    assert ledger.live_allocations() == before and not ledger.double_releases()


# -- claims ------------------------------------------------------------------------------------


@given(st.integers(0, 64), st.data())
def test_split_makes_two_disjoint_claims_covering_the_parent(
    nbytes: int, data: st.DataObject
) -> None:
    """split(at) consumes the claim into [0, at) and [at, n) of the same root."""
    storage = ts.allocate_storage(nbytes)
    root = storage.root
    at = data.draw(st.integers(0, nbytes))
    a, b = storage.split(at)
    assert a.byte_range == range(0, at) and b.byte_range == range(at, nbytes)
    assert a.root is root and b.root is root
    assert isinstance(a, ts.OwnedStorage) and isinstance(b, ts.OwnedStorage)
    with pytest.raises(UseAfterMoveError):
        storage.byte_range  # noqa: B018
    del root


@given(st.integers(0, 32), st.integers(-40, 80))
def test_split_outside_the_claim_is_refused_and_changes_nothing(nbytes: int, at: int) -> None:
    """A split point outside [0, nbytes] raises LayoutError naming the span; the claim stays."""
    storage = ts.allocate_storage(nbytes)
    if 0 <= at <= nbytes:
        storage.split(at)
        return
    with pytest.raises(LayoutError) as info:
        storage.split(at)
    assert info.value.span == storage.span
    assert storage.byte_range == range(0, nbytes)


@given(st.integers(1, 48), st.data())
def test_narrow_never_widens(nbytes: int, data: st.DataObject) -> None:
    """narrow(start, stop) accepts exactly the sub-ranges of the claim (relative bytes)."""
    storage = ts.allocate_storage(nbytes)
    left, claim = storage.split(data.draw(st.integers(0, nbytes)))
    base = claim.byte_range.start
    n = claim.nbytes
    start = data.draw(st.integers(-4, n + 4))
    stop = data.draw(st.integers(-4, n + 4))
    if 0 <= start <= stop <= n:
        narrowed = claim.narrow(start, stop)
        assert narrowed.byte_range == range(base + start, base + stop)
    else:
        with pytest.raises(LayoutError, match="never widen"):
            claim.narrow(start, stop)
        assert claim.byte_range == range(base, base + n)
    del left


@pytest.mark.parametrize("kind", ["claim", "storage"])
@pytest.mark.parametrize("bad", [1.0, True, np.bool_(True), "8", None])
def test_split_and_narrow_check_offsets_alike_and_name_the_method_called(
    kind: str, bad: object
) -> None:
    """Python and numpy integers are byte offsets for both; bool/float/other are refused with
    one error class naming the public method called and the argument; nothing changes."""
    storage = ts.allocate_storage(16)
    owner = storage.into_claim() if kind == "claim" else storage
    name = "OwnedSpanClaim" if kind == "claim" else "OwnedStorage"
    for call, arg in ((lambda: owner.split(bad), "at"),  # type: ignore[arg-type]
                      (lambda: owner.narrow(bad, 8), "start"),  # type: ignore[arg-type]
                      (lambda: owner.narrow(0, bad), "stop")):  # type: ignore[arg-type]
        with pytest.raises(DTypeError, match=rf"{name}\.\w+: argument '{arg}' must be an integer"):
            call()
        assert owner.byte_range == range(0, 16)
    with pytest.raises(LayoutError, match=rf"{name}\.split"):
        owner.split(np.int64(17))
    a, b = owner.split(np.int64(8))
    assert b.narrow(np.int32(2), np.uint8(6)).byte_range == range(10, 14)
    for call in (lambda: owner.split(1), lambda: owner.narrow(0, 1)):
        with pytest.raises(UseAfterMoveError, match=rf"{name}\.(split|narrow): "):
            call()
    del a


def test_into_claim_of_a_consumed_storage_names_into_claim() -> None:
    storage = ts.allocate_storage(8)
    storage.split(4)
    with pytest.raises(UseAfterMoveError, match=r"^OwnedStorage\.into_claim: "):
        storage.into_claim()
    with pytest.raises(UseAfterMoveError, match=r"^OwnedStorage\.root: "):
        storage.root  # noqa: B018


def test_owned_storage_consumes_a_plain_claim() -> None:
    """OwnedStorage(claim) takes the claim over; the claim is then consumed."""
    claim = ts.allocate_storage(16).into_claim()
    owned = ts.OwnedStorage(claim)
    assert owned.byte_range == range(0, 16)
    with pytest.raises(UseAfterMoveError, match="OwnedStorage"):
        claim.split(8)


# -- exactly-once release ------------------------------------------------------------------------


def test_root_is_released_once_when_the_last_claim_goes() -> None:
    """Children of a split keep the root alive; the last one to die releases it exactly once."""
    releases = ts.host_provider.counters.releases
    with ledger.capture() as rec:
        storage = ts.allocate_storage(64)
        a, b = storage.split(32)
        b1, b2 = b.split(8)
        del storage, b, a, b1
        assert rec.live_bytes == 64 and rec.releases == 0
        t = ts.Tensor.from_storage(b2, dtype="float64", shape=(3,))
        v = t[::2]
        del t, b2
        assert rec.releases == 0  # the view's owner chain still holds the root
        del v
    assert rec.releases == 1 and rec.live_bytes == 0
    assert ts.host_provider.counters.releases == releases + 1
    assert not ledger.double_releases()


def test_every_creation_path_releases_its_root_once() -> None:
    """zeros/ones/full/arange/from_numpy/duplicate/allocate_storage roots release once each."""
    with ledger.capture() as rec:
        objs: list[Any] = [
            ts.zeros((2, 2)), ts.ones(3, "int32"), ts.full((1,), 7, "complex64"), ts.arange(5),
            ts.from_numpy([[1.0, 2.0]]), ts.allocate_storage(3), ts.random.default_rng(0).normal(4),
        ]
        objs.append(objs[0].duplicate())
        n = len(objs)
        assert rec.live_bytes > 0
        objs.clear()
    released = [e.allocation for e in rec.events if e.kind is ledger.EventKind.RELEASE]
    allocated = [e.allocation for e in rec.events if e.kind is ledger.EventKind.ALLOCATE]
    assert sorted(released) == sorted(allocated) and len(allocated) == n
    assert rec.live_bytes == 0


def test_consumed_owner_hands_its_root_to_the_storage() -> None:
    """into_storage moves the root to the returned storage; the root lives on with it."""
    with ledger.capture() as rec:
        t = ts.zeros(4)
        storage = t.into_storage()
        del t
        assert rec.releases == 0
        t2 = ts.Tensor.from_storage(storage, dtype="int32", shape=(2, 4))
        assert t2.to_numpy().tolist() == [[0] * 4] * 2
        del t2, storage
    assert rec.releases == 1


def test_as_view_takes_no_reference_to_the_root() -> None:
    """Roots are reached through the borrowed claim: views add no strong root reference."""
    import sys

    t = ts.zeros(8)
    root = t._storage.root
    before = sys.getrefcount(root)
    views = [t.as_view(), t.as_view()[1:], t.T]
    assert sys.getrefcount(root) == before
    views.clear()
    m = t.as_view_mut()
    child = m[::2]
    assert sys.getrefcount(root) == before
    del child, m, root


# -- one module creates roots ----------------------------------------------------------------


def _root_constructions(path: pathlib.Path) -> list[str]:
    """Lines in ``path`` that construct a RootResource or call the root factory."""
    tree = ast.parse(path.read_text(), filename=str(path))
    hits: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else (
            func.attr if isinstance(func, ast.Attribute) else None
        )
        if name in ("RootResource", "_new_root"):
            hits.append(f"{path.name}:{node.lineno}")
        elif name == "__new__" and any(
            isinstance(a, ast.Name) and a.id == "RootResource" for a in node.args
        ):
            hits.append(f"{path.name}:{node.lineno}")
        elif isinstance(func, ast.Attribute) and func.attr == "__new__" and isinstance(
            func.value, ast.Name) and func.value.id == "RootResource":
            hits.append(f"{path.name}:{node.lineno}")
    return hits


def test_only_the_root_module_creates_roots() -> None:
    """A source scan: no module but _root.py constructs a RootResource or calls _new_root."""
    files = sorted(SRC.glob("tenferro_*/**/*.py"))
    assert any(f.name == "_root.py" for f in files)
    offenders = {
        str(f.relative_to(SRC)): hits
        for f in files
        if f.name != "_root.py" and (hits := _root_constructions(f))
    }
    assert offenders == {}, f"roots may only be created in _root.py, found: {offenders}"
    assert _root_constructions(SRC / "tenferro_storage" / "_root.py"), "scan must see _root.py"


def test_root_scan_detects_a_forbidden_construction(tmp_path: pathlib.Path) -> None:
    """The scanner itself flags RootResource construction (so the scan test can fail)."""
    bad = tmp_path / "rogue.py"
    bad.write_text(
        "from tenferro_storage._root import RootResource, _new_root\n"
        "r = RootResource.__new__(RootResource)\n"
        "s = object.__new__(RootResource)\n"
        "t = _new_root(None, None, None, 'x')\n"
    )
    assert _root_constructions(bad) == ["rogue.py:2", "rogue.py:3", "rogue.py:4"]
