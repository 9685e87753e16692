"""Evaluating a graph on concrete values: numpy kernels in order, owners out.

Inputs are *borrowed*: a ``Tensor`` owner or view is read under a shared borrow for the
duration of the call (nothing is consumed), a numpy array or scalar is read directly.
Intermediates are dropped at their last use (the graph's liveness), so peak memory is
what the program needs, not the sum of its values.  Each output becomes a fresh owner
with one ``OPERATION_OUTPUT`` allocation; an output that is only a view (an input, an
alias of an input or of another value, a value listed twice) is a recorded
``MATERIALIZE`` copy (``kernel.materialize_output``), never a silent one; a literal
output is written afresh (a kernel write of a constant).

Handles and tracers are not evaluated here: ``traced.eval_graph`` binds each equation
for them instead (``_trace.run_bound``), so a graph inside a tape or a trace composes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import tenferro_storage as ts
from tenferro_storage._pytree import tree_flatten, tree_unflatten

from .._core._handle import EagerTensor
from .._core._state import STATE
from ._graph import Graph, Lit, Var, last_uses, type_str
from ._trace import Tracer, run_bound

_SCALARS = (bool, int, float, complex, np.generic)


def _read(x: Any, v: Var, i: int, borrows: list[Any]) -> np.ndarray[Any, Any]:
    if isinstance(x, np.ndarray):
        arr = x
    elif isinstance(x, _SCALARS):
        arr = np.asarray(x, dtype=v.dtype)  # a scalar takes the traced type (weakly typed)
    elif isinstance(x, ts.Tensor | ts.TensorView | ts.TensorViewMut):
        view = x.as_view()
        borrows.append(view)
        arr = ts.kernel.read_array(view)
    elif hasattr(x, "__array__") and hasattr(x, "shape") and hasattr(x, "dtype"):
        arr = np.asarray(x)  # a foreign array (jax's): read through numpy's protocol
    else:
        raise TypeError(
            f"eval_graph: input leaf {i} is a {type(x).__name__}; expected a numpy array, a "
            "Tensor owner or view (borrowed), a handle, or a Python scalar"
        )
    if not arr.dtype.isnative and arr.dtype.newbyteorder("=") == v.dtype:
        arr = arr.astype(v.dtype)  # big-endian data: converted, as numpy's operations do
    if tuple(arr.shape) != v.shape or arr.dtype != v.dtype:
        raise TypeError(
            f"eval_graph: input leaf {i} has type {type_str(arr.shape, arr.dtype)}, the graph "
            f"expects {type_str(v.shape, v.dtype)} (trace again for other shapes or dtypes)"
        )
    return arr


def _fresh(a: Any, inputs: set[int]) -> bool:
    return (
        type(a) is np.ndarray and a.base is None and a.flags.c_contiguous
        and a.flags.writeable and a.flags.owndata and id(a) not in inputs
    )


def eval_flat(graph: Graph, leaves: Sequence[Any]) -> list[ts.Tensor[Any, Any]]:
    """Run ``graph`` on flat input leaves; return one fresh owner per output leaf.

    Cost: one kernel call per equation; intermediates released at last use; no copy
    event except for outputs that are inputs returned as is or repeated."""
    if len(leaves) != len(graph.invars):
        raise TypeError(
            f"eval_graph: {len(leaves)} input leaves for a graph with {len(graph.invars)} inputs"
        )
    borrows: list[Any] = []
    try:
        env: dict[Var, Any] = {}
        for i, (x, v) in enumerate(zip(leaves, graph.invars, strict=True)):
            env[v] = _read(x, v, i, borrows)
        inputs = {id(a) for a in env.values()}
        last = last_uses(graph)
        for i, e in enumerate(graph.eqns):
            vals = [env[a] if isinstance(a, Var) else a.value for a in e.inputs]
            r = e.prim.impl(*vals, **e.params)
            env[e.out] = r if type(r) is np.ndarray else np.asarray(r)  # numpy scalar: 0-d
            for a in e.inputs:
                if isinstance(a, Var) and last[a] == i:
                    env.pop(a, None)
        return _owners(graph, env, leaves, inputs)
    finally:
        for view in borrows:
            view.release()


def _owners(
    graph: Graph, env: dict[Var, Any], leaves: Sequence[Any], inputs: set[int]
) -> list[ts.Tensor[Any, Any]]:
    reason = STATE.reason
    made: set[Var] = set()
    out: list[ts.Tensor[Any, Any]] = []
    for a in graph.outvars:
        if isinstance(a, Lit):  # a constant asked for as a result: written afresh
            arr = np.array(np.asarray(a.value, dtype=a.dtype), order="C")
            out.append(ts.kernel.adopt_output(arr, reason, "eval_graph (literal output)"))
            continue
        arr = env[a]
        if a in made or not _fresh(arr, inputs):
            # an input returned as is, a value returned twice, or a view of another value:
            # its bytes belong to someone else, so the owner is a recorded copy
            out.append(ts.kernel.materialize_output(arr, reason, "eval_graph"))
        else:
            out.append(ts.kernel.adopt_output(arr, reason, "eval_graph"))
            inputs.add(id(arr))  # never adopt one array twice
        made.add(a)
    return out


def eval_graph(graph: Graph, *args: Any) -> Any:
    """Evaluate ``graph`` on ``args`` (the structure it was traced with).

    Numpy arrays, scalars and ``Tensor`` owners/views (borrowed, not consumed): numpy
    kernels run in order, intermediates are released at their last use, and each output
    leaf is a fresh ``Tensor`` owner (see the module docstring for the ledger accounting).
    Handles or tracers among the arguments: each equation is bound as an eager op instead,
    so the results are handles recorded on the current tape (or equations of the current
    trace): graphs compose with ``tenferro_ad.grad`` and with tracing.

    Cost: allocates each equation's result; no copy; no sync; no dispatch; O(the graph's work).
    Raises: TypeError."""
    leaves, tree = tree_flatten(args)
    if tree != graph.in_tree:
        raise TypeError(
            "eval_graph: the arguments' structure differs from the one the graph was traced "
            f"with ({tree.num_leaves} leaves, {tree}; expected "
            f"{graph.in_tree.num_leaves}, {graph.in_tree})"
        )
    if any(type(x) is Tracer or isinstance(x, EagerTensor) for x in leaves):
        outs: list[Any] = run_bound(graph, leaves)
    else:
        outs = eval_flat(graph, leaves)
    return tree_unflatten(graph.out_tree, outs)
