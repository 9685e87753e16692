"""numpy's products, derived from ``einsum`` (one batched GEMM each), ``mul`` and slicing.

No rules of their own: ``einsum``'s bilinear primitives give VJPs and JVPs to any order.
Complex operands follow numpy (``vdot`` conjugates its first argument; the others do not).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._handle import EagerTensor
from ..errors import ArgumentError
from . import elementwise as ew
from . import shape as sh
from ._util import axis as _axis
from ._util import guard_module, shape_of
from .einsum import einsum, tensordot

__all__ = ["cross", "dot", "inner", "kron", "outer", "vdot"]

_L = "abcdefghijklmnopqrstuvwxyz"


def dot(a: Any, b: Any) -> EagerTensor:
    """``numpy.dot``: scalars multiply, 1-D.1-D is the inner product, N-D.M-D contracts the
    last axis of ``a`` with the second-to-last of ``b`` (the last when ``b`` is 1-D)."""
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        return ew.mul(a, b)
    if len(sb) == 1:
        return tensordot(a, b, axes=([len(sa) - 1], [0]))
    return tensordot(a, b, axes=([len(sa) - 1], [len(sb) - 2]))


def vdot(a: Any, b: Any) -> EagerTensor:
    """``numpy.vdot``: ``sum(conj(a) * b)`` over the flattened inputs."""
    from .complex import conj, is_complex

    fa = sh.reshape(a, (-1,))
    if is_complex(a):
        fa = conj(fa)
    return einsum("i,i->", fa, sh.reshape(b, (-1,)))


def inner(a: Any, b: Any) -> EagerTensor:
    """``numpy.inner``: contract the last axes (scalars multiply)."""
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        return ew.mul(a, b)
    return tensordot(a, b, axes=([len(sa) - 1], [len(sb) - 1]))


def outer(a: Any, b: Any) -> EagerTensor:
    """``numpy.outer`` of the flattened inputs."""
    return einsum("i,j->ij", sh.reshape(a, (-1,)), sh.reshape(b, (-1,)))


def kron(a: Any, b: Any) -> EagerTensor:
    """``numpy.kron``: the block product (an outer einsum and one reshape copy)."""
    sa, sb = shape_of(a), shape_of(b)
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
    (broadcasting the others). Derived from slices, products and one stack."""
    if axis is not None:
        axisa = axisb = axisc = axis
    sa, sb = shape_of(a), shape_of(b)
    a = sh.transpose(a, _last(len(sa), _axis("cross", axisa, len(sa), "axisa")))
    b = sh.transpose(b, _last(len(sb), _axis("cross", axisb, len(sb), "axisb")))
    na, nb = shape_of(a)[-1], shape_of(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ArgumentError(
            f"cross: arguments 'a' and 'b' have incompatible dimensions for a cross product "
            "(dimension must be 2 or 3), "
            f"got {na} and {nb}"
        )

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


def _last(nd: int, ax: int) -> tuple[int, ...]:
    return (*tuple(i for i in range(nd) if i != ax), ax)


# argument errors from numpy/scipy/the kernel name the op (the package's error classes)
guard_module(globals(), __all__)
