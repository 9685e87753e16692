"""``jit`` over a mesh: one SPMD XLA program per signature, compiled with input and
output shardings; XLA's partitioner inserts the collectives (nothing here moves bytes
between devices).

Arguments: a :class:`~tenferro_storage.sharding.ShardedTensor` is read where it is (its
shards' buffers, no copy) and must already have the layout the program was compiled for
(``ShardingError`` otherwise: reshard it explicitly); a numpy array, a Python scalar or a
host owner is uploaded with :func:`~tenferro_storage.sharding.shard` (one recorded
``TRANSFER`` per shard) and released after the call.  ``in_shardings`` (one entry per
positional argument: a spec for all its leaves or a pytree of specs matching it; ``None``
in place of the whole tuple: each sharded argument's own layout, everything else
replicated) and ``out_shardings`` (a spec for every output or a pytree of specs matching
the outputs; default: replicated) take JAX ``PartitionSpec`` values.

Results are new ``ShardedTensor`` owners: one ``OPERATION_OUTPUT`` allocation per shard
in its device's domain; an input returned as is, or a value returned twice, becomes an
explicit recorded copy (``reshard``), never a second owner of the same buffers.  Each
execution records one scratch allocation per addressable device when XLA needs
temporaries, released when the call returns.  The call waits for the results.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

import tenferro_storage as ts
from tenferro_storage._ledger import LEDGER, AllocationReason
from tenferro_storage._pytree import tree_flatten, tree_unflatten
from tenferro_storage.errors import ShardingError, shown
from tenferro_storage.providers._sharded import Mesh, ShardedTensor, adopt_array, shard
from tenferro_storage.providers._xla_support import jax_module

from .._core._handle import EagerTensor
from ..errors import ArgumentTypeError, ExecutionFailed
from ._graph import Graph, TreeDef, Var
from ._lowering import lower_graph, result_atoms
from ._trace import Tracer, aval_of, call_with_keywords, trace_flat

_OUT = AllocationReason.OPERATION_OUTPUT


@attrs.frozen(eq=False)
class ShardedProgram:
    """One compiled SPMD program: the traced graph, the XLA executable, each input's and
    result's sharding, where each output comes from (``("fresh", k)``: result ``k``;
    ``("input", i)``/``("repeat", j)``: a recorded copy of input ``i``/output ``j``), the
    scratch bytes per device and the seconds spent tracing and compiling."""

    graph: Graph
    executable: Any
    in_shardings: tuple[Any, ...]
    out_specs: tuple[Any, ...]
    sources: tuple[tuple[str, int], ...]
    scratch_bytes: int
    compile_seconds: float


def _is_spec(x: object) -> bool:
    jax = jax_module()
    return x is None or (jax is not None and isinstance(x, jax.sharding.PartitionSpec))


def leaf_specs(prefix: Any, tree: TreeDef, what: str) -> list[Any]:
    """One spec per leaf of ``tree`` from ``prefix``: a spec (or ``None``) for every leaf,
    or a pytree of specs whose structure matches ``tree`` down to its leaves. O(leaves)."""
    if _is_spec(prefix):
        return [prefix] * tree.num_leaves
    try:
        got = tree.flatten_up_to(prefix)
    except (ValueError, TypeError) as e:
        raise ShardingError(f"jit: {what} does not match the structure it shards: {e}") from None
    for g in got:
        if not _is_spec(g):
            raise ShardingError(
                f"jit: {what} holds {shown(g)} where a jax.sharding.PartitionSpec or None "
                "belongs"
            )
    return got


class ShardedJitted:
    """A function compiled per signature into one SPMD XLA program over ``mesh`` (see the
    module docstring); ``mesh=None``: the mesh of the sharded arguments."""

    def __init__(self, f: Callable[..., Any], mesh: Mesh | None, in_shardings: Any,
                 out_shardings: Any) -> None:
        if mesh is not None and not isinstance(mesh, Mesh):
            raise ArgumentTypeError(f"jit: argument 'mesh' must be a sharding.Mesh, got "
                                    f"{shown(mesh)}")
        self.f = f
        self.mesh = mesh
        self.in_shardings = in_shardings
        self.out_shardings = out_shardings
        self._cache: dict[Any, ShardedProgram] = {}
        functools.update_wrapper(self, f)

    @property
    def cache_size(self) -> int:
        """How many signatures have been traced and compiled. O(1)."""
        return len(self._cache)

    def __repr__(self) -> str:
        return f"jit({getattr(self.f, '__name__', 'f')}, mesh={self.mesh!r})"

    def _mesh_of(self, leaves: Sequence[Any]) -> Mesh:
        mesh = self.mesh
        for i, x in enumerate(leaves):
            if type(x) is ShardedTensor:
                if mesh is None:
                    mesh = x.mesh
                elif x.mesh is not mesh and x.mesh != mesh:
                    raise ShardingError(
                        f"jit: argument leaf {i} is sharded over {x.mesh!r}, the program over "
                        f"{mesh!r}; reshard it onto one mesh first"
                    )
        if mesh is None:
            raise ShardingError("jit: no mesh -- pass mesh=... or a sharded argument")
        return mesh

    def _in_specs(self, args: tuple[Any, ...], tree: TreeDef, leaves: Sequence[Any],
                  nargs: int) -> list[Any]:
        if self.in_shardings is None:
            return [x.spec if type(x) is ShardedTensor else None for x in leaves]
        given = self.in_shardings
        kids = tree.children()
        npos = len(kids) if nargs < 0 else nargs
        if _is_spec(given):
            given = (given,) * npos
        if not isinstance(given, tuple | list) or len(given) != npos:
            raise ShardingError(
                f"jit: in_shardings must have one entry per positional argument ({npos}), got "
                f"{shown(self.in_shardings)}"
            )
        specs: list[Any] = []
        for k, (entry, kid) in enumerate(zip(given, kids, strict=False)):
            specs.extend(leaf_specs(entry, kid, f"in_shardings[{k}]"))
        for kid in kids[npos:]:  # keyword arguments: replicated
            specs.extend([None] * kid.num_leaves)
        return specs

    def lower(self, *args: Any, **kwargs: Any) -> ShardedProgram:
        """Trace and compile for the arguments' signature and layouts (cached); runs nothing."""
        nargs = len(args) if kwargs else -1
        if kwargs:
            args = (*args, kwargs)
        leaves, tree = tree_flatten(args)
        mesh = self._mesh_of(leaves)
        return self._entry(mesh, leaves, tree, self._in_specs(args, tree, leaves, nargs), nargs)

    def _entry(self, mesh: Mesh, leaves: Sequence[Any], tree: TreeDef, specs: list[Any],
               nargs: int) -> ShardedProgram:
        avals = [aval_of(x, f"jit: argument leaf {i}") for i, x in enumerate(leaves)]
        key = (mesh, tree, tuple((s, d.str) for s, d in avals), tuple(specs), nargs)
        hit = self._cache.get(key)
        if hit is None:
            t0 = time.perf_counter()
            fn = self.f if nargs < 0 else functools.partial(call_with_keywords, self.f, nargs)
            graph = trace_flat(fn, avals, tree)
            hit = self._cache[key] = _compile(graph, mesh, specs, self.out_shardings,
                                              getattr(self.f, "__name__", "f"), t0)
        return hit

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        nargs = -1
        if kwargs:
            nargs = len(args)
            args = (*args, kwargs)
        leaves, tree = tree_flatten(args)
        if any(type(x) is Tracer for x in leaves):
            return self.f(*args[:nargs], **kwargs) if kwargs else self.f(*args)
        for i, x in enumerate(leaves):
            if isinstance(x, EagerTensor):
                raise ArgumentTypeError(
                    f"jit: argument leaf {i} is a handle on the tape; a sharded program runs "
                    "on ShardedTensor owners, host owners or numpy values"
                )
        mesh = self._mesh_of(leaves)
        program = self._entry(mesh, leaves, tree, self._in_specs(args, tree, leaves, nargs),
                              nargs)
        outs = run(program, mesh, leaves, getattr(self.f, "__name__", "f"))
        return tree_unflatten(program.graph.out_tree, outs)


