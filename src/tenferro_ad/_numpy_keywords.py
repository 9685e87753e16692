"""numpy's keywords on tenferro values: ``out=`` and the ufunc keywords (refused unless at
numpy's default), ``dtype=`` (the result converted), ``order=`` of ravel/flatten,
``initial=`` of reductions, ``kind=``/``order=``/``stable=`` of argsort.

Each is honoured exactly or refused by name (a :class:`~.errors.NumpyFunctionError`):
a keyword is never accepted and dropped, since that returns numpy-looking wrong values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import ArgumentTypeError, NumpyFunctionError
from .ops import elementwise as ew
from .ops import manip as mp
from .ops import scan as sc
from .ops import shape as sh
from .ops._util import dtype_arg

__all__ = [
    "argsort_call", "initial_arg", "no_out", "ravel_call", "with_dtype", "with_initial",
]


def no_out(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Drop numpy keywords at their defaults; refuse ones we cannot honour."""
    kw = dict(kwargs)
    out = kw.pop("out", None)
    if out is not None and not (isinstance(out, tuple) and all(o is None for o in out)):
        raise NumpyFunctionError(
            f"{name}: argument 'out' is not supported (tenferro ops return a new value; use "
            "it, or write it into an owner under `with owner.as_view_mut() as m:`)"
        )
    for k, default in (("where", True), ("casting", "same_kind"), ("order", "K"),
                       ("subok", True), ("signature", None)):
        if k in kw:
            v = kw.pop(k)
            if v is not default and not (isinstance(v, str) and v == default):
                raise NumpyFunctionError(f"{name}: argument {k!r}={v!r} is not supported")
    if "dtype" in kw and kw["dtype"] is None:
        kw.pop("dtype")
    return kw


def with_dtype(f: Callable[..., Any]) -> Callable[..., Any]:
    """Honour ``dtype=`` by converting the result (``np.sum(h, dtype=np.float32)``)."""
    name = getattr(f, "__name__", "op")

    def g(*args: Any, dtype: Any = None, **kw: Any) -> Any:
        target = None if dtype is None else dtype_arg(name, dtype)
        r = f(*args, **kw)
        return r if target is None else ew.astype(r, target)

    return g


def with_initial(f: Callable[..., Any], combine: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    """Honour numpy's ``initial=`` of a reduction by folding it into the result with
    ``combine`` (``add`` for sums, ``maximum`` for maxima...): one more eager op, and only
    when it is given (``np.sum(h, initial=1.0)`` must not silently drop it)."""

    name = f"numpy.{getattr(f, '__name__', 'reduce')}"

    def g(*args: Any, initial: Any = None, **kw: Any) -> Any:
        if initial is None or initial is np._NoValue:
            return f(*args, **kw)
        initial = initial_arg(name, initial)  # checked before anything is computed
        return combine(f(*args, **kw), initial)

    return g


def initial_arg(name: str, initial: Any) -> Any:
    """``initial=`` of a reduction: a real or complex scalar, as numpy requires."""
    if isinstance(initial, bool) or not isinstance(initial, int | float | complex | np.number):
        raise ArgumentTypeError(
            f"{name}: argument 'initial' must be a scalar number, got {type(initial).__name__}"
        )
    return initial


_ORDERS = ("C", "F")


def _order_arg(name: str, order: Any) -> str:
    """``order`` of ravel/flatten: ``"C"`` (row-major) or ``"F"`` (column-major); numpy's
    memory orders (``"A"``, ``"K"``) have no meaning for a tenferro value and are refused."""
    if not (isinstance(order, str) and order in _ORDERS):
        raise NumpyFunctionError(
            f"{name}: argument 'order' must be 'C' or 'F' (numpy's memory orders 'A' and "
            f"'K' have no meaning for a tenferro value), got {order!r}"
        )
    return order


def ravel_call(a: Any, order: Any = "C", name: str = "ravel") -> Any:
    """``a`` flattened in ``order``: ``"F"`` is the C-order ravel of the reversed axes."""
    if _order_arg(name, order) == "F":
        return mp.ravel(sh.transpose(a))
    return mp.ravel(a)




def argsort_call(name: str, a: Any, axis: Any = -1, kind: Any = None, order: Any = None,
             stable: Any = None) -> Any:
    """numpy's argsort arguments: every ``kind`` is satisfied by the stable sort (a stable
    result is a valid result of an unstable kind); ``order`` (structured fields) refused."""
    # numpy reads a kind by its first letter ('Q', 'quick', 'stablesort' all pass)
    if not (kind is None or (isinstance(kind, str) and kind[:1].lower() in ("q", "h", "m", "s"))):
        raise NumpyFunctionError(
            f"{name}: argument 'kind' must be one of numpy's sort kinds "
            f"('quicksort', 'mergesort', 'heapsort', 'stable'), got {kind!r}"
        )
    if order is not None:
        raise NumpyFunctionError(f"{name}: argument 'order' (structured fields) is not supported")
    if stable is not None and not isinstance(stable, bool):
        raise NumpyFunctionError(f"{name}: argument 'stable' must be a bool, got {stable!r}")
    return sc.argsort(a, axis)
