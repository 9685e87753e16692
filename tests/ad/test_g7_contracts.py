"""G7 contract tests: direct lifetime, structural uniqueness, take_grad outcomes,
explicit duplicate versus retention."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import Extract, IntoValueError, NotUnique
from tenferro_storage import ledger
from tenferro_storage.errors import ExtractError


def _spy_extract(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    calls: list[object] = []
    orig = ts.AllocationGroup.try_extract

    def spy(self: ts.AllocationGroup, slot: ts.DescriptorSlot) -> ts.Tensor:
        calls.append(slot)
        return orig(self, slot)

    monkeypatch.setattr(ts.AllocationGroup, "try_extract", spy)
    return calls


def test_direct_lifetime_tape_dropped_handle_keeps_value() -> None:
    """Dropping the tape while a cloned handle remains keeps the value readable; the
    allocation is released only when the last direct owner goes."""
    with ledger.capture() as rec:
        with ad.Tape() as tape:
            x = tape.watch(ts.from_numpy(np.arange(4.0)))
            y = ad.exp(x)  # exp retains its output on the tape
        y2 = y.clone()
        del y, tape
        assert rec.releases == 0
        np.testing.assert_allclose(y2.to_numpy(), np.exp(np.arange(4.0)))
        del x
        assert rec.releases == 1  # the watched input (no rule needs it any more)
        del y2
        assert rec.releases == 2
        assert rec.live_bytes == 0


def test_handles_hash_by_identity_and_copy_clones_only_the_reference() -> None:
    with ledger.capture() as rec:
        with ad.Tape() as tape:
            x = tape.watch(ts.from_numpy(np.ones(3)))
        c = copy.copy(x)
        d = copy.deepcopy(x)
        assert {x: 1, c: 2, d: 3}[x] == 1 and len({x, c, d}) == 3
        eq = x == c  # elementwise, a boolean handle
        assert eq.shape == (3,) and bool(ad.sum(eq.astype("float64")).item() == 3.0)
    assert rec.copies == {ts.CopyReason.TRANSFER: 1}
    del x, c, d, eq, tape


@pytest.mark.parametrize("holder", ["sibling", "tape", "retain", "alias"])
def test_structural_uniqueness_not_unique_before_extraction(
    holder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoever else holds the value, into_value raises the same NotUnique, returns the same
    usable handle and never attempts a group extraction."""
    calls = _spy_extract(monkeypatch)
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.arange(3.0) + 1.0))
        y = ad.log(x)  # log retains its input x
        other = None
        if holder == "sibling":
            other = x.clone()
        elif holder == "retain":
            tape.release()
            tape.retain(x)
        elif holder == "alias":
            tape.release()
            other = x.reshape(3, 1)
        else:
            pass  # the tape's residual for log
    with pytest.raises(NotUnique) as ei:
        x.into_value()
    err = ei.value
    assert err.value is x and isinstance(err, IntoValueError)
    assert "tape.retained()" in str(err) and "duplicate_value()" in str(err)
    assert calls == []
    np.testing.assert_allclose(x.to_numpy(), np.arange(3.0) + 1.0)  # still usable
    messages = {holder: type(err).__name__}
    assert messages[holder] == "NotUnique"
    del x, y, other, tape, err, ei


def test_unique_value_moves_its_owner_out_without_copy() -> None:
    with ledger.capture() as rec:
        with ad.Tape() as tape:
            x = tape.watch(ts.from_numpy(np.arange(3.0)))
            y = ad.sin(x)
        owner = y.into_value()
        assert isinstance(owner, ts.Tensor)
        with pytest.raises(ts.errors.UseAfterMoveError):
            y.to_numpy()
        np.testing.assert_allclose(owner.to_numpy(), np.sin(np.arange(3.0)))
    assert rec.copies == {ts.CopyReason.TRANSFER: 2}  # the import and the to_numpy read
    del owner, x, tape, y


def test_extract_failure_returns_same_handle(monkeypatch: pytest.MonkeyPatch) -> None:
    """A uniquely held value whose allocation is aliased by another descriptor reaches the
    group extraction, which refuses: Extract carries the ExtractError and the handle."""
    calls = _spy_extract(monkeypatch)
    with ad.Tape():
        t = ad.Tape()
        base = t.watch(ts.from_numpy(np.arange(6.0)))
        view = base.reshape(2, 3)  # an alias descriptor in base's group
        del base  # the base record is gone, its descriptor stays in the group
    with pytest.raises(Extract) as ei:
        view.into_value()
    assert ei.value.value is view and isinstance(ei.value.error, ExtractError)
    assert ei.value.error.reason == "aliased"
    assert len(calls) == 1
    np.testing.assert_allclose(view.to_numpy(), np.arange(6.0).reshape(2, 3))
    dup = view.duplicate_value()
    assert dup.shape == (2, 3)
    del view, dup, t, ei


def test_take_grad_three_outcomes() -> None:
    """Ok(None) for no gradient, Ok(owner), and ExtractError leaving the bundle unchanged
    when two gradients share one allocation (add hands one cotangent to both)."""
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.ones(3)))
        y = tape.watch(ts.from_numpy(np.full(3, 2.0)))
        unused = tape.watch(ts.from_numpy(np.zeros(3)))
        z = tape.watch(ts.from_numpy(np.full(3, 3.0)))
        loss = ad.sum(x + y) + ad.sum(z * z)
    with ledger.capture() as rec:
        grads = tape.backward(loss)
    assert grads.take_grad(unused) is None
    assert grads.grad(unused) is None
    with pytest.raises(ExtractError) as ei:
        grads.take_grad(x)
    assert ei.value.reason == "aliased"
    with grads.grad(x) as gx, grads.grad(y) as gy:  # unchanged: both still borrowable
        np.testing.assert_array_equal(gx.to_numpy(), np.ones(3))
        np.testing.assert_array_equal(gy.to_numpy(), np.ones(3))
    gz = grads.take_grad(z)
    assert isinstance(gz, ts.Tensor)
    np.testing.assert_array_equal(gz.to_numpy(), np.full(3, 6.0))
    assert grads.take_grad(z) is None  # moved out already
    # two gradient owners, one shared allocation for x and y: 2 allocations, no copy
    assert rec.allocations == {ts.AllocationReason.OPERATION_OUTPUT: 2}
    assert rec.copies == {}
    del grads, gz, x, y, z, unused, loss, tape, ei


