"""``custom_vjp`` and ``custom_jvp``: user-defined derivatives for a whole function.

Both decorate a function written with tenferro ops and follow JAX's spelling::

    @ad.custom_vjp
    def f(x, y): ...
    def f_fwd(x, y): return f(x, y), residuals      # any tuple/list/dict of values
    def f_bwd(res, g): return (gx, gy)              # one cotangent (or None) per argument
    f.defvjp(f_fwd, f_bwd)

    @ad.custom_jvp
    def g(x): ...
    @g.defjvp
    def g_jvp(primals, tangents): return g(*primals), tangent_out

How they enter the tape: a call that a tape records runs ``fwd`` with recording on (so the
residuals keep their own dependence on the inputs, for higher order) and appends ONE node
for the result, whose VJP is ``bwd``.  The residuals are retained as that node's residuals
(``tape.retained()`` lists them) and released with the tape.  A ``custom_jvp`` function is
differentiated in reverse mode by transposing its JVP rule (which is linear in the
tangents).  Outside any transform both simply call the function.  Every cotangent or
tangent a user rule returns is checked against its argument's shape and dtype.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

import tenferro_storage as ts

from ._core._handle import EagerTensor, make_handle
from ._core._namespace import HANDLE_NS
from ._core._primitive import Primitive, Zero
from ._core._retention import AdValueRecord
from ._core._state import STATE, no_grad
from ._core._tape import TapeNode
from ._functional import constant, tree_flatten, vjp
from .errors import ArgumentError, ArgumentTypeError

__all__ = ["custom_jvp", "custom_vjp"]


class _NodeState:
    """What one recorded custom node's rule needs: the user's rule and the residuals."""

    __slots__ = ("cache", "fn", "likes", "nargs", "res_ids", "res_tree")

    def __init__(self, fn: Any, nargs: int, res_tree: Callable[[list[Any]], Any], ids: list[int]):
        self.fn = fn
        self.nargs = nargs
        self.res_tree = res_tree
        self.res_ids = ids  # value id of each residual leaf on the tape (-1: untracked)
        self.cache: tuple[Any, list[Any]] | None = None
        self.likes: list[np.ndarray[Any, Any]] = []  # each argument's value, for checks


def _as_handle(g: Any) -> EagerTensor:
    """A cotangent as a handle: handles pass; kernel scratch is owned without a copy
    when it can be, else laid out afresh (a kernel write)."""
    if isinstance(g, EagerTensor):
        return g
    g = np.asarray(g)
    if g.base is None and g.flags.carray:
        try:
            return constant(ts.kernel.adopt_output(g, STATE.reason, "cotangent"))
        except ts.errors.LayoutError:
            pass  # another value's memory: lay it out afresh below
    return constant(ts.kernel.adopt_output(np.array(g, order="C"), STATE.reason, "cotangent"))


def _checked(ct: Any, like: np.ndarray[Any, Any], name: str, i: int) -> Any:
    if isinstance(ct, EagerTensor):
        a = ct._r(name).a
    elif isinstance(ct, ts.Tensor | ts.TensorView | ts.TensorViewMut):
        a = ts.kernel.read_array(ct)
    else:
        a = np.asarray(ct)
    if a.shape != like.shape:
        raise ArgumentError(
            f"{name}: the rule returned a cotangent of shape {a.shape} for argument {i}, whose "
            f"shape is {like.shape}"
        )
    if a.dtype != like.dtype:
        raise ArgumentTypeError(
            f"{name}: the rule returned a {a.dtype.name} cotangent for argument {i}, whose "
            f"dtype is {like.dtype.name}"
        )
    return ct


def _record(
    prim: Primitive, fn: Any, args: tuple[Any, ...], out: Any, residuals: Any
) -> EagerTensor:
    """Append one custom node for ``out`` on the recording tape; returns the tracked handle."""
    tape = STATE.tape
    key = tape.key
    if not isinstance(out, EagerTensor):
        out = constant(out)
    leaves, rebuild = tree_flatten(residuals)
    res: list[Any] = []
    ids: list[int] = []
    for leaf in leaves:
        if isinstance(leaf, EagerTensor):
            rec = leaf._r(prim.name)
            rec.count += 1
            res.append(rec)
            ids.append(leaf._id if leaf._tape is key else -1)
        else:
            res.append(leaf)
            ids.append(-1)
    node = TapeNode.__new__(TapeNode)
    node.prim = prim
    node.ids = [a._id if isinstance(a, EagerTensor) and a._tape is key else -1 for a in args]
    node.params = {"state": _NodeState(fn, len(args), rebuild, ids)}
    node.res = res
    node.shapes = None
    vid = len(tape.nodes)
    tape.nodes.append(node)
    return make_handle(out._r(prim.name), key, vid)


def _residuals(st: _NodeState, res: tuple[Any, ...], handles: bool) -> Any:
    key = STATE.key
    leaves = []
    for r, rid in zip(res, st.res_ids, strict=True):
        if isinstance(r, EagerTensor):  # create_graph: the sweep made handles already
            r = r._rec
        if type(r) is AdValueRecord:
            tracked = handles and rid >= 0 and key is not None
            leaves.append(make_handle(r, key if tracked else None, rid if tracked else -1))
        else:
            leaves.append(r)
    return st.res_tree(leaves)


def _make_prim(name: str, bwd_all: Callable[..., list[Any]]) -> Primitive:
    def rule(ops: Any, g: Any, *res: Any, argnum: int, state: _NodeState) -> Any:
        cache = state.cache
        if cache is None or cache[0] is not g:  # one user-rule call per cotangent
            state.cache = cache = (g, bwd_all(ops, g, res, state))
        return cache[1][argnum]

    def no_impl(*a: Any, **k: Any) -> Any:
        raise ArgumentTypeError(f"{name}: a custom node is never applied directly")

    p = Primitive(name, no_impl, 1, variadic=True)
    p.defvjp(rule)
    return p


def _to_ns(ops: Any, ct: Any, like: np.ndarray[Any, Any]) -> Any:
    """A user cotangent in the sweep's namespace (handles, or arrays for numpy)."""
    if ct is None:
        return Zero(like.shape, like.dtype)
    if ops is HANDLE_NS:
        return ct if isinstance(ct, EagerTensor) else constant(np.asarray(ct))
    if isinstance(ct, EagerTensor):
        return ct._r("custom rule").a
    if isinstance(ct, ts.Tensor | ts.TensorView | ts.TensorViewMut):
        return ts.kernel.read_array(ct)
    return np.asarray(ct)


