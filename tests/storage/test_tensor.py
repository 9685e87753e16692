"""The tensor triad and creation functions (``_tensor.py``, ``_creation.py``, ``random.py``).

Creation records exactly its ledger events; ``to_numpy``/``duplicate``/``from_numpy``
copy with their reasons; slicing and transposition follow numpy exactly; ``as_view()``
and ``as_view_mut()`` are O(1): no ledger event, no new root reference, no allocation
that grows with the tensor.
"""

from __future__ import annotations

import sys
import tracemalloc
import typing
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tenferro_storage as ts
from tenferro_storage import _creation, _rank, ledger
from tenferro_storage.errors import CopyForbiddenError, DTypeError, LayoutError
from tests.strategies import (
    LABEL_DTYPE_NAMES,
    LayoutCase,
    dtype_names,
    float_arrays,
    index_keys,
    injective_layouts,
    permutations_of,
    shapes,
    unsupported_dtype_names,
)

A = ledger.AllocationReason
C = ledger.CopyReason


def _labelled(case: LayoutCase) -> tuple[ts.Tensor[Any, Any], np.ndarray[Any, Any]]:
    """An owner over ``case`` whose span holds labels 0..n-1, and numpy's array over it."""
    storage = ts.allocate_storage(case.nbytes)
    span = np.ndarray((case.span_elems,), dtype=case.dtype, buffer=storage.root._allocation)
    span[...] = np.arange(case.span_elems)
    t = ts.Tensor.from_storage(
        storage, dtype=case.dtype, shape=case.shape, strides=case.strides, offset=case.offset
    )
    item = t.dtype.itemsize
    ref = np.ndarray(
        case.shape, dtype=case.dtype, buffer=span,
        offset=case.offset * item if t.size else 0,
        strides=tuple(s * item for s in case.strides),
    )
    return t, ref


def _elem_strides(arr: np.ndarray[Any, Any]) -> tuple[int, ...]:
    return tuple(s // arr.itemsize for s in arr.strides)


# -- creation and its ledger events ---------------------------------------------------------

CREATORS: dict[str, Callable[[str], ts.Tensor[Any, Any]]] = {
    "zeros": lambda d: ts.zeros((2, 3), d),
    "ones": lambda d: ts.ones((2, 3), dtype=d),
    "full": lambda d: ts.full((2, 3), 1, dtype=d),
    "arange": lambda d: ts.arange(0, 2 if d == "bool" else 6, 1, dtype=d),
}
NUMPY_CREATORS: dict[str, Callable[[str], np.ndarray[Any, Any]]] = {
    "zeros": lambda d: np.zeros((2, 3), d),
    "ones": lambda d: np.ones((2, 3), d),
    "full": lambda d: np.full((2, 3), 1, d),
    "arange": lambda d: np.arange(0, 2 if d == "bool" else 6, 1, dtype=d),
}


@pytest.mark.parametrize("name", list(CREATORS))
@pytest.mark.parametrize("dtype", ts._dtypes.SUPPORTED)
def test_creation_records_one_operation_output_and_no_copy(name: str, dtype: str) -> None:
    """zeros/ones/full/arange: one OPERATION_OUTPUT allocation of nbytes, no copy event."""
    with ledger.capture() as rec:
        t = CREATORS[name](dtype)
    expected = NUMPY_CREATORS[name](dtype)
    assert rec.allocations == Counter({A.OPERATION_OUTPUT: 1})
    assert rec.copies == Counter()
    assert rec.allocation_bytes[A.OPERATION_OUTPUT] == expected.nbytes == t.nbytes
    assert t.dtype == dtype and t.shape == expected.shape
    assert t.strides == _elem_strides(expected) and t.offset == 0
    assert isinstance(t.layout, ts.Contiguous)
    with ledger.capture() as rec2:
        np.testing.assert_array_equal(t.to_numpy(), expected)
    assert rec2.allocations == Counter()


def test_creation_defaults_and_shapes() -> None:
    """Default dtype is float64; arange infers int64/float64; ints and lists are shapes."""
    assert ts.zeros(3).dtype == "float64" and ts.zeros(3).shape == (3,)
    assert ts.ones([2, 1]).shape == (2, 1) and ts.zeros(()).shape == ()
    assert ts.arange(4).dtype == "int64" and ts.arange(0.5, 2).dtype == "float64"
    assert ts.arange(4).to_numpy().tolist() == [0, 1, 2, 3]
    assert ts.full((), 2.5).item() == 2.5
    for bad in (-1, (2, -1), 2.0, (True,), "3"):
        with pytest.raises(ValueError, match="shape"):
            ts.zeros(bad)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "make",
    [
        lambda d: ts.zeros(2, d),
        lambda d: ts.ones(2, dtype=d),
        lambda d: ts.full(2, 0, dtype=d),
        lambda d: ts.arange(2, dtype=d),
        lambda d: ts.from_numpy([1, 2], dtype=d),
        lambda d: ts.random.default_rng(0).normal(2, dtype=d),
        lambda d: ts.dtype(d),
    ],
    ids=["zeros", "ones", "full", "arange", "from_numpy", "random.normal", "dtype"],
)
@given(name=unsupported_dtype_names())
def test_unknown_dtype_names_raise_dtype_error_naming_them(
    make: Callable[[str], Any], name: str
) -> None:
    """Every creation function refuses an unknown dtype with an error that names it."""
    with ledger.capture() as rec:
        with pytest.raises(DTypeError) as info:
            make(name)
    assert repr(name) in str(info.value)
    assert "supported: bool, int32" in str(info.value)
    assert rec.events == []


