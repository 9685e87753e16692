"""Reductions over axes (``axis=None``: all; ``keepdims``).  ``max``/``min`` split the
gradient evenly among ties (as JAX does); ``prod`` assumes nonzero inputs in its VJP."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dispatch import bind
from .._handle import EagerTensor
from .._primitive import defprimitive

Array = Any


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = (axis,)
    return tuple(sorted(a % ndim for a in axis))


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


def _prod_vjp(
    ops: Any, g: Array, x: Array, out: Array, *, axes: tuple[int, ...], keepdims: bool
) -> Array:
    shape = tuple(x.shape)
    return ops.div(
        ops.mul(_expand(ops, g, shape, axes, keepdims), _expand(ops, out, shape, axes, keepdims)), x
    )


def _prod_jvp(
    ops: Any, t: Array, x: Array, out: Array, *, axes: tuple[int, ...], keepdims: bool
) -> Array:
    return ops.mul(out, ops.sum(ops.div(t, x), axis=axes, keepdims=keepdims))


PROD = defprimitive(
    "prod", _prod_impl, 1, save_in=(0,), save_out=True, vjp=(_prod_vjp,), jvp=(_prod_jvp,)
)


def _shape_of(x: Any) -> tuple[int, ...]:
    if isinstance(x, EagerTensor):
        return tuple(x._r("reduce").a.shape)
    shape = getattr(x, "shape", None)  # owners and numpy arrays
    return tuple(np.shape(x) if shape is None else shape)


def sum(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Sum over ``axis`` (int, tuple or ``None`` for all). One allocation; retains nothing."""
    shape = _shape_of(x)
    return bind(SUM, x, axes=_axes(axis, len(shape)), keepdims=keepdims, shape=shape)


def mean(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Mean over ``axis`` (derived: ``sum / n``). Two allocations."""
    shape = _shape_of(x)
    axes = _axes(axis, len(shape))
    n = 1
    for a in axes:
        n *= shape[a]
    s = bind(SUM, x, axes=axes, keepdims=keepdims, shape=shape)
    from .elementwise import DIV

    return bind(DIV, s, float(n))


def max(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Maximum over ``axis``; ties share the gradient. Retains the input and the output."""
    return bind(MAX, x, axes=_axes(axis, len(_shape_of(x))), keepdims=keepdims)


def min(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Minimum over ``axis``; ties share the gradient. Retains the input and the output."""
    return bind(MIN, x, axes=_axes(axis, len(_shape_of(x))), keepdims=keepdims)


def prod(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Product over ``axis`` (VJP assumes nonzero inputs). Retains the input and output."""
    return bind(PROD, x, axes=_axes(axis, len(_shape_of(x))), keepdims=keepdims)
