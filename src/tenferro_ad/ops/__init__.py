"""Op families (one file each: primal kernel, residuals, VJP and JVP side by side).

* :mod:`.elementwise` — add, sub, mul, div, neg, pow, exp, log, log1p, expm1, sin, cos,
  tanh, sqrt, abs, sign, maximum, minimum, where, comparisons, astype, stop_gradient
* :mod:`.reduce` — sum, max, min, prod (mean is derived)
* :mod:`.shape` — reshape, transpose, broadcast_to, basic slicing, gather/scatter-add,
  concatenate (stack, expand_dims are derived)
* :mod:`.linalg` — matmul
* :mod:`.derived` — logsumexp, softmax, log_softmax
* :mod:`.math` — tan, sinh, ..., arctan2, hypot, log2, logaddexp, sinc, rounding, mod,
  fmax/fmin, nan_to_num and activations (relu, sigmoid, softplus, gelu, silu, ...)
* :mod:`.special` — scipy.special kernels (gammaln, digamma, polygamma, erf, erfinv, ...)
* :mod:`.scan` — var, std, cumsum, cumprod, diff, sort, argsort, partition, norm,
  logsumexp with ``b=``/``return_sign``
* :mod:`.manip` — numpy's array manipulation (ravel, squeeze, moveaxis, repeat, tile, roll,
  flip, rot90, pad, split, stacks, diag, constructors, linspace, select)
* :mod:`.products` — dot, vdot, inner, outer, kron, cross
* :mod:`.fft` — discrete Fourier transforms

This package only defines ops; :mod:`tenferro_ad._wiring` plugs them into the layers below
(the handle-backed rule namespace, the Python operators of handles, tracers and owners,
numpy's protocols).  A new family file needs only ``defprimitive`` and a public function
calling ``bind``; import it here.
"""

from __future__ import annotations

from . import derived, elementwise, linalg, reduce, shape
from .derived import log_softmax, logsumexp, softmax
from .elementwise import (
    abs,
    add,
    astype,
    clip,
    cos,
    div,
    equal,
    exp,
    expm1,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    log1p,
    maximum,
    minimum,
    mul,
    neg,
    not_equal,
    pow,
    sign,
    sin,
    sqrt,
    stop_gradient,
    sub,
    tanh,
    where,
)
from .linalg import matmul
from .reduce import max, mean, min, prod, sum
from .shape import (
    broadcast_to,
    concatenate,
    expand_dims,
    gather,
    getitem,
    reshape,
    scatter_add,
    slice_pad,
    stack,
    swapaxes,
    transpose,
)

__all__ = [
    "abs", "add", "astype", "broadcast_to", "clip", "concatenate", "cos", "derived", "div",
    "elementwise", "equal", "exp", "expand_dims", "expm1", "gather", "getitem", "greater",
    "greater_equal", "less", "less_equal", "linalg", "log", "log1p", "log_softmax",
    "logsumexp", "matmul", "max", "maximum", "mean", "min", "minimum", "mul", "neg",
    "not_equal", "pow", "prod", "reduce", "reshape", "scatter_add", "shape", "sign", "sin",
    "slice_pad", "softmax", "sqrt", "stack", "stop_gradient", "sub", "sum", "swapaxes",
    "tanh", "transpose", "where",
]


# numpy-coverage families (after the core families: they derive from them)
# the XLA lowering rule of every primitive above (ops/_lowering/, one module per family)
from . import (  # noqa: F401
    _lowering,
    fft,
    manip,
    math,
    products,
    scan,
    special,
)
