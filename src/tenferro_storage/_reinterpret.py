"""Zero-copy complex<->real reinterpretation for the sealed scalar pairs.

The sealed pairs are complex64<->float32 and complex128<->float64.  A
reinterpretation is a descriptor operation over the same root: nothing is
allocated or copied, no ledger event is recorded, and the new descriptor keeps the
root, the span it is checked against and the provider of its source.  The element
mapping is numpy's ``.view()``:

* complex -> real (``view_as_real``, ``Tensor.into_real``): element ``[..., i]`` of
  the complex layout becomes ``[..., i, 0]`` (real part) and ``[..., i, 1]``
  (imaginary part); strides and offset double and a trailing axis of extent 2 and
  stride 1 is appended.  Equal to ``c[..., None].view(real_dtype)`` in numpy.
* real -> complex (``view_as_complex``, ``Tensor.into_complex``): the inverse.  The
  source needs a trailing axis of extent 2 and stride 1, an even element offset and
  even strides on every other axis of extent > 1; the trailing axis is removed.
  Equal to ``r.view(complex_dtype)[..., 0]`` in numpy.

Rank policy: complex -> real adds exactly one (trailing) axis, real -> complex
removes exactly one.  The overloads below state it to the type checker for the
static ranks (``Rank0`` -> ``Rank1`` ... ``Rank3`` -> ``Rank4``; ``Rank4`` -> ``DynRank``
because no ``Rank5`` marker exists; ``DynRank`` -> ``DynRank``); a rank-0 real value has
no trailing axis to remove, so ``view_as_complex`` does not accept one.

Before publishing, the derived request is validated once against the source's exact
root-bound span (arithmetic, byte divisibility, alignment, bounds, provider): one
``validations`` tick on the provider, no other work.  The write-injectivity proof of
the source carries over unchanged (the mapping is a bijection between the complex
elements and the pairs of real elements).

Three forms:

* ``view_as_real(view)`` / ``view_as_complex(view)`` on a :class:`TensorView`: a new
  read-only view borrowing the same lender as ``view`` (like slicing);
* the same functions on a :class:`TensorViewMut`: an exclusive child reborrow of that
  mutable view (writes through the parent wait for it), injective by construction;
* ``tensor.into_real()`` / ``tensor.into_complex()``: consume the owner into a new owner
  of the same storage.

Failures raise ``ReinterpretError`` (a ``ValueError``): ``.value`` is the source, unchanged
and usable -- for the consuming forms the original owner, not consumed -- and
``.cause`` the reason (a ``LayoutError`` when the span checks refused the result).
"""

from __future__ import annotations

from typing import Any, overload

from . import _descriptor as D
from ._descriptor import CheckedDescriptor
from ._rank import DynRank, Rank0, Rank1, Rank2, Rank3, Rank4
from ._root import OwnedStorage
from ._tensor import Tensor, TensorView, TensorViewMut
from .errors import BorrowError, LayoutError, OwnershipError, ReinterpretError


class _Refused(Exception):
    """Internal: a pair rule refused the request (carried out as ``ReinterpretError``)."""

    def __init__(self, message: str, cause: BaseException | str) -> None:
        super().__init__(message)
        self.cause = cause


def _describe(desc: CheckedDescriptor, storage: OwnedStorage) -> str:
    return (
        f"{desc.dtype.name} shape={desc.shape} strides={desc.strides} offset={desc.offset} "
        f"over {storage.span}"
    )


def _publish(
    operation: str, src: CheckedDescriptor, storage: OwnedStorage, dt: Any,
    shape: tuple[int, ...], strides: tuple[int, ...], offset: int,
) -> CheckedDescriptor:
    root = storage._root
    assert root is not None
    try:
        desc = D.build(operation, root, src.start, src.stop, dt, shape, strides, offset)
    except LayoutError as exc:
        raise _Refused(
            f"{operation}: the reinterpreted layout is not valid over the source span: "
            f"{exc.reason}",
            exc,
        ) from exc
    desc._injective = src._injective  # the element mapping is a bijection
    return desc


def _to_real(src: CheckedDescriptor, storage: OwnedStorage, operation: str) -> CheckedDescriptor:
    dt = src.dtype
    if not dt.is_complex:
        raise _Refused(
            f"{operation}: expected complex64 or complex128, got {_describe(src, storage)}; "
            "view_as_complex/into_complex go the other way",
            "not a complex dtype",
        )
    real = dt.partner
    strides = tuple(2 * s for s in src.strides)
    return _publish(
        operation, src, storage, real, (*src.shape, 2), (*strides, 1), 2 * src.offset
    )


