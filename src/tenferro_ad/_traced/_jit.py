"""``jit``: trace once per input signature, compile to a runtime program, run it on an engine.

A signature is the arguments' structure plus every leaf's shape and dtype (Python
scalars are 0-d inputs, so new scalar values do not retrace).  The first call with a
signature traces ``f`` and compiles the graph (``_compile.py``); later calls only run.

How a call runs depends on what it is given:

* **owners or views** (borrowed, never consumed): *scoped read-only execution* on a
  synchronous engine — the runtime reads the caller's storage under shared borrows;
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
from typing import Any

import attrs
import numpy as np

import tenferro_storage as ts
from tenferro_storage import runtime as rt
from tenferro_storage._pytree import tree_flatten, tree_unflatten
from tenferro_storage.errors import TenferroError, shown
from tenferro_storage.providers import XlaProvider
from tenferro_storage.runtime._engine import lookup

from .._core._handle import EagerTensor
from ..errors import ArgumentTypeError, DonationError, EngineUnavailableError
from ._compile import compile_graph
from ._graph import Graph, TreeDef
from ._retained import ProgramRetainedEntry, retained
from ._trace import Tracer, aval_of, call_with_keywords, run_bound, trace_flat
from ._xla import compile_xla

_SCALARS = (bool, int, float, complex)
_borrow = ts.kernel.borrow_named
_STORAGE = (ts.Tensor, ts.TensorView, ts.TensorViewMut)


class ExecutionFailed(TenferroError, RuntimeError):
    """A jitted program failed on its engine after admission (``RetiredFailed``) or its
    completion could not be proven (``CompletionUnproven``).  ``.cause`` is the runtime's
    error value.

    Non-donated arguments are unchanged (numpy arguments were imported, owners and views
    only read).  A donated owner (``donate_argnums``) that the failed program had not yet
    written is moved back into the caller's very ``Tensor`` object: unchanged and usable.
    One it had written holds what the program left, so it is *not* put back where a
    retry would silently compute on it: the caller's object stays consumed, the owner is
    handed over in ``.donated`` (argument leaf index -> owner) and ``.clobbered`` names
    those leaves.  After ``CompletionUnproven`` nothing comes back (the engine keeps
    every input for good) and ``.donated`` is empty.  Costs nothing beyond the failure:
    no copy, no allocation."""

    def __init__(
        self,
        message: str,
        cause: Any,
        donated: dict[int, ts.Tensor[Any, Any]] | None = None,
        clobbered: tuple[int, ...] = (),
    ) -> None:
        super().__init__(message)
        self.cause = cause
        self.donated: dict[int, ts.Tensor[Any, Any]] = donated or {}
        self.clobbered = clobbered


@attrs.frozen(eq=False)
class Compiled:
    """One cache entry: the traced graph, its runtime program (a host ``CompiledGraph`` or
    an XLA ``ExecutableProgram``) and the seconds spent tracing and compiling it."""

    graph: Graph
    program: rt.CompiledGraph | rt.ExecutableProgram
    compile_seconds: float


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
    ) -> None:
        self.f = f
        self.engine = engine
        provider = lookup(engine)
        self._xla = isinstance(provider, XlaProvider)
        self._provider = provider
        self.scratch_bytes = scratch_bytes
        self.reuse = reuse
        self.donate_argnums = donate_argnums
        self._cache: dict[Any, Compiled] = {}
        functools.update_wrapper(self, f)

    @property
    def cache_size(self) -> int:
        """How many signatures have been traced and compiled. O(1)."""
        return len(self._cache)

    def lower(self, *args: Any, **kwargs: Any) -> Compiled:
        """Trace and compile for the arguments' signature (cached) without running anything."""
        if kwargs:
            args = (*args, kwargs)
        leaves, tree = tree_flatten(args)
        return self._entry(leaves, tree, len(args) - 1 if kwargs else -1)

    def retained(self, *args: Any, **kwargs: Any) -> list[ProgramRetainedEntry]:
        """What the compiled program for ``args``' signature keeps between its forward and
        backward halves, and why (``traced.retained``: the ``tape.retained()`` of a jitted
        gradient; each entry's ``slot`` is the execution's value slot).  Traces and
        compiles once per signature (cached); runs nothing. O(size of the graph)."""
        entry = self.lower(*args, **kwargs)
        program = entry.program
        if not isinstance(program, rt.CompiledGraph):  # an XLA executable: report the
            program = compile_graph(entry.graph, _name(self.f))  # host program's halves
        return retained(entry.graph, program)

    def __repr__(self) -> str:
        return f"jit({_name(self.f)}, engine={self.engine})"

    def _entry(self, leaves: Sequence[Any], tree: TreeDef, nargs: int = -1) -> Compiled:
        """The cache entry of a signature; ``nargs >= 0``: the call had keyword arguments,
        which travel as a trailing dict after its ``nargs`` positional arguments."""
        avals = [aval_of(x, f"jit: argument leaf {i}") for i, x in enumerate(leaves)]
        key = (tree, tuple((s, d.str) for s, d in avals), nargs)
        hit = self._cache.get(key)
        if hit is None:
            t0 = time.perf_counter()
            fn = self.f if nargs < 0 else functools.partial(call_with_keywords, self.f, nargs)
            graph = trace_flat(fn, avals, tree)
            donate = _donated_leaves(tree, self.donate_argnums, nargs)
            program: rt.CompiledGraph | rt.ExecutableProgram
            if self._xla:
                program = compile_xla(graph, self._provider, _name(self.f), donate)
            else:
                program = compile_graph(graph, getattr(self.f, "__name__", "jit"),
                                        scratch_bytes=self.scratch_bytes, reuse=self.reuse,
                                        donate=donate)
            hit = self._cache[key] = Compiled(graph, program, time.perf_counter() - t0)
        return hit

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        nargs = -1
        if kwargs:  # keyword arguments are traced leaves too (as in JAX): a trailing dict
            nargs = len(args)
            args = (*args, kwargs)
        leaves, tree = tree_flatten(args)
        if any(type(x) is Tracer for x in leaves):
            return self.f(*args[:nargs], **kwargs) if kwargs else self.f(*args)
        entry = self._entry(leaves, tree, nargs)
        donated = entry.program.donated
        if any(isinstance(x, EagerTensor) for x in leaves):
            if donated:
                raise DonationError(
                    f"jit({_name(self.f)}): handles are bound eagerly on the tape, so donated "
                    f"argument leaves {list(donated)} cannot be written in place; donate only "
                    "when calling with owners or numpy arrays"
                )
            return tree_unflatten(entry.graph.out_tree, run_bound(entry.graph, leaves))
        engine = self.engine
        if donated:
            outs = _detached(engine, entry, _donation_inputs(self.f, engine, leaves, donated))
        elif any(isinstance(x, _STORAGE) for x in leaves):
            outs = _scoped(engine, entry, leaves)
        else:
            outs = _detached(engine, entry, leaves)
        return tree_unflatten(entry.graph.out_tree, outs)


