"""Detached owning submission and scoped read-only execution (contract gate G3).

Detached: ``submit(engine, program, ExecutionInputs(group, bindings))`` either raises
``SubmitRejected`` carrying the exact, unchanged inputs (nothing was admitted) or returns
an :class:`ExecutionHandle`.  From admission on, the engine's worker owns the inputs,
the provider retirement bindings, the event, the roots and the provider context;
``handle.wait()`` returns exactly one terminal outcome: :class:`Completed`,
:class:`RetiredFailed` (the exact input owners back, after retirement) or
:class:`CompletionUnproven` (no owner; the provider keeps everything for good).
Dropping the handle only stops observation.

Scoped: ``execute_scoped_read_only(engine, program, ScopedReadInputs(views))`` runs on a
synchronous engine and returns after every piece of work has retired.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Sequence
from typing import Any, Final, Generic, TypeVar

import attrs
import numpy as np

from .._group import AllocationGroup, DescriptorSlot
from .._linear import Lender, NoCopy
from .._root import RootResource
from .._tensor import Tensor, TensorView
from ..errors import (
    GroupError,
    IntoTensorError,
    OutputAccessError,
    OutputExtractError,
    ScopedOutputExtractError,
    ScopedSubmitRejected,
    SubmitRejected,
    UseAfterMoveError,
)
from ._engine import EngineId, ExecutionProvider, lookup
from ._executable import ExecutableProgram, Program
from ._program import CompiledGraph, OutputKind, OutputMetadata

B = TypeVar("B")
I = TypeVar("I")  # noqa: E741


# -- causes ------------------------------------------------------------------------------


class SubmitErrorKind(enum.Enum):
    """Why a submission was refused before admission.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (an enum member look-up).
    Raises: ValueError."""

    UNKNOWN_ENGINE = "unknown engine"
    INVALID_PROGRAM = "not a program the engine runs"
    ARITY = "binding count does not match the program"
    INVALID_BINDING = "a binding does not name a live record (or view)"
    BORROWED = "the inputs are borrowed"
    CONSUMED = "the inputs were already consumed"
    DOMAIN = "an input lives in a domain the engine cannot access"
    UNSUPPORTED = "the engine does not support this submission mode"
    PROVIDER_REJECTED = "the provider refused before enqueue"
    BIND_FAILED = "the provider could not prepare or bind an input"
    DONATION = "a donated input cannot be written in place"
    CLOBBERED = "an input holds what a failed program wrote into it"


@attrs.frozen
class SubmitError:
    """The cause carried by ``SubmitRejected``: a kind, the operation and a message.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    kind: SubmitErrorKind
    operation: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.message}"


class ExecutionErrorKind(enum.Enum):
    """Why admitted work failed (completion was proven).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (an enum member look-up).
    Raises: ValueError."""

    KERNEL_FAILED = "a kernel raised"
    PROVIDER_FAILED = "the provider reported an execution failure"
    PANIC = "the worker panicked; completion was proven"


@attrs.frozen
class ExecutionError:
    """The cause in ``RetiredFailed``: kind, the failing step, the error type and message.

    The original exception object is not kept (its traceback would keep frames, and so
    owners, alive).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    kind: ExecutionErrorKind
    where: str
    error_type: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind.value} in {self.where}: {self.error_type}: {self.message}"


class CompletionErrorKind(enum.Enum):
    """Why completion could not be proven.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (an enum member look-up).
    Raises: ValueError."""

    PANIC = "the worker panicked and the event state is unknown"
    EVENT_TIMEOUT = "the provider event never reported completion"


@attrs.frozen
class CompletionError:
    """The cause in ``CompletionUnproven``.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    kind: CompletionErrorKind
    message: str

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.message}"


@attrs.frozen
class DiagnosticKey:
    """An observation label (never an authority): e.g. ``("engine", "sim-async:1")``.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    name: str
    value: str


# -- terminal outcomes ---------------------------------------------------------------------


@attrs.frozen(eq=False)
class Completed(Generic[B]):
    """The work retired successfully; ``bundle`` owns (or, scoped, borrows) the outputs.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    bundle: B


@attrs.frozen(eq=False)
class RetiredFailed(Generic[I]):
    """The work failed and completion was proven; ``inputs`` are the exact input owners
    (detached) or the exact borrowed package (scoped).

    ``clobbered``: the input positions (program input indices) of donated inputs the
    failed program had already written into -- their bytes are what the program left,
    not the caller's values.  The returned package carries the same mark
    (``ExecutionInputs.clobbered``) and ``submit`` refuses it while the mark is there, so
    a retry cannot silently compute on those bytes.  Empty when nothing was written
    (always for scoped calls, which never write).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    cause: ExecutionError
    inputs: I
    clobbered: tuple[int, ...] = ()


@attrs.frozen(eq=False)
class CompletionUnproven:
    """Completion could not be proven.  No owner comes back: the provider keeps the
    retirement bindings, event, roots and context permanently (see the provider's
    ``retained_records``).  There is no retry and no recovery path.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    cause: CompletionError
    diagnostic_keys: tuple[DiagnosticKey, ...]


