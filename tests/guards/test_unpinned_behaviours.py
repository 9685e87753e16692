"""Behaviours an outside sample of one-line mutants found unpinned, each pinned by name.

Every test here was checked once against the mutant that survived the suite before it
(the mutant is named in the test's docstring): with the mutant applied the test fails,
with the code as it is the test passes.  Deterministic: fixed inputs, no search.
"""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import NotUnique
from tenferro_storage import ledger
from tenferro_storage import runtime as rt
from tenferro_storage._layout import prove_injective
from tenferro_storage.errors import LayoutError, SubmitRejected
from tenferro_storage.providers import ProviderContext
from tenferro_storage.providers._device import device_tensor  # the provider's own path
from tests.runtime.support import axpy_program, inputs, sim_provider


class _Boom(Exception):
    pass


# -- a failed nested grad leaves the enclosing tape as it was ----------------------------


def test_a_failed_nested_grad_leaves_no_extra_count_on_the_enclosing_tape() -> None:
    """The inner ``grad`` records on the enclosing tape (its ops keep residuals of the
    outer value); when it raises, those nodes are discarded and their counts given back,
    so the outer value can still be moved out.  Mutant: ``_Call.discard`` not calling
    ``tape._discard_from`` (the counts stay: ``into_value`` raises ``NotUnique``)."""
    tape = ad.Tape()
    with tape:
        h = tape.watch(ts.from_numpy(np.array([0.5, 1.5])))

        def inner(y: Any) -> Any:
            ad.sin(y * h) * ad.exp(y)  # residuals of ``h`` and of the identity of ``y``
            raise _Boom

        with pytest.raises(_Boom):
            ad.grad(lambda y: ad.sum(inner(y)))(h)
    tape.release()
    owner = h.into_value()  # the tape released its own count; nothing else holds one
    np.testing.assert_array_equal(owner.to_numpy(), [0.5, 1.5])


def test_a_failed_nested_grad_leaves_no_borrow_of_a_captured_owner() -> None:
    """An owner the failed inner function read is borrowed by the enclosing tape only for
    the discarded nodes: the borrow ends with them, and the owner can be written while the
    enclosing tape is still alive.  Mutant: ``_discard_from`` keeping ``_borrowed`` entries
    (a later write raises ``BorrowError`` naming the tape)."""
    w = ts.from_numpy(np.full(2, 2.0))
    tape = ad.Tape()
    with tape:
        h = tape.watch(ts.from_numpy(np.array([0.5, 1.5])))

        def inner(y: Any) -> Any:
            ad.sin(y * w)
            raise _Boom

        with pytest.raises(_Boom):
            ad.grad(lambda y: ad.sum(inner(y)))(h)
        with w.as_view_mut() as m:  # no borrow left behind by the failed call
            m.fill(1.0)
    tape.release()
    np.testing.assert_array_equal(w.to_numpy(), [1.0, 1.0])


def test_a_failed_nested_grad_keeps_the_outer_gradient_exact() -> None:
    """After the failure the enclosing computation goes on and differentiates exactly as
    if the inner call never happened."""

    def outer(x: Any) -> Any:
        def inner(y: Any) -> Any:
            ad.exp(y * x)
            raise _Boom

        with pytest.raises(_Boom):
            ad.grad(lambda y: ad.sum(inner(y)))(x)
        return ad.sum(ad.sin(x))

    g = ad.grad(outer)(ts.from_numpy(np.array([0.25, 0.75])))
    np.testing.assert_allclose(g.to_numpy(), np.cos([0.25, 0.75]))


# -- tape.release gives retain() counts back -----------------------------------------------


def test_tape_release_gives_back_the_counts_of_retain() -> None:
    """``tape.retain(h)`` holds one more count of ``h``'s value until the tape is released;
    after ``release()`` the handle is the only owner again.  Mutant: ``Tape._release`` not
    decrementing the counts of ``_kept`` (``into_value`` raises ``NotUnique`` forever)."""
    tape = ad.Tape()
    with tape:
        h = ad.sin(tape.watch(ts.from_numpy(np.array([0.1, 0.2]))))
        tape.retain(h)
    with pytest.raises(NotUnique):  # while retained: two direct owners
        h.into_value()
    tape.release()
    np.testing.assert_allclose(h.into_value().to_numpy(), np.sin([0.1, 0.2]))


