"""Buffer reuse in compiled programs: results written (numpy ``out=``) into the buffers of
values that died earlier, where shape and dtype allow -- visible in the ledger as fewer
``OPERATION_OUTPUT`` allocations and a lower peak, with the same values as JAX."""

from __future__ import annotations

import functools
from typing import Any

import attrs
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import traced
from tenferro_ad._traced._compile import compile_graph
from tenferro_ad.errors import DonationError
from tenferro_storage import AllocationReason, ledger
from tenferro_storage import runtime as rt
from tests.traced._specs import close
from tests.traced.test_random_programs import Step, _inputs, loss, programs, run

# these tests are about the host program (its instructions, buffers and ledger):
# they name the host engine, which jit no longer picks by default when jax is installed
host_jit = functools.partial(ad.jit, engine="host")

RNG = np.random.default_rng(5)
X = RNG.normal(size=(64, 64))
OP = AllocationReason.OPERATION_OUTPUT


def _chain(m: Any, x: Any) -> Any:
    return m.cos(m.tanh(m.sin(x) * 1.1 + 0.5))


def _run(jf: Any, *args: Any) -> tuple[Any, Any]:
    """One call on owners (borrowed: no import in the ledger), captured after a warm-up."""
    args = tuple(ts.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args)
    jf(*args)  # compile outside the capture
    with ledger.capture() as rec:
        out = jf(*args)
    return out, rec


def test_an_elementwise_chain_runs_in_one_buffer() -> None:
    """sin allocates; mul, add, tanh and cos write in place into the dying operand: one
    allocation instead of five, and a peak of one array instead of two."""
    x = ts.from_numpy(X)
    out, rec = _run(host_jit(lambda a: _chain(ad, a)), x)
    base, rec0 = _run(host_jit(lambda a: _chain(ad, a), reuse=False), x)
    close(out, _chain(jnp, X))
    close(base, _chain(jnp, X))
    assert rec.allocations == {OP: 1}
    assert rec0.allocations == {OP: 5}
    assert rec.peak_bytes == X.nbytes
    assert rec0.peak_bytes == 2 * X.nbytes
    assert not rec.copies


def test_the_program_names_the_buffer_each_instruction_writes_into() -> None:
    """``str(program)`` shows ``into vN``; each in-place write reads that slot last."""
    program = host_jit(lambda a: _chain(ad, a)).lower(X).program
    text = str(program)
    assert text.count(" into ") == 4
    for ins in program.instructions[1:]:
        assert ins.into in ins.inputs and ins.into in ins.release_after


def test_no_reuse_across_shapes_or_dtypes() -> None:
    """A reduction (another shape) and a cast (another dtype) allocate afresh; the
    (64,)-shaped exp writes into the sum's buffer and cos into sin's (both dead)."""
    def f(a: Any) -> Any:
        s = ad.sum(ad.sin(a), axis=0)
        return ad.exp(s), ad.astype(ad.cos(a), np.float32)

    jf = host_jit(f)
    ins = jf.lower(X).program.instructions
    assert [(i.name, i.into) for i in ins] == [
        ("sin", None), ("sum", None), ("exp", 2), ("cos", 1), ("astype", None)
    ]
    (e, c), rec = _run(jf, X)
    close(e, np.exp(np.sin(X).sum(0)))
    close(c, np.cos(X).astype(np.float32))
    assert c.dtype == np.float32
    assert rec.allocations[OP] == 3  # sin, sum, astype (+ the scoped two-output copies)


def test_an_operand_read_through_a_view_is_not_overwritten_but_its_dead_buffer_is_reused() -> None:
    """``cos(u.T)`` reads ``u`` through a view: no in-place write (numpy would buffer the
    overlap); ``u`` dies there and the next same-shaped result takes its buffer."""
    def f(a: Any) -> Any:
        u = ad.sin(a)
        v = ad.cos(u.T)
        return v.T + 1.0

    jf = host_jit(f)
    ins = jf.lower(X).program.instructions
    assert [i.name for i in ins] == ["sin", "cos<transpose(_)>", "add<transpose(_),1.0>"]
    assert ins[1].into is None
    assert ins[2].into == ins[0].outputs[0]  # the buffer u left behind
    out, rec = _run(jf, X)
    close(out, np.cos(np.sin(X).T).T + 1.0)
    assert rec.allocations == {OP: 2}


