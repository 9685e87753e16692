"""The eager tape: a Wengert list of :class:`TapeNode` and the reverse sweep.

Node structure (the seam for checkpoint regions and new rule files):

* ``tape.nodes[vid]`` is the node that produced value id ``vid`` — ``None`` for a leaf
  (``watch``) — so value ids are positions and the list is topologically ordered;
* a :class:`TapeNode` holds ``prim`` (a :class:`~tenferro_ad._core._primitive.Primitive`),
  ``ids`` (the value id of each argument, ``-1`` for constants/parameters; untracked
  trailing arguments may have no entry, as in ``x * 2.0``: one entry), ``params``
  (the keyword parameters) and ``res`` — the residuals ``prim.save_in``/``save_out``
  declare: :class:`AdValueRecord` objects (each holding one count for the tape) or
  Python scalars.  ``res is None`` once the residuals were released.

The sweep walks ids from the loss down to the smallest requested id, popping each
value's accumulated cotangent and calling the per-argument VJP rules.  It knows no ops:
arithmetic goes through the rule namespace ``ns`` (numpy-backed, or handle-backed when
the backward itself is recorded).  Missing cotangents stay symbolic (absent / ``Zero``).

Cotangent accounting: in a no-record backward, intermediate cotangents are numpy kernel
scratch (like a ufunc's temporaries) and are *not* ledger allocations; only what becomes
an owner — the gradients delivered in a :class:`~tenferro_ad.Gradients` bundle or by the
functional API — is adopted, as ``OPERATION_OUTPUT``.  In a recorded backward
(``create_graph``) every cotangent is an op output (a handle) and is a ledger allocation.

A checkpoint region (issue 6) plugs in as a primitive-like node whose residuals are its
boundary records and whose VJP replays the region under a sub-tape inside
``allocation_reason(CHECKPOINT_RECOMPUTE_OUTPUT)`` and sweeps it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

import tenferro_storage as ts

from ..errors import ArgumentTypeError, BackwardError, MissingRuleError, TapeError
from ._cotangents import check_cotangent, check_rule_output
from ._cotangents import seed as _seed
from ._gradients import Gradients, foreign_roots
from ._handle import EagerTensor, make_handle
from ._inplace import DONATED_REFS, _accumulate
from ._namespace import HANDLE_NS, NUMPY_NS
from ._nocopy import NoCopy
from ._primitive import NONDIFF, Primitive, Zero
from ._retention import AdValueRecord, constant_record, move_owner, record_owner
from ._state import LOCAL, STATE


class TapeNode:
    """One recorded op (see the module docstring). Plain slots: made on every op."""

    __slots__ = ("ids", "params", "prim", "res", "shapes")

    prim: Primitive
    ids: Sequence[int]
    params: dict[str, Any]
    res: list[Any] | None
    shapes: list[tuple[int, ...]] | None  # argument shapes, kept only when they broadcast


_RELEASED: dict[str, Any] = {}  # the params of a released node
_FAILED: Any = TapeNode.__new__(TapeNode)  # the entry of a value whose call raised
_FAILED.res = None


@attrs.frozen
class RetainedEntry:
    """One value the tape retains: who produced it, which rules need it, its bytes.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    producer: str
    needed_by: tuple[str, ...]
    nbytes: int
    shape: tuple[int, ...]
    dtype: str


_TAPE_NUMBERS = itertools.count(1)


