"""The numpy-level kernels under ``tenferro_ad.linalg``: the BLAS triangular solve (every
layout, op, dtype and batch form), the LAPACK Cholesky, and the SVD adjugate."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from tenferro_ad.ops import _linalg_math as L

DTYPES = [np.float64, np.float32, np.complex128, np.complex64]


def _rand(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> Any:
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _op(t: Any, trans: int) -> Any:
    return t if trans == 0 else np.swapaxes(t, -1, -2) if trans == 1 else np.conj(
        np.swapaxes(t, -1, -2)
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_triangular_solve_reads_one_triangle_in_every_layout_op_and_diagonal_mode(
    dtype: Any,
) -> None:
    rng = np.random.default_rng(0)
    base = _rand(rng, (5, 5), dtype) + 5 * np.eye(5, dtype=dtype)
    rhs = _rand(rng, (5, 3), dtype)
    tol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-12
    for a, b in itertools.product(
        (base, np.asfortranarray(base), base[:, ::-1][:, ::-1]), (rhs, np.asfortranarray(rhs))
    ):
        for lower, trans, unit in itertools.product((True, False), (0, 1, 2), (False, True)):
            t = (np.tril(a) if lower else np.triu(a)).copy()
            if unit:
                t[np.arange(5), np.arange(5)] = 1
            x = L._np_tri_solve(a, b, lower, trans, unit)
            assert x.dtype == np.dtype(dtype)
            np.testing.assert_allclose(_op(t, trans) @ x, b, rtol=tol, atol=tol)


def test_triangular_solve_batches_broadcast_and_fold_a_shared_matrix_into_columns() -> None:
    rng = np.random.default_rng(1)
    a = np.tril(rng.standard_normal((3, 3))) + 3 * np.eye(3)
    b = rng.standard_normal((2, 4, 3, 2))
    np.testing.assert_allclose(L._np_tri_solve(a, b, True, 0, False), np.linalg.solve(a, b))
    ab = a + np.tril(0.1 * rng.standard_normal((4, 3, 3)))
    np.testing.assert_allclose(L._np_tri_solve(ab, b, True, 1, False),
                               np.linalg.solve(np.swapaxes(ab, -1, -2), b))
    assert L._np_tri_solve(ab, b[:0], True, 0, False).shape == (0, 4, 3, 2)


def test_triangular_solve_with_a_zero_diagonal_raises_and_a_unit_diagonal_ignores_it() -> None:
    a = np.array([[1.0, 0.0], [2.0, 0.0]])
    with pytest.raises(np.linalg.LinAlgError, match="zero diagonal entry 2"):
        L._np_tri_solve(a, np.ones((2, 1)), True, 0, False)
    x = L._np_tri_solve(a, np.ones((2, 1)), True, 0, True)
    np.testing.assert_allclose(x, [[1.0], [-1.0]])


@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_kernel_matches_numpy_and_zeroes_the_upper_triangle(dtype: Any) -> None:
    rng = np.random.default_rng(2)
    m = _rand(rng, (2, 4, 4), dtype)
    h = m @ np.conj(np.swapaxes(m, -1, -2)) + 4 * np.eye(4, dtype=dtype)
    lo = L.np_cholesky(h)
    assert lo.dtype == np.dtype(dtype)
    tol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(lo, np.linalg.cholesky(h), rtol=tol, atol=tol)
    assert not np.any(np.triu(lo, 1))
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        L.np_cholesky(-np.eye(3))


def _cofactor_adjugate(a: Any) -> Any:
    n = a.shape[-1]
    adj = np.zeros_like(a)
    for i, j in itertools.product(range(n), range(n)):
        minor = np.delete(np.delete(a, i, axis=0), j, axis=1)
        adj[j, i] = (-1) ** (i + j) * np.linalg.det(minor)
    return adj


@pytest.mark.parametrize("rank", [4, 3, 2, 0])
def test_svd_adjugate_equals_the_cofactor_definition_at_every_rank(rank: int) -> None:
    rng = np.random.default_rng(3 + rank)
    a = rng.standard_normal((4, rank)) @ rng.standard_normal((rank, 4))
    want = _cofactor_adjugate(a)
    np.testing.assert_allclose(L.np_adjugate(a), want, rtol=1e-9, atol=1e-10)
    if rank == 3:
        assert np.abs(want).max() > 1e-3  # rank n-1: a nonzero adjugate (the test can fail)
    c = a + 1j * rng.standard_normal((4, 4)) * (rank == 4)
    np.testing.assert_allclose(L.np_adjugate(c), _cofactor_adjugate(c), rtol=1e-9, atol=1e-10)
