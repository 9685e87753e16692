"""Small helpers shared by the op families added for numpy coverage (math, scan, manip,
products, fft): shapes and dtypes of any argument, and axis normalization with numpy's
semantics raising :class:`~tenferro_ad.errors.AxisError`.  All O(ndim), no allocation."""

from __future__ import annotations

import functools
import inspect
import operator
import os
import re
import sys
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
from numpy.exceptions import AxisError as _NumpyAxisError

from tenferro_storage import Tensor, TensorView, TensorViewMut
from tenferro_storage._dtypes import STORED_NUMPY
from tenferro_storage.errors import TenferroError, UseAfterMoveError, shown

from .._core._dispatch import bind1, bind2
from .._core._handle import EagerTensor
from ..errors import ArgumentError, ArgumentTypeError, AxisError, UnsupportedDTypeError
from ._axes import KERNEL_ERRORS, _name_broadcast_operands, arg_error, dtype_error


def shape_of(x: Any) -> tuple[int, ...]:
    """The shape of a handle, owner, numpy array or scalar (metadata only).  Anything
    else (an arbitrary object, a string) is refused here as the op's value check would
    refuse it, so an axis is never checked against the rank-0 shape numpy gives it."""
    if isinstance(x, EagerTensor):
        return tuple(x._r("shape").a.shape)
    s = getattr(x, "shape", None)
    if s is not None:
        return tuple(s)
    if not isinstance(x, int | float | complex | np.generic | list | tuple):
        _refuse_in_caller(x)
    return tuple(np.shape(x))


def _refuse_in_caller(x: Any) -> None:
    """Raise the value check's error for ``x``, named for the public op that asked (the
    first caller frame inside tenferro_ad whose function is public) and its first
    parameter.  Only on the error path, so the frame walk costs nothing otherwise."""
    frame = sys._getframe(2)
    while frame.f_back is not None and (
        frame.f_code.co_name.startswith("_") and frame.f_code.co_filename.startswith(_PACKAGE)
    ):
        frame = frame.f_back
    code = frame.f_code
    name = code.co_varnames[0] if code.co_argcount or code.co_flags & inspect.CO_VARARGS else "x"
    value_arg(code.co_name, name, x)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def dtype_of(x: Any) -> np.dtype[Any]:
    """The numpy dtype of a handle, owner, numpy array or scalar."""
    if isinstance(x, EagerTensor):
        dt: np.dtype[Any] = x._r("dtype").a.dtype
        return dt
    d = getattr(x, "dtype", None)
    if d is not None and hasattr(d, "numpy"):
        nd: np.dtype[Any] = np.dtype(d.numpy)
        return nd
    if isinstance(d, np.dtype):  # a numpy or JAX array
        return d
    if not isinstance(x, int | float | complex | np.generic | list | tuple):
        _refuse_in_caller(x)
    return np.result_type(x)


def value_arg(
    op: str, name: str | int, x: Any, item: int | None = None, *, imported: bool = False
) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """The shape and dtype of the value argument ``name`` of ``op``, checked before the op
    does any work: a live handle, a Tensor owner or view, a numpy array, a traced value, a
    Python or numpy number, or a list/tuple numpy turns into a numeric array.  Anything else
    raises an error naming ``op`` and the argument (``"dot: argument 'b' must be an array
    or a number, got NoneType"``): a consumed handle or owner
    (:class:`~tenferro_storage.errors.UseAfterMoveError`), a non-numeric dtype (a string,
    object or datetime array or list: :class:`~tenferro_ad.errors.UnsupportedDTypeError`)
    or another type (:class:`~tenferro_ad.errors.ArgumentTypeError`), a ragged list
    (:class:`~tenferro_ad.errors.ArgumentError`).  O(1) metadata reads for arrays and
    handles; a list or tuple is converted once by numpy (O(size), a temporary).  ``name``
    is the parameter (an int: the argument's 0-based position, for ``*args`` items);
    ``item`` an index into a sequence parameter (``argument 'operands'[1]``).
    ``imported=True``: a numpy array or list the op will import must also have a dtype
    tenferro stores (an :class:`~tenferro_ad.errors.UnsupportedDTypeError` for ``uint8``,
    ``float16``...); numpy scalars stay parameters and are not checked."""
    t = type(x)  # the common kinds first, in O(1); the checks below run for the others
    if t is EagerTensor:
        rec = x._rec
        if rec is not None:
            a = rec.a
            return tuple(a.shape), a.dtype
    elif t is np.ndarray:
        dt0: np.dtype[Any] = x.dtype
        if dt0.kind in "biufc" and (not imported or dt0 in _STORED_DTYPES):
            return x.shape, dt0
    elif t is float or t is complex or t is bool:
        return (), _PY_DTYPES[t]
    elif t is int and -(2**63) <= x < 2**63:
        return (), _I64
    elif t in _OWNERS:
        try:
            return tuple(x.shape), x.dtype.numpy
        except TenferroError:  # consumed: the checks below name it
            pass
    return _checked_value(op, _label(name, item), x, imported)