def _compile(graph: Graph, mesh: Mesh, specs: list[Any], out_shardings: Any, name: str,
             t0: float) -> ShardedProgram:
    jax = jax_module()
    assert jax is not None
    _, provider = mesh._provider(mesh.local_devices[0], f"jit({name})")
    fn = lower_graph(graph, provider.namespace, f"jit({name})")
    out_specs = leaf_specs(out_shardings, graph.out_tree, "out_shardings")
    in_sh = tuple(mesh.sharding(s, v.shape, f"jit({name}): argument leaf {i}")
                  for i, (s, v) in enumerate(zip(specs, graph.invars, strict=True)))
    results = result_atoms(graph)
    index_of = {v: i for i, v in enumerate(graph.invars)}
    first: dict[Any, int] = {}
    sources: list[tuple[str, int]] = []
    result_spec: dict[int, Any] = {}
    for j, a in enumerate(graph.outvars):
        if isinstance(a, Var) and a in index_of:
            sources.append(("input", index_of[a]))
        elif isinstance(a, Var) and a in first:
            sources.append(("repeat", first[a]))
        else:
            k = next(k for k, r in enumerate(results) if r is a and k not in result_spec)
            result_spec[k] = out_specs[j]
            sources.append(("fresh", k))
            if isinstance(a, Var):
                first[a] = j
    out_sh = tuple(
        mesh.sharding(result_spec[k], r.shape if isinstance(r, Var) else np.shape(r.value),
                      f"jit({name}): output")
        for k, r in enumerate(results)
    )
    with jax.enable_x64(True):
        structs = [jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=s)
                   for v, s in zip(graph.invars, in_sh, strict=True)]
        compiled = jax.jit(fn, in_shardings=in_sh, out_shardings=out_sh).lower(
            *structs).compile()
    analysis = compiled.memory_analysis()
    scratch = int(getattr(analysis, "temp_size_in_bytes", 0) or 0)
    return ShardedProgram(graph, compiled, in_sh, tuple(out_specs), tuple(sources), scratch,
                          time.perf_counter() - t0)