# -- inputs ---------------------------------------------------------------------------------


def _move_group(group: AllocationGroup, operation: str) -> AllocationGroup:
    """Move the contents of ``group`` into a new group object (same slots); empty ``group``."""
    if not isinstance(group, AllocationGroup):
        raise TypeError(f"{operation}: expected an AllocationGroup, got {type(group).__name__}")
    group._exclusive_access(operation)  # live and unborrowed, or raise; nothing changes
    new = AllocationGroup.__new__(AllocationGroup)
    new._init_lender()
    new._gid = group._gid
    new._allocations = group._allocations
    new._refs = group._refs
    new._descs = group._descs
    new._rec_alloc = group._rec_alloc
    new._next = group._next
    group._moved_by = operation
    group._allocations = []
    group._refs = []
    group._descs = {}
    group._rec_alloc = {}
    return new


class ExecutionInputs(Lender):
    """The owning package of a detached submission: a group and the input bindings.

    Construction *moves* ``group`` (the caller's group object is emptied; later use
    raises ``UseAfterMoveError``) and records ``bindings``, one ``DescriptorSlot`` of
    the group per program input (a slot may repeat).  A borrowed group or a slot that
    does not resolve is refused (``BorrowError``/``GroupError``) and nothing changes.
    O(len(bindings)); no allocation, no copy.

    Cost: no allocation; no copy; no sync; no dispatch; O(bindings): moves ``group`` in.
    Raises: UseAfterMoveError, TypeError."""

    __slots__ = ("_bindings", "_clobbered", "_group")

    _group: AllocationGroup | None
    _bindings: tuple[DescriptorSlot, ...]
    _clobbered: tuple[int, ...]

    def __init__(self, group: AllocationGroup, bindings: Sequence[DescriptorSlot]) -> None:
        slots = tuple(bindings)
        if isinstance(group, AllocationGroup):
            for s in slots:
                group._resolve(s, "ExecutionInputs")  # GroupError; the group is unchanged
        self._group = _move_group(group, "ExecutionInputs")
        self._bindings = slots
        self._clobbered = ()
        self._init_lender()

    def _describe(self) -> str:
        return "ExecutionInputs"

    @property
    def group(self) -> AllocationGroup:
        """The owned group (borrow it to inspect the inputs; a borrow blocks submission)."""
        self._live("ExecutionInputs.group")
        assert self._group is not None
        return self._group

    @property
    def bindings(self) -> tuple[DescriptorSlot, ...]:
        """The input slots, one per program input."""
        self._live("ExecutionInputs.bindings")
        return self._bindings

    @property
    def clobbered(self) -> tuple[int, ...]:
        """Input positions whose bytes a failed program (a donating one) wrote over: this
        package came back in ``RetiredFailed`` holding what the program left there.
        ``submit`` refuses the package while any is marked; write the values again and
        call :meth:`clear_clobbered`, or take the bytes as they are with
        :meth:`into_parts`. O(1)."""
        self._live("ExecutionInputs.clobbered")
        return self._clobbered

    def clear_clobbered(self) -> None:
        """Declare the clobbered inputs valid again (the caller rewrote them or accepts
        their bytes): the explicit step that lets the package be submitted again. O(1).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: UseAfterMoveError."""
        self._live("ExecutionInputs.clear_clobbered")
        self._clobbered = ()

    def into_parts(self) -> tuple[AllocationGroup, tuple[DescriptorSlot, ...]]:
        """Consume the package into ``(group, bindings)``. O(1).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: UseAfterMoveError, BorrowError."""
        self._consume("ExecutionInputs.into_parts")
        group = self._group
        self._group = None
        assert group is not None
        return group, self._bindings

    # -- runtime internals --------------------------------------------------------------
    def _take(self, operation: str) -> ExecutionInputs:
        """Admission: move the group and bindings into a new package owned by the task."""
        self._consume(operation)
        pkg = ExecutionInputs.__new__(ExecutionInputs)
        pkg._init_lender()
        pkg._group = self._group
        pkg._bindings = self._bindings
        pkg._clobbered = self._clobbered
        self._group = None
        return pkg

    def _give_back(self, pkg: ExecutionInputs) -> None:
        """Undo ``_take`` once no work can touch the package any more (a failure proven to
        precede any enqueue, or an interrupt after synchronous work retired): the same
        group object, with the clobber mark the task set."""
        self._group = pkg._group
        self._clobbered = pkg._clobbered
        pkg._group = None
        pkg._moved_by = "rejection"
        self._unconsume()

    def _all_roots(self) -> tuple[RootResource, ...]:
        """Every distinct root the package's group holds (bound or not). O(allocations)."""
        group = self._group
        assert group is not None
        seen: dict[int, RootResource] = {}
        for storage in group._allocations:
            if storage is not None and storage._root is not None:
                seen.setdefault(id(storage._root), storage._root)
        return tuple(seen.values())

    def _roots(self) -> tuple[RootResource, ...]:
        """The distinct roots of the bound records, in binding order. O(bindings)."""
        group = self._group
        assert group is not None
        allocations, rec_alloc = group._allocations, group._rec_alloc
        seen: dict[int, RootResource] = {}
        for slot in self._bindings:
            storage = allocations[rec_alloc[slot._index]]
            assert storage is not None and storage._root is not None
            seen.setdefault(id(storage._root), storage._root)
        return tuple(seen.values())

    def __repr__(self) -> str:
        if self._moved_by is not None:
            return f"ExecutionInputs(<consumed by {self._moved_by}>)"
        return f"ExecutionInputs({self._group!r}, {len(self._bindings)} bindings)"


