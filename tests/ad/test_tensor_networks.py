"""Composite tensor-network programs against ``jax.grad``: the norm of a complex matrix
product state, a truncated-SVD (canonicalization) loss, a ground-state energy through
``eigh``, and a Hessian-vector product through an MPS contraction."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import tenferro_ad as ad
from tenferro_ad import linalg as la
from tests.ad._oracle import close, rand

L, D, P = 4, 3, 2  # sites, bond dimension, physical dimension


def _mps(rng: np.random.Generator, cplx: bool) -> list[Any]:
    shapes = [(1, P, D)] + [(D, P, D)] * (L - 2) + [(D, P, 1)]
    return [rand(rng, s, cplx) for s in shapes]


def _norm(ts: list[Any], einsum: Any, conj: Any) -> Any:
    env = einsum("apb,cpd->bd", ts[0], conj(ts[0]))
    for t in ts[1:]:
        env = einsum("ac,apb,cpd->bd", env, t, conj(t))
    return env


def test_complex_mps_norm_gradient_matches_jax() -> None:
    rng = np.random.default_rng(0)
    ts = _mps(rng, True)

    def f(*ts: Any) -> Any:
        return ad.real(_norm(list(ts), ad.einsum, ad.conj)).sum()

    def jf(*ts: Any) -> Any:
        return jnp.real(_norm(list(ts), jnp.einsum, jnp.conj)).sum()

    argnums = tuple(range(L))
    for g, w in zip(
        ad.grad(f, argnums=argnums)(*ts), jax.grad(jf, argnums=argnums)(*ts), strict=True
    ):
        close(g, w)


def test_mps_norm_hessian_vector_product_matches_jax() -> None:
    rng = np.random.default_rng(1)
    ts = _mps(rng, False)
    v = rng.standard_normal(ts[1].shape)

    def f(t1: Any) -> Any:
        return _norm([ts[0], t1, *ts[2:]], ad.einsum, ad.conj).sum()

    def jf(t1: Any) -> Any:
        return _norm([ts[0], t1, *ts[2:]], jnp.einsum, jnp.conj).sum()

    hv = ad.grad(lambda t: (ad.grad(f)(t) * v).sum())(ts[1])
    close(hv, jax.grad(lambda t: (jax.grad(jf)(t) * v).sum())(ts[1]))


def test_svd_truncation_loss_matches_jax() -> None:
    """Split a two-site tensor by SVD, keep 2 singular values, measure the kept weight."""
    rng = np.random.default_rng(2)
    theta = rand(rng, (2, 2, 2, 2), True)

    def f(theta: Any) -> Any:
        m = ad.reshape(theta, (4, 4))
        u, s, vh = la.svd(m)
        s2 = s[:2] / ad.sqrt((s * s).sum())
        approx = ad.einsum("ik,k,kj->ij", u[:, :2], s2, vh[:2, :])
        return ad.real(ad.einsum("ij,ij->", approx, ad.conj(m))) + (s2**4).sum()

    def jf(theta: Any) -> Any:
        m = jnp.reshape(theta, (4, 4))
        u, s, vh = jnp.linalg.svd(m, full_matrices=False)
        s2 = s[:2] / jnp.sqrt((s * s).sum())
        approx = jnp.einsum("ik,k,kj->ij", u[:, :2], s2, vh[:2, :])
        return jnp.real(jnp.einsum("ij,ij->", approx, jnp.conj(m))) + (s2**4).sum()

    close(ad.grad(f)(theta), jax.grad(jf)(theta))


def test_eigh_ground_state_energy_of_a_parametrized_hamiltonian_matches_jax() -> None:
    """E0(h) of a 3-site transverse-field Ising chain; gradient and JVP w.r.t. couplings."""
    sx = np.array([[0.0, 1.0], [1.0, 0.0]])
    sz = np.diag([1.0, -1.0])
    eye = np.eye(2)

    def kron3(a: Any, b: Any, c: Any) -> Any:
        return np.kron(np.kron(a, b), c)

    zz = kron3(sz, sz, eye) + kron3(eye, sz, sz)
    xs = kron3(sx, eye, eye) + kron3(eye, sx, eye) + kron3(eye, eye, sx)
    ops_ = np.stack([zz, xs])
    params = np.array([-1.0, -0.7])

    def f(p: Any) -> Any:
        h = ad.einsum("k,kij->ij", p, ops_)
        w, v = la.eigh(h)
        return w[0] + (v[:, 0] ** 2 * np.arange(8.0)).sum()

    def jf(p: Any) -> Any:
        h = jnp.einsum("k,kij->ij", p, ops_)
        w, v = jnp.linalg.eigh(h)
        return w[0] + (v[:, 0] ** 2 * jnp.arange(8.0)).sum()

    close(ad.grad(f)(params), jax.grad(jf)(params))
    t = np.array([0.3, -0.2])
    close(ad.jvp(f, (params,), (t,))[1], jax.jvp(jf, (params,), (t,))[1])
