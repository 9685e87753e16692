"""Checkpoint regions in traced mode: tracing them, differentiating them, binding them.

``ad.checkpoint(f, policy=...)`` called on traced values (``_checkpoint.py`` routes here)
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
  ``_trace.BIND_REGIONS``);
* printing (``_graph.pretty``) shows regions and recomputations as blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._core._dispatch import bind as eager_bind
from .._traced import _trace
from .._traced._graph import Eqn, Graph, Lit, Note, Region, Var
from .._traced._trace import _ACTIVE, Builder, Tracer, noting, swap_note

__all__ = ["Residuals", "bind_regions", "name_traced", "trace_region"]


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
def _in_region(e: Eqn, r: Region) -> bool:
    q = e.note.region if e.note is not None else None
    while q is not None:
        if q is r:
            return True
        q = q.parent
    return False


class Residuals:
    """Where the reverse sweep reads an equation's residuals.  A value interior to a
    checkpoint region (made inside it, not kept by its policy) is re-emitted on demand
    from the region's boundary, once, just before the first rule that reads it (with the
    interior values it depends on, annotated ``recompute``): a chain cut by saved values
    is recomputed one stage at a time.  Anything else is the forward value."""

    def __init__(self, graph: Graph, b: Builder, env: dict[Var, Any]) -> None:
        self.b, self.env, self.eqns = b, env, graph.eqns
        self.pos = {e.out: i for i, e in enumerate(graph.eqns)}
        self.rec: dict[Region, dict[Var, Any]] = {}
        self.inner: dict[Region, dict[Var, Eqn]] = {}

    def _interior(self, r: Region) -> dict[Var, Eqn]:
        got = self.inner.get(r)
        if got is None:
            got = self.inner[r] = {
                e.out: e for e in self.eqns if _in_region(e, r) and not r.saves(e)
            }
            self.rec[r] = {}
        return got

    def read(self, a: Var | Lit, region: Region | None) -> Any:
        """``a`` as the rules of an equation in ``region`` see it. O(1) when cached."""
        if isinstance(a, Lit):
            return a.value if a.is_scalar else Tracer(self.b, a)
        r = region
        while r is not None:
            if a in self._interior(r):
                got = self.rec[r].get(a)
                return got if got is not None else self._recompute(a, r)
            r = r.parent
        return self.env[a]

    def _recompute(self, a: Var, r: Region) -> Any:
        interior, done = self._interior(r), self.rec[r]
        todo: list[Eqn] = []
        seen: set[Var] = set()
        stack = [a]
        while stack:  # the interior values ``a`` depends on that are not recomputed yet
            v = stack.pop()
            if v in seen or v in done:
                continue
            seen.add(v)
            e = interior[v]
            todo.append(e)
            stack.extend(x for x in e.inputs if isinstance(x, Var) and x in interior)
        todo.sort(key=lambda e: self.pos[e.out])
        prev = swap_note(Note(r, True, True, f"checkpoint:{r.chain()[0].label}"))
        try:
            for e in todo:
                args = [self.read(x, r) for x in e.inputs]
                done[e.out] = self.b.emit(e.prim, args, dict(e.params))
        finally:
            swap_note(prev)
        return done[a]


# -- binding on eager handles ------------------------------------------------------------------
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
    from ._region import checkpoint, name  # the eager front imports this module

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
    (see :func:`_bind_eqns`); the results are handles recorded on the current tape."""
    env: dict[Var, Any] = dict(zip(graph.invars, leaves, strict=True))
    _bind_eqns(graph.eqns, env, 0, {a for a in graph.outvars if isinstance(a, Var)})
    return [env[a] if isinstance(a, Var) else a.value for a in graph.outvars]


_trace.BIND_REGIONS = bind_regions
