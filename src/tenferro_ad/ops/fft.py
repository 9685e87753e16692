"""Discrete Fourier transforms: four linear primitives and their transposes (JAX's
convention: a VJP is the transpose of the JVP under ``<a, b> = Re sum(a * b)``, no
conjugation).

* ``fftn(x, axes, norm, inverse)`` -- complex-to-complex.  Its matrix is symmetric, so
  it is its own transpose (same ``norm``, same direction).
* ``rfftn(x, axes, norm)`` -- real to the half spectrum.  Transpose ``rfftn_t``: zero-pad
  the last transformed axis to its full length, ``fftn``, keep the real part; and
  ``rfftn_t``'s transpose is ``rfftn``.
* ``irfftn(x, axes, lengths, norm)`` -- half spectrum to real.  Transpose ``irfftn_t``:
  ``conj(rfftn(g) * mask) * scale`` where ``mask`` counts each interior frequency twice
  (JAX's ``_irfft_transpose``); and ``irfftn_t``'s transpose is ``irfftn``.

Kernels are ``numpy.fft`` (pocketfft): single precision stays single.  One allocation
per primitive; nothing is retained (linear).  Sizes ``n``/``s`` crop or zero-pad the input
first (derived from slicing and ``slice_pad``), ``fftshift``/``ifftshift`` are rolls.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tenferro_storage.errors import shown

from .._core._dispatch import bind
from .._core._handle import EagerTensor
from .._core._primitive import Primitive, deflinear, defprimitive
from .._traced._batch_rules import defbatch, leading
from ..errors import ArgumentError, ArgumentTypeError
from . import manip
from . import shape as sh
from ._util import axis as _axis
from ._util import dtype_of, guard_module, shape_of
from ._util import integer as _integer
from .elementwise import stop_gradient

Array = Any

__all__ = [
    "fft", "fft2", "fftfreq", "fftn", "fftshift", "ifft", "ifft2", "ifftn", "ifftshift",
    "irfft", "irfft2", "irfftn", "rfft", "rfft2", "rfftfreq", "rfftn",
]

_C = {np.dtype(np.float32): np.complex64, np.dtype(np.complex64): np.complex64}
_R = {np.dtype(np.complex64): np.float32, np.dtype(np.float32): np.float32}


def _cdt(x: Array) -> Any:
    return _C.get(np.asarray(x).dtype, np.complex128)


def _rdt(x: Array) -> Any:
    return _R.get(np.asarray(x).dtype, np.float64)


def _fftn_impl(x: Array, *, axes: tuple[int, ...], norm: Any, inverse: bool) -> Array:
    f = np.fft.ifftn if inverse else np.fft.fftn
    return np.asarray(f(x, axes=axes, norm=norm)).astype(_cdt(x), copy=False)


def _rfftn_impl(x: Array, *, axes: tuple[int, ...], norm: Any, n: int) -> Array:
    return np.asarray(np.fft.rfftn(x, axes=axes, norm=norm)).astype(_cdt(x), copy=False)


def _rfftn_t_impl(g: Array, *, axes: tuple[int, ...], norm: Any, n: int) -> Array:
    g = np.asarray(g)
    last = axes[-1]
    pad = [(0, 0)] * g.ndim
    pad[last] = (0, n - g.shape[last])
    full = np.pad(g, pad)
    return np.real(np.fft.fftn(full, axes=axes, norm=norm)).astype(_rdt(g), copy=True)


def _irfftn_impl(x: Array, *, axes: tuple[int, ...], lengths: tuple[int, ...], norm: Any) -> Array:
    out = np.fft.irfftn(x, s=lengths, axes=axes, norm=norm)
    return np.asarray(out).astype(_rdt(x), copy=False)


def _scale(lengths: tuple[int, ...], norm: str) -> float:
    n = math.prod(lengths)
    if norm == "backward":
        return 1.0 / n
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    return 1.0


def _irfftn_t_impl(
    g: Array, *, axes: tuple[int, ...], lengths: tuple[int, ...], norm: str
) -> Array:
    g = np.asarray(g)
    x = np.fft.rfftn(g, axes=axes)
    n = lengths[-1]
    m = x.shape[axes[-1]]
    mask = np.full(m, 2.0)
    mask[0] = 1.0
    if n % 2 == 0:
        mask[-1] = 1.0
    shape = [1] * x.ndim
    shape[axes[-1]] = m
    out = np.conj(x * mask.reshape(shape)) * _scale(lengths, norm)
    return np.asarray(out).astype(_cdt(g), copy=False)


FFTN: Primitive = deflinear(
    defprimitive("fftn", _fftn_impl, 1),
    lambda ops, g, *, axes, norm, inverse: ops.apply(
        FFTN, g, axes=axes, norm=norm, inverse=inverse
    ),
)
RFFTN: Primitive = defprimitive("rfftn", _rfftn_impl, 1)
RFFTN_T: Primitive = defprimitive("rfftn_transpose", _rfftn_t_impl, 1)
deflinear(RFFTN, lambda ops, g, *, axes, norm, n: ops.apply(RFFTN_T, g, axes=axes, norm=norm, n=n))
deflinear(RFFTN_T, lambda ops, g, *, axes, norm, n: ops.apply(RFFTN, g, axes=axes, norm=norm, n=n))
IRFFTN: Primitive = defprimitive("irfftn", _irfftn_impl, 1)
IRFFTN_T: Primitive = defprimitive("irfftn_transpose", _irfftn_t_impl, 1)
deflinear(
    IRFFTN,
    lambda ops, g, *, axes, lengths, norm: ops.apply(
        IRFFTN_T, g, axes=axes, lengths=lengths, norm=norm
    ),
)
deflinear(
    IRFFTN_T,
    lambda ops, g, *, axes, lengths, norm: ops.apply(
        IRFFTN, g, axes=axes, lengths=lengths, norm=norm
    ),
)


# -- argument handling ---
def _norm(norm: str | None, name: str) -> str:
    n = "backward" if norm is None else norm
    if n not in ("backward", "ortho", "forward"):
        raise ArgumentError(f"{name}: argument 'norm' must be 'backward', 'ortho' or 'forward', "
                            f"got {norm!r}")
    return n


def _resize(x: Any, axes: tuple[int, ...], sizes: tuple[int, ...]) -> Any:
    """Crop or zero-pad ``x`` along ``axes`` to ``sizes`` (slices / slice_pad); sizes the
    caller gave were checked by :func:`_sizes`."""
    shape = shape_of(x)
    for ax, n in zip(axes, sizes, strict=True):
        cur = shape[ax]
        if n < 1:  # a length read from an empty axis of the input (irfftn's leading axes)
            raise ArgumentError(f"fft: invalid number of data points ({n}) specified")
        if n < cur:
            x = sh.getitem(x, (slice(None),) * ax + (slice(0, n),))
        elif n > cur:
            new = list(shape)
            new[ax] = n
            x = manip.pad(x, [(0, 0) if i != ax else (0, n - cur) for i in range(len(shape))])
        shape = shape_of(x)
    return x


def _sequence(name: str, what: str, v: Any) -> tuple[Any, ...]:
    """``axes``/``s`` of the n-D transforms as a tuple (a tuple, list, range, 1-D
    array...); a string or a value that is not iterable (an int, as numpy refuses) is
    refused by type, naming the op and the argument."""
    if not isinstance(v, str | bytes):
        try:
            return tuple(v)
        except TypeError:
            pass
    raise ArgumentTypeError(
        f"{name}: argument {what!r} must be a sequence of ints, got {shown(v)}"
    )


def _sizes(name: str, what: str, s: tuple[Any, ...]) -> tuple[int, ...]:
    """Transform lengths (``n``, or ``s``'s entries): integers (numpy's ``operator.index``;
    a bool, float or string is refused by type) of at least 1, as numpy requires."""
    out = []
    for v in s:
        n = _integer(name, v, what)
        if n < 1:
            raise ArgumentError(
                f"{name}: argument {what!r}: invalid number of data points ({n}) specified"
            )
        out.append(n)
    return tuple(out)


def _axes_sizes(
    x: Any, s: Any, axes: Any, name: str, one: bool = False
) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """The transformed axes (non-negative) and lengths, checked before anything runs:
    ``one`` for the 1-D transforms, whose arguments are ``axis`` and ``n`` (``axes`` and
    ``s`` hold one each)."""
    nd = len(shape_of(x))
    what_ax, what_s = ("axis", "n") if one else ("axes", "s")
    s = None if s is None else _sequence(name, what_s, s)
    if axes is None:
        if s is None:
            ax = tuple(range(nd))
        else:
            ax = tuple(range(nd - len(s), nd))
    else:
        ax = tuple(_axis(name, a, nd, what_ax) for a in _sequence(name, what_ax, axes))
        if len(set(ax)) != len(ax):
            raise ArgumentError(f"{name}: argument 'axes' repeats an axis: {axes}")
    if s is not None and len(s) != len(ax):
        raise ArgumentError(f"{name}: arguments 's' and 'axes' must have the same length")
    return ax, (None if s is None else _sizes(name, what_s, s))


def _shift_axes(name: str, x: Any, axes: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``fftshift``/``ifftshift``'s ``x`` shape and ``axes`` (``None``: all; an int; a
    sequence of ints, repeats allowed as numpy's roll does), each checked as an axis of
    ``x`` before anything runs. O(ndim)."""
    shape = shape_of(x)
    nd = len(shape)
    if axes is None:
        return shape, tuple(range(nd))
    items = axes if isinstance(axes, tuple | list) else (axes,)
    return shape, tuple(_axis(name, a, nd, "axes") for a in items)