def _label(name: str | int, item: int | None) -> str:
    """``argument 'xs'[1]``, ``argument 'b'`` or (a position) ``argument 2``."""
    if isinstance(name, int):
        return f"argument {name}"
    return f"argument {name!r}" + ("" if item is None else f"[{item}]")


_OWNERS: frozenset[type] = frozenset({Tensor, TensorView, TensorViewMut})
_I64: np.dtype[Any] = np.dtype(np.int64)
_PY_DTYPES: dict[type, np.dtype[Any]] = {
    float: np.dtype(np.float64), complex: np.dtype(np.complex128), bool: np.dtype(np.bool_),
}


def _checked_value(
    op: str, label: str, x: Any, imported: bool
) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """:func:`value_arg` for any kind of ``x``: its shape and dtype, or the error naming
    ``label``."""
    if isinstance(x, EagerTensor):
        rec = x._rec
        if rec is None:
            raise UseAfterMoveError(
                f"{op}: {label}: this EagerTensor was consumed by into_value(); use "
                "the owner it returned"
            )
        return tuple(rec.a.shape), rec.a.dtype
    if isinstance(x, bool | int | float | complex | np.generic):
        if isinstance(x, int) and not isinstance(x, bool) and not -(2**63) <= x < 2**64:
            raise ArgumentError(f"{op}: {label}: the int {x} does not fit in 64 bits")
        dt: np.dtype[Any] = np.result_type(x)
        if dt.kind not in "biufc":
            raise UnsupportedDTypeError(op, label, dt)
        return (), dt
    if isinstance(x, list | tuple):
        try:
            arr = np.asarray(x)
        except TenferroError:  # an owner or handle inside: no implicit copy
            inner = next((type(v).__name__ for v in x if hasattr(type(v), "_r")
                          or type(v).__module__.startswith("tenferro")), "non-numeric")
            raise ArgumentTypeError(
                f"{op}: {label} is a {type(x).__name__} holding a {inner} item, which "
                "numpy cannot read without a copy; pass one value (stack the items first)"
            ) from None
        except (ValueError, TypeError, OverflowError) as e:
            raise ArgumentError(
                f"{op}: {label} is a {type(x).__name__} numpy cannot turn into an "
                f"array: {e}"
            ) from None
        if arr.dtype.kind not in "biufc":
            raise UnsupportedDTypeError(op, label, arr.dtype)
        if imported:
            _stored(op, label, arr.dtype)
        return tuple(arr.shape), arr.dtype
    if isinstance(x, type):
        raise ArgumentTypeError(
            f"{op}: {label} must be an array, a handle, a Tensor owner or view, or a "
            f"number, got the type {x.__name__}"
        )
    if not hasattr(type(x), "shape") or not hasattr(type(x), "dtype"):
        raise ArgumentTypeError(
            f"{op}: {label} must be an array, a handle, a Tensor owner or view, or a "
            f"number, got {type(x).__name__}"
        )
    try:  # owners, views, numpy arrays, traced values
        shape, dt = tuple(x.shape), dtype_of(x)
    except TenferroError as e:  # "shape: this Tensor was consumed ..."
        msg = str(e)
        rest = msg.partition(": ")[2] if msg.split(":", 1)[0] in ("shape", "dtype") else msg
        try:
            again: Exception = type(e)(f"{op}: {label}: {rest}")
        except Exception:
            again = ArgumentTypeError(f"{op}: {label}: {rest}")
        try:
            raise again from None
        finally:  # the error's traceback holds this frame: no cycle through this local,
            del again  # so what the caller imported is released when the error is
    if dt.kind not in "biufc":
        raise UnsupportedDTypeError(op, label, dt)
    if imported and (type(x) is np.ndarray or (
        hasattr(type(x), "__dlpack__") and not isinstance(x, _STORED_VALUES)
    )):
        _stored(op, label, dt)  # an import: numpy or a DLPack producer (JAX, torch)
    return shape, dt


