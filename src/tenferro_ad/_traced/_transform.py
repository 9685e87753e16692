"""Graph-to-graph differentiation: ``jvp``, ``vjp``, ``grad``, ``value_and_grad``.

Each transformation interprets the input graph into a new :class:`~._trace.Builder`,
applying the primitives' own rule tables (``prim.jvps`` / ``prim.vjps`` — the same rules
eager mode runs) on tracers through :data:`~._trace.TRACE_NS`, so every rule call becomes
equations.  Missing tangents and cotangents are symbolic zeros (absent from the maps; a
rule may also return :class:`~._primitive.Zero`): nothing is emitted for them.  Only
equations that depend on a differentiated input get rules applied, and the result is
dead-code eliminated.  Because the output is an ordinary graph, transformations compose:
``grad(grad(g))``, ``jvp(grad(g))`` (forward-over-reverse), ``vmap(grad(g))``.

Checkpoint regions (equations annotated with a :class:`~._graph.Region`, from
``ad.checkpoint`` traced) are kept by every transformation.  The reverse sweep does not
read a region's interior values: when it reaches the region it re-emits the interior
from the region's boundary (its inputs and the values the policy saves), annotated
``recompute``, and the region's rules read those.  The forward interior values then
die after their forward use; only the boundary lives until backward — the eager
checkpoint's behaviour, as a graph.

The core knows no ops: it sees ``Primitive`` objects, their rule tables and residual
declarations, and calls ``ops.add`` / ``ops.unbroadcast`` / ``ops.broadcast_to`` on the
namespace, exactly as the eager tape does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tenferro_storage.kernel import frozen

from .._core._primitive import NONDIFF, CastTarget, Zero
from ._graph import Eqn, Graph, Lit, Note, Region, TreeDef, Var, dce, treedef_tuple, type_str
from ._trace import TRACE_NS, Builder, Tracer, swap_note, tracer_of

_BACKWARD = Note(backward=True)
_NOTES: dict[str, Note] = {}  # the backward annotation per primitive name (immutable)


def _in_region(e: Eqn, r: Region) -> bool:
    q = e.note.region if e.note is not None else None
    while q is not None:
        if q is r:
            return True
        q = q.parent
    return False


class Residuals:
    """Where the reverse sweep reads an equation's residuals.  A value interior to a
    checkpoint region (made inside it, not kept by its policy) is re-emitted on demand
    from the region's boundary, once, just before the first rule that reads it (with the
    interior values it depends on, annotated ``recompute``): a chain cut by saved values
    is recomputed one stage at a time.  Anything else is the forward value."""

    def __init__(self, graph: Graph, b: Builder, env: dict[Var, Any]) -> None:
        self.b, self.env, self.eqns = b, env, graph.eqns
        self.pos = {e.out: i for i, e in enumerate(graph.eqns)}
        self.rec: dict[Region, dict[Var, Any]] = {}
        self.inner: dict[Region, dict[Var, Eqn]] = {}

    def _interior(self, r: Region) -> dict[Var, Eqn]:
        got = self.inner.get(r)
        if got is None:
            got = self.inner[r] = {
                e.out: e for e in self.eqns if _in_region(e, r) and not r.saves(e)
            }
            self.rec[r] = {}
        return got

    def read(self, a: Var | Lit, region: Region | None) -> Any:
        """``a`` as the rules of an equation in ``region`` see it. O(1) when cached."""
        if isinstance(a, Lit):
            return a.value if a.is_scalar else Tracer(self.b, a)
        r = region
        while r is not None:
            if a in self._interior(r):
                got = self.rec[r].get(a)
                return got if got is not None else self._recompute(a, r)
            r = r.parent
        return self.env[a]

    def _recompute(self, a: Var, r: Region) -> Any:
        interior, done = self._interior(r), self.rec[r]
        todo: list[Eqn] = []
        seen: set[Var] = set()
        stack = [a]
        while stack:  # the interior values ``a`` depends on that are not recomputed yet
            v = stack.pop()
            if v in seen or v in done:
                continue
            seen.add(v)
            e = interior[v]
            todo.append(e)
            stack.extend(x for x in e.inputs if isinstance(x, Var) and x in interior)
        todo.sort(key=lambda e: self.pos[e.out])
        prev = swap_note(Note(r, True, True, f"checkpoint:{r.chain()[0].label}"))
        try:
            for e in todo:
                args = [self.read(x, r) for x in e.inputs]
                done[e.out] = self.b.emit(e.prim, args, dict(e.params))
        finally:
            swap_note(prev)
        return done[a]


# -- binding on eager handles ------------------------------------------------------------------


def _read(b: Builder, env: dict[Var, Any], a: Var | Lit) -> Any:
    if isinstance(a, Var):
        return env[a]
    return a.value if a.is_scalar else Tracer(b, a)


def zeros_like(b: Builder, shape: tuple[int, ...], dtype: Any) -> Any:
    """A tracer of zeros (a broadcast of a 0-d literal: O(1) in the graph)."""
    z = Tracer(b, Lit(frozen(np.zeros((), dtype))))
    return TRACE_NS.broadcast_to(z, tuple(shape)) if shape else z


def _forward_note(e: Eqn) -> Note | None:
    """The annotation of ``e`` re-emitted as forward (first) half of a new program."""
    n = e.note
    if n is None or not n.backward:
        return n
    return Note(n.region, False, n.recompute, n.origin, n.label)


def _forward(
    graph: Graph, b: Builder, env: dict[Var, Any], active: set[Var],
    saved: dict[Var, Any] | None = None,
) -> None:
    """Re-emit the primal equations; grow ``active`` (values depending on ``active``).
    An active equation outside checkpoint regions whose primitive has a ``forward_saving``
    rule is emitted by that rule, which also returns what its VJP rules will read
    (``saved[out]``, passed to them as ``saved=``): a loop keeps its per-step carries from
    the one forward pass instead of running again in the backward program."""
    prev = swap_note(None)
    try:
        for e in graph.eqns:
            args = [_read(b, env, a) for a in e.inputs]
            swap_note(_forward_note(e))
            is_active = not e.prim.nondiff and any(
                isinstance(a, Var) and a in active for a in e.inputs
            )
            fs = e.prim.forward_saving
            if (fs is not None and is_active and saved is not None
                    and (e.note is None or e.note.region is None)):
                env[e.out], saved[e.out] = fs(TRACE_NS, *args, **e.params)
            else:
                env[e.out] = b.emit(e.prim, args, dict(e.params))
            if is_active:
                active.add(e.out)
    finally:
        swap_note(prev)


def _backward(
    graph: Graph, b: Builder, env: dict[Var, Any], cts: dict[Var, Any], active: set[Var],
    saved: dict[Var, Any] | None = None,
) -> None:
    """Reverse sweep: pull ``cts`` back through the active equations (in place)."""
    resid = Residuals(graph, b, env)
    prev = swap_note(None)
    try:
        for e in reversed(graph.eqns):
            if e.out in active:
                _pull(e, b, resid, cts, active, saved)
    finally:
        swap_note(prev)


def _pull(
    e: Eqn, b: Builder, resid: Residuals, cts: dict[Var, Any], active: set[Var],
    saved: dict[Var, Any] | None = None,
) -> None:
    """Apply ``e``'s VJP rules to its output cotangent (if any), accumulating into ``cts``."""
    ns = TRACE_NS
    g = cts.pop(e.out, None)
    if g is None:
        return
    region = e.note.region if e.note is not None else None
    prim, params = e.prim, dict(e.params)
    if region is None:
        note = _NOTES.get(prim.name)
        if note is None:
            note = _NOTES[prim.name] = Note(backward=True, origin=prim.name)
        swap_note(note)
        args = [_read(b, resid.env, a) for a in e.inputs]
        out = resid.env[e.out] if prim.save_out else None
    else:  # the region's rules read recomputed interior values
        swap_note(Note(backward=True, origin=f"checkpoint:{region.chain()[0].label}"))
        args = [resid.read(a, region) for a in e.inputs]
        out = resid.read(e.out, region) if prim.save_out else None
    res = [args[i] for i in prim.save_in]
    if prim.save_out:
        res.append(out)
    if saved is not None and e.out in saved:
        params["saved"] = saved[e.out]
    odt = e.out.dtype
    for i, a in enumerate(e.inputs):
        if not isinstance(a, Var) or a not in active:
            continue
        rule = prim.vjp_rule(i)
        if rule is NONDIFF:
            continue
        if prim.variadic:
            ct = rule(ns, g, *res, argnum=i, **params)  # type: ignore[operator]
        else:
            ct = rule(ns, g, *res, **params)  # type: ignore[operator]
        if type(ct) is Zero:
            continue
        ct = tracer_of(b, ct)
        # an argument of another floating dtype than the output (a float32 parameter that
        # met a float64 constant, a real one that met a complex value) gets its cotangent
        # cast back: real part, precision (JAX's rule, and eager mode's ``CastTarget``)
        target: tuple[int, ...] = a.shape
        if a.dtype != odt and a.dtype.kind in "fc":
            target = CastTarget(a.shape, a.dtype)
        if type(target) is CastTarget or (prim.broadcasts and tuple(ct.shape) != a.shape):
            ct = ns.unbroadcast(ct, target)
        old = cts.get(a)
        cts[a] = ct if old is None else ns.add(old, ct)


