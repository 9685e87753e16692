"""Issue 26 item 1: ``custom_vjp``/``custom_jvp`` rules are honoured under every transform.

The rules here deliberately differ from the true derivative (``10 * g``), so a transform
that differentiates the function body instead of calling the rule gives a different number.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts

X = np.array([0.5, 1.0, 2.0])
XS = np.stack([X, X * 0.5])


def _vjp_fn() -> tuple[Any, list[int]]:
    calls = [0]

    @ad.custom_vjp
    def f(x: Any) -> Any:
        return ad.sin(x)

    def f_bwd(res: Any, g: Any) -> Any:
        calls[0] += 1
        return (g * 10.0,)

    f.defvjp(lambda x: (f(x), x), f_bwd)
    return f, calls


def _jvp_fn() -> Any:
    @ad.custom_jvp
    def f(x: Any) -> Any:
        return ad.sin(x)

    @f.defjvp
    def f_jvp(p: Any, t: Any) -> Any:
        return f(p[0]), t[0] * 10.0

    return f


def _fns() -> list[Any]:
    return [_vjp_fn()[0], _jvp_fn()]


def _np(x: Any) -> np.ndarray:
    return np.asarray(x.to_numpy())


def _ckpt(loss: Any, policy: Any) -> Any:
    return ad.grad(ad.checkpoint(loss, policy=policy))(X)


TRANSFORMS = {
    "eager grad": lambda L: ad.grad(L)(X),
    "jit(grad)": lambda L: ad.jit(ad.grad(L))(X),
    "grad(jit)": lambda L: ad.grad(ad.jit(L))(ts.from_numpy(X)),
    "vmap(grad)": lambda L: ad.vmap(ad.grad(L))(XS),
    "jit(vmap(grad))": lambda L: ad.jit(ad.vmap(ad.grad(L)))(XS),
    "grad(checkpoint[save_nothing])": lambda L: _ckpt(L, ad.save_nothing),
    "grad(checkpoint[save_everything])": lambda L: _ckpt(L, ad.save_everything),
    "grad(checkpoint[save_contractions])": lambda L: _ckpt(L, ad.save_contractions),
    "grad(checkpoint[save_named])": lambda L: _ckpt(L, ad.save_named("a")),
    "jit(grad(checkpoint))": lambda L: ad.jit(ad.grad(ad.checkpoint(L)))(X),
}


@pytest.mark.parametrize("kind", ["custom_vjp", "custom_jvp"])
@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_custom_rule_gives_the_gradient_under_every_transform(kind: str, transform: str) -> None:
    f = _vjp_fn()[0] if kind == "custom_vjp" else _jvp_fn()

    def loss(x: Any) -> Any:
        return ad.sum(f(x))

    got = _np(TRANSFORMS[transform](loss))
    assert np.allclose(got, np.full(got.shape, 10.0)), got


def test_custom_jvp_rule_gives_the_tangent_under_jit_and_vmap() -> None:
    f = _jvp_fn()
    t = np.ones(3)
    eager = _np(ad.jvp(f, (X,), (t,))[1])
    jitted = _np(ad.jit(lambda x: ad.jvp(f, (x,), (t,))[1])(X))
    mapped = _np(ad.vmap(lambda x: ad.jvp(f, (x,), (t,))[1])(XS))
    assert np.allclose(eager, 10.0) and np.allclose(jitted, 10.0) and np.allclose(mapped, 10.0)


def test_custom_rule_nested_second_order_uses_the_rule() -> None:
    """grad of a function whose custom_jvp rule is 3 x^2 t (for x^3, true: same) nested in
    jit(grad(grad)): the rule is differentiated again (as JAX)."""

    @ad.custom_jvp
    def cube(x: Any) -> Any:
        return x * x * x

    @cube.defjvp
    def cube_jvp(p: Any, t: Any) -> Any:
        (x,) = p
        return cube(x), 30.0 * x * x * t[0]  # 10x the true derivative

    def g(x: Any) -> Any:
        return ad.sum(cube(x))

    eager = _np(ad.grad(lambda x: ad.sum(ad.grad(g)(x)))(X))
    jitted = _np(ad.jit(ad.grad(lambda x: ad.sum(ad.grad(g)(x))))(X))
    assert np.allclose(eager, 60.0 * X), eager
    assert np.allclose(jitted, 60.0 * X), jitted


def test_custom_vjp_with_pytree_argument_honours_its_rule_eagerly_and_traced() -> None:
    @ad.custom_vjp
    def h(xs: Any) -> Any:
        return ad.sin(xs[0]) * xs[1]

    h.defvjp(lambda xs: (h(xs), xs), lambda res, g: ([g * 10.0, g * 20.0],))

    def loss(x: Any) -> Any:
        return ad.sum(h([x, x]))

    assert np.allclose(_np(ad.grad(loss)(X)), 30.0)
    assert np.allclose(_np(ad.jit(ad.grad(loss))(X)), 30.0)

    @ad.custom_vjp
    def d(p: Any) -> Any:
        return p["a"] * p["b"]

    d.defvjp(lambda p: (d(p), p), lambda res, g: ({"a": g * 2.0, "b": None},))
    got = ad.jit(ad.grad(lambda a, b: ad.sum(d({"a": a, "b": b})), argnums=(0, 1)))(X, X)
    assert np.allclose(_np(got[0]), 2.0) and np.allclose(_np(got[1]), 0.0)


@pytest.mark.parametrize("mode", ["eager", "jit", "grad(jit)", "vmap"])
def test_custom_vjp_with_tuple_output_calls_bwd_once(mode: str) -> None:
    calls = [0]

    @ad.custom_vjp
    def two(x: Any) -> Any:
        return ad.sin(x), ad.cos(x)

    def bwd(res: Any, g: Any) -> Any:
        calls[0] += 1
        return (g[0] * 10.0 + g[1] * 100.0,)

    two.defvjp(lambda x: (two(x), x), bwd)

    def loss(x: Any) -> Any:
        a, b = two(x)
        return ad.sum(a) + ad.sum(b)

    if mode == "eager":
        got = ad.grad(loss)(X)
    elif mode == "jit":
        got = ad.jit(ad.grad(loss))(X)
    elif mode == "grad(jit)":
        got = ad.grad(ad.jit(loss))(ts.from_numpy(X))
    else:
        got = ad.vmap(ad.grad(loss))(XS)
    assert np.allclose(_np(got), 110.0)
    if mode != "vmap":  # vmap runs the rule per batch element
        assert calls[0] == 1, calls


def test_custom_jvp_with_tuple_output_calls_the_rule_once_per_jvp() -> None:
    calls = [0]

    @ad.custom_jvp
    def two(x: Any, y: Any) -> Any:
        return x * y, x + y

    @two.defjvp
    def two_jvp(p: Any, t: Any) -> Any:
        calls[0] += 1
        (x, y), (tx, ty) = p, t
        return two(x, y), (10.0 * (tx * y + x * ty), 10.0 * (tx + ty))

    def f(x: Any, y: Any) -> Any:
        a, b = two(x, y)
        return a + b

    t = np.ones(3)
    out = ad.jit(lambda x, y: ad.jvp(f, (x, y), (t, t))[1])(X, X)
    assert np.allclose(_np(out), 10.0 * (2 * X + 2.0))
    assert calls[0] == 1, calls


def test_custom_vjp_under_forward_mode_is_refused_traced_as_eagerly() -> None:
    f, _ = _vjp_fn()
    with pytest.raises(TypeError, match="forward mode"):
        ad.jvp(f, (X,), (np.ones(3),))
    with pytest.raises(TypeError, match="forward mode"):
        ad.jit(lambda x: ad.jvp(f, (x,), (np.ones(3),))[1])(X)


def test_custom_rule_returning_a_wrong_shape_is_refused_under_jit() -> None:
    @ad.custom_vjp
    def f(x: Any) -> Any:
        return ad.sin(x)

    f.defvjp(lambda x: (f(x), x), lambda res, g: (ad.sum(g),))
    with pytest.raises(ValueError, match="shape"):
        ad.jit(ad.grad(lambda x: ad.sum(f(x))))(X)
