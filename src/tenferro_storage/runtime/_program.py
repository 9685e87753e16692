"""The program format: a compiled graph of kernel instructions over input bindings.

See the package docstring (``tenferro_storage.runtime``) for the precise format.  This
module holds the frozen data (:class:`CompiledGraph`, :class:`Instruction`,
:class:`ProgramOutput`), its one-time validation, the hand-writing helper
:class:`ProgramBuilder`, and the interpreter every engine shares (:func:`run_program`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

import attrs
import numpy as np

from .._creation import from_numpy
from .._frozen import frozen
from .._ledger import AllocationReason
from .._tensor import Tensor, adopt_output
from ..kernel import read_array
from ._host_run import KernelOutputError, run_on_host

_OPERATION_OUTPUT: Final = AllocationReason.OPERATION_OUTPUT


class OutputKind(enum.Enum):
    """How a program output relates to storage.

    ``FRESH``: a value an instruction computed (a new allocation owned by the result).
    ``IDENTITY``: an input returned as is (no allocation, no copy).
    ``REPEATED``: the same value as an earlier output (the same record, twice).
    ``METADATA``: a storage-free value (a shape, a dtype, a Python scalar).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (an enum member look-up).
    Raises: ValueError."""

    FRESH = "fresh"
    IDENTITY = "identity"
    REPEATED = "repeated"
    METADATA = "metadata"


@attrs.frozen
class OutputMetadata:
    """A storage-free program output (``value`` should be immutable: a shape, a dtype...).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    value: Any


