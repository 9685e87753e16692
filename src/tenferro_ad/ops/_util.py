"""Small helpers shared by the op families added for numpy coverage (math, scan, manip,
products, fft): shapes and dtypes of any argument, and axis normalization with numpy's
semantics raising :class:`~tenferro_ad.errors.AxisError`.  All O(ndim), no allocation."""

from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from tenferro_storage.errors import TenferroError

from .._handle import EagerTensor
from ..errors import ArgumentError, ArgumentTypeError, AxisError


def shape_of(x: Any) -> tuple[int, ...]:
    """The shape of a handle, owner, numpy array or scalar (metadata only)."""
    if isinstance(x, EagerTensor):
        return tuple(x._r("shape").a.shape)
    s = getattr(x, "shape", None)
    return tuple(np.shape(x) if s is None else s)


def dtype_of(x: Any) -> np.dtype[Any]:
    """The numpy dtype of a handle, owner, numpy array or scalar."""
    if isinstance(x, EagerTensor):
        dt: np.dtype[Any] = x._r("dtype").a.dtype
        return dt
    d = getattr(x, "dtype", None)
    if d is not None and hasattr(d, "numpy"):
        nd: np.dtype[Any] = np.dtype(d.numpy)
        return nd
    return np.result_type(x)


def axis(operation: str, ax: Any, ndim: int, what: str = "axis") -> int:
    """One axis in ``[-ndim, ndim)`` as a non-negative int; ``AxisError`` otherwise."""
    if isinstance(ax, bool | np.bool_):
        raise ArgumentTypeError(f"{operation}: argument {what!r} must be an int, got {ax!r}")
    try:
        a = operator.index(ax)
    except TypeError:
        raise ArgumentTypeError(
            f"{operation}: argument {what!r} must be an int, got {type(ax).__name__} {ax!r}"
        ) from None
    if not -ndim <= a < ndim:
        raise AxisError(operation, a, ndim, what)
    return a + ndim if a < 0 else a


def axes(operation: str, ax: Any, ndim: int) -> tuple[int, ...]:
    """``None`` (all), an int or a sequence of ints as sorted non-negative axes."""
    if ax is None:
        return tuple(range(ndim))
    if isinstance(ax, tuple | list):
        return tuple(sorted(axis(operation, a, ndim) for a in ax))
    return (axis(operation, ax, ndim),)


def promote(*args: Any) -> list[Any]:
    """JAX's ``promote_args_inexact`` for derived formulas: every argument is brought to the
    common inexact dtype of the array arguments (Python scalars are weakly typed and do not
    take part; float64 when there are no arrays).  Python scalars and numpy arrays become
    numpy arrays of that dtype; a handle of another dtype goes through ``astype`` (whose
    VJP casts the cotangent back, as JAX's ``convert_element_type`` does)."""
    arrays = [a for a in args if not isinstance(a, int | float | bool)]
    dts = [dtype_of(a) for a in arrays]
    dt = np.result_type(*dts) if dts else np.dtype(np.float64)
    if dt.kind not in "fc":
        dt = np.dtype(np.float64)
    out: list[Any] = []
    for a in args:
        if isinstance(a, int | float | bool):
            out.append(np.asarray(a, dtype=dt))
        elif isinstance(a, EagerTensor):
            if dtype_of(a) != dt:
                from .elementwise import astype

                a = astype(a, dt)
            out.append(a)
        elif isinstance(a, np.ndarray | np.generic | list | tuple):
            out.append(np.asarray(a, dtype=dt))
        else:
            out.append(a)
    return out


def weak(*args: Any) -> list[Any]:
    """JAX-style weak scalars for binary primitives: a Python scalar argument becomes a
    numpy scalar of the floating dtype of the array arguments (no allocation, it stays a
    parameter), so rules that apply ``log``/``exp`` to it do not promote float32 to
    float64.  Arrays and handles pass through. O(1)."""
    arrays = [a for a in args if not isinstance(a, int | float | complex)]
    if not arrays or len(arrays) == len(args):
        return list(args)
    dt = np.result_type(*[dtype_of(a) for a in arrays])
    if dt.kind not in "fc":
        return list(args)
    if dt.kind == "c":
        return [dt.type(a) if isinstance(a, int | float | complex) else a for a in args]
    return [dt.type(a) if isinstance(a, int | float) else a for a in args]


_FOREIGN = (TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError,
            ZeroDivisionError)


def guarded(
    op: str, fn: Callable[..., Any], passthrough: tuple[type[BaseException], ...] = ()
) -> Callable[..., Any]:
    """``fn`` with its argument errors made the package's: an exception from a layer below
    (numpy, scipy, the storage kernel) that does not say which operation failed is raised
    again as :class:`~tenferro_ad.errors.ArgumentTypeError` (a ``TypeError``) or
    :class:`~tenferro_ad.errors.ArgumentError` (a ``ValueError``) whose message starts with
    ``op``; the original is the ``__cause__``.  Errors already naming the op pass through.
    Ops record nothing before they fail, so nothing changes.  ``passthrough`` classes are
    re-raised unchanged.  Cost: one call frame."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except passthrough:
            raise
        except TenferroError as e:
            msg = str(e)
            if op in msg.split(":", 1)[0]:
                raise
            try:  # the same class, named: e.g. UseAfterMoveError("exp2: read_array: ...")
                again: Exception = type(e)(f"{op}: {msg}")
            except Exception:
                if not isinstance(e, TypeError | ValueError):
                    raise e from None
                again = (ArgumentTypeError if isinstance(e, TypeError) else ArgumentError)(
                    f"{op}: {msg}"
                )
            raise again from e
        except _FOREIGN as e:
            msg = str(e)
            text = msg if msg.startswith(f"{op}:") else f"{op}: {msg}"
            if isinstance(e, TypeError | AttributeError):
                raise ArgumentTypeError(text) from e
            raise ArgumentError(text) from e

    return wrapped


def guard_module(namespace: dict[str, Any], names: Any) -> None:
    """Replace each public function ``names`` of a module namespace by :func:`guarded`."""
    for n in names:
        f = namespace.get(n)
        if inspect.isfunction(f) and not hasattr(f, "__wrapped__"):
            namespace[n] = guarded(n, f)
