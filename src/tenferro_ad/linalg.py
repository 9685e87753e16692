"""``tenferro_ad.linalg``: differentiable dense linear algebra, batched over leading axes.

Every function has JVP and VJP rules cross-validated against JAX (float64, complex128)
and works under ``create_graph`` (Hessian-vector products).  See
:mod:`tenferro_ad.ops.dense_linalg` for costs, residuals and the degenerate-input
behaviour (matches JAX: ``inf``/``nan`` vector derivatives at repeated eigenvalues or
singular values, finite value-only derivatives; ``det``'s backward at an exactly
singular matrix raises ``LinAlgError`` where JAX returns the adjugate).
"""

from .ops.dense_linalg import (
    cholesky,
    det,
    diagonal,
    eigh,
    inv,
    matmul,
    qr,
    slogdet,
    solve,
    solve_triangular,
    svd,
    trace,
    tril,
    triu,
)

__all__ = [
    "cholesky",
    "det",
    "diagonal",
    "eigh",
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
