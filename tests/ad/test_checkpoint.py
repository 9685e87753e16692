"""Checkpoint regions (G7 "Checkpoint semantics"): boundary-only retention, interior
release after forward use, recomputation with fresh CHECKPOINT_RECOMPUTE_OUTPUT owners,
policies, nesting, the block form, failure atomicity, and differentiating twice."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import extend
from tenferro_ad._core._primitive import REGISTRY
from tenferro_ad.errors import ArgumentTypeError, CheckpointError, NotUnique
from tenferro_storage.ledger import AllocationReason, EventKind, capture

OP = AllocationReason.OPERATION_OUTPUT
RECOMPUTE = AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT


def _x(n: int = 6, seed: int = 0) -> ts.Tensor[Any, Any]:
    return ts.random.default_rng(seed).normal((n,))


def _two_sines(v: Any) -> Any:
    a = ad.sin(v)
    return ad.sin(a)


def _grad_of(program: Callable[[Any], Any], seed: int = 0, n: int = 6) -> np.ndarray[Any, Any]:
    with ad.Tape() as tape:
        x = tape.watch(_x(n, seed))
        loss = program(x)
    grads = tape.backward(loss, wrt=[x])
    g = grads.take_grad(x)
    assert g is not None
    out = ts.kernel.read_array(g).copy()
    return out


def _ref_two_sines(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.cos(np.sin(x)) * np.cos(x)  # type: ignore[no-any-return]


X0 = np.random.default_rng(0).normal(size=6)


def test_contract_only_boundary_records_interior_released_recompute_is_fresh() -> None:
    """G7 checkpoint contract test, observed through the ledger's events."""
    t = _x()
    with capture() as rec:
        with ad.Tape() as tape:
            x = tape.watch(t)
            y = ad.checkpoint(_two_sines)(x)
            loss = ad.sum(y)
        # only the boundary (the region input x) enters the retained set; the interior
        # value a = sin(x) has no record there and neither does the output
        retained = [(e.producer, e.needed_by) for e in tape.retained()]
        assert retained == [("watch", ("checkpoint.vjp",))]
        forward_events = len(rec.events)
        grads = tape.backward(loss, wrt=[x])
    events = rec.events
    allocs = [e for e in events if e.kind is EventKind.ALLOCATE]
    a_ev, b_ev, sum_ev = allocs[0], allocs[1], allocs[2]
    assert [a_ev.operation, b_ev.operation, sum_ev.operation] == ["sin", "sin", "sum"]
    released = {e.allocation: i for i, e in enumerate(events) if e.kind is EventKind.RELEASE}
    # the interior allocation is released right after forward use: before the next op
    # outside the region allocates, long before backward
    assert released[a_ev.allocation] < events.index(sum_ev) < forward_events
    # recomputation allocates fresh owners (new allocation ids) with the recompute reason,
    # and releases them before backward returns; only what something needs is recomputed:
    # the inner sin (the outer sin's VJP reads it), not the outer one (nothing reads it)
    recomputed = [
        e for e in events[forward_events:] if e.kind is EventKind.ALLOCATE and e.reason is RECOMPUTE
    ]
    assert [e.operation for e in recomputed] == ["sin"]
    assert {e.allocation for e in recomputed}.isdisjoint({a_ev.allocation, b_ev.allocation})
    assert all(e.allocation in released for e in recomputed)
    assert rec.allocations == {OP: 4, RECOMPUTE: 1}  # sin, sin, sum, gradient; inner sin
    assert rec.copies == {}
    g = grads.take_grad(x)
    assert g is not None
    np.testing.assert_allclose(ts.kernel.read_array(g), _ref_two_sines(X0), rtol=1e-12)


def test_without_checkpoint_the_interior_is_retained_until_backward() -> None:
    t = _x()
    with capture() as rec:
        with ad.Tape() as tape:
            x = tape.watch(t)
            a = ad.sin(x)
            loss = ad.sum(ad.sin(a))
            del a
        assert ("sin", ("sin.vjp",)) in [(e.producer, e.needed_by) for e in tape.retained()]
        first_sin = next(e for e in rec.events if e.kind is EventKind.ALLOCATE)
        assert all(
            e.allocation != first_sin.allocation for e in rec.events if e.kind is EventKind.RELEASE
        )
        tape.backward(loss, wrt=[x])
    del x, loss, tape


