"""The ``cond``/``switch`` primitive: an index selects one branch sub-graph.

Inputs: the branch index (an integer scalar, clamped to the branches as in JAX's
``switch``), then the operands every branch receives (the call's operands, then each
branch's captured constants).  Parameters: ``branches`` (a tuple of graphs, each
``(*operands) -> (*outputs)`` with the same output types) and ``group``.

* kernel: the selected branch's numpy kernels (the other branches do not run);
* forward mode: the same selection over the branches' JVP graphs;
* reverse mode: the same selection over the branches' VJP graphs (the index is not
  differentiable);
* ``vmap``: an unbatched index selects among the batched branches; a batched index runs
  every branch and selects per element (``where``), as JAX does;
* XLA: ``lax.switch`` over the lowered branches.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._core._primitive import NONDIFF, Primitive
from .._traced._batch_rules import defbatch
from .._traced._batching import vmap_graph
from .._traced._graph import Graph, dce
from .._traced._lowering import deflower, lower_outputs
from .._traced._trace import TRACE_NS, run_bound
from .._traced._transform import jvp as graph_jvp
from .._traced._transform import vjp as graph_vjp
from ..ops import elementwise as ew
from ..ops import shape as sh
from ._common import (
    Aval,
    avals,
    bind_outputs,
    cached_rules,
    group_aval,
    groups_of,
    pack,
    pack_lowered,
    pack_numpy,
    primitives,
    regraph,
    run_graph,
    unpack,
    zeros,
)


def _pick(index: Any, n: int) -> int:
    return int(np.clip(int(np.asarray(index)), 0, n - 1))


def _impl(index: Any, *operands: Any, branches: tuple[Graph, ...],
          group: int) -> np.ndarray[Any, Any]:
    outs = run_graph(branches[_pick(index, len(branches))], operands)
    outs_t = tuple(avals(branches[0].outvars))
    return pack_numpy(outs, groups_of(outs_t)[group])


def _abstract(*_: Any, branches: tuple[Graph, ...], group: int) -> Aval:
    outs_t = tuple(avals(branches[0].outvars))
    return group_aval(outs_t, groups_of(outs_t)[group])


def _jvp(ops: Any, tangents: Any, index: Any, *operands: Any, branches: tuple[Graph, ...],
         group: int) -> Any:
    in_t = avals(branches[0].invars)
    tans = [zeros(ops, a) if t is None else t for t, a in zip(tangents[1:], in_t, strict=True)]
    new = tuple(graph_jvp(b) for b in branches)
    n_out = len(branches[0].outvars)
    outs_t = tuple(avals(branches[0].outvars))
    idx = groups_of(outs_t)[group]
    where = [n_out + j for j in idx]
    args = [index, *operands, *tans]
    leaves = bind_outputs(ops, cond_primitive(len(args)), args, {"branches": new},
                          avals(new[0].outvars), where)
    return pack(ops, [leaves[w] for w in where], range(len(idx)))


def _cotangents(ops: Any, g: Any, index: Any, *operands: Any, branches: tuple[Graph, ...],
                group: int) -> list[Any]:
    outs_t = tuple(avals(branches[0].outvars))
    idx = groups_of(outs_t)[group]
    cts: list[Any] = [zeros(ops, a) for a in outs_t]
    for j, leaf in zip(idx, unpack(ops, g, outs_t, idx), strict=True):
        cts[j] = leaf
    n_out = len(outs_t)
    new = []
    for b in branches:
        vg = graph_vjp(b)  # (*operands, *ct_out) -> (outs, operand cts)
        new.append(dce(regraph(vg, vg.invars, vg.outvars[n_out:])))
    args = [index, *operands, *cts]
    got = bind_outputs(ops, cond_primitive(len(args)), args, {"branches": tuple(new)},
                       avals(new[0].outvars))
    return [None, *got]


def _batch(args: list[Any], batched: list[bool], size: int, *, branches: tuple[Graph, ...],
           group: int) -> tuple[Any, bool]:
    ops_axes = tuple(0 if bt else None for bt in batched[1:])
    vbranches = tuple(vmap_graph(b, size, ops_axes, 0) for b in branches)
    outs_t = tuple(avals(branches[0].outvars))
    idx = groups_of(outs_t)[group]
    index, operands = args[0], list(args[1:])
    if not batched[0]:
        leaves = bind_outputs(TRACE_NS, cond_primitive(len(args)), args,
                              {"branches": vbranches}, avals(vbranches[0].outvars), idx)
        return pack(TRACE_NS, [leaves[j] for j in idx], range(len(idx)), batch=size), True
    # a batched index: every branch runs, each element takes its own branch's result
    k = ew.clip(index, 0, len(branches) - 1)
    got = run_bound(vbranches[0], operands)
    for i, vb in enumerate(vbranches[1:], start=1):
        other = run_bound(vb, operands)
        sel = []
        for a, o in zip(got, other, strict=True):
            p = sh.reshape(ew.equal(k, i), (size, *(1,) * (len(o.shape) - 1)))
            sel.append(ew.where(p, o, a))
        got = sel
    return pack(TRACE_NS, [got[j] for j in idx], range(len(idx)), batch=size), True


def _lower(x: Any, index: Any, *operands: Any, branches: tuple[Graph, ...], group: int) -> Any:
    fns = [lower_outputs(b, x, "cond") for b in branches]
    outs = x.lax.switch(x.np.asarray(index).astype("int32"),
                        [lambda *o, f=f: tuple(f(*o)) for f in fns], *operands)
    idx = groups_of(tuple(avals(branches[0].outvars)))[group]
    return pack_lowered(x, outs, idx)


def _make(n: int) -> Primitive:
    p = Primitive("cond", _impl, n, save_in=tuple(range(n)))
    p.abstract = _abstract
    p.jvp_all = _jvp
    p.defvjp(NONDIFF, *cached_rules(_cotangents, n)[1:])
    defbatch(p, _batch)
    deflower(p, _lower)
    return p


cond_primitive = primitives("cond", _make)
"""``cond_primitive(n)``: the cond primitive with ``n`` inputs (made once per ``n``)."""
