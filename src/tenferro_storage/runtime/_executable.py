"""The second program kind: an executable an engine's own compiler produced (XLA).

The runtime never looks inside ``executable``; it validates the output map once and
submission checks the engine accepts the kind (``ExecutionProvider.accepts``).
"""

from __future__ import annotations

from typing import Any

import attrs

from ._program import CompiledGraph, OutputKind, ProgramError, ProgramOutput


@attrs.frozen(eq=False)
class ExecutableProgram:
    """A program an engine's own compiler produced (an XLA executable): the second program
    kind, beside :class:`CompiledGraph`, with the same submission validation.

    ``executable`` is opaque to the runtime: only an engine of ``engine_kind`` runs it
    (submission to any other engine is refused, ``SubmitErrorKind.INVALID_PROGRAM``;
    there is no fallback).  Value slots: ``0 .. n_inputs-1`` are the inputs, ``n_inputs
    .. n_values-1`` the executable's ``n_results`` results in order.  ``outputs`` refer to
    them as a :class:`CompiledGraph`'s do (``FRESH``/``IDENTITY``/``REPEATED``);
    ``donated`` input slots are consumed and their buffers reused for the results named
    in ``backing`` (result slot -> donated input slot).  ``scratch_bytes``: the
    temporary memory one execution needs (the compiler's memory analysis), recorded as
    one allocation per execution (released at its retirement).  Validated once at
    construction (``ProgramError``).

    Cost: no allocation; no copy; no sync; no dispatch; O(outputs) (``XlaProvider.compile``
    makes one).
    Raises: ProgramError."""

    engine_kind: str
    executable: Any
    n_inputs: int
    n_results: int
    outputs: tuple[ProgramOutput, ...]
    name: str = ""
    donated: tuple[int, ...] = ()
    backing: tuple[tuple[int, int], ...] = ()
    scratch_bytes: int = 0
    description: str = ""

    _kinds: tuple[OutputKind, ...] = attrs.field(init=False, repr=False)
    _backing: dict[int, int] = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        name = self.name or "ExecutableProgram"
        if self.n_inputs < 0 or self.n_results < 0:
            raise ProgramError(f"{name}: n_inputs and n_results must be >= 0")
        if len(set(self.donated)) != len(self.donated) or not all(
            0 <= k < self.n_inputs for k in self.donated
        ):
            raise ProgramError(f"{name}: donated={self.donated} must name distinct input slots")
        backing = dict(self.backing)
        if len(backing) != len(self.backing) or not all(
            self.n_inputs <= v < self.n_values and k in self.donated for v, k in backing.items()
        ) or len(set(backing.values())) != len(backing):
            raise ProgramError(f"{name}: backing={self.backing} must map distinct results to "
                               "distinct donated inputs")
        seen: set[int] = set()
        for i, out in enumerate(self.outputs):
            v = out.value
            if out.kind is OutputKind.METADATA or v is None or not 0 <= v < self.n_values:
                raise ProgramError(f"{name}: output {i} must name one value slot")
            expected = (
                OutputKind.REPEATED if v in seen
                else OutputKind.IDENTITY if v < self.n_inputs
                else OutputKind.FRESH
            )
            if out.kind is not expected:
                raise ProgramError(
                    f"{name}: output {i} of value {v} must be {expected.name}, not "
                    f"{out.kind.name}"
                )
            seen.add(v)
        object.__setattr__(self, "_kinds", tuple(o.kind for o in self.outputs))
        object.__setattr__(self, "_backing", backing)

    @property
    def n_values(self) -> int:
        """Inputs plus results. O(1)."""
        return self.n_inputs + self.n_results

    @property
    def output_kinds(self) -> tuple[OutputKind, ...]:
        """The kind of every output, in order. O(1)."""
        return self._kinds

    def backing_input(self, value: int) -> int | None:
        """The donated input slot whose buffer holds result ``value`` (``None``: its own). O(1).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        return self._backing.get(value)

    def __str__(self) -> str:
        ins = ", ".join(
            f"v{i}{' (donated)' if i in self.donated else ''}" for i in range(self.n_inputs)
        )
        outs = ", ".join(f"v{o.value} ({o.kind.value})" for o in self.outputs)
        return (
            f"{self.engine_kind} program {self.name or '<anonymous>'}({ins}) -> "
            f"{self.n_results} result(s), scratch {self.scratch_bytes} bytes: return {outs}"
        )


Program = CompiledGraph | ExecutableProgram
"""What the runtime submits: an interpreted graph or an engine-compiled executable."""