def test_checkpoint_record_is_a_direct_owner_for_into_value() -> None:
    """Structural uniqueness: the checkpoint record holds the boundary value."""
    with ad.Tape() as tape:
        x = tape.watch(_x())
        y = ad.checkpoint(_two_sines)(x)
        with pytest.raises(NotUnique) as info:
            x.into_value()
        assert info.value.value is x  # the same usable handle
        assert x.shape == (6,)
        del y
    tape.release()
    assert x.into_value().shape == (6,)  # unique again once the record is released


@pytest.mark.parametrize(
    "policy", [ad.save_nothing, ad.save_everything, ad.save_named(), ad.save_contractions]
)
def test_checkpointed_gradients_equal_plain_gradients(policy: ad.CheckpointPolicy) -> None:
    def region(v: Any, w: Any) -> Any:
        h = ad.tanh(ad.name(v @ w, "pre"))
        return ad.exp(h) * v[:, :1], h

    def program(x: Any, checkpointed: bool) -> Any:
        w = x.reshape(4, 4)
        f = ad.checkpoint(region, policy=policy) if checkpointed else region
        p, h = f(x.reshape(4, 4), w)
        return ad.sum(p * p) + ad.sum(h)

    plain = _grad_of(lambda x: program(x, False), n=16)
    ckpt = _grad_of(lambda x: program(x, True), n=16)
    np.testing.assert_allclose(ckpt, plain, rtol=1e-12)


def test_policy_decides_what_is_recomputed() -> None:
    def region(v: Any) -> Any:
        return ad.sin(ad.name(ad.exp(v), "e") @ v.reshape(2, 2)).reshape(4)

    def recomputed(policy: ad.CheckpointPolicy) -> list[str]:
        with capture() as rec:
            _grad_of(lambda x: ad.sum(ad.checkpoint(region, policy=policy)(x.reshape(2, 2))), n=4)
        return [
            e.operation
            for e in rec.events
            if e.kind is EventKind.ALLOCATE and e.reason is RECOMPUTE
        ]

    # sin's output is read only by reshape, whose VJP needs nothing: never recomputed
    assert recomputed(ad.save_nothing) == ["exp", "matmul"]
    assert recomputed(ad.save_everything) == []
    assert recomputed(ad.save_named("e")) == ["matmul"]
    assert recomputed(ad.save_named("other")) == ["exp", "matmul"]
    assert recomputed(ad.save_contractions) == ["exp"]
    assert repr(ad.save_named("e")) == "save_named('e')"


def test_closed_over_handles_are_region_inputs() -> None:
    with ad.Tape() as tape:
        x = tape.watch(_x())
        y = ad.checkpoint(lambda v: ad.sin(v) * x)(ad.cos(x))
        loss = ad.sum(y)
    g = tape.backward(loss, wrt=[x]).take_grad(x)
    assert g is not None
    c = np.cos(X0)
    ref = np.cos(c) * -np.sin(X0) * X0 + np.sin(c)
    np.testing.assert_allclose(ts.kernel.read_array(g), ref, rtol=1e-12)


def test_nested_regions() -> None:
    inner = ad.checkpoint(_two_sines)

    def outer(v: Any) -> Any:
        return inner(ad.exp(inner(v)) * 0.5)

    def ref(x: Any) -> Any:
        return _two_sines(ad.exp(_two_sines(x)) * 0.5)

    with capture() as rec:
        got = _grad_of(lambda x: ad.sum(ad.checkpoint(outer)(x)))
    np.testing.assert_allclose(got, _grad_of(lambda x: ad.sum(ref(x))), rtol=1e-12)
    # outer backward replays its 6 ops (2 sines in each inner region, which run as
    # regions there, plus exp and the scaling), then each inner region recomputes the one
    # sine its own backward reads (its last sine's output is needed by nothing)
    assert rec.allocations[RECOMPUTE] == 6 + 2 * 1


