"""Tracing: run a Python function on :class:`Tracer` values and record a :class:`Graph`.

Every public op ends in ``_dispatch.bind``; while a :class:`Builder` is active, a bind
that has a :class:`Tracer` argument is routed here (``register_tracer``) and becomes one
equation — no kernel runs, no storage is allocated, no tape records.  Python control flow
is unrolled; asking a tracer for a concrete value (``bool``, ``float``, ``int``, an index,
``np.asarray``) raises :class:`TracerError` naming the value and the equation that made it.

Transformations (``_transform.py``, ``_batching.py``) build graphs the same way: they
interpret a graph equation by equation, applying the primitives' rules to tracers through
:data:`TRACE_NS`, the rule namespace whose calls emit equations (calls whose arguments are
all constants fold with numpy instead).  This module knows no ops.
"""

from __future__ import annotations

import linecache
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

import numpy as np

import tenferro_storage as ts
from tenferro_storage._dtypes import dtype_of_constant, unstored
from tenferro_storage.errors import TenferroError
from tenferro_storage.kernel import frozen

from .._core._dispatch import bind as eager_bind
from .._core._handle import EagerTensor
from .._core._namespace import NUMPY_NS, VOCABULARY
from .._core._primitive import Primitive
from ..errors import ArgumentTypeError, UnsupportedDTypeError, _reason
from ._graph import (
    Atom,
    Eqn,
    Graph,
    Lit,
    Note,
    TracerError,
    TreeDef,
    Var,
    abstract_eval,
    tree_flatten,
    tree_unflatten,
    treedef_tuple,
    type_str,
)

_SCALARS = (bool, int, float, complex, np.generic)


class _Active(threading.local):
    def __init__(self) -> None:
        self.stack: list[Builder] = []
        self.note: Note | None = None  # the annotation of the equations emitted now


_ACTIVE = _Active()
CANONICAL: dict[Primitive, Primitive] = {}
"""Primitive substitutions applied when tracing (e.g. ``reshape_copy`` -> ``reshape``: the
eager copy-or-alias distinction does not exist in a graph). Filled by ``traced.py``."""


