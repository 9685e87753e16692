"""Compiling a :class:`~._graph.Graph` into the runtime's program format.

``compile_graph(graph)`` returns a :class:`tenferro_storage.runtime.CompiledGraph`:

* value slots ``0 .. n-1`` are the graph's inputs (in leaf order);
* each equation becomes one :class:`~tenferro_storage.runtime.Instruction` whose kernel
  is the primitive's own ``impl`` (:class:`EqnKernel` re-inserts scalar and constant
  literals between the slot arrays, so the runtime sees only array inputs);
* metadata-only equations (``prim.alias``: reshape, transpose, broadcast_to, basic
  slicing ...) are *not* instructions: they are folded into every consumer's kernel as
  a view prologue (O(1) numpy views, no allocation, no copy), and their source slot
  lives until the last consumer of any such view;
* ``release_after`` releases each intermediate right after its last reader — the
  liveness the runtime enforces (every intermediate released exactly once);
* outputs: an equation's value is ``FRESH`` (``REPEATED`` the second time), an input
  returned as is is ``IDENTITY``; an output that is only a view, or a literal, gets a
  small layout instruction (one allocation, a kernel write);
* **buffer reuse** (``reuse=True``, the default): an instruction whose kernel is a numpy
  ufunc over operands of its own dtype writes its result (``Instruction.into``, numpy
  ``out=``) into the buffer of a value of the same shape and dtype that died earlier --
  in place into an operand read for the last time, or into a buffer released since the
  last fresh allocation (so no buffer is held across an allocation: the peak never
  grows).  Fewer ``OPERATION_OUTPUT`` allocations; a chain of elementwise ops runs in
  one buffer;
* **donation** (``donate=(k, ...)``): input ``k`` is written in place by the first such
  instruction after its last read (the program's ``donated``); ``DonationError`` when
  none can (no result of its shape and dtype after its last read, or it is returned).

The compiler knows no ops: it reads ``prim.impl``, ``prim.alias`` and the equations.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tenferro_storage.ledger import AllocationReason
from tenferro_storage.runtime import CompiledGraph, Instruction, OutputKind, ProgramOutput

from .._core._primitive import Primitive
from ..errors import DonationError
from ._graph import Graph, Lit, Var

_RECOMPUTE = AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT
_OPERATION = AllocationReason.OPERATION_OUTPUT

# A view: its base (a slot index or a literal) and the metadata-only steps applied to it.
_Step = tuple[Primitive, tuple[Any, ...], tuple[tuple[str, Any], ...]]
_Chain = tuple[int | Lit, tuple[_Step, ...]]
# (label, kernel, slots read, params, slots written)
_Pending = tuple[str, Any, list[int], tuple[tuple[str, Any], ...], tuple[int, ...]]


class EqnKernel:
    """The kernel of one instruction: ``impl(*args, **params)`` where each argument is a
    slot array, a literal, or a view chain applied to a slot array; the result is
    returned fresh and C-contiguous (a view, another layout or an argument handed back is
    laid out afresh: a kernel write).  ``fn`` is that call as one generated function
    (literals and view chains bound at compile time): the instruction's kernel."""

    __slots__ = ("__name__", "direct", "fn", "impl", "pattern")

    def __init__(self, name: str, impl: Any, pattern: Sequence[Any], params: bool = True) -> None:
        self.__name__ = name
        self.impl = impl
        self.pattern = tuple(pattern)
        # the common case: the arguments are exactly the slot arrays, in order
        self.direct = all(p[0] == "slot" and p[1] == i for i, p in enumerate(self.pattern))
        n_slots = 1 + max((p[1] for p in self.pattern if p[0] in ("slot", "view")), default=-1)
        ns: dict[str, Any] = {"F": impl, "_nd": np.ndarray, "_fresh": _fresh_out}
        args = _arg_sources(self.pattern, "a{}".format, ns, "")
        names = [f"b{j}" for j in range(len(args))]
        kw = ", **kw" if params else ""
        lines = [f"def run({''.join(f'a{i}, ' for i in range(n_slots))}{kw[2:]}):"]
        lines.extend(f"    {b} = {a}" for b, a in zip(names, args, strict=True))
        lines.append(f"    r = F({', '.join(names)}{kw})")
        same = "".join(f" and r is not {b}" for b in names)
        lines.append(f"    if type(r) is _nd and r.base is None and r.flags.carray{same}:")
        lines.append("        return r")
        lines.append(f"    return _fresh(r, ({''.join(f'{b}, ' for b in names)}))")
        exec(compile("\n".join(lines), f"<kernel {name}>", "exec"), ns)  # our own generated code
        self.fn = ns["run"]
        self.fn.__name__ = self.fn.__qualname__ = name

    def __call__(self, *arrays: Any, **params: Any) -> Any:
        return self.fn(*arrays, **params)

    def __repr__(self) -> str:
        return f"EqnKernel({self.__name__})"


