"""Loops and branches that compile once: ``scan``, ``fori_loop``, ``while_loop``, ``cond``,
``switch`` with JAX's signatures (``jax.lax``) and pytree carries.

Each construct works two ways, picked by what it is given:

* **eagerly** (handles, numpy arrays, scalars; no trace active): a Python loop of recorded
  ops on the current tape (or the one selected branch), with the same results as the
  traced form -- ``grad``, ``jvp`` and ``checkpoint`` (inside a body: only each step's
  carry is kept) work as on any eager code;
* **traced** (inside ``jit``, ``vmap``, a traced ``grad``/``jvp``, ``traced.trace``): ONE
  equation (one per output dtype when the outputs mix dtypes) whose body is a sub-graph,
  printed under its equation.  The host engine runs the loop over the sub-program; the
  XLA engine lowers it to ``lax.scan``/``lax.while_loop``/``lax.switch``.  ``vmap``
  batches predicates as JAX does (``cond`` selects between both branches, ``while_loop``
  runs while any element's predicate holds); forward mode works through every
  construct, reverse mode through ``scan``, ``fori_loop`` with static bounds and
  ``cond``; ``while_loop`` refuses it (:class:`~tenferro_ad.errors.ReverseModeError`).

A body may close over values of the enclosing function (they become inputs of the
equation).  Traced reverse mode through ``scan`` keeps only the carry entering each step
and recomputes each step's body backward (a checkpointed body).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tenferro_storage._pytree import PyTreeDef, tree_flatten, tree_unflatten

from ._control._common import Spec, avals, bind_outputs, regraph, same_types
from ._control._cond import cond_primitive
from ._control._scan import out_avals, scan_primitive
from ._control._while import WHILE_RESULT, while_primitive
from ._core._dispatch import bind
from ._core._handle import EagerTensor
from ._core._state import STATE
from ._traced._graph import Graph, Var
from ._traced._trace import aval_of, trace_closed, tracing
from .errors import ArgumentError, ArgumentTypeError
from .ops import elementwise as ew
from .ops import manip as mn
from .ops import shape as sh

__all__ = ["cond", "fori_loop", "scan", "switch", "while_loop"]


def _leaf_types(leaves: Sequence[Any], what: str) -> list[tuple[tuple[int, ...], np.dtype[Any]]]:
    return [aval_of(x, f"{what}: leaf {i}") for i, x in enumerate(leaves)]


def _close(f: Callable[..., Any], args: Sequence[Any]) -> tuple[Graph, list[Any], Any]:
    """``f`` traced at ``args``' types with its closure converted: the graph with the
    captured values FIRST (``(*consts, *args) -> outputs``), the captured values, and the
    output structure."""
    graph, consts = trace_closed(f, args)
    cs = list(consts or ())
    n_args = len(graph.invars) - len(cs)
    inv = [*graph.invars[n_args:], *graph.invars[:n_args]]
    return regraph(graph, inv, graph.outvars), cs, graph.out_tree


def _names(tree: PyTreeDef, what: str) -> list[str]:
    return [f"{what} leaf {i}" for i in range(tree.num_leaves)]


# -- scan
def scan(
    f: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs: Any = None,
    length: int | None = None,
    reverse: bool = False,
    unroll: int = 1,
) -> tuple[Any, Any]:
    """``jax.lax.scan``: ``carry, y = f(carry, x)`` for each slice ``x`` of ``xs`` along its
    leading axis (``reverse=True``: last slice first; ``ys[i]`` still belongs to
    ``xs[i]``).  Returns ``(final carry, ys stacked)``.  ``init``, ``xs`` and the ys are
    pytrees; ``xs=None`` needs ``length``.  The carry must keep its structure, shapes and
    dtypes (:class:`ArgumentTypeError` names the leaf otherwise).

    ``unroll`` is accepted for JAX compatibility and ignored.  Errors raised by ``f``
    itself pass through unchanged.

    Cost: eagerly, ``f``'s ops per step (each allocates its result and runs its host kernel: no
    dispatch) plus one stack per ys leaf (allocates ys); no copy of tenferro
    values (``xs[i]`` is a view; numpy leaves are imported by the body's ops, one recorded
    ``TRANSFER`` each); no sync (nothing is read on the host); traced, one equation (per
    output dtype) whatever ``length`` is, which the jit's engine dispatches as one loop;
    O(length) times the body's work.

    Raises:
        ArgumentError: a leaf of ``xs`` has no leading axis; the leaves of ``xs`` and
            ``length`` disagree on the number of steps; ``xs=None`` without ``length``.
        ArgumentTypeError: ``f`` is not callable; ``length`` is not an int >= 0; a leaf
            is not an array; the body does not return a pair or changes the carry's
            structure, shapes or dtypes.
    """
    if not callable(f):
        raise ArgumentTypeError(f"scan: argument 'f' must be callable, got {type(f).__name__}")
    init_leaves, carry_tree = tree_flatten(init)
    xs_leaves, xs_tree = tree_flatten(xs)
    n = _length(xs_leaves, length)
    if tracing([*init_leaves, *xs_leaves]):
        return _scan_traced(f, init_leaves, carry_tree, xs_leaves, xs_tree, n, bool(reverse))
    return _scan_eager(f, init, init_leaves, carry_tree, xs_leaves, xs_tree, n, bool(reverse))


def _length(xs_leaves: Sequence[Any], length: int | None) -> int:
    lengths = {int(aval_of(x, "scan: xs")[0][0]) if aval_of(x, "scan: xs")[0] else -1
               for x in xs_leaves}
    if -1 in lengths:
        raise ArgumentError("scan: every leaf of 'xs' needs a leading axis to scan over")
    if length is not None:
        if not isinstance(length, int | np.integer) or isinstance(length, bool) or length < 0:
            raise ArgumentTypeError(f"scan: argument 'length' must be an int >= 0, got {length!r}")
        lengths.add(int(length))
    if len(lengths) != 1:
        if not lengths:
            raise ArgumentError("scan: with xs=None, give 'length' (the number of steps)")
        raise ArgumentError(
            f"scan: the leaves of 'xs' (and 'length') disagree on the number of steps: "
            f"{sorted(lengths)}"
        )
    return lengths.pop()


def _body_graph(
    f: Callable[..., Any], carry_tree: PyTreeDef, carry_t: list[Any], xs_tree: PyTreeDef,
    x_t: list[Any],
) -> tuple[Graph, list[Any], PyTreeDef]:
    """``f`` traced as a scan body: ``(*consts, *carry, *x) -> (*carry, *y)``; checks the
    carry's structure and types. Returns (graph, consts, y structure)."""
    carry = tree_unflatten(carry_tree, [Spec(s, d) for s, d in carry_t])
    x = tree_unflatten(xs_tree, [Spec(s, d) for s, d in x_t])
    graph, consts, out_tree = _close(lambda c, x_: _pair(f(c, x_), "scan"), (carry, x))
    c_tree, y_tree = out_tree.children()
    if c_tree != carry_tree:
        raise ArgumentTypeError(
            f"scan: the body must return a carry with the structure of 'init' ({carry_tree}), "
            f"got {c_tree}"
        )
    same_types("scan: the body's carry", avals(graph.outvars[: len(carry_t)]), carry_t,
               _names(carry_tree, "carry"))
    return graph, consts, y_tree