def test_a_buffer_is_never_held_across_a_fresh_allocation() -> None:
    """A dead buffer is only reused while nothing was allocated since it died: the peak
    with reuse is never above the peak without it."""
    def f(a: Any) -> Any:
        u = ad.sin(a)
        v = ad.cos(u.T)  # u dies here (read through a view)
        w = a / 3.0  # a fresh allocation (not a ufunc) while u's buffer would be held
        return w + v.T

    jf = host_jit(f)
    ins = jf.lower(X).program.instructions
    assert [i.into for i in ins] == [None, None, None, ins[2].outputs[0]]
    out, rec = _run(jf, X)
    _, rec0 = _run(host_jit(f, reuse=False), X)
    close(out, X / 3.0 + np.cos(np.sin(X).T).T)
    assert rec.peak_bytes <= rec0.peak_bytes
    assert rec.allocations[OP] < rec0.allocations[OP]


def test_a_matmul_writes_into_a_dead_buffer_but_never_over_its_operand() -> None:
    """matmul (a gufunc) takes a buffer that died before it, never its own operand's."""
    def f(a: Any) -> Any:
        u = ad.cos(ad.sin(a).T)  # sin's buffer dies here (read through a view)
        return u @ u

    jf = host_jit(f)
    ins = jf.lower(X).program.instructions
    assert [i.name for i in ins] == ["sin", "cos<transpose(_)>", "matmul"]
    assert ins[2].into == ins[0].outputs[0]
    out, rec = _run(jf, X)
    u = np.cos(np.sin(X).T)
    close(out, u @ u)
    assert rec.allocations == {OP: 2}


def test_gradient_programs_reuse_buffers_and_match_jax() -> None:
    """``jit(grad(f))``: the backward chain writes into the cotangents' dead buffers."""
    import jax

    def f(m: Any, a: Any) -> Any:
        return m.sum(_chain(m, a) * _chain(m, a))

    jg = host_jit(ad.grad(lambda a: f(ad, a)))
    g, rec = _run(jg, X)
    _, rec0 = _run(host_jit(ad.grad(lambda a: f(ad, a)), reuse=False), X)
    close(g, jax.grad(lambda a: f(jnp, a))(X))
    assert rec.allocations[OP] < rec0.allocations[OP]
    assert rec.peak_bytes < rec0.peak_bytes


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_reuse_keeps_each_dtype(dtype: Any) -> None:
    """float32 and complex chains reuse too; the values keep their dtype."""
    x = (X + 0.5j * X[::-1]).astype(dtype) if dtype is np.complex128 else X.astype(dtype)
    jf = host_jit(lambda a: ad.exp(ad.sin(a) * 0.5))
    out, rec = _run(jf, x)
    got, want = out.to_numpy(), np.exp(np.sin(x) * 0.5)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert rec.allocations == {OP: 1}


def test_the_runtime_refuses_a_write_into_a_live_value() -> None:
    """``into`` must name a value released at or before the instruction (ProgramError)."""
    def sin(a: Any, out: Any = None) -> Any:
        return np.sin(a, out=out)

    ins = (
        rt.Instruction(sin, (0,), (1,), name="sin"),
        rt.Instruction(sin, (1,), (2,), name="sin", into=1),  # v1 is still read below
        rt.Instruction(np.add, (1, 2), (3,), release_after=(1, 2), name="add"),
    )
    with pytest.raises(rt.ProgramError, match="not released at or before"):
        rt.CompiledGraph(1, 4, ins, (rt.ProgramOutput(rt.OutputKind.FRESH, 3),))


def test_compile_graph_without_reuse_writes_nothing_into() -> None:
    """``reuse=False`` is the plain program: every result a fresh allocation."""
    g = ad.trace(lambda a: _chain(ad, a))(X)
    assert all(i.into is None for i in compile_graph(g, reuse=False).instructions)
    assert sum(i.into is not None for i in compile_graph(g).instructions) == 4


