"""Checkpoint regions: retain only the boundary, recompute the interior in backward.

``ad.checkpoint(f, policy=...)(*args)`` (the guaranteed form) and
``with tape.checkpoint(policy=...):`` (the block form) run the region's ops *without
recording them on the tape*: a :class:`_Recorder` (``STATE.region``) is told about every
op instead and stores the region as an inert list of equations — the stored subgraph.
Interior values are therefore owned only by their handles and are released as soon as
the region's code drops them (G7: never inserted into the checkpoint's retained group,
no descriptor record).  When the region ends, the tape gets one ``checkpoint`` node whose
residuals are the *boundary records* — the region's inputs and the values the policy
saves — plus one ``checkpoint_output`` node per region output.

Backward (the ``checkpoint`` node's VJP) replays the stored subgraph under
``allocation_reason(CHECKPOINT_RECOMPUTE_OUTPUT)`` on a private sub-tape whose leaves are
the boundary records (no copy, no allocation: a leaf is one more reference), sweeps it,
and drops it.  Values the policy saved split the region into segments at those values:
backward replays one segment at a time, latest first, so only one segment's interior
is alive at once.  A saved value is not recomputed.

Nested regions are recorded as one equation of the enclosing region and replayed as a
checkpoint region again (they retain their own boundary only while the enclosing
region's recompute runs).  With ``create_graph=True`` the replay is recorded on the outer
tape itself (policy-saved values are then recomputed as well) so the gradient can be
differentiated again.  A failure while recording publishes nothing: the recorder and
every record it holds are dropped before the exception propagates.

Multi-output plumbing: an output node's VJP stashes its cotangent in a per-sweep token
(:class:`_Cot`) and passes the token to the ``checkpoint`` node, which the sweep reaches
after every output (smaller value id); the token dies with the sweep's reference to it.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

import attrs
import numpy as np

import tenferro_storage as ts

from ._dispatch import bind
from ._handle import EagerTensor, make_handle
from ._primitive import NONDIFF, Primitive, Zero
from ._retention import AdValueRecord
from ._state import STATE, allocation_reason
from ._tape import Tape, TapeNode
from .errors import CheckpointError

__all__ = [
    "CheckpointPolicy",
    "checkpoint",
    "name",
    "region",
    "save_contractions",
    "save_everything",
    "save_named",
    "save_nothing",
]

_RECOMPUTE: Final = ts.AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT


# -- policies ------------------------------------------------------------------------------


@attrs.frozen
class CheckpointPolicy:
    """Which interior values of a checkpoint region are saved (kept) instead of recomputed.

    A saved value becomes a region boundary: it is retained as a boundary record, never
    recomputed, and splits the backward replay into segments.  Use the ready-made
    :data:`save_nothing` (the default), :data:`save_everything`, :func:`save_named` and
    :data:`save_contractions`.
    """

    name: str
    everything: bool = False
    labels: frozenset[str] | None = None  # None: no label saves; empty: every label saves
    primitives: frozenset[str] = frozenset()

    def saves_output(self, primitive: str) -> bool:
        """Whether an output of ``primitive`` is saved. O(1)."""
        return self.everything or primitive in self.primitives

    def saves_label(self, label: str) -> bool:
        """Whether a value named ``label`` with :func:`name` is saved. O(1)."""
        if self.everything:
            return True
        return self.labels is not None and (not self.labels or label in self.labels)

    def __repr__(self) -> str:
        return self.name


save_nothing: Final = CheckpointPolicy("save_nothing")
"""Save nothing: backward recomputes the whole region from its inputs (the default)."""

save_everything: Final = CheckpointPolicy("save_everything", everything=True)
"""Save every interior value: nothing is recomputed (no memory saving; for comparisons)."""

save_contractions: Final = CheckpointPolicy(
    "save_contractions", primitives=frozenset({"matmul", "einsum", "einsum_binary", "einsum_unary"})
)
"""Save the outputs of contractions (``matmul``, ``einsum``): the expensive ops are not
recomputed, the cheap elementwise ones between them are."""


def save_named(*labels: str) -> CheckpointPolicy:
    """A policy saving the values named with :func:`name` — only those with one of
    ``labels``, or every named value when no label is given. O(len(labels))."""
    for label in labels:
        if not isinstance(label, str):
            raise TypeError(f"save_named: labels must be strings, got {label!r}")
    shown = ", ".join(repr(label) for label in labels)
    return CheckpointPolicy(f"save_named({shown})", labels=frozenset(labels))


def name(x: EagerTensor, label: str) -> EagerTensor:
    """Name ``x`` for checkpoint policies; returns ``x`` itself. O(1), no allocation.

    Inside a checkpoint region whose policy saves ``label`` (:func:`save_named`), the
    value becomes a saved region boundary.  Elsewhere it does nothing.  Naming a region
    input or a value from outside the region has no effect (it is a boundary already).
    """
    if not isinstance(x, EagerTensor):
        raise TypeError(f"name: expected an EagerTensor, got {type(x).__name__}")
    if not isinstance(label, str):
        raise TypeError(f"name: the label must be a string, got {label!r}")
    r = STATE.region
    if r is not None and x._tape is r.key:
        r.name_var(x._id, x._r("name"), label)
    return x


# -- the stored subgraph ------------------------------------------------------------------

# An argument reference: ("i", k) region input k; ("c", k) constant record k;
# ("v", j) interior variable j; ("l", value) a Python/numpy scalar parameter.
Ref = tuple[str, Any]


class _Eqn:
    """One stored op: a primitive (one output) or a nested region (several outputs)."""

    __slots__ = ("args", "op", "outs", "params")

    def __init__(
        self, op: Primitive | _Graph, args: list[Ref], params: dict[str, Any], outs: list[int]
    ) -> None:
        self.op = op
        self.args = args
        self.params = params
        self.outs = outs


class _Graph:
    """A region's stored subgraph: inert data, replayed by :func:`_replay`.

    ``n_inputs`` inputs (explicit arguments first, then handles from outside that the
    region used); ``consts``: constant records the region moved in or imported (boundary
    records owned by the graph); ``saved``: the interior variables the policy saves;
    ``outputs``: one reference per region output.
    """

    __slots__ = ("consts", "eqns", "n_inputs", "n_vars", "outputs", "policy", "producer", "saved")

    def __init__(self, policy: CheckpointPolicy) -> None:
        self.policy = policy
        self.n_inputs = 0
        self.consts: list[AdValueRecord] = []
        self.eqns: list[_Eqn] = []
        self.n_vars = 0
        self.saved: dict[int, int] = {}  # var -> position among the saved records
        self.outputs: list[Ref] = []
        self.producer: list[int] = []  # var -> index of the eqn producing it

    def release(self) -> None:
        for rec in self.consts:
            rec.count -= 1
        self.consts = []


# -- recording (STATE.region) -----------------------------------------------------------------


class _Recorder:
    """Receives every op run inside a region (called by ``bind``) and stores it.

    Holds strong references only to boundary records: constants, inputs from outside,
    and policy-saved values.  Interior values are referenced by variable number only.
    """

    __slots__ = ("extras", "graph", "input_key", "inputs", "key", "produced", "saved_recs", "track")

    def __init__(self, policy: CheckpointPolicy, inputs: list[EagerTensor], track: bool) -> None:
        self.key = object()  # carried by handles produced inside the region
        self.input_key = object()  # carried by the region's view of its inputs
        self.graph = _Graph(policy)
        self.inputs = inputs  # handles from outside (explicit, then discovered)
        self.extras: dict[int, int] = {}  # id(record) -> input index, for outside handles
        self.saved_recs: list[AdValueRecord] = []
        self.track = track
        self.produced: list[weakref.ref[EagerTensor]] = []  # for the block form

    def _ref(self, a: Any, rec: Any) -> Ref:
        if type(a) is EagerTensor:
            if a._tape is self.key:
                return ("v", a._id)
            if a._tape is self.input_key:
                return ("i", a._id)
            k = self.extras.get(id(rec))
            if k is None:  # a handle from outside the region: another input (boundary)
                k = len(self.inputs)
                self.inputs.append(a.clone())
                self.extras[id(rec)] = k
            return ("i", k)
        if type(rec) is AdValueRecord:  # an owner moved in / an array imported: a constant
            rec.count += 1
            self.graph.consts.append(rec)
            return ("c", len(self.graph.consts) - 1)
        return ("l", a)

    def record(
        self,
        prim: Primitive,
        args: tuple[Any, ...],
        recs: list[Any],
        h: EagerTensor,
        params: dict[str, Any],
    ) -> None:
        """Store one op; re-key its output handle as interior variable. O(args)."""
        g = self.graph
        refs = [self._ref(a, r) for a, r in zip(args, recs, strict=True)]
        var = g.n_vars
        g.n_vars += 1
        g.producer.append(len(g.eqns))
        g.eqns.append(_Eqn(prim, refs, params, [var]))
        h._tape = self.key
        h._id = var
        if self.track:
            self.produced.append(weakref.ref(h))
        if g.policy.saves_output(prim.name):
            self._save(var, h._r("checkpoint"))

    def _save(self, var: int, rec: AdValueRecord) -> None:
        g = self.graph
        if var not in g.saved and g.eqns[g.producer[var]].op.__class__ is Primitive:
            rec.count += 1
            g.saved[var] = len(self.saved_recs)
            self.saved_recs.append(rec)

    def name_var(self, var: int, rec: AdValueRecord, label: str) -> None:
        if self.graph.policy.saves_label(label):
            self._save(var, rec)

    def record_region(
        self, graph: _Graph, args: list[EagerTensor], out_recs: list[AdValueRecord]
    ) -> list[EagerTensor]:
        """Store a nested region as one equation; its outputs become variables here."""
        g = self.graph
        refs = [self._ref(a, a._r("checkpoint")) for a in args]
        outs = list(range(g.n_vars, g.n_vars + len(out_recs)))
        g.n_vars += len(out_recs)
        g.producer.extend([len(g.eqns)] * len(out_recs))
        g.eqns.append(_Eqn(graph, refs, {}, outs))
        handles = [make_handle(rec, self.key, v) for rec, v in zip(out_recs, outs, strict=True)]
        if self.track:
            self.produced.extend(weakref.ref(h) for h in handles)
        return handles

    def discard(self) -> None:
        """Drop everything recorded (a failure while recording: nothing is published)."""
        for rec in self.saved_recs:
            rec.count -= 1
        self.saved_recs = []
        self.graph.release()
        self.graph.eqns = []
        self.inputs = []


@contextmanager
def _recording(rec: _Recorder) -> Iterator[None]:
    prev = (STATE.tape, STATE.key, STATE.region)
    STATE.tape = None
    STATE.key = None
    STATE.region = rec
    try:
        yield
    finally:
        STATE.tape, STATE.key, STATE.region = prev


# -- attaching a finished region to the tape --------------------------------------------------


class _Cot:
    """The per-sweep cotangent token of one checkpoint node (see the module docstring)."""

    __slots__ = ("__weakref__", "result", "stash")

    def __init__(self) -> None:
        self.stash: dict[int, Any] = {}
        self.result: list[Any] | None = None


class _NodeState:
    """What a ``checkpoint`` node's rules need: the graph and the pending token."""

    __slots__ = ("graph", "n_out", "pending", "tape", "vid")

    def __init__(self, graph: _Graph, n_out: int, tape: Tape, vid: int) -> None:
        self.graph = graph
        self.n_out = n_out
        self.pending: weakref.ref[_Cot] | None = None
        self.tape = weakref.ref(tape)  # the node's residual records: tape.nodes[vid].res
        self.vid = vid

    def records(self) -> list[Any]:
        tape = self.tape()
        node = None if tape is None else tape.nodes[self.vid]
        if node is None or node.res is None:
            raise CheckpointError(
                "checkpoint: the region's boundary records were released by an earlier "
                "backward; pass keep=True to the first backward to differentiate again"
            )
        return node.res