def _c2c(x: Any, s: Any, axes: Any, norm: str | None, inverse: bool, name: str) -> EagerTensor:
    ax, sizes = _axes_sizes(x, s, axes, name, one=name in ("fft", "ifft"))
    if sizes is not None:
        x = _resize(x, ax, sizes)
    return bind(FFTN, x, axes=ax, norm=_norm(norm, name), inverse=inverse)


def _r2c(x: Any, s: Any, axes: Any, norm: str | None, name: str) -> EagerTensor:
    if dtype_of(x).kind == "c":
        raise ArgumentError(f"{name}: expected a real input, got {dtype_of(x)}")
    ax, sizes = _axes_sizes(x, s, axes, name, one=name == "rfft")
    if sizes is not None:
        x = _resize(x, ax, sizes)
    n = shape_of(x)[ax[-1]]
    return bind(RFFTN, x, axes=ax, norm=_norm(norm, name), n=n)


def _c2r(x: Any, s: Any, axes: Any, norm: str | None, name: str) -> EagerTensor:
    ax, sizes = _axes_sizes(x, s, axes, name, one=name == "irfft")
    shape = shape_of(x)
    if sizes is None:
        lengths = (*tuple(shape[a] for a in ax[:-1]), 2 * (shape[ax[-1]] - 1))
    else:
        lengths = sizes
    # the input holds lengths[:-1] on the leading axes and lengths[-1]//2 + 1 on the last
    want = (*tuple(lengths[:-1]), lengths[-1] // 2 + 1)
    x = _resize(x, ax, want)
    return bind(IRFFTN, x, axes=ax, lengths=lengths, norm=_norm(norm, name))


# -- public functions ---
def fft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> EagerTensor:
    """1-D discrete Fourier transform along ``axis`` (``n``: crop/zero-pad first).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n log n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return _c2c(a, None if n is None else (n,), (axis,), norm, False, "fft")


def ifft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> EagerTensor:
    """1-D inverse DFT.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n log n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return _c2c(a, None if n is None else (n,), (axis,), norm, True, "ifft")


def fft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None) -> EagerTensor:
    """2-D DFT over ``axes``.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n log n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return _c2c(a, s, axes, norm, False, "fft2")


def ifft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None) -> EagerTensor:
    """2-D inverse DFT over ``axes``.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n log n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return _c2c(a, s, axes, norm, True, "ifft2")