class Tape(NoCopy):
    """Records eager ops on watched values; ``with ad.Tape() as tape:``.

    ``name`` labels the tape in error messages (default ``Tape#<n>``): while the tape keeps
    a borrowed owner as a residual, a conflicting borrow of that owner raises
    ``BorrowError`` naming the tape and the op.  ``tape.watch(owner)`` consumes an owner
    and returns a tracked handle; ops only borrow the owners they are given;
    ``tape.backward(loss)`` returns a :class:`~tenferro_ad.Gradients` bundle.  The tape
    retains a value iff a rule's residual declaration needs it or ``retain(x)`` asked;
    everything else is released as soon as its last handle goes.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct; recording adds O(1) per
    op.
    Raises: nothing."""

    __slots__ = (
        "__weakref__", "_active", "_borrowed", "_done", "_kept", "_prev", "_released",
        "consuming", "key", "name", "nodes",
    )

    def __init__(self, name: str | None = None) -> None:
        self.name = f"Tape#{next(_TAPE_NUMBERS)}" if name is None else str(name)
        self.nodes: list[TapeNode | None] = []
        self.key = object()  # identity token carried by this tape's handles
        self._kept: list[AdValueRecord] = []
        # id(owner or view) -> (it, the record holding the tape's one named shared borrow of
        # it): an owner used by many ops is borrowed once per tape, not once per op
        self._borrowed: dict[int, tuple[Any, AdValueRecord]] = {}
        self._released = False
        self._done = 0  # nodes[:_done] are released
        # True during a no-record sweep whose tape is released right after it: checkpoint
        # regions may then drop boundaries as the sweep passes them (_checkpoint_replay.py)
        self.consuming = False
        self._active = 0
        self._prev: list[tuple[Any, Any]] = []

    # -- context -------------------------------------------------------------------------
    def __enter__(self) -> Tape:
        st = LOCAL.fields  # (the thread's fields once, not STATE's per-attribute forwarding)
        self._prev.append((st.tape, st.key))
        st.tape = self
        st.key = self.key
        self._active += 1
        return self

    def __exit__(self, *exc: object) -> None:
        st = LOCAL.fields
        st.tape, st.key = self._prev.pop()
        self._active -= 1

    def __del__(self) -> None:
        self._release()

    # -- values --------------------------------------------------------------------------
    def watch(self, value: Any) -> EagerTensor:
        """Start tracking ``value`` and return its handle. O(1), no copy.

        A ``Tensor`` owner is **moved** into the tape (the caller's object is consumed;
        take it back with ``handle.into_value()``, or pass ``owner`` to ops directly to
        borrow it instead); an ``EagerTensor`` gets a new tracked handle to the same
        record; a numpy array is imported with one recorded ``TRANSFER`` copy.  A view
        cannot be moved: use ``ad.constant(view)`` for an untracked handle.

        Cost: allocates only to import an array (one owner); transfers only then (one
        recorded ``TRANSFER``), an owner or handle is not copied; no sync; no dispatch;
        O(1), O(size) for an import.

        Raises:
            ArgumentTypeError: ``value`` is a view, or no value, array, scalar or DLPack.
            UseAfterMoveError: ``value`` is a consumed owner or handle.
            BorrowError: ``value`` is an owner that is borrowed (nothing moves).
            DTypeError: an imported array's dtype is not one tenferro stores.
            CopyForbiddenError: an import inside ``ledger.forbid_copies()``.
        """
        if isinstance(value, EagerTensor):
            rec = value._r("Tape.watch")
        elif isinstance(value, ts.Tensor):
            owner = move_owner(value, "Tape.watch")  # the caller's owner is consumed
            rec = record_owner(owner, ts.kernel.read_array(owner), "watch")
        elif isinstance(value, ts.TensorView | ts.TensorViewMut):
            raise ArgumentTypeError(
                "Tape.watch: a view cannot be moved into a tape; watch the owner (moved), "
                "or pass the view to ops directly (borrowed, untracked)"
            )
        else:
            rec = constant_record(value, "Tape.watch", "argument 'value'")
            rec.op = "watch"
        vid = len(self.nodes)
        self.nodes.append(None)
        return make_handle(rec, self.key, vid)

    def retain(self, x: EagerTensor) -> None:
        """Keep ``x``'s value alive on this tape (one more direct owner) until release. O(1).

        Any live handle (this tape's or not); ``into_value()`` is ``NotUnique`` meanwhile.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).

        Raises:
            UseAfterMoveError: ``x`` was consumed by ``into_value()``.
            ArgumentTypeError: ``x`` is not an ``EagerTensor`` (nothing is retained)."""
        if not isinstance(x, EagerTensor):
            raise ArgumentTypeError(f"Tape.retain: argument 'x' must be an EagerTensor, got "
                                    f"{type(x).__name__}; watch a value to get one")
        rec = x._r("Tape.retain")
        rec.count += 1
        self._kept.append(rec)

    if TYPE_CHECKING:  # the checkpoint layer installs it (tenferro_ad._wiring)

        def checkpoint(self, policy: Any = None) -> Any: ...

    def retained(self) -> list[RetainedEntry]:
        """What the tape retains and why: one entry per retained record (producing op, the
        rules that need it, bytes). O(nodes).

        Cost: no allocation (plain entry records); no copy; no sync; no dispatch; O(nodes +
        residuals).
        Raises: nothing."""
        needs: dict[int, tuple[AdValueRecord, list[str]]] = {}
        for node in self.nodes:
            if node is None or not node.res:
                continue
            for r in node.res:
                if type(r) is AdValueRecord:
                    needs.setdefault(id(r), (r, []))[1].append(f"{node.prim.name}.vjp")
        for r in self._kept:
            needs.setdefault(id(r), (r, []))[1].append("tape.retain")
        return [
            RetainedEntry(r.op, tuple(rules), r.nbytes, tuple(r.a.shape), r.a.dtype.name)
            for r, rules in needs.values()
        ]

    def _discard_from(self, n0: int) -> None:
        """Discard what a failed call recorded from value id ``n0`` on: residuals are
        released at once and the entries become markers (ids are never reused, so a
        handle that outlived the failure can never alias a later value). O(nodes)."""
        nodes = self.nodes
        for vid in range(n0, len(nodes)):
            node = nodes[vid]
            if node is not None and node is not _FAILED and node.res:
                for r in node.res:
                    if type(r) is AdValueRecord:
                        r.count -= 1
                node.res = None
            nodes[vid] = _FAILED
        # a borrow that only the discarded nodes needed ends now: the owner is as before
        for k in [k for k, (_, r) in self._borrowed.items() if r.count <= 0]:
            del self._borrowed[k]

    def _release(self) -> None:
        nodes = self.nodes
        # nodes below ``_done`` were released by an earlier call (the functional API
        # releases its private tape, and the tape's death calls this again)
        for node in itertools.islice(nodes, self._done, None):
            if node is not None and node.res is not None:
                for r in node.res:
                    if type(r) is AdValueRecord:
                        r.count -= 1
                node.res = None
                node.params = _RELEASED  # whatever a rule kept there (e.g. a region's graph)
        for r in self._kept:
            r.count -= 1
        self._kept = []
        self._borrowed.clear()  # the tape's borrows of caller owners end here
        self._released = True
        self._done = len(nodes)

    def release(self) -> None:
        """Release every residual and retained value now (idempotent), and end the tape's
        borrows of caller owners; a later ``backward`` raises ``BackwardError``.

        Cost: no allocation; no copy; no sync; no dispatch; O(nodes not yet released).
        Raises: nothing."""
        self._release()

    # -- backward --------------------------------------------------------------------------
    def _id_of(self, x: EagerTensor, what: str) -> int:
        if not isinstance(x, EagerTensor):
            raise ArgumentTypeError(
                f"Tape.backward: {what} must be an EagerTensor, got {type(x).__name__}"
            )
        x._r(f"Tape.backward ({what})")
        if x._tape is not self.key or x._id < 0:
            raise BackwardError(
                f"Tape.backward: {what} is not tracked on this tape (a constant, or a handle "
                "from another tape); watch it on this tape before computing with it"
            )
        return x._id

    def sweep(
        self,
        loss: int | dict[int, Any],
        seed: Any,
        wrt: list[int],
        ns: Any,
        create_graph: bool,
        release: bool = False,
    ) -> dict[int, Any]:
        """Reverse sweep from value ``loss`` (cotangent ``seed``), or from several values at
        once (``loss`` a dict ``{id: cotangent}``, ``seed`` unused); returns
        ``{id: cotangent}`` for the ids in ``wrt`` that received one (``ns`` values).

        ``release``: drop each node's residuals as soon as its rules ran (or raised), as
        PyTorch frees saved tensors -- only for a private tape that nothing differentiates
        again (a checkpoint segment's replay): a failure leaves such a tape unusable; a
        ``loss`` dict is then consumed too, so each cotangent dies once used.

        The steps: :func:`_start` (the cotangent table), then per value from the top down:
        pop its cotangent, refuse a node whose residuals are gone (:meth:`_spent`), call
        the rules -- the *common node* (one argument, no parameters, nothing to reduce:
        most nodes) inline here, every other node in :func:`_general_node` -- and add each
        cotangent to its argument's entry (:func:`_accumulate` when one is there).

        Cost: allocates the cotangents (numpy scratch in ``NUMPY_NS``, not ledger events;
        recorded op outputs in ``HANDLE_NS``); no copy; no sync; no dispatch (host
        kernels); O(nodes from ``loss`` down to ``min(wrt)``) plus each VJP rule's work.

        Raises:
            BackwardError: a needed node's residuals are gone (released, or its call raised).
            MissingRuleError: a needed argument has no VJP rule.
            ArgumentError: a user rule's cotangent has the wrong shape.
            ArgumentTypeError: a user rule's cotangent has the wrong dtype.
        """
        nodes = self.nodes
        lo = min(wrt) if wrt else 0
        want = set(wrt)
        cts, top = _start(loss, seed, release)
        out: dict[int, Any] = {}
        add = ns.add
        for vid in range(top, lo - 1, -1):
            g = cts.pop(vid, None)
            if g is None:
                continue
            if vid in want:
                out[vid] = g
            node = nodes[vid]
            if node is None:
                continue
            res = node.res
            if res is None:  # (a failed call's entry has no residuals either)
                raise self._spent(node, vid)
            prim = node.prim
            ids = node.ids
            try:
                if (
                    len(ids) == 1
                    and node.shapes is None
                    and not node.params
                    and not create_graph
                    and not prim.variadic
                ):  # the common node, called here: no frame of its own (it is most nodes)
                    in_id = ids[0]
                    if in_id >= lo:
                        rule = prim.vjps[0]
                        if rule is None:
                            raise MissingRuleError(prim.name, "vjp", 0)
                        if rule is not NONDIFF:
                            # a direct call with the residual arrays (no argument list, no
                            # keyword dict; no local name for a record: it would outlive a
                            # released node); ``g`` is read no more after it: donated
                            # (the last node's ``ct``/``prev`` may be ``g`` itself: dropped
                            # first, so only the sweep's live names count as its holders)
                            ct = prev = None
                            ns.donated = g
                            n = len(res)
                            if n == 1:
                                ct = rule(  # type: ignore[operator]
                                    ns, g, res[0].a if type(res[0]) is AdValueRecord else res[0]
                                )
                            elif n == 2:  # a binary op's two arguments (``x * 1.1``)
                                ct = rule(  # type: ignore[operator]
                                    ns,
                                    g,
                                    res[0].a if type(res[0]) is AdValueRecord else res[0],
                                    res[1].a if type(res[1]) is AdValueRecord else res[1],
                                )
                            elif n == 0:
                                ct = rule(ns, g)  # type: ignore[operator]
                            else:
                                ct = rule(  # type: ignore[operator]
                                    ns, g, *[r.a if type(r) is AdValueRecord else r for r in res]
                                )
                            if type(ct) is not Zero:
                                prev = cts.get(in_id)
                                cts[in_id] = ct if prev is None else _accumulate(add, prev, ct)
                    continue
                # handed over in the table: the general step pops it, so that its frame,
                # not this one, is the sweep's one holder of a donated ``g`` (``ct``/``prev``
                # of an earlier node may be ``g`` itself: dropped too)
                cts[vid] = g
                g = ct = prev = None
                _general_node(node, vid, res, cts, lo, ns, self.key, create_graph)
            finally:
                ns.donated = None
                if release:
                    node.res = None
                    _give_back(res)
                    res = None  # nothing outlives the node
        return out

    def _spent(self, node: TapeNode, vid: int) -> BackwardError:
        """The error for a needed node without residuals: its call raised, or an earlier
        backward released them."""
        if node is _FAILED:
            return BackwardError(
                f"Tape.backward: value {vid} of {self.name} was computed inside a call "
                "that raised (its recording was discarded); it has no gradient"
            )
        return BackwardError(
            "Tape.backward: the residuals were released by an earlier backward; pass "
            "keep=True to the first backward to differentiate the tape again"
        )

    def backward(
        self,
        loss: EagerTensor,
        wrt: Any = None,
        cotangent: Any = None,
        create_graph: bool = False,
        keep: bool = False,
    ) -> Any:
        """Reverse-mode gradients of ``loss``; returns a :class:`~tenferro_ad.Gradients`.

        ``wrt``: handles (default: every watched value).  ``cotangent``: the seed (default:
        ones; same shape and dtype as the loss, checked before anything changes; a
        handle, scalar, owner (borrowed) or numpy array).  Releases the residuals
        afterwards unless ``keep`` (a second backward then raises ``BackwardError``).
        ``create_graph=True`` records the backward itself on this tape (gradients are
        also available as handles with ``grads.handle(x)``).

        Cost: allocates one owner per distinct gradient (``OPERATION_OUTPUT``; without
        ``create_graph`` the cotangents in between are kernel scratch, not ledger events;
        with it every backward op is recorded and allocates its output like any eager
        op); copies only to materialize a gradient that would share the caller's
        cotangent or a residual (``MATERIALIZE``; with ``create_graph`` a numpy
        ``cotangent`` is imported: one ``TRANSFER``); no sync; no dispatch (host kernels);
        O(recorded nodes): one VJP-rule call per needed (node, argument), about the
        forward's work.

        Raises:
            BackwardError: the tape was released (an earlier backward without ``keep``),
                ``loss`` or a ``wrt`` entry is not tracked on this tape, or a needed
                node's residuals are gone.
            ArgumentTypeError: ``loss``/``wrt`` is not an ``EagerTensor``, or
                ``cotangent`` has another dtype or kind.
            ArgumentError: ``cotangent`` has another shape than ``loss``.
            UseAfterMoveError: ``loss`` or a ``wrt`` handle was consumed.
            MissingRuleError: a needed argument has no VJP rule.
        """
        if self._released:
            raise BackwardError(
                "Tape.backward: this tape's residuals were released by an earlier backward; "
                "pass keep=True to the first backward to differentiate the tape again"
            )
        lid = self._id_of(loss, "loss")
        if wrt is None:
            handles = None
            wids = [i for i, n in enumerate(self.nodes) if n is None]
        else:
            handles = list(wrt) if isinstance(wrt, list | tuple) else [wrt]
            wids = [self._id_of(h, "wrt") for h in handles]
        loss_a = loss._r("Tape.backward").a
        if create_graph:
            seed = _seed(loss_a, cotangent, True)
            foreign = {id(seed)}
            with recording_on(self):
                cts = self.sweep(lid, seed, wids, HANDLE_NS, True)
        else:
            seed = _seed(loss_a, cotangent, False)
            self.consuming = not keep
            try:
                cts = self.sweep(lid, seed, wids, NUMPY_NS, False)
            finally:
                self.consuming = False
            foreign = foreign_roots([] if cotangent is None else [seed])
        if not keep:  # before the gradients are owned: the residuals' bytes go first
            self._release()
        return Gradients._build(self.key, wids, cts, create_graph, foreign)


