"""Issue 10: ownership that is strict where it matters and invisible in natural code.

Each test proves one rule on the public API:

1. ops *borrow* owners (``Tensor``) and views; they never consume them, and a function
   written for ``ad.grad`` runs when called directly on owners, numpy arrays and scalars;
2. while a tape, a checkpoint region or a ``vjp`` function needs a borrowed owner for
   backward, every mutating or consuming use of it raises ``BorrowError`` naming the holder
   and the op; afterwards it works again; no copy is made to get out of this;
3. one owner per allocation: nothing hands out memory another value holds (kernel
   outputs, delivered gradients), and objects holding borrows refuse to be duplicated;
4. no copy the ledger does not see (metadata-only ops are aliases; late writes through
   prepared arrays are caught in debug mode; alias records go with their handles).

The failure-path half of the issue ("a failed call changes nothing") is in
``test_failed_calls.py``; the random-program property test in
``test_ownership_property.py``.
"""

from __future__ import annotations

import copy
import gc
import pickle
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import extend
from tenferro_ad.errors import ArgumentTypeError, BackwardError, NotUnique
from tenferro_storage import AllocationReason, CopyReason, _access, ledger
from tenferro_storage.errors import (
    AliasedOutputError,
    BorrowError,
    ExtractError,
    OwnershipError,
)

pytestmark = pytest.mark.both_borrow_modes  # debug mode and the default mode

OUT = AllocationReason.OPERATION_OUTPUT


def _arr(x: Any) -> np.ndarray[Any, Any]:
    """The kernel array of an owner or view (read in place: no copy, no ledger event)."""
    return ts.kernel.read_array(x)


def _shares(h: ad.EagerTensor, owner: Any) -> bool:
    """Whether handle ``h``'s value lies in ``owner``'s memory (read through value())."""
    with h.value() as v:
        return bool(np.shares_memory(_arr(v), _arr(owner)))


def _borrow_error_message(t: ts.Tensor[Any, Any]) -> str:
    """The message of the BorrowError that ``fill`` raises (``"no error"`` if it works)."""
    try:
        t.fill(0.0)
    except BorrowError as e:
        return str(e)
    return "no error"


def _can_borrow_mut(t: ts.Tensor[Any, Any]) -> bool:
    try:
        m = t.as_view_mut()
    except BorrowError:
        return False
    m.release()
    return True


@pytest.fixture
def debug_borrows() -> Iterator[None]:
    """Borrow debug mode (``TENFERRO_DEBUG_BORROWS``) for prepared accesses in this test."""
    previous = _access._set_debug_borrows(True)
    try:
        yield
    finally:
        _access._set_debug_borrows(previous)


# == 1. ops borrow ===========================================================================


