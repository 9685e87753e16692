"""Concurrency: 16 threads x 1,000 detached submissions to the asynchronous provider.

Inputs are partly device-resident (uploaded) and every output is device-resident until
downloaded.

Handles are dropped at random and faults are injected at random (every boundary).  At
the end every submission has exactly one terminal fate, every record was released
exactly once or retained permanently, and live ledger bytes are the baseline plus
exactly the permanently retained bytes.
"""

from __future__ import annotations

import random
import threading
from collections import Counter

import numpy as np

import tenferro_storage as ts
from tenferro_storage import providers
from tenferro_storage import runtime as rt
from tenferro_storage.errors import SubmitRejected
from tenferro_storage.providers import Fault

from .support import axpy_program, live_bytes, sim_provider

THREADS = 16
PER_THREAD = 1000
N = 4  # elements per input: 32 bytes each
FAULTS = (
    Fault.REJECT_BEFORE_ADMISSION,
    Fault.BIND_FAILURE,
    Fault.FAIL_AFTER_ENQUEUE,
    Fault.PANIC_PROVEN,
    Fault.PANIC_UNPROVEN,
    Fault.EVENT_NEVER_COMPLETES,
)


def test_sixteen_threads_with_random_drops_and_faults_account_for_every_owner() -> None:
    program = axpy_program()
    base = live_bytes()
    policy_rng = random.Random(1234)
    policy_lock = threading.Lock()

    def policy() -> Fault | None:
        with policy_lock:
            r = policy_rng.random()
            if r < 0.12:
                return FAULTS[int(r / 0.02)]  # each fault with probability 2%
            return None

    results: list[Counter[str]] = [Counter() for _ in range(THREADS)]
    errors: list[BaseException] = []

    with sim_provider(completion_timeout=0.0005) as sim:
        sim.fault_policy = policy
        engine = sim.engine
        assert engine is not None and sim.domain is not None
        domain = sim.domain.name

        def worker(tid: int) -> None:
            rng = random.Random(tid)
            seen = results[tid]
            try:
                for _ in range(PER_THREAD):
                    g = ts.AllocationGroup()
                    sx = g.insert(rt.upload(engine, ts.full(N, float(tid))))  # device-resident
                    sy = g.insert(ts.ones(N))
                    pkg = rt.ExecutionInputs(g, [sx, sy])
                    del g
                    try:
                        handle = rt.submit(engine, program, pkg)
                    except SubmitRejected as exc:
                        _cause, back = exc.into_parts()
                        assert back is pkg and back.bindings == (sx, sy)
                        seen["rejected"] += 1
                        continue
                    if rng.random() < 0.5:
                        del handle  # detach: the worker still owns everything
                        seen["dropped"] += 1
                        continue
                    outcome = handle.wait(60)
                    match outcome:
                        case rt.Completed(bundle):
                            t = bundle.into_output(0)
                            assert providers.domain_of(t) == domain  # device-resident
                            expected = np.full(N, float(tid) ** 2 + 1.0)
                            np.testing.assert_array_equal(rt.download(t).to_numpy(), expected)
                            seen["completed"] += 1
                        case rt.RetiredFailed(cause, inputs):
                            assert inputs.bindings == (sx, sy)
                            seen[f"failed:{cause.kind.name}"] += 1
                        case rt.CompletionUnproven(cause, keys):
                            assert keys
                            seen[f"unproven:{cause.kind.name}"] += 1
                    del outcome
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[:3]
        assert sim.drain(60)
        total: Counter[str] = sum(results, Counter())
        assert sum(total.values()) == THREADS * PER_THREAD
        c = sim.counters
        admitted = THREADS * PER_THREAD - total["rejected"]
        assert c.records_created == c.enqueues == c.events_created == admitted
        assert c.records_created == c.records_released + c.records_retained
        assert c.records_retained == sim.retained_records
        assert c.bindings_released == 2 * c.records_released
        # Observed outcomes are consistent with the counters (drops are unobserved).
        observed_unproven = sum(v for k, v in total.items() if k.startswith("unproven"))
        assert observed_unproven <= c.records_retained
        assert total["rejected"] > 0 and total["completed"] > 0 and c.records_retained > 0
        assert any(k.startswith("failed:PANIC") for k in total)
        assert live_bytes() == base + c.retained_bytes
        assert sim.domain.live_bytes <= c.retained_bytes  # device bytes only in retained records
        assert ts.ledger.double_releases() == ()
        retained = c.retained_bytes
    del sim
    # Closed and dropped, the provider takes nothing with it: the unproven records' memory
    # stays retained for the rest of the process (the device may still use it).
    assert live_bytes() == base + retained
