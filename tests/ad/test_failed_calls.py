"""Issue 10, part 2: a failed call changes nothing.

For every public entry point that can refuse — an op with shapes that do not fit, a
backward with a bad cotangent or a foreign handle, ``grad`` with bad ``argnums``, a
pullback with a bad cotangent, ``jvp`` with a bad tangent — when it raises:

* every argument owner is still readable, holds the same values and has the same borrow
  state (not consumed, not left borrowed, still borrowed by whoever held it before);
* every handle is still usable;
* no tape gained a node (``len(tape.nodes)``), and a failed ``backward`` leaves the tape
  usable: a second ``backward`` gives the right gradient;
* the ledger's live bytes are back at the baseline.

The last section is the mutation check of the four G7 failure rows that no test caught
before (an op error leaving a stray node, ``backward`` accepting another tape's handle, a
failed ``backward`` changing the tape, the ``value()`` guard not holding its count): each
test's docstring names the guard whose removal makes it fail (checked by hand, on a
copy of ``src``).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import extend
from tenferro_ad._core._primitive import REGISTRY
from tenferro_ad.errors import (
    ArgumentError,
    ArgumentTypeError,
    AxisError,
    BackwardError,
)
from tenferro_storage import ledger
from tenferro_storage.errors import BorrowError

X0 = np.array([0.5, -1.0, 2.0])
D0 = np.array([1.0, 2.0, 3.0])


def _arr(x: Any) -> np.ndarray[Any, Any]:
    return ts.kernel.read_array(x)


def _can_borrow_mut(t: ts.Tensor[Any, Any]) -> bool:
    try:
        m = t.as_view_mut()
    except BorrowError:
        return False
    m.release()
    return True


def _entries(tape: ad.Tape) -> int:
    return len(tape.nodes)


def _live_entries(tape: ad.Tape) -> int:
    """Entries that are leaves (``None``) or recorded ops (a discarded entry is a marker
    node without a primitive)."""
    return sum(1 for n in tape.nodes if n is None or hasattr(n, "prim"))


def _retained(tape: ad.Tape) -> list[tuple[Any, ...]]:
    return sorted((e.producer, e.needed_by, e.shape) for e in tape.retained())


class World:
    """A recording tape with a watched value, a borrowed residual owner and a loss; free
    owners of several shapes; and a second tape with a handle of its own."""

    def __init__(self) -> None:
        self.a = ts.from_numpy(np.array([1.0, 2.0, 3.0]))  # (3,), free
        self.b = ts.from_numpy(np.arange(4.0))  # (4,), free
        self.m = ts.from_numpy(np.arange(6.0).reshape(2, 3))  # (2, 3), free
        self.p = ts.from_numpy(np.ones((3, 4)))  # (3, 4), free
        self.q5 = ts.from_numpy(np.ones((5, 2)))  # (5, 2), free
        self.ints = ts.from_numpy(np.array([0, 2, 1]))  # int64, free
        self.far = ts.from_numpy(np.array([0, 7]))  # int64 indices, one out of range
        self.d = ts.from_numpy(D0.copy())  # borrowed by the tape (residual of mul)
        with ad.Tape(name="WorldTape") as tape:
            self.x = tape.watch(ts.from_numpy(X0.copy()))
            self.y = self.x * self.d
            self.loss = ad.sum(self.y * self.y)
        self.tape = tape
        with ad.Tape(name="OtherTape") as other:
            self.q = other.watch(ts.from_numpy(np.ones(3)))
            self.qy = ad.sum(ad.sin(self.q))
        self.other = other
        self.c = ad.constant(self.a)

    def owners(self) -> dict[str, ts.Tensor[Any, Any]]:
        return {k: v for k, v in vars(self).items() if isinstance(v, ts.Tensor)}

    def handles(self) -> dict[str, ad.EagerTensor]:
        return {k: v for k, v in vars(self).items() if isinstance(v, ad.EagerTensor)}

    def snapshot(self, discarded_ok: bool = False) -> dict[str, Any]:
        """Everything a failed call must leave as it was (reads make no ledger event).

        ``discarded_ok``: a nested grad/vjp/jvp whose function ran and then raised may
        leave *discarded* entries (ids are never reused; they hold nothing and backward
        through them raises): count only the live entries then, and compare what the tape
        retains."""
        gc.collect()
        count: Callable[[ad.Tape], int] = _live_entries if discarded_ok else _entries
        snap: dict[str, Any] = {
            "nodes": count(self.tape),
            "other nodes": count(self.other),
            "retained": _retained(self.tape),
            "live bytes": ledger.live_bytes(),
            "live allocations": ledger.live_allocations(),
        }
        for k, t in self.owners().items():
            snap[f"owner {k}"] = np.array(_arr(t))  # refused if consumed/mutably borrowed
            snap[f"owner {k} free"] = _can_borrow_mut(t)
        for k, h in self.handles().items():
            with h.value() as v:
                snap[f"handle {k}"] = np.array(_arr(v))
            snap[f"handle {k} tracked"] = h.is_tracked
        return snap

    def assert_unchanged(self, before: dict[str, Any], discarded_ok: bool = False) -> None:
        after = self.snapshot(discarded_ok)
        assert after.keys() == before.keys()
        for k in before:
            if isinstance(before[k], np.ndarray):
                np.testing.assert_array_equal(after[k], before[k], err_msg=k)
            else:
                assert after[k] == before[k], k

    def assert_tape_usable(self) -> None:
        """A (second) backward works and is right: d/dx sum((x*d)^2) = 2 x d^2."""
        g = self.tape.backward(self.loss, keep=True)
        np.testing.assert_allclose(g.grad(self.x).to_numpy(), 2 * X0 * D0**2)
        np.testing.assert_allclose(self.qy.item(), np.sin(1.0) * 3)


Case = tuple[Callable[[World], Any], type[BaseException] | tuple[type[BaseException], ...]]

# ops that refuse, called while the world tape records (a stray node would show)
OP_FAILURES: dict[str, Case] = {
    "add owners that do not broadcast": (lambda w: ad.add(w.a, w.b), ValueError),
    "add tracked handle and owner": (lambda w: ad.add(w.x, w.b), ValueError),
    "operator + handle and owner": (lambda w: w.x + w.b, ValueError),
    "operator + owners": (lambda w: w.a + w.b, ValueError),
    "mul tracked handle and numpy": (lambda w: w.x * np.ones(4), ValueError),
    "matmul owners with mismatched inner extents": (lambda w: ad.matmul(w.m, w.m), ValueError),
    "operator @ tracked handle and owner": (lambda w: w.x @ w.m, ValueError),
    "softmax owner bad axis": (lambda w: ad.softmax(w.a, axis=1), AxisError),
    "logsumexp owner bad axis": (lambda w: ad.logsumexp(w.m, axis=2), AxisError),
    "log_softmax owner bad axis": (lambda w: ad.log_softmax(w.a, axis=-2), AxisError),
    "softmax tracked handle bad axis": (lambda w: ad.softmax(w.x, axis=3), AxisError),
    "einsum whose second contraction does not fit": (
        lambda w: ad.einsum("i,ij,jk->k", w.x, w.p, w.q5),
        ValueError,
    ),
    "concatenate of different ranks": (lambda w: ad.concatenate([w.x, w.m]), ValueError),
    "stack of different shapes": (lambda w: ad.stack([w.x, w.b]), ValueError),
    "reshape to a wrong size": (lambda w: ad.reshape(w.x, (4,)), ArgumentError),
    "index out of range": (lambda w: w.x[5], IndexError),
    "owner index out of range": (lambda w: w.x[w.far], IndexError),
    "where that does not broadcast": (lambda w: ad.where(w.x > 0.0, w.x, w.b), ValueError),
    "tensordot mismatched axes": (lambda w: ad.tensordot(w.x, w.b, axes=1), ValueError),
    "astype to an unknown dtype": (lambda w: ad.astype(w.x, "float17"), TypeError),
}

# backward calls that refuse (the tape is not recording)
BACKWARD_FAILURES: dict[str, Case] = {
    "cotangent of the wrong shape": (
        lambda w: w.tape.backward(w.y, cotangent=np.ones(4)),
        ArgumentError,
    ),
    "cotangent of the wrong dtype": (
        lambda w: w.tape.backward(w.y, cotangent=np.ones(3, np.float32)),
        ArgumentTypeError,
    ),
    "owner cotangent of the wrong shape": (
        lambda w: w.tape.backward(w.y, cotangent=w.b),
        ArgumentError,
    ),
    "handle cotangent of the wrong shape": (
        lambda w: w.tape.backward(w.y, cotangent=w.qy),
        ArgumentError,
    ),
    "cotangent that is a string": (
        lambda w: w.tape.backward(w.y, cotangent="ones"),
        ArgumentTypeError,
    ),
    "create_graph cotangent of the wrong shape": (
        lambda w: w.tape.backward(w.y, cotangent=np.ones((3, 1)), create_graph=True),
        ArgumentError,
    ),
    "loss from another tape": (lambda w: w.tape.backward(w.qy), BackwardError),
    "wrt from another tape": (lambda w: w.tape.backward(w.loss, wrt=[w.q]), BackwardError),
    "wrt a constant": (lambda w: w.tape.backward(w.loss, wrt=[w.c]), BackwardError),
    "wrt a good handle then a foreign one": (
        lambda w: w.tape.backward(w.loss, wrt=[w.x, w.q]),
        BackwardError,
    ),
    "loss that is an owner": (lambda w: w.tape.backward(w.a), TypeError),
}


def _f(p: Any, q: Any) -> Any:
    return ad.sum(p * q)


# functional entry points that refuse (called outside any tape)
FUNCTIONAL_FAILURES: dict[str, Case] = {
    "grad argnums out of range": (lambda w: ad.grad(_f, argnums=2)(w.a, w.a), ArgumentError),
    "grad argnums negative out of range": (
        lambda w: ad.grad(_f, argnums=-3)(w.a, w.a),
        ArgumentError,
    ),
    "grad argnums naming an argument twice": (
        lambda w: ad.grad(_f, argnums=(0, 0))(w.a, w.a),
        ArgumentError,
    ),
    "grad argnums empty": (lambda w: ad.grad(_f, argnums=())(w.a, w.a), ArgumentError),
    "grad argnums not ints": (lambda w: ad.grad(_f, argnums="0")(w.a, w.a), TypeError),
    "grad of an integer owner": (
        lambda w: ad.grad(_f, argnums=(0, 1))(w.a, w.ints),
        ArgumentTypeError,
    ),
    "grad of a Python int": (lambda w: ad.grad(_f, argnums=(0, 1))(w.a, 3), ArgumentTypeError),
    "grad of a non-scalar output": (lambda w: ad.grad(lambda p: p * 2.0)(w.a), TypeError),
    "grad whose function raises": (
        lambda w: ad.grad(lambda p: ad.sum(ad.add(p, w.b)))(w.a),
        ValueError,
    ),
    "value_and_grad has_aux without a pair": (
        lambda w: ad.value_and_grad(lambda p: ad.sum(p), has_aux=True)(w.a),
        TypeError,
    ),
    "vjp whose function raises": (lambda w: ad.vjp(lambda p: ad.add(p, w.b), w.a), ValueError),
    "jvp tangent of shape (1,) for a (3,) primal": (
        lambda w: ad.jvp(lambda p: ad.sin(p), (w.a,), (np.ones(1),)),
        ArgumentError,
    ),
    "jvp owner tangent of the wrong dtype": (
        lambda w: ad.jvp(lambda p: ad.sin(p) * p, (w.a,), (w.ints,)),
        ArgumentTypeError,
    ),
    "jvp with fewer tangents than primals": (
        lambda w: ad.jvp(_f, (w.a, w.a), (np.ones(3),)),
        ArgumentError,
    ),
}


def _check_failure(
    w: World, case: Case, recording: bool, discarded_ok: bool = False
) -> None:
    fn, exc = case
    before = w.snapshot(discarded_ok)
    if recording:
        with w.tape, pytest.raises(exc):
            fn(w)
    else:
        with pytest.raises(exc):
            fn(w)
    w.assert_unchanged(before, discarded_ok)
    w.assert_tape_usable()


@pytest.mark.parametrize("name", sorted(OP_FAILURES))
def test_failed_op_changes_nothing(name: str) -> None:
    _check_failure(World(), OP_FAILURES[name], recording=True)


@pytest.mark.parametrize("name", sorted(BACKWARD_FAILURES))
def test_failed_backward_changes_nothing_and_the_tape_stays_usable(name: str) -> None:
    _check_failure(World(), BACKWARD_FAILURES[name], recording=False)


@pytest.mark.parametrize("name", sorted(FUNCTIONAL_FAILURES))
def test_failed_functional_call_changes_nothing(name: str) -> None:
    _check_failure(World(), FUNCTIONAL_FAILURES[name], recording=False)

@pytest.mark.parametrize("name", sorted(FUNCTIONAL_FAILURES))
def test_failed_functional_call_nested_in_a_recording_tape_leaves_it_unchanged(name: str) -> None:
    """Called while a tape records, grad/vjp/jvp run on that tape; when they refuse (or
    the function raises) the enclosing tape gets no node and keeps working."""
    w = World()
    try:
        _check_failure(w, FUNCTIONAL_FAILURES[name], recording=True, discarded_ok=True)
    except AssertionError as e:
        problem = str(e)
    else:
        problem = ""
    del w  # nothing stays alive (for the leak check) if the assertion below fails
    assert not problem, problem


def test_softmax_logsumexp_log_softmax_on_owners_leave_them_readable() -> None:
    """The issue's example: an inner op used to consume the owner and the next one
    failed.  Now each works on an owner, twice, and the owner is untouched and free."""
    a = ts.from_numpy(np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 5.0]]))
    ref = np.array(_arr(a))
    for _ in range(2):
        s = ad.softmax(a, axis=1).to_numpy()
        lse = ad.logsumexp(a, axis=1).to_numpy()
        ls = ad.log_softmax(a, axis=-1).to_numpy()
        e = np.exp(ref - ref.max(axis=1, keepdims=True))
        np.testing.assert_allclose(s, e / e.sum(axis=1, keepdims=True))
        np.testing.assert_allclose(lse, np.log(np.exp(ref).sum(axis=1)))
        np.testing.assert_allclose(ls, np.log(s))
    np.testing.assert_array_equal(a.to_numpy(), ref)
    assert _can_borrow_mut(a)


def _vjp_world() -> tuple[World, Any, Any]:
    w = World()
    w.e1 = ts.from_numpy(np.array([1.0, 2.0, 3.0]))  # type: ignore[attr-defined]
    w.e2 = ts.from_numpy(np.array([4.0, 5.0, 6.0]))  # type: ignore[attr-defined]
    out, fn = ad.vjp(lambda p, q: p * q, w.e1, w.e2)  # type: ignore[attr-defined]
    return w, out, fn


PullbackCase = tuple[Callable[[Any], Any], type[BaseException]]

VJP_FN_FAILURES: dict[str, PullbackCase] = {
    "wrong shape": (lambda fn: fn(np.ones(4)), ArgumentError),
    "None": (lambda fn: fn(None), ArgumentTypeError),
    "wrong dtype": (lambda fn: fn(np.ones(3, np.complex128)), ArgumentTypeError),
    "two leaves for one output": (lambda fn: fn((np.ones(3), np.ones(3))), ArgumentError),
    "a string": (lambda fn: fn("ones"), ArgumentTypeError),
}


@pytest.mark.parametrize("name", sorted(VJP_FN_FAILURES))
def test_failed_pullback_call_changes_nothing_and_the_pullback_stays_usable(name: str) -> None:
    w, out, fn = _vjp_world()
    call, exc = VJP_FN_FAILURES[name]
    before = w.snapshot()
    assert not before["owner e1 free"] and not before["owner e2 free"]  # held by the pullback
    with pytest.raises(exc):
        call(fn)
    w.assert_unchanged(before)
    g1, g2 = fn(np.array([1.0, 1.0, 2.0]))
    np.testing.assert_array_equal(g1.to_numpy(), [4.0, 5.0, 12.0])
    np.testing.assert_array_equal(g2.to_numpy(), [1.0, 2.0, 6.0])
    fn.release()
    assert _can_borrow_mut(w.e1) and _can_borrow_mut(w.e2)  # type: ignore[attr-defined]
    del out


@pytest.mark.parametrize("bad", ["integer owner", "python int"])
def test_nested_grad_with_a_refused_argument_leaves_no_node_on_the_enclosing_tape(
    bad: str,
) -> None:
    w = World()
    second: Any = w.ints if bad == "integer owner" else 3
    n = len(w.tape.nodes)
    with w.tape, pytest.raises(ArgumentTypeError):
        ad.grad(_f, argnums=(0, 1))(w.x, second)
    after = len(w.tape.nodes)
    del w, second  # nothing stays alive if the assertion below fails
    assert after == n


FAILING_RULE = {"armed": True}


def _vjp_that_fails_once(ops: Any, g: Any, x: Any) -> Any:
    if FAILING_RULE["armed"]:
        FAILING_RULE["armed"] = False
        raise FloatingPointError("test: this VJP rule fails once")
    return ops.mul(g, ops.cos(x))


@pytest.fixture
def sin_failing_once() -> Iterator[Any]:
    """A user sine whose VJP fails once when armed; unregistered afterwards (so
    registry-driven tests elsewhere never see a deliberately failing rule)."""
    prim = extend.defprimitive(
        "test_sin_failing_once", np.sin, 1, save_in=(0,), vjp=(_vjp_that_fails_once,)
    )
    yield prim
    REGISTRY.pop("test_sin_failing_once", None)


def test_backward_failing_inside_a_rule_leaves_the_tape_usable(sin_failing_once: Any) -> None:
    """A failure in the middle of the sweep (a rule raises) releases nothing: the
    retry gives the right gradient, and the borrowed owner stays held until then."""
    d = ts.from_numpy(np.array([0.5, 1.0]))
    FAILING_RULE["armed"] = True
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.array([1.0, 2.0])))
        loss = ad.sum(extend.bind(sin_failing_once, x * d))
    n = len(tape.nodes)
    with pytest.raises(FloatingPointError, match="fails once"):
        tape.backward(loss)
    assert len(tape.nodes) == n and not _can_borrow_mut(d)
    g = tape.backward(loss)
    np.testing.assert_allclose(g.grad(x).to_numpy(), np.cos([0.5, 2.0]) * [0.5, 1.0])
    assert _can_borrow_mut(d)  # released by the successful backward


def test_failed_op_inside_a_checkpoint_block_publishes_nothing_and_holds_no_borrow() -> None:
    w = World()
    before = w.snapshot()
    with w.tape, pytest.raises(ValueError):
        with w.tape.checkpoint():
            h = ad.sin(w.x * w.a)
            ad.add(h, w.b)
    del h
    w.assert_unchanged(before)
    w.assert_tape_usable()


# == G7 mutation check =======================================================================


def test_g7_op_error_leaves_no_stray_tape_node() -> None:
    """An op that refuses after some of its work was possible records nothing.

    einsum contracts pairwise: here ``i,ij`` fits and ``jk`` does not.  Fails when the
    up-front size check in ``_einsum_path`` (``sizes.setdefault(c, n) != n``) is removed:
    the first contraction is then recorded before the second one raises (checked by
    hand).  The plain-primitive rows of ``test_failed_op_changes_nothing`` fail when
    ``bind`` appends its node before running the kernel (checked by hand)."""
    w = World()
    n = len(w.tape.nodes)
    with w.tape, pytest.raises(ValueError):
        ad.einsum("i,ij,jk->k", w.x, w.p, w.q5)
    assert len(w.tape.nodes) == n
    with w.tape, pytest.raises(ValueError):
        ad.add(w.x, w.b)
    assert len(w.tape.nodes) == n
    w.assert_tape_usable()


def test_g7_backward_refuses_a_handle_from_another_tape() -> None:
    """``backward`` takes the loss and ``wrt`` only from its own tape.

    Fails when the check ``x._tape is not self.key`` in ``Tape._id_of`` is removed (the
    foreign handle's value id then indexes this tape's nodes) — checked by hand."""
    w = World()
    before = w.snapshot()
    with pytest.raises(BackwardError, match="another tape"):
        w.tape.backward(w.qy)
    with pytest.raises(BackwardError, match="another tape"):
        w.tape.backward(w.loss, wrt=[w.q])
    with pytest.raises(BackwardError, match="another tape"):
        w.other.backward(w.loss)
    w.assert_unchanged(before)
    w.assert_tape_usable()
    g = w.other.backward(w.qy)
    np.testing.assert_allclose(g.grad(w.q).to_numpy(), np.cos(np.ones(3)))


def test_g7_failed_backward_leaves_the_tape_unchanged_and_usable() -> None:
    """A backward that refuses releases no residual and adds no node; the next
    backward (without keep) works and only then releases the tape.

    Fails when ``Tape.backward`` releases its residuals even on failure (its
    ``if not keep: self._release()`` moved into a ``finally``) — checked by hand."""
    w = World()
    before = w.snapshot()
    assert not before["owner d free"]  # the tape holds d as a residual
    for bad in (np.ones(4), np.ones(3, np.float32), w.qy):
        with pytest.raises((ArgumentError, ArgumentTypeError)):
            w.tape.backward(w.y, cotangent=bad)
    with pytest.raises(BackwardError):
        w.tape.backward(w.loss, wrt=[w.q])
    w.assert_unchanged(before)
    g = w.tape.backward(w.loss)  # without keep: the residuals go now
    np.testing.assert_allclose(g.grad(w.x).to_numpy(), 2 * X0 * D0**2)
    assert _can_borrow_mut(w.d)
    with pytest.raises(BackwardError, match="released"):
        w.tape.backward(w.loss)
