"""The update rules: SGD (momentum, Nesterov), Adam, AdamW, RMSProp.

Each ``_update`` writes with numpy ufuncs into the parameter ``p``, its state arrays and
the scratch ``s`` (``out=`` and in-place operators only: no temporaries).  ``g`` is the
effective gradient (conjugated for complex parameters, clipped, coupled weight decay added;
see ``Optimizer._effective_gradient``); it is read, never written.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ._base import Array, LearningRate, Optimizer, Scratch, abs_sq

__all__ = ["SGD", "Adam", "AdamW", "RMSProp"]


def _in(name: str, value: float, low: float, high: float, who: str) -> float:
    """``value`` as a float if ``low <= value < high``, else an error naming ``name``."""
    v = float(value)
    if not (low <= v < high):
        raise ArgumentError(f"{who}: argument {name!r} must be in [{low}, {high}), got {value!r}")
    return v


_INF = math.inf


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, Nesterov momentum and weight decay
    (torch ``SGD`` with ``dampening=0``; optax ``sgd`` with ``add_decayed_weights`` first).

    ``g += weight_decay * p``; with momentum ``v = momentum * v + g`` and the step direction
    ``d = g + momentum * v`` (Nesterov) or ``d = v``; without momentum ``d = g``;
    ``p -= lr * d``.  State: one buffer (``momentum``) when ``momentum > 0``, else none.

    Cost: no allocation; no copy; no sync; no dispatch until the first ``step`` (momentum state
    allocated once); O(1).
    Raises: ArgumentError."""

    _hyper_names = ("lr", "momentum", "nesterov", "weight_decay", "clip_norm")

    def __init__(self, lr: LearningRate, momentum: float = 0.0, *, nesterov: bool = False,
                 weight_decay: float = 0.0, clip_norm: float | None = None) -> None:
        super().__init__(lr, clip_norm)
        self.momentum = _in("momentum", momentum, 0.0, _INF, "SGD")
        self.nesterov = bool(nesterov)
        if self.nesterov and not self.momentum:
            raise ArgumentError("SGD: nesterov=True needs a momentum > 0")
        self.weight_decay = self._coupled_weight_decay = _in(
            "weight_decay", weight_decay, 0.0, _INF, "SGD")
        self._buffer_specs = (("momentum", "param"),) if self.momentum else ()

    def _update(self, p: Array, g: Array, state: dict[str, Array], t: int, lr: float,
                s: Scratch) -> None:
        if self.momentum:
            v = state["momentum"]
            v *= self.momentum
            v += g
            if self.nesterov:
                np.multiply(v, self.momentum, out=s.w)
                s.w += g
                s.w *= lr
            else:
                np.multiply(v, lr, out=s.w)
        else:
            np.multiply(g, lr, out=s.w)
        p -= s.w


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction, as optax ``adam`` and torch ``Adam``.

    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) |g|^2``, ``p -= lr * m_hat /
    (sqrt(v_hat) + eps)`` with ``m_hat = m / (1 - b1^t)``, ``v_hat = v / (1 - b2^t)`` and
    ``t`` the parameter's own update count (a parameter first updated at the fifth step
    starts at ``t = 1``).  ``weight_decay`` is torch's L2 term (``g += weight_decay * p``);
    for decoupled decay use :class:`AdamW`.  State: ``m`` (the parameter's dtype) and ``v``
    (its real dtype).

    Cost: no allocation; no copy; no sync; no dispatch until the first ``step`` (which allocates the
    moments once); O(1).
    Raises: ArgumentError."""

    _hyper_names = ("lr", "b1", "b2", "eps", "weight_decay", "clip_norm")

    def __init__(self, lr: LearningRate = 1e-3, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-8, *, weight_decay: float = 0.0,
                 clip_norm: float | None = None) -> None:
        super().__init__(lr, clip_norm)
        who = type(self).__name__
        self.b1 = _in("b1", b1, 0.0, 1.0, who)
        self.b2 = _in("b2", b2, 0.0, 1.0, who)
        self.eps = _in("eps", eps, 0.0, _INF, who)
        self.weight_decay = _in("weight_decay", weight_decay, 0.0, _INF, who)
        self._coupled_weight_decay = self.weight_decay
        self._buffer_specs = (("m", "param"), ("v", "real"))

    def _direction(self, g: Array, state: dict[str, Array], t: int, s: Scratch) -> Array:
        """``m_hat / (sqrt(v_hat) + eps)`` into ``s.w`` after updating ``m`` and ``v``."""
        m, v = state["m"], state["v"]
        m *= self.b1
        np.multiply(g, 1.0 - self.b1, out=s.w)
        m += s.w
        v *= self.b2
        abs_sq(g, s.r, s.w.real if s.w.dtype.kind == "c" else s.w)
        s.r *= 1.0 - self.b2
        v += s.r
        np.divide(v, 1.0 - self.b2**t, out=s.r)
        np.sqrt(s.r, out=s.r)
        s.r += self.eps
        np.divide(m, 1.0 - self.b1**t, out=s.w)
        s.w /= s.r
        return s.w

    def _update(self, p: Array, g: Array, state: dict[str, Array], t: int, lr: float,
                s: Scratch) -> None:
        d = self._direction(g, state, t, s)
        d *= lr
        p -= d


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), as optax ``adamw`` and torch
    ``AdamW``: ``p -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * p)``.  The decay
    is not part of the gradient, so it bypasses the moments and gradient clipping.

    Cost: no allocation; no copy; no sync; no dispatch until the first ``step`` (which allocates the
    moments once); O(1).
    Raises: ArgumentError."""

    def __init__(self, lr: LearningRate = 1e-3, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-8, *, weight_decay: float = 1e-2,
                 clip_norm: float | None = None) -> None:
        super().__init__(lr, b1, b2, eps, weight_decay=weight_decay, clip_norm=clip_norm)
        self._coupled_weight_decay = 0.0

    def _update(self, p: Array, g: Array, state: dict[str, Array], t: int, lr: float,
                s: Scratch) -> None:
        d = self._direction(g, state, t, s)
        p *= 1.0 - lr * self.weight_decay
        d *= lr
        p -= d


class RMSProp(Optimizer):
    """RMSProp (Tieleman & Hinton) with optax's and torch's options.

    ``nu = decay nu + (1 - decay) |g|^2``; the scale is ``sqrt(nu + eps)`` with
    ``eps_in_sqrt=True`` (optax's default) or ``sqrt(nu) + eps`` (torch's ``RMSprop``, whose
    ``alpha`` is ``decay``); ``centered=True`` subtracts ``|mu|^2`` of the gradient's moving
    average ``mu`` under the root; with ``momentum`` the step is ``p -= lr * tr`` with
    ``tr = momentum tr + g / scale``, else ``p -= lr * g / scale``.  ``weight_decay`` is the
    L2 term added to the gradient.  State: ``nu`` (real dtype), ``mu`` when centered, ``trace``
    with momentum.

    Cost: no allocation; no copy; no sync; no dispatch until the first ``step`` (which allocates its
    state once); O(1).
    Raises: ArgumentError."""

    _hyper_names = ("lr", "decay", "eps", "eps_in_sqrt", "centered", "momentum",
                    "weight_decay", "clip_norm")

    def __init__(self, lr: LearningRate = 1e-2, decay: float = 0.9, eps: float = 1e-8, *,
                 eps_in_sqrt: bool = True, centered: bool = False, momentum: float = 0.0,
                 weight_decay: float = 0.0, clip_norm: float | None = None) -> None:
        super().__init__(lr, clip_norm)
        self.decay = _in("decay", decay, 0.0, 1.0, "RMSProp")
        self.eps = _in("eps", eps, 0.0, _INF, "RMSProp")
        self.eps_in_sqrt, self.centered = bool(eps_in_sqrt), bool(centered)
        self.momentum = _in("momentum", momentum, 0.0, _INF, "RMSProp")
        self.weight_decay = self._coupled_weight_decay = _in(
            "weight_decay", weight_decay, 0.0, _INF, "RMSProp")
        specs: list[tuple[str, str]] = [("nu", "real")]
        if self.centered:
            specs.append(("mu", "param"))
        if self.momentum:
            specs.append(("trace", "param"))
        self._buffer_specs = tuple(specs)

    def _update(self, p: Array, g: Array, state: dict[str, Array], t: int, lr: float,
                s: Scratch) -> None:
        tmp: Any = s.w.real if s.w.dtype.kind == "c" else s.w
        nu = state["nu"]
        nu *= self.decay
        abs_sq(g, s.r, tmp)
        s.r *= 1.0 - self.decay
        nu += s.r
        if self.centered:
            mu = state["mu"]
            mu *= self.decay
            np.multiply(g, 1.0 - self.decay, out=s.w)
            mu += s.w
            abs_sq(mu, s.r, tmp)
            np.subtract(nu, s.r, out=s.r)
            base = s.r
        else:
            base = nu
        if self.eps_in_sqrt:
            np.add(base, self.eps, out=s.r)
            np.sqrt(s.r, out=s.r)
        else:
            np.sqrt(base, out=s.r)
            s.r += self.eps
        np.divide(g, s.r, out=s.w)
        if self.momentum:
            tr = state["trace"]
            tr *= self.momentum
            tr += s.w
            np.multiply(tr, lr, out=s.w)
        else:
            s.w *= lr
        p -= s.w