def test_op_on_owner_borrows_it_and_the_owner_stays_readable() -> None:
    """``ad.sin(a)`` then ``a.to_numpy()`` works: the op borrowed ``a`` (one fresh output
    allocation, no copy) and gave it back."""
    a = ts.from_numpy([1.0, 2.0, 3.0])
    with ledger.capture() as rec:
        y = ad.sin(a)
    assert rec.allocations == {OUT: 1} and rec.copies == {}
    np.testing.assert_array_equal(a.to_numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_allclose(y.to_numpy(), np.sin([1.0, 2.0, 3.0]))
    assert not _shares(y, a)  # the result is fresh
    assert _can_borrow_mut(a)  # nothing kept a borrow once the op returned
    a.fill(0.0)  # ... so the caller may write it again
    np.testing.assert_allclose(y.to_numpy(), np.sin([1.0, 2.0, 3.0]))


def test_one_owner_feeds_any_number_of_ops_on_and_off_a_tape() -> None:
    data = ts.from_numpy(np.arange(1.0, 5.0))
    outs = [ad.exp(data), ad.log(data), data * 2.0, data + data, ad.sum(data), data @ data]
    with ad.Tape() as tape:
        w = tape.watch(ts.from_numpy(np.ones(4)))
        loss = ad.sum(w * data) + ad.sum(ad.sin(data) * w) + ad.sum(data * w * data)
    g = tape.backward(loss)
    x = np.arange(1.0, 5.0)
    np.testing.assert_allclose(g.grad(w).to_numpy(), x + np.sin(x) + x * x)
    np.testing.assert_array_equal(data.to_numpy(), x)
    np.testing.assert_allclose(outs[5].item(), x @ x)
    assert _can_borrow_mut(data)
    del outs, g


def _loss_fn(params: dict[str, Any], x: Any) -> Any:
    """A loss written for ``ad.grad``: ``@``, ``+``, ``-``, ``**``, indexing, reductions."""
    h = x @ params["w"] + params["b"]
    return ((h[0:2] - 1.0) ** 2).sum() + (h[:, 1] * 0.5).sum()


def _loss_np(params: dict[str, Any], x: np.ndarray[Any, Any]) -> float:
    h = x @ params["w"] + params["b"]
    return float(((h[0:2] - 1.0) ** 2).sum() + (h[:, 1] * 0.5).sum())


def test_function_written_for_grad_runs_directly_on_owners_numpy_and_scalars() -> None:
    rng = np.random.default_rng(0)
    w_np, b_np, x_np = rng.normal(size=(3, 2)), rng.normal(size=2), rng.normal(size=(4, 3))
    params = {"w": ts.from_numpy(w_np), "b": ts.from_numpy(b_np)}
    x = ts.from_numpy(x_np)
    expected = _loss_np({"w": w_np, "b": b_np}, x_np)
    on_owners = _loss_fn(params, x)  # logging a loss outside grad: owners only borrowed
    assert on_owners.item() == pytest.approx(expected)
    assert _loss_fn({"w": w_np, "b": b_np}, x_np).item() == pytest.approx(expected)
    assert _loss_fn({"w": w_np, "b": 0.5}, x).item() == pytest.approx(
        _loss_np({"w": w_np, "b": 0.5}, x_np)
    )
    value, grads = ad.value_and_grad(_loss_fn)(params, x)
    assert value.item() == pytest.approx(expected)
    jg = jax.grad(lambda p: _loss_np_jax(p, jnp.asarray(x_np)))({"w": w_np, "b": b_np})
    np.testing.assert_allclose(grads["w"].to_numpy(), jg["w"], rtol=1e-12)
    np.testing.assert_allclose(grads["b"].to_numpy(), jg["b"], rtol=1e-12)
    # the owners are still usable (nothing consumed): call it again on the same ones
    assert _loss_fn(params, x).item() == pytest.approx(expected)
    np.testing.assert_array_equal(params["w"].to_numpy(), w_np)
    np.testing.assert_array_equal(x.to_numpy(), x_np)


def _loss_np_jax(params: dict[str, Any], x: Any) -> Any:
    h = x @ params["w"] + params["b"]
    return ((h[0:2] - 1.0) ** 2).sum() + (h[:, 1] * 0.5).sum()


@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "vjp"])
def test_non_differentiated_arguments_reach_f_unchanged(transform: str) -> None:
    """As in JAX: a numpy array stays that numpy array, an owner stays the same owner
    object (borrowed), an int stays an int; only argument 0 becomes a tracked handle."""
    data_np = np.array([1.0, 2.0, 3.0])
    owner = ts.from_numpy(np.array([4.0, 5.0, 6.0]))
    seen: list[Any] = []

    def f(p: Any, data: Any, table: Any, k: Any) -> Any:
        seen.append((type(p), data, table, k))
        assert type(p) is ad.EagerTensor and p.is_tracked
        assert data is data_np and type(data) is np.ndarray
        assert table is owner
        assert type(k) is int and k == 2
        return ad.sum(p * data * table) * k

    p = ts.from_numpy(np.ones(3))
    expected = 2 * data_np * np.array([4.0, 5.0, 6.0])
    if transform == "grad":
        g = ad.grad(f)(p, data_np, owner, 2)
    elif transform == "value_and_grad":
        _, g = ad.value_and_grad(f)(p, data_np, owner, 2)
    else:
        out, fn = ad.vjp(lambda q: f(q, data_np, owner, 2), p)
        (g,) = fn(np.ones(()))
        del out, fn
    assert len(seen) == 1
    np.testing.assert_allclose(g.to_numpy(), expected)
    assert _can_borrow_mut(owner)  # the borrow ended with the call


@pytest.mark.parametrize("index_kind", ["owners", "handles"])
def test_integer_owners_and_handles_index_with_a_gather_vjp_matching_jax(
    index_kind: str,
) -> None:
    z_np = np.arange(12.0).reshape(4, 3) / 7.0
    rows_np, labels_np = np.array([0, 1, 2, 3, 1]), np.array([2, 0, 1, 2, 0])
    rows, labels = ts.from_numpy(rows_np), ts.from_numpy(labels_np)
    assert rows.dtype == ts.int64
    idx: tuple[Any, Any] = (
        (rows, labels) if index_kind == "owners" else (ad.constant(rows), ad.constant(labels))
    )

    def f(z: Any, r: Any, lab: Any) -> Any:
        return ad.sum(ad.sin(z[r, lab]) * np.array([1.0, 2.0, 3.0, 4.0, 5.0]))

    val, g = ad.value_and_grad(f)(ts.from_numpy(z_np), *idx)

    def fj(z: Any) -> Any:
        return jnp.sum(jnp.sin(z[rows_np, labels_np]) * jnp.array([1.0, 2.0, 3.0, 4.0, 5.0]))

    assert val.item() == pytest.approx(float(fj(z_np)))
    np.testing.assert_allclose(g.to_numpy(), jax.grad(fj)(z_np), rtol=1e-12)
    # the index owners were only read
    np.testing.assert_array_equal(rows.to_numpy(), rows_np)
    np.testing.assert_array_equal(labels.to_numpy(), labels_np)
    del idx
    assert _can_borrow_mut(rows) and _can_borrow_mut(labels)


