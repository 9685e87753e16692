"""Cotangents are written in place only where the sweep alone holds them.

The reverse sweep adds a value's second cotangent into the first one's memory when nothing
else refers to it (``_inplace._accumulate``), and hands a node's cotangent to the rule it calls
last (``ops.donated``), whose helper ``elementwise.into_g`` may write its result over it
when nothing else refers to it.  These tests build the programs where either would be wrong
-- a cotangent passed through to two values by ``add``, a caller's cotangent array, a rule
that hands back a residual, ``x + x`` and ``x * x``, two rules reading one cotangent -- and
check the gradients against their formulas and the caller's arrays and values against
copies taken before the call.  Two tests check that the in-place writes do happen for plain
scratch (so the guards are what keeps the others right, not the optimization being off).
"""

from __future__ import annotations

import sys
import sysconfig
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import extend as ext
from tenferro_ad._core import _inplace

X = np.linspace(-1.3, 1.7, 6).reshape(2, 3)
# where CPython's reference counts count every holder (the in-place writes are on)
_COUNTS_MEAN_HOLDERS = (
    sys.implementation.name == "cpython"
    and sys.version_info < (3, 14)
    and not sysconfig.get_config_var("Py_GIL_DISABLED")
)


def _shared_pass_through(x: Any) -> Any:
    q = ad.cos(x)  # its cotangent is the very array add hands to ``p`` too
    p = ad.sin(x)
    r = p * 3.0  # ``p``'s second consumer: swept after the add
    s = p + q
    return ad.sum(s * s) + ad.sum(r * r)


def _shared_pass_through_grad(x: np.ndarray[Any, Any]) -> Any:
    s = np.sin(x) + np.cos(x)
    return 2 * s * (np.cos(x) - np.sin(x)) + 18 * np.sin(x) * np.cos(x)


def test_a_cotangent_add_shares_between_two_values_is_not_summed_in_place() -> None:
    g = ad.grad(_shared_pass_through)(ts.from_numpy(X.copy()))
    with ts.borrow_arrays(g) as a:
        np.testing.assert_allclose(a, _shared_pass_through_grad(X), rtol=1e-12)


def test_the_same_through_an_explicit_tape_and_float32() -> None:
    x32 = X.astype(np.float32)
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(x32.copy()))
        loss = _shared_pass_through(x)
    grads = tape.backward(loss)
    with grads.grad(x) as v:
        np.testing.assert_allclose(v.to_numpy(), _shared_pass_through_grad(x32), rtol=1e-5)


def test_a_callers_cotangents_are_never_written() -> None:
    def f(x: Any) -> Any:
        u = ad.sin(x)
        return u, u * 2.0  # ``u`` gets the caller's first cotangent, then a second

    c1, c2 = np.full(X.shape, 0.5), np.full(X.shape, 0.25)
    keep1, keep2 = c1.copy(), c2.copy()
    _, fn = ad.vjp(f, ts.from_numpy(X.copy()))
    (gx,) = fn((c1, c2))
    np.testing.assert_array_equal(c1, keep1)
    np.testing.assert_array_equal(c2, keep2)
    with ts.borrow_arrays(gx) as a:
        np.testing.assert_allclose(a, np.cos(X) * (keep1 + 2.0 * keep2), rtol=1e-12)
    # the same array as both cotangents
    (gx,) = fn((c1, c1))
    np.testing.assert_array_equal(c1, keep1)
    with ts.borrow_arrays(gx) as a:
        np.testing.assert_allclose(a, np.cos(X) * 3.0 * keep1, rtol=1e-12)
    fn.release()


_RES = ext.defprimitive(
    "test_inplace_residual_rule",
    lambda a: np.multiply(a, 2.0),
    1,
    save_in=(0,),
    vjp=(lambda ops, g, x: x,),  # (not 2g: a rule that hands back its residual itself)
)
_RES_VIEW = ext.defprimitive(
    "test_inplace_residual_view_rule",
    lambda a: np.multiply(a, 2.0),
    1,
    save_in=(0,),
    vjp=(lambda ops, g, x: x[...],),  # a new view of the residual: held by nothing else
)


