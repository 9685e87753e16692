"""Compilation to the runtime's program format and ``ad.jit``: values against JAX and eager,
the per-signature cache, liveness (every intermediate released at its last use, peak no
higher than eager), borrowed vs detached execution, engines, and composition."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import traced
from tenferro_ad._traced._compile import compile_graph
from tenferro_storage import AllocationReason, CopyReason, ledger
from tenferro_storage import runtime as rt
from tests.traced._specs import close

# these tests are about the host program (its instructions, buffers and ledger):
# they name the host engine, which jit no longer picks by default when jax is installed
host_jit = functools.partial(ad.jit, engine="host")

RNG = np.random.default_rng(11)
X, W = RNG.normal(size=(3, 4)), RNG.normal(size=(2, 4))


def _f(m: Any, x: Any, w: Any) -> Any:
    return m.sum(m.tanh(x @ w.T) * 2.0) + m.sum(m.exp(x[1:, ::2]))


def test_jit_matches_eager_and_jax_on_owners_and_numpy() -> None:
    """Owners (borrowed, scoped) and numpy arrays (imported, detached) give JAX's value."""
    jf = ad.jit(lambda x, w: _f(ad, x, w))
    want = _f(jnp, X, W)
    close(jf(X, W), want)
    x, w = ts.from_numpy(X), ts.from_numpy(W)
    close(jf(x, w), want)
    close(jf(x, w), _f(ad, x, w))
    with x.as_view_mut():  # nothing kept a borrow of the caller's owner
        pass


def test_the_cache_traces_once_per_signature() -> None:
    """Same shapes/dtypes: no retrace (new scalar values included); new shape: retrace."""
    traces = []

    def f(x: Any, s: Any) -> Any:
        traces.append(1)
        return ad.sum(x * s)

    jf = ad.jit(f)
    close(jf(X, 2.0), 2 * X.sum())
    close(jf(X + 1, 3.0), 3 * (X + 1).sum())
    assert len(traces) == 1 and jf.cache_size == 1
    close(jf(W, 2.0), 2 * W.sum())
    assert len(traces) == 2 and jf.cache_size == 2
    assert jf.lower(X, 2.0).compile_seconds > 0


def test_program_releases_every_intermediate_at_its_last_use_and_folds_views() -> None:
    """Liveness in the program: each intermediate is released right after its last
    reader; metadata-only ops (transpose, slicing) are views inside their consumers."""
    g = traced.trace(lambda x, w: _f(ad, x, w))(X, W)
    p = compile_graph(g, "f")
    names = [ins.name for ins in p.instructions]
    assert not any(n.startswith(("transpose", "slice")) for n in names)
    assert "matmul<_,transpose(_)>" in names and "exp<slice(_)>" in names
    released = [s for ins in p.instructions for s in ins.release_after]
    outputs = {o.value for o in p.outputs}
    assert sorted(released) == sorted(set(range(p.n_inputs, p.n_values)) - outputs)
    for i, ins in enumerate(p.instructions):
        for s in ins.release_after:
            assert not any(s in later.inputs for later in p.instructions[i + 1:])


def _chain(x: Any) -> Any:
    for k in range(30):
        x = ad.sin(x) * 1.01 + 0.1 if k % 2 else ad.tanh(x) - 0.05
    return x


def test_compiled_chain_peak_is_no_higher_than_eager() -> None:
    """A 30-op chain on 10^5 float64: compiled peak <= eager peak, and only the output
    stays alive; allocations are one per kernel, no copies."""
    x = ts.from_numpy(RNG.normal(size=100_000))
    jf = ad.jit(_chain)
    jf.lower(x)
    with ledger.capture() as eager:
        e = _chain(x)
        del e
    with ledger.capture() as comp:
        out = jf(x)
    assert comp.peak_bytes <= eager.peak_bytes
    assert comp.peak_bytes <= 3 * 800_000  # at most the input's two live intermediates + out
    assert not comp.copies
    assert comp.live_bytes == 800_000
    close(out, ad.jit(_chain)(ts.from_numpy(x.to_numpy())))


def test_detached_on_the_asynchronous_engine_downloads_each_output_once() -> None:
    """numpy inputs go through detached submission (also on sim-async); each output is
    extracted from the bundle's group, and since that engine's memory is not host-visible,
    downloaded: one recorded TRANSFER per output, plus one per imported input."""
    sim = next(e.id for e in rt.engines() if not e.synchronous)
    jf = ad.jit(lambda x, w: (ad.sin(x), _f(ad, x, w), ad.cos(w)), engine=sim)
    with ledger.capture() as rec:
        a, b, c = jf(X, W)
    assert rec.copies == {CopyReason.TRANSFER: 2 + 3}  # two imports, three downloads
    assert {ts.providers.domain_of(t) for t in (a, b, c)} == {"host"}
    close(a, np.sin(X))
    close(b, _f(jnp, X, W))
    close(c, np.cos(W))


def test_scoped_execution_refuses_an_asynchronous_engine_and_changes_nothing() -> None:
    """Borrowed owners can only run synchronously: the runtime refuses before admission."""
    sim = next(e.id for e in rt.engines() if not e.synchronous)
    x = ts.from_numpy(X)
    with pytest.raises(Exception, match="asynchronous"):
        ad.jit(ad.sin, engine=sim)(x)
    close(x.to_numpy(), X)


def test_identity_literal_and_repeated_outputs() -> None:
    """An input returned as is, a constant and a value returned twice are all owners."""
    jf = ad.jit(lambda x: (x, np.float64(3.0), ad.sin(x), ad.sin(x) * 1.0))
    outs = jf(X)
    close(outs[0], X)
    close(outs[1], 3.0)
    close(outs[2], np.sin(X))
    close(outs[3], np.sin(X))
    x = ts.from_numpy(X)
    outs2 = jf(x)
    close(outs2[0], X)


