"""Axis normalization shared by every axis-taking op (numpy's ``AxisError`` semantics).

An axis is an ``int`` or a numpy integer (``np.int64(1)`` is accepted; ``bool`` is not), in
``[-ndim, ndim)``; anything else raises :class:`~tenferro_ad.errors.AxisError` (out of range)
or ``ArgumentError`` (repeated) / a ``TypeError`` subclass (not an integer), naming the op
and the argument.  These
helpers run before anything is computed or recorded, so a refused call changes nothing.
All are O(ndim) and allocate nothing.
"""

from __future__ import annotations

import inspect
import operator
import re
from collections.abc import Callable
from typing import Any

import numpy as np

import tenferro_storage as ts
from tenferro_storage._dtypes import STORED_NUMPY as _STORED
from tenferro_storage.errors import (
    ExpiredBorrowError,
    TenferroError,
    UseAfterMoveError,
    shown,
)

from .._core._handle import EagerTensor
from ..errors import ArgumentError, ArgumentTypeError, AxisError, UnsupportedDTypeError


def axis_index(operation: str, axis: Any, ndim: int, what: str = "axis") -> int:
    """One axis as a non-negative int below ``ndim`` (numpy semantics: ``-1`` is the last)."""
    if isinstance(axis, bool | np.bool_):
        raise ArgumentTypeError(
            f"{operation}: argument {what!r} must be an int, got bool {axis!r}"
        )
    if not isinstance(axis, int | np.integer):
        try:
            axis = operator.index(axis)
        except TypeError:
            raise ArgumentTypeError(
                f"{operation}: argument {what!r} must be an int (or a tuple of ints), got "
                f"{shown(axis)}"
            ) from None
    a = int(axis)
    if not -ndim <= a < ndim:
        raise AxisError(operation, a, ndim, what)
    return a + ndim if a < 0 else a


