"""The traced IR: inert, immutable data plus a few functions (check, print, DCE, trees).

A :class:`Graph` is a jaxpr-like program: typed input variables, a sequence of
single-output :class:`Eqn` equations over :class:`~tenferro_ad._core._primitive.Primitive`
objects with their static parameters, and outputs (variables or literals).  Nothing in it
owns storage or refers to a tape; array literals are read-only numpy snapshots taken at
trace time.  Argument and result structure (any pytree: tuples, lists, dicts, namedtuples,
``None``, registered nodes) is kept as :class:`TreeDef` values (``tenferro_ad.tree_util``'s
``PyTreeDef``), so a graph can be evaluated and transformed on pytrees.

This module knows no ops: it sees primitives only through ``prim.name`` and ``prim.impl``
(abstract evaluation runs ``impl`` on stride-0 probe arrays, see :func:`abstract_eval`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs
import numpy as np

from tenferro_storage._creation import from_numpy
from tenferro_storage._pytree import PyTreeDef, tree_structure
from tenferro_storage._pytree import tree_flatten as tree_flatten
from tenferro_storage._pytree import tree_unflatten as tree_unflatten
from tenferro_storage._pytree import treedef_tuple as treedef_tuple
from tenferro_storage.errors import DTypeError, TenferroError
from tenferro_storage.kernel import frozen, is_frozen, read_array, record_transfer

from .._core._primitive import Primitive

Shape = tuple[int, ...]


class GraphTypeError(TenferroError, TypeError):
    """A graph does not type-check: a variable used before it is defined or defined twice,
    or an equation whose declared output type differs from what its primitive produces.
    The message shows the equations around the failure (``>>`` marks it)."""


class TracerError(TenferroError, TypeError):
    """A traced value was used where a concrete value is needed (``bool()``, ``float()``,
    ``int()``, indexing, ``np.asarray``: data-dependent Python control flow), or escaped
    the trace that made it.  The message names the value and the equation that made it."""


# -- atoms
class Var:
    """A typed variable (``shape``, numpy ``dtype``), compared and hashed by identity. O(1).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = ("dtype", "shape")

    shape: Shape
    dtype: np.dtype[Any]

    def __init__(self, shape: Shape, dtype: Any) -> None:
        object.__setattr__(self, "shape", tuple(int(s) for s in shape))
        object.__setattr__(self, "dtype", np.dtype(dtype))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Var is immutable (tried to set {name!r})")

    def __repr__(self) -> str:
        return f"Var({type_str(self.shape, self.dtype)})"


def _snapshot(array: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], Any]:
    """A literal's recorded snapshot of a caller's array: its read-only array and what
    keeps it (the owner ``from_numpy`` made: one ``TRANSFER``), or for a dtype storage
    does not hold a frozen copy after one recorded ``TRANSFER`` event. O(size)."""
    try:
        owner = from_numpy(array)
    except DTypeError:
        record_transfer(array.nbytes, "trace: a literal of a dtype storage does not hold")
        return frozen(np.array(array, copy=True)), None
    return read_array(owner), owner