# -- donation: no other record may describe the donated allocation ----------------------


def test_donation_is_refused_while_another_record_describes_the_same_allocation() -> None:
    """A donated input is written in place, so no other record of the package's group may
    see its bytes, an alias bound to another input included.  Mutant: ``_donation_cause``
    not checking ``group._refs`` (the alias read what the program wrote)."""
    x = np.arange(4.0)
    jf = ad.jit(lambda a, b: ad.sin(a) + b, donate_argnums=0, engine="host")
    program = jf.lower(x, x).program
    group = ts.AllocationGroup()
    s = group.insert(ts.from_numpy(x))
    alias = group.alias(s, shape=(4,), strides=(1,))
    package = rt.ExecutionInputs(group, [s, alias])
    with pytest.raises(SubmitRejected, match="other record") as info:
        rt.submit(rt.host_engine(), program, package)
    cause, back = info.value.into_parts()
    assert cause.kind is rt.SubmitErrorKind.DONATION and back is package
    with back.group.view(s) as v:  # nothing ran, nothing was written
        np.testing.assert_array_equal(v.to_numpy(), x)


def test_donation_of_an_allocation_no_other_record_describes_is_accepted() -> None:
    """The same program over two separate allocations donates (the refusal above is about
    the alias, not about donation)."""
    x = np.arange(4.0)
    jf = ad.jit(lambda a, b: ad.sin(a) + b, donate_argnums=0, engine="host")
    program = jf.lower(x, x).program
    group = ts.AllocationGroup()
    package = rt.ExecutionInputs(group, [group.insert(ts.from_numpy(x)),
                                         group.insert(ts.from_numpy(x))])
    outcome = rt.submit(rt.host_engine(), program, package).wait()
    assert isinstance(outcome, rt.Completed)


# -- the simulated device never adopts one array twice ------------------------------------


def test_the_simulated_device_refuses_to_adopt_one_array_twice() -> None:
    """Two roots over the same bytes would be two owners.  Mutant: ``adopt_device`` not
    checking ``id(array) in _BUFFERS`` (the second adoption succeeds)."""
    with sim_provider() as sim:
        domain = sim.context.domain
        arr = np.arange(3.0)
        first = device_tensor(domain, arr, ts.AllocationReason.OPERATION_OUTPUT, "kernel")
        with ledger.capture() as rec, pytest.raises(LayoutError):
            device_tensor(domain, arr, ts.AllocationReason.OPERATION_OUTPUT, "kernel")
        assert not rec.allocations  # the refusal allocated nothing
        del first


# -- a bind failure on a later binding leaves the group unborrowed ------------------------


