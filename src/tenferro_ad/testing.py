"""``numpy.testing`` for tenferro values, reading in place: ``import tenferro_ad.testing as tt``.

``np.testing.assert_allclose(owner, ...)`` is refused (``np.asarray`` of a tenferro value
would be an implicit copy).  The functions here take owners, views, handles, numpy arrays,
scalars and lists (or pytrees of them, for :func:`borrowed` and :func:`assert_equal`),
borrow every tenferro value for the duration of the comparison and hand numpy's own
assertion the read-only arrays over their memory: **no copy, no ledger event**, and the
same failure messages numpy gives.  While a comparison runs, writing to one of the
compared owners would raise ``BorrowError`` (a comparison cannot race a write).

Cost: one shared borrow per tenferro leaf (O(1) each) plus numpy's comparison.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import numpy as np

import tenferro_storage as ts

from ._core._handle import EagerTensor
from .tree_util import tree_flatten, tree_unflatten

__all__ = [
    "assert_allclose",
    "assert_array_almost_equal",
    "assert_array_equal",
    "assert_array_less",
    "assert_equal",
    "borrowed",
]

_VIEWS = (ts.Tensor, ts.TensorView, ts.TensorViewMut)


@contextmanager
def borrowed(tree: Any) -> Iterator[Any]:
    """``with borrowed(x) as a:`` — the read-only numpy array(s) over ``x``'s values.

    ``x`` is an owner, a view, a handle (``EagerTensor``), anything numpy reads as it is
    (arrays, scalars, lists), or a pytree of those; the block gets the same structure with
    each tenferro value replaced by a read-only array over its memory.  Each tenferro
    value is borrowed (shared) until the block ends: an owner is borrowed as
    ``ts.borrow_arrays`` borrows it, a handle through ``handle.value()``.  No copy, no
    ledger event, O(number of leaves).  The arrays must not be used after the block.

    Cost: no allocation; no copy; no sync; no dispatch (a shared borrow for the block); O(1).
    Raises: BorrowError."""
    leaves, treedef = tree_flatten(tree, is_leaf=lambda v: isinstance(v, EagerTensor))
    with ExitStack() as stack:
        arrays: list[Any] = []
        for leaf in leaves:
            if isinstance(leaf, EagerTensor):
                leaf = stack.enter_context(leaf.value())  # the guard's borrowed view
            if isinstance(leaf, _VIEWS):
                arrays.append(stack.enter_context(ts.borrow_arrays(leaf)))
            else:
                arrays.append(leaf)
        yield tree_unflatten(treedef, arrays)


def assert_allclose(
    actual: Any,
    desired: Any,
    rtol: float = 1e-7,
    atol: float = 0.0,
    equal_nan: bool = True,
    err_msg: str = "",
    verbose: bool = True,
    *,
    strict: bool = False,
) -> None:
    """``numpy.testing.assert_allclose`` on tenferro values, read in place (no copy).

    Cost: no allocation; no copy; no sync; no dispatch (reads in place); O(n).
    Raises: AssertionError, UseAfterMoveError, TypeError."""
    with borrowed((actual, desired)) as (a, d):
        np.testing.assert_allclose(
            a, d, rtol=rtol, atol=atol, equal_nan=equal_nan, err_msg=err_msg,
            verbose=verbose, strict=strict,
        )


def assert_array_equal(
    actual: Any, desired: Any, err_msg: str = "", verbose: bool = True, *, strict: bool = False
) -> None:
    """``numpy.testing.assert_array_equal`` on tenferro values, read in place (no copy).

    Cost: no allocation; no copy; no sync; no dispatch (reads in place); O(n).
    Raises: AssertionError, UseAfterMoveError."""
    with borrowed((actual, desired)) as (a, d):
        np.testing.assert_array_equal(a, d, err_msg=err_msg, verbose=verbose, strict=strict)


def assert_array_almost_equal(
    actual: Any, desired: Any, decimal: int = 6, err_msg: str = "", verbose: bool = True
) -> None:
    """``numpy.testing.assert_array_almost_equal`` on tenferro values, read in place.

    Cost: no allocation; no copy; no sync; no dispatch (reads in place); O(n).
    Raises: AssertionError, UseAfterMoveError, TypeError."""
    with borrowed((actual, desired)) as (a, d):
        np.testing.assert_array_almost_equal(a, d, decimal=decimal, err_msg=err_msg,
                                             verbose=verbose)


def assert_array_less(
    x: Any, y: Any, err_msg: str = "", verbose: bool = True, *, strict: bool = False
) -> None:
    """``numpy.testing.assert_array_less`` on tenferro values, read in place (no copy).

    Cost: no allocation; no copy; no sync; no dispatch (reads in place); O(n).
    Raises: AssertionError."""
    with borrowed((x, y)) as (a, b):
        np.testing.assert_array_less(a, b, err_msg=err_msg, verbose=verbose, strict=strict)


def assert_equal(actual: Any, desired: Any, err_msg: str = "", verbose: bool = True) -> None:
    """``numpy.testing.assert_equal`` on tenferro values or pytrees of them (dicts, lists,
    tuples compared item by item, as numpy does), read in place (no copy).

    Cost: no allocation; no copy; no sync; no dispatch (reads in place); O(n).
    Raises: AssertionError, UseAfterMoveError."""
    with borrowed((actual, desired)) as (a, d):
        np.testing.assert_equal(a, d, err_msg=err_msg, verbose=verbose)
