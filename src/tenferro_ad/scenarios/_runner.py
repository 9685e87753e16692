"""Run scenarios: forward + backward under ``ledger.capture()``, then compare multisets.

The runner is split in two so each half can be tested alone: an *executor* turns a
:class:`Scenario` into an :class:`Observation` (the ledger records of one run), and
:func:`check` compares an observation with the scenario's expectations.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage import runtime as rt
from tenferro_storage.ledger import (
    AllocationReason,
    CopyReason,
    LedgerEvent,
    LedgerRecord,
    capture,
)

from .. import traced
from .._traced._compile import compile_graph
from .._traced._retained import split_halves
from ._schema import Scenario, ScenarioError

__all__ = [
    "Executor",
    "Observation",
    "ScenarioResult",
    "check",
    "execute",
    "make_inputs",
    "make_policy",
    "resolve_program",
    "run_scenarios",
]


@attrs.frozen(eq=False)
class Observation:
    """What one run of a scenario recorded.

    ``total`` spans forward and backward; ``forward``/``backward`` are the two phases
    (nested captures); ``untaped_forward`` is the same forward run with recording
    suspended (``ad.no_grad()``), the baseline that shows what retention added.
    ``gradients`` are host copies of the gradients, in ``wrt`` input order, taken
    after the captures ended.
    """

    total: LedgerRecord
    forward: LedgerRecord
    backward: LedgerRecord
    untaped_forward: LedgerRecord | None
    loss: float
    gradients: tuple[np.ndarray[Any, Any], ...]


@attrs.frozen(eq=False)
class ScenarioResult:
    """One scenario's observed ledgers and whether they matched the expectations.

    ``retention_allocations``/``retention_copies`` are the allocation and copy events
    the taped forward made beyond the untaped forward (the contract requires both zero).
    ``mismatches`` lists every failed expectation in words; empty means the scenario passed.
    """

    scenario: Scenario
    observation: Observation
    allocations: Counter[AllocationReason]
    copies: Counter[CopyReason]
    allocation_bytes: Counter[AllocationReason]
    copy_bytes: Counter[CopyReason]
    peak_bytes: int
    retention_allocations: int
    retention_copies: int
    mismatches: tuple[str, ...]

    @property
    def passed(self) -> bool:
        """True when every expectation held."""
        return not self.mismatches

    @property
    def events(self) -> list[LedgerEvent]:
        """Every ledger event of the run (forward and backward), in order."""
        return self.observation.total.events

    def timeline(self) -> list[tuple[int, dict[AllocationReason, int]]]:
        """Live bytes by reason after each allocate/release event of the run."""
        return self.observation.total.timeline()


Executor = Callable[[Scenario], Observation]


def resolve_program(scenario: Scenario) -> Callable[..., Any]:
    """Import ``scenario.program`` (``"package.module:function"``).

    Raises :class:`ScenarioError` naming the scenario's file and ``program`` key when
    the module cannot be imported or has no such callable.
    """
    module_name, _, attr = scenario.program.partition(":")
    where = f"{scenario.source}: scenario {scenario.name!r}: program"
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ScenarioError(f"{where}: cannot import module {module_name!r} ({exc})") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ScenarioError(f"{where}: module {module_name!r} has no callable {attr!r}")
    return fn  # type: ignore[no-any-return]


def make_policy(scenario: Scenario) -> Any:
    """The checkpoint policy object the scenario asks for, or ``None`` without checkpointing."""
    if not scenario.checkpoint:
        return None

    if scenario.policy == "save_named":
        return ad.save_named(*scenario.policy_labels)
    return getattr(ad, scenario.policy)


def make_inputs(scenario: Scenario) -> list[ts.Tensor[Any, Any]]:
    """Fresh owners for the scenario's inputs (seeded; the same values on every call).

    ``normal`` draws N(0, scale^2); ``uniform`` draws U[0, scale).  One
    ``OPERATION_OUTPUT`` allocation per input; callers make them outside the capture.
    """
    rng = ts.random.default_rng(scenario.seed)
    out: list[ts.Tensor[Any, Any]] = []
    for spec in scenario.inputs:
        if spec.init == "normal":
            out.append(rng.normal(spec.shape, scale=spec.scale, dtype=spec.dtype))
        else:
            out.append(rng.uniform(spec.shape, high=spec.scale, dtype=spec.dtype))
    return out


def _run_taped(
    scenario: Scenario,
    program: Callable[..., Any],
    policy: Any,
) -> tuple[LedgerRecord, LedgerRecord, LedgerRecord, float, list[ts.Tensor[Any, Any] | None]]:
    inputs = make_inputs(scenario)
    wrt_index = [i for i, spec in enumerate(scenario.inputs) if spec.wrt]
    with capture() as total:
        with capture() as forward:
            tape = ad.Tape()
            with tape:
                handles = [tape.watch(t) for t in inputs]
                del inputs
                loss = program(*handles, checkpoint=policy, **scenario.kwargs)
        with capture() as backward:
            grads = tape.backward(loss, wrt=[handles[i] for i in wrt_index])
        loss_value = float(loss.item())
        owners = [grads.take_grad(handles[i]) for i in wrt_index]
        del grads, handles, loss, tape
    return total, forward, backward, loss_value, owners


def _run_untaped(scenario: Scenario, program: Callable[..., Any], policy: Any) -> LedgerRecord:
    inputs = make_inputs(scenario)
    with capture() as forward:
        tape = ad.Tape()
        with tape:
            handles = [tape.watch(t) for t in inputs]
            del inputs
            with ad.no_grad():
                loss = program(*handles, checkpoint=policy, **scenario.kwargs)
        del loss, handles, tape
    return forward


def _submit(program: Any, group: ts.AllocationGroup, slots: Sequence[Any], what: str) -> Any:
    outcome = rt.submit(rt.host_engine(), program, rt.ExecutionInputs(group, slots)).wait()
    if not isinstance(outcome, rt.Completed):
        raise ScenarioError(f"traced scenario: the {what} program failed: {outcome!r}")
    return outcome.bundle


def _grouped(scenario: Scenario) -> tuple[ts.AllocationGroup, list[Any]]:
    group = ts.AllocationGroup()
    return group, [group.insert(t) for t in make_inputs(scenario)]


def _execute_traced(scenario: Scenario) -> Observation:
    """Traced mode: trace the program, cut its ``value_and_grad`` graph into forward and
    backward halves (``split_halves``), compile each without buffer reuse, and run them
    detached on one group: the forward execution's bundle (inputs, loss, residuals) is
    resubmitted with the residual slots as the backward's bindings, so the residuals are
    descriptors of the execution's group, never shared owners.  The untaped baseline is
    the primal program compiled alone.  Tracing and compiling happen before the captures.
    """
    program = resolve_program(scenario)
    policy = make_policy(scenario)
    kwargs = scenario.kwargs
    wrt = tuple(i for i, spec in enumerate(scenario.inputs) if spec.wrt)

    def loss_fn(*xs: Any) -> Any:
        return program(*xs, checkpoint=policy, **kwargs)

    shapes = [np.empty(spec.shape, spec.dtype) for spec in scenario.inputs]
    primal = traced.trace(loss_fn)(*shapes)
    halves = split_halves(traced.value_and_grad(primal, argnums=wrt))
    fprog = compile_graph(halves.forward, f"{scenario.name}.forward", reuse=False)
    bprog = compile_graph(halves.backward, f"{scenario.name}.backward", reuse=False)
    n_out = len(halves.forward.outvars) - len(halves.residuals)
    group, slots = _grouped(scenario)
    with capture() as total:
        with capture() as forward:
            fbundle = _submit(fprog, group, slots, "forward")
        where, k = halves.placement[0]
        assert where == "forward"
        view = fbundle.output(k)
        loss_value = float(np.asarray(ts.kernel.read_array(view)))
        view.release()
        group, fouts = fbundle.into_group()
        with capture() as backward:
            bbundle = _submit(bprog, group, fouts[n_out:], "backward")
        bgroup = bbundle.group
        owners = [
            bgroup.try_extract(fouts[i] if half == "forward" else bbundle.outputs[i])
            for half, i in halves.placement[1:]
        ]
        del bbundle, bgroup, fbundle, group
    grads = tuple(np.asarray(ts.kernel.read_array(g)).copy() for g in owners)
    del owners
    uprog = compile_graph(primal, f"{scenario.name}.primal", reuse=False)
    ugroup, uslots = _grouped(scenario)
    with capture() as untaped:
        ubundle = _submit(uprog, ugroup, uslots, "primal")
        del ubundle
    return Observation(total, forward, backward, untaped, loss_value, grads)


def execute(scenario: Scenario) -> Observation:
    """Run the scenario's program forward and backward (the default executor): on a tape
    (``mode = "eager"``), or traced, compiled and run through the runtime
    (``mode = "traced"``, see :func:`_execute_traced`).

    The inputs are made outside the capture; the forward runs under one nested
    capture and ``tape.backward`` under another; gradients are moved out with
    ``take_grad`` and converted to host arrays after the captures end.  A second,
    untaped forward run (``ad.no_grad()``) is captured as the retention baseline.
    Cost: two forward runs and one backward run of the program.
    """
    if scenario.mode == "traced":
        return _execute_traced(scenario)
    program = resolve_program(scenario)
    policy = make_policy(scenario)
    total, forward, backward, loss, owners = _run_taped(scenario, program, policy)
    grads = tuple(
        np.zeros(0) if g is None else np.asarray(ts.kernel.read_array(g)).copy() for g in owners
    )
    del owners
    untaped = _run_untaped(scenario, program, policy)
    return Observation(total, forward, backward, untaped, loss, grads)


def _fmt(counter: Iterable[tuple[Any, int]]) -> str:
    items = sorted(counter, key=lambda p: p[0].value)
    return ", ".join(f"{r.value}={n}" for r, n in items) or "none"


def _multiset_mismatch(
    what: str, expected: Sequence[tuple[Any, int]], observed: Counter[Any]
) -> str | None:
    exp = Counter(dict(expected))
    obs = Counter({r: n for r, n in observed.items() if n})
    if exp == obs:
        return None
    diff = sorted(set(exp) | set(obs), key=lambda r: r.value)
    detail = "; ".join(
        f"{r.value}: expected {exp[r]}, observed {obs[r]}" for r in diff if exp[r] != obs[r]
    )
    return f"{what} differ ({detail})"


def _forward_counts(rec: LedgerRecord) -> tuple[Counter[AllocationReason], Counter[CopyReason]]:
    return rec.allocations, rec.copies


def check(scenario: Scenario, observation: Observation) -> ScenarioResult:
    """Compare an observation with the scenario's expectations. O(events).

    Checks the exact allocation and copy multisets, the byte tables and the peak
    bound when given, and that the taped forward allocated and copied exactly what
    the untaped forward did (retention adds neither an allocation nor a copy).
    """
    total = observation.total
    allocations, copies = total.allocations, total.copies
    allocation_bytes, copy_bytes = total.allocation_bytes, total.copy_bytes
    exp = scenario.expect
    mismatches = [
        m
        for m in (
            _multiset_mismatch("allocations", exp.allocations, allocations),
            _multiset_mismatch("copies", exp.copies, copies),
            None
            if exp.allocation_bytes is None
            else _multiset_mismatch("allocation bytes", exp.allocation_bytes, allocation_bytes),
            None
            if exp.copy_bytes is None
            else _multiset_mismatch("copy bytes", exp.copy_bytes, copy_bytes),
        )
        if m is not None
    ]
    if exp.max_peak_bytes is not None and total.peak_bytes > exp.max_peak_bytes:
        mismatches.append(
            f"peak live bytes {total.peak_bytes} exceed max_peak_bytes {exp.max_peak_bytes}"
        )
    retention_allocs = retention_copies = 0
    if observation.untaped_forward is not None:
        fa, fc = _forward_counts(observation.forward)
        ua, uc = _forward_counts(observation.untaped_forward)
        retention_allocs = sum(fa.values()) - sum(ua.values())
        retention_copies = sum(fc.values()) - sum(uc.values())
        if fa != ua or fc != uc:
            mismatches.append(
                "retention is not free: the taped forward recorded allocations "
                f"[{_fmt(fa.items())}] and copies [{_fmt(fc.items())}] but the untaped forward "
                f"recorded [{_fmt(ua.items())}] and [{_fmt(uc.items())}]"
            )
    return ScenarioResult(
        scenario=scenario,
        observation=observation,
        allocations=allocations,
        copies=copies,
        allocation_bytes=allocation_bytes,
        copy_bytes=copy_bytes,
        peak_bytes=total.peak_bytes,
        retention_allocations=retention_allocs,
        retention_copies=retention_copies,
        mismatches=tuple(mismatches),
    )


def run_scenarios(
    scenarios: Iterable[Scenario],
    executor: Executor = execute,
) -> list[ScenarioResult]:
    """Execute and check each scenario in order. Cost: one executor call per scenario."""
    return [check(s, executor(s)) for s in scenarios]
