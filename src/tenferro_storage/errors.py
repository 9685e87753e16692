"""Every exception the storage kernel raises.

Each class also subclasses the builtin a user would naturally catch, so that
``except ValueError`` still sees a bad layout and ``except TypeError`` still sees
an attempt to copy an owner.  Messages name the operation and the object (a span
identity such as ``alloc#12[0:96)``, a slot, a shape) and never a raw address.

Errors that hand an object back follow one convention: the unchanged object is
``err.value`` and ``err.into_parts()`` returns ``(cause, value)``.
"""

from __future__ import annotations

import enum
from typing import Any, Generic, TypeVar

T = TypeVar("T")

__all__ = [
    "AccessError",
    "AliasedOutputError",
    "AllocationFailedError",
    "BadIndexError",
    "BindError",
    "BorrowError",
    "ConversionError",
    "CopyForbiddenError",
    "DTypeError",
    "DeviceResidentError",
    "DisjointCause",
    "DisjointViewError",
    "DistributedError",
    "EngineError",
    "ExpiredBorrowError",
    "ExtractError",
    "FileAccessError",
    "FileFormatError",
    "GroupError",
    "IntoTensorError",
    "LayoutError",
    "OutputAccessError",
    "OutputExtractError",
    "OwnershipError",
    "RankError",
    "ReinterpretError",
    "SaveError",
    "ScopedOutputExtractError",
    "ScopedSubmitRejected",
    "ShardingError",
    "SubmitRejected",
    "TenferroError",
    "TransferError",
    "UseAfterMoveError",
]


def shown(value: object) -> str:
    """``value`` as an error message shows it: the repr of a number, a string, ``None`` or a
    short tuple or list of those, else only its type (never an object's raw address). O(1)."""
    plain = (int, float, complex, str, type(None))
    if isinstance(value, plain) and len(repr(value)) <= 80:
        return repr(value)
    if (
        isinstance(value, tuple | list)
        and len(value) <= 33
        and all(isinstance(v, plain) and len(repr(v)) <= 24 for v in value)
    ):
        return repr(value)
    kind = type(value).__name__
    return f"{'an' if kind[:1] in 'aeiouAEIOU' else 'a'} {kind}"


class TenferroError(Exception):
    """Root of every tenferro storage exception."""


class OwnershipError(TenferroError, TypeError):
    """Raised by ``copy.copy``, ``copy.deepcopy`` or pickling of an owner, claim or capability.

    Owners are unique; the only way to get a second owner of the same bytes is the
    explicit ``duplicate()``, which records a copy event.
    """


class UseAfterMoveError(TenferroError, RuntimeError):
    """Raised when an owner is used after a consuming call emptied it.

    The message names the operation that consumed the object.
    """


class BorrowError(TenferroError, RuntimeError):
    """Raised when a shared/exclusive borrow conflicts with one that is live.

    The message names the requested borrow, the blocking borrow and where the
    blocking borrow was created.  Consuming an owner while it is borrowed raises
    this too, and changes nothing.
    """


class ExpiredBorrowError(BorrowError):
    """Raised when a released view, guard or prepared access is used again."""


class DTypeError(TenferroError, TypeError):
    """Raised for an unknown or unsupported dtype name; the message names it."""


class LayoutError(TenferroError, ValueError):
    """Raised when a shape/strides/offset request fails validation.

    Attributes carry the whole request: ``operation``, ``shape``, ``strides``
    (in elements), ``offset`` (in elements), ``dtype`` and ``span`` (the resolved
    span identity, e.g. ``alloc#3[0:128)``), plus ``reason``.
    """

    def __init__(
        self,
        operation: str,
        reason: str,
        *,
        shape: tuple[int, ...] | None = None,
        strides: tuple[int, ...] | None = None,
        offset: int | None = None,
        dtype: str | None = None,
        span: str | None = None,
    ) -> None:
        self.operation = operation
        self.reason = reason
        self.shape = shape
        self.strides = strides
        self.offset = offset
        self.dtype = dtype
        self.span = span
        parts = [f"{operation}: {reason}"]
        request = ", ".join(
            f"{k}={v}"
            for k, v in (
                ("shape", shape),
                ("strides", strides),
                ("offset", offset),
                ("dtype", dtype),
                ("span", span),
            )
            if v is not None
        )
        if request:
            parts.append(f"(requested {request})")
        super().__init__(" ".join(parts))

    def __reduce__(self) -> tuple[Any, ...]:  # pickle rebuilds it from the whole request
        keywords = {k: getattr(self, k) for k in ("shape", "strides", "offset", "dtype", "span")}
        return _rebuild, (type(self), (self.operation, self.reason), keywords)



