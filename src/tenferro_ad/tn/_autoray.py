"""tenferro as an autoray backend: the table autoray dispatches through.

autoray finds a library's function by the module of the array class (``tenferro_ad`` for a
handle, ``tenferro_storage`` for an owner or view) and then by name in that module.  This
module maps every tenferro value class to the one backend name ``"tenferro_ad"`` and
registers what numpy spells differently (``multiply``, ``power``, ``random.normal``, ...),
so ``autoray.do(name, x)`` runs tenferro's own op on tenferro values: results are
handles/owners, never numpy arrays, and gradients flow through every call.

Copies: the functions here make none of their own.  ``to_numpy`` is the one recorded
``TRANSFER`` copy out of tenferro (``x.to_numpy()``); ``array``/``asarray`` of numpy data is
the recorded ``TRANSFER`` import (:func:`tenferro_ad.asarray`); everything else is an op
(an ``OPERATION_OUTPUT`` allocation or an alias of its input, as the op documents).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import autoray
import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts

__all__ = ["BACKEND", "TRANSLATED", "register_autoray"]

BACKEND = "tenferro_ad"
"""The autoray backend name of every tenferro value (``autoray.do(..., like=BACKEND)``)."""

_VALUE_CLASSES: tuple[type, ...] = (ad.EagerTensor, ts.Tensor, ts.TensorView, ts.TensorViewMut)


class _Rng(threading.local):
    """The stream behind ``autoray.do("random.*", like="tenferro_ad")``: one tenferro
    generator per thread, seeded 0 until ``random.seed`` reseeds it (autoray's global-state
    random API, kept explicit here)."""

    def __init__(self) -> None:
        self.gen = ts.random.default_rng(0)


_RNG = _Rng()


def _shape_of(size: Any) -> tuple[int, ...]:
    if size is None:
        return ()
    if isinstance(size, int | np.integer):
        return (int(size),)
    return tuple(int(s) for s in size)


def _dtype_or(dtype: Any, default: str = "float64") -> Any:
    return default if dtype is None else dtype


def _random_normal(
    loc: float = 0.0, scale: float = 1.0, size: Any = None, dtype: Any = None, **_: Any
) -> Any:
    return _RNG.gen.normal(_shape_of(size), loc=loc, scale=scale, dtype=_dtype_or(dtype))


def _random_uniform(
    low: float = 0.0, high: float = 1.0, size: Any = None, dtype: Any = None, **_: Any
) -> Any:
    return _RNG.gen.uniform(_shape_of(size), low=low, high=high, dtype=_dtype_or(dtype))


def _random_seed(seed: int | None = None) -> None:
    _RNG.gen = ts.random.default_rng(seed)


def _to_numpy(x: Any) -> Any:
    """One recorded ``TRANSFER`` copy into a new numpy array (numpy input: itself)."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, ad.EagerTensor | ts.Tensor | ts.TensorView | ts.TensorViewMut):
        return x.to_numpy()
    return np.asarray(x)


def _array(x: Any, dtype: Any = None, **_: Any) -> Any:
    """``asarray``: a tenferro value as it is; other data imported (one ``TRANSFER``)."""
    return ad.asarray(x, dtype)


def _creation(fn: Callable[..., Any]) -> Callable[..., Any]:
    def make(shape: Any, dtype: Any = None, **_: Any) -> Any:
        return fn(_shape_of(shape), _dtype_or(dtype))

    make.__name__ = fn.__name__
    return make


def _eye(n: int, m: int | None = None, k: int = 0, dtype: Any = None, **_: Any) -> Any:
    return ad.eye(n, m, k, dtype=_dtype_or(dtype))


def _full(shape: Any, fill_value: Any, dtype: Any = None, **_: Any) -> Any:
    return ad.full(_shape_of(shape), fill_value, _dtype_or(dtype))


