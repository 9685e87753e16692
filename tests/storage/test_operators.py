"""Python operators on owners and views, by dependency inversion.

Storage has no arithmetic: each operator forwards to the implementation a package
registered through ``kernel.register_operators`` (``tenferro_ad`` at import), and
without one raises ``TypeError`` naming the package to import.  Owners keep identity
equality and hashing; basic indexing stays a zero-copy view.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import _numpy_surface, _operators, kernel
from tenferro_storage._operators import OPERATOR_KEYS, OPERATOR_METHODS

HINT = "import tenferro_ad to use Python operators on owners"

BINARY = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "pow": operator.pow,
    "matmul": operator.matmul,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}
UNARY = {"neg": operator.neg, "abs": abs}
# Python's reflection of each comparison: ``other < x`` asks ``x > other``.
REFLECTED_COMPARISON = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


class Recorder:
    """A fake arithmetic backend: records (key, operands) and returns a marker."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def table(self) -> dict[str, Callable[..., Any]]:
        def make(key: str) -> Callable[..., Any]:
            def fn(*args: Any) -> Any:
                self.calls.append((key, args))
                return ("result", key)

            return fn

        return {key: make(key) for key in OPERATOR_KEYS}


@pytest.fixture
def backend(no_operator_backend: None) -> Iterator[Recorder]:
    rec = Recorder()
    kernel.register_operators(rec.table())
    yield rec
    rec.calls.clear()  # the recorded operands must not outlive the test (leak check)


def _subjects(t: ts.Tensor[Any, Any]) -> Iterator[tuple[str, Any]]:
    """The owner, a shared view and a mutable view of ``t`` (each released after use)."""
    yield "Tensor", t
    v = t.as_view()
    yield "TensorView", v
    v.release()
    m = t.as_view_mut()
    yield "TensorViewMut", m
    m.release()


# -- without a backend ----------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(BINARY))
def test_binary_operators_without_a_backend_name_the_package_to_import(
    key: str, no_operator_backend: None
) -> None:
    """Every binary operator (forward and reflected) raises TypeError naming tenferro_ad."""
    t = ts.ones(3)
    op = BINARY[key]
    for _name, x in _subjects(t):
        with pytest.raises(TypeError, match=HINT):
            op(x, 2.0)
        with pytest.raises(TypeError, match=HINT):
            op(2.0, x)
    assert t.to_numpy().tolist() == [1.0, 1.0, 1.0]  # unchanged and unborrowed
    t.fill(0.0)


@pytest.mark.parametrize("key", sorted(UNARY))
def test_unary_operators_without_a_backend_name_the_package_to_import(
    key: str, no_operator_backend: None
) -> None:
    """Unary minus and abs() raise TypeError naming tenferro_ad."""
    t = ts.ones(2)
    for _name, x in _subjects(t):
        with pytest.raises(TypeError, match=HINT):
            UNARY[key](x)


def test_numpy_on_the_left_defers_to_the_owner(no_operator_backend: None) -> None:
    """``ndarray + owner`` reaches the owner's ``__array_ufunc__`` (numpy's protocol), which
    without a backend says which package to import."""
    t = ts.ones(2)
    with pytest.raises(TypeError, match=r"numpy\.add: import tenferro_ad to run numpy"):
        np.ones(2) + t
    with pytest.raises(TypeError, match=r"numpy\.less: import tenferro_ad to run numpy"):
        assert np.ones(2) < t


def test_advanced_index_without_a_backend_is_refused(no_operator_backend: None) -> None:
    """Integer-array, list, bool and owner keys need the gather of a registered backend."""
    t = ts.arange(4)
    idx = ts.from_numpy(np.array([0, 1]))
    for _name, x in _subjects(t):
        for key in ([0, 1], np.array([1, 2]), np.array([True, False, True, False]), True, idx):
            with pytest.raises(TypeError, match="advanced indexing"):
                x[key]
    t.fill(0)
    del idx


# -- with a backend -------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(BINARY))
def test_binary_operators_forward_operands_in_python_order(key: str, backend: Recorder) -> None:
    """``x op y`` calls f(x, y); ``y op x`` calls f(y, x) (comparisons: the mirrored key)."""
    t = ts.ones(3)
    op = BINARY[key]
    for _name, x in _subjects(t):
        backend.calls.clear()
        assert op(x, 2.0) == ("result", key)
        assert backend.calls == [(key, (x, 2.0))]
        backend.calls.clear()
        reflected = REFLECTED_COMPARISON.get(key, key)
        assert op(2.0, x) == ("result", reflected)
        expected = (x, 2.0) if key in REFLECTED_COMPARISON else (2.0, x)
        assert backend.calls == [(reflected, expected)]


@pytest.mark.parametrize("key", sorted(UNARY))
def test_unary_operators_forward_the_operand(key: str, backend: Recorder) -> None:
    """``-x`` and ``abs(x)`` call the registered unary implementation with ``x``."""
    t = ts.ones(2)
    for _name, x in _subjects(t):
        backend.calls.clear()
        assert UNARY[key](x) == ("result", key)
        assert backend.calls == [(key, (x,))]


