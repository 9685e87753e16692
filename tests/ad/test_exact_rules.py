"""Derivatives exact where a naive rule is not, against JAX and finite differences:
cumprod at zeros (item 3 of issue 26), prod's axis/keepdims/0-d variants (autograd's
statistics checks), eigh/eigvalsh reading one triangle of a complex matrix (its forward and
its rule read the same values), and numpy's keyword names (``swapaxes(axis1=, axis2=)``)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import tenferro_ad as ad


def _np(x: Any) -> np.ndarray:
    return x.to_numpy() if hasattr(x, "to_numpy") else np.asarray(x)


def test_cumprod_gradient_is_exact_at_a_zero_eagerly_and_under_jit() -> None:
    """JAX's value: d/dx sum(cumprod([0, 2, 3])) = [1 + 2 + 6, 0, 0] = [9, 0, 0]."""
    x = np.array([0.0, 2.0, 3.0])
    f = lambda v: ad.sum(ad.cumprod(v))  # noqa: E731
    for g in (ad.grad(f), ad.jit(ad.grad(f))):
        np.testing.assert_array_equal(_np(g(x)), [9.0, 0.0, 0.0])


def _cumprod_grad_reference(x: np.ndarray, c: np.ndarray, axis: int) -> np.ndarray:
    """d/dx sum(c * cumprod(x, axis)) by brute force, without division: entry i gets
    sum_{j >= i} c_j prod_{k <= j, k != i} x_k (exact at zeros)."""
    xm, cm = np.moveaxis(x, axis, -1), np.moveaxis(c, axis, -1)
    n = xm.shape[-1]
    out = np.zeros_like(xm)
    for i in range(n):
        for j in range(i, n):
            others = np.delete(xm[..., : j + 1], i, axis=-1)
            out[..., i] += cm[..., j] * np.prod(others, axis=-1)
    return np.moveaxis(out, -1, axis)


@given(
    shape=st.sampled_from([(1,), (5,), (4, 3), (2, 6, 3), (0, 3), (7, 1), (9,)]),
    seed=st.integers(0, 2**16),
    zeros=st.integers(0, 3),
    axis=st.integers(-3, 2),
)
@example(shape=(5,), seed=0, zeros=2, axis=0)
@example(shape=(2, 6, 3), seed=1, zeros=3, axis=1)
def test_cumprod_gradient_and_tangent_are_exact_with_zeros(
    shape: tuple[int, ...], seed: int, zeros: int, axis: int
) -> None:
    """grad (eager and jit) and jvp of sum(c * cumprod(x)) equal the brute-force
    derivative (no division) with zeros among the inputs."""
    axis = axis % len(shape)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape)
    if x.size:
        x.flat[rng.integers(0, x.size, zeros)] = 0.0
    c, t = rng.normal(size=shape), rng.normal(size=shape)
    want = _cumprod_grad_reference(x, c, axis)
    f = lambda v: ad.sum(ad.cumprod(v, axis=axis) * c)  # noqa: E731
    for got in (ad.grad(f)(x), ad.jit(ad.grad(f))(x)):
        np.testing.assert_allclose(_np(got), want, rtol=1e-12, atol=1e-12)
    tan = _np(ad.jvp(f, (x,), (t,))[1])
    np.testing.assert_allclose(tan, np.sum(want * t), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("shape", "axis"), [((3, 4), 1)])