class custom_vjp:
    """Decorator: give ``fun`` a user-defined VJP (see the module docstring)."""

    def __init__(self, fun: Callable[..., Any]) -> None:
        if not callable(fun):
            raise ArgumentTypeError(
                f"custom_vjp: argument 'fun' must be callable, got {type(fun).__name__}"
            )
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None
        self._in_fwd = 0  # fwd may call the function itself: that call is plain
        self.prim = _make_prim(f"custom_vjp({getattr(fun, '__name__', 'f')})", self._bwd_all)

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any]) -> custom_vjp:
        """Register ``fwd(*args) -> (out, residuals)`` and ``bwd(residuals, g) -> tuple``."""
        if not callable(fwd) or not callable(bwd):
            raise ArgumentTypeError("custom_vjp.defvjp: fwd and bwd must be callable")
        self.fwd, self.bwd = fwd, bwd
        return self

    def _bwd_all(self, ops: Any, g: Any, res: tuple[Any, ...], st: _NodeState) -> list[Any]:
        handles = ops is HANDLE_NS
        residuals = _residuals(st, res, handles)
        assert self.bwd is not None
        if handles:
            cts = self.bwd(residuals, _as_handle(g))
        else:
            with no_grad():
                cts = self.bwd(residuals, _as_handle(g))
        name = self.prim.name
        if not isinstance(cts, tuple | list) or len(cts) != st.nargs:
            raise ArgumentTypeError(
                f"{name}: bwd must return a tuple with one cotangent per argument "
                f"({st.nargs}), got {type(cts).__name__}"
            )
        return [
            _to_ns(ops, None if ct is None else _checked(ct, like, name, i), like)
            for i, (ct, like) in enumerate(zip(cts, st.likes, strict=True))
        ]

    def __call__(self, *args: Any) -> Any:
        tape = STATE.tape
        if STATE.jvp is not None:
            raise ArgumentTypeError(
                f"{self.prim.name}: forward mode (jvp) of a custom_vjp function is not "
                "defined (as in JAX); use custom_jvp, or reverse mode"
            )
        tracked = tape is not None and any(
            isinstance(a, EagerTensor) and a._tape is tape.key and a._id >= 0 for a in args
        )
        if not tracked or STATE.region is not None or self._in_fwd:
            return self.fun(*args)  # nothing to differentiate here (or a checkpoint body)
        if self.fwd is None:
            raise ArgumentTypeError(
                f"{self.prim.name}: call defvjp(fwd, bwd) before differentiating it"
            )
        self._in_fwd += 1
        try:
            res = self.fwd(*args)
        finally:
            self._in_fwd -= 1
        if not isinstance(res, tuple | list) or len(res) != 2:
            raise ArgumentTypeError(f"{self.prim.name}: fwd must return (out, residuals)")
        h = _record(self.prim, self, args, res[0], res[1])
        _likes(h, args)
        return h