def test_grad_of_jit_and_jit_of_a_grad_graph_match_jax() -> None:
    """ad.grad(ad.jit(f)) records through the graph; jitting a gradient graph compiles it."""
    x, w = ts.from_numpy(X), ts.from_numpy(W)
    want = jax.grad(lambda a, b: _f(jnp, a, b), argnums=(0, 1))(X, W)
    got = ad.grad(ad.jit(lambda a, b: _f(ad, a, b)), argnums=(0, 1))(x, w)
    for a, b in zip(got, want, strict=True):
        close(a, b)
    gg = traced.grad(traced.trace(lambda a, b: _f(ad, a, b))(X, W), argnums=(0, 1))
    compiled = ad.jit(lambda a, b: traced.eval_graph(gg, a, b))
    for a, b in zip(compiled(X, W), want, strict=True):
        close(a, b)


def test_jit_inside_a_trace_inlines() -> None:
    """A jitted function called on tracers traces through (its equations are inlined)."""
    jf = ad.jit(lambda x: ad.sin(x) * 2.0)
    g = traced.trace(lambda x: ad.sum(jf(x)))(X)
    assert [e.prim.name for e in g.eqns] == ["sin", "mul", "sum"]


def test_each_fresh_output_is_one_operation_output_allocation() -> None:
    """A single-output call on owners: one allocation per kernel (exp writes in place into
    sin's dead buffer: buffer reuse), the result moved out of the bundle (no copy)."""
    x = ts.from_numpy(X)
    jf = host_jit(lambda a: ad.sum(ad.exp(ad.sin(a))))
    jf(x)
    with ledger.capture() as rec:
        out = jf(x)
    assert rec.allocations == {AllocationReason.OPERATION_OUTPUT: 2}
    assert not rec.copies
    close(out, np.sum(np.exp(np.sin(X))))


def test_fused_small_kernels_match_and_keep_only_outputs_in_the_ledger() -> None:
    """scratch_bytes fuses small intermediates into one generated kernel: same values (views
    and literals included), one allocation per output, nothing else in the ledger."""
    def f(x: Any, w: Any) -> Any:
        h = ad.tanh(x @ w.T + np.array([0.5, -0.5]))
        return ad.sum(h * h), ad.reshape(h, (-1,)), ad.broadcast_to(np.float64(2.0), (2, 2))

    jf = host_jit(f, scratch_bytes=4096)
    entry = jf.lower(X, W)
    assert len(entry.program.instructions) < len(entry.graph.eqns)
    fused = [ins for ins in entry.program.instructions if ins.name.startswith("fused")]
    assert fused and "def fused(" in fused[0].kernel.source
    with ledger.capture() as rec:
        s, flat, two = jf(X, W)  # detached: every output extracted without a copy
    h = np.tanh(X @ W.T + np.array([0.5, -0.5]))
    close(s, np.sum(h * h))
    close(flat, h.reshape(-1))
    close(two, np.full((2, 2), 2.0))
    # the three outputs and h (which the reshape output is laid out from); the other
    # intermediates were scratch inside the fused kernel
    assert rec.allocations[AllocationReason.OPERATION_OUTPUT] == 4
    assert rec.copies == {CopyReason.TRANSFER: 2}


def test_fused_and_unfused_programs_agree_with_jax_on_gradients() -> None:
    """The same gradient graph compiled with and without fusion gives JAX's gradients."""
    gg = traced.grad(traced.trace(lambda a, b: _f(ad, a, b))(X, W), argnums=(0, 1))
    want = jax.grad(lambda a, b: _f(jnp, a, b), argnums=(0, 1))(X, W)
    for scratch in (0, 64, 1 << 20):
        jf = host_jit(lambda a, b: traced.eval_graph(gg, a, b), scratch_bytes=scratch)
        for a, b in zip(jf(X, W), want, strict=True):
            close(a, b)


def test_a_scoped_call_moves_every_fresh_output_out_without_a_copy() -> None:
    """A call on owners with several outputs (value and gradients): every computed value is
    moved out of the scoped bundle -- one allocation per kernel, no copy event; an input
    returned as is and a value returned twice are one recorded duplicate each."""
    x, w = ts.from_numpy(X), ts.from_numpy(W)
    vg = ad.jit(ad.value_and_grad(lambda a, b: _f(ad, a, b), argnums=(0, 1)))
    vg(x, w)
    with ledger.capture() as rec:
        v, (gx, gw) = vg(x, w)
    assert not rec.copies
    assert rec.live_bytes == 8 + X.nbytes + W.nbytes  # the outputs, nothing else
    want_v, want_g = jax.value_and_grad(lambda a, b: _f(jnp, a, b), argnums=(0, 1))(X, W)
    close(v, want_v)
    close(gx, want_g[0])
    close(gw, want_g[1])
    both = ad.jit(lambda a: (a, ad.sin(a), ad.cos(a)))
    twice = ad.jit(lambda a: (lambda s: (s, s))(ad.sin(a)))
    both(x), twice(x)
    with ledger.capture() as rec:
        same, s, c = both(x)
    assert rec.copies == {CopyReason.EXPLICIT_DUPLICATE: 1}  # the input returned as is
    close(same, X)
    close(s, np.sin(X))
    close(c, np.cos(X))
    prog = twice.lower(x).program
    assert [o.kind for o in prog.outputs] == [rt.OutputKind.FRESH, rt.OutputKind.REPEATED]
    with ledger.capture() as rec:
        a, b = twice(x)
    assert rec.copies == {CopyReason.EXPLICIT_DUPLICATE: 1}  # the second owner of one value
    assert a is not b
    close(a, np.sin(X))
    close(b, np.sin(X))
