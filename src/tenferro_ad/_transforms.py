"""Derived transforms: Jacobians, Hessians, Hessian-vector products, linearization.

Everything here is a composition of the functional API (``grad``, ``vjp``, ``jvp``), so it
nests with them and with itself at any depth, exactly as they do: called inside another
transform the results are handles the outer level differentiates again; at the top level
they are fresh owners.

Costs: ``jacrev`` runs one forward and one reverse sweep per output element; ``jacfwd``
one forward-mode pass per input element; ``hessian`` is ``jacfwd(jacrev(f))``; ``hvp`` is
forward-over-reverse (one forward-mode pass through the gradient).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import tenferro_storage as ts
from tenferro_storage._pytree import PyTreeDef, tree_flatten, tree_leaves
from tenferro_storage.errors import TenferroError

from ._core._handle import EagerTensor
from ._core._state import STATE
from ._forward import jvp
from ._functional import _argnums as _nums  # one argnums check (duplicates refused)
from ._functional import _check_leaf, constant, grad, vjp
from ._traced._trace import Tracer, tracing
from ._traced._trace import trace as trace_fn
from .errors import ArgumentTypeError
from .ops import reshape, stack
from .ops.manip import trace as matrix_trace

__all__ = [
    "elementwise_grad", "hessian", "hvp", "jacfwd", "jacobian", "jacrev", "linearize", "trace",
]


def _callable(f: Any, what: str) -> None:
    if not callable(f):
        raise ArgumentTypeError(f"{what}: argument 'f' must be callable, got {type(f).__name__}")


def _check_args(
    args: tuple[Any, ...], nums: tuple[int, ...], what: str, items: str = ""
) -> None:
    """Refuse, before anything runs, a differentiated argument that is not a floating-point
    array, owner, handle or float (the check ``grad`` makes); the error names ``what`` and
    the argument. O(leaves)."""
    for k in nums:
        for leaf in tree_leaves(args[k]):
            if type(leaf) is not Tracer:  # (traced: the graph transform checks it)
                _check_leaf(leaf, k, what, items)


def _shape_dtype(
    x: Any, what: str, argnum: int | None = None
) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """Shape and dtype of an argument (``argnum``) or a result of ``f``; a refusal names
    ``what`` and the argument."""
    try:
        return _shape_dtype_of(x, what)
    except TenferroError as e:
        msg = str(e)
        rest = msg[len(what) + 1 :].lstrip() if msg.startswith(f"{what}:") else msg
        if argnum is not None and not rest.startswith(f"argument {argnum}"):
            rest = f"argument {argnum}: {rest}"
        elif argnum is None and isinstance(e, ArgumentTypeError):  # a result of ``f``
            rest = (
                "argument 'f' must return arrays, owners, handles or floats (a pytree of "
                f"them), got a {type(x).__name__} among its results"
            )
        e.args = (f"{what}: {rest}", *e.args[1:])
        raise


def _shape_dtype_of(x: Any, what: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
    if type(x) is Tracer:
        return tuple(x.shape), x.dtype
    if isinstance(x, EagerTensor):
        a = x._r(what).a
        return tuple(a.shape), a.dtype
    if isinstance(x, ts.Tensor | ts.TensorView | ts.TensorViewMut):
        a = ts.kernel.read_array(x)
        return tuple(a.shape), a.dtype
    if isinstance(x, np.ndarray | np.generic | float | complex):
        a = np.asarray(x)
        return tuple(a.shape), a.dtype
    raise ArgumentTypeError(
        f"{what}: arguments to differentiate must be arrays, owners, handles or floats, got "
        f"{type(x).__name__}"
    )


def _finish(parts: list[Any], shape: tuple[int, ...], what: str) -> Any:
    """Stack per-element results into one value of ``shape``: a handle inside another
    transform, a fresh owner at the top level."""
    h = reshape(stack(parts), shape)
    if isinstance(h, Tracer) or STATE.tape is not None or STATE.jvp is not None:
        return h
    try:
        return h.into_value()
    except Exception:  # an alias of a part still held elsewhere: an explicit duplicate
        return h.duplicate_value()


def _basis(shape: tuple[int, ...], dt: np.dtype[Any]) -> list[np.ndarray[Any, Any]]:
    n = int(np.prod(shape, dtype=np.int64))
    out = []
    for k in range(n):
        e = np.zeros(n, dt)
        e[k] = 1
        out.append(e.reshape(shape))
    return out


def _zeros(shape: tuple[int, ...], dt: np.dtype[Any]) -> Any:
    """A zero Jacobian block (a zero-size argument or output): a handle inside another
    transform, a fresh owner at the top level."""
    z = np.zeros(shape, dt)
    if tracing(()):
        return z  # a literal of the trace
    if STATE.tape is not None or STATE.jvp is not None:
        return constant(z)
    return ts.from_numpy(z)


def _nest(
    out_tree: PyTreeDef,
    in_trees: list[PyTreeDef],
    blocks: list[list[list[Any]]],
    single: bool,
) -> Any:
    """JAX's Jacobian structure: the output's structure outside; inside each output leaf,
    the differentiated argument's structure (``single``: one argnum) or a tuple of them.
    ``blocks[i][a][j]``: the block of output leaf ``i`` and leaf ``j`` of argnum ``a``.
    O(blocks)."""
    per_out = []
    for row in blocks:
        trees = [t.unflatten(b) for t, b in zip(in_trees, row, strict=True)]
        per_out.append(trees[0] if single else tuple(trees))
    return out_tree.unflatten(per_out)


def _leaf_shapes(
    args: tuple[Any, ...], nums: tuple[int, ...], what: str
) -> tuple[list[PyTreeDef], list[list[tuple[tuple[int, ...], np.dtype[Any]]]]]:
    """Per differentiated argument: its structure and each leaf's shape and dtype."""
    trees, shapes = [], []
    for k in nums:
        leaves, tree = tree_flatten(args[k])
        trees.append(tree)
        shapes.append([_shape_dtype(x, what, k) for x in leaves])
    return trees, shapes


