"""The ``scan`` primitive: one equation per output dtype group, its body a sub-graph.

Inputs: the body's captured constants, the initial carry, the stacked inputs ``xs``
(leading axis: the steps).  Parameters: ``body`` (a graph ``(*consts, *carry, *x) ->
(*carry, *y)``), ``n_consts``, ``n_carry``, ``length``, ``reverse``, ``group``.  Outputs:
the final carry and the stacked ``ys`` (``(length, *y.shape)``).

* kernel: the body's numpy kernels once per step (the host engine runs the loop over the
  sub-program; nothing is unrolled);
* forward mode: a scan of the body's JVP graph over primals and tangents;
* reverse mode: a forward scan that keeps only the carry entering each step, then a
  reversed scan of the body's VJP graph that recomputes each step from its saved carry
  (a checkpointed body, always: residuals are ``length`` carries, never the body's
  intermediates) and accumulates the constants' cotangents in its carry;
* ``vmap``: a scan of the batched body (constants and carry batched, ``xs`` batched on
  axis 1 while scanning); ys come back batch-first;
* XLA: ``lax.scan`` over the lowered body.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._core._primitive import Primitive
from .._traced._batch_rules import broadcast_batch, defbatch, emit
from .._traced._batching import vmap_graph
from .._traced._graph import Eqn, Graph, dce, flat_tree
from .._traced._lowering import deflower, lower_outputs
from .._traced._trace import TRACE_NS, run_bound, trace_flat
from .._traced._transform import jvp as graph_jvp
from .._traced._transform import vjp as graph_vjp
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


def out_avals(body: Graph, n_consts: int, n_carry: int, length: int) -> tuple[Aval, ...]:
    """The scan's output leaves: the carry, then each ``y`` stacked. O(leaves)."""
    carry = avals(body.invars[n_consts : n_consts + n_carry])
    ys = [((length, *s), d) for s, d in avals(body.outvars[n_carry:])]
    return tuple(carry + ys)


def _impl(
    *arrays: Any, body: Graph, n_consts: int, n_carry: int, length: int, reverse: bool,
    group: int,
) -> np.ndarray[Any, Any]:
    consts = list(arrays[:n_consts])
    carry = list(arrays[n_consts : n_consts + n_carry])
    xs = [np.asarray(x) for x in arrays[n_consts + n_carry :]]
    outs_t = out_avals(body, n_consts, n_carry, length)
    ys = [np.empty(s, d) for s, d in outs_t[n_carry:]]
    for t in range(length - 1, -1, -1) if reverse else range(length):
        outs = run_graph(body, [*consts, *carry, *(x[t] for x in xs)])
        carry = outs[:n_carry]
        for y, o in zip(ys, outs[n_carry:], strict=True):
            y[t] = o
    return pack_numpy([*carry, *ys], groups_of(outs_t)[group])


def _abstract(*_: Any, body: Graph, n_consts: int, n_carry: int, length: int, group: int,
              **__: Any) -> Aval:
    outs_t = out_avals(body, n_consts, n_carry, length)
    return group_aval(outs_t, groups_of(outs_t)[group])


def _jvp(
    ops: Any, tangents: Any, *inputs: Any, body: Graph, n_consts: int, n_carry: int,
    length: int, reverse: bool, group: int,
) -> Any:
    """A scan of the body's JVP graph over (primals, tangents); this group's tangents."""
    nc, nk = n_consts, n_carry
    nx = len(inputs) - nc - nk
    in_t = avals(body.invars)
    stacked = [((length, *s), d) for s, d in in_t[nc + nk :]]
    t_avals = in_t[: nc + nk] + stacked
    tans = [zeros(ops, a) if t is None else t for t, a in zip(tangents, t_avals, strict=True)]
    jg = graph_jvp(body)
    n_in, n_out = len(body.invars), len(body.outvars)
    p, t = jg.invars[:n_in], jg.invars[n_in:]
    o, to = jg.outvars[:n_out], jg.outvars[n_out:]
    ny = n_out - nk
    new_body = regraph(
        jg,
        [*p[:nc], *t[:nc], *p[nc : nc + nk], *t[nc : nc + nk], *p[nc + nk :], *t[nc + nk :]],
        [*o[:nk], *to[:nk], *o[nk:], *to[nk:]],
    )
    args = [*inputs[:nc], *tans[:nc], *inputs[nc : nc + nk], *tans[nc : nc + nk],
            *inputs[nc + nk :], *tans[nc + nk :]]
    assert len(args) == 2 * (nc + nk + nx)
    params = dict(body=new_body, n_consts=2 * nc, n_carry=2 * nk, length=length, reverse=reverse)
    new_t = out_avals(new_body, 2 * nc, 2 * nk, length)
    idx = groups_of(out_avals(body, nc, nk, length))[group]
    where = [nk + j if j < nk else 2 * nk + ny + (j - nk) for j in idx]
    leaves = bind_outputs(ops, scan_primitive(len(args)), args, params, new_t, where)
    got = [leaves[w] for w in where]
    return pack(ops, got, range(len(got)))


