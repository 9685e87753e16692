"""Custom rules as primitives: the ``custom_vjp_call`` and ``custom_jvp_call`` equations.

JAX's approach: where a ``custom_vjp``/``custom_jvp`` function cannot simply append its
own node to an eager tape -- called on traced values (``jit``, ``vmap``, traced
``grad``/``jvp``, a traced checkpoint) or inside an eager checkpoint region, whose
interior is replayed from recorded ops -- it becomes ONE primitive application per
output dtype that carries the rule.  Its parameter :class:`CustomCall` holds the user's
function object and the primal function traced to a graph, so

* evaluating it (numpy, a compiled program, the probe of abstract evaluation) runs the
  primal graph's kernels;
* its VJP rule runs the user's ``fwd`` on the saved inputs and calls ``bwd`` once per
  output cotangent (cached across the arguments' rules; a traced backward therefore
  recomputes ``fwd`` from the inputs, as a checkpoint would);  a ``custom_jvp`` call is
  reversed by transposing its JVP rule (one nested ``vjp`` of the tangent map);
* its JVP rule (``Primitive.jvp_all``) calls the user's JVP rule once with every tangent;
  forward mode of a ``custom_vjp`` call is refused, as in JAX;
* on eager handles (``grad(jit(f))``, a checkpoint replay) it binds like any primitive,
  so the tape records it with these rules.

Output leaves of one dtype are packed into one 1-D value (each leaf raveled, in order)
and unpacked by metadata-only slices, so a function with a tuple (or any pytree) of
outputs calls its rule once per output dtype -- once for the usual single-dtype output.
``vmap`` batches a call with a rule, as JAX does: the batched call is ONE call of a
batched function object whose primal, ``fwd``/``bwd`` (or JVP rule) are the user's
mapped with ``vmap`` over the batched argument leaves (an unbatched argument's cotangent
is summed over the batch), made once per (call, batched leaves, batch size).  The XLA
engine lowers a call by lowering its primal graph inline (the rules are used only by the
transforms, which run before lowering).  The function's body must not close over traced
values of an enclosing trace (pass them as arguments, as JAX's ``closure_convert`` does).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from contextlib import nullcontext as _nothing
from typing import Any

import numpy as np

import tenferro_storage as ts
from tenferro_storage._pytree import PyTreeDef, tree_flatten, tree_leaves

from ._core._dispatch import bind
from ._core._handle import EagerTensor
from ._core._namespace import HANDLE_NS, NUMPY_NS
from ._core._primitive import Primitive, Zero
from ._core._state import STATE, no_grad
from ._functional import constant, vjp
from ._traced._batch_rules import defbatch
from ._traced._batching import vmap
from ._traced._eval import eval_graph
from ._traced._graph import Graph, Var
from ._traced._lowering import deflower, lower_outputs
from ._traced._trace import TRACE_NS, Tracer, aval_of, trace, trace_flat
from ._traced._transform import vjp as graph_vjp
from .errors import ArgumentError, ArgumentTypeError
from .ops import reduce as rd
from .ops import shape as sh

Aval = tuple[tuple[int, ...], np.dtype[Any]]


class CustomCall:
    """The static parameter of one custom call: the user's function object ``fn`` (a
    ``custom_vjp`` or ``custom_jvp``), its primal ``graph`` at the call's argument types,
    the argument and output structures, each output leaf's type, and ``groups``: the
    output leaves packed by each equation (one group per output dtype).  Compared and
    hashed by identity.  ``cache`` holds the last cotangents computed, so one backward
    calls the user's rule once for all arguments."""

    __slots__ = (
        "batched", "cache", "fn", "graph", "groups", "in_avals", "in_tree", "out_avals",
        "out_tree",
    )

    def __init__(self, fn: Any, graph: Graph, in_avals: list[Aval]) -> None:
        self.fn = fn
        self.graph = graph
        self.in_tree: PyTreeDef = graph.in_tree
        self.out_tree: PyTreeDef = graph.out_tree
        self.in_avals = in_avals
        self.out_avals: list[Aval] = [(a.shape, a.dtype) for a in graph.outvars]
        order: dict[np.dtype[Any], list[int]] = {}
        for j, (_, dt) in enumerate(self.out_avals):
            order.setdefault(dt, []).append(j)
        self.groups = tuple(tuple(g) for g in order.values())
        self.cache: tuple[Any, ...] | None = None
        self.batched: dict[tuple[tuple[bool, ...], int], CustomCall] = {}

    def __repr__(self) -> str:
        return getattr(self.fn, "__name__", "f")


