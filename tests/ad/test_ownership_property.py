"""Issue 10 property test: random programs over owners, handles, numpy arrays and scalars.

A hypothesis ``RuleBasedStateMachine`` builds random programs from a pool of owners
(``Tensor``), untracked handles, numpy arrays and Python scalars: unary and binary ops
(with operands of random shapes, so some do not broadcast: injected failures), writes
through an owner's own exclusive borrow, and *holders* that keep an owner borrowed for
backward — a recording tape (residual of ``mul``), an ``ad.constant`` handle, a ``vjp``
pullback — which end by backward, release or drop.  Backward, pullback and ``grad`` calls
get bad cotangents/argnums at random (more injected failures).  A small model knows each
owner's value and which holders borrow it.  After every step:

* every owner is readable and holds its modelled value — it changes only when the
  program wrote it through its own exclusive borrow;
* an owner can be mutably borrowed exactly when no live holder borrows it;
* every handle still reads its modelled value;
* (in the rules) a refused write raises ``BorrowError`` naming a holder of that owner;
  when the most recent borrow was taken by a holder that is still alive, the message names
  a *live* holder.  (Storage names only the latest borrow and does not restore the name
  when that borrow ends — see ``test_ownership_semantics.py::
  test_borrow_error_names_the_live_holder_after_a_later_view_ended``, an xfail — so after
  the latest holder ended only the weaker check applies.)

At the end of each program everything is dropped and the ledger's live bytes are back at
the baseline.  Values are read without taking borrows (``kernel.read_array`` on owners,
``to_numpy`` on fresh op outputs), so the only borrows are the holders'.
"""

from __future__ import annotations

import gc
import itertools
from typing import Any

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import ArgumentError, ArgumentTypeError
from tenferro_storage import ledger
from tenferro_storage.errors import BorrowError

SHAPES = [(3,), (4,), (2, 3), (1, 3)]
MAX_OWNERS = 6
MAX_HANDLES = 8
_NAMES = itertools.count(1)


# Values on a grid of quarters: exact sums/products, no underflow (numpy errors raise in
# the test suite), so any mismatch is an ownership bug, not rounding.
GRID = st.integers(-8, 8).map(lambda k: k / 4)


def _values(shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray[Any, Any]]:
    n = int(np.prod(shape))
    return st.lists(GRID, min_size=n, max_size=n).map(
        lambda v: np.array(v, dtype=np.float64).reshape(shape)
    )


def _can_borrow_mut(t: ts.Tensor[Any, Any]) -> bool:
    try:
        m = t.as_view_mut()
    except BorrowError:
        return False
    m.release()
    return True


class Holder:
    """Something that keeps owners borrowed for backward: a tape, a constant, a pullback."""

    def __init__(self, kind: str, name: str, owners: list[int], obj: dict[str, Any]) -> None:
        self.kind = kind
        self.name = name  # the text its BorrowError must show
        self.owners = owners  # indices into the owner pool
        self.obj = obj


def _scaled(p: Any, q: Any) -> Any:
    return p * q