def _pair(out: Any, what: str) -> tuple[Any, Any]:
    if not isinstance(out, tuple) or len(out) != 2:
        raise ArgumentTypeError(f"{what}: the body must return a pair (carry, y), got "
                                f"{type(out).__name__}")
    return out


def _scan_traced(
    f: Callable[..., Any], init_leaves: list[Any], carry_tree: PyTreeDef, xs_leaves: list[Any],
    xs_tree: PyTreeDef, length: int, reverse: bool,
) -> tuple[Any, Any]:
    carry_t = _leaf_types(init_leaves, "scan: init")
    x_t = [(s[1:], d) for s, d in _leaf_types(xs_leaves, "scan: xs")]
    graph, consts, y_tree = _body_graph(f, carry_tree, carry_t, xs_tree, x_t)
    nc, nk = len(consts), len(init_leaves)
    args = [*consts, *init_leaves, *xs_leaves]
    params = dict(body=graph, n_consts=nc, n_carry=nk, length=length, reverse=reverse)
    leaves = bind_outputs(None, scan_primitive(len(args)), args, params,
                          out_avals(graph, nc, nk, length))
    return tree_unflatten(carry_tree, leaves[:nk]), tree_unflatten(y_tree, leaves[nk:])


def _scan_eager(
    f: Callable[..., Any], init: Any, init_leaves: list[Any], carry_tree: PyTreeDef,
    xs_leaves: list[Any], xs_tree: PyTreeDef, length: int, reverse: bool,
) -> tuple[Any, Any]:
    carry_t = _leaf_types(init_leaves, "scan: init")
    carry = init
    steps: list[list[Any]] = []
    y_tree: PyTreeDef | None = None
    for t in range(length - 1, -1, -1) if reverse else range(length):
        x = tree_unflatten(xs_tree, [x[t] for x in xs_leaves])
        carry, y = _pair(f(carry, x), "scan")
        c_leaves, c_tree = tree_flatten(carry)
        if c_tree != carry_tree:
            raise ArgumentTypeError(
                f"scan: the body must return a carry with the structure of 'init' "
                f"({carry_tree}), got {c_tree}"
            )
        same_types("scan: the body's carry", _leaf_types(c_leaves, "scan: carry"), carry_t,
                   _names(carry_tree, "carry"))
        y_leaves, y_tree = tree_flatten(y)
        steps.append(y_leaves)
    if reverse:
        steps.reverse()
    if y_tree is None:  # no step ran: the ys' types come from a trace of the body
        x_t = [(s[1:], d) for s, d in _leaf_types(xs_leaves, "scan: xs")]
        graph, _, y_tree = _body_graph(f, carry_tree, carry_t, xs_tree, x_t)
        ys = [mn.zeros_like(np.zeros((0, *s), d)) for s, d in avals(graph.outvars[len(carry_t):])]
    else:
        ys = [sh.stack([s[j] for s in steps], axis=0) for j in range(y_tree.num_leaves)]
    return carry, tree_unflatten(y_tree, ys)


