"""Traced checkpoint regions: ``ad.checkpoint`` inside traced code keeps the region's boundary
and recomputes its interior in the backward graph, with the eager policies.  Oracles: the
eager checkpoint (values, gradients, recompute counts) and ``jax.checkpoint``."""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.ad_checkpoint import checkpoint_name

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import traced
from tenferro_storage.ledger import AllocationReason, capture
from tests.traced._specs import close

# these tests are about the host program (its instructions, buffers and ledger):
# they name the host engine, which jit no longer picks by default when jax is installed
host_jit = functools.partial(ad.jit, engine="host")

RECOMPUTE = AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT
RNG = np.random.default_rng(23)
X = RNG.normal(size=(4, 5))
W = RNG.normal(size=(5, 5)) * 0.5

POLICIES = {
    "save_nothing": (ad.save_nothing, jax.checkpoint_policies.nothing_saveable),
    "save_everything": (ad.save_everything, jax.checkpoint_policies.everything_saveable),
    "save_contractions": (ad.save_contractions, jax.checkpoint_policies.dots_saveable),
}
# body: sin, matmul, tanh, mul.  Backward needs tanh's output (its rule and mul's), the
# sine for matmul's rule and x for sin's and mul's: sin, matmul and tanh are recomputed
# (mul's output is never read by a rule inside the region); a saved matmul output cuts
# the recomputation to sin (for matmul's rule) and tanh.
RECOMPUTED = {"save_nothing": 3, "save_everything": 0, "save_contractions": 2}


def _body(m: Any, x: Any, w: Any) -> Any:
    return m.tanh(m.sin(x) @ w) * x


def _ours(policy: Any) -> Any:
    def f(x: Any, w: Any) -> Any:
        y = ad.checkpoint(lambda a, b: _body(ad, a, b), policy=policy)(x, w)
        return ad.sum(y * y)

    return f


def _jax(policy: Any) -> Any:
    def f(x: Any, w: Any) -> Any:
        y = jax.checkpoint(lambda a, b: _body(jnp, a, b), policy=policy)(x, w)
        return jnp.sum(y * y)

    return f


def _plain(x: Any, w: Any) -> Any:
    y = _body(ad, x, w)
    return ad.sum(y * y)


def _recompute_eqns(g: traced.Graph) -> int:
    return sum(1 for e in g.eqns if e.note is not None and e.note.recompute)


def test_region_prints_as_a_block_and_leaves_the_forward_program_unchanged() -> None:
    g = ad.trace(_ours(ad.save_nothing))(X, W)
    text = str(g)
    assert "checkpoint[<lambda> policy=save_nothing] {" in text
    assert [e.prim.name for e in g.eqns] == [
        e.prim.name for e in ad.trace(_plain)(X, W).eqns
    ]
    traced.check(g)
    close(traced.eval_graph(g, X, W), traced.eval_graph(ad.trace(_plain)(X, W), X, W))


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_values_and_gradients_match_eager_checkpoint_and_jax(name: str) -> None:
    ours, theirs = POLICIES[name]
    g = ad.trace(_ours(ours))(X, W)
    value, grads = traced.eval_graph(traced.value_and_grad(g, argnums=(0, 1)), X, W)
    jv, jg = jax.value_and_grad(_jax(theirs), argnums=(0, 1))(X, W)
    ev, eg = ad.value_and_grad(_ours(ours), argnums=(0, 1))(ts.from_numpy(X), ts.from_numpy(W))
    close(value, jv)
    close(ev, jv)
    for a, b, c in zip(grads, jg, eg, strict=True):
        close(a, b)
        close(c, b)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_backward_recomputes_what_the_policy_does_not_save_as_eager_does(name: str) -> None:
    """Recompute equations in the graph == compiled CHECKPOINT_RECOMPUTE_OUTPUT allocations
    (without buffer reuse) == the eager checkpoint's recompute allocations."""
    policy = POLICIES[name][0]
    g = traced.grad(ad.trace(_ours(policy))(X, W), argnums=(0, 1))
    assert _recompute_eqns(g) == RECOMPUTED[name]
    jitted = host_jit(ad.grad(_ours(policy), argnums=(0, 1)), reuse=False)
    x, w = ts.from_numpy(X), ts.from_numpy(W)
    jitted.lower(x, w)
    with capture() as compiled:
        got = jitted(x, w)
    with capture() as eager:
        expected = ad.grad(_ours(policy), argnums=(0, 1))(x, w)
    assert compiled.allocations[RECOMPUTE] == RECOMPUTED[name]
    assert eager.allocations[RECOMPUTE] == RECOMPUTED[name]
    for a, b in zip(got, expected, strict=True):
        close(a, b)


