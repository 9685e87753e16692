"""numpy's products, derived from ``einsum`` (one batched GEMM each), ``mul`` and slicing.

No rules of their own: ``einsum``'s bilinear primitives give VJPs and JVPs to any order.
Complex operands follow numpy (``vdot`` conjugates its first argument; the others do not).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .._core._handle import EagerTensor
from ..errors import ArgumentError
from . import elementwise as ew
from . import shape as sh
from ._einsum_path import tensordot_subscripts
from ._util import axis as _axis
from ._util import guard_module, shape_of, value_arg
from .complex import conj, is_complex
from .einsum import einsum

__all__ = ["cross", "dot", "inner", "kron", "outer", "vdot"]

_L = "abcdefghijklmnopqrstuvwxyz"


def dot(a: Any, b: Any) -> EagerTensor:
    """``numpy.dot``: scalars multiply, 1-D.1-D is the inner product, N-D.M-D contracts the
    last axis of ``a`` with the second-to-last of ``b`` (the last when ``b`` is 1-D).
    One GEMM (one allocation).  Operands that are not values or do not align are refused
    first, naming ``'a'``/``'b'``; nothing is computed or recorded then.

    Cost: allocates the result; no copy; no sync; no dispatch; O(m k n).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    sa, sb = _values("dot", a, b)
    if not sa or not sb:
        return ew.mul(a, b)
    k = 0 if len(sb) == 1 else len(sb) - 2
    if sa[-1] != sb[k]:
        raise ArgumentError(
            f"dot: arguments 'a' and 'b' are not aligned: shapes {sa} and {sb} (the last axis "
            f"of 'a' has {sa[-1]} entries, axis {k} of 'b' has {sb[k]})"
        )
    return einsum(_pair_subscripts(len(sa), len(sb), len(sa) - 1, k), a, b)


def vdot(a: Any, b: Any) -> EagerTensor:
    """``numpy.vdot``: ``sum(conj(a) * b)`` over the flattened inputs.  O(size): a reshape
    of each input and one contraction.  Different sizes are refused first, naming both.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    sa, sb = _values("vdot", a, b)
    na, nb = math.prod(sa), math.prod(sb)
    if na != nb:
        raise ArgumentError(
            f"vdot: arguments 'a' and 'b' have {na} and {nb} entries (shapes {sa} and {sb}); "
            "vdot needs the same number"
        )
    fa = sh.reshape(a, (-1,))
    if is_complex(a):
        fa = conj(fa)
    return einsum("i,i->", fa, sh.reshape(b, (-1,)))


def inner(a: Any, b: Any) -> EagerTensor:
    """``numpy.inner``: contract the last axes (scalars multiply).  One GEMM; last axes of
    different lengths are refused first, naming ``'a'`` and ``'b'``.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    sa, sb = _values("inner", a, b)
    if not sa or not sb:
        return ew.mul(a, b)
    if sa[-1] != sb[-1]:
        raise ArgumentError(
            f"inner: arguments 'a' and 'b' have last axes of {sa[-1]} and {sb[-1]} entries "
            f"(shapes {sa} and {sb}); they must match"
        )
    return einsum(_pair_subscripts(len(sa), len(sb), len(sa) - 1, len(sb) - 1), a, b)


def outer(a: Any, b: Any) -> EagerTensor:
    """``numpy.outer`` of the flattened inputs: one allocation of ``a.size * b.size``
    entries.  A non-value operand is refused first, named.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    _values("outer", a, b)
    return einsum("i,j->ij", sh.reshape(a, (-1,)), sh.reshape(b, (-1,)))


def kron(a: Any, b: Any) -> EagerTensor:
    """``numpy.kron``: the block product (an outer einsum and one reshape copy).  A
    non-value operand is refused first, named.

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    sa, sb = _values("kron", a, b)
    nd = max(len(sa), len(sb))
    sa = (1,) * (nd - len(sa)) + sa
    sb = (1,) * (nd - len(sb)) + sb
    a = sh.reshape(a, sa)
    b = sh.reshape(b, sb)
    la, lb = _L[:nd], _L[nd : 2 * nd]
    out = einsum(f"{la},{lb}->{''.join(x + y for x, y in zip(la, lb, strict=True))}", a, b)
    return sh.reshape(out, tuple(x * y for x, y in zip(sa, sb, strict=True)))


