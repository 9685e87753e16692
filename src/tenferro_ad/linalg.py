"""``tenferro_ad.linalg``: differentiable dense linear algebra, batched over leading axes.

Every function has JVP and VJP rules cross-validated against JAX (float32, float64 and
complex where JAX supports it) and works under ``create_graph`` (second derivatives).
See :mod:`tenferro_ad.ops.dense_linalg` for the primitives' costs, residuals and the
degenerate-input behaviour (as JAX: ``inf``/``nan`` vector derivatives at repeated
eigenvalues or singular values, finite value-only derivatives; ``det``'s derivative at an
exactly singular matrix is the adjugate).  The functions defined here (:func:`norm`,
:func:`matrix_power`, :func:`eigvalsh`, :func:`cho_factor`, :func:`cho_solve`,
:func:`lstsq`) are compositions of those primitives: their derivatives follow.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._core._handle import EagerTensor
from .errors import ArgumentError, ArgumentTypeError
from .ops import elementwise as _ew
from .ops import reduce as _red
from .ops import shape as _sh
from .ops.complex import conj as _conj
from .ops.complex import is_complex as _is_complex
from .ops.complex import real as _real
from .ops.dense_linalg import (
    _np,
    _shape,
    _square,
    cholesky,
    det,
    diagonal,
    eig,
    eigh,
    eigvals,
    expm,
    inv,
    matmul,
    pinv,
    qr,
    slogdet,
    solve,
    solve_sylvester,
    solve_triangular,
    sqrtm,
    svd,
    trace,
    tril,
    triu,
)

__all__ = [
    "cho_factor",
    "cho_solve",
    "cholesky",
    "det",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "expm",
    "inv",
    "lstsq",
    "matmul",
    "matrix_power",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_sylvester",
    "solve_triangular",
    "sqrtm",
    "svd",
    "trace",
    "tril",
    "triu",
]


def eigvalsh(a: Any, UPLO: str | None = None, *, symmetrize_input: bool = True) -> Any:
    """Eigenvalues of Hermitian matrices (ascending, real): :func:`eigh`'s first output."""
    return eigh(a, UPLO, symmetrize_input=symmetrize_input)[0]


def matrix_power(a: Any, n: int) -> Any:
    """``a`` to the integer power ``n`` by repeated squaring, batched (``numpy``'s semantics).

    ``n = 0``: the identity (broadcast over the batch); ``n < 0``: powers of ``inv(a)``.
    O(log |n|) matrix products, each O(k^3).
    """
    s = _square("matrix_power", a)
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise ArgumentTypeError(
            f"matrix_power: argument 'n' (the exponent) must be an integer, got "
            f"{type(n).__name__}" + (f" {n!r}" if isinstance(n, bool | float | str) else "")
        )
    n = int(n)
    if n == 0:
        eye = np.eye(s[-1], dtype=np.result_type(_np(a).dtype, np.float32))
        return _sh.broadcast_to(eye, s)
    if n == 1:
        return a if isinstance(a, EagerTensor) else _sh.reshape(a, s)  # a handle, no copy
    base = inv(a) if n < 0 else a
    n = abs(n)
    result: Any = None
    while True:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if not n:
            return result
        base = matmul(base, base)


def _cplx(x: Any) -> bool:
    return _is_complex(x) if isinstance(x, EagerTensor) else bool(np.iscomplexobj(_np(x)))


def _abs2(x: Any) -> Any:
    return _real(_ew.mul(x, _conj(x))) if _cplx(x) else _ew.mul(x, x)


