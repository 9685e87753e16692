"""Derived ops: compositions of primitives, no rules of their own (tested via the oracle)."""

from __future__ import annotations

from typing import Any

from .._handle import EagerTensor
from .._state import no_grad
from .elementwise import exp, log, stop_gradient, sub
from .reduce import max as rmax
from .reduce import sum as rsum


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> EagerTensor:
    """``log(sum(exp(x)))`` computed stably (shifted by the stop-gradient max)."""
    with no_grad():  # the shift is a constant: nothing recorded, nothing retained
        m = stop_gradient(rmax(x, axis=axis, keepdims=True))
    s = log(rsum(exp(sub(x, m)), axis=axis, keepdims=True))
    out = s + m
    if not keepdims:
        out = rsum(out, axis=axis) if axis is not None else out.reshape(())
    return out


def log_softmax(x: Any, axis: int = -1) -> EagerTensor:
    """``x - logsumexp(x, axis, keepdims=True)`` (stable)."""
    return sub(x, logsumexp(x, axis=axis, keepdims=True))


def softmax(x: Any, axis: int = -1) -> EagerTensor:
    """``exp(log_softmax(x))`` (stable)."""
    return exp(log_softmax(x, axis=axis))
