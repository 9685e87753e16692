"""Checked layouts and descriptors (``_layout.py``, ``_descriptor.build``): the six checks.

Every generated request is accepted or rejected exactly as the contract says, and
every accepted plan visits exactly the element addresses numpy visits over the same
buffer.  Strides and offsets are in elements.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import tenferro_storage as ts
from tenferro_storage import _descriptor as D
from tenferro_storage._layout import (
    INTP_MAX,
    CheckedStrided,
    Contiguous,
    Strided,
    check_arithmetic,
    prove_injective,
)
from tenferro_storage.errors import DTypeError, LayoutError
from tests.strategies import (
    LABEL_DTYPE_NAMES,
    LayoutCase,
    dtype_names,
    injective_layouts,
    layouts,
    nonempty_shapes,
    shapes,
    strides_for,
    unsupported_dtype_names,
)

label_dtypes = st.sampled_from(LABEL_DTYPE_NAMES)


def _build(case: LayoutCase, *, shape: Any = None, strides: Any = None, offset: Any = None,
           span_elems: int | None = None) -> D.CheckedDescriptor:
    """Validate ``case`` (optionally overridden) against a fresh storage of exactly its span."""
    n = case.span_elems if span_elems is None else span_elems
    storage = ts.allocate_storage(n * case.itemsize)
    return D.build(
        "test.build",
        storage.root,
        0,
        n * case.itemsize,
        ts.dtype(case.dtype),
        case.shape if shape is None else shape,
        case.strides if strides is None else strides,
        case.offset if offset is None else offset,
    )


def _numpy_over(desc: D.CheckedDescriptor) -> np.ndarray[Any, Any]:
    """numpy's own array for the descriptor's request, over the same root buffer."""
    item = desc.dtype.itemsize
    return np.ndarray(
        desc.shape,
        dtype=desc.dtype.numpy,
        buffer=desc.buffer,
        offset=desc.start + desc.offset * item if desc.size else desc.start,
        strides=tuple(s * item for s in desc.strides),
    )


def _numpy_addresses(arr: np.ndarray[Any, Any]) -> list[int]:
    """The byte address of every element of ``arr`` in row-major logical order."""
    base = arr.__array_interface__["data"][0]
    return [
        base + sum(i * s for i, s in zip(idx, arr.strides, strict=True))
        for idx in itertools.product(*(range(n) for n in arr.shape))
    ]


def _label(desc: D.CheckedDescriptor) -> None:
    """Write element index ``k`` into element ``k`` of the descriptor's span."""
    item = desc.dtype.itemsize
    flat = np.ndarray(
        ((desc.stop - desc.start) // item,), dtype=desc.dtype.numpy, buffer=desc.buffer,
        offset=desc.start,
    )
    flat[...] = np.arange(flat.shape[0])


def _brute_injective(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    offs = [
        sum(i * s for i, s in zip(idx, strides, strict=True))
        for idx in itertools.product(*(range(n) for n in shape))
    ]
    return len(offs) == len(set(offs))


def _assert_teaching(err: LayoutError, operation: str) -> None:
    assert err.operation == operation
    assert err.span is not None and err.span.startswith("alloc#")
    assert "0x" not in str(err), "layout errors must never print a raw address"


# -- acceptance and exact address coverage ------------------------------------------------


@given(layouts())
def test_every_in_span_layout_is_accepted_and_matches_numpy_addresses(case: LayoutCase) -> None:
    """A layout inside its span is accepted; its array reaches exactly numpy's addresses."""
    desc = _build(case)
    assert (desc.shape, desc.strides, desc.offset) == (case.shape, case.strides, case.offset)
    assert desc.size == case.size
    ours = desc.array()
    theirs = _numpy_over(desc)
    assert ours.flags.aligned
    assert _numpy_addresses(ours) == _numpy_addresses(theirs)
    if desc.size:
        assert (desc.lo, desc.hi) == (case.lo, case.hi)


@given(layouts())
def test_layout_variant_is_contiguous_exactly_when_numpy_says_c_contiguous(
    case: LayoutCase,
) -> None:
    """Contiguous (row-major, logical order) iff numpy's C-contiguity; otherwise Strided."""
    desc = _build(case)
    assert isinstance(desc.layout, Contiguous) == _numpy_over(desc).flags.c_contiguous
    if isinstance(desc.layout, Contiguous):
        assert desc.layout.element_range == range(case.offset, case.offset + desc.size)
    else:
        assert isinstance(desc.layout, Strided)


@given(layouts(dtype=label_dtypes))
def test_strided_plan_offsets_visit_numpy_order(case: LayoutCase) -> None:
    """CheckedStrided.offsets() yields numpy's row-major element offsets over the same buffer."""
    desc = _build(case)
    _label(desc)
    expected = [int(np.real(x)) for x in _numpy_over(desc).ravel(order="C")]
    plan = CheckedStrided(desc.offset, desc.shape, desc.strides)
    assert list(plan.offsets()) == expected
    assert plan.count == desc.size


@given(injective_layouts(dtype=label_dtypes))
def test_prepared_traversal_visits_numpy_values(case: LayoutCase) -> None:
    """prepare_host() of an accepted owner layout reads exactly numpy's elements in order."""
    storage = ts.allocate_storage(case.nbytes)
    _label(D.build("label", storage.root, 0, case.nbytes, ts.dtype(case.dtype), (case.span_elems,),
                   (1,), 0))
    t = ts.Tensor.from_storage(
        storage, dtype=case.dtype, shape=case.shape, strides=case.strides, offset=case.offset
    )
    expected = _numpy_over(t._desc).ravel(order="C")
    with t.as_view().prepare_host() as p:
        if isinstance(p, ts.PreparedStridedRead):
            got = np.array(list(p.iter_strided()), dtype=expected.dtype)
            assert list(p.plan.offsets()) == [int(np.real(x)) for x in expected]
        else:
            got = np.array(list(p.iter_contiguous()), dtype=expected.dtype)
            np.testing.assert_array_equal(p.as_slice(), expected)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(p.as_array(), _numpy_over(t._desc))


# -- the named cases ----------------------------------------------------------------------


@given(dtype_names(), shapes(min_rank=1), st.data())
def test_empty_layouts_accept_any_strides_and_visit_nothing(
    name: str, shape: tuple[int, ...], data: st.DataObject
) -> None:
    """A zero-size layout is accepted for any strides with an offset inside [0, span]."""
    assume(0 in shape)
    strides = data.draw(strides_for(shape, max_abs=10**6))
    span = data.draw(st.integers(0, 4))
    offset = data.draw(st.integers(0, span))
    case = LayoutCase(name, shape, strides, offset, span)
    desc = _build(case)
    assert desc.size == 0 and isinstance(desc.layout, Contiguous)
    assert list(CheckedStrided(offset, shape, strides).offsets()) == []
    assert desc.array().shape == shape
    with pytest.raises(LayoutError):
        _build(case, offset=span + 1)


@given(dtype_names(), st.integers(0, 4), st.data())
def test_singleton_layouts_are_contiguous_whatever_their_strides(
    name: str, rank: int, data: st.DataObject
) -> None:
    """Extent-1 axes ignore their strides: a singleton is one contiguous element."""
    shape = (1,) * rank
    strides = data.draw(strides_for(shape, max_abs=10**9))
    span = data.draw(st.integers(1, 5))
    offset = data.draw(st.integers(0, span - 1))
    desc = _build(LayoutCase(name, shape, strides, offset, span))
    assert desc.layout == Contiguous(range(offset, offset + 1))


@given(injective_layouts(dtype=label_dtypes, shape=nonempty_shapes(min_rank=1)))
def test_reverse_stride_layouts_walk_backwards(case: LayoutCase) -> None:
    """Negating every stride (offset at the far end) visits numpy's reversed order."""
    rev = tuple(-abs(s) for s in case.strides)
    reach = sum(abs(s) * (n - 1) for n, s in zip(case.shape, rev, strict=True))
    desc = _build(case, strides=rev, offset=reach, span_elems=reach + 1)
    _label(desc)
    expected = [int(np.real(x)) for x in _numpy_over(desc).ravel()]
    assert expected[0] == reach
    if isinstance(desc.layout, Strided):
        assert list(desc.layout.plan.offsets()) == expected
    else:  # every axis of extent > 1 was absent: a single element
        assert desc.size == 1


@given(injective_layouts(dtype=label_dtypes, shape=nonempty_shapes(min_rank=1)))
def test_non_contiguous_stepped_layouts_are_strided(case: LayoutCase) -> None:
    """Doubling every stride leaves gaps: the layout is Strided and numpy agrees on its order."""
    assume(any(n > 1 for n in case.shape))
    strides = tuple(2 * s for s in case.strides)
    reach_neg = sum(s * (n - 1) for n, s in zip(case.shape, strides, strict=True) if s < 0)
    reach_pos = sum(s * (n - 1) for n, s in zip(case.shape, strides, strict=True) if s > 0)
    desc = _build(case, strides=strides, offset=-reach_neg, span_elems=reach_pos - reach_neg + 1)
    assert isinstance(desc.layout, Strided)
    _label(desc)
    assert list(desc.layout.plan.offsets()) == [int(np.real(x)) for x in _numpy_over(desc).ravel()]


@given(layouts(shape=nonempty_shapes()), st.integers(1, 3), st.booleans())
def test_out_of_span_layouts_are_rejected_with_the_request(
    case: LayoutCase, by: int, low_side: bool
) -> None:
    """A layout reaching past either end of its exact span is a LayoutError naming it."""
    if low_side:
        kwargs: dict[str, Any] = {"offset": case.offset - case.lo - by}  # lo becomes -by
    else:
        kwargs = {"span_elems": max(case.hi + 1 - by, 0)}  # hi no longer fits
    with pytest.raises(LayoutError) as info:
        _build(case, **kwargs)
    _assert_teaching(info.value, "test.build")
    assert info.value.shape == case.shape and info.value.strides == case.strides
    assert info.value.dtype == case.dtype


@given(layouts(shape=nonempty_shapes(max_rank=3)), st.integers(-8, 40), st.integers(-8, 40))
def test_bounds_check_accepts_exactly_the_in_span_requests(
    case: LayoutCase, offset: int, span: int
) -> None:
    """Accepted iff every reachable element lies in [0, span) (empty: 0 <= offset <= span)."""
    span = max(span, 0)
    lo = case.lo - case.offset + offset
    hi = case.hi - case.offset + offset
    fits = 0 <= lo and hi < span
    try:
        _build(case, offset=offset, span_elems=span)
    except LayoutError as err:
        assert not fits, err
    else:
        assert fits


@given(dtype_names(), nonempty_shapes(min_rank=1), st.data())
def test_overflowing_arithmetic_is_rejected(
    name: str, shape: tuple[int, ...], data: st.DataObject
) -> None:
    """Strides, offsets or element counts beyond the platform index range are refused."""
    axis = data.draw(st.integers(0, len(shape) - 1))
    kind = data.draw(st.sampled_from(("stride", "offset", "count", "bytes")))
    strides = [1] * len(shape)
    shp = list(shape)
    offset = 0
    if kind == "stride":
        shp[axis] = max(shp[axis], 2)
        strides[axis] = data.draw(st.sampled_from((1, -1))) * (INTP_MAX // (shp[axis] - 1) + 1)
    elif kind == "offset":
        offset = data.draw(st.sampled_from((INTP_MAX + 1, -INTP_MAX - 2, 2**80)))
    elif kind == "count":
        shp[axis] = INTP_MAX
        shp.append(2)
        strides = [0] * len(shp)
    else:  # representable element count, unrepresentable byte size (a zero-stride broadcast)
        shp = [2**31, 2**31]
        strides = [0, 0]
    case = LayoutCase(name, tuple(shp), tuple(strides), offset, 4)
    if kind == "bytes" and ts.dtype(name).itemsize == 1:
        assert _build(case).size == 2**62  # 2**62 one-byte elements are representable
        return
    with pytest.raises(LayoutError) as info:
        _build(case)
    _assert_teaching(info.value, "test.build")
    if kind != "offset":
        assert "overflow" in info.value.reason


@pytest.mark.parametrize(
    ("shape", "strides", "offset", "fragment"),
    [
        ([2], (1,), 0, "shape must be a tuple"),
        ((2.0,), (1,), 0, "shape must be a tuple"),
        ((True,), (1,), 0, "shape must be a tuple"),
        ((2,), [1], 0, "strides must be a tuple"),
        ((2,), (1.5,), 0, "strides must be a tuple"),
        ((2,), (1,), 0.0, "offset must be an int"),
        ((2,), (1,), True, "offset must be an int"),
        ((2, 3), (1,), 0, "axes but strides has"),
        ((-1,), (1,), 0, "negative extent"),
        ((1,) * 33, (0,) * 33, 0, "rank 33"),
    ],
)
def test_malformed_requests_are_rejected_by_the_arithmetic_check(
    shape: Any, strides: Any, offset: Any, fragment: str
) -> None:
    """Non-int, mismatched, negative or too-deep requests fail check 1 with a LayoutError."""
    with pytest.raises(LayoutError, match=fragment) as info:
        check_arithmetic("test.check", shape, strides, offset, dtype="float64", span="alloc#0[0:8)")
    assert info.value.operation == "test.check"


@given(layouts(), st.integers(1, 7))
def test_misaligned_span_starts_are_rejected(case: LayoutCase, shift: int) -> None:
    """A span whose start is not a multiple of the dtype's alignment is refused (check 4)."""
    dt = ts.dtype(case.dtype)
    storage = ts.allocate_storage(case.nbytes + 8)
    alloc = storage.root.alloc_id
    _head, rest = storage.split(shift)
    body = rest.narrow(0, case.nbytes)
    span = f"alloc#{alloc}[{shift}:{shift + case.nbytes})"
    if shift % dt.alignment == 0:
        desc = D.build("test.build", body.root, body.start, body.stop, dt, case.shape,
                       case.strides, case.offset)
        assert desc.array().flags.aligned and body.span == span
        return
    with pytest.raises(LayoutError, match="aligned") as info:
        D.build("test.build", body.root, body.start, body.stop, dt, case.shape, case.strides,
                case.offset)
    _assert_teaching(info.value, "test.build")
    assert info.value.span == span


@given(dtype_names(), st.integers(1, 64))
def test_wrong_dtype_span_size_is_rejected(name: str, nbytes: int) -> None:
    """A span that is not a whole number of dtype elements is refused (check 3)."""
    dt = ts.dtype(name)
    storage = ts.allocate_storage(nbytes)
    whole = nbytes % dt.itemsize == 0
    try:
        t = ts.Tensor.from_storage(storage, dtype=dt, shape=(0,))
    except LayoutError as err:
        assert not whole
        assert "multiple" in err.reason and err.dtype == name
        assert storage.nbytes == nbytes  # not consumed: still usable
        storage.into_claim()
    else:
        assert whole and t.shape == (0,)


@given(unsupported_dtype_names())
def test_unknown_dtype_names_are_refused_naming_them(name: str) -> None:
    """An unsupported dtype name raises DTypeError whose message contains the name."""
    storage = ts.allocate_storage(16)
    with pytest.raises(DTypeError) as info:
        ts.Tensor.from_storage(storage, dtype=name, shape=(1,))
    assert repr(name) in str(info.value)
    assert storage.nbytes == 16


def test_provider_placement_mismatch_is_rejected() -> None:
    """A descriptor for another placement than the root's provider fails check 5."""
    storage = ts.allocate_storage(16)
    with pytest.raises(LayoutError, match="placement") as info:
        D.build("test.build", storage.root, 0, 16, ts.float64, (2,), (1,), 0, placement="cuda")
    _assert_teaching(info.value, "test.build")


# -- write injectivity (check 6) ------------------------------------------------------------


@given(
    shapes(max_rank=3, max_side=4).flatmap(
        lambda s: st.tuples(st.just(s), strides_for(s, max_abs=6))
    )
)
def test_injectivity_proof_is_sound_against_brute_force(
    request_: tuple[tuple[int, ...], tuple[int, ...]],
) -> None:
    """Whatever prove_injective accepts has pairwise distinct element addresses."""
    shape, strides = request_
    if prove_injective(shape, strides) is not None:
        assert _brute_injective(shape, strides)


@given(injective_layouts())
def test_nested_layouts_always_get_the_injectivity_proof(case: LayoutCase) -> None:
    """Permuted, padded, signed row-major layouts are proven injective (no false refusal)."""
    assert prove_injective(case.shape, case.strides) is not None


@given(layouts(shape=shapes(max_rank=3, max_side=4)))
def test_owner_layouts_are_accepted_iff_proven_injective(case: LayoutCase) -> None:
    """from_storage accepts exactly the provably injective layouts; refusal consumes nothing."""
    storage = ts.allocate_storage(case.nbytes)
    proof = prove_injective(case.shape, case.strides)
    try:
        t = ts.Tensor.from_storage(
            storage, dtype=case.dtype, shape=case.shape, strides=case.strides, offset=case.offset
        )
    except LayoutError as err:
        assert proof is None
        assert "injective" in err.reason
        _assert_teaching(err, "Tensor.from_storage")
        assert storage.byte_range == range(0, case.nbytes)  # unchanged, still ours
    else:
        assert proof is not None
        assert _brute_injective(case.shape, case.strides)
        assert t._desc.has_injectivity_proof


def test_zero_stride_broadcast_cannot_back_an_owner() -> None:
    """A stride-0 axis of extent > 1 aliases elements, so an owner over it is refused."""
    storage = ts.allocate_storage(8)
    with pytest.raises(LayoutError, match="injective"):
        ts.Tensor.from_storage(storage, dtype="float64", shape=(3,), strides=(0,))
    # The read-only descriptor itself is valid arithmetic (groups may alias for reading).
    desc = D.build("test.build", storage.root, 0, 8, ts.float64, (3,), (0,), 0)
    assert desc.injectivity() is None and desc.has_injectivity_proof


def test_validation_counts_one_per_descriptor_build() -> None:
    """Building a descriptor counts exactly one validation on the root's provider."""
    storage = ts.allocate_storage(800)
    before = ts.host_provider.counters.validations
    t = ts.Tensor.from_storage(storage, dtype="float64", shape=(10, 10))
    assert ts.host_provider.counters.validations == before + 1
    v = t.as_view()[::2, ::-3].T
    assert ts.host_provider.counters.validations == before + 1  # derivations reuse the proofs
    del v


@pytest.mark.parametrize("name", ["bool", "float64"])
@pytest.mark.parametrize("shape", [(INTP_MAX, 2), (2**32, 2**32), (INTP_MAX // 3 + 1, 1, 3)])
def test_an_element_count_past_the_index_range_is_refused_as_such(
    name: str, shape: tuple[int, ...]
) -> None:
    """A broadcast (all strides 0) whose element count exceeds the platform index range is
    refused for that reason -- before any byte arithmetic, for one-byte dtypes too -- and
    the error names the shape.  Mutant: the count check ``size > INTP_MAX`` turned into
    ``is`` (the byte-size check later still refuses it, with another reason)."""
    case = LayoutCase(name, shape, (0,) * len(shape), 0, 4)
    with pytest.raises(LayoutError) as info:
        _build(case)
    assert "the element count overflows the platform index range" in info.value.reason
    assert info.value.shape == shape