_STORED_VALUES = (Tensor, TensorView, TensorViewMut)


def _stored(op: str, label: str, dt: np.dtype[Any]) -> None:
    if dt not in _STORED_DTYPES:
        raise UnsupportedDTypeError(op, label, dt)


_STORED_DTYPES = STORED_NUMPY


def dtype_arg(op: str, dtype: Any) -> np.dtype[Any]:
    """A ``dtype=`` argument (a name, a numpy or Python type, a numpy dtype or a
    ``tenferro`` DType) as a numpy dtype, checked before anything runs.  A value (an owner,
    a view, a handle, an array) is not a dtype, although numpy's ``np.dtype()`` would read
    its ``.dtype`` (and a consumed owner would fail inside that read):
    :class:`~tenferro_ad.errors.ArgumentTypeError` naming ``op`` and ``'dtype'``. O(1)."""
    if isinstance(dtype, str | type | np.dtype) or hasattr(type(dtype), "numpy"):
        try:
            dt: np.dtype[Any] = np.dtype(getattr(dtype, "numpy", dtype))
            return dt
        except (TypeError, ValueError):
            pass
    what = repr(dtype) if isinstance(dtype, str | type) else f"is a {type(dtype).__name__}, which"
    raise ArgumentTypeError(
        f"{op}: argument 'dtype' {what} is not a dtype (pass np.float32, 'float64', ...)"
    )


def stored_value_arg(
    op: str, name: str, x: Any, item: int | None = None
) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """:func:`value_arg`, and the value's dtype must be one tenferro stores (``bool``,
    ``int32``, ``int64``, ``float32``, ``float64``, ``complex64``, ``complex128``): a numpy
    ``uint8`` or ``float16`` argument an op would import is refused up front with a
    :class:`~tenferro_ad.errors.UnsupportedDTypeError` naming ``op`` and the argument (item
    ``item`` of a sequence parameter), instead of by the import deep inside.  Same cost as
    :func:`value_arg` (O(1) for arrays)."""
    shape, dt = value_arg(op, name, x, item)
    if dt not in _STORED_DTYPES:
        _stored(op, _label(name, item), dt)
    return shape, dt


def integer(operation: str, v: Any, what: str) -> int:
    """``v`` as an int the way numpy reads an axis or a length (``operator.index``: a numpy
    integer too); a bool, float, string... is ``ArgumentTypeError`` naming ``operation``
    and ``what``. O(1)."""
    if isinstance(v, bool | np.bool_):
        raise ArgumentTypeError(f"{operation}: argument {what!r} must be an int, got {v!r}")
    try:
        return operator.index(v)
    except TypeError:
        raise ArgumentTypeError(
            f"{operation}: argument {what!r} must be an int, got {shown(v)}"
        ) from None


def axis(operation: str, ax: Any, ndim: int, what: str = "axis") -> int:
    """One axis in ``[-ndim, ndim)`` as a non-negative int; ``AxisError`` otherwise."""
    a = integer(operation, ax, what)
    if not -ndim <= a < ndim:
        raise AxisError(operation, a, ndim, what)
    return a + ndim if a < 0 else a


