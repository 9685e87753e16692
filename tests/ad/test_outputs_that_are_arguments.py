"""A function that hands back an argument itself (``lambda a: a``, in an output or aux).

The functional API borrows each owner argument for the call and ends the borrows when the
call (or, for ``vjp``, the pullback) is released.  A handle the caller receives that *is*
such an argument's value reads through that borrow, so it keeps it: the handle stays
readable after the release, its borrow ends when the handle dies (the owner can then be
moved or mutated again), and nothing is copied until the caller asks (``duplicate_value``).
JAX: the same array comes back.
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage.errors import BorrowError

pytestmark = pytest.mark.both_borrow_modes

X = np.array([0.5, 1.5, -2.0])


def _owner() -> Any:
    return ts.from_numpy(X.copy())


@pytest.mark.parametrize(
    "f",
    [lambda a: a, lambda a: {"k": a}, lambda a: (a * 2.0, a), lambda a: [a, a]],
    ids=["itself", "in-a-dict", "beside-a-result", "twice"],
)
def test_vjp_output_that_is_the_primal_stays_readable_after_the_pullback_is_released(
    f: Any,
) -> None:
    x = _owner()
    out, pull = ad.vjp(f, x)
    ct = ad.tree_util.tree_map(lambda o: np.ones(o.shape), out)
    (g,) = pull(ct)
    pull.release()
    del pull
    gc.collect()
    for leaf in ad.tree_util.tree_leaves(out):
        assert leaf.to_numpy().shape == X.shape
    leaves = ad.tree_util.tree_leaves(out)
    np.testing.assert_array_equal(leaves[-1].to_numpy(), X)
    assert g.to_numpy().shape == X.shape


def test_vjp_aux_that_is_the_primal_stays_readable_after_the_pullback_is_released() -> None:
    x = _owner()
    _, pull, aux = ad.vjp(lambda a: (ad.sin(a), a), x, has_aux=True)
    pull.release()
    np.testing.assert_array_equal(aux.to_numpy(), X)


def test_grad_with_aux_that_is_the_argument_returns_a_readable_aux() -> None:
    x = _owner()
    (value, aux), g = ad.value_and_grad(lambda a: (ad.sum(a), a), has_aux=True)(x)
    np.testing.assert_array_equal(aux.to_numpy(), X)
    np.testing.assert_array_equal(g.to_numpy(), np.ones(3))
    assert float(value.to_numpy()) == pytest.approx(X.sum())


@pytest.mark.parametrize("with_value", [False, True])
def test_grad_of_the_identity_on_an_owner_is_one(with_value: bool) -> None:
    """``grad(lambda a: a)``: the value is the argument itself (JAX: 1.0)."""
    x = ts.from_numpy(np.array(3.0))
    if with_value:
        v, g = ad.value_and_grad(lambda a: a)(x)
        assert float(v.to_numpy()) == 3.0
    else:
        g = ad.grad(lambda a: a)(x)
    assert float(g.to_numpy()) == 1.0
    np.testing.assert_array_equal(x.to_numpy(), np.array(3.0))


def test_the_borrow_an_output_keeps_ends_when_the_output_dies() -> None:
    x = _owner()
    out, pull = ad.vjp(lambda a: a, x)
    pull.release()
    with pytest.raises(BorrowError, match=r"vjp\(<lambda>\): argument 0"):
        x.take("move")
    assert out.to_numpy()[0] == X[0]
    del out
    gc.collect()
    moved = x.take("move")  # the borrow ended with the output
    np.testing.assert_array_equal(moved.to_numpy(), X)


def test_an_output_that_is_the_argument_is_copied_only_on_request() -> None:
    x = _owner()
    out, pull = ad.vjp(lambda a: a, x)
    del pull
    copy = out.duplicate_value()
    np.testing.assert_array_equal(copy.to_numpy(), X)
    del out
    gc.collect()
    x.take("move")
