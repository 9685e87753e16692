"""Hypothesis-generated random programs: traced == eager == JAX for values, gradients,
tangents, forward-over-reverse and vmapped results (with a finite-difference back-up)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import traced
from tests.traced._specs import close

UNARY = ["sin", "cos", "tanh", "neg", "square", "exp_tanh", "sum_last", "mean_first", "T"]
BINARY = ["add", "sub", "mul", "safe_div", "maximum", "matmul"]
SHAPES = [(2, 3), (3,), (3, 2)]


def _unary(m: Any, op: str, x: Any) -> Any:
    if op == "neg":
        return -x
    if op == "square":
        return x * x
    if op == "exp_tanh":
        return m.exp(m.tanh(x))
    if op == "sum_last":
        return m.sum(x, axis=-1, keepdims=True) if x.ndim else x
    if op == "mean_first":
        return m.mean(x, axis=0) if x.ndim else x
    if op == "T":
        return x.T
    return getattr(m, op)(x)


def _fits(op: str, a: Any, b: Any) -> bool:
    sa, sb = tuple(a.shape), tuple(b.shape)
    if op == "matmul":
        return len(sa) >= 1 and len(sb) >= 1 and sa[-1] == sb[-2 if len(sb) > 1 else 0]
    try:
        np.broadcast_shapes(sa, sb)
    except ValueError:
        return False
    return True


def _binary(m: Any, op: str, a: Any, b: Any) -> Any:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "safe_div":
        return a / (1.0 + b * b)
    if op == "maximum":
        return m.maximum(a, b)
    return a @ b


Step = tuple[int, int, int, int]


def run(m: Any, steps: list[Step], *inputs: Any) -> Any:
    """The program: each step applies a unary or binary op to pool values, appending."""
    return apply_steps(m, steps, list(inputs))[-1]


def apply_steps(m: Any, steps: list[Step], pool: list[Any]) -> list[Any]:
    """``pool`` extended by one value per applicable step (a copy; ``pool`` is unchanged)."""
    pool = list(pool)
    for kind, op, i, j in steps:
        a = pool[i % len(pool)]
        if kind == 0:
            pool.append(_unary(m, UNARY[op % len(UNARY)], a))
            continue
        name = BINARY[op % len(BINARY)]
        b = pool[j % len(pool)]
        if _fits(name, a, b):
            pool.append(_binary(m, name, a, b))
        elif _fits(name, b, a):
            pool.append(_binary(m, name, b, a))
    return pool


def loss(m: Any, steps: list[Step], *inputs: Any) -> Any:
    return m.sum(run(m, steps, *inputs) * 0.5) + m.sum(m.sin(inputs[0]))


programs = st.lists(
    st.tuples(st.integers(0, 1), st.integers(0, 20), st.integers(0, 20), st.integers(0, 20)),
    min_size=1, max_size=8,
)


def _inputs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.5, 1.5, s) for s in SHAPES]


@settings(deadline=None)
@given(steps=programs, seed=st.integers(0, 2**16))
def test_random_program_values_grads_and_tangents_match_jax_and_eager(
    steps: list[Step], seed: int
) -> None:
    """eval, grad (all inputs), jvp and jvp-of-grad graphs agree with JAX; grad with eager."""
    xs = _inputs(seed)
    g = traced.trace(lambda *a: loss(ad, steps, *a))(*xs)
    traced.check(g)
    jl = lambda *a: loss(jnp, steps, *a)  # noqa: E731
    close(traced.eval_graph(g, *xs), jl(*xs))
    nums = (0, 1, 2)
    grads = traced.eval_graph(traced.grad(g, argnums=nums), *xs)
    want = jax.grad(jl, argnums=nums)(*xs)
    eager = ad.grad(lambda *a: loss(ad, steps, *a), argnums=nums)(
        *[ts.from_numpy(x) for x in xs]
    )
    for a, b, c in zip(grads, want, eager, strict=True):
        close(a, b)
        close(a, c)
    rng = np.random.default_rng(seed + 1)
    tans = [rng.normal(size=x.shape) for x in xs]
    _, tan = traced.eval_graph(traced.jvp(g), *xs, *tans)
    close(tan, jax.jvp(jl, tuple(xs), tuple(tans))[1])
    hvp = traced.jvp(traced.grad(g, argnums=nums))
    _, hv = traced.eval_graph(hvp, *xs, *tans)
    _, jhv = jax.jvp(jax.grad(jl, argnums=nums), tuple(xs), tuple(tans))
    for a, b in zip(hv, jhv, strict=True):
        close(a, b, 1e-8)


@settings(deadline=None)
@given(steps=programs, seed=st.integers(0, 2**16), axes=st.sampled_from(
    [(0, 0, 0), (0, None, None), (None, 1, None), (1, None, 0)]))
def test_random_program_vmap_matches_jax_vmap(
    steps: list[Step], seed: int, axes: tuple[int | None, ...]
) -> None:
    """vmap of the program's (non-scalar) result with mixed in_axes equals jax.vmap."""
    xs = _inputs(seed)
    rng = np.random.default_rng(seed)
    batch = [x if ax is None else np.stack([x + 0.1 * rng.normal(size=x.shape)
                                            for _ in range(2)], axis=ax)
             for x, ax in zip(xs, axes, strict=True)]
    got = ad.vmap(lambda *a: run(ad, steps, *a), in_axes=axes)(*batch)
    want = jax.vmap(lambda *a: run(jnp, steps, *a), in_axes=axes)(*batch)
    close(got, want)


