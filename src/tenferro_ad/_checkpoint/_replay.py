"""Checkpoint regions, part 2: publishing a region on the tape and replaying it in backward.

When a region ends, :func:`_attach` gives the tape one ``checkpoint`` node whose
residuals are the *boundary records* — the region's inputs and the values the policy
saves — plus one ``checkpoint_output`` node per region output.

Backward (the ``checkpoint`` node's VJP, :func:`_region_vjp`) replays the stored subgraph
under ``allocation_reason(CHECKPOINT_RECOMPUTE_OUTPUT)`` on a private sub-tape whose
leaves are the boundary records (no copy, no allocation: a leaf is one more reference),
sweeps it, and drops it.  Values the policy saved split the region into segments at
those values: backward replays one segment at a time, latest first, so only one
segment's interior is alive at once.  A saved value is not recomputed, and neither is a
value nothing reads (no later equation, and its own VJP needs only its inputs): its
tape node is built from its inputs without running the kernel.

Nested regions are recorded as one equation of the enclosing region and replayed as a
checkpoint region again (:func:`_apply_graph`, which calls :func:`_attach`; they retain
their own boundary only while the enclosing region's recompute runs).  With
``create_graph=True`` the replay is recorded on the outer tape itself (policy-saved
values are then recomputed as well) so the gradient can be differentiated again.
Attaching and replaying are mutually recursive, which is why they share this module.

Multi-output plumbing: an output node's VJP stashes its cotangent in a per-sweep token
(:class:`._graph._Cot`) and passes the token to the ``checkpoint`` node, which
the sweep reaches after every output (smaller value id); the token dies with the sweep's
reference to it.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any, Final

import numpy as np

import tenferro_storage as ts

from .._core._dispatch import arg_targets, bind
from .._core._handle import EagerTensor, make_handle
from .._core._namespace import HANDLE_NS, NUMPY_NS
from .._core._primitive import IDENTITY, NONDIFF, Primitive, Zero
from .._core._retention import AdValueRecord, constant_record
from .._core._state import STATE, allocation_reason
from .._core._tape import Tape
from ..errors import CheckpointError
from ._graph import (
    _computed,
    _Cot,
    _Eqn,
    _Graph,
    _last_uses,
    _needed,
    _no_impl,
    _node,
    _NodeState,
    _segments,
)

_RECOMPUTE: Final = ts.AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT


# -- attaching a finished region to the tape --------------------------------------------------


_ZERO: Final = Zero((), None)


def _out_vjp(ops: Any, g: Any, *, st: _NodeState, j: int) -> Any:
    token = st.pending() if st.pending is not None else None
    first = token is None
    if token is None:
        token = _Cot()
        st.pending = weakref.ref(token)
    token.stash[j] = g
    return token if first else _ZERO


_OUTPUT_PRIM: Final = Primitive("checkpoint_output", _no_impl, 1)
_OUTPUT_PRIM.defvjp(_out_vjp).defjvp(NONDIFF)


@functools.cache
def _region_prim(n: int) -> Primitive:
    p = Primitive("checkpoint", _no_impl, n, save_in=tuple(range(n)))
    p.vjps = [functools.partial(_region_vjp, i=i) for i in range(n)]
    p.jvps = [NONDIFF] * n
    return p


def _attach(
    graph: _Graph,
    inputs: list[EagerTensor],
    saved: list[AdValueRecord],
    out_recs: list[AdValueRecord],
) -> list[EagerTensor]:
    """Publish a finished region on the recording tape (or drop it when nothing records).

    Takes over one count on each record in ``saved``.
    """
    parent = STATE.region
    if parent is not None:  # nested forward: the enclosing region replays us later
        for rec in saved:
            rec.count -= 1
        return parent.record_region(graph, inputs, out_recs)  # type: ignore[no-any-return]
    tape = STATE.tape
    key = STATE.key
    ids = [h._id if (h._tape is key and key is not None) else -1 for h in inputs]
    if tape is None or all(i < 0 for i in ids):
        for rec in saved:
            rec.count -= 1
        graph.release()
        return [make_handle(rec, None, -1) for rec in out_recs]
    res: list[Any] = []
    for h in inputs:
        rec = h._r("checkpoint")
        rec.count += 1
        res.append(rec)
    res.extend(saved)
    for c in graph.consts:  # borrowed/imported constants: residuals too (listed, released)
        c.count += 1
        res.append(c)
    prim = _region_prim(len(inputs))
    nodes = tape.nodes
    rid = len(nodes)
    st = _NodeState(graph, len(inputs), len(out_recs), tape, rid)
    for k, i in enumerate(ids):  # an input that is an earlier region's output: tell it
        producer = nodes[i] if i >= 0 else None
        if producer is not None and producer.prim is _OUTPUT_PRIM:
            p = producer.params
            p["st"].peers.setdefault(p["j"], []).append((rid, k))
            st.sources[k] = (p["st"], p["j"])
    nodes.append(_node(prim, ids, {"st": st}, res))
    out: list[EagerTensor] = []
    for j, rec in enumerate(out_recs):
        out.append(make_handle(rec, key, len(nodes)))
        nodes.append(_node(_OUTPUT_PRIM, [rid], {"st": st, "j": j}, []))
    return out


# -- backward: replay and local sweep -------------------------------------------------------------


def _numpy_ns() -> Any:
    return NUMPY_NS


def _handle_ns() -> Any:
    return HANDLE_NS


def _replay(
    graph: _Graph,
    env: dict[int, Any],
    inputs: list[Any],
    consts: list[Any],
    eqn_ids: list[int],
    keep: set[int],
) -> None:
    """Run ``eqn_ids`` (in order) with ``bind``, filling ``env`` (var -> handle).

    Interior values are dropped right after their last use unless in ``keep``.
    """
    last = _last_uses(graph, eqn_ids)
    for pos, e in enumerate(eqn_ids):
        eqn = graph.eqns[e]
        args: list[Any] = []
        for kind, v in eqn.args:
            if kind == "v":
                args.append(env[v])
            elif kind == "i":
                args.append(inputs[v])
            elif kind == "c":
                args.append(consts[v])
            else:
                args.append(v)
        op = eqn.op
        if type(op) is Primitive:
            env[eqn.outs[0]] = bind(op, *args, **eqn.params)
        else:
            assert isinstance(op, _Graph)
            for v, h in zip(eqn.outs, _apply_graph(op, args), strict=True):
                env[v] = h
        del args
        for kind, v in eqn.args:
            if kind == "v" and last.get(v) == pos and v not in keep:
                env.pop(v, None)


def _apply_graph(graph: _Graph, args: list[Any]) -> list[EagerTensor]:
    """Run a stored region again as a checkpoint region on the recording tape (replay of
    a nested region during the enclosing region's recompute)."""
    env: dict[int, Any] = {}
    consts = [make_handle(c, None, -1) for c in graph.consts]
    out_vars = [v for kind, v in graph.outputs if kind == "v"]
    saved_vars = sorted(graph.saved, key=graph.saved.__getitem__)
    prev = (STATE.tape, STATE.key)
    STATE.tape = None
    STATE.key = None
    try:
        _replay(
            graph, env, args, consts, list(range(len(graph.eqns))), set(out_vars) | set(saved_vars)
        )
    finally:
        STATE.tape, STATE.key = prev
    saved: list[AdValueRecord] = []
    for v in saved_vars:
        rec = env[v]._r("checkpoint")
        rec.count += 1
        saved.append(rec)
    out_recs = [env[v]._r("checkpoint") for v in out_vars]
    env.clear()
    inputs = [
        a if isinstance(a, EagerTensor) else make_handle(_const_rec(a), None, -1) for a in args
    ]
    return _attach(graph, inputs, saved, out_recs)


def _const_rec(a: Any) -> AdValueRecord:
    return constant_record(a, "checkpoint")


def _join_vjp(ops: Any, g: Any, *, cts: list[Any], i: int) -> Any:
    return cts[i]


@functools.cache
def _join_prim(n: int) -> Primitive:
    p = Primitive("checkpoint_seeds", _no_impl, n)
    p.vjps = [functools.partial(_join_vjp, i=i) for i in range(n)]
    p.jvps = [NONDIFF] * n
    return p


_JOIN_SEED: Final = object()


def _sweep_from(
    tape: Tape, seeds: dict[int, Any], wrt: list[int], ns: Any, create_graph: bool
) -> dict[int, Any]:
    """The tape's own reverse sweep, started from several seeds at once.

    A temporary join node whose rules hand out the seeds is appended and swept from;
    it is emptied afterwards.  Returns ``{id: cotangent}`` for the ids in ``wrt``.
    """
    if not seeds or not wrt:
        return {}
    ids = list(seeds)
    node = _node(_join_prim(len(ids)), ids, {"cts": [seeds[i] for i in ids]}, [])
    vid = len(tape.nodes)
    tape.nodes.append(node)
    try:
        return tape.sweep(vid, _JOIN_SEED, wrt, ns, create_graph)
    finally:
        node.params = {}
        node.ids = []


def _consuming_sweep(sub: Tape, seeds: dict[int, Any], wrt: list[int], ns: Any) -> dict[int, Any]:
    """Reverse sweep of a segment's private sub-tape that releases each node's residuals
    right after its rules ran (the replayed values die as the sweep passes them, as
    PyTorch frees its saved tensors), and drops each cotangent once used.

    The sub-tape is private and consumed by this one sweep, so nothing can ask for its
    residuals again -- if a rule raises, the sub-tape is dropped and the outer tape's
    boundary records are untouched.  Returns ``{id: cotangent}`` for the ids in ``wrt``.
    O(nodes + rules).
    """
    if not seeds or not wrt:
        return {}
    cts = dict(seeds)
    seeds.clear()  # the caller's references go: each cotangent dies once the sweep used it
    return sub.sweep(cts, None, wrt, ns, False, release=True)  # consumes cts


def _region_vjp(ops: Any, g: Any, *args: Any, st: _NodeState, i: int) -> Any:
    if type(g) is not _Cot:
        raise CheckpointError("checkpoint: a region node received a cotangent directly")
    if g.result is None:
        st.pending = None
        create_graph = ops is _handle_ns()
        stash = g.stash
        g.stash = {}  # the output cotangents are the replay's now: each dies once used
        arg_list = list(args)
        if _restore(st) and create_graph:  # inputs recomputed after a failed backward
            arg_list = _restored_handles(st, arg_list)
        g.result = _vjp_all(st, stash, arg_list, create_graph)
        del arg_list
        if not create_graph and _consuming(st):
            _release_boundary(st)
    ct = g.result[i]
    return _ZERO if ct is None else ct


# -- releasing boundaries as the backward pass goes past them ----------------------------------
#
# In a consuming backward (``keep=False``: the tape is released right after the sweep), a
# region's input boundary is dead once the region's rules have run -- except that "a failed
# backward leaves the tape usable": if a rule further down raises, the caller may call
# backward again, and this region's VJP then needs its inputs once more.  We release only
# inputs that can be recovered: an input produced by an earlier region.  Its record is not
# dropped but *handed over* to the producing region (which reads it instead of recomputing
# its own last op, and drops it once its own rules have run); the released input leaves a
# :class:`_Released` marker in the node's residual list.  A retry after a failure finds the
# record still handed over (the producer never ran) or recomputes it by replaying the
# producer's graph from the producer's own boundary (restored the same way, recursively):
# at most one extra forward pass, paid only on a retry after a failure.  Inputs from
# elsewhere (watched leaves, plain ops' outputs, constants) and policy-saved values are
# kept: nothing could recompute them.  The alternative -- validating every rule that can
# still fail before releasing -- is impossible in general (user rules, MemoryError).
#
# Whether the sweep consumes the tape is the tape's ``consuming`` flag (``Tape.backward``
# without ``keep`` and the functional API's private tape set it around a no-record sweep).


class _Released:
    """A released input boundary in a region node's residual list (not a record: the
    tape's release, retained listing and discard skip it). Recoverable from ``source``."""

    __slots__ = ("source",)

    def __init__(self, source: tuple[_NodeState, int]) -> None:
        self.source = source


def _consuming(st: _NodeState) -> bool:
    tape = st.tape()
    return tape is not None and tape.consuming


def _residuals(st: _NodeState) -> list[Any] | None:
    tape = st.tape()
    node = None if tape is None else tape.nodes[st.vid]
    return None if node is None else node.res


def _take_handoff(st: _NodeState, j: int) -> AdValueRecord | None:
    """Remove output ``j``'s handed-over record from this node's residuals (its count
    goes with the caller), or ``None`` when there is none."""
    pos = st.handoff.pop(j, None)
    res = _residuals(st)
    if pos is None or res is None:
        return None
    rec = res[pos]
    res[pos] = None
    return rec if type(rec) is AdValueRecord else None


def _handoff_record(st: _NodeState, j: int) -> AdValueRecord | None:
    pos = st.handoff.get(j)
    res = _residuals(st)
    rec = None if pos is None or res is None else res[pos]
    return rec if type(rec) is AdValueRecord else None


def _release_boundary(st: _NodeState) -> None:
    """After this region's rules ran in a consuming sweep: hand each input produced by an
    earlier region over to that region (appended to its residuals, count and all), and
    drop what was handed over to this one. O(inputs)."""
    res = _residuals(st)
    if res is None:
        return
    for k, src in st.sources.items():
        rec = res[k]
        if type(rec) is not AdValueRecord:
            continue
        p_st, j = src
        p_res = _residuals(p_st)
        if p_res is None or j in p_st.handoff:
            rec.count -= 1  # nowhere to hand it, or handed over already by another consumer
        else:
            p_st.handoff[j] = len(p_res)
            p_res.append(rec)  # the count moves with it
        res[k] = _Released(src)
    for j in list(st.handoff):
        rec = _take_handoff(st, j)
        if rec is not None:
            rec.count -= 1


def _restore(st: _NodeState) -> bool:
    """Put back the input records a failed consuming backward released. O(inputs) when
    nothing was released; otherwise recovers each (see above). Returns whether any was."""
    res = _residuals(st)
    if res is None or not any(type(r) is _Released for r in res[: st.n_in]):
        return False
    for k in range(st.n_in):
        r = res[k]
        if type(r) is _Released:
            src, j = r.source
            rec = _take_handoff(src, j)  # still handed over: the count moves back
            if rec is None:
                rec = _recompute_output(src, j)
                rec.count += 1
            res[k] = rec
    return True


def _recompute_output(st: _NodeState, j: int) -> AdValueRecord:
    """Output ``j`` of a region, recomputed from the region's boundary (restored first):
    a forward replay of the equations it needs, nothing recorded. Fresh
    ``CHECKPOINT_RECOMPUTE_OUTPUT`` allocations."""
    _restore(st)
    graph = st.graph
    kind, v = graph.outputs[j]
    recs = st.records()
    if kind == "i":
        rec = recs[v]
        assert type(rec) is AdValueRecord
        return rec
    inputs = [make_handle(r, None, -1) for r in recs[: st.n_in]]
    consts = [make_handle(c, None, -1) for c in graph.consts]
    env: dict[int, Any] = {}
    prev = (STATE.tape, STATE.key)
    STATE.tape = None
    STATE.key = None
    try:
        with allocation_reason(_RECOMPUTE):
            _replay(graph, env, inputs, consts, list(range(graph.producer[v] + 1)), {v})
    finally:
        STATE.tape, STATE.key = prev
    out: AdValueRecord = env[v]._r("checkpoint")
    return out


def _restored_handles(st: _NodeState, args: list[Any]) -> list[Any]:
    """``create_graph`` after a restore: the sweep read the markers; rebuild the released
    arguments as handles of the restored records on the tape (same value ids)."""
    tape = st.tape()
    assert tape is not None
    node = tape.nodes[st.vid]
    assert node is not None and node.res is not None
    out = list(args)
    for k, r in enumerate(node.res[: len(node.ids)]):
        if type(args[k]) is _Released and type(r) is AdValueRecord:
            i = node.ids[k]
            out[k] = make_handle(r, tape.key if i >= 0 else None, i)
    return out


def _vjp_all(
    st: _NodeState, out_cts: dict[int, Any], args: list[Any], create_graph: bool
) -> list[Any]:
    """Cotangents for every region input, given cotangents of the outputs (by index)."""
    graph = st.graph
    n_in = st.n_in
    if create_graph:
        return _vjp_recorded(graph, out_cts, args[:n_in])
    ns = _numpy_ns()
    ct_var: dict[int, Any] = {}
    ct_in: dict[int, Any] = {}
    while out_cts:  # popped: no local outlives its seeding
        j, g = out_cts.popitem()
        kind, v = graph.outputs[j]
        tgt = ct_var if kind == "v" else ct_in
        tgt[v] = g if v not in tgt else ns.add(tgt[v], g)
        del g
    recs = st.records()  # the boundary records, watched as sub-tape leaves (no copy)
    in_recs = recs[:n_in]
    saved: dict[int, AdValueRecord] = {v: recs[n_in + k] for v, k in graph.saved.items()}
    saved.update(_outputs_kept(st))
    for owned in reversed(_segments(graph, saved)):
        produced = {v for e in owned for v in graph.eqns[e].outs}
        if not any(v in ct_var for v in produced):
            continue
        _segment_vjp(graph, owned, ct_var, ct_in, in_recs, saved)
    return [ct_in.get(k) for k in range(n_in)]


def _outputs_kept(st: _NodeState) -> dict[int, AdValueRecord]:
    """Region outputs whose value a later region still keeps as a boundary record
    (``st.peers``): backward reads that record instead of recomputing the output (the
    last op of a segment in a chain of regions).  Only outputs of primitives."""
    tape = st.tape()
    if not st.peers or tape is None:
        return {}
    graph = st.graph
    out: dict[int, AdValueRecord] = {}
    for j, holders in st.peers.items():
        kind, v = graph.outputs[j]
        if kind != "v" or type(graph.eqns[graph.producer[v]].op) is not Primitive:
            continue
        handed = _handoff_record(st, j)
        if handed is not None:
            out[v] = handed
            continue
        for vid, k in holders:
            node = tape.nodes[vid]
            res = None if node is None else node.res
            if res is not None and type(res[k]) is AdValueRecord:
                out[v] = res[k]
                break
    return out


class _Unrun:
    """A sub-tape value whose kernel is not re-run (nothing reads it): its value id and
    aval only, enough to connect the nodes that consume it. O(1), no allocation."""

    __slots__ = ("aval", "vid")

    def __init__(self, vid: int, aval: tuple[tuple[int, ...], Any]) -> None:
        self.vid = vid
        self.aval = aval


def _segment_vjp(
    graph: _Graph,
    owned: list[int],
    ct_var: dict[int, Any],
    ct_in: dict[int, Any],
    in_recs: list[Any],
    saved: dict[int, AdValueRecord],
) -> None:
    run, leaf_vars = _needed(graph, owned, saved)
    computed = _computed(graph, run, saved)
    ns = _numpy_ns()
    sub = Tape()
    with allocation_reason(_RECOMPUTE), sub:
        inputs: list[Any] = []
        in_ids: dict[int, int] = {}
        for k, rec in enumerate(in_recs):
            if isinstance(rec, AdValueRecord):
                h = sub.watch(make_handle(rec, None, -1))
                in_ids[h._id] = k
                inputs.append(h)
            else:
                inputs.append(rec)
        env: dict[int, Any] = {}
        leaf_ids: dict[int, int] = {}
        for v in sorted(leaf_vars):
            h = sub.watch(make_handle(saved[v], None, -1))
            env[v] = h
            leaf_ids[h._id] = v
        consts = [make_handle(c, None, -1) for c in graph.consts]
        wanted = {v for e in owned for v in graph.eqns[e].outs if v in ct_var}
        seeds: dict[int, Any] = {}
        last = _last_uses(graph, run)
        for pos, e in enumerate(run):
            eqn = graph.eqns[e]
            out_v = eqn.outs[0]
            if e in computed:
                op = eqn.op
                if type(op) is Primitive:  # the common case, without _replay's bookkeeping
                    env[out_v] = bind(
                        op,
                        *[
                            env[v] if k == "v" else inputs[v] if k == "i" else
                            consts[v] if k == "c" else v
                            for k, v in eqn.args
                        ],
                        **eqn.params,
                    )
                else:
                    _replay(graph, env, inputs, consts, [e], set(env) | set(eqn.outs))
            elif out_v in saved:  # the value is a record: a node without the kernel
                rec = saved[out_v]
                vid = _node_from_records(sub, eqn, env, inputs, consts, rec, rec.a.shape)
                env[out_v] = make_handle(rec, sub.key, vid)
            else:  # nothing reads the value: a node from the inputs only
                assert eqn.aval is not None
                vid = _node_from_records(sub, eqn, env, inputs, consts, None, eqn.aval[0])
                env[out_v] = _Unrun(vid, eqn.aval)
            for v in eqn.outs:  # a seed needs only the value id; the sub-tape keeps residuals
                out_h = env.get(v)
                if v in wanted and out_h is not None:
                    if type(out_h) is _Unrun:
                        seeds[out_h.vid] = ct_var.pop(v)
                    elif out_h._tape is sub.key:
                        seeds[out_h._id] = ct_var.pop(v)
            out_h = None
            for kind, v in eqn.args:  # interior values die right after their last use
                if kind == "v" and last.get(v) == pos and v not in leaf_vars:
                    env.pop(v, None)
            for v in eqn.outs:
                if v not in last and v not in leaf_vars:
                    env.pop(v, None)
    env.clear()
    del inputs, consts
    cts = _consuming_sweep(sub, seeds, sorted(in_ids) + sorted(leaf_ids), ns)
    sub.release()
    del sub
    for vid, ct in cts.items():
        if vid in in_ids:
            k = in_ids[vid]
            ct_in[k] = ct if k not in ct_in else ns.add(ct_in[k], ct)
        elif vid in leaf_ids:
            v = leaf_ids[vid]
            ct_var[v] = ct if v not in ct_var else ns.add(ct_var[v], ct)


def _node_from_records(
    sub: Tape,
    eqn: _Eqn,
    env: dict[int, Any],
    inputs: list[Any],
    consts: list[Any],
    saved: AdValueRecord | None,
    out_shape: Any,
) -> int:
    """Append a tape node for ``eqn`` built from records, without running its kernel: its
    residuals are its saved inputs, plus ``saved`` (the output's record) when the rule
    needs the output.  Returns the node's value id."""
    prim = eqn.op
    assert type(prim) is Primitive
    handles: list[Any] = []
    ids: list[int] = []
    vals: list[Any] = []
    for kind, v in eqn.args:
        a = env[v] if kind == "v" else inputs[v] if kind == "i" else consts[v] if kind == "c" else v
        handles.append(a)
        if type(a) is _Unrun:  # only its shape and dtype are read (zero bytes)
            ids.append(a.vid)
            vals.append(np.broadcast_to(np.zeros((), a.aval[1]), a.aval[0]))
        elif type(a) is EagerTensor:
            ids.append(a._id if a._tape is sub.key else -1)
            vals.append(a._r("checkpoint").a)
        else:
            ids.append(-1)
            vals.append(a)
    res: list[Any] = []
    for i in prim.save_in:
        a = handles[i]
        assert type(a) is not _Unrun  # _computed runs every value a VJP saves
        if type(a) is EagerTensor:
            r = a._r("checkpoint")
            r.count += 1
            res.append(r)
        else:
            res.append(a)
    if prim.save_out:
        assert saved is not None
        saved.count += 1
        res.append(saved)
    if saved is not None:
        out_dtype = saved.a.dtype
    else:
        assert eqn.aval is not None  # every primitive equation records its aval
        out_dtype = eqn.aval[1]
    shapes = arg_targets(prim, ids, vals, out_shape, out_dtype)
    vid = len(sub.nodes)
    sub.nodes.append(_node(prim, ids, eqn.params, res, shapes))
    return vid


def _vjp_recorded(graph: _Graph, out_cts: dict[int, Any], inputs: list[Any]) -> list[Any]:
    """``create_graph``: replay on the recording (outer) tape and sweep with handles, so
    the cotangents are themselves recorded.  Each tracked input first passes through a
    recorded identity (no allocation) so the sweep stops at the region boundary."""
    tape = STATE.tape
    assert tape is not None
    ns = _handle_ns()
    consts = [make_handle(c, None, -1) for c in graph.consts]
    env: dict[int, Any] = {}
    out_vars = {v for kind, v in graph.outputs if kind == "v"}
    with allocation_reason(_RECOMPUTE):
        local = [
            bind(IDENTITY, h) if type(h) is EagerTensor and h._tape is tape.key else h
            for h in inputs
        ]
        _replay(graph, env, local, consts, list(range(len(graph.eqns))), out_vars)
    seeds: dict[int, Any] = {}
    ct_in: dict[int, Any] = {}
    for j, g in out_cts.items():
        kind, v = graph.outputs[j]
        if kind == "v":
            h = env[v]
            if h._tape is tape.key:
                seeds[h._id] = g if h._id not in seeds else ns.add(seeds[h._id], g)
        else:
            ct_in[v] = g if v not in ct_in else ns.add(ct_in[v], g)
    env.clear()
    wrt = [h._id for h in local if type(h) is EagerTensor and h._tape is tape.key]
    cts = _sweep_from(tape, seeds, wrt, ns, True)
    out: list[Any] = []
    for k, h in enumerate(local):
        ct = ct_in.get(k)
        if type(h) is EagerTensor and h._tape is tape.key:
            extra = cts.get(h._id)
            if extra is not None:
                ct = extra if ct is None else ns.add(ct, extra)
        out.append(ct)
    return out
