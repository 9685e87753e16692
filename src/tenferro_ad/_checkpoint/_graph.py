"""Checkpoint regions, part 1: policies and the recorded-subgraph data structures.

A checkpoint region runs its ops *without recording them on the tape*: a
:class:`_Recorder` (``STATE.region``) is told about every op instead and stores the region
as an inert list of equations (:class:`_Eqn`) — the stored subgraph (:class:`_Graph`).
Interior values are therefore owned only by their handles and are released as soon as
the region's code drops them (G7: never inserted into the checkpoint's retained group,
no descriptor record).  The recorder holds strong references only to boundary records:
the region's inputs, constants, and the values the :class:`CheckpointPolicy` saves.  A
failure while recording publishes nothing: :meth:`_Recorder.discard` drops every record
it holds before the exception propagates.

Also here, for :mod:`._replay` (attaching and replaying): the state a
published ``checkpoint`` node carries (:class:`_NodeState`, :class:`_Cot`), the tape-node
builder :func:`_node`, and the pure analyses of a stored subgraph that the backward
replay plans with (:func:`_last_uses`, :func:`_segments`, :func:`_needed`).  This module
never replays anything; it is split from replay so each reads in one sitting.
"""

from __future__ import annotations

import weakref
from collections.abc import Container, Iterator
from contextlib import contextmanager
from typing import Any, Final

import attrs

from .._core._handle import EagerTensor, make_handle
from .._core._primitive import Primitive
from .._core._retention import AdValueRecord
from .._core._state import STATE
from .._core._tape import Tape, TapeNode
from ..errors import ArgumentTypeError, CheckpointError

# -- policies ------------------------------------------------------------------------------


@attrs.frozen
class CheckpointPolicy:
    """Which interior values of a checkpoint region are saved (kept) instead of recomputed.

    A saved value becomes a region boundary: it is retained as a boundary record, never
    recomputed, and splits the backward replay into segments.  Use the ready-made
    :data:`save_nothing` (the default), :data:`save_everything`, :func:`save_named` and
    :data:`save_contractions`.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    name: str
    everything: bool = False
    labels: frozenset[str] | None = None  # None: no label saves; empty: every label saves
    primitives: frozenset[str] = frozenset()

    def saves_output(self, primitive: str) -> bool:
        """Whether an output of ``primitive`` is saved. O(1).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: TypeError (an unhashable ``primitive``)."""
        return self.everything or primitive in self.primitives

    def saves_label(self, label: str) -> bool:
        """Whether a value named ``label`` with :func:`name` is saved. O(1).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: TypeError (an unhashable ``label``)."""
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
    ``labels``, or every named value when no label is given. O(len(labels)).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to build the policy.
    Raises: nothing."""
    for label in labels:
        if not isinstance(label, str):
            raise ArgumentTypeError(f"save_named: argument 'labels' must be strings, got {label!r}")
    shown = ", ".join(repr(label) for label in labels)
    return CheckpointPolicy(f"save_named({shown})", labels=frozenset(labels))


def name(x: EagerTensor, label: str) -> EagerTensor:
    """Name ``x`` for checkpoint policies; returns ``x`` itself. O(1), no allocation.

    Inside a checkpoint region whose policy saves ``label`` (:func:`save_named`), the
    value becomes a saved region boundary.  Elsewhere it does nothing.  Naming a region
    input or a value from outside the region has no effect (it is a boundary already).
    """
    if not isinstance(x, EagerTensor):
        raise ArgumentTypeError(
            f"name: argument 'x' must be an EagerTensor, got {type(x).__name__}"
        )
    if not isinstance(label, str):
        raise ArgumentTypeError(f"name: argument 'label' must be a string, got {label!r}")
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

    __slots__ = ("args", "aval", "op", "outs", "params")

    def __init__(
        self,
        op: Primitive | _Graph,
        args: list[Ref],
        params: dict[str, Any],
        outs: list[int],
        aval: tuple[tuple[int, ...], Any] | None = None,
    ) -> None:
        self.op = op
        self.args = args
        self.params = params
        self.outs = outs
        self.aval = aval  # a primitive's output (shape, dtype): a node without its kernel


