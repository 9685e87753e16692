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
from ._traced._trace import Tracer, trace
from ._traced._transform import grad, jvp, value_and_grad, vjp

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