def _run(graph: Graph, arrays: Sequence[Any]) -> list[np.ndarray[Any, Any]]:
    """The primal graph's kernels on numpy arrays, in order. O(equations)."""
    env: dict[Var, Any] = dict(zip(graph.invars, arrays, strict=True))
    for e in graph.eqns:
        env[e.out] = np.asarray(
            e.prim.impl(*[env[a] if isinstance(a, Var) else a.value for a in e.inputs], **e.params)
        )
    return [env[a] if isinstance(a, Var) else np.asarray(a.value) for a in graph.outvars]


def _impl(*arrays: Any, call: CustomCall, group: int) -> np.ndarray[Any, Any]:
    """One group's outputs: the leaf itself (a fresh array), or every leaf raveled and
    concatenated. One allocation."""
    outs = _run(call.graph, arrays)
    idx = call.groups[group]
    if len(idx) == 1:
        return np.array(outs[idx[0]], order="C")
    return np.concatenate([outs[j].reshape(-1) for j in idx])


# -- the rules ---------------------------------------------------------------------------------
def _is_traced(ops: Any) -> bool:
    return ops is TRACE_NS


def _as_handle(g: Any) -> Any:
    """A numpy value for the user's rule: a handle (the eager rules' convention); handles
    and tracers pass."""
    if isinstance(g, EagerTensor | Tracer):
        return g
    return constant(np.asarray(g))


def _unpack(ops: Any, g: Any, call: CustomCall, group: int) -> list[Any]:
    """Every output leaf's cotangent (or tangent): this group's from ``g`` (metadata-only
    slices of the packed value), zeros for the others."""
    leaves: list[Any] = [np.zeros(s, d) for s, d in call.out_avals]
    idx = call.groups[group]
    if len(idx) == 1:
        leaves[idx[0]] = g
        return leaves
    off = 0
    for j in idx:
        shape = call.out_avals[j][0]
        n = int(np.prod(shape, dtype=np.int64))
        if ops is NUMPY_NS:
            leaves[j] = np.asarray(g)[off : off + n].reshape(shape)
        else:
            leaves[j] = sh.reshape(sh.getitem(g, slice(off, off + n)), shape)
        off += n
    return leaves


def _pack(ops: Any, leaves: list[Any], call: CustomCall, group: int) -> Any:
    """This group's leaves as the equation's one value (the inverse of :func:`_unpack`)."""
    idx = call.groups[group]
    if len(idx) == 1:
        return leaves[idx[0]]
    if ops is NUMPY_NS:
        return np.concatenate([np.asarray(leaves[j]).reshape(-1) for j in idx])
    return ops.concatenate([ops.reshape(leaves[j], (-1,)) for j in idx], axis=0)


def _in_ns(ops: Any, x: Any, aval: Aval) -> Any:
    """A rule result in the sweep's namespace: numpy arrays for numpy, else as given
    (``None``: a symbolic zero)."""
    if x is None:
        return Zero(aval[0], aval[1])
    if ops is NUMPY_NS:
        if isinstance(x, EagerTensor):
            return x._r("custom rule").a
        if isinstance(x, ts.Tensor | ts.TensorView | ts.TensorViewMut):
            return ts.kernel.read_array(x)
        return np.asarray(x)
    if ops is HANDLE_NS and not isinstance(x, EagerTensor):
        return constant(np.asarray(x) if not isinstance(x, ts.Tensor) else x)
    return x


