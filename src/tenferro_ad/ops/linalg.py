"""``matmul`` (bilinear, numpy semantics: 1-D operands, batched operands broadcast).

Einsum, linalg decompositions and complex rules belong to the next rule files; they
plug in exactly like this one (``defprimitive`` + ``defbilinear`` or per-argument rules).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._core._namespace import NUMPY_NS
from .._core._primitive import defbilinear, defprimitive
from .._traced._batch_rules import defbatch, emit, expand_batched, shape_of
from ..errors import ArgumentError
from ._util import bind_op, value_arg

Array = Any


def _mT(ops: Any, a: Array) -> Array:
    nd = a.ndim
    axes = (*tuple(range(nd - 2)), nd - 1, nd - 2)
    return ops.transpose(a, axes)


def _vjp_lhs(ops: Any, g: Array, x: Array, y: Array) -> Array:
    if ops is NUMPY_NS and x.ndim == 2 and y.ndim == 2:  # the common case, no bookkeeping
        return np.matmul(g, y.T)  # a transposed view: BLAS reads it in place, no copy
    xs, ys = tuple(x.shape), tuple(y.shape)
    if len(xs) == 1 and len(ys) == 1:
        return ops.mul(g, y)
    if len(ys) == 1:  # (..., m, k) @ (k,) -> (..., m)
        gx = ops.mul(ops.reshape(g, (*tuple(g.shape), 1)), y)
    elif len(xs) == 1:  # (k,) @ (..., k, n) -> (..., n)
        gx = ops.matmul(ops.reshape(g, (*tuple(g.shape)[:-1], 1, tuple(g.shape)[-1])), _mT(ops, y))
        gx = ops.reshape(gx, (*tuple(gx.shape)[:-2], tuple(gx.shape)[-1]))
    else:
        gx = ops.matmul(g, _mT(ops, y))
    return ops.unbroadcast(gx, xs)


def _vjp_rhs(ops: Any, g: Array, x: Array, y: Array) -> Array:
    if ops is NUMPY_NS and x.ndim == 2 and y.ndim == 2:
        return np.matmul(x.T, g)
    xs, ys = tuple(x.shape), tuple(y.shape)
    if len(xs) == 1 and len(ys) == 1:
        return ops.mul(g, x)
    if len(xs) == 1:  # (k,) @ (..., k, n) -> (..., n)
        gy = ops.mul(
            ops.reshape(x, (xs[0], 1)),
            ops.reshape(g, (*tuple(g.shape)[:-1], 1, tuple(g.shape)[-1])),
        )
    elif len(ys) == 1:  # (..., m, k) @ (k,) -> (..., m)
        gy = ops.matmul(_mT(ops, x), ops.reshape(g, (*tuple(g.shape), 1)))
        gy = ops.reshape(gy, tuple(gy.shape)[:-1])
    else:
        gy = ops.matmul(_mT(ops, x), g)
    return ops.unbroadcast(gy, ys)


MATMUL = defbilinear(defprimitive("matmul", np.matmul, 2), _vjp_lhs, _vjp_rhs)


def _batch_matmul(args: list[Any], batched: list[bool], size: int) -> tuple[Any, bool]:
    """Vectors become matrices (and the unit axis is dropped again), batched operands get
    unit axes after the batch up to the common rank; numpy's batched GEMM does the rest."""
    x, y = args
    bx, by = batched
    xs, ys = shape_of(x), shape_of(y)
    xv, yv = len(xs) - int(bx) == 1, len(ys) - int(by) == 1
    if xv:
        x = emit("reshape", x, shape=(*xs[:-1], 1, xs[-1]), src=xs)
    if yv:
        y = emit("reshape", y, shape=(*ys, 1), src=ys)
    top = max(len(shape_of(x)) - int(bx), len(shape_of(y)) - int(by))
    x = expand_batched(x, top) if bx else x
    y = expand_batched(y, top) if by else y
    out = emit("matmul", x, y)
    s = shape_of(out)
    if xv or yv:
        keep = s[:-2] + (() if xv else s[-2:-1]) + (() if yv else s[-1:])
        out = emit("reshape", out, shape=keep, src=s)
    return out, True


defbatch(MATMUL, _batch_matmul)


def _explain_operands(op_name: str, a: dict[str, Any]) -> None:
    """``explain`` hook of ``matmul`` (see :func:`~._util.op`)."""
    _explain_matmul(a["x"], a["y"])


matmul = bind_op(
    "matmul", MATMUL, 2,
    """``x @ y`` (numpy semantics). One allocation; retains both operands when tracked.
    A refusal names the argument: the operands are checked (type, rank, core and batch
    dimensions) only after the kernel refused, so the common call pays nothing for it.

    Cost: allocates the result; no copy; no sync; no dispatch; O(m k n) per matrix product.
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError.""",
    __name__,
    explain=_explain_operands,
)


def _explain_matmul(x: Any, y: Any) -> None:
    """Raise the error naming ``'x'``/``'y'`` for operands ``np.matmul`` cannot take (numpy
    blames a core-dimension mismatch on one operand only, whichever it reads second).
    Returns when it finds nothing wrong. O(rank), metadata only."""
    sx = value_arg("matmul", "x", x, imported=True)[0]
    sy = value_arg("matmul", "y", y, imported=True)[0]
    for s, nm in ((sx, "x"), (sy, "y")):
        if not s:
            raise ArgumentError(
                f"matmul: argument {nm!r} is 0-d; matmul needs at least one dimension "
                "(multiply scalars with mul)"
            )
    ky = 0 if len(sy) == 1 else len(sy) - 2
    if sx[-1] != sy[ky]:
        raise ArgumentError(
            f"matmul: arguments 'x' and 'y' do not fit: the last axis of 'x' has {sx[-1]} "
            f"entries but axis {ky} of 'y' has {sy[ky]} (shapes {sx} and {sy})"
        )
    bx, by = sx[:-2], sy[:-2]
    try:
        np.broadcast_shapes(bx, by)
    except ValueError:
        raise ArgumentError(
            f"matmul: arguments 'x' and 'y' have batch dimensions {bx} and {by}, which do "
            f"not broadcast (shapes {sx} and {sy})"
        ) from None
