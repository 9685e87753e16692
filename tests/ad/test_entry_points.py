"""The public entry points of differentiation take every argument and output kind they
document: ``ad.constant`` of arrays, lists and scalars, ``grad`` of a function returning a
plain array, ``vjp`` (its output leaves checked, its backward function called with a
Python scalar inside an enclosing ``grad``), ``Tape.backward`` with one handle or a list
as ``wrt``, and ``Gradients.handle`` only after ``create_graph=True``.

Each test here was written for a generated mutant (tests/mutation/generated.py) that the
tests mapped to these modules did not notice; the mutant is named in the docstring.
Deterministic: fixed inputs, no search.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import ArgumentTypeError
from tenferro_storage import ledger
from tenferro_storage.errors import GroupError


@pytest.mark.parametrize(
    "value",
    [np.array([1.5, -2.0]), np.float64(2.5), [1.0, 2.0, 3.0], (4.0,), 2.5, 3, 1 + 2j],
    ids=["ndarray", "numpy-scalar", "list", "tuple", "float", "int", "complex"],
)
def test_constant_imports_an_array_list_or_scalar_with_one_transfer(value: Any) -> None:
    """``ad.constant`` of a numpy array, a list or a scalar is an untracked handle of that
    value, imported with one recorded ``TRANSFER`` copy.  Mutants: ``_functional.py``
    ``np.ndarray | ... | complex`` with one ``|`` replaced (``>>``, ``%``)."""
    with ledger.capture() as rec:
        h = ad.constant(value)
    np.testing.assert_array_equal(h.to_numpy(), np.asarray(value))
    assert {r.value: n for r, n in rec.copies.items()} == {"transfer": 1}


def test_grad_of_a_function_returning_a_plain_array_is_a_zero_gradient() -> None:
    """A function whose result does not depend on its input (a numpy scalar) has a zero
    gradient, as in JAX.  Mutant: ``_scalar_output``'s ``ts.Tensor | ts.TensorView``
    turned into ``^`` (the check of a non-handle output raises ``TypeError``)."""
    g = ad.grad(lambda x: np.float64(3.0))(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(g.to_numpy(), [0.0, 0.0])


def test_grad_of_a_function_returning_an_owner_borrows_it_as_a_constant() -> None:
    """An owner returned by ``f`` is read through a borrow: a zero gradient, and the
    owner is free afterwards."""
    out = ts.from_numpy(np.array(2.0))
    g = ad.grad(lambda x: out)(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(g.to_numpy(), [0.0, 0.0])
    out.as_view_mut().release()


def test_vjp_refuses_a_leaf_that_is_not_a_value_and_takes_plain_array_leaves() -> None:
    """``vjp`` checks every output leaf: a string is refused naming ``vjp`` and the leaf's
    type; a numpy array leaf (independent of the input) gets a zero cotangent path.
    Mutant: ``_output_leaves``' ``EagerTensor | ... | np.generic`` with ``^``."""
    x = np.array([0.5, 1.0])
    with pytest.raises(ArgumentTypeError, match=r"vjp: argument 'f'.* str leaf"):
        ad.vjp(lambda a: (ad.sin(a), "no"), x)
    _, back = ad.vjp(lambda a: (ad.sin(a), np.ones(2)), x)
    (g,) = back((np.ones(2), np.ones(2)))
    np.testing.assert_allclose(g.to_numpy(), np.cos(x), rtol=1e-12)


def test_a_vjp_called_with_a_python_scalar_inside_grad_differentiates() -> None:
    """Inside an enclosing ``grad`` (nested), a Python scalar cotangent is filled to the
    output's shape as a fresh seed: d/dx sum(cos x) = -sin x.  Mutant: ``check_cotangent``'s
    nested ``int | float | complex`` turned into ``%``."""
    x = np.array([0.25, 0.5, 1.0])

    def f(a: Any) -> Any:
        _, back = ad.vjp(ad.sin, a)
        (g,) = back(1.0)
        return ad.sum(g)

    np.testing.assert_allclose(ad.grad(f)(x).to_numpy(), -np.sin(x), rtol=1e-12)


@pytest.mark.parametrize("as_list", [False, True], ids=["one-handle", "list"])
def test_tape_backward_takes_one_handle_or_a_list_as_wrt(as_list: bool) -> None:
    """``Tape.backward(loss, wrt=x)`` and ``wrt=[x]`` give the same gradient.  Mutant:
    ``isinstance(wrt, list | tuple)`` turned into ``%`` (every ``wrt`` raises)."""
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.array([0.5, 2.0])))
        loss = ad.sum(ad.sin(x))
    grads = tape.backward(loss, wrt=[x] if as_list else x)
    g = grads.take_grad(x)
    assert g is not None
    np.testing.assert_allclose(g.to_numpy(), np.cos([0.5, 2.0]), rtol=1e-12)


def test_gradients_handle_is_refused_without_create_graph_and_given_with_it() -> None:
    """``Gradients.handle`` is a ``GroupError`` after a plain backward and the gradient
    handle after ``create_graph=True``.  Mutant: ``if self._handles is None`` negated."""
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.array([0.5, 2.0])))
        loss = ad.sum(x * x)
        plain = tape.backward(loss, wrt=[x], keep=True)
        with pytest.raises(GroupError, match=r"Gradients\.handle: .*create_graph=True"):
            plain.handle(x)
        nested = tape.backward(loss, wrt=[x], create_graph=True)
        h = nested.handle(x)
        assert h is not None
        np.testing.assert_array_equal(h.to_numpy(), [1.0, 4.0])