def test_numpy_on_the_left_reaches_the_registered_array_ufunc(backend: Recorder) -> None:
    """``ndarray * owner`` is numpy's ``multiply``: it reaches the registered ``array_ufunc``
    once, with the operands in Python order (the owner is never converted)."""
    t = ts.ones(2)
    a = np.ones(2)
    calls: list[tuple[Any, ...]] = []
    kernel.register_numpy({"array_ufunc": lambda *args, **kw: calls.append(args) or "ufunc"})
    assert a * t == "ufunc"
    assert calls == [(t, np.multiply, "__call__", a, t)]
    assert backend.calls == []


def test_three_argument_pow_is_refused(backend: Recorder) -> None:
    """pow(x, y, mod) has no meaning on tenferro values."""
    with pytest.raises(TypeError, match="modulus"):
        pow(ts.ones(2), 2, 3)
    assert backend.calls == []


def test_advanced_keys_forward_to_getitem(backend: Recorder) -> None:
    """A non-basic key calls getitem(x, key) on owner, view and mutable view alike."""
    t = ts.arange(4)
    for _name, x in _subjects(t):
        for key in ([0, 2], np.array([1]), (slice(None), [0]), True):
            backend.calls.clear()
            assert x[key] == ("result", "getitem")
            assert backend.calls == [("getitem", (x, key))]


def test_basic_keys_stay_zero_copy_views(backend: Recorder) -> None:
    """ints, slices, ..., None (and numpy integers) still make views, never a gather."""
    t = ts.arange(12).reshape(3, 4).duplicate()
    keys = (1, np.int64(1), slice(1, None), (Ellipsis, 0), (None, 0), (0, slice(None, None, 2)))
    for key in keys:
        v = t[key]
        assert type(v) is ts.TensorView
        v.release()
    assert backend.calls == []


@pytest.mark.parametrize(
    ("key", "basic"),
    [
        (0, True), (np.int32(2), True), (slice(None), True), (Ellipsis, True), (None, True),
        ((0, slice(1, 2), None, Ellipsis), True), ((), True),
        (True, False), (np.bool_(True), False), ([0], False), (np.array(0), False),
        ((0, [1]), False), (1.0, False), ("a", False),
    ],
)
def test_basic_key_classification_follows_numpy(key: Any, basic: bool) -> None:
    """Basic keys are numpy's: ints (not bools), slices, ..., None, alone or in a tuple."""
    assert _operators.is_basic_key(key) is basic


# -- identity, hashing and the table ----------------------------------------------------------


def test_owners_keep_identity_equality_and_hashing(backend: Recorder) -> None:
    """== and != are not forwarded: owners stay usable as dict keys and set members."""
    a, b = ts.zeros(2), ts.zeros(2)
    assert a == a and a != b and not (a == b)
    assert {a: 1, b: 2}[a] == 1 and len({a, b}) == 2
    assert backend.calls == []
    for cls in (ts.Tensor, ts.TensorView, ts.TensorViewMut):
        assert cls.__eq__ is object.__eq__ and cls.__ne__ is object.__ne__


def test_every_owner_and_view_class_has_every_operator() -> None:
    """The operator set is the same on Tensor, TensorView and TensorViewMut (one mixin)."""
    assert {"__add__", "__rmatmul__", "__neg__", "__abs__", "__ge__"} <= set(OPERATOR_METHODS)
    for cls in (ts.Tensor, ts.TensorView, ts.TensorViewMut):
        for name in OPERATOR_METHODS:
            assert getattr(cls, name) is getattr(_operators.OperatorMixin, name), (cls, name)
        assert cls.__array_ufunc__ is _numpy_surface.NumpySurface.__array_ufunc__


def test_register_operators_refuses_unknown_keys_and_changes_nothing(
    no_operator_backend: None,
) -> None:
    """A table with an unknown key or a non-callable value registers nothing at all."""
    with pytest.raises(KeyError, match="unknown operator key 'floordiv'"):
        kernel.register_operators({"add": lambda a, b: 0, "floordiv": lambda a, b: 0})
    with pytest.raises(TypeError, match="must be callable"):
        kernel.register_operators({"add": lambda a, b: 0, "sub": 3})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match=HINT):
        ts.ones(1) + 1


def test_a_later_registration_replaces_only_the_keys_it_names(backend: Recorder) -> None:
    """register_operators updates entry by entry; the others stay."""
    kernel.register_operators({"add": lambda a, b: "new add"})
    t = ts.ones(1)
    assert t + 1 == "new add"
    assert t - 1 == ("result", "sub")


def test_operator_keys_are_published_in_the_kernel_module() -> None:
    """kernel.OPERATOR_KEYS lists every key register_operators accepts."""
    assert kernel.OPERATOR_KEYS == OPERATOR_KEYS
    assert set(OPERATOR_KEYS) == set(BINARY) | set(UNARY) | {"getitem"}
