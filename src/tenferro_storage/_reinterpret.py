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

The pair rules themselves (descriptor in, descriptor out) are in ``_reinterpret_rules.py``,
below both this module and ``_tensor.py``, whose ``Tensor.into_real``/``into_complex``
apply them to an owner.

Failures raise ``ReinterpretError`` (a ``ValueError``): ``.value`` is the source, unchanged
and usable -- for the consuming forms the original owner, not consumed -- and
``.cause`` the reason (a ``LayoutError`` when the span checks refused the result).
"""

from __future__ import annotations

from typing import Any, overload

from ._rank import DynRank, Rank0, Rank1, Rank2, Rank3, Rank4
from ._reinterpret_rules import Refused, to_complex, to_real
from ._tensor import Tensor, TensorView, TensorViewMut
from .errors import BorrowError, OwnershipError, ReinterpretError


def _of_view(exc: Refused, operation: str) -> str:
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
        except Refused as exc:
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
        except Refused as exc:
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

    Cost: no allocation; no copy; no sync; no dispatch; O(1): a reinterpretation.
    Raises: BorrowError, OwnershipError, ReinterpretError."""
    return _reinterpret_view(view, to_real, "view_as_real")


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

    Cost: no allocation; no copy; no sync; no dispatch; O(1): a reinterpretation.
    Raises: BorrowError, OwnershipError, ReinterpretError."""
    return _reinterpret_view(view, to_complex, "view_as_complex")


__all__ = ["view_as_complex", "view_as_real"]