def _arg(p: Any, arrays: Sequence[Any]) -> Any:
    kind = p[0]
    if kind == "slot":
        return arrays[p[1]]
    if kind == "lit":
        return p[1]
    a = arrays[p[1]] if kind == "view" else p[1]  # apply the metadata-only chain
    for prim, lits, params in p[2]:
        a = prim.impl(a, *lits, **dict(params))
    return a


def _arg_sources(
    pattern: Sequence[Any],
    name: Callable[[int], str],
    ns: dict[str, Any],
    tag: str,
    reads: Sequence[int] | None = None,
) -> list[str]:
    """The source text of a generated kernel call's arguments for ``pattern``: slot ``i``
    is the variable ``name(reads[i])`` (``name(i)`` without ``reads``); a literal and a view
    chain are bound into ``ns`` under ``L{tag}{j}``/``W{tag}{j}`` at compile time, so the
    call only reads them."""

    def slot(i: int) -> str:
        return name(i if reads is None else reads[i])

    args = []
    for j, p in enumerate(pattern):
        if p[0] == "slot":
            args.append(slot(p[1]))
        elif p[0] == "lit":
            ns[f"L{tag}{j}"] = p[1]
            ns[f"K{tag}{j}"] = p[2:]  # what keeps a borrowed constant valid, kept with it
            args.append(f"L{tag}{j}")
        else:  # a view chain over a slot (or a literal)
            ns[f"W{tag}{j}"] = functools.partial(_arg, (p[0], 0, *p[2:]) if p[0] == "view" else p)
            args.append(f"W{tag}{j}(({slot(p[1])},))" if p[0] == "view" else f"W{tag}{j}(())")
    return args


def _label(name: str, pattern: Sequence[Any]) -> str:
    """``mul<_,2.0>``, ``matmul<_,transpose(_)>``: where literals and views enter."""
    if all(p[0] == "slot" for p in pattern):
        return name
    parts = []
    for p in pattern:
        if p[0] == "slot":
            parts.append("_")
        elif p[0] == "lit":
            parts.append(_lit_label(p[1]))
        else:
            inner = "_" if p[0] == "view" else _lit_label(p[1])
            parts.append("".join(f"{c[0].name}(" for c in reversed(p[2])) + inner + ")" * len(p[2]))
    return f"{name}<{','.join(parts)}>"


