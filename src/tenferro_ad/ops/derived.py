"""Derived ops: compositions of primitives, no rules of their own (tested via the oracle)."""

from __future__ import annotations

from typing import Any

from .._core._dispatch import bind
from .._core._handle import EagerTensor
from .._core._state import no_grad
from ._axes import axis_index
from ._util import op, value_arg
from .elementwise import abs as eabs
from .elementwise import div, exp, less, log, stop_gradient, sub, where
from .reduce import LOG_SOFTMAX, _axes, _explain_empty, _shape_of
from .reduce import max as rmax
from .reduce import sum as rsum


def _explain_value(op_name: str, a: dict[str, Any]) -> None:
    """``explain`` hook (:func:`~._util.op`): names a refused ``x`` (error path only)."""
    value_arg(op_name, "x", a["x"], imported=True)


def _explain_softmax(op_name: str, a: dict[str, Any]) -> None:
    """``explain`` hook of ``softmax``/``log_softmax`` (see :func:`_explain`)."""
    _explain(op_name, a["x"], a["axis"])


@op("logsumexp", explain=_explain_value)
def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """``log(sum(exp(x)))`` computed stably (shifted by the stop-gradient max; a non-finite
    max shifts by 0, as JAX does, so ``logsumexp([inf, 0])`` is ``inf`` with gradient
    ``[nan, 0]``).

    Cost: allocates the result and a few temporaries; no copy; no sync; no dispatch; O(n)
    per-element.
    Raises: AxisError, ArgumentError, ArgumentTypeError."""
    _axes("logsumexp", axis, len(_shape_of(x)), keepdims)
    with no_grad():  # the shift is a constant: nothing recorded, nothing retained
        m = stop_gradient(rmax(x, axis=axis, keepdims=True))
        m = where(less(eabs(m), float("inf")), m, 0)
    s = log(rsum(exp(sub(x, m)), axis=axis, keepdims=True))
    out = s + m
    if not keepdims:
        out = rsum(out, axis=axis) if axis is not None else out.reshape(())
    return out


@op("log_softmax", explain=_explain_softmax)
def log_softmax(x: Any, axis: int = -1) -> EagerTensor:
    """``x - logsumexp(x, axis)`` computed as JAX does: shifted by the stop-gradient max
    (unguarded, so an infinite entry gives NaN like JAX).  Raises ``AxisError`` for an axis
    out of range.  One op (the ``log_softmax`` primitive): one output allocation plus
    kernel scratch; retains only its output.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError."""
    ax = axis_index("log_softmax", axis, len(_shape_of(x)))
    return bind(LOG_SOFTMAX, x, axes=(ax,))


@op("softmax", explain=_explain_softmax)
def softmax(x: Any, axis: int = -1) -> EagerTensor:
    """``exp(x) / sum(exp(x))`` computed as JAX does (shifted by the stop-gradient max).
    Raises ``AxisError`` for an axis out of range.  A few allocations.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError."""
    axis_index("softmax", axis, len(_shape_of(x)))
    with no_grad():
        m = stop_gradient(rmax(x, axis=axis, keepdims=True))
    unnormalized = exp(sub(x, m))
    return div(unnormalized, rsum(unnormalized, axis=axis, keepdims=True))


def _explain(op: str, x: Any, axis: Any) -> None:
    """On the error path of ``op``: raise the error naming ``'x'`` when it is not a value or
    is empty along ``axis`` (no maximum to shift by, as in scipy). O(ndim)."""
    _explain_empty(op, x, axis, "needs at least one entry along it")
