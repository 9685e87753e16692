"""Random programs: every engine and every submission surface computes what numpy computes.

Hypothesis draws a small program (a DAG of elementwise kernels over 1-3 inputs, with
fresh, identity, repeated and metadata outputs) and inputs; the program then runs as a
detached submission on the host and on the simulated asynchronous engine and as a scoped
call on the host.  Every tensor output must equal a direct numpy evaluation, identity
outputs must be the input records themselves (no copy), and the only allocations are
the kernels' results.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage import runtime as rt
from tenferro_storage.providers import SimulatedAsyncProvider
from tenferro_storage.runtime._engine import lookup

UNARY = (np.negative, np.sin, np.tanh)
BINARY = (np.add, np.multiply, np.subtract, np.maximum)


@st.composite
def programs(draw: st.DrawFn) -> tuple[rt.CompiledGraph, list[Any], int]:
    n_inputs = draw(st.integers(1, 3))
    b = rt.ProgramBuilder(n_inputs, name="random")
    values: list[rt.Value] = list(b.inputs)
    recipe: list[Any] = []  # (kernel, arg indices) to evaluate with numpy
    for _ in range(draw(st.integers(0, 5))):
        if draw(st.booleans()):
            k = draw(st.sampled_from(UNARY))
            args = [draw(st.integers(0, len(values) - 1))]
        else:
            k = draw(st.sampled_from(BINARY))
            args = [draw(st.integers(0, len(values) - 1)) for _ in range(2)]
        values.append(b.apply(k, *[values[a] for a in args]))
        recipe.append((k, args))
    picks = draw(st.lists(st.integers(0, len(values) - 1), min_size=1, max_size=4))
    outputs: list[Any] = [values[p] for p in picks]
    if draw(st.booleans()):
        outputs.append(b.metadata("meta"))
    n = draw(st.integers(0, 5))
    return b.build(*outputs), recipe, n


def _reference(program: rt.CompiledGraph, recipe: list[Any], xs: list[Any]) -> list[Any]:
    vals = list(xs)
    for k, args in recipe:
        vals.append(k(*[vals[a] for a in args]))
    return [None if o.value is None else vals[o.value] for o in program.outputs]


def _inputs(program: rt.CompiledGraph, n: int) -> tuple[list[Any], rt.ExecutionInputs]:
    xs = [np.linspace(-1.0, 1.0, n) * (i + 1) for i in range(program.n_inputs)]
    g = ts.AllocationGroup()
    slots = [g.insert(ts.from_numpy(x)) for x in xs]
    return xs, rt.ExecutionInputs(g, slots)


def _check_bundle(program: rt.CompiledGraph, expected: list[Any], bundle: Any) -> None:
    for i, out in enumerate(program.outputs):
        got = bundle.output(i)
        if out.kind is rt.OutputKind.METADATA:
            assert got == rt.OutputMetadata("meta")
            continue
        assert isinstance(got, ts.TensorView)
        # the asynchronous engine's fresh outputs live in its device memory
        host = got if ts.providers.domain_of(got) == "host" else rt.download(got)
        np.testing.assert_allclose(host.to_numpy(), expected[i], rtol=0, atol=0)
        got.release()


@given(programs())
def test_random_programs_agree_across_engines_and_surfaces(case: Any) -> None:
    program, recipe, n = case
    base = ledger.live_bytes()
    n_fresh = sum(k is rt.OutputKind.FRESH for k in program.output_kinds)
    asynchronous = next(e.id for e in rt.engines() if not e.synchronous)
    for engine in (rt.host_engine(), asynchronous):
        xs, pkg = _inputs(program, n)
        expected = _reference(program, recipe, xs)
        bindings = pkg.bindings
        with ledger.capture() as rec:
            out = rt.submit(engine, program, pkg).wait(10)
        assert isinstance(out, rt.Completed)
        if engine.kind == "host":  # (captures see their own thread's events)
            made = rec.allocations.get(ts.AllocationReason.OPERATION_OUTPUT, 0)
            assert made == len(recipe) and rec.copies == {}
        _check_bundle(program, expected, out.bundle)
        for o, slot in zip(program.outputs, out.bundle.outputs, strict=True):
            if o.kind is rt.OutputKind.IDENTITY:
                assert slot == bindings[o.value]  # the input record itself
        del out
    # Scoped, host only: identity outputs borrow the caller's views.
    xs, pkg = _inputs(program, n)
    expected = _reference(program, recipe, xs)
    group, slots = pkg.into_parts()
    views = [group.view(s) for s in slots]
    with ledger.capture() as rec:
        scoped = rt.execute_scoped_read_only(rt.host_engine(), program, rt.ScopedReadInputs(views))
    assert isinstance(scoped, rt.Completed)
    assert rec.copies == {}
    assert rec.allocations.get(ts.AllocationReason.OPERATION_OUTPUT, 0) == len(recipe)
    _check_bundle(program, expected, scoped.bundle)
    assert sum(not scoped.bundle.is_borrowed(i) for i in range(len(program.outputs))) >= (n_fresh)
    scoped.bundle.release()
    while views:  # (a released view object still refers to its storage: drop them all)
        views.pop().release()
    del scoped, views, group
    provider = lookup(asynchronous)
    assert isinstance(provider, SimulatedAsyncProvider) and provider.drain(10)
    assert ledger.live_bytes() == base