@pytest.mark.parametrize("prim", [_RES, _RES_VIEW], ids=["residual", "view of residual"])
def test_a_residual_a_rule_hands_back_is_not_summed_into(prim: Any) -> None:
    def f(x: Any) -> Any:
        w = ad.exp(x)  # exp's VJP reads its output ``w``
        m = ad.sum(w * w)  # ``w``'s second cotangent, swept after the rule below
        return m + ad.sum(ext.bind(prim, w))  # whose cotangent for ``w`` is ``w``'s memory

    (g,) = ad.grad(f, argnums=(0,))(ts.from_numpy(X.copy()))
    w = np.exp(X)
    with ts.borrow_arrays(g) as a:
        np.testing.assert_allclose(a, (w + 2 * w) * w, rtol=1e-12)  # the rule says dR/dw = w


def test_x_plus_x_and_a_parameter_used_twice() -> None:
    p = ts.from_numpy(X.copy())

    def f(q: list[Any]) -> Any:
        y = ad.tanh(q[0])
        return ad.sum((y + y) * q[0]) + ad.sum(q[0] * q[0])

    v, (g,) = ad.value_and_grad(f)([p])
    t = np.tanh(X)
    want = 2 * (1 - t * t) * X + 2 * t + 2 * X
    with ts.borrow_arrays([g, p]) as (a, pa):
        np.testing.assert_allclose(a, want, rtol=1e-12)
        np.testing.assert_array_equal(pa, X)  # the parameter itself is untouched
    assert abs(v.item() - float(np.sum(2 * t * X) + np.sum(X * X))) < 1e-12


class _InPlaceSpy:
    """numpy for one module, with ``add``/``multiply``/``true_divide`` recording, per call,
    whether the result was written over the first operand (``written``)."""

    def __init__(self) -> None:
        self.written: list[bool] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    def _call(self, ufunc: Any, a: Any, b: Any, out: Any) -> Any:
        self.written.append(out is a)
        return ufunc(a, b) if out is None else ufunc(a, b, out=out)

    def add(self, a: Any, b: Any, out: Any = None) -> Any:
        return self._call(np.add, a, b, out)

    def multiply(self, a: Any, b: Any, out: Any = None) -> Any:
        return self._call(np.multiply, a, b, out)

    def true_divide(self, a: Any, b: Any, out: Any = None) -> Any:
        return self._call(np.true_divide, a, b, out)


def test_plain_scratch_is_summed_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = _InPlaceSpy()
    monkeypatch.setattr(_inplace, "np", spy)
    ad.grad(lambda x: ad.sum(ad.sin(x) * ad.cos(x) + ad.sin(x) * 2.0))(ts.from_numpy(X.copy()))
    monkeypatch.undo()
    if not _COUNTS_MEAN_HOLDERS:  # the optimization is off by design: nothing in place
        assert _inplace._SOLE_REFS == 0 and not any(spy.written)
        return
    assert spy.written and all(spy.written)


