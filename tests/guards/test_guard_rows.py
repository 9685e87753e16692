"""Issue 16: one test per guard the mutation sample found unprotected.

Each test states, in its docstring, which guard it protects and that it was checked by
hand to fail with that guard removed (on a temporary copy of the tree, never in place).
The same mutants are in ``tests/mutation/mutants.toml`` so ``run_mutants.py`` re-checks
them.  Everything is exercised through the public API (``tenferro_ad``,
``tenferro_storage``, ``tenferro_storage.kernel``, ``tenferro_ad.optim``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import ArgumentError, BackwardError, NotUnique
from tenferro_ad.optim import SGD, Adam
from tenferro_storage import _access, ledger
from tenferro_storage.errors import AliasedOutputError, BorrowError, LayoutError


@pytest.fixture
def plain_borrows() -> Iterator[None]:
    """Borrow debug mode off: ``borrow_arrays`` then hands out the values' own memory
    (in debug mode it hands out staged copies, which never share memory)."""
    previous = _access._set_debug_borrows(False)
    try:
        yield
    finally:
        _access._set_debug_borrows(previous)


# -- row 1: adopt_output refuses a view ---------------------------------------------------


def test_adopt_output_refuses_a_slice_of_a_fresh_array() -> None:
    """``kernel.adopt_output(a[2:])`` must not make an owner over ``a``'s memory.

    Fails when the ``array.base is not None`` refusal in ``_root.adopt`` is removed
    (checked): the slice was adopted and the owner shared memory with ``a``."""
    a = np.arange(6.0)
    with ledger.capture() as rec, pytest.raises(LayoutError):
        ts.kernel.adopt_output(a[2:])
    assert rec.allocations == {} and rec.copies == {}
    a[2] = 100.0  # the caller still owns every byte


def test_adopt_output_refuses_a_view_of_a_live_owner() -> None:
    """The bytes of an existing owner (what ``read_array`` hands out, or a slice of it)
    are refused with ``AliasedOutputError``; ``materialize_output`` copies instead.

    Fails when ``refuse_existing_memory``'s live-root check is removed (checked)."""
    t = ts.from_numpy(np.arange(4.0))
    arr = ts.kernel.read_array(t)
    for candidate in (arr, arr[1:]):
        with pytest.raises(AliasedOutputError):
            ts.kernel.adopt_output(candidate)
    with ledger.capture() as rec:
        copy = ts.kernel.materialize_output(arr)
    assert rec.copies == {ts.CopyReason.MATERIALIZE: 1}
    assert not np.shares_memory(ts.kernel.read_array(copy), arr)
    del copy, arr


def test_adopt_output_refuses_a_read_only_array() -> None:
    """A read-only array that owns its memory is not a fresh kernel result.

    Fails when the read-only refusal of ``refuse_existing_memory`` is removed (checked)."""
    a = np.arange(3.0)
    a.flags.writeable = False
    with pytest.raises(AliasedOutputError):
        ts.kernel.adopt_output(a)


# -- row 2: a save_out residual is counted ------------------------------------------------


def test_output_residual_is_not_unique_while_the_tape_needs_it() -> None:
    """``exp(x).into_value()`` is refused while the tape keeps ``exp``'s output for
    backward; writing 100 into a moved-out owner must never reach the gradient.

    Fails when ``_dispatch.bind``'s ``rec.count += 1`` for ``save_out`` residuals is
    removed (checked): into_value succeeded and the gradient became ``[100, 100]``."""
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.array([0.0, 1.0])))
        y = ad.exp(x)
    with pytest.raises(NotUnique):
        y.into_value()
    loss = y  # y is still usable after the refusal
    g = tape.backward(loss, cotangent=np.ones(2))
    np.testing.assert_allclose(g.grad(x).to_numpy(), np.exp([0.0, 1.0]))
    owner = y.into_value()  # the residual was released by backward: now it moves
    owner.fill(100.0)
    del g, owner, x


# -- row 3: gradients of a fan-out program do not share a buffer -------------------------


