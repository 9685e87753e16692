"""XLA lowerings of the structural families: ``ops/shape.py`` (reshape, transpose,
broadcast, slices, gathers and scatters, concatenate), ``ops/manip.py`` (constants),
``ops/einsum.py`` and ``ops/linalg.py``'s matmul.

Index keys are the static numpy keys the eager kernels use (slices, integers, index
arrays); ``jax.numpy`` indexes with them the same way."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..._traced._lowering import deflower
from .. import _along as AL
from .. import einsum as EIN
from .. import linalg as LIN
from .. import manip as MAN
from .. import shape as SH


def _reshape(x: Any, a: Any, *, shape: tuple[int, ...], src: tuple[int, ...]) -> Any:
    return x.np.reshape(a, shape)


def _transpose(x: Any, a: Any, *, axes: tuple[int, ...]) -> Any:
    return x.np.transpose(a, axes)


def _broadcast_to(x: Any, a: Any, *, shape: tuple[int, ...], src: tuple[int, ...]) -> Any:
    return x.np.broadcast_to(a, shape)


def _index(x: Any, a: Any, *, key: Any, shape: tuple[int, ...]) -> Any:
    return x.np.asarray(a)[key]


def _slice_pad(x: Any, g: Any, *, key: Any, shape: tuple[int, ...]) -> Any:
    g = x.np.asarray(g)
    return x.np.zeros(shape, g.dtype).at[key].set(g)


def _scatter_add(x: Any, g: Any, *, key: Any, shape: tuple[int, ...]) -> Any:
    g = x.np.asarray(g)
    return x.np.zeros(shape, g.dtype).at[key].add(g)


def _take_along(x: Any, a: Any, idx: Any, *, axis: int) -> Any:
    return x.np.take_along_axis(x.np.asarray(a), x.np.asarray(idx), axis=axis)


def _put_along_add(x: Any, g: Any, idx: Any, *, axis: int, shape: tuple[int, ...]) -> Any:
    """``ops._along._put_impl`` in JAX: zeros of ``shape`` with ``g`` added at ``idx``."""
    jnp = x.np
    g, idx = jnp.asarray(g), jnp.asarray(idx)
    nd = len(shape)
    full = tuple(np.broadcast_shapes(tuple(g.shape), tuple(idx.shape)))
    key = tuple(
        jnp.broadcast_to(idx, full) if i == axis
        else jnp.arange(shape[i] if shape[i] == full[i] else 1).reshape(
            (1,) * i + (-1,) + (1,) * (nd - i - 1)
        )
        for i in range(nd)
    )
    return jnp.zeros(shape, g.dtype).at[key].add(jnp.broadcast_to(g, full))


def _concatenate(x: Any, *parts: Any, axis: int, sizes: tuple[int, ...]) -> Any:
    return x.np.concatenate(parts, axis=axis)


def _fill(x: Any, v: Any, *, shape: tuple[int, ...], dtype: Any) -> Any:
    return x.np.full(shape, v, dtype=dtype)


def _eye(x: Any, v: Any, *, n: int, m: int | None, k: int, dtype: Any) -> Any:
    return x.np.eye(n, m, k, dtype=dtype)


def _einsum_unary(
    x: Any, a: Any, *, subscripts: str, shape: tuple[int, ...], src: tuple[int, ...]
) -> Any:
    """Input labels may repeat (a diagonal) or vanish (a sum); output labels may repeat
    (embedded on a diagonal, zeros elsewhere) or be new (broadcast), as the eager
    kernel's ``unary_einsum``."""
    lhs, out = subscripts.split("->")
    sizes = dict(zip(lhs, x.np.shape(a), strict=True)) | dict(zip(out, shape, strict=True))
    uniq = "".join(dict.fromkeys(out))
    core_labels = "".join(c for c in uniq if c in lhs)
    core = a if core_labels == lhs else x.np.einsum(f"{lhs}->{core_labels}", a)
    if core_labels == out:
        return core
    first = {c: out.index(c) for c in uniq}
    expanded = x.np.reshape(
        core, tuple(sizes[c] if p == first[c] and c in lhs else 1 for p, c in enumerate(out))
    )
    result = x.np.broadcast_to(expanded, shape)
    for p, c in enumerate(out):
        q = first[c]
        if p == q:
            continue
        n = sizes[c]
        eye = x.np.eye(n, dtype=bool)
        mask_shape = [1] * len(out)
        mask_shape[q] = n
        mask_shape[p] = n
        result = x.np.where(x.np.reshape(eye, mask_shape), result, x.np.zeros((), result.dtype))
    return result


# One way to run a binary contraction as a dot_general: (swap the operands, the dimension
# numbers, the permutation of the natural result order into the output or None, whether
# the left and the right operand are already in the layout XLA's CPU dot reads in place).
_Dot = tuple[bool, Any, tuple[int, ...] | None, bool, bool]