@settings(deadline=None, max_examples=25)
@given(steps=programs, seed=st.integers(0, 2**16))
def test_random_programs_with_reuse_equal_those_without_bit_for_bit(
    steps: list[Step], seed: int
) -> None:
    """Hypothesis programs (broadcasts, views, matmuls, reductions), value and gradient:
    reuse changes no bit of any result, never allocates more and never peaks higher."""
    xs = [ts.from_numpy(x) for x in _inputs(seed)]

    def f(*a: Any) -> Any:
        return ad.value_and_grad(lambda *b: loss(ad, steps, *b), argnums=(0, 1, 2))(*a)

    (v, gs), rec = _run(host_jit(f), *xs)
    (v0, gs0), rec0 = _run(host_jit(f, reuse=False), *xs)
    for a, b in zip((v, *gs), (v0, *gs0), strict=True):
        np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())
    assert rec.allocations[OP] <= rec0.allocations[OP]
    assert rec.peak_bytes <= rec0.peak_bytes


@settings(deadline=None, max_examples=25)
@given(steps=programs, seed=st.integers(0, 2**16))
def test_random_programs_donate_or_refuse_and_never_change_a_result(
    steps: list[Step], seed: int
) -> None:
    """Donating the first input either refuses (DonationError, the owner intact) or gives
    exactly the undonated result."""
    xs = _inputs(seed)

    def f(*a: Any) -> Any:
        return run(ad, steps, *a) * 1.0

    want = host_jit(f)(*xs).to_numpy()
    x0 = ts.from_numpy(xs[0])
    try:
        got = host_jit(f, donate_argnums=0)(x0, *xs[1:])
    except DonationError:
        np.testing.assert_array_equal(x0.to_numpy(), xs[0])
        return
    np.testing.assert_array_equal(got.to_numpy(), want)


def test_a_fused_instruction_is_never_rewritten_into_a_buffer() -> None:
    """With ``scratch_bytes``, a fused group whose one export is an ufunc's value keeps
    its generated kernel (only plain instructions take ``into``); values unchanged."""
    def f(x: Any, y: Any) -> Any:
        t = ad.cos(y)
        u = ad.exp(t.T)  # t dies here (a view read): its buffer waits for a taker
        b = u.T + ad.sin(x) * 2.0  # the fused group [sin, mul, add] exports only b
        return ad.cos(b) * 3.0

    xs, ys = np.ones(4), RNG.normal(size=(100, 4))
    jf = host_jit(f, scratch_bytes=64)
    ins = jf.lower(xs, ys).program.instructions
    fused = [i for i in ins if i.name.startswith("fused")]
    assert fused and all(i.into is None for i in fused)
    close(jf(xs, ys), np.cos(np.exp(np.cos(ys).T).T + np.sin(xs) * 2.0) * 3.0)


def test_an_equation_on_literals_only_reuses_a_dead_buffer() -> None:
    """An elementwise equation whose operands are all literals (a hand-built graph, or one
    whose literal is too large to fold at trace time) may write into a dead value's buffer:
    its ``out=`` kernel takes no array argument and computes the right value.  Mutant:
    ``OutKernel``'s slot count ``default=-1`` made ``+1`` (a kernel expecting two arrays)."""
    x = np.linspace(0.5, 1.5, 64)
    c = np.linspace(0.0, 1.0, 64)

    def f(a: Any) -> Any:
        t = ad.sum(ad.sin(a))
        return ad.exp(a) * t

    g = ad.trace(f)(x)
    assert [e.prim.name for e in g.eqns] == ["sin", "sum", "exp", "mul"]
    e = g.eqns[2]
    lit_only = traced.Eqn(e.prim, (traced.Lit(c),), e.params, out=e.out)
    g = attrs.evolve(g, eqns=(*g.eqns[:2], lit_only, *g.eqns[3:]))
    traced.check(g)
    p = compile_graph(g, "literal-exp")
    assert p.instructions[2].into == 1  # exp(const) written into sin's dead buffer
    out = rt.run_program(p, [x])
    np.testing.assert_allclose(out[p.outputs[0].value].to_numpy(), np.exp(c) * np.sin(x).sum())  # type: ignore[index]
    del out