class ScopedReadInputs(NoCopy):
    """The borrowed package of a scoped read-only call: immutable views only.

    Holds references to the caller's ``TensorView`` objects (their borrows stay the
    caller's).  There is no writable binding shape: owners and mutable views are
    refused with ``TypeError``. O(len(views)).

    Cost: no allocation; no copy; no sync; no dispatch; O(views): holds references to the caller's
    views.
    Raises: TypeError."""

    __slots__ = ("_moved_by", "_views")

    _views: tuple[TensorView[Any, Any], ...]
    _moved_by: str | None

    def __init__(self, views: Sequence[TensorView[Any, Any]]) -> None:
        vs = tuple(views)
        for v in vs:
            if type(v) is not TensorView:
                raise TypeError(
                    f"ScopedReadInputs: expected read-only TensorView bindings, got "
                    f"{type(v).__name__}; pass owner.as_view() (scoped execution never writes)"
                )
        self._views = vs
        self._moved_by = None

    @property
    def views(self) -> tuple[TensorView[Any, Any], ...]:
        """The borrowed input views, in binding order."""
        if self._moved_by is not None:
            raise UseAfterMoveError(
                f"ScopedReadInputs.views: this package was consumed by {self._moved_by}"
            )
        return self._views

    def __repr__(self) -> str:
        return f"ScopedReadInputs({len(self._views)} views)"


# -- bundles ---------------------------------------------------------------------------------

ExecutionOutput = DescriptorSlot | OutputMetadata
"""One entry of a detached bundle's output map: a slot of its group, or metadata."""

OutputRef = TensorView[Any, Any] | OutputMetadata
"""What ``output(i)`` returns: a borrowed view, or the metadata itself."""


def _check_index(n: int, i: object, operation: str) -> int:
    if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < n:
        raise OutputAccessError(f"{operation}: output {i!r} does not exist (the bundle has {n})")
    return i