@given(
    st.lists(st.sampled_from(["sin", "cos", "mul", "add", "self"]), min_size=1, max_size=8),
    st.integers(0, 2**31 - 1),
)
def test_random_reuse_matches_jax(ops: list[str], seed: int) -> None:
    """Programs where earlier values are reused at random, against JAX's gradients."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)  # type: ignore[no-untyped-call,unused-ignore]
    picks = np.random.default_rng(seed).integers(0, 1 << 30, size=(len(ops), 2))

    def run(x: Any, lib: Any, add: Any, mul: Any) -> Any:
        vals = [x]
        for op, (i, j) in zip(ops, picks, strict=True):
            a, b = vals[i % len(vals)], vals[j % len(vals)]
            if op == "sin":
                vals.append(lib.sin(a))
            elif op == "cos":
                vals.append(lib.cos(a))
            elif op == "mul":
                vals.append(mul(a, b))
            elif op == "add":
                vals.append(add(a, b))
            else:
                vals.append(add(a, a))
        out = vals[-1]
        for v in vals[:-1]:
            out = add(out, mul(v, 0.5))  # every value feeds the loss: many second cotangents
        return lib.sum(mul(out, out))

    got = ad.grad(lambda x: run(x, ad, lambda a, b: a + b, lambda a, b: a * b))(
        ts.from_numpy(X.copy())
    )
    want = jax.grad(lambda x: run(x, jnp, lambda a, b: a + b, lambda a, b: a * b))(X)
    with ts.borrow_arrays(got) as a:
        np.testing.assert_allclose(a, np.asarray(want), rtol=1e-10, atol=1e-12)


# -- donated cotangents (``elementwise.into_g``): arrays at or above its size threshold ---
BIG = np.linspace(-1.1, 1.3, 80 * 64).reshape(80, 64)


@pytest.mark.parametrize("kind", ["exp", "log", "div"])
def test_a_donated_cotangent_add_shares_between_two_values_is_not_overwritten(
    kind: str,
) -> None:
    x0 = BIG + 2.0  # (positive: log)
    fns: dict[str, tuple[Callable[[Any], Any], ...]] = {  # value, derivative, the op
        "exp": (np.exp, np.exp, ad.exp),
        "log": (np.log, lambda x: 1 / x, ad.log),
        "div": (lambda x: x / 3.0, lambda x: 0 * x + 1 / 3.0, lambda x: x / 3.0),
    }
    value, deriv, first = fns[kind]

    def f(x: Any) -> Any:
        q = ad.sin(x)  # ``q`` and ``p`` get the very same cotangent array from the add
        p = first(x)  # whose rule is handed it (donated) while ``q``'s entry still holds it
        s = p + q
        return ad.sum(s * s)

    g = ad.grad(f)(ts.from_numpy(x0.copy()))
    s = value(x0) + np.sin(x0)
    with ts.borrow_arrays(g) as a:
        np.testing.assert_allclose(a, 2 * s * (deriv(x0) + np.cos(x0)), rtol=1e-12)


def test_a_callers_cotangent_is_not_overwritten_by_a_rule() -> None:
    c = np.full(BIG.shape, 0.5)
    keep = c.copy()
    _, fn = ad.vjp(lambda x: ad.exp(x) * 3.0, ts.from_numpy(BIG.copy()))
    (gx,) = fn(c)
    np.testing.assert_array_equal(c, keep)
    with ts.borrow_arrays(gx) as a:
        np.testing.assert_allclose(a, 1.5 * np.exp(BIG), rtol=1e-12)
    fn.release()


def test_two_rules_reading_one_cotangent_and_x_times_x() -> None:
    y0 = np.cos(BIG) + 2.0

    def f(x: Any, y: Any) -> Any:
        return ad.sum(ad.sin(x * y) * 2.0) + ad.sum(ad.tanh(x * x))  # mul's rules read g twice

    gx, gy = ad.grad(f, argnums=(0, 1))(ts.from_numpy(BIG.copy()), ts.from_numpy(y0.copy()))
    c = 2.0 * np.cos(BIG * y0)
    t = np.tanh(BIG * BIG)
    with ts.borrow_arrays([gx, gy]) as (ax, ay):
        np.testing.assert_allclose(ax, c * y0 + (1 - t * t) * 2 * BIG, rtol=1e-12)
        np.testing.assert_allclose(ay, c * BIG, rtol=1e-12)


def test_second_order_through_donating_rules() -> None:
    """grad of grad records its backward (handles): nothing is donated or overwritten."""
    x0 = BIG[:2, :3].copy()
    gg = ad.grad(lambda x: ad.sum(ad.grad(lambda z: ad.sum(ad.exp(z) * 3.0))(x) * x))(
        ts.from_numpy(x0)
    )
    with ts.borrow_arrays(gg) as a:  # d/dx sum(3 e^x x) = 3 e^x (1 + x)
        np.testing.assert_allclose(a, 3 * np.exp(x0) * (1 + x0), rtol=1e-12)


def test_plain_scratch_is_donated_and_overwritten(monkeypatch: pytest.MonkeyPatch) -> None:
    from tenferro_ad.ops import elementwise as E

    spy = _InPlaceSpy()
    monkeypatch.setattr(E, "np", spy)
    # exp's, log's and div's rules (the fast path), a scalar-first mul's (the general loop's
    # last rule)
    ad.grad(lambda x: ad.sum(ad.sin(0.5 * ad.exp(ad.log(ad.sin(x) + 2.0) / 3.0))))(
        ts.from_numpy(BIG.copy())
    )
    monkeypatch.undo()
    assert spy.written.count(True) == (4 if _COUNTS_MEAN_HOLDERS else 0)


def _views_of_a_caller_array(shape: tuple[int, int]) -> list[tuple[str, np.ndarray[Any, Any]]]:
    """Caller arrays whose cotangent reaches the sweep as a view: held by nothing but it."""
    rows, cols = shape
    return [
        ("transposed", np.full((cols, rows), 0.5)),
        ("sliced", np.full((rows, 2 * cols), 0.5)),
    ]


def _as_view(kind: str, base: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return base.T if kind == "transposed" else base[:, ::2]


@pytest.mark.parametrize("kind", ["transposed", "sliced"])
def test_a_callers_cotangent_view_is_not_overwritten_by_a_donating_rule(kind: str) -> None:
    # (BIG is above the in-place threshold: a rule may write over a cotangent it alone holds)
    base = dict(_views_of_a_caller_array(BIG.shape))[kind]
    keep = base.copy()
    _, fn = ad.vjp(lambda x: ad.exp(x) * 3.0, ts.from_numpy(BIG.copy()))
    (gx,) = fn(_as_view(kind, base))  # the view itself: no other name holds it
    np.testing.assert_array_equal(base, keep)
    with ts.borrow_arrays(gx) as a:
        np.testing.assert_allclose(a, 1.5 * np.exp(BIG), rtol=1e-12)
    fn.release()


@pytest.mark.parametrize("kind", ["transposed", "sliced"])
def test_a_callers_cotangent_view_is_not_summed_into(kind: str) -> None:
    def f(x: Any) -> Any:
        u = ad.sin(x)
        return u, u * 2.0  # ``u``'s caller cotangent gets the second one added to it

    base = dict(_views_of_a_caller_array(BIG.shape))[kind]
    keep = base.copy()
    c2 = np.full(BIG.shape, 0.25)
    _, fn = ad.vjp(f, ts.from_numpy(BIG.copy()))
    (gx,) = fn((_as_view(kind, base), c2))
    np.testing.assert_array_equal(base, keep)
    with ts.borrow_arrays(gx) as a:
        np.testing.assert_allclose(a, np.cos(BIG) * (0.5 + 2.0 * 0.25), rtol=1e-12)
    fn.release()


@pytest.mark.parametrize(
    "last", [ad.transpose, lambda y: y[:, ::1], lambda y: ad.reshape(y, (-1,))],
    ids=["transpose", "slice", "reshape"],
)
def test_a_callers_cotangent_reaching_a_rule_through_a_view_rule_is_not_overwritten(
    last: Callable[[Any], Any],
) -> None:
    # the last op's VJP hands the next rule a view of the caller's array that nothing but
    # the sweep holds: only the view's base tells that the memory is the caller's
    _, fn = ad.vjp(lambda x: last(ad.exp(x) * 3.0), ts.from_numpy(BIG.copy()))
    out_shape = last(np.empty(BIG.shape)).shape if last is not ad.transpose else BIG.T.shape
    c = np.full(out_shape, 0.5)
    keep = c.copy()
    (gx,) = fn(c)
    np.testing.assert_array_equal(c, keep)
    with ts.borrow_arrays(gx) as a:
        np.testing.assert_allclose(a, 1.5 * np.exp(BIG), rtol=1e-12)
    fn.release()