def test_constant_is_reusable_untracked_zero_copy_and_holds_a_borrow_while_alive() -> None:
    t = ts.from_numpy(np.array([1.0, 2.0, 3.0]))
    with ledger.capture() as rec:
        c = ad.constant(t)
    with pytest.raises(BorrowError, match=r"ad\.constant"):
        t.as_view_mut()
    assert rec.allocations == {} and rec.copies == {}  # zero-copy: no allocation, no copy
    assert not c.is_tracked
    with c.value() as v:
        assert np.shares_memory(_arr(v), _arr(t))
    ys = [ad.exp(c), c * c, ad.sum(c)]  # reusable: any number of ops
    np.testing.assert_allclose(ys[1].to_numpy(), [1.0, 4.0, 9.0])
    with ad.Tape() as tape:
        w = tape.watch(ts.from_numpy(np.ones(3)))
        loss = ad.sum(w * c)
    with pytest.raises(BackwardError, match="not tracked"):
        tape.backward(loss, wrt=[c])  # untracked: nothing to differentiate
    np.testing.assert_allclose(tape.backward(loss, wrt=[w]).grad(w).to_numpy(), [1, 2, 3])
    with pytest.raises(BorrowError):
        t.take()
    np.testing.assert_array_equal(t.to_numpy(), [1.0, 2.0, 3.0])
    del c, ys, loss, w, tape
    assert _can_borrow_mut(t)  # the borrow ends with the handle


# == 2. borrowed while needed for backward ===================================================


def _mutators() -> dict[str, Callable[[ts.Tensor[Any, Any]], Any]]:
    def insert(t: ts.Tensor[Any, Any]) -> Any:
        return ts.AllocationGroup().insert(t)

    def sgd(t: ts.Tensor[Any, Any]) -> Any:
        return ad.optim.SGD(0.1).step([t], [np.ones(t.shape)])

    def adam(t: ts.Tensor[Any, Any]) -> Any:
        return ad.optim.Adam(0.1).step({"p": t}, {"p": np.ones(t.shape)})

    def prepare(t: ts.Tensor[Any, Any]) -> Any:
        with t.prepare_host_mut() as p:
            p.as_array()[...] = -1.0

    return {
        "as_view_mut": lambda t: t.as_view_mut(),
        "prepare_host_mut": prepare,
        "fill": lambda t: t.fill(-1.0),
        "optim.SGD.step": sgd,
        "optim.Adam.step": adam,
        "AllocationGroup.insert": insert,
        "take": lambda t: t.take(),
        "into_storage": lambda t: t.into_storage(),
    }


MUTATORS = _mutators()


@pytest.mark.parametrize("mutator", sorted(MUTATORS))
@pytest.mark.parametrize("ending", ["backward", "release", "drop"])
def test_tape_residual_borrow_refuses_mutation_naming_tape_and_op_until_it_ends(
    mutator: str, ending: str
) -> None:
    d_np = np.array([1.0, 2.0, 3.0])
    d = ts.from_numpy(d_np)
    with ad.Tape(name="TrainTape") as tape:
        w = tape.watch(ts.from_numpy(np.array([0.5, 0.5, 0.5])))
        loss = ad.sum(w * d)
    with pytest.raises(BorrowError, match=r"TrainTape: residual of mul") as err:
        MUTATORS[mutator](d)
    del err
    np.testing.assert_array_equal(d.to_numpy(), d_np)  # refused: nothing changed
    if ending == "backward":
        g = tape.backward(loss)
        np.testing.assert_array_equal(g.grad(w).to_numpy(), d_np)
        del g
    elif ending == "release":
        tape.release()
    else:
        del tape, loss, w
    MUTATORS[mutator](d)  # works again: the tape let go


def test_tape_retained_lists_the_borrowed_constant_with_the_op_that_needs_it() -> None:
    d = ts.from_numpy(np.array([1.0, 2.0, 3.0]))
    with ad.Tape() as tape:
        w = tape.watch(ts.from_numpy(np.ones((2, 3))))
        loss = ad.sum(w * d)
    entries = {e.shape: e for e in tape.retained()}
    assert (3,) in entries, tape.retained()
    assert entries[(3,)].needed_by == ("mul.vjp",)
    assert entries[(3,)].nbytes == d.nbytes and entries[(3,)].dtype == "float64"
    tape.release()
    assert tape.retained() == []
    del loss, w


def test_borrow_error_names_the_live_holder_after_a_later_view_ended() -> None:
    d = ts.from_numpy(np.ones(3))
    with ad.Tape(name="HolderTape") as tape:
        w = tape.watch(ts.from_numpy(np.ones(3)))
        loss = ad.sum(w * d)
    with d.as_view() as v:  # e.g. logging the dataset; the borrow ends with the block
        v.to_numpy()
    msg = _borrow_error_message(d)
    del tape, loss, w, d, v  # nothing stays alive if the assertion below fails
    assert "HolderTape: residual of mul" in msg, msg


