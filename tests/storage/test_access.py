"""Prepared host access (``_access.py``) and the host provider's counters (``_provider.py``).

The variant is chosen once from the retained layout (the class is the state); reads
hand out read-only arrays, writes writable ones; a provider fault raises
``AccessError`` carrying the unchanged, usable view; every provider counter is
independent of the element count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage._provider import FaultInjected
from tenferro_storage.errors import AccessError, BorrowError, CopyForbiddenError
from tests.strategies import LABEL_DTYPE_NAMES, LayoutCase, injective_layouts

pytestmark = pytest.mark.both_borrow_modes  # debug mode and the default mode

labels = st.sampled_from(LABEL_DTYPE_NAMES)


def _owner(case: LayoutCase) -> ts.Tensor[Any, Any]:
    storage = ts.allocate_storage(case.nbytes)
    np.ndarray((case.span_elems,), case.dtype, buffer=storage.root._allocation)[...] = np.arange(
        case.span_elems
    )
    return ts.Tensor.from_storage(
        storage, dtype=case.dtype, shape=case.shape, strides=case.strides, offset=case.offset
    )


@given(injective_layouts(dtype=labels))
def test_read_variant_follows_the_retained_layout(case: LayoutCase) -> None:
    """prepare_host() is PreparedContiguousRead exactly for Contiguous layouts, else Strided."""
    t = _owner(case)
    expected = t.to_numpy()
    contiguous = isinstance(t.layout, ts.Contiguous)
    with t.as_view().prepare_host() as p:
        assert type(p) is (ts.PreparedContiguousRead if contiguous else ts.PreparedStridedRead)
        arr = p.as_array()
        assert not arr.flags.writeable and arr is p.as_array()  # built once, cached
        np.testing.assert_array_equal(arr, expected)
        if isinstance(p, ts.PreparedContiguousRead):
            s = p.as_slice()
            assert s.ndim == 1 and not s.flags.writeable
            assert p.element_range == range(case.offset, case.offset + t.size)
            np.testing.assert_array_equal(s, expected.ravel())
            np.testing.assert_array_equal(list(p.iter_contiguous()), expected.ravel())
        else:
            assert p.plan.shape == case.shape and p.plan.strides == case.strides
            np.testing.assert_array_equal(list(p.iter_strided()), expected.ravel())
        assert not hasattr(p, "as_slice_mut")


@given(injective_layouts(dtype=labels))
def test_write_variant_follows_the_retained_layout_and_writes_land(case: LayoutCase) -> None:
    """prepare_host_mut() picks the write variant from the layout; writes reach the owner."""
    t = _owner(case)
    contiguous = isinstance(t.layout, ts.Contiguous)
    size = t.size
    with t.as_view_mut().prepare_host_mut() as p:
        assert type(p) is (ts.PreparedContiguousWrite if contiguous else ts.PreparedStridedWrite)
        arr = p.as_array()
        assert arr.flags.writeable
        if isinstance(p, ts.PreparedContiguousWrite):
            assert not p.as_slice().flags.writeable
            p.as_slice_mut()[:] = 3
        else:
            assert isinstance(p.plan, ts.CheckedInjectiveStrided)
            assert isinstance(p.plan.proof, ts.WriteInjectivityProof)
            arr[...] = 3
        np.testing.assert_array_equal(list(p.iter_contiguous() if contiguous else p.iter_strided()),
                                      np.full(size, 3))
    np.testing.assert_array_equal(t.to_numpy(), np.full(case.shape, 3))


def test_transposed_dense_view_is_strided() -> None:
    """A transposed dense view is Strided (Contiguous means row-major in logical order)."""
    t = ts.arange(6).reshape(2, 3).duplicate()
    with t.T.prepare_host() as p:
        assert isinstance(p, ts.PreparedStridedRead)
        assert list(p.iter_strided()) == [0, 3, 1, 4, 2, 5]
    with t[1:].prepare_host() as q:
        assert isinstance(q, ts.PreparedContiguousRead)
        assert q.as_slice().tolist() == [3, 4, 5] and q.element_range == range(3, 6)


def test_prepared_access_holds_the_borrow_until_released() -> None:
    """The prepared object carries the view's borrow; release() or `with` exit ends it."""
    t = ts.zeros(3)
    p = t.as_view().prepare_host()
    with pytest.raises(BorrowError, match=r"PreparedContiguousRead|TensorView"):
        t.as_view_mut()
    p.release()
    w = t.as_view_mut().prepare_host_mut()
    with pytest.raises(BorrowError):
        t.as_view()
    del w
    t.as_view().release()


# -- failure carries the unchanged view ------------------------------------------------------

PREPARERS: dict[str, Callable[[ts.Tensor[Any, Any]], tuple[Any, Callable[[Any], Any]]]] = {
    "read-contiguous": lambda t: (t.as_view(), lambda v: v.prepare_host()),
    "read-strided": lambda t: (t.T, lambda v: v.prepare_host()),
    "write-contiguous": lambda t: (t.as_view_mut(), lambda v: v.prepare_host_mut()),
    "write-strided": lambda t: (t.as_view_mut().T, lambda v: v.prepare_host_mut()),
}