def _likes(h: EagerTensor, args: tuple[Any, ...]) -> None:
    """Remember each argument's value layout on the node (for checking user cotangents)."""
    tape = STATE.tape
    node = tape.nodes[h._id]
    node.params["state"].likes = [
        a._r("custom").a if isinstance(a, EagerTensor) else np.asarray(a) for a in args
    ]


class custom_jvp:
    """Decorator: give ``fun`` a user-defined JVP (see the module docstring)."""

    def __init__(self, fun: Callable[..., Any]) -> None:
        if not callable(fun):
            raise ArgumentTypeError(
                f"custom_jvp: argument 'fun' must be callable, got {type(fun).__name__}"
            )
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.rule: Callable[..., Any] | None = None
        self.prim = _make_prim(f"custom_jvp({getattr(fun, '__name__', 'f')})", self._bwd_all)

    def defjvp(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        """Register ``rule(primals, tangents) -> (out, tangent_out)``; returns ``rule``."""
        if not callable(rule):
            raise ArgumentTypeError("custom_jvp.defjvp: the rule must be callable")
        self.rule = rule
        return rule

    def _tangent_out(self, primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> Any:
        assert self.rule is not None
        res = self.rule(tuple(primals), tuple(tangents))
        if not isinstance(res, tuple | list) or len(res) != 2:
            raise ArgumentTypeError(f"{self.prim.name}: the rule must return (out, tangent_out)")
        return res

    def _bwd_all(self, ops: Any, g: Any, res: tuple[Any, ...], st: _NodeState) -> list[Any]:
        """Reverse mode: the transpose of the (linear) tangent map, by one nested vjp."""
        handles = ops is HANDLE_NS
        primals = _residuals(st, res, handles)
        zeros = [np.zeros(like.shape, like.dtype) for like in st.likes]

        def tangent_map(*ts_: Any) -> Any:
            return self._tangent_out(primals, ts_)[1]

        if handles:
            _, fn = vjp(tangent_map, *zeros)
            cts = fn(_as_handle(g))
        else:
            with no_grad():
                _, fn = vjp(tangent_map, *zeros)
                cts = fn(g)
        fn.release()
        return [_to_ns(ops, ct, like) for ct, like in zip(cts, st.likes, strict=True)]

    def __call__(self, *args: Any) -> Any:
        if self.rule is None:
            return self.fun(*args)
        ctx = STATE.jvp
        if ctx is not None:
            return self._forward(ctx, args)
        tape = STATE.tape
        tracked = tape is not None and any(
            isinstance(a, EagerTensor) and a._tape is tape.key and a._id >= 0 for a in args
        )
        if not tracked or STATE.region is not None:
            return self.fun(*args)
        with no_grad():
            out = self.fun(*args)
        h = _record(self.prim, self, args, out, list(args))
        _likes(h, args)
        return h

    def _forward(self, ctx: Any, args: tuple[Any, ...]) -> Any:
        """Inside a forward-mode context: the rule gives the output and its tangent."""
        tans = [
            ctx.tangents.get(a._rec) if isinstance(a, EagerTensor) else None for a in args
        ]
        if all(t is None for t in tans):
            return self.fun(*args)
        likes = [a._r("custom").a if isinstance(a, EagerTensor) else np.asarray(a) for a in args]
        t_handles = [
            _as_handle(np.zeros(like.shape, like.dtype) if t is None else t)
            for t, like in zip(tans, likes, strict=True)
        ]
        STATE.jvp = None  # the rule's own ops are not pushed through this context
        try:
            out, t_out = self._tangent_out(args, tuple(t_handles))
        finally:
            STATE.jvp = ctx
        if not isinstance(out, EagerTensor):
            out = constant(out)
        t_arr = t_out._r(self.prim.name).a if isinstance(t_out, EagerTensor) else np.asarray(t_out)
        _checked(t_arr, out._r(self.prim.name).a, self.prim.name, 0)
        ctx.tangents[out._r(self.prim.name)] = t_arr
        return out