class BadIndexError(LayoutError, IndexError):
    """An index does not select inside the view: out of bounds, too many indices, more than
    one ellipsis, or not a basic index (ints, slices, ``...``, ``None``).  Both a
    ``LayoutError`` and an ``IndexError`` (what numpy raises); nothing is borrowed."""


class RankError(LayoutError, TypeError):
    """An operation needs a rank the value does not have (``len()`` of a 0-d view).  Both a
    ``LayoutError`` and a ``TypeError`` (what numpy raises)."""


class ConversionError(DTypeError, ValueError):
    """A value conversion would silently change values (NaN/inf or an out-of-range float into
    an integer dtype, a nonzero imaginary part into a real dtype).  Both a ``DTypeError``
    (``TypeError``) and a ``ValueError``; nothing is allocated, written or recorded."""

class AliasedOutputError(LayoutError):
    """Raised by ``kernel.adopt_output`` when the array is memory an existing value holds.

    A kernel returned one of its inputs (a read-only array from ``kernel.read_array``,
    or a live root's buffer or a view of it).  Adopting it would make a second owner of
    those bytes, so nothing is adopted or recorded.  ``kernel.materialize_output`` turns
    such an array into a fresh owner with one recorded ``MATERIALIZE`` copy.
    """


class _CarriesValue(TenferroError, Generic[T]):
    """Mixin for errors that hand the unchanged object back to the caller."""

    value: T
    cause: BaseException | str

    def __init__(self, message: str, value: T, cause: BaseException | str | None = None) -> None:
        super().__init__(message)
        self.value = value
        self.cause = cause if cause is not None else message

    def into_parts(self) -> tuple[BaseException | str, T]:
        """Return ``(cause, value)``: why it failed and the unchanged object."""
        return self.cause, self.value


class AccessError(_CarriesValue[Any], RuntimeError):
    """Raised when preparing host access fails; ``.value`` is the unchanged view."""


class ReinterpretError(_CarriesValue[Any], ValueError):
    """Raised when a complex<->real reinterpretation is refused.

    For the consuming owner conversions (``into_real``/``into_complex``) ``.value``
    is the original owner, unchanged; for view reinterpretation it is the view.
    """


class GroupError(TenferroError, LookupError):
    """Raised when a ``DescriptorSlot`` is invalid, foreign to the group, or vacant."""


class DisjointCause(enum.Enum):
    """Why ``AllocationGroup.split_mut`` refused a request.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (an enum member look-up).
    Raises: ValueError."""

    INVALID_SLOT = "invalid or empty descriptor slot"
    NON_INJECTIVE = "non-injective write layout"
    OVERLAP = "pairwise overlap"
    NOT_PROVABLY_DISJOINT = "not provably disjoint"


class DisjointViewError(TenferroError, ValueError):
    """Raised by ``split_mut`` when the requested views cannot be proven disjoint.

    ``.cause`` is a :class:`DisjointCause`; ``.slots`` names the offending slots.
    The group is unchanged.
    """

    def __init__(self, cause: DisjointCause, message: str, slots: tuple[Any, ...] = ()) -> None:
        super().__init__(f"split_mut: {cause.value}: {message}")
        self.cause = cause
        self.slots = slots
        self._message = message

    def __reduce__(self) -> tuple[Any, ...]:  # (pickle calls the constructor with these)
        return type(self), (self.cause, self._message, self.slots)


