"""Nested and composed transforms are exactly right (against JAX).

A grid {grad, vjp, jvp, jacfwd, jacrev, hessian} (outer) x {grad, vjp, jvp} (inner), two
deep, on functions whose inner level closes over the outer variable *and* receives an
argument computed from it (the perturbation-confusion trap), plus three-deep samples and
the regressions of the composition issue.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts

jax.config.update("jax_enable_x64", True)

X0 = np.array([0.3, -0.7, 1.1])
W = np.array([0.5, -1.5, 2.0])
T = np.array([1.0, 0.25, -0.5])


class _TF:
    """tenferro as a backend of the grid."""

    sin, exp, sum, tanh = ad.sin, ad.exp, ad.sum, ad.tanh
    grad, jacfwd, jacrev, hessian = ad.grad, ad.jacfwd, ad.jacrev, ad.hessian

    @staticmethod
    def vjp1(f: Callable[..., Any], x: Any, ct: Any) -> Any:
        _, fn = ad.vjp(f, x)
        return fn(ct)[0]

    @staticmethod
    def jvp1(f: Callable[..., Any], x: Any, t: Any) -> Any:
        return ad.jvp(f, (x,), (t,))[1]


class _JX:
    """JAX as the oracle backend."""

    sin, exp, sum, tanh = jnp.sin, jnp.exp, jnp.sum, jnp.tanh
    grad, jacfwd, jacrev, hessian = jax.grad, jax.jacfwd, jax.jacrev, jax.hessian

    @staticmethod
    def vjp1(f: Callable[..., Any], x: Any, ct: Any) -> Any:
        _, fn = jax.vjp(f, x)
        return fn(ct)[0]

    @staticmethod
    def jvp1(f: Callable[..., Any], x: Any, t: Any) -> Any:
        return jax.jvp(f, (x,), (t,))[1]


def _f(B: Any, x: Any, y: Any) -> Any:
    """The innermost function: depends on the closed-over x and on the argument y."""
    return B.sin(x * y) * B.exp(y * 0.3) + x * x * y


INNER: dict[str, Callable[[Any, Any], Any]] = {
    # each maps x to a vector, through an inner transform over y = x * 0.5 + 0.1
    "grad": lambda B, x: B.grad(lambda y: B.sum(_f(B, x, y)))(x * 0.5 + 0.1),
    "vjp": lambda B, x: B.vjp1(lambda y: _f(B, x, y), x * 0.5 + 0.1, W),
    "jvp": lambda B, x: B.jvp1(lambda y: _f(B, x, y), x * 0.5 + 0.1, T),
}

OUTER: dict[str, Callable[[Any, Callable[[Any], Any], Any], Any]] = {
    "grad": lambda B, G, x: B.grad(lambda x: B.sum(G(x) * W))(x),
    "vjp": lambda B, G, x: B.vjp1(G, x, W),
    "jvp": lambda B, G, x: B.jvp1(G, x, T),
    "jacfwd": lambda B, G, x: B.jacfwd(G)(x),
    "jacrev": lambda B, G, x: B.jacrev(G)(x),
    "hessian": lambda B, G, x: B.hessian(lambda x: B.sum(G(x) * W))(x),
}


def _np(v: Any) -> np.ndarray[Any, Any]:
    if isinstance(v, ts.Tensor | ad.EagerTensor):
        return v.to_numpy()
    return np.asarray(v)


@pytest.mark.parametrize("inner", sorted(INNER))
@pytest.mark.parametrize("outer", sorted(OUTER))
def test_two_deep_composition_matches_jax(outer: str, inner: str) -> None:
    """outer(inner) with a closure over the outer variable: exactly JAX's value."""
    ours = OUTER[outer](_TF, lambda x: INNER[inner](_TF, x), ts.from_numpy(X0))
    theirs = OUTER[outer](_JX, lambda x: INNER[inner](_JX, x), jnp.asarray(X0))
    np.testing.assert_allclose(_np(ours), np.asarray(theirs), rtol=1e-11, atol=1e-12)


THREE: dict[str, Callable[[Any, Any], Any]] = {
    "grad(jvp(grad))": lambda B, x: B.grad(
        lambda x: B.sum(B.jvp1(lambda z: B.grad(lambda y: B.sum(_f(B, z, y)))(z), x, T))
    )(x),
    "jacrev(grad(vjp))": lambda B, x: B.jacrev(
        lambda x: B.grad(lambda y: B.sum(B.vjp1(lambda z: _f(B, y, z), x, W) * y))(x)
    )(x),
    "jvp(jvp(jvp))": lambda B, x: B.jvp1(
        lambda x: B.jvp1(lambda y: B.jvp1(lambda z: B.sin(z) * y * x, y, T), x, T), x, T
    ),
    "hessian(jvp)": lambda B, x: B.hessian(lambda x: B.sum(B.jvp1(B.tanh, x * x, T)))(x),
}