# -- fori_loop
def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any], init_val: Any) -> Any:
    """``jax.lax.fori_loop``: ``val = body_fun(i, val)`` for ``i`` in ``range(lower, upper)``.

    With Python int bounds it is a ``scan`` over the indices (reverse mode works);
    tensor bounds make it a ``while_loop`` (forward mode only, as in JAX).  ``i`` is an
    int64 index (int32 on the XLA engine's default).

    Cost: as :func:`scan` (int bounds: allocates the index range and each step's results;
    no copy; no sync; no dispatch eagerly) or :func:`while_loop` (tensor bounds, eagerly:
    synchronizes once per iteration to read the predicate); O(upper - lower) times the
    body's work.

    Raises:
        ArgumentTypeError: a bound is not an integer or an integer scalar tensor, the body
            changes the carry's structure, shapes or dtypes, or a leaf is not an array.
        ReverseModeError: reverse mode through a loop with tensor bounds.
    """
    for what, bound in (("lower", lower), ("upper", upper)):
        _check_bound(bound, what)
    if _static(lower) and _static(upper):
        lo, hi = int(lower), int(upper)
        idx = np.arange(lo, max(lo, hi), dtype=np.int64)
        out, _ = scan(lambda v, i: (body_fun(i, v), None), init_val, idx)
        return out
    dt = np.result_type(np.asarray(lower).dtype if _static(lower) else lower.dtype,
                        np.asarray(upper).dtype if _static(upper) else upper.dtype)
    state = (ew.astype(lower, dt) if not _static(lower) else np.asarray(lower, dt),
             ew.astype(upper, dt) if not _static(upper) else np.asarray(upper, dt), init_val)
    _, _, out = _while_loop(lambda s: s[0] < s[1],
                            lambda s: (s[0] + 1, s[1], body_fun(s[0], s[2])), state,
                            lambda tree: range(2, tree.num_leaves))
    return out


def _static(v: Any) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool)


