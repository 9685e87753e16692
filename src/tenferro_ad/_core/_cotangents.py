"""User cotangents and rule outputs, checked before they enter a sweep.

:func:`check_cotangent` checks a seed, cotangent or tangent a caller passes against the
value it pairs with (same shape, same dtype, as in JAX); :func:`seed` makes the backward
seed; :func:`check_rule_output` checks what a user primitive's VJP rule returns against
its argument.  Each raises ``ArgumentError``/``ArgumentTypeError`` naming the call and the
entry, before anything changes.  (Split out of :mod:`._tape`, which re-exports them.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_storage as ts

from ..errors import ArgumentError, ArgumentTypeError
from ._handle import EagerTensor, make_handle
from ._primitive import Primitive
from ._retention import constant_record, record_borrow, record_owner
from ._state import STATE


def check_rule_output(prim: Primitive, i: int, ct: Any, target: Any, g: Any) -> None:
    """A user rule's cotangent must fit its argument (or the output, for a broadcasting
    primitive) in shape, and be floating/complex like it: never a silent wrong gradient."""
    shape = tuple(np.shape(ct))
    want = tuple(target)
    if shape != want and not (prim.broadcasts and shape == tuple(np.shape(g))):
        raise ArgumentError(
            f"{prim.name}: the VJP rule for argument {i} returned a cotangent of shape "
            f"{shape}; the argument has shape {want}"
        )
    dt = getattr(ct, "dtype", None)
    want_dt = getattr(target, "dtype", None)
    if dt is not None and want_dt is not None and (
        dt.kind not in "fc" or (dt.kind == "c" and want_dt.kind != "c") or
        (dt.kind == want_dt.kind and dt.itemsize != want_dt.itemsize)
    ):
        raise ArgumentTypeError(
            f"{prim.name}: the VJP rule for argument {i} returned a {dt} cotangent; the "
            f"argument is {want_dt}"
        )


def check_cotangent(ct: Any, like: np.ndarray[Any, Any], what: str, k: int, nested: bool) -> Any:
    """Check one user cotangent/tangent against its value: same shape, same dtype.

    Returns the kernel array (``nested=False``: an owner's or handle's array is borrowed for
    the call, a numpy array is read in place) or a handle (``nested=True``: a numpy array
    is imported with a recorded ``TRANSFER``, an owner is borrowed).  Raises
    ``ArgumentError``/``ArgumentTypeError`` naming ``what`` and entry ``k``; nothing
    changes.
    """
    shape, dt = like.shape, like.dtype
    if ct is None:
        raise ArgumentTypeError(f"{what}: entry {k} is None; pass an array of shape {shape}")
    owner = isinstance(ct, ts.Tensor | ts.TensorView | ts.TensorViewMut)
    if isinstance(ct, EagerTensor):
        a = ct._r(what).a
    elif owner:
        a = ts.kernel.read_array(ct)
    elif isinstance(ct, int | float | complex) and not isinstance(ct, bool):
        if isinstance(ct, complex) and dt.kind != "c":
            raise ArgumentTypeError(f"{what}: entry {k} is complex but the value is {dt.name}")
        a = np.full(shape, ct, dt)
    elif isinstance(ct, np.ndarray):  # the caller's memory: read only, never adopted
        a = ts.kernel.frozen(ct)
    elif isinstance(ct, np.generic | list | tuple):
        a = np.asarray(ct)
    else:
        raise ArgumentTypeError(
            f"{what}: entry {k} is a {type(ct).__name__}; pass a numpy array, an owner or an "
            "EagerTensor"
        )
    if a.shape != shape:
        raise ArgumentError(
            f"{what}: entry {k} has shape {a.shape}, but the value it pairs with has shape "
            f"{shape}"
        )
    if a.dtype != dt:
        if a.dtype.newbyteorder("=") == dt:  # another byte order (big-endian data): the
            a = a.astype(dt)  # same values, converted as numpy's operations do
        else:
            raise ArgumentTypeError(
                f"{what}: entry {k} has dtype {a.dtype.name}, but the value it pairs with has "
                f"dtype {dt.name} (as in JAX, they must match; convert with astype)"
            )
    if not nested:
        return a
    if isinstance(ct, EagerTensor):
        return ct
    if owner:
        return make_handle(record_borrow(ct, "cotangent", f"{what}: entry {k}"), None, -1)
    if isinstance(ct, int | float | complex):  # a fresh value made here, not a copy
        t = ts.kernel.adopt_output(a, STATE.reason, "seed")
        return make_handle(record_owner(t, ts.kernel.read_array(t), "seed"), None, -1)
    return make_handle(constant_record(a, what), None, -1)


def seed(loss_a: Any, cotangent: Any, create_graph: bool) -> Any:
    """The backward seed: ones by default, else the caller's cotangent, checked first."""
    if cotangent is None:
        if not create_graph:
            return np.ones(loss_a.shape, loss_a.dtype)
        cotangent = 1.0
    return check_cotangent(cotangent, loss_a, "Tape.backward (cotangent)", 0, create_graph)