def _forward_saving(
    ops: Any, *inputs: Any, body: Graph, n_consts: int, n_carry: int, length: int,
    reverse: bool, group: int,
) -> tuple[Any, tuple[Any, ...]]:
    """Traced reverse mode's forward pass: this group's output and the carries entering
    each step, stacked, from one scan (the backward scan reads them: no second forward)."""
    nc, nk = n_consts, n_carry
    ny = len(body.outvars) - nk
    fwd = regraph(body, body.invars, [*body.outvars, *body.invars[nc : nc + nk]])
    fwd_t = out_avals(fwd, nc, nk, length)
    idx = groups_of(out_avals(body, nc, nk, length))[group]
    keep = range(nk + ny, 2 * nk + ny)
    params = dict(body=fwd, n_consts=nc, n_carry=nk, length=length, reverse=reverse)
    leaves = bind_outputs(ops, scan_primitive(len(inputs)), inputs, params, fwd_t,
                          [*idx, *keep])
    return pack(ops, [leaves[j] for j in idx], range(len(idx))), tuple(leaves[j] for j in keep)


def _cotangents(
    ops: Any, g: Any, *inputs: Any, body: Graph, n_consts: int, n_carry: int, length: int,
    reverse: bool, group: int, saved: tuple[Any, ...] | None = None,
) -> list[Any]:
    """Every input's cotangent: the carries entering each step (``saved`` by the forward
    pass, else a forward scan), then a reversed scan of the body's VJP graph that
    recomputes each step from them."""
    nc, nk = n_consts, n_carry
    outs_t = out_avals(body, nc, nk, length)
    idx = groups_of(outs_t)[group]
    cts: list[Any] = [zeros(ops, a) for a in outs_t]
    for j, leaf in zip(idx, unpack(ops, g, outs_t, idx), strict=True):
        cts[j] = leaf
    if saved is None:  # 1. the carry entering each step, stacked (nothing else is kept)
        fwd = dce(regraph(body, body.invars, [*body.outvars[:nk], *body.invars[nc : nc + nk]]))
        fwd_t = out_avals(fwd, nc, nk, length)
        params = dict(body=fwd, n_consts=nc, n_carry=nk, length=length, reverse=reverse)
        saved = tuple(bind_outputs(ops, scan_primitive(len(inputs)), inputs, params, fwd_t,
                                   range(nk, 2 * nk))[nk:])
    # 2. the reversed scan of the body's VJP
    vg = graph_vjp(_plain(body))  # (*consts, *carry, *x, *ct_carry, *ct_y) -> (outs, in_cts)
    in_t = avals(body.invars)
    n_in, n_out = len(body.invars), len(body.outvars)
    ny = n_out - nk
    nx = n_in - nc - nk
    step_t = [*in_t[:nc], *in_t[nc : nc + nk], *in_t[:nc], *in_t[nc : nc + nk],
              *in_t[nc + nk :], *avals(body.outvars[nk:])]

    def step(*leaves: Any) -> tuple[Any, ...]:
        consts, ct_c, acc = leaves[:nc], leaves[nc : nc + nk], leaves[nc + nk : 2 * nc + nk]
        c_t = leaves[2 * nc + nk : 2 * nc + 2 * nk]
        x_t = leaves[2 * nc + 2 * nk : 2 * nc + 2 * nk + nx]
        gy = leaves[2 * nc + 2 * nk + nx :]
        got = run_bound(vg, [*consts, *c_t, *x_t, *ct_c, *gy])[n_out:]
        new_acc = [TRACE_NS.add(a, c) for a, c in zip(acc, got[:nc], strict=True)]
        return (*got[nc : nc + nk], *new_acc, *got[nc + nk :])

    bwd = dce(trace_flat(step, step_t, flat_tree(len(step_t))))
    args = [*inputs[:nc], *cts[:nk], *[zeros(ops, a) for a in in_t[:nc]], *saved,
            *inputs[nc + nk :], *cts[nk:]]
    assert len(args) == 2 * nc + 2 * nk + nx + ny
    bparams = dict(body=bwd, n_consts=nc, n_carry=nk + nc, length=length, reverse=not reverse)
    back = bind_outputs(ops, scan_primitive(len(args)), args, bparams,
                        out_avals(bwd, nc, nk + nc, length))
    return [*back[nk : nk + nc], *back[:nk], *back[nk + nc :]]