def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: int | None = None) -> EagerTensor:
    """``numpy.cross`` of 3-vectors (or 2-vectors, giving the z component) along an axis
    (broadcasting the others). Derived from slices, products and one stack (a few
    allocations of the output's size).  Operands, vector axes and broadcasting are checked
    first; a refusal names ``'a'``, ``'b'`` and the axis arguments involved.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    names = ("axisa", "axisb", "axisc")
    if axis is not None:
        axisa = axisb = axisc = axis
        names = ("axis", "axis", "axis")
    sa, sb = _values("cross", a, b)
    ia = _axis("cross", axisa, len(sa), names[0])
    ib = _axis("cross", axisb, len(sb), names[1])
    na, nb = sa[ia], sb[ib]
    which = (
        "arguments 'a', 'b' and 'axis'" if axis is not None
        else "arguments 'a', 'b', 'axisa' and 'axisb'"
    )
    if na not in (2, 3) or nb not in (2, 3):
        raise ArgumentError(
            f"cross: {which} do not fit: incompatible dimensions for a cross product "
            f"(dimension must be 2 or 3), got {na} and {nb} (shapes {sa} and {sb}, vector "
            f"axes {ia} and {ib})"
        )
    rest_a = tuple(n for i, n in enumerate(sa) if i != ia)
    rest_b = tuple(n for i, n in enumerate(sb) if i != ib)
    try:
        rest = np.broadcast_shapes(rest_a, rest_b)
    except ValueError:
        raise ArgumentError(
            f"cross: {which} do not fit: shapes {sa} and {sb} without their vector axes "
            f"({ia} and {ib}) are {rest_a} and {rest_b}, which do not broadcast"
        ) from None
    if not (na == 2 and nb == 2):
        _axis("cross", axisc, len(rest) + 1, names[2])
    a = sh.transpose(a, _last(len(sa), ia))
    b = sh.transpose(b, _last(len(sb), ib))

    def c(x: Any, i: int, n: int) -> Any:
        return sh.getitem(x, (Ellipsis, i)) if i < n else 0.0

    a0, a1, a2 = c(a, 0, na), c(a, 1, na), c(a, 2, na)
    b0, b1, b2 = c(b, 0, nb), c(b, 1, nb), c(b, 2, nb)
    z = ew.sub(ew.mul(a0, b1), ew.mul(a1, b0))
    if na == 2 and nb == 2:
        return z
    x = ew.sub(ew.mul(a1, b2), ew.mul(a2, b1))
    y = ew.sub(ew.mul(a2, b0), ew.mul(a0, b2))
    bshape = np.broadcast_shapes(shape_of(x), shape_of(y), shape_of(z))
    parts = [sh.broadcast_to(v, bshape) for v in (x, y, z)]
    out = sh.stack(parts, axis=-1)
    nd = len(shape_of(out))
    ac = _axis("cross", axisc, nd, "axisc")
    if ac != nd - 1:
        order = list(range(nd - 1))
        order.insert(ac, nd - 1)
        out = sh.transpose(out, tuple(order))
    return out


@functools.lru_cache(maxsize=256)
def _pair_subscripts(ra: int, rb: int, xa: int, xb: int) -> str:
    """The einsum subscripts contracting axis ``xa`` of a rank-``ra`` value with axis ``xb``
    of a rank-``rb`` one (``tensordot``'s order). Cached: O(1) on a repeated call."""
    return tensordot_subscripts(ra, rb, ([xa], [xb]))


def _values(op: str, a: Any, b: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shapes of the operands ``a`` and ``b``, each checked (an error names it). O(1)."""
    return value_arg(op, "a", a, imported=True)[0], value_arg(op, "b", b, imported=True)[0]


def _last(nd: int, ax: int) -> tuple[int, ...]:
    return (*tuple(i for i in range(nd) if i != ax), ax)


# argument errors from numpy/scipy/the kernel name the op (the package's error classes)
guard_module(globals(), __all__)