def test_borrowing_for_backward_makes_no_copy() -> None:
    d = ts.from_numpy(np.array([1.0, 2.0, 3.0]))
    w0 = ts.from_numpy(np.ones(3))
    with ledger.capture() as rec:
        with ad.Tape() as tape:
            w = tape.watch(w0)
            loss = ad.sum(ad.sin(w * d) * d)
        g = tape.backward(loss)
        grad_w = g.take_grad(w)
    assert rec.copies == {}
    np.testing.assert_allclose(grad_w.to_numpy(), np.cos([1.0, 2.0, 3.0]) * [1.0, 4.0, 9.0])
    with ledger.capture() as rec:
        val, gf = ad.value_and_grad(lambda p, q: ad.sum(p * q))(grad_w, d)
    assert rec.copies == {}
    del val, gf, loss, w, tape, g


def test_vjp_function_holds_the_primal_borrows_until_released_or_dropped() -> None:
    p, d = ts.from_numpy(np.array([1.0, 2.0])), ts.from_numpy(np.array([3.0, 4.0]))

    def product(a: Any, b: Any) -> Any:
        return a * b

    out, fn = ad.vjp(product, p, d)
    for owner in (p, d):
        with pytest.raises(BorrowError, match=r"vjp\(product\)"):
            owner.fill(0.0)
    ga, _gb = fn(np.ones(2))
    np.testing.assert_array_equal(ga.to_numpy(), [3.0, 4.0])
    with pytest.raises(BorrowError, match=r"vjp\(product\)"):
        d.as_view_mut()  # still needed: fn can be called again
    ga2, _ = fn(np.full(2, 2.0))
    np.testing.assert_array_equal(ga2.to_numpy(), [6.0, 8.0])
    fn.release()
    assert _can_borrow_mut(p) and _can_borrow_mut(d)
    out2, fn2 = ad.vjp(product, p, d)
    assert not _can_borrow_mut(d)
    del fn2
    assert _can_borrow_mut(d)  # dropping the pullback ends the borrows too
    del out, out2


def _region_tape(d: ts.Tensor[Any, Any]) -> tuple[ad.Tape, ad.EagerTensor, ad.EagerTensor]:
    with ad.Tape() as tape:
        w = tape.watch(ts.from_numpy(np.ones(3)))
        with tape.checkpoint():
            h = ad.sin(w * d)
        loss = ad.sum(h)
    return tape, w, loss


def test_checkpoint_region_borrow_refuses_mutation_naming_region_and_op() -> None:
    d_np = np.array([1.0, 2.0, 3.0])
    d = ts.from_numpy(d_np)
    tape, w, loss = _region_tape(d)
    with pytest.raises(BorrowError, match=r"checkpoint region .*: mul"):
        d.fill(0.0)
    with pytest.raises(BorrowError, match=r"checkpoint region .*: mul"):
        ts.AllocationGroup().insert(d)
    g = tape.backward(loss)
    np.testing.assert_allclose(g.grad(w).to_numpy(), np.cos(d_np) * d_np)
    np.testing.assert_array_equal(d.to_numpy(), d_np)
    del tape, g, loss, w
    assert _can_borrow_mut(d)  # dropped with the tape


@pytest.mark.parametrize("ending", ["backward", "release"])
def test_checkpoint_region_borrow_ends_after_backward_or_release(ending: str) -> None:
    d = ts.from_numpy(np.array([1.0, 2.0, 3.0]))
    tape, w, loss = _region_tape(d)
    if ending == "backward":
        tape.backward(loss)
    else:
        tape.release()
    free = _can_borrow_mut(d)
    del tape, w, loss, d  # nothing stays alive if the assertion below fails
    assert free


def test_tape_retained_lists_a_checkpoint_regions_borrowed_constant() -> None:
    d = ts.from_numpy(np.array([1.0, 2.0, 3.0, 4.0]))
    with ad.Tape() as tape:
        w = tape.watch(ts.from_numpy(np.ones((2, 4))))
        with tape.checkpoint():
            h = ad.sin(w * d)
        loss = ad.sum(h)
    shapes = {e.shape for e in tape.retained()}
    del tape, w, loss, h, d  # nothing stays alive if the assertion below fails
    assert (4,) in shapes, shapes


def test_gradients_read_as_numpy_in_one_borrow_scope_without_copies() -> None:
    """``ts.borrow_arrays`` hands out the gradient owners' own memory (no TRANSFER copy,
    no ledger event) and holds a named borrow for the block."""
    params = {"w": ts.from_numpy(np.array([1.0, 2.0])), "b": ts.from_numpy(np.array([3.0]))}
    grads = ad.grad(lambda p: ad.sum(p["w"] * p["w"]) + ad.sum(p["b"] * 2.0))(params)
    with ledger.capture() as rec:
        with ts.borrow_arrays(grads) as arrays:
            np.testing.assert_array_equal(arrays["w"], [2.0, 4.0])
            np.testing.assert_array_equal(arrays["b"], [2.0])
            with pytest.raises(BorrowError, match="borrow_arrays"):
                grads["w"].fill(0.0)
    assert rec.copies == {} and rec.allocations == {}
    assert _can_borrow_mut(grads["w"]) and _can_borrow_mut(grads["b"])
    previous = _access._set_debug_borrows(False)  # normal mode: the arrays are the memory
    try:
        with ts.borrow_arrays(grads["w"]) as arr:
            assert np.shares_memory(arr, _arr(grads["w"]))
    finally:
        _access._set_debug_borrows(previous)