def _name(f: Any) -> str:
    return str(getattr(f, "__name__", "f"))


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


def _donation_inputs(
    f: Any, engine: rt.EngineId, leaves: Sequence[Any], donated: tuple[int, ...]
) -> list[Any]:
    """Check every leaf of a donating call before anything is consumed: donated leaves are
    unborrowed owners or numpy values, the others numpy values, and the engine writes
    into inputs.  Returns the leaves (owners are consumed by the submission). O(leaves)."""
    provider = lookup(engine)
    if not getattr(provider, "supports_donation", False):
        raise DonationError(f"jit({_name(f)}): {engine} does not write into donated inputs")
    refusal = getattr(provider, "donation_refusal", None)
    seen: set[int] = set()
    for i, x in enumerate(leaves):
        if i in donated:
            if isinstance(x, ts.Tensor):
                if id(x) in seen:
                    raise DonationError(
                        f"jit({_name(f)}): donated argument leaf {i} is an owner already "
                        "passed as another leaf; one owner is consumed once"
                    )
                seen.add(id(x))
                try:  # an exclusive borrow succeeds only on a live, unborrowed owner
                    with x.as_view_mut():
                        pass
                except TenferroError as exc:
                    raise DonationError(
                        f"jit({_name(f)}): donated argument leaf {i} cannot be consumed: {exc}"
                    ) from None
            if refusal is not None and (why := refusal(x)):
                raise DonationError(f"jit({_name(f)}): donated argument leaf {i}: {why}")
            if isinstance(x, ts.Tensor):
                pass
            elif isinstance(x, _STORAGE):
                raise DonationError(
                    f"jit({_name(f)}): donated argument leaf {i} is a {type(x).__name__} (a "
                    "borrow, never written by a call); donate the owner itself"
                )
        elif isinstance(x, _STORAGE):
            raise DonationError(
                f"jit({_name(f)}): a donating call runs detached and owns every input, but "
                f"argument leaf {i} is a borrowed {type(x).__name__}; donate it as well, or "
                "pass a numpy array"
            )
    return list(leaves)


