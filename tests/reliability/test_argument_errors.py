"""Bad arguments get numpy's error semantics and a message naming the op and the argument;
nothing is computed.  Axes, empty value lists, dtype conversions that would change values,
and the storage kernel's creation and read edge cases."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy.exceptions import AxisError as NumpyAxisError

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import ArgumentError, AxisError
from tenferro_storage.errors import (
    BadIndexError,
    ConversionError,
    LayoutError,
    OwnershipError,
    TenferroError,
)


def _x(shape: tuple[int, ...] = (2, 3)) -> np.ndarray[Any, Any]:
    return np.arange(float(np.prod(shape))).reshape(shape)


AXIS_CALLS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "sum": (lambda x: ad.sum(x, axis=5), "sum"),
    "sum-negative": (lambda x: ad.sum(x, axis=-3), "sum"),
    "sum-tuple": (lambda x: ad.sum(x, axis=(0, 2)), "sum"),
    "mean": (lambda x: ad.mean(x, axis=2), "mean"),
    "max": (lambda x: ad.max(x, axis=2), "max"),
    "min": (lambda x: ad.min(x, axis=-3), "min"),
    "prod": (lambda x: ad.prod(x, axis=7), "prod"),
    "concatenate": (lambda x: ad.concatenate([x, x], axis=2), "concatenate"),
    "stack": (lambda x: ad.stack([x, x], axis=3), "stack"),
    "expand_dims": (lambda x: ad.expand_dims(x, 3), "expand_dims"),
    "swapaxes": (lambda x: ad.swapaxes(x, 0, 2), "swapaxes"),
    "transpose": (lambda x: ad.transpose(x, (0, 2)), "transpose"),
    "softmax": (lambda x: ad.softmax(x, axis=2), "softmax"),
    "log_softmax": (lambda x: ad.log_softmax(x, axis=-3), "log_softmax"),
}


@pytest.mark.parametrize("case", list(AXIS_CALLS), ids=list(AXIS_CALLS))
def test_an_axis_out_of_range_is_refused_as_numpy_does(case: str) -> None:
    """AxisError (a numpy AxisError, ValueError and IndexError, and a project error) naming
    the op and the axis; never wrapped modulo ndim."""
    call, op = AXIS_CALLS[case]
    with pytest.raises(NumpyAxisError) as info:
        call(_x())
    err = info.value
    assert isinstance(err, TenferroError | ArgumentError)
    assert isinstance(err, ValueError) and isinstance(err, IndexError)
    assert op in str(err) and "axis" in str(err)
    if isinstance(err, AxisError):
        assert err.operation == op


def test_numpy_integer_axes_are_accepted() -> None:
    x = _x()
    np.testing.assert_array_equal(ad.sum(x, axis=np.int64(1)).to_numpy(), x.sum(axis=1))
    np.testing.assert_array_equal(ad.max(x, axis=(np.int32(0),)).to_numpy(), x.max(axis=0))
    assert ad.expand_dims(x, np.int64(-1)).shape == (2, 3, 1)
    assert ad.swapaxes(x, np.int64(0), np.int64(1)).shape == (3, 2)


@pytest.mark.parametrize(
    "call",
    [lambda: ad.concatenate([]), lambda: ad.stack([]), lambda: ad.stack(())],
    ids=["concatenate-[]", "stack-[]", "stack-()"],
)
def test_empty_value_lists_are_refused_clearly(call: Callable[[], Any]) -> None:
    with pytest.raises(ArgumentError, match="argument 'xs' is empty"):
        call()


def test_an_axis_of_a_0d_value_is_refused() -> None:
    with pytest.raises(AxisError, match="sum: argument 'axis': axis 0 is out of bounds"):
        ad.sum(np.array(2.0), axis=0)
    with pytest.raises(ArgumentError, match="0-d values"):
        ad.concatenate([np.array(1.0), np.array(2.0)])


def test_shapes_that_do_not_fit_name_the_op() -> None:
    with pytest.raises(ArgumentError, match="concatenate: argument 'xs'\\[1\\]"):
        ad.concatenate([_x((2, 3)), _x((2, 4))])
    with pytest.raises(ArgumentError, match="stack"):
        ad.stack([_x((2, 3)), _x((3, 2))])
    with pytest.raises(ArgumentError, match="reshape"):
        ad.reshape(_x(), (4, 2))
    with pytest.raises(ArgumentError, match="broadcast_to"):
        ad.broadcast_to(_x(), (3, 3))
    with pytest.raises(ArgumentError, match="add"):
        ad.add(_x((2, 3)), _x((2, 2)))


def test_astype_accepts_numpy_spellings_and_exp_of_bool_is_float32() -> None:
    x = _x()
    assert str(ad.astype(x, np.float32).dtype) == "float32"
    assert str(ad.astype(x, float).dtype) == "float64"
    assert str(ad.astype(x, np.dtype("complex64")).dtype) == "complex64"
    assert str(ad.exp(np.array([True, False])).dtype) == "float32"  # as JAX; never float16
    assert str(ad.sin(np.array([1, 2], np.int64)).dtype) == "float64"


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: ts.from_numpy(np.array([np.nan, 1.0]), dtype=int), "NaN"),
        (lambda: ts.from_numpy(np.array([np.inf]), dtype="int32"), "NaN"),
        (lambda: ts.from_numpy(np.array([1 + 2j]), dtype=float), "imaginary"),
        (lambda: ts.from_numpy(np.array([3e10]), dtype="int32"), "range"),
        (lambda: ts.full((2,), np.nan, dtype="int64"), "NaN"),
        (lambda: ts.full((2,), 1 + 1j, dtype="float32"), "imaginary"),
    ],
    ids=["nan->int", "inf->int32", "complex->float", "overflow->int32", "full-nan", "full-complex"],
)
def test_conversions_that_would_change_values_are_refused(
    call: Callable[[], Any], words: str
) -> None:
    """numpy would store INT_MIN or drop the imaginary part with only a warning."""
    from tenferro_storage import ledger

    before = ledger.live_bytes()
    with pytest.raises(ConversionError, match=words) as info:
        call()
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)
    assert ledger.live_bytes() == before


def test_lossless_conversions_still_work() -> None:
    assert ts.from_numpy(np.array([1 + 0j]), dtype=float).to_numpy().tolist() == [1.0]
    assert ts.full((2,), 3, dtype="float32").to_numpy().tolist() == [3.0, 3.0]
    assert str(ts.from_numpy(np.array([1.0]), dtype=np.float32).dtype) == "float32"


def test_arange_of_numpy_integers_is_int64() -> None:
    assert str(ts.arange(np.int64(3)).dtype) == "int64"
    assert str(ts.arange(np.int32(1), np.int64(4)).dtype) == "int64"
    assert str(ts.arange(np.float32(3)).dtype) == "float64"


def test_views_cannot_be_constructed_directly() -> None:
    for cls in (ts.TensorView, ts.TensorViewMut, ts.Tensor):
        with pytest.raises(OwnershipError, match=r"cannot be constructed directly; .*as_view|use"):
            cls()


def test_huge_steps_and_strides_read_correctly() -> None:
    """A slice with step 2**62 or a descriptor with stride 2**62 over an extent-1 axis is
    valid, and reading it does not hit numpy's "Maximum allowed dimension exceeded"."""
    t = ts.from_numpy(np.arange(10.0))
    with t.as_view() as v:
        assert v[:: 2**62].to_numpy().tolist() == [0.0]
        assert v[3 :: 2**62].to_numpy().tolist() == [3.0]
    s = ts.Tensor.from_storage(ts.allocate_storage(16), dtype="float64", shape=(1, 2),
                               strides=(2**62, 1))
    s.fill(2.0)
    assert s.to_numpy().tolist() == [[2.0, 2.0]]
    del t, s


def test_bad_basic_indices_are_index_errors_of_the_project() -> None:
    t = ts.from_numpy(_x())
    with t.as_view() as v:
        with pytest.raises(BadIndexError, match="out of bounds") as info:
            v[5]
        assert isinstance(info.value, IndexError) and isinstance(info.value, LayoutError)
        with pytest.raises(BadIndexError, match="slice"):
            v[::0]
    with pytest.raises(LayoutError, match="fill"):
        t.fill(np.ones(4))
    with pytest.raises(ConversionError):
        ts.from_numpy(np.ones(2, np.int64)).fill(np.nan)
    np.testing.assert_array_equal(t.to_numpy(), _x())
    del t
