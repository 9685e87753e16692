"""Forward mode: ``jvp``.

At the top level (nothing records), ``jvp`` runs each op's JVP rule once through a
:class:`~tenferro_ad._core._jvp.JvpContext` and returns fresh owners.  Inside another transform
(a recording tape, an enclosing ``jvp``) it transposes reverse mode instead
(:func:`_jvp_nested`), so every composition — jvp of jvp, grad of jvp, jvp of grad — is
exact at any depth.  On tracers it transforms the traced graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import tenferro_storage as ts
from tenferro_storage._pytree import PyTreeDef, tree_flatten

from ._core._dispatch import bind
from ._core._gradients import foreign_roots, own
from ._core._handle import EagerTensor, make_handle
from ._core._jvp import JvpContext
from ._core._namespace import HANDLE_NS
from ._core._primitive import IDENTITY
from ._core._retention import AdValueRecord, constant_record, record_borrow, record_owner
from ._core._state import STATE, no_grad
from ._core._tape import check_cotangent
from ._core._tape import recording_on as _recording_on
from ._functional import (
    _Call,
    _fresh_handle,
    _has_tracer,
    _leaf_array,
    _output_leaves,
    _tape_length,
    _zeros_handle,
    constant,
    owners_of,
)
from ._traced._eval import eval_graph as _eval_graph
from ._traced._trace import trace_closed as _trace_closed
from ._traced._transform import jvp as _graph_jvp
from .errors import ArgumentError, ArgumentTypeError

__all__ = ["jvp"]


def jvp(f: Callable[..., Any], primals: Any, tangents: Any) -> tuple[Any, Any]:
    """Forward mode: ``(f(*primals), J @ tangents)`` as fresh owners, in ``f``'s output
    structure.

    ``primals`` and ``tangents`` are matching tuples (of pytrees); each tangent leaf must
    have its primal's shape and dtype (checked before anything runs).  Both are borrowed.
    Runs the JVP rules once per op; nothing is recorded or retained.

    Cost: allocates what ``f``'s ops allocate (the tape's residuals, fresh result owners); no copy;
    no sync; no dispatch; O(the cost of ``f``) per evaluation.
    Raises: ArgumentError, ArgumentTypeError."""
    if not callable(f):
        raise ArgumentTypeError(f"jvp: argument 'f' must be callable, got {type(f).__name__}")
    for name, given in (("primals", primals), ("tangents", tangents)):
        if not isinstance(given, tuple | list):
            raise ArgumentTypeError(
                f"jvp: argument {name!r} must be a tuple (one entry per argument of f), got "
                f"{type(given).__name__}"
            )
    primals = tuple(primals)
    tangents = tuple(tangents)
    if len(primals) != len(tangents):
        raise ArgumentError(
            f"jvp: arguments 'primals' and 'tangents' differ: {len(primals)} primals but "
            f"{len(tangents)} tangents; pass one tangent per "
            "primal, with the same structure"
        )
    if _has_tracer((primals, tangents)):
        graph, consts = _trace_closed(f, primals)
        jg = _graph_jvp(graph)
        if consts is None:
            return _eval_graph(jg, *primals, *tangents)  # type: ignore[no-any-return]
        czeros = tuple(np.zeros(c.shape, c.dtype) for c in consts)  # captured: constants
        return _eval_graph(jg, *primals, consts, *tangents, czeros)  # type: ignore[no-any-return]
    if STATE.jvp is not None or STATE.tape is not None:
        return _jvp_nested(f, primals, tangents)
    ctx = JvpContext()
    borrowed: list[AdValueRecord] = []
    args: list[Any] = []
    inputs_t: list[Any] = []
    try:
        for k, (p, t) in enumerate(zip(primals, tangents, strict=True)):
            pl, rb = tree_flatten(p)
            tl, tt = tree_flatten(t)
            _same_structure(k, len(pl), len(tl), rb, tt)
            hs = []
            for leaf, tan in zip(pl, tl, strict=True):
                if isinstance(leaf, ts.Tensor | ts.TensorView | ts.TensorViewMut):
                    rec = record_borrow(leaf, "primal", f"jvp: primal {k}")
                    borrowed.append(rec)
                elif isinstance(leaf, EagerTensor):
                    # its own input: an alias record (no copy), so that a handle passed
                    # twice, or also closed over by ``f``, is one tangent per position
                    # and a constant elsewhere (the tangents are keyed by record)
                    leaf._r("jvp")
                    rec = bind(IDENTITY, leaf)._r("jvp")
                else:
                    arr = np.asarray(leaf)
                    if arr.dtype.kind not in "fc":
                        raise ArgumentTypeError(
                            f"jvp: argument 'primals'[{k}] has dtype {arr.dtype.name}; forward "
                            "mode needs "
                            "floating-point or complex primals (pass floats)"
                        )
                    rec = constant_record(arr, "primal")
                tarr = _checked_tangent(tan, rec.a, k, False)
                ctx.tangents[rec] = tarr
                inputs_t.append(tarr)
                hs.append(make_handle(rec, None, -1))
            args.append(rb.unflatten(hs))
        prev = STATE.jvp
        STATE.jvp = ctx
        try:
            with no_grad():
                out = f(*args)
            leaves, rebuild = _output_leaves(out, "jvp")
            values: list[Any] = []
            tans: list[Any] = []
            foreign = foreign_roots(inputs_t)
            for leaf in leaves:
                a = _leaf_array(leaf, "jvp")
                lrec = leaf._rec if isinstance(leaf, EagerTensor) else None
                tan_out = None if lrec is None else ctx.tangents.get(lrec)
                if tan_out is None:
                    zeros = np.zeros(a.shape, a.dtype)
                    tans.append(ts.kernel.adopt_output(zeros, STATE.reason, "jvp"))
                else:
                    tans.append(own(tan_out, foreign, "jvp"))
            ctx.tangents.clear()
            del args
            values = owners_of(leaves)
            del leaves, out
            return rebuild.unflatten(values), rebuild.unflatten(tans)
        finally:
            STATE.jvp = prev
    finally:
        for rec in borrowed:
            rec.container.release_borrow()


def _same_structure(k: int, n: int, m: int, primal: PyTreeDef, tangent: PyTreeDef) -> None:
    """Refuse tangent ``k`` unless it has its primal's pytree structure (as JAX). O(1) when
    it does (the structures are compared by value)."""
    if n != m:
        raise ArgumentError(
            f"jvp: arguments 'primals'[{k}] and 'tangents'[{k}] differ: the primal has "
            f"{n} leaves but its tangent has {m}"
        )
    if primal != tangent:
        raise ArgumentError(
            f"jvp: arguments 'primals'[{k}] and 'tangents'[{k}] differ: the primal has the "
            f"structure {primal} but its tangent {tangent}"
        )


def _checked_tangent(tan: Any, like: np.ndarray[Any, Any], k: int, nested: bool) -> Any:
    """``check_cotangent`` for tangent ``k``: a tangent whose shape or dtype differs from its
    primal's is reported on both arguments (either may be the wrong one). O(1)."""
    try:
        return check_cotangent(tan, like, "jvp: argument 'tangents'", k, nested)
    except (ArgumentError, ArgumentTypeError) as e:
        message = str(e)
        if "the value it pairs with" in message and len(e.args) == 1:
            rest = message.split(": ", 2)[-1].replace(f"entry {k} has", "the tangent has")
            rest = rest.replace("the value it pairs with has", "its primal has")
            e.args = (f"jvp: arguments 'primals'[{k}] and 'tangents'[{k}] differ: {rest}",)
        raise