def _norm_axis(op: str, axis: Any, ndim: int) -> tuple[int, ...]:
    from .ops._util import axis as _one_axis

    ax = axis if isinstance(axis, tuple | list) else (axis,)
    out = [_one_axis(op, a, ndim) for a in ax]  # AxisError / ArgumentTypeError naming 'axis'
    if len(set(out)) != len(out):
        raise ArgumentError(f"{op}: argument 'axis' {axis!r} repeats an axis")
    return tuple(out)


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """Vector or matrix norm with ``numpy.linalg.norm``'s semantics, differentiable.

    Vector ords (one axis, or a 1-d input): ``None``/2 (Euclidean), 1, ``inf``, ``-inf``,
    0 (count of non-zeros, no gradient) and any other real ``p`` (``sum |x|^p ^ 1/p``).
    Matrix ords (two axes, or a 2-d input): ``None``/``"fro"``, ``"nuc"`` (sum of singular
    values), 2 / -2 (largest / smallest singular value), 1 / -1 (max / min column sum),
    ``inf`` / ``-inf`` (max / min row sum).  ``axis=None`` with ``ord=None`` flattens any
    input (Euclidean norm of all entries).  Gradients as JAX's (``nan`` for the Euclidean
    norm at exactly 0, subgradients picked by max/min at ties).  Cost O(size), or an SVD
    for 2, -2 and ``"nuc"``.  ``x``, ``ord`` and ``axis`` are checked first; an error names
    the argument (or the arguments that do not fit together).
    """
    from .ops._util import value_arg
    from .ops.scan import _ord

    sx = value_arg("norm", "x", x, imported=True)[0]
    ord = _ord(ord)
    nd = len(sx)
    if axis is None:
        if ord is None:
            r = _ew.sqrt(_red.sum(_abs2(x)))
            return _sh.reshape(r, (1,) * nd) if keepdims else r
        if nd not in (1, 2):
            raise ArgumentError(
                f"norm: ord={ord!r} needs a 1-d or 2-d input or an axis: arguments 'x', 'ord' "
                f"and 'axis' do not fit ('x' has shape {sx})"
            )
        axes = tuple(range(nd))
    else:
        axes = _norm_axis("norm", axis, nd)
    if len(axes) == 1:
        return _vector_norm(x, ord, axes[0], keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes, keepdims, nd)
    raise ArgumentError(f"norm: argument 'axis' must name one or two axes, got {axis!r}")


def _vector_norm(x: Any, ord: Any, ax: int, keepdims: bool) -> Any:
    if ord is None or ord == 2:
        return _ew.sqrt(_red.sum(_abs2(x), axis=ax, keepdims=keepdims))
    if isinstance(ord, str):
        raise ArgumentError(
            f"norm: invalid ord {ord!r} for a vector norm: arguments 'x', 'ord' and 'axis' do "
            "not fit (a matrix norm, taken over one axis)"
        )
    ax_ = _ew.abs(x)
    if ord == math.inf:
        return _red.max(ax_, axis=ax, keepdims=keepdims)
    if ord == -math.inf:
        return _red.min(ax_, axis=ax, keepdims=keepdims)
    if ord == 0:
        nz = _ew.astype(_ew.not_equal(_ew.stop_gradient(x), 0), np.dtype(_real_dtype(x)))
        return _red.sum(nz, axis=ax, keepdims=keepdims)
    if ord == 1:
        return _red.sum(ax_, axis=ax, keepdims=keepdims)
    p = float(ord)
    return _ew.pow(_red.sum(_ew.pow(ax_, p), axis=ax, keepdims=keepdims), 1.0 / p)


def _real_dtype(x: Any) -> Any:
    return np.finfo(np.result_type(_np(x).dtype, np.float32)).dtype


def _matrix_norm(
    x: Any, ord: Any, axes: tuple[int, ...], keepdims: bool, nd: int
) -> Any:
    r0, c0 = axes
    if ord is None or ord == "fro":
        return _ew.sqrt(_red.sum(_abs2(x), axis=axes, keepdims=keepdims))
    if ord in ("nuc", 2, -2):
        rest = [i for i in range(nd) if i not in axes]
        xt = _sh.transpose(x, (*rest, r0, c0))
        s = svd(xt)[1]
        if ord == "nuc":
            r = _red.sum(s, axis=-1)
        elif ord == 2:
            r = _red.max(s, axis=-1)
        else:
            r = _red.min(s, axis=-1)
        return _keep(r, axes, nd) if keepdims else r
    if ord in (1, -1, math.inf, -math.inf):
        sum_ax, red_ax = (r0, c0) if ord in (1, -1) else (c0, r0)
        sums = _red.sum(_ew.abs(x), axis=sum_ax, keepdims=True)
        pick = _red.max if ord in (1, math.inf) else _red.min
        r = pick(sums, axis=red_ax, keepdims=True)
        return r if keepdims else _sh.reshape(r, tuple(n for i, n in enumerate(_shape(x))
                                                      if i not in axes))
    raise ArgumentError(
        f"norm: invalid ord {ord!r} for a matrix norm: arguments 'x', 'ord' and 'axis' do not "
        "fit (a matrix norm takes None, 'fro', 'nuc', 1, -1, 2, -2, inf or -inf)"
    )