def _leaf_range(tree: TreeDef, argnum: int) -> range:
    kids = tree.children()
    if not -len(kids) <= argnum < len(kids):
        raise IndexError(f"argnums: argument {argnum} out of range (the graph has {len(kids)})")
    argnum %= len(kids)
    start = sum(k.num_leaves for k in kids[:argnum])
    return range(start, start + kids[argnum].num_leaves)


def jvp(graph: Graph) -> Graph:
    """The forward-mode graph: ``(*args, *tangents) -> (outputs, output_tangents)``.

    Tangents have the arguments' structure and types.  Output tangents that are symbolic
    zeros become broadcast zero literals.

    Cost: allocates the new graph only (no tensor storage); no copy; no sync; no dispatch;
    O(equations): one pass, the rules' equations emitted only where a tangent flows.
    Raises: MissingRuleError."""
    b = Builder()
    with b.active():
        ins = [b.new_input(v.shape, v.dtype) for v in graph.invars]
        tins = [b.new_input(v.shape, v.dtype) for v in graph.invars]
        env: dict[Var, Any] = dict(zip(graph.invars, ins, strict=True))
        tans: dict[Var, Any] = {
            v: t for v, t in zip(graph.invars, tins, strict=True) if v.dtype.kind in "fc"
        }
        ns = TRACE_NS
        prev = swap_note(None)
        for e in graph.eqns:
            args = [_read(b, env, a) for a in e.inputs]
            swap_note(e.note)  # a region's tangent equations belong to the region
            out = env[e.out] = b.emit(e.prim, args, dict(e.params))
            prim = e.prim
            tin = [tans.get(a) if isinstance(a, Var) else None for a in e.inputs]
            if prim.nondiff or all(t is None for t in tin):
                continue
            res = [args[i] for i in prim.save_in]
            if prim.save_out:
                res.append(out)
            total: Any = None
            if prim.jvp_all is not None:  # one rule sees every tangent
                total = prim.jvp_all(ns, tin, *res, **e.params)
                tin = []
            for i, t in enumerate(tin):
                if t is None:
                    continue
                rule = prim.jvp_rule(i)
                if rule is NONDIFF:
                    continue
                if prim.variadic:
                    c = rule(ns, t, *res, argnum=i, **e.params)  # type: ignore[operator]
                else:
                    c = rule(ns, t, *res, **e.params)  # type: ignore[operator]
                if type(c) is Zero:
                    continue
                total = c if total is None else ns.add(total, c)
            if total is not None:
                total = tracer_of(b, total)
                if tuple(total.shape) != e.out.shape:
                    total = ns.broadcast_to(total, e.out.shape)
                tans[e.out] = total
        swap_note(prev)
        outs = [_read(b, env, a) for a in graph.outvars]
        touts = [
            tans.get(a) if isinstance(a, Var) and a in tans else zeros_like(b, a.shape, a.dtype)
            for a in graph.outvars
        ]
        kids = graph.in_tree.children()
        in_tree = treedef_tuple(kids + kids)
        out_tree = treedef_tuple((graph.out_tree, graph.out_tree))
        return dce(b.finish(outs + touts, in_tree, out_tree))


