"""Dense linear algebra with JVP and VJP rules, batched over leading axes like numpy.

solve, triangular solve, inv, det, slogdet, cholesky, qr (reduced), eigh, eig, svd
(reduced; full matrices without derivatives for non-square input, as JAX), pinv, expm,
sqrtm, Sylvester solve, tril, triu, diagonal (+ its transpose, diag_embed).  Kernels are
LAPACK/BLAS through numpy and scipy; the triangular solves (``?trsm``) and the Cholesky
(``?potrf``) read C-ordered data in place.  The formulas live in
:mod:`tenferro_ad.ops._linalg_math` (one backend-agnostic implementation with references);
here each primitive declares its kernel, residuals and rules side by side.  Rules run
the formulas on raw numpy arrays when nothing records the backward and on handles under
``create_graph`` (so Hessian-vector products work).

Multi-output factorizations are *single-output primitives with a packed result*
(primitives are single-output): ``qr`` packs ``[Q; R^T]``, ``eigh`` and ``eig`` pack
``[w; V]``, ``svd`` packs ``[U; s; Vh^T]`` along the row axis, ``slogdet`` packs
``[sign, logabsdet]`` along a trailing axis; the public functions hand out metadata-only
slices of the packed value (no allocation, no copy).  The VJP treats an all-zero block of
the packed cotangent as the symbolic zero it stands for, so a loss of eigenvalues or
singular values alone stays finite at degenerate spectra, as in JAX.
"""

from __future__ import annotations

import operator
import threading
import weakref
from typing import Any

import numpy as np
import scipy.linalg as _sla

import tenferro_storage as ts
from tenferro_storage.errors import shown

from .._core._dispatch import bind
from .._core._handle import EagerTensor
from .._core._namespace import NUMPY_NS
from .._core._primitive import Primitive, deflinear, defprimitive, nondifferentiable
from .._traced._batch_rules import defbatch, leading, unbatched_result
from .._traced._batch_rules import elementwise as broadcasting
from .._traced._graph import Lit
from .._traced._trace import Tracer
from ..errors import ArgumentError, ArgumentTypeError
from . import _linalg_math as L
from . import elementwise, reduce, shape
from ._util import axis as _axis_arg
from ._util import shape_of
from .complex import CONJ, REAL, REAL_T, is_complex
from .linalg import matmul

Array = Any


def _np(x: Any) -> Array:
    """The values of a handle, owner or array-like, read in place (O(1), no copy)."""
    if isinstance(x, EagerTensor):
        return x._r("linalg").a
    if isinstance(x, ts.Tensor | ts.TensorView | ts.TensorViewMut):
        return ts.kernel.read_array(x)
    return np.asarray(x)


def _shape(x: Any) -> tuple[int, ...]:
    """The shape of a handle, owner, array or traced value (metadata only, O(rank))."""
    return shape_of(x)


def _square(op: str, a: Any) -> tuple[int, ...]:
    s = _shape(a)
    if len(s) < 2 or s[-1] != s[-2]:
        raise ArgumentError(
            f"{op}: expected a (batch of) square matrices (..., n, n), got shape {s}"
        )
    return s