@pytest.mark.parametrize("dt", [np.float16, np.uint8, np.int8, np.object_, np.str_])
def test_from_numpy_refuses_unsupported_array_dtypes(dt: Any) -> None:
    """from_numpy of an array whose numpy dtype is unsupported names that dtype."""
    src = np.zeros(2, dtype=dt)
    with pytest.raises(DTypeError, match=str(src.dtype)):
        ts.from_numpy(src)


@given(float_arrays())
def test_from_numpy_is_one_transfer_into_a_fresh_owner(src: np.ndarray[Any, Any]) -> None:
    """from_numpy: one TRANSFER copy and one TRANSFER_DESTINATION allocation; no aliasing."""
    refs = sys.getrefcount(src)
    with ledger.capture() as rec:
        t = ts.from_numpy(src)
    assert rec.allocations == Counter({A.TRANSFER_DESTINATION: 1})
    assert rec.copies == Counter({C.TRANSFER: 1})
    assert rec.copy_bytes[C.TRANSFER] == src.nbytes
    assert sys.getrefcount(src) == refs, "the source must not be referenced afterwards"
    np.testing.assert_array_equal(t.to_numpy(), src)
    if src.size:
        src.flat[0] += 1
        assert t.to_numpy().flat[0] != src.flat[0]


def test_from_numpy_accepts_non_contiguous_sources_and_converts_dtypes() -> None:
    """A strided numpy source arrives C-contiguous; dtype= converts within the one transfer."""
    src = np.arange(12.0).reshape(3, 4)[::-1, ::2]
    with ledger.capture() as rec:
        t = ts.from_numpy(src, dtype="complex64")
    assert rec.copies == Counter({C.TRANSFER: 1}) and t.layout == ts.Contiguous(range(0, 6))
    np.testing.assert_array_equal(t.to_numpy(), src.astype(np.complex64))


@given(dtype_names(), shapes(max_side=4))
def test_to_numpy_is_one_transfer_copy_and_no_allocation(name: str, shape: tuple[int, ...]) -> None:
    """to_numpy on owner, view and mutable view: one TRANSFER copy, no allocation event."""
    t = ts.ones(shape, dtype=name)
    for reader in (t, t.as_view()):
        with ledger.capture() as rec:
            out = reader.to_numpy()
        assert rec.copies == Counter({C.TRANSFER: 1}) and rec.allocations == Counter()
        assert out.flags.writeable and out.flags.c_contiguous and out.flags.owndata
        out[...] = 0  # an independent copy
    del reader
    with t.as_view_mut() as m, ledger.capture() as rec:
        m.to_numpy()
    assert rec.copies == Counter({C.TRANSFER: 1})
    assert t.to_numpy().all() or t.size == 0


