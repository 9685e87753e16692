"""A hypothesis state machine for detached submission against a small reference model.

Random sequences of: make a package, borrow it, submit it (with or without an injected
fault), drop or wait a handle, extract an output or resubmit returned inputs.  After
every step: each rejection returned the exact package, every admitted submission has
one record that is released or retained, and the number of retained records is exactly
the number of submissions whose completion the model says cannot be proven.
"""

from __future__ import annotations

import gc
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, precondition, rule

import tenferro_storage as ts
from tenferro_storage import runtime as rt
from tenferro_storage.errors import SubmitRejected
from tenferro_storage.providers import Fault, SimulatedAsyncProvider

from .support import axpy_program

UNPROVEN = {Fault.PANIC_UNPROVEN, Fault.EVENT_NEVER_COMPLETES}
REJECTING = {Fault.REJECT_BEFORE_ADMISSION, Fault.BIND_FAILURE}
FAILING = {Fault.FAIL_AFTER_ENQUEUE, Fault.PANIC_PROVEN}


class Submission(RuleBasedStateMachine):
    packages = Bundle("packages")
    handles = Bundle("handles")

    def __init__(self) -> None:
        super().__init__()
        self.sim = SimulatedAsyncProvider(completion_timeout=0.001, name="stateful")
        self.engine = rt.register_engine(self.sim)
        self.program = axpy_program()
        self.admitted = 0
        self.expected_unproven = 0
        self.views: list[Any] = []

    @rule(target=packages, n=st.integers(0, 4))
    def make_package(self, n: int) -> rt.ExecutionInputs:
        g = ts.AllocationGroup()
        a = g.insert(ts.arange(float(n)))
        b = g.insert(ts.ones(n))
        return rt.ExecutionInputs(g, [a, b])

    @rule(pkg=packages)
    def borrow(self, pkg: rt.ExecutionInputs) -> None:
        if pkg._moved_by is None and not self.views:
            self.views.append(pkg.group.view(pkg.bindings[0]))

    @precondition(lambda self: bool(self.views))
    @rule()
    def release_borrows(self) -> None:
        for v in self.views:
            v.release()
        self.views.clear()

    @rule(target=handles, pkg=packages, fault=st.none() | st.sampled_from(list(Fault)))
    def submit(self, pkg: rt.ExecutionInputs, fault: Fault | None) -> Any:
        live = pkg._moved_by is None
        borrowed = live and (pkg.group._shared > 0)
        if fault is not None:
            self.sim.inject(fault)
        try:
            handle = rt.submit(self.engine, self.program, pkg)
        except SubmitRejected as exc:
            cause, back = exc.into_parts()
            assert back is pkg
            assert (not live) or borrowed or fault in REJECTING, cause
            if fault is not None and (not live or borrowed):
                self.sim._next_fault()  # the fault was never consumed by the provider
            return None
        assert live and not borrowed and fault not in REJECTING
        self.admitted += 1
        self.expected_unproven += fault in UNPROVEN
        return (handle, fault)

    @rule(item=handles)
    def drop(self, item: Any) -> None:
        if item is not None and item[0]._cell is not None:
            item[0].detach()

    @rule(target=packages, item=handles)
    def wait(self, item: Any) -> Any:
        if item is None or item[0]._cell is None:
            return self.make_package(1)
        handle, fault = item
        out = handle.wait(30)
        if fault in UNPROVEN:
            assert isinstance(out, rt.CompletionUnproven)
            return self.make_package(1)
        if fault in FAILING:
            assert isinstance(out, rt.RetiredFailed)
            return out.inputs  # the exact owners come back and can be resubmitted
        assert isinstance(out, rt.Completed)
        out.bundle.into_output(0)
        return self.make_package(1)

    @invariant()
    def records_are_accounted_for(self) -> None:
        assert self.sim.drain(30)
        c = self.sim.counters
        assert c.records_created == self.admitted
        assert c.records_created == c.records_released + c.records_retained
        assert c.records_retained == self.expected_unproven

    def teardown(self) -> None:
        for v in self.views:
            v.release()
        self.views.clear()
        self.sim.close()
        rt.unregister_engine(self.engine)
        del self.sim
        gc.collect()


TestSubmission = Submission.TestCase
# Runs per session: the profile's count, scaled down (dev 20, ci 40, thorough 400): each
# run ends with gc.collect(), which is slow late in a long run (big heap).
TestSubmission.settings = settings(
    max_examples=max(20, settings().max_examples * 2 // 5),
    stateful_step_count=25,
    deadline=None,
)
