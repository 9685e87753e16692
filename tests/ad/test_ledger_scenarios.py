"""Ledger scenarios: forward + backward programs whose allocation and copy multisets are
asserted exactly.  Copies are only what the program asked for (imports, explicit
duplicates); retention contributes nothing to either ledger."""

from __future__ import annotations

from collections import Counter

import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage import ledger

OUT = ts.AllocationReason.OPERATION_OUTPUT
TDST = ts.AllocationReason.TRANSFER_DESTINATION
DDST = ts.AllocationReason.EXPLICIT_DUPLICATE_DESTINATION
TRANSFER = ts.CopyReason.TRANSFER
DUP = ts.CopyReason.EXPLICIT_DUPLICATE


def test_scenario_elementwise_chain_with_aliases() -> None:
    """import -> sin -> reshape (alias) -> transpose (alias) -> *2 -> sum; backward."""
    with ledger.capture() as rec:
        with ad.Tape() as tape:
            x = tape.watch(ts.from_numpy(np.arange(6.0).reshape(2, 3)))
            y = ad.sin(x).reshape(3, 2).T  # two metadata-only aliases: no allocation
            loss = ad.sum(y * 2.0)
        grads = tape.backward(loss)
        g = grads.take_grad(x)
        del grads, tape, y, loss, x
    # sin, mul, sum, one gradient; the import; nothing for retention or aliases
    assert rec.allocations == Counter({OUT: 4, TDST: 1})
    assert rec.copies == Counter({TRANSFER: 1})
    np.testing.assert_allclose(g.to_numpy(), 2 * np.cos(np.arange(6.0).reshape(2, 3)))
    assert g.shape == (2, 3)
    del g
    assert rec.live_bytes == 0


def test_scenario_mlp_functional_step_borrows_params() -> None:
    """value_and_grad of a 2-layer MLP: parameters are borrowed (no copy), constants are
    imported once; each op output and each gradient is one OPERATION_OUTPUT."""
    rng = np.random.default_rng(0)
    w1 = ts.from_numpy(rng.normal(size=(4, 3)))
    w2 = ts.from_numpy(rng.normal(size=(3, 2)))
    xb = rng.normal(size=(5, 4))
    xt = ts.from_numpy(xb)

    def loss(params: list[ts.Tensor], x: ts.Tensor) -> ad.EagerTensor:
        h = ad.tanh(x @ params[0])
        return ad.mean((h @ params[1]) ** 2.0)

    with ledger.capture() as rec:
        value, grads = ad.value_and_grad(loss)([w1, w2], xt)
    # matmul, tanh, matmul, pow, sum, div (mean) = 6 op outputs + 2 gradients
    assert rec.allocations == Counter({OUT: 8})
    assert rec.copies == Counter()
    assert w1.shape == (4, 3)  # not consumed
    assert value.shape == () and [g.shape for g in grads] == [(4, 3), (3, 2)]
    del value, grads, w1, w2, xt


def test_scenario_numpy_constant_and_explicit_duplicate() -> None:
    """A numpy array passed to an op is imported with one recorded TRANSFER; an owner
    passed to an op is borrowed (no copy, still the caller's); duplicate_value is the
    only other copy."""
    c = ts.from_numpy(np.full(3, 2.0))
    with ledger.capture() as rec:
        with ad.Tape() as tape:
            x = tape.watch(ts.from_numpy(np.ones(3)))
            y = ad.mul(x, np.array([1.0, 2.0, 3.0]))  # TRANSFER import
            z = ad.add(y, c)  # c is borrowed
            keep = z.duplicate_value()  # explicit
            loss = ad.sum(ad.exp(z))
        tape.backward(loss)
        del tape, x, y, z, loss
    assert rec.allocations == Counter({TDST: 2, OUT: 5, DDST: 1})
    assert rec.copies == Counter({TRANSFER: 2, DUP: 1})
    np.testing.assert_array_equal(c.to_numpy(), np.full(3, 2.0))  # still the caller's
    del keep


def test_retention_releases_unneeded_values_immediately() -> None:
    """Values no rule declares needed are released as soon as their last handle goes."""
    with ledger.capture() as rec:
        with ad.Tape() as tape:
            x = tape.watch(ts.from_numpy(np.ones(4)))
            for _ in range(5):
                x = x + 1.0  # add retains nothing: the previous x is released here
            assert rec.releases == 5
            assert tape.retained() == []
        del x, tape
    assert rec.live_bytes == 0
