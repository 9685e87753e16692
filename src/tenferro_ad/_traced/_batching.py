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

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

import tenferro_storage as ts
from tenferro_storage.errors import TenferroError, shown

from .._core._primitive import IDENTITY
from ..errors import ArgumentError, ArgumentTypeError, UnsupportedDTypeError
from ._batch_rules import RULES, broadcast_batch, defbatch, emit, leading, loop_fallback, shape_of
from ._eval import eval_graph
from ._graph import Graph, TracerError, TreeDef, Var, dce, tree_flatten, tree_unflatten
from ._trace import Builder, Tracer, aval_of, call_with_keywords, swap_note, trace_flat


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
    in_axes: Any = 0,
    out_axes: Any = 0,
) -> Graph:
    """The batched graph of ``graph`` for a batch of ``size``: each argument gains a batch
    axis at its ``in_axes`` entry (``None``: not batched; an int applies to every leaf of
    that argument, a pytree prefix of it to each of its subtrees) and every output has it
    at ``out_axes`` (likewise a prefix of the output; ``None``: that output must not
    depend on the batch).  Same structure as ``graph``.

    Cost: allocates the new graph only (no tensor storage); no copy; no sync; no dispatch;
    O(equations): one batching rule per batched equation (an equation without a rule
    takes the loop fallback: ``size`` equations plus a concatenate).

    Raises:
        ArgumentError: an ``in_axes``/``out_axes`` entry is out of range or does not fit
            the argument's (output's) structure, or an output at an ``out_axes`` entry of
            ``None`` depends on the batch.
        ArgumentTypeError: an ``in_axes``/``out_axes`` entry is not an int, ``None`` or a
            pytree prefix of them."""
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
                rule = RULES.get(e.prim)
                if rule is None:
                    env[e.out] = (loop_fallback(e.prim, vals, flags, size, dict(e.params)), True)
                else:
                    env[e.out] = rule(vals, flags, size, **e.params)
        finally:
            swap_note(prev)
        outs = []
        out_leaf_axes = _prefix_axes(out_axes, graph.out_tree, "out_axes", "the output")
        for a, oax in zip(graph.outvars, out_leaf_axes, strict=True):
            x, bt = env[a] if isinstance(a, Var) else (_lit(b, a), False)
            if oax is None:
                if bt:
                    raise ArgumentError(
                        "vmap: argument 'out_axes': an output at an out_axes entry of None "
                        "depends on the batch"
                    )
                outs.append(x)
                continue
            if not bt:
                x = broadcast_batch(x if type(x) is Tracer else Tracer(b, b.atom(x, "vmap")),
                                    size)
            outs.append(_move_from_front(x, _check_axis(oax, len(a.shape) + 1, "out_axes")))
        return dce(b.finish(outs, graph.in_tree, graph.out_tree))


