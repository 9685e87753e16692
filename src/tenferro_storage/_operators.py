"""Python operators on owners and views, by dependency inversion.

``tenferro_storage`` has no arithmetic of its own and never imports ``tenferro_ad``.
The operators of :class:`~tenferro_storage.Tensor`, :class:`~tenferro_storage.TensorView`
and :class:`~tenferro_storage.TensorViewMut` (``+ - * / ** @``, their reflected forms,
unary ``-``, ``abs()``, ``< <= > >=`` and advanced indexing) look their implementation
up in one table here, which a package with arithmetic fills at import through
:func:`register_operators` (published as ``tenferro_storage.kernel.register_operators``).
Without a registered implementation each operator raises ``TypeError`` saying which
package to import.

``==`` and ``!=`` are deliberately absent: owners keep identity equality and hashing
(a dict or set of owners must keep working).  numpy's protocols, scalar conversions and
ndarray-style methods come from :class:`~._numpy_surface.NumpySurface`, the base of
:class:`OperatorMixin` (``ndarray + owner`` runs ``numpy.add`` through it: the same op).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import EllipsisType
from typing import Any, Final, NoReturn, TypeAlias

import numpy as np

from ._numpy_surface import NumpySurface
from .errors import (
    BadIndexError,
    BorrowError,
    DTypeError,
    TenferroError,
    UseAfterMoveError,
    shown,
)

__all__ = [
    "OPERATOR_KEYS",
    "BasicKey",
    "OperatorMixin",
    "advanced_getitem",
    "is_basic_key",
    "register_operators",
]

OPERATOR_KEYS: Final = (
    "abs",
    "add",
    "ge",
    "getitem",
    "gt",
    "le",
    "lt",
    "matmul",
    "mul",
    "neg",
    "pow",
    "sub",
    "truediv",
)
"""The keys :func:`register_operators` accepts.