def fftn(a: Any, s: Any = None, axes: Any = None, norm: str | None = None) -> EagerTensor:
    """N-D DFT over ``axes`` (default: all, or the last ``len(s)``).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n log n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return _c2c(a, s, axes, norm, False, "fftn")


def ifftn(a: Any, s: Any = None, axes: Any = None, norm: str | None = None) -> EagerTensor:
    """N-D inverse DFT.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n log n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return _c2c(a, s, axes, norm, True, "ifftn")


def rfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> EagerTensor:
    """DFT of a real input: the ``n//2 + 1`` non-negative frequencies.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n log n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return _r2c(a, None if n is None else (n,), (axis,), norm, "rfft")


def irfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> EagerTensor:
    """Inverse of :func:`rfft` (output length ``n``, default ``2 (m - 1)``).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n log n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return _c2r(a, None if n is None else (n,), (axis,), norm, "irfft")


def rfft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None) -> EagerTensor:
    """2-D :func:`rfftn`.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n log n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return _r2c(a, s, axes, norm, "rfft2")


def irfft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None) -> EagerTensor:
    """2-D :func:`irfftn`.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n log n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return _c2r(a, s, axes, norm, "irfft2")


def rfftn(a: Any, s: Any = None, axes: Any = None, norm: str | None = None) -> EagerTensor:
    """N-D DFT of a real input (the last axis halved).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n log n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return _r2c(a, s, axes, norm, "rfftn")


def irfftn(a: Any, s: Any = None, axes: Any = None, norm: str | None = None) -> EagerTensor:
    """Inverse of :func:`rfftn`.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n log n).
    Raises: AxisError, ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return _c2r(a, s, axes, norm, "irfftn")


