"""Checkpoint regions in traced mode: tracing them, differentiating them, binding them.

``ad.checkpoint(f, policy=...)`` called on traced values (``_region.py`` routes here)
does not change the forward program: every equation ``f`` emits is annotated with a new
:class:`~._graph.Region` (nested in the current one; ``ad.name`` on a traced value labels
its equation for ``save_named``).  The region is a graph-level construct the other
modules only carry along; three things read it:

* the reverse sweep (``_transform.py``) reads residuals through :class:`Residuals`: an
  interior value is re-emitted from the region's boundary on demand (annotated
  ``recompute``; compiled, those allocations are ``CHECKPOINT_RECOMPUTE_OUTPUT``), so
  the forward interior dies after its forward use and only the boundary is kept;
* binding a graph on eager handles (``grad(jit(f))``): :func:`bind_regions` runs each
  region as an eager ``ad.checkpoint`` with its policy (installed as
  ``_trace.BIND_REGIONS`` by ``tenferro_ad._wiring``);
* printing (``_graph.pretty``) shows regions and recomputations as blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._traced._graph import Eqn, Note, Region
from .._traced._trace import _ACTIVE, Tracer, noting

__all__ = ["name_traced", "trace_region"]


# -- tracing ------------------------------------------------------------------------------------
def trace_region(f: Callable[..., Any], policy: Any, label: str, args: Sequence[Any]) -> Any:
    """``ad.checkpoint(f, policy=policy)(*args)`` inside a trace: call ``f`` with every
    equation it emits annotated as interior of a new checkpoint :class:`~._graph.Region`
    (nested in the current one).  The forward program is unchanged; reverse-mode
    transformations keep the region's boundary and re-emit its interior in backward.
    Cost: ``f``'s tracing plus O(1)."""
    outer = _ACTIVE.note
    region = Region(label, policy, outer.region if outer is not None else None)
    note = Note(region=region) if outer is None else Note(
        region, outer.backward, outer.recompute, outer.origin
    )
    with noting(note):
        return f(*args)


def name_traced(x: Tracer, label: str) -> Tracer:
    """``ad.name(x, label)`` on a traced value: the equation that made ``x`` is annotated
    with ``label`` (so a ``save_named`` policy of its checkpoint region keeps it as a
    boundary); returns ``x``.  An input or a literal is a boundary already: unchanged.
    O(equations of the trace) to find the equation."""
    eqns, v = x._b.eqns, x._atom
    for i in range(len(eqns) - 1, -1, -1):
        e = eqns[i]
        if e.out is v:
            n = e.note if e.note is not None else Note()
            note = Note(n.region, n.backward, n.recompute, n.origin, label)
            eqns[i] = Eqn(e.prim, e.inputs, e.params, out=e.out, note=note)
            break
    return x


# -- the reverse sweep's residuals -------------------------------------------------------------