def _reverse(
    graph: Graph, wrt: Sequence[int], seed: str
) -> tuple[Builder, list[Any], list[Any]]:
    """Forward + backward into a new builder. ``seed``: ``"ones"`` (scalar output),
    ``"first"`` (the first output leaf is the scalar, the others pass through: ``has_aux``)
    or ``"input"`` (a cotangent input per output leaf). Returns (builder, outputs, cts)."""
    b = Builder()
    with b.active():
        ins = [b.new_input(v.shape, v.dtype) for v in graph.invars]
        env: dict[Var, Any] = dict(zip(graph.invars, ins, strict=True))
        active = {graph.invars[i] for i in wrt}
        saved: dict[Var, Any] = {}
        _forward(graph, b, env, active, saved)
        outs = [_read(b, env, a) for a in graph.outvars]
        cts: dict[Var, Any] = {}
        for a in graph.outvars[:1] if seed == "first" else graph.outvars:
            if seed != "input":
                g = Tracer(b, Lit(frozen(np.ones((), a.dtype))))
            else:
                g = b.new_input(a.shape, a.dtype)
            if isinstance(a, Var) and a in active:
                cts[a] = g if a not in cts else TRACE_NS.add(cts[a], g)
        _backward(graph, b, env, cts, active, saved)
        grads = []
        prev = swap_note(_BACKWARD)
        for i in wrt:
            v = graph.invars[i]
            ct = cts.get(v)
            grads.append(zeros_like(b, v.shape, v.dtype) if ct is None else ct)
        swap_note(prev)
        return b, outs, grads


