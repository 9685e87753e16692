"""Issue 26 items 2 and 12: one object passed twice is two inputs; one value returned twice
is two outputs.

Item 2: every argument position is its own input even when the same owner (or array) is
passed twice -- ``jvp``, ``jacfwd``, ``jacrev``, ``hessian``, ``linearize``, ``vjp`` and
``grad`` with ``argnums=(0, 1)`` on ``(h, h)``, eagerly and under ``jit``, against JAX.
Item 12: an output holding the same value twice (``lambda x: (y, y)``) is moved out once
and duplicated explicitly, by every transform that hands outputs back as owners.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage import ledger

jax.config.update("jax_enable_x64", True)

V = np.array([1.0, 2.0, 3.0])
T1, T2 = np.array([1.0, 0.0, 2.0]), np.array([0.0, 1.0, -1.0])


def _np(x: Any) -> Any:
    if isinstance(x, tuple | list):
        return [_np(v) for v in x]
    return np.asarray(x.to_numpy()) if hasattr(x, "to_numpy") else np.asarray(x)


def _same(kind: str) -> tuple[Any, Any]:
    """The same object twice: one handle (the issue's case), one owner, or one numpy
    array."""
    if kind == "handle":
        h: Any = ad.constant(V.copy())
    else:
        h = ts.from_numpy(V) if kind == "owner" else V.copy()
    return h, h


def _f(a: Any, b: Any) -> Any:
    return a * b * b


def _s(a: Any, b: Any) -> Any:
    return (a * b * b).sum() if isinstance(a, jnp.ndarray) else ad.sum(a * b * b)


@pytest.mark.parametrize("kind", ["handle", "owner", "array"])
def test_jvp_with_one_object_passed_twice_uses_each_tangent(kind: str) -> None:
    a, b = _same(kind)
    want = jax.jvp(_f, (V, V), (T1, T2))[1]
    assert np.allclose(_np(ad.jvp(_f, (a, b), (T1, T2))[1]), want)
    jitted = ad.jit(lambda x, y: ad.jvp(_f, (x, y), (T1, T2))[1])
    assert np.allclose(_np(jitted(a, b)), want)


@pytest.mark.parametrize("kind", ["handle", "owner", "array"])
@pytest.mark.parametrize(
    "name", ["jacfwd", "jacrev", "hessian", "grad", "vjp", "linearize"]
)
def test_transforms_with_argnums_0_1_on_one_object_match_jax(kind: str, name: str) -> None:
    a, b = _same(kind)
    if name in ("jacfwd", "jacrev"):
        ours = getattr(ad, name)(_f, argnums=(0, 1))
        want = getattr(jax, name)(_f, argnums=(0, 1))(V, V)
    elif name in ("hessian", "grad"):
        ours = getattr(ad, name)(_s, argnums=(0, 1))
        want = getattr(jax, name)(lambda x, y: jnp.sum(x * y * y), argnums=(0, 1))(V, V)
    elif name == "vjp":
        ct = np.array([1.0, -2.0, 0.5])
        got = ad.vjp(_f, a, b)[1](ct)
        want = jax.vjp(_f, V, V)[1](ct)
        assert np.allclose(_np(got), np.asarray(want))
        return
    else:
        _, lin = ad.linearize(_f, a, b)
        want = jax.linearize(_f, V, V)[1](T1, T2)
        assert np.allclose(_np(lin(T1, T2)), np.asarray(want))
        return
    got = _np(ours(a, b))
    assert np.allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float))
    if kind == "array":  # and inside jit (traced: each argument is its own graph input)
        assert np.allclose(np.asarray(_np(ad.jit(ours)(a, b)), dtype=float),
                           np.asarray(want, dtype=float))


@pytest.mark.parametrize("name", ["jvp", "jacfwd", "linearize", "hessian"])
def test_a_handle_argument_also_closed_over_is_a_constant_in_the_closure(name: str) -> None:
    """Forward mode keyed tangents by the handle's record, so a handle passed as the
    argument and also closed over got the argument's tangent in the closure too
    (``jvp(lambda a: a * h, (h,), (t,))`` gave ``2 h t``; JAX: ``h t``)."""
    h = ad.constant(V.copy())
    if name == "jvp":
        got = ad.jvp(lambda a: a * h, (h,), (T1,))[1]
        want = jax.jvp(lambda a: a * V, (V,), (T1,))[1]
    elif name == "jacfwd":
        got, want = ad.jacfwd(lambda a: a * h)(h), jax.jacfwd(lambda a: a * V)(V)
    elif name == "linearize":
        got = ad.linearize(lambda a: a * h, h)[1](T1)
        want = jax.linearize(lambda a: a * V, V)[1](T1)
    else:
        got = ad.hessian(lambda a: ad.sum(a * a * h))(h)
        want = jax.hessian(lambda a: jnp.sum(a * a * V))(V)
    assert np.allclose(_np(got), np.asarray(want))


def _twice(x: Any) -> Any:
    y = x * 2.0
    return y, y


@pytest.mark.parametrize("kind", ["array", "owner", "handle"])
@pytest.mark.parametrize("fn", [_twice, lambda x: (x, x)], ids=["computed", "argument"])
def test_jvp_of_a_function_returning_one_value_twice(fn: Any, kind: str) -> None:
    """Item 12 as the issue met it (autograd's tests pass numpy arrays): ``lambda x: (x, x)``
    on an array raised UseAfterMoveError from into_value."""
    h = _same(kind)[0]
    with ledger.capture() as rec:
        out, tan = ad.jvp(fn, (h,), (T1,))
    want_out, want_tan = jax.jvp(fn, (V,), (T1,))
    for o, w in zip(out, want_out, strict=True):
        assert np.allclose(_np(o), w)
    for t, w in zip(tan, want_tan, strict=True):
        assert np.allclose(_np(t), w)
    assert out[0] is not out[1]  # two owners (the second an explicit, recorded duplicate)
    assert sum(rec.copies.values()) >= 1


def test_transforms_returning_one_value_twice_do_not_use_a_moved_value() -> None:
    h = ts.from_numpy(V)
    jf = ad.jacfwd(_twice)(h)
    jr = ad.jacrev(_twice)(h)
    for j in (*jf, *jr):
        assert np.allclose(_np(j), 2.0 * np.eye(3))
    lin_out, lin = ad.linearize(_twice, h)
    assert [np.allclose(_np(o), 2.0 * V) for o in lin_out] == [True, True]
    assert [np.allclose(_np(t), 2.0 * T1) for t in lin(T1)] == [True, True]
    out, fn = ad.vjp(_twice, h)
    assert np.allclose(_np(fn((T1, T2))[0]), 2.0 * (T1 + T2))
    assert [np.allclose(_np(o), 2.0 * V) for o in out] == [True, True]
    fn.release()


def test_value_and_grad_with_aux_holding_the_value() -> None:
    def f(x: Any) -> Any:
        s = ad.sum(x * x)
        return s, (s, s)

    (value, aux), g = ad.value_and_grad(f, has_aux=True)(ts.from_numpy(V))
    assert float(_np(value)) == pytest.approx(14.0)
    assert [float(_np(a)) for a in aux] == [pytest.approx(14.0)] * 2
    assert np.allclose(_np(g), 2.0 * V)