def test_explicit_duplicate_versus_retention() -> None:
    """Retention neither copies nor allocates; duplicate_value is the caller's explicit
    copy (EXPLICIT_DUPLICATE + its destination)."""
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.arange(1.0, 5.0)))
        with ledger.capture() as rec:
            y = ad.exp(x)  # retains y
            z = ad.log(x)  # retains x
            tape.retain(z)
        assert rec.allocations == {ts.AllocationReason.OPERATION_OUTPUT: 2}
        assert rec.copies == {}
        with ledger.capture() as dup_rec:
            d = y.duplicate_value()
        assert dup_rec.copies == {ts.CopyReason.EXPLICIT_DUPLICATE: 1}
        assert dup_rec.allocations == {ts.AllocationReason.EXPLICIT_DUPLICATE_DESTINATION: 1}
    entries = {e.producer: e for e in tape.retained()}
    assert set(entries) == {"watch", "exp", "log"}
    assert entries["exp"].needed_by == ("exp.vjp",)
    assert entries["watch"].needed_by == ("log.vjp",)
    assert entries["log"].needed_by == ("tape.retain",)
    assert entries["exp"].nbytes == 32
    with ledger.forbid_copies():
        tape.release()
        assert d.to_numpy is not None
    del x, y, z, d, tape


def test_handle_has_no_mutable_or_owner_projection() -> None:
    with ad.Tape() as tape:
        x = tape.watch(ts.zeros(2))
    for name in ("as_view_mut", "view_mut", "into_storage", "prepare_host_mut", "fill"):
        assert not hasattr(x, name)
    with x.value() as v:
        assert isinstance(v, ts.TensorView) and not hasattr(v, "as_view_mut")
    with pytest.raises(TypeError, match="to_numpy"):
        np.asarray(x)
    del x, tape


def test_an_op_output_is_held_by_its_record_alone_until_something_shares_it() -> None:
    """Fused form: an op output's record holds the allocation's root itself (no container,
    no owner object); reading it mints the one owner in place; an alias moves it into a
    shared container with a group; extraction of a fused value is a move (no event)."""
    from tenferro_ad._core._retention import RetentionContainer

    x = ad.constant(ts.from_numpy(np.arange(6.0)))
    y = ad.exp(x)
    rec = y._rec
    assert rec is not None and type(rec.container) is ts.RootResource
    with y.value() as v:  # the owner is minted now, once, and kept by the record
        np.testing.assert_allclose(ts.kernel.read_array(v), np.exp(np.arange(6.0)))
    assert type(rec.container) is ts.Tensor
    z = y.reshape(2, 3)
    c = rec.container
    assert type(c) is RetentionContainer and c.group is not None and c.count == 2
    with pytest.raises(NotUnique):  # the alias record shares the container
        y.into_value()
    del z
    w = ad.exp(x)
    with ledger.capture() as events:
        owner = w.into_value()
    assert events.events == [] and w._rec is None
    np.testing.assert_allclose(owner.to_numpy(), np.exp(np.arange(6.0)))
    assert y.into_value().to_numpy().shape == (6,)


def test_a_tape_released_by_backward_still_gives_back_what_it_recorded_afterwards() -> None:
    """Ops recorded after a releasing backward keep their residuals until the tape goes;
    the tape's death gives back exactly those counts (the earlier nodes were released
    once already)."""
    tape = ad.Tape()
    with tape:
        x = tape.watch(ts.from_numpy(np.linspace(0.1, 1.0, 4)))
        tape.backward(ad.sum(ad.sin(x)))
        z = ad.exp(x)  # exp keeps its output: a residual on the released tape
    with pytest.raises(NotUnique):
        z.into_value()
    tape.release()  # gives back z's residual count, once
    tape.release()
    del tape
    np.testing.assert_allclose(z.into_value().to_numpy(), np.exp(np.linspace(0.1, 1.0, 4)))


def test_g7_value_guard_holds_its_count_until_released() -> None:
    """While a ``value()`` guard lives, ``into_value()`` is ``NotUnique`` (G7 allows only
    ``NotUnique``/``Extract``) and hands back the same handle; after ``release`` (or the
    end of the ``with`` block) it moves the owner out.

    Fails when ``ValueGuard.__init__`` stops counting the record (``rec.count += 1``
    removed, with its ``-= 1`` in ``release``) — checked by hand: ``into_value`` then
    extracts the owner under a live borrow."""
    h = ad.exp(ad.constant(np.array([0.0, 1.0])))
    for use_with in (False, True):
        guard = h.value()
        if use_with:
            with guard as v:
                with pytest.raises(NotUnique) as err:
                    h.into_value()
                np.testing.assert_allclose(v.to_numpy(), np.exp([0.0, 1.0]))
        else:
            with pytest.raises(NotUnique) as err:
                h.into_value()
            assert err.value.value is h
            np.testing.assert_allclose(guard.view.to_numpy(), np.exp([0.0, 1.0]))
            guard.release()
        del err
    owner = h.into_value()
    np.testing.assert_allclose(owner.to_numpy(), np.exp([0.0, 1.0]))
