"""``tenferro_ad.linalg`` through the eager AD machinery vs JAX: values, VJPs (via gauge-
invariant losses), JVPs, Hessian-vector products, degenerate inputs, errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.scipy.linalg import solve_triangular as jsolve_triangular

import tenferro_ad as ad
from tenferro_ad import linalg as la
from tests.ad._oracle import close, rand, to_np

Fn = Callable[..., Any]


def _sq(rng: np.random.Generator, cplx: bool) -> Any:
    return rand(rng, (2, 3, 3), cplx) + 3 * np.eye(3)


def _rect(rng: np.random.Generator, cplx: bool, shape: tuple[int, ...]) -> Any:
    return rand(rng, shape, cplx)


def _absq(x: Any, xp: Any) -> Any:
    return xp.real(x * xp.conj(x))


# (name, input maker, our loss, JAX loss): every loss is real and gauge invariant.
def _cases(w: Any) -> list[tuple[str, Fn, Fn]]:
    return [
        (
            "solve",
            lambda a: (_absq(la.solve(a, a[..., :2]), ad) * w[..., :2]).sum(),
            lambda a: (_absq(jnp.linalg.solve(a, a[..., :2]), jnp) * w[..., :2]).sum(),
        ),
        (
            "inv",
            lambda a: (_absq(la.inv(a), ad) * w).sum(),
            lambda a: (_absq(jnp.linalg.inv(a), jnp) * w).sum(),
        ),
        (
            "det",
            lambda a: _absq(la.det(a), ad).sum(),
            lambda a: _absq(jnp.linalg.det(a), jnp).sum(),
        ),
        (
            "slogdet",
            lambda a: (la.slogdet(a)[1] + _absq(la.slogdet(a)[0] - 0.3, ad)).sum(),
            lambda a: (jnp.linalg.slogdet(a)[1] + _absq(jnp.linalg.slogdet(a)[0] - 0.3, jnp)).sum(),
        ),
        (
            "solve_triangular",
            lambda a: (
                _absq(la.solve_triangular(a, a[..., :2], lower=True, trans=2), ad) * w[..., :2]
            ).sum(),
            lambda a: (
                _absq(jsolve_triangular(a, a[..., :2], lower=True, trans=2), jnp) * w[..., :2]
            ).sum(),
        ),
        (
            "tril_triu_trace_diagonal",
            lambda a: (
                (_absq(la.tril(a, -1) + la.triu(a, 1), ad) * w).sum()
                + _absq(la.trace(a, axis1=-2, axis2=-1), ad).sum()
                + _absq(la.diagonal(a, 1, -2, -1), ad).sum()
            ),
            lambda a: (
                (_absq(jnp.tril(a, -1) + jnp.triu(a, 1), jnp) * w).sum()
                + _absq(jnp.trace(a, axis1=-2, axis2=-1), jnp).sum()
                + _absq(jnp.diagonal(a, 1, -2, -1), jnp).sum()
            ),
        ),
        (
            "cholesky",
            lambda a: (_absq(la.cholesky(a @ ad.conj(ad.swapaxes(a, -1, -2))), ad) * w).sum(),
            lambda a: (
                _absq(jnp.linalg.cholesky(a @ jnp.conj(jnp.swapaxes(a, -1, -2))), jnp) * w
            ).sum(),
        ),
        (
            "qr",
            lambda a: (_absq(la.qr(a)[1], ad) * w).sum() + (_absq(la.qr(a)[0], ad) * w).sum(),
            lambda a: (
                (_absq(jnp.linalg.qr(a)[1], jnp) * w).sum()
                + (_absq(jnp.linalg.qr(a)[0], jnp) * w).sum()
            ),
        ),
        (
            "eigh",
            lambda a: (la.eigh(a)[0] ** 2).sum() + (_absq(la.eigh(a)[1], ad) * w).sum(),
            lambda a: (
                (jnp.linalg.eigh(a)[0] ** 2).sum() + (_absq(jnp.linalg.eigh(a)[1], jnp) * w).sum()
            ),
        ),
        (
            "svd",
            lambda a: (
                (la.svd(a)[1] ** 3).sum()
                + (_absq(la.svd(a)[0], ad) * w).sum()
                + (_absq(la.svd(a)[2], ad) * w).sum()
            ),
            lambda a: (
                (jnp.linalg.svd(a, full_matrices=False)[1] ** 3).sum()
                + (_absq(jnp.linalg.svd(a, full_matrices=False)[0], jnp) * w).sum()
                + (_absq(jnp.linalg.svd(a, full_matrices=False)[2], jnp) * w).sum()
            ),
        ),
    ]


NAMES = [c[0] for c in _cases(np.ones((2, 3, 3)))]


@settings(max_examples=2, deadline=None)
@given(st.integers(0, 2**31 - 1))
@pytest.mark.parametrize("cplx", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_gradient_and_jvp_of_gauge_invariant_losses_match_jax(
    name: str, cplx: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((2, 3, 3))
    _, f, jf = next(c for c in _cases(w) if c[0] == name)
    a = _sq(rng, cplx)
    if name == "eigh":
        a = a + np.conj(np.swapaxes(a, -1, -2))
    close(f(ad.stop_gradient(a)), jf(a))
    close(ad.grad(f)(a), jax.grad(jf)(a), rtol=1e-7, atol=1e-8)
    t = rand(rng, a.shape, cplx)
    _, got = ad.jvp(f, (a,), (t,))
    close(got, jax.jvp(jf, (a,), (t,))[1], rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("shape", [(2, 4, 3), (2, 3, 5)])
@pytest.mark.parametrize("cplx", [False, True])
def test_rectangular_qr_and_svd_match_jax(shape: tuple[int, ...], cplx: bool) -> None:
    rng = np.random.default_rng(7)
    a = _rect(rng, cplx, shape)
    wq = rng.standard_normal(shape)
    k = min(shape[-2:])

    def f(a: Any) -> Any:
        _, r = la.qr(a)
        u, s, vh = la.svd(a)
        return (
            (_absq(r, ad) * wq[..., :k, :]).sum()
            + (s**2).sum()
            + (_absq(u, ad) * wq[..., :, :k]).sum()
            + (_absq(vh, ad) * wq[..., :k, :]).sum()
        )

    def jf(a: Any) -> Any:
        _, r = jnp.linalg.qr(a)
        u, s, vh = jnp.linalg.svd(a, full_matrices=False)
        return (
            (_absq(r, jnp) * wq[..., :k, :]).sum()
            + (s**2).sum()
            + (_absq(u, jnp) * wq[..., :, :k]).sum()
            + (_absq(vh, jnp) * wq[..., :k, :]).sum()
        )

    close(ad.grad(f)(a), jax.grad(jf)(a), rtol=1e-7, atol=1e-8)
    u, s, vh = la.svd(a)
    close(to_np(u) * to_np(s)[..., None, :] @ to_np(vh), a, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("cplx", [False, True])
def test_logdet_with_a_linear_solve_hessian_vector_product_matches_jax(cplx: bool) -> None:
    """Composite: log|det A| + <b, A^-1 b>, its gradient and an HVP through both."""
    rng = np.random.default_rng(8)
    a = _sq(rng, cplx)
    b = rand(rng, (2, 3, 1), cplx)
    v = rand(rng, a.shape, cplx)

    def f(a: Any) -> Any:
        x = la.solve(a, b)
        return la.slogdet(a)[1].sum() + ad.real(ad.conj(b) * x).sum()

    def jf(a: Any) -> Any:
        x = jnp.linalg.solve(a, b)
        return jnp.linalg.slogdet(a)[1].sum() + jnp.real(jnp.conj(b) * x).sum()

    close(ad.grad(f)(a), jax.grad(jf)(a))
    hv = ad.grad(lambda a: ad.real(ad.grad(f)(a) * v).sum())(a)
    close(hv, jax.grad(lambda a: jnp.real(jax.grad(jf)(a) * v).sum())(a), rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("which", ["eigh", "svd", "cholesky", "qr"])
def test_hessian_vector_products_through_factorizations_match_jax(which: str) -> None:
    rng = np.random.default_rng(9)
    a = rand(rng, (3, 3), False)
    a = a @ a.T + 3 * np.eye(3)
    v = rand(rng, (3, 3), False)
    w = rng.standard_normal((3, 3))
    fs: dict[str, tuple[Fn, Fn]] = {
        "eigh": (
            lambda a: (la.eigh(a)[0] ** 3).sum() + ((la.eigh(a)[1] ** 2) * w).sum(),
            lambda a: (jnp.linalg.eigh(a)[0] ** 3).sum() + ((jnp.linalg.eigh(a)[1] ** 2) * w).sum(),
        ),
        "svd": (
            lambda a: (la.svd(a)[1] ** 3).sum() + ((la.svd(a)[0] ** 2) * w).sum(),
            lambda a: (jnp.linalg.svd(a)[1] ** 3).sum() + ((jnp.linalg.svd(a)[0] ** 2) * w).sum(),
        ),
        "cholesky": (
            lambda a: (la.cholesky(a) ** 3 * w).sum(),
            lambda a: (jnp.linalg.cholesky(a) ** 3 * w).sum(),
        ),
        "qr": (
            lambda a: (la.qr(a)[1] ** 3 * w).sum() + (la.qr(a)[0] ** 2 * w).sum(),
            lambda a: (jnp.linalg.qr(a)[1] ** 3 * w).sum() + (jnp.linalg.qr(a)[0] ** 2 * w).sum(),
        ),
    }
    f, jf = fs[which]
    hv = ad.grad(lambda a: (ad.grad(f)(a) * v).sum())(a)
    close(hv, jax.grad(lambda a: (jax.grad(jf)(a) * v).sum())(a), rtol=1e-6, atol=1e-7)


def test_gradients_match_finite_differences() -> None:
    rng = np.random.default_rng(10)
    a = rand(rng, (3, 3), False) + 3 * np.eye(3)
    w = rng.standard_normal((3, 3))

    def f_np(a: Any) -> float:
        s = np.linalg.svd(a, compute_uv=False)
        return float(np.sum(s**2) + np.linalg.slogdet(a)[1] + np.sum(np.linalg.inv(a) * w))

    g = to_np(
        ad.grad(lambda a: (la.svd(a)[1] ** 2).sum() + la.slogdet(a)[1] + (la.inv(a) * w).sum())(a)
    )
    eps = 1e-6
    for idx in np.ndindex(a.shape):
        e = np.zeros_like(a)
        e[idx] = eps
        assert g[idx] == pytest.approx((f_np(a + e) - f_np(a - e)) / (2 * eps), rel=1e-5, abs=1e-7)


def test_degenerate_spectrum_value_losses_stay_finite_vector_losses_are_nonfinite_like_jax() -> (
    None
):
    a = np.diag([1.0, 1.0, 2.0])
    g = to_np(ad.grad(lambda a: (la.eigh(a)[0] ** 2).sum())(a))
    close(g, jax.grad(lambda a: (jnp.linalg.eigh(a)[0] ** 2).sum())(a))
    gs = to_np(ad.grad(lambda a: la.svd(a)[1].sum())(a))
    close(gs, jax.grad(lambda a: jnp.linalg.svd(a)[1].sum())(a))
    with np.errstate(divide="ignore", invalid="ignore"):
        gv = to_np(ad.grad(lambda a: (la.eigh(a)[1] ** 3).sum())(a))
        jv = np.asarray(jax.grad(lambda a: (jnp.linalg.eigh(a)[1] ** 3).sum())(a))
    assert not np.all(np.isfinite(gv))
    assert not np.all(np.isfinite(jv))


def test_errors_name_the_op() -> None:
    with pytest.raises(ValueError, match="solve: expected a"):
        la.solve(np.ones((2, 3)), np.ones(2))
    with pytest.raises(np.linalg.LinAlgError, match="inv: "):
        la.inv(np.zeros((2, 2)))
    with pytest.raises(np.linalg.LinAlgError, match="cholesky: "):
        la.cholesky(-np.eye(2))
    with pytest.raises(ValueError, match="trans must be"):
        la.solve_triangular(np.eye(2), np.ones(2), trans=3)


def test_solve_triangular_reads_the_upper_triangle_by_default() -> None:
    """Without ``lower=``, only the upper triangle is read (JAX's and scipy's default):
    garbage below the diagonal changes nothing.  Mutant: the default turned into True."""
    rng = np.random.default_rng(3)
    a = np.triu(rng.normal(size=(4, 4))) + 4.0 * np.eye(4)
    noisy = a + np.tril(rng.normal(size=(4, 4)), -1)
    b = rng.normal(size=(4, 2))
    got = to_np(la.solve_triangular(noisy, b))
    np.testing.assert_allclose(got, np.asarray(jsolve_triangular(noisy, b)), rtol=1e-12)
    np.testing.assert_allclose(a @ got, b, rtol=1e-10, atol=1e-12)


def test_solve_triangular_takes_a_batch_of_vectors() -> None:
    """``b`` of shape ``(batch, n)`` against ``a`` of ``(batch, n, n)`` (JAX's vector rule:
    ``b.ndim == a.ndim - 1``) solves each vector.  Mutant: the vector length compared
    with ``a``'s first axis (``sa[-0]``) instead of its last."""
    rng = np.random.default_rng(4)
    a = np.tril(rng.normal(size=(2, 3, 3))) + 3.0 * np.eye(3)
    b = rng.normal(size=(2, 3))
    got = to_np(la.solve_triangular(a, b, lower=True))
    want = np.linalg.solve(a, b[..., None])[..., 0]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(ad.errors.ArgumentError, match=r"solve_triangular: right-hand side"):
        la.solve_triangular(a, rng.normal(size=(2, 4)), lower=True)
