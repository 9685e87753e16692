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

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _einsum_path as E
from .._dispatch import bind
from .._handle import EagerTensor
from .._primitive import Primitive, defbilinear, deflinear, defprimitive
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


def einsum(subscripts: str, *operands: Any) -> EagerTensor:
    """Einstein summation with numpy's grammar, contracted pairwise along a good path.

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


def tensordot(a: Any, b: Any, axes: int | tuple[Sequence[int], Sequence[int]] = 2) -> EagerTensor:
    """``numpy.tensordot`` as a differentiable :func:`einsum` (one GEMM). O(m*k*n)."""
    sa, sb = _shape(a), _shape(b)
    try:
        sub = E.tensordot_subscripts(len(sa), len(sb), axes)
    except IndexError as e:  # pragma: no cover - defensive
        raise E.EinsumError(f"tensordot: axes {axes} out of range for shapes {sa}, {sb}") from e
    return einsum(sub, a, b)