def checked(x: Any, aval: Aval, name: str, what: str, i: int) -> None:
    """Refuse a rule result whose shape or dtype differs from its argument's or output's
    (``what``: ``"cotangent"`` for argument ``i``, ``"tangent"`` for output leaf ``i``),
    naming the function and the position. Metadata only."""
    if x is None:
        return
    shape, dtype = aval_of(x, name)
    of = "argument" if what == "cotangent" else "output leaf"
    if shape != aval[0]:
        raise ArgumentError(
            f"{name}: the rule returned a {what} of shape {shape} for {of} {i}, whose shape "
            f"is {aval[0]}"
        )
    if dtype != aval[1]:
        raise ArgumentTypeError(
            f"{name}: the rule returned a {dtype.name} {what} for {of} {i}, whose dtype is "
            f"{aval[1].name}"
        )


def _flat_cts(cts: Any, call: CustomCall, name: str) -> list[Any]:
    """``bwd``'s result (one pytree or ``None`` per argument) as one entry per input leaf."""
    kids = call.in_tree.children()
    if not isinstance(cts, tuple | list) or len(cts) != len(kids):
        raise ArgumentTypeError(
            f"{name}: bwd must return a tuple with one cotangent per argument "
            f"({len(kids)}), got {type(cts).__name__}"
        )
    return flat_cotangents(cts, kids, name)


def flat_cotangents(cts: Any, trees: Any, name: str) -> list[Any]:
    """A user rule's cotangents (one pytree per argument, in the argument's structure
    ``trees[i]``; ``None`` for a whole argument or at a leaf position: zeros) as one entry
    per argument leaf.  ``ArgumentTypeError`` names the argument whose structure differs.
    O(leaves), no copy."""
    flat: list[Any] = []
    for i, (ct, tree) in enumerate(zip(cts, trees, strict=True)):
        if ct is None:
            flat.extend([None] * tree.num_leaves)
            continue
        try:
            flat.extend(tree.flatten_up_to(ct))
        except ValueError as e:
            raise ArgumentTypeError(
                f"{name}: the cotangent for argument {i} must have the argument's structure "
                f"{tree}: {e}"
            ) from None
    return flat


def _vjp_cotangents(
    ops: Any, g: Any, inputs: tuple[Any, ...], call: CustomCall, group: int
) -> list[Any]:
    """``custom_vjp``: run ``fwd`` on the inputs for the residuals, then ``bwd`` once."""
    fn = call.fn
    name = fn.prim.name
    eager = ops is NUMPY_NS
    args = call.in_tree.unflatten([_as_handle(x) for x in inputs] if eager else list(inputs))
    leaves = _unpack(ops, g, call, group)
    ct_tree = call.out_tree.unflatten([_as_handle(x) for x in leaves] if eager else leaves)
    fn._in_fwd += 1  # fwd's own call of the function is plain
    try:
        with no_grad() if eager else _nothing():
            res = fn.fwd(*args)
            if not isinstance(res, tuple | list) or len(res) != 2:
                raise ArgumentTypeError(f"{name}: fwd must return (out, residuals)")
            cts = fn.bwd(res[1], ct_tree)
    finally:
        fn._in_fwd -= 1
    flat = _flat_cts(cts, call, name)
    for i, (ct, aval) in enumerate(zip(flat, call.in_avals, strict=True)):
        checked(ct, aval, name, "cotangent", i)
    return [_in_ns(ops, ct, aval) for ct, aval in zip(flat, call.in_avals, strict=True)]