def test_block_form_outputs_are_the_handles_alive_at_exit() -> None:
    t = _x()
    with capture() as rec:
        with ad.Tape() as tape:
            x = tape.watch(t)
            with tape.checkpoint():
                y = ad.sin(ad.sin(x))  # the inner sin's handle dies inside: interior
            assert [e.producer for e in tape.retained()] == ["watch"]
            loss = ad.sum(y)
        g = tape.backward(loss, wrt=[x]).take_grad(x)
    assert g is not None
    np.testing.assert_allclose(ts.kernel.read_array(g), _ref_two_sines(X0), rtol=1e-12)
    assert rec.allocations[RECOMPUTE] == 1  # the inner sin; the outer one is needed by nothing


def test_block_form_outside_the_tape_is_refused() -> None:
    tape = ad.Tape()
    with pytest.raises(CheckpointError, match="inside `with tape:`"), tape.checkpoint():
        pass


def test_failure_while_recording_publishes_nothing() -> None:
    def broken(v: Any) -> Any:
        ad.name(ad.sin(v), "kept")
        raise ZeroDivisionError("boom")

    t = _x()
    with capture() as rec:
        with ad.Tape() as tape:
            x = tape.watch(t)
            before = len(tape.nodes)
            with pytest.raises(ZeroDivisionError):
                ad.checkpoint(broken, policy=ad.save_named())(x)
            assert len(tape.nodes) == before
            assert tape.retained() == []
        assert rec.live_bytes == 0  # the interior (and the saved value) were released
    assert x.into_value().shape == (6,)  # nothing else holds the input


def test_region_must_return_handles() -> None:
    with ad.Tape() as tape:
        x = tape.watch(_x())
        with pytest.raises(
            CheckpointError,
            match=r"checkpoint\(<lambda>\): the region must "
            "return a pytree .* of EagerTensors, got a float leaf",
        ):
            ad.checkpoint(lambda v: 3.0)(x)
        assert tape.retained() == []
    del x


def test_differentiating_twice_with_keep() -> None:
    with ad.Tape() as tape:
        x = tape.watch(_x())
        loss = ad.sum(ad.checkpoint(_two_sines)(x))
    first = tape.backward(loss, wrt=[x], keep=True).take_grad(x)
    second = tape.backward(loss, wrt=[x]).take_grad(x)
    assert first is not None and second is not None
    np.testing.assert_array_equal(ts.kernel.read_array(first), ts.kernel.read_array(second))
    with pytest.raises(ad.errors.BackwardError):
        tape.backward(loss, wrt=[x])


def test_second_order_through_a_region_matches_jax() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def f(x: Any) -> Any:
        return ad.sum(ad.checkpoint(_two_sines)(x) * x)

    def f_jax(x: Any) -> Any:
        return jnp.sum(jax.checkpoint(lambda v: jnp.sin(jnp.sin(v)))(x) * x)

    x = _x()
    (hd,) = _wrap(ad.grad(lambda v: ad.sum(ad.grad(f)(v))))(x)
    ref = jax.grad(lambda v: jnp.sum(jax.grad(f_jax)(v)))(X0)
    np.testing.assert_allclose(hd, np.asarray(ref), rtol=1e-10)
    del x


def _wrap(fn: Callable[..., Any]) -> Callable[..., tuple[np.ndarray[Any, Any], ...]]:
    def call(*args: Any) -> tuple[np.ndarray[Any, Any], ...]:
        out = fn(*args)
        outs = out if isinstance(out, tuple) else (out,)
        return tuple(ts.kernel.read_array(o).copy() for o in outs)

    return call


def test_without_a_tape_checkpoint_is_a_plain_call() -> None:
    with capture() as rec:
        t = _x()
        with ad.no_grad():
            y = ad.checkpoint(_two_sines)(ad.Tape().watch(t))
        assert y.shape == (6,)
        del y
    assert RECOMPUTE not in rec.allocations