def test_grad_of_fan_out_gives_unshared_gradients(plain_borrows: None) -> None:
    """``grad`` of ``sum(exp(a + b))`` w.r.t. ``(a, b)``: add's VJP hands one cotangent
    to both arguments; the two delivered owners must not share memory.

    Fails when ``_gradients.deliver`` stops remembering a delivered root
    (``foreign.add(...)`` removed, checked)."""
    a = ts.from_numpy(np.array([0.0, 1.0]))
    b = ts.from_numpy(np.array([1.0, 2.0]))
    ga, gb = ad.grad(lambda p, q: ad.sum(ad.exp(p + q)), argnums=(0, 1))(a, b)
    with ts.borrow_arrays((ga, gb)) as (xa, xb):
        assert not np.shares_memory(xa, xb)
        np.testing.assert_allclose(xa, np.exp([1.0, 3.0]))
    ga.fill(0.0)  # each gradient is its own owner
    np.testing.assert_allclose(gb.to_numpy(), np.exp([1.0, 3.0]))


# -- row 4: optimizer gradient shape ------------------------------------------------------


@pytest.mark.parametrize("opt", [SGD(0.1), SGD(0.1, momentum=0.9), Adam(0.1)])
def test_optimizer_refuses_a_gradient_of_another_shape(opt: Any) -> None:
    """A ``(1,)`` gradient for a ``(3,)`` parameter raises ``ArgumentError`` and changes
    nothing (no broadcast update).

    Fails when the gradient-shape check in ``optim._base._check`` is removed (checked)."""
    p = ts.from_numpy(np.ones(3))
    with pytest.raises(ArgumentError, match="shape"):
        opt.step([p], [ts.from_numpy(np.array([5.0]))])
    np.testing.assert_array_equal(p.to_numpy(), np.ones(3))
    assert opt.steps == 0


# -- rows 5-7: tie splitting and permutation inverses against JAX ------------------------


def _np(x: Any) -> np.ndarray[Any, Any]:
    return np.asarray(x)


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_elementwise_maximum_minimum_split_ties_like_jax(name: str) -> None:
    """At ``x == y`` each argument gets half the cotangent (JAX's convention).

    Fails when the tie weight 0.5 in ``elementwise._pick`` becomes 1.0 (checked)."""
    x = np.array([1.0, 2.0, 3.0, 0.0])
    y = np.array([1.0, 5.0, 3.0, -0.0])
    f = getattr(ad, name)
    jf = getattr(jnp, name)
    w = np.array([1.0, 2.0, 3.0, 4.0])
    gx, gy = ad.grad(lambda a, b: ad.sum(f(a, b) * w), argnums=(0, 1))(x, y)
    jx, jy = jax.grad(lambda a, b: jnp.sum(jf(a, b) * w), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx.to_numpy(), _np(jx))
    np.testing.assert_array_equal(gy.to_numpy(), _np(jy))
    # forward mode agrees too
    _, t = ad.jvp(lambda a: f(a, y), (x,), (np.ones(4),))
    _, jt = jax.jvp(lambda a: jf(a, y), (x,), (np.ones(4),))
    np.testing.assert_array_equal(t.to_numpy(), _np(jt))


@pytest.mark.parametrize("name", ["max", "min"])
def test_reduction_max_min_share_the_gradient_among_ties(name: str) -> None:
    """``max([1, 3, 3])``'s gradient is ``[0, .5, .5]`` (``min([3, 1, 1])`` likewise),
    per reduced row for an axis reduction, as JAX.

    Fails when the tie count in ``reduce._chooser`` is replaced by 1 (checked)."""
    v = np.array([1.0, 3.0, 3.0]) if name == "max" else np.array([3.0, 1.0, 1.0])
    f = getattr(ad, name)
    jf = getattr(jnp, name)
    g = ad.grad(lambda a: f(a))(v)
    np.testing.assert_array_equal(g.to_numpy(), [0.0, 0.5, 0.5])
    m = np.array([[2.0, 2.0, 2.0], [1.0, 4.0, 4.0]]) * (1 if name == "max" else -1)
    w = np.array([1.0, 3.0])
    g2 = ad.grad(lambda a: ad.sum(f(a, axis=1) * w))(m)
    j2 = jax.grad(lambda a: jnp.sum(jf(a, axis=1) * w))(m)
    np.testing.assert_allclose(g2.to_numpy(), _np(j2), rtol=0, atol=1e-15)
    _, t = ad.jvp(lambda a: f(a, axis=1), (m,), (np.arange(6.0).reshape(2, 3),))
    _, jt = jax.jvp(lambda a: jf(a, axis=1), (m,), (np.arange(6.0).reshape(2, 3),))
    np.testing.assert_allclose(t.to_numpy(), _np(jt), rtol=0, atol=1e-15)


