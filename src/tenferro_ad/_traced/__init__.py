"""Traced mode: the graph IR and its interpreters.

``_graph`` (inert frozen graphs, checking, printing), ``_trace`` (tracers and tracing),
``_eval`` (running a graph), ``_transform`` (graph-to-graph grad/vjp/jvp), ``_batching`` and
``_batch_rules`` (vmap), ``_compile`` (graphs to runtime programs), ``_jit`` and
``_retained`` (what a compiled program keeps).  Imports only the core below it.
"""