class ExecutionBundle(Lender):
    """The result of a completed detached execution: a group and its output map.

    The group holds the input records (identity outputs are their slots) and one new
    record per fresh output; repeated outputs name the same slot twice.  ``output(i)``
    borrows; ``into_output(i)`` consumes the whole bundle.  No copy anywhere.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (made by the API that returns it, never
    constructed directly).
    Raises: nothing."""

    __slots__ = ("_group", "_kinds", "_outputs")

    _group: AllocationGroup | None
    _outputs: tuple[ExecutionOutput, ...]
    _kinds: tuple[OutputKind, ...]

    def __init__(self) -> None:
        raise TypeError("ExecutionBundle is created by the runtime (Completed.bundle)")

    @classmethod
    def _make(
        cls,
        group: AllocationGroup,
        outputs: tuple[ExecutionOutput, ...],
        kinds: tuple[OutputKind, ...],
    ) -> ExecutionBundle:
        b = cls.__new__(cls)
        b._init_lender()
        b._group = group
        b._outputs = outputs
        b._kinds = kinds
        return b

    def _describe(self) -> str:
        return "ExecutionBundle"

    def __len__(self) -> int:
        self._live("len(ExecutionBundle)")
        return len(self._outputs)

    @property
    def outputs(self) -> tuple[ExecutionOutput, ...]:
        """The output map: a group slot or metadata per output."""
        self._live("ExecutionBundle.outputs")
        return self._outputs

    @property
    def kinds(self) -> tuple[OutputKind, ...]:
        """The kind of each output (fresh, identity, repeated, metadata)."""
        self._live("ExecutionBundle.kinds")
        return self._kinds

    @property
    def group(self) -> AllocationGroup:
        """The group holding every tensor output (and the rest of the inputs)."""
        self._live("ExecutionBundle.group")
        assert self._group is not None
        return self._group

    def output(self, i: int) -> OutputRef:
        """Output ``i`` borrowed: a ``TensorView`` under a shared borrow of the bundle's group,
        or the ``OutputMetadata``.  O(1), no copy.  ``OutputAccessError`` for a bad index.

        Cost: no allocation; no copy; no sync; no dispatch; O(1): one shared borrow of the group.
        Raises: OutputAccessError, UseAfterMoveError, BorrowError (a mutable view is live)."""
        self._live("ExecutionBundle.output")
        out = self._outputs[_check_index(len(self._outputs), i, "ExecutionBundle.output")]
        if isinstance(out, OutputMetadata):
            return out
        assert self._group is not None
        return self._group.view(out)

    def into_output(self, i: int) -> Tensor[Any, Any]:
        """Consume the bundle into the owner of output ``i``.

        Delegates to ``AllocationGroup.into_tensor``: repeated and duplicate aliases of
        that output, the rest of the group and the output map disappear together.  On
        refusal raises ``OutputExtractError`` whose ``.value`` is this exact bundle,
        unconsumed (``"invalid_output"``, ``"metadata_output"``, ``"extract"``); a
        borrowed bundle raises ``BorrowError``.  No copy. O(allocations).

        Cost: no allocation; no copy; no sync; no dispatch; O(allocations): the other records go,
        and an allocation nothing else refers to is released.
        Raises: OutputExtractError, BorrowError (a view of the group is live), UseAfterMoveError."""
        operation = "ExecutionBundle.into_output"
        self._live(operation)
        n = len(self._outputs)
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < n:
            raise OutputExtractError(
                "invalid_output",
                f"{operation}: output {i!r} does not exist (the bundle has {n})",
                self,
            )
        out = self._outputs[i]
        if isinstance(out, OutputMetadata):
            raise OutputExtractError(
                "metadata_output",
                f"{operation}: output {i} is storage-free metadata ({out.value!r}); read it with "
                "output(i)",
                self,
            )
        group = self._group
        assert group is not None
        try:
            tensor = group.into_tensor(out)
        except IntoTensorError as exc:
            raise OutputExtractError("extract", f"{operation}: output {i}: {exc}", self) from exc
        self._moved_by = operation
        self._group = None
        self._outputs = ()
        return tensor

    def into_group(self) -> tuple[AllocationGroup, tuple[ExecutionOutput, ...]]:
        """Consume the bundle into its group and output map (to keep every output, or to
        resubmit the group).  A borrowed bundle raises ``BorrowError``. O(1), no copy.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: BorrowError, UseAfterMoveError."""
        operation = "ExecutionBundle.into_group"
        self._live(operation)
        group = self._group
        assert group is not None
        group._exclusive_access(operation)
        self._moved_by = operation
        self._group = None
        outputs, self._outputs = self._outputs, ()
        return group, outputs

    def __repr__(self) -> str:
        if self._moved_by is not None:
            return f"ExecutionBundle(<consumed by {self._moved_by}>)"
        kinds = ", ".join(k.value for k in self._kinds)
        return f"ExecutionBundle([{kinds}])"