def _check_bound(v: Any, what: str) -> None:
    """A loop bound is a Python/numpy integer or an integer scalar tensor (as in JAX)."""
    if _static(v):
        return
    dtype = getattr(v, "dtype", None)
    if dtype is None or np.dtype(dtype).kind not in "iu" or tuple(getattr(v, "shape", ())) != ():
        got = (f"a {type(v).__name__} of dtype {np.dtype(dtype)} and shape "
               f"{tuple(getattr(v, 'shape', ()))}" if dtype is not None else type(v).__name__)
        raise ArgumentTypeError(
            f"fori_loop: argument {what!r} must be an integer or an integer scalar tensor, "
            f"got {got}"
        )


# -- while_loop
def while_loop(
    cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val: Any
) -> Any:
    """``jax.lax.while_loop``: ``while cond_fun(val): val = body_fun(val)``.  ``cond_fun``
    returns a boolean scalar; the carry keeps its structure and types.  Reverse mode is
    refused (:class:`~tenferro_ad.errors.ReverseModeError`), as in JAX.

    Cost: eagerly, both functions' ops per iteration (each allocates its result and
    runs its host kernel, no dispatch; no copy), and the predicate is read on the
    host each iteration (synchronizes once per iteration); traced, one equation per
    output dtype, dispatched as one loop by the jit's engine (no sync until its results
    are read); O(iterations) times the body's work.

    Raises:
        ArgumentTypeError: ``cond_fun`` does not return a boolean scalar (traced), or
            ``body_fun`` changes the carry's structure, shapes or dtypes.
        ReverseModeError: reverse mode (``grad``/``vjp``) through the loop.
    """
    return _while_loop(cond_fun, body_fun, init_val, None)


def _while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val: Any,
                want: Callable[[PyTreeDef], Sequence[int]] | None) -> Any:
    """``while_loop``; traced, only the equations of the output leaves ``want(tree)``
    (all when ``None``) are emitted, the others are ``None``."""
    leaves, tree = tree_flatten(init_val)
    carry_t = _leaf_types(leaves, "while_loop: init_val")
    if tracing(leaves):
        spec = tree_unflatten(tree, [Spec(s, d) for s, d in carry_t])
        cgraph, cc, _ = _close(cond_fun, (spec,))
        if len(cgraph.outvars) != 1 or cgraph.outvars[0].shape != () or \
                cgraph.outvars[0].dtype != np.bool_:
            raise ArgumentTypeError("while_loop: cond_fun must return a boolean scalar")
        bgraph, bc, out_tree = _close(body_fun, (spec,))
        if out_tree != tree:
            raise ArgumentTypeError(
                f"while_loop: body_fun must return the structure of 'init_val' ({tree}), got "
                f"{out_tree}"
            )
        same_types("while_loop: body_fun's result", avals(bgraph.outvars), carry_t,
                   _names(tree, "carry"))
        args = [*cc, *bc, *leaves]
        params = dict(cond=cgraph, body=bgraph, n_cond=len(cc), n_body=len(bc))
        keep = None if want is None else want(tree)
        return tree_unflatten(tree, bind_outputs(None, while_primitive(len(args)), args,
                                                 params, carry_t, keep))
    val = init_val
    while bool(cond_fun(val)):
        val = body_fun(val)
        got, got_tree = tree_flatten(val)
        if got_tree != tree:
            raise ArgumentTypeError(
                f"while_loop: body_fun must return the structure of 'init_val' ({tree}), got "
                f"{got_tree}"
            )
        same_types("while_loop: body_fun's result", _leaf_types(got, "while_loop"), carry_t,
                   _names(tree, "carry"))
    if STATE.tape is None:
        return val
    out = [bind(WHILE_RESULT, x) if isinstance(x, EagerTensor) and x.is_tracked else x
           for x in tree_flatten(val)[0]]
    return tree_unflatten(tree, out)


