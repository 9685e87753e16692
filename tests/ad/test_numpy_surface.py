"""One numpy-facing surface: every operation gives the same result, and every refusal the
same error, on an owner, a shared view, a mutable view and a handle (issue 27)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tenferro_ad as ad
import tenferro_ad.testing as tt
import tenferro_storage as ts
from tenferro_storage import ledger

X = np.array([[0.3, -1.2, 0.8, 2.5], [1.5, 0.2, -0.4, 0.0], [0.9, -0.7, 1.1, 0.6]])
FORMS = ("owner", "view", "view_mut", "handle")


@contextmanager
def form(kind: str, a: np.ndarray[Any, Any] = X) -> Iterator[Any]:
    """``a`` as an owner, a shared view, a mutable view or a handle (a constant)."""
    owner = ts.from_numpy(a)
    if kind == "owner":
        yield owner
    elif kind == "view":
        with owner.as_view() as v:
            yield v
    elif kind == "view_mut":
        with owner.as_view_mut() as m:
            yield m
    else:
        yield ad.constant(owner)


def values(r: Any) -> Any:
    """A result as plain numpy/Python values (read in place; Python scalars as they are)."""
    if isinstance(r, (ad.EagerTensor, ts.Tensor, ts.TensorView, ts.TensorViewMut)):
        with tt.borrowed(r) as a:
            return np.array(a)
    if isinstance(r, np.generic | np.ndarray):
        return np.asarray(r)
    return r


OPS: dict[str, Callable[[Any], Any]] = {
    "np.sin": np.sin,
    "np.exp": lambda x: np.exp(x),
    "np.add(x, 1)": lambda x: np.add(x, 1.0),
    "ndarray + x": lambda x: np.ones(4) + x,
    "ndarray * x": lambda x: X * x,
    "x - ndarray": lambda x: x - X,
    "x @ ndarray": lambda x: x @ X.T,
    "np.maximum": lambda x: np.maximum(x, 0.5),
    "np.add.reduce": lambda x: np.add.reduce(x, axis=1),
    "np.sum": np.sum,
    "np.sum axis": lambda x: np.sum(x, axis=0),
    "np.sum dtype": lambda x: np.sum(x, dtype=np.float32),
    "np.mean": np.mean,
    "np.std": np.std,
    "np.max": np.max,
    "np.linalg.norm": np.linalg.norm,
    "np.concatenate": lambda x: np.concatenate([x, X]),
    "np.clip": lambda x: np.clip(x, -0.5, 0.5),
    "np.transpose": np.transpose,
    "np.reshape": lambda x: np.reshape(x, (4, 3)),
    "np.where": lambda x: np.where(x > 0.0, x, 0.0),
    "np.cumsum": lambda x: np.cumsum(x, axis=1),
    "np.shape": np.shape,
    "np.ndim": np.ndim,
    "x.sum()": lambda x: x.sum(),
    "x.sum(axis, keepdims)": lambda x: x.sum(axis=1, keepdims=True),
    "x.mean()": lambda x: x.mean(),
    "x.mean(axis)": lambda x: x.mean(axis=0),
    "x.prod()": lambda x: x.prod(),
    "x.max()": lambda x: x.max(),
    "x.min(axis)": lambda x: x.min(axis=1),
    "x.var()": lambda x: x.var(),
    "x.std(ddof)": lambda x: x.std(ddof=1),
    "x.cumsum()": lambda x: x.cumsum(axis=0),
    "x.cumprod()": lambda x: x.cumprod(axis=1),
    "x.any()": lambda x: x.any(),
    "x.all()": lambda x: x.all(),
    "x.argmax()": lambda x: x.argmax(),
    "x.argmin(axis)": lambda x: x.argmin(axis=0),
    "x.argsort()": lambda x: x.argsort(),
    "x.astype": lambda x: x.astype(np.float32),
    "x.clip": lambda x: x.clip(-0.5, 0.5),
    "x.conj()": lambda x: x.conj(),
    "x.conjugate()": lambda x: x.conjugate(),
    "x.diagonal()": lambda x: x.diagonal(),
    "x.dot": lambda x: x.dot(X.T),
    "x.flatten()": lambda x: x.flatten(),
    "x.ravel()": lambda x: x.ravel(),
    "x.repeat": lambda x: x.repeat(2, axis=0),
    "x.round(1)": lambda x: x.round(1),
    "x.squeeze()": lambda x: x[0:1].squeeze(),
    "x.swapaxes": lambda x: x.swapaxes(0, 1),
    "x.trace()": lambda x: x.trace(),
    "x.real": lambda x: x.real,
    "x.imag": lambda x: x.imag,
    "x.T": lambda x: x.T,
    "x.transpose": lambda x: x.transpose(1, 0),
    "x.reshape": lambda x: x.reshape(2, 6),
    "x[1]": lambda x: x[1],
    "float": lambda x: float(x[1, 0]),
    "int": lambda x: int(x[0, 3]),
    "bool": lambda x: bool(x[1, 3]),
    "complex": lambda x: complex(x[0, 1]),
    "f-string scalar": lambda x: f"{x[0, 0]:.3f}",
    "format empty spec": lambda x: format(x[0], ""),
    "item": lambda x: x[2, 2].item(),
    "tolist": lambda x: x.tolist(),
    "tolist rank 0": lambda x: x[1, 1].tolist(),
    "len": len,
}


@pytest.mark.parametrize("name", list(OPS))
def test_every_numpy_operation_agrees_on_owners_views_and_handles(name: str) -> None:
    """Each operation of the surface gives numpy's result on all four forms."""
    f = OPS[name]
    expected = values(f(X))
    for kind in FORMS:
        with form(kind) as x:
            got = values(f(x))
        if isinstance(expected, np.ndarray):
            np.testing.assert_allclose(got, expected, rtol=1e-6, err_msg=f"{name} on {kind}")
            assert np.shape(got) == expected.shape, (name, kind)
        else:
            assert got == expected, (name, kind, got, expected)