def test_name_outside_a_region_is_the_identity() -> None:
    with ad.Tape() as tape:
        x = tape.watch(_x())
        assert ad.name(x, "anything") is x
    with pytest.raises(TypeError, match=r"name: argument .x. must be an EagerTensor"):
        ad.name(3.0, "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"policy. must be a CheckpointPolicy"):
        ad.checkpoint(_two_sines, policy="save_nothing")  # type: ignore[arg-type]
    del x


# -- recomputing only what backward reads ------------------------------------------------------


def _tanh_segment(v: Any) -> Any:
    return ad.tanh(ad.sin(ad.tanh(v)))


def _chain(x: Any, segments: int, checkpointed: bool) -> Any:
    seg = ad.checkpoint(_tanh_segment) if checkpointed else _tanh_segment
    h = x
    for _ in range(segments):
        h = seg(h)
    return ad.sum(h)


def _recomputed_ops(program: Callable[[Any], Any]) -> list[str]:
    with capture() as rec:
        _grad_of(program)
    return [
        e.operation for e in rec.events if e.kind is EventKind.ALLOCATE and e.reason is RECOMPUTE
    ]


def test_a_region_output_kept_by_the_next_region_is_not_recomputed() -> None:
    """tanh's VJP needs its output; where that output is the next region's boundary, the
    kept record is read instead of re-running the segment's last op (and sin, whose value
    only that op reads, is not re-run either).  The last region's output is kept by
    nothing (sum needs no input), so its segment recomputes everything."""
    ops = _recomputed_ops(lambda x: _chain(x, 3, True))
    assert ops == ["tanh", "sin", "tanh", "tanh", "tanh"]  # latest region first
    plain = _grad_of(lambda x: _chain(x, 3, False))
    np.testing.assert_allclose(_grad_of(lambda x: _chain(x, 3, True)), plain, rtol=1e-12)


def test_an_output_used_outside_the_next_region_is_still_read_from_its_record() -> None:
    """The next region keeps the output whatever else uses it; a plain op reading the same
    value changes neither the gradient nor what is recomputed."""

    def program(x: Any) -> Any:
        seg = ad.checkpoint(_tanh_segment)
        h1 = seg(x)
        return ad.sum(seg(h1)) + ad.sum(h1 * h1)

    assert _recomputed_ops(program) == ["tanh", "sin", "tanh", "tanh"]
    ref = _grad_of(
        lambda x: ad.sum(_tanh_segment(_tanh_segment(x)))
        + ad.sum(_tanh_segment(x) * _tanh_segment(x))
    )
    np.testing.assert_allclose(_grad_of(program), ref, rtol=1e-12)


def test_differentiating_a_region_chain_twice_with_keep_reads_the_same_records() -> None:
    with ad.Tape() as tape:
        x = tape.watch(_x())
        loss = _chain(x, 3, True)
    first = tape.backward(loss, wrt=[x], keep=True).take_grad(x)
    second = tape.backward(loss, wrt=[x]).take_grad(x)
    assert first is not None and second is not None
    np.testing.assert_array_equal(ts.kernel.read_array(first), ts.kernel.read_array(second))


def test_replayed_values_are_released_as_the_segment_sweep_passes_them() -> None:
    """Each recomputed value goes right after the VJP that reads it ran -- latest first --
    instead of all together after the segment's sweep (earliest first)."""

    def four_sines(v: Any) -> Any:
        return ad.sin(ad.sin(ad.sin(ad.sin(v))))

    with capture() as rec:
        _grad_of(lambda x: ad.sum(ad.checkpoint(four_sines)(x)))
    made = [
        e.allocation for e in rec.events if e.kind is EventKind.ALLOCATE and e.reason is RECOMPUTE
    ]
    released = [
        e.allocation for e in rec.events if e.kind is EventKind.RELEASE and e.allocation in made
    ]
    assert len(made) == 3  # the 4th sine's value is read by nothing
    assert released == made[::-1]


# -- releasing boundaries in a consuming backward ----------------------------------------------


def _chain_backward(
    consuming: bool, segments: int = 4, n: int = 64
) -> tuple[np.ndarray[Any, Any], int, list[str]]:
    """Gradient of the region chain, the forward-output bytes still alive when the first
    region's recomputation starts (the last region the sweep reaches), and what was
    recomputed."""
    with capture() as rec:
        tape = ad.Tape()
        with tape:
            x = tape.watch(_x(n))
            loss = _chain(x, segments, True)
        grads = tape.backward(loss, wrt=[x], keep=not consuming)  # keep=False consumes
        g = grads.take_grad(x)
        assert g is not None
        out = ts.kernel.read_array(g).copy()
        del g, grads, loss, x, tape
    recomputes = [
        e for e in rec.events if e.kind is EventKind.ALLOCATE and e.reason is RECOMPUTE
    ]
    # the first region's replay allocates last (one value: its output is handed over, and
    # sin's value is read only by the op that made it)
    first_region = recomputes[-1].seq
    live = dict(rec.timeline())
    before = max(seq for seq in live if seq < first_region)
    return out, live[before].get(OP, 0), [e.operation for e in recomputes]


def test_a_consuming_backward_releases_boundaries_once_past_them() -> None:
    """keep=False: after each region's rules ran, its input boundary is handed to the region
    that produced it and dropped once that one ran too -- so when the sweep reaches the first
    region, the boundaries of the later regions are gone; with keep=True every boundary
    stays.  Same gradient, same recomputations."""
    n = 64
    kept, live_kept, ops_kept = _chain_backward(False, n=n)
    released, live_released, ops_released = _chain_backward(True, n=n)
    np.testing.assert_array_equal(released, kept)
    assert ops_released == ops_kept  # the handed-over output is still read, not recomputed
    # the 2nd and 3rd boundaries are released (no sweep variable keeps a record alive)
    assert live_kept - live_released == 2 * n * 8


@pytest.fixture
def flaky_identity() -> Iterator[tuple[Any, list[int]]]:
    """An identity primitive whose VJP raises while ``fail[0]`` is positive (counting
    down); unregistered afterwards."""
    fail = [0]

    def rule(ops: Any, g: Any) -> Any:
        if fail[0] > 0:
            fail[0] -= 1
            raise RuntimeError("injected failure")
        return g

    prim = extend.defprimitive("test_flaky_identity", lambda x: np.array(x), 1, vjp=(rule,))
    yield prim, fail
    REGISTRY.pop("test_flaky_identity", None)


def _fail_once_then_retry(program: Any, fail: list[int]) -> Any:
    """Record ``program`` on a tape, make its first backward raise (one injected rule
    failure), check that the tape still holds what a backward needs, retry, and check the
    gradient against a backward that never failed.  Returns the retry's ledger record."""
    reference = _grad_of(program)
    tape = ad.Tape()
    with tape:
        x = tape.watch(_x())
        loss = program(x)
    fail[0] = 1
    with pytest.raises(RuntimeError, match="injected failure"):
        tape.backward(loss, wrt=[x])
    assert tape.retained()  # the tape still holds what a backward needs
    with capture() as rec:
        g = tape.backward(loss, wrt=[x]).take_grad(x)
    assert g is not None
    np.testing.assert_allclose(ts.kernel.read_array(g), reference, rtol=1e-12)
    del g, loss, x, tape
    return rec


def test_a_failure_after_released_boundaries_leaves_the_tape_usable(
    flaky_identity: tuple[Any, list[int]],
) -> None:
    """A rule below the regions raises after the regions released their boundaries; the
    retry recovers them (handed over, or recomputed from the previous boundary) and gives
    the gradient of a backward that never failed."""
    prim, fail = flaky_identity

    def program(x: Any) -> Any:
        return _chain(extend.bind(prim, x), 3, True)

    rec = _fail_once_then_retry(program, fail)
    # the 3rd region's input was recomputed from the 1st region's boundary (h1, then h2)
    recomputed = [
        e.operation for e in rec.events if e.kind is EventKind.ALLOCATE and e.reason is RECOMPUTE
    ]
    assert len(recomputed) > len(_recomputed_ops(program))


def test_a_failure_before_the_producer_ran_takes_the_handed_over_record_back(
    flaky_identity: tuple[Any, list[int]],
) -> None:
    """The failure happens between two regions: the second region's input (the first's
    output) is still handed over to the first region, which has not run yet, and the retry
    takes it back without recomputing it."""
    prim, fail = flaky_identity

    def program(x: Any) -> Any:
        seg = ad.checkpoint(_tanh_segment)
        h1 = seg(x)
        z = extend.bind(prim, h1)  # recorded between the two regions: its VJP runs between
        return ad.sum(seg(h1)) + ad.sum(z)

    rec = _fail_once_then_retry(program, fail)
    assert [
        e.operation for e in rec.events if e.kind is EventKind.ALLOCATE and e.reason is RECOMPUTE
    ] == _recomputed_ops(program)  # nothing beyond a backward that never failed


def test_a_consuming_backward_lowers_the_peak_when_an_early_segment_is_the_largest() -> None:
    """The first region replays six sines (all alive until its sweep passes them); the three
    later regions are one tanh each.  The backward peaks in the first region's replay, when
    a consuming backward has already released the later regions' boundaries."""

    def six_sines(v: Any) -> Any:
        for _ in range(6):
            v = ad.sin(v)
        return v

    def backward_peak(keep: bool, n: int) -> tuple[np.ndarray[Any, Any], int]:
        with capture() as rec:
            tape = ad.Tape()
            with tape:
                x = tape.watch(_x(n))
                h = ad.checkpoint(six_sines)(x)
                for _ in range(3):
                    h = ad.checkpoint(ad.tanh)(h)
                loss = ad.sum(h)
                del h
            g = tape.backward(loss, wrt=[x], keep=keep).take_grad(x)
            assert g is not None
            out = ts.kernel.read_array(g).copy()
            del g, loss, x, tape
        return out, rec.peak_bytes

    n = 64
    kept, peak_kept = backward_peak(True, n)
    released, peak_released = backward_peak(False, n)
    np.testing.assert_array_equal(released, kept)
    # two boundaries (h2, h3) are gone by then
    assert peak_kept - peak_released == 2 * n * 8


@pytest.mark.parametrize("policy", [ad.save_everything, ad.save_nothing])
def test_a_nested_region_gives_back_its_saved_counts_so_its_output_can_be_moved_out(
    policy: Any,
) -> None:
    """A region recorded inside another region hands the values its policy saved to the
    enclosing region and gives back the counts it took on them: after backward (gradient
    ``3 cos x``) and the tape's release, the inner region's output (returned through the
    outer one) is uniquely held again and ``into_value`` moves it out without a copy.
    Mutant: ``_attach``'s nested branch ``rec.count -= 1`` made ``-= 0`` (a count left
    behind: ``NotUnique``)."""
    x0 = np.array([0.5, 1.0, 2.0])

    def inner(v: Any) -> Any:
        return ad.sin(v) * 3.0

    def outer(v: Any) -> Any:
        return ad.checkpoint(inner, policy=policy)(v)

    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(x0.copy()))
        y = ad.checkpoint(outer)(x)
        grads = tape.backward(ad.sum(y))
        g = grads.take_grad(x)
        assert g is not None
        np.testing.assert_allclose(g.to_numpy(), 3 * np.cos(x0))
    del grads, g
    with capture() as rec:
        value = y.into_value()
    assert not rec.copies
    np.testing.assert_allclose(value.to_numpy(), 3 * np.sin(x0))


def test_block_form_checks_the_policy_at_the_call_not_on_entering() -> None:
    """``tape.checkpoint(policy=3)`` is refused by the call itself (no with-block needed),
    naming the argument, like ``ad.checkpoint(f, policy=3)``."""
    tape = ad.Tape()
    with pytest.raises(ArgumentTypeError, match=r"Tape\.checkpoint: argument 'policy'"):
        tape.checkpoint(policy=3)  # type: ignore[arg-type]
    with tape:
        x = tape.watch(np.ones(2))
        with tape.checkpoint():
            y = ad.sin(x)
        loss = ad.sum(y)
    g = tape.backward(loss, wrt=[x]).take_grad(x)
    assert g is not None
    np.testing.assert_allclose(ts.kernel.read_array(g), np.cos(np.ones(2)))
