"""The one place where upper layers plug into lower ones.

The layers (``_core`` -> ``_traced`` -> ``_checkpoint`` -> ``ops`` -> the API) import only
downwards; but a lower layer sometimes has to *run* something an upper one defines: the
reverse sweep calls rules through a namespace of ops, ``bind`` hands tracers to the tracer,
a handle's ``+`` runs the ``add`` op, a storage owner's ``@`` runs ``matmul``, numpy's
protocols run our ops.  Each lower layer offers a slot or a registration function for that,
and :func:`install` fills them all, once, when ``tenferro_ad`` is imported.  Nothing else in
the package fills a slot (``tests/test_layers.py`` keeps the imports pointing down).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_storage as ts

from . import _numpy_protocol, ops
from ._checkpoint._region import bind_regions, tape_checkpoint
from ._core._dispatch import bind, bind1, bind2, register_tracer
from ._core._handle import EagerTensor
from ._core._namespace import HANDLE_NS, unbroadcast
from ._core._tape import Tape
from ._traced import _trace
from ._traced._trace import CANONICAL, TRACE_NS, Tracer, fill_namespace
from ._traced._trace import _bind as trace_bind
from .ops import complex as cx
from .ops import elementwise as ew
from .ops import linalg as la
from .ops import shape as sh
from .ops._axes import KERNEL_ERRORS, arg_error
from .ops.complex import conj, real
from .ops.elementwise import (
    abs,
    add,
    astype,
    cos,
    div,
    equal,
    exp,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    maximum,
    mul,
    neg,
    not_equal,
    sign,
    sin,
    sqrt,
    sub,
    where,
)
from .ops.linalg import matmul
from .ops.reduce import mean, sum
from .ops.shape import (
    broadcast_to,
    concatenate,
    getitem,
    reshape,
    scatter_add,
    slice_pad,
    transpose,
)

__all__ = ["install"]

_INSTALLED: list[bool] = []


def install() -> None:
    """Fill every slot the lower layers offer (see the module docstring).  Called once by
    ``tenferro_ad/__init__.py``; a second call does nothing. O(number of ops)."""
    if _INSTALLED:
        return
    _fill_handle_namespace()
    _install_handle_operators()
    _register_owner_operators()
    ts.kernel.register_numpy(_numpy_protocol.install())  # owners and views: what handles run
    register_tracer(Tracer, trace_bind)
    _fill_trace_namespace()
    _install_tracer_operators()
    Tape.checkpoint = tape_checkpoint  # type: ignore[method-assign, assignment]  # (policy checked at run time)
    _trace.BIND_REGIONS = bind_regions
    _INSTALLED.append(True)


# -- the handle-backed rule namespace and the Python operators of handles and owners ------------
def _h_unbroadcast(g: Any, shape: tuple[int, ...]) -> Any:
    return unbroadcast(g, shape, sum, reshape, real, ew.convert)


def _fill_handle_namespace() -> None:
    ns: Any = HANDLE_NS
    table = {
        "add": add, "sub": sub, "mul": mul, "div": div, "neg": neg, "exp": exp, "log": log,
        "sin": sin, "cos": cos, "sqrt": sqrt, "sign": sign, "abs": abs,
        "conj": conj, "maximum": maximum, "where": where, "eq": equal,
        "gt": greater, "matmul": matmul, "sum": sum,
        "reshape": lambda x, s: reshape(x, tuple(s)),
        "transpose": lambda x, axes: transpose(x, tuple(axes)),
        "broadcast_to": broadcast_to, "unbroadcast": _h_unbroadcast, "astype": ew.convert,
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


def _install_handle_operators() -> None:
    E = EagerTensor
    ADD, SUB, MUL, DIV = (
        ew.ADD, ew.SUB, ew.MUL, ew.DIV,
    )
    POW, MATMUL, NEG = ew.POW, la.MATMUL, ew.NEG

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
    ADD, SUB, MUL, DIV = (
        ew.ADD, ew.SUB, ew.MUL, ew.DIV,
    )
    POW, MATMUL, NEG = ew.POW, la.MATMUL, ew.NEG
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


# -- the tracing rule namespace and the Python operators of tracers ------------------------------
def _emit(prim: Any, *args: Any, **params: Any) -> Any:
    return TRACE_NS.apply(prim, *args, **params)


def _traced_unbroadcast(g: Any, shape: tuple[int, ...]) -> Any:
    return unbroadcast(g, shape, ops.sum, ops.reshape, _traced_real, _traced_astype)


def _traced_real(x: Any) -> Any:
    return _emit(cx.REAL, x)


def _traced_astype(x: Any, dtype: Any) -> Any:
    return _emit(ew.ASTYPE, x, dtype=np.dtype(getattr(dtype, "numpy", dtype)), src=x.dtype)


def _fill_trace_namespace() -> None:
    fill_namespace({
        "abs": ops.abs, "add": ops.add, "sub": ops.sub, "mul": ops.mul, "div": ops.div,
        "neg": ops.neg, "exp": ops.exp, "log": ops.log, "sin": ops.sin, "cos": ops.cos,
        "sqrt": ops.sqrt, "sign": ops.sign, "maximum": ops.maximum, "where": ops.where,
        "eq": ops.equal, "gt": ops.greater, "matmul": ops.matmul, "sum": ops.sum,
        "broadcast_to": ops.broadcast_to, "concatenate": ops.concatenate,
        "slice_pad": ops.slice_pad, "scatter_add": ops.scatter_add,
        "gather": lambda x, *, key: ops.getitem(x, key),
        "reshape": lambda x, s: _emit(sh.RESHAPE, x, shape=tuple(s), src=tuple(x.shape)),
        "transpose": lambda x, axes: _emit(sh.TRANSPOSE, x, axes=tuple(axes)),
        "conj": lambda x: _emit(cx.CONJ, x) if x.dtype.kind == "c" else x,
        "unbroadcast": _traced_unbroadcast, "astype": _traced_astype,
    })
    CANONICAL[sh.RESHAPE_COPY] = sh.RESHAPE


def _install_tracer_operators() -> None:
    bind = trace_bind
    binary = {
        "add": ew.ADD, "sub": ew.SUB, "mul": ew.MUL, "truediv": ew.DIV, "pow": ew.POW,
        "matmul": la.MATMUL,
    }
    table: dict[str, Any] = {}
    for name, prim in binary.items():
        table[f"__{name}__"] = (lambda p: lambda self, o: bind(p, (self, o), {}))(prim)
        table[f"__r{name}__"] = (lambda p: lambda self, o: bind(p, (o, self), {}))(prim)
    for name, prim in {"lt": ew.LT, "le": ew.LE, "gt": ew.GT, "ge": ew.GE, "eq": ew.EQ,
                       "ne": ew.NE}.items():
        table[f"__{name}__"] = (lambda p: lambda self, o: bind(p, (self, o), {}))(prim)
    table.update({
        "__neg__": lambda self: bind(ew.NEG, (self,), {}),
        "__pos__": lambda self: self,
        "__abs__": ops.abs,
        "__getitem__": ops.getitem,
        "reshape": ops.reshape,
        "transpose": ops.transpose,
        "sum": ops.sum,
        "mean": ops.mean,
        "astype": ops.astype,
        "T": property(lambda self: ops.transpose(self)),
    })
    for k, v in table.items():
        setattr(Tracer, k, v)
