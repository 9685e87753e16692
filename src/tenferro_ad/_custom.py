"""``custom_vjp`` and ``custom_jvp``: user-defined derivatives for a whole function.

Both decorate a function written with tenferro ops and follow JAX's spelling::

    @ad.custom_vjp
    def f(x, y): ...
    def f_fwd(x, y): return f(x, y), residuals      # any pytree of values
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

Pytrees (``tenferro_ad.tree_util``, JAX's semantics): arguments and outputs may be any
pytrees (tuples, lists, dicts, namedtuples, ``None``, registered nodes) of values; ``g``
has the output's structure, ``bwd`` returns one cotangent pytree per argument (``None``
for a whole argument or at a leaf position: zeros), and a JVP rule receives tangents in
the arguments' structures.  A function with several output leaves appends one node per
output dtype whose value packs those leaves (a single leaf is its own value): the user's
rule runs once per backward for a single-dtype output (once per dtype otherwise, each
call with zeros at the other dtypes' leaves; the rule is linear in ``g``).

Traced values, and calls inside a checkpoint region, go through the custom call
primitives of :mod:`._custom_call` instead (the rule travels with the equation).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

import tenferro_storage as ts
from tenferro_storage._pytree import PyTreeDef, tree_flatten, tree_leaves

from ._core._handle import EagerTensor, make_handle
from ._core._namespace import HANDLE_NS
from ._core._primitive import Primitive, Zero
from ._core._retention import AdValueRecord
from ._core._state import STATE, no_grad
from ._core._tape import TapeNode
from ._custom_call import CustomCall, call_custom, flat_cotangents
from ._functional import constant, vjp
from ._traced._trace import Tracer
from .errors import ArgumentError, ArgumentTypeError
from .ops import shape as _sh

__all__ = ["custom_jvp", "custom_vjp"]


class _NodeState:
    """What one recorded custom node's rule needs: the user's rule and the residuals, the
    arguments' structure (``in_tree``, of the argument tuple) and the output's
    (``out_tree``; this node's value packs the output leaves ``group`` -- one per output
    dtype --, ``out_likes`` every output leaf's value, for the zero cotangents of the
    others)."""

    __slots__ = (
        "arg_trees", "cache", "fn", "group", "in_tree", "likes", "nargs", "out_likes",
        "out_tree", "res_ids", "res_tree",
    )

    def __init__(self, fn: Any, in_tree: PyTreeDef, res_tree: PyTreeDef, ids: list[int]):
        self.fn = fn
        self.in_tree = in_tree
        self.arg_trees = in_tree.children()  # each argument's structure
        self.nargs = len(self.arg_trees)
        self.res_tree = res_tree
        self.res_ids = ids  # value id of each residual leaf on the tape (-1: untracked)
        self.cache: tuple[Any, list[Any]] | None = None
        self.likes: list[np.ndarray[Any, Any]] = []  # each argument leaf's value, for checks
        self.out_tree: PyTreeDef | None = None
        self.group: tuple[int, ...] = (0,)
        self.out_likes: list[np.ndarray[Any, Any]] = []

    def cotangent(self, g: EagerTensor) -> Any:
        """The user rule's ``g``: the output's structure, this node's leaves from ``g``
        (metadata-only slices of the packed cotangent) and zeros elsewhere (just ``g``
        for a single output leaf). O(output leaves)."""
        tree = self.out_tree
        if tree is None or tree.num_leaves == 1:
            return g if tree is None else tree.unflatten([g])
        leaves: list[Any] = [_as_handle(np.zeros(a.shape, a.dtype)) for a in self.out_likes]
        if len(self.group) == 1:
            leaves[self.group[0]] = g
            return tree.unflatten(leaves)
        off = 0
        for j in self.group:
            a = self.out_likes[j]
            leaves[j] = _sh.reshape(_sh.getitem(g, slice(off, off + a.size)), a.shape)
            off += a.size
        return tree.unflatten(leaves)


def _as_handle(g: Any) -> EagerTensor:
    """A cotangent as a handle: handles pass; kernel scratch is owned without a copy
    when it can be; memory another value or the caller holds (a residual, the caller's
    seed, a view of one) becomes a recorded ``MATERIALIZE`` copy, never a second owner;
    any other view is laid out afresh (a kernel write)."""
    if isinstance(g, EagerTensor):
        return g
    g = np.asarray(g)
    try:
        return constant(ts.kernel.adopt_output(g, STATE.reason, "cotangent"))
    except ts.errors.AliasedOutputError:
        return constant(ts.kernel.materialize_output(g, STATE.reason, "cotangent"))
    except ts.errors.LayoutError:
        pass  # a view of scratch, or not contiguous: laid out afresh below
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


def _value_of(x: Any) -> np.ndarray[Any, Any]:
    return x._r("custom").a if isinstance(x, EagerTensor) else np.asarray(x)


def _record(
    prim: Primitive, fn: Any, args: tuple[Any, ...], out: Any, residuals: Any
) -> Any:
    """Append the custom nodes for ``out`` on the recording tape: one per output dtype,
    whose value packs that dtype's output leaves (raveled and joined: one allocation;
    a single leaf is its own value), so the user's rule runs once per backward for the
    usual single-dtype output.  Returns ``out``'s structure of tracked handles (a packed
    leaf is a recorded metadata-only slice of its node's value)."""
    tape = STATE.tape
    key = tape.key
    arg_leaves, in_tree = tree_flatten(args)
    out_leaves, out_tree = tree_flatten(out)
    out_leaves = [o if isinstance(o, EagerTensor) else constant(o) for o in out_leaves]
    leaves, res_tree = tree_flatten(residuals)
    ids_in = [
        a._id if isinstance(a, EagerTensor) and a._tape is key else -1 for a in arg_leaves
    ]
    likes = [_value_of(a) for a in arg_leaves]
    out_likes = [o._r(prim.name).a for o in out_leaves]
    groups: dict[np.dtype[Any], list[int]] = {}
    for j, a in enumerate(out_likes):
        groups.setdefault(a.dtype, []).append(j)
    handles: list[Any] = [None] * len(out_leaves)
    for group in groups.values():
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
        st = _NodeState(fn, in_tree, res_tree, ids)
        st.likes = likes
        st.out_tree, st.group, st.out_likes = out_tree, tuple(group), out_likes
        node = TapeNode.__new__(TapeNode)
        node.prim = prim
        node.ids = ids_in
        node.params = {"state": st}
        node.res = res
        node.shapes = None
        vid = len(tape.nodes)
        tape.nodes.append(node)
        if len(group) == 1:
            handles[group[0]] = make_handle(out_leaves[group[0]]._r(prim.name), key, vid)
            continue
        packed = np.concatenate([out_likes[j].reshape(-1) for j in group])
        h = make_handle(_as_handle(packed)._r(prim.name), key, vid)
        off = 0
        for j in group:
            a = out_likes[j]
            handles[j] = _sh.reshape(_sh.getitem(h, slice(off, off + a.size)), a.shape)
            off += a.size
    return out_tree.unflatten(handles)


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
    return st.res_tree.unflatten(leaves)


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
    """Decorator: give ``fun`` a user-defined VJP (see the module docstring).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to wrap; a call costs ``fun``'s forward
    rule.
    Raises: ArgumentTypeError."""

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
        self._calls: dict[Any, CustomCall] = {}  # traced primal graphs, per argument types

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any]) -> custom_vjp:
        """Register ``fwd(*args) -> (out, residuals)`` and ``bwd(residuals, g) -> tuple``.

        Returns this ``custom_vjp``; a later call replaces both rules.  The rules run only
        when the function is differentiated.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: ArgumentTypeError (``fwd`` or ``bwd`` is not callable)."""
        if not callable(fwd) or not callable(bwd):
            raise ArgumentTypeError("custom_vjp.defvjp: fwd and bwd must be callable")
        self.fwd, self.bwd = fwd, bwd
        return self

    def _defined(self) -> None:
        if self.fwd is None:
            raise ArgumentTypeError(
                f"{self.prim.name}: call defvjp(fwd, bwd) before differentiating it"
            )

    def _bwd_all(self, ops: Any, g: Any, res: tuple[Any, ...], st: _NodeState) -> list[Any]:
        handles = ops is HANDLE_NS
        residuals = _residuals(st, res, handles)
        assert self.bwd is not None
        if handles:
            cts = self.bwd(residuals, st.cotangent(_as_handle(g)))
        else:
            with no_grad():
                cts = self.bwd(residuals, st.cotangent(_as_handle(g)))
        name = self.prim.name
        if not isinstance(cts, tuple | list) or len(cts) != st.nargs:
            raise ArgumentTypeError(
                f"{name}: bwd must return a tuple with one cotangent per argument "
                f"({st.nargs}), got {type(cts).__name__}"
            )
        flat = flat_cotangents(cts, st.arg_trees, name)
        return [
            _to_ns(ops, None if ct is None else _checked(ct, like, name, i), like)
            for i, (ct, like) in enumerate(zip(flat, st.likes, strict=True))
        ]

    def __call__(self, *args: Any) -> Any:
        if self._in_fwd:
            return self.fun(*args)  # fwd's own call of the function
        if _has_tracer(args):  # traced: one custom_vjp_call equation carries the rule
            self._defined()
            return call_custom(self, "vjp", args)
        tape = STATE.tape
        if STATE.jvp is not None:
            raise ArgumentTypeError(
                f"{self.prim.name}: forward mode (jvp) of a custom_vjp function is not "
                "defined (as in JAX); use custom_jvp, or reverse mode"
            )
        if STATE.region is not None and _has_handle(args):
            self._defined()  # a checkpoint region replays recorded ops: one op
            return call_custom(self, "vjp", args)
        tracked = tape is not None and _tracked(args, tape.key)
        if not tracked:
            return self.fun(*args)  # nothing to differentiate here
        self._defined()
        assert self.fwd is not None
        self._in_fwd += 1
        try:
            res = self.fwd(*args)
        finally:
            self._in_fwd -= 1
        if not isinstance(res, tuple | list) or len(res) != 2:
            raise ArgumentTypeError(f"{self.prim.name}: fwd must return (out, residuals)")
        return _record(self.prim, self, args, res[0], res[1])