_ZERO: Final = Zero((), None)


def _no_impl(*args: Any, **params: Any) -> Any:
    raise CheckpointError("checkpoint: a region node is never applied directly")


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
    prim = _region_prim(len(inputs))
    nodes = tape.nodes
    rid = len(nodes)
    st = _NodeState(graph, len(out_recs), tape, rid)
    nodes.append(_node(prim, ids, {"st": st}, res))
    out: list[EagerTensor] = []
    for j, rec in enumerate(out_recs):
        out.append(make_handle(rec, key, len(nodes)))
        nodes.append(_node(_OUTPUT_PRIM, [rid], {"st": st, "j": j}, []))
    return out


# -- the function form -------------------------------------------------------------------------


def _flatten_outputs(
    out: Any, operation: str
) -> tuple[list[EagerTensor], Callable[[list[Any]], Any]]:
    if isinstance(out, EagerTensor):
        return [out], lambda xs: xs[0]
    if isinstance(out, tuple | list) and all(isinstance(o, EagerTensor) for o in out):
        kind = type(out)
        return list(out), lambda xs: kind(xs)
    raise CheckpointError(
        f"{operation}: the region must return an EagerTensor or a tuple/list of them, got "
        f"{type(out).__name__}"
    )


def _finish(rec: _Recorder, outs: list[EagerTensor]) -> list[EagerTensor]:
    """Turn the region's result handles into outputs published on the tape."""
    g = rec.graph
    out_recs: list[AdValueRecord] = []
    result: list[Any] = []
    for h in outs:
        r = h._r("checkpoint")
        if h._tape is rec.key:
            g.outputs.append(("v", h._id))
            result.append(len(out_recs))
            out_recs.append(r)
        elif h._tape is rec.input_key:
            result.append(rec.inputs[h._id].clone())  # a pass-through input
        else:
            result.append(h.clone())  # a value from outside the region
    saved = rec.saved_recs
    rec.saved_recs = []
    published = _attach(g, rec.inputs, saved, out_recs) if out_recs else []
    if not out_recs:
        for s in saved:
            s.count -= 1
        g.release()
    return [published[x] if isinstance(x, int) else x for x in result]