class Builder:
    """Collects equations for one graph. ``level`` orders nested traces (inner is higher)."""

    __slots__ = ("captured", "eqns", "invars", "level", "live")

    def __init__(self, capture: bool = False) -> None:
        self.eqns: list[Eqn] = []
        self.invars: list[Var] = []
        self.level = len(_ACTIVE.stack)
        self.live = False
        # capture=True: a value of an enclosing, live trace used here becomes an extra
        # input (closure conversion); outer variable -> (its tracer, the input variable)
        self.captured: dict[Var, tuple[Tracer, Var]] | None = {} if capture else None

    @contextmanager
    def active(self) -> Iterator[Builder]:
        """Make this builder receive the binds of its tracers inside the block."""
        _ACTIVE.stack.append(self)
        self.live = True
        try:
            yield self
        finally:
            self.live = False
            _ACTIVE.stack.pop()

    def new_input(self, shape: tuple[int, ...], dtype: Any) -> Tracer:
        """A new graph input of this type, as a tracer. O(1)."""
        v = Var(shape, dtype)
        self.invars.append(v)
        return Tracer(self, v)

    def atom(self, a: Any, operation: str) -> Atom:
        """The graph atom for one argument: its variable, or a literal for a constant."""
        if type(a) is Tracer:
            if a._b is not self:
                if isinstance(a._atom, Lit):  # an outer constant is a constant here too
                    return a._atom
                cap = self.captured
                if cap is not None and a._b.live and a._b.level < self.level:
                    got = cap.get(a._atom)
                    if got is None:
                        got = cap[a._atom] = (a, Var(a.shape, a.dtype))
                    return got[1]
                raise TracerError(
                    f"{operation}: got {a!r} from another trace (an outer function being "
                    "traced, or one that has finished); pass the value in as an argument"
                )
            return a._atom
        if isinstance(a, _SCALARS):
            return Lit(a)
        return constant_literal(a, operation)

    def emit(self, prim: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Tracer:
        """Append ``prim(*args, **params)``; return its output tracer. One abstract eval."""
        prim = CANONICAL.get(prim, prim)
        for k, v in params.items():
            if type(v) is Tracer or (
                isinstance(v, tuple) and any(type(x) is Tracer for x in v)
            ):
                raise TracerError(
                    f"{prim.name}: parameter {k!r} is a traced value {v!r}; it must be known "
                    "at trace time (data-dependent indexing or shapes cannot be traced)"
                )
        try:
            atoms = tuple(self.atom(a, prim.name) for a in args)
        except UnsupportedDTypeError as e:  # the error path: name the argument's position
            i = next(i for i, a in enumerate(args) if type(a) is not Tracer
                     and not isinstance(a, _SCALARS) and dtype_of_constant(a) == e.dtype)
            raise UnsupportedDTypeError(prim.name, f"argument {i}", e.dtype) from None
        lits = [a for a in atoms if isinstance(a, Lit)]
        if len(lits) == len(atoms) and all(a.size <= _FOLD for a in lits):
            folded = _fold(prim, lits, params)  # constants in, a small constant out
            if folded is not None:
                return Tracer(self, folded)
        shape, dtype = abstract_eval(prim, atoms, params)
        out = Var(shape, dtype)
        self.eqns.append(Eqn(prim, atoms, params, out=out, note=_ACTIVE.note))
        return Tracer(self, out)

    def finish(self, outs: Sequence[Any], in_tree: TreeDef, out_tree: TreeDef) -> Graph:
        """The graph with these output leaves (tracers or constants).  Captured outer
        values are trailing inputs: one more argument, a tuple of them."""
        atoms = tuple(self.atom(o, "trace (output)") for o in outs)
        invars = tuple(self.invars)
        if self.captured:
            invars += tuple(v for _, v in self.captured.values())
            consts = tree_flatten(tuple(range(len(self.captured))))[1]
            in_tree = treedef_tuple((*in_tree.children(), consts))
        return Graph(invars, tuple(self.eqns), atoms, in_tree, out_tree)

    def consts(self) -> tuple[Tracer, ...]:
        """The outer traced values this trace captured, in input order. O(captures)."""
        return tuple(t for t, _ in (self.captured or {}).values())


@contextmanager
def noting(note: Note | None) -> Iterator[None]:
    """Annotate every equation emitted inside the block with ``note`` (see
    :class:`~._graph.Note`; ``None``: no annotation). O(1)."""
    prev = _ACTIVE.note
    _ACTIVE.note = note
    try:
        yield
    finally:
        _ACTIVE.note = prev


def swap_note(note: Note | None) -> Note | None:
    """Set the annotation of the equations emitted from now on; return the previous one
    (the per-equation form of :func:`noting`, for interpreters). O(1)."""
    prev = _ACTIVE.note
    _ACTIVE.note = note
    return prev


def current_note() -> Note | None:
    """The annotation equations emitted now receive. O(1)."""
    return _ACTIVE.note


def tracing(args: Sequence[Any]) -> bool:
    """Whether a call on ``args`` is traced: some argument is a tracer, or a trace is
    active and no argument is an eager handle. O(len(args))."""
    if any(type(a) is Tracer for a in args):
        return True
    return bool(_ACTIVE.stack) and not any(isinstance(a, EagerTensor) for a in args)


_FOLD = 16  # elements: equations on literals this small are evaluated at trace time


def _fold(prim: Primitive, atoms: Sequence[Lit], params: dict[str, Any]) -> Lit | None:
    with np.errstate(all="ignore"):
        r = np.asarray(prim.impl(*[a.value for a in atoms], **params))
    return Lit(frozen(r)) if r.size <= _FOLD else None  # r is fresh: frozen, not copied


HOLDER = "a traced graph (a constant it closes over)"
"""The holder name of a captured owner's shared borrow (``BorrowError`` names it)."""


def constant_literal(a: Any, operation: str) -> Lit:
    """The literal of a constant a trace captures, without copying an owner's bytes.

    An owner or view is *borrowed*: the literal keeps a shared borrow named :data:`HOLDER`
    for as long as it (the graph, the compiled program, a jit cache entry) lives, and
    reads the value in place through its read-only array -- writing to the owner
    meanwhile raises ``BorrowError`` naming the holder, as for a tape's residual.  A
    handle is borrowed the same way through a value guard (its value cannot be moved out
    meanwhile: ``into_value`` is ``NotUnique``).  No allocation, no copy, no ledger event.
    A numpy array (of any size) is snapshotted as a recorded copy (``Lit``: imported with
    ``from_numpy``, one ``TRANSFER``, its owner kept by the literal), so the ledger sees
    the snapshot and ``ledger.forbid_copies()`` refuses it; an array already over a
    read-only buffer is kept as is.  A nested list becomes an array first (a conversion
    from Python objects) and is snapshotted the same way.  Literals of at most ``_FOLD``
    elements are what constant folding computes with. O(1) for storage values.
    """
    if isinstance(a, np.ndarray):
        if unstored(a.dtype):
            raise UnsupportedDTypeError(operation, "an argument", a.dtype)
        return Lit(a)
    if isinstance(a, EagerTensor):
        guard = a.value()
        return Lit(ts.kernel.read_array(guard.view), keep=guard)
    if isinstance(a, ts.Tensor | ts.TensorView | ts.TensorViewMut):
        view = ts.kernel.borrow_named(a, HOLDER)
        return Lit(ts.kernel.read_array(view), keep=view)
    if isinstance(a, list | tuple):
        return constant_literal(np.asarray(a), operation)
    raise TypeError(
        f"{operation}: cannot use a {type(a).__name__} in a traced function; expected a traced "
        "value, a numpy array, a Tensor owner or view, a handle or a Python scalar"
    )


def _bind(prim: Primitive, args: tuple[Any, ...], params: dict[str, Any]) -> Tracer:
    """The tracer binder: the innermost trace among the arguments records the op."""
    b: Builder | None = None
    for a in args:
        if type(a) is Tracer and (b is None or a._b.level > b.level):
            b = a._b
    assert b is not None
    if not b.live:
        raise TracerError(
            f"{prim.name}: a traced value escaped its trace (it was kept after the traced "
            "function returned); return it from the function instead"
        )
    return b.emit(prim, args, params)


class Tracer:
    """A value being traced: a variable (or literal) of one :class:`Builder`.

    Has ``shape``, ``dtype`` (a numpy dtype), ``ndim``, ``size``, ``T`` and the Python
    operators of ``EagerTensor``; ops on it record equations (O(1) each plus one cached
    abstract evaluation).  It has no value: see :class:`TracerError`.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = ("__weakref__", "_atom", "_b")
    __array_ufunc__ = None  # numpy defers to our reflected operators

    def __init__(self, builder: Builder, atom: Atom) -> None:
        self._b = builder
        self._atom = atom

    @property
    def shape(self) -> tuple[int, ...]:
        """Extents per axis (known at trace time)."""
        return self._atom.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype (known at trace time)."""
        return self._atom.dtype

    @property
    def ndim(self) -> int:
        """Number of axes."""
        return len(self._atom.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self._atom.shape, dtype=np.int64))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d traced value")
        return self.shape[0]

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self[i]  # type: ignore[index]

    def _describe(self) -> str:
        a = self._atom
        where = "an input of the traced function"
        for i, e in enumerate(self._b.eqns):
            if e.out is a:
                where = f"the output of `{e.prim.name}` at equation {i}"
                break
        return f"traced value {type_str(a.shape, a.dtype)} ({where})"

    def _concrete(self, what: str) -> NoReturn:
        raise TracerError(
            f"{what} needs a concrete value, but it was asked of a {self._describe()}"
            f"{_user_line()}. Python control flow on traced values cannot be traced: "
            f"{_ADVICE.get(what.split(' ')[0], _ADVICE['using'])}"
        )

    def __bool__(self) -> bool:
        self._concrete("bool() (an if/while/and/or on a value)")

    def __float__(self) -> float:
        self._concrete("float()")

    def __int__(self) -> int:
        self._concrete("int()")

    def __complex__(self) -> complex:
        self._concrete("complex()")

    def __index__(self) -> int:
        self._concrete("using a value as an index")

    def __array__(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._concrete("np.asarray()")

    def item(self) -> Any:
        """Refused: a traced value has no concrete value (:class:`TracerError`).

        The message names the value, the equation that made it and the user's line.

        Cost: no allocation; no copy; no sync; no dispatch; O(equations + stack depth) to
        word the error.
        Raises: TracerError (always)."""
        self._concrete("item()")

    def to_numpy(self) -> Any:
        """Refused: a traced value has no concrete value (:class:`TracerError`).

        The message names the value, the equation that made it and the user's line.

        Cost: no allocation; no copy; no sync; no dispatch; O(equations + stack depth) to
        word the error.
        Raises: TracerError (always)."""
        self._concrete("to_numpy()")

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"Tracer({type_str(self.shape, self.dtype)})"



# -- tracing a function
_ADVICE = {
    "bool()": (
        "for an if/else on a value use tenferro_ad.lax.cond (or lax.switch for several "
        "branches); for a while/for loop whose trip count depends on a value use "
        "lax.while_loop (lax.fori_loop or lax.scan when the count is known); "
        "ad.where(c, a, b) only selects elementwise between two computed values; or "
        "compute the condition outside the traced function (jit static_argnums)"
    ),
    "using": (
        "for a loop index use lax.fori_loop or lax.scan (the index is then a traced value "
        "ops accept); for data-dependent selection use ad.where or take_along_axis; for "
        "branches lax.cond/lax.switch; or make the value static (jit static_argnums)"
    ),
}
_PACKAGE_DIRS = (  # tenferro_ad/ and tenferro_storage/
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
    os.path.dirname(os.path.abspath(ts.__file__)) + os.sep,
)


def _user_line() -> str:
    """`` at file:line (source)`` of the innermost caller outside tenferro's packages (the
    user's line that asked for the value), or ``""``. O(stack depth)."""
    f = sys._getframe(2)
    while f is not None:
        path = os.path.abspath(f.f_code.co_filename)
        if not path.startswith(_PACKAGE_DIRS):
            src = linecache.getline(path, f.f_lineno).strip()
            return f" at {f.f_code.co_filename}:{f.f_lineno}" + (f" (`{src}`)" if src else "")
        f = f.f_back  # type: ignore[assignment]
    return ""


def aval_of(x: Any, what: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """``(shape, dtype)`` of an argument leaf: an array, owner, view, handle, tracer, scalar or
    any object with ``shape`` and ``dtype``."""
    if isinstance(x, _SCALARS):
        arr = np.asarray(x)
        if type(x) is np.str_ or arr.dtype.kind not in "biufc":  # np.str_, np.datetime64...
            raise UnsupportedDTypeError.of_leaf(what, arr.dtype)
        return (), arr.dtype
    if type(x) is np.ndarray and unstored(x.dtype):  # str, object, float16: before any import
        raise UnsupportedDTypeError.of_leaf(what, x.dtype)
    try:
        shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    except TenferroError as e:  # a consumed owner or handle, a released view: named here
        e.args = (f"{what}: {_reason(e)}", *e.args[1:])
        raise
    if shape is None or dtype is None:
        raise ArgumentTypeError(
            f"{what}: a {type(x).__name__} has no shape/dtype; pass arrays, Tensor owners, "
            "handles, Python scalars (or tuples/lists/dicts of them)"
        )
    dt = getattr(dtype, "numpy", dtype)  # tenferro_storage.DType -> numpy dtype
    try:
        nd = np.dtype(dt)
        # a non-native byte order (big-endian data) is the same type: its import converts
        return tuple(int(s) for s in shape), nd if nd.isnative else nd.newbyteorder("=")
    except (TypeError, ValueError):  # a class (np.float32), or a foreign shape/dtype
        raise ArgumentTypeError(
            f"{what}: a {type(x).__name__} has no usable shape/dtype; pass arrays, Tensor "
            "owners, handles, Python scalars (or tuples/lists/dicts of them)"
        ) from None


def call_with_keywords(f: Callable[..., Any], nargs: int, *args: Any) -> Any:
    """``f(*args[:nargs], **args[nargs])``: a call whose keyword arguments travel as one
    trailing positional dict, traced (``jit``) and batched (``vmap``) like the other
    arguments, as JAX treats them. O(1)."""
    return f(*args[:nargs], **args[nargs])


def trace_flat(
    f: Callable[..., Any], avals: Sequence[tuple[tuple[int, ...], Any]], in_tree: TreeDef
) -> Graph:
    """Trace ``f`` on new inputs of the given types (structured by ``in_tree``)."""
    return _trace_into(Builder(), f, avals, in_tree)


def _trace_into(
    b: Builder,
    f: Callable[..., Any],
    avals: Sequence[tuple[tuple[int, ...], Any]],
    in_tree: TreeDef,
) -> Graph:
    """``f`` traced into ``b`` on new inputs of the given types; a ``None`` result leaf is
    refused (``ArgumentTypeError``). O(ops)."""
    ins = [b.new_input(s, d) for s, d in avals]
    with b.active():
        out = f(*tree_unflatten(in_tree, ins))
        leaves, out_tree = tree_flatten(out)
        for o in leaves:
            if o is None:
                raise ArgumentTypeError(
                    "trace: argument 'f': the function returned None as a result leaf"
                )
        return b.finish(leaves, in_tree, out_tree)


def trace_closed(
    f: Callable[..., Any], args: Sequence[Any]
) -> tuple[Graph, tuple[Tracer, ...] | None]:
    """Trace ``f`` at the types of ``args`` (pytrees), converting closures: a value of an
    enclosing trace that ``f`` uses becomes an extra, trailing argument of the graph -- a
    tuple of them, returned as ``consts`` (``None`` when ``f`` captured nothing), to pass
    back when the graph (or a transformation of it) is evaluated.  As JAX, the
    transformations see a captured value as a constant input.  O(ops)."""
    leaves, in_tree = tree_flatten(tuple(args))
    avals = [aval_of(x, f"trace: argument leaf {i}") for i, x in enumerate(leaves)]
    b = Builder(capture=True)
    graph = _trace_into(b, f, avals, in_tree)
    consts = b.consts()
    return graph, (consts if consts else None)


def trace(f: Callable[..., Any]) -> Callable[..., Graph]:
    """``trace(f)(*args)``: the :class:`Graph` of ``f`` at the types of ``args``.

    ``args`` are pytrees (tuples, lists, dicts) of arrays, owners, handles or scalars; only
    their shapes and dtypes are used (nothing is read, borrowed or consumed).  Python
    control flow is unrolled.  An exception ``f`` raises propagates.

    Cost: allocates the new graph only (no tensor storage); no copy; no sync; no dispatch;
    O(equations): one equation and one (cached) abstract evaluation per op.

    Raises:
        ArgumentTypeError: an argument leaf has no usable shape and dtype (not an
            array, owner, view, handle or scalar), or ``f`` returns ``None`` as a result
            leaf.
        TracerError: ``f`` uses a traced value where a concrete one is needed
            (``bool()``, ``float()``, ...)."""

    def traced(*args: Any) -> Graph:
        leaves, in_tree = tree_flatten(args)
        avals = [aval_of(x, f"trace: argument leaf {i}") for i, x in enumerate(leaves)]
        return trace_flat(f, avals, in_tree)

    return traced


# -- the tracing rule namespace
def tracer_of(b: Builder, value: Any) -> Any:
    """``value`` as a tracer of ``b`` when it is an array constant (numpy array, handle,
    owner or view: a literal tracer); anything else (tracers, scalars, shapes) unchanged."""
    if isinstance(value, np.ndarray | EagerTensor | ts.Tensor | ts.TensorView):
        return Tracer(b, constant_literal(value, "trace"))
    return value


def _builder_in(args: Sequence[Any]) -> Builder | None:
    b: Builder | None = None
    for a in args:
        items = a if isinstance(a, list) else (a,)
        for x in items:
            if type(x) is Tracer and (b is None or x._b.level > b.level):
                b = x._b
    return b


class _TraceNS:
    """The rule namespace over tracers (see the module docstring); filled by
    :func:`fill_namespace`."""

    def apply(self, prim: Primitive, *args: Any, **params: Any) -> Any:
        b = _builder_in(args)
        if b is None:
            return prim.impl(*args, **params)
        return b.emit(prim, args, params)


TRACE_NS: Any = _TraceNS()


def _either(traced: Callable[..., Any], folded: Callable[..., Any]) -> Callable[..., Any]:
    def op(*args: Any, **kw: Any) -> Any:
        b = _builder_in(args)
        if b is None:
            return folded(*args, **kw)
        lifted = [
            [tracer_of(b, x) for x in a] if isinstance(a, list) else tracer_of(b, a) for a in args
        ]
        return traced(*lifted, **kw)

    return op


def fill_namespace(table: dict[str, Callable[..., Any]]) -> None:
    """Install one traced implementation per :data:`VOCABULARY` word (``apply`` is built in).
    Each is used when some argument is a tracer; otherwise numpy folds the constants."""
    missing = set(VOCABULARY) - set(table) - {"apply"}
    if missing:
        raise TypeError(f"fill_namespace: no traced implementation for {sorted(missing)}")
    for name, fn in table.items():
        setattr(TRACE_NS, name, _either(fn, getattr(NUMPY_NS, name)))


# -- running a graph by binding its equations (handles record on tapes; tracers inline)
BIND_REGIONS: Callable[[Graph, Sequence[Any]], list[Any]] | None = None
"""Binds a graph with checkpoint regions on handles (``_checkpoint._region.bind_regions``,
installed by ``tenferro_ad._wiring``)."""


def run_bound(graph: Graph, leaves: Sequence[Any]) -> list[Any]:
    """Evaluate ``graph`` on ``leaves`` by binding each equation (``_dispatch.bind``): on
    handles the ops record on the current tape, on tracers they are inlined into the
    current trace. Intermediates are dropped at their last use.  On handles, a graph with
    checkpoint regions is bound by :data:`BIND_REGIONS` (``_checkpoint._region.bind_regions``:
    each region runs as an eager checkpoint)."""
    if not any(type(x) is Tracer for x in leaves) and any(
        e.note is not None and e.note.region is not None for e in graph.eqns
    ):
        assert BIND_REGIONS is not None
        return BIND_REGIONS(graph, leaves)
    env: dict[Var, Any] = dict(zip(graph.invars, leaves, strict=True))
    last: dict[Var, int] = {}
    for i, e in enumerate(graph.eqns):
        for a in e.inputs:
            if isinstance(a, Var):
                last[a] = i
    keep = {a for a in graph.outvars if isinstance(a, Var)}
    outer = _ACTIVE.note
    for i, e in enumerate(graph.eqns):
        vals = [env[a] if isinstance(a, Var) else a.value for a in e.inputs]
        if e.note is None:
            env[e.out] = eager_bind(e.prim, *vals, **e.params)
        else:  # inlined into a trace: the equation keeps its annotation
            _ACTIVE.note = e.note
            try:
                env[e.out] = eager_bind(e.prim, *vals, **e.params)
            finally:
                _ACTIVE.note = outer
        for a in e.inputs:
            if isinstance(a, Var) and last[a] == i and a not in keep:
                env.pop(a, None)
    return [env[a] if isinstance(a, Var) else a.value for a in graph.outvars]
