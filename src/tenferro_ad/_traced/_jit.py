"""``jit``: trace once per input signature, compile to a runtime program, run it on an engine.

A signature is the arguments' structure plus every leaf's shape and dtype (Python
scalars are 0-d inputs, so new scalar values do not retrace).  The first call with a
signature traces ``f`` and compiles the graph (``_compile.py``); later calls only run.

How a call runs depends on what it is given:

* **owners or views** (borrowed, never consumed): *scoped read-only execution* on a
  synchronous engine — the runtime reads the caller's storage under shared borrows; on the
  XLA engine a call whose leaves are all owners takes a per-signature prepared call
  (``XlaProvider.prepare_scoped``: checks done once, the same ledger events);
* **numpy arrays / scalars only**: they are imported (one recorded ``TRANSFER`` each, as
  everywhere in tenferro), moved into an ``AllocationGroup`` and submitted *detached*
  (``runtime.submit``) to the engine, which may be asynchronous; the call waits;
* **handles**: the graph's equations are bound eagerly, so the call records on the
  current tape — ``tenferro_ad.grad(jit(f))`` works;
* **tracers**: ``f`` itself is called, so a jitted function inlines into a trace.

Results are fresh owners: every value the program computes is moved out of its bundle
(scoped: ``ScopedExecutionBundle.into_owned_group``), never copied; only an input returned
as is and a value returned twice become recorded ``EXPLICIT_DUPLICATE`` copies (a second
owner needs its own allocation).
On an engine with device memory (not host-visible) each result is downloaded to the host:
one recorded ``TRANSFER`` copy per output (inputs are read where they are).

Buffers: the program writes results into the buffers of dead intermediates where shape
and dtype allow (``reuse=True``, see ``_compile.py``).  **Donation**
(``donate_argnums=(i, ...)``, as in JAX): every leaf of those positional arguments is
overwritten in place by the program and the call consumes it -- an owning
``tenferro_storage.Tensor`` is moved into the submission (the caller's owner is
consumed: no copy, no allocation for the result written into it), a numpy array is
imported (its one ``TRANSFER``) and the import overwritten.  A donating call always runs
detached, so every other storage argument must be numpy too.  Whatever prevents the
write -- no result of the leaf's shape and dtype after its last read, the leaf returned
as is, a view or a borrowed owner, a handle call (bound eagerly), an engine that does
not write into inputs -- raises :class:`~tenferro_ad.errors.DonationError` before
anything runs or is consumed; there is never a silent copy.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any, overload

import attrs
import numpy as np

from tenferro_storage import Tensor
from tenferro_storage import runtime as rt
from tenferro_storage._pytree import tree_flatten, tree_unflatten
from tenferro_storage.errors import shown
from tenferro_storage.providers import XlaProvider
from tenferro_storage.providers._sharded import Mesh, ShardedTensor
from tenferro_storage.runtime._engine import lookup

from .._core._handle import EagerTensor
from ..errors import ArgumentTypeError, DonationError, EngineUnavailableError
from ._compile import compile_graph
from ._graph import TreeDef
from ._jit_run import (
    STORAGE,
    UNPLANNED,
    Compiled,
    FastPlan,
    donation_inputs,
    fast_call,
    fn_name,
    owner_signature,
    plan_fast,
    run_detached,
    run_scoped,
)
from ._retained import ProgramRetainedEntry, retained
from ._sharded import ShardedJitted
from ._trace import Tracer, aval_of, call_with_keywords, run_bound, trace_flat
from ._xla import compile_xla


@attrs.frozen
class CacheInfo:
    """A jitted function's compile cache: ``hits`` (calls that reused a program),
    ``misses`` (calls that traced and compiled one), ``size`` (programs held)."""

    hits: int
    misses: int
    size: int



ENGINES = ("auto", "host", "xla")
"""The engine names ``jit(..., engine=)`` accepts besides an ``EngineId``."""


def resolve_engine(engine: object) -> rt.EngineId:
    """The engine ``jit`` runs on: an ``EngineId`` as given; ``"host"``; ``"xla"`` (the
    first XLA engine; :class:`~tenferro_ad.errors.EngineUnavailableError` without jax);
    ``None``/``"auto"``: the fastest available -- XLA when installed, else the host.
    Discovery imports jax once per process. O(engines)."""
    if type(engine) is rt.EngineId:
        return engine
    if engine is None:
        engine = "auto"
    if not isinstance(engine, str) or engine not in ENGINES:
        raise ArgumentTypeError(
            f"jit: argument 'engine' must be an EngineId or one of {ENGINES}, got "
            f"{shown(engine)}"
        )
    if engine == "host":
        return rt.host_engine()
    xla = next((e.id for e in rt.engines() if e.id.kind == "xla"), None)
    if xla is not None:
        return xla
    if engine == "xla":
        raise EngineUnavailableError(
            "jit: engine='xla' needs jax (pip install 'tenferro[xla]'); no XLA engine is "
            "registered. Use engine='host' (numpy kernels) or leave engine unset"
        )
    return rt.host_engine()


class Jitted:
    """A jitted function (see the module docstring). ``cache_size``: signatures compiled."""

    def __init__(
        self,
        f: Callable[..., Any],
        engine: rt.EngineId,
        scratch_bytes: int = 0,
        *,
        reuse: bool = True,
        donate_argnums: tuple[int, ...] = (),
        static_argnums: tuple[int, ...] = (),
        static_argnames: tuple[str, ...] = (),
    ) -> None:
        self.f = f
        self.static_argnums = static_argnums
        self.static_argnames = static_argnames
        self._hits = 0
        self._misses = 0
        self.engine = engine
        provider = lookup(engine)
        self._xla = isinstance(provider, XlaProvider)
        self._provider = provider
        self.scratch_bytes = scratch_bytes
        self.reuse = reuse
        self.donate_argnums = donate_argnums
        self._cache: dict[Any, Compiled] = {}
        # XLA calls over whole owners: per (structure, signature, static) its plan, and per
        # (structure, static) the latest of them (tried first: no signature hashing)
        self._fast: dict[Any, FastPlan | None] = {}
        self._sharded: dict[Any, ShardedJitted] = {}  # over ShardedTensor arguments' mesh
        functools.update_wrapper(self, f)

    @property
    def cache_size(self) -> int:
        """How many signatures have been traced and compiled. O(1)."""
        return len(self._cache)

    def cache_info(self) -> CacheInfo:
        """The compile cache's ``hits`` (calls that reused a compiled program), ``misses``
        (calls that traced and compiled) and ``size`` (programs held). O(1)."""
        return CacheInfo(self._hits, self._misses, len(self._cache))

    def _split_static(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], Any]:
        """The function of the traced arguments only (the static ones bound), those
        arguments, and the static values' cache key (with the donated positions among the
        traced arguments).  A static value must be hashable and cannot be donated
        (:class:`ArgumentTypeError` names it otherwise). O(arguments)."""
        nums = tuple(i % len(args) if -len(args) <= i < len(args) else i
                     for i in self.static_argnums)
        for i in nums:
            if not 0 <= i < len(args):
                raise ArgumentTypeError(
                    f"jit({fn_name(self.f)}): static_argnums entry {i} is out of range for a "
                    f"call with {len(args)} positional arguments"
                )
        static_pos = {i: args[i] for i in nums}
        static_kw = {k: kwargs[k] for k in self.static_argnames if k in kwargs}
        for what, v in [*((f"positional argument {i}", v) for i, v in static_pos.items()),
                        *((f"keyword argument {k!r}", v) for k, v in static_kw.items())]:
            try:
                hash(v)
            except TypeError:
                raise ArgumentTypeError(
                    f"jit({fn_name(self.f)}): static {what} must be hashable (it is part of the "
                    f"compile cache key), got a {type(v).__name__}; pass a tuple instead of a "
                    "list, or make it a traced argument"
                ) from None
        donated = []
        for d in self.donate_argnums:
            d = d % len(args) if -len(args) <= d < len(args) else d
            if d in static_pos:
                raise ArgumentTypeError(
                    f"jit({fn_name(self.f)}): positional argument {d} is both static and donated"
                )
            donated.append(d - sum(1 for i in static_pos if i < d))
        key = (tuple(sorted(static_pos.items())), tuple(sorted(static_kw.items())),
               tuple(donated))
        dyn = tuple(a for i, a in enumerate(args) if i not in static_pos)
        dyn_kw = {k: v for k, v in kwargs.items() if k not in static_kw}
        f = self.f

        def bound(*a: Any, **kw: Any) -> Any:
            it = iter(a)
            full = [static_pos[i] if i in static_pos else next(it)
                    for i in range(len(args))]
            return f(*full, **kw, **static_kw)

        functools.update_wrapper(bound, f)
        return bound, dyn, dyn_kw, key

    def lower(self, *args: Any, **kwargs: Any) -> Compiled:
        """Trace and compile for the arguments' signature (cached) without running anything."""
        f, static = self.f, None
        if self.static_argnums or self.static_argnames:
            f, args, kwargs, static = self._split_static(args, kwargs)
        nargs = -1
        if kwargs:
            nargs = len(args)
            args = (*args, kwargs)
        leaves, tree = tree_flatten(args)
        return self._entry(leaves, tree, nargs, f, static)

    def retained(self, *args: Any, **kwargs: Any) -> list[ProgramRetainedEntry]:
        """What the compiled program for ``args``' signature keeps between its forward and
        backward halves, and why (``traced.retained``: the ``tape.retained()`` of a jitted
        gradient; each entry's ``slot`` is the execution's value slot).  Traces and
        compiles once per signature (cached); runs nothing. O(size of the graph)."""
        entry = self.lower(*args, **kwargs)
        program = entry.program
        if not isinstance(program, rt.CompiledGraph):  # an XLA executable: report the
            program = compile_graph(entry.graph, fn_name(self.f))  # host program's halves
        return retained(entry.graph, program)

    def __repr__(self) -> str:
        return f"jit({fn_name(self.f)}, engine={self.engine})"

    def _entry(
        self, leaves: Sequence[Any], tree: TreeDef, nargs: int = -1,
        f: Callable[..., Any] | None = None, static: Any = None,
    ) -> Compiled:
        """The cache entry of a signature; ``nargs >= 0``: the call had keyword arguments,
        which travel as a trailing dict after its ``nargs`` positional arguments; ``f``
        (default ``self.f``) is the function of the traced arguments, ``static`` the static
        values' key (part of the cache key)."""
        f = self.f if f is None else f
        avals = _avals(leaves)
        key = (tree, tuple((s, d.str) for s, d in avals), nargs, static)
        hit = self._cache.get(key)
        if hit is not None:
            self._hits += 1
        else:
            self._misses += 1
            t0 = time.perf_counter()
            fn = f if nargs < 0 else functools.partial(call_with_keywords, f, nargs)
            graph = trace_flat(fn, avals, tree)
            donate = _donated_leaves(tree, self.donate_argnums if static is None else static[2],
                                     nargs)
            program: rt.CompiledGraph | rt.ExecutableProgram
            if self._xla:
                program = compile_xla(graph, self._provider, fn_name(self.f), donate)
            else:
                program = compile_graph(graph, getattr(self.f, "__name__", "jit"),
                                        scratch_bytes=self.scratch_bytes, reuse=self.reuse,
                                        donate=donate)
            hit = self._cache[key] = Compiled(graph, program, time.perf_counter() - t0)
        return hit

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        f, static = self.f, None
        if self.static_argnums or self.static_argnames:
            f, args, kwargs, static = self._split_static(args, kwargs)
        if self._xla and not kwargs:  # the steady state of a training loop: owners in
            leaves, tree = tree_flatten(args)
            fast = self._fast
            plan = fast.get((tree, static))  # the structure's latest plan: its prepared
            if plan is not None:  # call checks the owners and their signature in one pass
                outs = fast_call(plan, leaves)
                if outs is not None:
                    return tree_unflatten(plan.out_tree, outs)
            sig = owner_signature(leaves)
            if sig is not None:
                key = (tree, sig, static)
                plan = fast.get(key, UNPLANNED)
                if plan is UNPLANNED:
                    plan = fast[key] = plan_fast(
                        self.engine, self._entry(leaves, tree, -1, f, static), sig)
                if plan is not None:
                    fast[(tree, static)] = plan
                    outs = fast_call(plan, leaves)
                    if outs is not None:
                        return tree_unflatten(plan.out_tree, outs)
        nargs = -1
        if kwargs:  # keyword arguments are traced leaves too (as in JAX): a trailing dict
            nargs = len(args)
            args = (*args, kwargs)
        leaves, tree = tree_flatten(args)
        if any(type(x) is Tracer for x in leaves):
            return f(*args[:nargs], **kwargs) if kwargs else f(*args)
        if any(type(x) is ShardedTensor for x in leaves):  # over the arguments' mesh
            sharded = self._sharded.get(static)
            if sharded is None:  # one per static value: each has its own compile cache
                sharded = self._sharded[static] = ShardedJitted(f, None, None, None)
            return sharded(*args[:nargs], **kwargs) if kwargs else sharded(*args)
        entry = self._entry(leaves, tree, nargs, f, static)
        donated = entry.program.donated
        if any(isinstance(x, EagerTensor) for x in leaves):
            if donated:
                raise DonationError(
                    f"jit({fn_name(self.f)}): handles are bound eagerly on the tape, so donated "
                    f"argument leaves {list(donated)} cannot be written in place; donate only "
                    "when calling with owners or numpy arrays"
                )
            return tree_unflatten(entry.graph.out_tree, run_bound(entry.graph, leaves))
        engine = self.engine
        if donated:
            outs = run_detached(engine, entry, donation_inputs(self.f, engine, leaves, donated))
        elif any(isinstance(x, STORAGE) for x in leaves):
            outs = run_scoped(engine, entry, leaves)
        else:
            outs = run_detached(engine, entry, leaves)
        return tree_unflatten(entry.graph.out_tree, outs)