def axes_tuple(operation: str, axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (``None``: all axes; an int; a tuple/list of ints) as sorted, distinct,
    non-negative axes.  A repeated axis raises ``ArgumentError`` (a ``ValueError``, as numpy's
    "duplicate value in 'axis'")."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, tuple | list):
        out = [axis_index(operation, a, ndim) for a in axis]
        if len(set(out)) != len(out):
            raise ArgumentError(f"{operation}: argument 'axis' {tuple(axis)!r} repeats an axis")
        return tuple(sorted(out))
    return (axis_index(operation, axis, ndim),)


def permutation(operation: str, axes: Any, ndim: int) -> tuple[int, ...]:
    """A full permutation of ``range(ndim)`` (negative entries allowed), or an error naming
    the op: wrong length -> ``ArgumentError``; out of range or repeated -> ``AxisError``."""
    items = tuple(axes)
    if len(items) != ndim:
        raise ArgumentError(
            f"{operation}: argument 'axes' {items!r} does not match the value's rank {ndim} "
            f"(give a permutation of all {ndim} axes)"
        )
    out = tuple(axis_index(operation, a, ndim, "axes") for a in items)
    if len(set(out)) != ndim:
        raise ArgumentError(f"{operation}: argument 'axes' {items!r} repeats an axis")
    return out


KERNEL_ERRORS = (ValueError, TypeError, IndexError, TenferroError)
"""What numpy (and Python) raise for values a kernel cannot take, and the project's own
errors from the layers below; the public op functions turn the former into the project's
errors and prefix the latter with the op's name (:func:`arg_error`)."""


_BROADCAST = re.compile(r"operands could not be broadcast together with shapes ((?:\([^)]*\) ?)+)")


_GUFUNC_OPERAND = re.compile(r"\bInput operand (\d+)")


def _name_broadcast_operands(msg: str) -> str:
    """numpy's "operands could not be broadcast together with shapes (2,) (2, 3)" names the
    operands by their order: say so, as ``arguments 0 and 1`` (and numpy's gufunc
    "Input operand 1" as ``argument 1``).  O(len(msg))."""
    if "argument" in msg:
        return msg
    msg = _GUFUNC_OPERAND.sub(r"argument \1", msg)  # matmul's "Input operand 1 has ..."
    m = _BROADCAST.search(msg)
    if m is None:
        return msg
    n = m.group(1).count("(")
    which = ", ".join(str(i) for i in range(n - 1)) + f" and {n - 1}" if n > 1 else "0"
    return f"{msg[: m.start()]}arguments {which}: {msg[m.start():]}"


def _bound(
    fn: Callable[..., Any] | None, args: tuple[Any, ...], kwargs: dict[str, Any] | None
) -> list[tuple[str, Any, Any]]:
    """``(parameter name, value, parameter kind)`` of the call ``fn(*args, **kwargs)`` in
    signature order; empty when ``fn`` is unknown or the call does not fit it.  Error path
    only; O(parameters)."""
    if fn is None:
        return []
    try:
        sig = inspect.signature(fn)
        bound = sig.bind(*args, **(kwargs or {}))
    except (TypeError, ValueError):
        return []
    return [(k, v, sig.parameters[k].kind) for k, v in bound.arguments.items()]


def consumed_parameter(
    fn: Callable[..., Any] | None, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None
) -> str | None:
    """The name of the first parameter of ``fn`` (the op that failed) bound to a consumed
    owner in the call ``fn(*args, **kwargs)``: the inner read that found it (``x.shape``)
    cannot know which argument it was.  Read from ``fn``'s signature and the call's own
    arguments (no frame inspection); ``*args``/``**kwargs`` parameters are not searched.
    Runs only on the error path; O(number of parameters)."""
    for name, value, kind in _bound(fn, args, kwargs):
        if kind is inspect.Parameter.VAR_POSITIONAL or kind is inspect.Parameter.VAR_KEYWORD:
            continue
        if getattr(value, "_moved_by", None) is not None or (
            isinstance(value, ts.TensorView | ts.TensorViewMut) and value._lender is None
        ) or (type(value) is EagerTensor and value._rec is None):  # consumed, or released
            return name
    return None


def _refused_dtype(value: Any) -> Any:
    """The dtype of a value an op would refuse for it (a numpy array or numpy scalar of a
    dtype tenferro does not store, a list numpy makes one of), else ``None``.  A numeric
    numpy scalar is a parameter and never refused.  Error path only."""
    if isinstance(value, np.ndarray):
        return None if value.dtype in _STORED else value.dtype
    if isinstance(value, np.generic):
        return None if value.dtype.kind in "biufc" else value.dtype
    if isinstance(value, str | bytes):  # a scalar numpy would import as a string array
        return np.asarray(value).dtype
    if isinstance(value, list | tuple) and value and not any(
        isinstance(v, list | tuple | np.ndarray) or hasattr(type(v), "_r") for v in value
    ):
        try:
            dt = np.asarray(value).dtype
        except Exception:
            return None
        return None if dt in _STORED or (dt.kind in "biufc" and dt.kind != "u") else dt
    return None


def dtype_parameter(
    fn: Callable[..., Any] | None, args: tuple[Any, ...], kwargs: dict[str, Any] | None,
    dtype: Any,
) -> str | None:
    """The argument of ``fn`` an :class:`UnsupportedDTypeError` of ``dtype`` raised below it
    was about, as its message names it (``"argument 'x'"``, ``"argument 'xs'[1]"``): the
    first parameter bound to a value of that refused dtype, or to a list or tuple holding
    one.  ``None`` when none is.  Error path only; O(parameters + items)."""
    for name, value, kind in _bound(fn, args, kwargs):
        if kind is inspect.Parameter.VAR_POSITIONAL:
            items = enumerate(value)
        elif kind is inspect.Parameter.VAR_KEYWORD:
            continue
        elif _refused_dtype(value) == dtype:
            return f"argument {name!r}"
        elif isinstance(value, list | tuple):
            items = enumerate(value)
        else:
            continue
        for i, v in items:
            if _refused_dtype(v) == dtype:
                where = f"{name}" if kind is not inspect.Parameter.VAR_POSITIONAL else ""
                return f"argument {where!r}[{i}]" if where else f"argument {i}"
    return None


def dtype_error(
    operation: str, e: UnsupportedDTypeError, fn: Callable[..., Any] | None,
    args: tuple[Any, ...], kwargs: dict[str, Any] | None,
) -> UnsupportedDTypeError:
    """``e`` named for the public op ``operation`` and the parameter of ``fn`` its value was
    passed as (found by :func:`dtype_parameter`); ``e`` itself when it already names
    ``operation`` and a parameter.  Error path only."""
    if e.operation == operation and not re.fullmatch(r"argument \d+|an argument", e.argument):
        return e
    named = dtype_parameter(fn, args, kwargs, e.dtype)
    if named is None:
        if e.operation == operation:
            return e
        named = e.argument
    again = UnsupportedDTypeError(operation, named, e.dtype)
    again.__cause__ = e.__cause__
    return again


def arg_error(
    operation: str,
    e: BaseException,
    fn: Callable[..., Any] | None = None,
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
) -> BaseException:
    """The project error to raise for ``e`` escaping ``operation``: a project error as it is
    (its message prefixed with ``operation`` when it came from a layer below; a consumed
    owner's read names the parameter of ``fn`` the call ``fn(*args, **kwargs)`` bound it
    to, see :func:`consumed_parameter`); numpy's ``ValueError``/``IndexError`` as
    ``ArgumentError`` and ``TypeError`` as ``ArgumentTypeError``, both naming the op and
    keeping numpy's words.  Ops are named by :func:`~._util.op`, which calls this on the
    error path only.  O(1) (O(parameters) for a consumed owner)."""
    if isinstance(e, UnsupportedDTypeError):
        return dtype_error(operation, e, fn, args, kwargs)
    if isinstance(e, TenferroError):
        # an error from a layer below (importing an argument, reading a consumed owner)
        # gets the op's name in front, so the message says which call failed
        msg = e.args[0] if e.args else None
        if isinstance(msg, str):
            msg = _name_broadcast_operands(msg)
            rest = msg.removeprefix(f"{operation}: ")
            # "shape: this Tensor was consumed ..." from a metadata read, or "argument 0:
            # this Tensor ..." from the dispatcher, which knows positions, not names
            positional = re.match(r"argument \d+: ", rest)
            consumed = (
                consumed_parameter(fn, args, kwargs)
                if isinstance(e, UseAfterMoveError | ExpiredBorrowError)
                and (positional or not rest.startswith("argument"))
                else None
            )
            if consumed is not None:
                tail = rest[positional.end():] if positional else rest.partition(": ")[2]
                msg = f"{operation}: argument {consumed!r}: {tail}"
            elif not msg.startswith(f"{operation}:"):
                msg = f"{operation}: {msg}"
            e.args = (msg, *e.args[1:])
        return e
    if isinstance(e, TypeError):
        return ArgumentTypeError(f"{operation}: an argument has a type it cannot take: {e}")
    return ArgumentError(f"{operation}: the arguments do not fit together: {e}")
