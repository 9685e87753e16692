"""An invalid axis argument raises the same documented classes wherever it is given:
:class:`~tenferro_ad.errors.AxisError` for an axis out of range (numpy's class, so also an
``IndexError`` and a ``ValueError``) and :class:`~tenferro_ad.errors.ArgumentTypeError` for
an axis that is not an integer.  The message names the op the user called and the argument,
never a raw Python message ("tuple index out of range", "invalid literal for int()"), and
a refused call records nothing and leaves its inputs unchanged.

The rows cover the ops that got this wrong before (``linalg.diagonal``/``linalg.trace``
reported ``IndexOutOfBoundsError`` named ``diagonal``, ``tensordot`` an ``EinsumError``,
``fftshift``/``ifftshift`` "tuple index out of range", the 1-D FFTs named ``axes`` for
``axis``, ``rollaxis``'s ``start`` a raw comparison error, composites named for the op
inside them) and a sweep of the other axis-taking ops.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import ArgumentError, ArgumentTypeError, AxisError

_RAW = re.compile(
    r"tuple index out of range|list index out of range|invalid literal|object is not "
    r"iterable|cannot be interpreted as an integer|not supported between instances|"
    r"tuple indices must be|index \d+ is out of bounds for axis"
)


def _m(*shape: int) -> Any:
    return ts.from_numpy(np.arange(float(np.prod(shape))).reshape(shape))


X = _m(3, 3)
IDX = np.zeros((3, 3), np.int64)

# name -> (op named in the message, argument named, call taking the bad value)
AXIS_CALLS: dict[str, tuple[str, str, Callable[[Any, Any], Any]]] = {
    "linalg.diagonal axis1": ("diagonal", "axis1", lambda x, a: ad.linalg.diagonal(x, axis1=a)),
    "linalg.diagonal axis2": ("diagonal", "axis2", lambda x, a: ad.linalg.diagonal(x, axis2=a)),
    "linalg.trace axis1": ("trace", "axis1", lambda x, a: ad.linalg.trace(x, axis1=a)),
    "linalg.trace axis2": ("trace", "axis2", lambda x, a: ad.linalg.trace(x, axis2=a)),
    "diagonal axis1": ("diagonal", "axis1", lambda x, a: ad.diagonal(x, axis1=a)),
    "trace axis2": ("trace", "axis2", lambda x, a: ad.trace(x, axis2=a)),
    "tensordot pair": ("tensordot", "axes", lambda x, a: ad.tensordot(x, x, axes=([0], [a]))),
    "fftshift int": ("fftshift", "axes", lambda x, a: ad.fft.fftshift(x, axes=a)),
    "fftshift tuple": ("fftshift", "axes", lambda x, a: ad.fft.fftshift(x, axes=(0, a))),
    "ifftshift int": ("ifftshift", "axes", lambda x, a: ad.fft.ifftshift(x, axes=a)),
    "ifftshift tuple": ("ifftshift", "axes", lambda x, a: ad.fft.ifftshift(x, axes=(0, a))),
    "fft axis": ("fft", "axis", lambda x, a: ad.fft.fft(x, axis=a)),
    "ifft axis": ("ifft", "axis", lambda x, a: ad.fft.ifft(x, axis=a)),
    "rfft axis": ("rfft", "axis", lambda x, a: ad.fft.rfft(x, axis=a)),
    "irfft axis": ("irfft", "axis", lambda x, a: ad.fft.irfft(x, axis=a)),
    "fft2 axes": ("fft2", "axes", lambda x, a: ad.fft.fft2(x, axes=(0, a))),
    "rfft2 axes": ("rfft2", "axes", lambda x, a: ad.fft.rfft2(x, axes=(0, a))),
    "fftn axes": ("fftn", "axes", lambda x, a: ad.fft.fftn(x, axes=(0, a))),
    "irfftn axes": ("irfftn", "axes", lambda x, a: ad.fft.irfftn(x, axes=(a,))),
    "rollaxis axis": ("rollaxis", "axis", lambda x, a: ad.rollaxis(x, a)),
    "rollaxis start": ("rollaxis", "start", lambda x, a: ad.rollaxis(x, 0, a)),
    "sort": ("sort", "axis", lambda x, a: ad.sort(x, axis=a)),
    "partition": ("partition", "axis", lambda x, a: ad.partition(x, 1, axis=a)),
    "std": ("std", "axis", lambda x, a: ad.std(x, axis=a)),
    "average": ("average", "axis", lambda x, a: ad.average(x, axis=a)),
    "average weights": ("average", "axis",
                        lambda x, a: ad.average(x, axis=a, weights=np.ones((3, 3)))),
    "nansum": ("nansum", "axis", lambda x, a: ad.nansum(x, axis=a)),
    "nanmean": ("nanmean", "axis", lambda x, a: ad.nanmean(x, axis=a)),
    # the sweep: ops that were already right stay so
    "sum": ("sum", "axis", lambda x, a: ad.sum(x, axis=a)),
    "mean": ("mean", "axis", lambda x, a: ad.mean(x, axis=a)),
    "var": ("var", "axis", lambda x, a: ad.var(x, axis=a)),
    "any": ("any", "axis", lambda x, a: ad.any(x, axis=a)),
    "argmax": ("argmax", "axis", lambda x, a: ad.argmax(x, axis=a)),
    "argsort": ("argsort", "axis", lambda x, a: ad.argsort(x, axis=a)),
    "cumsum": ("cumsum", "axis", lambda x, a: ad.cumsum(x, axis=a)),
    "cumprod": ("cumprod", "axis", lambda x, a: ad.cumprod(x, axis=a)),
    "flip": ("flip", "axis", lambda x, a: ad.flip(x, axis=a)),
    "roll": ("roll", "axis", lambda x, a: ad.roll(x, 1, axis=a)),
    "moveaxis": ("moveaxis", "source", lambda x, a: ad.moveaxis(x, a, 0)),
    "swapaxes": ("swapaxes", "axis1", lambda x, a: ad.swapaxes(x, a, 0)),
    "expand_dims": ("expand_dims", "axis", lambda x, a: ad.expand_dims(x, axis=a)),
    "stack": ("stack", "axis", lambda x, a: ad.stack([x, x], axis=a)),
    "concatenate": ("concatenate", "axis", lambda x, a: ad.concatenate([x, x], axis=a)),
    "split": ("split", "axis", lambda x, a: ad.split(x, 3, axis=a)),
    "take_along_axis": ("take_along_axis", "axis",
                        lambda x, a: ad.take_along_axis(x, IDX, axis=a)),
    "linalg.norm": ("norm", "axis", lambda x, a: ad.linalg.norm(x, axis=a)),
    "logsumexp": ("logsumexp", "axis", lambda x, a: ad.logsumexp(x, axis=a)),
    "softmax": ("softmax", "axis", lambda x, a: ad.softmax(x, axis=a)),
}

BAD = [
    pytest.param(99, AxisError, id="99"),
    pytest.param(-99, AxisError, id="-99"),
    pytest.param("a", ArgumentTypeError, id="str"),
    pytest.param(1.5, ArgumentTypeError, id="float"),
]


def _check(exc: BaseException, cls: type[BaseException], op: str, arg: str) -> None:
    msg = str(exc)
    assert type(exc) is cls, f"{type(exc).__name__}: {msg}"
    assert msg.startswith(f"{op}: "), msg
    # by name, or by position and name (``tenferro_ad.trace(x, *args)``: "argument 3 ('axis2')")
    assert re.search(rf"argument (?:\d+ \()?'{arg}'", msg), msg
    assert not _RAW.search(msg), msg
    # no inner op's name behind the caller's ("std: argument 'axis': var: ...")
    assert not re.match(rf"{re.escape(op)}: argument '\w+': \w+: ", msg), msg


@pytest.mark.parametrize(("bad", "cls"), BAD)
@pytest.mark.parametrize("name", sorted(AXIS_CALLS))
def test_an_invalid_axis_raises_the_documented_class(name: str, bad: Any, cls: type) -> None:
    op, arg, call = AXIS_CALLS[name]
    with pytest.raises(cls) as info:
        call(X, bad)
    _check(info.value, cls, op, arg)
    if cls is AxisError:  # numpy's class, as numpy and JAX raise it
        assert isinstance(info.value, np.exceptions.AxisError | IndexError | ValueError)
        assert info.value.operation == op


@pytest.mark.parametrize("name", sorted(AXIS_CALLS))
def test_a_refused_axis_records_nothing_and_changes_nothing(name: str) -> None:
    """The axis is checked before any work: a recording tape gets no node, the owner keeps
    its values."""
    _op, _arg, call = AXIS_CALLS[name]
    with ad.Tape(name="refusals") as tape:
        w = tape.watch(_m(3, 3))
        before = len(tape.nodes)
        for bad in (99, "a"):
            with pytest.raises((AxisError, ArgumentTypeError)):
                call(w, bad)
        assert len(tape.nodes) == before
    np.testing.assert_array_equal(w.to_numpy(), np.arange(9.0).reshape(3, 3))
    owner = _m(3, 3)  # an owner passed directly is neither consumed nor changed
    for bad in (99, "a"):
        with pytest.raises((AxisError, ArgumentTypeError)):
            call(owner, bad)
    np.testing.assert_array_equal(owner.to_numpy(), np.arange(9.0).reshape(3, 3))


JIT_CALLS = ["linalg.diagonal axis1", "linalg.trace axis2", "tensordot pair", "fftshift int",
             "ifftshift tuple", "fft axis", "rollaxis start", "nansum"]


@pytest.mark.parametrize(("bad", "cls"), BAD)
@pytest.mark.parametrize("name", JIT_CALLS)
def test_an_invalid_axis_under_jit_raises_the_same(name: str, bad: Any, cls: type) -> None:
    """Traced, the same check runs at trace time with the same class and words."""
    op, arg, call = AXIS_CALLS[name]
    with pytest.raises(cls) as info:
        ad.jit(lambda v: call(v, bad))(np.ones((3, 3)))
    _check(info.value, cls, op, arg)


@pytest.mark.parametrize("fn", ["diagonal", "trace"])
@pytest.mark.parametrize("offset", ["a", 1.5, 1.0, None])
def test_linalg_diagonal_refuses_a_non_integer_offset(fn: str, offset: Any) -> None:
    """As ``ad.diagonal`` and numpy: an offset that is not an integer is refused by type
    (it was ``int()``-converted: a float truncated, a string numpy's ``ValueError``)."""
    with pytest.raises(ArgumentTypeError) as info:
        getattr(ad.linalg, fn)(X, offset=offset)
    _check(info.value, ArgumentTypeError, fn, "offset")


@pytest.mark.parametrize("fn", ["diagonal", "trace"])
@pytest.mark.parametrize("offset", [1, -1, True, np.int64(1), 5])
def test_linalg_diagonal_still_takes_what_numpy_takes(fn: str, offset: Any) -> None:
    a = np.arange(12.0).reshape(3, 4)
    for axes in ((0, 1), (1, 0), (-1, -2)):
        got = getattr(ad.linalg, fn)(a, offset, *axes)
        want = getattr(np, fn)(a, offset, *axes)
        np.testing.assert_allclose(np.asarray(got.to_numpy()), want)


def test_linalg_diagonal_refuses_repeated_axes_and_vectors_by_value() -> None:
    with pytest.raises(ArgumentError, match=r"^trace: arguments 'axis1' and 'axis2'"):
        ad.linalg.trace(X, axis1=0, axis2=-2)
    with pytest.raises(ArgumentError, match=r"^diagonal: argument 'x' must have at least two"):
        ad.linalg.diagonal(np.ones(3))


@pytest.mark.parametrize(
    ("axes", "cls", "fragment"),
    [
        (5, AxisError, "axes=5 pairs the last 5 axes of 'a'"),
        (-1, AxisError, "axes must be non-negative"),
        (([0], [7]), AxisError, "an axis of argument 'b'"),
        (([-9], [0]), AxisError, "an axis of argument 'a'"),
        ("a", ArgumentTypeError, "must be an int or a pair of axis lists, got str"),
        (1.5, ArgumentTypeError, "got float"),
        (None, ArgumentTypeError, "got NoneType"),
        ((["a"], [0]), ArgumentTypeError, "an axis of 'a' must be an int"),
        (([True], [0]), ArgumentTypeError, "an axis of 'a' must be an int"),
        (([0], [0], [0]), ArgumentError, "got tuple of length 3"),
        (([0, 1], [0]), ArgumentError, "pairs 2 axes of 'a' with 1 of 'b'"),
        (([0, 0], [0, 1]), ArgumentError, "repeats an axis of 'a'"),
    ],
)
def test_tensordot_axes(axes: Any, cls: type, fragment: str) -> None:
    """Out of range: ``AxisError`` (numpy's class), the old wording kept after numpy's; a
    wrong type: ``ArgumentTypeError``; a wrong value: ``ArgumentError`` (``EinsumError``)."""
    with pytest.raises(cls) as info:
        ad.tensordot(X, X, axes=axes)
    msg = str(info.value)
    assert msg.startswith("tensordot: ") and "'axes'" in msg, msg
    assert fragment in msg, msg
    assert not _RAW.search(msg), msg
    if cls is ArgumentError:
        assert not isinstance(info.value, AxisError | TypeError)


def test_tensordot_mismatched_extents_name_the_arguments() -> None:
    with pytest.raises(ValueError) as info:
        ad.tensordot(X, _m(3, 4), axes=([0], [1]))
    assert not isinstance(info.value, AxisError | TypeError)
    assert str(info.value).startswith("tensordot: arguments 'a' and 'b' do not fit argument "
                                      "'axes'")


@pytest.mark.parametrize("fn", ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "rfftn"])
@pytest.mark.parametrize(
    ("kw", "cls", "arg"),
    [
        ({"axes": 5}, ArgumentTypeError, "axes"),
        ({"axes": "ab"}, ArgumentTypeError, "axes"),
        ({"s": (2, "a")}, ArgumentTypeError, "s"),
        ({"s": (2, 1.5)}, ArgumentTypeError, "s"),
        ({"s": (0, 2)}, ArgumentError, "s"),
        ({"s": 4}, ArgumentTypeError, "s"),
    ],
)
def test_nd_fft_axes_and_sizes(fn: str, kw: dict[str, Any], cls: type, arg: str) -> None:
    """``axes`` and ``s`` are sequences of ints (numpy refuses an int and a float size);
    a refusal names the op and the argument, never Python's own words."""
    with pytest.raises(cls) as info:
        getattr(ad.fft, fn)(_m(4, 4), **kw)
    _check(info.value, cls, fn, arg)