# == 3. one owner per allocation =============================================================


def test_adopt_output_refuses_a_kernel_input_array() -> None:
    a = ts.from_numpy(np.arange(3.0))
    with ledger.capture() as rec, pytest.raises(AliasedOutputError, match="materialize_output"):
        ts.kernel.adopt_output(_arr(a))
    assert rec.allocations == {} and rec.copies == {}
    with ledger.capture() as rec, pytest.raises(AliasedOutputError):
        ts.kernel.adopt_output(_arr(a)[1:])  # a part of it too
    assert rec.allocations == {}
    np.testing.assert_array_equal(a.to_numpy(), [0.0, 1.0, 2.0])
    assert _can_borrow_mut(a)


IDENTITY = extend.defprimitive(
    "test_identity", lambda x: x, 1, vjp=(lambda ops, g: g,), jvp=(lambda ops, t: t,)
)


def test_identity_user_primitive_yields_a_fresh_owner_with_one_recorded_copy() -> None:
    """``lambda a: a`` through ``extend``: one MATERIALIZE copy, one allocation, counted
    once; the result shares no memory with the input and is uniquely owned."""
    a = ts.from_numpy(np.arange(4.0))
    with ledger.capture() as rec:
        y = extend.bind(IDENTITY, a)
    assert rec.copies == {CopyReason.MATERIALIZE: 1}
    assert rec.allocations == {OUT: 1} and rec.live_bytes == a.nbytes
    assert not _shares(y, a)
    owner = y.into_value()  # uniquely owned: moves out without a copy
    owner.fill(9.0)
    np.testing.assert_array_equal(a.to_numpy(), np.arange(4.0))
    with ad.Tape() as tape:
        h = tape.watch(ts.from_numpy(np.arange(4.0)))
        with ledger.capture() as rec:
            y2 = extend.bind(IDENTITY, h)
    assert rec.copies == {CopyReason.MATERIALIZE: 1}
    with y2.value() as v2, h.value() as vh:
        assert not np.shares_memory(_arr(v2), _arr(vh))
    del y2, h, tape


def test_backward_through_identity_vjp_delivers_a_gradient_not_sharing_the_cotangent() -> None:
    c = ts.from_numpy(np.array([1.0, 2.0, 3.0]))
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.zeros(3)))
        y = extend.bind(IDENTITY, x)
    with ledger.capture() as rec:
        g = tape.backward(y, cotangent=c)
    assert rec.copies == {CopyReason.MATERIALIZE: 1}
    assert rec.allocations == {OUT: 1}
    gx = g.take_grad(x)
    assert gx is not None and not np.shares_memory(_arr(gx), _arr(c))
    gx.fill(-7.0)  # writing into the gradient owner ...
    np.testing.assert_array_equal(c.to_numpy(), [1.0, 2.0, 3.0])  # ... leaves c unchanged
    assert _can_borrow_mut(c)
    del y, x, tape


def test_vjp_through_identity_delivers_a_gradient_not_sharing_the_cotangent() -> None:
    c = ts.from_numpy(np.array([1.0, 2.0]))
    out, fn = ad.vjp(lambda p: extend.bind(IDENTITY, p), ts.from_numpy(np.zeros(2)))
    with ledger.capture() as rec:
        (g,) = fn(c)
    assert rec.copies == {CopyReason.MATERIALIZE: 1}
    assert not np.shares_memory(_arr(g), _arr(c))
    g.fill(5.0)
    np.testing.assert_array_equal(c.to_numpy(), [1.0, 2.0])
    del out, fn


def test_create_graph_gradient_is_never_the_callers_cotangent_handle() -> None:
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.zeros(3)))
        y = extend.bind(IDENTITY, x)
        c = ad.constant(np.array([1.0, 2.0, 3.0]))
        g = tape.backward(y, cotangent=c, create_graph=True)
    gh = g.handle(x)
    assert gh is not None and gh is not c
    with pytest.raises(ExtractError):
        g.take_grad(x)  # shared with the caller's handle: refused, not consumed
    np.testing.assert_array_equal(c.to_numpy(), [1.0, 2.0, 3.0])  # c still usable
    np.testing.assert_array_equal(ad.sum(c * 2.0).item(), 12.0)
    again = g.handle(x)  # the bundle is unchanged by the refusal
    assert again is gh
    np.testing.assert_array_equal(gh.to_numpy(), [1.0, 2.0, 3.0])
    del y, x, tape, gh, again