def test_compiled_recompute_instructions_are_classified_and_run_in_backward() -> None:
    program = host_jit(ad.grad(_ours(ad.save_nothing), argnums=(0, 1))).lower(X, W).program
    reasons = [ins.reason for ins in program.instructions]
    assert reasons.count(RECOMPUTE) == 3
    first = reasons.index(RECOMPUTE)
    assert [ins.name for ins in program.instructions[first:first + 3]] == [
        "sin", "matmul", "tanh"
    ]


def _retained(f: Any, *args: Any) -> dict[str, tuple[str, ...]]:
    """producer -> needed_by of each retained value (producers are unique here)."""
    return {e.producer: e.needed_by for e in host_jit(ad.value_and_grad(f, argnums=(0, 1)))
            .retained(*args)}


def test_checkpointed_program_retains_only_the_boundary() -> None:
    plain = _retained(_plain, X, W)
    assert {"sin", "tanh", "mul"} <= set(plain)  # interior residuals without checkpointing
    kept = host_jit(ad.value_and_grad(_ours(ad.save_nothing), argnums=(0, 1))).retained(X, W)
    assert Counter(e.producer for e in kept) == Counter({"input": 2, "mul": 1})
    inputs = [e for e in kept if e.producer == "input"]
    assert all(e.needed_by == ("checkpoint.vjp",) for e in inputs)
    assert all(e.checkpoints == ("<lambda>",) for e in inputs)
    (y,) = [e for e in kept if e.producer == "mul"]
    assert y.needed_by == ("mul.vjp",)  # the region's output, kept by the consumer's rule


def test_a_saved_contraction_is_a_boundary_the_recomputation_starts_from() -> None:
    kept = _retained(_ours(ad.save_contractions), X, W)
    assert kept["matmul"] == ("checkpoint.vjp",)
    assert "sin" not in kept and "tanh" not in kept


@pytest.mark.parametrize(
    "f",
    [lambda x, w: ad.sum(ad.tanh(x @ w)), _ours(ad.save_nothing), _ours(ad.save_contractions)],
    ids=["plain", "save_nothing", "save_contractions"],
)
def test_retention_listing_matches_the_eager_tape(f: Any) -> None:
    """Same values kept, for the same reasons, as ``tape.retained()`` on the same program."""
    listed = host_jit(ad.grad(f, argnums=(0, 1))).retained(X, W)
    with ad.Tape() as tape:
        x, w = tape.watch(ts.from_numpy(X)), tape.watch(ts.from_numpy(W))
        loss = f(x, w)
        eager = tape.retained()
    del loss, x, w

    def key(producer: str, needed: tuple[str, ...], nbytes: int, shape: Any, dtype: str) -> Any:
        return ("input" if producer == "watch" else producer, tuple(sorted(set(needed))),
                nbytes, tuple(shape), dtype)

    assert Counter(key(e.producer, e.needed_by, e.nbytes, e.shape, e.dtype) for e in listed) == \
        Counter(key(e.producer, e.needed_by, e.nbytes, e.shape, e.dtype) for e in eager)


def test_retained_entries_name_the_executions_value_slots() -> None:
    jitted = host_jit(ad.value_and_grad(_plain, argnums=(0, 1)))
    program = jitted.lower(X, W).program
    made = {s: ins.name for ins in program.instructions for s in ins.outputs}
    for e in jitted.retained(X, W):
        assert e.slot is not None
        if e.producer == "input":
            assert e.slot < program.n_inputs
        else:
            assert made[e.slot].startswith(e.producer)