def _jvp_tangent_map(call: CustomCall, group: int) -> Callable[..., Any]:
    """``(primals, tangents) -> this group's packed output tangent`` (linear in tangents)."""
    fn, idx = call.fn, call.groups[group]

    def tangent_map(primals: Any, tangents: Any) -> Any:
        leaves = call.out_tree.flatten_up_to(fn._tangent_out(primals, tangents)[1])
        if len(idx) == 1:
            return leaves[idx[0]]
        return sh.concatenate([sh.reshape(leaves[j], (-1,)) for j in idx], axis=0)

    return tangent_map


def _jvp_cotangents(
    ops: Any, g: Any, inputs: tuple[Any, ...], call: CustomCall, group: int
) -> list[Any]:
    """``custom_jvp`` reversed: the transpose of its (linear) tangent map, one nested vjp."""
    primals = call.in_tree.unflatten(list(inputs))
    zeros = call.in_tree.unflatten([np.zeros(s, d) for s, d in call.in_avals])
    tmap = _jvp_tangent_map(call, group)
    if _is_traced(ops):
        graph = trace(tmap)(primals, zeros)  # the transpose is with respect to the tangents
        _, (cts,) = eval_graph(graph_vjp(graph, argnums=(1,)), primals, zeros, g)
        flat = tree_leaves(cts)
    elif ops is HANDLE_NS:
        _, fn = vjp(lambda t: tmap(primals, t), zeros)
        (cts,) = fn(_as_handle(g))
        fn.release()
        flat = tree_leaves(cts)
    else:
        with no_grad():
            hp = call.in_tree.unflatten([_as_handle(x) for x in inputs])
            _, fn = vjp(lambda t: tmap(hp, t), zeros)
            (cts,) = fn(_as_handle(g))
            fn.release()
        flat = tree_leaves(cts)
    return [_in_ns(ops, ct, aval) for ct, aval in zip(flat, call.in_avals, strict=True)]


def _ref(x: Any) -> Callable[[], Any]:
    """A weak reference to ``x`` (a strong one for what cannot be weakly referenced: a
    numpy scalar, a Python number). O(1)."""
    try:
        return weakref.ref(x)
    except TypeError:
        return lambda: x


def _forget(call: CustomCall, entry: tuple[Any, ...]) -> None:
    if call.cache is entry:
        call.cache = None


def _vjp_rule(i: int, kind: str) -> Callable[..., Any]:
    compute = _vjp_cotangents if kind == "vjp" else _jvp_cotangents

    def rule(ops: Any, g: Any, *inputs: Any, call: CustomCall, group: int) -> Any:
        first = inputs[0] if inputs else None
        cache = call.cache
        if cache is None or cache[0]() is not g or cache[1]() is not first or cache[2] != group:
            cts = compute(ops, g, inputs, call, group)
            call.cache = cache = (_ref(g), _ref(first), group, cts)
            # the cotangents go when the cotangent they answer does (the sweep is over):
            # the call outlives the sweep and must not keep its values (or their trace)
            try:
                weakref.finalize(g, _forget, call, cache)
            except TypeError:  # a numpy scalar: kept until the next backward of the call
                pass
        return cache[3][i]

    return rule


def _refuse_jvp(ops: Any, tangents: Any, *inputs: Any, call: CustomCall, group: int) -> Any:
    raise ArgumentTypeError(
        f"{call.fn.prim.name}: forward mode (jvp) of a custom_vjp function is not defined "
        "(as in JAX); use custom_jvp, or reverse mode"
    )