def vmap(
    f: Callable[..., Any],
    in_axes: Any = 0,
    out_axes: Any = 0,
) -> Callable[..., Any]:
    """``vmap(f)(*args)``: ``f`` mapped over a batch axis of its arguments, vectorized.

    ``in_axes``: the batch axis of every argument (an int or ``None``), or one entry per
    argument (a pytree prefix of it); ``out_axes``: where the outputs carry it.  Keyword
    arguments are batched along their axis 0, as in JAX.  ``f`` is traced once per input
    signature (structure, shapes, dtypes; cached) at the per-example types, the graph is
    batched with the primitives' batching rules (:data:`RULES`; a loop over the batch for
    primitives without one) and evaluated like
    ``traced.eval_graph``: owners in, fresh owners out (borrowed, not consumed); handles in,
    handles out (recorded on the current tape, so ``grad(vmap(f))`` works); tracers in,
    equations out (so ``trace(vmap(f))`` works).

    Cost: allocates the batched results; no copy; no sync; no dispatch (traces one batched graph);
    O(batch size x the cost of ``f``).
    Raises: ArgumentError, ArgumentTypeError, DTypeError."""

    if not callable(f):
        raise ArgumentTypeError(f"vmap: argument 'f' must be callable, got {type(f).__name__}")
    _check_axes_arguments(in_axes, out_axes)
    cache: dict[Any, Graph] = {}
    axes_of: dict[tuple[TreeDef, bool], list[int | None]] = {}

    def batched(*args: Any, **kwargs: Any) -> Any:
        fn, axes_given, kw = f, in_axes, bool(kwargs)
        if kw:  # keyword arguments are mapped over their axis 0 (as in JAX): one more
            # positional argument, a dict, with in_axes entry 0
            nargs = len(args)
            fn = functools.partial(call_with_keywords, f, nargs)
            args = (*args, kwargs)
            axes_given = ((*in_axes, 0) if isinstance(in_axes, tuple | list)
                          else (*(in_axes,) * nargs, 0))
        leaves, tree = tree_flatten(args)
        axes = axes_of.get((tree, kw))
        if axes is None:  # expanded once per argument structure, not per call
            axes = axes_of[(tree, kw)] = leaf_in_axes(tree, axes_given)
        avals, sizes = [], set()
        for i, (x, ax) in enumerate(zip(leaves, axes, strict=True)):
            try:
                shape, dtype = aval_of(x, "vmap")
            except (TypeError, TenferroError):  # again, naming the argument (error path)
                aval_of(x, f"vmap: {_argument_of(tree, i)}")
                raise
            if ax is not None:
                if not -len(shape) <= ax < len(shape):
                    _check_axis(ax, len(shape), "in_axes", _argument_of(tree, i))
                ax %= len(shape)
                sizes.add(shape[ax])
                shape = shape[:ax] + shape[ax + 1:]
            avals.append((shape, dtype))
        if len(sizes) != 1:
            raise ArgumentError(f"vmap: {_unbatched(args, tree, leaves, axes)}")
        size = sizes.pop()
        key = (tree, tuple((sh, dt.str) for sh, dt in avals), size, kw)
        graph = cache.get(key)
        if graph is None:  # trace and batch once per signature
            for i, (_, dt) in enumerate(avals):  # checked here: once per signature
                _check_dtype(dt, tree, i)
            try:
                traced = trace_flat(fn, avals, tree)
            except TracerError as e:  # f used a traced value concretely (float(x), if x:...)
                head = str(e).split(":", 1)[0]
                if len(e.args) == 1 and " " in head:  # no op named it: say it was in vmap
                    e.args = (f"vmap: argument 'f' cannot be traced: {e}",)
                raise
            graph = cache[key] = vmap_graph(traced, size, axes_given, out_axes)
        return eval_graph(graph, *args)

    return batched


def leaf_in_axes(tree: TreeDef, in_axes: Any) -> list[int | None]:
    """``in_axes`` expanded per leaf of the arguments ``tree`` (a tuple of the positional
    arguments), as JAX does: an int or ``None`` applies to every leaf; a tuple (or list)
    has one entry per argument, each an int, ``None`` or a pytree prefix of that argument
    (its int/``None`` leaves apply to the subtrees they stand for). O(nodes)."""
    kids = tree.children()
    if isinstance(in_axes, list):  # (JAX accepts a list for the per-argument tuple)
        in_axes = tuple(in_axes)
    if not isinstance(in_axes, tuple):
        return _prefix_axes(in_axes, tree, "in_axes", "the arguments")
    if len(in_axes) != len(kids):
        raise ArgumentError(
            f"vmap: argument 'in_axes': in_axes has {len(in_axes)} entries for {len(kids)} "
            "arguments"
        )
    out: list[int | None] = []
    for k, (kid, ax) in enumerate(zip(kids, in_axes, strict=True)):
        out.extend(_prefix_axes(ax, kid, "in_axes", f"argument {k}"))
    return out


def _is_none(x: object) -> bool:
    return x is None