def axes(operation: str, ax: Any, ndim: int) -> tuple[int, ...]:
    """``None`` (all), an int or a sequence of ints as sorted non-negative axes; a repeated
    axis is refused (``ArgumentError``)."""
    if ax is None:
        return tuple(range(ndim))
    if isinstance(ax, tuple | list):
        out = tuple(sorted(axis(operation, a, ndim) for a in ax))
        if len(set(out)) != len(out):
            raise ArgumentError(f"{operation}: argument 'axis' {tuple(ax)!r} repeats an axis")
        return out
    return (axis(operation, ax, ndim),)


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


_SIMPLE: dict[str, Callable[[Any], bool]] = {
    "int": lambda v: isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_),
    "bool": lambda v: isinstance(v, bool | np.bool_),
    "float": lambda v: isinstance(v, int | float | np.integer | np.floating),
    "str": lambda v: isinstance(v, str),
    "None": lambda v: v is None,
    "tuple[int, int]": lambda v: isinstance(v, tuple | list) and all(_SIMPLE["int"](a) for a in v),
}
_NAMES_AN_ARGUMENT = re.compile(r"\barguments? (?:'\w+'|\d)|(?:^|: )\w+=")


_INNER_OP = re.compile(r"(?:[A-Za-z_][\w.]*: )+")


def _names_its_argument(rest: str) -> bool:
    """Whether a message (after ``"op: "``) names an argument of the op itself: an
    ``"argument i"`` behind another op's prefix (``"neg: argument 0: ..."``) is that inner
    op's, not the caller's."""
    return _INNER_OP.match(rest) is None and _NAMES_AN_ARGUMENT.search(rest) is not None


def _fits(value: Any, annotation: Any) -> bool | None:
    """Whether ``value`` fits a simple annotation (``int``, ``bool``, ``float``, ``str``,
    ``None`` and unions of them); ``None`` when the annotation is not one of those."""
    if not isinstance(annotation, str):
        return None
    checks = [_SIMPLE.get(part.strip()) for part in annotation.split("|")]
    if not checks or any(c is None for c in checks):
        return None
    return any(c(value) for c in checks if c is not None)


def culprit(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], type_error: bool = False
) -> str | None:
    """The parameter of ``fn`` a failed call most likely failed on: the one consumed owner
    passed; else the one argument whose value does not fit its simple annotation; else —
    when every annotated argument fits — the one argument passed whose annotation says
    nothing (``Any``); else — for a ``type_error`` only — the one such argument that is not
    an array, owner or handle when the others are.  ``None`` when that does not single one
    out.  Runs only after a call failed; O(number of parameters)."""
    try:
        sig = inspect.signature(fn)
        bound = sig.bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None
    consumed = [n for n, v in bound.arguments.items() if getattr(v, "_moved_by", None)]
    if len(consumed) == 1:  # a consumed owner fails wherever it is first read
        return consumed[0]
    misfit: list[str] = []
    unknown: list[str] = []
    for name, value in bound.arguments.items():
        fits = _fits(value, sig.parameters[name].annotation)
        if fits is None:
            unknown.append(name)
        elif not fits:
            misfit.append(name)
    if len(misfit) == 1:
        return misfit[0]
    if not misfit and len(unknown) == 1:
        return unknown[0]
    if not misfit and type_error:  # values next to one non-value of the wrong type
        others = [n for n in unknown if not _is_value(bound.arguments[n])]
        if len(others) == 1 and len(unknown) > 1:
            return others[0]
    return None


def _is_value(v: Any) -> bool:
    return isinstance(v, EagerTensor | np.ndarray | Tensor | TensorView | TensorViewMut)