def _avals(leaves: Sequence[Any]) -> list[tuple[tuple[int, ...], np.dtype[Any]]]:
    """Each argument leaf's ``(shape, numpy dtype)``: a readable owner's straight from its
    descriptor (the common leaf of a training step), any other leaf through ``aval_of``,
    which also names a bad leaf. O(leaves)."""
    out = []
    for i, x in enumerate(leaves):
        if type(x) is Tensor and x._moved_by is None and x._exclusive is None:
            d = x._desc
            out.append((d.shape, d.dtype.numpy))
        else:
            out.append(aval_of(x, f"jit: argument leaf {i}"))
    return out


def _donated_leaves(tree: TreeDef, argnums: tuple[int, ...], nargs: int = -1) -> tuple[int, ...]:
    """The leaf indices of the donated positional arguments (the first ``nargs`` children
    of ``tree`` when the call had keyword arguments, else all of them). O(leaves)."""
    if not argnums:
        return ()
    kids = tree.children()
    if nargs >= 0:
        kids = kids[:nargs]
    starts = [0]
    for k in kids:
        starts.append(starts[-1] + k.num_leaves)
    leaves: list[int] = []
    for i in argnums:
        if not -len(kids) <= i < len(kids):
            raise DonationError(
                f"jit: donate_argnums entry {i} is out of range for {len(kids)} arguments"
            )
        i %= len(kids)
        leaves.extend(range(starts[i], starts[i + 1]))
    return tuple(leaves)