def vjp(graph: Graph, argnums: Sequence[int] | None = None) -> Graph:
    """The reverse-mode graph: ``(*args, cotangent) -> (outputs, argument_cotangents)``.

    ``cotangent`` has the structure and types of the outputs; the argument cotangents
    have the arguments' structure (a tuple of them).  Unreached arguments get zeros.
    ``argnums``: only these arguments' cotangents (a tuple of them, in that order); the
    other arguments are constants of the sweep, so nothing that depends on them alone is
    differentiated (a custom JVP rule's transpose needs this: the rule's primal part may
    call the function again).

    Cost: allocates the new graph only (no tensor storage); no copy; no sync; no dispatch;
    O(equations).
    Raises: TypeError."""
    kids = graph.in_tree.children()
    if argnums is None:
        wrt: Sequence[int] = range(len(graph.invars))
        arg_tree = graph.in_tree
    else:
        wrt = [i for k in argnums for i in _leaf_range(graph.in_tree, k)]
        arg_tree = treedef_tuple(tuple(kids[k] for k in argnums))
    b, outs, cts = _reverse(graph, wrt, "input")
    in_tree = treedef_tuple((*kids, graph.out_tree))
    out_tree = treedef_tuple((graph.out_tree, arg_tree))
    with b.active():
        return dce(b.finish(outs + cts, in_tree, out_tree))


