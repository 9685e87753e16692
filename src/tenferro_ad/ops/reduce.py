"""Reductions over axes (``axis=None``: all; ``keepdims``).  ``max``/``min`` split the
gradient evenly among ties (as JAX does); ``prod``'s rules are exact at zeros (the
derivative is the product of the *other* entries, as JAX computes it).

Axes follow numpy: an int, a numpy integer or a tuple of them in ``[-ndim, ndim)``; an axis
out of range raises :class:`~tenferro_ad.errors.AxisError` before anything is computed."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dispatch import bind
from .._handle import EagerTensor
from .._primitive import defprimitive
from ..errors import ArgumentTypeError
from ._axes import axes_tuple

Array = Any


def _axes(operation: str, axis: Any, ndim: int, keepdims: Any = False) -> tuple[int, ...]:
    if not isinstance(keepdims, bool | np.bool_):
        raise ArgumentTypeError(
            f"{operation}: argument 'keepdims' must be a bool, got {type(keepdims).__name__}"
        )
    return axes_tuple(operation, axis, ndim)


def _kept(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _expand(
    ops: Any, g: Array, shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool
) -> Array:
    if not keepdims:
        g = ops.reshape(g, _kept(shape, axes))
    return ops.broadcast_to(g, shape)


def _sum_impl(a: Array, *, axes: tuple[int, ...], keepdims: bool, shape: tuple[int, ...]) -> Array:
    return np.sum(a, axis=axes, keepdims=keepdims)


SUM = defprimitive(
    "sum",
    _sum_impl,
    1,
    vjp=(lambda ops, g, *, axes, keepdims, shape: _expand(ops, g, shape, axes, keepdims),),
    jvp=(lambda ops, t, *, axes, keepdims, shape: ops.sum(t, axis=axes, keepdims=keepdims),),
)


def _chooser(
    ops: Any, g: Array, x: Array, out: Array, axes: tuple[int, ...], keepdims: bool
) -> Array:
    shape = tuple(x.shape)
    o = _expand(ops, out, shape, axes, keepdims)
    ind = ops.astype(ops.eq(x, o), x.dtype)
    counts = ops.sum(ind, axis=axes, keepdims=True)
    return ops.div(ops.mul(_expand(ops, g, shape, axes, keepdims), ind), counts)


def _chooser_jvp(
    ops: Any, t: Array, x: Array, out: Array, axes: tuple[int, ...], keepdims: bool
) -> Array:
    shape = tuple(x.shape)
    o = _expand(ops, out, shape, axes, keepdims)
    ind = ops.astype(ops.eq(x, o), x.dtype)
    num = ops.sum(ops.mul(t, ind), axis=axes, keepdims=keepdims)
    return ops.div(num, ops.sum(ind, axis=axes, keepdims=keepdims))


def _max_impl(a: Array, *, axes: tuple[int, ...], keepdims: bool) -> Array:
    return np.max(a, axis=axes, keepdims=keepdims)


def _min_impl(a: Array, *, axes: tuple[int, ...], keepdims: bool) -> Array:
    return np.min(a, axis=axes, keepdims=keepdims)


MAX = defprimitive(
    "max",
    _max_impl,
    1,
    save_in=(0,),
    save_out=True,
    vjp=(lambda ops, g, x, out, *, axes, keepdims: _chooser(ops, g, x, out, axes, keepdims),),
    jvp=(lambda ops, t, x, out, *, axes, keepdims: _chooser_jvp(ops, t, x, out, axes, keepdims),),
)
MIN = defprimitive(
    "min",
    _min_impl,
    1,
    save_in=(0,),
    save_out=True,
    vjp=(lambda ops, g, x, out, *, axes, keepdims: _chooser(ops, g, x, out, axes, keepdims),),
    jvp=(lambda ops, t, x, out, *, axes, keepdims: _chooser_jvp(ops, t, x, out, axes, keepdims),),
)


def _prod_impl(a: Array, *, axes: tuple[int, ...], keepdims: bool) -> Array:
    return np.prod(a, axis=axes, keepdims=keepdims)


def _exclusive(ops: Any, x: Array, axes: tuple[int, ...]) -> Array:
    """For every entry of ``x``: the product of the *other* entries of its reduction group.

    Exact at zeros (no division by a zero entry): with no zero in a group it is
    ``prod / x``; with exactly one zero it is the product of the nonzero entries at the zero
    and 0 elsewhere (written as ``zero_entry * prod_nonzero / x`` so a second derivative
    still sees the zero entry); with two or more zeros it is 0 — JAX's values.
    """
    shape = tuple(x.shape)
    is0 = ops.eq(x, 0)
    safe = ops.where(is0, 1, x)
    pnz = _expand(ops, ops.apply(PROD, safe, axes=axes, keepdims=True), shape, axes, True)
    nz = _expand(
        ops, ops.sum(ops.astype(is0, "float64"), axis=axes, keepdims=True), shape, axes, True
    )
    zero_entry = _expand(
        ops, ops.sum(ops.where(is0, x, 0), axis=axes, keepdims=True), shape, axes, True
    )
    others_nz = ops.div(pnz, safe)
    at_zero = ops.where(ops.eq(nz, 1), pnz, 0)
    off_zero = ops.where(
        ops.eq(nz, 0), others_nz, ops.where(ops.eq(nz, 1), ops.mul(zero_entry, others_nz), 0)
    )
    return ops.where(is0, at_zero, off_zero)


def _prod_vjp(
    ops: Any, g: Array, x: Array, out: Array, *, axes: tuple[int, ...], keepdims: bool
) -> Array:
    shape = tuple(x.shape)
    return ops.mul(_expand(ops, g, shape, axes, keepdims), _exclusive(ops, x, axes))


def _prod_jvp(
    ops: Any, t: Array, x: Array, out: Array, *, axes: tuple[int, ...], keepdims: bool
) -> Array:
    return ops.sum(ops.mul(t, _exclusive(ops, x, axes)), axis=axes, keepdims=keepdims)


PROD = defprimitive(
    "prod", _prod_impl, 1, save_in=(0,), save_out=True, vjp=(_prod_vjp,), jvp=(_prod_jvp,)
)


def _shape_of(x: Any) -> tuple[int, ...]:
    if isinstance(x, EagerTensor):
        return tuple(x._r("reduce").a.shape)
    shape = getattr(x, "shape", None)  # owners and numpy arrays
    return tuple(np.shape(x) if shape is None else shape)


def sum(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Sum over ``axis`` (int, tuple or ``None`` for all). One allocation; retains nothing.

    Raises :class:`~tenferro_ad.errors.AxisError` for an axis outside ``[-ndim, ndim)``."""
    shape = _shape_of(x)
    axes = _axes("sum", axis, len(shape), keepdims)
    return bind(SUM, x, axes=axes, keepdims=bool(keepdims), shape=shape)


def mean(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Mean over ``axis`` (derived: ``sum / n``). Two allocations."""
    shape = _shape_of(x)
    axes = _axes("mean", axis, len(shape), keepdims)
    n = 1
    for a in axes:
        n *= shape[a]
    s = bind(SUM, x, axes=axes, keepdims=bool(keepdims), shape=shape)
    from .elementwise import DIV

    return bind(DIV, s, float(n))


def max(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Maximum over ``axis``; ties share the gradient. Retains the input and the output."""
    axes = _axes("max", axis, len(_shape_of(x)), keepdims)
    return bind(MAX, x, axes=axes, keepdims=bool(keepdims))


def min(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Minimum over ``axis``; ties share the gradient. Retains the input and the output."""
    axes = _axes("min", axis, len(_shape_of(x)), keepdims)
    return bind(MIN, x, axes=axes, keepdims=bool(keepdims))


def prod(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Product over ``axis``; derivatives exact at zeros (as JAX). Retains the input and
    output."""
    axes = _axes("prod", axis, len(_shape_of(x)), keepdims)
    return bind(PROD, x, axes=axes, keepdims=bool(keepdims))
