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

from typing import Any

import numpy as np

from ._core._handle import EagerTensor
from ._traced._trace import Tracer
from .errors import ArgumentError, ArgumentTypeError
from .ops import elementwise as _ew
from .ops import reduce as _red
from .ops import shape as _sh
from .ops._util import dtype_of
from .ops.complex import conj as _conj
from .ops.complex import is_complex as _is_complex
from .ops.dense_linalg import (
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
from .ops.norm import _abs2, _real_dtype, norm

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
    """Eigenvalues of Hermitian matrices (ascending, real): :func:`eigh`'s first output.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError."""
    return eigh(a, UPLO, symmetrize_input=symmetrize_input)[0]


def matrix_power(a: Any, n: int) -> Any:
    """``a`` to the integer power ``n`` by repeated squaring, batched (``numpy``'s semantics).

    ``n = 0``: the identity (broadcast over the batch); ``n < 0``: powers of ``inv(a)``.
    ``O(log |n|)`` matrix products, each O(k^3).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError."""
    s = _square("matrix_power", a)
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise ArgumentTypeError(
            f"matrix_power: argument 'n' (the exponent) must be an integer, got "
            f"{type(n).__name__}" + (f" {n!r}" if isinstance(n, bool | float | str) else "")
        )
    n = int(n)
    if n == 0:
        eye = np.eye(s[-1], dtype=np.result_type(dtype_of(a), np.float32))
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


def cho_factor(a: Any, lower: bool = False) -> tuple[Any, bool]:
    """``(c, lower)`` for :func:`cho_solve` (``jax.scipy.linalg.cho_factor``): ``c`` is the
    lower Cholesky factor ``L`` (``a = L L^H``) or the upper ``U = L^H`` (``a = U^H U``),
    with zeros in the other triangle.  The input is symmetrized like :func:`cholesky`, so the
    gradient is Hermitian; ``jax.scipy.linalg.cho_factor`` reads one triangle and its
    derivative assumes a Hermitian tangent (the two agree on Hermitian directions).
    O(n^3).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError, LinAlgError."""
    lo = cholesky(a)
    if lower:
        return lo, True
    return _conj(_sh.swapaxes(lo, -1, -2)) if _is_complex(lo) else _sh.swapaxes(lo, -1, -2), False


def cho_solve(c_and_lower: tuple[Any, bool], b: Any) -> Any:
    """Solve ``a x = b`` from :func:`cho_factor`'s ``(c, lower)``: two triangular solves,
    O(n^2 k), reading only ``c``'s triangle (``jax.scipy.linalg.cho_solve``).  Its
    derivatives are triangular solves too.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError, LinAlgError."""
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
    Traced (``jit``/``vmap``), ``rank`` is a value of the program and the residuals are
    returned whenever ``m > n`` (shapes must be known at trace time: JAX's compiled
    behaviour, ``numpy_resid=False``).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n^3) per matrix.
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    sa, sb = _shape(a), _shape(b)
    if len(sa) != 2 or len(sb) not in (1, 2) or sb[0] != sa[0]:
        raise ArgumentError(f"lstsq: expected a (m, n) and b (m,) or (m, k), got {sa} and {sb}")
    m, n = sa
    rdt = _real_dtype(a)
    rc = float(np.finfo(rdt).eps) * max(m, n) if rcond is None else float(rcond)
    s = svd(a)[1]
    x = matmul(pinv(a, rtol=rc), b)
    resid: Any
    if isinstance(s, Tracer):  # traced: rank is a value of the program, shapes are static
        rank = _red.sum(_ew.greater(_ew.stop_gradient(s), rc * _red.max(_ew.stop_gradient(s))))
        full = m > n
    else:
        s_np = np.asarray(s.to_numpy())
        rank = np.asarray(int(np.sum(s_np > rc * s_np.max())) if s_np.size else 0)
        full = bool(rank == n) and m > n
    if full:
        resid = _red.sum(_abs2(_ew.sub(b, matmul(a, x))), axis=0)
        if len(sb) == 1:
            resid = _sh.reshape(resid, (1,))
    else:
        resid = np.zeros((0,), rdt)
    return x, resid, rank, s
