"""What the control-flow primitives share: sub-graphs, the numpy runner, output groups.

A loop or conditional is ONE primitive application whose static parameters hold its body
(a :class:`~tenferro_ad._traced._graph.Graph`).  Primitives are single-output, so the
construct's output leaves are grouped by dtype (first-appearance order) and each group is
one equation: a group of one leaf is that leaf; a larger group is every leaf raveled and
concatenated, unpacked again by metadata-only slices -- the layout ``custom_vjp`` calls
use.  A construct whose outputs share one dtype (the usual case) is one equation.

Rules run in any rule namespace (numpy arrays, recording handles, tracers): they build
new sub-graphs with the graph transformations and apply the primitive again through
:func:`bind_outputs`.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._core._dispatch import bind
from .._core._namespace import NUMPY_NS
from .._core._primitive import Primitive
from .._traced._graph import Graph, Var, flat_tree
from .._traced._trace import TRACE_NS
from ..errors import ArgumentTypeError
from ..ops import shape as sh

Aval = tuple[tuple[int, ...], np.dtype[Any]]


class Spec:
    """A stand-in leaf with a ``shape`` and ``dtype`` only (what a trace reads). O(1)."""

    __slots__ = ("dtype", "shape")

    def __init__(self, shape: tuple[int, ...], dtype: Any) -> None:
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)


def regraph(graph: Graph, invars: Sequence[Var], outvars: Sequence[Any]) -> Graph:
    """``graph``'s equations with these (flat) inputs and outputs. O(1) plus the tuples."""
    return Graph(tuple(invars), graph.eqns, tuple(outvars), flat_tree(len(invars)),
                 flat_tree(len(outvars)))


def avals(atoms: Sequence[Any]) -> list[Aval]:
    """The ``(shape, dtype)`` of graph atoms. O(n)."""
    return [(a.shape, a.dtype) for a in atoms]


@functools.lru_cache(maxsize=4096)
def groups_of(out_avals: tuple[Aval, ...]) -> tuple[tuple[int, ...], ...]:
    """The output leaves grouped by dtype, in first-appearance order. O(n)."""
    order: dict[np.dtype[Any], list[int]] = {}
    for j, (_, dt) in enumerate(out_avals):
        order.setdefault(dt, []).append(j)
    return tuple(tuple(g) for g in order.values())


def group_aval(out_avals: Sequence[Aval], idx: Sequence[int]) -> Aval:
    """The type of one group's equation. O(len(idx))."""
    if len(idx) == 1:
        return out_avals[idx[0]]
    n = sum(int(np.prod(out_avals[j][0], dtype=np.int64)) for j in idx)
    return (n,), out_avals[idx[0]][1]


# -- running a sub-graph with numpy kernels
@functools.lru_cache(maxsize=1024)
def _runner(graph: Graph) -> Callable[..., list[Any]]:
    """``graph`` as one generated Python function over numpy arrays: each equation one
    call of its kernel (literals and parameters bound at generation), intermediates
    dropped at their last use by the interpreter.  Made once per graph (cached)."""
    name = {v: f"a{i}" for i, v in enumerate(graph.invars)}
    ns: dict[str, Any] = {}
    lines = [f"def run({', '.join(name[v] for v in graph.invars)}):"]

    def ref(a: Any) -> str:
        if isinstance(a, Var):
            return name[a]
        key = f"c{len(ns)}"
        ns[key] = a.value if a.is_scalar else np.asarray(a.value)
        return key

    for k, e in enumerate(graph.eqns):
        ns[f"F{k}"] = e.prim.impl
        args = [ref(a) for a in e.inputs]
        if e.params:
            ns[f"P{k}"] = dict(e.params)
            args.append(f"**P{k}")
        name[e.out] = f"v{k}"
        lines.append(f"    v{k} = F{k}({', '.join(args)})")
    lines.append(f"    return [{', '.join(ref(a) for a in graph.outvars)}]")
    exec(compile("\n".join(lines), f"<{len(graph.eqns)}-equation body>", "exec"), ns)
    return ns["run"]  # type: ignore[no-any-return]


def run_graph(graph: Graph, arrays: Sequence[Any]) -> list[Any]:
    """``graph``'s outputs computed by its primitives' numpy kernels, in order (an output
    may be an input array itself). O(equations) kernel calls, no per-call bookkeeping
    beyond them (the function is generated once per graph)."""
    return _runner(graph)(*arrays)


# -- packing the output leaves into one value per group
def pack_numpy(leaves: Sequence[Any], idx: Sequence[int]) -> np.ndarray[Any, Any]:
    """This group's leaves as one fresh C-contiguous numpy array (one allocation)."""
    if len(idx) == 1:
        return np.array(leaves[idx[0]], order="C", copy=True)
    return np.concatenate([np.asarray(leaves[j]).reshape(-1) for j in idx])


def pack(ops: Any, leaves: Sequence[Any], idx: Sequence[int], batch: int = 0) -> Any:
    """This group's leaves as its equation's value in ``ops``' namespace (``batch``: the
    leaves carry that many leading batch entries, kept in front). Inverse of
    :func:`unpack`."""
    if len(idx) == 1:
        return leaves[idx[0]]
    if ops is NUMPY_NS:
        return pack_numpy(leaves, idx)
    lead = (batch, -1) if batch else (-1,)
    return sh.concatenate([sh.reshape(leaves[j], lead) for j in idx], axis=1 if batch else 0)


