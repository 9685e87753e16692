"""Runtime guards without a public trigger (issue 16).

``OutcomeCell`` is where an engine's worker publishes the one terminal outcome of a
detached execution.  No public call publishes twice when the runtime is sound, so the
write-once guard is exercised on the cell itself (the runtime's internal surface,
``tenferro_storage.runtime._submission``).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tenferro_storage.runtime._submission import OutcomeCell


def test_an_outcome_cell_is_written_once() -> None:
    """A second ``publish`` raises and the first outcome stays; waiters are released by
    the first.

    Fails when ``OutcomeCell.publish``'s already-published check is removed (checked)."""
    cell = OutcomeCell()
    first: Any = object()
    second: Any = object()
    seen: list[Any] = []

    def waiter() -> None:
        cell._done.wait(10)
        seen.append(cell._outcome)

    th = threading.Thread(target=waiter)
    th.start()
    cell.publish(first)
    th.join()
    with pytest.raises(RuntimeError, match="already published"):
        cell.publish(second)
    assert cell._outcome is first
    assert seen == [first]


def test_bundle_output_one_past_the_end_does_not_exist() -> None:
    """A bundle of ``n`` outputs: ``output(n)`` raises ``OutputAccessError``;
    ``output(n - 1)`` is the last one.

    Fails when ``_check_index`` accepts ``i == n`` (checked)."""
    import tenferro_storage as ts
    from tenferro_storage import runtime as rt
    from tenferro_storage.errors import OutputAccessError
    from tests.runtime.support import axpy_program, inputs

    pkg, _, _ = inputs()
    outcome = rt.submit(rt.host_engine(), axpy_program(), pkg).wait(5)
    assert isinstance(outcome, rt.Completed)
    bundle = outcome.bundle
    n = len(bundle.kinds)
    with pytest.raises(OutputAccessError):
        bundle.output(n)
    last = bundle.output(n - 1)
    if isinstance(last, ts.TensorView):
        last.release()
    del outcome, bundle, last


def test_a_closed_simulated_provider_rejects_before_any_binding_work() -> None:
    """Refusal before admission: no preparation or binding is made for a submission to a
    closed provider; the inputs come back unchanged.

    Fails when the early closed check of ``SimulatedAsyncProvider.submit_detached`` is
    removed (checked): the late check still refuses, but only after binding."""
    from tenferro_storage import runtime as rt
    from tenferro_storage.errors import SubmitRejected
    from tests.runtime.support import axpy_program, inputs, sim_provider

    with sim_provider() as sim:
        sim.close(timeout=5)
        before = (sim.counters.prepares, sim.counters.binds)
        late, _, _ = inputs()
        with pytest.raises(SubmitRejected) as err:
            rt.submit(sim.engine, axpy_program(), late)  # type: ignore[arg-type]
        assert err.value.value is late
        assert err.value.cause.kind is rt.SubmitErrorKind.PROVIDER_REJECTED
        assert (sim.counters.prepares, sim.counters.binds) == before
        del err