RETURNS_RESIDUAL = extend.defprimitive(
    "test_square_returning_residual",
    lambda x: x * x,
    1,
    save_in=(0,),
    vjp=(lambda ops, g, x: x,),  # deliberately returns its residual
)


def test_custom_vjp_returning_its_residual_gives_an_unshared_gradient() -> None:
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.array([1.0, 2.0, 3.0])))
        y = extend.bind(RETURNS_RESIDUAL, x)
    with ledger.capture() as rec:
        g = tape.backward(y, keep=True)
    assert rec.copies == {CopyReason.MATERIALIZE: 1}
    gx = g.take_grad(x)
    assert gx is not None
    with x.value() as vx:
        assert not np.shares_memory(_arr(gx), _arr(vx))
    gx.fill(0.0)
    np.testing.assert_array_equal(x.to_numpy(), [1.0, 2.0, 3.0])  # the residual is intact
    g2 = tape.backward(y)  # the tape still differentiates from its residual
    np.testing.assert_array_equal(g2.grad(x).to_numpy(), [1.0, 2.0, 3.0])
    del y, g2


def _noncopyables() -> dict[str, Callable[[], tuple[Any, Callable[[Any], None], list[Any]]]]:
    """Factories: (object, check that it still works, other things to keep alive)."""

    def tape() -> tuple[Any, Callable[[Any], None], list[Any]]:
        with ad.Tape() as t:
            x = t.watch(ts.from_numpy(np.array([1.0, 2.0])))
            y = ad.sum(ad.exp(x))

        def works(obj: Any) -> None:
            np.testing.assert_allclose(obj.backward(y).grad(x).to_numpy(), np.exp([1.0, 2.0]))

        return t, works, [x, y]

    def vjp_fn() -> tuple[Any, Callable[[Any], None], list[Any]]:
        out, fn = ad.vjp(lambda p: ad.sin(p), ts.from_numpy(np.array([0.0, 1.0])))

        def works(obj: Any) -> None:
            (g,) = obj(np.ones(2))
            np.testing.assert_allclose(g.to_numpy(), np.cos([0.0, 1.0]))

        return fn, works, [out]

    def gradients() -> tuple[Any, Callable[[Any], None], list[Any]]:
        with ad.Tape() as t:
            x = t.watch(ts.from_numpy(np.array([1.0, 2.0])))
            y = ad.sum(x * x)
        g = t.backward(y)

        def works(obj: Any) -> None:
            np.testing.assert_array_equal(obj.grad(x).to_numpy(), [2.0, 4.0])
            np.testing.assert_array_equal(obj.take_grad(x).to_numpy(), [2.0, 4.0])

        return g, works, [x, y, t]

    def value_guard() -> tuple[Any, Callable[[Any], None], list[Any]]:
        h = ad.exp(ad.constant(np.array([0.0, 1.0])))
        guard = h.value()

        def works(obj: Any) -> None:
            np.testing.assert_allclose(obj.view.to_numpy(), np.exp([0.0, 1.0]))
            with pytest.raises(NotUnique):
                h.into_value()  # the original guard still holds its count
            obj.release()
            h.into_value()

        return guard, works, [h]

    return {"Tape": tape, "VjpFunction": vjp_fn, "Gradients": gradients, "ValueGuard": value_guard}


NONCOPYABLES = _noncopyables()
DUPLICATORS: dict[str, Callable[[Any], Any]] = {
    "copy.copy": copy.copy,
    "copy.deepcopy": copy.deepcopy,
    "pickle.dumps": pickle.dumps,
}


@pytest.mark.parametrize("how", sorted(DUPLICATORS))
@pytest.mark.parametrize("kind", sorted(NONCOPYABLES))
def test_objects_holding_borrows_refuse_duplication_and_the_original_keeps_working(
    kind: str, how: str
) -> None:
    obj, works, keep = NONCOPYABLES[kind]()
    doubles = len(ledger.double_releases())
    with pytest.raises(OwnershipError, match=type(obj).__name__):
        DUPLICATORS[how](obj)
    gc.collect()  # a half-made copy, if any, would die here and give counts back twice
    works(obj)
    del obj, keep, works
    gc.collect()
    assert len(ledger.double_releases()) == doubles


def test_into_value_while_a_value_guard_is_alive_is_not_unique() -> None:
    h = ad.exp(ad.constant(np.array([0.0, 1.0])))
    guard = h.value()
    with pytest.raises(NotUnique) as err:
        h.into_value()
    assert err.value.value is h  # G7: the same handle comes back, still usable
    del err
    np.testing.assert_allclose(guard.view.to_numpy(), np.exp([0.0, 1.0]))
    with h.value() as v:  # a second shared borrow is fine
        np.testing.assert_allclose(v.to_numpy(), np.exp([0.0, 1.0]))
    guard.release()
    owner = h.into_value()
    np.testing.assert_allclose(owner.to_numpy(), np.exp([0.0, 1.0]))