def _with_argument(
    op: str, msg: str, fn: Callable[..., Any], args: Any, kwargs: Any, type_error: bool = False
) -> str:
    """``msg`` starting ``"op: "``, with ``"argument '<name>': "`` inserted after the op when
    the message names no argument and :func:`culprit` finds the one it failed on."""
    rest = msg[len(op) + 1 :].lstrip() if msg.startswith(f"{op}:") else msg
    if _names_its_argument(rest):
        return f"{op}: {rest}"
    name = culprit(fn, args, kwargs, type_error)
    return f"{op}: {rest}" if name is None else f"{op}: argument {name!r}: {rest}"


_F = TypeVar("_F", bound=Callable[..., Any])


def op(
    name: str,
    *,
    explain: Callable[[str, dict[str, Any]], None] | None = None,
    locate: bool = False,
    passthrough: tuple[type[BaseException], ...] = (),
) -> Callable[[_F], _F]:
    """Decorator: the one way an op function is named in the errors escaping it.

    ``@op("sum")`` makes ``fn``'s escaping numpy errors and the project's errors from the
    layers below the project's, named ``name``, exactly as :func:`~._axes.arg_error` words
    them (``"sum: the arguments do not fit together: ..."``; a consumed owner's read names
    the parameter it was passed as, found from ``fn``'s signature and the call's arguments,
    no frame inspection).  ``explain(name, arguments)`` runs first on the error path with
    the call's bound arguments (defaults applied), to raise a better-worded error (naming
    ``'x'``...) when it can.  A call that does not fit ``fn``'s signature raises Python's
    own ``TypeError`` unchanged.  ``locate=True``: the wording of the numpy-coverage
    families (math, special, scan, manip, products, fft, einsum): the original message after
    ``"name: "``, with ``"argument '<name>': "`` when :func:`culprit` singles the argument
    out, the original as ``__cause__`` (see :func:`guarded`).  ``passthrough`` classes
    escape unchanged.  Ops record nothing before they fail, so a refused call changes
    nothing.  Cost: one call frame; the signature is read only after a failure.  The
    hottest ops (``add``, ``mul``, ``sin``...) are built by :func:`bind_op` instead, which
    has no wrapper frame."""

    def deco(fn: _F) -> _F:
        if locate:
            @functools.wraps(fn)
            def located(*args: Any, **kwargs: Any) -> Any:
                try:
                    return fn(*args, **kwargs)
                except passthrough:
                    raise
                except _LOCATED as e:
                    again = _located_error(name, e, fn, args, kwargs)
                    try:
                        raise again from again.__cause__
                    finally:  # (no cycle through this frame, which the traceback holds)
                        del again

            return cast(_F, located)

        @functools.wraps(fn)
        def named(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except passthrough:
                raise
            except KERNEL_ERRORS as e:
                raise _named_error(name, e, fn, args, kwargs, explain) from None

        return cast(_F, named)

    return deco


def _named_error(
    name: str,
    e: BaseException,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    explain: Callable[[str, dict[str, Any]], None] | None,
) -> BaseException:
    """The error path of :func:`op`: ``e`` itself when the call did not fit ``fn``'s
    signature; else ``explain``'s error, or :func:`~._axes.arg_error`'s."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return e  # the call itself was malformed: Python's own TypeError
    if explain is not None:
        bound.apply_defaults()
        try:
            explain(name, bound.arguments)
        except KERNEL_ERRORS as better:
            return better
    return arg_error(name, e, fn, args, kwargs)


def bind_op(
    name: str,
    prim: Any,
    nargs: int,
    doc: str,
    module: str,
    *,
    explain: Callable[[str, dict[str, Any]], None] | None = None,
) -> Callable[..., EagerTensor]:
    """The public function ``name(x)`` (``nargs=1``: ``bind1(prim, x)``) or ``name(x, y)``
    (``nargs=2``: ``bind2(prim, x, y)``), its errors named as :func:`op` names them.

    Built here rather than decorated: these ops (``add``, ``mul``, ``sin``, ``exp``...) are
    the per-op overhead of every eager program, and a wrapper frame costs a Python call on
    each of them; a ``try`` costs nothing until something is raised, so the conversion
    lives in this one function's ``except`` instead of a decorator's.  ``module``: the
    building module's ``__name__``; ``explain`` as for :func:`op`.  O(1)."""
    if nargs == 1:
        def unary(x: Any) -> EagerTensor:
            try:
                return bind1(prim, x)
            except KERNEL_ERRORS as e:
                raise _named_error(name, e, unary, (x,), {}, explain) from None

        f: Callable[..., EagerTensor] = unary
    else:
        def binary(x: Any, y: Any) -> EagerTensor:
            try:
                return bind2(prim, x, y)
            except KERNEL_ERRORS as e:
                raise _named_error(name, e, binary, (x, y), {}, explain) from None

        f = binary
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    f.__module__ = module  # the building module's __name__, for help() and pickling
    return f


def _located_error(
    op: str, e: BaseException, fn: Callable[..., Any], args: Any, kwargs: Any
) -> BaseException:
    """The error path of ``@op(name, locate=True)``: the exception to raise (its
    ``__cause__`` set: ``e`` for a new one), ``e`` itself when it already names the op."""
    if isinstance(e, UnsupportedDTypeError):
        return dtype_error(op, e, fn, args, kwargs)
    if isinstance(e, TenferroError):
        msg = _name_broadcast_operands(str(e))
        if msg != str(e) and e.args:
            e.args = (msg, *e.args[1:])
        named = msg.split(":", 1)[0].strip() == op
        rest = msg.split(":", 1)[1].lstrip() if named else msg
        if named and (isinstance(e, _NumpyAxisError) or _names_its_argument(rest)):
            return e
        if isinstance(e, AxisError):  # from an inner op (``std`` -> ``var``): still an axis
            # error (numpy's convention), named for the call the user made
            what = re.match(r"[^:]*: argument '([^']+)'", str(e))
            axis_error = AxisError(op, e.axis, e.ndim or 0, what.group(1) if what else "axis")
            axis_error.__cause__ = e
            return axis_error
        text = _with_argument(op, msg, fn, args, kwargs, isinstance(e, TypeError))
        if named and text == msg:
            return e
        try:  # the same class, named: e.g. UseAfterMoveError("exp2: read_array: ...")
            again: BaseException = type(e)(text)
        except Exception:
            if not isinstance(e, TypeError | ValueError):
                e.__cause__ = None
                return e
            again = (ArgumentTypeError if isinstance(e, TypeError) else ArgumentError)(text)
        again.__cause__ = e
        return again
    text = _with_argument(op, str(e), fn, args, kwargs, isinstance(e, TypeError | AttributeError))
    again = (ArgumentTypeError if isinstance(e, TypeError | AttributeError) else ArgumentError)(
        text
    )
    again.__cause__ = e
    return again


_LOCATED = (TenferroError, *_FOREIGN)


def guarded(
    op_name: str, fn: Callable[..., Any], passthrough: tuple[type[BaseException], ...] = ()
) -> Callable[..., Any]:
    """``fn`` named ``op_name`` by :func:`op` with ``locate=True``: an exception from a
    layer below (numpy, scipy, the storage kernel) that does not say which operation failed
    is raised again as :class:`~tenferro_ad.errors.ArgumentTypeError` (a ``TypeError``) or
    :class:`~tenferro_ad.errors.ArgumentError` (a ``ValueError``) whose message starts with
    the op; the original is the ``__cause__``.  Errors already naming the op pass through.
    A message that names no argument gets ``"argument '<name>': "`` after the op when
    :func:`culprit` singles out the argument the call failed on.  ``passthrough`` classes
    are re-raised unchanged.  Cost: one call frame."""
    return op(op_name, locate=True, passthrough=passthrough)(fn)


def guard_module(namespace: dict[str, Any], names: Any) -> None:
    """Name each public function ``names`` of a module namespace with :func:`op`
    (``locate=True``): one loop over the decorator, so a family's functions need no
    decorator line each."""
    for n in names:
        f = namespace.get(n)
        if inspect.isfunction(f) and not hasattr(f, "__wrapped__"):
            namespace[n] = op(n, locate=True)(f)
