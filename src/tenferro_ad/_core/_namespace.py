"""The rule namespaces: one vocabulary, two backends.

Rules are written once against ``ops``: ``ops.mul(g, y)``, ``ops.sum(g, axis=...)``,
``ops.unbroadcast(g, shape)``, ``ops.apply(prim, ...)`` ... .  :data:`NUMPY_NS` runs them
on numpy arrays (a no-record backward: no handles, no tape nodes, no ledger events —
cotangents are kernel scratch); :data:`HANDLE_NS` runs them on ``EagerTensor`` handles
through the public ops (``create_graph``/nested ``grad``: every call is recorded, so the
result can be differentiated again).  Both accept Python scalars anywhere an array is
accepted.  New rule files may use exactly the names listed in :data:`VOCABULARY`.

``ops.donated`` is the cotangent the reverse sweep hands to the rule it is calling when it
will not read that cotangent again itself (``None`` otherwise); built-in rules that also read
it no more may write their result over it when nothing else holds it
(``elementwise.into_g``).  Rules outside this package never need it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Protocol

import numpy as np

from ._primitive import CastTarget, RealTarget

VOCABULARY: Final = (
    "abs", "add", "apply", "astype", "broadcast_to", "concatenate", "conj", "cos", "div",
    "eq", "exp", "gather", "gt", "log", "matmul", "maximum", "mul", "neg", "reshape",
    "scatter_add", "sign", "sin", "slice_pad", "sqrt", "sub", "sum", "transpose",
    "unbroadcast", "where",
)



class RuleNamespace(Protocol):
    """What a rule may call on its ``ops`` argument: exactly the words of :data:`VOCABULARY`
    (each takes arrays, handles or tracers, and Python scalars), plus ``donated``.

    Three namespaces implement it: :data:`NUMPY_NS` (numpy, nothing recorded),
    :data:`HANDLE_NS` (the public ops on handles, recorded: higher-order derivatives) and
    the tracer's ``TRACE_NS`` (each call emits an equation).  The latter two are filled by
    ``tenferro_ad._wiring`` from the op layer above; a test checks each namespace has
    every word."""

    donated: Any
    def abs(self, *args: Any, **kwargs: Any) -> Any: ...
    def add(self, *args: Any, **kwargs: Any) -> Any: ...
    def apply(self, *args: Any, **kwargs: Any) -> Any: ...
    def astype(self, *args: Any, **kwargs: Any) -> Any: ...
    def broadcast_to(self, *args: Any, **kwargs: Any) -> Any: ...
    def concatenate(self, *args: Any, **kwargs: Any) -> Any: ...
    def conj(self, *args: Any, **kwargs: Any) -> Any: ...
    def cos(self, *args: Any, **kwargs: Any) -> Any: ...
    def div(self, *args: Any, **kwargs: Any) -> Any: ...
    def eq(self, *args: Any, **kwargs: Any) -> Any: ...
    def exp(self, *args: Any, **kwargs: Any) -> Any: ...
    def gather(self, *args: Any, **kwargs: Any) -> Any: ...
    def gt(self, *args: Any, **kwargs: Any) -> Any: ...
    def log(self, *args: Any, **kwargs: Any) -> Any: ...
    def matmul(self, *args: Any, **kwargs: Any) -> Any: ...
    def maximum(self, *args: Any, **kwargs: Any) -> Any: ...
    def mul(self, *args: Any, **kwargs: Any) -> Any: ...
    def neg(self, *args: Any, **kwargs: Any) -> Any: ...
    def reshape(self, *args: Any, **kwargs: Any) -> Any: ...
    def scatter_add(self, *args: Any, **kwargs: Any) -> Any: ...
    def sign(self, *args: Any, **kwargs: Any) -> Any: ...
    def sin(self, *args: Any, **kwargs: Any) -> Any: ...
    def slice_pad(self, *args: Any, **kwargs: Any) -> Any: ...
    def sqrt(self, *args: Any, **kwargs: Any) -> Any: ...
    def sub(self, *args: Any, **kwargs: Any) -> Any: ...
    def sum(self, *args: Any, **kwargs: Any) -> Any: ...
    def transpose(self, *args: Any, **kwargs: Any) -> Any: ...
    def unbroadcast(self, *args: Any, **kwargs: Any) -> Any: ...
    def where(self, *args: Any, **kwargs: Any) -> Any: ...


_AXES: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[int, ...]] = {}
_AXES_MAX: Final = 4096


def _unbroadcast_axes(gs: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    """The axes a cotangent of shape ``gs`` is summed over to reach ``shape``: the leading
    axes ``shape`` lacks and the axes where it has 1.  Remembered per pair of shapes (a
    bias's unbroadcast repeats every step; at most ``_AXES_MAX`` pairs). O(rank) once."""
    key = (gs, tuple(shape))
    axes = _AXES.get(key)
    if axes is None:
        nd = len(gs) - len(shape)
        axes = tuple(range(nd)) + tuple(
            i + nd for i, n in enumerate(shape) if n == 1 and gs[i + nd] != 1
        )
        if len(_AXES) < _AXES_MAX:
            _AXES[key] = axes
    return axes


def unbroadcast(
    g: Any,
    shape: tuple[int, ...],
    sum: Callable[..., Any],
    reshape: Callable[[Any, tuple[int, ...]], Any],
    real: Callable[[Any], Any],
    astype: Callable[[Any, Any], Any],
) -> Any:
    """The cotangent ``g`` of a broadcast value summed back to its argument's ``shape``, for
    any rule namespace (the handle-backed and the tracing one pass their own ``sum(x,
    axis=)``, ``reshape(x, shape)``, ``real(x)`` and ``astype(x, dtype)``; the numpy one,
    ``_NumpyNS.unbroadcast`` below, is written out for speed).  Broadcast axes are summed
    (and kept axes of extent 1 restored by one reshape, none when the sum already has the
    shape); a :class:`~._primitive.RealTarget` keeps the real part of a complex
    cotangent (a real argument met a complex value, as JAX); a
    :class:`~._primitive.CastTarget` also casts to the argument's dtype.
    O(size of ``g``) when it reduces; metadata reads otherwise."""
    gs = tuple(g.shape)
    target = tuple(shape)
    if gs != target:
        g = sum(g, axis=_unbroadcast_axes(gs, target))
        if tuple(g.shape) != target:  # kept axes of extent 1 (no identity reshape)
            g = reshape(g, target)
    kind = type(shape)
    if kind is RealTarget:
        if _np_dtype(g).kind == "c":
            g = real(g)
    elif kind is CastTarget:
        dt = shape.dtype  # type: ignore[attr-defined]
        if _np_dtype(g).kind == "c" and np.dtype(dt).kind != "c":
            g = real(g)
        if _np_dtype(g) != dt:
            g = astype(g, dt)
    return g


def _np_dtype(x: Any) -> np.dtype[Any]:
    """The numpy dtype of a handle (its storage ``DType``'s) or a tracer. O(1)."""
    d = x.dtype
    dt: np.dtype[Any] = np.dtype(getattr(d, "numpy", d))
    return dt


def _broadcast_to(x: Any, shape: tuple[int, ...]) -> Any:
    """``np.broadcast_to(x, shape)``: a read-only view repeating ``x``.  A one-element
    source (the cotangent of a full reduction: ``mean``'s, a loss's) is viewed directly with
    zero strides (the same values, dtype, base and flags as ``np.broadcast_to``'s view,
    without its iterator set-up); anything else goes to numpy. O(rank), no copy."""
    if type(x) is not np.ndarray:
        if not isinstance(x, np.generic):
            return np.broadcast_to(x, shape)
        x = np.asarray(x)
    if x.size != 1 or x.ndim > len(shape) or any(n < 0 for n in shape):
        return np.broadcast_to(x, shape)
    out = np.ndarray(shape, x.dtype, x, 0, (0,) * len(shape))
    out.flags.writeable = False
    return out


class _NumpyNS:
    """Rule namespace over numpy arrays (see the module docstring)."""

    donated: Any = None  # set by the reverse sweep around a rule call

    add = staticmethod(np.add)
    sub = staticmethod(np.subtract)
    mul = staticmethod(np.multiply)
    div = staticmethod(np.true_divide)
    neg = staticmethod(np.negative)
    exp = staticmethod(np.exp)
    log = staticmethod(np.log)
    sin = staticmethod(np.sin)
    cos = staticmethod(np.cos)
    sqrt = staticmethod(np.sqrt)
    sign = staticmethod(np.sign)
    abs = staticmethod(np.abs)
    conj = staticmethod(np.conj)
    maximum = staticmethod(np.maximum)
    where = staticmethod(np.where)
    eq = staticmethod(np.equal)
    gt = staticmethod(np.greater)
    matmul = staticmethod(np.matmul)

    @staticmethod
    def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        # np.sum's kernel without its Python-level wrapper (same results)
        if keepdims:
            return np.add.reduce(x, axis=axis, keepdims=True)
        return np.add.reduce(x, axis=axis)

    @staticmethod
    def reshape(x: Any, shape: tuple[int, ...]) -> Any:
        # an array's or numpy scalar's own method: what np.reshape calls, without its
        # Python-level wrapper (the same view or array)
        if isinstance(x, np.ndarray | np.generic):
            return x.reshape(shape)
        return np.reshape(x, shape)

    @staticmethod
    def transpose(x: Any, axes: tuple[int, ...]) -> Any:
        return np.transpose(x, axes)

    @staticmethod
    def broadcast_to(x: Any, shape: tuple[int, ...]) -> Any:
        return _broadcast_to(x, shape)

    @staticmethod
    def unbroadcast(g: Any, shape: tuple[int, ...]) -> Any:
        gs = g.shape if type(g) is np.ndarray else np.shape(g)
        if gs == shape:
            r = g
        else:  # np.sum's kernel without its Python-level wrapper (same results)
            r = np.add.reduce(g, axis=_unbroadcast_axes(gs, shape))
            if r.shape != shape:  # kept size-1 axes; a same-shape reshape would be a view
                r = np.reshape(r, shape)
        if type(shape) is RealTarget and np.iscomplexobj(r):
            r = np.array(np.real(r), order="C")  # a fresh real cotangent, rank kept (scratch)
        elif type(shape) is CastTarget:
            dt = shape.dtype
            if np.iscomplexobj(r) and dt.kind != "c":
                r = np.real(r)
            if r.dtype != dt:
                r = np.asarray(r).astype(dt)
        return r

    @staticmethod
    def astype(x: Any, dtype: Any) -> Any:
        arr = np.asarray(x)
        if arr.dtype.kind == "c" and np.dtype(dtype).kind != "c":
            arr = arr.real  # a real value's cotangent: the real part (no numpy warning)
        return arr.astype(dtype)

    @staticmethod
    def concatenate(xs: list[Any], axis: int) -> Any:
        return np.concatenate(xs, axis=axis)

    @staticmethod
    def slice_pad(g: Any, *, key: Any, shape: tuple[int, ...]) -> Any:
        z = np.zeros(shape, np.result_type(g))
        z[key] = g
        return z

    @staticmethod
    def gather(x: Any, *, key: Any) -> Any:
        return np.asarray(x)[key]

    @staticmethod
    def scatter_add(g: Any, *, key: Any, shape: tuple[int, ...]) -> Any:
        z = np.zeros(shape, np.result_type(g))
        np.add.at(z, key, g)
        return z

    @staticmethod
    def apply(prim: Any, *args: Any, **params: Any) -> Any:
        return prim.impl(*args, **params)


NUMPY_NS: Final[RuleNamespace] = _NumpyNS()


class _HandleNS:
    """Rule namespace over handles; filled by ``tenferro_ad.ops`` with the public ops."""

    donated: Any = None  # (set by the sweep as on NUMPY_NS; a handle is never overwritten)

    def __getattr__(self, name: str) -> Any:  # pragma: no cover - only before ops load
        raise AttributeError(f"rule namespace has no operation {name!r}")


HANDLE_NS: Final[RuleNamespace] = _HandleNS()