def test_value_leaving_a_checkpoint_block_only_through_a_clone_keeps_its_gradient_path() -> None:
    x_np = np.array([0.5, 1.5, -2.0])

    def body_np(x: Any) -> Any:
        return jnp.sin(x) * x

    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(x_np))
        with tape.checkpoint():
            t = ad.sin(x) * x
            out = t.clone()
            del t  # only the clone leaves the block
        loss = ad.sum(out * out)
    g = tape.backward(loss).grad(x)
    expected = jax.grad(lambda v: jnp.sum(body_np(v) ** 2))(x_np)
    np.testing.assert_allclose(g.to_numpy(), expected, rtol=1e-12)
    # ... and equals the unchecked program
    with ad.Tape() as plain:
        x2 = plain.watch(ts.from_numpy(x_np))
        t2 = ad.sin(x2) * x2
        loss2 = ad.sum(t2 * t2)
    np.testing.assert_allclose(g.to_numpy(), plain.backward(loss2).grad(x2).to_numpy())
    del g, out, loss, x, tape


# == 4. no unrecorded copy ===================================================================


METADATA_OPS: dict[str, Callable[[Any], Any]] = {
    "reshape": lambda p: ad.reshape(p, (3, 2)),
    "transpose": lambda p: ad.transpose(p),
    "basic slice": lambda p: p[:, 1:],
    "integer index": lambda p: p[1],
    "swapaxes": lambda p: ad.swapaxes(p, 0, 1),
    "expand_dims": lambda p: ad.expand_dims(p, 0),
    "broadcast_to": lambda p: ad.broadcast_to(p, (4, 2, 3)),
}


@pytest.mark.parametrize("op", sorted(METADATA_OPS))
def test_metadata_only_op_on_a_borrowed_argument_is_zero_copy(op: str) -> None:
    """Inside ``grad``, the differentiated owner is borrowed; a metadata-only op on it is
    an alias of the owner's memory: no allocation, no copy; gradients are right."""
    a_np = np.arange(6.0).reshape(2, 3)
    a = ts.from_numpy(a_np)
    seen: dict[str, Any] = {}

    def f(p: Any) -> Any:
        with ledger.capture() as rec, ledger.forbid_copies():
            h = METADATA_OPS[op](p)
        seen["events"] = (rec.allocations, rec.copies)
        seen["shares"] = _shares(h, a)
        return ad.sum(h * h)

    g = ad.grad(f)(a)
    assert seen["events"] == ({}, {})
    assert seen["shares"]
    jop: Callable[[Any], Any] = {
        "reshape": lambda p: p.reshape(3, 2), "transpose": lambda p: p.T,
        "basic slice": lambda p: p[:, 1:], "integer index": lambda p: p[1],
        "swapaxes": lambda p: jnp.swapaxes(p, 0, 1), "expand_dims": lambda p: p[None],
        "broadcast_to": lambda p: jnp.broadcast_to(p, (4, 2, 3)),
    }[op]
    expected = jax.grad(lambda p: jnp.sum(jop(p) ** 2))(a_np)
    np.testing.assert_allclose(g.to_numpy(), expected)
    np.testing.assert_array_equal(a.to_numpy(), a_np)
    assert _can_borrow_mut(a)


@pytest.mark.parametrize("op", sorted(METADATA_OPS))
def test_metadata_only_op_on_an_untracked_constant_is_zero_copy(op: str) -> None:
    a = ts.from_numpy(np.arange(6.0).reshape(2, 3))
    c = ad.constant(a)
    with ledger.capture() as rec, ledger.forbid_copies():
        h = METADATA_OPS[op](c)
    assert (rec.allocations, rec.copies) == ({}, {})
    assert _shares(h, a)
    del h, c
    assert _can_borrow_mut(a)


@pytest.mark.parametrize("op", ["reshape", "expand_dims"])
def test_metadata_only_op_on_an_owner_passed_directly_is_zero_copy(op: str) -> None:
    a = ts.from_numpy(np.arange(6.0).reshape(2, 3))
    with ledger.capture() as rec:
        h = METADATA_OPS[op](a)
    events, shares = (rec.allocations, rec.copies), _shares(h, a)
    del h, a  # nothing stays alive if the assertion below fails
    assert events == ({}, {}) and shares, events


def _astype_float64(h: Any) -> Any:
    return ad.astype(h, "float64")


@pytest.mark.parametrize("op", ["astype same dtype", "real of real"])
def test_byte_preserving_op_is_zero_copy_or_a_copy_that_forbid_copies_refuses(op: str) -> None:
    a = ts.from_numpy(np.arange(3.0))
    c = ad.constant(a)
    fn: Callable[[Any], Any] = ad.real
    if op == "astype same dtype":
        fn = _astype_float64
    with ledger.capture() as rec:
        h = fn(c)
    zero_copy = rec.allocations == {} and rec.copies == {} and _shares(h, a)
    recorded = rec.copies.total() == 1
    del h
    refused = False
    if recorded:
        with ledger.forbid_copies():
            try:
                fn(c)
            except ts.errors.CopyForbiddenError:
                refused = True
    events = (rec.allocations, rec.copies)
    del c, a  # nothing stays alive if the assertion below fails
    assert zero_copy or (recorded and refused), events