@pytest.mark.parametrize(
    ("shape", "axes"),
    [((3, 3, 3), (1, 2, 0)), ((2, 3, 4), (2, 0, 1)), ((2, 3, 4, 5), (1, 3, 0, 2))],
)
def test_transpose_vjp_uses_the_inverse_permutation(
    shape: tuple[int, ...], axes: tuple[int, ...]
) -> None:
    """A 3-cycle on a cube and non-self-inverse permutations on other shapes: gradient
    equals JAX's.

    Fails when transpose's VJP uses ``axes`` instead of ``_inverse(axes)`` (checked):
    wrong values on the cube, an error on the other shapes."""
    x = np.arange(float(np.prod(shape))).reshape(shape)
    w = np.sin(np.arange(float(np.prod(shape)))).reshape(tuple(shape[a] for a in axes))
    g = ad.grad(lambda a: ad.sum(ad.transpose(a, axes) * w))(x)
    j = jax.grad(lambda a: jnp.sum(jnp.transpose(a, axes) * w))(x)
    np.testing.assert_array_equal(g.to_numpy(), _np(j))


# -- "also" items -------------------------------------------------------------------------


def test_double_release_detector_fires() -> None:
    """Releasing one allocation twice is recorded in ``ledger.double_releases()``.

    Fails when ``_Ledger.release`` stops appending to ``double_releases`` (checked).
    The test removes its own entry so the suite's leak check stays quiet."""
    from tenferro_storage._ledger import LEDGER

    before = len(ledger.double_releases())
    alloc = LEDGER.allocate(ts.AllocationReason.OPERATION_OUTPUT, 8, "test")
    LEDGER.release(ts.AllocationReason.OPERATION_OUTPUT, 8, alloc)
    try:
        assert ledger.double_releases()[before:] == ()
        LEDGER.release(ts.AllocationReason.OPERATION_OUTPUT, 8, alloc)
        assert ledger.double_releases()[before:] == (alloc,)
    finally:
        while alloc in LEDGER.double_releases:
            LEDGER.double_releases.remove(alloc)


def test_second_backward_on_a_leaf_loss_raises() -> None:
    """``tape.backward(x)`` twice with ``x`` a watched leaf: the first gives 1, the second
    raises ``BackwardError`` (the residuals are gone), and ``keep=True`` allows a second.

    Fails when ``Tape.backward``'s ``self._released`` check is removed (checked)."""
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.array(2.0)))
    g = tape.backward(x)
    assert g.grad(x).item() == 1.0
    with pytest.raises(BackwardError):
        tape.backward(x)
    with ad.Tape() as t2:
        y = t2.watch(ts.from_numpy(np.array(2.0)))
    t2.backward(y, keep=True)
    assert t2.backward(y).grad(y).item() == 1.0
    del g, x, y


class _Boom(Exception):
    pass


@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "vjp", "jvp"])
def test_function_raising_inside_a_transform_leaves_its_argument_free(transform: str) -> None:
    """A function that raises inside ``grad`` (and the other transforms): while the
    exception (and so its traceback) is kept, the argument owner can be written again.

    Fails when ``grad``'s ``finally: call.release()`` is removed (checked): the owner
    stayed borrowed until the exception was dropped."""
    a = ts.from_numpy(np.array([1.0, 2.0]))

    def f(p: Any) -> Any:
        q = ad.sin(p)
        raise _Boom(q)

    kept: list[BaseException] = []
    try:
        if transform == "grad":
            ad.grad(f)(a)
        elif transform == "value_and_grad":
            ad.value_and_grad(f)(a)
        elif transform == "vjp":
            ad.vjp(f, a)
        else:
            ad.jvp(f, (a,), (np.ones(2),))
    except _Boom as e:
        kept.append(e)
    assert kept
    try:
        a.fill(3.0)  # the exception still references the function's frames
    except BorrowError as e:  # pragma: no cover - the failure this test exists for
        pytest.fail(f"{transform}: the argument stayed borrowed after the raise: {e}")
    np.testing.assert_array_equal(a.to_numpy(), [3.0, 3.0])
    kept.clear()
    gc.collect()