def _check_scalar(
    graph: Graph, what: str, has_aux: bool = False, holomorphic: bool = False
) -> None:
    outs = graph.outvars
    if has_aux:
        kids = graph.out_tree.children()
        if len(kids) != 2 or kids[0].num_leaves != 1:
            raise TypeError(
                f"{what}: with has_aux=True the graph must return a pair (value, aux) whose "
                f"value is one scalar, got the output structure {graph.out_tree}"
            )
        outs = outs[:1]
    kinds = "fc" if holomorphic else "f"
    if len(outs) != 1 or outs[0].shape != () or outs[0].dtype.kind not in kinds:
        got = ", ".join(type_str(a.shape, a.dtype) for a in outs)
        which = "floating or complex" if holomorphic else "real floating"
        raise TypeError(
            f"{what}: the graph must have one {which} scalar output, got ({got}); "
            "use vjp for other outputs, or sum() the output"
            + ("" if holomorphic else " (holomorphic=True for a complex output)")
        )


def _grad_parts(
    graph: Graph, argnums: int | tuple[int, ...], what: str, has_aux: bool = False,
    holomorphic: bool = False,
) -> tuple[Builder, list[Any], list[Any], TreeDef]:
    _check_scalar(graph, what, has_aux, holomorphic)
    single = isinstance(argnums, int | np.integer)  # (a numpy integer too, as in JAX)
    nargs = len(graph.in_tree.children())
    given: tuple[int, ...] = (
        (int(argnums),) if isinstance(argnums, int | np.integer) else tuple(argnums)
    )
    nums = tuple(n % nargs if -nargs <= n < nargs else n for n in given)
    wrt = [i for n in nums for i in _leaf_range(graph.in_tree, n)]
    for i in wrt:
        if graph.invars[i].dtype.kind not in "fc":
            v = graph.invars[i]
            raise TypeError(
                f"{what}: input leaf {i} has type {type_str(v.shape, v.dtype)}; only floating "
                "or complex inputs can be differentiated (pass another argnums)"
            )
    b, outs, grads = _reverse(graph, wrt, "first" if has_aux else "ones")
    kids = graph.in_tree.children()
    gtree = kids[nums[0]] if single else treedef_tuple(
        [kids[n] for n in nums]
    )
    return b, outs, grads, gtree


def grad(
    graph: Graph, argnums: int | tuple[int, ...] = 0, holomorphic: bool = False
) -> Graph:
    """The gradient graph ``(*args) -> grads`` of a graph with one real scalar output
    (``holomorphic=True``: a complex one, seeded with ``1``, as JAX's).

    ``argnums`` selects the arguments (an int: that argument's structure; a tuple: a tuple
    of them).  Same rules as eager ``tenferro_ad.grad``; the result can be transformed
    again (``grad(grad(g))``, ``jvp(grad(g))``).

    Cost: allocates the new graph only (no tensor storage); no copy; no sync; no dispatch;
    O(equations).
    Raises: TypeError."""
    b, _, grads, gtree = _grad_parts(graph, argnums, "grad", holomorphic)
    with b.active():
        return dce(b.finish(grads, graph.in_tree, gtree))


def value_and_grad(
    graph: Graph, argnums: int | tuple[int, ...] = 0, has_aux: bool = False,
    holomorphic: bool = False,
) -> Graph:
    """Like :func:`grad`, returning ``(value, grads)`` from one forward pass.  With
    ``has_aux`` the graph returns ``(value, aux)``: only ``value`` is differentiated and
    the result is ``((value, aux), grads)`` (as JAX's ``has_aux``).

    Cost: allocates the new graph only (no tensor storage); no copy; no sync; no dispatch;
    O(equations).
    Raises: TypeError."""
    b, outs, grads, gtree = _grad_parts(graph, argnums, "value_and_grad", has_aux,
                                        holomorphic)
    with b.active():
        return dce(b.finish(outs + grads, graph.in_tree, treedef_tuple((graph.out_tree,
                                                                       gtree))))
