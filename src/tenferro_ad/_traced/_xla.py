"""Compiling a traced graph for the XLA engine: the lowered function, its output map and
its donation plan, as one :class:`~tenferro_storage.runtime.ExecutableProgram`.

The graph's outputs become the program's outputs as for a host program: an input
returned as is is ``IDENTITY`` (no result, no copy), a value returned twice is
``REPEATED``, everything else a ``FRESH`` result of the executable.  A donated input
leaf is aliased to the first fresh result of its shape and dtype (XLA's own matching),
which must not be the leaf itself; none -> ``DonationError`` before anything runs.

A literal array the graph holds (a numpy constant's snapshot, a captured owner or handle
read in place by the host engine) is lowered as a constant of the executable: XLA keeps
its own copy of the bytes, so compiling records one ``TRANSFER`` per such literal
(``ledger.forbid_copies()`` refuses the compilation); scalars are code, not copies.
"""

from __future__ import annotations

from typing import Any

from tenferro_storage.kernel import record_transfer
from tenferro_storage.runtime import ExecutableProgram, OutputKind, ProgramOutput

from ..errors import DonationError
from ._graph import Graph, Lit, Var, type_str
from ._lowering import lower_graph, result_atoms


def compile_xla(
    graph: Graph, provider: Any, name: str, donate: tuple[int, ...] = ()
) -> ExecutableProgram:
    """Lower ``graph`` (``LoweringError`` for a primitive without a rule) and compile it on
    ``provider`` (an ``XlaProvider``).  Cost: one trace of the lowered function and one
    XLA compilation."""
    fn = lower_graph(graph, provider.namespace, f"jit({name})")
    for lit in _embedded(graph):
        record_transfer(lit.value.nbytes, f"jit({name}): a constant lowered into the executable")
    results = result_atoms(graph)
    n = len(graph.invars)
    var_slot = {a: n + k for k, a in enumerate(results) if isinstance(a, Var)}
    lit_slots = iter([n + k for k, a in enumerate(results) if isinstance(a, Lit)])
    index_of = {v: i for i, v in enumerate(graph.invars)}
    outputs: list[ProgramOutput] = []
    seen: set[int] = set()
    for a in graph.outvars:
        if isinstance(a, Lit):
            v = next(lit_slots)  # each literal output is its own result, in order
        else:
            v = index_of[a] if a in index_of else var_slot[a]
        kind = (
            OutputKind.REPEATED if v in seen
            else OutputKind.IDENTITY if v < n
            else OutputKind.FRESH
        )
        seen.add(v)
        outputs.append(ProgramOutput(kind, v))
    backing = _backing(graph, results, donate, name)
    return provider.compile(  # type: ignore[no-any-return]
        fn,
        [(v.shape, v.dtype) for v in graph.invars],
        tuple(outputs),
        len(results),
        name=name,
        donated=tuple(sorted(donate)),
        backing=backing,
        description=f"{len(graph.eqns)} equations lowered to XLA",
    )


def _embedded(graph: Graph) -> list[Lit]:
    """The distinct array literals the lowered function turns into XLA constants (equation
    inputs and outputs; scalars are not arrays). O(equation inputs)."""
    seen: dict[int, Lit] = {}
    for a in (*(x for e in graph.eqns for x in e.inputs), *graph.outvars):
        if isinstance(a, Lit) and not a.is_scalar:
            seen.setdefault(id(a), a)
    return list(seen.values())


def _backing(
    graph: Graph, results: list[Any], donate: tuple[int, ...], name: str
) -> tuple[tuple[int, int], ...]:
    """Donated input slot -> the result XLA writes into its buffer. O(donated x results)."""
    n = len(graph.invars)
    taken: set[int] = set()
    pairs: list[tuple[int, int]] = []
    outs = set(a for a in graph.outvars if isinstance(a, Var))
    for k in sorted(donate):
        v = graph.invars[k]
        if v in outs:
            raise DonationError(
                f"jit({name}): donated argument leaf {k} is returned as is; a donated buffer "
                "is overwritten, so it cannot also be an output"
            )
        slot = next(
            (n + j for j, a in enumerate(results)
             if n + j not in taken and a.shape == v.shape and a.dtype == v.dtype),
            None,
        )
        if slot is None:
            raise DonationError(
                f"jit({name}): donated argument leaf {k} ({type_str(v.shape, v.dtype)}) has no "
                "result of its shape and dtype for XLA to write into its buffer"
            )
        taken.add(slot)
        pairs.append((slot, k))
    return tuple(pairs)