class _Graph:
    """A region's stored subgraph: inert data, replayed by :func:`_replay`.

    ``n_inputs`` inputs (explicit arguments first, then handles from outside that the
    region used); ``consts``: constant records the region borrowed or imported (boundary
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

    __slots__ = (
        "extras", "graph", "input_key", "inputs", "key", "label", "produced", "saved_recs",
        "track",
    )

    def __init__(
        self,
        policy: CheckpointPolicy,
        inputs: list[EagerTensor],
        track: bool,
        label: str = "block",
    ) -> None:
        self.label = label  # names the region in borrow errors
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
        if type(rec) is AdValueRecord:  # a borrowed owner / an imported array: a constant
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
        a = h._r("checkpoint").a
        g.eqns.append(_Eqn(prim, refs, params, [var], (a.shape, a.dtype)))
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

    def cloned(self, src: EagerTensor, clone: EagerTensor) -> None:
        """A handle produced here was cloned: the clone may be the block's output too."""
        if self.track and src._tape is self.key:
            self.produced.append(weakref.ref(clone))

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


# -- the state of a published checkpoint node --------------------------------------------------


class _Cot:
    """The per-sweep cotangent token of one checkpoint node (see :mod:`._replay`)."""

    __slots__ = ("__weakref__", "result", "stash")

    def __init__(self) -> None:
        self.stash: dict[int, Any] = {}
        self.result: list[Any] | None = None


class _NodeState:
    """What a ``checkpoint`` node's rules need: the graph and the pending token."""

    __slots__ = (
        "graph", "handoff", "n_in", "n_out", "peers", "pending", "sources", "tape", "vid",
    )

    def __init__(self, graph: _Graph, n_in: int, n_out: int, tape: Tape, vid: int) -> None:
        self.graph = graph
        self.n_in = n_in
        self.n_out = n_out
        self.pending: weakref.ref[_Cot] | None = None
        # output j -> (value id of a later region node, its argument index): that node
        # keeps output j as a boundary record, which backward reads instead of recomputing
        self.peers: dict[int, list[tuple[int, int]]] = {}
        # input k -> (the earlier region's state, its output index) that produced it
        self.sources: dict[int, tuple[_NodeState, int]] = {}
        # output j -> where its record sits in this node's residuals, appended there by a
        # later region that released it (so the tape's release gives its count back)
        self.handoff: dict[int, int] = {}
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


def _no_impl(*args: Any, **params: Any) -> Any:
    raise CheckpointError("checkpoint: a region node is never applied directly")


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


# -- analysis of a stored subgraph (used by the backward replay) ---------------------------------


def _last_uses(graph: _Graph, eqn_ids: list[int]) -> dict[int, int]:
    last: dict[int, int] = {}
    for pos, e in enumerate(eqn_ids):
        for kind, v in graph.eqns[e].args:
            if kind == "v":
                last[v] = pos
    return last


def _segments(graph: _Graph, saved: Container[int]) -> list[list[int]]:
    """Owned equations per segment: a segment ends after each equation whose output
    is ``saved`` (kept by the policy, or available from a record at backward time)."""
    segs: list[list[int]] = [[]]
    for e, eqn in enumerate(graph.eqns):
        segs[-1].append(e)
        if eqn.outs[0] in saved:
            segs.append([])
    return [s for s in segs if s]


def _needed(
    graph: _Graph, owned: list[int], saved: Container[int]
) -> tuple[list[int], set[int]]:
    """Equations to put on a segment's sub-tape, and the saved variables it reads as
    leaves.  ``saved``: the variables whose values are records (not recomputed)."""
    run: set[int] = set()
    leaves: set[int] = set()
    stack: list[int] = []
    manual = {e for e in owned if all(v in saved for v in graph.eqns[e].outs)}
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
            if v in saved:
                if graph.producer[v] not in manual:
                    leaves.add(v)
                continue
            p = graph.producer[v]
            if p not in seen:
                seen.add(p)
                run.add(p)
                stack.append(p)
    return sorted(run | manual), leaves


def _computed(graph: _Graph, run: list[int], saved: Container[int]) -> set[int]:
    """The equations of ``run`` whose kernels must run again: those whose output value
    something reads -- their own VJP (``save_out``), a VJP that saves it as an input, or
    another equation that runs.  Every other equation gets a tape node built from
    records (its residuals are its saved inputs), so a value nothing reads is never
    recomputed.  Nested regions always run (they read all their inputs). O(run)."""
    need: set[int] = set()
    out: set[int] = set()
    for e in reversed(run):
        eqn = graph.eqns[e]
        op = eqn.op
        args = eqn.args
        if type(op) is Primitive:
            v0 = eqn.outs[0]
            if v0 not in saved and (v0 in need or op.save_out):
                out.add(e)
                need.update(v for kind, v in args if kind == "v")
            else:
                for i in op.save_in:
                    if i < len(args) and args[i][0] == "v":
                        need.add(args[i][1])
        else:
            out.add(e)
            need.update(v for kind, v in args if kind == "v")
    return out
