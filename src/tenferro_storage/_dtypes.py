"""The supported scalar types, their sizes and alignment, and the sealed reinterpretation pairs."""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from .errors import ConversionError, DTypeError


class DType:
    """One supported scalar type (immutable; compare with ``==`` or by ``name``).

    ``itemsize`` and ``alignment`` are in bytes.  ``partner`` is the sealed
    reinterpretation partner (complex64<->float32, complex128<->float64) or ``None``.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = ("alignment", "itemsize", "kind", "name", "numpy")

    name: str
    numpy: np.dtype[Any]
    itemsize: int
    alignment: int
    kind: str

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or name not in SUPPORTED:
            raise DTypeError(
                f"DType: argument 'name' {name!r} is not a supported dtype name; use "
                "tenferro_storage.dtype() "
                f"or one of {', '.join(SUPPORTED)}"
            )
        nd = np.dtype(name)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "numpy", nd)
        object.__setattr__(self, "itemsize", nd.itemsize)
        object.__setattr__(self, "alignment", nd.alignment)
        object.__setattr__(self, "kind", nd.kind)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"DType is immutable (tried to set {name!r})")

    @property
    def partner(self) -> DType | None:
        """The sealed complex<->real reinterpretation partner, or ``None``."""
        other = _PARTNERS.get(self.name)
        return None if other is None else _BY_NAME[other]

    @property
    def is_complex(self) -> bool:
        return self.kind == "c"

    @property
    def is_floating(self) -> bool:
        return self.kind in "fc"

    def __repr__(self) -> str:
        return f"dtype({self.name!r})"

    def __str__(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DType):
            return self is other
        if isinstance(other, str):
            return other == self.name
        if isinstance(other, np.dtype) or (
            isinstance(other, type) and issubclass(other, np.generic)
        ):  # handle.dtype == np.float64, as numpy compares
            return bool(np.dtype(other) == self.numpy)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name)

    def __reduce__(self) -> tuple[Any, ...]:
        return (dtype, (self.name,))


SUPPORTED: Final = ("bool", "int32", "int64", "float32", "float64", "complex64", "complex128")
_BY_NAME: Final[dict[str, DType]] = {name: DType(name) for name in SUPPORTED}
_BY_NUMPY: Final[dict[np.dtype[Any], DType]] = {d.numpy: d for d in _BY_NAME.values()}
#: the numpy dtypes tenferro stores (native byte order), for O(1) membership tests
STORED_NUMPY: Final[frozenset[np.dtype[Any]]] = frozenset(_BY_NUMPY)


def unstored(dt: np.dtype[Any]) -> bool:
    """Whether numpy dtype ``dt`` is one tenferro does not store in either byte order (a
    string, object, ``float16`` ... dtype); the refusal test of the traced paths. O(1)."""
    return dt not in STORED_NUMPY and (dt.isnative or dt.newbyteorder("=") not in STORED_NUMPY)


def dtype_of_constant(a: Any) -> np.dtype[Any] | None:
    """The numpy dtype of a constant (a list: as numpy reads it), ``None`` for what numpy
    cannot read; for error paths that look for the refused argument. O(size) for a list."""
    try:
        return a.dtype if isinstance(a, np.ndarray) else np.asarray(a).dtype
    except Exception:
        return None
_PARTNERS: Final = {
    "complex64": "float32",
    "float32": "complex64",
    "complex128": "float64",
    "float64": "complex128",
}

bool_ = _BY_NAME["bool"]
int32 = _BY_NAME["int32"]
int64 = _BY_NAME["int64"]
float32 = _BY_NAME["float32"]
float64 = _BY_NAME["float64"]
complex64 = _BY_NAME["complex64"]
complex128 = _BY_NAME["complex128"]


def dtype(spec: object) -> DType:
    """Resolve a dtype name (``"float64"``), a :class:`DType`, or a numpy dtype/type. O(1).

    Raises :class:`~tenferro_storage.errors.DTypeError` naming an unknown or unsupported dtype.

    Cost: no allocation; no copy; no sync; no dispatch; O(1).
    Raises: DTypeError."""
    return resolve(spec, "dtype")


def resolve(spec: object, operation: str) -> DType:
    """:func:`dtype` for ``operation``: its error names the operation and the argument."""
    if isinstance(spec, DType):
        return spec
    if isinstance(spec, str):
        found = _BY_NAME.get(spec)
        if found is not None:
            return found
        if spec == "bool_":
            return bool_
    elif spec is not None and not isinstance(spec, bool | int | float):
        # numpy's type spellings: np.float32, float, complex, np.dtype("<c16").  Strings stay
        # the canonical names only ("f8", "float" are refused: one spelling per dtype).
        try:
            nd = np.dtype(spec)  # type: ignore[call-overload]
        except Exception:  # numpy raises TypeError, ValueError, ... for what it cannot parse
            nd = None
        if nd is not None:
            found = _BY_NUMPY.get(nd)
            if found is not None:
                return found
    arg = "argument 'spec': " if operation == "dtype" else "argument 'dtype': "
    raise DTypeError(
        f"{operation}: {arg}unknown or unsupported dtype {_short(spec)}; supported: "
        f"{', '.join(SUPPORTED)}"
    )


def _short(spec: object) -> str:
    r = repr(spec)
    return r if len(r) <= 60 else f"<{type(spec).__name__}>"


def from_numpy_dtype(nd: np.dtype[Any], operation: str) -> DType:
    """The :class:`DType` of a numpy dtype, or a ``DTypeError`` naming ``operation``."""
    found = _BY_NUMPY.get(nd)
    if found is None:
        raise DTypeError(unsupported_message(operation, nd))
    return found


def unsupported_message(operation: str, nd: object) -> str:
    """The one wording of an unsupported dtype, for ``operation`` (``"from_numpy: argument
    'array'"``: an op and its argument; a bare op name says "a value")."""
    what = operation if ": " in operation else f"{operation}: a value"
    return (
        f"{what} has dtype {nd}, which tenferro does not support (supported: "
        f"{', '.join(SUPPORTED)})"
    )


def checked_cast(
    operation: str, src: np.ndarray[Any, Any], target: np.dtype[Any]
) -> np.ndarray[Any, Any]:
    """Refuse a conversion that would silently change values: NaN or +-inf into an integer
    or bool dtype (numpy gives INT_MIN), a nonzero imaginary part into a real dtype (numpy
    drops it), or a float into an integer dtype outside its range.  O(size) only when the
    conversion is lossy by kind; nothing is allocated or recorded on refusal.  Returns the
    source to convert (its real part when a complex source has no imaginary part)."""
    kind = src.dtype.kind
    if kind == "c" and target.kind != "c":
        if np.any(np.imag(src) != 0):
            raise ConversionError(
                f"{operation}: converting complex values to {target} would drop nonzero "
                "imaginary parts; take .real explicitly (or keep a complex dtype)"
            )
        src = np.real(src)
        kind = src.dtype.kind
    if kind in "fc" and target.kind in "iub":
        finite = np.isfinite(src)
        if not np.all(finite):
            raise ConversionError(
                f"{operation}: the values hold NaN or +-inf, which {target} cannot represent "
                "(numpy would store garbage); replace them first or keep a floating dtype"
            )
        if target.kind in "iu" and src.size:
            info = np.iinfo(target)
            if np.min(src) < info.min or np.max(src) > info.max:
                raise ConversionError(
                    f"{operation}: values outside the range of {target} "
                    f"[{info.min}, {info.max}] cannot be converted"
                )
    if kind in "iu" and target.kind in "iu" and src.size:
        info = np.iinfo(target)
        if np.min(src) < info.min or np.max(src) > info.max:
            raise ConversionError(
                f"{operation}: values outside the range of {target} "
                f"[{info.min}, {info.max}] cannot be converted"
            )
    return src