@functools.lru_cache(maxsize=4096)
def _dot_plans(subscripts: str) -> tuple[_Dot, ...] | None:
    """The ways ``subscripts`` (``"ta,tb->out"``) is one ``dot_general`` followed by at most
    one transpose of its result: either operand first, the contracted labels in either
    operand's order; ``None`` when a label is repeated in an operand or summed inside one
    operand only (``jnp.einsum`` then).  XLA's CPU dot reads a left operand laid out
    ``batch, free, contracted`` and a right one ``batch, contracted, free`` in place and
    copies any other into that layout. O(labels), cached per subscripts."""
    lhs, out = subscripts.split("->")
    ta, tb = lhs.split(",")
    if len(set(ta)) != len(ta) or len(set(tb)) != len(tb) or any(
        c not in out for c in (set(ta) ^ set(tb))
    ):
        return None
    batch = [c for c in out if c in ta and c in tb]
    plans = []
    for swap, tl, tr in ((False, ta, tb), (True, tb, ta)):
        fl = [c for c in tl if c not in tr]
        fr = [c for c in tr if c not in tl]
        natural = [*batch, *fl, *fr]
        perm = tuple(natural.index(c) for c in out)
        for order in (tl, tr):
            contr = [c for c in order if c in tl and c in tr and c not in out]
            dims = (
                (tuple(tl.index(c) for c in contr), tuple(tr.index(c) for c in contr)),
                (tuple(tl.index(c) for c in batch), tuple(tr.index(c) for c in batch)),
            )
            plans.append((
                swap, dims, None if perm == tuple(range(len(perm))) else perm,
                list(tl) == [*batch, *fl, *contr], list(tr) == [*batch, *contr, *fr],
            ))
    return tuple(plans)


def _dot_plan(subscripts: str, sa: tuple[int, ...], sb: tuple[int, ...]) -> _Dot | None:
    """The way of :func:`_dot_plans` that moves the fewest elements for operands of shapes
    ``sa`` and ``sb``: each operand not in its in-place layout is copied once, and so is a
    result that needs its transpose. O(labels)."""
    plans = _dot_plans(subscripts)
    if plans is None:
        return None
    na, nb = math.prod(sa), math.prod(sb)
    lhs, out = subscripts.split("->")
    sizes = dict(zip(lhs.replace(",", ""), (*sa, *sb), strict=True))
    nout = math.prod(sizes[c] for c in out)

    def moved(p: _Dot) -> int:
        swap, _, perm, left_ok, right_ok = p
        nl, nr = (nb, na) if swap else (na, nb)
        return (0 if left_ok else nl) + (0 if right_ok else nr) + (0 if perm is None else nout)

    return min(plans, key=moved)  # (the first of equals: no swap, a's order)


def _einsum_binary(x: Any, a: Any, b: Any, *, subscripts: str) -> Any:
    # One dot_general and at most one transpose of its result, its operand order and
    # contraction order chosen so the fewest elements are copied into the dot's layout:
    # jnp.einsum permutes the operands' free axes into the output's order first, and in a
    # network's backward pass those copies of large intermediates cost XLA more than the
    # contractions (a 128-tensor PEPS norm's gradient: 65 -> 50 million elements moved by
    # XLA's transposes and copies, as in JAX's own lowering of the same tree).
    plan = None if a.dtype != b.dtype else _dot_plan(subscripts, a.shape, b.shape)
    if plan is None:  # diagonals, private sums, mixed types
        return x.np.einsum(subscripts, a, b)
    swap, dims, perm, _, _ = plan
    if swap:
        a, b = b, a
    r = x.lax.dot_general(a, b, dims)
    return r if perm is None else x.lax.transpose(r, perm)


def _matmul(x: Any, a: Any, b: Any) -> Any:
    return x.np.matmul(a, b)


deflower(SH.RESHAPE, _reshape)
deflower(SH.RESHAPE_COPY, _reshape)
deflower(SH.TRANSPOSE, _transpose)
deflower(SH.BROADCAST_TO, _broadcast_to)
deflower(SH.SLICE, _index)
deflower(SH.GATHER, _index)
deflower(SH.SLICE_PAD, _slice_pad)
deflower(SH.SCATTER_ADD, _scatter_add)
deflower(AL.TAKE_ALONG, _take_along)
deflower(AL.PUT_ALONG_ADD, _put_along_add)
deflower(SH.CONCATENATE, _concatenate)
deflower(MAN.FILL, _fill)
deflower(MAN.EYE, _eye)
deflower(EIN.EINSUM_UNARY, _einsum_unary)
deflower(EIN.EINSUM_BINARY, _einsum_binary)
deflower(LIN.MATMUL, _matmul)