def run(program: ShardedProgram, mesh: Mesh, leaves: Sequence[Any], name: str) -> list[Any]:
    """Execute ``program`` on ``leaves``; returns the outputs in order (see the module
    docstring for what is recorded). O(shards) bookkeeping plus the program."""
    jax = jax_module()
    assert jax is not None
    triples = list(zip(leaves, program.in_shardings, program.graph.invars, strict=True))
    for i, (x, sh, v) in enumerate(triples):  # every check before anything is uploaded
        if type(x) is ShardedTensor and not x.sharding.is_equivalent_to(sh, len(v.shape)):
            raise ShardingError(
                f"jit({name}): argument leaf {i} is sharded {x.spec}; the program takes "
                f"it sharded {sh.spec}. Reshard it explicitly (x.reshard(spec), a recorded "
                "copy) or compile for its layout"
            )
    uploaded: list[ShardedTensor] = []
    args: list[Any] = []
    for x, sh, v in triples:
        if type(x) is ShardedTensor:
            args.append(x._global(f"jit({name})"))
            continue
        if not isinstance(x, ts.Tensor | ts.TensorView | ts.TensorViewMut):
            x = np.asarray(x, dtype=v.dtype)
        up = shard(x, mesh, sh.spec)
        uploaded.append(up)
        args.append(up._global(f"jit({name})"))
    scratch: list[tuple[int, Any]] = []
    try:
        if program.scratch_bytes:
            for domain in mesh.domains:
                scratch.append((LEDGER.allocate(
                    _OUT, program.scratch_bytes, f"{name} scratch @{domain}"), domain))
        try:
            with jax.enable_x64(True):  # as compiled: the executable's fast path
                results = program.executable(*args)
            jax.block_until_ready(results)
        except Exception as exc:
            raise ExecutionFailed(f"jit({name}): the sharded program failed on {mesh!r}: "
                                  f"{exc}", exc) from None
    finally:
        args.clear()
        for up in uploaded:
            up.release()
        for alloc, _ in scratch:
            LEDGER.release(_OUT, program.scratch_bytes, alloc)
    fresh = [adopt_array(mesh, r, _OUT, name) for r in results]
    del results
    outs: list[Any] = []
    for (kind, k), spec in zip(program.sources, program.out_specs, strict=True):
        if kind == "fresh":
            outs.append(fresh[k])
        elif kind == "repeat":
            outs.append(outs[k].reshard(spec))
        else:
            src = leaves[k]
            if type(src) is not ShardedTensor:
                src = shard(src if isinstance(src, ts.Tensor | ts.TensorView)
                            else np.asarray(src, dtype=program.graph.invars[k].dtype),
                            mesh, spec)
                outs.append(src)
            else:
                outs.append(src.reshard(spec))
    return outs
