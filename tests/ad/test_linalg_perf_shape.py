"""The fast no-record backward forms of the linear-algebra rules compute exactly what the
general formulas compute (and what JAX computes): the ``?sygst`` Cholesky VJP, and the
triangular-solve VJP's negated outer product cut to one triangle in place.

These forms exist for speed (issue 13); these tests only prove the values, shapes, dtypes
and edge cases (empty, 1x1, non-finite entries, every layout), never time anything."""

from __future__ import annotations

import itertools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.linalg import solve_triangular as jsolve_triangular

import tenferro_ad as ad
from tenferro_ad import linalg as la
from tenferro_ad.ops import _linalg_math as L

jax.config.update("jax_enable_x64", True)
B = L.NUMPY


def _spd(rng: np.random.Generator, n: int, dtype: Any) -> Any:
    a = rng.standard_normal((n, n))
    return (a @ a.T + n * np.eye(n)).astype(dtype)


def _general_cholesky_vjp(lo: Any, ct: Any) -> Any:
    return L.herm_part(B, L.cholesky_vjp(B, lo, ct))


@pytest.mark.parametrize("n", [0, 1, 2, 5, 33])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sygst_cholesky_vjp_equals_the_general_formula(n: int, dtype: Any) -> None:
    rng = np.random.default_rng(n)
    lo = L.np_cholesky(_spd(rng, n, dtype))
    ct = rng.standard_normal((n, n)).astype(dtype)
    want = _general_cholesky_vjp(lo, ct)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    atol = tol * max(1.0, float(np.abs(want).max(initial=0)))
    for lo_v, ct_v in itertools.product(
        (lo, np.asfortranarray(lo)), (ct, np.asfortranarray(ct), ct.T.copy().T)
    ):
        got = L.np_cholesky_vjp_sym(lo_v, ct_v)
        assert got.shape == (n, n) and got.dtype == np.dtype(dtype)
        assert got.flags.c_contiguous
        np.testing.assert_array_equal(got, got.T)  # exactly symmetric (mirrored)
        np.testing.assert_allclose(got, want, rtol=tol, atol=atol)


def test_sygst_cholesky_vjp_reads_only_the_lower_triangles() -> None:
    rng = np.random.default_rng(3)
    lo = L.np_cholesky(_spd(rng, 6, np.float64))
    ct = rng.standard_normal((6, 6))
    want = L.np_cholesky_vjp_sym(lo, ct)
    junk = lo + np.triu(np.full((6, 6), np.nan), 1)  # the factor's upper triangle unread
    np.testing.assert_array_equal(L.np_cholesky_vjp_sym(junk, ct), want)


@pytest.mark.parametrize("n", [1, 4, 12])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cholesky_gradient_of_a_single_real_matrix_matches_jax(n: int, dtype: Any) -> None:
    rng = np.random.default_rng(10 + n)
    a = _spd(rng, n, dtype)
    w = rng.standard_normal((n, n)).astype(dtype)
    got = ad.grad(lambda m: (la.cholesky(m) ** 3 * w).sum())(a)
    want = jax.grad(lambda m: (jnp.linalg.cholesky(m) ** 3 * w).sum())(jnp.asarray(a))
    g = got.to_numpy()
    assert g.dtype == np.dtype(dtype)
    tol = 2e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(g, np.asarray(want), rtol=tol, atol=tol)


def _general_tri_vjp(a: Any, x: Any, ct: Any, lower: bool, trans: int, unit: bool) -> Any:
    cb = L.triangular_solve_vjp_b(B, a, ct, lower=lower, trans=trans, unit=unit)
    g = -np.matmul(cb, x.T)
    return L._tri_mask(B, g.T if trans == 1 else g, lower, unit)


