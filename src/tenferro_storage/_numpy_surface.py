"""The numpy-facing surface that owners, views and handles share.

One implementation of what a numpy user reaches for on any tenferro value:

* **host reads** (no copy, no ledger event; like ``item()``): ``float()``, ``int()``,
  ``bool()``, ``complex()``, ``format()``/f-strings (``f"{x:.3f}"``, element-wise on arrays),
  ``tolist()``, a numpy-style summarized ``repr`` and ``_repr_html_`` for notebooks.  They
  read the value's read-only array in place; the functions here take that array, so
  ``tenferro_ad``'s handles call the very same code (:func:`scalar`, :func:`formatted`,
  :func:`values_text`, :func:`html`);
* **numpy's protocols and methods**: ``np.sin(owner)``, ``np.sum(owner)``,
  ``owner.sum()``, ``owner.astype(...)`` ... need arithmetic, which ``tenferro_storage``
  does not have.  :class:`NumpySurface` forwards them to one table that the package with
  arithmetic fills at import through :func:`register_numpy` (``tenferro_ad`` does, in its
  ``_wiring.py``: the same functions its handles run).  Without it each raises
  ``TypeError`` saying which package to import.

``np.asarray(x)`` stays refused (tenferro never copies implicitly): :func:`refuse_array`
is the one message for owners, views and handles, naming what to do instead.
"""

from __future__ import annotations

import html as _html
from collections.abc import Callable, Mapping
from typing import Any, Final, NoReturn, TypeAlias

import numpy as np

from ._linear import NoCopy, name_borrow
from .errors import LayoutError, OwnershipError, RankError

__all__ = [
    "NUMPY_KEYS",
    "NUMPY_METHODS",
    "NUMPY_PROPERTIES",
    "NumpySurface",
    "formatted",
    "html",
    "refuse_array",
    "register_numpy",
    "scalar",
    "values_text",
]

NUMPY_METHODS: Final = (
    "all",
    "any",
    "argmax",
    "argmin",
    "argsort",
    "astype",
    "clip",
    "conj",
    "conjugate",
    "cumprod",
    "cumsum",
    "diagonal",
    "dot",
    "flatten",
    "max",
    "mean",
    "min",
    "prod",
    "ravel",
    "repeat",
    "round",
    "squeeze",
    "std",
    "sum",
    "swapaxes",
    "trace",
    "var",
)
"""ndarray-style methods every tenferro value offers (they run recorded ops)."""

NUMPY_PROPERTIES: Final = ("real", "imag")
NUMPY_KEYS: Final = ("array_function", "array_ufunc", *NUMPY_METHODS, *NUMPY_PROPERTIES)
"""The keys :func:`register_numpy` accepts: ``array_ufunc`` takes
``(self, ufunc, method, *inputs, **kwargs)``, ``array_function``
``(self, func, types, args, kwargs)`` (numpy's NEP 13/18 signatures), a method key
``(self, *args, **kwargs)``, a property key ``(self,)``."""

_TABLE: Final[dict[str, Callable[..., Any]]] = {}

Axis: TypeAlias = int | tuple[int, ...] | None

_HINT: Final = (
    "import tenferro_ad to run numpy functions and methods on owners; tenferro_storage has "
    "no arithmetic of its own"
)

SUMMARY_THRESHOLD: Final = 16
"""Arrays with more elements print summarized (first and last 3 per axis), as numpy does
above its own threshold."""


def register_numpy(table: Mapping[str, Callable[..., Any]]) -> None:
    """Install the implementations of numpy's protocols and methods on owners and views.

    ``table`` maps keys of :data:`NUMPY_KEYS` to callables; a later registration replaces
    the entries it names.  The whole table is checked first: an unknown key
    (``KeyError``) or a non-callable (``TypeError``) registers nothing.  O(len(table));
    called once at import by ``tenferro_ad``.

    Cost: no allocation; no copy; no sync; no dispatch; O(entries).
    Raises: ValueError."""
    for key, fn in table.items():
        if key not in NUMPY_KEYS:
            raise KeyError(
                f"register_numpy: unknown key {key!r}; expected one of {', '.join(NUMPY_KEYS)}. "
                "Nothing was registered"
            )
        if not callable(fn):
            raise TypeError(
                f"register_numpy: the implementation of {key!r} must be callable, got "
                f"{type(fn).__name__}. Nothing was registered"
            )
    _TABLE.update(table)