class ScopedExecutionBundle(Lender):
    """The result of a completed scoped call.

    Identity and repeated inputs come back *borrowed* (views bounded by the caller's
    borrows), fresh results are *owned* by the bundle's group, metadata is storage-free.
    ``output(i)`` reborrows any tensor output as a view; ``into_owned_output(i)``
    succeeds only for owned outputs.  Nothing is copied.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (made by the API that returns it, never
    constructed directly).
    Raises: nothing."""

    __slots__ = ("_kinds", "_outputs", "_owned")

    _owned: AllocationGroup | None
    _outputs: tuple[TensorView[Any, Any] | DescriptorSlot | OutputMetadata, ...]
    _kinds: tuple[OutputKind, ...]

    def __init__(self) -> None:
        raise TypeError("ScopedExecutionBundle is created by the runtime (Completed.bundle)")

    @classmethod
    def _make(
        cls,
        owned: AllocationGroup,
        outputs: tuple[TensorView[Any, Any] | DescriptorSlot | OutputMetadata, ...],
        kinds: tuple[OutputKind, ...],
    ) -> ScopedExecutionBundle:
        b = cls.__new__(cls)
        b._init_lender()
        b._owned = owned
        b._outputs = outputs
        b._kinds = kinds
        return b

    def _describe(self) -> str:
        return "ScopedExecutionBundle"

    def __len__(self) -> int:
        self._live("len(ScopedExecutionBundle)")
        return len(self._outputs)

    @property
    def kinds(self) -> tuple[OutputKind, ...]:
        """The kind of each output."""
        self._live("ScopedExecutionBundle.kinds")
        return self._kinds

    def is_borrowed(self, i: int) -> bool:
        """Whether output ``i`` is a borrow of a caller input (identity or repeated input).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: OutputAccessError, UseAfterMoveError."""
        self._live("ScopedExecutionBundle.is_borrowed")
        out = self._outputs[_check_index(len(self._outputs), i, "ScopedExecutionBundle")]
        return isinstance(out, TensorView)

    def output(self, i: int) -> OutputRef:
        """Output ``i`` as a view (a reborrow: of the caller's value for borrowed outputs,
        of the owned group for fresh ones) or its metadata.  O(1), no copy.

        Cost: no allocation; no copy; no sync; no dispatch; O(1): one shared reborrow.
        Raises: OutputAccessError, UseAfterMoveError."""
        self._live("ScopedExecutionBundle.output")
        out = self._outputs[_check_index(len(self._outputs), i, "ScopedExecutionBundle.output")]
        if isinstance(out, OutputMetadata):
            return out
        if isinstance(out, TensorView):
            return out.as_view()
        assert self._owned is not None
        return self._owned.view(out)

    def into_owned_output(self, i: int) -> Tensor[Any, Any]:
        """Consume the bundle into the owner of the *owned* output ``i``.

        Borrowed outputs are refused (``"borrowed_output"``), metadata too
        (``"metadata_output"``); the ``ScopedOutputExtractError`` carries this exact
        bundle and nothing is copied.  On success the borrowed views, the other owned
        records and the output map are dropped together. O(allocations).

        Cost: no allocation; no copy; no sync; no dispatch; O(allocations): the borrowed outputs'
        borrows end, and an owned allocation nothing else refers to is released.
        Raises: ScopedOutputExtractError, BorrowError (a view of it is live), UseAfterMoveError."""
        operation = "ScopedExecutionBundle.into_owned_output"
        self._live(operation)
        n = len(self._outputs)
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < n:
            raise ScopedOutputExtractError(
                "invalid_output",
                f"{operation}: output {i!r} does not exist (the bundle has {n})",
                self,
            )
        out = self._outputs[i]
        if isinstance(out, TensorView):
            raise ScopedOutputExtractError(
                "borrowed_output",
                f"{operation}: output {i} is an input returned as is (a borrow of the caller's "
                "value), not an owner; read it with output(i) or duplicate() it explicitly",
                self,
            )
        if isinstance(out, OutputMetadata):
            raise ScopedOutputExtractError(
                "metadata_output",
                f"{operation}: output {i} is storage-free metadata ({out.value!r})",
                self,
            )
        owned = self._owned
        assert owned is not None
        try:
            tensor = owned.into_tensor(out)
        except IntoTensorError as exc:
            raise ScopedOutputExtractError("extract", f"{operation}: {exc}", self) from exc
        borrowed = [o for o in self._outputs if isinstance(o, TensorView)]
        self._moved_by = operation
        self._owned = None
        self._outputs = ()
        for v in borrowed:
            v.release()
        return tensor

    def into_owned_group(
        self,
    ) -> tuple[AllocationGroup, tuple[TensorView[Any, Any] | DescriptorSlot | OutputMetadata, ...]]:
        """Consume the bundle into its owned group and output map, to keep *every* fresh
        output (``into_owned_output`` keeps one): each fresh output is a slot of the group
        (``AllocationGroup.try_extract`` moves its owner out; a repeated one names the same
        slot again), a borrowed output is its ``TensorView`` (the caller releases it), a
        metadata output its ``OutputMetadata``.  A borrowed bundle raises ``BorrowError``
        and nothing changes.  No copy, no allocation. O(1).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: BorrowError, UseAfterMoveError."""
        operation = "ScopedExecutionBundle.into_owned_group"
        self._live(operation)
        owned = self._owned
        assert owned is not None
        owned._exclusive_access(operation)
        self._moved_by = operation
        self._owned = None
        outputs, self._outputs = self._outputs, ()
        return owned, outputs

    def release(self) -> None:
        """End the borrows of the borrowed outputs now (the owned group is dropped too). O(n).

        Idempotent; the fresh outputs' allocations are released unless an owner was taken out.

        Cost: no allocation; no copy; no sync; no dispatch; O(outputs).
        Raises: nothing."""
        if self._moved_by is None:
            self._moved_by = "ScopedExecutionBundle.release"
            for o in self._outputs:
                if isinstance(o, TensorView):
                    o.release()
            self._owned = None
            self._outputs = ()

    def __enter__(self) -> ScopedExecutionBundle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        if self._moved_by is not None:
            return f"ScopedExecutionBundle(<consumed by {self._moved_by}>)"
        kinds = ", ".join(k.value for k in self._kinds)
        return f"ScopedExecutionBundle([{kinds}])"


ExecutionOutcome = Completed[ExecutionBundle] | RetiredFailed[ExecutionInputs] | CompletionUnproven
ScopedExecutionOutcome = Completed[ScopedExecutionBundle] | RetiredFailed[ScopedReadInputs]


# -- handle ----------------------------------------------------------------------------------


class OutcomeCell:
    """Where a worker publishes the terminal outcome (thread-safe, written once)."""

    __slots__ = ("_done", "_outcome")

    def __init__(self) -> None:
        self._done = threading.Event()
        self._outcome: ExecutionOutcome | None = None

    def publish(self, outcome: ExecutionOutcome) -> None:
        if self._done.is_set():
            raise RuntimeError("OutcomeCell.publish: a terminal outcome was already published")
        self._outcome = outcome
        self._done.set()


