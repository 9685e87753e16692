"""numpy calls on handles run tenferro_ad's ops (NEP 13 / NEP 18 dispatch).

Installed on :class:`~tenferro_ad.EagerTensor` at import, and registered with
``tenferro_storage`` (``kernel.register_numpy``) for its owners and views, so every tenferro
value (owner, view, handle) runs the same functions and gives the same refusals:

* ``__array_ufunc__``: ``np.sin(h)``, ``ndarray + h``, ``np.add.reduce(h)``,
  ``np.add.accumulate(h)`` ... run the matching recorded op.  Argument order is kept
  (``ndarray - h`` is ``sub(ndarray, h)``; the array is imported with a recorded
  ``TRANSFER``).
* ``__array_function__``: ``np.sum(h)``, ``np.concatenate([h, x])``, ``np.linalg.norm(h)``,
  ``np.fft.fft(h)`` ... run ours (numpy's keyword names are accepted).
* ndarray-style methods (``h.ravel()``, ``h.cumsum()``, ``h.var()``, ``h.real``...) and the
  ``%``, ``//`` operators (reflected too).

A numpy function or ufunc without a tenferro_ad implementation raises
:class:`NumpyFunctionError` (a ``TypeError``) naming it; so do ``out=`` (ops return new
values) and a ``dtype=``/``where=`` this dispatch does not honour.  Dispatch costs one
dict lookup per call.  ``float(h)``, ``int(h)`` and ``np.float64(h)`` read the single
element (host reads, no tracking, like ``item()``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

import tenferro_storage as ts

from . import linalg as _ad_linalg
from ._core._handle import EagerTensor
from ._numpy_keywords import argsort_call, ravel_call, with_initial
from ._numpy_keywords import initial_arg as _initial_arg
from ._numpy_keywords import no_out as _no_out
from ._numpy_keywords import with_dtype as _with_dtype
from .errors import NumpyFunctionError
from .ops import complex as cx
from .ops import elementwise as ew
from .ops import fft as F
from .ops import manip as mp
from .ops import math as m
from .ops import products as pr
from .ops import reduce as rd
from .ops import scan as sc
from .ops import shape as sh
from .ops._util import dtype_arg
from .ops.einsum import einsum, tensordot
from .ops.linalg import matmul
from .ops.norm import norm

__all__ = ["HANDLED_FUNCTIONS", "HANDLED_UFUNCS", "NumpyFunctionError", "install"]


HANDLED_UFUNCS: dict[Any, Callable[..., Any]] = {}
HANDLED_FUNCTIONS: dict[Any, Callable[..., Any]] = {}


def _fname(f: Any) -> str:
    mod = getattr(f, "__module__", "numpy") or "numpy"
    mod = mod.replace("numpy._core.fromnumeric", "numpy").replace("numpy._core", "numpy")
    name = getattr(f, "__name__", repr(f))
    if mod.startswith("numpy.lib") or mod.startswith("numpy._"):
        mod = "numpy"
    return f"{mod}.{name}"


def _array_ufunc(self: Any, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    if method == "__call__":
        impl = HANDLED_UFUNCS.get(ufunc)
        if impl is not None and not kwargs:  # the common case: one dict lookup
            return impl(*inputs)
    name = f"numpy.{ufunc.__name__}"
    if method == "__call__":
        if impl is None:
            raise NumpyFunctionError(
                f"{name}: this ufunc has no tenferro_ad implementation for tenferro values "
                "(see tenferro_ad's ops, or call .to_numpy() for a recorded copy)"
            )
        if kwargs:
            kw = _no_out(name, kwargs)
            if kw.pop("dtype", None) is not None:
                raise NumpyFunctionError(f"{name}: argument 'dtype' is not supported")
            if kw:
                raise NumpyFunctionError(f"{name}: argument {next(iter(kw))!r} is not supported")
        return impl(*inputs)
    if method in ("reduce", "accumulate"):

        table: dict[Any, Callable[..., Any]] = (
            {np.add: rd.sum, np.multiply: rd.prod, np.maximum: rd.max, np.minimum: rd.min}
            if method == "reduce" else {np.add: sc.cumsum, np.multiply: sc.cumprod}
        )
        impl = table.get(ufunc)
        if impl is None or len(inputs) != 1:
            raise NumpyFunctionError(f"{name}.{method}: not supported for tenferro values")
        kw = _no_out(f"{name}.{method}", kwargs)
        axis = kw.pop("axis", 0)
        if method == "reduce":
            keepdims = kw.pop("keepdims", False)
            kw.pop("initial", None) if kw.get("initial", None) is None else None
            if kw:
                raise NumpyFunctionError(
                    f"{name}.{method}: argument {next(iter(kw))!r} is not supported"
                )
            return impl(inputs[0], axis=axis, keepdims=keepdims)
        if kw:
            raise NumpyFunctionError(
                f"{name}.{method}: argument {next(iter(kw))!r} is not supported"
            )
        return impl(inputs[0], axis=axis)
    raise NumpyFunctionError(f"{name}.{method}: not supported for tenferro values")


def _array_function(self: Any, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
    impl = HANDLED_FUNCTIONS.get(func)
    name = _fname(func) if impl is None or kwargs else ""
    if impl is None:
        raise NumpyFunctionError(
            f"{name}: this numpy function has no tenferro_ad implementation for tenferro "
            "values (see tenferro_ad's ops, or call .to_numpy() for a recorded copy)"
        )
    return impl(*args, **_no_out(name, kwargs)) if kwargs else impl(*args)


def _fill_tables() -> None:
    HANDLED_UFUNCS.update({
        np.add: ew.add, np.subtract: ew.sub, np.multiply: ew.mul, np.true_divide: ew.div,
        np.negative: ew.neg, np.positive: lambda x: x, np.power: ew.pow,
        np.float_power: ew.pow, np.exp: ew.exp, np.exp2: m.exp2, np.expm1: ew.expm1,
        np.log: ew.log, np.log2: m.log2, np.log10: m.log10, np.log1p: ew.log1p,
        np.sin: ew.sin, np.cos: ew.cos, np.tan: m.tan, np.arcsin: m.arcsin,
        np.arccos: m.arccos, np.arctan: m.arctan, np.sinh: m.sinh, np.cosh: m.cosh,
        np.tanh: ew.tanh, np.arcsinh: m.arcsinh, np.arccosh: m.arccosh,
        np.arctanh: m.arctanh, np.arctan2: m.arctan2, np.hypot: m.hypot, np.sqrt: ew.sqrt,
        np.square: m.square, np.reciprocal: m.reciprocal, np.cbrt: m.cbrt,
        np.absolute: ew.abs, np.fabs: ew.abs, np.sign: ew.sign, np.floor: m.floor,
        np.ceil: m.ceil, np.trunc: m.trunc, np.rint: m.rint, np.remainder: m.mod,
        np.fmod: m.fmod, np.floor_divide: lambda x, y: m.floor(ew.div(x, y)),
        np.maximum: ew.maximum, np.minimum: ew.minimum, np.fmax: m.fmax, np.fmin: m.fmin,
        np.logaddexp: m.logaddexp, np.logaddexp2: m.logaddexp2, np.deg2rad: m.deg2rad,
        np.rad2deg: m.rad2deg, np.degrees: m.rad2deg, np.radians: m.deg2rad,
        np.isnan: m.isnan, np.isinf: m.isinf, np.isfinite: m.isfinite,
        np.logical_and: m.logical_and, np.logical_or: m.logical_or,
        np.logical_xor: m.logical_xor, np.logical_not: m.logical_not, np.equal: ew.equal,
        np.not_equal: ew.not_equal, np.less: ew.less, np.less_equal: ew.less_equal,
        np.greater: ew.greater, np.greater_equal: ew.greater_equal, np.matmul: matmul,
        np.conjugate: cx.conj,
    })

    def _clip(a: Any, a_min: Any = None, a_max: Any = None, **kw: Any) -> Any:
        lo = kw.pop("min", a_min)
        hi = kw.pop("max", a_max)
        out = a
        if lo is not None:
            out = ew.maximum(out, lo)
        if hi is not None:
            out = ew.minimum(out, hi)
        return out

    def _where(cond: Any, x: Any = None, y: Any = None) -> Any:
        if x is None and y is None:
            raise NumpyFunctionError("numpy.where: the one-argument form is not supported")
        return ew.where(cond, x, y)

    def _shape(a: Any) -> tuple[int, ...]:
        return tuple(a.shape)

    def _squeeze(a: Any, axis: Any = None) -> Any:
        return mp.squeeze(a, axis)

    def _transpose(a: Any, axes: Any = None) -> Any:
        return sh.transpose(a) if axes is None else sh.transpose(a, tuple(axes))

    def _reshape(a: Any, *args: Any, **kw: Any) -> Any:
        shape = kw.pop("shape", kw.pop("newshape", args[0] if args else None))
        if kw.pop("order", "C") != "C":
            raise NumpyFunctionError("numpy.reshape: only order='C' is supported")
        return sh.reshape(a, tuple(shape) if isinstance(shape, tuple | list) else (shape,))

    def _linalg(name: str) -> Callable[..., Any]:
        def f(*a: Any, **k: Any) -> Any:
            return getattr(_ad_linalg, name)(*a, **k)

        return f

    sum_ = with_initial(_with_dtype(rd.sum), ew.add)
    mean_ = _with_dtype(rd.mean)
    max_, min_ = with_initial(rd.max, ew.maximum), with_initial(rd.min, ew.minimum)
    HANDLED_FUNCTIONS.update({
        np.sum: sum_, np.mean: mean_, np.prod: with_initial(_with_dtype(rd.prod), ew.mul),
        np.max: max_, np.amax: max_, np.min: min_, np.amin: min_, np.var: _with_dtype(sc.var),
        np.std: _with_dtype(sc.std), np.cumsum: _with_dtype(sc.cumsum),
        np.cumprod: _with_dtype(sc.cumprod), np.diff: sc.diff, np.sort: sc.sort,
        np.argsort: lambda a, axis=-1, kind=None, order=None, *, stable=None: argsort_call(
            "numpy.argsort", a, axis, kind, order, stable),
        np.argmax: sc.argmax, np.argmin: sc.argmin, np.partition: sc.partition,
        np.argpartition: sc.argpartition, np.take_along_axis: sc.take_along_axis,
        np.linalg.norm: norm, np.any: sc.any, np.all: sc.all, np.nansum: sc.nansum,
        np.nanmean: sc.nanmean, np.average: sc.average, np.median: sc.median,
        np.reshape: _reshape, np.transpose: _transpose,
        np.swapaxes: sh.swapaxes, np.moveaxis: mp.moveaxis, np.rollaxis: mp.rollaxis,
        np.squeeze: _squeeze, np.expand_dims: sh.expand_dims,
        np.ravel: lambda a, order="C": ravel_call(a, order, "numpy.ravel"),
        np.repeat: mp.repeat, np.tile: mp.tile, np.roll: mp.roll, np.flip: mp.flip,
        np.fliplr: mp.fliplr, np.flipud: mp.flipud, np.rot90: mp.rot90, np.pad: mp.pad,
        np.split: mp.split, np.array_split: mp.array_split, np.vsplit: mp.vsplit,
        np.hsplit: mp.hsplit, np.dsplit: mp.dsplit, np.concatenate: sh.concatenate,
        np.stack: sh.stack, np.vstack: mp.vstack, np.hstack: mp.hstack,
        np.dstack: mp.dstack, np.column_stack: mp.column_stack,
        np.atleast_1d: mp.atleast_1d, np.atleast_2d: mp.atleast_2d,
        np.atleast_3d: mp.atleast_3d, np.append: mp.append, np.diag: mp.diag,
        np.diagflat: mp.diagflat, np.diagonal: mp.diagonal, np.trace: mp.trace,
        np.tril: mp.tril, np.triu: mp.triu, np.zeros_like: mp.zeros_like,
        np.ones_like: mp.ones_like, np.full_like: mp.full_like, np.where: _where,
        np.clip: _clip, np.dot: pr.dot, np.vdot: pr.vdot, np.inner: pr.inner,
        np.outer: pr.outer, np.kron: pr.kron, np.cross: pr.cross, np.tensordot: tensordot,
        np.einsum: lambda *a, optimize="auto", **k: einsum(*a, optimize=optimize),
        np.real: cx.real, np.imag: cx.imag,
        np.conj: cx.conj, np.angle: lambda z, deg=False: cx.angle(z), np.sinc: m.sinc,
        np.nan_to_num: m.nan_to_num, np.select: mp.select, np.broadcast_to: sh.broadcast_to,
        np.round: m.round, np.around: m.round, np.linspace: mp.linspace, np.shape: _shape,
        np.ndim: lambda a: len(a.shape), np.size: lambda a, axis=None: (
            a.size if axis is None else a.shape[axis]
        ),
        np.fft.fft: F.fft, np.fft.ifft: F.ifft, np.fft.fft2: F.fft2, np.fft.ifft2: F.ifft2,
        np.fft.fftn: F.fftn, np.fft.ifftn: F.ifftn, np.fft.rfft: F.rfft,
        np.fft.irfft: F.irfft, np.fft.rfft2: F.rfft2, np.fft.irfft2: F.irfft2,
        np.fft.rfftn: F.rfftn, np.fft.irfftn: F.irfftn, np.fft.fftshift: F.fftshift,
        np.fft.ifftshift: F.ifftshift,
        np.linalg.det: _linalg("det"), np.linalg.inv: _linalg("inv"),
        np.linalg.solve: _linalg("solve"), np.linalg.cholesky: _linalg("cholesky"),
        np.linalg.slogdet: _linalg("slogdet"), np.linalg.eigh: _linalg("eigh"),
        np.linalg.qr: _linalg("qr"),
    })


_F = TypeVar("_F", bound=Callable[..., Any])

# What every method below shares: it runs eager ops (host numpy kernels, never a
# provider) on the handle's record array, recorded on the tape when the handle is tracked
# there; a handle consumed by ``into_value()`` is refused first.
_GONE = "UseAfterMoveError: ``self`` was consumed by ``into_value()``."
_OUT = "TypeError: ``out=`` (a ``NumpyFunctionError``: ops return a new value)."


def _doc(f: _F, text: str) -> _F:
    """``f`` with the docstring ``text`` (the methods are closures made per name)."""
    f.__doc__ = text
    return f


def _methods() -> dict[str, Any]:
    def _squeeze(self: Any, axis: Any = None) -> Any:
        return mp.squeeze(self, axis)

    def _clip(self: Any, lo: Any = None, hi: Any = None, out: Any = None) -> Any:
        _no_out("clip", {"out": out})
        return ew.clip(self, lo, hi)

    def _plain(f: Callable[..., Any], name: str, doc: str) -> Callable[..., Any]:
        def method(self: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
            _no_out(name, {"out": out})
            return f(self, axis, keepdims)

        return _doc(method, doc)

    def _extreme(f: Callable[..., Any], name: str, doc: str) -> Callable[..., Any]:
        combine = ew.maximum if name == "max" else ew.minimum

        def method(self: Any, axis: Any = None, out: Any = None, keepdims: bool = False,
                   initial: Any = None, where: Any = True) -> Any:
            _no_out(name, {"out": out, "where": where})
            if initial is None:
                return f(self, axis, keepdims)
            initial = _initial_arg(name, initial)
            return combine(f(self, axis, keepdims), initial)

        return _doc(method, doc)

    def _trace(self: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
               out: Any = None) -> Any:
        _no_out("trace", {"out": out})
        return _with_dtype(mp.trace)(self, offset, axis1, axis2, dtype=dtype)

    def _dot(self: Any, b: Any, out: Any = None) -> Any:
        _no_out("dot", {"out": out})
        return pr.dot(self, b)

    def _round(self: Any, decimals: int = 0, out: Any = None) -> Any:
        _no_out("round", {"out": out})
        return m.round(self, decimals)

    def _red(f: Callable[..., Any], name: str, doc: str,
             combine: Callable[[Any, Any], Any] | None = None) -> Callable[..., Any]:
        def method(self: Any, axis: Any = None, dtype: Any = None, out: Any = None,
                   keepdims: bool = False, **kw: Any) -> Any:
            initial = None
            if out is not None or kw:
                kw = _no_out(name, {"out": out, **kw})
                initial = kw.pop("initial", None) if combine is not None else None
                initial = None if initial is None else _initial_arg(name, initial)
                if kw:
                    raise NumpyFunctionError(
                        f"{name}: argument {next(iter(kw))!r} is not supported"
                    )
            target = None if dtype is None else dtype_arg(name, dtype)
            r = f(self, axis=axis, keepdims=keepdims)
            if initial is not None:
                r = combine(r, initial)  # type: ignore[misc]
            if target is None:
                return r
            return ew.astype(r, target)

        return _doc(method, doc)

    def _stat(f: Callable[..., Any], name: str, doc: str) -> Callable[..., Any]:
        def method(self: Any, axis: Any = None, dtype: Any = None, out: Any = None,
                   ddof: int = 0, keepdims: bool = False) -> Any:
            _no_out(name, {"out": out})
            return _with_dtype(f)(self, axis=axis, ddof=ddof, keepdims=keepdims, dtype=dtype)

        return _doc(method, doc)

    def _scan(f: Callable[..., Any], name: str, doc: str) -> Callable[..., Any]:
        def method(self: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
            _no_out(name, {"out": out})
            return _with_dtype(f)(self, axis=axis, dtype=dtype)

        return _doc(method, doc)

    def red_doc(what: str, allocs: str) -> str:
        return f"""{what} over ``axis`` (``None``: all), with ndarray's arguments. {allocs};
        ``dtype=`` converts the result (one more allocation).  ``where=``, ``casting=``,
        ``order=``, ``subok=`` are refused unless at numpy's default; ``initial=`` (sum,
        prod) is folded into the result (one more allocation); any other keyword is
        refused.

        Cost: allocates the result; no copy; no sync; no dispatch (a host kernel); O(n);
        tape nodes when ``self`` is tracked.

        Raises:
            {_GONE}
            AxisError: an axis out of range.
            ArgumentTypeError: an ``axis`` or ``dtype`` that is not one.
            TypeError: ``out=`` or a refused keyword (a ``NumpyFunctionError``).
        """

    def plain_doc(what: str, extra: str, errors: str = "") -> str:
        nodes = "" if "nothing" in extra else "; one tape node when ``self`` is tracked"
        return f"""{what} over ``axis`` (``None``: all), like ndarray's.
        {extra}

        Cost: allocates the result; no copy; no sync; no dispatch (a host kernel);
        O(n){nodes}.

        Raises:
            {_GONE}
            AxisError: an axis out of range.{errors}
            ArgumentTypeError: an ``axis`` that is not an int (or a tuple of ints).
            {_OUT}
        """

    def stat_doc(what: str, name: str, axis_error: str) -> str:
        return f"""The {what} over ``axis`` with ``ddof`` (``tenferro_ad.{name}``): a few
        allocations (derived ops); ``dtype=`` converts the result.

        Cost: allocates the result; no copy; no sync; no dispatch (a host kernel); O(n);
        tape nodes when ``self`` is tracked.

        Raises:
            {_GONE}
            {axis_error}
            ArgumentTypeError: an ``axis``, ``ddof`` or ``dtype`` of the wrong type.
            {_OUT}
        """

    def scan_doc(what: str) -> str:
        return f"""Cumulative {what} along ``axis`` (``None``: of the flattened value), like
        ndarray's; ``dtype=`` converts the result (one more allocation).

        Cost: allocates the result; no copy; no sync; no dispatch (a host kernel); O(n);
        one tape node when ``self`` is tracked.

        Raises:
            {_GONE}
            AxisError: an axis out of range.
            ArgumentTypeError: an ``axis`` or ``dtype`` that is not one.
            {_OUT}
        """

    ravel_doc = """The value flattened to 1-D (``tenferro_ad.{0}``) in ``order``: ``"C"``
        (row-major) or ``"F"`` (column-major: the ravel of the reversed axes).

        Cost: allocates unless an alias (a contiguous value in C order is aliased); no copy;
        no sync; no dispatch (a host kernel); O(n), O(1) as an alias; one tape node (two in
        F order) when ``self`` is tracked.

        Raises:
            UseAfterMoveError: ``self`` was consumed by ``into_value()``.
            TypeError: an ``order`` other than ``"C"``/``"F"`` (a ``NumpyFunctionError``).
        """
    conj_doc = """The complex conjugate (``tenferro_ad.conj``); of a real value, the value
        itself as a metadata alias.

        Cost: allocates unless an alias (a real value); no copy; no sync; no dispatch (a
        host kernel); O(n) per-element, O(1) as an alias; one tape node when ``self`` is
        tracked.

        Raises: UseAfterMoveError.
        """
    empty = "\n            ArgumentError: an empty reduced extent (no identity)."
    return {
        "__mod__": lambda self, other: m.mod(self, other),
        "__rmod__": lambda self, other: m.mod(other, self),
        "__floordiv__": lambda self, other: m.floor(ew.div(self, other)),
        "__rfloordiv__": lambda self, other: m.floor(ew.div(other, self)),
        "__pos__": lambda self: self,
        "__round__": lambda self, ndigits=None: m.round(self, 0 if ndigits is None else ndigits),
        "__array_ufunc__": _array_ufunc,
        "__array_function__": _array_function,
        "sum": _red(rd.sum, "sum", red_doc("Sum", "One allocation"), ew.add),
        "mean": _red(rd.mean, "mean", red_doc("Mean", "Two allocations (``sum / n``)")),
        "prod": _red(rd.prod, "prod", red_doc("Product", "One allocation; retains the input"),
                     ew.mul),
        "max": _extreme(rd.max, "max", plain_doc(
            "Maximum", "One allocation; retains the input and the output; ``initial=`` is "
            "folded in (one more).", empty)),
        "min": _extreme(rd.min, "min", plain_doc(
            "Minimum", "One allocation; retains the input and the output; ``initial=`` is "
            "folded in (one more).", empty)),
        "var": _stat(sc.var, "var", stat_doc(
            "variance", "var", "AxisError: an axis out of range.")),
        "std": _stat(sc.std, "std", stat_doc(
            "standard deviation", "std",
            "AxisError: an axis out of range.")),
        "cumsum": _scan(sc.cumsum, "cumsum", scan_doc("sum")),
        "cumprod": _scan(sc.cumprod, "cumprod", scan_doc("product")),
        "any": _plain(sc.any, "any", plain_doc(
            "Whether any entry is true", "A bool (non-differentiable: records nothing).")),
        "all": _plain(sc.all, "all", plain_doc(
            "Whether every entry is true", "A bool (non-differentiable: records nothing).")),
        "argmax": _plain(sc.argmax, "argmax", plain_doc(
            "Index of the first maximum", "int64 (non-differentiable: records nothing).",
            empty)),
        "argmin": _plain(sc.argmin, "argmin", plain_doc(
            "Index of the first minimum", "int64 (non-differentiable: records nothing).",
            empty)),
        "argsort": _doc(
            lambda self, axis=-1, kind=None, order=None, *, stable=None: argsort_call(
                "argsort", self, axis, kind, order, stable),
            """Indices that sort the value stably along ``axis`` (``None``: flattened);
            int64, non-differentiable (records nothing).  Every numpy ``kind`` is accepted
            (a stable order is a valid order of each); ``order`` (structured fields) is
            refused.

            Cost: allocates the result; no copy; no sync; no dispatch (a host kernel);
            O(n log n).

            Raises:
                UseAfterMoveError: ``self`` was consumed by ``into_value()``.
                AxisError: an axis out of range.
                ArgumentTypeError: an ``axis`` that is not an int.
                TypeError: an unknown ``kind``, or an ``order`` (a ``NumpyFunctionError``).
            """),
        "ravel": _doc(lambda self, order="C": ravel_call(self, order, "ravel"),
                      ravel_doc.format("ravel")),
        "flatten": _doc(lambda self, order="C": ravel_call(self, order, "flatten"),
                        ravel_doc.format("flatten")),
        "squeeze": _doc(_squeeze, f"""The value without its length-1 axes (all, or those
            of ``axis``), as a metadata alias.

            Cost: no allocation (an alias); no copy; no sync; no dispatch (a host kernel);
            O(1); one tape node when ``self`` is tracked.

            Raises:
                {_GONE}
                AxisError: an axis out of range.
                ArgumentError: an ``axis`` whose extent is not 1.
                ArgumentTypeError: an ``axis`` that is not an int.
            """),
        "repeat": _doc(
            lambda self, repeats, axis=None: mp.repeat(self, repeats, axis),
            """Each element repeated ``repeats`` times along ``axis`` (``None``: of the
            flattened value), like ndarray's: a gather, one allocation.

            Cost: allocates the result; no copy; no sync; no dispatch (a host kernel);
            O(output size); one tape node when ``self`` is tracked.

            Raises: UseAfterMoveError, AxisError, ArgumentError, ArgumentTypeError.
            """),
        "swapaxes": _doc(
            lambda self, axis1, axis2: sh.swapaxes(self, axis1, axis2),
            """The value with ``axis1`` and ``axis2`` swapped, as a metadata alias.

            Cost: no allocation (an alias); no copy; no sync; no dispatch (a host kernel);
            O(1); one tape node when ``self`` is tracked.

            Raises: UseAfterMoveError, AxisError, ArgumentTypeError.
            """),
        "diagonal": _doc(
            lambda self, offset=0, axis1=0, axis2=1: mp.diagonal(self, offset, axis1, axis2),
            """The ``offset`` diagonal of the ``axis1``/``axis2`` planes, as the last axis
            (like ndarray's): a gather, one allocation.

            Cost: allocates the result; no copy; no sync; no dispatch (a host kernel);
            O(output size); one tape node when ``self`` is tracked.

            Raises: UseAfterMoveError, AxisError, ArgumentError, ArgumentTypeError.
            """),
        "trace": _doc(_trace, f"""The sum of the ``offset`` diagonal of the
            ``axis1``/``axis2`` planes (``tenferro_ad.trace``): a gather and a sum, two
            allocations; ``dtype=`` converts the result (one more).

            Cost: allocates the result; no copy; no sync; no dispatch (a host kernel);
            O(diagonal size); tape nodes when ``self`` is tracked.

            Raises:
                {_GONE}
                AxisError: an axis out of range (also for a value of rank below 2).
                ArgumentTypeError: an argument of the wrong type.
                {_OUT}
            """),
        "clip": _doc(_clip, f"""The value limited to ``[lo, hi]`` (``tenferro_ad.clip``;
            a ``None`` bound is not applied; both ``None``: the value as a fresh alias).
            Bounds are handles, owners (borrowed), numpy arrays or numbers.

            Cost: allocates the result; no copy of tenferro values (a numpy bound is
            imported with one recorded ``TRANSFER``); no sync; no dispatch (a host kernel);
            O(n) per-element; tape nodes when ``self`` is tracked.

            Raises:
                {_GONE}
                ArgumentTypeError: a bound that is not a value or a number.
                ArgumentError: a bound whose shape does not broadcast.
                {_OUT}
            """),
        "dot": _doc(_dot, f"""``numpy.dot(self, b)`` (``tenferro_ad.dot``): one GEMM, one
            allocation.

            Cost: allocates the result; no copy of tenferro values (a numpy ``b`` is
            imported with one recorded ``TRANSFER``); no sync; no dispatch (a host kernel);
            O(m k n); one tape node when ``self`` or ``b`` is tracked.

            Raises:
                {_GONE}
                ArgumentTypeError: a ``b`` that is not a value or a number.
                ArgumentError: shapes that do not align.
                {_OUT}
            """),
        "conj": _doc(lambda self: cx.conj(self), conj_doc),
        "conjugate": _doc(lambda self: cx.conj(self), conj_doc),
        "real": property(lambda self: cx.real(self)),
        "imag": property(lambda self: cx.imag(self)),
        "round": _doc(_round, f"""Rounded half to even at ``decimals``
            (``tenferro_ad.round``; zero derivative): one allocation.

            Cost: allocates the result; no copy; no sync; no dispatch (a host kernel);
            O(n) per-element; one tape node when ``self`` is tracked.

            Raises:
                {_GONE}
                ArgumentTypeError: a ``decimals`` that is not an int.
                ArgumentError: a ``decimals`` that numpy's C ``int`` cannot hold.
                {_OUT}
            """),
    }


def install() -> dict[str, Callable[..., Any]]:
    """Fill the dispatch tables and install the numpy protocols and methods on handles;
    returns the same functions keyed for owners and views (``kernel.NUMPY_KEYS``), which
    ``_wiring`` registers with ``tenferro_storage``.  Idempotent. O(number of entries)."""
    _fill_tables()
    methods = _methods()
    for k, v in methods.items():
        setattr(EagerTensor, k, v)
    shared: dict[str, Callable[..., Any]] = {}
    for k, v in methods.items():
        if k in ts.kernel.NUMPY_KEYS:
            shared[k] = v.fget if isinstance(v, property) and v.fget is not None else v
    shared["array_ufunc"] = _array_ufunc
    shared["array_function"] = _array_function
    shared["astype"] = ew.astype
    return shared