def _has_tracer(args: tuple[Any, ...]) -> bool:
    """Whether a leaf of ``args`` is a traced value. O(leaves)."""
    return any(type(a) is Tracer for a in tree_leaves(args))


def _has_handle(args: tuple[Any, ...]) -> bool:
    """Whether a leaf of ``args`` is a handle. O(leaves)."""
    return any(isinstance(a, EagerTensor) for a in tree_leaves(args))


def _tracked(args: tuple[Any, ...], key: Any) -> bool:
    """Whether a leaf of ``args`` is a handle tracked on the tape ``key``. O(nodes)."""
    for a in tree_leaves(args):
        if isinstance(a, EagerTensor) and a._tape is key and a._id >= 0:
            return True
    return False


class custom_jvp:
    """Decorator: give ``fun`` a user-defined JVP (see the module docstring).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to wrap; a call costs ``fun``'s forward
    rule.
    Raises: ArgumentTypeError."""

    def __init__(self, fun: Callable[..., Any]) -> None:
        if not callable(fun):
            raise ArgumentTypeError(
                f"custom_jvp: argument 'fun' must be callable, got {type(fun).__name__}"
            )
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.rule: Callable[..., Any] | None = None
        self.prim = _make_prim(f"custom_jvp({getattr(fun, '__name__', 'f')})", self._bwd_all)
        self._calls: dict[Any, CustomCall] = {}  # traced primal graphs, per argument types

    def defjvp(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        """Register ``rule(primals, tangents) -> (out, tangent_out)``; returns ``rule``.

        So it works as a decorator; a later call replaces the rule.  The rule runs only
        when the function is differentiated.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: ArgumentTypeError (``rule`` is not callable)."""
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
        zeros = st.in_tree.unflatten([np.zeros(like.shape, like.dtype) for like in st.likes])

        def tangent_map(*ts_: Any) -> Any:
            return self._tangent_out(primals, ts_)[1]

        if handles:
            _, fn = vjp(tangent_map, *zeros)
            cts = fn(st.cotangent(_as_handle(g)))
        else:
            with no_grad():
                _, fn = vjp(tangent_map, *zeros)
                cts = fn(st.cotangent(_as_handle(g)))
        fn.release()
        flat = tree_leaves(cts)
        return [_to_ns(ops, ct, like) for ct, like in zip(flat, st.likes, strict=True)]

    def __call__(self, *args: Any) -> Any:
        if self.rule is None:
            return self.fun(*args)
        if _has_tracer(args):  # traced: one custom_jvp_call equation carries the rule
            return call_custom(self, "jvp", args)
        ctx = STATE.jvp
        if ctx is not None:
            return self._forward(ctx, args)
        tape = STATE.tape
        if STATE.region is not None and _has_handle(args):
            return call_custom(self, "jvp", args)  # a checkpoint region: one op
        tracked = tape is not None and _tracked(args, tape.key)
        if not tracked:
            return self.fun(*args)
        with no_grad():
            out = self.fun(*args)
        return _record(self.prim, self, args, out, list(args))

    def _forward(self, ctx: Any, args: tuple[Any, ...]) -> Any:
        """Inside a forward-mode context: the rule gives the output and its tangent."""
        leaves, in_tree = tree_flatten(args)
        tans = [
            ctx.tangents.get(a._rec) if isinstance(a, EagerTensor) else None for a in leaves
        ]
        if all(t is None for t in tans):
            return self.fun(*args)
        likes = [_value_of(a) for a in leaves]
        t_handles = [
            _as_handle(np.zeros(like.shape, like.dtype) if t is None else t)
            for t, like in zip(tans, likes, strict=True)
        ]
        STATE.jvp = None  # the rule's own ops are not pushed through this context
        try:
            out, t_out = self._tangent_out(args, in_tree.unflatten(t_handles))
        finally:
            STATE.jvp = ctx
        name = self.prim.name
        outs, out_tree = tree_flatten(out)
        outs = [o if isinstance(o, EagerTensor) else constant(o) for o in outs]
        try:
            t_outs = out_tree.flatten_up_to(t_out)
        except ValueError as e:
            raise ArgumentTypeError(
                f"{name}: the rule's tangent_out must have the output's structure {out_tree}: "
                f"{e}"
            ) from None
        for i, (o, t) in enumerate(zip(outs, t_outs, strict=True)):
            t_arr = t._r(name).a if isinstance(t, EagerTensor) else np.asarray(t)
            _checked(t_arr, o._r(name).a, name, i)
            ctx.tangents[o._r(name)] = t_arr
        return out_tree.unflatten(outs)
