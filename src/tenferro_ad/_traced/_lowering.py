"""Lowering a traced graph to one XLA computation: the rule table and the lowerer.

Each primitive's lowering rule is registered next to its other rules' family, in
``ops/_lowering/<family>.py``, with :func:`deflower`, keyed by the :class:`Primitive`
object itself (as batching rules are); user primitives (``tenferro_ad.extend``) register
theirs the same way.  A primitive without a rule makes :func:`lower_graph` raise
:class:`~tenferro_ad.errors.LoweringError` naming it and its equation: a program is never
run half on the host.

Rule signature: ``rule(x, *args, **params) -> value`` where ``x`` is the lowering
namespace of the engine (``x.np`` is ``jax.numpy``, ``x.lax``, ``x.scipy``, ``x.nn``),
``args`` are traced JAX values (or Python scalars for scalar literals, as in eager mode)
and ``params`` the equation's static parameters.  The lowerer casts a result to the
equation's declared dtype (numpy's and JAX's promotion rules differ at the edges), so the
program's types are the graph's.

This module imports neither jax nor any op: the engine hands in its namespace.

Checkpoint recomputation (``Note.recompute``) is fenced: every value a recomputed
equation reads from outside its recomputation passes through
``lax.optimization_barrier`` first, so XLA cannot merge the recomputation with the
forward pass (which would undo the checkpoint's memory saving).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._core._primitive import Primitive
from ..errors import LoweringError
from ._graph import Atom, Eqn, Graph, Lit, Var, type_str

LowerRule = Callable[..., Any]
LOWERINGS: dict[Primitive, LowerRule] = {}  # keyed by the primitive object (identity)


def deflower(prim: Primitive, rule: LowerRule) -> Primitive:
    """Register ``rule`` as the XLA lowering of ``prim`` (replacing any earlier one).
    Returns ``prim``. O(1).

    Cost: no allocation; no copy; no sync; no dispatch; O(1): registers the rule.
    Raises: nothing."""
    if not isinstance(prim, Primitive):
        raise TypeError(f"deflower: expected a Primitive, got {type(prim).__name__}")
    if not callable(rule):
        raise TypeError(f"deflower({prim.name!r}): the rule must be callable")
    LOWERINGS[prim] = rule
    return prim


def missing_rules(graph: Graph) -> list[Eqn]:
    """The equations of ``graph`` whose primitive has no lowering rule. O(equations)."""
    return [e for e in graph.eqns if e.prim not in LOWERINGS]


def check_lowerable(graph: Graph, where: str) -> None:
    """Raise :class:`LoweringError` for the first equation without a lowering rule, naming
    its primitive and showing the equation. O(equations)."""
    for e in graph.eqns:
        if e.prim not in LOWERINGS:
            ins = ", ".join(
                type_str(a.shape, a.dtype) if isinstance(a, Var) else repr(a.value)
                for a in e.inputs
            )
            params = "".join(f", {k}={v!r}" for k, v in e.params.items())
            raise LoweringError(
                f"{where}: primitive {e.prim.name!r} has no XLA lowering rule, in the "
                f"equation {type_str(e.out.shape, e.out.dtype)} = {e.prim.name}({ins}"
                f"{params}). Register one with tenferro_ad.extend.deflower(prim, rule), "
                "or run this function on the host engine (jit(..., engine='host'))",
                e.prim.name,
            )


def _literal(x: Any, a: Lit) -> Any:
    if a.is_scalar:
        return a.value  # a Python scalar: weakly typed in JAX as in numpy
    return x.np.asarray(a.value)


def lower_graph(graph: Graph, x: Any, where: str = "jit") -> Callable[..., tuple[Any, ...]]:
    """The function ``f(*inputs) -> results`` that computes ``graph`` with ``x``'s JAX ops,
    to be compiled as one XLA executable.  ``results`` are the values of
    :func:`result_atoms` in order.  Raises :class:`LoweringError` first if any equation
    cannot be lowered. O(equations) per trace of the returned function."""
    return _lowered(graph, x, where, result_atoms(graph))


def lower_outputs(graph: Graph, x: Any, where: str) -> Callable[..., tuple[Any, ...]]:
    """Like :func:`lower_graph`, but the function returns one value per output of
    ``graph`` (inputs and literals included): a loop body's or a branch's lowering, traced
    by ``lax.scan``/``lax.cond`` inside the enclosing program. O(equations) per trace."""
    return _lowered(graph, x, where, list(graph.outvars))


def _lowered(
    graph: Graph, x: Any, where: str, results: list[Atom]
) -> Callable[..., tuple[Any, ...]]:
    check_lowerable(graph, where)
    rules = [LOWERINGS[e.prim] for e in graph.eqns]
    barrier = x.lax.optimization_barrier

    def run(*inputs: Any) -> tuple[Any, ...]:
        env: dict[Var, Any] = dict(zip(graph.invars, inputs, strict=True))
        recomputed: set[Var] = set()
        fenced: dict[Var, Any] = {}
        for e, rule in zip(graph.eqns, rules, strict=True):
            recompute = e.note is not None and e.note.recompute
            args: list[Any] = []
            for a in e.inputs:
                if isinstance(a, Lit):
                    args.append(_literal(x, a))
                elif recompute and a not in recomputed:
                    got = fenced.get(a)
                    if got is None:
                        got = fenced[a] = barrier(env[a])
                    args.append(got)
                else:
                    args.append(env[a])
            env[e.out] = _typed(x, rule(x, *args, **e.params), e, where)
            if recompute:
                recomputed.add(e.out)
        return tuple(
            env[a] if isinstance(a, Var) else x.np.asarray(a.value, dtype=a.dtype)
            for a in results
        )

    return run


def _typed(x: Any, out: Any, e: Eqn, where: str) -> Any:
    """``out`` in the equation's declared dtype (a complex result for a real output keeps
    its real part, as the eager casts do); a shape mismatch is a rule bug."""
    want = e.out
    out = x.np.asarray(out)
    if np.dtype(out.dtype) != want.dtype:
        if out.dtype.kind == "c" and want.dtype.kind != "c":
            out = x.np.real(out)
        out = out.astype(want.dtype)
    if tuple(out.shape) != want.shape:
        raise LoweringError(
            f"{where}: the lowering of {e.prim.name!r} produced "
            f"{type_str(tuple(out.shape), np.dtype(out.dtype))}, the equation declares "
            f"{type_str(want.shape, want.dtype)}",
            e.prim.name,
        )
    return out


def result_atoms(graph: Graph) -> list[Atom]:
    """What an executable of ``graph`` returns: every output ``Var`` that is not an input,
    once, and every literal output, in first-appearance order. O(outputs)."""
    inputs = set(graph.invars)
    out: list[Atom] = []
    seen: set[Var] = set()
    for a in graph.outvars:
        if isinstance(a, Lit):
            out.append(a)
        elif a not in inputs and a not in seen:
            seen.add(a)
            out.append(a)
    return out