def fftshift(x: Any, axes: Any = None) -> EagerTensor:
    """Move the zero frequency to the centre (a roll by ``n // 2``).

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises:
        AxisError: an axis in ``axes`` is out of range for ``x``'s rank (named
            ``fftshift``, argument ``'axes'``).
        ArgumentTypeError: an axis in ``axes`` is not an int (a string, a float, a bool),
            or ``x`` is not a value.
        ArgumentError: ``x`` cannot be read as an array.
        UseAfterMoveError: ``x`` is a consumed owner."""
    shape, ax = _shift_axes("fftshift", x, axes)
    return manip.roll(x, tuple(shape[a] // 2 for a in ax), ax)


def ifftshift(x: Any, axes: Any = None) -> EagerTensor:
    """Inverse of :func:`fftshift` (a roll by ``-(n // 2)``).

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises:
        AxisError: an axis in ``axes`` is out of range for ``x``'s rank (named
            ``ifftshift``, argument ``'axes'``).
        ArgumentTypeError: an axis in ``axes`` is not an int (a string, a float, a bool),
            or ``x`` is not a value.
        ArgumentError: ``x`` cannot be read as an array.
        UseAfterMoveError: ``x`` is a consumed owner."""
    shape, ax = _shift_axes("ifftshift", x, axes)
    return manip.roll(x, tuple(-(shape[a] // 2) for a in ax), ax)


def fftfreq(n: int, d: float = 1.0) -> EagerTensor:
    """Sample frequencies (a constant: one recorded TRANSFER of numpy's values).

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError."""
    return stop_gradient(np.fft.fftfreq(n, d))


def rfftfreq(n: int, d: float = 1.0) -> EagerTensor:
    """Non-negative sample frequencies (a constant).

    Cost: allocates the result; no copy; no sync; no dispatch; O(output size).
    Raises: ArgumentError, ArgumentTypeError."""
    return stop_gradient(np.fft.rfftfreq(n, d))


# argument errors from numpy/scipy/the kernel name the op (the package's error classes)
guard_module(globals(), __all__)

# batching rules: the transformed axes move past the batch axis
defbatch(FFTN, leading("fftn", shift=("axes",)))
defbatch(RFFTN, leading("rfftn", shift=("axes",)))
defbatch(RFFTN_T, leading("rfftn_transpose", shift=("axes",)))
defbatch(IRFFTN, leading("irfftn", shift=("axes",)))
defbatch(IRFFTN_T, leading("irfftn_transpose", shift=("axes",)))
