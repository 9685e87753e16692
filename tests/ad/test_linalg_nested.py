"""Second-order eager derivatives through the decompositions, against JAX.

Eager ``jvp`` inside another transform runs as the transpose of reverse mode: its reverse
sweep is seeded with a tracked *zero* cotangent and then differentiated with respect to
that seed.  A rule that prunes a cotangent block because its value is zero would drop the
dependence on the seed (a wrong, silent number), so these check ``grad`` of a nested
``jvp`` (reverse-over-forward, what ``custom_jvp``'s eager transpose runs) through every
decomposition against ``jax.grad`` of ``jax.jvp``; and a zero cotangent into a
decomposition (a real zero: nothing flows) gives a zero gradient.
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

Arr = np.ndarray[Any, Any]
_RNG = np.random.default_rng(7)
_A = _RNG.normal(size=(4, 4))
_WIDE = _RNG.normal(size=(3, 5))
_TALL = _RNG.normal(size=(5, 3))
_SYM = _A + _A.T + 6 * np.eye(4)
_HERM = _SYM + 1j * (_A - _A.T)


def _t(x: Arr) -> Arr:
    """A tangent of ``x``'s shape and dtype (Hermitian where ``x`` is)."""
    t = np.random.default_rng(x.size).normal(size=x.shape).astype(x.dtype)
    if np.iscomplexobj(x):
        t = t + 1j * np.random.default_rng(x.size + 1).normal(size=x.shape)
    return t if x is not _SYM and x is not _HERM else (t + np.conj(t.T)) / 2


# name -> (fn(namespace, x) -> a real or complex output, input)
CASES: dict[str, tuple[Callable[[Any, Any], Any], Arr]] = {
    "qr.q": (lambda m, x: m.linalg.qr(x)[0], _A),
    "qr.r": (lambda m, x: m.linalg.qr(x)[1], _A),
    "qr.q-wide": (lambda m, x: m.linalg.qr(x)[0], _WIDE),
    "qr.q-tall": (lambda m, x: m.linalg.qr(x)[0], _TALL),
    "eigh.w": (lambda m, x: m.linalg.eigh(x)[0], _SYM),
    "eigh.v": (lambda m, x: m.linalg.eigh(x)[1], _SYM),
    "eigh.w-complex": (lambda m, x: m.linalg.eigh(x)[0], _HERM),
    "eigvalsh": (lambda m, x: m.linalg.eigvalsh(x), _SYM),
    "svd.s": (lambda m, x: m.linalg.svd(x, full_matrices=False)[1], _TALL),
    "svd.u": (lambda m, x: m.linalg.svd(x, full_matrices=False)[0], _TALL),
    "svd.vh-wide": (lambda m, x: m.linalg.svd(x, full_matrices=False)[2], _WIDE),
    "norm-nuc": (lambda m, x: m.linalg.norm(x, "nuc"), _A),
}


def _loss(m: Any, f: Callable[[Any, Any], Any], t: Arr, w: Arr) -> Callable[[Any], Any]:
    """``x -> sum(Re(w * jvp(f, x; t)))``: reverse over forward."""

    def loss(x: Any) -> Any:
        tan = ts.from_numpy(t) if m is ad else t
        return m.sum(m.real(m.jvp(lambda a: f(m, a), (x,), (tan,))[1] * w))

    return loss


def _jax_loss(f: Callable[[Any, Any], Any], t: Arr, w: Arr) -> Callable[[Any], Any]:
    def loss(x: Any) -> Any:
        return jnp.sum(jnp.real(jax.jvp(lambda a: f(jnp, a), (x,), (t,))[1] * w))

    return loss


@pytest.mark.parametrize("name", list(CASES))
def test_grad_of_nested_jvp_through_a_decomposition_matches_jax(name: str) -> None:
    f, x = CASES[name]
    t = _t(x)
    w = np.random.default_rng(1).normal(size=np.shape(f(np, x)))
    got = ad.grad(_loss(ad, f, t, w))(ts.from_numpy(x)).to_numpy()
    want = np.asarray(jax.grad(_jax_loss(f, t, w))(x))
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)


def test_grad_of_nested_jvp_through_eigvals_matches_finite_differences() -> None:
    """eig has no second derivative in JAX (its eigenvector rule refuses); the reference
    is central differences of the first-order jvp (itself checked against JAX)."""
    x, t = _A + 3 * np.eye(4), _t(_A)
    w = np.random.default_rng(2).normal(size=(4,))

    def f(m: Any, a: Any) -> Any:
        return m.real(m.linalg.eigvals(a))

    got = ad.grad(_loss(ad, f, t, w))(ts.from_numpy(x)).to_numpy()

    def first(a: Arr) -> float:
        tan = ad.jvp(lambda b: f(ad, b), (ts.from_numpy(a),), (ts.from_numpy(t),))[1]
        return float(np.sum(tan.to_numpy() * w))

    eps = 1e-6
    fd = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        fd[idx] = (first(x + d) - first(x - d)) / (2 * eps)
    np.testing.assert_allclose(got, fd, rtol=1e-5, atol=1e-6)


ZERO_CASES: dict[str, tuple[Callable[[Any], Any], Arr]] = {
    "eigh": (lambda a: ad.linalg.eigh(a)[0], _SYM),
    "eigh-complex": (lambda a: ad.linalg.eigh(a)[0], _HERM),
    "svd": (lambda a: ad.linalg.svd(a, full_matrices=False)[1], _TALL),
    "qr": (lambda a: ad.linalg.qr(a)[0], _A),
    "eig": (lambda a: ad.real(ad.linalg.eigvals(a)), _A),
}


@pytest.mark.parametrize("name", list(ZERO_CASES))
def test_zero_cotangent_into_a_decomposition_gives_zero_gradient(name: str) -> None:
    f, x = ZERO_CASES[name]
    g = ad.grad(lambda a: ad.sum(ad.real(a)) + ad.sum(f(a) * 0.0))(ts.from_numpy(x)).to_numpy()
    assert g.dtype == x.dtype, name
    np.testing.assert_array_equal(g, np.ones_like(x))
