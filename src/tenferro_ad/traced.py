"""Traced mode: graphs and graph-to-graph transformations.

::

    import tenferro_ad as ad
    from tenferro_ad import traced

    g = ad.trace(lambda x, w: ad.sum(ad.tanh(x @ w)))(x0, w0)   # a Graph (shapes, dtypes)
    print(g)                                                    # jaxpr-style text
    dg = traced.grad(g, argnums=1)                              # another Graph
    hv = traced.jvp(dg)                                         # forward-over-reverse
    (gw,) = (traced.eval_graph(dg, x0, w0),)                    # numpy kernels -> owners
    bg = traced.vmap(g, in_axes=(0, None))                      # batched Graph

A :class:`Graph` is inert, immutable data: typed variables, equations over the same
``Primitive`` objects eager mode binds (with their static parameters), literals and
outputs, plus the argument/result structure (tuples, lists, dicts).  Every
transformation returns a new graph built with the primitives' own rules (one rule per
primitive, used by eager and traced mode alike), so they compose freely.

Graph-level functions here: :func:`eval_graph`, :func:`check`, :func:`dce`, :func:`jvp`,
:func:`vjp`, :func:`grad`, :func:`value_and_grad`, :func:`vmap`; :func:`retained` (what
a gradient program keeps between its forward and backward halves, and why: the traced
``tape.retained()``) and :func:`split_halves` (the two halves as separate graphs, to run
as two executions on one group: the residuals pass as that group's descriptors).

``ad.checkpoint(f, policy=...)`` called on traced values makes a checkpoint
:class:`Region`: reverse-mode transformations keep its boundary and re-emit its interior
in backward (annotated ``recompute``; compiled, those allocations are
``CHECKPOINT_RECOMPUTE_OUTPUT``).  Function-level entry points live at the top level:
``tenferro_ad.trace`` and ``tenferro_ad.vmap``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import ops as _ops
from ._core._namespace import _unbroadcast_axes
from ._core._primitive import RealTarget
from ._traced import _trace
from ._traced._batching import vmap_graph as vmap
from ._traced._eval import eval_graph
from ._traced._graph import (
    Eqn,
    Graph,
    GraphTypeError,
    Lit,
    Note,
    Region,
    TracerError,
    TreeDef,
    Var,
    dce,
)
from ._traced._graph import check_graph as check
from ._traced._retained import Halves, ProgramRetainedEntry, retained, split_halves
from ._traced._trace import TRACE_NS, Tracer, fill_namespace, trace
from ._traced._transform import grad, jvp, value_and_grad, vjp
from .ops import complex as _complex
from .ops import elementwise as _ew
from .ops import linalg as _la
from .ops import shape as _sh

__all__ = [
    "Eqn",
    "Graph",
    "GraphTypeError",
    "Halves",
    "Lit",
    "Note",
    "ProgramRetainedEntry",
    "Region",
    "Tracer",
    "TracerError",
    "TreeDef",
    "Var",
    "check",
    "dce",
    "eval_graph",
    "grad",
    "jvp",
    "retained",
    "split_halves",
    "trace",
    "value_and_grad",
    "vjp",
    "vmap",
]


# -- the tracing rule namespace and the Python operators of tracers
def _emit(prim: Any, *args: Any, **params: Any) -> Any:
    return TRACE_NS.apply(prim, *args, **params)


def _unbroadcast(g: Any, shape: tuple[int, ...]) -> Any:
    gs = tuple(g.shape)
    if gs != tuple(shape):
        axes = _unbroadcast_axes(gs, tuple(shape))
        g = _ops.sum(g, axis=axes)
        if tuple(g.shape) != tuple(shape):  # kept axes of extent 1 (no identity reshape)
            g = _ops.reshape(g, tuple(shape))
    if type(shape) is RealTarget and g.dtype.kind == "c":
        g = _emit(_complex.REAL, g)
    return g


def _astype(x: Any, dtype: Any) -> Any:
    return _emit(_ew.ASTYPE, x, dtype=np.dtype(getattr(dtype, "numpy", dtype)), src=x.dtype)


fill_namespace({
    "abs": _ops.abs, "add": _ops.add, "sub": _ops.sub, "mul": _ops.mul, "div": _ops.div,
    "neg": _ops.neg, "exp": _ops.exp, "log": _ops.log, "sin": _ops.sin, "cos": _ops.cos,
    "sqrt": _ops.sqrt, "sign": _ops.sign, "maximum": _ops.maximum, "where": _ops.where,
    "eq": _ops.equal, "gt": _ops.greater, "matmul": _ops.matmul, "sum": _ops.sum,
    "broadcast_to": _ops.broadcast_to, "concatenate": _ops.concatenate,
    "slice_pad": _ops.slice_pad, "scatter_add": _ops.scatter_add,
    "gather": lambda x, *, key: _ops.getitem(x, key),
    "reshape": lambda x, s: _emit(_sh.RESHAPE, x, shape=tuple(s), src=tuple(x.shape)),
    "transpose": lambda x, axes: _emit(_sh.TRANSPOSE, x, axes=tuple(axes)),
    "conj": lambda x: _emit(_complex.CONJ, x) if x.dtype.kind == "c" else x,
    "unbroadcast": _unbroadcast, "astype": _astype,
})
_trace.CANONICAL[_sh.RESHAPE_COPY] = _sh.RESHAPE


def _install_operators() -> None:
    bind = _trace._bind
    binary = {
        "add": _ew.ADD, "sub": _ew.SUB, "mul": _ew.MUL, "truediv": _ew.DIV, "pow": _ew.POW,
        "matmul": _la.MATMUL,
    }
    table: dict[str, Any] = {}
    for name, prim in binary.items():
        table[f"__{name}__"] = (lambda p: lambda self, o: bind(p, (self, o), {}))(prim)
        table[f"__r{name}__"] = (lambda p: lambda self, o: bind(p, (o, self), {}))(prim)
    for name, prim in {"lt": _ew.LT, "le": _ew.LE, "gt": _ew.GT, "ge": _ew.GE, "eq": _ew.EQ,
                       "ne": _ew.NE}.items():
        table[f"__{name}__"] = (lambda p: lambda self, o: bind(p, (self, o), {}))(prim)
    table.update({
        "__neg__": lambda self: bind(_ew.NEG, (self,), {}),
        "__pos__": lambda self: self,
        "__abs__": _ops.abs,
        "__getitem__": _ops.getitem,
        "reshape": _ops.reshape,
        "transpose": _ops.transpose,
        "sum": _ops.sum,
        "mean": _ops.mean,
        "astype": _ops.astype,
        "T": property(lambda self: _ops.transpose(self)),
    })
    for k, v in table.items():
        setattr(Tracer, k, v)


_install_operators()