def _start(
    loss: int | dict[int, Any], seed: Any, release: bool
) -> tuple[dict[int, Any], int]:
    """The sweep's cotangent table and its top value id: ``{loss: seed}``, or a copy of a
    ``loss`` dict (the dict itself when ``release``: the caller's dict is spent)."""
    if isinstance(loss, dict):
        cts = loss if release else dict(loss)
        return cts, (max(cts) if cts else -1)
    return {loss: seed}, loss


def _general_node(
    node: TapeNode,
    vid: int,
    res: list[Any],
    cts: dict[int, Any],
    lo: int,
    ns: Any,
    key: object,
    create_graph: bool,
) -> None:
    """The general node call of the sweep: each needed argument's rule (with parameters,
    ``argnum`` for a variadic primitive, residual handles in a recorded backward), its
    cotangent checked (user rules) and reduced to the argument's target, and added to the
    argument's entry.  Pops the node's cotangent ``cts[vid]`` itself, so the last rule that
    reads it may write it in place (donated)."""
    g = cts.pop(vid)
    prim = node.prim
    ids = node.ids
    params = node.params
    args: Sequence[Any]
    if create_graph:
        args = _residual_handles(node, vid, key)
    else:  # (a tuple: the calls below pass it on without converting it)
        args = tuple([r.a if type(r) is AdValueRecord else r for r in res])
    vjps = prim.vjps
    variadic = prim.variadic
    shapes = node.shapes
    last = len(ids) - 1
    try:
        for i, in_id in enumerate(ids):
            if in_id < lo:
                continue
            rule = vjps[0] if variadic else vjps[i]
            if rule is None:
                raise MissingRuleError(prim.name, "vjp", i)
            if rule is NONDIFF:
                continue
            if i == last and not prim.checked:  # the last rule that reads ``g``
                ct = prev = None
                ns.donated = g
            if variadic:
                ct = rule(ns, g, *args, argnum=i, **params)  # type: ignore[operator]
            elif params:
                ct = rule(ns, g, *args, **params)  # type: ignore[operator]
            elif len(args) == 2:  # a binary op's residuals, passed as the fast path
                # does (no argument tuple: a donated ``g`` gets no extra holder)
                ct = rule(ns, g, args[0], args[1])  # type: ignore[operator]
            else:
                ct = rule(ns, g, *args)  # type: ignore[operator]
            if type(ct) is Zero:
                continue
            if shapes is not None:
                target = shapes[i]
                if prim.checked:
                    check_rule_output(prim, i, ct, target, g)
                # (an argument of the output's shape and dtype needs no reduction)
                if type(ct) is not np.ndarray or type(target) is not tuple or (
                    ct.shape != target
                ):
                    ct = ns.unbroadcast(ct, target)
            prev = cts.get(in_id)
            cts[in_id] = ct if prev is None else _accumulate(ns.add, prev, ct)
    finally:
        args = None  # type: ignore[assignment]  # nothing outlives the node on a raise