Binary keys (``add sub mul truediv pow matmul lt le gt ge``) take ``(a, b)``: the
forward operator calls ``f(self, other)``, the reflected one ``f(other, self)`` (so
``2.0 - t`` is ``f(2.0, t)``).  Unary keys (``neg abs``) take ``(x,)``.  ``getitem``
takes ``(x, key)`` and is called only for keys that are not basic (see
:func:`is_basic_key`): integer arrays, lists, owners, boolean masks, ....
"""

_TABLE: Final[dict[str, Callable[..., Any]]] = {}

_HINT: Final = (
    "import tenferro_ad to use Python operators on owners; tenferro_storage has no "
    "arithmetic of its own"
)

BasicIndex: TypeAlias = int | np.integer[Any] | slice | EllipsisType | None
BasicKey: TypeAlias = BasicIndex | tuple[BasicIndex, ...]
"""What makes a zero-copy view: ints, slices, ``...`` and ``None``, alone or in a tuple."""


def register_operators(table: Mapping[str, Callable[..., Any]]) -> None:
    """Install the implementations of the Python operators on owners and views.

    ``table`` maps keys of :data:`OPERATOR_KEYS` to callables (see there for their
    signatures); a later registration replaces the entries it names and keeps the
    others.  The whole table is checked first: an unknown key (``KeyError``) or a
    non-callable value (``TypeError``) changes nothing.  O(len(table)); called once at
    import by the package that provides arithmetic (``tenferro_ad``).

    Cost: no allocation; no copy; no sync; no dispatch; O(entries).
    Raises: ValueError."""
    for key, fn in table.items():
        if key not in OPERATOR_KEYS:
            raise KeyError(
                f"register_operators: unknown operator key {key!r}; expected one of "
                f"{', '.join(OPERATOR_KEYS)}. Nothing was registered"
            )
        if not callable(fn):
            raise TypeError(
                f"register_operators: the implementation of {key!r} must be callable, got "
                f"{type(fn).__name__}. Nothing was registered"
            )
    _TABLE.update(table)


def _unregister_operators(keys: tuple[str, ...] = OPERATOR_KEYS) -> dict[str, Callable[..., Any]]:
    """Remove and return the registered implementations of ``keys`` (for tests)."""
    return {k: _TABLE.pop(k) for k in keys if k in _TABLE}


def _missing(symbol: str, *operands: object) -> NoReturn:
    names = " and ".join(f"'{type(x).__name__}'" for x in operands)
    raise TypeError(f"unsupported operand type(s) for {symbol}: {names}: {_HINT}")


def _binary(key: str, symbol: str, a: object, b: object) -> Any:
    fn = _TABLE.get(key)
    if fn is None:
        _missing(symbol, a, b)
    return fn(a, b)


def _unary(key: str, symbol: str, x: object) -> Any:
    fn = _TABLE.get(key)
    if fn is None:
        _missing(symbol, x)
    return fn(x)


def _basic_item(k: object) -> bool:
    t = type(k)
    if t is int or t is slice or k is None or k is Ellipsis:
        return True
    return isinstance(k, int | np.integer) and not isinstance(k, bool)


def is_basic_key(key: object) -> bool:
    """Whether ``key`` is a basic index (a zero-copy view), as numpy defines it.

    Basic: ints (not bools), numpy integers, slices, ``...`` and ``None``, alone or in a
    tuple.  Anything else (integer or boolean arrays, lists, owners, handles, a bool) is
    advanced indexing, which gathers values into a new array.  O(len(key)).
    """
    if type(key) is tuple:
        for k in key:
            if not _basic_item(k):
                return False
        return True
    return _basic_item(key)


def _not_an_index(k: object) -> bool:
    """A key part no indexing accepts, basic or advanced (a str, a float, a function...):
    refused here, before the registered gather sees it. O(1)."""
    if isinstance(k, str | bytes | float | complex | dict | set | frozenset | np.floating):
        return True
    return callable(k) and not hasattr(k, "shape")


def advanced_getitem(x: object, key: object, operation: str) -> Any:
    """Forward an advanced index to the registered ``getitem`` (a gather), or refuse.

    A key that is no index at all raises ``BadIndexError`` naming ``operation`` and the
    argument ``key``; a refusal of the registered ``getitem`` that is not about the
    receiver's state (a borrow, a consumed owner) is reported on ``key`` too.  Without a
    registered implementation raises ``TypeError`` naming ``operation``, the key's type and
    the package to import; nothing changes.
    """
    for k in key if type(key) is tuple else (key,):
        if _not_an_index(k):
            raise BadIndexError(
                operation,
                f"argument 'key': {shown(k)} is not an index; use ints, slices, ..., None, "
                "or integer/boolean arrays (advanced indexing)",
            )
    fn = _TABLE.get("getitem")
    if fn is None:
        raise TypeError(
            f"{operation}: a {type(key).__name__} key is advanced indexing (integer arrays, "
            "lists, owners, boolean masks), which gathers values into a new array: "
            f"{_HINT}. Basic keys (ints, slices, ..., None) make zero-copy views without it"
        )
    try:
        return fn(x, key)
    except (BorrowError, UseAfterMoveError):
        raise  # about the receiver, reported as the gather words it
    except TenferroError as e:
        message = str(e)
        if "argument 'key'" not in message and len(e.args) == 1:
            _, sep, rest = message.partition(": ")
            e.args = (f"{operation}: argument 'key': {rest if sep else message}",)
        raise


class OperatorMixin(NumpySurface):
    """The Python operators of owners and views, forwarded to the registered table.

    Each forward operator calls ``table[key](self, other)``, each reflected one
    ``table[key](other, self)``; the result is whatever the implementation returns
    (with ``tenferro_ad``: a fresh value; the operands are borrowed, not consumed).
    No ``__eq__``/``__ne__``: identity equality and hashing stay.
    """

    __slots__ = ()

    def __add__(self, other: Any) -> Any:
        return _binary("add", "+", self, other)

    def __radd__(self, other: Any) -> Any:
        return _binary("add", "+", other, self)

    def __sub__(self, other: Any) -> Any:
        return _binary("sub", "-", self, other)

    def __rsub__(self, other: Any) -> Any:
        return _binary("sub", "-", other, self)

    def __mul__(self, other: Any) -> Any:
        return _binary("mul", "*", self, other)

    def __rmul__(self, other: Any) -> Any:
        return _binary("mul", "*", other, self)

    def __truediv__(self, other: Any) -> Any:
        return _binary("truediv", "/", self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return _binary("truediv", "/", other, self)

    def __pow__(self, other: Any, modulo: None = None) -> Any:
        if modulo is not None:
            raise DTypeError(
                "__pow__: argument 'modulo': pow() with a modulus is not supported on tenferro "
                "values"
            )
        return _binary("pow", "**", self, other)

    def __rpow__(self, other: Any) -> Any:
        return _binary("pow", "**", other, self)

    def __matmul__(self, other: Any) -> Any:
        return _binary("matmul", "@", self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return _binary("matmul", "@", other, self)

    def __neg__(self) -> Any:
        return _unary("neg", "unary -", self)

    def __abs__(self) -> Any:
        return _unary("abs", "abs()", self)

    def __lt__(self, other: Any) -> Any:
        return _binary("lt", "<", self, other)

    def __le__(self, other: Any) -> Any:
        return _binary("le", "<=", self, other)

    def __gt__(self, other: Any) -> Any:
        return _binary("gt", ">", self, other)

    def __ge__(self, other: Any) -> Any:
        return _binary("ge", ">=", self, other)


OPERATOR_METHODS: Final = tuple(
    name for name in vars(OperatorMixin) if name.startswith("__") and name.endswith("__")
    and callable(vars(OperatorMixin)[name])
)
"""The operator dunders every owner and view class inherits (for the API-parity pin)."""
