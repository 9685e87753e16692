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
* :mod:`._numpy_dispatch` — numpy functions and ufuncs on handles run these ops

Importing this package fills the handle-backed rule namespace and installs the Python
operators on ``EagerTensor``.  A new family file needs only ``defprimitive`` and a public
function calling ``bind``; import it here.
"""

from __future__ import annotations

from typing import Any

from .._core._dispatch import bind, bind1, bind2
from .._core._handle import EagerTensor
from .._core._namespace import HANDLE_NS, _unbroadcast_axes
from .._core._primitive import CastTarget, RealTarget
from . import derived, elementwise, linalg, reduce, shape
from ._axes import KERNEL_ERRORS, arg_error
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


def _h_unbroadcast(g: Any, shape: tuple[int, ...]) -> Any:
    gs = tuple(g.shape)
    if gs != tuple(shape):
        g = reshape(sum(g, axis=_unbroadcast_axes(gs, tuple(shape))), tuple(shape))
    if type(shape) is RealTarget and g.dtype.is_complex:
        from .complex import real  # the complex family loads after the core families

        g = real(g)
    elif type(shape) is CastTarget:
        dt = shape.dtype
        if g.dtype.is_complex and dt.kind != "c":
            from .complex import real

            g = real(g)
        if g._r("unbroadcast").a.dtype != dt:
            g = astype(g, dt)
    return g


def _install_namespace() -> None:
    ns: Any = HANDLE_NS
    table = {
        "add": add, "sub": sub, "mul": mul, "div": div, "neg": neg, "exp": exp, "log": log,
        "sin": sin, "cos": cos, "sqrt": sqrt, "sign": sign, "abs": abs,
        "conj": lambda x: x, "maximum": maximum, "where": where, "eq": equal,
        "gt": greater, "matmul": matmul, "sum": sum,
        "reshape": lambda x, s: reshape(x, tuple(s)),
        "transpose": lambda x, axes: transpose(x, tuple(axes)),
        "broadcast_to": broadcast_to, "unbroadcast": _h_unbroadcast, "astype": astype,
        "concatenate": concatenate, "slice_pad": slice_pad,
        "gather": lambda x, *, key: getitem(x, key),
        "scatter_add": scatter_add, "apply": bind,
    }
    for k, v in table.items():
        object.__setattr__(ns, k, v)


def _operator(prim: Any, name: str, swap: bool = False) -> Any:
    """A binary operator running ``prim`` (``swap``: the reflected one); a refusal names
    ``name`` and says which operand (``arguments 0 and 1``).  One frame, as a lambda; the
    ``try`` costs nothing until something is raised."""
    if swap:
        def reflected(a: Any, b: Any) -> Any:
            try:
                return bind2(prim, b, a)
            except KERNEL_ERRORS as e:
                raise arg_error(name, e) from None

        return reflected

    def op(a: Any, b: Any) -> Any:
        try:
            return bind2(prim, a, b)
        except KERNEL_ERRORS as e:
            raise arg_error(name, e) from None

    return op


def _install_operators() -> None:
    E = EagerTensor
    ADD, SUB, MUL, DIV = (
        elementwise.ADD, elementwise.SUB, elementwise.MUL, elementwise.DIV,
    )
    POW, MATMUL, NEG = elementwise.POW, linalg.MATMUL, elementwise.NEG

    ops_table: dict[str, Any] = {
        "__add__": _operator(ADD, "add"),
        "__radd__": _operator(ADD, "add", swap=True),
        "__sub__": _operator(SUB, "sub"),
        "__rsub__": _operator(SUB, "sub", swap=True),
        "__mul__": _operator(MUL, "mul"),
        "__rmul__": _operator(MUL, "mul", swap=True),
        "__truediv__": _operator(DIV, "div"),
        "__rtruediv__": _operator(DIV, "div", swap=True),
        "__pow__": _operator(POW, "pow"),
        "__rpow__": _operator(POW, "pow", swap=True),
        "__matmul__": _operator(MATMUL, "matmul"),
        "__rmatmul__": _operator(MATMUL, "matmul", swap=True),
        "__neg__": lambda self: bind1(NEG, self),
        "__abs__": abs,
        "__eq__": equal, "__ne__": not_equal, "__lt__": less, "__le__": less_equal,
        "__gt__": greater, "__ge__": greater_equal,
        "__getitem__": getitem,
        "reshape": reshape,
        "transpose": transpose,
        "sum": sum,
        "mean": mean,
        "astype": astype,
    }
    for k, v in ops_table.items():
        setattr(E, k, v)
    E.__hash__ = object.__hash__  # type: ignore[assignment]



def _register_owner_operators() -> None:
    """Python operators on storage owners and views run these ops (they borrow)."""
    import tenferro_storage as ts

    ADD, SUB, MUL, DIV = (
        elementwise.ADD, elementwise.SUB, elementwise.MUL, elementwise.DIV,
    )
    POW, MATMUL, NEG = elementwise.POW, linalg.MATMUL, elementwise.NEG
    ts.kernel.register_operators({
        "add": _operator(ADD, "add"),
        "sub": _operator(SUB, "sub"),
        "mul": _operator(MUL, "mul"),
        "truediv": _operator(DIV, "div"),
        "pow": _operator(POW, "pow"),
        "matmul": _operator(MATMUL, "matmul"),
        "neg": lambda a: bind(NEG, a),
        "abs": abs,
        "lt": less, "le": less_equal, "gt": greater, "ge": greater_equal,
        "getitem": getitem,
    })


_install_namespace()
_install_operators()
_register_owner_operators()


# numpy-coverage families (import after the core: they derive from it) and numpy dispatch
from . import _numpy_dispatch, fft, manip, math, products, scan, special  # noqa: E402, F401

_numpy_dispatch.install()
