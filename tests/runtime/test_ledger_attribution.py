"""Ledger captures are per thread; work an asynchronous engine runs for a submitter counts
as the submitter's, so its capture sees the allocations its program made."""

from __future__ import annotations

import numpy as np

import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage import runtime as rt
from tenferro_storage.providers import SimulatedAsyncProvider


def test_submitters_capture_sees_the_allocations_of_its_asynchronous_program() -> None:
    b = rt.ProgramBuilder(1, name="double")
    (x,) = b.inputs
    program = b.build(b.apply(np.add, x, x))
    with SimulatedAsyncProvider(name="attribution") as provider:
        engine = provider.engine
        assert engine is not None
        group = ts.AllocationGroup()
        slot = group.insert(ts.arange(4.0))
        with ledger.capture() as rec:
            outcome = rt.submit(engine, program, rt.ExecutionInputs(group, [slot])).wait()
        assert isinstance(outcome, rt.Completed)
        # the program's one fresh output was allocated on the worker thread, for us
        assert rec.allocations == {ts.AllocationReason.OPERATION_OUTPUT: 1}
        out = outcome.bundle.into_output(0)
        np.testing.assert_array_equal(rt.download(out).to_numpy(), 2 * np.arange(4.0))
        del outcome, out
