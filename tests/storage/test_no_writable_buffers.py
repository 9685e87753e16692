"""Nothing public hands out writable memory outside a prepared write access.

A root's buffer spans every claim of the root, so a writable handle on it would let
one owner (a split sibling, say) write bytes under another owner's live shared view.
These tests walk every public attribute reachable from owners, views, storages,
claims, borrows, groups and prepared accesses, and check every array-returning method:
writable arrays come only from ``PreparedContiguousWrite``/``PreparedStridedWrite``
(under an exclusive borrow) or are fresh copies (``to_numpy``).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import kernel

pytestmark = pytest.mark.both_borrow_modes  # debug mode and the default mode

BUFFER_TYPES = (np.ndarray, memoryview, bytearray)


def _reachable(obj: object, path: str, depth: int, seen: set[int]) -> Iterator[tuple[str, Any]]:
    """Every value reachable from ``obj`` through public non-method attributes."""
    if id(obj) in seen or depth > 5:
        return
    seen.add(id(obj))
    yield path, obj
    if isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield from _reachable(v, f"{path}[{i}]", depth + 1, seen)
        return
    if not (type(obj).__module__ or "").startswith("tenferro_storage"):
        return
    for name in dir(obj):
        if name.startswith("_"):
            continue
        try:
            static = inspect.getattr_static(obj, name)
        except AttributeError:
            continue
        if callable(static) and not isinstance(static, property):
            continue  # methods are checked one by one below
        try:
            value = getattr(obj, name)
        except Exception:  # a refused attribute hands nothing out
            continue
        yield from _reachable(value, f"{path}.{name}", depth + 1, seen)


def _roots_of_the_public_api() -> list[tuple[str, Any]]:
    t = ts.arange(6, dtype="float64").reshape(2, 3).duplicate()
    storage = ts.allocate_storage(64)
    claim_storage = ts.allocate_storage(32)
    left, right = claim_storage.split(16)
    group = ts.AllocationGroup()
    slot = group.insert(ts.zeros((2, 2)))
    alias = group.alias(slot, shape=(2, 2), strides=(1, 2))
    mut_owner = ts.zeros((2, 3))
    w_owner = ts.zeros(4)
    return [
        ("tensor", t),
        ("view", t.as_view()),
        ("strided view", t.T),
        ("read access", t.as_view().prepare_host()),
        ("strided read access", t.T.prepare_host()),
        ("storage", storage),
        ("storage ref", storage.as_ref()),
        ("split left", left),
        ("split right", right),
        ("claim", right.into_claim()),
        ("group", group),
        ("slot", slot),
        ("group view", group.view(alias)),
        ("mutable view", mut_owner.as_view_mut()),
        ("write access", w_owner.prepare_host_mut()),
    ]


def test_no_public_attribute_reaches_a_buffer() -> None:
    """No array, memoryview or bytearray is reachable through public attributes at all."""
    found = []
    seen: set[int] = set()
    for name, obj in _roots_of_the_public_api():
        for path, value in _reachable(obj, name, 0, seen):
            if isinstance(value, BUFFER_TYPES):
                found.append(path)
    assert found == []


def test_the_root_buffer_is_refused_with_a_message() -> None:
    """``claim.root.allocation`` (formerly the whole writable root buffer) is refused."""
    t = ts.zeros(3)
    assert t._storage is not None
    root = t._storage.claim.root
    with pytest.raises(AttributeError, match=r"private.*prepare_host_mut"):
        root.allocation  # noqa: B018
    assert not hasattr(root, "allocation")
    assert root.diagnostics.capacity_bytes == 24  # observation stays available


def test_a_split_sibling_cannot_write_under_a_live_shared_view() -> None:
    """From one half of a split, nothing public writes the other half's bytes."""
    storage = ts.allocate_storage(32)
    a, b = storage.split(16)
    owner = ts.Tensor.from_storage(a, dtype="float64", shape=(2,))
    owner.fill(1.0)
    view = owner.as_view()
    for _path, value in _reachable(b, "sibling", 0, set()):
        assert not isinstance(value, BUFFER_TYPES)
    with pytest.raises(AttributeError):
        b.root.allocation  # noqa: B018
    assert view.to_numpy().tolist() == [1.0, 1.0]
    view.release()


@pytest.mark.parametrize("make", ["tensor", "view", "mutable view", "storage", "root"])
def test_buffer_protocol_and_numpy_conversion_are_refused(make: str) -> None:
    """memoryview()/np.asarray()/np.frombuffer() get no memory from storage objects."""
    t = ts.zeros(2)
    assert t._storage is not None
    obj: Any = {
        "tensor": lambda: t,
        "view": lambda: t.as_view(),
        "mutable view": lambda: t.as_view_mut(),
        "storage": lambda: ts.allocate_storage(16),
        "root": lambda: t._storage.claim.root if t._storage else None,
    }[make]()
    with pytest.raises(TypeError):
        memoryview(obj)
    with pytest.raises(TypeError):
        np.frombuffer(obj)
    if make in ("tensor", "view", "mutable view"):
        with pytest.raises(TypeError, match="never copies implicitly"):
            np.asarray(obj)
    else:
        assert np.asarray(obj).dtype == object  # an opaque object, not memory
    del obj


def test_read_side_arrays_are_read_only() -> None:
    """Every array handed out for reading refuses writes (normal and debug mode alike)."""
    t = ts.arange(6, dtype="float64").reshape(2, 3).duplicate()
    arrays = [kernel.read_array(t), kernel.read_array(t.as_view())]
    with t.prepare_host() as p:
        assert isinstance(p, ts.PreparedContiguousRead)
        arrays += [p.as_array(), p.as_slice()]
        for a in arrays:
            assert not a.flags.writeable
            with pytest.raises(ValueError, match="read-only"):
                a[...] = 0
    with t.T.prepare_host() as s:
        assert not s.as_array().flags.writeable
    assert t.to_numpy().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_a_write_access_hands_out_writable_arrays_only_for_writing() -> None:
    """A prepared write access's as_slice is read-only; as_slice_mut/as_array write."""
    t = ts.zeros(3)
    with t.prepare_host_mut() as p:
        assert isinstance(p, ts.PreparedContiguousWrite)
        assert not p.as_slice().flags.writeable
        assert p.as_slice_mut().flags.writeable and p.as_array().flags.writeable


def test_to_numpy_is_a_fresh_copy() -> None:
    """to_numpy's writable array is a recorded copy that shares no memory with storage."""
    t = ts.ones(3)
    out = t.to_numpy()
    assert t._storage is not None
    assert not np.shares_memory(out, t._storage.claim.root._allocation)
    out[...] = 5.0
    assert t.to_numpy().tolist() == [1.0, 1.0, 1.0]