def _prefix_axes(axes: Any, tree: TreeDef, what: str, of: str) -> list[int | None]:
    """One axis per leaf of ``tree`` from ``axes``, a pytree prefix of it whose leaves are
    ints or ``None`` (``None`` is an axis here, not an empty subtree). O(nodes)."""
    if axes is None or _is_axis(axes):
        return [axes] * tree.num_leaves
    leaves, prefix = tree_flatten(axes, is_leaf=_is_none)
    for ax in leaves:
        if ax is not None and not _is_axis(ax):
            raise ArgumentTypeError(
                f"vmap: argument {what!r}: an entry must be an int or None, got {shown(ax)}"
            )
    try:
        subtrees = prefix.flatten_up_to(tree_unflatten(tree, [0] * tree.num_leaves))
    except ValueError as e:
        raise ArgumentError(
            f"vmap: argument {what!r}: {what} {prefix} is not a pytree prefix of {of} "
            f"{tree}: {str(e).splitlines()[0].partition(' does not have ')[2]}"
        ) from None
    out: list[int | None] = []
    for ax, sub in zip(leaves, subtrees, strict=True):
        out.extend([ax] * len(tree_flatten(sub)[0]))
    return out


def _is_axis(ax: object) -> bool:
    return isinstance(ax, int | np.integer) and not isinstance(ax, bool | np.bool_)


def _check_axes_arguments(in_axes: object, out_axes: object) -> None:
    """Refuse, when ``vmap`` is called, an ``in_axes`` or ``out_axes`` whose leaves are not
    ints or ``None`` (a pytree of them; its fit to the arguments is checked per call).
    O(len(in_axes))."""
    for what, axes in (("in_axes", in_axes), ("out_axes", out_axes)):
        try:
            leaves = tree_flatten(axes, is_leaf=_is_none)[0]
        except (TypeError, ValueError):
            leaves = [axes]
        if not all(a is None or _is_axis(a) for a in leaves):
            raise ArgumentTypeError(
                f"vmap: argument {what!r} must be an int, None, or a pytree of ints and "
                f"Nones (a prefix of the {'arguments' if what == 'in_axes' else 'output'}), "
                f"got {shown(axes)}"
            )


def _argument_of(tree: TreeDef, leaf: int) -> str:
    """Which positional argument holds leaf ``leaf``, for a message: ``argument k``, or
    ``argument k (leaf j)`` inside a tuple/list/dict argument. O(arguments)."""
    start = 0
    for k, kid in enumerate(tree.children()):
        if leaf < start + kid.num_leaves:
            inner = "" if not kid.children() else f" (leaf {leaf - start})"
            return f"argument {k}{inner}"
        start += kid.num_leaves
    return f"argument leaf {leaf}"


def _check_dtype(dt: np.dtype[Any], tree: TreeDef, leaf: int) -> None:
    """Refuse a leaf dtype tenferro has no values of (float16, uint8, object...), naming the
    argument, before anything is traced. O(1)."""
    try:
        ts.dtype(dt)
    except TenferroError:
        raise UnsupportedDTypeError("vmap", _argument_of(tree, leaf), dt) from None


def _unbatched(
    args: tuple[Any, ...], tree: TreeDef, leaves: list[Any], axes: list[int | None]
) -> str:
    """Why no single batch size was found, naming the argument(s) responsible (the error
    path: the leaves' shapes are read again)."""
    first: tuple[int, int] | None = None
    for i, (x, ax) in enumerate(zip(leaves, axes, strict=True)):
        if ax is None:
            continue
        n = aval_of(x, "vmap")[0][ax]
        if first is None:
            first = (i, n)
        elif n != first[1]:
            return (
                f"{_argument_of(tree, first[0])} and {_argument_of(tree, i)} disagree on the "
                f"batch size: {first[1]} and {n} along their argument 'in_axes' entries"
            )
    empty = [k for k, kid in enumerate(tree.children()) if kid.num_leaves == 0]
    if empty:
        k = empty[0]
        return (
            f"argument {k} is an empty {type(args[k]).__name__}: it has no array to batch, "
            "and no other argument is batched"
        )
    return "argument 'in_axes': no argument is batched (every entry is None)"


def _check_axis(ax: int, nd: int, what: str, whose_arg: str | None = None) -> int:
    if not -nd <= ax < nd:
        whose = "" if whose_arg is None else f"{whose_arg} has {nd} axes; "
        raise ArgumentError(
            f"vmap: {whose}argument {what!r}: entry {ax} is out of range for {nd} axes"
        )
    return ax % nd


def _lit(b: Builder, a: Any) -> Any:
    return a.value if a.is_scalar else Tracer(b, a)


# identity is defined in _functional.py (no op rule file); its rule is registered here
defbatch(IDENTITY, leading("identity"))