def test_a_graph_without_a_backward_half_retains_nothing() -> None:
    assert traced.retained(ad.trace(_plain)(X, W)) == []


def test_save_named_keeps_the_named_values_as_boundaries() -> None:
    def f(x: Any) -> Any:
        def chain(v: Any) -> Any:
            for i in range(6):
                v = ad.sin(v)
                if i == 2:
                    v = ad.name(v, "stage")
            return v

        return ad.sum(ad.checkpoint(chain, policy=ad.save_named("stage"))(x))

    def jf(x: Any) -> Any:
        def chain(v: Any) -> Any:
            for i in range(6):
                v = jnp.sin(v)
                if i == 2:
                    v = checkpoint_name(v, "stage")  # type: ignore[no-untyped-call]
            return v

        pol = jax.checkpoint_policies.save_only_these_names("stage")
        return jnp.sum(jax.checkpoint(chain, policy=pol)(x))

    g = traced.grad(ad.trace(f)(X))
    close(traced.eval_graph(g, X), jax.grad(jf)(X))
    # sin's rule reads its input: sines 1, 2, 4 and 5 are recomputed (3 is kept, and the
    # last one's output is read by no rule)
    assert _recompute_eqns(g) == 4
    kept = traced.retained(traced.value_and_grad(ad.trace(f)(X)))
    assert [e.producer for e in kept] == ["input", "sin"]


def test_nested_regions_and_several_outputs_match_jax() -> None:
    def ours(x: Any, w: Any) -> Any:
        def inner(v: Any) -> Any:
            return ad.exp(ad.sin(v) * 0.5)

        def outer(a: Any, b: Any) -> Any:
            h = ad.checkpoint(inner)(a @ b)
            return h * a, ad.tanh(h)

        p, q = ad.checkpoint(outer, policy=ad.save_contractions)(x, w)
        return ad.sum(p * q) + ad.sum(q * w[0])

    def theirs(x: Any, w: Any) -> Any:
        def inner(v: Any) -> Any:
            return jnp.exp(jnp.sin(v) * 0.5)

        def outer(a: Any, b: Any) -> Any:
            h = jax.checkpoint(inner)(a @ b)
            return h * a, jnp.tanh(h)

        p, q = jax.checkpoint(outer, policy=jax.checkpoint_policies.dots_saveable)(x, w)
        return jnp.sum(p * q) + jnp.sum(q * w[0])

    xs = RNG.normal(size=(5, 5))
    g = ad.trace(ours)(xs, W)
    text = str(g)
    assert "checkpoint[outer policy=save_contractions] {" in text
    assert "  checkpoint[inner policy=save_nothing] {" in text
    vg = traced.value_and_grad(g, argnums=(0, 1))
    traced.check(vg)
    value, grads = traced.eval_graph(vg, xs, W)
    jv, jg = jax.value_and_grad(theirs, argnums=(0, 1))(xs, W)
    close(value, jv)
    for a, b in zip(grads, jg, strict=True):
        close(a, b)
    compiled = host_jit(ad.value_and_grad(ours, argnums=(0, 1)))(xs, W)
    close(compiled[0], jv)
    for a, b in zip(compiled[1], jg, strict=True):
        close(a, b)


def test_forward_over_reverse_and_vmap_through_a_region_match_jax() -> None:
    g = ad.trace(_ours(ad.save_nothing))(X, W)
    dg = traced.grad(g)
    tangent = RNG.normal(size=X.shape)
    _, hvp = traced.eval_graph(traced.jvp(dg), X, W, tangent, np.zeros_like(W))
    jfun = _jax(jax.checkpoint_policies.nothing_saveable)
    _, jhvp = jax.jvp(lambda x: jax.grad(jfun)(x, W), (X,), (tangent,))
    close(hvp, jhvp)
    xs = RNG.normal(size=(3, *X.shape))
    batched = traced.eval_graph(traced.vmap(dg, 3, in_axes=(0, None)), xs, W)
    close(batched, jax.vmap(jax.grad(jfun), in_axes=(0, None))(xs, W))