@pytest.mark.parametrize(("n", "k"), [(0, 2), (1, 1), (4, 1), (5, 3), (3, 7)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_triangular_solve_vjp_cut_in_place_equals_the_masked_product(
    n: int, k: int, dtype: Any
) -> None:
    rng = np.random.default_rng(n * 10 + k)
    a = (rng.standard_normal((n, n)) + 3 * np.eye(n)).astype(dtype)
    x = rng.standard_normal((n, k)).astype(dtype)
    ct = rng.standard_normal((n, k)).astype(dtype)
    if n >= 3:
        x[0, 0] = np.inf  # products with inf land in both triangles: the cut one must be 0
    for lower, trans, unit in itertools.product((True, False), (0, 1), (False, True)):
        with np.errstate(invalid="ignore"):
            got, cb = L.triangular_solve_vjp(B, a, x, ct, lower=lower, trans=trans, unit=unit)
            want = _general_tri_vjp(a, x, ct, lower, trans, unit)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)  # bit for bit
        assert not np.shares_memory(got, cb)


def test_off_triangle_masks_are_cached_read_only_and_large_ones_built_fresh() -> None:
    m = L._off_triangle(4, True, False)
    assert m is L._off_triangle(4, True, False)
    assert not m.flags.writeable
    np.testing.assert_array_equal(m, ~np.tri(4, dtype=bool))
    np.testing.assert_array_equal(L._off_triangle(4, False, True), np.tri(4, dtype=bool))
    big = L._off_triangle(1025, True, True)
    assert big.flags.writeable and big is not L._off_triangle(1025, True, True)
    np.testing.assert_array_equal(big, ~np.tri(1025, k=-1, dtype=bool))


@pytest.mark.parametrize("trans", [0, 1])
def test_triangular_solve_gradients_of_single_matrices_match_jax(trans: int) -> None:
    rng = np.random.default_rng(20 + trans)
    a = np.tril(rng.standard_normal((6, 6))) + 4 * np.eye(6)
    b = rng.standard_normal((6, 2))
    w = rng.standard_normal((6, 2))

    def f(a: Any, b: Any) -> Any:
        return (la.solve_triangular(a, b, lower=True, trans=trans) ** 2 * w).sum()

    def jf(a: Any, b: Any) -> Any:
        return (jsolve_triangular(a, b, lower=True, trans=trans) ** 2 * w).sum()

    ga, gb = ad.grad(f, argnums=(0, 1))(a, b)
    ja, jb = jax.grad(jf, argnums=(0, 1))(jnp.asarray(a), jnp.asarray(b))
    np.testing.assert_allclose(ga.to_numpy(), np.asarray(ja), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gb.to_numpy(), np.asarray(jb), rtol=1e-10, atol=1e-12)


def test_kernel_outputs_own_their_memory_so_an_op_adopts_them_without_a_copy() -> None:
    import tenferro_storage as ts

    rng = np.random.default_rng(4)
    h = _spd(rng, 5, np.float64)
    lo = L.np_cholesky(h.copy(), True)  # factored in place: the handed-over buffer itself
    assert lo.base is None and lo.flags.c_contiguous
    np.testing.assert_array_equal(lo, L.np_cholesky(h))
    ts.kernel.adopt_output(lo)  # refuses views: raises if lo were one
    kept = h.copy()
    L.np_cholesky(kept)  # without overwrite the input is left alone
    np.testing.assert_array_equal(kept, h)
    b = rng.standard_normal((5, 3))
    before = b.copy()
    x = L._trsm(lo, b, True, 0, False)  # a C-ordered right-hand side: solved in its own copy
    np.testing.assert_array_equal(b, before)
    assert x.base is None and x.flags.c_contiguous
    np.testing.assert_allclose(lo @ x, b, rtol=1e-12, atol=1e-12)
    ts.kernel.adopt_output(x)


def test_a_triangular_solve_differentiated_in_both_arguments_solves_the_cotangent_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(30)
    a = np.tril(rng.standard_normal((5, 5))) + 4 * np.eye(5)
    b = rng.standard_normal((5, 3))
    w = rng.standard_normal((5, 3))
    f = ad.value_and_grad(
        lambda a, b: (la.solve_triangular(a, b, lower=True) * w).sum(), argnums=(0, 1)
    )
    _, (want_a, want_b) = f(a, b)
    calls: list[int] = []
    real = L._np_tri_solve

    def counting(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(L, "_np_tri_solve", counting)
    _, (ga, gb) = f(a, b)
    assert len(calls) == 2  # the forward solve and one backward solve (not two)
    np.testing.assert_array_equal(ga.to_numpy(), want_a.to_numpy())
    np.testing.assert_array_equal(gb.to_numpy(), want_b.to_numpy())
    calls.clear()
    ad.grad(lambda b: (la.solve_triangular(a, b, lower=True) * w).sum())(b)  # b only
    assert len(calls) == 2


@pytest.mark.parametrize("lower", [True, False])
def test_cho_solve_gradients_in_both_arguments_match_jax(lower: bool) -> None:
    rng = np.random.default_rng(31)
    m = rng.standard_normal((6, 6))
    a = m @ m.T + 6 * np.eye(6)
    b = rng.standard_normal((6, 4))
    w = rng.standard_normal((6, 4))

    def f(a: Any, b: Any) -> Any:
        return (la.cho_solve(la.cho_factor(a, lower=lower), b) ** 2 * w).sum()

    def jf(a: Any, b: Any) -> Any:
        c = jnp.linalg.cholesky(a)
        c = c if lower else c.T
        return (jax.scipy.linalg.cho_solve((c, lower), b) ** 2 * w).sum()

    ga, gb = ad.grad(f, argnums=(0, 1))(a, b)
    ja, jb = jax.grad(jf, argnums=(0, 1))(jnp.asarray(a), jnp.asarray(b))
    ja = (ja + ja.T) / 2  # tenferro's factorization symmetrizes its input (see cho_factor)
    np.testing.assert_allclose(ga.to_numpy(), np.asarray(ja), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(gb.to_numpy(), np.asarray(jb), rtol=1e-9, atol=1e-11)
