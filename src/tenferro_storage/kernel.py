"""The op-implementer surface: how a kernel turns fresh numpy results into owners and
reads its inputs during one call.

This is the audited boundary between numpy kernels and the ownership kernel, used
by ``tenferro_ad``'s primitives and by user extensions.  It grants nothing that the
public API does not already imply: an input array is read-only and valid only while
the caller holds the owner or view it came from; an output must be a fresh array
nobody else references.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._tensor import Tensor, TensorView, TensorViewMut, adopt_output

__all__ = ["adopt_output", "read_array"]


def read_array(
    x: Tensor[Any, Any] | TensorView[Any, Any] | TensorViewMut[Any, Any],
) -> np.ndarray[Any, Any]:
    """The read-only numpy array of an owner or view, for the duration of a kernel call.

    O(1) after the first call per descriptor (the array is cached); no ledger event.
    Refused (``BorrowError``/``UseAfterMoveError``/``ExpiredBorrowError``) when the
    owner is mutably borrowed, consumed, or the view released.  The caller must not
    keep the array beyond the borrow of ``x``.
    """
    if isinstance(x, Tensor):
        return x._meta("read_array").readonly()
    return x._d("read_array").readonly()