@given(injective_layouts(dtype=st.sampled_from(LABEL_DTYPE_NAMES)))
def test_duplicate_is_an_explicit_copy_into_a_contiguous_owner(case: LayoutCase) -> None:
    """duplicate(): one EXPLICIT_DUPLICATE copy + one EXPLICIT_DUPLICATE_DESTINATION allocation."""
    t, ref = _labelled(case)
    with ledger.capture() as rec:
        d = t.duplicate()
    assert rec.allocations == Counter({A.EXPLICIT_DUPLICATE_DESTINATION: 1})
    assert rec.copies == Counter({C.EXPLICIT_DUPLICATE: 1})
    assert d.layout == ts.Contiguous(range(0, t.size)) and d.span != t.span
    np.testing.assert_array_equal(d.to_numpy(), ref)
    d.fill(0)
    np.testing.assert_array_equal(t.to_numpy(), ref)


def test_kernel_writes_and_views_record_nothing() -> None:
    """fill, slicing, transposing, reshaping and prepared access add no ledger event."""
    t = ts.zeros((4, 4))
    with ledger.capture() as rec:
        t.fill(1.0)
        v = t[1:, ::2].T
        r = t.reshape(16)
        with v.prepare_host() as p:
            p.as_array().sum()
        del r, v
        with t.as_view_mut().prepare_host_mut() as pw:
            pw.as_slice_mut()[:] = 2.0
    assert rec.events == []


def test_numpy_conversion_is_refused() -> None:
    """np.asarray on owners and views raises TypeError pointing at to_numpy()."""
    t = ts.zeros(2)
    for obj in (t, t.as_view()):
        with pytest.raises(TypeError, match="to_numpy"):
            np.asarray(obj)
    del obj
    with t.as_view_mut() as m, pytest.raises(TypeError, match="to_numpy"):
        np.asarray(m)


def test_item_len_and_repr() -> None:
    """item() needs one element; len() is the first extent; repr names the span, no address."""
    t = ts.arange(3)
    assert len(t) == 3 and len(t.as_view()) == 3 and t[1].item() == 1
    with pytest.raises(ValueError, match="3 elements"):
        t.item()
    with pytest.raises(TypeError):
        len(ts.zeros(()))
    for obj in (t, t.as_view(), ts.zeros(100)):
        text = repr(obj)
        assert "alloc#" in text and "0x" not in text
    m = t.as_view_mut()
    assert "<mutably borrowed>" in repr(t)
    m.release()


# -- slicing and transposition follow numpy -------------------------------------------------


@given(injective_layouts(dtype=st.sampled_from(LABEL_DTYPE_NAMES)), st.data())
def test_basic_indexing_matches_numpy(case: LayoutCase, data: st.DataObject) -> None:
    """view[key] has numpy's shape, element strides and values, as a new checked view."""
    t, ref = _labelled(case)
    key = data.draw(index_keys(case.shape))
    expected = np.asarray(ref[key])
    before = ts.host_provider.counters.validations
    with ledger.capture() as rec:
        v = t.as_view()[key]
    assert rec.events == [] and ts.host_provider.counters.validations == before
    assert v.shape == expected.shape
    if expected.size > 1:
        assert all(
            s == e
            for s, e, n in zip(v.strides, _elem_strides(expected), expected.shape, strict=True)
            if n > 1
        )
    np.testing.assert_array_equal(v.to_numpy(), expected)
    with v.prepare_host() as p:
        np.testing.assert_array_equal(p.as_array(), expected)


