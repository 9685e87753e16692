"""Checkpoint regions: retain only the boundary, recompute the interior in backward.

``ad.checkpoint(f, policy=...)(*args)`` (the guaranteed form) and
``with tape.checkpoint(policy=...):`` (the block form) run the region's ops *without
recording them on the tape*; the tape retains only the region's boundary and backward
recomputes the interior.  This module is the public front: the two forms, and the
policies re-exported from where they live.  The implementation is split in two:

* :mod:`._checkpoint_graph` — policies, the recorder (``STATE.region``) and the stored
  subgraph it builds (inert data);
* :mod:`._checkpoint_replay` — publishing a finished region on the tape and the backward
  replay / local sweep (mutually recursive with publishing, for nested regions).

A failure while recording publishes nothing: the recorder and every record it holds are
dropped before the exception propagates.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from tenferro_storage._pytree import tree_flatten

from .._core._dispatch import bind as eager_bind
from .._core._handle import EagerTensor, make_handle
from .._core._retention import AdValueRecord
from .._core._state import STATE
from .._core._tape import Tape
from .._traced._graph import Eqn, Graph, Region, Var
from .._traced._trace import Tracer, tracing
from ..errors import ArgumentTypeError, CheckpointError
from ._graph import (
    CheckpointPolicy,
    _Recorder,
    _recording,
    save_contractions,
    save_everything,
    save_named,
    save_nothing,
)
from ._graph import name as _name_eager
from ._replay import _attach
from ._traced import name_traced, trace_region

__all__ = [
    "CheckpointPolicy",
    "checkpoint",
    "name",
    "bind_regions",
    "region",
    "save_contractions",
    "save_everything",
    "save_named",
    "save_nothing",
    "tape_checkpoint",
]


def name(x: Any, label: str) -> Any:
    """Name ``x`` for checkpoint policies; returns ``x`` itself. O(1), no allocation.

    Inside a checkpoint region whose policy saves ``label`` (:func:`save_named`), the
    value becomes a saved region boundary.  Elsewhere it does nothing.  Naming a region
    input or a value from outside the region has no effect (it is a boundary already).
    On a traced value the equation that made it is annotated instead (the same
    policies apply when the traced program is differentiated).

    Cost: no allocation; no copy; no sync; no dispatch; O(1).
    Raises: nothing."""
    if type(x) is Tracer and isinstance(label, str):
        return name_traced(x, label)
    return _name_eager(x, label)


# -- the function form -------------------------------------------------------------------------


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
    ``f`` returns a pytree of ``EagerTensor`` values (tuples, lists, dicts, namedtuples,
    ``None``, registered nodes: ``tenferro_ad.tree_util``); the arguments are pytrees too,
    every handle leaf a region input, other leaves passed through unchanged.  An
    exception from ``f`` propagates after every recorded boundary record is released
    (nothing is published).

    Cost: allocates what ``f``'s ops allocate, minus the interior the tape does not retain
    (recomputed in backward); no copy; no sync; no dispatch; O(the work of ``f``) plus
    O(ops) bookkeeping forward, and one extra forward of the interior in backward.

    Raises:
        ArgumentTypeError: ``f`` is not callable, or ``policy`` is not a
            ``CheckpointPolicy``.
        CheckpointError: ``f`` returns something else than a pytree of handles (a leaf
            that is not a handle)."""
    if not callable(f):
        raise ArgumentTypeError(
            f"checkpoint: argument 'f' must be callable, got {type(f).__name__}"
        )
    if not isinstance(policy, CheckpointPolicy):
        raise ArgumentTypeError(
            f"checkpoint: argument 'policy' must be a CheckpointPolicy, got {policy!r}"
        )
    label = getattr(f, "__name__", "region")

    @functools.wraps(f)
    def region_call(*args: Any) -> Any:
        leaves, in_tree = tree_flatten(args)
        if tracing(leaves):  # traced code: a graph-level region (_trace.trace_region)
            return trace_region(f, policy, label, args)
        if STATE.tape is None and STATE.region is None:
            return f(*args)  # nothing records: a plain call
        operation = f"checkpoint({label})"
        inputs = [a.clone() for a in leaves if isinstance(a, EagerTensor)]
        rec = _Recorder(policy, inputs, track=False, label=label)
        local: list[Any] = []
        k = 0
        for a in leaves:
            if isinstance(a, EagerTensor):
                local.append(make_handle(a._r(operation), rec.input_key, k))
                k += 1
            else:
                local.append(a)
        try:
            with _recording(rec):
                out = f(*in_tree.unflatten(local))
            del local
            outs, out_tree = tree_flatten(out)
            del out
            handles = [o for o in outs if isinstance(o, EagerTensor)]
            if len(handles) != len(outs):
                bad = next(o for o in outs if not isinstance(o, EagerTensor))
                raise CheckpointError(
                    f"{operation}: the region must return a pytree (tuples, lists, dicts, "
                    "namedtuples, None, registered nodes) of EagerTensors, got a "
                    f"{type(bad).__name__} leaf in {out_tree}"
                )
            published = _finish(rec, handles)
        except BaseException:
            rec.discard()
            raise
        return out_tree.unflatten(published)

    return region_call


# -- the block form ------------------------------------------------------------------------------