def test_a_bind_failure_on_a_later_binding_leaves_the_group_unborrowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first binding was bound (a shared borrow of the group) when the second failed:
    the rejection gives every borrow back *before* it raises, so the group can be borrowed
    exclusively while the exception (whose traceback holds the submitting frame) is still
    alive.  Mutant: the rejection not releasing the bindings already bound (their borrows
    end only when the frame dies)."""
    real = ProviderContext._fault
    calls = {"bind": 0}

    def second_bind_fails(self: ProviderContext, operation: str) -> bool:
        if operation == "bind":
            calls["bind"] += 1
            if calls["bind"] == 2:
                return True
        return real(self, operation)

    monkeypatch.setattr(ProviderContext, "_fault", second_bind_fails)
    with sim_provider() as sim:
        pkg, sx, sy = inputs()
        with pytest.raises(SubmitRejected) as info:
            rt.submit(sim.engine, axpy_program(), pkg)
        err = info.value  # kept alive on purpose
        assert calls["bind"] == 2 and err.value is pkg
        assert err.__traceback__ is not None
        pkg.group.view_mut(sx).release()  # no shared borrow left on either binding
        pkg.group.view_mut(sy).release()
        assert sim.counters.enqueues == 0
        del err, info


# -- a program releasing a value before its last use is refused when built ----------------


@pytest.mark.parametrize("early", [1, 2], ids=["one-early", "two-early"])
def test_a_program_releasing_a_value_before_its_last_use_is_refused_when_built(
    early: int,
) -> None:
    """``release_after`` must name a value's last use exactly: a release earlier than that
    would free a buffer a later instruction still reads.  ``CompiledGraph`` refuses it at
    construction (``ProgramError``), before anything can run.  Mutant: the last-use check
    in ``_validate`` weakened to accept a release one or two instructions early."""
    b = rt.ProgramBuilder(1, name="chain")
    (x,) = b.inputs
    u = b.apply(np.sin, x)
    w = b.apply(np.cos, b.apply(np.sin, u))
    program = b.build(b.apply(np.add, w, u))  # u is read last by instruction 3
    ins = list(program.instructions)
    assert u.index in ins[3].release_after
    ins[3] = attrs.evolve(ins[3], release_after=tuple(
        s for s in ins[3].release_after if s != u.index))
    moved = ins[3 - early]
    ins[3 - early] = attrs.evolve(moved, release_after=(*moved.release_after, u.index))
    with pytest.raises(rt.ProgramError, match="before its last use"):
        attrs.evolve(program, instructions=tuple(ins))
    attrs.evolve(program, instructions=program.instructions)  # the exact lists are fine


# -- buffer reuse never raises the peak ----------------------------------------------------


def _held_across_fresh_allocations(a: Any) -> Any:
    u = ad.sin(a)
    v = ad.cos(u.T)  # u dies here, read through a view: its buffer could wait for a taker
    m = ad.concatenate([a, a])  # fresh (not a ufunc): two arrays' worth while u would wait
    r = ad.sum(m, axis=0)  # m dies; r is small
    return ad.exp(v.T) + r  # exp could take u's buffer -- only if u was kept until here


def test_buffer_reuse_never_holds_a_dead_buffer_across_a_fresh_allocation() -> None:
    """A dead buffer is reused only while nothing was allocated since it died: holding u's
    buffer across ``concatenate``'s fresh result would put u, v and m live at once (four
    arrays) where the program without reuse peaks at three.  Mutant: ``_plan_into`` not
    clearing its pool of dead buffers at a fresh allocation (peak 4 arrays instead of 3)."""
    x = ts.from_numpy(np.random.default_rng(0).normal(size=(32, 32)))
    peaks = {}
    for reuse in (True, False):
        jf = ad.jit(_held_across_fresh_allocations, reuse=reuse)
        jf(x)
        with ledger.capture() as rec:
            out = jf(x)
        peaks[reuse] = rec.peak_bytes
        np.testing.assert_allclose(
            out.to_numpy(),
            np.exp(np.cos(np.sin(x.to_numpy()).T).T) + 2 * x.to_numpy().sum(axis=0),
        )
    one = 32 * 32 * 8
    assert peaks[False] < 4 * one
    assert peaks[True] <= peaks[False]


# -- broadcast reductions where a leading axis and a size-1 axis meet ---------------------

BROADCAST_PAIRS = [((1,), (1, 4)), ((1, 1), (3, 1, 4)), ((4,), (3, 1)), ((1, 4), (3, 1)),
                   ((2, 1, 1), (1, 3, 1))]


@pytest.mark.parametrize("xs, ys", BROADCAST_PAIRS, ids=str)
@pytest.mark.parametrize("mode", ["eager", "jit", "second-order"])
def test_broadcast_product_differentiates_back_to_each_argument_shape(
    xs: tuple[int, ...], ys: tuple[int, ...], mode: str
) -> None:
    """``x`` of shape ``(1,)`` times ``y`` of shape ``(1, 4)``: x's cotangent sums over
    the new leading axis *and* over the axis where x has extent 1 (numpy, handle and
    tracing namespaces).  Mutant: ``_unbroadcast_axes`` reading the cotangent's extent at
    the argument's index instead of the aligned one (``gs[i]`` for ``gs[i + nd]``)."""
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=xs), rng.normal(size=ys)

    def f(m: Any, a: Any, b: Any) -> Any:
        return m.sum(m.sin(a * b))

    def gradient(g: Any, m: Any) -> Any:
        return g(lambda s, t: f(m, s, t), argnums=(0, 1))

    ours, theirs = gradient(ad.grad, ad), gradient(jax.grad, jnp)
    if mode == "second-order":  # the gradient's gradient runs the handle namespace
        first_ours, first_theirs = ours, theirs
        ours = ad.grad(lambda p, q: ad.sum(first_ours(p, q)[0]), argnums=(0, 1))
        theirs = jax.grad(lambda p, q: jnp.sum(first_theirs(p, q)[0]), argnums=(0, 1))
    elif mode == "jit":
        ours = ad.jit(ours)
    got, want = ours(x, y), theirs(x, y)
    for g, w, shape in zip(got, want, (xs, ys), strict=True):
        arr = np.asarray(g.to_numpy() if hasattr(g, "to_numpy") else g)
        assert arr.shape == shape
        np.testing.assert_allclose(arr, np.asarray(w), rtol=1e-12, atol=1e-12)


