"""``norm``: numpy's ``linalg.norm`` (vector and matrix ords), differentiable.

The one norm of the package: ``tenferro_ad.norm``, ``tenferro_ad.linalg.norm`` and
``np.linalg.norm`` on handles all run :func:`norm`.  A composition of elementwise ops,
reductions and (for the 2, -2 and nuclear matrix norms) the SVD, so its derivatives follow.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError
from . import elementwise as ew
from . import reduce as rd
from . import shape as sh
from ._util import axis as _one_axis
from ._util import dtype_of, value_arg
from .complex import conj, is_complex, real
from .dense_linalg import _shape, svd

__all__ = ["norm"]


def _cplx(x: Any) -> bool:
    return is_complex(x)


def _abs2(x: Any) -> Any:
    return real(ew.mul(x, conj(x))) if _cplx(x) else ew.mul(x, x)


def _norm_axis(op: str, axis: Any, ndim: int) -> tuple[int, ...]:
    ax = axis if isinstance(axis, tuple | list) else (axis,)
    out = [_one_axis(op, a, ndim) for a in ax]  # AxisError / ArgumentTypeError naming 'axis'
    if len(set(out)) != len(out):
        raise ArgumentError(f"{op}: argument 'axis' {axis!r} repeats an axis")
    return tuple(out)


def _ord(ord: Any) -> Any:
    """``norm``'s ``ord`` checked: ``None``, a real number (a 0-d numpy array is read) or
    ``"fro"``/``"nuc"``; anything else raises naming the argument. O(1)."""
    if isinstance(ord, np.ndarray) and ord.ndim == 0 and ord.dtype.kind in "iuf":
        return ord.item()
    if ord is None or (isinstance(ord, str) and ord in ("fro", "nuc")):
        return ord
    if isinstance(ord, int | float | np.integer | np.floating) and not isinstance(ord, bool):
        return ord
    if isinstance(ord, str):  # numpy: a ValueError ("Invalid norm order")
        raise ArgumentError(
            f"norm: ord={ord!r} is not a norm order; give None, a real number, 'fro' or 'nuc'"
        )
    raise ArgumentTypeError(
        f"norm: argument 'ord' must be None, a real number, 'fro' or 'nuc', got "
        f"{type(ord).__name__}"
    )


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

    Cost: allocates the result; no copy; no sync; no dispatch; O(n); O(n^3) for matrix 2-norms.
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    sx = value_arg("norm", "x", x, imported=True)[0]
    ord = _ord(ord)
    nd = len(sx)
    if axis is None:
        if ord is None:
            r = ew.sqrt(rd.sum(_abs2(x)))
            return sh.reshape(r, (1,) * nd) if keepdims else r
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
        return ew.sqrt(rd.sum(_abs2(x), axis=ax, keepdims=keepdims))
    if isinstance(ord, str):
        raise ArgumentError(
            f"norm: invalid ord {ord!r} for a vector norm: arguments 'x', 'ord' and 'axis' do "
            "not fit (a matrix norm, taken over one axis)"
        )
    ax_ = ew.abs(x)
    if ord == math.inf:
        return rd.max(ax_, axis=ax, keepdims=keepdims)
    if ord == -math.inf:
        return rd.min(ax_, axis=ax, keepdims=keepdims)
    if ord == 0:
        nz = ew.astype(ew.not_equal(ew.stop_gradient(x), 0), np.dtype(_real_dtype(x)))
        return rd.sum(nz, axis=ax, keepdims=keepdims)
    if ord == 1:
        return rd.sum(ax_, axis=ax, keepdims=keepdims)
    p = float(ord)
    return ew.pow(rd.sum(ew.pow(ax_, p), axis=ax, keepdims=keepdims), 1.0 / p)


def _real_dtype(x: Any) -> Any:
    return np.finfo(np.result_type(dtype_of(x), np.float32)).dtype


def _matrix_norm(
    x: Any, ord: Any, axes: tuple[int, ...], keepdims: bool, nd: int
) -> Any:
    r0, c0 = axes
    if ord is None or ord == "fro":
        return ew.sqrt(rd.sum(_abs2(x), axis=axes, keepdims=keepdims))
    if ord in ("nuc", 2, -2):
        rest = [i for i in range(nd) if i not in axes]
        xt = sh.transpose(x, (*rest, r0, c0))
        s = svd(xt)[1]
        if ord == "nuc":
            r = rd.sum(s, axis=-1)
        elif ord == 2:
            r = rd.max(s, axis=-1)
        else:
            r = rd.min(s, axis=-1)
        return _keep(r, axes, nd) if keepdims else r
    if ord in (1, -1, math.inf, -math.inf):
        sum_ax, red_ax = (r0, c0) if ord in (1, -1) else (c0, r0)
        sums = rd.sum(ew.abs(x), axis=sum_ax, keepdims=True)
        pick = rd.max if ord in (1, math.inf) else rd.min
        r = pick(sums, axis=red_ax, keepdims=True)
        return r if keepdims else sh.reshape(r, tuple(n for i, n in enumerate(_shape(x))
                                                      if i not in axes))
    raise ArgumentError(
        f"norm: invalid ord {ord!r} for a matrix norm: arguments 'x', 'ord' and 'axis' do not "
        "fit (a matrix norm takes None, 'fro', 'nuc', 1, -1, 2, -2, inf or -inf)"
    )


def _keep(r: Any, axes: tuple[int, ...], nd: int) -> Any:
    s = list(_shape(r))
    for a in sorted(axes):
        s.insert(a, 1)
    return sh.reshape(r, tuple(s))