@pytest.mark.parametrize("op", ["real", "imag"])
def test_real_and_imag_borrow_an_owner_like_every_op(op: str) -> None:
    a = ts.from_numpy(np.array([1.0 + 2.0j, 3.0 - 1.0j]))
    fn = getattr(ad, op)
    expected = fn(ad.constant(a)).to_numpy()
    try:
        got: Any = fn(a).to_numpy()
    except ValueError as e:
        got = repr(e)
    del a  # nothing stays alive if the assertion below fails
    np.testing.assert_array_equal(got, expected)


def test_late_write_through_a_prepared_array_is_caught_and_the_tape_is_unaffected(
    debug_borrows: None,
) -> None:
    """The issue's scenario: an array from ``prepare_host_mut`` kept past its ``with``
    block would have corrupted a value the tape holds (gradient [200, 200] instead of
    [2, 4]); in debug mode the late write raises and the gradient is right."""
    x = ts.from_numpy(np.array([1.0, 2.0]))
    with x.prepare_host_mut() as p:
        arr = p.as_array()
        arr[...] = [1.0, 2.0]
        derived = arr[1:]
    with ad.Tape() as tape:
        w = tape.watch(ts.from_numpy(np.array([1.0, 1.0])))
        loss = ad.sum(w * x * x)
    with pytest.raises(ValueError, match="read-only"):
        arr[...] = 100.0
    derived[...] = 100.0  # lands in the poisoned staging buffer, never in the storage
    assert np.isnan(arr[0])  # a late read sees poison, not the value
    np.testing.assert_array_equal(x.to_numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(tape.backward(loss).grad(w).to_numpy(), [1.0, 4.0])


def test_late_write_through_a_prepared_gradient_array_leaves_the_gradient_intact(
    debug_borrows: None,
) -> None:
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.array([1.0, 2.0])))
        loss = ad.sum(x * x)
    g = tape.backward(loss)
    view = g.grad(x)
    assert view is not None
    with view.prepare_host() as p:
        leaked = p.as_array()
        np.testing.assert_array_equal(leaked, [2.0, 4.0])
    with pytest.raises(ValueError, match="read-only"):
        leaked[...] = 200.0
    np.testing.assert_array_equal(g.take_grad(x).to_numpy(), [2.0, 4.0])


N_SLICES = 20_000


@pytest.fixture(scope="module")
def slicing_measurement() -> dict[str, int]:
    """Slice one long-lived handle 20,000 times (each slice dropped at once); measure the
    traced Python memory that stays, and the group's live descriptor records."""
    with ad.Tape() as tape:
        data = ad.exp(tape.watch(ts.from_numpy(np.zeros((100, 4)))))

    def run(h: ad.EagerTensor, n: int) -> None:
        for i in range(n):
            s = h[i % 100 : i % 100 + 1]
            del s

    run(data, 200)  # warm caches (descriptor cache, code paths)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        run(data, N_SLICES)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    group = getattr(data._rec.container, "group", None) if data._rec is not None else None
    records = -1 if group is None else len(group)
    np.testing.assert_array_equal(data.to_numpy(), np.ones((100, 4)))
    del data, tape
    return {"growth": after - before, "records": records}


def test_slicing_a_long_lived_handle_20000_times_keeps_one_descriptor_record(
    slicing_measurement: dict[str, int],
) -> None:
    """Alias records go with their handles: 20,000 dropped slices leave the value's group
    with its one base record, and the memory that stays is far below the 10 MB (about
    500 bytes per slice) the leak cost before."""
    assert slicing_measurement["records"] == 1
    assert slicing_measurement["growth"] < 1_000_000, slicing_measurement


def test_slicing_a_long_lived_handle_20000_times_keeps_memory_bounded(
    slicing_measurement: dict[str, int],
) -> None:
    """A removed record's table entry goes too (its index is still never reused): the
    group does not grow with the number of slices a loop ever took."""
    assert slicing_measurement["growth"] < 64_000, slicing_measurement


def test_tape_watch_and_retain_refuse_non_values_naming_the_argument() -> None:
    """``Tape.retain`` of a non-handle and ``Tape.watch`` of a non-value are
    ArgumentTypeErrors naming the method and the argument; nothing is tracked or kept."""
    tape = ad.Tape()
    with pytest.raises(ArgumentTypeError, match=r"Tape\.retain: argument 'x'"):
        tape.retain(np.ones(3))  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError, match=r"Tape\.watch: argument 'value'"):
        tape.watch(object())
    assert tape.retained() == [] and len(tape.nodes) == 0