def _imported(x: Any, dtype: np.dtype[Any]) -> ts.Tensor[Any, Any]:
    if isinstance(x, ts.Tensor):  # a donated owner: consumed by the group, no copy
        return x
    return ts.from_numpy(np.asarray(x, dtype=dtype) if isinstance(x, _SCALARS) else x)


def _detached(engine: rt.EngineId, entry: Compiled, leaves: Sequence[Any]) -> list[Any]:
    group = ts.AllocationGroup()
    slots = [group.insert(_imported(x, v.dtype)) for x, v in zip(leaves, entry.graph.invars,
                                                                  strict=True)]
    outcome = rt.submit(engine, entry.program, rt.ExecutionInputs(group, slots)).wait()
    if isinstance(outcome, rt.RetiredFailed):
        raise _failed_donation(engine, entry.program, leaves, outcome)
    if not isinstance(outcome, rt.Completed):
        raise ExecutionFailed(f"jit: the program failed on {engine}: {outcome.cause}",
                              outcome.cause)
    bundle = outcome.bundle
    group = bundle.group
    taken: dict[Any, ts.Tensor[Any, Any]] = {}
    outs: list[Any] = []
    for out, kind in zip(bundle.outputs, bundle.kinds, strict=True):
        if kind is rt.OutputKind.REPEATED:  # the same value twice: an explicit copy
            outs.append(taken[out].duplicate())
        else:
            assert isinstance(out, ts.DescriptorSlot)  # programs from graphs have no metadata
            t = group.try_extract(out)
            domain = ts.providers.domain_of(t)
            if domain != "host" and not domain.startswith("xla-"):
                t = rt.download(t)  # simulated device memory: one recorded TRANSFER
            taken[out] = t
            outs.append(t)
    return outs


def _failed_donation(
    engine: rt.EngineId,
    program: rt.CompiledGraph | rt.ExecutableProgram,
    leaves: Sequence[Any],
    outcome: rt.RetiredFailed[rt.ExecutionInputs],
) -> ExecutionFailed:
    """The exception for a failed detached run: donated owners the program did not write
    go back into the caller's objects, written ones into ``.donated``. O(donated)."""
    group, bindings = outcome.inputs.into_parts()
    handed: dict[int, ts.Tensor[Any, Any]] = {}
    for k in program.donated:
        x = leaves[k]
        if not isinstance(x, ts.Tensor):
            continue  # a numpy argument: only its import was written
        owner = group.try_extract(bindings[k])  # donation proved it is the sole record
        if k in outcome.clobbered:
            handed[k] = owner
        else:
            x._take_back(owner, "jit")
    clobbered = tuple(k for k in outcome.clobbered if isinstance(leaves[k], ts.Tensor))
    note = (
        f"; donated argument leaf(s) {list(clobbered)} hold what the program wrote "
        "(handed over in .donated)" if clobbered else ""
    )
    return ExecutionFailed(
        f"jit: the program failed on {engine}: {outcome.cause}{note}",
        outcome.cause,
        handed,
        clobbered,
    )