@given(injective_layouts(dtype=st.sampled_from(LABEL_DTYPE_NAMES)), st.data())
def test_transpose_matches_numpy(case: LayoutCase, data: st.DataObject) -> None:
    """transpose(*axes) and T permute shape and strides exactly as numpy does."""
    t, ref = _labelled(case)
    axes = data.draw(permutations_of(len(case.shape)))
    v = t.transpose(*axes)
    assert v.shape == ref.transpose(axes).shape
    assert v.strides == tuple(case.strides[a] for a in axes)
    np.testing.assert_array_equal(v.to_numpy(), ref.transpose(axes))
    np.testing.assert_array_equal(t.T.to_numpy(), ref.T)
    np.testing.assert_array_equal(t.as_view().T.T.to_numpy(), ref)


@given(injective_layouts(dtype=st.sampled_from(LABEL_DTYPE_NAMES)), st.data())
def test_mutable_slices_write_where_numpy_writes(case: LayoutCase, data: st.DataObject) -> None:
    """Filling view_mut[key] changes exactly the elements numpy's ref[key] = v changes."""
    t, ref = _labelled(case)
    key = data.draw(index_keys(case.shape))
    expected = ref.copy()
    expected[key] = -1
    with t.as_view_mut() as m:
        child = m[key]
        child.fill(-1)
        child.release()
    np.testing.assert_array_equal(t.to_numpy(), expected)


def test_bad_indices_and_axes_are_refused_like_numpy(no_operator_backend: None) -> None:
    """Out-of-range ints raise IndexError; bad permutations raise LayoutError; arrays (without
    an operator backend) TypeError."""
    t = ts.zeros((2, 3))
    with pytest.raises(IndexError, match="out of bounds"):
        t[2]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        t[..., ...]
    with pytest.raises(TypeError, match="advanced indexing"):
        t[[0, 1]]
    with pytest.raises(LayoutError, match="permutation"):
        t.transpose(0, 0)
    with pytest.raises(LayoutError, match="out of range"):
        t.transpose(0, 2)


def test_reshape_is_a_view_of_contiguous_layouts_only() -> None:
    """reshape of a Contiguous layout shares memory; a strided layout is refused."""
    t = ts.arange(6)
    with t.as_view_mut() as m:
        r = m.reshape(2, 3)
        r[1].fill(9)
        r.release()
    assert t.to_numpy().tolist() == [0, 1, 2, 9, 9, 9]
    with pytest.raises(LayoutError, match="strided"):
        t.reshape(2, 3).T.reshape(6)
    with pytest.raises(LayoutError, match="cannot reshape"):
        t.reshape(4)


_FAILING_DELEGATED_READS: dict[str, tuple[Callable[[Any], Any], type[Exception]]] = {
    "item": (lambda x: x.item(), LayoutError),  # six elements
    "transpose": (lambda x: x.transpose(0, 0), LayoutError),
    "reshape": (lambda x: x.reshape(4), LayoutError),
    "to_numpy": (lambda x: x.to_numpy(), CopyForbiddenError),  # inside forbid_copies()
    "duplicate": (lambda x: x.duplicate(), CopyForbiddenError),
}


@pytest.mark.parametrize("name", sorted(_FAILING_DELEGATED_READS))
def test_a_failed_delegated_read_leaves_nothing_borrowed_while_its_error_is_kept(
    name: str,
) -> None:
    """An owner's or a mutable view's read-only method runs on a temporary shared view; when
    it fails, that borrow ends at once: the owner (the mutable view) can be written while
    the exception, and the traceback that holds the failed call's frames, is kept.

    Fails when ``_tensor._through_view`` stops releasing on error (checked: mutant
    ``st-delegated-read-release-on-error``)."""
    call, error = _FAILING_DELEGATED_READS[name]
    t = ts.arange(6.0)
    for receiver in ("owner", "mutable view"):
        m = t.as_view_mut() if receiver == "mutable view" else None
        x = t if m is None else m
        with ledger.forbid_copies(), pytest.raises(error) as err:
            call(x)
        x.fill(1.0)  # not left borrowed, even while the traceback (kept in err) lives
        del err, x
        if m is not None:
            m.release()
    assert t.to_numpy().tolist() == [1.0] * 6


