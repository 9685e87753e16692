"""Optimizers that update uniquely owned parameters in place.

``opt.step(params, grads)`` takes matching structures (list / tuple / dict, nested) of
parameter owners (``Tensor``) and gradients (``Tensor`` owners or ``TensorView``s, or
``None`` to skip).  It first takes an *exclusive* borrow of every parameter
(``as_view_mut``); if any parameter is borrowed elsewhere (a live view, a guard, a
functional-API call still holding it) the step raises ``BorrowError`` and changes
nothing — no value, no optimizer state.  Then it writes through the prepared write
access: no copy events, no allocation events (state buffers are allocated once, on the
first step, as ``OPERATION_OUTPUT``).  Gradients are only read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_storage as ts

from ._functional import tree_flatten


def _leaves(params: Any, grads: Any) -> tuple[list[Any], list[Any]]:
    p, _ = tree_flatten(params)
    g, _ = tree_flatten(grads)
    if len(p) != len(g):
        raise ValueError(f"step: {len(p)} parameters but {len(g)} gradients (structures differ)")
    for i, t in enumerate(p):
        if not isinstance(t, ts.Tensor):
            raise TypeError(
                f"step: parameter {i} is a {type(t).__name__}; optimizers update owners "
                "(Tensor) in place"
            )
    return p, g


def _borrow_all(params: list[Any]) -> list[Any]:
    """Exclusive borrows of every parameter, all or nothing (BorrowError changes nothing)."""
    views: list[Any] = []
    try:
        for t in params:
            views.append(t.as_view_mut())
    except BaseException:
        for v in views:
            v.release()
        raise
    return views


def _read(g: Any) -> np.ndarray[Any, Any] | None:
    if g is None:
        return None
    return ts.kernel.read_array(g)


class _Optimizer:
    def __init__(self) -> None:
        self._state: dict[int, list[ts.Tensor[Any, Any]]] = {}
        self.steps = 0

    def _slots(self, i: int, p: Any, n: int) -> list[np.ndarray[Any, Any]]:
        st = self._state.get(i)
        if st is None:
            st = [ts.zeros(tuple(p.shape), p.dtype) for _ in range(n)]
            self._state[i] = st
        out = []
        for t in st:
            with t.as_view_mut() as m:
                w = m.prepare_host_mut()
                out.append(w.as_array())
                w.release()
        return out

    def step(self, params: Any, grads: Any) -> None:
        """Update ``params`` in place from ``grads`` (see the module docstring). O(size)."""
        plist, glist = _leaves(params, grads)
        views = _borrow_all(plist)
        try:
            shapes = [tuple(v.shape) for v in views]
            self.steps += 1
            for i, (v, g) in enumerate(zip(views, glist, strict=True)):
                ga = _read(g)
                if ga is None:
                    continue
                if tuple(ga.shape) != shapes[i]:
                    raise ValueError(
                        f"step: gradient {i} has shape {tuple(ga.shape)}, parameter {shapes[i]}"
                    )
                state = self._slots(i, v, self._n_state)
                w = v.prepare_host_mut()
                self._update(w.as_array(), ga, state)
                w.release()
        finally:
            for v in views:
                v.release()

    _n_state = 0

    def _update(self, p: Any, g: Any, state: list[Any]) -> None:
        raise NotImplementedError


class SGD(_Optimizer):
    """Stochastic gradient descent with optional (heavy-ball) momentum.

    ``v = momentum * v + g; p -= lr * v`` (plain ``p -= lr * g`` when momentum is 0).
    """

    def __init__(self, lr: float, momentum: float = 0.0) -> None:
        super().__init__()
        self.lr = float(lr)
        self.momentum = float(momentum)
        self._n_state = 1 if momentum else 0

    def _update(self, p: Any, g: Any, state: list[Any]) -> None:
        if self.momentum:
            (v,) = state
            v *= self.momentum
            v += g
            p -= self.lr * v
        else:
            p -= self.lr * g


class Adam(_Optimizer):
    """Adam (Kingma & Ba) with bias correction; two state buffers per parameter."""

    def __init__(
        self, lr: float = 1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
    ) -> None:
        super().__init__()
        self.lr = float(lr)
        self.b1 = float(b1)
        self.b2 = float(b2)
        self.eps = float(eps)
        self._n_state = 2

    def _update(self, p: Any, g: Any, state: list[Any]) -> None:
        m, v = state
        m *= self.b1
        m += (1.0 - self.b1) * g
        v *= self.b2
        v += (1.0 - self.b2) * (g * g)
        t = self.steps
        mhat = m / (1.0 - self.b1**t)
        vhat = v / (1.0 - self.b2**t)
        p -= self.lr * mhat / (np.sqrt(vhat) + self.eps)


__all__ = ["SGD", "Adam"]
