"""The linear-algebra JVP/VJP formulas (numpy backend) against ``jax.jvp`` / ``jax.vjp``.

Each formula in ``tenferro_ad.ops._linalg_math`` is checked on batched, well-conditioned
random inputs in float64 and complex128.  Decompositions with a gauge freedom (eigh,
svd, qr) are evaluated at JAX's own factors so tangents and cotangents line up.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.scipy.linalg import solve_triangular

from tenferro_ad.ops import _linalg_math as L

jax.config.update("jax_enable_x64", True)
B = L.NUMPY
Arr = np.ndarray[Any, Any]


def _rand(rng: np.random.Generator, shape: tuple[int, ...], cplx: bool) -> Arr:
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if cplx else x


def _herm(x: Arr) -> Arr:
    return (x + np.conj(np.swapaxes(x, -1, -2))) / 2


def _close(a: Any, b: Any) -> None:
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-8, atol=1e-9)


seeds = st.integers(0, 2**31 - 1)
cplx_flags = st.booleans()
settings_ = settings(max_examples=6, deadline=None)


@settings_
@given(seeds, cplx_flags)
def test_solve_inv_det_slogdet(seed: int, cplx: bool) -> None:
    rng = np.random.default_rng(seed)
    a = _rand(rng, (2, 3, 3), cplx) + 4 * np.eye(3)
    b, da, db = _rand(rng, (2, 3, 2), cplx), _rand(rng, a.shape, cplx), _rand(rng, (2, 3, 2), cplx)
    ct, cta, ctd = _rand(rng, b.shape, cplx), _rand(rng, a.shape, cplx), _rand(rng, (2,), cplx)
    x = np.linalg.solve(a, b)
    _close(L.solve_jvp(B, a, x, da, db), jax.jvp(jnp.linalg.solve, (a, b), (da, db))[1])
    for g, w in zip(L.solve_vjp(B, a, x, ct), jax.vjp(jnp.linalg.solve, a, b)[1](ct), strict=True):
        _close(g, w)
    xi = np.linalg.inv(a)
    _close(L.inv_jvp(B, xi, da), jax.jvp(jnp.linalg.inv, (a,), (da,))[1])
    _close(L.inv_vjp(B, xi, cta), jax.vjp(jnp.linalg.inv, a)[1](cta)[0])
    d = np.linalg.det(a)
    _close(L.det_jvp(B, a, d, da), jax.jvp(jnp.linalg.det, (a,), (da,))[1])
    _close(L.det_vjp(B, a, d, ctd), jax.vjp(jnp.linalg.det, a)[1](ctd)[0])

    def sld(m: Any) -> Any:
        return tuple(jnp.linalg.slogdet(m))

    sign, _ = np.linalg.slogdet(a)
    js, jl = jax.jvp(sld, (a,), (da,))[1]
    ds, dl = L.slogdet_jvp(B, a, sign, da)
    _close(dl, jl)
    if cplx:
        _close(ds, js)
    cts = _rand(rng, (2,), cplx) if cplx else np.zeros(2)
    ctl = rng.standard_normal(2)
    _close(L.slogdet_vjp(B, a, sign, cts if cplx else None, ctl), jax.vjp(sld, a)[1]((cts, ctl))[0])


@settings_
@given(seeds, cplx_flags, st.booleans(), st.sampled_from([0, 1, 2]), st.booleans())
def test_triangular_solve(seed: int, cplx: bool, lower: bool, trans: int, unit: bool) -> None:
    rng = np.random.default_rng(seed)
    a = _rand(rng, (2, 3, 3), cplx) + 4 * np.eye(3)
    b, da, db = _rand(rng, (2, 3, 2), cplx), _rand(rng, a.shape, cplx), _rand(rng, (2, 3, 2), cplx)
    ct = _rand(rng, b.shape, cplx)

    def f(a: Any, b: Any) -> Any:
        return solve_triangular(a, b, lower=lower, trans=trans, unit_diagonal=unit)

    x = B.triangular_solve(a, b, lower=lower, trans=trans, unit=unit)
    _close(x, f(a, b))
    kw = {"lower": lower, "trans": trans, "unit": unit}
    _close(L.triangular_solve_jvp(B, a, x, da, db, **kw), jax.jvp(f, (a, b), (da, db))[1])
    for g, w in zip(
        L.triangular_solve_vjp(B, a, x, ct, **kw), jax.vjp(f, a, b)[1](ct), strict=True
    ):
        _close(g, w)


@settings_
@given(seeds, cplx_flags)
def test_cholesky(seed: int, cplx: bool) -> None:
    rng = np.random.default_rng(seed)
    m = _rand(rng, (2, 3, 3), cplx)
    spd = m @ np.conj(np.swapaxes(m, -1, -2)) + 3 * np.eye(3)
    dh, ct = _herm(_rand(rng, spd.shape, cplx)), _rand(rng, spd.shape, cplx)
    lo = np.linalg.cholesky(spd)
    _close(L.cholesky_jvp(B, lo, dh), jax.jvp(jnp.linalg.cholesky, (spd,), (dh,))[1])
    _close(_herm(L.cholesky_vjp(B, lo, ct)), jax.vjp(jnp.linalg.cholesky, spd)[1](ct)[0])


@settings_
@given(seeds, cplx_flags, st.sampled_from([(2, 4, 3), (2, 3, 3), (2, 3, 5)]))
def test_qr(seed: int, cplx: bool, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(seed)
    x, dx = _rand(rng, shape, cplx), _rand(rng, shape, cplx)

    def f(m: Any) -> Any:
        return tuple(jnp.linalg.qr(m))

    q, r = (np.asarray(t) for t in f(x))
    nq, _ = np.linalg.qr(x)
    _close(np.abs(nq), np.abs(q))  # numpy and JAX agree up to column phases
    tq, tr = jax.jvp(f, (x,), (dx,))[1]
    dq, dr = L.qr_jvp(B, x, q, r, dx)
    _close(dq, tq)
    _close(dr, tr)
    cq, cr = _rand(rng, q.shape, cplx), _rand(rng, r.shape, cplx)
    _close(L.qr_vjp(B, x, q, r, cq, cr), jax.vjp(f, x)[1]((cq, cr))[0])


@settings_
@given(seeds, cplx_flags)
def test_eigh(seed: int, cplx: bool) -> None:
    rng = np.random.default_rng(seed)
    h = _herm(_rand(rng, (2, 4, 4), cplx))

    def f(m: Any) -> Any:
        return tuple(jnp.linalg.eigh(m))

    w, v = (np.asarray(t) for t in f(h))
    _close(w, np.linalg.eigh(h)[0])
    dh = _herm(_rand(rng, h.shape, cplx))
    tw, tv = jax.jvp(f, (h,), (dh,))[1]
    dw, dv = L.eigh_jvp(B, w, v, dh)
    _close(dw, tw)
    _close(dv, tv)
    cw, cv = rng.standard_normal(w.shape), _rand(rng, v.shape, cplx)
    _close(_herm(L.eigh_vjp(B, w, v, cw, cv)), jax.vjp(f, h)[1]((cw, cv))[0])
    _close(_herm(L.eigh_vjp(B, w, v, cw, None)), jax.vjp(f, h)[1]((cw, 0 * cv))[0])


@settings_
@given(seeds, cplx_flags, st.sampled_from([(2, 4, 3), (2, 3, 3), (2, 3, 5)]))
def test_svd(seed: int, cplx: bool, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(seed)
    a, da = _rand(rng, shape, cplx), _rand(rng, shape, cplx)

    def f(m: Any) -> Any:
        return tuple(jnp.linalg.svd(m, full_matrices=False))

    u, s, vh = (np.asarray(t) for t in f(a))
    _close(s, np.linalg.svd(a, compute_uv=False))
    tu, ts, tvh = jax.jvp(f, (a,), (da,))[1]
    du, ds, dvh = L.svd_jvp(B, a, u, s, vh, da)
    _close(du, tu)
    _close(ds, ts)
    _close(dvh, tvh)
    cu, cs, cvh = (
        _rand(rng, u.shape, cplx),
        rng.standard_normal(s.shape),
        _rand(rng, vh.shape, cplx),
    )
    vjp = jax.vjp(f, a)[1]
    _close(L.svd_vjp(B, a, u, s, vh, cu, cs, cvh), vjp((cu, cs, cvh))[0])
    _close(L.svd_vjp(B, a, u, s, vh, None, cs, None), vjp((0 * cu, cs, 0 * cvh))[0])


def test_degenerate_eigenvalues_give_nonfinite_vector_derivatives_like_jax() -> None:
    """Repeated eigenvalues: eigenvalue-only cotangents stay finite; vector ones are inf/nan."""
    h = np.diag([1.0, 1.0, 2.0])
    w, v = np.linalg.eigh(h)
    cw, cv = np.ones(3), np.ones((3, 3))
    np.testing.assert_allclose(L.eigh_vjp(B, w, v, cw, None), np.eye(3))
    with np.errstate(divide="ignore", invalid="ignore"):
        assert not np.all(np.isfinite(L.eigh_vjp(B, w, v, cw, cv)))
        jg = jax.vjp(lambda m: tuple(jnp.linalg.eigh(m)), h)[1]((cw, cv))[0]
    assert not np.all(np.isfinite(np.asarray(jg)))


@pytest.mark.parametrize("cplx", [False, True])
def test_degenerate_singular_values_give_nonfinite_vector_derivatives_like_jax(cplx: bool) -> None:
    a = np.eye(3, dtype=np.complex128 if cplx else np.float64)
    u, s, vh = np.linalg.svd(a)
    cs = np.ones(3)
    np.testing.assert_allclose(L.svd_vjp(B, a, u, s, vh, None, cs, None), np.eye(3), atol=1e-14)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = L.svd_vjp(B, a, u, s, vh, np.ones((3, 3)), cs, None)
    assert not np.all(np.isfinite(g))