@overload
def jit(
    f: Callable[..., Any],
    *,
    engine: rt.EngineId | str | None = None,
    scratch_bytes: int = 0,
    reuse: bool = True,
    donate_argnums: int | Sequence[int] = (),
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    mesh: None = None,
    in_shardings: None = None,
    out_shardings: None = None,
) -> Jitted: ...


@overload
def jit(
    f: Callable[..., Any],
    *,
    engine: rt.EngineId | str | None = None,
    scratch_bytes: int = 0,
    reuse: bool = True,
    donate_argnums: int | Sequence[int] = (),
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    mesh: Mesh | None = None,
    in_shardings: Any = None,
    out_shardings: Any = None,
) -> Jitted | ShardedJitted: ...


def jit(
    f: Callable[..., Any],
    *,
    engine: rt.EngineId | str | None = None,
    scratch_bytes: int = 0,
    reuse: bool = True,
    donate_argnums: int | Sequence[int] = (),
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    mesh: Mesh | None = None,
    in_shardings: Any = None,
    out_shardings: Any = None,
) -> Jitted | ShardedJitted:
    """Compile ``f`` per input signature and run it through the runtime on ``engine``:
    ``None``/``"auto"`` (default) the fastest available -- the XLA engine when jax is
    installed (one XLA executable per signature), else the host engine; ``"host"`` the
    numpy program; ``"xla"``; or an ``EngineId``.  ``repr(jitted)`` names the engine, and
    the XLA engine's allocations are recorded in its domain (``"... @xla-cpu:0"``).  On the
    XLA engine results are XLA buffers the host reads in place (CPU).  See the module
    docstring for how arguments are treated;
    results are fresh owners with the structure ``f`` returns.  First call per signature:
    trace + compile (``Jitted.lower(*args).compile_seconds``); later calls: the program's
    kernels plus O(#instructions) runtime bookkeeping.

    ``scratch_bytes``: intermediates up to this size that only feed the next kernels are
    fused into one instruction as numpy scratch (fewer runtime owners per op; those
    intermediates are then not ledger allocations).  Default 0: every intermediate is an
    owner the ledger sees, released at its last use.

    ``reuse`` (default on): results are written into dead buffers of the same shape and
    dtype (fewer ``OPERATION_OUTPUT`` allocations, lower peak).  ``donate_argnums``: the
    positional arguments the call consumes and overwrites in place (see the module
    docstring; ``DonationError`` when that cannot happen).

    ``static_argnums``/``static_argnames`` (as in JAX): those arguments are not traced but
    passed to ``f`` as the Python values they are (a loop count, a flag, a shape), and
    their values are part of the compile cache key -- a new value traces and compiles
    once more.  They must be hashable (:class:`ArgumentTypeError` otherwise).
    ``jitted.cache_info()`` reports the cache's hits, misses and size.

    ``mesh``/``in_shardings``/``out_shardings`` (any of them given): one SPMD XLA program
    over a ``tenferro_storage.sharding.Mesh`` (``ShardedJitted``; see ``_sharded.py``):
    ``in_shardings`` one JAX ``PartitionSpec`` (or pytree of them) per positional
    argument, ``None``: each ``ShardedTensor`` argument's own layout; ``out_shardings``
    a spec for every output or a pytree of them, ``None``: replicated.  Results are
    ``ShardedTensor`` owners (one allocation per shard).  A plain ``jit`` called with
    ``ShardedTensor`` arguments runs the same way over their mesh.

    Cost: tracing and compiling once per input signature, then allocates the results; no copy (an
    unaligned or foreign input is one recorded TRANSFER); synchronizes on the results; dispatches
    through the chosen engine; O(the program's work).
    Raises:
        ArgumentTypeError: a bad argument to ``jit`` or a static value that is not hashable.
        DonationError: a donated argument that cannot be written in place.
        EngineUnavailableError: ``engine`` names an engine this process does not have.
        ExecutionFailed: the program failed on its engine after admission.
        LoweringError: the XLA engine cannot lower an equation of the traced program.
        ShardingError: a sharded program's arguments do not fit its mesh."""
    if not callable(f):
        raise ArgumentTypeError(f"jit: argument 'f' must be callable, got {type(f).__name__}")
    argnums = _donate_argnums(donate_argnums)
    s_nums = _donate_argnums(static_argnums, "static_argnums")
    names = (static_argnames,) if isinstance(static_argnames, str) else static_argnames
    if not isinstance(names, tuple | list) or not all(isinstance(n, str) for n in names):
        raise ArgumentTypeError(
            f"jit: argument 'static_argnames' must be a str or a tuple of str, got "
            f"{shown(static_argnames)}"
        )
    if mesh is not None or in_shardings is not None or out_shardings is not None:
        if argnums or s_nums or names or engine not in (None, "auto", "xla") or scratch_bytes:
            raise ArgumentTypeError(
                "jit: a sharded program (mesh=, in_shardings=, out_shardings=) runs on the XLA "
                "engines of its mesh; engine=, scratch_bytes=, donate_argnums= and "
                "static_argnums=/static_argnames= do not apply"
            )
        return ShardedJitted(f, mesh, in_shardings, out_shardings)
    return Jitted(f, resolve_engine(engine), scratch_bytes, reuse=reuse, donate_argnums=argnums,
                  static_argnums=s_nums, static_argnames=tuple(names))


def _donate_argnums(given: object, what: str = "donate_argnums") -> tuple[int, ...]:
    """``donate_argnums`` (or ``what``) as a tuple of ints: an int, or a tuple/list/range of
    ints (numpy integers too; never a bool).  Anything else is refused, naming the
    argument. O(n)."""
    items = (given,) if isinstance(given, int | np.integer) else given
    if isinstance(items, tuple | list | range) and all(
        isinstance(i, int | np.integer) and not isinstance(i, bool) for i in items
    ):
        return tuple(int(i) for i in items)
    raise ArgumentTypeError(
        f"jit: argument '{what}' must be an int or a tuple of ints, got {shown(given)}"
    )
