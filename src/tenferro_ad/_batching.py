"""``vmap``: batching a graph with each primitive's batching rule.

The interpreter moves every batched input's batch axis to the front, then walks the
graph: an equation with no batched argument is re-emitted unchanged; otherwise the
primitive's rule emits the batched equations.  The rules live next to each primitive's
JVP/VJP rules in ``ops/<family>.py`` (registered with ``_batch_rules.defbatch``; the
signature and the shared builders are in ``_batch_rules.py``).  A primitive without a
rule is batched by the *loop fallback*: one sliced application per batch element, then a
stack (correct, slower: ``B`` equations plus a concatenate).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._batch_rules import RULES, broadcast_batch, defbatch, emit, leading, loop_fallback, shape_of
from ._eval import eval_graph
from ._functional import IDENTITY
from ._graph import Graph, TreeDef, Var, dce, tree_flatten
from ._trace import Builder, Tracer, aval_of, swap_note, trace_flat
from .errors import ArgumentError, ArgumentTypeError


def _move_to_front(a: Any, axis: int) -> Any:
    if axis == 0:
        return a
    nd = len(shape_of(a))
    axes = (axis, *(i for i in range(nd) if i != axis))
    return emit("transpose", a, axes=axes)


def _move_from_front(a: Any, axis: int) -> Any:
    nd = len(shape_of(a))
    axis = axis % nd
    if axis == 0:
        return a
    rest = list(range(1, nd))
    rest.insert(axis, 0)
    return emit("transpose", a, axes=tuple(rest))


def vmap_graph(
    graph: Graph,
    size: int,
    in_axes: int | Sequence[int | None] | None = 0,
    out_axes: int | None = 0,
) -> Graph:
    """The batched graph of ``graph`` for a batch of ``size``: each argument gains a batch
    axis at its ``in_axes`` entry (``None``: not batched; an int applies to every leaf of
    that argument) and every output has it at ``out_axes`` (``None``: outputs must not
    depend on the batch).  Same structure as ``graph``.  Cost: one rule per batched
    equation (the loop fallback: ``size`` equations plus a concatenate)."""
    leaf_axes = leaf_in_axes(graph.in_tree, in_axes)
    b = Builder()
    with b.active():
        env: dict[Var, tuple[Any, bool]] = {}
        for v, ax in zip(graph.invars, leaf_axes, strict=True):
            if ax is None:
                env[v] = (b.new_input(v.shape, v.dtype), False)
            else:
                ax = _check_axis(ax, len(v.shape) + 1, "in_axes")
                shape = (*v.shape[:ax], size, *v.shape[ax:])
                env[v] = (_move_to_front(b.new_input(shape, v.dtype), ax), True)
        prev = swap_note(None)
        try:
            for e in graph.eqns:
                args = [env[a] if isinstance(a, Var) else (_lit(b, a), False) for a in e.inputs]
                vals = [x for x, _ in args]
                flags = [f for _, f in args]
                # what the rule emits keeps the equation's checkpoint-region annotation, so a
                # batched program still recomputes (rather than saves) the region's interior
                swap_note(e.note)
                if not any(flags):
                    env[e.out] = (b.emit(e.prim, vals, dict(e.params)), False)
                    continue
                rule = RULES.get(e.prim.name)
                if rule is None:
                    env[e.out] = (loop_fallback(e.prim, vals, flags, size, dict(e.params)), True)
                else:
                    env[e.out] = rule(vals, flags, size, **e.params)
        finally:
            swap_note(prev)
        outs = []
        for a in graph.outvars:
            x, bt = env[a] if isinstance(a, Var) else (_lit(b, a), False)
            if out_axes is None:
                if bt:
                    raise ArgumentError("vmap: out_axes=None but an output depends on the batch")
                outs.append(x)
                continue
            if not bt:
                x = broadcast_batch(x if type(x) is Tracer else Tracer(b, b.atom(x, "vmap")),
                                    size)
            outs.append(_move_from_front(x, _check_axis(out_axes, len(a.shape) + 1, "out_axes")))
        return dce(b.finish(outs, graph.in_tree, graph.out_tree))


def vmap(
    f: Callable[..., Any],
    in_axes: int | Sequence[int | None] | None = 0,
    out_axes: int | None = 0,
) -> Callable[..., Any]:
    """``vmap(f)(*args)``: ``f`` mapped over a batch axis of its arguments, vectorized.

    ``in_axes``: the batch axis of every argument (an int or ``None``), or one entry per
    argument; ``out_axes``: where the outputs carry it.  ``f`` is traced once per input
    signature (structure, shapes, dtypes; cached) at the per-example types, the graph is
    batched with the primitives' batching rules (:data:`RULES`; a loop over the batch for
    primitives without one) and evaluated like
    ``traced.eval_graph``: owners in, fresh owners out (borrowed, not consumed); handles in,
    handles out (recorded on the current tape, so ``grad(vmap(f))`` works); tracers in,
    equations out (so ``trace(vmap(f))`` works)."""

    cache: dict[Any, Graph] = {}

    def batched(*args: Any) -> Any:
        leaves, tree = tree_flatten(args)
        axes = leaf_in_axes(tree, in_axes)
        avals, sizes = [], set()
        for i, (x, ax) in enumerate(zip(leaves, axes, strict=True)):
            shape, dtype = aval_of(x, f"vmap: argument leaf {i}")
            if ax is not None:
                ax = _check_axis(ax, len(shape), "in_axes", i)
                sizes.add(shape[ax])
                shape = shape[:ax] + shape[ax + 1:]
            avals.append((shape, dtype))
        if len(sizes) != 1:
            why = (
                "argument 'in_axes': no argument is batched (every entry is None)"
                if not sizes
                else f"batched arguments disagree on the batch size: {sorted(sizes)}"
            )
            raise ArgumentError(f"vmap: {why}")
        size = sizes.pop()
        key = (tree, tuple((sh, dt.str) for sh, dt in avals), size)
        graph = cache.get(key)
        if graph is None:  # trace and batch once per signature
            graph = cache[key] = vmap_graph(trace_flat(f, avals, tree), size, in_axes, out_axes)
        return eval_graph(graph, *args)

    return batched


def leaf_in_axes(tree: TreeDef, in_axes: int | Sequence[int | None] | None) -> list[int | None]:
    """``in_axes`` (one entry for all arguments, or one per argument) expanded per leaf."""
    kids = tree.children
    per_arg = list(in_axes) if isinstance(in_axes, Sequence) else [in_axes] * len(kids)
    if len(per_arg) != len(kids):
        raise ArgumentError(f"vmap: in_axes has {len(per_arg)} entries for {len(kids)} arguments")
    out: list[int | None] = []
    for k, ax in zip(kids, per_arg, strict=True):
        if ax is not None and not isinstance(ax, int | np.integer):
            raise ArgumentTypeError(
                f"vmap: argument 'in_axes': an entry must be an int or None, got {ax!r}"
            )
        out.extend([ax] * k.num_leaves)
    return out


def _check_axis(ax: int, nd: int, what: str, leaf: int | None = None) -> int:
    if not -nd <= ax < nd:
        whose = "" if leaf is None else f"argument {leaf} has {nd} axes; "
        raise ArgumentError(
            f"vmap: {whose}argument {what!r}: entry {ax} is out of range for {nd} axes"
        )
    return ax % nd


def _lit(b: Builder, a: Any) -> Any:
    return a.value if a.is_scalar else Tracer(b, a)


# identity is defined in _functional.py (no op rule file); its rule is registered here
defbatch(IDENTITY, leading("identity"))