def _like(fn: Callable[..., Any]) -> Callable[..., Any]:
    def make(x: Any, dtype: Any = None, **_: Any) -> Any:
        return fn(_shape_of(x.shape), _dtype_or(dtype, x.dtype.name))

    make.__name__ = fn.__name__ + "_like"
    return make


def _transpose(x: Any, axes: Sequence[int] | None = None) -> Any:
    return ad.transpose(x) if axes is None else ad.transpose(x, tuple(axes))


def _reshape(x: Any, shape: Any) -> Any:
    return ad.reshape(x, _shape_of(shape))


def _svd(x: Any, full_matrices: bool = False, compute_uv: bool = True) -> Any:
    if not compute_uv:
        return ad.linalg.svd(x, full_matrices)[1]
    return ad.linalg.svd(x, full_matrices)


def _qr(x: Any, mode: str = "reduced") -> Any:
    if mode != "reduced":
        raise ValueError(
            f"linalg.qr: argument 'mode' {mode!r} is not supported on tenferro (the "
            "reduced factorization only)"
        )
    return ad.linalg.qr(x)


def _sum(x: Any, axis: Any = None, keepdims: bool = False, **_: Any) -> Any:
    return ad.sum(x, axis=axis, keepdims=keepdims)


def _copy(x: Any) -> Any:
    """A new value with ``x``'s elements: for an owner, ``duplicate()`` (one recorded
    ``EXPLICIT_DUPLICATE``); for a handle, a fresh op output (a kernel write, no copy
    event), differentiable."""
    if isinstance(x, ts.Tensor | ts.TensorView | ts.TensorViewMut):
        return x.duplicate()
    return ad.add(x, 0)


# numpy spelling -> tenferro function (where the name or the signature differs)
TRANSLATED: dict[str, Callable[..., Any]] = {
    "absolute": ad.abs,
    "array": _array,
    "asarray": _array,
    "concat": ad.concatenate,
    "conjugate": ad.conj,
    "copy": _copy,
    "divide": ad.div,
    "empty": _creation(ad.zeros),
    "eye": _eye,
    "full": _full,
    "linalg.qr": _qr,
    "linalg.svd": _svd,
    "multiply": ad.mul,
    "negative": ad.neg,
    "ones": _creation(ad.ones),
    "ones_like": _like(ad.ones),
    "power": ad.pow,
    "random.normal": _random_normal,
    "random.seed": _random_seed,
    "random.uniform": _random_uniform,
    "reshape": _reshape,
    "subtract": ad.sub,
    "sum": _sum,
    "to_numpy": _to_numpy,
    "transpose": _transpose,
    "true_divide": ad.div,
    "zeros": _creation(ad.zeros),
    "zeros_like": _like(ad.zeros),
}

_LOCK = threading.Lock()
_REGISTERED: list[bool] = []


def register_autoray() -> str:
    """Make tenferro an autoray backend (idempotent); returns its name, ``"tenferro_ad"``.

    After the call ``autoray.do(name, x, ...)`` on a tenferro owner, view or handle (and
    ``like="tenferro_ad"``) runs tenferro's op: every tenferro value class dispatches to
    ``"tenferro_ad"``, names autoray looks up there directly (``tensordot``, ``einsum``,
    ``linalg.eigh``, ``sqrt``, ...) resolve to :mod:`tenferro_ad`'s functions and the ones
    numpy spells differently come from :data:`TRANSLATED`.  Registration is explicit (not
    on import) so importing tenferro never touches autoray's global tables.  Cost: once,
    O(len(TRANSLATED)) dictionary writes; later calls return at once.  Nothing is
    allocated or copied.
    """
    with _LOCK:
        if not _REGISTERED:
            for cls in _VALUE_CLASSES:
                autoray.register_backend(cls, BACKEND)
            for name, fn in TRANSLATED.items():
                autoray.register_function(BACKEND, name, fn)
            _REGISTERED.append(True)
    return BACKEND
