"""Reductions over axes (``axis=None``: all; ``keepdims``).  ``max``/``min`` split the
gradient evenly among ties (as JAX does); ``prod``'s first derivatives are exact at
zeros, infinities and NaNs (the product of the *other* entries, computed from prefix and
suffix products without division — JAX's values); its second derivatives are exact away
from zeros.

Axes follow numpy: an int, a numpy integer or a tuple of them in ``[-ndim, ndim)``; an axis
out of range raises :class:`~tenferro_ad.errors.AxisError` before anything is computed."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._core._dispatch import bind
from .._core._handle import EagerTensor
from .._core._namespace import NUMPY_NS
from .._core._primitive import defprimitive
from .._traced._batch_rules import defbatch, leading
from ..errors import ArgumentError, ArgumentTypeError
from ._axes import KERNEL_ERRORS, axes_tuple
from ._util import op, value_arg
from .elementwise import DIV, _inexact

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
    return NUMPY_NS.sum(a, axes, keepdims)  # np.sum's reduction without its Python wrapper


SUM = defprimitive(
    "sum",
    _sum_impl,
    1,
    vjp=(lambda ops, g, *, axes, keepdims, shape: _expand(ops, g, shape, axes, keepdims),),
    jvp=(lambda ops, t, *, axes, keepdims, shape: ops.sum(t, axis=axes, keepdims=keepdims),),
)
defbatch(SUM, leading("sum", shift=("axes",), prefix=("shape",)))


def _log_softmax_impl(a: Array, *, axes: tuple[int, ...] = (0,)) -> Array:
    """``shifted - log(sum(exp(shifted)))`` with ``shifted = a - max(a)``: the reductions
    are the ufuncs' own (``np.max``/``np.sum`` without their Python wrappers) and the log
    and the last subtraction are written over the fresh sum and ``shifted`` (the same values
    in two allocations fewer).  An empty axis raises numpy's reduction error."""
    a = np.asarray(_inexact(a))
    # unguarded, as JAX's log_softmax
    shifted = np.subtract(a, np.maximum.reduce(a, axis=axes, keepdims=True))
    if type(shifted) is not np.ndarray:  # a 0-d input (no axis to reduce: refused above)
        return shifted - np.log(np.add.reduce(np.exp(shifted), axis=axes, keepdims=True))
    total = np.add.reduce(np.exp(shifted), axis=axes, keepdims=True)
    np.log(total, out=total)
    return np.subtract(shifted, total, out=shifted)


def _log_softmax_d(ops: Any, g: Array, out: Array, *, axes: tuple[int, ...] = (0,)) -> Array:
    # the VJP g - softmax * sum(g), softmax = exp(out): JAX's composition's values
    if (
        ops is NUMPY_NS
        and type(g) is np.ndarray
        and type(out) is np.ndarray
        and g.dtype == out.dtype
        and g.shape == out.shape
    ):  # no-record backward: the product and the difference over the fresh exp(out)
        t = np.exp(out)
        np.multiply(t, np.add.reduce(g, axis=axes, keepdims=True), out=t)
        return np.subtract(g, t, out=t)
    return ops.sub(g, ops.mul(ops.exp(out), ops.sum(g, axis=axes, keepdims=True)))


LOG_SOFTMAX = defprimitive(
    "log_softmax",
    _log_softmax_impl,
    1,
    save_out=True,
    vjp=(_log_softmax_d,),
    jvp=(
        lambda ops, t, out, *, axes=(0,): ops.sub(
            t, ops.sum(ops.mul(ops.exp(out), t), axis=axes, keepdims=True)
        ),
    ),
)
"""``x - logsumexp(x)`` over ``axes`` as one op (JAX's composition: the shift by the max is
a constant); its rules read only the output.  One op instead of seven on the per-op path of
a classifier's loss."""
defbatch(LOG_SOFTMAX, leading("log_softmax", shift=("axes",)))


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
defbatch(MAX, leading("max", shift=("axes",)))
MIN = defprimitive(
    "min",
    _min_impl,
    1,
    save_in=(0,),
    save_out=True,
    vjp=(lambda ops, g, x, out, *, axes, keepdims: _chooser(ops, g, x, out, axes, keepdims),),
    jvp=(lambda ops, t, x, out, *, axes, keepdims: _chooser_jvp(ops, t, x, out, axes, keepdims),),
)
defbatch(MIN, leading("min", shift=("axes",)))


def _prod_impl(a: Array, *, axes: tuple[int, ...], keepdims: bool) -> Array:
    return np.prod(a, axis=axes, keepdims=keepdims)