def _scoped(engine: rt.EngineId, entry: Compiled, leaves: Sequence[Any]) -> list[Any]:
    views, imported = [], []
    holder = f"jit({entry.program.name}): a running call"  # named borrows: no call-site walk
    try:
        for x, v in zip(leaves, entry.graph.invars, strict=True):
            if not isinstance(x, _STORAGE):
                x = _imported(x, v.dtype)
                imported.append(x)
            views.append(_borrow(x, holder))
        outcome = rt.execute_scoped_read_only(engine, entry.program, rt.ScopedReadInputs(views))
        if not isinstance(outcome, rt.Completed):
            raise ExecutionFailed(f"jit: the program failed on {engine}: {outcome.cause}",
                                  outcome.cause)
        bundle = outcome.bundle
        kinds = bundle.kinds
        group, refs = bundle.into_owned_group()
        return _scoped_outputs(group, refs, kinds)
    finally:
        for view in views:
            view.release()
        imported.clear()


def _scoped_outputs(
    group: ts.AllocationGroup, refs: Sequence[Any], kinds: Sequence[rt.OutputKind]
) -> list[Any]:
    """Fresh owners of a scoped call's outputs: a fresh output is moved out of the bundle's
    group (no copy); an input returned as is (a borrow of the caller's value) and the second
    occurrence of a value are recorded ``EXPLICIT_DUPLICATE`` copies -- two owners of one
    value need two allocations. O(outputs)."""
    taken: dict[Any, ts.Tensor[Any, Any]] = {}
    outs: list[Any] = []
    try:
        for ref, kind in zip(refs, kinds, strict=True):
            if isinstance(ref, ts.TensorView):
                outs.append(ref.duplicate())
            elif kind is rt.OutputKind.REPEATED:
                outs.append(taken[ref].duplicate())
            else:
                assert isinstance(ref, ts.DescriptorSlot)  # programs from graphs have no metadata
                taken[ref] = t = group.try_extract(ref)
                outs.append(t)
    finally:
        for ref in refs:
            if isinstance(ref, ts.TensorView):
                ref.release()
    return outs


def jit(
    f: Callable[..., Any],
    *,
    engine: rt.EngineId | str | None = None,
    scratch_bytes: int = 0,
    reuse: bool = True,
    donate_argnums: int | Sequence[int] = (),
) -> Jitted:
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

    Cost: tracing and compiling once per input signature, then allocates the results; no copy (an
    unaligned or foreign input is one recorded TRANSFER); synchronizes on the results; dispatches
    through the chosen engine; O(the program's work).
    Raises: ArgumentTypeError, DonationError, EngineUnavailableError, LoweringError."""
    if not callable(f):
        raise ArgumentTypeError(f"jit: argument 'f' must be callable, got {type(f).__name__}")
    argnums = _donate_argnums(donate_argnums)
    return Jitted(f, resolve_engine(engine), scratch_bytes, reuse=reuse, donate_argnums=argnums)


def _donate_argnums(given: object) -> tuple[int, ...]:
    """``donate_argnums`` as a tuple of ints: an int, or a tuple/list/range of ints (numpy
    integers too; never a bool).  Anything else is refused, naming the argument. O(n)."""
    items = (given,) if isinstance(given, int | np.integer) else given
    if isinstance(items, tuple | list | range) and all(
        isinstance(i, int | np.integer) and not isinstance(i, bool) for i in items
    ):
        return tuple(int(i) for i in items)
    raise ArgumentTypeError(
        f"jit: argument 'donate_argnums' must be an int or a tuple of ints, got {shown(given)}"
    )