REFUSALS: dict[str, Callable[[Any], Any]] = {
    "np.asarray": np.asarray,
    "np.array": np.array,
    "np.testing.assert_allclose": lambda x: np.testing.assert_allclose(x, X),
    "float of many": float,
    "int of many": int,
    "bool of many": bool,
    "complex of many": complex,
    "item of many": lambda x: x.item(),
    "ufunc out=": lambda x: np.sin(x, out=np.empty_like(X)),
    "ufunc without implementation": np.frexp,
    "ufunc method": lambda x: np.add.outer(x, x),
    "function without implementation": np.unique,
    "function out=": lambda x: np.sum(x, out=np.empty(())),
    "method out=": lambda x: x.sum(out=np.empty(())),
}


def test_len_of_rank_0_is_refused_alike() -> None:
    """``len()`` of a rank-0 value: one ``RankError`` on every form."""
    seen = set()
    for kind in FORMS:
        with form(kind, np.array(1.5)) as x, pytest.raises(ts.errors.RankError) as info:
            len(x)
        seen.add(str(info.value))
    assert seen == {"len: len() of a rank-0 value (it has no first axis)"}


def _message(e: BaseException) -> str:
    return re.sub(r"\b(TensorViewMut|TensorView|Tensor|EagerTensor)\b", "VALUE", str(e))


@pytest.mark.parametrize("name", list(REFUSALS))
def test_every_refusal_is_the_same_on_owners_views_and_handles(name: str) -> None:
    """The same error class and message (bar the type's name) on every form, and the
    refusal changes nothing: no copy recorded, the value still readable."""
    f = REFUSALS[name]
    seen: list[tuple[type, str]] = []
    for kind in FORMS:
        with form(kind) as x, ledger.capture() as rec:
            with pytest.raises(Exception) as info:
                f(x)
            assert not rec.copies, (name, kind)
            tt.assert_allclose(x, X)
        seen.append((type(info.value), _message(info.value)))
    assert len(set(seen)) == 1, seen