@pytest.mark.parametrize("fn", ["fft", "ifft", "rfft", "irfft"])
@pytest.mark.parametrize(("n", "cls"), [("a", ArgumentTypeError), (1.5, ArgumentTypeError),
                                        (True, ArgumentTypeError), (0, ArgumentError)])
def test_1d_fft_length(fn: str, n: Any, cls: type) -> None:
    with pytest.raises(cls) as info:
        getattr(ad.fft, fn)(_m(4, 4), n=n)
    _check(info.value, cls, fn, "n")


def test_fft_still_takes_what_numpy_takes() -> None:
    a = np.arange(16.0).reshape(4, 4)
    np.testing.assert_allclose(np.asarray(ad.fft.fftn(a, axes=range(2)).to_numpy()),
                               np.fft.fftn(a))
    np.testing.assert_allclose(np.asarray(ad.fft.fft2(a, s=np.array([2, 3])).to_numpy()),
                               np.fft.fft2(a, s=(2, 3)))
    np.testing.assert_allclose(np.asarray(ad.fft.fft(a, n=np.int64(3), axis=0).to_numpy()),
                               np.fft.fft(a, n=3, axis=0))
    for axes in (None, 0, -1, np.int64(1), [1], (0, 0), (0, -1)):
        np.testing.assert_array_equal(np.asarray(ad.fft.fftshift(a, axes=axes).to_numpy()),
                                      np.fft.fftshift(a, axes=axes))
        np.testing.assert_array_equal(np.asarray(ad.fft.ifftshift(a, axes=axes).to_numpy()),
                                      np.fft.ifftshift(a, axes=axes))