def _unregister_numpy() -> dict[str, Callable[..., Any]]:
    """Remove and return every registered implementation (for tests)."""
    out = dict(_TABLE)
    _TABLE.clear()
    return out


def _impl(key: str, operation: str) -> Callable[..., Any]:
    fn = _TABLE.get(key)
    if fn is None:
        raise TypeError(f"{operation}: {_HINT}")
    return fn


# -- host reads shared with tenferro_ad's handles (they pass their record's array) -----------
def refuse_array(obj: object) -> NoReturn:
    """Refuse ``np.asarray(obj)`` (``obj.__array__``) with the one message owners, views and
    handles share: ``OwnershipError`` naming the type and the three things to do instead.

    Cost: no allocation; no copy; no sync; no dispatch; O(1).
    Raises: OwnershipError."""
    name = type(obj).__name__
    raise OwnershipError(
        f"{name}.__array__: np.asarray({name}) is refused, tenferro never copies implicitly. "
        "Call .to_numpy() for a recorded TRANSFER copy, compare with "
        "tenferro_ad.testing.assert_allclose (reads in place), or read the values in place "
        "under a borrow: `with tenferro_ad.testing.borrowed(x) as a:`"
    )


def scalar(a: np.ndarray[Any, Any], operation: str, convert: Callable[[Any], Any]) -> Any:
    """``convert`` of the single element of ``a`` (``float``, ``int``, ``bool``,
    ``complex``); an array of another size raises ``LayoutError`` naming ``operation``
    (numpy's "ambiguous truth value", said plainly). A host read: O(1), no copy.

    Cost: no allocation; no copy; no sync; no dispatch (a host read); O(1).
    Raises: LayoutError."""
    if a.size != 1:
        raise LayoutError(
            operation,
            f"the value has {a.size} elements, not 1; reduce it first (.sum(), .any(), "
            "x[i]) or read it with .tolist()",
            shape=tuple(a.shape),
        )
    return convert(a.reshape(()).item())


def formatted(a: np.ndarray[Any, Any], spec: str) -> str:
    """``format(x, spec)``: the element's format for one element, ``spec`` applied to each
    element for more (``f"{w:.3f}"`` prints ``[0.100 0.200]``, where numpy refuses), numpy's
    ``str`` for an empty ``spec``. A host read: O(size), no copy of the values.

    Cost: no allocation; no copy; no sync; no dispatch (a host read); O(size).
    Raises: ValueError."""
    if a.size == 1 and spec:
        return format(a.reshape(()).item(), spec)
    if not spec:  # numpy's str()
        return np.array2string(a, threshold=SUMMARY_THRESHOLD, edgeitems=3)
    return np.array2string(
        a, threshold=SUMMARY_THRESHOLD, edgeitems=3,
        formatter={"all": lambda v: format(v.item() if hasattr(v, "item") else v, spec)},
    )


def values_text(a: np.ndarray[Any, Any]) -> str:
    """numpy's summarized text of ``a``: every element up to :data:`SUMMARY_THRESHOLD`,
    else the first and last three per axis around ``...``. O(printed elements).

    Cost: no allocation; no copy; no sync; no dispatch; O(printed elements).
    Raises: nothing."""
    return np.array2string(a, separator=", ", threshold=SUMMARY_THRESHOLD, edgeitems=3)


def html(text: str) -> str:
    """A notebook's ``_repr_html_``: the repr, escaped, in a ``<pre>`` block. O(len).

    Cost: no allocation; no copy; no sync; no dispatch; O(len(text)).
    Raises: nothing."""
    return f"<pre>{_html.escape(text)}</pre>"