@attrs.frozen
class Value:
    """A value slot of a program under construction (see :class:`ProgramBuilder`).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    index: int


@attrs.frozen
class Instruction:
    """One kernel call: ``outputs = kernel(*values[inputs], **params)``.

    ``kernel`` receives numpy arrays it must not write (the input bindings read-only, the
    program's own intermediates as they are on the host) and returns one fresh C-contiguous array
    (or numpy scalar) per output slot, as a tuple when ``len(outputs) != 1``.
    ``params`` are static keyword parameters (sorted ``(name, value)`` pairs).
    ``release_after`` lists the intermediate value slots whose last use is this
    instruction: the interpreter drops them (releasing their allocation) right after it.

    ``into`` (optional, single-output instructions only): the value slot whose buffer
    receives the result instead of a fresh allocation -- an intermediate released at or
    before this instruction (its buffer is kept, not freed, until here) or a donated
    input (``CompiledGraph.donated``).  The kernel is then called with ``out=`` (a
    writable numpy array over that buffer) and must return that very array; the output
    slot takes the buffer over (no allocation event).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    kernel: Callable[..., Any]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    params: tuple[tuple[str, Any], ...] = ()
    release_after: tuple[int, ...] = ()
    name: str = ""
    into: int | None = None
    reason: AllocationReason = _OPERATION_OUTPUT
    """How the ledger classifies the allocations of this instruction's outputs (a
    checkpoint's backward recomputation: ``CHECKPOINT_RECOMPUTE_OUTPUT``)."""

    @property
    def kwargs(self) -> dict[str, Any]:
        """``params`` as a dict (built on each call)."""
        return dict(self.params)


@attrs.frozen
class ProgramOutput:
    """One output of a program: a ``kind`` and either a value slot or metadata.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    kind: OutputKind
    value: int | None = None
    metadata: OutputMetadata | None = None


def _constant_value(value: Any) -> Any:
    """A constant's value as kernels receive it: an array becomes a read-only view over a
    read-only buffer (no copy; no numpy API makes it writable, so a kernel can neither
    write it nor hand it back to be adopted as a second owner); a scalar as is. O(1)."""
    return frozen(value) if isinstance(value, np.ndarray) else value


@attrs.frozen(eq=False)
class Constant:
    """A value slot bound to a program-owned, read-only constant (a traced literal).

    ``value`` is a numpy array or scalar; kernels receive it read-only.  An array is kept
    as a read-only view of the array given (no copy: the memory stays the giver's, so a
    hand-built constant must not be written while the program lives;
    :meth:`ProgramBuilder.constant` imports once instead, a recorded ``TRANSFER``).  A
    kernel that returns a constant (or a view of one) is refused with
    ``AliasedOutputError`` like one that returns an input: a constant never becomes an
    owner.  Constants hold no ledger
    storage, are never released, and cannot be program outputs (copy one with an
    instruction to return it).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    slot: int
    value: Any = attrs.field(converter=_constant_value)
    keep: Any = None
    """What keeps ``value``'s memory valid while the program lives (the owner
    :meth:`ProgramBuilder.constant` imported); ``None`` for a hand-built constant."""


class ProgramError(ValueError):
    """A :class:`CompiledGraph` failed its construction-time validation."""


def _validate(g: CompiledGraph) -> None:
    name = g.name or "CompiledGraph"

    def fail(msg: str) -> ProgramError:
        return ProgramError(f"{name}: {msg}")

    if g.n_inputs < 0 or g.n_values < g.n_inputs:
        raise fail(f"n_inputs={g.n_inputs} and n_values={g.n_values} are inconsistent")
    defined: list[int] = [-2] * g.n_values  # defining instruction (-1 inputs/constants)
    for s in range(g.n_inputs):
        defined[s] = -1
    constant_slots: set[int] = set()
    for c in g.constants:
        if not (g.n_inputs <= c.slot < g.n_values) or defined[c.slot] != -2:
            raise fail(f"constant slot {c.slot} is out of range or defined twice")
        defined[c.slot] = -1
        constant_slots.add(c.slot)
    last_use: dict[int, int] = {}
    for i, ins in enumerate(g.instructions):
        if not callable(ins.kernel):
            raise fail(f"instruction {i} ({ins.name}) has a non-callable kernel")
        for s in ins.inputs:
            if not (0 <= s < g.n_values) or defined[s] == -2:
                raise fail(f"instruction {i} ({ins.name}) reads value {s} before it is defined")
            last_use[s] = i
        if not ins.outputs:
            raise fail(f"instruction {i} ({ins.name}) has no outputs")
        for s in ins.outputs:
            if not (0 <= s < g.n_values) or defined[s] != -2:
                raise fail(f"instruction {i} ({ins.name}) redefines or misnames value {s}")
            defined[s] = i
    if any(d == -2 for d in defined):
        raise fail("some value slots are never defined")
    donated = set(g.donated)
    if len(donated) != len(g.donated) or not all(0 <= k < g.n_inputs for k in donated):
        raise fail(f"donated={g.donated} must name distinct input slots")
    seen: set[int] = set()
    output_values: set[int] = set()
    for k, out in enumerate(g.outputs):
        if out.kind is OutputKind.METADATA:
            if out.metadata is None or out.value is not None:
                raise fail(f"output {k}: a METADATA output carries metadata and no value")
            continue
        v = out.value
        if v is None or not (0 <= v < g.n_values) or out.metadata is not None:
            raise fail(f"output {k}: a tensor output names one value slot")
        if v in constant_slots:
            raise fail(f"output {k} returns constant slot {v}; copy it with an instruction")
        expected = (
            OutputKind.REPEATED
            if v in seen
            else OutputKind.IDENTITY
            if v < g.n_inputs
            else OutputKind.FRESH
        )
        if out.kind is not expected:
            raise fail(f"output {k} of value {v} must be {expected.name}, not {out.kind.name}")
        seen.add(v)
        output_values.add(v)
    released: set[int] = set()
    for i, ins in enumerate(g.instructions):
        for s in ins.release_after:
            if s < g.n_inputs or s in output_values or s in released or s in constant_slots:
                raise fail(f"instruction {i} releases value {s}, an input, output or released")
            if last_use.get(s, defined[s]) != i:
                raise fail(f"instruction {i} releases value {s} before its last use")
            released.add(s)
    dead = set(range(g.n_inputs, g.n_values)) - output_values - released - constant_slots
    if dead:
        raise fail(f"intermediate values {sorted(dead)} are never released")
    released_at = {s: i for i, ins in enumerate(g.instructions) for s in ins.release_after}
    taken: set[int] = set()
    for i, ins in enumerate(g.instructions):
        if ins.into is None:
            continue
        s = ins.into
        if len(ins.outputs) != 1:
            raise fail(f"instruction {i} ({ins.name}) writes into v{s} but has several outputs")
        if s in taken:
            raise fail(f"instruction {i} ({ins.name}) writes into v{s}, already written into")
        if s < g.n_inputs:
            if s not in donated or s in output_values or last_use.get(s, -1) > i:
                raise fail(
                    f"instruction {i} ({ins.name}) writes into input v{s}: it must be donated, "
                    "not an output and not read after this instruction"
                )
        elif s not in released_at or released_at[s] > i:
            raise fail(
                f"instruction {i} ({ins.name}) writes into v{s}, which is not released at or "
                "before it"
            )
        taken.add(s)


@attrs.frozen
class CompiledGraph:
    """An executable program: ``n_inputs`` bindings, kernel instructions, outputs.

    Value slots ``0 .. n_inputs-1`` are the inputs (in binding order); every other slot
    is defined by exactly one instruction or one :class:`Constant`.  Validated once at construction
    (``ProgramError``): definitions before uses, output kinds consistent with their
    values, every intermediate released exactly once at its last use.  Immutable and
    shareable between threads; submitting it never re-validates it.

    Cost: no allocation; no copy; no sync; no dispatch; O(instructions): validated once, here.
    Raises: ProgramError."""

    n_inputs: int
    n_values: int
    instructions: tuple[Instruction, ...]
    outputs: tuple[ProgramOutput, ...]
    name: str = ""
    constants: tuple[Constant, ...] = ()
    donated: tuple[int, ...] = ()

    _kinds: tuple[OutputKind, ...] = attrs.field(init=False, repr=False, eq=False)
    _kept: frozenset[int] = attrs.field(init=False, repr=False, eq=False)
    _backing: dict[int, int] = attrs.field(init=False, repr=False, eq=False)
    _host_run: Any = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        _validate(self)
        object.__setattr__(self, "_kinds", tuple(o.kind for o in self.outputs))
        kept = frozenset(
            ins.into for ins in self.instructions
            if ins.into is not None and ins.into >= self.n_inputs
        )
        object.__setattr__(self, "_kept", kept)
        backing: dict[int, int] = {}  # value slot -> donated input whose buffer holds it
        for ins in self.instructions:
            if ins.into is not None:
                src = ins.into if ins.into < self.n_inputs else backing.get(ins.into)
                if src is not None:
                    backing[ins.outputs[0]] = src
        object.__setattr__(self, "_backing", backing)
        object.__setattr__(self, "_host_run", None)  # generated on the first host run

    def backing_input(self, value: int) -> int | None:
        """The donated input slot whose buffer holds ``value`` (``None``: its own). O(1).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        return self._backing.get(value)

    @property
    def output_kinds(self) -> tuple[OutputKind, ...]:
        """The kind of every output, in order. O(1)."""
        return self._kinds

    def __str__(self) -> str:
        params_in = ", ".join(
            f"v{i}{' (donated)' if i in self.donated else ''}" for i in range(self.n_inputs)
        )
        lines = [f"program {self.name or '<anonymous>'}({params_in}):"]
        for c in self.constants:
            v = c.value
            desc = f"{v.dtype}{list(v.shape)}" if isinstance(v, np.ndarray) else repr(v)
            lines.append(f"  v{c.slot} = constant {desc}")
        for ins in self.instructions:
            outs = ", ".join(f"v{s}" for s in ins.outputs)
            args = ", ".join(f"v{s}" for s in ins.inputs)
            params = "".join(f", {k}={v!r}" for k, v in ins.params)
            rel = (
                f"   # release {', '.join(f'v{s}' for s in ins.release_after)}"
                if ins.release_after
                else ""
            )
            into = f" into v{ins.into}" if ins.into is not None else ""
            lines.append(f"  {outs} = {ins.name}({args}{params}){into}{rel}")
        rets = ", ".join(
            f"{o.metadata.value!r}" if o.metadata is not None else f"v{o.value} ({o.kind.value})"
            for o in self.outputs
        )
        lines.append(f"  return {rets}")
        return "\n".join(lines)


_Pending = tuple[
    Callable[..., Any], tuple[int, ...], tuple[int, ...], tuple[tuple[str, Any], ...], str
]


class ProgramBuilder:
    """Write a :class:`CompiledGraph` by hand (tests, examples).

    >>> b = ProgramBuilder(2, name="axpy")          # doctest: +SKIP
    >>> x, y = b.inputs
    >>> t = b.apply(np.multiply, x, x)
    >>> z = b.apply(np.add, t, y)
    >>> program = b.build(z, x, z, b.metadata((3,)))   # fresh, identity, repeated, metadata

    ``apply`` appends one instruction; ``build`` computes the output kinds and the
    release-after-last-use lists and validates the result.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct; ``build`` validates the
    program once.
    Raises: ProgramError."""

    def __init__(self, n_inputs: int, *, name: str = "") -> None:
        self._n_inputs = n_inputs
        self._n_values = n_inputs
        self._name = name
        self._instructions: list[_Pending] = []
        self._constants: list[Constant] = []

    @property
    def inputs(self) -> tuple[Value, ...]:
        """The input values, in binding order."""
        return tuple(Value(i) for i in range(self._n_inputs))

    def apply(
        self,
        kernel: Callable[..., Any],
        *args: Value,
        n_outputs: int = 1,
        name: str | None = None,
        **params: Any,
    ) -> Any:
        """Append ``kernel(*args, **params)``; return its value (a tuple if ``n_outputs > 1``).

        Cost: no allocation (records one instruction); no copy; no sync; no dispatch;
        O(args + params).
        Raises: ProgramError (an argument that is not a value of this builder)."""
        for a in args:
            if type(a) is not Value or not 0 <= a.index < self._n_values:
                raise ProgramError(f"ProgramBuilder.apply: {a!r} is not a value of this builder")
        outs = tuple(range(self._n_values, self._n_values + n_outputs))
        self._n_values += n_outputs
        label = str(name or getattr(kernel, "__name__", type(kernel).__name__))
        self._instructions.append(
            (kernel, tuple(a.index for a in args), outs, tuple(sorted(params.items())), label)
        )
        values = tuple(Value(s) for s in outs)
        return values[0] if n_outputs == 1 else values

    def constant(self, value: Any) -> Value:
        """A program-owned read-only constant: a Python scalar becomes a fresh 0-d array (a
        conversion, not a copy); an array (or array-like) is imported once here
        (``from_numpy``: one recorded ``TRANSFER`` and its ``TRANSFER_DESTINATION``
        allocation, released when the program goes; inside ``ledger.forbid_copies()`` it
        raises ``CopyForbiddenError``).  O(size).

        Cost: allocates (a 0-d array, or one owner); no copy of a scalar, an array transfers
        once; no sync; no dispatch; O(size).
        Raises: DTypeError, OwnershipError, CopyForbiddenError."""
        slot = self._n_values
        if isinstance(value, bool | int | float | complex):
            constant = Constant(slot, np.array(value))  # fresh: frozen without a copy
        else:
            owner = from_numpy(value)
            constant = Constant(slot, read_array(owner), keep=owner)
        self._n_values += 1
        self._constants.append(constant)
        return Value(slot)

    @staticmethod
    def metadata(value: Any) -> OutputMetadata:
        """A storage-free output.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        return OutputMetadata(value)

    def build(self, *outputs: Value | OutputMetadata) -> CompiledGraph:
        """Freeze the program with these outputs (validated once, here).

        Cost: no allocation; no copy; no sync; no dispatch; O(instructions + values).
        Raises: ProgramError (an output that is not a value of this builder nor metadata)."""
        specs: list[ProgramOutput] = []
        seen: set[int] = set()
        for k, o in enumerate(outputs):
            if isinstance(o, OutputMetadata):
                specs.append(ProgramOutput(OutputKind.METADATA, metadata=o))
                continue
            if type(o) is not Value or not 0 <= o.index < self._n_values:
                raise ProgramError(
                    f"ProgramBuilder.build: output {k} ({type(o).__name__}) is not a value of "
                    "this builder nor ProgramBuilder.metadata(...)"
                )
            v = o.index
            kind = (
                OutputKind.REPEATED
                if v in seen
                else OutputKind.IDENTITY
                if v < self._n_inputs
                else OutputKind.FRESH
            )
            seen.add(v)
            specs.append(ProgramOutput(kind, value=v))
        last: dict[int, int] = {}
        for i, (_k, ins, outs, _p, _n) in enumerate(self._instructions):
            for s in outs:
                last[s] = i
            for s in ins:
                last[s] = i
        releases: dict[int, list[int]] = {}
        constant_slots = {c.slot for c in self._constants}
        for s, i in last.items():
            if s >= self._n_inputs and s not in seen and s not in constant_slots:
                releases.setdefault(i, []).append(s)
        instructions = tuple(
            Instruction(k, ins, outs, params, tuple(sorted(releases.get(i, ()))), label)
            for i, (k, ins, outs, params, label) in enumerate(self._instructions)
        )
        return CompiledGraph(
            self._n_inputs,
            self._n_values,
            instructions,
            tuple(specs),
            self._name,
            tuple(self._constants),
        )


class DeviceOutputs(Protocol):
    """How a device engine owns and reaches program values in its own memory (see
    :func:`run_program`; ``providers._device.DeviceAdopter`` is the simulated device's)."""

    def adopt(
        self, array: Any, reason: AllocationReason, operation: str
    ) -> tuple[Tensor[Any, Any], np.ndarray[Any, Any]]:
        """Own a kernel result as device memory; return it and the array later
        instructions read (the device's read-only view)."""

    def writable(self, owner: Tensor[Any, Any]) -> np.ndarray[Any, Any]:
        """The device's writable array of an owner it made (for ``into``)."""

    def readable(self, owner: Tensor[Any, Any]) -> np.ndarray[Any, Any]:
        """The device's read-only array of an owner it made."""


def run_program(
    program: CompiledGraph,
    arrays: Sequence[np.ndarray[Any, Any]],
    writable: Mapping[int, np.ndarray[Any, Any]] | None = None,
    device: DeviceOutputs | None = None,
    written: set[int] | None = None,
) -> dict[int, Tensor[Any, Any]]:
    """Interpret ``program`` over read-only input ``arrays``; return the fresh owners of
    its FRESH output values, by value slot (except those held in a donated input's
    buffer: see :meth:`CompiledGraph.backing_input`).

    Each kernel result is adopted as a new owner (one ``OPERATION_OUTPUT`` allocation;
    a result that is not a fresh C-contiguous array -- for example an input returned
    or a view of one -- raises ``LayoutError`` rather than aliasing).  An instruction
    with ``into`` writes into that slot's buffer instead (no allocation): a released
    intermediate's owner moves to the new slot; a donated input's buffer comes from
    ``writable`` (input slot -> writable array, given by a provider that owns the
    input exclusively; ``KernelOutputError`` when it is missing).  Owners are host
    memory unless a device engine passes ``device``: then every result is owned in its
    device domain and stays device-resident.  ``written`` (when given) collects the
    donated input slots a kernel was handed to write, *before* the call (a kernel that
    raises may have written part of it): a failed run reports which inputs it clobbered.
    Intermediates are dropped at their last use.  Any exception (a kernel's own
    included) propagates after every intermediate made so far has been released.  On the
    host without donation the instructions run as one generated function
    (``_host_run``: the same allocation events, no owner object for an intermediate).

    Cost: allocates one owner per kernel result, intermediates included (one event with
    the instruction's reason, e.g. ``OPERATION_OUTPUT``; an ``into`` instruction allocates
    nothing); no copy; no sync; no dispatch (interprets on the host); O(instructions)
    bookkeeping plus the kernels' work.

    Raises:
        LayoutError: a kernel result is not a fresh C-contiguous array
            (``AliasedOutputError`` when it is an input or a view of one).
        DTypeError: a kernel result has a dtype tenferro does not store.
        RuntimeError: ``KernelOutputError``: a kernel returned the wrong number of
            results or not its ``out=`` array, or a donated input has no writable
            buffer."""
    if device is None and not program.donated:
        return run_on_host(program, arrays)
    values: list[Any] = [None] * program.n_values
    values[: program.n_inputs] = arrays
    for c in program.constants:
        values[c.slot] = c.value
    owners: dict[int, Tensor[Any, Any]] = {}
    kept: dict[int, Tensor[Any, Any]] = {}  # released intermediates whose buffer is reused
    keep = program._kept
    backing = program._backing
    try:
        for ins in program.instructions:
            into = ins.into
            if into is None:
                result = ins.kernel(*[values[s] for s in ins.inputs], **dict(ins.params))
                results = result if type(result) is tuple else (result,)
                if len(results) != len(ins.outputs):
                    raise KernelOutputError(
                        f"{ins.name}: the kernel returned {len(results)} result(s), the "
                        f"program declares {len(ins.outputs)}"
                    )
                for slot, arr in zip(ins.outputs, results, strict=True):
                    if device is not None:
                        owners[slot], values[slot] = device.adopt(arr, ins.reason, ins.name)
                        continue
                    owners[slot] = adopt_output(arr, ins.reason, ins.name)
                    values[slot] = read_array(owners[slot])
            else:
                slot = ins.outputs[0]
                src = backing.get(into, into)
                if src < program.n_inputs:
                    if writable is None or src not in writable:
                        raise KernelOutputError(
                            f"{ins.name}: writes into donated input v{src}, but the engine "
                            "gave no writable buffer for it"
                        )
                    out = writable[src]
                    owner = None
                    if written is not None:
                        written.add(src)
                else:
                    owner = kept.pop(into, None)
                    if owner is None:  # released by this very instruction: in place
                        owner = owners.pop(into)
                    out = (
                        owner._meta("run_program").array()
                        if device is None
                        else device.writable(owner)
                    )
                result = ins.kernel(
                    *[values[s] for s in ins.inputs], out=out, **dict(ins.params)
                )
                if result is not out:
                    raise KernelOutputError(
                        f"{ins.name}: the kernel was asked to write into v{into}'s buffer "
                        "(out=) and returned another array"
                    )
                if owner is not None:
                    owners[slot] = owner
                    values[slot] = read_array(owner) if device is None else device.readable(owner)
                else:  # a donated input's buffer, read from here on (read-only buffer)
                    values[slot] = frozen(out)
                owner = None  # no local may keep an owner alive past its release below
            for s in ins.release_after:
                values[s] = None
                if s in keep and s in owners:
                    kept[s] = owners.pop(s)
                else:
                    owners.pop(s, None)
    except BaseException:
        # The traceback keeps this frame: drop every owner it could keep alive.
        values.clear()
        owners.clear()
        kept.clear()
        raise
    return owners


def params_of(mapping: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Static parameters in the canonical ``Instruction.params`` form (sorted pairs)."""
    return tuple(sorted(mapping.items()))
