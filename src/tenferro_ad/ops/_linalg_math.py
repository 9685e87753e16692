"""Linear-algebra derivative formulas, written once against a small array backend.

Every function here takes the backend ``B`` as its first argument: a namespace with
``matmul, mT, conj, real, tril, triu, diagonal, diag_embed, solve, triangular_solve,
inv, row, col, eye_like`` (and the arithmetic operators of its arrays).  :data:`NUMPY`
runs the formulas on raw numpy arrays (the eager backward when nothing records it, and
the numpy-level tests); ``tenferro_ad.ops.linalg`` passes a backend of differentiable
ops so that the same formulas give higher-order derivatives.

Conventions (JAX's): a VJP is the *transpose* of the JVP under the real bilinear pairing
``<a, b> = Re sum(a * b)`` -- no conjugation for complex-linear maps, and for a real loss
of complex input the cotangent is the conjugate of PyTorch's.  Each VJP below is the
hand-derived transpose of the JVP above it (the JVPs follow ``jax/_src/lax/linalg.py``
and ``jax/_src/numpy/linalg.py``), so both agree with ``jax.vjp``/``jax.jvp`` exactly,
including at the gauge choices (real positive diagonal of R in QR, real singular values,
eigenvector phases only through gauge-invariant losses).  ``None`` stands for a
symbolic zero tangent or cotangent.

References: M. Giles, "An extended collection of matrix derivative results for forward
and reverse mode AD" (2008) for solve/inv/det; I. Murray, "Differentiation of the
Cholesky decomposition" (2016) for cholesky; J. Townsend, "Differentiating the singular
value decomposition" (2016) and Seeger et al., "Auto-differentiating linear algebra"
(2017) for svd/eigh; J. Townsend's QR note (j-towns.github.io/papers/qr-derivative.pdf)
and Liao et al., "Differentiable programming tensor networks" (PRX 2019) for QR and the
complex gauge terms.

Degenerate inputs: repeated eigenvalues (eigh) or singular values (svd) make the
eigenvector / singular-vector derivatives undefined; like JAX, the coupling matrix ``F``
then holds ``inf`` and derivatives that depend on the vectors come out ``inf``/``nan``
(never finite and wrong).  Derivatives through eigenvalues / singular values alone
stay finite (their vector cotangents are symbolic zeros and the ``F`` term is skipped).
A zero singular value of a non-square matrix makes the U (m>n) or V (m<n) derivative
``inf``/``nan``, as in JAX.  ``det`` at an exactly singular matrix: its derivative is the
adjugate (as JAX's), computed from an SVD when the inverse does not exist
(:func:`np_adjugate`); only the second derivative there (under ``create_graph``) still
needs an invertible matrix.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import scipy.linalg as _sla

Array = Any


# --------------------------------------------------------------------------- numpy backend


def _blas_dtype(*xs: Array) -> Any:
    return np.result_type(*(x.dtype for x in xs), np.float32)


def _trsm(a: Array, b: Array, lower: bool, trans: int, unit: bool) -> Array:
    """One matrix: op(a) X = b through BLAS ``?trsm``, reading both operands in place.

    BLAS wants Fortran order.  A C-ordered array is the Fortran-ordered transpose, so a
    C-ordered ``b`` is solved from the right (``X^T op(a)^T = b^T``) and a Fortran-ordered
    one from the left; ``a`` is used as ``a`` or as ``a^T`` (triangle flipped), whichever
    its layout gives, and copied only when the needed op is a bare conjugate (complex
    ``a`` whose layout does not match).  The output is the only allocation: a right-hand
    solve copies ``b`` once into a fresh C-ordered array and solves in place there, so the
    result owns its memory (an op output adopts it without another copy).  O(n^2 k).
    """
    dt = _blas_dtype(a, b)
    if a.dtype != dt:
        a = a.astype(dt)
    if not unit and a.shape[-1] and not np.all(np.diagonal(a)):
        i = int(np.argmin(np.abs(np.diagonal(a)) != 0))
        raise np.linalg.LinAlgError(f"singular matrix: zero diagonal entry {i + 1}")
    right = not b.flags.f_contiguous
    if right:
        b = np.array(b, dtype=dt, order="C")  # the result's own buffer (solved in place)
    elif b.dtype != dt:
        b = b.astype(dt)
    if not (a.flags.c_contiguous or a.flags.f_contiguous):
        a = np.ascontiguousarray(a)
    a_is_t = not a.flags.f_contiguous  # BLAS sees M = a^T
    # op needed on M: left solves op(a); right solves op(a)^T.  Express it through M.
    need_t = (trans != 0) != right  # is a transpose of a needed (before conj)?
    conj = trans == 2
    t_on_m = need_t != a_is_t
    if conj and not t_on_m:  # conj(M) alone is not a BLAS op: use the other layout
        a = np.asfortranarray(a) if a_is_t else np.ascontiguousarray(a)
        a_is_t = not a_is_t
        t_on_m = True
    op = (2 if conj else 1) if t_on_m else 0
    m = a.T if a_is_t else a
    (trsm,) = _sla.blas.get_blas_funcs(("trsm",), (m, b))
    low = int(lower != a_is_t)
    if right:
        x = trsm(1.0, m, b.T, side=1, lower=low, trans_a=op, diag=int(unit), overwrite_b=1)
        return b if np.may_share_memory(x, b) else np.asarray(x).T
    return np.asarray(trsm(1.0, m, b, side=0, lower=low, trans_a=op, diag=int(unit)))


def _np_tri_solve(a: Array, b: Array, lower: bool, trans: int, unit: bool) -> Array:
    """Left triangular solve op(A) X = B with op in {N, T, C}; only A's triangle is read.

    BLAS ``?trsm`` (:func:`_trsm`): O(n^2 k) per matrix, no factorization, no layout
    copies.  Batch axes broadcast (numpy rules).  A single matrix against a batch of
    right-hand sides is one solve with the batch folded into the columns; otherwise one
    solve per batch element.  Raises ``LinAlgError`` for a zero diagonal entry.
    """
    n = a.shape[-1]
    if a.ndim == 2 and b.ndim == 2:
        return _trsm(a, b, lower, trans, unit)
    if a.ndim == 2:
        k = b.shape[-1]
        cols = np.moveaxis(b, -2, 0).reshape(n, -1)
        x = _trsm(a, cols, lower, trans, unit)
        return np.moveaxis(x.reshape((n, *b.shape[:-2], k)), 0, -2)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    ab = np.broadcast_to(a, (*batch, n, n))
    bb = np.broadcast_to(b, (*batch, *b.shape[-2:]))
    out = np.empty((*batch, *b.shape[-2:]), _blas_dtype(a, b))
    for idx in np.ndindex(*batch):
        out[idx] = _trsm(ab[idx], bb[idx], lower, trans, unit)
    return out


def np_lower_t_matmul(lo: Array, x: Array) -> Array:
    """``lo^T @ x`` for lower-triangular ``lo`` through BLAS ``?trmm`` (half of a general
    product's flops; ``lo``'s upper triangle is not read).  Computed as ``(x^T lo)^T`` from
    the right so C-ordered operands are read in place.  Batched by looping.  O(n^2 k)."""
    dt = _blas_dtype(lo, x)
    lo = np.ascontiguousarray(lo, dtype=dt)
    x = np.ascontiguousarray(x, dtype=dt)
    (trmm,) = _sla.blas.get_blas_funcs(("trmm",), (lo, x))

    def one(m: Array, y: Array) -> Array:
        return np.asarray(trmm(1.0, m.T, y.T, side=1, lower=0, trans_a=1)).T

    if lo.ndim == 2 and x.ndim == 2:
        return one(lo, x)
    return _batched(one, lo, x)


def np_cholesky_vjp_sym(lo: Array, ct: Array) -> Array:
    """``herm_part(cholesky_vjp(NUMPY, lo, ct))`` for one real matrix: ``L^-T S L^-1`` with
    ``S = (phi(L^T ct) + phi(L^T ct)^T) / 2``, through LAPACK ``?sygst``.

    ``?sygst`` forms ``N^-1 A N^-T`` for symmetric ``A`` (lower triangle read) at half the
    flops of two full triangular solves.  The congruence we need runs the other way
    (``L^-T S L^-1``); reversing rows and columns (``J``, the anti-identity) turns it into
    that form: ``L^-T S L^-1 = J N^-1 (J S J) N^-T J`` with ``N = J L^T J`` lower
    triangular.  The reversals are the C-ordered copies below (``J M J`` of a C-ordered
    ``M`` is the Fortran-ordered array LAPACK wants), so the whole VJP is one ``?trmm``
    (``L^T ct``), one ``?sygst``, two O(n^2) copies and one O(n^2) mirroring pass; only
    ``L``'s lower triangle and ``L^T ct``'s lower triangle are read.  Returns a fresh
    C-ordered symmetric matrix (scratch).  O(n^3) (~n^3 flops against the ~3 n^3 of the
    trmm + two trsm form).  Real float32/float64 2-D operands only (the caller checks).
    """
    dt = _blas_dtype(lo, ct)
    n = lo.shape[-1]
    if n == 0:
        return np.zeros((0, 0), dt)
    x = np_lower_t_matmul(lo, ct)  # L^T ct; only its lower triangle is read below
    # A = J S J, lower triangle: A[i, j] = x[n-1-j, n-1-i] / 2; its Fortran-ordered
    # memory is the C-ordered x[::-1, ::-1] / 2 (one pass, a fresh buffer LAPACK overwrites).
    at = np.multiply(x[::-1, ::-1], 0.5, dtype=dt)
    del x
    nt = np.ascontiguousarray(lo[::-1, ::-1], dtype=dt)  # N = J L^T J, Fortran-ordered
    (sygst,) = _sla.lapack.get_lapack_funcs(("sygst",), (at,))
    c, info = sygst(at.T, nt.T, itype=1, lower=1, overwrite_a=1)
    if info < 0:  # pragma: no cover - an invalid argument is a bug here
        raise ValueError(f"sygst: illegal argument {-info}")
    # c (Fortran) holds C = N^-1 A N^-T in its lower triangle; the result is J C J, whose
    # upper triangle r[i, j] (i <= j) is c[n-1-i, n-1-j] = c.T[n-1-j, n-1-i]; mirror it.
    r = np.asarray(c)[::-1, ::-1]
    return np.where(np.tri(n, dtype=bool).T, r, r.T)


def np_cholesky(h: Array, overwrite: bool = False) -> Array:
    """Lower Cholesky factor of Hermitian positive-definite (batches of) matrices.

    LAPACK ``?potrf`` on the Fortran view of the C-ordered input (``h^T = conj(h)``: its
    upper factor ``U`` gives ``L = U^T``), so no layout copy; the other triangle is zeroed.
    ``overwrite``: the caller hands over ``h`` (a scratch buffer nobody else holds): a
    C-ordered single matrix of the working dtype is factored in place (the result shares
    its memory) instead of being copied first.  Raises ``LinAlgError`` when a matrix is not
    positive definite.  O(n^3 / 3).
    """
    dt = _blas_dtype(h)
    own = overwrite and h.ndim == 2 and h.dtype == dt and h.flags.c_contiguous
    h = np.ascontiguousarray(h, dtype=dt)
    (potrf,) = _sla.lapack.get_lapack_funcs(("potrf",), (h,))

    def one(m: Array) -> Array:
        u, info = potrf(m.T, lower=0, clean=1, overwrite_a=int(own))
        if info > 0:
            raise np.linalg.LinAlgError("Matrix is not positive definite")
        if info < 0:  # pragma: no cover - an invalid argument is a bug here
            raise ValueError(f"potrf: illegal argument {-info}")
        if own and np.may_share_memory(u, m):  # factored in place: m itself (no view)
            return m
        return np.asarray(u).T

    if h.ndim == 2:
        return one(h)
    out = np.empty(h.shape, dt)
    for idx in np.ndindex(*h.shape[:-2]):
        out[idx] = one(h[idx])
    return out


def _batched(fn: Any, *xs: Array) -> Array:
    """Apply a single-matrix scipy kernel over broadcast batch axes (one call per matrix)."""
    batch = np.broadcast_shapes(*(x.shape[:-2] for x in xs))
    if not batch:
        return fn(*xs)
    bs = [np.broadcast_to(x, (*batch, *x.shape[-2:])) for x in xs]
    out: Array | None = None
    for idx in np.ndindex(*batch):
        r = fn(*(b[idx] for b in bs))
        if out is None:
            out = np.empty((*batch, *r.shape), r.dtype)
        out[idx] = r
    assert out is not None
    return out


def np_expm(a: Array) -> Array:
    """Matrix exponential (scipy's scaling and squaring Pade), batched, dtype kept."""
    return np.asarray(_sla.expm(a)).astype(np.result_type(a, np.float32), copy=False)


def np_sylvester(a: Array, b: Array, c: Array) -> Array:
    """X with ``a X + X b = c`` (Bartels-Stewart, ``scipy.linalg.solve_sylvester``), batched."""
    dt = np.result_type(a, b, c, np.float32)
    return _batched(_sla.solve_sylvester, a, b, c).astype(dt, copy=False)


def _np_diag_embed(v: Array) -> Array:
    n = v.shape[-1]
    out = np.zeros((*v.shape, n), dtype=v.dtype)
    idx = np.arange(n)
    out[..., idx, idx] = v
    return out


class _NumpyBackend:
    """The formulas' backend on raw numpy arrays (no recording)."""

    matmul = staticmethod(np.matmul)
    conj = staticmethod(np.conj)
    real = staticmethod(np.real)
    tril = staticmethod(np.tril)
    triu = staticmethod(np.triu)
    solve = staticmethod(np.linalg.solve)
    inv = staticmethod(np.linalg.inv)
    diag_embed = staticmethod(_np_diag_embed)

    @staticmethod
    def mT(x: Array) -> Array:
        return np.swapaxes(x, -1, -2)

    @staticmethod
    def diagonal(x: Array) -> Array:
        return np.diagonal(x, axis1=-2, axis2=-1)

    @staticmethod
    def triangular_solve(a: Array, b: Array, *, lower: bool, trans: int, unit: bool) -> Array:
        return _np_tri_solve(a, b, lower, trans, unit)

    @staticmethod
    def row(v: Array) -> Array:
        return v[..., None, :]

    @staticmethod
    def adjugate(a: Array, d: Array) -> Array:
        return _np_adjugate_det(a, d)

    @staticmethod
    def colsum(x: Array) -> Array:
        return np.sum(x, axis=-2)

    @staticmethod
    def lower_t_matmul(lo: Array, x: Array) -> Array:
        return np_lower_t_matmul(lo, x)

    @staticmethod
    def phi(x: Array) -> Array:
        p = np.tril(x)
        n = x.shape[-1]
        p[..., np.arange(n), np.arange(n)] *= 0.5
        return p

    @staticmethod
    def concat_rows(a: Array, b: Array) -> Array:
        return np.concatenate([a, b], axis=-2)

    @staticmethod
    def expm(a: Array) -> Array:
        return np_expm(a)

    @staticmethod
    def sylvester(a: Array, b: Array, c: Array) -> Array:
        return np_sylvester(a, b, c)

    @staticmethod
    def col(v: Array) -> Array:
        return v[..., None]

    @staticmethod
    def trace(x: Array) -> Array:
        return np.trace(x, axis1=-2, axis2=-1)

    @staticmethod
    def eye_like(x: Array) -> Array:
        return np.eye(x.shape[-1], dtype=x.dtype)

    @staticmethod
    def concat_last(a: Array, b: Array) -> Array:
        return np.concatenate([a, b], axis=-1)

    @staticmethod
    def zeros_like(x: Array) -> Array:
        return np.zeros_like(x)

    @staticmethod
    def is_complex(x: Array) -> bool:
        return bool(np.iscomplexobj(x))


NUMPY = _NumpyBackend()


def _H(B: Any, x: Array) -> Array:
    return B.conj(B.mT(x)) if B.is_complex(x) else B.mT(x)


def _cj(B: Any, x: Array) -> Array:
    return B.conj(x) if B.is_complex(x) else x


def _iim(B: Any, z: Array) -> Array:
    """``i * Im(z)`` kept in z's complex dtype (``(z - conj z) / 2``)."""
    return (z - B.conj(z)) * 0.5


def herm_part(B: Any, x: Array) -> Array:
    """``(x + x^H) / 2``: the projection a symmetrizing factorization applies first."""
    return (x + _H(B, x)) * 0.5


def _add(a: Array | None, b: Array | None) -> Array | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


# --------------------------------------------------------------------------- solve / inv / det


def solve_jvp(B: Any, a: Array, x: Array, da: Array | None, db: Array | None) -> Array | None:
    """X = A^-1 B:  dX = A^-1 (dB - dA X)  (Giles 2008, 2.2.3)."""
    rhs = _add(db, None if da is None else -B.matmul(da, x))
    return None if rhs is None else B.solve(a, rhs)


def solve_vjp(B: Any, a: Array, x: Array, ct: Array) -> tuple[Array, Array]:
    """ct_B = A^-T ct;  ct_A = -ct_B X^T  (transpose of the holomorphic JVP)."""
    cb = B.solve(B.mT(a), ct)
    return -B.matmul(cb, B.mT(x)), cb


def triangular_solve_jvp(
    B: Any,
    a: Array,
    x: Array,
    da: Array | None,
    db: Array | None,
    *,
    lower: bool,
    trans: int,
    unit: bool,
) -> Array | None:
    """X = op(A)^-1 B:  dX = op(A)^-1 (dB - op(tri dA) X), tri = A's (strict if unit) triangle."""
    rhs = db
    if da is not None:
        t = _tri_mask(B, da, lower, unit)
        t = B.mT(t) if trans == 1 else _H(B, t) if trans == 2 else t
        rhs = _add(rhs, -B.matmul(t, x))
    return None if rhs is None else B.triangular_solve(a, rhs, lower=lower, trans=trans, unit=unit)


def _np_neg_tri_outer(cb: Array, x: Array, lower: bool, unit: bool, transpose: bool) -> Array:
    """``tri(-cb x^T)`` (``tri((-cb x^T)^T)`` when ``transpose``) for single matrices, in one
    fresh buffer: the negation rides on the narrower factor (exact: negating an operand
    negates every product and partial sum) and the other triangle is zeroed in place
    (``copyto`` under a mask, so an inf/nan there still becomes 0, as ``tril`` gives).
    One GEMM, one O(n^2) masked pass, no other temporaries of size n^2."""
    p, q = (x, cb) if transpose else (cb, x)
    n, k = p.shape
    if k == 1 and p.dtype == q.dtype:  # one column: the outer product, without a GEMM call
        g = np.multiply.outer(-p[:, 0], q[:, 0])
    elif k <= n:
        g = np.matmul(-p, q.T)
    else:
        g = np.matmul(p, q.T)
        np.negative(g, out=g)
    np.copyto(g, 0, where=_off_triangle(g.shape[0], lower, unit))
    return g


@functools.lru_cache(maxsize=8)
def _off_triangle_cached(n: int, lower: bool, unit: bool) -> Array:
    m = _off_triangle_mask(n, lower, unit)
    m.flags.writeable = False
    return m


def _off_triangle_mask(n: int, lower: bool, unit: bool) -> Array:
    d = 1 if unit else 0
    r = np.arange(n)
    return np.less.outer(r, r + d) if lower else np.greater.outer(r, r - d)


def _off_triangle(n: int, lower: bool, unit: bool) -> Array:
    """Boolean n x n mask of the entries outside the kept triangle (``tril``: above the
    diagonal, or on and above it when ``unit``; ``triu`` mirrored).  Masks up to 1024 x 1024
    (1 MiB) are cached (eight at most, read-only); larger ones are built per call (O(n^2))."""
    return _off_triangle_cached(n, lower, unit) if n <= 1024 else _off_triangle_mask(n, lower, unit)


def _tri_mask(B: Any, x: Array, lower: bool, unit: bool) -> Array:
    k = -1 if unit else 0
    return B.tril(x, k) if lower else B.triu(x, -k)


def triangular_solve_vjp_b(
    B: Any, a: Array, ct: Array, *, lower: bool, trans: int, unit: bool
) -> Array:
    """ct_B = op(A)^-T ct: one triangular solve, O(n^2 k)."""
    if trans == 0:
        return B.triangular_solve(a, ct, lower=lower, trans=1, unit=unit)
    if trans == 1:
        return B.triangular_solve(a, ct, lower=lower, trans=0, unit=unit)
    return B.triangular_solve(_cj(B, a), ct, lower=lower, trans=0, unit=unit)  # conj(A)^-1


def triangular_solve_vjp(
    B: Any, a: Array, x: Array, ct: Array, *, lower: bool, trans: int, unit: bool
) -> tuple[Array, Array]:
    """ct_B = op(A)^-T ct;  G = -ct_B X^T;  ct_A = tri(G | G^T | G^H) for op = N | T | C."""
    cb = triangular_solve_vjp_b(B, a, ct, lower=lower, trans=trans, unit=unit)
    if (
        B is NUMPY
        and cb.ndim == 2
        and x.ndim == 2
        and (trans != 2 or not (np.iscomplexobj(cb) or np.iscomplexobj(x)))
    ):  # single matrices (real ones for op = C, where G^H = G^T)
        return _np_neg_tri_outer(cb, x, lower, unit, trans != 0), cb
    g = -B.matmul(cb, B.mT(x))
    g = B.mT(g) if trans == 1 else _H(B, g) if trans == 2 else g
    return _tri_mask(B, g, lower, unit), cb


def inv_jvp(B: Any, x: Array, da: Array) -> Array:
    """X = A^-1:  dX = -X dA X  (Giles 2008, 2.2.3)."""
    return -B.matmul(B.matmul(x, da), x)


def inv_vjp(B: Any, x: Array, ct: Array) -> Array:
    """ct_A = -X^T ct X^T."""
    xt = B.mT(x)
    return -B.matmul(B.matmul(xt, ct), xt)


def np_adjugate(a: Array) -> Array:
    """The adjugate (classical adjoint) of (batches of) square matrices, also when singular.

    From the SVD ``A = U S V^H``: ``adj A = det(U) det(V^H) V diag(prod_{j != i} s_j) U^H``
    (``adj(XY) = adj(Y) adj(X)``, ``adj U = det(U) U^H`` for unitary ``U``).  Exclusive
    products need no division, so a zero singular value is exact: rank n-1 gives the rank-1
    adjugate, lower rank gives 0.  O(n^3).
    """
    u, s, vh = np.linalg.svd(a)
    one = np.ones_like(s[..., :1])
    left = np.cumprod(np.concatenate([one, s[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([one, s[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    ex = (left * right).astype(u.dtype)
    ph = np.linalg.det(u) * np.linalg.det(vh)
    v = np.conj(np.swapaxes(vh, -1, -2))
    return ph[..., None, None] * ((v * ex[..., None, :]) @ np.conj(np.swapaxes(u, -1, -2)))


def _np_adjugate_det(a: Array, d: Array) -> Array:
    """``d A^-1`` when every matrix is invertible, else the SVD adjugate (JAX's value)."""
    if np.all(d != 0):
        try:
            return np.asarray(d)[..., None, None] * np.linalg.inv(a)
        except np.linalg.LinAlgError:
            pass
    return np_adjugate(a)


def det_jvp(B: Any, a: Array, d: Array, da: Array) -> Array:
    """d = det A:  dd = tr(adj(A) dA)  (Jacobi's formula; adj A = d A^-1 when invertible)."""
    return B.trace(B.matmul(B.adjugate(a, d), da))


def det_vjp(B: Any, a: Array, d: Array, ct: Array) -> Array:
    """ct_A = ct[..., None, None] adj(A)^T -- the adjugate also at a singular A (as JAX)."""
    return B.col(B.col(ct)) * B.mT(B.adjugate(a, d))


def slogdet_jvp(B: Any, a: Array, sign: Array, da: Array) -> tuple[Array, Array]:
    """t = tr(A^-1 dA):  dlogabs = Re t;  dsign = i Im(t) sign (complex) or 0 (real)."""
    t = B.trace(B.solve(a, da))
    if B.is_complex(a):
        return _iim(B, t) * sign, B.real(t)
    return None, t


def slogdet_vjp(
    B: Any, a: Array, sign: Array, ct_sign: Array | None, ct_logabs: Array | None
) -> Array:
    """ct_t = ct_l + i Im(ct_s sign);  ct_A = ct_t A^-T  (transpose of :func:`slogdet_jvp`)."""
    ct_t: Array | None = ct_logabs
    if ct_sign is not None and B.is_complex(a):
        w = ct_sign * sign  # transpose of t -> i Im(t) * sign: c -> i Im(c * sign)
        ct_t = _add(ct_t, _iim(B, w))
    assert ct_t is not None
    return B.col(B.col(ct_t)) * B.mT(B.inv(a))


# --------------------------------------------------------------------------- cholesky


def _phi(B: Any, x: Array) -> Array:
    """Lower triangle with the diagonal halved."""
    return B.tril(x, -1) + B.diag_embed(B.diagonal(x) * 0.5)


def cholesky_jvp(B: Any, l: Array, da: Array) -> Array:  # noqa: E741
    """A = L L^H:  dL = L phi(L^-1 dA L^-H)  (Murray 2016; JAX's rule)."""
    tmp = _H(B, B.triangular_solve(l, _H(B, da), lower=True, trans=0, unit=False))  # dA L^-H
    return B.matmul(l, _phi(B, B.triangular_solve(l, tmp, lower=True, trans=0, unit=False)))


def cholesky_vjp(B: Any, l: Array, ct: Array) -> Array:  # noqa: E741
    """Transpose of :func:`cholesky_jvp`: P = phi(L^T ct);  ct_A = L^-T P^... (see body).

    With Y = L^-1 dA L^-H: <ct, L phi(Y)> = <phi(L^T ct), Y>, and the transpose of
    dA -> L^-1 dA L^-H is G -> L^-T G conj(L)^-1.  Result not yet symmetrized (the public
    ``cholesky`` symmetrizes its input, whose transpose symmetrizes this).
    """
    p = B.phi(B.lower_t_matmul(l, ct))
    lc = _cj(B, l)
    # L^-T P conj(L)^-1 = L^-T (conj(L)^-T P^T)^T
    q = B.mT(B.triangular_solve(lc, B.mT(p), lower=True, trans=1, unit=False))
    return B.triangular_solve(l, q, lower=True, trans=1, unit=False)


# --------------------------------------------------------------------------- qr (reduced)


def _qr_square_jvp(B: Any, q: Array, r: Array, dx: Array) -> tuple[Array, Array]:
    """JAX's ``_thin_qr_jvp`` (m >= n): Townsend's QR note with the complex gauge term."""
    y = B.mT(B.triangular_solve(r, B.mT(dx), lower=False, trans=1, unit=False))  # dx R^-1
    z = B.matmul(_H(B, q), y)
    zl = B.tril(z, -1)
    do = zl - _H(B, zl)
    if B.is_complex(z):
        do = do + B.diag_embed(_iim(B, B.diagonal(z)))
    dq = B.matmul(q, do - z) + y
    dr = B.matmul(z - do, r)
    return dq, dr


def _qr_square_vjp(B: Any, q: Array, r: Array, cq: Array | None, cr: Array | None) -> Array:
    """Transpose of :func:`_qr_square_jvp`, step by step in reverse."""
    ct_z: Array | None = None
    ct_do: Array | None = None
    ct_y: Array | None = None
    if cr is not None:  # dr = (z - do) r
        g = B.matmul(cr, B.mT(r))
        ct_z, ct_do = g, -g
    if cq is not None:  # dq = q (do - z) + y
        g = B.matmul(B.mT(q), cq)
        ct_do = _add(ct_do, g)
        ct_z = _add(ct_z, -g)
        ct_y = cq
    assert ct_z is not None and ct_do is not None
    # do = zl - zl^H (+ i diag Im z): zl = tril(z, -1)
    ct_zl = ct_do - _H(B, ct_do)
    ct_z = ct_z + B.tril(ct_zl, -1)
    if B.is_complex(ct_do):
        ct_z = ct_z + B.diag_embed(_iim(B, B.diagonal(ct_do)))
    ct_y = _add(ct_y, B.matmul(_cj(B, q), ct_z))  # z = q^H y
    # y = dx R^-1  ->  ct_dx = ct_y R^-T  (R upper):  X R^T = ct_y  <=>  R X^T = ct_y^T
    return B.mT(B.triangular_solve(r, B.mT(ct_y), lower=False, trans=0, unit=False))


def qr_jvp(B: Any, x: Array, q: Array, r: Array, dx: Array) -> tuple[Array, Array]:
    """Reduced QR; m >= n: JAX's thin rule; m < n: X = [X1 X2], R2 = Q^H X2 (JAX's split)."""
    m, n = x.shape[-2], x.shape[-1]
    if m >= n:
        return _qr_square_jvp(B, q, r, dx)
    dq, dr1 = _qr_square_jvp(B, q, r[..., :, :m], dx[..., :, :m])
    dr2 = B.matmul(_H(B, dq), x[..., :, m:]) + B.matmul(_H(B, q), dx[..., :, m:])
    return dq, B.concat_last(dr1, dr2)


def qr_vjp(B: Any, x: Array, q: Array, r: Array, cq: Array | None, cr: Array | None) -> Array:
    """Transpose of :func:`qr_jvp`."""
    m, n = x.shape[-2], x.shape[-1]
    if cr is None:
        cr = B.zeros_like(r)
    if m >= n:
        return _qr_square_vjp(B, q, r, cq, cr)
    cr1, cr2 = cr[..., :, :m], cr[..., :, m:]
    # dr2 = dq^H x2 + q^H dx2
    ct_dx2 = B.matmul(_cj(B, q), cr2)
    ct_dq = (
        B.conj(B.matmul(x[..., :, m:], B.mT(cr2)))
        if B.is_complex(x)
        else B.matmul(x[..., :, m:], B.mT(cr2))
    )
    cq = _add(cq, ct_dq)
    ct_dx1 = _qr_square_vjp(B, q, r[..., :, :m], cq, cr1)
    return B.concat_last(ct_dx1, ct_dx2)


# --------------------------------------------------------------------------- eigh


def _gap_inverse(B: Any, w: Array, squared: bool = False) -> Array:
    """F_ij = 1/(w_j - w_i) off the diagonal, 0 on it (JAX's construction; inf when equal)."""
    wr, wc = B.row(w), B.col(w)
    diff = (wr + wc) * (wr - wc) if squared else wr - wc
    eye = B.eye_like(diff)
    return 1.0 / (diff + eye) - eye


def eigh_jvp(B: Any, w: Array, v: Array, da: Array) -> tuple[Array, Array]:
    """A = V diag(w) V^H:  dw = Re diag(V^H dA V);  dV = V (F o V^H dA V)  (Giles 2008, 3.1)."""
    vav = B.matmul(B.matmul(_H(B, v), da), v)
    f = _gap_inverse(B, w)
    dv = B.matmul(v, f * vav)
    dw = B.real(B.diagonal(vav)) if B.is_complex(vav) else B.diagonal(vav)
    return dw, dv


def eigh_vjp(B: Any, w: Array, v: Array, cw: Array | None, cv: Array | None) -> Array:
    """ct_A = conj(V) (diag(ct_w) + F o V^T ct_V) V^T  (transpose of :func:`eigh_jvp`)."""
    inner: Array | None = None
    if cv is not None:
        inner = _gap_inverse(B, w) * B.matmul(B.mT(v), cv)
    if cw is not None:
        inner = _add(inner, B.diag_embed(cw))
    if inner is None:  # both blocks exactly zero
        return B.zeros_like(v)
    return B.matmul(B.matmul(_cj(B, v), inner), B.mT(v))


# --------------------------------------------------------------------------- svd (reduced)


def svd_jvp(
    B: Any, a: Array, u: Array, s: Array, vh: Array, da: Array
) -> tuple[Array, Array, Array]:
    """A = U diag(s) V^H (reduced): JAX's ``_svd_jvp_rule`` (Townsend 2016 + complex gauge)."""
    m, n = a.shape[-2], a.shape[-1]
    v = _H(B, vh)
    ds_mat = B.matmul(B.matmul(_H(B, u), da), v)
    ds = B.real(B.diagonal(ds_mat)) if B.is_complex(ds_mat) else B.diagonal(ds_mat)
    f = _gap_inverse(B, s, squared=True)
    dss = ds_mat * B.row(s)
    sds = B.col(s) * ds_mat
    k1 = f * (dss + _H(B, dss))
    if B.is_complex(ds_mat):
        k1 = k1 + B.diag_embed(_iim(B, B.diagonal(ds_mat)) / s)
    du = B.matmul(u, k1)
    dv = B.matmul(v, f * (sds + _H(B, sds)))
    if m > n:
        dav = B.matmul(da, v)
        du = du + (dav - B.matmul(u, B.matmul(_H(B, u), dav))) / B.row(s)
    if n > m:
        dahu = B.matmul(_H(B, da), u)
        dv = dv + (dahu - B.matmul(v, B.matmul(vh, dahu))) / B.row(s)
    return du, ds, _H(B, dv)


def svd_vjp(
    B: Any,
    a: Array,
    u: Array,
    s: Array,
    vh: Array,
    cu: Array | None,
    cs: Array | None,
    cvh: Array | None,
) -> Array:
    """Transpose of :func:`svd_jvp`, step by step in reverse."""
    m, n = a.shape[-2], a.shape[-1]
    v = _H(B, vh)
    cx = B.is_complex(a)
    ct_dv = None if cvh is None else (B.conj(B.mT(cvh)) if cx else B.mT(cvh))
    ct_dS: Array | None = None
    ct_da: Array | None = None
    if cu is not None or ct_dv is not None:
        f = _gap_inverse(B, s, squared=True)
    if cu is not None:
        if m > n:  # du += (I - U U^H) dA V / s
            g = cu / B.row(s)
            g = g - B.matmul(_cj(B, u), B.matmul(B.mT(u), g))
            ct_da = B.matmul(g, B.mT(v))
        ck1 = B.matmul(B.mT(u), cu)
        p = f * ck1
        ct_dss = p + _H(B, p)
        ct_dS = ct_dss * B.row(s)
        if cx:
            ct_dS = ct_dS + B.diag_embed(_iim(B, B.diagonal(ck1)) / s)
    if ct_dv is not None:
        if n > m:  # dv += (I - V V^H) dA^H U / s
            g = ct_dv / B.row(s)
            g = g - B.matmul(_cj(B, v), B.matmul(B.mT(v), g))
            w = B.matmul(g, B.mT(u))  # ct of dA^H
            ct_da = _add(ct_da, B.conj(B.mT(w)) if cx else B.mT(w))
        ck2 = B.matmul(B.mT(v), ct_dv)
        q = f * ck2
        ct_sds = q + _H(B, q)
        ct_dS = _add(ct_dS, B.col(s) * ct_sds)
    if cs is not None:
        ct_dS = _add(ct_dS, B.diag_embed(cs))
    if ct_dS is None:  # every block exactly zero
        return B.zeros_like(a)
    # dS = U^H dA V  ->  ct_dA = conj(U) ct_dS V^T
    main = B.matmul(B.matmul(_cj(B, u), ct_dS), B.mT(v))
    return main if ct_da is None else main + ct_da


# --------------------------------------------------------------------------- expm / sqrtm


def expm_frechet(B: Any, a: Array, e: Array) -> Array:
    """The Frechet derivative L(A, E) of expm: the upper-right block of
    ``expm([[A, E], [0, A]])`` (Najfeld and Havel 1995; Higham, *Functions of Matrices* 3.2).
    The VJP of expm is ``G -> L(A^T, G)`` (its transpose under the bilinear pairing)."""
    n = a.shape[-1]
    z = B.zeros_like(a)
    m = B.concat_rows(B.concat_last(a, e), B.concat_last(z, a))
    return B.expm(m)[..., :n, n:]


def sqrtm_jvp(B: Any, x: Array, da: Array) -> Array:
    """X = sqrtm(A), X X = A:  X dX + dX X = dA, a Sylvester equation."""
    return B.sylvester(x, x, da)


def sqrtm_vjp(B: Any, x: Array, ct: Array) -> Array:
    """Transpose of :func:`sqrtm_jvp`: solve ``X^T C + C X^T = ct``."""
    xt = B.mT(x)
    return B.sylvester(xt, xt, ct)


def sylvester_jvp(
    B: Any, a: Array, b: Array, x: Array, da: Array | None, db: Array | None, dc: Array | None
) -> Array | None:
    """a X + X b = c:  a dX + dX b = dc - da X - X db."""
    rhs = dc
    if da is not None:
        rhs = _add(rhs, -B.matmul(da, x))
    if db is not None:
        rhs = _add(rhs, -B.matmul(x, db))
    return None if rhs is None else B.sylvester(a, b, rhs)


def sylvester_vjp(B: Any, a: Array, b: Array, x: Array, ct: Array) -> tuple[Array, Array, Array]:
    """ct_c = syl(a^T, b^T, ct);  ct_a = -ct_c X^T;  ct_b = -X^T ct_c."""
    cc = B.sylvester(B.mT(a), B.mT(b), ct)
    return -B.matmul(cc, B.mT(x)), -B.matmul(B.mT(x), cc), cc


# --------------------------------------------------------------------------- pinv


def pinv_jvp(B: Any, a: Array, p: Array, da: Array) -> Array:
    """P = A^+:  dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P
    (Golub and Pereyra 1973; JAX's ``_pinv_jvp``)."""
    dah = _H(B, da)
    ph = _H(B, p)
    ap, pa = B.matmul(a, p), B.matmul(p, a)
    i_ap = B.eye_like(ap) - ap
    i_pa = B.eye_like(pa) - pa
    return (
        -B.matmul(B.matmul(p, da), p)
        + B.matmul(B.matmul(B.matmul(p, ph), dah), i_ap)
        + B.matmul(B.matmul(i_pa, dah), B.matmul(ph, p))
    )


def pinv_vjp(B: Any, a: Array, p: Array, ct: Array) -> Array:
    """Transpose of :func:`pinv_jvp` under the bilinear pairing:
    ``-P^T G P^T + conj((I - A P) G^T P P^H) + conj(P^H P G^T (I - P A))``."""
    ph = _H(B, p)
    ap, pa = B.matmul(a, p), B.matmul(p, a)
    i_ap = B.eye_like(ap) - ap
    i_pa = B.eye_like(pa) - pa
    gt = B.mT(ct)
    t2 = B.matmul(B.matmul(i_ap, gt), B.matmul(p, ph))
    t3 = B.matmul(B.matmul(B.matmul(ph, p), gt), i_pa)
    pt = B.mT(p)
    return -B.matmul(B.matmul(pt, ct), pt) + _cj(B, t2 + t3)


# --------------------------------------------------------------------------- eig (general)


def eig_mask(v: Array) -> Array:
    """One-hot (over rows) of each eigenvector's largest-magnitude entry (LAPACK's real
    component); a constant of the primal point, never differentiated."""
    vv = np.asarray(v)
    k = np.argmax(np.abs(vv), axis=-2)
    return (np.arange(vv.shape[-2])[:, None] == k[..., None, :]).astype(vv.dtype)


def eig_jvp(
    B: Any, w: Array, v: Array, mask: Array, da: Array, vectors: bool = True
) -> tuple[Array, Array | None]:
    """A V = V diag(w), LAPACK's normalization (unit 2-norm, largest entry real):
    P = V^-1 dA V;  dw = diag P;  U = V (F o P);  dV = U + V diag(c) with
    c_j = -Re(v_j^H u_j) - i Im(u_kj) / Re(v_kj)  (JAX's ``_eig_vec_jvp``; Giles 2008 3.1).
    ``mask``: :func:`eig_mask` of V (a constant of the primal point)."""
    p = B.matmul(B.solve(v, da), v)
    dw = B.diagonal(p)
    if not vectors:
        return dw, None
    u = B.matmul(v, _gap_inverse(B, w) * p)
    sv = B.colsum(B.conj(v) * u)
    uk = B.colsum(u * mask)
    r = B.real(B.colsum(v * mask))
    c = -(sv + B.conj(sv)) * 0.5 - _iim(B, uk) / r
    return dw, u + v * B.row(c)


def eig_vjp(
    B: Any, w: Array, v: Array, mask: Array, cw: Array | None, cv: Array | None
) -> Array:
    """Transpose of :func:`eig_jvp` (``None``: a symbolic-zero cotangent block)."""
    ct_p: Array | None = None if cw is None else B.diag_embed(cw)
    if cv is not None:
        r = B.real(B.colsum(v * mask))
        cc = B.colsum(v * cv)
        ct_s = -(cc + B.conj(cc)) * 0.5
        ct_uk = -_iim(B, cc) / r
        ct_u = cv + B.conj(v) * B.row(ct_s) + mask * B.row(ct_uk)
        ct_p = _add(ct_p, _gap_inverse(B, w) * B.matmul(B.mT(v), ct_u))
    if ct_p is None:  # both blocks exactly zero
        return B.zeros_like(v)
    vt = B.mT(v)
    return B.matmul(B.solve(vt, ct_p), vt)