def _to_complex(src: CheckedDescriptor, storage: OwnedStorage, operation: str) -> CheckedDescriptor:
    dt = src.dtype
    cplx = dt.partner
    if dt.is_complex or cplx is None:
        raise _Refused(
            f"{operation}: expected float32 or float64, got {_describe(src, storage)}; only "
            "the sealed pairs complex64<->float32 and complex128<->float64 reinterpret",
            "not a real dtype with a complex partner",
        )
    shape, strides, offset = src.shape, src.strides, src.offset
    if not shape or shape[-1] != 2 or strides[-1] != 1:
        raise _Refused(
            f"{operation}: needs a trailing axis of extent 2 and stride 1 (real and imaginary "
            f"parts side by side), got {_describe(src, storage)}. Duplicate into a "
            "row-major owner of shape (..., 2) first",
            "no unit-stride trailing axis of extent 2",
        )
    if offset % 2:
        raise _Refused(
            f"{operation}: offset {offset} does not start on a {cplx.name} element boundary "
            f"({_describe(src, storage)})",
            "misaligned offset",
        )
    for axis, (n, s) in enumerate(zip(shape[:-1], strides[:-1], strict=True)):
        if n > 1 and s % 2:
            raise _Refused(
                f"{operation}: stride {s} on axis {axis} is not a whole number of {cplx.name} "
                f"elements ({_describe(src, storage)})",
                "odd stride",
            )
    return _publish(
        operation, src, storage, cplx, shape[:-1], tuple(s // 2 for s in strides[:-1]), offset // 2
    )


def _of_view(exc: _Refused, operation: str) -> str:
    """A pair rule's refusal, said of the function's ``view`` argument (the rules are
    shared with the owner methods, whose subject is the receiver). O(message)."""
    message = str(exc)
    head = f"{operation}: "
    if message.startswith(head):
        return f"{head}argument 'view': {message[len(head):]}"
    return message


def _reinterpret_view(view: object, derive: Any, operation: str) -> Any:
    if isinstance(view, TensorViewMut):
        if view._exclusive is not None or view._shared:
            raise BorrowError(
                f"{operation}: argument 'view': requested an exclusive reborrow of a "
                "TensorViewMut, but "
                f"{view._blocker()}; release it first"
            )
        src = view._d(operation)
        try:
            desc = derive(src, view._storage, operation)
        except _Refused as exc:
            raise ReinterpretError(_of_view(exc, operation), view, exc.cause) from None
        if desc.injectivity() is None:  # unreachable for a valid mutable view; kept as a guard
            raise ReinterpretError(
                f"{operation}: the result is not write-injective", view, "non-injective"
            )
        return view._reborrow_mut(desc, operation)
    if isinstance(view, TensorView):
        src = view._d(operation)
        try:
            desc = derive(src, view._storage, operation)
        except _Refused as exc:
            raise ReinterpretError(_of_view(exc, operation), view, exc.cause) from None
        return view._derive(desc, operation)
    if isinstance(view, Tensor):
        raise OwnershipError(
            f"{operation}: argument 'view' is an owning Tensor; use tensor.as_view() (or "
            "as_view_mut()) for a borrowed reinterpretation, or the consuming "
            "tensor.into_real()/into_complex()"
        )
    raise OwnershipError(
        f"{operation}: argument 'view' must be a TensorView or TensorViewMut, got "
        f"{type(view).__name__}"
    )


def _reinterpret_owner(tensor: Tensor[Any, Any], derive: Any, operation: str) -> Any:
    tensor._consume(operation)  # BorrowError/UseAfterMoveError here change nothing
    storage = tensor._storage
    assert storage is not None
    try:
        desc = derive(tensor._desc, storage, operation)
    except _Refused as exc:
        tensor._unconsume()
        raise ReinterpretError(str(exc), tensor, exc.cause) from None
    tensor._storage = None
    out: Tensor[Any, Any] = Tensor.__new__(Tensor)
    out._init_lender()
    out._storage = storage
    out._desc = desc
    return out


@overload
def view_as_real(view: TensorViewMut[Any, Rank0]) -> TensorViewMut[Any, Rank1]: ...
@overload
def view_as_real(view: TensorViewMut[Any, Rank1]) -> TensorViewMut[Any, Rank2]: ...
@overload
def view_as_real(view: TensorViewMut[Any, Rank2]) -> TensorViewMut[Any, Rank3]: ...
@overload
def view_as_real(view: TensorViewMut[Any, Rank3]) -> TensorViewMut[Any, Rank4]: ...
@overload
def view_as_real(view: TensorViewMut[Any, Rank4]) -> TensorViewMut[Any, DynRank]: ...
@overload
def view_as_real(view: TensorViewMut[Any, DynRank]) -> TensorViewMut[Any, DynRank]: ...
@overload
def view_as_real(view: TensorView[Any, Rank0]) -> TensorView[Any, Rank1]: ...
@overload
def view_as_real(view: TensorView[Any, Rank1]) -> TensorView[Any, Rank2]: ...
@overload
def view_as_real(view: TensorView[Any, Rank2]) -> TensorView[Any, Rank3]: ...
@overload
def view_as_real(view: TensorView[Any, Rank3]) -> TensorView[Any, Rank4]: ...
@overload
def view_as_real(view: TensorView[Any, Rank4]) -> TensorView[Any, DynRank]: ...
@overload
def view_as_real(view: TensorView[Any, DynRank]) -> TensorView[Any, DynRank]: ...
def view_as_real(view: Any) -> Any:
    """Reinterpret a complex view as real, with a trailing axis of extent 2. Zero-copy, O(rank).

    A :class:`TensorView` gives a read-only view (a shared borrow of the same lender);
    a :class:`TensorViewMut` gives a mutable child reborrow of it.  Rank grows by one.
    ``ReinterpretError`` (``.value`` = ``view``, unchanged) when ``view`` is not complex.
    """
    return _reinterpret_view(view, _to_real, "view_as_real")


@overload
def view_as_complex(view: TensorViewMut[Any, Rank1]) -> TensorViewMut[Any, Rank0]: ...
@overload
def view_as_complex(view: TensorViewMut[Any, Rank2]) -> TensorViewMut[Any, Rank1]: ...
@overload
def view_as_complex(view: TensorViewMut[Any, Rank3]) -> TensorViewMut[Any, Rank2]: ...
@overload
def view_as_complex(view: TensorViewMut[Any, Rank4]) -> TensorViewMut[Any, Rank3]: ...
@overload
def view_as_complex(view: TensorViewMut[Any, DynRank]) -> TensorViewMut[Any, DynRank]: ...
@overload
def view_as_complex(view: TensorView[Any, Rank1]) -> TensorView[Any, Rank0]: ...
@overload
def view_as_complex(view: TensorView[Any, Rank2]) -> TensorView[Any, Rank1]: ...
@overload
def view_as_complex(view: TensorView[Any, Rank3]) -> TensorView[Any, Rank2]: ...
@overload
def view_as_complex(view: TensorView[Any, Rank4]) -> TensorView[Any, Rank3]: ...
@overload
def view_as_complex(view: TensorView[Any, DynRank]) -> TensorView[Any, DynRank]: ...
def view_as_complex(view: Any) -> Any:
    """Reinterpret a real view with a unit-stride trailing axis of extent 2 as complex.

    Zero-copy, O(rank); the trailing axis is removed (rank shrinks by one).  A
    :class:`TensorView` gives a read-only view, a :class:`TensorViewMut` a mutable child
    reborrow.  ``ReinterpretError`` (``.value`` = ``view``, unchanged) when the dtype has no
    complex partner, the trailing axis is not ``(2, stride 1)``, the offset or a stride is
    odd, or the span does not hold whole complex elements.
    """
    return _reinterpret_view(view, _to_complex, "view_as_complex")


def owner_into_real(tensor: Tensor[Any, Any]) -> Tensor[Any, DynRank]:
    """``Tensor.into_real``: consume a complex owner into a real owner of the same storage."""
    return _reinterpret_owner(tensor, _to_real, "Tensor.into_real")  # type: ignore[no-any-return]


def owner_into_complex(tensor: Tensor[Any, Any]) -> Tensor[Any, DynRank]:
    """``Tensor.into_complex``: consume a real owner (trailing axis 2) into a complex owner."""
    return _reinterpret_owner(tensor, _to_complex, "Tensor.into_complex")  # type: ignore[no-any-return]


__all__ = ["owner_into_complex", "owner_into_real", "view_as_complex", "view_as_real"]