def _lit_label(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return repr(v.item()) if v.size == 1 else "const"
    return repr(v)


def _layout(a: Any) -> Any:
    return np.array(a, order="C")


class OutKernel:
    """The kernel of an instruction that writes into a dead value's buffer: the numpy
    ufunc of the primitive called with ``out=`` (the runtime's writable array); it
    returns ``out`` itself.  No allocation (the compiler only lets an operand overlap
    ``out`` exactly, which numpy's ufuncs handle without a temporary).  The call is one
    generated function (literals and view chains bound at compile time): what the
    hand-written ``ufunc(a, 1.1, out=buf)`` costs plus one frame."""

    __slots__ = ("__name__", "fn", "pattern", "ufunc")

    def __init__(self, name: str, ufunc: np.ufunc, pattern: Sequence[Any]) -> None:
        self.__name__ = name
        self.ufunc = ufunc
        self.pattern = tuple(pattern)
        n_slots = 1 + max((p[1] for p in self.pattern if p[0] in ("slot", "view")), default=-1)
        ns: dict[str, Any] = {"F": ufunc}
        args = _arg_sources(self.pattern, "a{}".format, ns, "")
        params = "".join(f"a{i}, " for i in range(n_slots))
        code = f"def run({params}*, out):\n    return F({', '.join(args)}, out=out)\n"
        exec(compile(code, f"<out kernel {name}>", "exec"), ns)  # our own generated code
        self.fn = ns["run"]

    def __call__(self, *arrays: Any, out: Any) -> Any:
        return self.fn(*arrays, out=out)

    def __repr__(self) -> str:
        return f"OutKernel({self.__name__})"


def _ufunc_of(prim: Primitive, inputs: Sequence[Any], out: Var, params: Any) -> np.ufunc | None:
    """The numpy ufunc computing ``prim`` into an ``out=`` array, when that gives exactly
    ``impl``'s result: ``impl`` is a single-output ufunc (or wraps one for inexact inputs,
    ``impl.inexact_kernel``), there are no parameters, and every array operand already
    has the output's dtype (Python scalars are weak: they do not promote)."""
    if params:
        return None
    f: Any = prim.impl
    if not isinstance(f, np.ufunc):
        f = getattr(f, "inexact_kernel", None)
    if not isinstance(f, np.ufunc) or f.nout != 1 or f.nin != len(inputs):
        return None
    for a in inputs:
        if isinstance(a, Lit):
            v = a.value
            if type(v) in (bool, int, float, complex):
                if out.dtype.kind not in "fc":
                    return None
            elif getattr(v, "dtype", None) != out.dtype:
                return None
        elif a.dtype != out.dtype:
            return None
    return f


def compile_graph(
    graph: Graph,
    name: str = "",
    *,
    scratch_bytes: int = 0,
    reuse: bool = True,
    donate: Sequence[int] = (),
) -> CompiledGraph:
    """The runtime program of ``graph`` (see the module docstring). O(size of the graph).

    ``scratch_bytes > 0`` fuses runs of consecutive instructions whose values are at most
    that many bytes into one :class:`FusedKernel` (their intermediates become numpy scratch
    instead of ledger allocations: less bookkeeping per op for small arrays, at the price
    of not seeing those allocations in the ledger).  ``0`` (the default) fuses nothing.
    ``reuse``: write results into dead buffers where shape and dtype allow (default).
    ``donate``: input leaf indices the program overwrites (run it detached, with owning
    inputs); ``DonationError`` names the first one that cannot be written in place."""
    n_in = len(graph.invars)
    slot: dict[Var, int] = {v: i for i, v in enumerate(graph.invars)}
    views: dict[Var, _Chain] = {}
    pending: list[_Pending] = []
    nbytes: dict[int, int] = {}
    aval: dict[int, tuple[tuple[int, ...], str]] = {
        i: (tuple(v.shape), v.dtype.str) for i, v in enumerate(graph.invars)
    }
    ufuncs: dict[int, np.ufunc] = {}
    n_values = n_in
    recompute: set[int] = set()  # value slots a checkpoint's backward recomputes

    def source(a: Any) -> tuple[Any, int | None]:
        """(pattern entry, the slot it reads or None) for one equation input."""
        if isinstance(a, Lit):  # (its ``keep``: a borrowed constant lives with the kernel)
            return ("lit", a.value, a.keep), None
        if a in views:
            base, chain = views[a]
            if isinstance(base, Lit):
                return ("lview", base.value, chain, base.keep), None
            return ("view", base, chain), base
        return ("slot", slot[a]), slot[a]

    for e in graph.eqns:
        first = e.inputs[0] if e.inputs else None
        if e.prim.alias and first is not None and all(isinstance(a, Lit) for a in e.inputs[1:]):
            base: int | Lit
            chain: tuple[_Step, ...]
            if isinstance(first, Lit):
                base, chain = first, ()
            else:
                base, chain = views[first] if first in views else (slot[first], ())
            lits = tuple(a.value for a in e.inputs[1:] if isinstance(a, Lit))
            views[e.out] = (base, (*chain, (e.prim, lits, tuple(sorted(e.params.items())))))
            continue
        pattern, reads = [], []
        for a in e.inputs:
            p, s = source(a)
            if s is not None:
                if s not in reads:
                    reads.append(s)
                p = (p[0], reads.index(s), *p[2:])
            pattern.append(p)
        label = _label(e.prim.name, pattern)
        kernel = EqnKernel(label, e.prim.impl, pattern, bool(e.params))
        slot[e.out] = n_values
        if e.note is not None and e.note.recompute:  # a checkpoint's backward recomputation
            recompute.add(n_values)
        nbytes[n_values] = int(np.prod(e.out.shape, dtype=np.int64)) * e.out.dtype.itemsize
        aval[n_values] = (tuple(e.out.shape), e.out.dtype.str)
        uf = _ufunc_of(e.prim, e.inputs, e.out, e.params)
        if uf is not None:
            ufuncs[n_values] = uf
        pending.append((label, kernel, reads, tuple(sorted(e.params.items())), (n_values,)))
        n_values += 1
    outputs: list[ProgramOutput] = []
    seen: set[int] = set()
    for a in graph.outvars:
        if isinstance(a, Lit) or a in views:  # a layout instruction makes it a value
            p, s = source(a)
            reads = [] if s is None else [s]
            if s is not None:
                p = (p[0], 0, *p[2:])
            pending.append(("layout", EqnKernel("layout", _layout, [p], False), reads, (),
                            (n_values,)))
            v = n_values
            n_values += 1
        else:
            v = slot[a]
        kind = (OutputKind.REPEATED if v in seen
                else OutputKind.IDENTITY if v < n_in else OutputKind.FRESH)
        seen.add(v)
        outputs.append(ProgramOutput(kind, value=v))
    if scratch_bytes > 0:  # fuse, then number the remaining values densely again
        pending = _fuse(pending, nbytes, scratch_bytes, seen)
        remap = {s: i for i, s in enumerate([*range(n_in), *(s for e in pending for s in e[4])])}
        pending = [(nm, k, [remap[s] for s in r], p, tuple(remap[s] for s in o))
                   for nm, k, r, p, o in pending]
        outputs = [ProgramOutput(o.kind, value=remap[o.value]) for o in outputs
                   if o.value is not None]
        seen = {remap[s] for s in seen}
        recompute = {remap[s] for s in recompute if s in remap}
        n_values = len(remap)
        aval = {remap[s]: a for s, a in aval.items() if s in remap}
        ufuncs = {remap[s]: u for s, u in ufuncs.items() if s in remap}
    last: dict[int, int] = {}
    for i, (_n, _k, reads, _p, outs) in enumerate(pending):
        for s in (*outs, *reads):
            last[s] = i
    releases: dict[int, list[int]] = {}
    for s, i in last.items():
        if s >= n_in and s not in seen:
            releases.setdefault(i, []).append(s)
    donated = _check_donate(donate, n_in, seen)
    into = _plan_into(pending, n_in, aval, ufuncs, last, releases, donated, reuse)
    for k in donated:
        if k not in into.values():
            shape, dt = aval[k]
            raise DonationError(
                f"jit: donated argument leaf {k} ({np.dtype(dt).name}{list(shape)}) cannot be "
                "written in place: no elementwise result of its shape and dtype is computed "
                "after its last read; nothing was run, consumed or copied"
            )
    instructions = []
    for i, (nm, kernel, reads, params, outs) in enumerate(pending):
        target = into.get(i)
        # the generated functions themselves (one frame per kernel call); a fused group
        # keeps its kernel object (printable source)
        run: Any = (OutKernel(nm, ufuncs[outs[0]], kernel.pattern).fn if target is not None
                    else kernel.fn if type(kernel) is EqnKernel else kernel)
        instructions.append(Instruction(
            run, tuple(reads), outs, params, tuple(sorted(releases.get(i, ()))), nm,
            into=target,
            reason=_RECOMPUTE if outs and all(s in recompute for s in outs) else _OPERATION,
        ))
    return CompiledGraph(n_in, n_values, tuple(instructions), tuple(outputs), name,
                         donated=donated)


def _check_donate(donate: Sequence[int], n_in: int, outputs: set[int]) -> tuple[int, ...]:
    """The donated input slots, sorted; ``DonationError`` for a leaf that does not exist
    or is returned as is (it cannot be both the caller's result and overwritten)."""
    ks = tuple(sorted(set(donate)))
    for k in ks:
        if type(k) is not int or not 0 <= k < n_in:
            raise DonationError(f"jit: donated argument leaf {k!r} does not exist ({n_in} leaves)")
        if k in outputs:
            raise DonationError(
                f"jit: donated argument leaf {k} is returned as is, so it cannot also be "
                "overwritten; do not donate it"
            )
    return ks


def _plan_into(
    pending: Sequence[_Pending],
    n_in: int,
    aval: dict[int, tuple[tuple[int, ...], str]],
    ufuncs: dict[int, np.ufunc],
    last: dict[int, int],
    releases: dict[int, list[int]],
    donated: Sequence[int],
    reuse: bool,
) -> dict[int, int]:
    """Instruction index -> the slot whose buffer it writes into. O(instructions * reads).

    Candidates for an instruction with an ufunc kernel (``ufuncs``), same shape and dtype
    only: a donated input read for the last time here or earlier (donation first: it must
    happen); an operand read directly (never through a view) for the last time (in place,
    elementwise ufuncs only: a gufunc such as matmul would buffer the overlap);
    a buffer released earlier with nothing freshly allocated since (so holding it never
    raises the peak)."""
    into: dict[int, int] = {}
    donors = {k: last.get(k, -1) for k in donated}
    pool: dict[tuple[tuple[int, ...], str], list[int]] = {}
    for i, (_nm, kernel, reads, _p, outs) in enumerate(pending):
        target: int | None = None
        if len(outs) == 1 and outs[0] in ufuncs and type(kernel) is EqnKernel:  # not fused
            want = aval[outs[0]]
            for k, at in donors.items():
                if at <= i and aval[k] == want and (
                    at < i or (ufuncs[outs[0]].signature is None
                               and _direct_only(kernel, reads, k))
                ):
                    target = k
                    break
            if target is not None:
                del donors[target]
            elif reuse:
                mine = releases.get(i, ())
                elementwise = ufuncs[outs[0]].signature is None  # a gufunc would buffer
                for s in reads:
                    if (elementwise and s in mine and aval[s] == want
                            and _direct_only(kernel, reads, s)):
                        target = s
                        break
                if target is None and pool.get(want):
                    target = pool[want].pop()
        if target is None:
            pool.clear()  # a fresh allocation: a held buffer would add to its peak
        else:
            into[i] = target
        if reuse:
            for s in releases.get(i, ()):
                if s != target:
                    pool.setdefault(aval[s], []).append(s)
    return into


def _direct_only(kernel: Any, reads: Sequence[int], s: int) -> bool:
    """Whether ``kernel`` reads slot ``s`` only as a whole array (never through a view)."""
    pattern = getattr(kernel, "pattern", None)
    if pattern is None:
        return False
    j = list(reads).index(s)
    return all(p[0] == "slot" for p in pattern if p[0] in ("slot", "view") and p[1] == j)


# -- fusion: small intermediates become kernel scratch -----------------------------------------
class FusedKernel:
    """Consecutive instructions run as one generated Python function: values only they read
    are locals (numpy scratch, deleted at their last use, never ledger allocations); the
    values read later are returned fresh (a tuple when more than one).  ``source`` is the
    generated code (printable); the call costs what the hand-written numpy calls cost
    plus one ``functools.partial`` per parameterized step."""

    __slots__ = ("__name__", "fn", "source")

    def __init__(self, name: str, steps: list[Any], n_ext: int, exports: list[int]) -> None:
        self.__name__ = name
        ns: dict[str, Any] = {"_fresh": _fresh_out}
        lines = [f"def fused({', '.join(f'v{i}' for i in range(n_ext))}):"]
        for k, (kernel, params, reads, out, free) in enumerate(steps):
            args = _arg_sources(kernel.pattern, "v{}".format, ns, f"{k}_", reads)
            ns[f"F{k}"] = functools.partial(kernel.impl, **params) if params else kernel.impl
            lines.append(f"    v{out} = F{k}({', '.join(args)})")
            lines.extend(f"    del v{f}" for f in free)
        ins = ", ".join(f"v{i}" for i in range(n_ext))
        rets = [f"_fresh(v{e}, ({ins}{',' if n_ext == 1 else ''}))" for e in exports]
        lines.append(f"    return {rets[0] if len(rets) == 1 else '(' + ', '.join(rets) + ',)'}")
        self.source = "\n".join(lines)
        exec(compile(self.source, f"<fused {name}>", "exec"), ns)  # our own generated code
        self.fn = ns["fused"]

    def __call__(self, *arrays: Any) -> Any:
        return self.fn(*arrays)

    def __repr__(self) -> str:
        return f"FusedKernel({self.__name__})"


def _fresh_out(r: Any, inputs: tuple[Any, ...]) -> Any:
    if type(r) is not np.ndarray:
        return np.asarray(r)
    if r.base is None and r.flags.carray and not any(r is a for a in inputs):
        return r
    return np.array(r, order="C")


def _fuse(
    pending: list[_Pending], nbytes: dict[int, int], limit: int, outputs: set[int]
) -> list[_Pending]:
    """Group consecutive instructions while each one's value is at most ``limit`` bytes and
    not a program output; a group's values read after it are its (fresh) outputs."""
    groups: list[list[_Pending]] = [[]]
    for entry in pending:
        groups[-1].append(entry)
        out = entry[4][0]
        if entry[0] == "layout" or out in outputs or nbytes.get(out, limit + 1) > limit:
            groups.append([])
    readers: dict[int, int] = {}  # slot -> index of the last group reading it
    for gi, g in enumerate(groups):
        for entry in g:
            for s in entry[2]:
                readers[s] = gi
    fused: list[_Pending] = []
    for gi, g in enumerate(groups):
        if len(g) <= 1:
            fused.extend(g)
            continue
        produced = [e[4][0] for e in g]
        ext = list(dict.fromkeys(s for e in g for s in e[2] if s not in produced))
        local = {s: i for i, s in enumerate([*ext, *produced])}
        last_local: dict[int, int] = {}
        for k, e in enumerate(g):
            for s in e[2]:
                last_local[local[s]] = k
        exports = [s for s in produced if s in outputs or readers.get(s, -1) > gi]
        if not exports:  # nothing reads what the group computes: dead code, dropped
            continue
        slots_of = [*ext, *produced]
        steps = []
        for k, (_n, kernel, reads, params, outs) in enumerate(g):
            free = [i for i, at in last_local.items()
                    if at == k and i >= len(ext) and slots_of[i] not in exports]
            steps.append((kernel, dict(params), [local[s] for s in reads], local[outs[0]], free))
        name = f"fused[{g[0][0]}..{g[-1][0]}]({len(g)})"
        kernel = FusedKernel(name, steps, len(ext), [local[s] for s in exports])
        fused.append((name, kernel, ext, (), tuple(exports)))
    return fused
