"""The runtime: engines, the program format, detached and scoped submission (G3).

Engines
    ``engines()`` lists every registered engine as :class:`EngineInfo` (id, access
    endpoint, accessible allocation domains, ``synchronous``).  Every executing call
    takes the :class:`EngineId` the caller selected; nothing assumes an engine 0.  The
    host engine (``host:*``, synchronous) and a simulated asynchronous engine
    (``sim-async:*``) are always registered; ``register_engine(provider)`` adds more.

Program format (what traced AD compiles into)
    A :class:`CompiledGraph` is frozen data, validated once at construction:

    * ``n_inputs``: value slots ``0 .. n_inputs-1`` are the inputs, in binding order
      (detached: ``ExecutionInputs.bindings``; scoped: ``ScopedReadInputs.views``).
    * ``n_values``: total number of value slots; every slot ``>= n_inputs`` is defined by
      exactly one instruction or one constant, before any instruction reads it.
    * ``constants``: a tuple of :class:`Constant` ``(slot, value)``: program-owned
      read-only numpy arrays or scalars (traced literals).  No ledger storage, never
      released, never an output (return a copy made by an instruction instead).
    * ``instructions``: a tuple of :class:`Instruction` ``(kernel, inputs, outputs,
      params, release_after, name)``, executed in order.  The call is
      ``kernel(*arrays_of(inputs), **dict(params))``: positional read-only numpy arrays,
      static keyword parameters (``params`` is a tuple of sorted ``(name, value)``
      pairs).  The kernel returns one fresh C-contiguous numpy array (or numpy scalar)
      per output slot — a tuple when ``len(outputs) != 1``.  Each result becomes a new
      owner (one ``OPERATION_OUTPUT`` allocation); a result that aliases an input is
      refused (``LayoutError``), never adopted.  ``release_after`` lists the intermediate
      slots whose last use is this instruction; they are dropped right after it.  Every
      intermediate (not an input, not an output) is released exactly once.
      Optional ``into``: the result is written (``out=``) into the buffer of a slot
      released at or before the instruction, or of a donated input -- no allocation.
    * ``donated``: input slots a detached submission lets instructions overwrite (the
      package owns them; submission refuses, ``SubmitErrorKind.DONATION``, when the
      engine cannot or another binding or record sees their bytes; scoped execution
      refuses any donating program).  An output held in a donated input's buffer is
      that input's record in the bundle.
    * ``outputs``: a tuple of :class:`ProgramOutput` ``(kind, value, metadata)`` with
      :class:`OutputKind` ``FRESH`` (an instruction's value), ``IDENTITY`` (an input slot
      returned as is), ``REPEATED`` (a value already returned by an earlier output) or
      ``METADATA`` (storage-free :class:`OutputMetadata`, ``value`` is ``None``).

    :class:`ProgramBuilder` writes such programs by hand and computes kinds and release
    lists; ``str(program)`` prints it.  :func:`run_program` is the interpreter every
    engine shares.

Detached owning submission
    ``submit(engine, program, ExecutionInputs(group, bindings))`` -> :class:`ExecutionHandle`
    or ``SubmitRejected`` (``into_parts()`` -> ``(SubmitError, the exact inputs)``).
    ``handle.wait()`` -> :class:`Completed` ``(bundle)`` | :class:`RetiredFailed`
    ``(cause, inputs)`` | :class:`CompletionUnproven` ``(cause, diagnostic_keys)``.
    Completed bundles: ``output(i)`` borrows, ``into_output(i)`` consumes.

Scoped read-only execution
    ``execute_scoped_read_only(engine, program, ScopedReadInputs(views))`` on a
    synchronous engine only -> ``Completed(ScopedExecutionBundle)`` |
    ``RetiredFailed(cause, inputs)``; refusals raise ``ScopedSubmitRejected`` with the
    exact package.  Identity/repeated inputs come back borrowed, fresh results owned.

Device memory and transfers
    An engine with device memory (``SimulatedAsyncProvider()``: domain ``sim-device:<n>``)
    keeps its outputs there; the host cannot read them (``DeviceResidentError``).
    ``download(value)`` copies one to a new host owner and ``upload(engine, value)`` a
    host value into the engine's memory: each one recorded ``TRANSFER``.
"""

from ._engine import (
    AccessEndpoint,
    AllocationDomainId,
    EngineId,
    EngineInfo,
    ExecutionProvider,
    engine_info,
    engines,
    register_engine,
    unregister_engine,
)
from ._executable import ExecutableProgram, Program
from ._program import (
    CompiledGraph,
    Constant,
    Instruction,
    OutputKind,
    OutputMetadata,
    ProgramBuilder,
    ProgramError,
    ProgramOutput,
    Value,
    run_program,
)
from ._submission import (
    Completed,
    CompletionError,
    CompletionErrorKind,
    CompletionUnproven,
    DiagnosticKey,
    ExecutionBundle,
    ExecutionError,
    ExecutionErrorKind,
    ExecutionHandle,
    ExecutionInputs,
    ExecutionOutcome,
    ExecutionOutput,
    OutputRef,
    RetiredFailed,
    ScopedExecutionBundle,
    ScopedExecutionOutcome,
    ScopedReadInputs,
    SubmitError,
    SubmitErrorKind,
    execute_scoped_read_only,
    submit,
)
from ._transfer import download, upload


def host_engine() -> EngineId:
    """The id of the first registered synchronous (host) engine. O(engines).

    Cost: no allocation; no copy; no sync; no dispatch; O(number of engines).
    Raises: EngineError."""
    return next(e.id for e in engines() if e.synchronous and e.id.kind == "host")


__all__ = [
    "AccessEndpoint",
    "AllocationDomainId",
    "CompiledGraph",
    "Completed",
    "CompletionError",
    "CompletionErrorKind",
    "CompletionUnproven",
    "Constant",
    "DiagnosticKey",
    "EngineId",
    "EngineInfo",
    "ExecutableProgram",
    "ExecutionBundle",
    "ExecutionError",
    "ExecutionErrorKind",
    "ExecutionHandle",
    "ExecutionInputs",
    "ExecutionOutcome",
    "ExecutionOutput",
    "ExecutionProvider",
    "Instruction",
    "OutputKind",
    "OutputMetadata",
    "OutputRef",
    "Program",
    "ProgramBuilder",
    "ProgramError",
    "ProgramOutput",
    "RetiredFailed",
    "ScopedExecutionBundle",
    "ScopedExecutionOutcome",
    "ScopedReadInputs",
    "SubmitError",
    "SubmitErrorKind",
    "Value",
    "download",
    "engine_info",
    "engines",
    "execute_scoped_read_only",
    "host_engine",
    "register_engine",
    "run_program",
    "submit",
    "unregister_engine",
    "upload",
]