def _jvp_all(ops: Any, tangents: Sequence[Any], *inputs: Any, call: CustomCall, group: int) -> Any:
    """``custom_jvp``: the user's rule, once, with every argument's tangent (zeros where
    none flows); this group's output tangents packed."""
    fn = call.fn
    name = fn.prim.name
    tans = [
        np.zeros(s, d) if t is None else t
        for t, (s, d) in zip(tangents, call.in_avals, strict=True)
    ]
    if ops is NUMPY_NS:
        prev = STATE.jvp
        STATE.jvp = None
        try:
            with no_grad():
                p = call.in_tree.unflatten([_as_handle(x) for x in inputs])
                t = call.in_tree.unflatten([_as_handle(x) for x in tans])
                _, t_out = fn._tangent_out(p, t)
        finally:
            STATE.jvp = prev
    else:
        _, t_out = fn._tangent_out(
            call.in_tree.unflatten(list(inputs)), call.in_tree.unflatten(tans)
        )
    try:
        leaves = call.out_tree.flatten_up_to(t_out)
    except ValueError as e:
        raise ArgumentTypeError(
            f"{name}: the rule's tangent_out must have the output's structure {call.out_tree}: {e}"
        ) from None
    for j in call.groups[group]:
        checked(leaves[j], call.out_avals[j], name, "tangent", j)
    leaves = [_in_ns(ops, x, a) for x, a in zip(leaves, call.out_avals, strict=True)]
    return _pack(ops, leaves, call, group)


def _abstract(*avals: Any, call: CustomCall, group: int) -> tuple[tuple[int, ...], Any]:
    """A group's output type, from the call (its primal graph was traced already). O(1)."""
    idx = call.groups[group]
    shape, dtype = call.out_avals[idx[0]]
    if len(idx) == 1:
        return shape, dtype
    return (sum(int(np.prod(call.out_avals[j][0], dtype=np.int64)) for j in idx),), dtype


# -- lowering and batching ---------------------------------------------------------------
def _lower(x: Any, *args: Any, call: CustomCall, group: int) -> Any:
    """XLA lowering: the primal graph inline, this group's leaves packed. O(equations)."""
    outs = lower_outputs(call.graph, x, repr(call.fn.prim.name))(*args)
    idx = call.groups[group]
    if len(idx) == 1:
        return outs[idx[0]]
    return x.np.concatenate([x.np.reshape(outs[j], (-1,)) for j in idx])


def _batched_fn(call: CustomCall, kind: str, axes: list[int | None]) -> Any:
    """A ``custom_vjp``/``custom_jvp`` object over the flat argument leaves whose primal
    and rules are the user's, mapped with ``vmap`` over the leaves ``axes`` marks (0)."""
    fn, tree = call.fn, call.in_tree
    n = len(axes)

    def primal(*leaves: Any) -> Any:
        return fn.fun(*tree.unflatten(list(leaves)))

    new = type(fn)(vmap(primal, in_axes=tuple(axes)))
    if kind == "vjp":

        def fwd(*leaves: Any) -> Any:
            fn._in_fwd += 1  # the user's fwd calling the function: plain, as unbatched
            try:
                return fn.fwd(*tree.unflatten(list(leaves)))
            finally:
                fn._in_fwd -= 1

        def bwd(res: Any, g: Any) -> tuple[Any, ...]:
            flat = _flat_cts(fn.bwd(res, g), call, fn.prim.name)
            return tuple(
                np.zeros(sh_, dt) if ct is None else ct
                for ct, (sh_, dt) in zip(flat, call.in_avals, strict=True)
            )

        fwd_b, bwd_b = vmap(fwd, in_axes=tuple(axes)), vmap(bwd, in_axes=(0, 0))

        def bwd_summed(res: Any, g: Any) -> tuple[Any, ...]:
            cts = bwd_b(res, g)  # each batched: an unbatched argument's is summed
            return tuple(
                c if ax == 0 else rd.sum(c, axis=0) for c, ax in zip(cts, axes, strict=True)
            )

        new.defvjp(fwd_b, bwd_summed)
    else:

        def jvp_rule(*leaves: Any) -> Any:
            p = tree.unflatten(list(leaves[:n]))
            t = tree.unflatten(list(leaves[n:]))
            return fn._tangent_out(p, t)

        rule_b = vmap(jvp_rule, in_axes=(*axes, *axes))
        new.defjvp(lambda primals, tangents: rule_b(*primals, *tangents))
    return new