class ExecutionHandle(NoCopy):
    """Observation of one admitted detached execution.

    ``wait()`` consumes the handle and returns the terminal outcome; dropping the
    handle (or ``detach()``) only stops observation: the engine's worker keeps every
    owner, binding, event, root and context until the terminal outcome, and drops the
    outcome's owners itself when nobody observes it.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (made by the API that returns it, never
    constructed directly).
    Raises: nothing."""

    __slots__ = ("_cell", "_moved_by", "engine")

    engine: EngineId
    _cell: OutcomeCell | None
    _moved_by: str | None

    def __init__(self) -> None:
        raise TypeError("ExecutionHandle is returned by runtime.submit()")

    @classmethod
    def _make(cls, engine: EngineId, cell: OutcomeCell) -> ExecutionHandle:
        h = cls.__new__(cls)
        h.engine = engine
        h._cell = cell
        h._moved_by = None
        return h

    def _live_cell(self, operation: str) -> OutcomeCell:
        cell = self._cell
        if cell is None:
            raise UseAfterMoveError(
                f"{operation}: this ExecutionHandle was consumed by {self._moved_by}"
            )
        return cell

    def done(self) -> bool:
        """Whether the terminal outcome is available (never blocks). O(1).

        Cost: no allocation; no copy; no sync (an XLA engine's ``done()`` does not drive
        completion: it turns true once the reaper or a ``wait()`` retired the work); no dispatch;
        O(1).
        Raises: UseAfterMoveError."""
        return self._live_cell("ExecutionHandle.done")._done.is_set()

    def wait(self, timeout: float | None = None) -> ExecutionOutcome:
        """Block until the terminal outcome and return it, consuming the handle.

        A wait is a synchronization point, never a copy.  With ``timeout`` (seconds)
        raises ``TimeoutError`` if the outcome is not ready; the handle stays usable.

        Cost: no allocation; no copy; synchronizes: blocks until the work retired, at most
        ``timeout`` seconds (on an XLA engine a waiter that comes before the reaper retires
        the work itself once its result buffers are ready); no dispatch; O(1) besides the
        wait.
        Raises: TimeoutError (the handle stays usable), UseAfterMoveError."""
        cell = self._live_cell("ExecutionHandle.wait")
        if not cell._done.wait(timeout):
            raise TimeoutError(
                f"ExecutionHandle.wait: no terminal outcome from {self.engine} within "
                f"{timeout} s; the handle is unchanged (wait again, or drop it to detach)"
            )
        self._moved_by = "ExecutionHandle.wait"
        outcome = cell._outcome
        assert outcome is not None
        cell._outcome = None
        self._cell = None
        return outcome

    def detach(self) -> None:
        """Stop observing (the same as dropping the handle). O(1).

        Cost: no allocation; no copy; no sync (the work still runs to its outcome, whose
        owners are then dropped unobserved); no dispatch; O(1).
        Raises: UseAfterMoveError."""
        self._live_cell("ExecutionHandle.detach")
        self._moved_by = "ExecutionHandle.detach"
        self._cell = None

    def __repr__(self) -> str:
        if self._moved_by is not None:
            return f"ExecutionHandle({self.engine}, <consumed by {self._moved_by}>)"
        state = "done" if self._live_cell("repr")._done.is_set() else "pending"
        return f"ExecutionHandle({self.engine}, {state})"


# -- validation shared by every engine -------------------------------------------------------

_SUBMIT: Final = "runtime.submit"
_SCOPED: Final = "runtime.execute_scoped_read_only"


def _detached_cause(
    provider: ExecutionProvider | None,
    engine: object,
    program: object,
    inputs: ExecutionInputs,
) -> SubmitError | None:
    def err(kind: SubmitErrorKind, message: str) -> SubmitError:
        return SubmitError(kind, _SUBMIT, message)

    if provider is None:
        return err(SubmitErrorKind.UNKNOWN_ENGINE, f"no engine {engine} is registered")
    if not isinstance(program, CompiledGraph | ExecutableProgram):
        return err(SubmitErrorKind.INVALID_PROGRAM, f"got {type(program).__name__}")
    if not provider.accepts(program):
        return err(SubmitErrorKind.INVALID_PROGRAM, _foreign(engine, program))
    if inputs._moved_by is not None:
        return err(SubmitErrorKind.CONSUMED, f"consumed by {inputs._moved_by}")
    if inputs._clobbered:
        return err(
            SubmitErrorKind.CLOBBERED,
            f"input(s) {list(inputs._clobbered)} hold what a failed program wrote into them "
            "(RetiredFailed.clobbered); write the values again and call "
            "inputs.clear_clobbered(), or build a new package",
        )
    group = inputs._group
    assert group is not None
    if group._exclusive is not None or group._shared:
        return err(
            SubmitErrorKind.BORROWED,
            f"the input group is borrowed ({group._blocker()}); release its views first",
        )
    if len(inputs._bindings) != program.n_inputs:
        return err(
            SubmitErrorKind.ARITY,
            f"{program.name or 'the program'} takes {program.n_inputs} input(s), "
            f"{len(inputs._bindings)} binding(s) given",
        )
    for k, slot in enumerate(inputs._bindings):
        try:
            group._resolve(slot, _SUBMIT)
        except GroupError as exc:
            return err(SubmitErrorKind.INVALID_BINDING, f"binding {k}: {exc}")
    if program.donated:
        cause = _donation_cause(provider, engine, program, inputs)
        if cause is not None:
            return err(SubmitErrorKind.DONATION, cause)
    names = provider.domain_names()
    for root in inputs._roots():
        if root.provider.placement not in names:
            return err(
                SubmitErrorKind.DOMAIN,
                f"alloc#{root.alloc_id} lives in domain {root.provider.placement!r}, which "
                f"{engine} cannot access (it reaches {sorted(names)}); move it with "
                "runtime.download(value) (to the host) or runtime.upload(engine, value)",
            )
    return None


