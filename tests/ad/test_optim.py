"""Optimizers update uniquely owned parameters in place (no copy) or change nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import ArgumentError
from tenferro_storage import ledger
from tenferro_storage._provider import FaultInjected
from tenferro_storage.errors import BorrowError, TenferroError


@pytest.mark.parametrize("make", [lambda: ad.optim.SGD(0.1), lambda: ad.optim.SGD(0.1, 0.9),
                                  lambda: ad.optim.Adam(0.1)])
def test_step_updates_in_place_without_copies(make: object) -> None:
    opt = make()  # type: ignore[operator]
    p = {"w": ts.from_numpy(np.array([1.0, -2.0]))}
    span = p["w"].span
    g = ad.grad(lambda q: ad.sum(q["w"] * q["w"]))(p)
    opt.step(p, g)  # first step allocates optimizer state
    with ledger.capture() as rec:
        opt.step(p, g)
    assert rec.copies == {} and rec.allocations == {}
    assert p["w"].span == span  # the same allocation, updated in place
    assert np.all(np.abs(p["w"].to_numpy()) < np.array([1.0, 2.0]))
    del g


def test_step_refuses_when_a_parameter_is_borrowed_and_changes_nothing() -> None:
    opt = ad.optim.SGD(0.5, momentum=0.9)
    a, b = ts.from_numpy(np.ones(2)), ts.from_numpy(np.ones(2))
    ga, gb = ts.from_numpy(np.ones(2)), ts.from_numpy(np.ones(2))
    view = b.as_view()
    with pytest.raises(BorrowError):
        opt.step([a, b], [ga, gb])
    view.release()
    np.testing.assert_array_equal(a.to_numpy(), np.ones(2))
    assert opt.steps == 0
    opt.step([a, b], [ga, gb])
    np.testing.assert_array_equal(a.to_numpy(), np.full(2, 0.5))


def _snapshot(opt: object, params: list[ts.Tensor]) -> tuple[object, ...]:
    state = {
        k: (s.count, [b.to_numpy().copy() for b in s.buffers.values()])
        for k, s in opt._state.items()  # type: ignore[attr-defined]
    }
    return (opt.steps, state, [p.to_numpy().copy() for p in params])  # type: ignore[attr-defined]


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> None:
    assert a[0] == b[0]
    sa, sb = a[1], b[1]
    assert sa.keys() == sb.keys()  # type: ignore[attr-defined]
    for k in sa:  # type: ignore[attr-defined]
        assert sa[k][0] == sb[k][0]  # type: ignore[index]
        for x, y in zip(sa[k][1], sb[k][1], strict=True):  # type: ignore[index]
            np.testing.assert_array_equal(x, y)
    for x, y in zip(a[2], b[2], strict=True):  # type: ignore[call-overload]
        np.testing.assert_array_equal(x, y)


BAD_LAST_GRADIENTS = {
    "wrong-shape": lambda: np.ones(3),
    "integer-dtype": lambda: np.ones(2, dtype=np.int64),
    "complex-for-real": lambda: np.ones(2, dtype=np.complex128),
    "wrong-type": lambda: "not a gradient",
    "consumed-owner": lambda: _consumed(),
}


def _consumed() -> ts.Tensor:
    t = ts.ones(2)
    t.into_storage()  # t is now empty; the storage is released at once
    return t


@pytest.mark.parametrize("make", [lambda: ad.optim.SGD(0.1, 0.9), lambda: ad.optim.Adam(0.1)],
                         ids=["sgd-momentum", "adam"])
@pytest.mark.parametrize("bad", list(BAD_LAST_GRADIENTS), ids=list(BAD_LAST_GRADIENTS))
def test_a_bad_last_gradient_changes_nothing(make: object, bad: str) -> None:
    """Validation runs before any update: a bad gradient for the *last* parameter leaves
    every parameter, the optimizer state and the step count exactly as they were."""
    opt = make()  # type: ignore[operator]
    a, b, c = (ts.from_numpy(np.array([1.0, -2.0])) for _ in range(3))
    good = [np.full(2, 0.5), np.full(2, -0.25), np.full(2, 1.0)]
    opt.step([a, b, c], good)  # state exists for every parameter now
    before = _snapshot(opt, [a, b, c])
    with pytest.raises(TenferroError) as info:
        opt.step([a, b, c], [good[0], good[1], BAD_LAST_GRADIENTS[bad]()])
    assert "params[2]" in str(info.value) or bad == "consumed-owner"
    _same(_snapshot(opt, [a, b, c]), before)
    opt.step([a, b, c], good)  # still usable
    assert opt.steps == 2


def test_mismatched_structures_are_refused_and_change_nothing() -> None:
    """params and grads must have the same nesting, lengths and keys; the error shows both
    structures."""
    opt = ad.optim.SGD(0.1, 0.9)
    p = {"w": ts.from_numpy(np.ones(2)), "b": ts.from_numpy(np.ones(2))}
    with pytest.raises(ArgumentError, match=r"(?s)structure.*params: PyTreeDef\(\{'b': \*, "
                       r"'w': \*\}\).*grads:  PyTreeDef\(\{'c': \*, 'w': \*\}\)"):
        opt.step(p, {"w": np.ones(2), "c": np.ones(2)})
    with pytest.raises(ArgumentError, match=r"(?s)structure.*PyTreeDef\(\[\*, \*\]\)"
                       r".*PyTreeDef\(\[\*\]\)"):
        opt.step([p["w"], p["b"]], [np.ones(2)])
    assert opt.steps == 0 and not opt._state
    np.testing.assert_array_equal(p["w"].to_numpy(), np.ones(2))


def test_state_follows_the_tree_path_not_the_owner() -> None:
    """A parameter replaced by a new owner at the same path continues that path's momentum
    (a reloaded parameter does not share the old one's identity); a step with another
    structure is refused, showing both structures, and changes nothing."""
    opt = ad.optim.SGD(1.0, momentum=0.5)
    a, b = ts.from_numpy(np.zeros(1)), ts.from_numpy(np.zeros(1))
    opt.step({"a": a, "b": b}, {"a": np.array([10.0]), "b": np.array([1.0])})  # v_b = 1
    b2 = ts.from_numpy(np.zeros(1))  # a new owner at params['b']
    opt.step({"a": a, "b": b2}, {"a": None, "b": np.array([1.0])})  # v_b = 0.5 * 1 + 1
    np.testing.assert_allclose(b2.to_numpy(), [-1.5])
    np.testing.assert_allclose(a.to_numpy(), [-10.0])
    with pytest.raises(ArgumentError, match=r"(?s)structure.*PyTreeDef\(\{'a': \*, 'b': \*\}\)"
                       r".*PyTreeDef\(\[\*\]\)"):
        opt.step([b2], [np.array([1.0])])
    assert opt.steps == 2
    np.testing.assert_allclose(b2.to_numpy(), [-1.5])


def test_numpy_views_and_handles_are_accepted_as_gradients() -> None:
    """A gradient may be a numpy array, an owner, a view or an EagerTensor; all are read."""
    opt = ad.optim.SGD(1.0)
    ps = [ts.from_numpy(np.zeros(2)) for _ in range(4)]
    owner = ts.from_numpy(np.ones(2))
    view_src = ts.from_numpy(np.ones(2))
    view = view_src.as_view()
    handle = ad.sin(ts.from_numpy(np.full(2, np.pi / 2)))
    opt.step(ps, [np.ones(2), owner, view, handle])
    view.release()
    for p in ps:
        np.testing.assert_allclose(p.to_numpy(), [-1.0, -1.0])
    assert owner.to_numpy().tolist() == [1.0, 1.0]  # read, not consumed
    del handle


def test_a_gradients_bundle_is_refused_with_a_hint() -> None:
    """Passing the whole Gradients bundle names the fix instead of failing inside."""
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.ones(2)))
        loss = ad.sum(x * x)
    grads = tape.backward(loss)
    opt = ad.optim.SGD(0.1)
    p = ts.from_numpy(np.ones(2))
    with pytest.raises(TypeError, match=r"bundle\.grad"):
        opt.step([p], grads)
    assert opt.steps == 0
    del grads, x, loss


def test_the_same_parameter_twice_is_refused() -> None:
    opt = ad.optim.SGD(0.1)
    p = ts.from_numpy(np.ones(2))
    with pytest.raises(ArgumentError, match="same parameter"):
        opt.step([p, p], [np.ones(2), np.ones(2)])
    assert opt.steps == 0


def _count_maps(run: Callable[[], object]) -> int:
    """How many host maps ``run`` makes (the buffers a step maps)."""
    before = ts.host_provider.counters.resolutions
    run()
    return ts.host_provider.counters.resolutions - before


@pytest.mark.parametrize("make", [lambda: ad.optim.SGD(0.1, 0.9), lambda: ad.optim.Adam(0.1)],
                         ids=["sgd-momentum", "adam"])
def test_a_provider_map_failure_at_any_buffer_changes_nothing(
    make: Callable[[], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every buffer (scratch, state, parameter) is mapped before any is written: making
    the provider's k-th map fail, for every k a step makes, leaves both parameters, the
    state and ``steps`` as they were, and the optimizer usable."""
    opt = make()
    a, b = ts.from_numpy(np.array([1.0, -2.0])), ts.from_numpy(np.array([3.0, 4.0, 5.0]))
    grads = [np.full(2, 0.5), np.full(3, -0.25)]
    opt.step([a, b], grads)  # state and scratch exist now
    probe = make()
    pa, pb = ts.from_numpy(np.array([1.0, -2.0])), ts.from_numpy(np.array([3.0, 4.0, 5.0]))
    probe.step([pa, pb], grads)
    maps = _count_maps(lambda: probe.step([pa, pb], grads))
    assert maps >= 4  # scratch, a's and b's state and the parameters themselves
    for k in range(maps):
        before = _snapshot(opt, [a, b])
        calls = [0]
        real = ts.host_provider.map_host

        def failing(k: int = k, real: Callable[[], None] = real, calls: list[int] = calls) -> None:
            calls[0] += 1
            if calls[0] == k + 1:
                raise FaultInjected(f"map {k} fails")
            real()

        monkeypatch.setattr(ts.host_provider, "map_host", failing)
        with pytest.raises(TenferroError):
            opt.step([a, b], grads)
        monkeypatch.undo()
        after = _snapshot(opt, [a, b])
        _same(after, before)
    opt.step([a, b], grads)
    assert opt.steps == 2