def tape_checkpoint(tape: Tape, policy: CheckpointPolicy | None = None) -> Any:
    """``with tape.checkpoint(policy=...):`` — the block form of a checkpoint region.

    See :func:`tenferro_ad.checkpoint`; handles created inside the block and still
    referenced when it exits are the region's outputs.  ``policy`` defaults to
    ``save_nothing``.  O(1) to enter; O(ops) bookkeeping inside.  (``Tape.checkpoint``:
    the tape knows no regions; ``tenferro_ad._wiring`` installs this as its method.)
    The call checks ``policy`` and builds the context manager; the recording tape is
    checked when the block is entered.

    Cost: no allocation (interior values are freed as the block drops them; backward
    recomputes them); no copy; no sync; no dispatch; O(1) to enter, O(ops) bookkeeping
    inside the block.

    Raises:
        ArgumentTypeError: ``policy`` is not a ``CheckpointPolicy`` (at the call).
        CheckpointError: ``tape`` is not recording where the block is entered.
    """
    policy = save_nothing if policy is None else policy
    _check_policy(policy)
    return region(tape, policy)


def _check_policy(policy: object) -> None:
    if not isinstance(policy, CheckpointPolicy):
        raise ArgumentTypeError(
            f"Tape.checkpoint: argument 'policy' must be a CheckpointPolicy, got {policy!r}"
        )


@contextmanager
def region(tape: Tape, policy: CheckpointPolicy = save_nothing) -> Iterator[None]:
    """``with tape.checkpoint(policy=...):`` — the block form of :func:`checkpoint`.

    Every handle from outside that the block uses is a region input.  The region's
    outputs are the handles created inside the block that are still referenced when
    it exits; they are re-keyed in place onto ``tape``.  (Clones made inside the block
    with ``clone()`` are not outputs: take the output itself.)  Everything else created
    inside is interior.  An exception inside the block publishes nothing.
    """
    _check_policy(policy)
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


# -- binding a traced graph on eager handles (grad(jit(f))) ---------------------------------------


def _region_at(e: Eqn, depth: int) -> Region | None:
    """The checkpoint region at nesting ``depth`` of a forward equation (None: none)."""
    n = e.note
    if n is None or n.region is None or n.recompute or n.backward:
        return None
    chain = n.region.chain()
    return chain[depth] if len(chain) > depth else None


def _bind_eqns(eqns: Sequence[Eqn], env: dict[Var, Any], depth: int, keep: set[Var]) -> None:
    """Bind ``eqns`` eagerly into ``env``.  A run of equations of one checkpoint region
    (at nesting ``depth``) becomes one eager ``ad.checkpoint(..., policy=...)`` call whose
    arguments are the values the run reads from before it and whose results are the
    values read after it (or in ``keep``): eager mode then keeps the boundary and
    recomputes the interior, as the traced transformations do."""
    last: dict[Var, int] = {}  # the index of each value's last reader in ``eqns``
    for n, e in enumerate(eqns):
        for a in e.inputs:
            if isinstance(a, Var):
                last[a] = n
    i = 0
    while i < len(eqns):
        r = _region_at(eqns[i], depth)
        if r is None:
            e = eqns[i]
            vals = [env[a] if isinstance(a, Var) else a.value for a in e.inputs]
            env[e.out] = eager_bind(e.prim, *vals, **e.params)
            if e.note is not None and e.note.label:
                name(env[e.out], e.note.label)
            del vals
            _drop(env, [*e.inputs, e.out], last, i + 1, keep)
            i += 1
            continue
        k = i
        while k < len(eqns) and _region_at(eqns[k], depth) is r:
            k += 1
        run = eqns[i:k]
        made = {e.out for e in run}
        ins = list(dict.fromkeys(
            a for e in run for a in e.inputs if isinstance(a, Var) and a not in made
        ))
        outs = [e.out for e in run if e.out in keep or last.get(e.out, -1) >= k]
        i = k
        if not outs:
            continue

        def region_fn(*vals: Any, run: Sequence[Eqn] = run, ins: list[Var] = ins,
                      outs: list[Var] = outs) -> Any:
            local: dict[Var, Any] = dict(zip(ins, vals, strict=True))
            del vals
            _bind_eqns(run, local, depth + 1, set(outs))
            res = tuple(local.pop(v) for v in outs)
            return res[0] if len(res) == 1 else res

        region_fn.__name__ = r.label
        got = checkpoint(region_fn, policy=r.policy)(*[env[a] for a in ins])
        for v, x in zip(outs, got if len(outs) > 1 else (got,), strict=True):
            env[v] = x
        del got
        _drop(env, [*ins, *outs], last, k, keep)


def _drop(
    env: dict[Var, Any], vs: Sequence[Any], last: dict[Var, int], done: int, keep: set[Var]
) -> None:
    """Release the handles of ``vs`` that nothing after equation ``done - 1`` reads."""
    for v in vs:
        if isinstance(v, Var) and v not in keep and last.get(v, -1) < done:
            env.pop(v, None)


def bind_regions(graph: Graph, leaves: Sequence[Any]) -> list[Any]:
    """Bind ``graph`` on eager handles, each checkpoint region as an eager checkpoint
    (see :func:`_bind_eqns`); the results are handles recorded on the current tape.  Costs
    what the ops cost (their allocations are recorded as usual); no copy, and each
    intermediate handle is dropped after its last reader."""
    env: dict[Var, Any] = dict(zip(graph.invars, leaves, strict=True))
    _bind_eqns(graph.eqns, env, 0, {a for a in graph.outvars if isinstance(a, Var)})
    return [env[a] if isinstance(a, Var) else a.value for a in graph.outvars]