# -- failure paths of the functional API and the optimizers (same pattern) ---------------


def test_a_refused_grad_call_leaves_no_argument_borrowed() -> None:
    """``grad(f, argnums=(0, 1))(a, x)`` inside ``forbid_copies()`` with ``x`` a numpy
    array: ``a`` is borrowed first, then importing ``x`` (a recorded TRANSFER) is
    refused with ``CopyForbiddenError`` before ``f`` runs; ``a`` is free again even while
    the exception (and so the call's frames) is kept.

    Fails when ``_Call``'s undo stops releasing the borrows it took (checked)."""
    from tenferro_storage.errors import CopyForbiddenError

    a = ts.from_numpy(np.array([1.0, 2.0]))
    x = np.array([3.0, 4.0])
    with ledger.forbid_copies(), pytest.raises(CopyForbiddenError) as err:
        ad.grad(lambda p, q: ad.sum(p * q), argnums=(0, 1))(a, x)
    a.fill(0.0)  # not left borrowed, even while the traceback (kept in err) lives
    del err
    ga, gx = ad.grad(lambda p, q: ad.sum(p * q), argnums=(0, 1))(a, x)
    np.testing.assert_array_equal(ga.to_numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(gx.to_numpy(), [0.0, 0.0])


def test_optimizer_refuses_one_parameter_passed_twice() -> None:
    """Fails when ``optim._base._check``'s same-parameter check is removed (checked)."""
    p = ts.from_numpy(np.ones(2))
    g = np.ones(2)
    with pytest.raises(ArgumentError, match="same parameter"):
        SGD(0.5).step([p, p], [g, g])
    np.testing.assert_array_equal(p.to_numpy(), np.ones(2))


def test_optimizer_step_refused_by_a_borrow_leaves_every_parameter_free() -> None:
    """The second parameter is being read (a shared view): ``step`` raises
    ``BorrowError`` when it borrows it for writing, changes nothing, and the first
    parameter (borrowed first) is not left borrowed, even while the exception is kept.

    Fails when ``optim._base._borrow_all``'s undo is removed (checked)."""
    p1 = ts.from_numpy(np.ones(2))
    p2 = ts.from_numpy(np.ones(2))
    m = p2.as_view()
    with pytest.raises(BorrowError) as err:
        SGD(0.5).step([p1, p2], [np.ones(2), np.ones(2)])
    p1.fill(3.0)  # not left borrowed, even while the traceback (kept in err) lives
    del err
    m.release()
    np.testing.assert_array_equal(p1.to_numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(p2.to_numpy(), np.ones(2))


def test_backward_refuses_a_cotangent_of_another_shape_or_dtype() -> None:
    """A ``(2,)`` cotangent for a ``(3,)`` loss raises ``ArgumentError``; a float32
    cotangent for a float64 loss raises ``ArgumentTypeError`` (as JAX); the tape is
    unchanged by either refusal.

    Fails when ``check_cotangent``'s shape check (checked) or dtype check (checked) is
    removed."""
    from tenferro_ad.errors import ArgumentTypeError

    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.array([1.0, 2.0, 3.0])))
        y = ad.exp(x)
    with pytest.raises(ArgumentError, match="shape"):
        tape.backward(y, cotangent=np.ones(2))
    with pytest.raises(ArgumentTypeError, match="dtype"):
        tape.backward(y, cotangent=np.ones(3, np.float32))
    g = tape.backward(y, cotangent=np.ones(3))
    np.testing.assert_allclose(g.grad(x).to_numpy(), np.exp([1.0, 2.0, 3.0]))
    del g, x, y


def test_into_value_is_refused_while_another_handle_owns_the_value() -> None:
    """Two handles of one value (``tape.watch`` of a handle): ``into_value`` of either is
    ``NotUnique`` until the other is gone.

    Fails when ``into_value``'s count check is removed (checked)."""
    h = ad.exp(ts.from_numpy(np.zeros(2)))
    with ad.Tape() as tape:
        w = tape.watch(h)
    with pytest.raises(NotUnique):
        h.into_value()
    del w, tape
    gc.collect()
    owner = h.into_value()
    np.testing.assert_array_equal(owner.to_numpy(), [1.0, 1.0])