def jacrev(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """The Jacobian of ``f`` by reverse mode, in JAX's structure: ``f``'s output pytree
    outside, each differentiated argument's pytree inside (a tuple of them for a tuple
    ``argnums``); each block has shape ``out_leaf.shape + arg_leaf.shape``.  One reverse
    sweep per output element.

    Cost: allocates what ``f``'s ops allocate (the tape's residuals, fresh result owners); no copy;
    no sync; no dispatch; O(the cost of ``f``) per evaluation.
    Raises: ArgumentError, ArgumentTypeError."""
    _callable(f, "jacrev")

    def jac(*args: Any) -> Any:
        nums = _nums(argnums, len(args), "jacrev")
        _check_args(args, nums, "jacrev")
        in_trees, in_shapes = _leaf_shapes(args, nums, "jacrev")

        def g(*diff: Any) -> Any:
            full = list(args)
            for k, d in zip(nums, diff, strict=True):
                full[k] = d
            return f(*full)

        out, fn = vjp(g, *[args[k] for k in nums])
        try:
            outs, out_tree = tree_flatten(out)
            oshapes = [_shape_dtype(o, "jacrev") for o in outs]
            blocks: list[list[list[Any]]] = []
            for i, (oshape, odt) in enumerate(oshapes):
                rows = []
                for e in _basis(oshape, odt):
                    ct = [np.zeros(s, d) for s, d in oshapes]
                    ct[i] = e
                    rows.append([tree_leaves(r) for r in fn(out_tree.unflatten(ct))])
                row_blocks = []
                for a, shapes in enumerate(in_shapes):
                    row_blocks.append([
                        _finish([r[a][j] for r in rows], oshape + ishape, "jacrev")
                        if rows else _zeros(oshape + ishape, idt)  # JAX: the argument's dtype
                        for j, (ishape, idt) in enumerate(shapes)
                    ])
                blocks.append(row_blocks)
        finally:
            release = getattr(fn, "release", None)  # (traced: a plain pullback)
            if release is not None:
                release()
        return _nest(out_tree, in_trees, blocks, isinstance(argnums, int | np.integer))

    return jac


jacobian = jacrev


def jacfwd(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """The Jacobian of ``f`` by forward mode, in JAX's structure (see :func:`jacrev`).
    One forward-mode pass per input element (plus one when an input leaf is empty, for
    the output's structure).

    Cost: allocates what ``f``'s ops allocate (the tape's residuals, fresh result owners); no copy;
    no sync; no dispatch; O(the cost of ``f``) per evaluation.
    Raises: ArgumentError, ArgumentTypeError."""
    _callable(f, "jacfwd")

    def jac(*args: Any) -> Any:
        nums = _nums(argnums, len(args), "jacfwd")
        _check_args(args, nums, "jacfwd")
        in_trees, in_shapes = _leaf_shapes(args, nums, "jacfwd")
        # cols[a][j]: the output tangent leaves, one list per basis element of leaf j
        cols: list[list[list[list[Any]]]] = []
        out_tree: PyTreeDef | None = None
        for a, k in enumerate(nums):

            def g(d: Any, k: int = k) -> Any:
                full = list(args)
                full[k] = d
                return f(*full)

            per_leaf = []
            for j, (ishape, idt) in enumerate(in_shapes[a]):
                runs = []
                for e in _basis(ishape, idt):
                    tan = [np.zeros(s, d) for s, d in in_shapes[a]]
                    tan[j] = e
                    leaves, out_tree = tree_flatten(
                        jvp(g, (args[k],), (in_trees[a].unflatten(tan),))[1]
                    )
                    runs.append(leaves)
                per_leaf.append(runs)
            cols.append(per_leaf)
        if out_tree is None or any(not runs for per in cols for runs in per):
            # an empty input leaf: the output's structure and types from one pass
            k = nums[0]
            zero = [np.zeros(s, d) for s, d in in_shapes[0]]
            probe_out = jvp(
                lambda d: f(*[d if i == k else x for i, x in enumerate(args)]),
                (args[k],),
                (in_trees[0].unflatten(zero),),
            )[1]
            out_leaves, out_tree = tree_flatten(probe_out)
            oshapes = [_shape_dtype(o, "jacfwd") for o in out_leaves]
        else:
            oshapes = [_shape_dtype(o, "jacfwd") for o in _first_outputs(cols)]
        blocks: list[list[list[Any]]] = []
        for i, (oshape, odt) in enumerate(oshapes):
            row_blocks = []
            for a, shapes in enumerate(in_shapes):
                row = []
                for j, (ishape, _idt) in enumerate(shapes):
                    runs = cols[a][j]
                    if not runs:
                        row.append(_zeros(oshape + ishape, odt))  # JAX: the output's dtype
                        continue
                    h = stack([r[i] for r in runs], axis=-1)  # out.shape + (n_in,)
                    row.append(_finish([h], oshape + ishape, "jacfwd"))
                row_blocks.append(row)
            blocks.append(row_blocks)
        return _nest(out_tree, in_trees, blocks, isinstance(argnums, int | np.integer))

    return jac


def _first_outputs(cols: list[list[list[list[Any]]]]) -> list[Any]:
    """The output tangent leaves of the first forward pass."""
    for per in cols:
        for runs in per:
            if runs:
                return runs[0]
    raise AssertionError("no forward pass ran")


def hessian(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """The Hessian of scalar ``f``: ``jacfwd(jacrev(f))`` (forward over reverse).

    Cost: allocates what ``f``'s ops allocate (the tape's residuals, fresh result owners); no copy;
    no sync; no dispatch; O(the cost of ``f``) per evaluation.
    Raises: ArgumentError, ArgumentTypeError."""
    _callable(f, "hessian")
    return jacfwd(jacrev(f, argnums), argnums)


def hvp(f: Callable[..., Any], primals: Any, tangents: Any) -> Any:
    """The Hessian-vector product ``H(primals) @ tangents`` of scalar ``f``, by
    forward-over-reverse (``jvp`` of ``grad``): one gradient evaluation pushed through
    forward mode, never the full Hessian.

    Cost: allocates what ``f``'s ops allocate (the tape's residuals, fresh result owners); no copy;
    no sync; no dispatch; O(the cost of ``f``) per evaluation.
    Raises: ArgumentError, ArgumentTypeError."""
    _callable(f, "hvp")
    for name, given in (("primals", primals), ("tangents", tangents)):
        if not isinstance(given, tuple | list):
            raise ArgumentTypeError(
                f"hvp: argument {name!r} must be a tuple (one entry per argument of f), got "
                f"{type(given).__name__}"
            )
    nums = tuple(range(len(tuple(primals))))
    _check_args(tuple(primals), nums, "hvp", "primals")
    _, t = jvp(grad(f, nums), tuple(primals), tuple(tangents))
    return t[0] if len(nums) == 1 else t


def elementwise_grad(f: Callable[..., Any], argnums: int = 0) -> Callable[..., Any]:
    """autograd's ``elementwise_grad``: the VJP of ``f`` with a cotangent of ones — the
    derivative of each output element for elementwise ``f`` (its diagonal Jacobian).

    Cost: allocates what ``f``'s ops allocate (the tape's residuals, fresh result owners); no copy;
    no sync; no dispatch; O(the cost of ``f``) per evaluation.
    Raises: ArgumentError, ArgumentTypeError."""
    _callable(f, "elementwise_grad")

    def eg(*args: Any) -> Any:
        k = _nums(argnums, len(args), "elementwise_grad")[0]
        _check_args(args, (k,), "elementwise_grad")

        def g(d: Any) -> Any:
            full = list(args)
            full[k] = d
            return f(*full)

        out, fn = vjp(g, args[k])
        if not isinstance(out, EagerTensor | ts.Tensor | np.ndarray | float):
            fn.release()
            raise ArgumentTypeError(
                "elementwise_grad: argument 'f' must return a single array value (an "
                f"EagerTensor, an owner, an array or a float), got {type(out).__name__}"
            )
        shape, dt = _shape_dtype(out, "elementwise_grad")
        (ct,) = fn(np.ones(shape, dt))
        fn.release()
        return ct

    return eg


def linearize(f: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[..., Any]]:
    """``(f(*primals), f_jvp)``: ``f_jvp(*tangents)`` is the Jacobian-vector product at
    ``primals`` (each call runs one forward-mode pass; the primals stay borrowed only
    during calls).

    Cost: allocates what ``f``'s ops allocate (the tape's residuals, fresh result owners); no copy;
    no sync; no dispatch; O(the cost of ``f``) per evaluation.
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    _callable(f, "linearize")
    _check_args(primals, tuple(range(len(primals))), "linearize", "primals")
    out = f(*primals)

    def f_jvp(*tangents: Any) -> Any:
        return jvp(f, primals, tangents)[1]

    return out, f_jvp


def trace(x: Any, *args: Any, **kwargs: Any) -> Any:
    """Two meanings, told apart by the argument, as the name is wanted for both:

    * ``trace(f)`` with a callable ``f``: traced mode — ``trace(f)(*args)`` is ``f``'s
      :class:`~tenferro_ad.traced.Graph` at the types of ``args`` (see
      :func:`tenferro_ad.traced.trace`);
    * ``trace(x, offset=0, axis1=0, axis2=1)`` with an array: ``numpy.trace``, the sum
      of a diagonal (a recorded op, differentiable; one gather and one reduction).

    Telling them apart is one ``callable`` check, O(1).

    Cost: allocates the graph only (no tensor storage); no copy; no sync; no dispatch; O(the ops
    ``f`` applies).
    Raises: ArgumentTypeError, TypeError, UseAfterMoveError."""
    if callable(x) and not isinstance(x, EagerTensor | ts.Tensor | ts.TensorView):
        if args or kwargs:
            raise ArgumentTypeError("trace(f): pass the arguments to the returned function")
        return trace_fn(x)

    return matrix_trace(x, *args, **kwargs)