def test_jvp_keeps_the_region_and_grad_of_grad_recomputes_again() -> None:
    g = ad.trace(lambda x: ad.sum(ad.checkpoint(lambda v: ad.sin(ad.sin(v)))(x)))(X)
    jg = traced.jvp(g)
    assert any(e.note is not None and e.note.region is not None for e in jg.eqns)
    h = traced.grad(lambda_sum_of_grad(g))
    jh = jax.grad(lambda x: jnp.sum(jax.grad(
        lambda v: jnp.sum(jax.checkpoint(lambda u: jnp.sin(jnp.sin(u)))(v)))(x)))(X)
    close(traced.eval_graph(h, X), jh)


def lambda_sum_of_grad(g: traced.Graph) -> traced.Graph:
    """The graph of ``x -> sum(grad(g)(x))``."""
    dg = traced.grad(g)
    out: traced.Graph = ad.trace(lambda x: ad.sum(traced.eval_graph(dg, x)))(X)
    return out


def test_grad_of_jit_on_handles_runs_the_region_as_an_eager_checkpoint() -> None:
    """On handles a jitted function binds its equations eagerly; a traced region becomes
    an eager ``ad.checkpoint`` with its policy: the same ledger and retention as eager."""
    x, w = ts.from_numpy(X), ts.from_numpy(W)
    for name in sorted(POLICIES):
        ours, theirs = POLICIES[name]
        with capture() as jitted_rec:
            got = ad.grad(ad.jit(_ours(ours)), argnums=(0, 1))(x, w)
        with capture() as eager_rec:
            expected = ad.grad(_ours(ours), argnums=(0, 1))(x, w)
        assert jitted_rec.allocations == eager_rec.allocations, name
        assert jitted_rec.allocations[RECOMPUTE] == RECOMPUTED[name]
        want = jax.grad(_jax(theirs), argnums=(0, 1))(X, W)
        for a, b, c in zip(got, expected, want, strict=True):
            close(a, c)
            close(b, c)
    with ad.Tape() as tape:
        xh, wh = tape.watch(ts.from_numpy(X)), tape.watch(ts.from_numpy(W))
        loss = ad.jit(_ours(ad.save_nothing))(xh, wh)
        needed = sorted(e.needed_by for e in tape.retained())
    del loss, xh, wh
    assert needed == [("checkpoint.vjp",), ("checkpoint.vjp",), ("mul.vjp", "mul.vjp")]


def test_nested_and_named_regions_on_handles_match_the_traced_gradient() -> None:
    def f(x: Any) -> Any:
        def inner(v: Any) -> Any:
            return ad.name(ad.sin(ad.sin(v)), "stage") * v

        def outer(v: Any) -> Any:
            return ad.exp(ad.checkpoint(inner)(v) * 0.3)

        return ad.sum(ad.checkpoint(outer, policy=ad.save_named("stage"))(x))

    got = ad.grad(ad.jit(f))(ts.from_numpy(X))
    close(got, traced.eval_graph(traced.grad(ad.trace(f)(X)), X))
    close(got, ad.grad(f)(ts.from_numpy(X)))


def test_grad_of_jit_on_handles_has_the_eager_checkpoints_peak() -> None:
    """Handles are dropped at their last use inside and around regions: the same ledger
    and the same peak as the eager program (a segmented sine chain)."""
    from tenferro_ad.scenarios.programs import deep_chain

    x = RNG.normal(size=2048)

    def f(v: Any) -> Any:
        return deep_chain(v, checkpoint=ad.save_nothing, depth=24, segments=4)

    with capture() as eager:
        expected = ad.grad(f)(ts.from_numpy(x))
    with capture() as jitted:
        got = ad.grad(ad.jit(f))(ts.from_numpy(x))
    assert jitted.allocations == eager.allocations
    assert jitted.peak_bytes == eager.peak_bytes
    close(got, expected)
