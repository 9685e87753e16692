"""The program format: builder, one-time validation, output kinds, the interpreter."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage import runtime as rt
from tenferro_storage.errors import LayoutError

from .support import axpy_program, sim_provider


def test_builder_derives_fresh_identity_repeated_and_metadata_kinds() -> None:
    p = axpy_program()
    assert p.output_kinds == (
        rt.OutputKind.FRESH,
        rt.OutputKind.IDENTITY,
        rt.OutputKind.REPEATED,
        rt.OutputKind.METADATA,
    )
    assert p.n_inputs == 2 and p.n_values == 4
    assert [i.name for i in p.instructions] == ["multiply", "add"]


def test_builder_releases_each_intermediate_after_its_last_use() -> None:
    b = rt.ProgramBuilder(1, name="chain")
    (x,) = b.inputs
    a = b.apply(np.negative, x)
    c = b.apply(np.exp, a)
    d = b.apply(np.add, a, c)
    unused = b.apply(np.sin, x)
    p = b.build(d)
    rel = {ins.name: ins.release_after for ins in p.instructions}
    assert rel == {"negative": (), "exp": (), "add": (a.index, c.index), "sin": (unused.index,)}


def test_static_parameters_are_keyword_only_and_sorted() -> None:
    b = rt.ProgramBuilder(1)
    (x,) = b.inputs
    s = b.apply(np.sum, x, axis=0, keepdims=False)
    p = b.build(s)
    assert p.instructions[0].params == (("axis", 0), ("keepdims", False))
    assert p.instructions[0].kwargs == {"axis": 0, "keepdims": False}


def test_multi_output_instructions_return_tuples() -> None:
    b = rt.ProgramBuilder(1)
    (x,) = b.inputs
    lo, hi = b.apply(lambda a: (a - 1, a + 1), x, n_outputs=2, name="pm")
    p = b.build(hi, lo)
    src = ts.arange(3.0)
    with src.as_view() as v:
        out = rt.run_program(p, [ts.kernel.read_array(v)])
    assert sorted(out) == sorted([hi.index, lo.index])
    np.testing.assert_array_equal(out[hi.index].to_numpy(), [1.0, 2.0, 3.0])
    del out


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_inputs": 1, "n_values": 2, "instructions": (), "outputs": ()}, "never defined"),
        (
            {
                "n_inputs": 1,
                "n_values": 2,
                "instructions": (rt.Instruction(np.negative, (1,), (1,)),),
                "outputs": (),
            },
            "before it is defined|redefines",
        ),
        (
            {
                "n_inputs": 1,
                "n_values": 2,
                "instructions": (rt.Instruction(np.negative, (0,), (1,)),),
                "outputs": (rt.ProgramOutput(rt.OutputKind.IDENTITY, 1),),
            },
            "must be FRESH",
        ),
        (
            {
                "n_inputs": 1,
                "n_values": 2,
                "instructions": (rt.Instruction(np.negative, (0,), (1,)),),
                "outputs": (),
            },
            "never released",
        ),
        (
            {
                "n_inputs": 1,
                "n_values": 1,
                "instructions": (),
                "outputs": (rt.ProgramOutput(rt.OutputKind.METADATA, 0),),
            },
            "METADATA",
        ),
        # more inputs than value slots (refused before any slot is looked at)
        ({"n_inputs": 2, "n_values": 1, "instructions": (), "outputs": ()}, "inconsistent"),
        # a constant bound to a slot past the last value
        (
            {
                "n_inputs": 1,
                "n_values": 2,
                "instructions": (),
                "outputs": (),
                "constants": (rt.Constant(5, 1.0),),
            },
            "constant slot 5 is out of range",
        ),
        # an instruction that releases a program output
        (
            {
                "n_inputs": 1,
                "n_values": 3,
                "instructions": (
                    rt.Instruction(np.negative, (0,), (1,)),
                    rt.Instruction(np.exp, (1,), (2,), release_after=(1, 2)),
                ),
                "outputs": (rt.ProgramOutput(rt.OutputKind.FRESH, 2),),
            },
            "releases value 2, an input, output or released",
        ),
        # a value released twice
        (
            {
                "n_inputs": 1,
                "n_values": 4,
                "instructions": (
                    rt.Instruction(np.negative, (0,), (1,)),
                    rt.Instruction(np.exp, (1,), (2,), release_after=(1,)),
                    rt.Instruction(np.sin, (2,), (3,), release_after=(1, 2)),
                ),
                "outputs": (rt.ProgramOutput(rt.OutputKind.FRESH, 3),),
            },
            "releases value 1, an input, output or released",
        ),
    ],
)
def test_an_inconsistent_graph_is_rejected_at_construction(
    kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(rt.ProgramError, match=match):
        rt.CompiledGraph(**kwargs)


def test_interpreter_adopts_each_result_once_and_drops_intermediates() -> None:
    p = axpy_program()
    x, y = ts.arange(3.0), ts.ones(3)
    with x.as_view() as vx, y.as_view() as vy, ledger.capture() as rec:
        out = rt.run_program(p, [ts.kernel.read_array(vx), ts.kernel.read_array(vy)])
        assert list(out) == [3]  # only the fresh output survives
    assert rec.allocations == {ts.AllocationReason.OPERATION_OUTPUT: 2}
    assert rec.copies == {} and rec.releases == 1  # the intermediate x*x
    np.testing.assert_array_equal(out[3].to_numpy(), [1.0, 2.0, 5.0])
    del out


def test_a_kernel_that_returns_an_input_is_refused_not_aliased() -> None:
    b = rt.ProgramBuilder(1)
    (x,) = b.inputs
    p = b.build(b.apply(lambda a: a, x, name="leak"))
    src = ts.arange(3.0)
    with src.as_view() as v, pytest.raises(LayoutError, match="fresh"):
        rt.run_program(p, [ts.kernel.read_array(v)])


def test_a_kernel_returning_the_wrong_arity_fails_and_releases_intermediates() -> None:
    b = rt.ProgramBuilder(1)
    (x,) = b.inputs
    t = b.apply(np.negative, x)
    p = b.build(b.apply(lambda a: (a + 1, a + 2), t, name="two"))
    src = ts.arange(3.0)
    before = ledger.live_allocations()
    with src.as_view() as v, pytest.raises(RuntimeError, match="returned 2 result"):
        rt.run_program(p, [ts.kernel.read_array(v)])
    assert ledger.live_allocations() == before


def test_the_printed_program_names_every_instruction_and_output() -> None:
    text = str(axpy_program())
    assert "v2 = multiply(v0, v0)" in text
    assert "release v2" in text
    assert "v0 (identity)" in text and "('shape', 3)" in text


def test_the_builder_refuses_foreign_values() -> None:
    b = rt.ProgramBuilder(1)
    with pytest.raises(rt.ProgramError):
        b.apply(np.negative, rt.Value(5))


@pytest.mark.parametrize("output", [0, "v0", None, rt.Value(5), rt.Value(-1)])
def test_build_refuses_an_output_that_is_not_a_value_naming_it(output: Any) -> None:
    b = rt.ProgramBuilder(1)
    (x,) = b.inputs
    y = b.apply(np.negative, x)
    with pytest.raises(rt.ProgramError, match=r"ProgramBuilder\.build: output 1 \("):
        b.build(y, output)
    assert b.build(y).output_kinds == (rt.OutputKind.FRESH,)  # the builder is unchanged


def test_constants_are_read_only_program_data_never_released_or_returned() -> None:
    b = rt.ProgramBuilder(1, name="scale")
    (x,) = b.inputs
    two = b.constant([2.0, 2.0, 2.0])
    p = b.build(b.apply(np.multiply, x, two))
    assert p.constants[0].slot == two.index
    assert all(two.index not in ins.release_after for ins in p.instructions)
    assert "constant float64[3]" in str(p)
    src = ts.arange(3.0)
    with src.as_view() as v, ledger.capture() as rec:
        out = rt.run_program(p, [ts.kernel.read_array(v)])
    assert rec.allocations == {ts.AllocationReason.OPERATION_OUTPUT: 1}
    np.testing.assert_array_equal(out[p.outputs[0].value].to_numpy(), [0.0, 2.0, 4.0])  # type: ignore[index]
    del out
    with pytest.raises(ValueError, match="read-only"):
        p.constants[0].value[0] = 1.0
    b2 = rt.ProgramBuilder(0)
    c = b2.constant(1.0)
    with pytest.raises(rt.ProgramError, match="constant"):
        b2.build(c)


def _constant_program(kernel: Any, caller: np.ndarray[Any, Any]) -> rt.CompiledGraph:
    """``kernel(constant)`` over a hand-built ``Constant`` of the caller's own array."""
    return rt.CompiledGraph(
        1, 3,
        (rt.Instruction(kernel, (1,), (2,), name="returns-constant"),),
        (rt.ProgramOutput(rt.OutputKind.FRESH, value=2),),
        "constant-program",
        (rt.Constant(1, caller),),
    )


