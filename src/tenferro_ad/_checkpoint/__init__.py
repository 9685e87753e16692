"""Checkpoint regions, in eager and traced mode.

``_region`` (the public front: ``checkpoint``, the block form, binding traced regions on
handles), ``_graph`` (policies, the recorder and the stored subgraph), ``_replay``
(publishing a region and recomputing it in backward) and ``_traced`` (regions as graph
annotations).  Imports the core and traced mode below it.
"""
