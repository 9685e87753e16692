"""Optimizers that update uniquely owned parameters in place, atomically.

``opt.step(params, grads)`` takes matching pytrees (``tenferro_ad.tree_util``: lists,
tuples, dicts, namedtuples, registered dataclasses..., nested; ``None`` is an empty
subtree) of parameter owners (``Tensor``) and gradients.  A gradient is a ``Tensor``
owner, a ``TensorView``, an ``EagerTensor`` handle, a numpy array, or ``None`` at a
parameter's position (skip that parameter); it is only read, never consumed.  A
:class:`~tenferro_ad.Gradients` bundle is not a structure of gradients: pass
``[bundle.grad(h) for h in handles]``.

A step is all or nothing:

1. the two structures are compared (same nesting, same dict keys, same lengths) and every
   parameter and gradient is checked (a live floating-point owner; a gradient of the
   parameter's shape whose dtype can be written into it without dropping an imaginary
   part; no parameter twice) — the first problem raises an error naming the parameter's
   path (``params['w']``) and changes nothing;
2. every parameter is borrowed exclusively (``as_view_mut``); a parameter borrowed
   elsewhere raises ``BorrowError`` and changes nothing;
3. state buffers for parameters seen for the first time are allocated (``OPERATION_OUTPUT``,
   once per parameter);
4. only then are values and state written, and the step count advanced.

Optimizer state is keyed by the parameter itself (its allocation's span identity, which no
other allocation ever has), not by position: ``opt.step([a, b], ...)`` then
``opt.step([b], ...)`` continues ``b``'s own momentum.  Steady-state steps record no copy
and no allocation events.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_storage as ts
from tenferro_storage._pytree import keystr, tree_flatten_with_path

from ._core._gradients import Gradients
from ._core._handle import EagerTensor
from .errors import ArgumentError, ArgumentTypeError

__all__ = ["SGD", "Adam"]


def _structure(params: Any, grads: Any) -> list[tuple[str, Any, Any]]:
    """``(path, parameter, gradient)`` triples; refuses structures that differ."""
    if isinstance(grads, Gradients):
        raise ArgumentTypeError(
            "step: argument 'grads' is a Gradients bundle, which maps handles (not parameter "
            "owners) to gradients; pass the gradients in the parameters' structure, e.g. "
            "[bundle.grad(h) for h in handles]"
        )
    pairs, tree = tree_flatten_with_path(params)
    try:
        g = tree.flatten_up_to(grads)  # a None gradient at a parameter's position: skipped
    except ValueError as e:
        raise ArgumentError(
            f"step: the structure of 'grads' differs from the structure of 'params' "
            f"({tree.num_leaves} parameter leaves; every node type, length and dict key must "
            f"match): {e}"
        ) from None
    return [(f"params{keystr(path)}", a, b) for (path, a), b in zip(pairs, g, strict=True)]


def _grad_array(path: str, g: Any) -> np.ndarray[Any, Any] | None:
    """The read-only array a gradient reads as (no copy), or an error naming ``path``."""
    if g is None:
        return None
    if isinstance(g, ts.Tensor | ts.TensorView | ts.TensorViewMut):
        return ts.kernel.read_array(g)  # BorrowError / UseAfterMoveError name the problem
    if isinstance(g, EagerTensor):
        return g._r("step").a  # type: ignore[no-any-return]
    if isinstance(g, np.ndarray):
        return g
    raise ArgumentTypeError(
        f"step: the gradient for {path} is a {type(g).__name__}; expected a Tensor owner, a "
        "TensorView, an EagerTensor, a numpy array or None"
    )


def _check(triples: list[tuple[str, Any, Any]]) -> list[tuple[str, Any, Any, Any]]:
    """Validate every parameter and gradient before anything is borrowed or written."""
    seen: dict[str, str] = {}
    out = []
    for path, p, g in triples:
        if not isinstance(p, ts.Tensor):  # type narrowing stops here: p stays Any
            raise ArgumentTypeError(
                f"step: {path} is a {type(p).__name__}; optimizers update owners (Tensor) in "
                "place"
            )
        owner: Any = p
        shape, dt = tuple(owner.shape), owner.dtype  # UseAfterMoveError for a consumed owner
        if not dt.is_floating:
            raise ArgumentTypeError(
                f"step: {path} has dtype {dt.name}; only floating-point and complex parameters "
                "can be updated"
            )
        key = owner.span
        if key in seen:
            raise ArgumentError(f"step: {path} is the same parameter as {seen[key]}")
        seen[key] = path
        ga = _grad_array(path, g)
        if ga is not None:
            if tuple(ga.shape) != shape:
                raise ArgumentError(
                    f"step: the gradient for {path} has shape {tuple(ga.shape)}, the parameter "
                    f"{shape}"
                )
            if ga.dtype.kind not in "fc" or (ga.dtype.kind == "c" and dt.kind != "c"):
                raise ArgumentTypeError(
                    f"step: the gradient for {path} has dtype {ga.dtype}, which cannot update "
                    f"a {dt.name} parameter (it must be floating, and complex only for a "
                    "complex parameter)"
                )
        out.append((key, p, ga, (shape, dt)))
    return out


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


class _State:
    __slots__ = ("buffers", "count")

    def __init__(self, buffers: list[ts.Tensor[Any, Any]]) -> None:
        self.buffers = buffers
        self.count = 0  # updates this parameter has received


class _Optimizer:
    _n_state = 0

    def __init__(self) -> None:
        self._state: dict[str, _State] = {}
        self.steps = 0

    def step(self, params: Any, grads: Any) -> None:
        """Update ``params`` in place from ``grads``, atomically (see the module docstring).

        O(size) kernel work; no copy events; allocations only for a new parameter's state.
        """
        checked = _check(_structure(params, grads))
        views = _borrow_all([p for _, p, _, _ in checked])
        try:
            fresh = {
                key: _State([ts.zeros(shape, dt) for _ in range(self._n_state)])
                for key, _, ga, (shape, dt) in checked
                if ga is not None and key not in self._state
            }
            # nothing can fail past this point except the kernels themselves
            self._state.update(fresh)
            self.steps += 1
            for (key, _, ga, _), v in zip(checked, views, strict=True):
                if ga is None:
                    continue
                st = self._state[key]
                st.count += 1
                # every write access stays open until the update is done: the arrays it
                # hands out are only valid (and, in debug mode, only writable) meanwhile
                muts = [t.as_view_mut() for t in st.buffers]
                accesses = [m.prepare_host_mut() for m in muts]
                w = v.prepare_host_mut()
                try:
                    self._update(w.as_array(), ga, [a.as_array() for a in accesses], st.count)
                finally:
                    w.release()
                    for a in accesses:
                        a.release()
                    for m in muts:
                        m.release()
        finally:
            for v in views:
                v.release()

    def _update(self, p: Any, g: Any, state: list[Any], t: int) -> None:
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

    def _update(self, p: Any, g: Any, state: list[Any], t: int) -> None:
        if self.momentum:
            (v,) = state
            v *= self.momentum
            v += g
            p -= self.lr * v
        else:
            p -= self.lr * g


class Adam(_Optimizer):
    """Adam (Kingma & Ba) with bias correction; two state buffers and a step count per
    parameter (a parameter first updated at the fifth step starts its own count at 1)."""

    def __init__(
        self, lr: float = 1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
    ) -> None:
        super().__init__()
        self.lr = float(lr)
        self.b1 = float(b1)
        self.b2 = float(b2)
        self.eps = float(eps)
        self._n_state = 2

    def _update(self, p: Any, g: Any, state: list[Any], t: int) -> None:
        m, v = state
        m *= self.b1
        m += (1.0 - self.b1) * g
        v *= self.b2
        v += (1.0 - self.b2) * (g * np.conj(g) if np.iscomplexobj(g) else g * g)
        mhat = m / (1.0 - self.b1**t)
        vhat = v / (1.0 - self.b2**t)
        p -= self.lr * mhat / (np.sqrt(vhat) + self.eps)