_RETURNS_CONSTANT = {
    "identity": lambda c: c,
    "asarray": lambda c: np.asarray(c),
    "reshape view": lambda c: c.reshape(c.shape),
}


@pytest.mark.parametrize("engine", ["host", "scoped", "simulated device"])
@pytest.mark.parametrize("kernel", sorted(_RETURNS_CONSTANT))
def test_a_kernel_returning_a_hand_built_constant_is_refused_not_made_a_second_owner(
    engine: str, kernel: str
) -> None:
    """A writable caller array in a hand-built ``rt.Constant``, returned by a kernel (as
    is or as a view), is refused with ``AliasedOutputError`` on every engine: no owner
    ever shares memory with the caller's array, nothing is allocated, the caller's
    array is untouched."""
    caller = np.array([1.0, 2.0])
    prog = _constant_program(_RETURNS_CONSTANT[kernel], caller)
    with sim_provider() as sim, ledger.capture() as rec:
        x = ts.zeros(1)
        if engine == "scoped":
            with x.as_view() as v:
                outcome: Any = rt.execute_scoped_read_only(
                    rt.host_engine(), prog, rt.ScopedReadInputs([v])
                )
        else:
            g = ts.AllocationGroup()
            slot = g.insert(x)
            eid = rt.host_engine() if engine == "host" else sim.engine
            assert eid is not None
            outcome = rt.submit(eid, prog, rt.ExecutionInputs(g, [slot])).wait()
        assert isinstance(outcome, rt.RetiredFailed), outcome
        assert "AliasedOutputError" in str(outcome.cause)
        del outcome
    ops = {e.operation for e in rec.events if e.kind is ledger.EventKind.ALLOCATE}
    assert not any("returns-constant" in op for op in ops)
    np.testing.assert_array_equal(caller, [1.0, 2.0])
    caller[0] = 5.0  # still the caller's own memory, and nobody else's