@pytest.mark.parametrize("kind", list(PREPARERS))
def test_provider_fault_raises_access_error_carrying_the_unchanged_view(kind: str) -> None:
    """An injected map fault: AccessError whose .value is the same, still usable view."""
    t = ts.arange(6).reshape(2, 3).duplicate()
    view, prepare = PREPARERS[kind](t)
    shape, values = view.shape, view.to_numpy()
    ts.host_provider.fail_next("map")
    with pytest.raises(AccessError) as info:
        prepare(view)
    err = info.value
    assert isinstance(err, RuntimeError)
    cause, value = err.into_parts()
    assert value is view and err.value is view
    assert isinstance(cause, FaultInjected) and "map" in str(cause)
    assert view.span in str(err) and "0x" not in str(err)
    del err, info, value
    # Unchanged: same metadata and values, still holding its borrow, and it can retry.
    assert view.shape == shape
    np.testing.assert_array_equal(view.to_numpy(), values)
    with pytest.raises(BorrowError):
        t.as_view_mut() if "read" in kind else t.as_view()
    with prepare(view) as p:
        np.testing.assert_array_equal(p.as_array(), values)


def test_fault_injection_counts_down() -> None:
    """fail_next(op, times) fails exactly the next `times` calls of that operation."""
    t = ts.zeros(2)
    ts.host_provider.fail_next("map", times=2)
    v = t.as_view()
    for _ in range(2):
        with pytest.raises(AccessError):
            v.prepare_host()
    v.prepare_host().release()


def test_fill_provider_fault_raises_access_error_and_changes_nothing() -> None:
    """A map fault in TensorViewMut.fill: AccessError carrying the same view; nothing written."""
    t = ts.arange(6).reshape(2, 3).duplicate()
    m = t.as_view_mut().T
    before = ts.host_provider.counters.snapshot()
    ts.host_provider.fail_next("map")
    with ledger.capture() as rec:
        with pytest.raises(AccessError) as info:
            m.fill(9)
    err = info.value
    assert err.value is m and isinstance(err.cause, FaultInjected)
    assert str(err).startswith("fill:") and m.span in str(err)
    del err, info
    after = ts.host_provider.counters.snapshot()
    assert after["dispatches"] == before["dispatches"] and after["maps"] == before["maps"]
    assert rec.events == []
    assert m.to_numpy().tolist() == [[0, 3], [1, 4], [2, 5]]  # unchanged, still usable
    m.fill(1)
    del m
    assert t.to_numpy().tolist() == [[1] * 3] * 2


READERS: dict[str, Callable[[Any], Any]] = {
    "to_numpy": lambda v: v.to_numpy(),
    "duplicate": lambda v: v.duplicate(),
}


@pytest.mark.parametrize("name", list(READERS))
def test_copy_out_maps_once_per_call_whatever_the_size(name: str) -> None:
    """to_numpy()/duplicate() do the provider's resolve/map/sync once per call, like
    prepare_host, independent of the element count."""
    deltas = []
    for n in (3, 300_000):
        t = ts.zeros(n)
        with t.as_view()[::2] as v:
            before = ts.host_provider.counters.snapshot()
            out = READERS[name](v)
            after = ts.host_provider.counters.snapshot()
        deltas.append({k: after[k] - before[k] for k in ("resolutions", "maps", "syncs")})
        del out, t
    assert deltas[0] == deltas[1] == {"resolutions": 1, "maps": 1, "syncs": 1}


@pytest.mark.parametrize("name", list(READERS))
@pytest.mark.parametrize("via", ["view", "view_mut", "owner"])
def test_copy_out_provider_fault_raises_access_error_and_changes_nothing(
    name: str, via: str
) -> None:
    """A map fault in to_numpy()/duplicate(): AccessError, no ledger event, nothing allocated."""
    t = ts.arange(6).reshape(2, 3).duplicate()
    holder: Any = {"view": t.as_view, "view_mut": t.as_view_mut, "owner": lambda: t}[via]()
    live = ledger.live_allocations()
    ts.host_provider.fail_next("map")
    with ledger.capture() as rec:
        with pytest.raises(AccessError) as info:
            READERS[name](holder)
    err = info.value
    assert isinstance(err.cause, FaultInjected) and str(err).startswith(f"{name}:")
    if via == "view":
        assert err.value is holder
    del err, info
    assert rec.events == [] and ledger.live_allocations() == live
    assert holder.to_numpy().tolist() == [[0, 1, 2], [3, 4, 5]]  # unchanged, still usable
    del holder
    t.as_view_mut().release()  # no borrow was left behind


@pytest.mark.parametrize("name", list(READERS))
def test_refused_copy_neither_maps_nor_records(name: str) -> None:
    """Inside forbid_copies() the copy is refused before any provider work or ledger event."""
    t = ts.zeros(4)
    before = ts.host_provider.counters.snapshot()
    with ledger.capture() as rec, ledger.forbid_copies():
        with pytest.raises(CopyForbiddenError):
            READERS[name](t)
    assert rec.events == [] and ts.host_provider.counters.snapshot() == before


