"""``einsum`` and ``tensordot``: a cached pairwise plan over two self-transposing primitives.

* ``einsum_unary(x, *, subscripts, shape, src)`` -- linear: diagonals, private sums and
  permutations (``"iij->ji"``) or, the other way round, broadcasting and diagonal
  embedding (``"ji->iij"``).  Its transpose is itself with the subscripts swapped.
* ``einsum_binary(a, b, *, subscripts)`` -- bilinear, one batched GEMM.  Its transposes
  are ``einsum_binary`` (plus an ``einsum_unary`` when an operand has repeated or
  privately summed labels): :func:`~tenferro_ad._einsum_path.binary_transpose_subscripts`.

The public :func:`einsum` looks up the cached plan for (subscripts, shapes) -- opt_einsum's
path, intermediates allowed to grow -- and binds one primitive per step.  Each
intermediate is an ``OPERATION_OUTPUT`` allocation owned by a handle that the next step
consumes; when nothing records, the handle dies right there and the allocation is
released before the following step runs.  Under a tape each step saves its two operands
(bilinear residuals), so reverse mode is ordinary backpropagation through the pairwise
chain -- about twice the forward cost, on the forward's path -- and forward mode pushes
``binary(da, b) + binary(a, db)`` along the same path.  Complex operands follow JAX (no
conjugation in the transposes); a real operand contracted with a complex one receives
the real part of its cotangent, as in JAX.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _einsum_path as E
from .._batch_rules import defbatch, emit, loop_fallback
from .._dispatch import bind
from .._handle import EagerTensor
from .._primitive import Primitive, defbilinear, deflinear, defprimitive
from ._util import guarded
from .complex import REAL, is_complex

Array = Any

__all__ = ["EINSUM_BINARY", "EINSUM_UNARY", "einsum", "tensordot"]


def _shape(x: Any) -> tuple[int, ...]:
    if isinstance(x, EagerTensor):
        return tuple(x._r("einsum").a.shape)
    return tuple(np.shape(x))


EINSUM_UNARY: Primitive = deflinear(
    defprimitive(
        "einsum_unary",
        lambda x, *, subscripts, shape, src: E.unary_einsum(x, subscripts, shape),
        1,
    ),
    lambda ops, g, *, subscripts, shape, src: ops.apply(
        EINSUM_UNARY,
        g,
        subscripts=E.unary_transpose_subscripts(subscripts),
        shape=src,
        src=shape,
    ),
)


def _batch_label(subscripts: str) -> str | None:
    """A label ``subscripts`` does not use (for the batch axis), or None."""
    if "." in subscripts:
        return None
    return next((c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in subscripts), None)


def _batch_einsum_unary(
    args: list[Any], batched: list[bool], size: int, *, subscripts: str, shape: Any, src: Any
) -> tuple[Any, bool]:
    z = _batch_label(subscripts)
    if z is None:
        return loop_fallback(EINSUM_UNARY, args, batched, size,
                             {"subscripts": subscripts, "shape": shape, "src": src}), True
    ins, out = subscripts.split("->")
    return emit("einsum_unary", args[0], subscripts=f"{z + ins}->{z + out}",
                shape=(size, *shape), src=(size, *src)), True


defbatch(EINSUM_UNARY, _batch_einsum_unary)


def _binary_ct(ops: Any, g: Array, x: Array, y: Array, subscripts: str, which: int) -> Array:
    bsub, usub = E.binary_transpose_subscripts(subscripts, which)
    mine, other = (x, y) if which == 0 else (y, x)
    r = ops.apply(EINSUM_BINARY, g, other, subscripts=bsub)
    if usub is not None:
        shp = tuple(mine.shape)
        r = ops.apply(EINSUM_UNARY, r, subscripts=usub, shape=shp, src=_shape(r))
    if not is_complex(mine) and is_complex(r):
        r = ops.apply(REAL, r)
    return r


EINSUM_BINARY = defbilinear(
    defprimitive("einsum_binary", lambda a, b, *, subscripts: E.binary_einsum(a, b, subscripts), 2),
    lambda ops, g, x, y, *, subscripts: _binary_ct(ops, g, x, y, subscripts, 0),
    lambda ops, g, x, y, *, subscripts: _binary_ct(ops, g, x, y, subscripts, 1),
)


def _batch_einsum_binary(
    args: list[Any], batched: list[bool], size: int, *, subscripts: str
) -> tuple[Any, bool]:
    """A fresh batch label on the batched operands and the output: one batched GEMM."""
    z = _batch_label(subscripts)
    if z is None:
        return loop_fallback(EINSUM_BINARY, args, batched, size,
                             {"subscripts": subscripts}), True
    ins, out = subscripts.split("->")
    a, b = ins.split(",")
    sub = f"{z + a if batched[0] else a},{z + b if batched[1] else b}->{z + out}"
    return emit("einsum_binary", *args, subscripts=sub), True


defbatch(EINSUM_BINARY, _batch_einsum_binary)


def _interleaved(args: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]]:
    """numpy's interleaved form ``einsum(op0, sub0, op1, sub1, ..., [out])`` as a
    subscripts string and the operands; sublist entries are ints (any, mapped to letters)
    or ``...``."""
    args = tuple(args)
    ops_ = args[0::2][: len(args) // 2]
    subs = list(args[1::2])
    out = args[-1] if len(args) % 2 == 1 else None
    letters: dict[int, str] = {}
    pool = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

    def conv(sub: Any) -> str:
        parts = []
        for s in sub:
            if s is Ellipsis:
                parts.append("...")
                continue
            if isinstance(s, bool) or not isinstance(s, int | np.integer):
                raise E.EinsumError(
                    f"einsum: a sublist entry must be an int or Ellipsis, got {s!r}"
                )
            k = int(s)
            if k not in letters:
                if len(letters) == len(pool):
                    raise E.EinsumError("einsum: too many distinct sublist labels (max 52)")
                letters[k] = pool[len(letters)]
            parts.append(letters[k])
        return "".join(parts)

    ins = [conv(sb) for sb in subs]
    spec = ",".join(ins) + ("" if out is None else "->" + conv(out))
    return spec, ops_


def einsum(subscripts: Any, *operands: Any) -> EagerTensor:
    """Einstein summation with numpy's grammar, contracted pairwise along a good path.

    Both of numpy's call forms: ``einsum("ij,jk->ik", a, b)`` and the interleaved
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` (integer labels, ``...`` allowed).

    Any explicit or implicit subscripts (traces ``"ii"``, diagonals ``"ii->i"``, batch
    labels, ``...``).  The path is opt_einsum's ``"auto"`` choice, cached per (subscripts,
    shapes); each step is one batched GEMM (or one unary reduction) and one
    ``OPERATION_OUTPUT`` allocation, released as soon as the next step has consumed it
    (unless a tape saves it as a residual of that step).  Cost: the path's flop count;
    a cache hit adds one dict lookup.  Differentiable to any order in both modes.

    Raises ``tenferro_ad._einsum_path.EinsumError`` (a ``ValueError``) naming the operand
    when the subscripts do not fit the shapes; sizes must match exactly (no size-1
    broadcasting).
    """
    if not isinstance(subscripts, str):
        subscripts, operands = _interleaved((subscripts, *operands))
    shapes = tuple(_shape(o) for o in operands)
    p = E.plan(subscripts, shapes)
    if not p.steps:  # identity, e.g. "ij->ij": still a fresh output
        (x,) = operands
        return bind(
            EINSUM_UNARY,
            x,
            subscripts=f"{p.inputs[0]}->{p.output}",
            shape=p.out_shape,
            src=shapes[0],
        )
    work: list[Any] = list(operands)
    for s in p.steps:
        if isinstance(s, E.UnaryStep):
            x = work[s.pos]
            work[s.pos] = bind(
                EINSUM_UNARY, x, subscripts=s.subscripts, shape=s.shape, src=_shape(x)
            )
            del x
        else:
            a, b = work[s.i], work[s.j]
            work = [w for k, w in enumerate(work) if k != s.i and k != s.j]
            work.append(bind(EINSUM_BINARY, a, b, subscripts=s.subscripts))
            del a, b  # the consumed intermediates die here (released unless saved)
    res: EagerTensor = work[0]
    return res


def _tensordot_axes(axes: Any, ra: int, rb: int) -> int | tuple[list[int], list[int]]:
    """numpy's accepted ``axes`` forms, validated: an int, ``(axes_a, axes_b)`` with each
    an int or a sequence of ints (``[-1, 0]`` is one pair)."""
    if isinstance(axes, int | np.integer) and not isinstance(axes, bool):
        return int(axes)
    try:
        xa, xb = axes
    except (TypeError, ValueError):
        raise E.EinsumError(
            f"tensordot: argument 'axes' must be an int or a pair of axis lists, got {axes!r}"
        ) from None
    la = [xa] if isinstance(xa, int | np.integer) else list(xa)
    lb = [xb] if isinstance(xb, int | np.integer) else list(xb)
    for lst, r, nm in ((la, ra, "a"), (lb, rb, "b")):
        for v in lst:
            if not -r <= int(v) < r:
                raise E.EinsumError(
                    f"tensordot: axis {int(v)} of argument 'axes' is out of range for {nm} "
                    f"of rank {r}"
                )
    return [int(v) for v in la], [int(v) for v in lb]


def tensordot(a: Any, b: Any, axes: Any = 2) -> EagerTensor:
    """``numpy.tensordot`` as a differentiable :func:`einsum` (one GEMM). O(m*k*n).

    ``axes``: an int (the last ``axes`` of ``a`` with the first of ``b``) or a pair
    ``(axes_a, axes_b)``, each an int or a sequence of ints (``[-1, 0]``, ``([1], [0])``).
    """
    sa, sb = _shape(a), _shape(b)
    ax = _tensordot_axes(axes, len(sa), len(sb))
    try:
        sub = E.tensordot_subscripts(len(sa), len(sb), ax)
    except IndexError as e:  # pragma: no cover - defensive
        raise E.EinsumError(f"tensordot: axes {axes} out of range for shapes {sa}, {sb}") from e
    return einsum(sub, a, b)


# argument errors from the planner, numpy or the kernel name the op (the package's classes)
# (EinsumError, already naming the op, passes through unchanged)
einsum = guarded("einsum", einsum, passthrough=(E.EinsumError,))
tensordot = guarded("tensordot", tensordot, passthrough=(E.EinsumError,))