def _foreign(engine: object, program: Program) -> str:
    kind = (
        f"a {program.engine_kind} executable" if type(program) is ExecutableProgram
        else "a CompiledGraph (host kernels)"
    )
    return (
        f"{engine} does not run {kind} ({program.name or 'program'}); an engine runs only "
        "its own program kind and never falls back to another's kernels"
    )


def _donation_cause(
    provider: ExecutionProvider, engine: object, program: Program, inputs: ExecutionInputs
) -> str | None:
    """Why the donated inputs of ``program`` cannot be written in place (``None``: they can).

    The provider must declare ``supports_donation``; a donated binding must be the only
    binding of its record and the only record of its allocation (nothing else in the
    package sees the bytes it overwrites) and its layout must be writable."""
    if not getattr(provider, "supports_donation", False):
        return f"{engine} does not write into donated inputs"
    group = inputs._group
    assert group is not None
    bindings = inputs._bindings
    for k in program.donated:
        index = bindings[k]._index
        if sum(1 for b in bindings if b._index == index) != 1:
            return f"input {k} is donated but its record is bound to another input too"
        a = group._rec_alloc[index]
        if group._refs[a] != 1:
            return (
                f"input {k} is donated but {group._refs[a] - 1} other record(s) of the group "
                "refer to its allocation"
            )
        desc = group._descs[index]
        assert desc is not None
        if type(desc.buffer) is np.ndarray and not desc.array().flags.writeable:
            return f"input {k} is donated but its layout cannot be written"
    return None


def submit(engine: EngineId, program: Program, inputs: ExecutionInputs) -> ExecutionHandle:
    """Submit ``program`` over ``inputs`` to the caller-selected ``engine`` (detached, owning).

    Validation and planning come first; any refusal raises ``SubmitRejected`` whose
    ``into_parts()`` gives back the cause and this exact, unchanged ``inputs`` object
    (nothing was admitted, nothing enqueued); a package marked ``clobbered`` by a failed
    donating run is refused the same way.  Otherwise ``inputs`` is consumed and an
    :class:`ExecutionHandle` is returned; every later failure of any exception type
    arrives through ``handle.wait()`` -- except an interrupt (a ``BaseException`` that is
    not an ``Exception``: ``KeyboardInterrupt``, ``SystemExit``) raised in the caller's own
    thread, which propagates after the work is accounted for: once no work can touch the
    package any more (nothing was enqueued, or the synchronous host engine's work retired)
    this exact ``inputs`` object holds the package again (``clobbered`` set for donated
    inputs already written); otherwise the engine's reaper retires it as for a dropped
    handle.

    Cost: allocates the program's fresh outputs when it runs; no copy (inputs move in); no
    sync (``wait()`` synchronizes); dispatches through ``engine``'s provider;
    O(bindings + allocations) checks plus the provider's admission, and the program's
    work when the engine runs it before returning (the synchronous host engine).
    Raises: SubmitRejected."""
    if not isinstance(inputs, ExecutionInputs):
        raise TypeError(f"{_SUBMIT}: expected ExecutionInputs, got {type(inputs).__name__}")
    provider = lookup(engine)
    cause = _detached_cause(provider, engine, program, inputs)
    if cause is not None:
        raise SubmitRejected(cause, inputs)
    assert provider is not None
    return provider.submit_detached(engine, program, inputs)