@pytest.mark.parametrize("name", sorted(THREE))
def test_three_deep_composition_matches_jax(name: str) -> None:
    ours = THREE[name](_TF, ts.from_numpy(X0))
    theirs = THREE[name](_JX, jnp.asarray(X0))
    np.testing.assert_allclose(_np(ours), np.asarray(theirs), rtol=1e-11, atol=1e-12)


# -- regressions ------------------------------------------------------------------------------


def test_inner_grad_keeps_the_dependence_on_a_closed_over_outer_variable() -> None:
    """Perturbation confusion: d/dx [x * d/dy (x*y)] = 2x, not x."""
    f = lambda x: x * ad.grad(lambda y: x * y)(2.0)  # noqa: E731
    assert ad.grad(f)(1.0).to_numpy() == pytest.approx(2.0)
    h = lambda x, y: ad.sin(ad.sin(x) + ad.sin(y))  # noqa: E731
    hj = lambda x, y: jnp.sin(jnp.sin(x) + jnp.sin(y))  # noqa: E731
    ours = ad.grad(lambda x, y: x * ad.grad(h, 1)(x, y))(0.3, 0.5).to_numpy()
    theirs = jax.grad(lambda x, y: x * jax.grad(hj, 1)(x, y))(0.3, 0.5)
    assert ours == pytest.approx(float(theirs), rel=1e-13)


def test_third_derivative_through_another_argument_matches_jax() -> None:
    f = lambda x, y: ad.sin(x * y)  # noqa: E731
    fj = lambda x, y: jnp.sin(x * y)  # noqa: E731
    ours = ad.grad(lambda x, y: ad.grad(lambda a: ad.grad(f, 0)(a, y))(x))(0.7, 1.3)
    theirs = jax.grad(lambda x, y: jax.grad(lambda a: jax.grad(fj, 0)(a, y))(x))(0.7, 1.3)
    assert ours.to_numpy() == pytest.approx(float(theirs), rel=1e-12)


def test_argnums_order_is_the_requested_order() -> None:
    a, b = ts.from_numpy(np.ones(2)), ts.from_numpy(np.full(2, 3.0))
    gb, ga = ad.grad(lambda x, y: ad.sum(x * x * y), argnums=(1, 0))(a, b)
    np.testing.assert_array_equal(gb.to_numpy(), [1.0, 1.0])  # d/dy = x*x
    np.testing.assert_array_equal(ga.to_numpy(), [6.0, 6.0])  # d/dx = 2xy


def test_zero_d_real_argument_meeting_a_complex_value_gets_a_zero_d_gradient() -> None:
    g = ad.grad(lambda x: ad.abs(x * (1 + 2j)))(0.5)
    assert g.shape == ()
    assert g.to_numpy() == pytest.approx(float(jax.grad(lambda x: jnp.abs(x * (1 + 2j)))(0.5)))


@pytest.mark.parametrize("z", [1.0 + 2.0j, np.complex128(1.0 + 2.0j)])
def test_complex_scalars_are_differentiable_arguments(z: Any) -> None:
    ours = ad.grad(lambda z: ad.abs(z * z))(z).to_numpy()
    assert ours == pytest.approx(complex(jax.grad(lambda z: jnp.abs(z * z))(complex(z))))


def test_outputs_that_do_not_depend_on_the_input_get_zeros() -> None:
    x = ts.from_numpy(np.ones(2))
    _, fn = ad.vjp(lambda x: ad.constant(np.ones(3)), x)
    np.testing.assert_array_equal(fn(np.ones(3))[0].to_numpy(), np.zeros(2))
    _, t = ad.jvp(lambda x: ad.constant(np.ones(3)), (x,), (ts.from_numpy(np.ones(2)),))
    np.testing.assert_array_equal(t.to_numpy(), np.zeros(3))
    assert ad.grad(lambda x: 3.0)(1.0).to_numpy() == 0.0


def test_vjp_and_jvp_accept_tuple_and_dict_outputs() -> None:
    x = ts.from_numpy(X0)
    out, fn = ad.vjp(lambda x: (x * 2.0, {"s": ad.sin(x)}), x)
    (g,) = fn((np.ones(3), {"s": np.ones(3)}))
    np.testing.assert_allclose(g.to_numpy(), 2.0 + np.cos(X0))
    fn.release()
    del out
    value, tan = ad.jvp(lambda x: {"a": x * x, "b": (ad.sin(x),)}, (x,), (ts.from_numpy(T),))
    np.testing.assert_allclose(tan["a"].to_numpy(), 2 * X0 * T)
    np.testing.assert_allclose(tan["b"][0].to_numpy(), np.cos(X0) * T)
    np.testing.assert_allclose(value["b"][0].to_numpy(), np.sin(X0))


