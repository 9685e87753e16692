"""G5 borrowed submission: synchronous providers only; asynchronous ones reject first.

In tenferro the borrowed form of submission is scoped read-only execution
(``runtime.execute_scoped_read_only``): the bindings are the caller's immutable views.

* ``asynchronous provider rejects borrowed submission``:
  test_asynchronous_provider_rejects_borrowed_submission_before_admission
* ``admitted synchronous borrowed operation -> retired result``:
  test_synchronous_borrowed_operation_returns_bindings_only_after_retirement

Run alone with ``python3 -m pytest tests/providers/test_borrowed_submission.py``.
"""

from __future__ import annotations

import pytest

import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage import runtime as rt
from tenferro_storage.errors import ScopedSubmitRejected
from tenferro_storage.runtime._engine import lookup
from tests.runtime.support import axpy_program, failing_program, sim_provider


def test_asynchronous_provider_rejects_borrowed_submission_before_admission() -> None:
    x, y = ts.arange(3.0), ts.ones(3)
    views = [x.as_view(), y.as_view()]
    pkg = rt.ScopedReadInputs(views)
    with sim_provider() as sim:
        # (the XLA engine accepts scoped calls: it retires them before returning)
        engines = [e for e in rt.engines()
                   if not e.synchronous and not getattr(lookup(e.id), "retires_scoped", False)]
        assert sim.engine in {e.id for e in engines}
        for engine in {e.id for e in engines}:
            with ledger.capture() as rec, pytest.raises(ScopedSubmitRejected) as err:
                rt.execute_scoped_read_only(engine, axpy_program(), pkg)
            cause, back = err.value.into_parts()
            del err
            assert back is pkg and cause.kind is rt.SubmitErrorKind.UNSUPPORTED
            assert rec.allocations == {} and rec.copies == {}
        c = sim.counters
        assert c.prepares == c.binds == c.enqueues == c.dispatches == 0  # nothing admitted
    assert views[0].to_numpy().tolist() == [0.0, 1.0, 2.0]
    for v in views:
        v.release()
    del back


def test_synchronous_borrowed_operation_returns_bindings_only_after_retirement() -> None:
    x = ts.arange(3.0)
    view = x.as_view()
    pkg = rt.ScopedReadInputs([view])
    with ledger.capture() as rec:
        failed = rt.execute_scoped_read_only(rt.host_engine(), failing_program(), pkg)
    assert isinstance(failed, rt.RetiredFailed) and failed.inputs is pkg
    assert rec.live_bytes == 0  # retired before the return: nothing left in flight
    # The bindings came back usable, not consumed: the same package runs again.
    assert pkg.views == (view,)
    again = rt.execute_scoped_read_only(rt.host_engine(), failing_program(), pkg)
    assert isinstance(again, rt.RetiredFailed) and again.inputs is pkg
    del again
    y = ts.ones(3)
    vy = y.as_view()
    done = rt.execute_scoped_read_only(
        rt.host_engine(), axpy_program(), rt.ScopedReadInputs([view, vy])
    )
    assert isinstance(done, rt.Completed)
    assert done.bundle.is_borrowed(1)
    done.bundle.release()
    view.release()
    vy.release()
    x.as_view_mut().release()  # no borrow survives the call
    del failed, done
