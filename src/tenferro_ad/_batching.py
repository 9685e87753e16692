"""``vmap``: batching a graph, with one batching rule per primitive (a table keyed by name).

The interpreter moves every batched input's batch axis to the front, then walks the
graph: an equation with no batched argument is re-emitted unchanged; otherwise the
primitive's rule in :data:`RULES` emits the batched equations.  A primitive without a
rule is batched by the *loop fallback*: one sliced application per batch element, then a
stack (correct, slower: ``B`` equations plus a concatenate).

Rule signature: ``rule(args, batched, size, **params) -> (out, out_batched)`` where
``batched[i]`` says whether ``args[i]`` carries the batch on axis 0 (scalars never do),
``size`` is the batch size, and the output's batch (if any) is on axis 0.

Note: the rules belong next to each primitive's JVP/VJP rules in ``ops/<family>.py``;
they are collected here while those files are being edited, and should move there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._eval import eval_graph
from ._graph import Graph, TreeDef, Var, dce, tree_flatten
from ._primitive import REGISTRY, Primitive
from ._trace import TRACE_NS, Builder, Tracer, aval_of, trace_flat
from .errors import ArgumentError, ArgumentTypeError

BatchRule = Callable[..., tuple[Any, bool]]
RULES: dict[str, BatchRule] = {}


def _emit(name: str, *args: Any, **params: Any) -> Any:
    return TRACE_NS.apply(REGISTRY[name], *args, **params)


def _shape(a: Any) -> tuple[int, ...]:
    return tuple(getattr(a, "shape", ()))


def _expand_batched(a: Any, rank: int) -> Any:
    """Batched ``a`` (batch on axis 0) with unit axes after the batch up to ``rank``+1 axes."""
    s = _shape(a)
    if len(s) - 1 >= rank:
        return a
    return _emit("reshape", a, shape=(s[0], *(1,) * (rank - len(s) + 1), *s[1:]), src=s)


def _move_to_front(a: Any, axis: int) -> Any:
    if axis == 0:
        return a
    nd = len(_shape(a))
    axes = (axis, *(i for i in range(nd) if i != axis))
    return _emit("transpose", a, axes=axes)


def _move_from_front(a: Any, axis: int) -> Any:
    nd = len(_shape(a))
    axis = axis % nd
    if axis == 0:
        return a
    rest = list(range(1, nd))
    rest.insert(axis, 0)
    return _emit("transpose", a, axes=tuple(rest))


def broadcast_batch(a: Any, size: int) -> Any:
    """An unbatched value broadcast to carry the batch on axis 0 (a metadata alias)."""
    s = _shape(a)
    z = TRACE_NS.apply(REGISTRY["broadcast_to"], a, shape=(size, *s), src=s)
    return z


def loop_fallback(
    prim: Primitive, args: Sequence[Any], batched: Sequence[bool], size: int, params: Any
) -> Any:
    """Batch ``prim`` by applying it per batch element and stacking the results."""
    outs = []
    for k in range(size):
        sl = [
            _emit("slice", a, key=(k,), shape=_shape(a)) if bt else a
            for a, bt in zip(args, batched, strict=True)
        ]
        o = TRACE_NS.apply(prim, *sl, **params)
        s = _shape(o)
        outs.append(_emit("reshape", o, shape=(1, *s), src=s))
    if size == 1:
        return outs[0]
    return _emit("concatenate", *outs, axis=0, sizes=(1,) * size)


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
        for e in graph.eqns:
            args = [env[a] if isinstance(a, Var) else (_lit(b, a), False) for a in e.inputs]
            vals = [x for x, _ in args]
            flags = [f for _, f in args]
            if not any(flags):
                env[e.out] = (b.emit(e.prim, vals, dict(e.params)), False)
                continue
            rule = RULES.get(e.prim.name)
            if rule is None:
                env[e.out] = (loop_fallback(e.prim, vals, flags, size, dict(e.params)), True)
            else:
                env[e.out] = rule(vals, flags, size, **e.params)
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
                ax = _check_axis(ax, len(shape), "in_axes")
                sizes.add(shape[ax])
                shape = shape[:ax] + shape[ax + 1:]
            avals.append((shape, dtype))
        if len(sizes) != 1:
            raise ArgumentError(
                "vmap: " + ("no argument is batched (every in_axes entry is None)" if not sizes
                            else f"batched arguments disagree on the batch size: {sorted(sizes)}")
            )
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
            raise ArgumentTypeError(f"vmap: an in_axes entry must be an int or None, got {ax!r}")
        out.extend([ax] * k.num_leaves)
    return out


def _check_axis(ax: int, nd: int, what: str) -> int:
    if not -nd <= ax < nd:
        raise ArgumentError(f"vmap: {what} entry {ax} is out of range for {nd} axes")
    return ax % nd


def _lit(b: Builder, a: Any) -> Any:
    return a.value if a.is_scalar else Tracer(b, a)


# -- the rule table
def _elementwise(name: str) -> BatchRule:
    """Broadcasting elementwise ops: give batched arguments unit axes up to the common rank
    (unbatched ones broadcast from the right, as numpy does)."""

    def rule(args: list[Any], batched: list[bool], size: int, **params: Any) -> tuple[Any, bool]:
        ranks = [len(_shape(a)) - int(bt) for a, bt in zip(args, batched, strict=True)]
        top = max(ranks)
        new = [_expand_batched(a, top) if bt else a for a, bt in zip(args, batched, strict=True)]
        return _emit(name, *new, **params), True

    return rule


def _leading(name: str, shift: tuple[str, ...] = (), prefix: tuple[str, ...] = ()) -> BatchRule:
    """Unary ops that act on trailing axes (or elementwise): apply to the batched value with
    axis parameters in ``shift`` moved by one and shape parameters in ``prefix`` prefixed."""

    def rule(args: list[Any], batched: list[bool], size: int, **params: Any) -> tuple[Any, bool]:
        for k in shift:
            v = params[k]
            params[k] = tuple(a + 1 for a in v) if isinstance(v, tuple) else v + 1
        for k in prefix:
            params[k] = (size, *params[k])
        return _emit(name, *args, **params), True

    return rule


def _transpose(args: list[Any], batched: list[bool], size: int, *, axes: Any) -> tuple[Any, bool]:
    return _emit("transpose", args[0], axes=(0, *(a + 1 for a in axes))), True


def _broadcast_to(
    args: list[Any], batched: list[bool], size: int, *, shape: Any, src: Any
) -> tuple[Any, bool]:
    x = _expand_batched(args[0], len(shape))
    return _emit("broadcast_to", x, shape=(size, *shape), src=_shape(x)), True


def _key(key: Any) -> tuple[Any, ...]:
    return (slice(None), *(key if isinstance(key, tuple) else (key,)))


def _indexing(name: str) -> BatchRule:
    """slice / gather / slice_pad / scatter_add: a leading full slice in the key.  Falls back
    to the loop when numpy would move the batch axis (separated advanced indices)."""

    def rule(
        args: list[Any], batched: list[bool], size: int, *, key: Any, shape: Any
    ) -> tuple[Any, bool]:
        probe = np.broadcast_to(np.zeros((), np.int8), shape)
        want = (size, *probe[key].shape)
        got = np.broadcast_to(np.zeros((), np.int8), (size, *shape))[_key(key)].shape
        if name in ("slice", "gather") and got != want:
            return loop_fallback(REGISTRY[name], args, batched, size, {"key": key,
                                                                       "shape": shape}), True
        if name in ("slice_pad", "scatter_add") and got != _shape(args[0]):
            return loop_fallback(REGISTRY[name], args, batched, size, {"key": key,
                                                                       "shape": shape}), True
        return _emit(name, args[0], key=_key(key), shape=(size, *shape)), True

    return rule


def _concatenate(
    args: list[Any], batched: list[bool], size: int, *, axis: int, sizes: Any
) -> tuple[Any, bool]:
    new = [a if bt else broadcast_batch(a, size) for a, bt in zip(args, batched, strict=True)]
    return _emit("concatenate", *new, axis=axis + 1, sizes=sizes), True


def _matmul(args: list[Any], batched: list[bool], size: int) -> tuple[Any, bool]:
    """Vectors become matrices (and the unit axis is dropped again), batched operands get
    unit axes after the batch up to the common rank; numpy's batched GEMM does the rest."""
    x, y = args
    bx, by = batched
    xs, ys = _shape(x), _shape(y)
    xv, yv = len(xs) - int(bx) == 1, len(ys) - int(by) == 1
    if xv:
        x = _emit("reshape", x, shape=(*xs[:-1], 1, xs[-1]), src=xs)
    if yv:
        y = _emit("reshape", y, shape=(*ys, 1), src=ys)
    top = max(len(_shape(x)) - int(bx), len(_shape(y)) - int(by))
    x = _expand_batched(x, top) if bx else x
    y = _expand_batched(y, top) if by else y
    out = _emit("matmul", x, y)
    s = _shape(out)
    if xv or yv:
        keep = s[:-2] + (() if xv else s[-2:-1]) + (() if yv else s[-1:])
        out = _emit("reshape", out, shape=keep, src=s)
    return out, True


