"""Zero-copy complex<->real reinterpretation (``_reinterpret.py``) for both sealed pairs.

Three forms per direction: a read-only view from a view, a mutable view from a mutable
view, and the consuming owner conversion.  Each must keep the same root, allocate and
copy nothing, map elements exactly as numpy's ``.view()`` does, follow the rank policy
(complex -> real adds a trailing axis of 2, real -> complex removes it) and refuse
bad requests with ``ReinterpretError`` carrying the untouched source back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tenferro_storage as ts
from tenferro_storage import (
    AllocationGroup,
    host_provider,
    kernel,
    ledger,
    view_as_complex,
    view_as_real,
)
from tenferro_storage.errors import (
    BorrowError,
    ExpiredBorrowError,
    LayoutError,
    ReinterpretError,
    UseAfterMoveError,
)
from tests.strategies import index_keys, shapes

PAIRS = [("complex64", "float32"), ("complex128", "float64")]
pairs = pytest.mark.parametrize(("cname", "rname"), PAIRS)


def _complex_values(shape: tuple[int, ...], cname: str) -> np.ndarray[Any, Any]:
    n = int(np.prod(shape, dtype=np.int64))
    flat = np.arange(n) + 1j * (100 + np.arange(n))
    return flat.reshape(shape).astype(cname)


def _root(x: Any) -> Any:
    return x._storage.root


def _same_bytes(src: np.ndarray[Any, Any], dst: np.ndarray[Any, Any]) -> bool:
    """Whether ``dst`` starts at the same address as ``src`` (the numpy arrays of both)."""
    return bool(src.__array_interface__["data"][0] == dst.__array_interface__["data"][0])


# -- element mapping ------------------------------------------------------------------------


@given(
    st.sampled_from(PAIRS),
    shapes(max_rank=3, max_side=4).flatmap(lambda s: st.tuples(st.just(s), index_keys(s))),
    st.booleans(),
)
def test_view_as_real_maps_elements_like_numpy_view(
    pair: tuple[str, str], shape_key: tuple[tuple[int, ...], Any], transpose: bool
) -> None:
    cname, rname = pair
    shape, key = shape_key
    owner = ts.from_numpy(_complex_values(shape, cname))
    source = owner.as_view()[key]
    if transpose:
        source = source.T
    src = kernel.read_array(source)
    real = view_as_real(source)
    out = kernel.read_array(real)
    assert real.dtype == rname and real.shape == (*source.shape, 2)
    assert real.strides == (*(2 * s for s in source.strides), 1)
    expected = np.array(src, order="C")[..., None].view(rname)  # numpy's own .view()
    np.testing.assert_array_equal(out, expected)
    if src.size:
        assert _same_bytes(src, out), "the real view starts at the complex view's first byte"
    assert _root(real) is _root(source)


@given(
    st.sampled_from(PAIRS),
    shapes(max_rank=2, max_side=4).flatmap(lambda s: st.tuples(st.just(s), index_keys(s))),
)
def test_view_as_complex_maps_elements_like_numpy_view(
    pair: tuple[str, str], shape_key: tuple[tuple[int, ...], Any]
) -> None:
    cname, _ = pair
    shape, key = shape_key
    owner = ts.from_numpy(_complex_values(shape, cname)).into_real()
    source = owner.as_view()[(*key, slice(None))] if key else owner.as_view()
    try:
        cplx = view_as_complex(source)
    except ReinterpretError as exc:
        # Only a key that makes the view an odd number of real elements apart refuses, and
        # int/slice keys on the leading axes never do.
        raise AssertionError(f"unexpected refusal: {exc}") from exc
    src = kernel.read_array(source)
    out = kernel.read_array(cplx)
    assert cplx.dtype == cname and cplx.shape == source.shape[:-1]
    expected = np.array(src, order="C").view(cname)[..., 0]  # numpy's own .view()
    np.testing.assert_array_equal(out, expected)
    if src.size:
        assert _same_bytes(src, out)
    assert _root(cplx) is _root(source)


# -- the three forms --------------------------------------------------------------------------


@pairs
def test_read_only_forms_borrow_like_slicing(cname: str, rname: str) -> None:
    owner = ts.from_numpy(_complex_values((2, 3), cname))
    view = owner.as_view()
    real = view_as_real(view)
    view.release()  # the derived view holds its own shared borrow of the owner
    assert isinstance(real, ts.TensorView) and not hasattr(real, "fill")
    with pytest.raises(BorrowError):
        owner.as_view_mut()
    back = view_as_complex(real)
    assert back.to_numpy().tolist() == owner.to_numpy().tolist()
    del real, back
    owner.as_view_mut().release()


@pairs
def test_mutable_forms_are_exclusive_reborrows_that_write_through(cname: str, rname: str) -> None:
    owner = ts.from_numpy(_complex_values((3,), cname))
    parent = owner.as_view_mut()
    real = view_as_real(parent)
    assert isinstance(real, ts.TensorViewMut) and real.shape == (3, 2)
    with pytest.raises(BorrowError):
        parent.fill(0)  # the parent waits for its child
    with real.prepare_host_mut() as prepared:
        prepared.as_array()[..., 1] = -1.0
    real.release()
    cplx = view_as_complex(view_as_real(parent))  # a child of a child
    cplx[1:].fill(7 + 7j)
    del cplx
    parent.release()
    assert owner.to_numpy().tolist() == [0 - 1j, 7 + 7j, 7 + 7j]


@pairs
def test_mutable_reinterpretation_needs_an_unborrowed_mutable_view(cname: str, rname: str) -> None:
    owner = ts.zeros((2,), cname)
    parent = owner.as_view_mut()
    reader = parent.as_view()
    with pytest.raises(BorrowError):
        view_as_real(parent)
    reader.release()
    view_as_real(parent).release()
    parent.release()
    parent2 = owner.as_view_mut()
    parent2.release()
    with pytest.raises(ExpiredBorrowError):
        view_as_real(parent2)


@pairs
def test_owner_conversion_moves_the_same_storage(cname: str, rname: str) -> None:
    owner = ts.from_numpy(_complex_values((2, 2), cname))
    root, span = _root(owner), owner.span
    real = owner.into_real()
    with pytest.raises(UseAfterMoveError, match="into_real"):
        owner.shape  # noqa: B018
    assert real.dtype == rname and real.shape == (2, 2, 2) and real.span == span
    assert _root(real) is root
    assert real.to_numpy()[1, 0].tolist() == [2.0, 102.0]
    real.fill(3.0)  # a full, writable owner
    back = real.into_complex()
    assert back.shape == (2, 2) and _root(back) is root
    assert back.to_numpy().tolist() == [[3 + 3j] * 2] * 2


@pairs
def test_every_form_is_zero_copy_on_the_same_root(cname: str, rname: str) -> None:
    owner = ts.zeros((4,), cname)
    root = _root(owner)
    allocations = host_provider.counters.allocations
    with ledger.capture() as rec:
        view = owner.as_view()
        view_as_complex(view_as_real(view)).release()
        view.release()
        mutable = owner.as_view_mut()
        child = view_as_real(mutable)
        assert _root(child) is root
        del child
        mutable.release()
        owner = owner.into_real().into_complex()
    assert not rec.events, "no allocation, copy or release"
    assert host_provider.counters.allocations == allocations
    assert _root(owner) is root


@pairs
def test_each_reinterpretation_validates_its_result_once_and_maps_nothing(
    cname: str, rname: str
) -> None:
    owner = ts.zeros((4,), cname)
    counters = host_provider.counters
    before = counters.snapshot()
    with owner.as_view() as view:
        view_as_real(view).release()
    after = counters.snapshot()
    assert after["validations"] == before["validations"] + 1
    assert {k: v for k, v in after.items() if k != "validations"} == {
        k: v for k, v in before.items() if k != "validations"
    }


# -- rank policy --------------------------------------------------------------------------------


@pairs
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (1, 2, 3), (2, 1, 2, 3)])
def test_rank_policy_complex_to_real_adds_one_axis(
    cname: str, rname: str, shape: tuple[int, ...]
) -> None:
    owner = ts.zeros(shape, cname)
    with owner.as_view() as v:
        assert view_as_real(v).shape == (*shape, 2)
    with owner.as_view_mut() as m:
        assert view_as_real(m).ndim == len(shape) + 1
    real = owner.into_real()
    assert real.shape == (*shape, 2)
    assert real.into_complex().shape == shape


@pairs
def test_rank_policy_real_to_complex_removes_the_trailing_axis(cname: str, rname: str) -> None:
    scalar_pair = ts.from_numpy(np.array([1.0, 2.0], dtype=rname))
    with scalar_pair.as_view() as v:
        c = view_as_complex(v)
        assert c.shape == () and c.item() == 1 + 2j
        del c
    assert scalar_pair.into_complex().ndim == 0


# -- refusals -----------------------------------------------------------------------------------


def _odd_offset(rname: str) -> ts.TensorView[Any, Any]:
    return ts.zeros((3, 2), rname).reshape(6)[1:5].reshape(2, 2)


def _odd_stride(rname: str) -> ts.TensorView[Any, Any]:
    item = ts.dtype(rname).itemsize
    storage = ts.allocate_storage(8 * item)
    return ts.Tensor.from_storage(storage, dtype=rname, shape=(2, 2), strides=(3, 1)).as_view()


_Case = tuple[Callable[[str, str], Any], Callable[[Any], Any], str]
REFUSED_VIEWS: dict[str, _Case] = {
    "real view as real": (
        lambda c, r: ts.zeros((2,), r).as_view(), view_as_real, "expected complex"
    ),
    "complex view as complex": (
        lambda c, r: ts.zeros((2,), c).as_view(), view_as_complex, "expected float32 or float64"
    ),
    "int view as complex": (
        lambda c, r: ts.zeros((2,), "int32").as_view(), view_as_complex, "float32 or float64"
    ),
    "int view as real": (
        lambda c, r: ts.zeros((2,), "int64").as_view(), view_as_real, "expected complex"
    ),
    "trailing axis of 3": (
        lambda c, r: ts.zeros((2, 3), r).as_view(), view_as_complex, "trailing axis of extent 2"
    ),
    "rank 0": (lambda c, r: ts.zeros((), r).as_view(), view_as_complex, "trailing axis"),
    "transposed pairs": (
        lambda c, r: ts.zeros((2, 3), r).as_view().T, view_as_complex, "stride 1"
    ),
    "odd offset": (lambda c, r: _odd_offset(r), view_as_complex, "element boundary"),
    "odd stride": (lambda c, r: _odd_stride(r), view_as_complex, "stride 3 on axis 0"),
}


@pairs
@pytest.mark.parametrize("case", sorted(REFUSED_VIEWS))
def test_refused_view_reinterpretation_returns_the_view_unchanged(
    cname: str, rname: str, case: str
) -> None:
    make, fn, message = REFUSED_VIEWS[case]
    view = make(cname, rname)
    with pytest.raises(ReinterpretError, match=message) as info:
        fn(view)
    _, value = info.value.into_parts()
    assert value is view and isinstance(info.value, ValueError)
    assert view.to_numpy().shape == view.shape, "the view is still usable"
    del info, value


@pairs
def test_the_span_must_hold_whole_complex_elements(cname: str, rname: str) -> None:
    item = ts.dtype(rname).itemsize
    storage = ts.allocate_storage(3 * item)  # room for one complex element and a half
    owner = ts.Tensor.from_storage(storage, dtype=rname, shape=(1, 2))
    with pytest.raises(ReinterpretError, match="not a multiple") as info:
        owner.into_complex()
    cause, value = info.value.into_parts()
    assert isinstance(cause, LayoutError) and value is owner
    del info, value
    owner.fill(1.0)  # not consumed: still a usable owner
    assert owner.to_numpy().tolist() == [[1.0, 1.0]]


@pairs
def test_refused_owner_conversion_hands_the_original_owner_back(cname: str, rname: str) -> None:
    owner = ts.from_numpy(np.arange(6.0).reshape(2, 3).astype(rname))
    with ledger.capture() as rec:
        with pytest.raises(ReinterpretError, match="trailing axis of extent 2") as info:
            owner.into_complex()
        with pytest.raises(ReinterpretError, match="expected complex"):
            owner.into_real()
    assert not rec.events
    cause, value = info.value.into_parts()
    assert value is owner and isinstance(cause, str)
    del info, value
    assert owner.to_numpy().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    owner.fill(0.0)


@pairs
def test_owner_conversion_while_borrowed_raises_borrow_error(cname: str, rname: str) -> None:
    owner = ts.zeros((2,), cname)
    with owner.as_view():
        with pytest.raises(BorrowError):
            owner.into_real()
    assert owner.into_real().shape == (2, 2)


def test_an_owner_is_not_a_view_argument() -> None:
    owner = ts.zeros((2,), "complex128")
    with pytest.raises(TypeError, match="into_real"):
        view_as_real(owner)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="TensorView or TensorViewMut"):
        view_as_complex(np.zeros((2, 2)))  # type: ignore[call-overload]


# -- with groups --------------------------------------------------------------------------------


@pairs
def test_group_views_and_split_children_reinterpret(cname: str, rname: str) -> None:
    group = AllocationGroup()
    slot = group.insert(ts.from_numpy(_complex_values((2, 3), cname)))
    with group.view(slot) as v:
        real = view_as_real(v)
        assert real.to_numpy()[1, 2].tolist() == [5.0, 105.0]
        del real
    rows = [group.alias(slot, shape=(3,), strides=(1,), offset=3 * i) for i in range(2)]
    children = group.split_mut(rows)
    parts = [view_as_real(c) for c in children]
    parts[0][:, 1].fill(0.0)  # zero the imaginary parts of row 0
    del parts, children
    with group.view(slot) as v:
        assert v.to_numpy()[0].tolist() == [0j, 1 + 0j, 2 + 0j]
    # A real alias of a complex allocation is a second record; the retained pair is exact.
    real_slot = group.alias(slot, shape=(2, 3, 2), strides=(6, 2, 1), dtype=rname)
    with group.view(real_slot) as a, group.view(slot) as b:
        np.testing.assert_array_equal(a.to_numpy(), view_as_real(b).to_numpy())
