"""The per-parameter round trip of ``value_and_grad`` (an owner argument borrowed and
named, its gradient delivered as one fresh allocation, the borrow released, the gradients
read with ``borrow_arrays``) keeps its semantics on the straight path that owner leaves
take: values, the holder named in conflicts, ledger events, and failed calls that leave
every argument as it was.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage.errors import BorrowError, UseAfterMoveError

pytestmark = pytest.mark.both_borrow_modes  # debug mode and the default mode


def _conflict(owner: Any) -> str:
    with pytest.raises(BorrowError) as info:
        owner.as_view_mut()
    return str(info.value)


def _free(owner: Any) -> None:
    """``owner`` is borrowed by nobody and no holder name is left on it."""
    view = owner.as_view()
    msg = _conflict(owner)
    view.release()
    assert "1 shared borrow is live (latest: TensorView" in msg and "held by" not in msg
    owner.as_view_mut().release()


def _loss(ps: list[Any]) -> Any:
    out = ad.sum(ps[0] * 2.0)
    for k, p in enumerate(ps[1:], start=3):
        out = out + ad.sum(p * float(k))
    return out


@pytest.mark.parametrize("n", [1, 5])
def test_owner_parameters_are_borrowed_named_and_given_back(n: int) -> None:
    """During the call every parameter refuses writes naming the call's argument; the
    gradients are right; afterwards every parameter is free and unnamed."""
    ps = [ts.from_numpy(np.full(3, float(i))) for i in range(n)]
    seen: list[str] = []

    def f(q: list[Any]) -> Any:
        seen.extend(_conflict(p) for p in ps)
        return _loss(q)

    value, grads = ad.value_and_grad(f)(ps)
    assert value.item() == pytest.approx(sum(3 * i * (2 if i == 0 else i + 2) for i in range(n)))
    assert [g.to_numpy().tolist() for g in grads] == [
        [2.0 if i == 0 else float(i + 2)] * 3 for i in range(n)
    ]
    assert len(seen) == n
    for msg in seen:
        held = "held by grad(f): argument 0 (latest: grad(f): argument 0 created at <unknown>)"
        assert f"1 shared borrow is live, {held}" in msg
    for p in ps:
        _free(p)


def test_each_gradient_is_one_fresh_allocation_and_nothing_is_copied() -> None:
    ps = [ts.from_numpy(np.ones((2, 2))) for _ in range(3)]
    with ledger.capture() as rec:
        _, grads = ad.value_and_grad(_loss)(ps)
    assert not rec.copies
    delivered = [e for e in rec.events if e.operation == "grad"]
    assert [(e.kind.value, e.reason.value, e.nbytes) for e in delivered] == [
        ("allocate", "operation_output", 32)
    ] * 3
    with ledger.capture() as rec2, ts.borrow_arrays(grads) as arrs:
        assert [a.tolist() for a in arrs] == [[[2.0] * 2] * 2, [[3.0] * 2] * 2, [[4.0] * 2] * 2]
        for g in grads:
            assert "held by borrow_arrays" in _conflict(g)
    assert rec2.events == []
    for p in ps + list(grads):
        _free(p)


def test_owner_leaves_mixed_with_other_leaf_kinds() -> None:
    """Owners, views, numpy arrays and floats in one argument: the same gradients as an
    all-numpy call; the owner and the view's owner are free afterwards."""
    t, u = ts.from_numpy(np.array([1.0, 2.0])), ts.from_numpy(np.array([3.0, 4.0, 5.0]))
    view = u[1:]

    def f(q: list[Any]) -> Any:
        return ad.sum(q[0] * q[1]) + ad.sum(q[2] * 3.0) + q[3] * 5.0

    _, mixed = ad.value_and_grad(f)([t, view, np.array([6.0, 7.0]), 2.0])
    arrays = [np.array([1.0, 2.0]), np.array([4.0, 5.0]), np.array([6.0, 7.0]), 2.0]
    _, plain = ad.value_and_grad(f)(arrays)
    assert [g.to_numpy().tolist() for g in mixed] == [g.to_numpy().tolist() for g in plain]
    view.release()
    _free(t)
    _free(u)


def test_two_arguments_name_their_own_holders() -> None:
    a, b = ts.ones(2), ts.ones(2)
    seen: list[str] = []

    def f(x: Any, y: list[Any]) -> Any:
        seen.append(_conflict(a))
        seen.append(_conflict(b))
        return ad.sum(x * y[0])

    ad.grad(f, argnums=(0, 1))(a, [b])
    assert "held by grad(f): argument 0" in seen[0] and "argument 1" not in seen[0]
    assert "held by grad(f): argument 1" in seen[1]
    _free(a)
    _free(b)


