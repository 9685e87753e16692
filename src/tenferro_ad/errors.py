"""Every exception ``tenferro_ad`` raises.

Each class subclasses the builtin a user would catch.  Storage-level failures keep
their ``tenferro_storage.errors`` classes (``BorrowError``, ``ExtractError``,
``UseAfterMoveError``, ...); the classes here are about AD values, rules and tapes.

Errors that hand an object back follow the storage convention: the unchanged object is
``err.value`` and ``err.into_parts()`` returns ``(cause, value)``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as _np
from numpy.exceptions import AxisError as _NumpyAxisError

from tenferro_storage._dtypes import unsupported_message as _unsupported_message
from tenferro_storage.errors import DTypeError, ExtractError, TenferroError

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "AxisError",
    "BackwardError",
    "CheckpointError",
    "DonationError",
    "EngineUnavailableError",
    "ExecutionFailed",
    "Extract",
    "IndexOutOfBoundsError",
    "IntoValueError",
    "LinAlgError",
    "LoweringError",
    "MissingRuleError",
    "NotUnique",
    "NumpyFunctionError",
    "ReverseModeError",
    "ScenarioError",
    "TapeError",
    "UnsupportedDTypeError",
]

NOT_UNIQUE_MESSAGE = (
    "into_value: this value still has another direct owner (another handle, a tape "
    "residual, a checkpoint record, or an alias record over the same container), so it "
    "cannot be moved out; nothing was extracted and the handle is unchanged (it is "
    "err.value). tape.retained() lists what the tape keeps and why; drop the other "
    "handles, or call handle.duplicate_value() for an explicit, ledger-recorded copy"
)


class IntoValueError(TenferroError, RuntimeError):
    """Raised by ``EagerTensor.into_value()``; ``.value`` is the same, still usable handle.

    Two subclasses only: :class:`NotUnique` (checked first, before any group extraction)
    and :class:`Extract` (the group extraction itself failed).
    """

    value: Any

    def __init__(self, message: str, value: Any) -> None:
        super().__init__(message)
        self.value = value

    def into_parts(self) -> tuple[BaseException | str, Any]:
        """``(cause, handle)``: why it failed and the unchanged handle."""
        return str(self), self.value


class NotUnique(IntoValueError):
    """Something else still directly owns the value; G2 extraction was not attempted.

    The error is the same whoever the other owner is (a sibling handle, the tape, a
    checkpoint record, an alias record) and no side table of owners is kept.
    """

    def __init__(self, value: Any) -> None:
        super().__init__(NOT_UNIQUE_MESSAGE, value)


class Extract(IntoValueError):
    """The value was uniquely held but the group refused to move its owner out.

    ``.error`` is the :class:`tenferro_storage.errors.ExtractError` (e.g. another
    descriptor of the container aliases the allocation: a reshape/transpose/slice view).
    """

    error: ExtractError

    def __init__(self, value: Any, error: ExtractError) -> None:
        super().__init__(
            f"into_value: the value is uniquely held but its allocation cannot be moved "
            f"out of its retention group: {error}. Use handle.duplicate_value() for an "
            "explicit, ledger-recorded copy",
            value,
        )
        self.error = error

    def into_parts(self) -> tuple[BaseException | str, Any]:
        return self.error, self.value


class MissingRuleError(TenferroError, NotImplementedError):
    """A primitive has no rule of the requested kind for one of its arguments.

    ``.primitive``, ``.rule`` (``"vjp"`` or ``"jvp"``) and ``.argument`` (the index)
    name what is missing.
    """

    def __init__(self, primitive: str, rule: str, argument: int) -> None:
        super().__init__(
            f"{primitive}: no {rule.upper()} rule for argument {argument}. Register one with "
            f"tenferro_ad.extend.def{rule}({primitive!r}, ...) or mark the argument "
            "non-differentiable (None), or wrap the value in stop_gradient()"
        )
        self.primitive = primitive
        self.rule = rule
        self.argument = argument

    def __reduce__(self) -> tuple[Any, ...]:  # (pickle calls the constructor with these)
        return type(self), (self.primitive, self.rule, self.argument)


class ReverseModeError(TenferroError, ValueError):
    """Reverse-mode differentiation (``grad``, ``vjp``) reached a construct it cannot run
    backward: a ``while_loop`` (its trip count is known only when it runs), as in JAX.
    Raised when the cotangent reaches the loop; nothing has been accumulated for it."""


class LoweringError(TenferroError, NotImplementedError):
    """A traced program cannot be compiled for the XLA engine: one of its primitives has no
    lowering rule (``.primitive`` names it; the message shows its equation), or a rule
    produced the wrong type.  Raised before anything runs; there is no silent host
    fallback (``jit(..., engine="host")`` runs the program on the host)."""

    def __init__(self, message: str, primitive: str) -> None:
        super().__init__(message)
        self.primitive = primitive

    def __reduce__(self) -> tuple[Any, ...]:  # (pickle calls the constructor with these)
        return type(self), (str(self), self.primitive)


class EngineUnavailableError(TenferroError, RuntimeError):
    """``jit(..., engine=...)`` names an engine that is not available (``"xla"`` without
    jax installed, or an unknown name)."""


class TapeError(TenferroError, RuntimeError):
    """A tape was used in a state that does not allow it (e.g. a handle from another tape)."""


class BackwardError(TapeError):
    """``backward`` cannot run: the residuals were released by an earlier backward
    (pass ``keep=True`` to the first one), the loss is not on this tape, or its cotangent
    does not match."""


class CheckpointError(TapeError):
    """A checkpoint region cannot be recorded or differentiated: the region returned
    something other than handles, ``tape.checkpoint()`` was used outside ``with tape:``,
    or its boundary records were released by an earlier backward (pass ``keep=True``)."""


class ScenarioError(TenferroError, ValueError):
    """A ledger scenario file is malformed or its program cannot be resolved.

    The message names the file and the key (``deep_chain.toml: scenario[1].expect.copies.foo``)
    and says what was expected."""


class AxisError(TenferroError, _NumpyAxisError):
    """An ``axis`` argument is out of range for the value's rank.

    Subclasses ``numpy.exceptions.AxisError`` (so also ``ValueError`` and ``IndexError``),
    exactly like numpy and JAX; nothing is computed or recorded.  ``.axis`` is the axis as
    the caller passed it, ``.ndim`` the rank it was checked against, ``.operation`` the op.
    ``detail`` (optional) is said after numpy's words, in parentheses: which value the axis
    belongs to when the op takes several (``tensordot``'s ``axes`` pairs axes of ``a`` and
    ``b``).
    """

    operation: str
    detail: str | None

    def __init__(
        self, operation: str, axis: Any, ndim: int, what: str = "axis", *, detail: str | None = None
    ) -> None:
        _NumpyAxisError.__init__(self, axis, ndim, f"{operation}: argument {what!r}")
        self.operation = operation
        self.detail = detail

    def __str__(self) -> str:
        text = _NumpyAxisError.__str__(self)
        return text if self.detail is None else f"{text} ({self.detail})"


class ArgumentError(TenferroError, ValueError):
    """An op argument has a value the op cannot accept (an empty list of values, an axis on a
    0-d value, shapes that do not fit together, a bad shape).  The message names the op
    and the argument; nothing is computed or recorded."""


class DonationError(ArgumentError):
    """A donated argument (``jit(f, donate_argnums=...)``) cannot be written in place: no
    result of its shape and dtype is computed after its last read, it is returned as is,
    it is borrowed or not an owner the call can consume, or the engine refuses.  Raised
    before anything runs or is consumed; nothing is copied instead."""


class ArgumentTypeError(TenferroError, TypeError):
    """An op argument has a type the op cannot accept (a string axis, a float shape entry, an
    unsupported dtype object).  The message names the op and the argument; nothing is
    computed or recorded."""


class UnsupportedDTypeError(DTypeError, ArgumentTypeError):
    """A value passed to an op (a numpy array, a list, a numpy scalar, a DLPack array) has
    a dtype tenferro does not support: a string, bytes, object or datetime array, or a
    numeric dtype it does not store (``float16``, ``uint8``, ``int8``...).

    Every op raises this one class for it, before anything is imported, allocated or
    recorded, with one wording: ``"sin: argument 'x' has dtype <U1, which tenferro does not
    support (supported: bool, int32, int64, float32, float64, complex64, complex128)"`` --
    the public op and its parameter.  It is both a
    :class:`~tenferro_storage.errors.DTypeError` (what ``tenferro_storage`` raises for the
    same value, e.g. ``from_numpy``) and an :class:`ArgumentTypeError` (so also a
    ``TypeError``): catching either catches it.  ``.operation`` is the op, ``.argument``
    the argument as the message names it (``"argument 'x'"``, ``"argument 'xs'[1]"``),
    ``.dtype`` the refused numpy dtype."""

    operation: str
    argument: str
    dtype: Any

    def __init__(self, operation: str, argument: str, dtype: Any) -> None:
        super().__init__(_unsupported_message(f"{operation}: {argument}", dtype))
        self.operation = operation
        self.argument = argument
        self.dtype = dtype

    def __reduce__(self) -> tuple[Any, ...]:  # (pickle calls the constructor with these)
        return type(self), (self.operation, self.argument, self.dtype)

    @classmethod
    def of_leaf(cls, what: str, dtype: Any) -> UnsupportedDTypeError:
        """The error for a transform's leaf named ``what`` (``"jit: argument leaf 0"``: the
        op, then the argument). O(1)."""
        op, _, argument = what.partition(": ")
        return cls(op, argument or "an argument", dtype)


class IndexOutOfBoundsError(TenferroError, IndexError):
    """An index (``x[5]`` on an axis of extent 3, too many indices, an index array with an
    entry out of range) selects outside the value.  Subclasses ``IndexError`` as numpy's
    does; the message names the op and the index; nothing is computed or recorded."""


class LinAlgError(TenferroError, _np.linalg.LinAlgError):
    """A linear-algebra kernel failed on the values it was given (a singular matrix, a
    matrix that is not positive definite, no convergence).  Subclasses numpy's
    ``LinAlgError`` (so also ``ValueError``); the message names the op."""


class ExecutionFailed(TenferroError, RuntimeError):
    """A jitted program failed on its engine after admission (``RetiredFailed``) or its
    completion could not be proven (``CompletionUnproven``).  ``.cause`` is the runtime's
    error value.

    Non-donated arguments are unchanged (numpy arguments were imported, owners and views
    only read).  A donated owner (``donate_argnums``) that the failed program had not yet
    written is moved back into the caller's very ``Tensor`` object: unchanged and usable.
    One it had written holds what the program left, so it is *not* put back where a
    retry would silently compute on it: the caller's object stays consumed, the owner is
    handed over in ``.donated`` (argument leaf index -> owner) and ``.clobbered`` names
    those leaves.  After ``CompletionUnproven`` nothing comes back (the engine keeps
    every input for good) and ``.donated`` is empty.  Costs nothing beyond the failure:
    no copy, no allocation."""

    def __init__(
        self,
        message: str,
        cause: Any,
        donated: dict[int, Any] | None = None,
        clobbered: tuple[int, ...] = (),
    ) -> None:
        super().__init__(message)
        self.cause = cause
        self.donated: dict[int, Any] = donated or {}
        self.clobbered = clobbered


class NumpyFunctionError(TenferroError, TypeError):
    """A numpy function, ufunc method or keyword that tenferro_ad cannot run on handles.

    The message names the numpy function and, when it is a keyword, the argument;
    nothing is computed or recorded."""


def _reason(e: BaseException) -> str:
    """``e``'s message without the name of the internal read that raised it (``"shape: "``,
    ``"read_array: "``): a refused argument's error is named for the user's op and the
    argument instead. O(len(message))."""
    return re.sub(r"^[\w.]+: (?!argument)", "", str(e))