def test_grad_passes_keyword_arguments_through() -> None:
    assert ad.grad(lambda x, *, s: x * s)(2.0, s=3.0).to_numpy() == pytest.approx(3.0)


def test_transforms_match_jax() -> None:
    f = lambda x: ad.sin(x) * ad.exp(x[::-1])  # noqa: E731
    fj = lambda x: jnp.sin(x) * jnp.exp(x[::-1])  # noqa: E731
    s = lambda x: ad.sum(f(x) ** 2.0)  # noqa: E731
    sj = lambda x: jnp.sum(fj(x) ** 2)  # noqa: E731
    x = ts.from_numpy(X0)
    np.testing.assert_allclose(ad.jacobian(f)(x).to_numpy(), jax.jacobian(fj)(X0), rtol=1e-12)
    np.testing.assert_allclose(ad.jacfwd(f)(x).to_numpy(), jax.jacfwd(fj)(X0), rtol=1e-12)
    np.testing.assert_allclose(ad.hessian(s)(x).to_numpy(), jax.hessian(sj)(X0), rtol=1e-12)
    hv = ad.hvp(s, (x,), (ts.from_numpy(T),)).to_numpy()
    np.testing.assert_allclose(hv, jax.jvp(jax.grad(sj), (X0,), (T,))[1], rtol=1e-12)
    eg = ad.elementwise_grad(ad.sin)(x).to_numpy()
    np.testing.assert_allclose(eg, np.cos(X0), rtol=1e-14)
    _, lin = ad.linearize(f, x)
    np.testing.assert_allclose(lin(ts.from_numpy(T)).to_numpy(), jax.jvp(fj, (X0,), (T,))[1])


def test_custom_vjp_is_used_and_differentiable_twice() -> None:
    calls = []

    @ad.custom_vjp
    def f(x: Any) -> Any:
        return ad.sin(x) * 2.0

    def f_fwd(x: Any) -> Any:
        return f(x), (ad.cos(x),)

    def f_bwd(res: Any, g: Any) -> Any:
        calls.append(1)
        return (g * res[0] * 2.0,)

    f.defvjp(f_fwd, f_bwd)
    x = ts.from_numpy(X0)
    g = ad.grad(lambda x: ad.sum(f(x) * x))(x).to_numpy()
    np.testing.assert_allclose(g, 2 * np.cos(X0) * X0 + 2 * np.sin(X0), rtol=1e-14)
    assert calls  # the user's rule ran
    gg = ad.grad(lambda y: ad.sum(ad.grad(lambda x: ad.sum(f(x) * x))(y)))(x).to_numpy()
    theirs = jax.grad(lambda y: jnp.sum(jax.grad(lambda x: jnp.sum(2 * jnp.sin(x) * x))(y)))(X0)
    np.testing.assert_allclose(gg, theirs, rtol=1e-12)


def test_custom_vjp_rule_output_with_the_wrong_shape_is_refused() -> None:
    @ad.custom_vjp
    def f(x: Any) -> Any:
        return x * 2.0

    f.defvjp(lambda x: (f(x), ()), lambda res, g: (np.ones(7),))
    with pytest.raises(ad.errors.ArgumentError, match="shape"):
        ad.grad(lambda x: ad.sum(f(x)))(ts.from_numpy(X0))


def test_custom_jvp_drives_forward_and_reverse_mode() -> None:
    @ad.custom_jvp
    def softplus(x: Any) -> Any:
        return ad.log(1.0 + ad.exp(x))

    @softplus.defjvp
    def _(primals: Any, tangents: Any) -> Any:
        (x,), (t,) = primals, tangents
        return softplus(x), t / (1.0 + ad.exp(-x))

    sig = 1 / (1 + np.exp(-X0))
    x = ts.from_numpy(X0)
    np.testing.assert_allclose(ad.grad(lambda x: ad.sum(softplus(x)))(x).to_numpy(), sig)
    np.testing.assert_allclose(
        ad.jvp(softplus, (x,), (ts.from_numpy(T),))[1].to_numpy(), T * sig, rtol=1e-14
    )
    hv = ad.hvp(lambda x: ad.sum(softplus(x)), (x,), (ts.from_numpy(T),)).to_numpy()
    np.testing.assert_allclose(hv, T * sig * (1 - sig), rtol=1e-12)
