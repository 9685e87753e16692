"""Gathers and scatter-adds along one axis by *traced* indices.

``take_along_axis`` with concrete indices is a ``gather`` whose key is a static parameter
(host metadata, as ``x[idx]``).  Inside a trace the indices may be values of the program
itself (``sort`` gathers by its own ``argsort``), unknown until the program runs, so they
enter as an array argument of two primitives instead:

* ``take_along(x, idx, axis=)``: ``numpy.take_along_axis`` (one allocation); differentiable
  in ``x`` (its VJP scatter-adds, its JVP gathers the tangent), ``idx`` is an index;
* ``put_along_add(g, idx, axis=, shape=)``: zeros of ``shape`` with ``g`` added at ``idx``
  along ``axis`` (``numpy.add.at``, repeated indices accumulate); its transpose is
  ``take_along``.

Both batch by moving their axis past the batch axis (an unbatched operand gets a unit
axis, which ``take_along_axis`` and ``add.at`` broadcast).  Out-of-range indices raise
numpy's ``IndexError`` when the program runs (they cannot be checked at trace time).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._core._primitive import NONDIFF, Primitive, defprimitive
from .._traced._batch_rules import defbatch, emit, shape_of

Array = Any


def _take_impl(x: Array, idx: Array, *, axis: int) -> Array:
    return np.take_along_axis(np.asarray(x), np.asarray(idx), axis)


def _put_impl(g: Array, idx: Array, *, axis: int, shape: tuple[int, ...]) -> Array:
    g, idx = np.asarray(g), np.asarray(idx)
    out = np.zeros(shape, g.dtype)
    nd = len(shape)
    full = np.broadcast_shapes(g.shape, idx.shape)
    key = tuple(
        np.broadcast_to(idx, full) if i == axis
        else np.arange(shape[i] if shape[i] == full[i] else 1).reshape(
            (1,) * i + (-1,) + (1,) * (nd - i - 1)
        )
        for i in range(nd)
    )
    np.add.at(out, key, np.broadcast_to(g, full))
    return out


TAKE_ALONG: Primitive = defprimitive(
    "take_along",
    _take_impl,
    2,
    save_in=(0, 1),
    vjp=(
        lambda ops, g, x, idx, *, axis: ops.apply(
            PUT_ALONG_ADD, g, idx, axis=axis, shape=tuple(x.shape)
        ),
        NONDIFF,
    ),
    jvp=(lambda ops, t, x, idx, *, axis: ops.apply(TAKE_ALONG, t, idx, axis=axis), NONDIFF),
)
PUT_ALONG_ADD: Primitive = defprimitive(
    "put_along_add",
    _put_impl,
    2,
    save_in=(1,),
    vjp=(lambda ops, g, idx, *, axis, shape: ops.apply(TAKE_ALONG, g, idx, axis=axis), NONDIFF),
    jvp=(
        lambda ops, t, idx, *, axis, shape: ops.apply(
            PUT_ALONG_ADD, t, idx, axis=axis, shape=shape
        ),
        NONDIFF,
    ),
)


def _unit(a: Any, batched: bool) -> Any:
    """An unbatched operand with a unit batch axis (broadcast by the kernels)."""
    if batched:
        return a
    s = shape_of(a)
    return emit("reshape", a, shape=(1, *s), src=s)


def _batch_take(args: list[Any], batched: list[bool], size: int, *, axis: int) -> tuple[Any, bool]:
    x, idx = (_unit(a, b) for a, b in zip(args, batched, strict=True))
    return emit("take_along", x, idx, axis=axis + 1), True


def _batch_put(
    args: list[Any], batched: list[bool], size: int, *, axis: int, shape: tuple[int, ...]
) -> tuple[Any, bool]:
    g, idx = (_unit(a, b) for a, b in zip(args, batched, strict=True))
    return emit("put_along_add", g, idx, axis=axis + 1, shape=(size, *shape)), True


defbatch(TAKE_ALONG, _batch_take)
defbatch(PUT_ALONG_ADD, _batch_put)
