"""XLA lowerings of ``ops/dense_linalg.py``: structural maps, solves, factorizations and
matrix functions, packed the way the eager kernels pack their several results into one
array (the reverse rules unpack them the same way).

Differences from the eager kernels that a caller can see: a singular or indefinite input
gives NaN or inf entries (XLA's LAPACK wrappers report no error) where the eager kernel
raises ``LinAlgError``; eigenvectors and singular vectors are unique only up to sign
(phase), so the factors may differ by one -- functions invariant to it agree."""

from __future__ import annotations

from typing import Any

from ..._traced._lowering import deflower
from .. import dense_linalg as D


def _per_matrix(x: Any, fn: Any, signature: str) -> Any:
    """``fn`` over leading batch axes (the scipy-style kernels take single matrices)."""
    return x.np.vectorize(fn, signature=signature)


def _tril(x: Any, a: Any, *, k: int) -> Any:
    return x.np.tril(a, k)


def _triu(x: Any, a: Any, *, k: int) -> Any:
    return x.np.triu(a, k)


def _diagonal(x: Any, a: Any, *, offset: int, axis1: int, axis2: int, shape: Any) -> Any:
    return x.np.diagonal(a, offset, axis1, axis2)


def _diag_embed(
    x: Any, v: Any, *, offset: int, axis1: int, axis2: int, shape: tuple[int, ...]
) -> Any:
    """``v`` on diagonal ``offset`` of the ``(axis1, axis2)`` planes of a zero array of
    ``shape``: a one-hot contraction, then the two new axes moved into place."""
    nd = len(shape)
    a1, a2 = axis1 % nd, axis2 % nd
    d1, d2 = shape[a1], shape[a2]
    n = x.np.shape(v)[-1]
    k = x.np.arange(n)
    rows = x.np.arange(d1)[:, None, None]
    cols = x.np.arange(d2)[None, :, None]
    r0, c0 = (k, k + offset) if offset >= 0 else (k - offset, k)
    onehot = ((rows == r0) & (cols == c0)).astype(x.np.asarray(v).dtype)
    planes = x.np.einsum("...k,rck->...rc", v, onehot)
    return x.np.moveaxis(planes, (-2, -1), (a1, a2))


def _eye_like(x: Any, a: Any) -> Any:
    a = x.np.asarray(a)
    return x.np.eye(a.shape[-1], dtype=a.dtype)


def _solve(x: Any, a: Any, b: Any) -> Any:
    return x.np.linalg.solve(a, b)


def _trsolve(x: Any, a: Any, b: Any, *, lower: bool, trans: int, unit: bool) -> Any:
    def one(m: Any, r: Any) -> Any:
        return x.scipy.linalg.solve_triangular(m, r, trans=trans, lower=lower,
                                               unit_diagonal=unit)

    return _per_matrix(x, one, "(n,n),(n,k)->(n,k)")(a, b)


def _inv(x: Any, a: Any) -> Any:
    return x.np.linalg.inv(a)


def _det(x: Any, a: Any) -> Any:
    return x.np.linalg.det(a)


def _slogdet(x: Any, a: Any) -> Any:
    sign, logabs = x.np.linalg.slogdet(a)
    return x.np.stack([sign, logabs.astype(sign.dtype)], axis=-1)


def _cholesky(x: Any, a: Any) -> Any:
    h = (a + x.np.conj(x.np.swapaxes(a, -1, -2))) * 0.5
    return x.np.linalg.cholesky(h)


def _qr(x: Any, a: Any) -> Any:
    q, r = x.np.linalg.qr(a, mode="reduced")
    return x.np.concatenate([q, x.np.swapaxes(r, -1, -2)], axis=-2)


def _eigh(x: Any, a: Any) -> Any:
    w, v = x.np.linalg.eigh(a)
    return x.np.concatenate([w[..., None, :].astype(v.dtype), v], axis=-2)


def _svd(x: Any, a: Any) -> Any:
    u, s, vh = x.np.linalg.svd(a, full_matrices=False)
    return x.np.concatenate(
        [u, s[..., None, :].astype(u.dtype), x.np.swapaxes(vh, -1, -2)], axis=-2
    )


def _svd_full(x: Any, a: Any) -> Any:
    u, s, vh = x.np.linalg.svd(a, full_matrices=True)
    b = x.np.shape(a)[:-2]
    return x.np.concatenate(
        [x.np.reshape(u, (*b, -1)), s.astype(u.dtype), x.np.reshape(vh, (*b, -1))], axis=-1
    )


def _eig(x: Any, a: Any) -> Any:
    w, v = x.np.linalg.eig(a)
    return x.np.concatenate([w[..., None, :], v], axis=-2)


def _expm(x: Any, a: Any) -> Any:
    return _per_matrix(x, x.scipy.linalg.expm, "(n,n)->(n,n)")(a)


def _sylvester(x: Any, a: Any, b: Any, c: Any) -> Any:
    return _per_matrix(x, x.scipy.linalg.solve_sylvester, "(n,n),(m,m),(n,m)->(n,m)")(a, b, c)


def _sqrtm(x: Any, a: Any) -> Any:
    return _per_matrix(x, x.scipy.linalg.sqrtm, "(n,n)->(n,n)")(a)


def _pinv(x: Any, a: Any, *, rtol: float | None) -> Any:
    a = x.np.asarray(a)
    m, n = a.shape[-2], a.shape[-1]
    eps = x.np.finfo(x.np.result_type(a, x.np.float32)).eps
    r = 10.0 * max(m, n) * float(eps) if rtol is None else rtol
    return x.np.linalg.pinv(a, rtol=r)


deflower(D.TRIL, _tril)
deflower(D.TRIU, _triu)
def _eig_mask(x: Any, v: Any) -> Any:
    """``ops._linalg_math.eig_mask`` in JAX: one-hot (over rows) of each column's
    largest-magnitude entry."""
    v = x.np.asarray(v)
    k = x.np.argmax(x.np.abs(v), axis=-2)
    return (x.np.arange(v.shape[-2])[:, None] == k[..., None, :]).astype(v.dtype)


deflower(D.DIAGONAL, _diagonal)
deflower(D.DIAG_EMBED, _diag_embed)
deflower(D.EYE_LIKE, _eye_like)
deflower(D.SOLVE, _solve)
deflower(D.TRSOLVE, _trsolve)
deflower(D.INV, _inv)
deflower(D.DET, _det)
deflower(D.SLOGDET, _slogdet)
deflower(D.CHOLESKY, _cholesky)
deflower(D.QR, _qr)
deflower(D.EIGH, _eigh)
deflower(D.SVD, _svd)
deflower(D.SVD_FULL, _svd_full)
deflower(D.EIG, _eig)
deflower(D.EIG_MASK, _eig_mask)
deflower(D.EXPM, _expm)
deflower(D.SYLVESTER, _sylvester)
deflower(D.SQRTM, _sqrtm)
deflower(D.PINV, _pinv)