class Lit:
    """A literal: a Python/numpy scalar (printed by value) or a read-only numpy array constant.

    ``shape``/``dtype`` are those numpy gives the value. O(1) for scalars.  An array is
    kept over a read-only buffer (no numpy API makes it writable): an array that already
    is one is kept as is (the trace freezes the fresh arrays it makes itself -- folded
    constants, zero seeds -- without a copy); any other (a caller's array a traced
    function closes over, one a user hands to ``Lit``) is snapshotted once as a recorded
    copy: imported with ``from_numpy`` (one ``TRANSFER``, the owner kept in ``keep``), or
    for a dtype storage does not hold, copied after ``kernel.record_transfer`` (so
    ``ledger.forbid_copies()`` refuses it either way).  ``keep`` is what keeps a
    *borrowed* constant valid while the literal lives: the shared borrow of a captured
    owner (or the value guard of a captured handle) whose read-only array ``value`` is --
    no copy (see ``_trace.constant_literal``).

    Cost: no allocation and no copy for a scalar or a read-only array; any other array
    allocates and copies once (the recorded snapshot above); no sync; no dispatch; O(1)
    for a scalar, O(size) for a snapshot.
    Raises: nothing."""

    __slots__ = ("dtype", "keep", "shape", "value")

    value: Any
    shape: Shape
    dtype: np.dtype[Any]
    keep: Any

    def __init__(self, value: Any, keep: Any = None) -> None:
        if isinstance(value, np.ndarray):
            if not is_frozen(value):
                value, keep = _snapshot(value)
            shape, dtype = tuple(value.shape), value.dtype
        else:
            arr = np.asarray(value)
            shape, dtype = (), arr.dtype
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "keep", keep)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Lit is immutable (tried to set {name!r})")

    @property
    def size(self) -> int:
        """Number of elements. O(rank)."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def is_scalar(self) -> bool:
        """True for a scalar literal (a parameter-like argument, as in eager mode)."""
        return not isinstance(self.value, np.ndarray)

    def __repr__(self) -> str:
        return f"Lit({_lit_str(self)})"


Atom = Var | Lit


def _frozen_params(p: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(p))


@attrs.frozen(eq=False)
class Region:
    """A checkpoint region of a traced program (``ad.checkpoint(f, policy=...)`` traced).

    ``label`` names it (``f``'s name), ``policy`` is the eager
    :class:`~tenferro_ad.CheckpointPolicy` (anything with ``saves_output(name)``),
    ``parent`` the enclosing region when regions nest.  Compared by identity. O(1).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    label: str
    policy: Any
    parent: Region | None = None

    def chain(self) -> tuple[Region, ...]:
        """The enclosing regions and this one, outermost first. O(depth).

        Cost: no allocation (a tuple of the existing regions); no copy; no sync; no
        dispatch; O(depth).
        Raises: nothing."""
        out: list[Region] = []
        r: Region | None = self
        while r is not None:
            out.append(r)
            r = r.parent
        return tuple(reversed(out))

    def saves(self, e: Eqn) -> bool:
        """Whether the policy keeps ``e``'s output (a boundary, never recomputed): by its
        primitive, or by the label it was named with (``Note.label``). O(1).

        Cost: no allocation; no copy; no sync; no dispatch; O(1) (the policy's two
        lookups; a policy other than ``CheckpointPolicy`` may cost and raise more).
        Raises: nothing."""
        if self.policy.saves_output(e.prim.name):
            return True
        label = e.note.label if e.note is not None else ""
        return bool(label) and bool(self.policy.saves_label(label))

    def __str__(self) -> str:
        return f"{self.label} policy={self.policy!r}"


@attrs.frozen
class Note:
    """Where an equation sits in a transformed program (inert annotations, ignored by
    evaluation): its checkpoint ``region``; ``backward``: emitted by a reverse sweep (the
    second half of a gradient program); ``recompute``: a checkpoint interior re-emitted
    for backward (its allocations are ``CHECKPOINT_RECOMPUTE_OUTPUT``); ``origin``: the
    forward primitive whose rule emitted it, or ``"checkpoint:<label>"`` when that
    primitive (or the recomputation) belongs to a checkpoint region -- the outermost
    region's label, whose backward step it is part of, as on the eager tape; ``label``:
    the name given to its value with ``ad.name`` (for ``save_named`` policies).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    region: Region | None = None
    backward: bool = False
    recompute: bool = False
    origin: str = ""
    label: str = ""


@attrs.frozen(eq=False)
class Eqn:
    """``out = prim(*inputs, **params)``: one equation. ``params`` is a read-only mapping;
    ``note`` (optional, see :class:`Note`) annotates it without changing what it computes.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    prim: Primitive
    inputs: tuple[Atom, ...]
    params: Mapping[str, Any] = attrs.field(converter=_frozen_params)
    out: Var = attrs.field(kw_only=True)
    note: Note | None = attrs.field(default=None, kw_only=True)


# -- pytree structure: the one pytree of tenferro (``tenferro_storage._pytree``), JAX's
# semantics; ``TreeDef`` is its ``PyTreeDef`` under the name traced mode always used.
TreeDef = PyTreeDef


def flat_tree(n: int) -> TreeDef:
    """The structure of a flat tuple of ``n`` leaves. O(1) for small ``n`` (interned)."""
    return tree_structure((0,) * n)


# -- the graph
@attrs.frozen(eq=False)
class Graph:
    """An inert traced program (see the module docstring). Print it with ``str(graph)``.

    ``in_tree`` is the structure of the positional-argument tuple, ``out_tree`` that of
    the result; ``invars``/``outvars`` are their flattened leaves.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    invars: tuple[Var, ...]
    eqns: tuple[Eqn, ...]
    outvars: tuple[Atom, ...]
    in_tree: TreeDef
    out_tree: TreeDef

    def __str__(self) -> str:
        return pretty(self)

    def __repr__(self) -> str:
        return (
            f"Graph({len(self.invars)} inputs, {len(self.eqns)} equations, "
            f"{len(self.outvars)} outputs)"
        )


# -- abstract evaluation (shape/dtype inference)
_AVAL_CACHE: dict[Any, tuple[Shape, np.dtype[Any]]] = {}


def probe(shape: Shape, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """A read-only stride-0 stand-in of ``shape``/``dtype`` (identity matrices on square
    trailing axes, so decompositions and solves succeed; ones elsewhere). O(n) at most."""
    if len(shape) >= 2 and shape[-1] == shape[-2]:
        base = np.eye(shape[-1], dtype=dtype)
    else:
        base = np.ones((), dtype=dtype)
    return np.broadcast_to(base, shape)


def _cache_key(prim: Primitive, inputs: Sequence[Atom], params: Mapping[str, Any]) -> Any:
    parts: list[Any] = [prim]
    for a in inputs:
        if isinstance(a, Lit) and a.is_scalar:
            parts.append((type(a.value), a.dtype))
        else:
            parts.append((a.shape, a.dtype))
    key = (tuple(parts), tuple(sorted(params.items())))
    hash(key)  # unhashable params (index arrays): the caller skips the cache
    return key


def abstract_eval(
    prim: Primitive, inputs: Sequence[Atom], params: Mapping[str, Any]
) -> tuple[Shape, np.dtype[Any]]:
    """The output ``(shape, dtype)`` of ``prim`` on these inputs, by running its kernel once on
    stride-0 probes (cached per primitive, input types and parameters; numpy floating-point
    warnings are ignored since probe values are arbitrary).  A kernel that refuses the
    stride-0 probes runs once more on laid-out ones (one allocation per input).  A
    primitive with an ``abstract`` rule (a loop, a custom call) answers from it without
    running the kernel, and is not cached (a cache entry would keep its parameters -- and
    what they hold -- alive for the process)."""
    if prim.abstract is not None:
        shape, dtype = prim.abstract(
            *[a.value if isinstance(a, Lit) and a.is_scalar else (a.shape, a.dtype)
              for a in inputs],
            **params,
        )
        return tuple(shape), np.dtype(dtype)
    try:
        key = _cache_key(prim, inputs, params)
    except TypeError:
        key = None
    if key is not None and key in _AVAL_CACHE:
        return _AVAL_CACHE[key]
    args = [a.value if isinstance(a, Lit) else probe(a.shape, a.dtype) for a in inputs]
    with np.errstate(all="ignore"):
        try:
            out = prim.impl(*args, **params)
        except Exception:  # a kernel that needs strides a stride-0 probe lacks (a zero-copy
            # reinterpretation): once more on laid-out probes, whose failure is the answer
            out = prim.impl(*[np.array(a) if isinstance(a, np.ndarray) else a for a in args],
                            **params)
    arr = np.asarray(out)
    aval = (tuple(int(s) for s in arr.shape), arr.dtype)
    if key is not None:
        if len(_AVAL_CACHE) >= 8192:  # bounded: a long-running process sees many shapes
            _AVAL_CACHE.clear()
        _AVAL_CACHE[key] = aval
    return aval


# -- checking
def check_graph(graph: Graph) -> None:
    """Type-check ``graph``: each variable defined once before use, each equation's output
    type equal to its abstract evaluation, the trees matching the leaves.

    Cost: no allocation (no storage: one cached abstract evaluation per equation); no
    copy; no sync; no dispatch; O(equations).

    Raises:
        GraphTypeError: the graph does not type-check; the message shows the equations
            around the failure."""
    names = _Names.of(graph)
    defined: set[Var] = set()
    for v in graph.invars:
        if v in defined:
            raise GraphTypeError(f"check_graph: input {names(v)} is listed twice")
        defined.add(v)
    for i, e in enumerate(graph.eqns):
        for a in e.inputs:
            if isinstance(a, Var) and a not in defined:
                _fail(graph, i, names, f"input {names(a)} is used before it is defined")
        if e.out in defined:
            _fail(graph, i, names, f"output {names(e.out)} is defined twice")
        try:
            shape, dtype = abstract_eval(e.prim, e.inputs, e.params)
        except Exception as exc:
            _fail(graph, i, names, f"{e.prim.name} cannot be applied to these inputs ({exc})")
        if (shape, dtype) != (e.out.shape, e.out.dtype):
            _fail(
                graph, i, names,
                f"{e.prim.name} produces {type_str(shape, dtype)} but the equation declares "
                f"{type_str(e.out.shape, e.out.dtype)}",
            )
        defined.add(e.out)
    for a in graph.outvars:
        if isinstance(a, Var) and a not in defined:
            raise GraphTypeError(f"check_graph: output {names(a)} is never defined\n{graph}")
    if graph.in_tree.num_leaves != len(graph.invars):
        raise GraphTypeError("check_graph: in_tree does not match the number of inputs")
    if graph.out_tree.num_leaves != len(graph.outvars):
        raise GraphTypeError("check_graph: out_tree does not match the number of outputs")


def _fail(graph: Graph, i: int, names: _Names, why: str) -> None:
    lo, hi = max(0, i - 3), min(len(graph.eqns), i + 2)
    lines = [f"check_graph: equation {i}: {why}", "  ..." if lo else "  (start)"]
    for j in range(lo, hi):
        mark = ">>" if j == i else "  "
        lines.append(f"{mark} {eqn_str(graph.eqns[j], names)}")
    lines.append("  ..." if hi < len(graph.eqns) else "  (end)")
    raise GraphTypeError("\n".join(lines))


# -- dead-code elimination
def dce(graph: Graph) -> Graph:
    """``graph`` without equations no output depends on (primitives are pure). O(#eqns).

    Cost: allocates the new graph only (no tensor storage); no copy; no sync; no dispatch;
    O(equations).
    Raises: nothing."""
    live = {a for a in graph.outvars if isinstance(a, Var)}
    kept: list[Eqn] = []
    for e in reversed(graph.eqns):
        if e.out in live:
            kept.append(e)
            live.update(a for a in e.inputs if isinstance(a, Var))
    if len(kept) == len(graph.eqns):
        return graph
    return attrs.evolve(graph, eqns=tuple(reversed(kept)))


def last_uses(graph: Graph) -> dict[Var, int]:
    """For each variable read by an equation, the index of the last equation reading it
    (``len(eqns)`` for outputs): the liveness a runner uses to release intermediates."""
    last: dict[Var, int] = {}
    for i, e in enumerate(graph.eqns):
        for a in e.inputs:
            if isinstance(a, Var):
                last[a] = i
    for a in graph.outvars:
        if isinstance(a, Var):
            last[a] = len(graph.eqns)
    return last


# -- printing
_SHORT = {"float64": "f64", "float32": "f32", "int64": "i64", "int32": "i32", "bool": "bool",
          "complex128": "c128", "complex64": "c64"}


def type_str(shape: Shape, dtype: Any) -> str:
    """``f64[2,3]``-style type of a variable."""
    name = np.dtype(dtype).name
    return f"{_SHORT.get(name, name)}[{','.join(str(s) for s in shape)}]"


class _Names:
    """Short names (a, b, ..., z, ba, ...) in order of first appearance."""

    def __init__(self) -> None:
        self.names: dict[Var, str] = {}

    @classmethod
    def of(cls, graph: Graph) -> _Names:
        """Names for ``graph`` in definition order (inputs, then each equation's output)."""
        n = cls()
        for v in graph.invars:
            n(v)
        for e in graph.eqns:
            n(e.out)
        return n

    def __call__(self, v: Var) -> str:
        n = self.names.get(v)
        if n is None:
            k, s = len(self.names), ""
            while True:
                s = chr(ord("a") + k % 26) + s
                k = k // 26 - 1
                if k < 0:
                    break
            n = self.names[v] = s
        return n


def _lit_str(a: Lit) -> str:
    if a.is_scalar:
        return repr(a.value.item() if isinstance(a.value, np.generic) else a.value)
    if a.value.size <= 4:
        return f"{np.array2string(a.value, separator=',')}:{type_str(a.shape, a.dtype)}"
    return f"const:{type_str(a.shape, a.dtype)}"


def _param_str(v: Any) -> str:
    if isinstance(v, Graph):
        return "{...}"  # printed below the equation (:func:`_subgraphs`)
    if isinstance(v, tuple) and v and all(isinstance(g, Graph) for g in v):
        return "(" + ",".join("{...}" for _ in v) + ")"
    if isinstance(v, np.ndarray):
        return f"array{list(v.shape)}" if v.size > 8 else np.array2string(v, separator=",")
    if isinstance(v, np.dtype):
        return v.name
    if isinstance(v, tuple) and any(isinstance(x, slice | np.ndarray) for x in v):
        return "(" + ",".join(_param_str(x) for x in v) + ")"
    if isinstance(v, slice):
        return ":".join("" if x is None else str(x) for x in (v.start, v.stop, v.step))
    return repr(v)


def eqn_str(e: Eqn, names: Any) -> str:
    """One equation, ``c:f64[3] = mul a b``, with names from ``names`` (a :class:`_Names`)."""
    args = " ".join(names(a) if isinstance(a, Var) else _lit_str(a) for a in e.inputs)
    ps = " ".join(f"{k}={_param_str(v)}" for k, v in sorted(e.params.items()))
    head = f"{e.prim.name}[{ps}]" if ps else e.prim.name
    return f"{names(e.out)}:{type_str(e.out.shape, e.out.dtype)} = {head} {args}"


def _subgraphs(e: Eqn) -> Iterator[tuple[str, Graph]]:
    """The sub-programs an equation carries as parameters (a loop's body, a conditional's
    branches), named by parameter (``branches[1]`` for the second of a tuple)."""
    for k, v in sorted(e.params.items()):
        if isinstance(v, Graph):
            yield k, v
        elif isinstance(v, tuple) and v and all(isinstance(g, Graph) for g in v):
            for i, g in enumerate(v):
                yield f"{k}[{i}]", g


def _blocks(e: Eqn) -> tuple[tuple[Region, str], ...]:
    note = e.note
    if note is None or note.region is None:
        return ()
    kind = "recompute" if note.recompute else "checkpoint"
    return tuple((r, kind) for r in note.region.chain())


def _body(graph: Graph, names: _Names) -> list[str]:
    """Equation lines; runs of a checkpoint region (or of its backward recomputation) are
    printed as an indented ``checkpoint[...] { ... }`` / ``recompute[...] { ... }`` block."""
    lines: list[str] = []
    open_: tuple[tuple[Region, str], ...] = ()
    for e in graph.eqns:
        want = _blocks(e)
        keep = 0
        while keep < min(len(open_), len(want)) and open_[keep] == want[keep]:
            keep += 1
        for depth in range(len(open_), keep, -1):
            lines.append("    " + "  " * (depth - 1) + "}")
        for depth in range(keep, len(want)):
            r, kind = want[depth]
            lines.append("    " + "  " * depth + f"{kind}[{r}] {{")
        open_ = want
        pad = "    " + "  " * len(want)
        lines.append(pad + eqn_str(e, names))
        for k, sub in _subgraphs(e):  # a loop body or branch, indented under its equation
            text = pretty(sub).split("\n")
            lines.append(f"{pad}    {k} = {text[0]}")
            lines.extend(f"{pad}    {' ' * (len(k) + 3)}{t}" for t in text[1:])
    for depth in range(len(open_), 0, -1):
        lines.append("    " + "  " * (depth - 1) + "}")
    return lines


def pretty(graph: Graph) -> str:
    """The graph as text, jaxpr style (checkpoint regions as blocks). O(size of the graph)."""
    names = _Names.of(graph)
    ins = " ".join(f"{names(v)}:{type_str(v.shape, v.dtype)}" for v in graph.invars)
    body = _body(graph, names)
    outs = ", ".join(names(a) if isinstance(a, Var) else _lit_str(a) for a in graph.outvars)
    return "\n".join([f"{{ lambda {ins} . let", *body, f"  in ({outs}) }}"])


def atoms(graph: Graph) -> Iterator[Atom]:
    """Every atom the graph reads (equation inputs, then outputs)."""
    for e in graph.eqns:
        yield from e.inputs
    yield from graph.outvars