def _give_back(res: list[Any]) -> None:
    """Give back the counts a released node's residual list held (in a frame of its own,
    so no loop variable outlives the call and keeps the last record alive)."""
    for r in res:
        if type(r) is AdValueRecord:
            r.count -= 1


def _residual_handles(node: TapeNode, vid: int, key: object) -> list[Any]:
    """Residuals as handles with their value ids (so the recorded backward connects)."""
    assert node.res is not None
    prim = node.prim
    out: list[Any] = []
    ids = node.ids
    for j, r in enumerate(node.res):
        if type(r) is not AdValueRecord:
            out.append(r)
            continue
        if j < len(prim.save_in):  # (``ids`` may omit untracked trailing arguments)
            i = prim.save_in[j]
            rid = ids[i] if i < len(ids) else -1
        else:
            rid = vid
        out.append(make_handle(r, key if rid >= 0 else None, rid))
    return out


class recording_on:
    """Temporarily make ``tape`` the recording tape (``create_graph``, and the functional
    API's nested sweeps): ``with recording_on(tape): ...`` restores the previous one."""

    def __init__(self, tape: Tape) -> None:
        self.tape = tape

    def __enter__(self) -> None:
        self.prev = (STATE.tape, STATE.key)
        STATE.tape, STATE.key = self.tape, self.tape.key

    def __exit__(self, *exc: object) -> None:
        STATE.tape, STATE.key = self.prev


def current_tape() -> Tape | None:
    """The tape that records new ops now (``None`` outside tapes or under ``no_grad``).

    Cost: no allocation; no copy; no sync; no dispatch; O(1).
    Raises: nothing."""
    t: Tape | None = STATE.tape
    return t


__all__ = [
    "DONATED_REFS", "RetainedEntry", "Tape", "TapeError", "TapeNode", "check_cotangent",
    "current_tape", "recording_on",
]