def _others_impl(a: Array, *, axes: tuple[int, ...]) -> Array:
    """For every entry: the product of the *other* entries of its reduction group, exactly
    (prefix times suffix products, no division: right at zeros, infinities and NaNs)."""
    a = np.asarray(a)
    rest = [i for i in range(a.ndim) if i not in axes]
    perm = (*rest, *axes)
    moved = np.transpose(a, perm)
    flat = moved.reshape((*moved.shape[: len(rest)], -1))
    if flat.shape[-1] == 0 or flat.size == 0:
        return np.ones(a.shape, a.dtype)
    one = np.ones((*flat.shape[:-1], 1), flat.dtype)
    pre = np.cumprod(np.concatenate([one, flat[..., :-1]], axis=-1), axis=-1)
    suf = np.cumprod(np.concatenate([one, flat[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    inv = [0] * a.ndim
    for k, p in enumerate(perm):
        inv[p] = k
    # (np.asarray keeps a 0-d result 0-d; np.ascontiguousarray would make it 1-d)
    return np.asarray(np.transpose((pre * suf).reshape(moved.shape), inv), order="C")


def _others_vjp(ops: Any, g: Array, x: Array, *, axes: tuple[int, ...]) -> Array:
    # d others_i / d x_j = prod_{k != i, j} x_k = others_i / x_j (j != i).  Second
    # derivatives of prod are therefore exact away from zeros only.
    shape = tuple(x.shape)
    ge = ops.mul(g, ops.apply(PROD_OTHERS, x, axes=axes))
    total = _expand(ops, ops.sum(ge, axis=axes, keepdims=True), shape, axes, True)
    return ops.div(ops.sub(total, ge), x)


def _others_jvp(ops: Any, t: Array, x: Array, *, axes: tuple[int, ...]) -> Array:
    shape = tuple(x.shape)
    r = ops.div(t, x)
    s = _expand(ops, ops.sum(r, axis=axes, keepdims=True), shape, axes, True)
    return ops.mul(ops.apply(PROD_OTHERS, x, axes=axes), ops.sub(s, r))


PROD_OTHERS = defprimitive(
    "prod_others", _others_impl, 1, save_in=(0,), vjp=(_others_vjp,), jvp=(_others_jvp,)
)


def _prod_vjp(ops: Any, g: Array, x: Array, *, axes: tuple[int, ...], keepdims: bool) -> Array:
    shape = tuple(x.shape)
    others = ops.apply(PROD_OTHERS, x, axes=axes)
    return ops.mul(_expand(ops, g, shape, axes, keepdims), others)


def _prod_jvp(ops: Any, t: Array, x: Array, *, axes: tuple[int, ...], keepdims: bool) -> Array:
    others = ops.apply(PROD_OTHERS, x, axes=axes)
    return ops.sum(ops.mul(t, others), axis=axes, keepdims=keepdims)


PROD = defprimitive(
    "prod", _prod_impl, 1, save_in=(0,), vjp=(_prod_vjp,), jvp=(_prod_jvp,)
)
defbatch(PROD, leading("prod", shift=("axes",)))


def _shape_of(x: Any) -> tuple[int, ...]:
    if isinstance(x, EagerTensor):
        return tuple(x._r("reduce").a.shape)
    shape = getattr(x, "shape", None)  # owners and numpy arrays
    return tuple(np.shape(x) if shape is None else shape)


def _explain_value(op_name: str, a: dict[str, Any]) -> None:
    """``explain`` hook of ``sum``/``mean``/``prod`` (see :func:`~._util.op`)."""
    _explain_x(op_name, a["x"])


def _explain_reduced(op_name: str, a: dict[str, Any]) -> None:
    """``explain`` hook of ``max``/``min`` (see :func:`~._util.op`)."""
    _explain_empty(op_name, a["x"], a["axis"])


@op("sum", explain=_explain_value)
def sum(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Sum over ``axis`` (int, tuple or ``None`` for all). One allocation; retains nothing.

    Raises :class:`~tenferro_ad.errors.AxisError` for an axis outside ``[-ndim, ndim)``.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    shape = _shape_of(x)
    axes = _axes("sum", axis, len(shape), keepdims)
    return bind(SUM, x, axes=axes, keepdims=bool(keepdims), shape=shape)


@op("mean", explain=_explain_value)
def mean(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Mean over ``axis`` (derived: ``sum / n``). Two allocations.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    shape = _shape_of(x)
    axes = _axes("mean", axis, len(shape), keepdims)
    n = 1
    for a in axes:
        n *= shape[a]
    s = bind(SUM, x, axes=axes, keepdims=bool(keepdims), shape=shape)

    return bind(DIV, s, float(n))


@op("max", explain=_explain_reduced)
def max(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Maximum over ``axis``; ties share the gradient. Retains the input and the output.
    One allocation.  An empty reduced extent has no identity: refused, naming ``'x'``.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    axes = _axes("max", axis, len(_shape_of(x)), keepdims)
    return bind(MAX, x, axes=axes, keepdims=bool(keepdims))


@op("min", explain=_explain_reduced)
def min(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Minimum over ``axis``; ties share the gradient. Retains the input and the output.
    One allocation.  An empty reduced extent has no identity: refused, naming ``'x'``.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    axes = _axes("min", axis, len(_shape_of(x)), keepdims)
    return bind(MIN, x, axes=axes, keepdims=bool(keepdims))


def _explain_x(op: str, x: Any) -> None:
    """On the error path of a reduction: raise the error naming ``'x'`` when it is not a
    value (a type, a ragged list, an unsupported dtype: :func:`~._util.value_arg`); return
    otherwise. O(1) for arrays."""
    value_arg(op, "x", x, imported=True)


def _explain_empty(
    op: str, x: Any, axis: Any, why: str = "of an empty array has no identity"
) -> None:
    """On the error path of ``op`` (``max``/``min``; ``softmax`` and kin, whose ``why``
    differs): raise the error naming ``'x'`` when it is not a value
    (:func:`~._util.value_arg`) or is empty along a reduced axis (``{op} {why}``); return
    when neither explains the failure. O(ndim), metadata only."""
    shape = value_arg(op, "x", x, imported=True)[0]
    try:
        axes = axes_tuple(op, axis, len(shape))
    except KERNEL_ERRORS:
        return
    empty = [a for a in axes if shape[a] == 0]
    if empty:
        where = "" if axis is None else f" along axis {empty[0]}"
        raise ArgumentError(
            f"{op}: argument 'x' is empty (shape {shape}){where}; {op} {why}"
        ) from None


@op("prod", explain=_explain_value)
def prod(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """Product over ``axis``; first derivatives exact at zeros (as JAX). Retains the input.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    axes = _axes("prod", axis, len(_shape_of(x)), keepdims)
    return bind(PROD, x, axes=axes, keepdims=bool(keepdims))

defbatch(PROD_OTHERS, leading("prod_others", shift=("axes",)))
