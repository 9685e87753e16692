"""XLA lowerings of the pointwise families: ``ops/elementwise.py``, ``ops/math.py``,
``ops/special.py``, ``ops/complex.py`` and the core's ``identity``.

Rule signature: ``rule(x, *args, **params)`` with ``x.np`` = ``jax.numpy``, ``x.scipy`` =
``jax.scipy``, ``x.lax``; the lowerer casts each result to the equation's dtype.
"""

from __future__ import annotations

import math
from typing import Any

from ..._core._primitive import IDENTITY, Primitive
from ..._traced._lowering import deflower
from .. import complex as C
from .. import elementwise as E
from .. import math as M
from .. import special as S


def _np(name: str) -> Any:
    """The rule ``x.np.<name>(*args)`` (a jax.numpy function of the same meaning)."""

    def rule(x: Any, *args: Any, **params: Any) -> Any:
        return getattr(x.np, name)(*args)

    rule.__name__ = f"lower_{name}"
    return rule


def _special(name: str) -> Any:
    """The rule ``x.scipy.special.<name>(*args)``."""

    def rule(x: Any, *args: Any, **params: Any) -> Any:
        return getattr(x.scipy.special, name)(*args)

    rule.__name__ = f"lower_{name}"
    return rule


def _same(x: Any, a: Any, **params: Any) -> Any:
    return x.np.asarray(a)


def _astype(x: Any, a: Any, *, dtype: Any, src: Any) -> Any:
    a = x.np.asarray(a)
    if x.np.iscomplexobj(a) and x.np.dtype(dtype).kind != "c":
        a = x.np.real(a)
    return a.astype(dtype)


def _div(x: Any, a: Any, b: Any) -> Any:
    return x.np.true_divide(a, b)


def _relu(x: Any, a: Any) -> Any:
    return x.np.maximum(a, x.np.zeros((), x.np.asarray(a).dtype))


def _fmax_mask(x: Any, a: Any, b: Any, *, lt: bool) -> Any:
    cmp = x.np.less(a, b) if lt else x.np.greater(a, b)
    return x.np.logical_or(cmp, x.np.isnan(b))


def _round(x: Any, a: Any, *, decimals: int) -> Any:
    return x.np.round(a, decimals)


def _sinc_d(x: Any, a: Any) -> Any:
    a = x.np.asarray(a)
    zero = a == 0
    safe = x.np.where(zero, x.np.ones((), a.dtype), a)
    d = (x.np.cos(math.pi * safe) - x.np.sinc(safe)) / safe
    return x.np.where(zero, x.np.zeros((), d.dtype), d)


def _polygamma(x: Any, a: Any, *, n: int) -> Any:
    return x.scipy.special.polygamma(n, a)


def _real(x: Any, a: Any, **params: Any) -> Any:
    return x.np.real(a)


def _imag(x: Any, a: Any, **params: Any) -> Any:
    return x.np.imag(a)


def _real_t(x: Any, a: Any) -> Any:
    a = x.np.asarray(a)
    ctype = x.np.complex64 if a.dtype in (x.np.float32, x.np.complex64) else x.np.complex128
    return a.astype(ctype)


def _imag_t(x: Any, a: Any) -> Any:
    return _real_t(x, a) * (-1j)


def _view_as_real(x: Any, z: Any) -> Any:
    return x.np.stack([x.np.real(z), x.np.imag(z)], axis=-1)


def _view_as_complex(x: Any, a: Any) -> Any:
    return x.lax.complex(a[..., 0], a[..., 1])


_BY_NAME: dict[Primitive, str] = {
    E.ADD: "add", E.SUB: "subtract", E.NEG: "negative", E.MUL: "multiply",
    E.POW: "power", E.EXP: "exp", E.LOG: "log", E.LOG1P: "log1p", E.EXPM1: "expm1",
    E.SIN: "sin", E.COS: "cos", E.TANH: "tanh", E.SQRT: "sqrt", E.ABS: "abs",
    E.SIGN: "sign", E.MAXIMUM: "maximum", E.MINIMUM: "minimum", E.WHERE: "where",
    E.LT: "less", E.LE: "less_equal", E.GT: "greater", E.GE: "greater_equal",
    E.EQ: "equal", E.NE: "not_equal",
    M.TAN: "tan", M.SINH: "sinh", M.COSH: "cosh", M.ARCSIN: "arcsin", M.ARCCOS: "arccos",
    M.ARCTAN: "arctan", M.ARCSINH: "arcsinh", M.ARCCOSH: "arccosh", M.ARCTANH: "arctanh",
    M.ARCTAN2: "arctan2", M.HYPOT: "hypot", M.LOG2: "log2", M.LOG10: "log10",
    M.EXP2: "exp2", M.CBRT: "cbrt", M.ISNAN: "isnan", M.ISINF: "isinf",
    M.ISFINITE: "isfinite", M.LOGADDEXP: "logaddexp", M.LOGADDEXP2: "logaddexp2",
    M.SINC: "sinc", M.FLOOR: "floor", M.CEIL: "ceil", M.TRUNC: "trunc", M.RINT: "rint",
    M.MOD: "mod", M.FMOD: "fmod", M.FMAX: "fmax", M.FMIN: "fmin",
    M.LOGICAL_AND: "logical_and", M.LOGICAL_OR: "logical_or",
    M.LOGICAL_XOR: "logical_xor", M.LOGICAL_NOT: "logical_not",
    C.CONJ: "conj", C.ANGLE: "angle",
}
_SPECIAL: dict[Primitive, str] = {
    S.ERF: "erf", S.EXPIT: "expit", S.DIGAMMA: "digamma", S.GAMMALN: "gammaln",
    S.BETALN: "betaln", S.GAMMAINC: "gammainc", S.GAMMAINCC: "gammaincc", S.ERFC: "erfc",
    S.ERFINV: "erfinv", S.NDTR: "ndtr", S.NDTRI: "ndtri", S.LOG_NDTR: "log_ndtr",
    S.LOGIT: "logit", S.XLOGY: "xlogy", S.XLOG1PY: "xlog1py",
}
for _prim, _name in _BY_NAME.items():
    deflower(_prim, _np(_name))
for _prim, _name in _SPECIAL.items():
    deflower(_prim, _special(_name))

deflower(IDENTITY, _same)
deflower(E.SAME, _same)
deflower(E.STOP_GRADIENT, _same)
deflower(E.DIV, _div)
deflower(E.ASTYPE, _astype)
deflower(M.RELU, _relu)
deflower(M.FPICK, _fmax_mask)
deflower(M.ROUND, _round)
deflower(M.SINC_D, _sinc_d)
deflower(S.POLYGAMMA, _polygamma)
deflower(C.REAL, _real)
deflower(C.IMAG, _imag)
deflower(C.REAL_T, _real_t)
deflower(C.IMAG_T, _imag_t)
deflower(C.VIEW_AS_REAL, _view_as_real)
deflower(C.VIEW_AS_COMPLEX, _view_as_complex)
