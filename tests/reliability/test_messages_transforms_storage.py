"""Refused calls of the AD transforms, jit, vmap, Primitive and the storage kernel name the
operation and the argument that caused the refusal (docs/guides/error-messages.md), raise
the project's error classes (which also subclass the builtin a caller would catch), never
show an object's raw address, and change nothing (no input consumed or left borrowed)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage.errors import TenferroError, shown


def _x() -> np.ndarray[Any, Any]:
    return np.arange(6.0).reshape(2, 3)


def _bad(value: object) -> Any:
    """A deliberately wrong argument, typed ``Any`` so the call type-checks."""
    return value


def _sum(a: Any) -> Any:
    return ad.sum(a)


def _pair(a: Any) -> Any:
    return ad.sum(a), 1


# name -> (the refused call, the builtin it must also be, a pattern its message must match)
CASES: dict[str, tuple[Callable[[], Any], type[BaseException], str]] = {
    "grad has_aux without a pair": (
        lambda: ad.grad(_sum, has_aux=True)(_x()), TypeError,
        r"^grad: arguments 'f' and 'has_aux': .*pair",
    ),
    "value_and_grad has_aux without a pair": (
        lambda: ad.value_and_grad(_sum, has_aux=True)(_x()), TypeError,
        r"^grad: arguments 'f' and 'has_aux'",
    ),
    "grad of a non-scalar function": (
        lambda: ad.grad(lambda a: a * 2.0)(_x()), TypeError,
        r"^grad: argument 'f' must return a one-element value, got shape \(2, 3\)",
    ),
    "grad of a complex-valued function": (
        lambda: ad.grad(lambda a: ad.sum(a) * 1j)(_x()), TypeError,
        r"^grad: argument 'f': the function returned a complex value",
    ),
    "vjp with a None primal": (
        # None is an empty subtree (as in JAX): the op inside refuses it, naming itself
        lambda: ad.vjp(_sum, None), TypeError, r"^sum: argument 'x' must be an array",
    ),
    "vjp with a function as a primal": (
        lambda: ad.vjp(_sum, _x(), _sum), TypeError,
        r"^vjp: argument 'primals'\[1\] is a function",
    ),
    "vjp has_aux without a pair": (
        lambda: ad.vjp(_sum, _x(), has_aux=True), TypeError,
        r"^vjp: arguments 'f' and 'has_aux'",
    ),
    "jvp with a tangent of another shape": (
        lambda: ad.jvp(_sum, (0.5,), (np.ones((2, 3)),)), ValueError,
        r"^jvp: arguments 'primals'\[0\] and 'tangents'\[0\] differ: the tangent has shape "
        r"\(2, 3\), but its primal has shape \(\)",
    ),
    "jvp with a tangent of another dtype": (
        lambda: ad.jvp(_sum, (np.ones(3),), (np.ones(3, np.float32),)), TypeError,
        r"^jvp: arguments 'primals'\[0\] and 'tangents'\[0\] differ: the tangent has dtype "
        "float32",
    ),
    "linearize with a None primal": (
        lambda: ad.linearize(_sum, None), TypeError, r"^sum: argument 'x' must be an array",
    ),
    "hvp with a str primal": (
        lambda: ad.hvp(_sum, ("a",), (1.0,)), TypeError, r"^hvp: argument 'primals'\[0\]",
    ),
    "jacrev of a function returning an int among a pair": (
        lambda: ad.jacrev(_pair)(_x()), TypeError,
        r"^jacrev: argument 'f' must return arrays, owners, handles or floats .* int",
    ),
    "jacobian of an int array": (
        lambda: ad.jacobian(_sum)(np.ones(3, np.int64)), TypeError,
        r"^jacrev: argument 0 has dtype int64",
    ),
    "jacfwd of a float16 array": (
        lambda: ad.jacfwd(_sum)(np.ones(2, np.float16)), TypeError,
        r"^jacfwd: argument 0 has dtype float16, which tenferro does not support",
    ),
    "elementwise_grad of a function returning a pair": (
        lambda: ad.elementwise_grad(_pair)(_x()), TypeError,
        r"^elementwise_grad: argument 'f' must return a single",
    ),
    "jit with a 0-d array as donate_argnums": (
        lambda: ad.jit(_sum, donate_argnums=_bad(np.array(1.0))), TypeError,
        r"^jit: argument 'donate_argnums' must be an int or a tuple of ints, got a ndarray$",
    ),
    "jit with a float as donate_argnums": (
        lambda: ad.jit(_sum, donate_argnums=_bad(0.0)), TypeError,
        r"^jit: argument 'donate_argnums' .*got 0\.0$",
    ),
    "jit of a non-callable": (
        lambda: ad.jit(_bad(3)), TypeError, r"^jit: argument 'f' must be callable",
    ),
    "vmap of a non-callable": (
        lambda: ad.vmap(_bad(ts.zeros(2))), TypeError, r"^vmap: argument 'f' must be callable",
    ),
    "vmap with a str out_axes": (
        lambda: ad.vmap(_sum, out_axes=_bad("0")), TypeError, r"^vmap: argument 'out_axes' must be",
    ),
    "vmap with a str in_axes": (
        lambda: ad.vmap(_sum, in_axes=_bad("ij")), TypeError, r"^vmap: argument 'in_axes' must be",
    ),
    "vmap of a float16 array": (
        lambda: ad.vmap(_sum)(np.ones(2, np.float16)), TypeError,
        r"^vmap: argument 0 has dtype float16, which tenferro does not support",
    ),
    "vmap of an object array": (
        lambda: ad.vmap(_sum)(np.array([1, None], dtype=object)), TypeError,
        r"^vmap: argument 0 has dtype object",
    ),
    "vmap of a str": (
        lambda: ad.vmap(_sum)("a str"), TypeError, r"^vmap: argument 0: a str has no shape",
    ),
    "vmap of a tuple holding None": (
        # None is an empty subtree (as in JAX): sum refuses the tuple it is given
        lambda: ad.vmap(_sum)((np.ones(2), None)), TypeError, r"^sum: argument 'x' is a tuple",
    ),
    "vmap of an empty list": (
        lambda: ad.vmap(_sum)([]), ValueError, r"^vmap: argument 0 is an empty list",
    ),
    "vmap of leaves of two batch sizes": (
        lambda: ad.vmap(_sum)([np.ones((2, 3)), np.ones(3)]), ValueError,
        r"^vmap: argument 0 \(leaf 0\) and argument 0 \(leaf 1\) disagree on the batch size",
    ),
    "Primitive with 2**62 arguments": (
        lambda: ad.Primitive("s", _sum, 2**62), ValueError,
        r"^Primitive\('s'\): argument 'nargs' is 4611686018427387904, more than the 65536",
    ),
    "an index out of bounds": (
        lambda: ts.from_numpy(_x()).as_view()[2], IndexError,
        r"^TensorView\[\.\.\.\]: argument 'key': index 2 is out of bounds for axis 0",
    ),
    "an owner's index out of bounds": (
        lambda: ts.from_numpy(_x())[0, 5], IndexError,
        r"^Tensor\[\.\.\.\]: argument 'key': index 5 is out of bounds for axis 1 with size 3",
    ),
    "a float index": (
        lambda: ts.from_numpy(_x())[0.5], IndexError, r"^Tensor\[\.\.\.\]: argument 'key': 0\.5",
    ),
    "a function as an index": (
        lambda: ts.from_numpy(_x()).as_view_mut()[_sum], IndexError,
        r"^TensorViewMut\[\.\.\.\]: argument 'key': a function is not an index",
    ),
    "from_storage with an offset past the span": (
        lambda: ts.Tensor.from_storage(ts.allocate_storage(48), dtype="float64", shape=(2, 3),
                                       offset=1),
        ValueError, r"^Tensor\.from_storage: arguments 'dtype', 'shape', 'strides' and 'offset'",
    ),
    "from_storage with a negative extent": (
        lambda: ts.Tensor.from_storage(ts.allocate_storage(48), dtype="float64", shape=(-1,)),
        ValueError, r"^Tensor\.from_storage: argument 'shape': negative extent",
    ),
    "arange given only a None start": (
        lambda: ts.arange(_bad(None)), TypeError,
        r"^arange: argument 'start' must be a real number",
    ),
    "arange given a function as stop": (
        lambda: ts.arange(0, _bad(_sum)), TypeError,
        r"^arange: argument 'stop' must be a real number, got a function$",
    ),
    "view_as_complex of a 0-d view": (
        lambda: ts.view_as_complex(ts.from_numpy(np.array(1.5)).as_view()), ValueError,
        r"^view_as_complex: argument 'view': needs a trailing axis of extent 2",
    ),
    "view_as_real of a real view": (
        lambda: ts.view_as_real(ts.from_numpy(np.array(1.5)).as_view()), ValueError,
        r"^view_as_real: argument 'view': expected complex64 or complex128",
    ),
    "view_as_real of an owner": (
        lambda: ts.view_as_real(_bad(ts.from_numpy(np.array(1.5)))), TypeError,
        r"^view_as_real: argument 'view' is an owning Tensor",
    ),
    "CheckedStrided with shape and strides of different lengths": (
        lambda: ts.CheckedStrided(0, (), (3, 2)), ValueError,
        r"^CheckedStrided: arguments 'shape' and 'strides' differ in length",
    ),
    "CheckedInjectiveStrided with a negative extent": (
        lambda: ts.CheckedInjectiveStrided(0, (-1,), (1,)), ValueError,
        r"^CheckedInjectiveStrided: argument 'shape' must be a tuple of non-negative ints",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_refused_call_names_the_operation_and_the_argument(case: str) -> None:
    call, builtin, pattern = CASES[case]
    with pytest.raises(TenferroError) as info:
        call()
    assert isinstance(info.value, builtin), type(info.value).__mro__
    message = str(info.value)
    assert re.search(pattern, message), message
    assert not re.search(r" at 0x[0-9a-f]+", message), message


def test_a_refused_donation_argument_leaves_the_view_unborrowed() -> None:
    """``donate_argnums`` is checked before anything iterates it: a mutable view passed
    there is not reborrowed, and its owner stays writable."""
    owner = ts.from_numpy(_x())
    view = owner.as_view_mut()
    with pytest.raises(TypeError, match="argument 'donate_argnums'"):
        ad.jit(_sum, donate_argnums=_bad(view))
    view.release()
    owner.fill(1.0)
    assert owner.to_numpy().sum() == 6.0


def test_a_refused_index_leaves_the_owner_unborrowed() -> None:
    owner = ts.from_numpy(_x())
    with pytest.raises(IndexError, match="argument 'key'"):
        owner[2]
    owner.into_storage()  # nothing holds a borrow: the owner can be consumed


def test_a_refused_from_storage_does_not_consume_the_storage() -> None:
    storage = ts.allocate_storage(48)
    with pytest.raises(ValueError, match="arguments 'shape' and 'dtype'"):
        ts.Tensor.from_storage(storage, dtype="float64", shape=(2**62,))
    t = ts.Tensor.from_storage(storage, dtype="float64", shape=(2, 3))
    assert t.to_numpy().shape == (2, 3)


def test_a_refused_vjp_primal_borrows_nothing() -> None:
    """Every primal leaf is checked before any is borrowed: the owner before the bad one is
    still free to be consumed."""
    owner = ts.from_numpy(_x())
    with pytest.raises(TypeError, match=r"argument 'primals'\[1\]"):
        ad.vjp(lambda a, b: ad.sum(a), owner, "bad")
    owner.into_storage()


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (3, "3"),
        ("float64", "'float64'"),
        (None, "None"),
        ((2, 3), "(2, 3)"),
        ([1, 2], "[1, 2]"),
        (_sum, "a function"),
        (object(), "an object"),
        ((1, _sum), "a tuple"),
        (np.ones(2), "a ndarray"),
        (2**300, "an int"),
    ],
)
def test_shown_gives_plain_values_and_only_the_type_of_anything_else(
    value: object, text: str
) -> None:
    assert shown(value) == text