class ExtractError(TenferroError, RuntimeError):
    """Raised when moving an owner out of a group (or a ``Gradients`` bundle) is refused.

    ``.reason`` is ``"aliased"`` (another descriptor refers to the same
    allocation), ``"invalid_slot"`` (foreign or vacant slot; the ``GroupError`` is
    chained as ``__cause__``) or ``"non_injective"`` (the selected layout reaches
    one element from two coordinates, so it cannot become a writable owner).
    Nothing is changed and nothing is carried: the group still holds everything it
    held.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:  # (pickle calls the constructor with these)
        return type(self), (self.reason, str(self))


class IntoTensorError(ExtractError):
    """Raised by the consuming ``AllocationGroup.into_tensor`` when it is refused.

    The group was not consumed: ``.value`` is that group, unchanged and usable, and
    ``into_parts()`` returns ``(reason, group)``.  ``.reason`` is as for
    :class:`ExtractError` (never ``"aliased"``: ``into_tensor`` discards aliases).
    """

    def __init__(self, reason: str, message: str, value: Any) -> None:
        super().__init__(reason, message)
        self.value = value
        self.cause = reason

    def __reduce__(self) -> tuple[Any, ...]:  # (its value pickles only if the group does)
        return type(self), (self.reason, str(self), self.value)

    def into_parts(self) -> tuple[str, Any]:
        """Return ``(reason, group)``: why it failed and the unchanged group."""
        return self.reason, self.value


class CopyForbiddenError(TenferroError, RuntimeError):
    """Raised inside ``ledger.forbid_copies()`` by the first copy event.

    The message names the operation that would have copied; nothing was copied or
    allocated.
    """


class SaveError(TenferroError, TypeError):
    """Raised by ``save(path, tree)`` and ``load(path)`` for a ``path`` that is not a
    non-empty str or ``os.PathLike``, and by ``save`` for a tree it cannot write: a node
    other than dict, list, tuple or ``None`` (namedtuples and dataclasses included: convert
    them to dicts), a dict key that is not a str or int, or a leaf that is not an owner,
    view, numpy array or bool/int/float/complex/str.  The message names the leaf's path
    (``tree['w'][0]``); nothing is written."""


class FileAccessError(TenferroError, OSError):
    """Raised by ``save`` and ``load`` when the operating system refuses the file (missing,
    no permission, a full disk...).  ``errno`` and ``filename`` are the operating system's;
    the message names the operation and the argument ``path``.  A failed save leaves any
    existing file unchanged and no temporary file behind."""


class FileFormatError(TenferroError, ValueError):
    """Raised by ``load(path)`` for a file that is not a tenferro save file or is damaged
    (a missing member, a header that disagrees with the tree description, a dtype tenferro
    does not have, a size or CRC mismatch).  The message names the file and the member."""


# -- runtime (tenferro_storage.runtime) and providers (tenferro_storage.providers) ----------


class DeviceResidentError(TenferroError, RuntimeError):
    """Raised when host code reads or writes a value whose bytes live in a device domain.

    Device memory (for example the simulated device's, ``providers.SimulatedAsyncProvider``)
    is not host-visible: ``to_numpy``, ``item``, ``prepare_host``, ``borrow_arrays``,
    ``kernel.read_array`` and the operators refuse it (the prepared-access paths wrap this
    error in an ``AccessError`` that hands the view back).  The message names the
    operation, the allocation and its domain.  Copy the value to the host first with
    ``runtime.download(value)`` (one recorded ``TRANSFER``).  Nothing is changed.
    """


class TransferError(TenferroError, ValueError):
    """Raised by ``runtime.upload``/``runtime.download`` for a transfer that has no meaning:
    downloading a value that already lives on the host, or uploading to an engine that has
    no device memory.  Nothing is copied, allocated or recorded."""


class EngineError(TenferroError, LookupError):
    """Raised when an ``EngineId`` names no registered engine (outside a submission, where
    the same problem is a ``SubmitRejected`` carrying the inputs back)."""


class SubmitRejected(TenferroError, RuntimeError):
    """Raised by ``runtime.submit`` when a submission is refused *before admission*.

    Nothing was enqueued and nothing was consumed: ``.value`` is the exact
    ``ExecutionInputs`` object that was passed in, unchanged and still usable, and
    ``.cause`` is a ``runtime.SubmitError`` (kind + message).  ``into_parts()`` returns
    ``(cause, inputs)``.  Once a provider may have enqueued work, failures never raise
    this: they arrive as ``RetiredFailed`` or ``CompletionUnproven`` from ``wait()``.
    """

    def __init__(self, cause: Any, value: Any) -> None:
        super().__init__(f"{cause.operation}: submission rejected before admission: {cause}")
        self.cause = cause
        self.value = value

    def into_parts(self) -> tuple[Any, Any]:
        """Return ``(cause, inputs)``: why it was refused and the exact unadmitted inputs."""
        return self.cause, self.value


class ScopedSubmitRejected(SubmitRejected):
    """Raised by ``runtime.execute_scoped_read_only`` when the call is refused before
    admission (an asynchronous engine, a released view, an arity mismatch, ...).

    ``.value`` is the exact ``ScopedReadInputs`` package; the caller's views are still
    live and unchanged.
    """


class OutputAccessError(TenferroError, IndexError):
    """Raised by ``output(i)`` of an execution bundle for an index that names no output.

    Nothing is consumed or changed.
    """


class OutputExtractError(TenferroError, RuntimeError):
    """Raised by ``ExecutionBundle.into_output(i)`` when the consuming extraction is refused.

    ``.reason`` is ``"invalid_output"`` (no such output), ``"metadata_output"`` (the
    output is storage-free metadata) or ``"extract"`` (the group refused: a read-only,
    non-injective alias; the ``IntoTensorError`` is chained).  ``.value`` is the exact
    bundle, unconsumed and unchanged; ``into_parts()`` returns ``(reason, bundle)``.
    Nothing is copied.
    """

    def __init__(self, reason: str, message: str, value: Any) -> None:
        super().__init__(message)
        self.reason = reason
        self.value = value

    def into_parts(self) -> tuple[str, Any]:
        """Return ``(reason, bundle)``: why it failed and the exact, unconsumed bundle."""
        return self.reason, self.value


class ScopedOutputExtractError(OutputExtractError):
    """Raised by ``ScopedExecutionBundle.into_owned_output(i)`` when it is refused.

    Adds the reason ``"borrowed_output"``: the output is an input returned as is (a
    borrow of the caller's value), which can never become an owner.  ``.value`` is the
    exact scoped bundle; nothing is copied.
    """


class AllocationFailedError(TenferroError, MemoryError):
    """The host could not provide the memory a request asked for (e.g.
    ``allocate_storage(2**62)``).  Subclasses ``MemoryError``; nothing was allocated or
    recorded."""


class BindError(TenferroError, RuntimeError):
    """Raised by ``providers.bind_read``/``bind_write`` when the provider cannot bind.

    Binding comes before any enqueue-capable call, so the prepared payload is handed
    back: ``.value`` is the exact ``PreparedDeviceRead``/``PreparedDeviceWrite``,
    unchanged and still holding its borrow; ``into_parts()`` returns ``(cause, value)``.
    """

    def __init__(self, message: str, value: Any) -> None:
        super().__init__(message)
        self.cause = message
        self.value = value

    def into_parts(self) -> tuple[str, Any]:
        """Return ``(cause, prepared)``: why it failed and the exact prepared payload."""
        return self.cause, self.value


class ShardingError(TenferroError, ValueError):
    """Raised for a sharded value used where its layout does not fit: a mesh axis name the
    mesh lacks, a dimension a mesh axis does not divide, a value whose sharding differs
    from the one a sharded program was compiled for (reshard it explicitly), or a host
    read of shards this process cannot address.  The message names the operation and the
    argument.  Nothing is copied, allocated or recorded."""


class DistributedError(TenferroError, RuntimeError):
    """Raised when several processes cannot start together (``sharding.initialize``): a
    coordinator that cannot be reached or processes that did not join within the
    initialization timeout, or an initialization after the engines were discovered.  The
    message names the coordinator address, the process id and count, and the timeout."""


def _rebuild(cls: type[BaseException], args: tuple[Any, ...], keywords: dict[str, Any]) -> Any:
    """An error rebuilt by pickle from its constructor's arguments (``LayoutError``)."""
    return cls(*args, **keywords)
