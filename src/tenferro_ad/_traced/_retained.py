"""What a compiled gradient program keeps between its forward and backward halves, and why.

The traced counterpart of ``tape.retained()``.  A program made by a reverse-mode
transformation (``traced.grad``/``vjp``/``value_and_grad``, or ``ad.jit`` of ``ad.grad``)
runs its forward half, then its backward half; the equations of the backward half are
annotated ``Note(backward=True)`` by the sweep (``_transform.py``), each with the forward
primitive whose rule emitted it (``origin``), and a checkpoint's recomputation with
``recompute=True``.  A value is *retained* when the forward half (or the caller, for an
input) makes it and the backward half reads it: the execution keeps it as one of its own
value slots -- a descriptor in the execution's group, released at its last backward use
-- never as a shared tensor owner.  Metadata-only values (transposes, reshapes ...) are
views folded into their readers, so the value retained is the one they view.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from ._graph import Eqn, Graph, Lit, TreeDef, Var, _Names, flat_tree

__all__ = ["Halves", "ProgramRetainedEntry", "retained", "split_halves"]


@attrs.frozen
class ProgramRetainedEntry:
    """One value a gradient program keeps from its forward half for its backward half.

    The first five fields match ``tape.retained()``'s entries: ``producer`` (the primitive
    that made it, or ``"input"``), ``needed_by`` (``"<primitive>.vjp"`` for a rule's
    residual, ``"checkpoint.vjp"`` for a checkpoint region's boundary: what its backward
    step -- recomputation and interior rules -- starts from), ``nbytes``, ``shape``,
    ``dtype``.  ``var`` is the value's name in ``str(graph)``; ``slot`` its value slot in
    the compiled program (the execution's descriptor), ``None`` for a bare graph;
    ``checkpoints`` the labels of the (outermost) regions it is a boundary of.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    producer: str
    needed_by: tuple[str, ...]
    nbytes: int
    shape: tuple[int, ...]
    dtype: str
    var: str
    slot: int | None = None
    checkpoints: tuple[str, ...] = ()


def _base(views: dict[Var, Var | None], a: Var) -> Var | None:
    """The value a (possibly view) variable reads: its view chain's base (None: a literal)."""
    while a in views:
        b = views[a]
        if b is None:
            return None
        a = b
    return a


def _views(graph: Graph) -> dict[Var, Var | None]:
    """Metadata-only equations (the compiler folds them into their readers): out -> source."""
    out: dict[Var, Var | None] = {}
    for e in graph.eqns:
        first = e.inputs[0] if e.inputs else None
        if e.prim.alias and first is not None and all(isinstance(a, Lit) for a in e.inputs[1:]):
            out[e.out] = first if isinstance(first, Var) else None
    return out


def _slots(graph: Graph, views: dict[Var, Var | None], program: Any) -> dict[Var, int]:
    """Value slots of the compiled program: inputs first, then one per non-view equation
    in order (the compiler's numbering); checked against the program's instruction names
    so a differently numbered program reports no slot rather than a wrong one."""
    slot = {v: i for i, v in enumerate(graph.invars)}
    n = len(graph.invars)
    for e in graph.eqns:
        if e.out not in views:
            slot[e.out] = n
            n += 1
    if program is None:
        return {}
    made = {s: ins.name for ins in program.instructions for s in ins.outputs}
    eqn_of = {e.out: e for e in graph.eqns}
    for v, s in slot.items():
        if v in eqn_of and not made.get(s, "").startswith(eqn_of[v].prim.name):
            return {}
    return slot


def _reason(e: Eqn) -> tuple[str, str | None]:
    """(``needed_by`` entry, the checkpoint region label or None) of a backward equation."""
    note = e.note
    assert note is not None
    origin = note.origin or "backward"
    if origin.startswith("checkpoint:"):
        return "checkpoint.vjp", origin.partition(":")[2]
    return f"{origin}.vjp", None


def retained(graph: Graph, program: Any = None) -> list[ProgramRetainedEntry]:
    """What ``graph`` (a gradient program) keeps between its forward and backward halves,
    and why: one entry per retained value, in definition order (see the module
    docstring).  A graph with no backward half (no reverse-mode transformation) retains
    nothing.  ``program``: the graph's compiled program, to report each value's slot.

    Cost: allocates the list of entries only (no tensor storage; nothing runs); no copy;
    no sync; no dispatch; O(equations).
    Raises: nothing."""
    views = _views(graph)
    producer: dict[Var, str] = {v: "input" for v in graph.invars}
    needs: dict[Var, list[str]] = {}
    regions: dict[Var, list[str]] = {}
    for e in graph.eqns:
        if e.note is None or not e.note.backward:
            producer.setdefault(e.out, e.prim.name)
            continue
        why, region = _reason(e)
        for a in e.inputs:
            if not isinstance(a, Var):
                continue
            b = _base(views, a)
            if b is not None and b in producer:
                reasons = needs.setdefault(b, [])
                if why not in reasons:
                    reasons.append(why)
                labels = regions.setdefault(b, [])
                if region is not None and region not in labels:
                    labels.append(region)
    names = _Names.of(graph)
    slots = _slots(graph, views, program)
    order = {v: i for i, v in enumerate([*graph.invars, *(e.out for e in graph.eqns)])}
    out = []
    for v in sorted(needs, key=order.__getitem__):
        nbytes = int(np.prod(v.shape, dtype=np.int64)) * v.dtype.itemsize
        out.append(ProgramRetainedEntry(
            producer[v], tuple(needs[v]), nbytes, v.shape, v.dtype.name, names(v), slots.get(v),
            tuple(regions[v]),
        ))
    return out


@attrs.frozen(eq=False)
class Halves:
    """A gradient program cut between its forward and backward halves.

    ``forward``: ``(*inputs) -> (*forward outputs, *residuals)``; ``backward``:
    ``(*residuals) -> (*backward outputs)``.  ``residuals`` are the values the forward
    half hands over (inputs among them come back as identity outputs: no copy);
    ``placement[i]`` says where the original graph's output ``i`` went: ``("forward", k)``
    or ``("backward", k)``.  Run both on one group (the forward execution's, resubmitted
    with the residual slots as the backward's bindings) and the residuals are never
    anything but descriptors of that group.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    forward: Graph
    backward: Graph
    residuals: tuple[Var, ...]
    placement: tuple[tuple[str, int], ...]


def _flat(n: int) -> TreeDef:
    return flat_tree(n)


def split_halves(graph: Graph) -> Halves:
    """Cut ``graph`` (a gradient program) into its forward and backward halves (see
    :class:`Halves`).  Metadata-only views the backward half reads are re-emitted there
    (free) so the residual handed over is always the viewed value itself.

    Cost: allocates the two new graphs only (no tensor storage; nothing runs); no copy;
    no sync; no dispatch; O(equations).
    Raises: nothing."""
    fwd = [e for e in graph.eqns if e.note is None or not e.note.backward]
    bwd = [e for e in graph.eqns if e.note is not None and e.note.backward]
    defined = set(graph.invars) | {e.out for e in fwd}
    view_eqn = {e.out: e for e in fwd}
    views = _views(graph)
    residuals: dict[Var, None] = {}
    copied: dict[Var, Eqn] = {}

    def hand_over(a: Var) -> None:
        while a in views and a in view_eqn:
            copied[a] = view_eqn[a]
            src = views[a]
            if src is None:
                return
            a = src
        residuals[a] = None

    for e in bwd:
        for a in e.inputs:
            if isinstance(a, Var) and a in defined:
                hand_over(a)
    placement: list[tuple[str, int]] = []
    f_out: list[Any] = []
    b_out: list[Any] = []
    made_bwd = {e.out for e in bwd}
    for a in graph.outvars:
        if isinstance(a, Var) and a in made_bwd:
            placement.append(("backward", len(b_out)))
            b_out.append(a)
        else:
            placement.append(("forward", len(f_out)))
            f_out.append(a)
    res = tuple(residuals)
    order = {e.out: i for i, e in enumerate(fwd)}
    moved = sorted(copied.values(), key=lambda e: order[e.out])
    forward = Graph(graph.invars, tuple(fwd), (*f_out, *res), graph.in_tree,
                    _flat(len(f_out) + len(res)))
    backward = Graph(res, (*moved, *bwd), tuple(b_out), _flat(len(res)), _flat(len(b_out)))
    return Halves(forward, backward, res, tuple(placement))