def checkpoint(
    f: Callable[..., Any],
    *,
    policy: CheckpointPolicy = save_nothing,
) -> Callable[..., Any]:
    """Make ``f`` a checkpoint region: call the result with the region's inputs.

    ``checkpoint(f, policy=...)(*args)`` runs ``f`` at once, without recording its ops
    on the tape: interior values are released as soon as ``f`` drops them, and the
    tape retains only the boundary — the arguments (and any outside handle ``f``
    uses) plus the values ``policy`` saves — as descriptor records.  Backward
    recomputes the interior (allocations carry ``CHECKPOINT_RECOMPUTE_OUTPUT``).
    ``f`` returns an ``EagerTensor`` or a tuple/list of them.  Arguments that are not
    handles are passed through unchanged.  Forward cost: ``f`` plus O(ops) bookkeeping;
    backward cost: one extra forward of the interior.  Raises :class:`CheckpointError`
    when ``f`` returns something else; an exception from ``f`` propagates after every
    recorded boundary record is released (nothing is published).
    """
    if not callable(f):
        raise TypeError(f"checkpoint: expected a callable, got {type(f).__name__}")
    if not isinstance(policy, CheckpointPolicy):
        raise TypeError(f"checkpoint: policy must be a CheckpointPolicy, got {policy!r}")
    label = getattr(f, "__name__", "region")

    @functools.wraps(f)
    def region_call(*args: Any) -> Any:
        if STATE.tape is None and STATE.region is None:
            return f(*args)  # nothing records: a plain call
        inputs = [a.clone() for a in args if isinstance(a, EagerTensor)]
        rec = _Recorder(policy, inputs, track=False)
        local: list[Any] = []
        k = 0
        for a in args:
            if isinstance(a, EagerTensor):
                local.append(make_handle(a._r(f"checkpoint({label})"), rec.input_key, k))
                k += 1
            else:
                local.append(a)
        try:
            with _recording(rec):
                out = f(*local)
            del local
            outs, rebuild = _flatten_outputs(out, f"checkpoint({label})")
            del out
            published = _finish(rec, outs)
        except BaseException:
            rec.discard()
            raise
        return rebuild(published)

    return region_call


