"""tenferro as quimb's autodiff backend: ``TNOptimizer(..., autodiff_backend="tenferro")``.

quimb's optimizer talks to an autodiff library through a small handler object
(``to_variable``, ``to_constant``, ``setup_fn``, ``value``, ``value_and_grad``, ``hessp``)
looked up by name in ``quimb.tensor.optimize._BACKEND_HANDLERS``; this module provides
:class:`TenferroHandler` and registers it under ``"tenferro"``.  The loss runs through
quimb's own code (its contraction calls reach tenferro through the autoray backend of
:mod:`._autoray`), so the gradient is tenferro's reverse mode through quimb's contraction.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import quimb.tensor.optimize as qopt

import tenferro_ad as ad

from ._autoray import register_autoray

__all__ = ["QUIMB_BACKEND", "TenferroHandler", "register_quimb"]

QUIMB_BACKEND = "tenferro"
"""The name to pass as ``TNOptimizer(..., autodiff_backend=QUIMB_BACKEND)``."""


def _tree_map(f: Callable[[Any], Any], tree: Any) -> Any:
    return ad.tree_util.tree_map(f, tree)


class TenferroHandler:
    """quimb's autodiff handler on tenferro (made by ``TNOptimizer``, not by users).

    Per evaluation: each of quimb's numpy parameter arrays is imported once (one recorded
    ``TRANSFER`` each: quimb reuses and overwrites its parameter vector, so tenferro owns
    a copy); the loss is quimb's function on tenferro values; :meth:`value_and_grad` runs
    tenferro's reverse mode through it and hands each gradient back as one recorded
    ``TRANSFER`` copy (``to_numpy``), conjugated for complex parameters as quimb expects
    (the conjugate of JAX's convention, which tenferro follows).  ``jit_fn=True`` traces
    the loss and its gradient once with :func:`tenferro_ad.jit` (quimb's code then runs on
    tracers); the default runs eagerly.  ``device`` is accepted for quimb's signature and
    must be ``None`` or ``"cpu"``.
    """

    def __init__(self, jit_fn: bool = False, device: str | None = None) -> None:
        if device not in (None, "cpu"):
            raise ValueError(
                f"TenferroHandler: argument 'device' {device!r} is not supported (tenferro "
                "runs on the host: pass None or 'cpu')"
            )
        self.jit_fn = jit_fn
        self._fn: Callable[[Any], Any] | None = None
        self._value: Callable[[Any], Any] | None = None
        self._value_and_grad: Callable[[Any], Any] | None = None

    def to_variable(self, x: Any) -> Any:
        """``x`` as a tenferro owner: itself if it is one, else one recorded import."""
        return ad.asarray(x)

    def to_constant(self, x: Any) -> Any:
        """Same as :meth:`to_variable` (constants are never differentiated)."""
        return ad.asarray(x)

    def setup_fn(self, fn: Callable[[Any], Any]) -> None:
        """Keep quimb's loss ``fn(arrays)`` and build its value-and-gradient function."""
        self._fn = fn
        vg = ad.value_and_grad(fn)
        if self.jit_fn:
            self._value = ad.jit(fn)
            self._value_and_grad = ad.jit(vg)
        else:
            self._value = fn
            self._value_and_grad = vg

    def _ready(self, what: str) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
        if self._value is None or self._value_and_grad is None:
            raise RuntimeError(f"TenferroHandler.{what}: call setup_fn(loss) first")
        return self._value, self._value_and_grad

    def value(self, arrays: Any) -> np.ndarray[Any, Any]:
        """The loss at ``arrays`` as a numpy scalar array."""
        value, _ = self._ready("value")
        return np.asarray(float(value(_tree_map(self.to_constant, arrays))))

    def value_and_grad(self, arrays: Any) -> tuple[np.ndarray[Any, Any], Any]:
        """The loss and its gradient (numpy arrays, one recorded copy each)."""
        _, vg = self._ready("value_and_grad")
        loss, grads = vg(_tree_map(self.to_variable, arrays))
        return np.asarray(float(loss)), _tree_map(_grad_to_numpy, grads)


def _grad_to_numpy(g: Any) -> np.ndarray[Any, Any]:
    """A gradient for quimb: conjugated when complex, one recorded ``TRANSFER`` copy."""
    if g.dtype.is_complex:
        g = ad.conj(g)
    out: np.ndarray[Any, Any] = g.to_numpy()
    return out


_LOCK = threading.Lock()


def register_quimb() -> str:
    """Register :class:`TenferroHandler` with quimb (and the autoray backend); returns
    ``"tenferro"``, the ``autodiff_backend=`` name.  Idempotent; O(1); allocates and
    copies nothing."""
    register_autoray()
    with _LOCK:
        qopt._BACKEND_HANDLERS[QUIMB_BACKEND] = TenferroHandler
    return QUIMB_BACKEND