def test_cumprod_second_derivatives_match_jax_with_zeros(
    shape: tuple[int, ...], axis: int
) -> None:
    """The rules are written with differentiable ops: hessians are exact at zeros too."""
    x = np.random.default_rng(3).normal(size=shape)
    x.flat[[1, 3]] = 0.0

    def loss(m: Any) -> Any:
        return lambda v: m.sum(m.sin(m.cumprod(v, axis=axis)) * 1.5)

    np.testing.assert_allclose(_np(ad.hessian(loss(ad))(x)),
                               np.asarray(jax.hessian(loss(jnp))(x)), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(_np(ad.jit(ad.grad(loss(ad)))(x)),
                               np.asarray(jax.grad(loss(jnp))(x)), rtol=1e-12, atol=1e-12)


_PROD_VARIANTS = [
    {}, {"axis": 0}, {"axis": -1}, {"keepdims": True}, {"axis": 0, "keepdims": True},
    {"axis": (0,), "keepdims": True}, {"axis": 1}, {"axis": (0, 1), "keepdims": True},
]


@pytest.mark.parametrize("shape", [(), (6,), (2, 3)])
@pytest.mark.parametrize("kw", _PROD_VARIANTS)
def test_prod_axis_and_keepdims_variants_match_jax(shape: tuple[int, ...], kw: dict) -> None:
    """Value, gradient (0-d input: a 0-d gradient), jacobian and hessian of prod over
    every axis/keepdims form equal JAX's; an axis a value does not have is refused."""
    x = np.linspace(0.5, 2.0, int(np.prod(shape))).reshape(shape)
    axes = kw.get("axis", ())
    if any(a >= len(shape) or a < -len(shape) for a in np.atleast_1d(axes)):
        with pytest.raises(np.exceptions.AxisError):
            ad.prod(x, **kw)
        return
    np.testing.assert_allclose(_np(ad.prod(x, **kw)), np.asarray(jnp.prod(x, **kw)))
    g = ad.grad(lambda v: ad.sum(ad.prod(v, **kw)))(x)
    gj = jax.grad(lambda v: jnp.sum(jnp.prod(v, **kw)))(x)
    assert _np(g).shape == gj.shape
    np.testing.assert_allclose(_np(g), np.asarray(gj))
    jr = ad.jacrev(lambda v: ad.prod(v, **kw))(x)
    np.testing.assert_allclose(_np(jr), np.asarray(jax.jacrev(lambda v: jnp.prod(v, **kw))(x)))
    if len(shape) == 2 and kw in ({}, {"axis": 1}):  # (second derivatives: two cases)
        h = ad.hessian(lambda v: ad.sum(ad.prod(v, **kw)))(x)
        hj = jax.hessian(lambda v: jnp.sum(jnp.prod(v, **kw)))(x)
        np.testing.assert_allclose(_np(h), np.asarray(hj), atol=1e-12)


def _hermitian_from(m: Any, a: Any, lower: bool) -> Any:
    """JAX's twin of the matrix LAPACK reads from one triangle (strict triangle, its
    conjugate transpose, the diagonal's real part)."""
    s = m.tril(a, -1) if lower else m.triu(a, 1)
    return s + m.conj(m.swapaxes(s, -1, -2)) + m.diag(m.real(m.diagonal(a)))


@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("which", ["eigvalsh", "eigh"])
def test_eigh_with_uplo_on_a_complex_matrix_matches_finite_differences_and_jax(
    uplo: str, which: str
) -> None:
    """symmetrize_input=False reads the UPLO triangle of a complex (not Hermitian) matrix;
    the gradient matches central differences of tenferro's own forward in real and
    imaginary directions, and JAX on the Hermitian matrix that triangle stands for."""
    rng = np.random.default_rng(13)
    n = 6
    a = rng.normal(size=(n, n)) + 1j * rng.normal(size=(n, n))
    w = rng.normal(size=n)

    def loss(m: Any, lin: Any, x: Any) -> Any:
        if which == "eigvalsh":
            return m.sum(lin.eigvalsh(x, uplo, symmetrize_input=False) ** 2 * w)
        vals, vecs = lin.eigh(x, uplo, symmetrize_input=False)
        return m.sum(m.abs(vecs) ** 4 * w) + m.sum(vals * w)

    f = lambda x: loss(ad, ad.linalg, x)  # noqa: E731
    g = _np(ad.grad(f)(a))
    eps = 1e-6
    for d in (rng.normal(size=(n, n)) + 0j, 1j * rng.normal(size=(n, n))):
        num = (float(_np(f(a + eps * d))) - float(_np(f(a - eps * d)))) / (2 * eps)
        assert np.real(np.sum(g * d)) == pytest.approx(num, rel=1e-6, abs=1e-7)
    fj = lambda x: loss(jnp, jnp.linalg, _hermitian_from(jnp, x, uplo == "L"))  # noqa: E731
    np.testing.assert_allclose(g, np.asarray(jax.grad(fj)(a)), rtol=1e-8, atol=1e-9)


def test_swapaxes_takes_numpys_keyword_names() -> None:
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(_np(ad.swapaxes(x, axis1=0, axis2=1)), x.T)
    np.testing.assert_array_equal(_np(ad.swapaxes(x, 1, axis2=0)), x.T)