@pytest.mark.parametrize("start", [-2, -1, 0, 1, 2, True])
def test_rollaxis_start_range_is_numpys(start: Any) -> None:
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(ad.rollaxis(a, 1, start).to_numpy()),
                                  np.rollaxis(a, 1, start))


def test_rollaxis_start_out_of_range_shows_the_value_passed() -> None:
    with pytest.raises(AxisError) as info:
        ad.rollaxis(np.ones((2, 3)), 0, -3)
    assert info.value.axis == -3
    assert "'start' must be in [-2, 2]" in str(info.value)


def test_composites_still_take_axis_none_and_tuples() -> None:
    a = np.arange(6.0)[::-1].reshape(2, 3).copy()
    np.testing.assert_array_equal(np.asarray(ad.partition(a, 1, axis=None).to_numpy()),
                                  np.partition(a, 1, axis=None))
    np.testing.assert_allclose(float(ad.std(a, axis=(0, 1)).to_numpy()), np.std(a))
    np.testing.assert_allclose(np.asarray(ad.average(a, axis=[0]).to_numpy()),
                               np.average(a, axis=0))
    np.testing.assert_allclose(float(ad.nansum(a, axis=(0, 1)).to_numpy()), a.sum())
    np.testing.assert_array_equal(np.asarray(ad.sort(a, axis=None).to_numpy()),
                                  np.sort(a, axis=None))
