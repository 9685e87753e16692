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

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

import tenferro_storage as ts
from tenferro_storage.errors import TenferroError, shown

from ._core._handle import EagerTensor
from ._core._state import STATE
from ._forward import jvp
from ._functional import _check_leaf, grad, tree_flatten, vjp
from ._traced._trace import trace as trace_fn
from .errors import ArgumentError, ArgumentTypeError
from .ops import reshape, stack
from .ops.manip import trace as matrix_trace

__all__ = [
    "elementwise_grad", "hessian", "hvp", "jacfwd", "jacobian", "jacrev", "linearize", "trace",
]


def _callable(f: Any, what: str) -> None:
    if not callable(f):
        raise ArgumentTypeError(f"{what}: argument 'f' must be callable, got {type(f).__name__}")


def _nums(argnums: int | tuple[int, ...], nargs: int, what: str) -> tuple[int, ...]:
    raw = (argnums,) if isinstance(argnums, int | np.integer) else argnums
    try:
        if not isinstance(raw, tuple | list):
            raise TypeError
        nums = tuple(int(operator.index(k)) for k in raw)
    except TypeError:
        raise ArgumentTypeError(
            f"{what}: argument 'argnums' must be an int or a tuple of ints, got {shown(argnums)}"
        ) from None
    if not nums:
        raise ArgumentError(f"{what}: argument 'argnums' is empty; name at least one argument")
    for k in nums:
        if not -nargs <= k < nargs:
            raise ArgumentError(
                f"{what}: argnums={argnums!r} names argument {k}, but the function was called with "
                f"{nargs} positional argument(s)"
            )
    return tuple(k % nargs for k in nums)


def _check_args(
    args: tuple[Any, ...], nums: tuple[int, ...], what: str, items: str = ""
) -> None:
    """Refuse, before anything runs, a differentiated argument that is not a floating-point
    array, owner, handle or float (the check ``grad`` makes); the error names ``what`` and
    the argument. O(leaves)."""
    for k in nums:
        for leaf in tree_flatten(args[k])[0]:
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
        e.args = (f"{what}: {rest}", *e.args[1:])
        raise


def _shape_dtype_of(x: Any, what: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
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
    if STATE.tape is not None or STATE.jvp is not None:
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


def jacrev(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """The Jacobian of ``f`` by reverse mode: shape ``out.shape + arg.shape`` (a tuple of
    them for a tuple ``argnums``).  One reverse sweep per output element."""
    _callable(f, "jacrev")

    def jac(*args: Any) -> Any:
        nums = _nums(argnums, len(args), "jacrev")
        _check_args(args, nums, "jacrev")

        def g(*diff: Any) -> Any:
            full = list(args)
            for k, d in zip(nums, diff, strict=True):
                full[k] = d
            return f(*full)

        out, fn = vjp(g, *[args[k] for k in nums])
        if not isinstance(out, EagerTensor | ts.Tensor | np.ndarray | float):
            fn.release()
            raise ArgumentTypeError(
                "jacrev: argument 'f' must return a single array value (an EagerTensor, an "
                f"owner, an array or a float), got {type(out).__name__}"
            )
        oshape, odt = _shape_dtype(out, "jacrev")
        rows = [fn(e) for e in _basis(oshape, odt)]
        fn.release()
        res = []
        for j, k in enumerate(nums):
            ishape, _ = _shape_dtype(args[k], "jacrev", k)
            parts = [r[j] for r in rows]
            if not parts:
                res.append(ts.zeros(oshape + ishape))
                continue
            res.append(_finish(parts, oshape + ishape, "jacrev"))
        return res[0] if isinstance(argnums, int | np.integer) else tuple(res)

    return jac


jacobian = jacrev


def jacfwd(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """The Jacobian of ``f`` by forward mode: shape ``out.shape + arg.shape`` (a tuple of
    them for a tuple ``argnums``).  One forward-mode pass per input element."""
    _callable(f, "jacfwd")

    def jac(*args: Any) -> Any:
        nums = _nums(argnums, len(args), "jacfwd")
        _check_args(args, nums, "jacfwd")
        # per argnum: the output's structure and one Jacobian per output leaf
        res: list[tuple[Callable[[list[Any]], Any], list[Any]]] = []
        for k in nums:
            ishape, idt = _shape_dtype(args[k], "jacfwd", k)

            def g(d: Any, k: int = k) -> Any:
                full = list(args)
                full[k] = d
                return f(*full)

            cols = [jvp(g, (args[k],), (e,))[1] for e in _basis(ishape, idt)]
            if not cols:
                res.append((_single, [ts.zeros(ishape)]))
                continue
            # f may return a pytree (tuple/list/dict): one Jacobian per output leaf
            flat = [tree_flatten(c) for c in cols]
            jacs = []
            for j, leaf in enumerate(flat[0][0]):
                oshape, _ = _shape_dtype(leaf, "jacfwd")
                h = stack([c[0][j] for c in flat], axis=-1)  # out.shape + (n_in,)
                jacs.append(_finish([h], oshape + ishape, "jacfwd"))
            res.append((flat[0][1], jacs))
        if isinstance(argnums, int | np.integer):
            return res[0][0](res[0][1])
        # as in JAX: the output's structure outside, one entry per argnum inside
        rebuild, first = res[0]
        if any(len(r[1]) != len(first) for r in res):  # a zero-size argument: no structure
            return tuple(r[0](r[1]) for r in res)
        return rebuild([tuple(r[1][j] for r in res) for j in range(len(first))])

    return jac


def _single(new: list[Any]) -> Any:
    return new[0]


def hessian(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """The Hessian of scalar ``f``: ``jacfwd(jacrev(f))`` (forward over reverse)."""
    _callable(f, "hessian")
    return jacfwd(jacrev(f, argnums), argnums)


def hvp(f: Callable[..., Any], primals: Any, tangents: Any) -> Any:
    """The Hessian-vector product ``H(primals) @ tangents`` of scalar ``f``, by
    forward-over-reverse (``jvp`` of ``grad``): one gradient evaluation pushed through
    forward mode, never the full Hessian."""
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
    derivative of each output element for elementwise ``f`` (its diagonal Jacobian)."""
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
    during calls)."""
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
    """
    if callable(x) and not isinstance(x, EagerTensor | ts.Tensor | ts.TensorView):
        if args or kwargs:
            raise ArgumentTypeError("trace(f): pass the arguments to the returned function")
        return trace_fn(x)

    return matrix_trace(x, *args, **kwargs)