# -- the block form ------------------------------------------------------------------------------


@contextmanager
def region(tape: Tape, policy: CheckpointPolicy = save_nothing) -> Iterator[None]:
    """``with tape.checkpoint(policy=...):`` — the block form of :func:`checkpoint`.

    Every handle from outside that the block uses is a region input.  The region's
    outputs are the handles created inside the block that are still referenced when
    it exits; they are re-keyed in place onto ``tape``.  (Clones made inside the block
    with ``clone()`` are not outputs: take the output itself.)  Everything else created
    inside is interior.  An exception inside the block publishes nothing.
    """
    if not isinstance(policy, CheckpointPolicy):
        raise TypeError(f"Tape.checkpoint: policy must be a CheckpointPolicy, got {policy!r}")
    if STATE.tape is not tape and STATE.region is None:
        raise CheckpointError(
            "Tape.checkpoint: this tape is not recording here; use the block inside `with tape:`"
        )
    rec = _Recorder(policy, [], track=True)
    try:
        with _recording(rec):
            yield
        alive = [h for h in (w() for w in rec.produced) if h is not None and h._tape is rec.key]
        rec.produced = []
        # a handle alive at exit may be one of several to the same variable: group them
        by_var: dict[int, list[EagerTensor]] = {}
        for h in alive:
            by_var.setdefault(h._id, []).append(h)
        firsts = [hs[0] for hs in by_var.values()]
        published = _finish(rec, firsts)
    except BaseException:
        rec.discard()
        raise
    for hs, new in zip(by_var.values(), published, strict=True):
        for h in hs:  # re-key in place: same record, the published id
            h._tape = new._tape
            h._id = new._id


