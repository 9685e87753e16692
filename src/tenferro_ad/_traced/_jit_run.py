"""How a compiled ``jit`` entry runs on its engine: the XLA engine's prepared call over
whole owners (``FastPlan``), scoped read-only execution over borrowed storage, and
detached submission (numpy arguments imported, donated owners moved in).  ``_jit.py``
decides which path a call takes; this module only runs it and turns the outcome into
fresh owners or an :class:`~tenferro_ad.errors.ExecutionFailed`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

import tenferro_storage as ts
from tenferro_storage import runtime as rt
from tenferro_storage.errors import TenferroError
from tenferro_storage.runtime._engine import lookup

from ..errors import DonationError, ExecutionFailed
from ._graph import Graph, TreeDef

_SCALARS = (bool, int, float, complex)
_borrow = ts.kernel.borrow_named
STORAGE = (ts.Tensor, ts.TensorView, ts.TensorViewMut)


@attrs.frozen(eq=False)
class Compiled:
    """One cache entry: the traced graph, its runtime program (a host ``CompiledGraph`` or
    an XLA ``ExecutableProgram``) and the seconds spent tracing and compiling it."""

    graph: Graph
    program: rt.CompiledGraph | rt.ExecutableProgram
    compile_seconds: float


@attrs.frozen(eq=False)
class FastPlan:
    """What a signature's XLA call over whole owners needs beyond its inputs: the prepared
    call (checks done once; it declines owners of another signature), each output's
    result index and whether it repeats an earlier output (a recorded
    ``EXPLICIT_DUPLICATE``), whether the outputs are the results as they come (then no
    per-output work), and the output structure."""

    call: Any  # tenferro_storage.providers.ScopedCall
    outputs: tuple[tuple[int, bool], ...]
    out_tree: TreeDef
    engine: rt.EngineId
    direct: bool


UNPLANNED: Any = object()


def owner_signature(leaves: Sequence[Any]) -> tuple[Any, ...] | None:
    """Each leaf's (shape, dtype) when every leaf is a live, unborrowed-for-writing owner
    (else ``None``: the general path). O(leaves), no allocation beyond the tuple."""
    sig = []
    for x in leaves:
        if type(x) is not ts.Tensor or x._moved_by is not None or x._exclusive is not None:
            return None
        d = x._desc
        sig.append((d.shape, d.dtype))
    return tuple(sig)


def plan_fast(engine: rt.EngineId, entry: Compiled, sig: tuple[Any, ...]) -> FastPlan | None:
    """The fast plan of an XLA program over owners of signature ``sig`` whose outputs are
    all its own results (an input returned as is takes the general path). O(outputs),
    once per signature."""
    program = entry.program
    if not isinstance(program, rt.ExecutableProgram):
        return None
    call = lookup(engine).prepare_scoped(program, sig)  # type: ignore[union-attr]
    if call is None or rt.OutputKind.IDENTITY in program.output_kinds:
        return None
    n = program.n_inputs
    outputs = tuple(
        (o.value - n, o.kind is rt.OutputKind.REPEATED) for o in program.outputs
        if o.value is not None
    )
    direct = outputs == tuple((k, False) for k in range(program.n_results))
    return FastPlan(call, outputs, entry.graph.out_tree, engine, direct)


def fast_call(plan: FastPlan, leaves: Sequence[Any]) -> list[Any] | None:
    """Run a planned call: fresh result owners in output order (a repeated output is a
    recorded copy, as on the general path); ``None``: take the general path (or another
    signature's plan). O(leaves + outputs) plus the execution."""
    results = plan.call(leaves)
    if results is None or type(results) is list:
        if results is None or plan.direct:
            return results
        return [results[k].duplicate() if again else results[k] for k, again in plan.outputs]
    raise ExecutionFailed(f"jit: the program failed on {plan.engine}: {results}", results)


def fn_name(f: Any) -> str:
    return str(getattr(f, "__name__", "f"))


def donation_inputs(
    f: Any, engine: rt.EngineId, leaves: Sequence[Any], donated: tuple[int, ...]
) -> list[Any]:
    """Check every leaf of a donating call before anything is consumed: donated leaves are
    unborrowed owners or numpy values, the others numpy values, and the engine writes
    into inputs.  Returns the leaves (owners are consumed by the submission). O(leaves)."""
    provider = lookup(engine)
    if not getattr(provider, "supports_donation", False):
        raise DonationError(f"jit({fn_name(f)}): {engine} does not write into donated inputs")
    refusal = getattr(provider, "donation_refusal", None)
    seen: set[int] = set()
    for i, x in enumerate(leaves):
        if i in donated:
            if isinstance(x, ts.Tensor):
                if id(x) in seen:
                    raise DonationError(
                        f"jit({fn_name(f)}): donated argument leaf {i} is an owner already "
                        "passed as another leaf; one owner is consumed once"
                    )
                seen.add(id(x))
                try:  # an exclusive borrow succeeds only on a live, unborrowed owner
                    with x.as_view_mut():
                        pass
                except TenferroError as exc:
                    raise DonationError(
                        f"jit({fn_name(f)}): donated argument leaf {i} cannot be consumed: {exc}"
                    ) from None
            if refusal is not None and (why := refusal(x)):
                raise DonationError(f"jit({fn_name(f)}): donated argument leaf {i}: {why}")
            if isinstance(x, ts.Tensor):
                pass
            elif isinstance(x, STORAGE):
                raise DonationError(
                    f"jit({fn_name(f)}): donated argument leaf {i} is a {type(x).__name__} (a "
                    "borrow, never written by a call); donate the owner itself"
                )
        elif isinstance(x, STORAGE):
            raise DonationError(
                f"jit({fn_name(f)}): a donating call runs detached and owns every input, but "
                f"argument leaf {i} is a borrowed {type(x).__name__}; donate it as well, or "
                "pass a numpy array"
            )
    return list(leaves)


def _imported(x: Any, dtype: np.dtype[Any]) -> ts.Tensor[Any, Any]:
    if isinstance(x, ts.Tensor):  # a donated owner: consumed by the group, no copy
        return x
    return ts.from_numpy(np.asarray(x, dtype=dtype) if isinstance(x, _SCALARS) else x)


def run_detached(engine: rt.EngineId, entry: Compiled, leaves: Sequence[Any]) -> list[Any]:
    group = ts.AllocationGroup()
    slots = [group.insert(_imported(x, v.dtype)) for x, v in zip(leaves, entry.graph.invars,
                                                                  strict=True)]
    outcome = rt.submit(engine, entry.program, rt.ExecutionInputs(group, slots)).wait()
    if isinstance(outcome, rt.RetiredFailed):
        raise _failed_donation(engine, entry.program, leaves, outcome)
    if not isinstance(outcome, rt.Completed):
        raise ExecutionFailed(f"jit: the program failed on {engine}: {outcome.cause}",
                              outcome.cause)
    bundle = outcome.bundle
    group = bundle.group
    taken: dict[Any, ts.Tensor[Any, Any]] = {}
    outs: list[Any] = []
    for out, kind in zip(bundle.outputs, bundle.kinds, strict=True):
        if kind is rt.OutputKind.REPEATED:  # the same value twice: an explicit copy
            outs.append(taken[out].duplicate())
        else:
            assert isinstance(out, ts.DescriptorSlot)  # programs from graphs have no metadata
            t = group.try_extract(out)
            domain = ts.providers.domain_of(t)
            if domain != "host" and not domain.startswith("xla-"):
                t = rt.download(t)  # simulated device memory: one recorded TRANSFER
            taken[out] = t
            outs.append(t)
    return outs


def _failed_donation(
    engine: rt.EngineId,
    program: rt.CompiledGraph | rt.ExecutableProgram,
    leaves: Sequence[Any],
    outcome: rt.RetiredFailed[rt.ExecutionInputs],
) -> ExecutionFailed:
    """The exception for a failed detached run: donated owners the program did not write
    go back into the caller's objects, written ones into ``.donated``. O(donated)."""
    group, bindings = outcome.inputs.into_parts()
    handed: dict[int, ts.Tensor[Any, Any]] = {}
    for k in program.donated:
        x = leaves[k]
        if not isinstance(x, ts.Tensor):
            continue  # a numpy argument: only its import was written
        owner = group.try_extract(bindings[k])  # donation proved it is the sole record
        if k in outcome.clobbered:
            handed[k] = owner
        else:
            x._take_back(owner, "jit")
    clobbered = tuple(k for k in outcome.clobbered if isinstance(leaves[k], ts.Tensor))
    note = (
        f"; donated argument leaf(s) {list(clobbered)} hold what the program wrote "
        "(handed over in .donated)" if clobbered else ""
    )
    return ExecutionFailed(
        f"jit: the program failed on {engine}: {outcome.cause}{note}",
        outcome.cause,
        handed,
        clobbered,
    )


def run_scoped(engine: rt.EngineId, entry: Compiled, leaves: Sequence[Any]) -> list[Any]:
    views, imported = [], []
    holder = f"jit({entry.program.name}): a running call"  # named borrows: no call-site walk
    try:
        for x, v in zip(leaves, entry.graph.invars, strict=True):
            if not isinstance(x, STORAGE):
                x = _imported(x, v.dtype)
                imported.append(x)
            views.append(_borrow(x, holder))
        outcome = rt.execute_scoped_read_only(engine, entry.program, rt.ScopedReadInputs(views))
        if not isinstance(outcome, rt.Completed):
            raise ExecutionFailed(f"jit: the program failed on {engine}: {outcome.cause}",
                                  outcome.cause)
        bundle = outcome.bundle
        kinds = bundle.kinds
        group, refs = bundle.into_owned_group()
        return _scoped_outputs(group, refs, kinds)
    finally:
        for view in views:
            view.release()
        imported.clear()


def _scoped_outputs(
    group: ts.AllocationGroup, refs: Sequence[Any], kinds: Sequence[rt.OutputKind]
) -> list[Any]:
    """Fresh owners of a scoped call's outputs: a fresh output is moved out of the bundle's
    group (no copy); an input returned as is (a borrow of the caller's value) and the second
    occurrence of a value are recorded ``EXPLICIT_DUPLICATE`` copies -- two owners of one
    value need two allocations. O(outputs)."""
    taken: dict[Any, ts.Tensor[Any, Any]] = {}
    outs: list[Any] = []
    try:
        for ref, kind in zip(refs, kinds, strict=True):
            if isinstance(ref, ts.TensorView):
                outs.append(ref.duplicate())
            elif kind is rt.OutputKind.REPEATED:
                outs.append(taken[ref].duplicate())
            else:
                assert isinstance(ref, ts.DescriptorSlot)  # programs from graphs have no metadata
                taken[ref] = t = group.try_extract(ref)
                outs.append(t)
    finally:
        for ref in refs:
            if isinstance(ref, ts.TensorView):
                ref.release()
    return outs