# -- counters independent of element count --------------------------------------------------


def _workload(n_rows: int, n_cols: int) -> dict[str, int]:
    """Counter deltas of a fixed sequence of operations on an n_rows x n_cols tensor."""
    c = ts.host_provider.counters
    before = c.snapshot()
    t = ts.zeros((n_rows, n_cols))
    with t.as_view().prepare_host() as p:
        p.as_slice().sum()
    with t.T.prepare_host() as q:
        q.as_array().sum()
        for _ in zip(range(5), q.iter_strided(), strict=False):
            pass
    with t.as_view_mut().prepare_host_mut() as w:
        w.as_slice_mut()[:] = 1.0
    with t.as_view_mut().T.prepare_host_mut() as ws:
        ws.as_array()[...] += 1.0
    t.fill(2.0)
    t[1:, ::2].to_numpy()
    d = t.duplicate()
    del t, d
    after = c.snapshot()
    return {k: after[k] - before[k] for k in after}


def test_provider_counters_are_independent_of_element_count() -> None:
    """Validation, resolution, map, sync and dispatch counts equal at 10 and 10**6 elements."""
    small = _workload(2, 5)
    large = _workload(1000, 1000)
    assert small == large
    for key in ("validations", "resolutions", "maps", "syncs", "dispatches"):
        assert small[key] >= 1, key
    # 4 prepares + fill + to_numpy + duplicate: each maps exactly once, whatever the size
    assert small["maps"] == 7 and small["allocations"] == small["releases"] == 2


def test_iteration_does_no_provider_work() -> None:
    """Iterating a prepared strided access performs no resolution, mapping or sync per element."""
    t = ts.zeros((30, 40))
    with t.T.prepare_host() as p:
        before = ts.host_provider.counters.snapshot()
        assert sum(1 for _ in p.iter_strided()) == 1200
        assert ts.host_provider.counters.snapshot() == before


def test_strided_preparation_builds_no_plan_and_reproves_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Deriving and preparing a strided view is O(1) work like a contiguous one: the
    traversal plan is built only when asked for (then retained) and the retained
    write-injectivity proof is reused, never recomputed."""
    from tenferro_storage import _descriptor, _layout

    built: list[tuple[int, ...]] = []
    proofs: list[tuple[int, ...]] = []
    init = _layout.CheckedStrided.__init__
    prove = _descriptor.prove_injective

    def counting_init(self: Any, start: int, shape: Any, strides: Any) -> None:
        built.append(shape)
        init(self, start, shape, strides)

    def counting_prove(shape: Any, strides: Any) -> Any:
        proofs.append(shape)
        return prove(shape, strides)

    monkeypatch.setattr(_layout.CheckedStrided, "__init__", counting_init)
    monkeypatch.setattr(_descriptor, "prove_injective", counting_prove)
    t = ts.arange(24).reshape(2, 3, 4).duplicate()
    before = ts.host_provider.counters.snapshot()
    with t.T.prepare_host() as p, t.as_view()[:, ::2].prepare_host() as q:
        assert isinstance(p, ts.PreparedStridedRead) and isinstance(q, ts.PreparedStridedRead)
        assert built == []  # neither derivation nor preparation built a plan
        assert p.plan is p.plan and built == [(4, 3, 2)]  # built once on request, retained
        assert [int(x) for x in p.iter_strided()] == t.to_numpy().T.ravel().tolist()
    with t.as_view_mut()[:, ::-1].T as m:
        with m.prepare_host_mut() as w:
            assert isinstance(w, ts.PreparedStridedWrite) and len(built) == 1
            assert isinstance(w.plan, ts.CheckedInjectiveStrided) and w.plan is w.plan
            assert len(built) == 2 and w.plan.carry == w._desc.layout.plan.carry
            w.as_array()[...] = 0
    assert proofs == []  # mutable children reuse the owner's retained proof
    after = ts.host_provider.counters.snapshot()
    assert after["validations"] == before["validations"]
    assert after["maps"] - before["maps"] == 4  # 3 prepares + to_numpy, one map each


@pytest.mark.parametrize(
    "key", [(5,), (0, 7), (None, 0, -4), (slice(None), None, 3), (-3,)],
    ids=["axis0", "axis1", "newaxis-before", "newaxis-between", "negative-axis0"],
)
def test_an_out_of_bounds_index_names_the_axis_and_size_numpy_names(key: Any) -> None:
    """An integer index out of range is refused naming the index, the *parent's* axis it
    indexes (``None`` entries add no parent axis) and that axis's size, in numpy's words;
    the owner is unchanged.  Mutant: the reported axis ``axis - 1`` made ``axis << 1``."""
    a = np.arange(6.0).reshape(2, 3)
    t = ts.from_numpy(a.copy())
    with pytest.raises(IndexError) as want:
        a[key]
    with pytest.raises(ts.errors.BadIndexError) as got:
        t[key]
    assert str(got.value).endswith(f"argument 'key': {want.value}")
    np.testing.assert_array_equal(t.to_numpy(), a)
