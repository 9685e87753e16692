"""``ops._util.culprit``: which parameter a failed op call is named after when the error
itself names none (the ``"op: argument 'x': ..."`` an escaping numpy error gets)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import ArgumentTypeError
from tenferro_ad.ops._util import culprit


def _binary(a: Any, b: Any) -> Any:
    return (a, b)


def _flagged(a: Any, flag: bool = False, scale: float = 1.0) -> Any:
    return (a, flag, scale)


@pytest.mark.parametrize(
    "other", [np.ones(2), ts.from_numpy(np.ones(2)), ts.from_numpy(np.ones(2)).as_view()],
    ids=["ndarray", "owner", "view"],
)
def test_a_type_error_names_the_one_argument_that_is_not_a_value(other: Any) -> None:
    """Two ``Any`` parameters, one holding an array, owner or view and the other a string:
    a ``TypeError`` is named after the string.  Mutant: ``_is_value``'s type union
    ``TensorView | TensorViewMut`` turned into ``+`` (a TypeError of its own)."""
    assert culprit(_binary, (other, "s"), {}, type_error=True) == "b"
    assert culprit(_binary, ("s", other), {}, type_error=True) == "a"
    assert culprit(_binary, (other, other), {}, type_error=True) is None
    if isinstance(other, ts.TensorView):
        other.release()


@pytest.mark.parametrize(
    "flag, want",
    [(True, "a"), (np.bool_(False), "a"), ("yes", "flag"), (1, "flag")],
    ids=["bool", "numpy-bool", "str", "int"],
)
def test_a_bool_parameter_fits_python_and_numpy_bools_only(flag: Any, want: str) -> None:
    """A ``bool`` parameter given ``True`` or ``np.bool_`` fits (the failure is put on the
    one unannotated argument); given a string or an int it is the misfit named.  Mutant:
    the ``bool`` check's ``bool | np.bool_`` turned into ``**`` (a TypeError)."""
    assert culprit(_flagged, (np.ones(2),), {"flag": flag}) == want


_AXIS_OPS = [
    "argsort", "sort", "cumsum", "diagonal", "fliplr", "flipud", "sum", "mean",
    "fft.fft", "fft.ifft", "fft.fft2", "fft.rfft", "fft.rfft2", "fft.rfftn", "fft.irfftn",
]


@pytest.mark.parametrize("name", _AXIS_OPS)
@pytest.mark.parametrize("bad", [object(), "abc", {1: 2}], ids=["object", "str", "dict"])
def test_a_value_that_is_not_one_is_a_type_error_before_any_axis_check(
    name: str, bad: Any
) -> None:
    """An op that reads its value's shape for an axis refuses a non-value by type, naming
    the op and the argument, instead of checking the axis against the rank-0 shape numpy
    gives any object (an ``AxisError`` that blames the axis) or echoing its repr with a
    raw address.  Mutant: ``shape_of``/``dtype_of`` falling back to ``np.shape`` /
    ``np.result_type`` for any object."""
    fn: Any = ad
    for part in name.split("."):
        fn = getattr(fn, part)
    short = name.rsplit(".", 1)[-1]
    with pytest.raises(ArgumentTypeError, match=rf"^{short}: argument '\w+'") as info:
        fn(bad)
    assert "0x" not in str(info.value)