def _batched_call(call: CustomCall, kind: str, batched: tuple[bool, ...], size: int) -> CustomCall:
    """The call of :func:`_batched_fn` at the batched argument types; made once per
    (call, batched leaves, size) and kept on ``call``."""
    key = (batched, size)
    got = call.batched.get(key)
    if got is None:
        axes: list[int | None] = [0 if b else None for b in batched]
        new = _batched_fn(call, kind, axes)
        avals: list[Aval] = [
            ((size, *shp), dt) if b else (shp, dt)
            for (shp, dt), b in zip(call.in_avals, batched, strict=True)
        ]
        tree = tree_flatten(tuple(range(len(avals))))[1]
        got = call.batched[key] = CustomCall(new, trace_flat(new.fun, avals, tree), avals)
        new._calls[(tree, tuple(avals))] = got
    return got


def _batch_rule(kind: str) -> Callable[..., tuple[Any, bool]]:
    def rule(
        args: Sequence[Any], batched: Sequence[bool], size: int, *, call: CustomCall, group: int
    ) -> tuple[Any, bool]:
        bcall = _batched_call(call, kind, tuple(batched), size)
        packed = TRACE_NS.apply(call_primitive(kind, len(args)), *args, call=bcall, group=group)
        idx = bcall.groups[group]
        if len(idx) == 1:
            return packed, True
        # the batched call packs leaf by leaf ([leaf0 (size, n0)], [leaf1 ...]); the batch
        # goes first: (size, n0 + n1 + ...)
        parts, off = [], 0
        for j in idx:
            k = int(np.prod(call.out_avals[j][0], dtype=np.int64))
            parts.append(sh.reshape(sh.getitem(packed, slice(off, off + size * k)), (size, k)))
            off += size * k
        return sh.concatenate(parts, axis=1), True

    return rule


_PRIMS: dict[tuple[str, int], Primitive] = {}


def call_primitive(kind: str, n: int) -> Primitive:
    """The ``custom_{kind}_call`` primitive with ``n`` inputs (each input is saved: the
    rules rerun the user's functions on them). Made once per (kind, n). O(n)."""
    p = _PRIMS.get((kind, n))
    if p is None:
        p = Primitive(f"custom_{kind}_call", _impl, n, save_in=tuple(range(n)))
        p.defvjp(*[_vjp_rule(i, kind) for i in range(n)])
        if kind == "vjp":
            p.jvp_all = _refuse_jvp
        else:
            p.jvp_all = _jvp_all
        p.abstract = _abstract
        defbatch(p, _batch_rule(kind))
        deflower(p, _lower)
        _PRIMS[(kind, n)] = p
    return p


# -- emitting a call ---------------------------------------------------------------------------
def call_custom(fn: Any, kind: str, args: tuple[Any, ...]) -> Any:
    """Apply ``fn`` (a ``custom_vjp``/``custom_jvp`` object) to ``args`` as custom call
    equations (traced values) or primitive applications (eager handles in a checkpoint
    region).  Traces the primal function once per argument types (cached on ``fn``).
    Returns the output pytree."""
    leaves, in_tree = tree_flatten(args)
    avals = [aval_of(x, f"{fn.prim.name}: argument leaf {i}") for i, x in enumerate(leaves)]
    key = (in_tree, tuple(avals))
    call = fn._calls.get(key)
    if call is None:
        call = fn._calls[key] = CustomCall(fn, trace_flat(fn.fun, avals, in_tree), avals)
    prim = call_primitive(kind, len(leaves))
    outs: list[Any] = [None] * len(call.out_avals)
    for k, idx in enumerate(call.groups):
        packed = bind(prim, *leaves, call=call, group=k)
        if len(idx) == 1:
            outs[idx[0]] = packed
            continue
        off = 0
        for j in idx:
            shape = call.out_avals[j][0]
            n = int(np.prod(shape, dtype=np.int64))
            outs[j] = sh.reshape(sh.getitem(packed, slice(off, off + n)), shape)
            off += n
    return call.out_tree.unflatten(outs)