def _keep(r: Any, axes: tuple[int, ...], nd: int) -> Any:
    s = list(_shape(r))
    for a in sorted(axes):
        s.insert(a, 1)
    return _sh.reshape(r, tuple(s))


def cho_factor(a: Any, lower: bool = False) -> tuple[Any, bool]:
    """``(c, lower)`` for :func:`cho_solve` (``jax.scipy.linalg.cho_factor``): ``c`` is the
    lower Cholesky factor ``L`` (``a = L L^H``) or the upper ``U = L^H`` (``a = U^H U``),
    with zeros in the other triangle.  The input is symmetrized like :func:`cholesky`, so the
    gradient is Hermitian; ``jax.scipy.linalg.cho_factor`` reads one triangle and its
    derivative assumes a Hermitian tangent (the two agree on Hermitian directions).
    O(n^3)."""
    lo = cholesky(a)
    if lower:
        return lo, True
    return _conj(_sh.swapaxes(lo, -1, -2)) if _is_complex(lo) else _sh.swapaxes(lo, -1, -2), False


def cho_solve(c_and_lower: tuple[Any, bool], b: Any) -> Any:
    """Solve ``a x = b`` from :func:`cho_factor`'s ``(c, lower)``: two triangular solves,
    O(n^2 k), reading only ``c``'s triangle (``jax.scipy.linalg.cho_solve``).  Its
    derivatives are triangular solves too."""
    c, lower = c_and_lower
    if lower:
        y = solve_triangular(c, b, lower=True, trans=0)
        return solve_triangular(c, y, lower=True, trans=2)
    y = solve_triangular(c, b, lower=False, trans=2)
    return solve_triangular(c, y, lower=False, trans=0)


def lstsq(
    a: Any, b: Any, rcond: float | None = None
) -> tuple[Any, Any, np.ndarray[Any, Any], Any]:
    """Least squares ``(x, residuals, rank, s)`` as ``numpy.linalg.lstsq`` / ``jnp``'s.

    ``x = pinv(a, rcond) @ b`` (pseudo-inverse derivative, JAX's rule); ``residuals`` is the
    squared residual norm per column when ``a`` has full column rank and ``m > n``, else
    an empty array; ``rank`` (no gradient) counts singular values above
    ``rcond * max(s)`` (``rcond`` defaults to ``eps * max(m, n)``); ``s`` are the singular
    values (differentiable).  ``a``: ``(m, n)``; ``b``: ``(m,)`` or ``(m, k)``.  O(m n k).
    """
    sa, sb = _shape(a), _shape(b)
    if len(sa) != 2 or len(sb) not in (1, 2) or sb[0] != sa[0]:
        raise ArgumentError(f"lstsq: expected a (m, n) and b (m,) or (m, k), got {sa} and {sb}")
    m, n = sa
    rdt = _real_dtype(a)
    rc = float(np.finfo(rdt).eps) * max(m, n) if rcond is None else float(rcond)
    s = svd(a)[1]
    s_np = np.asarray(s.to_numpy())
    rank = np.asarray(int(np.sum(s_np > rc * s_np.max())) if s_np.size else 0)
    x = matmul(pinv(a, rtol=rc), b)
    resid: Any
    if rank == n and m > n:
        resid = _red.sum(_abs2(_ew.sub(b, matmul(a, x))), axis=0)
        if len(sb) == 1:
            resid = _sh.reshape(resid, (1,))
    else:
        resid = np.zeros((0,), rdt)
    return x, resid, rank, s