def _identity(v: Any) -> Any:
    return v


def _array(x: Any, operation: str) -> np.ndarray[Any, Any]:
    """The read-only host array of an owner or view (its borrow checks run; no copy)."""
    return x._d(operation).readonly()  # type: ignore[no-any-return]


_CPU: Final = (1, 0)  # (kDLCPU, device 0)


class _Export(NoCopy):
    """What a DLPack consumer holds: a shared borrow of the exported value, ended when the
    consumer lets go of the memory (the capsule's array, whose ``base`` this is, dies).
    Exposes the borrowed bytes through ``__array_interface__``."""

    __slots__ = ("__array_interface__", "_view")

    def __init__(self, view: Any, a: np.ndarray[Any, Any], flag_read_only: bool) -> None:
        self._view = view
        self.__array_interface__ = {
            "version": 3, "shape": a.shape, "typestr": a.dtype.str, "strides": a.strides,
            "data": (a.ctypes.data, flag_read_only),
        }

    def __del__(self) -> None:
        v, self._view = self._view, None
        if v is not None:
            v.release()


def _host_array(view: Any, operation: str) -> np.ndarray[Any, Any]:
    d = view._d(operation)
    if type(d.buffer) is not np.ndarray:
        raise BufferError(
            f"{operation}: the value is device-resident; DLPack export reads host memory "
            "(synchronize it to the host first)"
        )
    return d.readonly()  # type: ignore[no-any-return]


def dlpack_export(
    x: Any, stream: Any, max_version: tuple[int, int] | None, dl_device: Any, copy: bool | None
) -> Any:
    """``x.__dlpack__(...)``: see :meth:`NumpySurface.__dlpack__`."""
    if dl_device is not None and tuple(dl_device) != _CPU:
        raise BufferError(f"__dlpack__: argument 'dl_device' {dl_device!r}: only the CPU (1, 0)")
    if stream is not None and stream != -1:
        raise BufferError(f"__dlpack__: argument 'stream' {stream!r}: CPU memory has no stream")
    if copy:  # the consumer asked for its own copy: a recorded TRANSFER, nothing borrowed
        return x.to_numpy().__dlpack__(max_version=max_version)
    view = x.as_view()  # the shared borrow the consumer holds (writes through x refused)
    name_borrow(view, "a DLPack consumer (until it drops the exported array)")
    try:
        a = _host_array(view, "__dlpack__")
        # DLPack >= 1.0 carries a read-only flag; an older consumer (JAX 0.10 asks for one)
        # cannot be told, and gets the bytes unflagged (JAX never writes its arrays)
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        shared = np.asarray(_Export(view, a, versioned))
    except BaseException:
        view.release()
        raise
    return shared.__dlpack__(max_version=max_version)