def test_a_refused_leaf_changes_nothing() -> None:
    """A consumed owner after a good one: the exact refusal, nothing recorded, the good
    owner neither borrowed nor named; likewise a mutably borrowed owner."""
    good, gone = ts.ones(2), ts.ones(2)
    gone.into_storage()
    with ledger.capture() as rec:
        with pytest.raises(UseAfterMoveError) as info:
            ad.grad(_loss)([good, gone])
    assert str(info.value) == (
        "grad: argument 0: this Tensor was consumed by Tensor.into_storage; it holds nothing "
        "any more"
    )
    assert rec.events == []
    _free(good)
    busy = ts.ones(2)
    m = busy.as_view_mut()
    with pytest.raises(BorrowError, match=r"^grad: argument 0: read_array: requested shared"):
        ad.grad(_loss)([good, busy])
    m.release()
    _free(good)
    _free(busy)
    ints = ts.from_numpy(np.arange(2))
    with pytest.raises(TypeError) as err:
        ad.grad(_loss)([good, ints])
    assert str(err.value) == (
        "grad: argument 0 has dtype int64; differentiation needs floating-point or complex "
        "inputs (as in JAX). Convert it with astype, or leave it out of argnums"
    )
    _free(good)
    _free(ints)


def test_a_function_that_raises_gives_every_borrow_back() -> None:
    ps = [ts.ones(2), ts.ones(2)]

    def f(q: list[Any]) -> Any:
        _ = q[0] * 2.0
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        ad.value_and_grad(f)(ps)
    for p in ps:
        _free(p)


def test_a_cotangent_delivered_twice_is_copied_once_and_a_view_is_laid_out() -> None:
    """The delivery's refused adoptions: the one cotangent of ``x + y`` goes to ``x`` as
    scratch and to ``y`` as one recorded MATERIALIZE copy; a transposed cotangent is laid
    out afresh (a kernel write, no copy)."""
    a, b = ts.from_numpy(np.ones(3)), ts.from_numpy(np.ones(3))
    with ledger.capture() as rec:
        ga, gb = ad.grad(lambda x, y: ad.sum(ad.exp(x + y)), argnums=(0, 1))(a, b)
    assert [(e.kind.value, e.operation) for e in rec.events if e.operation == "grad"] == [
        ("allocate", "grad"), ("allocate", "grad"), ("copy", "grad")
    ]
    assert sum(rec.copies.values()) == 1
    np.testing.assert_allclose(ga.to_numpy(), np.exp(2.0) * np.ones(3))
    np.testing.assert_allclose(gb.to_numpy(), ga.to_numpy())
    w = ts.from_numpy(np.arange(6.0).reshape(2, 3))
    c = ts.from_numpy(np.arange(6.0).reshape(3, 2))
    with ledger.capture() as rec:
        gw = ad.grad(lambda x: ad.sum(ad.transpose(x) * c))(w)
    assert not rec.copies
    assert gw.to_numpy().tolist() == np.arange(6.0).reshape(3, 2).T.tolist()
    for t in (a, b, w, c):
        _free(t)


class _FakeTracer:
    """A stand-in leaf type registered as a tracer (only ``_has_tracer`` looks at it)."""


@pytest.mark.parametrize("n", [1, 8, 9, 40])
def test_the_tracer_test_finds_a_tracer_anywhere_in_short_and_long_params_lists(
    n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Long lists are tested through their distinct leaf types: a tracer as a leaf, inside
    a nested tuple/list/dict or a namedtuple is still found; none is found where none is."""
    from collections import namedtuple

    from tenferro_ad import _functional
    from tenferro_ad._core import _dispatch

    monkeypatch.setitem(_dispatch._TRACERS, _FakeTracer, lambda *a: None)
    pair = namedtuple("pair", "a b")
    leaves: list[Any] = [np.ones(1) for _ in range(n)]
    assert not _functional._has_tracer((leaves,))
    assert not _functional._has_tracer(([*leaves, (np.ones(1), {"k": [1.0]})],))
    for nest in (lambda x: x, lambda x: (x,), lambda x: [[x]], lambda x: {"k": x},
                 lambda x: pair(1.0, x)):
        found = [*leaves[:-1], nest(_FakeTracer())]
        assert _functional._has_tracer((found,)), nest
        assert _functional._has_tracer((1.0, found))


@pytest.mark.parametrize("n", [1, 8, 9, 40])
def test_flattening_a_long_params_list_keeps_nested_structure(n: int) -> None:
    """One-level lists flatten to themselves; a nested container anywhere is opened and
    rebuilt with its type (the distinct-types test for long lists)."""
    from collections import namedtuple

    from tenferro_storage._pytree import tree_flatten

    pair = namedtuple("pair", "a b")
    flat_list = list(range(n))
    leaves, tree = tree_flatten(flat_list)
    assert leaves == flat_list and tree.unflatten(leaves) == flat_list
    nested = [*range(n - 1), pair(10, {"k": (11, [12])})]
    leaves, tree = tree_flatten(nested)
    assert leaves == [*range(n - 1), 10, 11, 12]
    again = tree.unflatten(leaves)
    assert again == nested and type(again[-1]) is pair and type(again[-1].b["k"]) is tuple