def _checked(op: str, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except np.linalg.LinAlgError as e:
        raise np.linalg.LinAlgError(
            f"{op}: {e} (input shape {np.shape(args[0])}); the matrix is singular or not "
            "positive definite -- regularize it or use a decomposition that tolerates it"
        ) from e


# -- structural linear maps: tril/triu, diagonal/diag_embed, eye --------------------------------
TRIL: Primitive = deflinear(
    defprimitive("tril", lambda x, *, k: np.tril(x, k), 1),
    lambda ops, g, *, k: ops.apply(TRIL, g, k=k),
)
defbatch(TRIL, leading("tril"))
TRIU: Primitive = deflinear(
    defprimitive("triu", lambda x, *, k: np.triu(x, k), 1),
    lambda ops, g, *, k: ops.apply(TRIU, g, k=k),
)
defbatch(TRIU, leading("triu"))


def _diag_embed_impl(
    v: Array, *, offset: int, axis1: int, axis2: int, shape: tuple[int, ...]
) -> Array:
    out = np.zeros(shape, dtype=np.result_type(v))
    view = np.diagonal(out, offset, axis1, axis2)
    view.flags.writeable = True  # numpy's diagonal of a fresh array we own
    view[...] = v
    return out


DIAGONAL = defprimitive(
    "diagonal",
    lambda x, *, offset, axis1, axis2, shape: np.diagonal(x, offset, axis1, axis2).copy(),
    1,
)
DIAG_EMBED = defprimitive("diag_embed", _diag_embed_impl, 1)
deflinear(
    DIAGONAL,
    lambda ops, g, *, offset, axis1, axis2, shape: ops.apply(
        DIAG_EMBED, g, offset=offset, axis1=axis1, axis2=axis2, shape=shape
    ),
)
deflinear(
    DIAG_EMBED,
    lambda ops, g, *, offset, axis1, axis2, shape: ops.apply(
        DIAGONAL, g, offset=offset, axis1=axis1, axis2=axis2, shape=shape
    ),
)
EYE_LIKE = nondifferentiable(
    defprimitive("eye_like", lambda x: np.eye(x.shape[-1], dtype=x.dtype), 1)
)


class _OpsBackend:
    """The formulas' backend over the handle-backed rule namespace (records every call)."""

    def __init__(self, ops: Any) -> None:
        self.ops = ops

    def matmul(self, a: Array, b: Array) -> Array:
        return self.ops.matmul(a, b)

    def mT(self, x: Array) -> Array:
        nd = len(x.shape)
        return self.ops.transpose(x, (*range(nd - 2), nd - 1, nd - 2))

    def conj(self, x: Array) -> Array:
        return self.ops.apply(CONJ, x)

    def real(self, x: Array) -> Array:
        return self.ops.apply(REAL, x)

    def tril(self, x: Array, k: int = 0) -> Array:
        return self.ops.apply(TRIL, x, k=k)

    def triu(self, x: Array, k: int = 0) -> Array:
        return self.ops.apply(TRIU, x, k=k)

    def diagonal(self, x: Array) -> Array:
        return self.ops.apply(DIAGONAL, x, offset=0, axis1=-2, axis2=-1, shape=tuple(x.shape))

    def diag_embed(self, v: Array) -> Array:
        s = tuple(v.shape)
        return self.ops.apply(DIAG_EMBED, v, offset=0, axis1=-2, axis2=-1, shape=(*s, s[-1]))

    def solve(self, a: Array, b: Array) -> Array:
        return self.ops.apply(SOLVE, a, b)

    def inv(self, a: Array) -> Array:
        return self.ops.apply(INV, a)

    def triangular_solve(self, a: Array, b: Array, *, lower: bool, trans: int, unit: bool) -> Array:
        return self.ops.apply(TRSOLVE, a, b, lower=lower, trans=trans, unit=unit)

    def row(self, v: Array) -> Array:
        s = tuple(v.shape)
        return self.ops.reshape(v, (*s[:-1], 1, s[-1]))

    def col(self, v: Array) -> Array:
        return self.ops.reshape(v, (*tuple(v.shape), 1))

    def trace(self, x: Array) -> Array:
        return self.ops.sum(self.diagonal(x), axis=-1)

    def eye_like(self, x: Array) -> Array:
        return self.ops.apply(EYE_LIKE, x)

    def concat_last(self, a: Array, b: Array) -> Array:
        return self.ops.concatenate([a, b], axis=-1)

    def zeros_like(self, x: Array) -> Array:
        return x * 0.0

    def adjugate(self, a: Array, d: Array) -> Array:
        return self.col(self.col(d)) * self.inv(a)

    def colsum(self, x: Array) -> Array:
        return self.ops.sum(x, axis=-2)

    def lower_t_matmul(self, lo: Array, x: Array) -> Array:
        return self.matmul(self.mT(lo), x)

    def phi(self, x: Array) -> Array:
        return L._phi(self, x)

    def concat_rows(self, a: Array, b: Array) -> Array:
        return self.ops.concatenate([a, b], axis=-2)

    def expm(self, a: Array) -> Array:
        return self.ops.apply(EXPM, a)

    def sylvester(self, a: Array, b: Array, c: Array) -> Array:
        return self.ops.apply(SYLVESTER, a, b, c)

    def is_complex(self, x: Array) -> bool:
        return is_complex(x)


def _B(ops: Any) -> Any:
    return L.NUMPY if ops is NUMPY_NS else _OpsBackend(ops)


def _nz(x: Array) -> Array | None:
    """A cotangent block that is exactly zero is the symbolic zero it stands for.  A traced
    block has no value at trace time: it is kept unless it is a zero literal.  A tracked
    handle (a sweep recorded for a higher derivative) is kept whatever its value: a zero
    *value* is not a zero *function* -- nested ``jvp`` seeds its reverse sweep with zeros
    and differentiates the result with respect to that seed."""
    if isinstance(x, Tracer):
        a = x._atom
        return None if isinstance(a, Lit) and not np.any(a.value) else x
    if isinstance(x, EagerTensor) and x._id >= 0:
        return x
    return None if not np.any(_np(x)) else x


# -- solve / triangular solve / inv / det / slogdet ---------------------------------------------
SOLVE = defprimitive(
    "solve",
    lambda a, b: _checked("solve", np.linalg.solve, a, b),
    2,
    save_in=(0,),
    save_out=True,
    broadcasts=True,  # batch axes broadcast; the core sums cotangents back
    vjp=(
        lambda ops, g, a, x: L.solve_vjp(_B(ops), a, x, g)[0],
        lambda ops, g, a, x: L.solve_vjp(_B(ops), a, x, g)[1],
    ),
    jvp=(
        lambda ops, t, a, x: L.solve_jvp(_B(ops), a, x, t, None),
        lambda ops, t, a, x: L.solve_jvp(_B(ops), a, x, None, t),
    ),
)


def _trsolve_impl(a: Array, b: Array, *, lower: bool, trans: int, unit: bool) -> Array:
    return _checked("solve_triangular", L._np_tri_solve, a, b, lower, trans, unit)


# Both cotangents of a triangular solve start from the same solve ct_B = op(A)^-T ct.  The
# reverse sweep runs argument 0's rule before argument 1's with the same cotangent array,
# so in a no-record backward argument 0's rule leaves ct_B here (per thread, keyed by the
# identities of the cotangent and of A, held weakly) and argument 1's rule takes it instead
# of solving again.  At most one ct_B (kernel scratch) waits per thread; the next rule of
# either kind drops it.
_TRSOLVE_CB = threading.local()


def _trsolve_vjp_a(ops: Any, g: Array, a: Array, x: Array, **kw: Any) -> Array:
    ga, cb = L.triangular_solve_vjp(_B(ops), a, x, g, **kw)
    if ops is NUMPY_NS and type(g) is np.ndarray and type(a) is np.ndarray:
        _TRSOLVE_CB.last = (weakref.ref(g), weakref.ref(a), kw, cb)
    return ga


def _trsolve_vjp_b(ops: Any, g: Array, a: Array, x: Array, **kw: Any) -> Array:
    last = getattr(_TRSOLVE_CB, "last", None)
    if last is not None:
        _TRSOLVE_CB.last = None
        if last[0]() is g and last[1]() is a and last[2] == kw:
            return last[3]
    return L.triangular_solve_vjp_b(_B(ops), a, g, **kw)


TRSOLVE = defprimitive(
    "triangular_solve",
    _trsolve_impl,
    2,
    save_in=(0,),
    save_out=True,
    broadcasts=True,
    vjp=(_trsolve_vjp_a, _trsolve_vjp_b),
    jvp=(
        lambda ops, t, a, x, **kw: L.triangular_solve_jvp(_B(ops), a, x, t, None, **kw),
        lambda ops, t, a, x, **kw: L.triangular_solve_jvp(_B(ops), a, x, None, t, **kw),
    ),
)
INV = defprimitive(
    "inv",
    lambda a: _checked("inv", np.linalg.inv, a),
    1,
    save_out=True,
    vjp=(lambda ops, g, x: L.inv_vjp(_B(ops), x, g),),
    jvp=(lambda ops, t, x: L.inv_jvp(_B(ops), x, t),),
)
DET = defprimitive(
    "det",
    lambda a: np.asarray(np.linalg.det(a)),
    1,
    save_in=(0,),
    save_out=True,
    vjp=(lambda ops, g, a, d: L.det_vjp(_B(ops), a, d, g),),
    jvp=(lambda ops, t, a, d: L.det_jvp(_B(ops), a, d, t),),
)


def _slogdet_impl(a: Array) -> Array:
    sign, logabs = np.linalg.slogdet(a)
    return np.stack([sign, np.asarray(logabs).astype(np.result_type(sign))], axis=-1)


def _slogdet_vjp(ops: Any, g: Array, a: Array, packed: Array) -> Array:
    B = _B(ops)
    sign = packed[..., 0]
    cs, cl = g[..., 0], g[..., 1]
    if B.is_complex(cl):
        cl = B.real(cl)
    return L.slogdet_vjp(B, a, sign, _nz(cs), cl)


def _slogdet_jvp(ops: Any, t: Array, a: Array, packed: Array) -> Array:
    B = _B(ops)
    ds, dl = L.slogdet_jvp(B, a, packed[..., 0], t)
    if ds is None:
        ds = dl * 0.0
    return ops.concatenate([B.col(ds), B.col(dl)], axis=-1)


SLOGDET = defprimitive(
    "slogdet",
    _slogdet_impl,
    1,
    save_in=(0,),
    save_out=True,
    vjp=(_slogdet_vjp,),
    jvp=(_slogdet_jvp,),
)


# -- cholesky ------------------------------------------------------------------------------------
def _cholesky_impl(a: Array) -> Array:
    h = a + np.conj(np.swapaxes(a, -1, -2)) if np.iscomplexobj(a) else a + np.swapaxes(a, -1, -2)
    h *= 0.5
    return _checked("cholesky", L.np_cholesky, h, True)  # h is this kernel's scratch


# The primitive symmetrizes its input ((a + a^H)/2, as jnp.linalg.cholesky does) inside the
# kernel: the JVP projects the tangent the same way and the VJP projects the cotangent
# (the projection is its own transpose), with no extra recorded ops.
def _cholesky_vjp(ops: Any, g: Array, lo: Array) -> Array:
    """The projected Cholesky VJP; a single real matrix in a no-record backward takes the
    ``?sygst`` form (:func:`~tenferro_ad.ops._linalg_math.np_cholesky_vjp_sym`: one congruence
    instead of two full triangular solves and the projection)."""
    if (
        ops is NUMPY_NS
        and lo.ndim == 2
        and np.ndim(g) == 2
        and lo.dtype.kind == "f"
        and np.result_type(g).kind == "f"
        and L._blas_dtype(lo, g).itemsize <= 8
    ):
        return L.np_cholesky_vjp_sym(lo, g)
    B = _B(ops)
    return L.herm_part(B, L.cholesky_vjp(B, lo, g))


CHOLESKY = defprimitive(
    "cholesky",
    _cholesky_impl,
    1,
    save_out=True,
    vjp=(_cholesky_vjp,),
    jvp=(lambda ops, t, lo: L.cholesky_jvp(_B(ops), lo, L.herm_part(_B(ops), t)),),
)


# -- qr: packed [Q; R^T] (rows m + n, columns k = min(m, n)) ---------------------------------------
def _qr_impl(a: Array) -> Array:
    q, r = np.linalg.qr(a, mode="reduced")
    return np.concatenate([q, np.swapaxes(r, -1, -2)], axis=-2)


def _qr_unpack(B: Any, packed: Array, m: int) -> tuple[Array, Array]:
    return packed[..., :m, :], B.mT(packed[..., m:, :])


def _qr_vjp(ops: Any, g: Array, a: Array, packed: Array) -> Array:
    B = _B(ops)
    m = a.shape[-2]
    q, r = _qr_unpack(B, packed, m)
    cq, cr = _qr_unpack(B, g, m)
    return L.qr_vjp(B, a, q, r, _nz(cq), cr)


def _qr_jvp(ops: Any, t: Array, a: Array, packed: Array) -> Array:
    B = _B(ops)
    m = a.shape[-2]
    q, r = _qr_unpack(B, packed, m)
    dq, dr = L.qr_jvp(B, a, q, r, t)
    return ops.concatenate([dq, B.mT(dr)], axis=-2)


QR = defprimitive("qr", _qr_impl, 1, save_in=(0,), save_out=True, vjp=(_qr_vjp,), jvp=(_qr_jvp,))


# -- eigh: packed [w; V] (rows 1 + n) -------------------------------------------------------------
def _eigh_impl(a: Array) -> Array:
    w, v = _checked("eigh", np.linalg.eigh, a)
    return np.concatenate([w[..., None, :].astype(v.dtype), v], axis=-2)


def _eigh_unpack(B: Any, packed: Array) -> tuple[Array, Array]:
    w = packed[..., 0, :]
    return (B.real(w) if B.is_complex(w) else w), packed[..., 1:, :]


def _eigh_vjp(ops: Any, g: Array, packed: Array) -> Array:
    B = _B(ops)
    w, v = _eigh_unpack(B, packed)
    cw, cv = _eigh_unpack(B, g)
    return L.eigh_vjp(B, w, v, _nz(cw), _nz(cv))


def _eigh_jvp(ops: Any, t: Array, packed: Array) -> Array:
    B = _B(ops)
    w, v = _eigh_unpack(B, packed)
    dw, dv = L.eigh_jvp(B, w, v, t)
    if B.is_complex(dv):
        dw = dw + 0j if B is L.NUMPY else ops.apply(_real_t(), dw)
    return ops.concatenate([B.row(dw), dv], axis=-2)


def _real_t() -> Any:
    return REAL_T


EIGH = defprimitive("eigh", _eigh_impl, 1, save_out=True, vjp=(_eigh_vjp,), jvp=(_eigh_jvp,))


# -- svd: packed [U; s; Vh^T] (rows m + 1 + n, columns k) ------------------------------------------
def _svd_impl(a: Array) -> Array:
    u, s, vh = _checked("svd", np.linalg.svd, a, False)
    return np.concatenate([u, s[..., None, :].astype(u.dtype), np.swapaxes(vh, -1, -2)], axis=-2)


def _svd_unpack(B: Any, packed: Array, m: int) -> tuple[Array, Array, Array]:
    s = packed[..., m, :]
    return (
        packed[..., :m, :],
        B.real(s) if B.is_complex(s) else s,
        B.mT(packed[..., m + 1 :, :]),
    )


def _svd_vjp(ops: Any, g: Array, a: Array, packed: Array) -> Array:
    B = _B(ops)
    m = a.shape[-2]
    u, s, vh = _svd_unpack(B, packed, m)
    cu, cs, cvh = _svd_unpack(B, g, m)
    return L.svd_vjp(B, a, u, s, vh, _nz(cu), _nz(cs), _nz(cvh))


def _svd_jvp(ops: Any, t: Array, a: Array, packed: Array) -> Array:
    B = _B(ops)
    m = a.shape[-2]
    u, s, vh = _svd_unpack(B, packed, m)
    du, ds, dvh = L.svd_jvp(B, a, u, s, vh, t)
    if B.is_complex(du):
        ds = ds + 0j if B is L.NUMPY else ops.apply(_real_t(), ds)
    return ops.concatenate([du, B.row(ds), B.mT(dvh)], axis=-2)


SVD = defprimitive(
    "svd", _svd_impl, 1, save_in=(0,), save_out=True, vjp=(_svd_vjp,), jvp=(_svd_jvp,)
)


# -- expm / sqrtm / sylvester -------------------------------------------------------------------
EXPM = defprimitive(
    "expm",
    lambda a: L.np_expm(a),
    1,
    save_in=(0,),
    vjp=(lambda ops, g, a: L.expm_frechet(_B(ops), _B(ops).mT(a), g),),
    jvp=(lambda ops, t, a: L.expm_frechet(_B(ops), a, t),),
)
SYLVESTER = defprimitive(
    "sylvester",
    lambda a, b, c: _checked("sylvester", L.np_sylvester, a, b, c),
    3,
    save_in=(0, 1),
    save_out=True,
    vjp=(
        lambda ops, g, a, b, x: L.sylvester_vjp(_B(ops), a, b, x, g)[0],
        lambda ops, g, a, b, x: L.sylvester_vjp(_B(ops), a, b, x, g)[1],
        lambda ops, g, a, b, x: _B(ops).sylvester(_B(ops).mT(a), _B(ops).mT(b), g),
    ),
    jvp=(
        lambda ops, t, a, b, x: L.sylvester_jvp(_B(ops), a, b, x, t, None, None),
        lambda ops, t, a, b, x: L.sylvester_jvp(_B(ops), a, b, x, None, t, None),
        lambda ops, t, a, b, x: L.sylvester_jvp(_B(ops), a, b, x, None, None, t),
    ),
)


def _sqrtm_one(a: Array) -> Array:
    r = _sla.sqrtm(a)
    return r[0] if isinstance(r, tuple) else r


def _sqrtm_impl(a: Array) -> Array:
    x = np.asarray(L._batched(_sqrtm_one, a))
    if np.iscomplexobj(x) and not np.iscomplexobj(a) and not np.any(np.imag(x)):
        x = np.real(x)
    return x.astype(np.result_type(x.dtype, a.dtype, np.float32), copy=False)


SQRTM = defprimitive(
    "sqrtm",
    _sqrtm_impl,
    1,
    save_out=True,
    vjp=(lambda ops, g, x: L.sqrtm_vjp(_B(ops), x, g),),
    jvp=(lambda ops, t, x: L.sqrtm_jvp(_B(ops), x, t),),
)


# -- pinv -----------------------------------------------------------------------------------------
def _pinv_impl(a: Array, *, rtol: float | None) -> Array:
    m, n = a.shape[-2], a.shape[-1]
    eps = np.finfo(np.result_type(a, np.float32)).eps
    r = 10.0 * max(m, n) * eps if rtol is None else rtol
    p = np.linalg.pinv(a, rtol=r)
    return p.astype(np.result_type(a, np.float32), copy=False)


PINV = defprimitive(
    "pinv",
    _pinv_impl,
    1,
    save_in=(0,),
    save_out=True,
    vjp=(lambda ops, g, a, p, **kw: L.pinv_vjp(_B(ops), a, p, g),),
    jvp=(lambda ops, t, a, p, **kw: L.pinv_jvp(_B(ops), a, p, t),),
)


# -- eig: packed [w; V] (rows 1 + n), always complex ---------------------------------------------
_CPLX = {np.dtype(np.float32): np.complex64, np.dtype(np.complex64): np.complex64}


def _eig_impl(a: Array) -> Array:
    w, v = _checked("eig", np.linalg.eig, a)
    cdt = _CPLX.get(np.dtype(a.dtype), np.complex128)
    return np.concatenate([w[..., None, :], v], axis=-2).astype(cdt, copy=False)


# The eigenvector rules read a constant of the primal point: the one-hot of each
# eigenvector's largest entry.  A nondifferentiable primitive, so a traced rule emits it
# as an equation (its value is not known at trace time) and a recording rule records it.
EIG_MASK = nondifferentiable(defprimitive("eig_mask", L.eig_mask, 1))
defbatch(EIG_MASK, leading("eig_mask"))  # the mask reads only the last two axes


def _mask(ops: Any, v: Array) -> Array:
    return L.eig_mask(v) if ops is NUMPY_NS else ops.apply(EIG_MASK, v)


def _eig_vjp(ops: Any, g: Array, packed: Array) -> Array:
    B = _B(ops)
    w, v = packed[..., 0, :], packed[..., 1:, :]
    return L.eig_vjp(B, w, v, _mask(ops, v), _nz(g[..., 0, :]), _nz(g[..., 1:, :]))


def _eig_jvp(ops: Any, t: Array, packed: Array) -> Array:
    B = _B(ops)
    w, v = packed[..., 0, :], packed[..., 1:, :]
    dw, dv = L.eig_jvp(B, w, v, _mask(ops, v), t)
    return ops.concatenate([B.row(dw), dv], axis=-2)


EIG = defprimitive("eig", _eig_impl, 1, save_out=True, vjp=(_eig_vjp,), jvp=(_eig_jvp,))


# -- svd(full_matrices=True) of a non-square matrix: values only (as JAX) ------------------------
def _svd_full_impl(a: Array) -> Array:
    u, s, vh = _checked("svd", np.linalg.svd, a, True)
    b = a.shape[:-2]
    return np.concatenate(
        [u.reshape((*b, -1)), s.astype(u.dtype), vh.reshape((*b, -1))], axis=-1
    )


# No rules: differentiating raises MissingRuleError, as jax.numpy.linalg.svd raises
# NotImplementedError for full_matrices=True on non-square input (the complement columns
# of U or V are not determined by the matrix, so neither is their derivative).
SVD_FULL = defprimitive("svd_full_matrices", _svd_full_impl, 1)


# -- public functions ---------------------------------------------------------------------------
def _herm(a: Any) -> EagerTensor:
    return elementwise.mul(elementwise.add(a, bind(CONJ, shape.swapaxes(a, -1, -2))), 0.5)


def _batch(op: str, sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        raise ArgumentError(
            f"{op}: the batch shapes of the matrix {sa} and the right-hand side {sb} do not "
            "broadcast"
        ) from None


def solve(a: Any, b: Any) -> EagerTensor:
    """Solve ``a @ x = b`` for (batches of) square ``a``; O(n^3 + n^2 k) per matrix (LU).

    ``b`` is a vector when ``b.ndim == 1`` (numpy 2 / JAX >= 0.5: broadcast over ``a``'s
    batch), otherwise a (batch of) ``(n, k)`` matrices whose batch shape broadcasts with
    ``a``'s (numpy rules; gradients are summed back over broadcast axes).  Raises
    ``LinAlgError`` naming the op for a singular matrix.  Saves ``a`` and ``x``.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError, LinAlgError."""
    sa, sb = _square("solve", a), _shape(b)
    if len(sb) == 1:
        if sb[0] != sa[-1]:
            raise ArgumentError(f"solve: right-hand side shape {sb} does not fit matrix shape {sa}")
        x = bind(SOLVE, a, shape.reshape(b, (sb[0], 1)))
        return shape.reshape(x, (*sa[:-2], sb[0]))
    if sb[-2] != sa[-1]:
        raise ArgumentError(f"solve: right-hand side shape {sb} does not fit matrix shape {sa}")
    _batch("solve", sa, sb)
    return bind(SOLVE, a, b)


def solve_triangular(
    a: Any, b: Any, *, lower: bool = False, trans: int = 0, unit_diagonal: bool = False
) -> EagerTensor:
    """Solve ``op(a) @ x = b`` reading only ``a``'s lower or upper triangle
    (``jax.scipy.linalg.solve_triangular``'s parameters; ``trans`` 0/1/2 = N/T/C).

    ``b``: ``(..., n, k)`` or, when ``b.ndim == a.ndim - 1`` (JAX's rule), vectors
    ``(..., n)``; batch shapes broadcast (numpy rules).  LAPACK's triangular solve
    (``scipy.linalg.solve_triangular``), no factorization; its VJP and JVP are triangular
    solves too.  A single matrix against a batch of right-hand sides is one solve.
    Saves ``a`` and ``x``.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^2 k) per matrix
    (``k`` right-hand sides).

    Raises:
        ArgumentError: ``trans`` is not 0, 1 or 2, or the shapes do not fit.
        ArgumentTypeError: ``a`` or ``b`` is not a value.
        LinAlgError: a zero diagonal entry (naming the op)."""
    sa, sb = _square("solve_triangular", a), _shape(b)
    if trans not in (0, 1, 2):
        raise ArgumentError(f"solve_triangular: trans must be 0, 1 or 2 (N, T, C), got {trans!r}")
    kw = {"lower": bool(lower), "trans": int(trans), "unit": bool(unit_diagonal)}
    if len(sb) == len(sa) - 1:  # vectors (JAX's rule: b.ndim == a.ndim - 1)
        if sb[-1] != sa[-1]:
            raise ArgumentError(f"solve_triangular: right-hand side shape {sb} does not fit {sa}")
        _batch("solve_triangular", sa, (*sb, 1))
        return shape.reshape(bind(TRSOLVE, a, shape.reshape(b, (*sb, 1)), **kw), sb)
    if len(sb) < 2 or sb[-2] != sa[-1]:
        raise ArgumentError(f"solve_triangular: right-hand side shape {sb} does not fit {sa}")
    _batch("solve_triangular", sa, sb)
    return bind(TRSOLVE, a, b, **kw)


def inv(a: Any) -> EagerTensor:
    """Inverse of (batches of) square matrices; O(n^3). ``LinAlgError`` when singular.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError, LinAlgError."""
    _square("inv", a)
    return bind(INV, a)


def det(a: Any) -> EagerTensor:
    """Determinant, batched; O(n^3).  Its derivative is the adjugate ``adj(a)^T``
    (``det(a) inv(a)^T`` when invertible): at an exactly singular matrix it comes from an
    SVD, as JAX's (which uses an LU cofactor expansion).  The second derivative at an
    exactly singular matrix (``create_graph``) still raises ``LinAlgError``.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError, LinAlgError."""
    _square("det", a)
    return bind(DET, a)


def slogdet(a: Any) -> tuple[EagerTensor, EagerTensor]:
    """``(sign, log|det a|)``, batched; O(n^3).  One packed allocation; both results are
    metadata-only slices of it.  ``sign`` is complex (unit modulus) for complex ``a``
    and carries JAX's derivative ``i Im(tr(a^-1 da)) sign``.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError."""
    _square("slogdet", a)
    p = bind(SLOGDET, a)
    sign, logabs = p[..., 0], p[..., 1]
    if is_complex(p):
        logabs = bind(REAL, logabs)
    return sign, logabs


def cholesky(a: Any) -> EagerTensor:
    """Lower Cholesky factor of Hermitian positive-definite matrices, batched; O(n^3).

    Like ``jnp.linalg.cholesky`` the input is symmetrized first (``(a + a^H)/2``), so the
    gradient is Hermitian.  ``LinAlgError`` naming the op when not positive definite.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError, LinAlgError."""
    _square("cholesky", a)
    return bind(CHOLESKY, a)


def qr(a: Any) -> tuple[EagerTensor, EagerTensor]:
    """Reduced QR ``(q, r)`` of ``(..., m, n)`` (numpy/LAPACK's gauge), O(m n k).

    One packed allocation ``[q; r^T]``; ``q`` and ``r`` are metadata-only views of it.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    s = _shape(a)
    if len(s) < 2:
        raise ArgumentError(f"qr: expected (..., m, n), got shape {s}")
    p = bind(QR, a)
    m = s[-2]
    return p[..., :m, :], shape.swapaxes(p[..., m:, :], -1, -2)


def _uplo_hermitian(a: Any, lower: bool) -> EagerTensor:
    """The Hermitian matrix a factorization reads from one triangle of ``a`` (LAPACK's view:
    the strict triangle, its conjugate transpose, and the *real* part of the diagonal --
    LAPACK never reads the diagonal's imaginary part, so neither may the gradient)."""
    s = bind(TRIL, a, k=-1) if lower else bind(TRIU, a, k=1)
    h = elementwise.add(s, bind(CONJ, shape.swapaxes(s, -1, -2)))
    d = bind(TRIU, bind(TRIL, a, k=0), k=0)  # the diagonal alone
    if is_complex(d):
        d = elementwise.mul(elementwise.add(d, bind(CONJ, d)), 0.5)  # its real part, complex
    return elementwise.add(h, d)


def eigh(
    a: Any, UPLO: str | None = None, *, symmetrize_input: bool = True
) -> tuple[EagerTensor, EagerTensor]:
    """Eigenvalues (ascending, real) and eigenvectors of Hermitian matrices, batched; O(n^3).

    ``jnp.linalg.eigh``'s parameters: by default the input is symmetrized
    (``(a + a^H)/2``) and ``UPLO`` does not matter.  With ``symmetrize_input=False`` only
    the ``UPLO`` triangle (``"L"``, the default, or ``"U"``) is read, as by
    ``numpy.linalg.eigh``, and the gradient lands in that triangle.  At repeated
    eigenvalues the eigenvector derivatives are ``inf``/``nan`` (as in JAX); losses of the
    eigenvalues alone stay finite.  Eigenvector phases are LAPACK's: only gauge-invariant
    losses are meaningful.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError."""
    _square("eigh", a)
    if UPLO not in (None, "L", "U"):
        raise ArgumentError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    h = _herm(a) if symmetrize_input else _uplo_hermitian(a, UPLO != "U")
    p = bind(EIGH, h)
    w = p[..., 0, :]
    return (bind(REAL, w) if is_complex(p) else w), p[..., 1:, :]


def svd(
    a: Any, full_matrices: bool = False
) -> tuple[EagerTensor, EagerTensor, EagerTensor]:
    """SVD ``(u, s, vh)`` of ``(..., m, n)``; O(m n k).  Reduced by default (unlike numpy).

    Reduced: one packed allocation; the three results are metadata-only views of it.  At
    repeated (or, for non-square input, zero) singular values the singular-vector
    derivatives are ``inf``/``nan`` like JAX's; losses of ``s`` alone stay finite.
    ``full_matrices=True`` gives ``u`` ``(m, m)`` and ``vh`` ``(n, n)``; for square input it
    is the reduced SVD, for non-square input its values are numpy's and differentiating it
    raises ``MissingRuleError`` (JAX raises ``NotImplementedError``: the complement columns
    are not determined by ``a``).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    sa = _shape(a)
    if len(sa) < 2:
        raise ArgumentError(f"svd: expected (..., m, n), got shape {sa}")
    m, n = sa[-2], sa[-1]
    if full_matrices and m != n:
        p = bind(SVD_FULL, a)
        k = min(m, n)
        b = sa[:-2]
        s = p[..., m * m : m * m + k]
        return (
            shape.reshape(p[..., : m * m], (*b, m, m)),
            bind(REAL, s) if is_complex(p) else s,
            shape.reshape(p[..., m * m + k :], (*b, n, n)),
        )
    p = bind(SVD, a)
    s = p[..., m, :]
    return (
        p[..., :m, :],
        bind(REAL, s) if is_complex(p) else s,
        shape.swapaxes(p[..., m + 1 :, :], -1, -2),
    )


def eig(a: Any) -> tuple[EagerTensor, EagerTensor]:
    """Eigenvalues and right eigenvectors of general square matrices, batched; O(n^3).

    JAX's convention: both outputs are complex (complex64 for float32/complex64 input),
    each eigenvector has unit 2-norm and a real largest-magnitude entry (LAPACK's
    normalization), and the eigenvector derivative keeps that normalization
    (``jax.lax.linalg.eig(..., enable_eigvec_derivs=True)``).  Eigenvector derivatives
    assume distinct eigenvalues (``inf``/``nan`` otherwise); losses of the eigenvalues alone
    stay finite.  One packed allocation ``[w; V]``; the results are views of it.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError."""
    _square("eig", a)
    p = bind(EIG, a)
    return p[..., 0, :], p[..., 1:, :]


def eigvals(a: Any) -> EagerTensor:
    """Eigenvalues of general square matrices (complex, as :func:`eig`); O(n^3).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError."""
    return eig(a)[0]


def expm(a: Any) -> EagerTensor:
    """Matrix exponential (``scipy.linalg.expm``: scaling and squaring, Pade), batched.

    O(n^3) forward; the JVP and VJP are one ``expm`` of a ``2n x 2n`` block matrix each
    (the Frechet derivative), so they compose to any order.  Saves ``a``.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError."""
    _square("expm", a)
    return bind(EXPM, a)


def sqrtm(a: Any) -> EagerTensor:
    """Principal matrix square root (``scipy.linalg.sqrtm``, Schur method), batched; O(n^3).

    Real input gives a real result when scipy's root is real (e.g. positive definite
    input), else complex.  Derivatives solve the Sylvester equation ``X dX + dX X = dA``
    (``scipy.linalg.solve_sylvester``), differentiable again.  JAX's ``sqrtm`` has no
    derivative; ours is checked against finite differences.  Saves the result.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError."""
    _square("sqrtm", a)
    return bind(SQRTM, a)


def solve_sylvester(a: Any, b: Any, c: Any) -> EagerTensor:
    """``X`` with ``a @ X + X @ b = c`` (``scipy.linalg.solve_sylvester``), batched; O(n^3).

    Differentiable in all three arguments.  ``LinAlgError`` when ``a`` and ``-b`` share an
    eigenvalue.  Saves ``a``, ``b`` and ``X``.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError, LinAlgError."""
    sa, sb, sc = _square("solve_sylvester", a), _square("solve_sylvester", b), _shape(c)
    if sc[-2:] != (sa[-1], sb[-1]):
        raise ArgumentError(
            f"solve_sylvester: c has shape {sc}, expected (..., {sa[-1]}, {sb[-1]})"
        )
    return bind(SYLVESTER, a, b, c)


def pinv(a: Any, rtol: float | None = None, hermitian: bool = False) -> EagerTensor:
    """Moore-Penrose pseudo-inverse of ``(..., m, n)`` (SVD based), batched; O(m n k).

    Singular values below ``rtol * max(s)`` are dropped; ``rtol`` defaults to JAX's
    ``10 * max(m, n) * eps``.  ``hermitian=True`` symmetrizes the input first (as JAX).
    Derivative: Golub and Pereyra's formula (JAX's), valid where the rank is locally
    constant.  Saves ``a`` and the result.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    sa = _shape(a)
    if len(sa) < 2:
        raise ArgumentError(f"pinv: expected (..., m, n), got shape {sa}")
    if hermitian:
        _square("pinv", a)
        a = _herm(a)
    return bind(PINV, a, rtol=None if rtol is None else float(rtol))


def tril(x: Any, k: int = 0) -> EagerTensor:
    """Lower triangle of the last two axes (``numpy.tril``); linear. O(size).

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(TRIL, x, k=int(k))


def triu(x: Any, k: int = 0) -> EagerTensor:
    """Upper triangle of the last two axes (``numpy.triu``); linear. O(size).

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(TRIU, x, k=int(k))


def _offset(op: str, offset: Any) -> int:
    """``offset`` as an int: a Python or numpy integer (or a bool, as ``numpy.diagonal``
    and :func:`tenferro_ad.diagonal` take it); anything else is refused by type. O(1)."""
    try:
        return operator.index(offset)
    except TypeError:
        raise ArgumentTypeError(
            f"{op}: argument 'offset' must be an int, got {shown(offset)}"
        ) from None


def _diagonal_of(op: str, x: Any, offset: Any, axis1: Any, axis2: Any) -> EagerTensor:
    """:func:`diagonal` named ``op`` (``"diagonal"`` or ``"trace"``): ``x``, ``offset``,
    ``axis1`` and ``axis2`` are checked before anything runs or is recorded (O(ndim), no
    allocation), the axes as :func:`tenferro_ad.diagonal` checks them."""
    s = _shape(x)
    if len(s) < 2:
        raise ArgumentError(
            f"{op}: argument 'x' must have at least two axes, got shape {s}"
        )
    k = _offset(op, offset)
    a1, a2 = _axis_arg(op, axis1, len(s), "axis1"), _axis_arg(op, axis2, len(s), "axis2")
    if a1 == a2:
        raise ArgumentError(
            f"{op}: arguments 'axis1' and 'axis2' must be different axes, got {a1} twice"
        )
    # the parameters as the caller spelled them (negative axes stay negative)
    return bind(
        DIAGONAL, x, offset=k, axis1=operator.index(axis1), axis2=operator.index(axis2), shape=s
    )


def diagonal(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> EagerTensor:
    """``numpy.diagonal`` (a fresh array); linear, its transpose embeds into zeros.

    The arguments are checked before anything runs or is recorded, as
    :func:`tenferro_ad.diagonal` checks them.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).

    Raises:
        AxisError: ``axis1`` or ``axis2`` is out of range for ``x``'s rank (an
            ``IndexError`` and a ``ValueError``, as numpy's); the message names
            ``diagonal`` and the argument.
        ArgumentTypeError: ``offset``, ``axis1`` or ``axis2`` is not an integer (a string,
            a float, ``None``; a bool axis), or ``x`` is not a value.
        ArgumentError: ``axis1`` and ``axis2`` name the same axis, or ``x`` has fewer than
            two axes.
        DTypeError: ``x`` is an array of a dtype tenferro does not hold (strings).
        UseAfterMoveError: ``x`` is a consumed owner."""
    return _diagonal_of("diagonal", x, offset, axis1, axis2)


def trace(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> EagerTensor:
    """``numpy.trace`` (derived: the sum of :func:`diagonal`). O(n).

    Refusals are named ``trace`` (not ``diagonal``) and checked before anything runs.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).

    Raises:
        AxisError: ``axis1`` or ``axis2`` is out of range for ``x``'s rank; the message
            names ``trace`` and the argument.
        ArgumentTypeError: ``offset``, ``axis1`` or ``axis2`` is not an integer (a string,
            a float, ``None``; a bool axis), or ``x`` is not a value.
        ArgumentError: ``axis1`` and ``axis2`` name the same axis, or ``x`` has fewer than
            two axes.
        DTypeError: ``x`` is an array of a dtype tenferro does not hold (strings).
        UseAfterMoveError: ``x`` is a consumed owner."""
    return reduce.sum(_diagonal_of("trace", x, offset, axis1, axis2), axis=-1)


__all__ = [
    "cholesky",
    "det",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "expm",
    "pinv",
    "solve_sylvester",
    "sqrtm",
    "inv",
    "matmul",
    "qr",
    "slogdet",
    "solve",
    "solve_triangular",
    "svd",
    "trace",
    "tril",
    "triu",
]

# batching rules: every kernel here maps over leading batch axes (numpy.linalg's stacks,
# ``_linalg_math._batched``), so the batch axis rides in front; several arguments broadcast
# their batch axes as numpy does (the batched ones gain unit axes up to the common rank)
defbatch(INV, leading("inv"))
defbatch(DET, leading("det"))
defbatch(SLOGDET, leading("slogdet"))
defbatch(CHOLESKY, leading("cholesky"))
defbatch(QR, leading("qr"))
defbatch(EIGH, leading("eigh"))
defbatch(SVD, leading("svd"))
defbatch(EXPM, leading("expm"))
defbatch(SQRTM, leading("sqrtm"))
defbatch(PINV, leading("pinv"))
defbatch(EIG, leading("eig"))
defbatch(SVD_FULL, leading("svd_full_matrices"))
defbatch(SOLVE, broadcasting("solve"))
defbatch(TRSOLVE, broadcasting("triangular_solve"))
defbatch(SYLVESTER, broadcasting("sylvester"))
defbatch(DIAGONAL, leading("diagonal", shift=("axis1", "axis2"), prefix=("shape",)))
defbatch(DIAG_EMBED, leading("diag_embed", shift=("axis1", "axis2"), prefix=("shape",)))
defbatch(EYE_LIKE, unbatched_result("eye_like"))