class NumpySurface:
    """numpy's protocols, scalar conversions, formatting and ndarray-style methods for
    owners and views (mixed into :class:`~tenferro_storage.Tensor`, ``TensorView`` and
    ``TensorViewMut``).  Host reads read in place; methods and protocols run the
    registered implementations (recorded ops, borrowing ``self``)."""

    __slots__ = ()

    # -- numpy protocols (NEP 13 / NEP 18) -------------------------------------------------
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return _impl("array_ufunc", f"numpy.{ufunc.__name__}")(
            self, ufunc, method, *inputs, **kwargs
        )

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _impl("array_function", f"numpy.{getattr(func, '__name__', func)}")(
            self, func, types, args, kwargs
        )

    def __array__(self, *args: Any, **kwargs: Any) -> NoReturn:
        refuse_array(self)

    # -- DLPack (export; import is tenferro_storage.from_dlpack) ----------------------------
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: Any = None,
        copy: bool | None = None,
    ) -> Any:
        """Export the value to a DLPack consumer (``torch.from_dlpack(x)``,
        ``jax.numpy.from_dlpack(x)``, ``np.from_dlpack(x)``) **without a copy**: the
        capsule carries a shared borrow of ``x`` that lasts as long as the consumer holds
        the memory, so meanwhile a write through the owner (``as_view_mut``, ``fill``,
        consuming it) raises ``BorrowError``; once the consumer's array dies the owner is
        writable again.  Read-only: a DLPack >= 1.0 consumer gets the read-only flag (an
        older one cannot be told; it must not write).  ``copy=True`` hands over a recorded
        ``TRANSFER`` copy instead.  CPU memory only (``BufferError`` otherwise).  O(1)."""
        return dlpack_export(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(1, 0)``: DLPack's CPU device (``BufferError`` for a device-resident value).
        O(1)."""
        _host_array(self, "__dlpack_device__")
        return _CPU

    # -- host reads (no copy, no ledger event) ---------------------------------------------
    def __float__(self) -> float:
        return scalar(_array(self, "float"), "float", float)  # type: ignore[no-any-return]

    def __int__(self) -> int:
        return scalar(_array(self, "int"), "int", int)  # type: ignore[no-any-return]

    def __bool__(self) -> bool:
        return scalar(_array(self, "bool"), "bool", bool)  # type: ignore[no-any-return]

    def __complex__(self) -> complex:
        return scalar(_array(self, "complex"), "complex", complex)  # type: ignore[no-any-return]

    def __format__(self, spec: str) -> str:
        return formatted(_array(self, "format"), spec)

    def __len__(self) -> int:
        shape = self._d("len").shape  # type: ignore[attr-defined]
        if not shape:
            raise RankError("len", "len() of a rank-0 value (it has no first axis)")
        return shape[0]  # type: ignore[no-any-return]

    def tolist(self) -> Any:
        """The values as nested Python lists (a scalar for rank 0), like
        ``ndarray.tolist``.  A host read: O(size) Python objects, no ledger event.

        Cost: allocates the Python objects (no ledger allocation); no copy event (reads in
        place); no sync; no dispatch; O(size).
        Raises: BorrowError, UseAfterMoveError, DeviceResidentError."""
        return _array(self, "tolist").tolist()

    def _repr_html_(self) -> str:
        return html(repr(self))

    # -- ndarray-style methods (recorded ops; ``self`` is borrowed; numpy's signatures) -------
    # Each returns a new value (with tenferro_ad: an ``EagerTensor``) and allocates it; the
    # cost is the op's.  ``out=`` is refused (ops return new values), as on handles.  Their
    # TypeError: no implementation registered (import tenferro_ad), ``out=`` given, or an
    # argument of the wrong type (tenferro_ad's ArgumentTypeError); AxisError/ArgumentError
    # are tenferro_ad's; BorrowError/UseAfterMoveError come from borrowing ``self``.
    def sum(self, axis: Axis = None, dtype: Any = None, out: None = None,
            keepdims: bool = False) -> Any:
        """``numpy.sum`` as a method: a recorded op, ``self`` borrowed (a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(size).
        Raises: TypeError, AxisError, BorrowError, UseAfterMoveError."""
        return _impl("sum", "sum")(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def mean(self, axis: Axis = None, dtype: Any = None, out: None = None,
             keepdims: bool = False) -> Any:
        """``numpy.mean`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(size).
        Raises: TypeError, AxisError, BorrowError, UseAfterMoveError."""
        return _impl("mean", "mean")(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def prod(self, axis: Axis = None, dtype: Any = None, out: None = None,
             keepdims: bool = False) -> Any:
        """``numpy.prod`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(size).
        Raises: TypeError, AxisError, BorrowError, UseAfterMoveError."""
        return _impl("prod", "prod")(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def max(self, axis: Axis = None, out: None = None, keepdims: bool = False) -> Any:
        """``numpy.max`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(size).
        Raises: TypeError, AxisError, ArgumentError, BorrowError, UseAfterMoveError."""
        return _impl("max", "max")(self, axis=axis, out=out, keepdims=keepdims)

    def min(self, axis: Axis = None, out: None = None, keepdims: bool = False) -> Any:
        """``numpy.min`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(size).
        Raises: TypeError, AxisError, ArgumentError, BorrowError, UseAfterMoveError."""
        return _impl("min", "min")(self, axis=axis, out=out, keepdims=keepdims)

    def var(self, axis: Axis = None, dtype: Any = None, out: None = None, ddof: int = 0,
            keepdims: bool = False) -> Any:
        """``numpy.var`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(size).
        Raises: TypeError, AxisError, BorrowError, UseAfterMoveError."""
        return _impl("var", "var")(self, axis=axis, dtype=dtype, out=out, ddof=ddof,
                                   keepdims=keepdims)

    def std(self, axis: Axis = None, dtype: Any = None, out: None = None, ddof: int = 0,
            keepdims: bool = False) -> Any:
        """``numpy.std`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(size).
        Raises: TypeError, AxisError, BorrowError, UseAfterMoveError."""
        return _impl("std", "std")(self, axis=axis, dtype=dtype, out=out, ddof=ddof,
                                   keepdims=keepdims)

    def cumsum(self, axis: int | None = None, dtype: Any = None, out: None = None) -> Any:
        """``numpy.cumsum`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(size).
        Raises: TypeError, AxisError, BorrowError, UseAfterMoveError."""
        return _impl("cumsum", "cumsum")(self, axis=axis, dtype=dtype, out=out)

    def cumprod(self, axis: int | None = None, dtype: Any = None, out: None = None) -> Any:
        """``numpy.cumprod`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(size).
        Raises: TypeError, AxisError, BorrowError, UseAfterMoveError."""
        return _impl("cumprod", "cumprod")(self, axis=axis, dtype=dtype, out=out)

    def any(self, axis: Axis = None, out: None = None, keepdims: bool = False) -> Any:
        """``numpy.any`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(size).
        Raises: TypeError, AxisError, BorrowError, UseAfterMoveError."""
        return _impl("any", "any")(self, axis=axis, out=out, keepdims=keepdims)

    def all(self, axis: Axis = None, out: None = None, keepdims: bool = False) -> Any:
        """``numpy.all`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(size).
        Raises: TypeError, AxisError, BorrowError, UseAfterMoveError."""
        return _impl("all", "all")(self, axis=axis, out=out, keepdims=keepdims)

    def argmax(self, axis: int | None = None, out: None = None, keepdims: bool = False) -> Any:
        """``numpy.argmax`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(size).
        Raises: TypeError, AxisError, ArgumentError, BorrowError, UseAfterMoveError."""
        return _impl("argmax", "argmax")(self, axis=axis, out=out, keepdims=keepdims)

    def argmin(self, axis: int | None = None, out: None = None, keepdims: bool = False) -> Any:
        """``numpy.argmin`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(size).
        Raises: TypeError, AxisError, ArgumentError, BorrowError, UseAfterMoveError."""
        return _impl("argmin", "argmin")(self, axis=axis, out=out, keepdims=keepdims)

    def argsort(self, axis: int = -1, kind: str | None = None, order: None = None) -> Any:
        """``numpy.argsort`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(size log
        size).
        Raises: TypeError, AxisError, BorrowError, UseAfterMoveError."""
        return _impl("argsort", "argsort")(self, axis=axis, kind=kind, order=order)

    def astype(self, dtype: Any) -> Any:
        """A converted value (a recorded op allocating the result; ``self`` borrowed).

        Cost: allocates the result (no allocation when the dtype is already ``dtype``); no copy; no
        sync; dispatches the registered op; O(size).
        Raises: TypeError, DTypeError, BorrowError, UseAfterMoveError."""
        return _impl("astype", "astype")(self, dtype)

    def clip(self, lo: Any = None, hi: Any = None, out: None = None) -> Any:
        """``tenferro_ad.clip`` as a method (numpy's ``clip``; a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(size).
        Raises: TypeError, ArgumentError, BorrowError, UseAfterMoveError."""
        return _impl("clip", "clip")(self, lo, hi, out=out)

    def conj(self) -> Any:
        """The complex conjugate (a recorded op, a new value).

        Cost: allocates the result (no allocation for real values); no copy; no sync; dispatches
        the registered op; O(size).
        Raises: TypeError, BorrowError, UseAfterMoveError."""
        return _impl("conj", "conj")(self)

    def conjugate(self) -> Any:
        """The complex conjugate (a recorded op, a new value).

        Cost: allocates the result (no allocation for real values); no copy; no sync; dispatches
        the registered op; O(size).
        Raises: TypeError, BorrowError, UseAfterMoveError."""
        return _impl("conjugate", "conjugate")(self)

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
        """``numpy.diagonal`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(min(n, m)).
        Raises: TypeError, AxisError, ArgumentError, BorrowError, UseAfterMoveError."""
        return _impl("diagonal", "diagonal")(self, offset=offset, axis1=axis1, axis2=axis2)

    def dot(self, b: Any, out: None = None) -> Any:
        """``numpy.dot`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(m*k*n).
        Raises: TypeError, ArgumentError, BorrowError, UseAfterMoveError."""
        return _impl("dot", "dot")(self, b, out=out)

    def flatten(self, order: str = "C") -> Any:
        """A flat value (a recorded op, a new value).

        Cost: allocates the result for a strided value (no allocation for a contiguous one); no
        copy; no sync; dispatches the registered op; O(size).
        Raises: TypeError, BorrowError, UseAfterMoveError."""
        return _impl("flatten", "flatten")(self, order=order)

    def ravel(self, order: str = "C") -> Any:
        """A flat value (a recorded op, a new value).

        Cost: allocates the result for a strided value (no allocation for a contiguous one); no
        copy; no sync; dispatches the registered op; O(size).
        Raises: TypeError, BorrowError, UseAfterMoveError."""
        return _impl("ravel", "ravel")(self, order=order)

    def repeat(self, repeats: Any, axis: int | None = None) -> Any:
        """``numpy.repeat`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(size of the
        result).
        Raises: TypeError, AxisError, ArgumentError, BorrowError, UseAfterMoveError."""
        return _impl("repeat", "repeat")(self, repeats, axis=axis)

    def round(self, decimals: int = 0, out: None = None) -> Any:
        """``numpy.round`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(size).
        Raises: TypeError, BorrowError, UseAfterMoveError."""
        return _impl("round", "round")(self, decimals=decimals, out=out)

    def squeeze(self, axis: Axis = None) -> Any:
        """``numpy.squeeze`` as a method (a recorded op, a new value).

        Cost: no allocation (a view of the same values); no copy; no sync; dispatches the
        registered op; O(rank).
        Raises: TypeError, AxisError, ArgumentError, BorrowError, UseAfterMoveError."""
        return _impl("squeeze", "squeeze")(self, axis=axis)

    def swapaxes(self, axis1: int, axis2: int) -> Any:
        """``tenferro_ad.swapaxes`` as a method (a recorded op, a new value).

        Cost: no allocation (a view of the same values); no copy; no sync; dispatches the
        registered op; O(rank).
        Raises: TypeError, AxisError, BorrowError, UseAfterMoveError."""
        return _impl("swapaxes", "swapaxes")(self, axis1, axis2)

    def trace(self, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
              out: None = None) -> Any:
        """``numpy.trace`` as a method (a recorded op, a new value).

        Cost: allocates the result; no copy; no sync; dispatches the registered op; O(min(n, m)).
        Raises: TypeError, AxisError, ArgumentError, BorrowError, UseAfterMoveError."""
        return _impl("trace", "trace")(self, offset=offset, axis1=axis1, axis2=axis2,
                                       dtype=dtype, out=out)

    @property
    def real(self) -> Any:
        """The real part (a recorded op, a new value)."""
        return _impl("real", "real")(self)

    @property
    def imag(self) -> Any:
        """The imaginary part (a recorded op, a new value)."""
        return _impl("imag", "imag")(self)