def pack_lowered(x: Any, leaves: Sequence[Any], idx: Sequence[int]) -> Any:
    """This group's leaves as one value in a lowering's namespace ``x`` (``x.np``: jax.numpy):
    the leaf itself, or the flattened leaves concatenated (what :func:`pack` builds)."""
    if len(idx) == 1:
        return leaves[idx[0]]
    return x.np.concatenate([x.np.reshape(leaves[j], (-1,)) for j in idx])


def unpack(ops: Any, value: Any, out_avals: Sequence[Aval], idx: Sequence[int]) -> list[Any]:
    """The leaves of one group's value (metadata-only slices), in ``idx`` order."""
    if len(idx) == 1:
        return [value]
    got: list[Any] = []
    off = 0
    for j in idx:
        shape = out_avals[j][0]
        n = int(np.prod(shape, dtype=np.int64))
        if ops is NUMPY_NS:
            got.append(np.asarray(value)[off : off + n].reshape(shape))
        else:
            got.append(sh.reshape(sh.getitem(value, slice(off, off + n)), shape))
        off += n
    return got


def apply(ops: Any, prim: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
    """``prim(*args, **params)`` in ``ops``' namespace (``None``: the public path, ``bind``)."""
    if ops is None:
        return bind(prim, *args, **params)
    return ops.apply(prim, *args, **params)


def bind_outputs(
    ops: Any,
    prim: Primitive,
    args: Sequence[Any],
    params: dict[str, Any],
    out_avals: Sequence[Aval],
    want: Sequence[int] | None = None,
) -> list[Any]:
    """Apply ``prim`` once per output group (only groups holding a leaf of ``want``, when
    given) and return every output leaf (``None`` for leaves of skipped groups)."""
    groups = groups_of(tuple(out_avals))
    leaves: list[Any] = [None] * len(out_avals)
    wanted = None if want is None else set(want)
    for k, idx in enumerate(groups):
        if wanted is not None and not wanted.intersection(idx):
            continue
        value = apply(ops, prim, args, {**params, "group": k})
        for j, leaf in zip(idx, unpack(ops, value, out_avals, idx), strict=True):
            leaves[j] = leaf
    return leaves


def zeros(ops: Any, aval: Aval) -> Any:
    """Zeros of ``aval`` for ``ops``' namespace (a stride-0 numpy constant). O(1)."""
    z = np.broadcast_to(np.zeros((), aval[1]), aval[0])
    if ops is TRACE_NS:
        return np.zeros(aval[0], aval[1])  # a literal of the graph
    return z


def same_types(what: str, got: Sequence[Aval], want: Sequence[Aval], names: Sequence[str]) -> None:
    """Refuse ``got`` types that differ from ``want`` (a loop body's carry, a branch's
    outputs), naming ``what`` and the leaf. Metadata only."""
    for (gs, gd), (ws, wd), name in zip(got, want, names, strict=True):
        if gs != ws or gd != wd:
            raise ArgumentTypeError(
                f"{what}: {name} has type {gd.name}{list(gs)} but must keep the type "
                f"{wd.name}{list(ws)} of the input"
            )


def cached_rules(compute: Callable[..., list[Any]], n: int) -> list[Callable[..., Any]]:
    """One VJP rule per argument over a shared cache: ``compute(ops, g, *inputs, **params)``
    gives every argument's cotangent at once (one backward program), and the other
    arguments' rules of the same application reuse it.  An entry lives as long as its
    cotangent ``g`` (a weak reference: the sweep drops ``g`` after the equation), so the
    cache keeps nothing alive; a ``g`` without weak references is not cached."""
    cache: dict[int, tuple[Any, ...]] = {}

    def for_argument(i: int) -> Callable[..., Any]:
        def rule(ops: Any, g: Any, *inputs: Any, **params: Any) -> Any:
            key, ids = id(g), tuple(map(id, inputs))
            got = cache.get(key)
            if got is None or got[0]() is not g or got[1] != ids or not _same(got[2], params):
                cts = compute(ops, g, *inputs, **params)
                try:
                    ref = weakref.ref(g, _dropper(cache, key))
                except TypeError:
                    return cts[i]
                got = cache[key] = (ref, ids, params, cts)
            return got[3][i]

        return rule

    return [for_argument(i) for i in range(n)]


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Parameters equal without comparing traced values (identity, or ``==`` for plain
    Python scalars and strings)."""
    return a.keys() == b.keys() and all(
        x is y or (type(x) in (int, bool, str) and type(y) is type(x) and x == y)
        for x, y in ((a[k], b[k]) for k in a)
    )


def _dropper(cache: dict[int, Any], key: int) -> Callable[[Any], None]:
    def drop(_: Any) -> None:
        cache.pop(key, None)

    return drop


def primitives(
    name: str, make: Callable[[int], Primitive]
) -> Callable[[int], Primitive]:
    """``get(n)``: the primitive ``name`` with ``n`` inputs, made once by ``make(n)``."""
    made: dict[int, Primitive] = {}

    def get(n: int) -> Primitive:
        p = made.get(n)
        if p is None:
            p = made[n] = make(n)
        return p

    get.__name__ = name
    return get