def test_the_generated_host_run_records_one_allocation_and_one_release_per_kernel_result() -> None:
    """The host path (one generated function per program): each kernel result is one
    OPERATION_OUTPUT allocation released at its last use, a buffer reused by ``into`` is
    neither allocated nor released again, only the outputs stay live; no copy. The same
    program run twice reuses its generated function."""
    fresh = rt.OutputKind.FRESH
    p = rt.CompiledGraph(1, 5, (
        rt.Instruction(np.sin, (0,), (1,), name="sin"),
        rt.Instruction(np.cos, (1,), (2,), release_after=(1,), name="cos"),
        rt.Instruction(np.add.reduce, (2,), (3,), (("axis", 0),), name="sum"),
        # add(v2, v2) writes into sin's buffer, released by cos
        rt.Instruction(np.add, (2, 2), (4,), release_after=(2,), name="add", into=1),
    ), (rt.ProgramOutput(fresh, value=4), rt.ProgramOutput(fresh, value=3)), "chain")
    src = ts.arange(4.0)
    for _ in range(2):
        with src.as_view() as v, ledger.capture() as rec:
            out = rt.run_program(p, [ts.kernel.read_array(v)])
            assert rec.live_bytes == 4 * 8 + 8  # the two outputs
        assert rec.allocations == {ts.AllocationReason.OPERATION_OUTPUT: 3}
        assert rec.releases == 1 and not rec.copies  # sin's buffer moved on to the add
        c = np.cos(np.sin(np.arange(4.0)))
        np.testing.assert_allclose(out[4].to_numpy(), c + c)
        np.testing.assert_allclose(out[3].to_numpy(), c.sum())
        del out
    assert p._host_run is not None


def _reuse_program(donated: tuple[int, ...]) -> rt.CompiledGraph:
    """``exp(cos(sin x))`` doubled, the doubling written into cos's buffer (slot 2, past the
    inputs, released one instruction earlier)."""
    fresh = rt.OutputKind.FRESH
    return rt.CompiledGraph(1, 5, (
        rt.Instruction(np.sin, (0,), (1,), name="sin"),
        rt.Instruction(np.cos, (1,), (2,), release_after=(1,), name="cos"),
        rt.Instruction(np.exp, (2,), (3,), release_after=(2,), name="exp"),
        rt.Instruction(np.add, (3, 3), (4,), release_after=(3,), name="add", into=2),
    ), (rt.ProgramOutput(fresh, value=4),), "reuse", donated=donated)


@pytest.mark.parametrize("donated", [(), (0,)], ids=["generated-host-run", "interpreter"])
def test_a_buffer_released_earlier_is_reused_by_into_on_both_host_paths(
    donated: tuple[int, ...],
) -> None:
    """An ``into=`` instruction writing into an intermediate released by an *earlier*
    instruction reuses that buffer (no allocation, no copy, one release fewer) on the
    generated host run and on the interpreter (a donated input forces it: it runs the
    ``kept`` bookkeeping and the host ``out=`` array).  Mutants: ``_kept`` only for slot
    ``n_inputs`` (``>=`` -> ``is``), the interpreter keeping the slots it should drop
    (``not s in keep``), the host branch asking a missing device for the buffer."""
    p = _reuse_program(donated)
    x = np.arange(4.0)
    with ledger.capture() as rec:
        out = rt.run_program(p, [x], writable={0: x} if donated else None)
        assert list(out) == [4]
    assert rec.allocations == {ts.AllocationReason.OPERATION_OUTPUT: 3}
    assert rec.releases == 2 and not rec.copies
    e = np.exp(np.cos(np.sin(np.arange(4.0))))
    np.testing.assert_allclose(out[4].to_numpy(), e + e)
    del out