class OwnershipPrograms(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        gc.collect()
        self.baseline = ledger.live_bytes()
        self.owners: list[ts.Tensor[Any, Any]] = []
        self.expected: list[np.ndarray[Any, Any]] = []
        self.handles: list[tuple[ad.EagerTensor, np.ndarray[Any, Any]]] = []
        self.holders: list[Holder] = []
        # tapes and pullbacks that let go (backward/release) but are still alive: they
        # must hold no borrow any more, until ``drop_ended`` drops them
        self.ended: list[dict[str, Any]] = []
        self.last_borrower: dict[int, Holder] = {}  # who took the owner's latest borrow
        self.ever: dict[int, set[str]] = {}  # every name that ever borrowed it

    # -- helpers ---------------------------------------------------------------------
    def _live_holders(self, i: int) -> list[Holder]:
        return [h for h in self.holders if i in h.owners]

    def _add_holder(self, h: Holder) -> None:
        self.holders.append(h)
        for i in h.owners:
            self.last_borrower[i] = h
            self.ever.setdefault(i, set()).add(h.name)

    def _end_holder(self, h: Holder) -> None:
        self.holders.remove(h)

    def _operand(self, data: st.DataObject) -> tuple[Any, np.ndarray[Any, Any] | float]:
        """An operand from the pool (owner or handle) or a fresh numpy array or scalar."""
        kinds = ["numpy", "scalar"]
        if self.owners:
            kinds.append("owner")
        if self.handles:
            kinds.append("handle")
        kind = data.draw(st.sampled_from(kinds))
        if kind == "owner":
            i = data.draw(st.integers(0, len(self.owners) - 1))
            return self.owners[i], self.expected[i]
        if kind == "handle":
            k = data.draw(st.integers(0, len(self.handles) - 1))
            return self.handles[k]
        if kind == "scalar":
            v = data.draw(GRID)
            return v, v
        arr = data.draw(st.sampled_from(SHAPES).flatmap(_values))
        return arr, arr

    def _keep(self, h: ad.EagerTensor, value: Any) -> None:
        self.handles.append((h, np.asarray(value)))
        if len(self.handles) > MAX_HANDLES:
            self.handles.pop(0)

    # -- pool ------------------------------------------------------------------------
    @initialize(data=st.data())
    def two_owners(self, data: st.DataObject) -> None:
        for _ in range(2):
            self.new_owner(data)

    @precondition(lambda self: len(self.owners) < MAX_OWNERS)
    @rule(data=st.data())
    def new_owner(self, data: st.DataObject) -> None:
        arr = data.draw(st.sampled_from(SHAPES).flatmap(_values))
        self.owners.append(ts.from_numpy(arr))
        self.expected.append(arr.copy())

    # -- ops (borrow their operands; some shapes do not fit: injected failures) ---------
    @rule(data=st.data(), op=st.sampled_from(["sin", "exp", "tanh", "neg", "sum"]))
    def unary(self, data: st.DataObject, op: str) -> None:
        x, xv = self._operand(data)
        fn: Any = {"sin": ad.sin, "exp": ad.exp, "tanh": ad.tanh, "neg": ad.neg, "sum": ad.sum}[op]
        ref: Any = {"sin": np.sin, "exp": np.exp, "tanh": np.tanh, "neg": np.negative,
                    "sum": np.sum}[op]
        out = fn(x)
        np.testing.assert_allclose(out.to_numpy(), ref(np.asarray(xv)), rtol=1e-12)
        self._keep(out, ref(np.asarray(xv)))

    @rule(data=st.data(), op=st.sampled_from(["add", "mul", "sub", "matmul", "+", "@"]))
    def binary(self, data: st.DataObject, op: str) -> None:
        x, xv = self._operand(data)
        y, yv = self._operand(data)
        if op in ("matmul", "@") and (np.ndim(xv) == 0 or np.ndim(yv) == 0):
            return  # matmul of a scalar is refused by numpy too; not a shape failure
        ref = {"add": np.add, "+": np.add, "mul": np.multiply, "sub": np.subtract,
               "matmul": np.matmul, "@": np.matmul}[op]
        try:
            want = ref(np.asarray(xv), np.asarray(yv))
        except ValueError:
            want = None
        fns: dict[str, Any] = {
            "add": ad.add, "mul": ad.mul, "sub": ad.sub, "matmul": ad.matmul,
            "+": lambda a, b: _plus(a, b), "@": lambda a, b: _at(a, b),
        }
        if want is None:  # an injected failure: nothing may change (checked by invariants)
            try:
                fns[op](x, y)
            except ValueError:
                return
            raise AssertionError(f"{op} of shapes {np.shape(xv)}, {np.shape(yv)} did not raise")
        out = fns[op](x, y)
        if not isinstance(out, ad.EagerTensor):  # e.g. numpy @ numpy: not our business
            return
        np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-12, atol=1e-12)
        self._keep(out, want)

    # -- writes through the owner's own exclusive borrow ---------------------------------
    @precondition(lambda self: bool(self.owners))
    @rule(data=st.data(), how=st.sampled_from(["fill", "as_view_mut", "prepare_host_mut"]))
    def write(self, data: st.DataObject, how: str) -> None:
        i = data.draw(st.integers(0, len(self.owners) - 1))
        t = self.owners[i]
        v = data.draw(GRID)
        live = self._live_holders(i)
        try:
            if how == "fill":
                t.fill(v)
            elif how == "as_view_mut":
                with t.as_view_mut() as m:
                    m.fill(v)
            else:
                with t.prepare_host_mut() as p:
                    p.as_array()[...] = v
        except BorrowError as e:
            msg = str(e)
            assert live, f"refused although no holder borrows owner {i}: {msg}"
            ever = self.ever.get(i, set())
            assert any(name in msg for name in ever), (msg, ever)
            last = self.last_borrower.get(i)
            if last is not None and last in live:
                assert any(h.name in msg for h in live), (msg, [h.name for h in live])
            return
        assert not live, f"owner {i} was written while {[h.name for h in live]} borrow it"
        self.expected[i][...] = v

    # -- holders ---------------------------------------------------------------------
    @precondition(lambda self: bool(self.owners))
    @rule(data=st.data())
    def start_tape(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.owners) - 1))
        name = f"PTape{next(_NAMES)}"
        with ad.Tape(name=name) as tape:
            w = tape.watch(ts.from_numpy(np.ones(self.expected[i].shape)))
            loss = ad.sum(w * self.owners[i])
        self._add_holder(
            Holder("tape", f"{name}: residual of mul", [i], {"tape": tape, "w": w, "loss": loss})
        )

    def _pick(self, data: st.DataObject, kind: str) -> Holder | None:
        hs = [h for h in self.holders if h.kind == kind]
        return data.draw(st.sampled_from(hs)) if hs else None

    @precondition(lambda self: any(h.kind == "tape" for h in self.holders))
    @rule(data=st.data(), bad=st.booleans(), end=st.sampled_from(["backward", "release", "drop"]))
    def end_tape(self, data: st.DataObject, bad: bool, end: str) -> None:
        h = self._pick(data, "tape")
        if h is None:
            return
        tape, w, loss = h.obj["tape"], h.obj["w"], h.obj["loss"]
        (i,) = h.owners
        if bad:  # injected failure: a cotangent of the wrong shape changes nothing
            try:
                tape.backward(loss, cotangent=np.ones(2))
            except ArgumentError:
                pass
            else:
                raise AssertionError("backward accepted a cotangent of the wrong shape")
            assert not _can_borrow_mut(self.owners[i])  # still held
            return
        if end == "backward":
            g = tape.backward(loss)
            np.testing.assert_array_equal(g.grad(w).to_numpy(), self.expected[i])
            del g
        elif end == "release":
            tape.release()
        if end != "drop":
            self.ended.append(dict(h.obj))  # still alive, but holding nothing
        h.obj.clear()
        del tape, w, loss
        self._end_holder(h)

    @precondition(lambda self: bool(self.owners))
    @rule(data=st.data())
    def start_constant(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.owners) - 1))
        c = ad.constant(self.owners[i])
        self._add_holder(Holder("constant", "ad.constant", [i], {"c": c}))
        out = c * 2.0  # a fresh value computed from the borrowed owner
        self._keep(out, self.expected[i] * 2.0)

    @precondition(lambda self: any(h.kind == "constant" for h in self.holders))
    @rule(data=st.data())
    def drop_constant(self, data: st.DataObject) -> None:
        h = self._pick(data, "constant")
        if h is None:
            return
        h.obj.clear()
        self._end_holder(h)

    @precondition(lambda self: bool(self.owners))
    @rule(data=st.data())
    def start_vjp(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.owners) - 1))
        same = [j for j, e in enumerate(self.expected) if e.shape == self.expected[i].shape]
        j = data.draw(st.sampled_from(same))
        out, fn = ad.vjp(_scaled, self.owners[i], self.owners[j])
        np.testing.assert_array_equal(out.to_numpy(), self.expected[i] * self.expected[j])
        self._add_holder(
            Holder("vjp", "vjp(_scaled)", sorted({i, j}), {"fn": fn, "out": out, "ij": (i, j)})
        )

    @precondition(lambda self: any(h.kind == "vjp" for h in self.holders))
    @rule(data=st.data(), bad=st.booleans(), end=st.sampled_from(["call", "release", "drop"]))
    def use_vjp(self, data: st.DataObject, bad: bool, end: str) -> None:
        h = self._pick(data, "vjp")
        if h is None:
            return
        fn = h.obj["fn"]
        i, j = h.obj["ij"]
        if bad:  # injected failure: a cotangent of another shape, or None
            ct = data.draw(st.sampled_from([None, np.ones(7)]))
            try:
                fn(ct)
            except (ArgumentError, ArgumentTypeError):
                return
            raise AssertionError(f"vjp_fn accepted the cotangent {ct!r}")
        if end == "call":
            gi, gj = fn(np.ones(self.expected[i].shape))
            np.testing.assert_array_equal(gi.to_numpy(), self.expected[j])
            np.testing.assert_array_equal(gj.to_numpy(), self.expected[i])
            return
        if end == "release":
            fn.release()
            self.ended.append(dict(h.obj))  # still alive, but holding nothing
        h.obj.clear()
        del fn
        self._end_holder(h)

    @precondition(lambda self: bool(self.ended))
    @rule()
    def drop_ended(self) -> None:
        self.ended.clear()

    @precondition(lambda self: bool(self.owners))
    @rule(data=st.data(), argnums=st.sampled_from([2, -3, (0, 0), ()]))
    def failed_grad(self, data: st.DataObject, argnums: Any) -> None:
        """Injected failure: bad argnums; the owners passed are not left borrowed."""
        i = data.draw(st.integers(0, len(self.owners) - 1))
        t = self.owners[i]
        try:
            ad.grad(lambda p, q: ad.sum(p * q), argnums=argnums)(t, t)
        except ArgumentError:
            return
        raise AssertionError(f"grad accepted argnums={argnums!r}")

    @precondition(lambda self: bool(self.owners))
    @rule(data=st.data())
    def grad_borrows_and_returns(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.owners) - 1))
        # a transient borrow named after grad's own tape: it becomes the latest name
        self.last_borrower.pop(i, None)
        self.ever.setdefault(i, set()).add("grad(<lambda>): argument 0")
        g = ad.grad(lambda p: ad.sum(ad.sin(p)))(self.owners[i])
        np.testing.assert_allclose(g.to_numpy(), np.cos(self.expected[i]), rtol=1e-12)

    # -- invariants ------------------------------------------------------------------
    @invariant()
    def owners_readable_unchanged_and_borrowed_exactly_by_live_holders(self) -> None:
        for i, t in enumerate(self.owners):
            np.testing.assert_array_equal(ts.kernel.read_array(t), self.expected[i])
            held = bool(self._live_holders(i))
            assert _can_borrow_mut(t) == (not held), (i, [h.name for h in self._live_holders(i)])

    @invariant()
    def handles_read_their_values(self) -> None:
        for h, v in self.handles:
            np.testing.assert_allclose(h.to_numpy(), v, rtol=1e-12, atol=1e-12)

    def teardown(self) -> None:
        for h in self.holders:
            h.obj.clear()
        self.holders.clear()
        self.ended.clear()
        self.handles.clear()
        self.last_borrower.clear()
        self.ever.clear()
        self.owners.clear()
        gc.collect()
        assert ledger.live_bytes() == self.baseline, (ledger.live_bytes(), self.baseline)


def _plus(a: Any, b: Any) -> Any:
    return a + b


def _at(a: Any, b: Any) -> Any:
    return a @ b


# Programs per run: the profile's count, scaled down (dev 20, ci 40, thorough 400): each
# program starts and ends with gc.collect(), which is slow late in a long run (big heap).
OwnershipPrograms.TestCase.settings = settings(
    settings(),
    max_examples=max(20, settings().max_examples * 2 // 5),
    stateful_step_count=30,
    deadline=None,
)
TestOwnershipPrograms = OwnershipPrograms.TestCase
