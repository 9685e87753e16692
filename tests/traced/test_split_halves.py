"""A gradient program cut into its forward and backward halves runs as two executions on
one group: the residuals pass from the first to the second as that group's descriptors
(no copy, no extra allocation), and the results equal the whole program's."""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import traced
from tenferro_ad._traced._compile import compile_graph
from tenferro_storage import runtime as rt
from tenferro_storage.ledger import AllocationReason, capture
from tests.traced._specs import close

RNG = np.random.default_rng(5)
X = RNG.normal(size=(4, 6))
W = RNG.normal(size=(6, 6)) * 0.4


def _loss(x: Any, w: Any) -> Any:
    h = ad.checkpoint(lambda a, b: ad.tanh(a @ b) * a)(x, w)
    return ad.sum(ad.sin(h @ w))


def _run(program: Any, group: ts.AllocationGroup, slots: Any) -> Any:
    outcome = rt.submit(rt.host_engine(), program, rt.ExecutionInputs(group, slots)).wait()
    assert isinstance(outcome, rt.Completed)
    return outcome.bundle


def test_the_halves_on_one_group_equal_the_whole_program_without_a_copy() -> None:
    vg = traced.value_and_grad(ad.trace(_loss)(X, W), argnums=(0, 1))
    halves = traced.split_halves(vg)
    assert len(halves.residuals) == len(traced.retained(vg))
    assert [p[0] for p in halves.placement] == ["forward", "backward", "backward"]
    fprog = compile_graph(halves.forward, "forward", reuse=False)
    bprog = compile_graph(halves.backward, "backward", reuse=False)
    group = ts.AllocationGroup()
    slots = [group.insert(ts.from_numpy(X)), group.insert(ts.from_numpy(W))]
    n_out = len(halves.forward.outvars) - len(halves.residuals)
    with capture() as rec:
        fbundle = _run(fprog, group, slots)
        group, fouts = fbundle.into_group()
        bbundle = _run(bprog, group, fouts[n_out:])  # residuals bound as group descriptors
        loss = bbundle.group.try_extract(fouts[0])
        grads = [bbundle.group.try_extract(bbundle.outputs[i]) for _, i in halves.placement[1:]]
        del bbundle, fbundle, group
    assert rec.copies == {}
    assert set(rec.allocations) == {AllocationReason.OPERATION_OUTPUT,
                                    AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT}
    want_value, want_grads = traced.eval_graph(vg, X, W)
    close(loss, want_value)
    for a, b in zip(grads, want_grads, strict=True):
        close(a, b)


def test_a_view_read_by_backward_is_handed_over_as_the_value_it_views() -> None:
    """``x.T`` feeds backward as a view: the residual is ``x`` itself (no layout copy)."""
    vg = traced.value_and_grad(ad.trace(lambda x: ad.sum(ad.sin(x.T) * 2.0))(X))
    halves = traced.split_halves(vg)
    assert all(v.shape == X.shape for v in halves.residuals)
    program = compile_graph(halves.forward, reuse=False)
    assert not any(ins.name == "layout" for ins in program.instructions)