def _plain(body: Graph) -> Graph:
    """``body`` without checkpoint-region annotations: the backward scan already recomputes
    each step from its carry, so a region around (part of) the step would only recompute
    it a second time. O(equations)."""
    if all(e.note is None or e.note.region is None for e in body.eqns):
        return body
    eqns = tuple(Eqn(e.prim, e.inputs, e.params, out=e.out) for e in body.eqns)
    return Graph(body.invars, eqns, body.outvars, body.in_tree, body.out_tree)


def _batch(
    args: list[Any], batched: list[bool], size: int, *, body: Graph, n_consts: int,
    n_carry: int, length: int, reverse: bool, group: int,
) -> tuple[Any, bool]:
    nc, nk = n_consts, n_carry
    new_args: list[Any] = []
    in_axes: list[int | None] = []
    for i, (a, bt) in enumerate(zip(args, batched, strict=True)):
        if i < nc + nk:  # constants and carry: batched on axis 0
            new_args.append(a if bt else broadcast_batch(a, size))
            in_axes.append(0)
        elif bt:  # xs: steps first while scanning, the batch on axis 1
            nd = len(a.shape)
            new_args.append(emit("transpose", a, axes=(1, 0, *range(2, nd))))
            in_axes.append(0)
        else:
            new_args.append(a)
            in_axes.append(None)
    vbody = vmap_graph(body, size, tuple(in_axes), 0)
    params = dict(body=vbody, n_consts=nc, n_carry=nk, length=length, reverse=reverse)
    new_t = out_avals(vbody, nc, nk, length)
    idx = groups_of(out_avals(body, nc, nk, length))[group]
    leaves = bind_outputs(TRACE_NS, scan_primitive(len(args)), new_args, params, new_t, idx)
    got = []
    for j in idx:
        leaf = leaves[j]
        if j >= nk:  # ys: (length, batch, ...) -> (batch, length, ...)
            nd = len(new_t[j][0])
            leaf = emit("transpose", leaf, axes=(1, 0, *range(2, nd)))
        got.append(leaf)
    return pack(TRACE_NS, got, range(len(got)), batch=size), True


def _lower(
    x: Any, *args: Any, body: Graph, n_consts: int, n_carry: int, length: int, reverse: bool,
    group: int,
) -> Any:
    nc, nk = n_consts, n_carry
    fn = lower_outputs(body, x, "scan")
    consts = args[:nc]

    def step(carry: Any, xt: Any) -> Any:
        outs = fn(*consts, *carry, *xt)
        return tuple(outs[:nk]), tuple(outs[nk:])

    carry, ys = x.lax.scan(step, tuple(args[nc : nc + nk]), tuple(args[nc + nk :]),
                           length=length, reverse=reverse)
    outs_t = out_avals(body, nc, nk, length)
    leaves = [*carry, *ys]
    idx = groups_of(outs_t)[group]
    return pack_lowered(x, leaves, idx)


def _make(n: int) -> Primitive:
    p = Primitive("scan", _impl, n, save_in=tuple(range(n)))
    p.abstract = _abstract
    p.jvp_all = _jvp
    p.forward_saving = _forward_saving
    p.defvjp(*cached_rules(_cotangents, n))
    defbatch(p, _batch)
    deflower(p, _lower)
    return p


scan_primitive = primitives("scan", _make)
"""``scan_primitive(n)``: the scan primitive with ``n`` inputs (made once per ``n``)."""