# -- as_view / as_view_mut are O(1) -----------------------------------------------------------


def _view_cycle(t: ts.Tensor[Any, Any], n: int) -> None:
    for _ in range(n):
        v = t.as_view()
        v.release()
        m = t.as_view_mut()
        m.release()


@pytest.mark.parametrize("shape", [(), (7,), (3, 4, 5)])
def test_as_view_records_no_ledger_event_and_no_root_reference(shape: tuple[int, ...]) -> None:
    """as_view()/as_view_mut(): no ledger event, no provider work, root refcount unchanged."""
    t = ts.zeros(shape)
    root = t._storage.root
    refs = sys.getrefcount(root)
    counters = ts.host_provider.counters.snapshot()
    with ledger.capture() as rec:
        v = t.as_view()
        vv = v.as_view()
        assert sys.getrefcount(root) == refs
        del v, vv
        m = t.as_view_mut()
        mv = m.as_view()
        assert sys.getrefcount(root) == refs
        del mv, m
    assert rec.events == []
    assert ts.host_provider.counters.snapshot() == counters
    del root


def test_as_view_allocation_is_independent_of_size() -> None:
    """tracemalloc: the bytes a view cycle allocates do not grow with the element count."""
    small, large = ts.zeros(10), ts.zeros(10**6)
    peaks = []
    for t in (small, large, small, large):
        _view_cycle(t, 3)  # warm caches
        tracemalloc.start()
        try:
            _view_cycle(t, 50)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    assert max(peaks) < 4096, peaks
    assert abs(peaks[1] - peaks[0]) < 1024 and abs(peaks[3] - peaks[2]) < 1024, peaks


# -- random (the generator API is tested in test_random.py) --------------------------------


@pytest.mark.parametrize("fn", [ts.random.normal, ts.random.uniform])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_deprecated_random_initializers_warn_and_draw_as_before(fn: Any, dtype: str) -> None:
    """The module-level normal/uniform warn (DeprecationWarning naming default_rng) and still
    draw what they drew: numpy's float64 stream for the seed, rounded to the dtype."""
    with ledger.capture() as rec, pytest.warns(DeprecationWarning, match="default_rng"):
        a = fn((3, 2), seed=7, dtype=dtype)
    with pytest.warns(DeprecationWarning, match="same draws on every call"):
        b = fn((3, 2), seed=np.random.default_rng(7), dtype=dtype)
    assert rec.allocations == Counter({A.OPERATION_OUTPUT: 1}) and rec.copies == Counter()
    assert a.dtype == dtype and a.shape == (3, 2)
    ref = getattr(np.random.default_rng(7), fn.__name__)(size=(3, 2)).astype(dtype)
    np.testing.assert_array_equal(a.to_numpy(), ref)
    np.testing.assert_array_equal(b.to_numpy(), ref)
    with pytest.raises(TypeError, match="float dtype"), pytest.warns(DeprecationWarning):
        fn(2, dtype="int64")


@pytest.mark.parametrize("name", ["zeros", "ones", "full"])
def test_a_creation_function_declares_one_overload_per_static_rank(name: str) -> None:
    """``zeros``/``ones``/``full`` carry one registered overload per static rank (0 to 4,
    then dynamic), in that order, so a type checker and ``typing.get_overloads`` (IDEs,
    the docs) give ``Tensor[Any, RankN]`` for an N-tuple shape.  Mutant: one ``@overload``
    decorator removed from ``ones`` (that signature silently stops being an overload)."""
    fn = getattr(_creation, name)
    got = [typing.get_type_hints(o)["return"] for o in typing.get_overloads(fn)]
    ranks = [_rank.Rank0, _rank.Rank1, _rank.Rank2, _rank.Rank3, _rank.Rank4, _rank.DynRank]
    assert [typing.get_args(r)[1] for r in got] == ranks