# -- cond / switch
def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """``jax.lax.switch``: ``branches[index](*operands)``, ``index`` clamped to
    ``[0, len(branches) - 1]``.  Every branch returns the same structure and types
    (:class:`ArgumentTypeError` names the branch otherwise).

    Cost: eagerly, the selected branch's ops only (each allocates its result and
    runs its host kernel, no dispatch; no copy); reading a tensor ``index``
    synchronizes once (a Python int does not); traced, one equation per output dtype
    (under ``vmap`` with a batched index, every branch runs and each element selects its
    own); O(1) plus the selected branch's work.

    Raises:
        ArgumentTypeError: ``branches`` is empty or holds a non-callable; the branches
            return different structures, shapes or dtypes (traced).
        LayoutError: eagerly, ``index`` is a tensor of more than one element.
    """
    branches = list(branches)
    if not branches or not all(callable(b) for b in branches):
        raise ArgumentTypeError("switch: argument 'branches' must be a non-empty sequence of "
                                "callables")
    leaves = tree_flatten(operands)[0]
    if tracing([index, *leaves]):
        return _switch_traced(index, branches, operands)
    i = int(np.clip(int(index), 0, len(branches) - 1))
    return branches[i](*operands)


def _switch_traced(
    index: Any, branches: list[Callable[..., Any]], operands: tuple[Any, ...]
) -> Any:
    leaves, tree = tree_flatten(operands)
    op_t = _leaf_types(leaves, "switch: operands")
    spec = tree_unflatten(tree, [Spec(s, d) for s, d in op_t])
    closed = [_close(b, spec) for b in branches]
    out_tree = closed[0][2]
    out_t = avals(closed[0][0].outvars)
    for k, (g, _, t) in enumerate(closed[1:], start=1):
        if t != out_tree:
            raise ArgumentTypeError(
                f"switch: branch {k} returns the structure {t}, branch 0 returns {out_tree}; "
                "every branch must return the same structure and types"
            )
        same_types(f"switch: branch {k}'s result", avals(g.outvars), out_t,
                   _names(out_tree, "output"))
    # every branch takes the operands and then all branches' captured values
    consts = [c for _, cs, _ in closed for c in cs]
    graphs = []
    for g, cs, _ in closed:
        n = len(cs)
        all_cv = _const_vars(closed, g)
        graphs.append(regraph(g, [*g.invars[n:], *all_cv], g.outvars))
    if isinstance(index, bool | int | np.integer):
        idx: Any = np.int32(index)
    elif aval_of(index, "switch: index")[1] != np.int32:
        idx = ew.astype(index, np.int32)
    else:
        idx = index
    args = [idx, *leaves, *consts]
    got = bind_outputs(None, cond_primitive(len(args)), args, {"branches": tuple(graphs)}, out_t)
    return tree_unflatten(out_tree, got)


def _const_vars(closed: list[tuple[Graph, list[Any], Any]], g: Graph) -> list[Any]:
    """The captured-value inputs of every branch, in order, with ``g``'s own variables at
    its position and fresh unused ones elsewhere."""
    out: list[Any] = []
    for other, cs, _ in closed:
        n = len(cs)
        if other is g:
            out.extend(g.invars[:n])
        else:
            out.extend(Var(v.shape, v.dtype) for v in other.invars[:n])
    return out


def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any],
         *operands: Any) -> Any:
    """``jax.lax.cond``: ``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``.

    ``pred`` is a boolean (or numeric) scalar.  Same structure and types from both
    branches.  Under ``vmap`` with a batched ``pred`` both branches run and ``where``
    selects per element, as in JAX.

    Cost: as :func:`switch` with two branches: eagerly, the selected branch's ops (each
    allocates its result and runs its host kernel, no dispatch; no copy); reading a
    tensor ``pred`` synchronizes once (a Python bool does not); traced, one equation per
    output dtype; O(1) plus the selected branch's work.

    Raises:
        ArgumentTypeError: a branch is not callable; traced, ``pred`` is not a scalar or
            the branches return different structures, shapes or dtypes.
        LayoutError: eagerly, ``pred`` is a tensor of more than one element.
    """
    if not callable(true_fun) or not callable(false_fun):
        raise ArgumentTypeError("cond: arguments 'true_fun' and 'false_fun' must be callable")
    leaves = tree_flatten(operands)[0]
    if tracing([pred, *leaves]):
        shape = aval_of(pred, "cond: pred")[0]
        if shape != ():
            raise ArgumentTypeError(f"cond: 'pred' must be a scalar, got shape {shape}")
        index = ew.astype(ew.not_equal(pred, 0), np.int32) if not isinstance(pred, bool) \
            else int(pred)
        return _switch_traced(index, [false_fun, true_fun], operands)
    return true_fun(*operands) if bool(pred) else false_fun(*operands)