def test_asarray_refusal_says_what_to_do_instead() -> None:
    """The refusal names the recorded copy, the testing module and the in-place read."""
    with form("owner") as x, pytest.raises(ts.errors.OwnershipError) as info:
        np.asarray(x)
    message = str(info.value)
    assert "never copies implicitly" in message and ".to_numpy()" in message
    assert "tenferro_ad.testing.assert_allclose" in message and "borrowed(x)" in message


def test_format_spec_applies_to_each_element() -> None:
    """``f"{w:.2e}"`` of an array formats each element (numpy refuses a spec on arrays)."""
    expected = "[" + " ".join(format(v, "+.2e") for v in X[0]) + "]"
    for kind in FORMS:
        with form(kind) as x:
            assert f"{x[0]:+.2e}" == expected, kind


def test_host_reads_record_nothing() -> None:
    """Scalar conversions, format, tolist and repr read in place: no ledger event."""
    for kind in FORMS:
        with form(kind) as x, ledger.capture() as rec:
            float(x[0, 0])
            f"{x:.2f}"
            x.tolist()
            repr(x)
            x._repr_html_()
        assert not rec.copies and not rec.allocations, kind


def test_repr_summarizes_large_values_like_numpy() -> None:
    """Above 16 elements the repr shows numpy's summary (edges around ``...``) everywhere."""
    big = np.arange(100.0)
    summary = np.array2string(big, separator=", ", threshold=16, edgeitems=3)
    assert "..." in summary
    for kind in FORMS:
        with form(kind, big) as x:
            assert f"values={summary}" in repr(x), kind
            assert x._repr_html_().startswith("<pre>") and "..." in x._repr_html_()


def test_testing_module_reads_in_place_and_fails_like_numpy() -> None:
    """tenferro_ad.testing compares without a copy and reports numpy's mismatch."""
    for kind in FORMS:
        with form(kind) as x, ledger.capture() as rec:
            tt.assert_allclose(x, X)
            tt.assert_array_equal(x, X)
            tt.assert_array_almost_equal(x, X)
            tt.assert_array_less(x, X + 1.0)
            tt.assert_equal({"w": x}, {"w": X})
            with pytest.raises(AssertionError, match="Mismatched elements"):
                tt.assert_allclose(x, X + 1.0)
        assert not rec.copies, kind


def test_testing_borrow_refuses_a_write_meanwhile() -> None:
    """While ``borrowed`` holds an owner, writing to it is refused (no race)."""
    owner = ts.from_numpy(X)
    with tt.borrowed({"w": owner}) as arrays:
        assert arrays["w"].shape == X.shape
        with pytest.raises(ts.errors.BorrowError):
            owner.fill(0.0)
    owner.fill(0.0)


@given(hnp.arrays(np.float64, hnp.array_shapes(max_dims=3, max_side=4),
                  elements=st.floats(-1e6, 1e6, allow_nan=False, width=64)))
@example(np.array([[1.5, -2.0]]))
@example(np.array(3.25))
def test_host_reads_equal_numpys(a: np.ndarray[Any, Any]) -> None:
    """tolist, format and (size-1) scalar conversions equal numpy's on any float array."""
    for kind in ("owner", "handle"):
        with form(kind, a) as x:
            assert x.tolist() == a.tolist()
            if a.size == 1:
                assert float(x) == float(a.reshape(()))
                assert f"{x:.4g}" == f"{a.reshape(()).item():.4g}"


@pytest.mark.parametrize("name", ["std", "var", "nanmean", "average", "median", "logsumexp"])
def test_composite_reductions_report_an_out_of_range_axis_as_axis_error(name: str) -> None:
    """A composite (``std`` runs ``var``) raises the same AxisError numpy does, named for the
    call the user made, not an ArgumentError from the inner op."""
    x = ad.constant(np.ones((2, 3)))
    with pytest.raises(np.exceptions.AxisError, match=rf"^{name}: argument 'axis'"):
        getattr(ad, name)(x, axis=7)
    with pytest.raises(np.exceptions.AxisError):
        np.std(np.ones((2, 3)), axis=7)  # the oracle
    if name in ("std", "var"):
        with pytest.raises(np.exceptions.AxisError, match=rf"^{name}: argument 'axis'"):
            getattr(x, name)(axis=7)