def _jvp_nested(
    f: Callable[..., Any], primals: tuple[Any, ...], tangents: tuple[Any, ...]
) -> tuple[Any, Any]:
    """Forward mode inside another transform, by transposing reverse mode.

    ``u -> J^T u`` is linear in ``u``; its own VJP at cotangent ``t`` is ``J t``.  Both
    sweeps run through recorded ops on the enclosing tape (or a private one under an
    enclosing ``jvp``), so the result is a handle that every outer level differentiates
    again: jvp of jvp, grad of jvp, jvp of grad compose at any depth.  Cost: one forward
    and two reverse sweeps.  Returns handles in ``f``'s output structure.
    """
    argnums = tuple(range(len(primals)))
    n0 = _tape_length()
    call = _Call(primals, argnums, "jvp", getattr(f, "__name__", "f"), "primals")
    try:
        # check every tangent against its primal before anything runs
        tans: list[Any] = []
        j = 0
        for k, t in enumerate(tangents):
            tl, tt = tree_flatten(t)
            n = call.counts[k]
            _same_structure(k, n, len(tl), call.rebuild[k], tt)
            for tan in tl:
                like = call.watched[j]._r("jvp").a
                tans.append(_checked_tangent(tan, like, k, True))
                j += 1
        tape = call.tape
        if call.nested:
            res = f(*call.args)
        else:
            with call.tape:
                res = f(*call.args)
        leaves, rebuild = _output_leaves(res, "jvp")
        seeds: dict[int, Any] = {}
        us: list[Any] = []
        for leaf in leaves:
            u = None
            if isinstance(leaf, EagerTensor) and leaf._tape is tape.key and leaf._id >= 0:
                a = leaf._r("jvp").a
                zeros = ts.kernel.adopt_output(np.zeros(a.shape, a.dtype), STATE.reason, "jvp")
                vid = len(tape.nodes)
                tape.nodes.append(None)
                urec = record_owner(zeros, ts.kernel.read_array(zeros), "jvp")
                u = make_handle(urec, tape.key, vid)
                prev = seeds.get(leaf._id)
                with _recording_on(tape):
                    seeds[leaf._id] = u if prev is None else prev + u
            us.append(u)
        wids = [h._id for h in call.watched]
        with _recording_on(tape):
            gs = tape.sweep(seeds, None, wids, HANDLE_NS, True) if seeds else {}
            back: dict[int, Any] = {}
            for w, t in zip(wids, tans, strict=True):
                g = gs.get(w)
                if g is not None and g._tape is tape.key and g._id >= 0:
                    prev = back.get(g._id)
                    back[g._id] = t if prev is None else prev + t
            uids = [u._id for u in us if u is not None]
            jt = tape.sweep(back, None, uids, HANDLE_NS, True) if back and uids else {}
        outs_t = [
            _zeros_handle(leaf if isinstance(leaf, EagerTensor) else constant(leaf))
            if u is None or u._id not in jt
            else _fresh_handle(jt[u._id], {id(t) for t in tans})
            for leaf, u in zip(leaves, us, strict=True)
        ]
        return rebuild.unflatten(list(leaves)), rebuild.unflatten(outs_t)
    except BaseException:
        call.discard(n0)
        raise
    finally:
        call.release()