def _fresh_label(subscripts: str) -> str | None:
    if "." in subscripts:
        return None
    return next((c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in subscripts), None)


def _einsum_binary(
    args: list[Any], batched: list[bool], size: int, *, subscripts: str
) -> tuple[Any, bool]:
    """A fresh batch label on the batched operands and the output: one batched GEMM."""
    z = _fresh_label(subscripts)
    if z is None:
        return loop_fallback(REGISTRY["einsum_binary"], args, batched, size,
                             {"subscripts": subscripts}), True
    ins, out = subscripts.split("->")
    a, b = ins.split(",")
    sub = f"{z + a if batched[0] else a},{z + b if batched[1] else b}->{z + out}"
    return _emit("einsum_binary", *args, subscripts=sub), True


def _einsum_unary(
    args: list[Any], batched: list[bool], size: int, *, subscripts: str, shape: Any, src: Any
) -> tuple[Any, bool]:
    z = _fresh_label(subscripts)
    if z is None:
        return loop_fallback(REGISTRY["einsum_unary"], args, batched, size,
                             {"subscripts": subscripts, "shape": shape, "src": src}), True
    ins, out = subscripts.split("->")
    return _emit("einsum_unary", args[0], subscripts=f"{z + ins}->{z + out}",
                 shape=(size, *shape), src=(size, *src)), True


for _n in ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "where", "lt", "le", "gt",
           "ge", "eq", "ne"):
    RULES[_n] = _elementwise(_n)
for _n in ("neg", "exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "sqrt", "abs", "sign",
           "astype", "stop_gradient", "identity", "conj", "real", "imag", "real_t", "imag_t",
           "angle"):
    RULES[_n] = _leading(_n)
for _n in ("sum", "max", "min", "prod"):
    RULES[_n] = _leading(_n, shift=("axes",), prefix=("shape",) if _n == "sum" else ())
for _n in ("reshape", "reshape_copy"):
    RULES[_n] = _leading(_n, prefix=("shape", "src"))
for _n in ("slice", "gather", "slice_pad", "scatter_add"):
    RULES[_n] = _indexing(_n)
RULES["transpose"] = _transpose
RULES["broadcast_to"] = _broadcast_to
RULES["concatenate"] = _concatenate
RULES["matmul"] = _matmul
RULES["einsum_binary"] = _einsum_binary
RULES["einsum_unary"] = _einsum_unary
for _n in ("tril", "triu"):  # act on the two trailing axes: the batch axis rides along
    RULES[_n] = _leading(_n)