# -- backward: replay and local sweep -------------------------------------------------------------


def _numpy_ns() -> Any:
    from .ops._ns import NUMPY_NS

    return NUMPY_NS


def _handle_ns() -> Any:
    from .ops._ns import HANDLE_NS

    return HANDLE_NS


def _last_uses(graph: _Graph, eqn_ids: list[int]) -> dict[int, int]:
    last: dict[int, int] = {}
    for pos, e in enumerate(eqn_ids):
        for kind, v in graph.eqns[e].args:
            if kind == "v":
                last[v] = pos
    return last


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
    from ._dispatch import constant_record

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


def _node(
    prim: Primitive,
    ids: list[int],
    params: dict[str, Any],
    res: list[Any],
    shapes: list[tuple[int, ...]] | None = None,
) -> TapeNode:
    node = TapeNode.__new__(TapeNode)
    node.prim = prim
    node.ids = ids
    node.params = params
    node.res = res
    node.shapes = shapes
    return node


def _segments(graph: _Graph) -> list[list[int]]:
    """Owned equations per segment: a segment ends after each equation whose output
    is saved."""
    segs: list[list[int]] = [[]]
    for e, eqn in enumerate(graph.eqns):
        segs[-1].append(e)
        if eqn.outs[0] in graph.saved:
            segs.append([])
    return [s for s in segs if s]


def _needed(graph: _Graph, owned: list[int]) -> tuple[list[int], set[int]]:
    """Equations to recompute for a segment, and the saved variables it reads as leaves."""
    run: set[int] = set()
    leaves: set[int] = set()
    stack: list[int] = []
    manual = {e for e in owned if all(v in graph.saved for v in graph.eqns[e].outs)}
    for e in owned:
        if e not in manual:
            run.add(e)
        stack.append(e)
    seen: set[int] = set(owned)
    while stack:
        e = stack.pop()
        for kind, v in graph.eqns[e].args:
            if kind != "v":
                continue
            if v in graph.saved:
                if graph.producer[v] not in manual:
                    leaves.add(v)
                continue
            p = graph.producer[v]
            if p not in seen:
                seen.add(p)
                run.add(p)
                stack.append(p)
    return sorted(run | manual), leaves


def _region_vjp(ops: Any, g: Any, *args: Any, st: _NodeState, i: int) -> Any:
    if type(g) is not _Cot:
        raise CheckpointError("checkpoint: a region node received a cotangent directly")
    if g.result is None:
        st.pending = None
        create_graph = ops is _handle_ns()
        g.result = _vjp_all(st, g.stash, list(args), create_graph)
        g.stash = {}
    ct = g.result[i]
    return _ZERO if ct is None else ct


