"""The ``while_loop`` primitive and its eager guard.

Inputs: the predicate's constants, the body's constants, the initial carry.  Parameters:
``cond`` (``(*cond_consts, *carry) -> bool[]``), ``body`` (``(*body_consts, *carry) ->
(*carry)``), ``n_cond``, ``n_body``, ``group``.  Output: the final carry (one equation
per dtype group).

* kernel: the predicate and body graphs' numpy kernels until the predicate is false;
* forward mode: a while loop of the body's JVP graph (the predicate reads the primals);
* reverse mode: refused with :class:`~tenferro_ad.errors.ReverseModeError`, as in JAX
  (the trip count is known only when the loop runs: use ``scan`` or ``fori_loop`` with
  static bounds);
* ``vmap``: JAX's rule for a batched predicate -- the loop runs while ANY batch element's
  predicate holds, and the finished elements keep their carry (``where``);
* XLA: ``lax.while_loop`` over the lowered graphs.
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

from .._core._primitive import Primitive
from .._traced._batch_rules import broadcast_batch, defbatch, emit
from .._traced._batching import vmap_graph
from .._traced._graph import Graph, Var, flat_tree
from .._traced._lowering import deflower, lower_outputs
from .._traced._trace import TRACE_NS, aval_of, run_bound, trace_flat
from .._traced._transform import jvp as graph_jvp
from ..errors import ReverseModeError
from ..ops import elementwise as ew
from ..ops import scan as sc
from ..ops import shape as sh
from ._common import (
    Aval,
    avals,
    bind_outputs,
    group_aval,
    groups_of,
    pack,
    pack_lowered,
    pack_numpy,
    primitives,
    regraph,
    run_graph,
    zeros,
)

REVERSE_REFUSED = (
    "while_loop: reverse-mode differentiation (grad, vjp) does not apply to a while_loop, "
    "whose trip count is known only when it runs (as in JAX). Use scan, or fori_loop with "
    "static (Python int) bounds, which keep what reverse mode needs per step; forward mode "
    "(jvp, jacfwd) works through while_loop"
)


def _carry_avals(body: Graph, n_body: int) -> tuple[Aval, ...]:
    return tuple(avals(body.invars[n_body:]))


def _impl(*arrays: Any, cond: Graph, body: Graph, n_cond: int, n_body: int,
          group: int) -> np.ndarray[Any, Any]:
    cc = list(arrays[:n_cond])
    bc = list(arrays[n_cond : n_cond + n_body])
    carry = list(arrays[n_cond + n_body :])
    while bool(run_graph(cond, [*cc, *carry])[0]):
        carry = run_graph(body, [*bc, *carry])
    outs_t = _carry_avals(body, n_body)
    return pack_numpy(carry, groups_of(outs_t)[group])


def _abstract(*_: Any, body: Graph, n_body: int, group: int, **__: Any) -> Aval:
    outs_t = _carry_avals(body, n_body)
    return group_aval(outs_t, groups_of(outs_t)[group])


def _jvp(ops: Any, tangents: Any, *inputs: Any, cond: Graph, body: Graph, n_cond: int,
         n_body: int, group: int) -> Any:
    ncc, nbc = n_cond, n_body
    nk = len(inputs) - ncc - nbc
    in_t = [aval_of(x, "while_loop") for x in inputs]
    tans = [zeros(ops, a) if t is None else t for t, a in zip(tangents, in_t, strict=True)]
    jg = graph_jvp(body)  # (*bc, *carry, *t_bc, *t_carry) -> (*carry, *t_carry)
    n_in = nbc + nk
    p, t = jg.invars[:n_in], jg.invars[n_in:]
    new_body = regraph(jg, [*p[:nbc], *t[:nbc], *p[nbc:], *t[nbc:]], jg.outvars)
    extra = [Var(v.shape, v.dtype) for v in cond.invars[ncc:]]
    new_cond = regraph(cond, [*cond.invars, *extra], cond.outvars)
    args = [*inputs[:ncc], *inputs[ncc : ncc + nbc], *tans[ncc : ncc + nbc],
            *inputs[ncc + nbc :], *tans[ncc + nbc :]]
    params = dict(cond=new_cond, body=new_body, n_cond=ncc, n_body=2 * nbc)
    new_t = _carry_avals(new_body, 2 * nbc)
    idx = groups_of(_carry_avals(body, nbc))[group]
    where = [nk + j for j in idx]
    leaves = bind_outputs(ops, while_primitive(len(args)), args, params, new_t, where)
    return pack(ops, [leaves[w] for w in where], range(len(idx)))


def _refuse(*_: Any, **__: Any) -> NoReturn:
    raise ReverseModeError(REVERSE_REFUSED)


def _batch(args: list[Any], batched: list[bool], size: int, *, cond: Graph, body: Graph,
           n_cond: int, n_body: int, group: int) -> tuple[Any, bool]:
    """Every carry leaf batched; the loop runs while any element's predicate holds and an
    element whose predicate is false keeps its carry."""
    ncc, nbc = n_cond, n_body
    nk = len(args) - ncc - nbc
    carry = [a if bt else broadcast_batch(a, size)
             for a, bt in zip(args[ncc + nbc :], batched[ncc + nbc :], strict=True)]
    c_axes = tuple(0 if bt else None for bt in batched[:ncc])
    b_axes = tuple(0 if bt else None for bt in batched[ncc : ncc + nbc])
    vcond = vmap_graph(cond, size, (*c_axes, *(0,) * nk), 0)
    vbody = vmap_graph(body, size, (*b_axes, *(0,) * nk), 0)
    cc, bc = list(args[:ncc]), list(args[ncc : ncc + nbc])

    def any_cond(*leaves: Any) -> Any:
        return sc.any(run_bound(vcond, list(leaves))[0])

    def masked_body(*leaves: Any) -> tuple[Any, ...]:
        c_leaves, b_leaves = leaves[:ncc], leaves[ncc : ncc + nbc]
        old = leaves[ncc + nbc :]
        pred = run_bound(vcond, [*c_leaves, *old])[0]
        new = run_bound(vbody, [*b_leaves, *old])
        out = []
        for o, n in zip(old, new, strict=True):
            p = sh.reshape(pred, (size, *(1,) * (len(o.shape) - 1)))
            out.append(ew.where(p, n, o))
        return tuple(out)

    c_t = avals(vcond.invars)
    b_t = avals(vbody.invars)
    new_cond = trace_flat(any_cond, c_t, flat_tree(len(c_t)))
    all_t = [*c_t[:ncc], *b_t[:nbc], *b_t[nbc:]]
    new_body = trace_flat(masked_body, all_t, flat_tree(len(all_t)))
    new_args = [*cc, *cc, *bc, *carry]
    params = dict(cond=new_cond, body=new_body, n_cond=ncc, n_body=ncc + nbc)
    new_t = _carry_avals(new_body, ncc + nbc)
    idx = groups_of(_carry_avals(body, nbc))[group]
    leaves = bind_outputs(TRACE_NS, while_primitive(len(new_args)), new_args, params, new_t,
                          idx)
    return pack(TRACE_NS, [leaves[j] for j in idx], range(len(idx)), batch=size), True


def _lower(x: Any, *args: Any, cond: Graph, body: Graph, n_cond: int, n_body: int,
           group: int) -> Any:
    cfn = lower_outputs(cond, x, "while_loop")
    bfn = lower_outputs(body, x, "while_loop")
    cc, bc = args[:n_cond], args[n_cond : n_cond + n_body]
    final = x.lax.while_loop(lambda c: cfn(*cc, *c)[0], lambda c: tuple(bfn(*bc, *c)),
                             tuple(args[n_cond + n_body :]))
    idx = groups_of(_carry_avals(body, n_body))[group]
    return pack_lowered(x, final, idx)


def _make(n: int) -> Primitive:
    p = Primitive("while_loop", _impl, n, save_in=tuple(range(n)))
    p.abstract = _abstract
    p.jvp_all = _jvp
    p.defvjp(*[_refuse] * n)
    defbatch(p, _batch)
    deflower(p, _lower)
    return p


while_primitive = primitives("while_loop", _make)
"""``while_primitive(n)``: the while_loop primitive with ``n`` inputs (made once per ``n``)."""

WHILE_RESULT: Primitive = Primitive(
    "while_loop_result", lambda a: np.asarray(a).view(), 1, alias=True
).defvjp(_refuse).defjvp(lambda ops, t: t)
"""An eager while_loop's result on a recording tape: an alias whose backward refuses
(reverse mode through the recorded iterations is not defined, as in JAX)."""
defbatch(WHILE_RESULT, lambda args, batched, size: (emit("identity", args[0]), batched[0]))
deflower(WHILE_RESULT, lambda x, a: a)