# -- the write-injectivity proof behind group aliases, exhaustively -----------------------


def _brute_injective(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    offs = [sum(i * s for i, s in zip(idx, strides, strict=True))
            for idx in itertools.product(*(range(n) for n in shape))]
    return len(offs) == len(set(offs))


def _small_layouts() -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    out = []
    for rank in (1, 2, 3):
        for shape in itertools.product((1, 2, 3), repeat=rank):
            for strides in itertools.product(range(-4, 5), repeat=rank):
                out.append((shape, strides))
    return out


def test_the_injectivity_proof_is_sound_on_every_small_layout() -> None:
    """Every layout of rank <= 3, extents 1..3 and strides -4..4 (10,000 of them, no
    sampling): whatever the proof accepts reaches distinct elements from distinct
    coordinates (brute force).  The property test this replaces as the only guard missed a
    mutant about one run in five.  Mutants: ``s <= reach`` as ``s < reach``; ``reach +=``
    as ``reach =``."""
    for shape, strides in _small_layouts():
        if prove_injective(shape, strides) is not None:
            assert _brute_injective(shape, strides), (shape, strides)


def test_the_injectivity_proof_accepts_every_dense_permuted_or_flipped_layout() -> None:
    """Completeness where it matters: every axis permutation and sign flip of a dense
    row-major layout (transposes, reversed views) is proven injective.  Mutants: ``abs``
    dropped from the sort key; axes of extent 1 no longer skipped."""
    for shape in itertools.product((1, 2, 3), repeat=3):
        dense = (shape[1] * shape[2], shape[2], 1)
        for perm in itertools.permutations(range(3)):
            for signs in itertools.product((1, -1), repeat=3):
                p_shape = tuple(shape[k] for k in perm)
                p_strides = tuple(signs[k] * dense[k] for k in perm)
                assert prove_injective(p_shape, p_strides) is not None, (p_shape, p_strides)
        assert prove_injective((*shape, 1), (*dense, 0)) is not None  # a stride-0 unit axis


@pytest.mark.parametrize(
    "shape, strides, injective",
    [((2, 3), (3, 1), True), ((2, 3), (2, 1), False), ((3, 2), (1, 3), True),
     ((3, 2), (1, 2), False), ((2, 2), (1, 1), False), ((2, 2), (-2, 1), True),
     ((2, 2, 2), (1, 2, 3), False), ((2, 2, 2), (1, 2, 4), True)],
)
def test_a_group_alias_is_mutably_borrowable_exactly_when_injective(
    shape: tuple[int, ...], strides: tuple[int, ...], injective: bool
) -> None:
    """On the public path: ``AllocationGroup.view_mut`` of an alias succeeds exactly when
    the alias is write-injective, and a refusal (``LayoutError``) changes nothing."""
    group = ts.AllocationGroup()
    s = group.insert(ts.from_numpy(np.arange(16.0)))
    offset = 8 if any(st < 0 for st in strides) else 0
    a = group.alias(s, shape=shape, strides=strides, offset=offset)
    assert _brute_injective(shape, strides) is injective
    if injective:
        group.view_mut(a).release()
    else:
        with pytest.raises(LayoutError):
            group.view_mut(a)
        group.view_mut(s).release()  # the refusal left no borrow behind