def _vjp_all(
    st: _NodeState, out_cts: dict[int, Any], args: list[Any], create_graph: bool
) -> list[Any]:
    """Cotangents for every region input, given cotangents of the outputs (by index)."""
    graph = st.graph
    n_in = len(args) - len(graph.saved)
    if create_graph:
        return _vjp_recorded(graph, out_cts, args[:n_in])
    ns = _numpy_ns()
    ct_var: dict[int, Any] = {}
    ct_in: dict[int, Any] = {}
    for j, g in out_cts.items():
        kind, v = graph.outputs[j]
        tgt = ct_var if kind == "v" else ct_in
        tgt[v] = g if v not in tgt else ns.add(tgt[v], g)
    recs = st.records()  # the boundary records, watched as sub-tape leaves (no copy)
    in_recs, saved_recs = recs[:n_in], recs[n_in:]
    for owned in reversed(_segments(graph)):
        produced = {v for e in owned for v in graph.eqns[e].outs}
        if not any(v in ct_var for v in produced):
            continue
        _segment_vjp(graph, owned, ct_var, ct_in, in_recs, saved_recs)
    return [ct_in.get(k) for k in range(n_in)]


def _segment_vjp(
    graph: _Graph,
    owned: list[int],
    ct_var: dict[int, Any],
    ct_in: dict[int, Any],
    in_recs: list[Any],
    saved_recs: list[Any],
) -> None:
    run, leaf_vars = _needed(graph, owned)
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
            h = sub.watch(make_handle(saved_recs[graph.saved[v]], None, -1))
            env[v] = h
            leaf_ids[h._id] = v
        consts = [make_handle(c, None, -1) for c in graph.consts]
        wanted = {v for e in owned for v in graph.eqns[e].outs if v in ct_var}
        seeds: dict[int, Any] = {}
        last = _last_uses(graph, run)
        for pos, e in enumerate(run):
            eqn = graph.eqns[e]
            out_v = eqn.outs[0]
            if out_v in graph.saved and type(eqn.op) is Primitive:
                env[out_v] = _manual_node(
                    sub, eqn, env, inputs, consts, saved_recs[graph.saved[out_v]]
                )
            else:
                _replay(graph, env, inputs, consts, [e], set(env) | set(eqn.outs))
            for v in eqn.outs:  # a seed needs only the value id; the sub-tape keeps residuals
                out_h = env.get(v)
                if v in wanted and out_h is not None and out_h._tape is sub.key:
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
    cts = _sweep_from(sub, seeds, sorted(in_ids) + sorted(leaf_ids), ns, False)
    sub.release()
    del sub
    for vid, ct in cts.items():
        if vid in in_ids:
            k = in_ids[vid]
            ct_in[k] = ct if k not in ct_in else ns.add(ct_in[k], ct)
        elif vid in leaf_ids:
            v = leaf_ids[vid]
            ct_var[v] = ct if v not in ct_var else ns.add(ct_var[v], ct)


def _manual_node(
    sub: Tape,
    eqn: _Eqn,
    env: dict[int, Any],
    inputs: list[Any],
    consts: list[Any],
    saved: AdValueRecord,
) -> EagerTensor:
    """A tape node for a saved equation, built from records instead of recomputing."""
    prim = eqn.op
    assert type(prim) is Primitive
    handles: list[Any] = []
    ids: list[int] = []
    for kind, v in eqn.args:
        a = env[v] if kind == "v" else inputs[v] if kind == "i" else consts[v] if kind == "c" else v
        handles.append(a)
        ids.append(a._id if type(a) is EagerTensor and a._tape is sub.key else -1)
    res: list[Any] = []
    for i in prim.save_in:
        a = handles[i]
        if type(a) is EagerTensor:
            r = a._r("checkpoint")
            r.count += 1
            res.append(r)
        else:
            res.append(a)
    if prim.save_out:
        saved.count += 1
        res.append(saved)
    shapes = None
    if prim.broadcasts:
        out_shape = saved.a.shape
        arg_shapes = [
            np.shape(a._r("checkpoint").a) if type(a) is EagerTensor else np.shape(a)
            for a in handles
        ]
        if any(i >= 0 and sh != out_shape for i, sh in zip(ids, arg_shapes, strict=True)):
            shapes = arg_shapes
    vid = len(sub.nodes)
    sub.nodes.append(_node(prim, ids, eqn.params, res, shapes))
    return make_handle(saved, sub.key, vid)


def _vjp_recorded(graph: _Graph, out_cts: dict[int, Any], inputs: list[Any]) -> list[Any]:
    """``create_graph``: replay on the recording (outer) tape and sweep with handles, so
    the cotangents are themselves recorded.  Each tracked input first passes through a
    recorded identity (no allocation) so the sweep stops at the region boundary."""
    from ._functional import IDENTITY

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