def test_finite_differences_back_up_the_traced_gradient() -> None:
    """Central differences of the traced program's own value agree with its gradient."""
    steps: list[Step] = [(1, 2, 0, 1), (0, 2, 3, 0), (1, 5, 0, 2), (0, 6, 5, 0)]
    xs = _inputs(3)
    g = traced.trace(lambda *a: loss(ad, steps, *a))(*xs)
    grads = traced.eval_graph(traced.grad(g, argnums=(0, 1, 2)), *xs)
    eps = 1e-6
    for k, x in enumerate(xs):
        d = np.random.default_rng(k).normal(size=x.shape)
        plus = [*xs[:k], x + eps * d, *xs[k + 1:]]
        minus = [*xs[:k], x - eps * d, *xs[k + 1:]]
        fd = (traced.eval_graph(g, *plus).item() - traced.eval_graph(g, *minus).item()) / (2 * eps)
        np.testing.assert_allclose(np.sum(grads[k].to_numpy() * d), fd, rtol=1e-5, atol=1e-7)


@settings(deadline=None)
@given(steps=programs, seed=st.integers(0, 2**16), scratch=st.sampled_from([0, 48, 1 << 20]))
# a fused group whose values nothing reads (dead code) once generated `return (,)`
@example(steps=[(0, 0, 0, 0), (0, 16, 1, 0), *[(0, 0, 0, 0)] * 4, (0, 6, 13, 0)], seed=0,
         scratch=48)
def test_random_program_compiled_value_and_grad_match_jax(
    steps: list[Step], seed: int, scratch: int
) -> None:
    """The compiled program (unfused, partly fused, fully fused) and its compiled gradient
    graph agree with JAX."""
    xs = _inputs(seed)
    jl = lambda *a: loss(jnp, steps, *a)  # noqa: E731
    close(ad.jit(lambda *a: run(ad, steps, *a), scratch_bytes=scratch)(*xs),
          run(jnp, steps, *xs))
    gg = traced.grad(traced.trace(lambda *a: loss(ad, steps, *a))(*xs), argnums=(0, 1, 2))
    got = ad.jit(lambda *a: traced.eval_graph(gg, *a), scratch_bytes=scratch)(
        *[ts.from_numpy(x) for x in xs]
    )
    for a, b in zip(got, jax.grad(jl, argnums=(0, 1, 2))(*xs), strict=True):
        close(a, b)
