"""Compiling a :class:`~._graph.Graph` into the runtime's program format.

``compile_graph(graph)`` returns a :class:`tenferro_storage.runtime.CompiledGraph`:

* value slots ``0 .. n-1`` are the graph's inputs (in leaf order);
* each equation becomes one :class:`~tenferro_storage.runtime.Instruction` whose kernel
  is the primitive's own ``impl`` (:class:`EqnKernel` re-inserts scalar and constant
  literals between the slot arrays, so the runtime sees only array inputs);
* metadata-only equations (``prim.alias``: reshape, transpose, broadcast_to, basic
  slicing ...) are *not* instructions: they are folded into every consumer's kernel as
  a view prologue (O(1) numpy views, no allocation, no copy), and their source slot
  lives until the last consumer of any such view;
* ``release_after`` releases each intermediate right after its last reader — the
  liveness the runtime enforces (every intermediate released exactly once);
* outputs: an equation's value is ``FRESH`` (``REPEATED`` the second time), an input
  returned as is is ``IDENTITY``; an output that is only a view, or a literal, gets a
  small layout instruction (one allocation, a kernel write).

The compiler knows no ops: it reads ``prim.impl``, ``prim.alias`` and the equations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tenferro_storage.runtime import CompiledGraph, Instruction, OutputKind, ProgramOutput

from ._graph import Graph, Lit, Var
from ._primitive import Primitive

# A view: its base (a slot index or a literal) and the metadata-only steps applied to it.
_Step = tuple[Primitive, tuple[Any, ...], tuple[tuple[str, Any], ...]]
_Chain = tuple[int | Lit, tuple[_Step, ...]]


class EqnKernel:
    """The kernel of one instruction: ``impl(*args, **params)`` where each argument is a
    slot array, a literal, or a view chain applied to a slot array; the result is
    returned fresh and C-contiguous (a view is laid out afresh: a kernel write)."""

    __slots__ = ("__name__", "direct", "impl", "pattern")

    def __init__(self, name: str, impl: Any, pattern: Sequence[Any]) -> None:
        self.__name__ = name
        self.impl = impl
        self.pattern = tuple(pattern)
        # the common case: the arguments are exactly the slot arrays, in order
        self.direct = all(p[0] == "slot" and p[1] == i for i, p in enumerate(self.pattern))

    def __call__(self, *arrays: Any, **params: Any) -> Any:
        args = arrays if self.direct else [_arg(p, arrays) for p in self.pattern]
        r = self.impl(*args, **params)
        if type(r) is not np.ndarray:
            return np.asarray(r)
        if r.base is None and r.flags.carray:
            for a in args:
                if r is a:  # an input handed back: lay it out afresh
                    return np.array(r, order="C")
            return r
        return np.array(r, order="C")

    def __repr__(self) -> str:
        return f"EqnKernel({self.__name__})"


def _arg(p: Any, arrays: Sequence[Any]) -> Any:
    kind = p[0]
    if kind == "slot":
        return arrays[p[1]]
    if kind == "lit":
        return p[1]
    a = arrays[p[1]] if kind == "view" else p[1]  # apply the metadata-only chain
    for prim, lits, params in p[2]:
        a = prim.impl(a, *lits, **dict(params))
    return a


def _label(name: str, pattern: Sequence[Any]) -> str:
    """``mul<_,2.0>``, ``matmul<_,transpose(_)>``: where literals and views enter."""
    if all(p[0] == "slot" for p in pattern):
        return name
    parts = []
    for p in pattern:
        if p[0] == "slot":
            parts.append("_")
        elif p[0] == "lit":
            parts.append(_lit_label(p[1]))
        else:
            inner = "_" if p[0] == "view" else _lit_label(p[1])
            parts.append("".join(f"{c[0].name}(" for c in reversed(p[2])) + inner + ")" * len(p[2]))
    return f"{name}<{','.join(parts)}>"


def _lit_label(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return repr(v.item()) if v.size == 1 else "const"
    return repr(v)


def _layout(a: Any) -> Any:
    return np.array(a, order="C")


def compile_graph(graph: Graph, name: str = "") -> CompiledGraph:
    """The runtime program of ``graph`` (see the module docstring). O(size of the graph)."""
    n_in = len(graph.invars)
    slot: dict[Var, int] = {v: i for i, v in enumerate(graph.invars)}
    views: dict[Var, _Chain] = {}
    pending: list[tuple[str, Any, list[Any], tuple[tuple[str, Any], ...], int]] = []
    n_values = n_in

    def source(a: Any) -> tuple[Any, int | None]:
        """(pattern entry, the slot it reads or None) for one equation input."""
        if isinstance(a, Lit):
            return ("lit", a.value), None
        if a in views:
            base, chain = views[a]
            if isinstance(base, Lit):
                return ("lview", base.value, chain), None
            return ("view", base, chain), base
        return ("slot", slot[a]), slot[a]

    for e in graph.eqns:
        first = e.inputs[0] if e.inputs else None
        if e.prim.alias and first is not None and all(isinstance(a, Lit) for a in e.inputs[1:]):
            base: int | Lit
            chain: tuple[_Step, ...]
            if isinstance(first, Lit):
                base, chain = first, ()
            else:
                base, chain = views[first] if first in views else (slot[first], ())
            lits = tuple(a.value for a in e.inputs[1:] if isinstance(a, Lit))
            views[e.out] = (base, (*chain, (e.prim, lits, tuple(sorted(e.params.items())))))
            continue
        pattern, reads = [], []
        for a in e.inputs:
            p, s = source(a)
            if s is not None:
                if s not in reads:
                    reads.append(s)
                p = (p[0], reads.index(s), *p[2:])
            pattern.append(p)
        label = _label(e.prim.name, pattern)
        kernel = EqnKernel(label, e.prim.impl, pattern)
        slot[e.out] = n_values
        pending.append((label, kernel, reads, tuple(sorted(e.params.items())), n_values))
        n_values += 1
    outputs: list[ProgramOutput] = []
    seen: set[int] = set()
    for a in graph.outvars:
        if isinstance(a, Lit) or a in views:  # a layout instruction makes it a value
            p, s = source(a)
            reads = [] if s is None else [s]
            if s is not None:
                p = (p[0], 0, *p[2:])
            pending.append(("layout", EqnKernel("layout", _layout, [p]), reads, (), n_values))
            v = n_values
            n_values += 1
        else:
            v = slot[a]
        kind = (OutputKind.REPEATED if v in seen
                else OutputKind.IDENTITY if v < n_in else OutputKind.FRESH)
        seen.add(v)
        outputs.append(ProgramOutput(kind, value=v))
    last: dict[int, int] = {}
    for i, (_n, _k, reads, _p, out) in enumerate(pending):
        last[out] = i
        for s in reads:
            last[s] = i
    releases: dict[int, list[int]] = {}
    for s, i in last.items():
        if s >= n_in and s not in seen:
            releases.setdefault(i, []).append(s)
    instructions = tuple(
        Instruction(kernel, tuple(reads), (out,), params, tuple(sorted(releases.get(i, ()))), nm)
        for i, (nm, kernel, reads, params, out) in enumerate(pending)
    )
    return CompiledGraph(n_in, n_values, instructions, tuple(outputs), name)