def execute_scoped_read_only(
    engine: EngineId, program: Program, inputs: ScopedReadInputs
) -> ScopedExecutionOutcome:
    """Run ``program`` over borrowed read-only ``inputs`` synchronously to retirement.

    Only synchronous engines (the host) and engines that retire scoped work before
    returning (``retires_scoped``: the XLA engine) accept it; any other asynchronous
    engine, an unknown
    engine, a wrong arity or a released view raise ``ScopedSubmitRejected`` carrying
    this exact package before anything is admitted.  Returns ``Completed`` (a
    :class:`ScopedExecutionBundle`) or ``RetiredFailed`` (this package back); either
    way, all work has retired before the return.  No input is copied.

    Cost: allocates the program's fresh outputs; no copy; synchronizes (retires before returning);
    dispatches through ``engine``'s provider; O(the program's work).
    Raises: ScopedSubmitRejected."""
    if not isinstance(inputs, ScopedReadInputs):
        raise TypeError(f"{_SCOPED}: expected ScopedReadInputs, got {type(inputs).__name__}")
    provider = lookup(engine)

    def reject(kind: SubmitErrorKind, message: str) -> ScopedSubmitRejected:
        return ScopedSubmitRejected(SubmitError(kind, _SCOPED, message), inputs)

    if provider is None:
        raise reject(SubmitErrorKind.UNKNOWN_ENGINE, f"no engine {engine} is registered")
    if not (provider.synchronous or provider.retires_scoped):
        raise reject(
            SubmitErrorKind.UNSUPPORTED,
            f"{engine} is asynchronous: borrowed work could outlive the call. Use the "
            "detached submit() with owning ExecutionInputs, or a synchronous (host) engine",
        )
    if not isinstance(program, CompiledGraph | ExecutableProgram):
        raise reject(SubmitErrorKind.INVALID_PROGRAM, f"got {type(program).__name__}")
    if not provider.accepts(program):
        raise reject(SubmitErrorKind.INVALID_PROGRAM, _foreign(engine, program))
    if inputs._moved_by is not None:
        raise reject(SubmitErrorKind.CONSUMED, f"consumed by {inputs._moved_by}")
    if program.donated:
        raise reject(
            SubmitErrorKind.DONATION,
            f"{program.name or 'the program'} writes into donated inputs {program.donated}; "
            "borrowed views are never written: submit() it with owning ExecutionInputs",
        )
    if len(inputs._views) != program.n_inputs:
        raise reject(
            SubmitErrorKind.ARITY,
            f"{program.name or 'the program'} takes {program.n_inputs} input(s), "
            f"{len(inputs._views)} view(s) given",
        )
    for k, v in enumerate(inputs._views):
        if v._lender is None:
            raise reject(SubmitErrorKind.INVALID_BINDING, f"view {k} was released ({v._ended})")
    names = provider.domain_names()
    for k, v in enumerate(inputs._views):
        root = v._storage._root
        if root is not None and root.provider.placement not in names:
            raise reject(
                SubmitErrorKind.DOMAIN,
                f"view {k} ({v._storage.span}) lives in domain {root.provider.placement!r}, "
                f"which {engine} cannot access; download it first (runtime.download)",
            )
    return provider.execute_scoped(engine, program, inputs)


# -- helpers for providers -------------------------------------------------------------------


def detached_bundle(
    program: Program, package: ExecutionInputs, fresh: dict[int, Tensor[Any, Any]]
) -> ExecutionBundle:
    """Build the completed bundle: the package's group plus one record per fresh output.

    The package is consumed only once the bundle exists: if building it raises, the
    records inserted so far are taken out again (and dropped) and the package is whole."""
    group, bindings = package._group, package._bindings
    assert group is not None
    slots: dict[int, DescriptorSlot] = {}
    inserted: list[DescriptorSlot] = []
    outputs: list[ExecutionOutput] = []
    try:
        for out in program.outputs:
            if out.kind is OutputKind.METADATA:
                assert out.metadata is not None
                outputs.append(out.metadata)
                continue
            v = out.value
            assert v is not None
            slot = slots.get(v)
            if slot is None:
                src = v if v < program.n_inputs else program.backing_input(v)
                if src is not None:
                    slot = bindings[src]
                else:
                    slot = group.insert(fresh.pop(v))
                    inserted.append(slot)
                slots[v] = slot
            outputs.append(slot)
    except BaseException:
        for slot in inserted:
            group.try_extract(slot)
        raise
    package.into_parts()
    return ExecutionBundle._make(group, tuple(outputs), program.output_kinds)


def scoped_bundle(
    program: CompiledGraph, inputs: ScopedReadInputs, fresh: dict[int, Tensor[Any, Any]]
) -> ScopedExecutionBundle:
    """Build the completed scoped bundle: borrowed inputs, owned fresh outputs, metadata."""
    owned = AllocationGroup()
    slots: dict[int, DescriptorSlot] = {}
    outputs: list[TensorView[Any, Any] | DescriptorSlot | OutputMetadata] = []
    try:
        for out in program.outputs:
            if out.kind is OutputKind.METADATA:
                assert out.metadata is not None
                outputs.append(out.metadata)
                continue
            v = out.value
            assert v is not None
            if v < program.n_inputs:
                outputs.append(inputs._views[v].as_view())
                continue
            slot = slots.get(v)
            if slot is None:
                slot = slots[v] = owned.insert(fresh.pop(v))
            outputs.append(slot)
    except BaseException:
        for o in outputs:  # the reborrows made so far end; the caller's views stay
            if isinstance(o, TensorView):
                o.release()
        raise
    return ScopedExecutionBundle._make(owned, tuple(outputs), program.output_kinds)


def execution_error(kind: ExecutionErrorKind, where: str, exc: BaseException) -> ExecutionError:
    """An :class:`ExecutionError` describing ``exc`` (the exception object is not kept)."""
    return ExecutionError(kind, where, type(exc).__name__, str(exc))
