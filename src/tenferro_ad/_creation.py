"""Creation, in one place: ``tenferro_ad`` offers every creation function
``tenferro_storage`` has (``zeros``, ``ones``, ``full``, ``arange``, ``from_numpy``,
``from_dlpack``, re-exported: they return owners) beside its own (``eye``, ``linspace``,
``zeros_like``, ``ones_like``, ``full_like``: differentiable values), and ``asarray``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_storage as ts
from tenferro_storage._dtypes import STORED_NUMPY as _STORED
from tenferro_storage.errors import DTypeError, TenferroError

from ._core._handle import EagerTensor
from .errors import UnsupportedDTypeError
from .ops._axes import _refused_dtype

__all__ = ["asarray"]

_VALUES = (ts.Tensor, ts.TensorView, ts.TensorViewMut, EagerTensor)


def asarray(x: Any, dtype: Any = None) -> Any:
    """``numpy.asarray`` for tenferro: what ops and transforms take, with no hidden copy.

    A tenferro value (owner, view, handle) comes back as it is (no copy; with ``dtype``
    different from its own, ``astype`` makes a new value).  Anything else is imported into
    a new owner with **one recorded** ``TRANSFER`` copy: a numpy array, list or scalar
    through ``from_numpy``, a JAX array or torch tensor through ``from_dlpack``.  Hoist an
    ``asarray`` of a constant out of a loop or a jitted function: passing the numpy array
    itself imports it again on every call.  O(1) for a tenferro value, O(size) otherwise.

    Cost: allocates a new owner unless ``x`` already is one (returned as is); copies a foreign array
    once (a recorded TRANSFER); no sync; no dispatch; O(n).
    Raises:
        UnsupportedDTypeError: ``x`` has a dtype tenferro does not support (a string,
            object or datetime array, ``float16``, ``uint8``...); it is a ``DTypeError``
            and an ``ArgumentTypeError``.
        DTypeError: ``dtype`` is not a dtype tenferro supports.
        UseAfterMoveError: ``x`` is an owner or handle that was consumed.
        ExpiredBorrowError: ``x`` is a view that was released.
        TypeError: ``x`` cannot become an array."""
    if dtype is not None:
        try:
            dtype = ts.dtype(dtype)
        except TenferroError as e:
            raise DTypeError(f"asarray: argument 'dtype': {str(e).partition(': ')[2]}") from None
    if isinstance(x, _VALUES):
        try:
            own = x.dtype  # O(1); a consumed owner or handle, a released view raises
        except TenferroError as e:
            raise _dead(e) from None
        if dtype is None or dtype == own:
            return x
        return x.astype(dtype)
    try:
        if not isinstance(x, np.ndarray | np.generic) and hasattr(type(x), "__dlpack__"):
            owner = ts.from_dlpack(x)
            return owner if dtype is None else asarray(owner, dtype)
        return ts.from_numpy(x, dtype)
    except DTypeError as e:  # named for this call: asarray's argument 'x'
        dt = _refused_dtype(x)
        if dt is None and isinstance(x, np.generic) and x.dtype not in _STORED:
            dt = x.dtype
        if dt is not None:
            raise UnsupportedDTypeError("asarray", "argument 'x'", dt) from None
        rest = str(e).partition("argument '")[2].partition(" ")[2] or str(e)
        raise type(e)(f"asarray: argument 'x': {rest}") from None


def _dead(e: TenferroError) -> TenferroError:
    """``e`` (the metadata read of a consumed owner or handle, or of a released view) named
    for ``asarray``'s argument ``'x'``, of the same class."""
    rest = str(e).partition(": ")[2] or str(e)
    try:
        return type(e)(f"asarray: argument 'x': {rest}")
    except Exception:  # pragma: no cover - every storage error takes a message
        return e
