"""Random programs of mixed op families under random transform compositions, against JAX.

Each program is a seeded list of steps over a pool of values (three inputs first):
elementwise ops, reductions over a random axis with random ``keepdims``, broadcasting
binary ops, matmul and einsum, indexing (flips, integer-array gathers), concatenate and
stack, and linalg on well-conditioned matrices (``inv``/``det`` of ``I + 0.1 tanh(a)``).
Growth is bounded (multiplicands pass through ``tanh``) so no value overflows.  Each
program runs under one transform composition -- ``grad``, ``jit(grad)``, ``grad(jit)``,
``vjp``, ``jvp``, ``jit(jvp)``, ``vmap(grad)``, ``jit(vmap(grad))``, ``grad`` through
``checkpoint`` (each policy), forward-over-reverse -- with the inputs given as numpy
arrays or as owners, and must equal JAX's result in value, dtype and shape while leaving
every input unchanged (arrays equal, owners not consumed and equal).

The number of programs follows the hypothesis profile (tests/conftest.py: ``dev`` 20,
``ci`` 100, ``thorough`` 1000).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tenferro_ad as ad
import tenferro_storage as ts

SHAPES = [(3, 4), (4,), (4, 4)]
UNARY = ["sin", "tanh", "sigmoid", "sin_times", "sum_axis", "mean_axis", "max_axis",
         "sum_all", "flip", "take", "T", "inv", "det"]
BINARY = ["add", "sub", "mul", "matmul", "einsum", "concat", "stack"]
Step = tuple[int, int, int, int, int]


def _eye(m: Any, n: int) -> Any:
    return m.eye(n) if m is jnp else ad.eye(n)


def _unary(m: Any, op: str, a: Any, r: int) -> Any | None:
    nd = len(a.shape)
    if op == "sin":
        return m.sin(a)
    if op == "tanh":
        return m.tanh(a)
    if op == "sigmoid":
        return 1.0 / (1.0 + m.exp(-m.tanh(a)))
    if op == "sin_times":
        return m.sin(a) * a
    if op in ("sum_axis", "mean_axis", "max_axis"):
        if nd == 0:
            return None
        axis, keep = (r % (nd + 1)) - 1, bool((r // 5) % 2)  # -1 .. nd-1
        fn = {"sum_axis": m.sum, "mean_axis": m.mean, "max_axis": m.max}[op]
        return fn(a, axis=axis, keepdims=keep)
    if op == "sum_all":
        return m.sum(a, keepdims=bool(r % 2))
    if op == "flip":
        return a[::-1] if nd else None
    if op == "take":
        if not nd:
            return None
        n = a.shape[0]
        return a[np.array([r % n, 0, (r + 1) % n])]
    if op == "T":
        return a.T
    if nd != 2 or a.shape[0] != a.shape[1]:
        return None
    well = _eye(m, a.shape[0]) + 0.1 * m.tanh(a)  # eigenvalues in a disc around 1
    return m.linalg.inv(well) if op == "inv" else m.linalg.det(well)


def _broadcasts(a: Any, b: Any) -> bool:
    try:
        np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
    except ValueError:
        return False
    return True


def _binary(m: Any, op: str, a: Any, b: Any) -> Any | None:
    sa, sb = tuple(a.shape), tuple(b.shape)
    if op in ("add", "sub", "mul"):
        if not _broadcasts(a, b):
            return None
        return a + b if op == "add" else a - b if op == "sub" else a * m.tanh(b)
    if op == "matmul":
        if not sa or not sb or sa[-1] != sb[-2 if len(sb) > 1 else 0]:
            return None
        return a @ m.tanh(b)
    if op == "einsum":
        if len(sa) != 2 or len(sb) != 2 or sa[1] != sb[1]:
            return None
        return m.einsum("ij,kj->ik", a, m.tanh(b))
    if op == "concat":
        if len(sa) != len(sb) or not sa or sa[1:] != sb[1:]:
            return None
        return m.concatenate([a, b], axis=0)
    if sa != sb:
        return None
    return m.stack([a, b])


def program(m: Any, steps: list[Step], *inputs: Any) -> Any:
    """The last value of the pool after the applicable steps (the inputs if none)."""
    pool = list(inputs)
    for kind, op, i, j, r in steps:
        a = pool[i % len(pool)]
        if kind == 0:
            out = _unary(m, UNARY[op % len(UNARY)], a, r)
        else:
            b = pool[j % len(pool)]
            name = BINARY[op % len(BINARY)]
            out = _binary(m, name, a, b)
            if out is None:
                out = _binary(m, name, b, a)
        if out is not None:
            pool.append(out)
    return pool[-1]


def loss(m: Any, steps: list[Step], *inputs: Any) -> Any:
    return m.sum(program(m, steps, *inputs) * 0.5) + m.sum(m.sin(inputs[0]))


ARGNUMS = (0, 1, 2)
POLICIES = [ad.save_nothing, ad.save_everything, ad.save_contractions]


def _checkpointed(steps: list[Step], policy: Any) -> Callable[..., Any]:
    def f(*a: Any) -> Any:
        region = ad.checkpoint(lambda *b: program(ad, steps, *b), policy=policy)
        return ad.sum(region(*a) * 0.5) + ad.sum(ad.sin(a[0]))

    return f


def _run(name: str, steps: list[Step], xs: list[Any], ts_: list[np.ndarray],
         ct_seed: int, batch: Any) -> tuple[Any, Any]:
    """(tenferro's result, JAX's) of composition ``name``."""
    L = lambda *a: loss(ad, steps, *a)  # noqa: E731
    J = lambda *a: loss(jnp, steps, *a)  # noqa: E731
    arrays = [np.asarray(t) for t in ts_]
    jx = [np.asarray(x.to_numpy() if isinstance(x, ts.Tensor) else x) for x in xs]
    if name == "grad":
        return ad.grad(L, argnums=ARGNUMS)(*xs), jax.grad(J, argnums=ARGNUMS)(*jx)
    if name == "jit_grad":
        return ad.jit(ad.grad(L, argnums=ARGNUMS))(*xs), jax.grad(J, argnums=ARGNUMS)(*jx)
    if name == "grad_jit":
        return ad.grad(ad.jit(L), argnums=ARGNUMS)(*xs), jax.grad(J, argnums=ARGNUMS)(*jx)
    if name == "vjp":
        out, pull = ad.vjp(lambda *a: program(ad, steps, *a), *xs)
        jout, jpull = jax.vjp(lambda *a: program(jnp, steps, *a), *jx)
        c = np.asarray(np.random.default_rng(ct_seed).normal(size=jout.shape), jout.dtype)
        cts = pull(c)
        pull.release()  # (an output that *is* a primal owner keeps its own borrow: readable)
        return (out.to_numpy(), cts), (jout, jpull(c))
    if name == "jvp":
        return ad.jvp(L, tuple(xs), tuple(arrays)), jax.jvp(J, tuple(jx), tuple(arrays))
    if name == "jit_jvp":
        got = ad.jit(lambda *a: ad.jvp(L, a[:3], a[3:]))(*xs, *arrays)
        return got, jax.jvp(J, tuple(jx), tuple(arrays))
    if name == "hvp":  # forward over reverse
        got = ad.jvp(ad.grad(L, argnums=0), tuple(xs), tuple(arrays))
        return got, jax.jvp(jax.grad(J, argnums=0), tuple(jx), tuple(arrays))
    if name in ("vmap_grad", "jit_vmap_grad"):
        vg = ad.vmap(ad.grad(L, argnums=0), in_axes=(0, None, None))
        if name == "jit_vmap_grad":
            vg = ad.jit(vg)
        jb = np.asarray(batch.to_numpy() if isinstance(batch, ts.Tensor) else batch)
        return (vg(batch, xs[1], xs[2]),
                jax.vmap(jax.grad(J, argnums=0), in_axes=(0, None, None))(jb, jx[1], jx[2]))
    policy = POLICIES[int(name[-1])]
    return (ad.grad(_checkpointed(steps, policy), argnums=ARGNUMS)(*xs),
            jax.grad(J, argnums=ARGNUMS)(*jx))


EAGER = ["grad", "vjp", "jvp", "hvp", "checkpoint0", "checkpoint1", "checkpoint2"]
TRACED = ["jit_grad", "grad_jit", "jit_jvp", "vmap_grad", "jit_vmap_grad"]
NAMES = EAGER + TRACED


def _leaves(x: Any) -> list[Any]:
    return jax.tree_util.tree_leaves(x, is_leaf=lambda v: hasattr(v, "to_numpy"))


def _same(got: Any, want: Any, label: str) -> None:
    gl, wl = _leaves(got), _leaves(want)
    assert len(gl) == len(wl), (label, len(gl), len(wl))
    for g, w in zip(gl, wl, strict=True):
        ga = g.to_numpy() if hasattr(g, "to_numpy") else np.asarray(g)
        wa = np.asarray(w)
        assert ga.shape == wa.shape, (label, ga.shape, wa.shape)
        assert ga.dtype == wa.dtype, (label, ga.dtype, wa.dtype)
        np.testing.assert_allclose(ga, wa, rtol=1e-8, atol=1e-9, err_msg=label)


steps_strategy = st.lists(
    st.tuples(st.integers(0, 1), st.integers(0, 40), st.integers(0, 40), st.integers(0, 40),
              st.integers(0, 40)),
    min_size=1, max_size=7,
)


@settings(deadline=None)
@given(steps=steps_strategy, seed=st.integers(0, 2**16), which=st.integers(0, 100),
       owners=st.booleans())
@example(steps=[(0, 11, 2, 0, 0), (1, 3, 0, 3, 0), (0, 4, 4, 0, 6)], seed=0, which=0,
         owners=True)  # inv, matmul, sum over an axis with keepdims, grad, owner inputs
@example(steps=[(1, 5, 0, 0, 0), (0, 9, 3, 0, 2), (1, 6, 1, 1, 0), (0, 6, 5, 0, 7)], seed=1,
         which=10, owners=False)  # concat, take, stack, max_axis under vmap(grad)
@example(steps=[(0, 11, 2, 0, 0), (1, 3, 0, 3, 0)], seed=2, which=7,
         owners=True)  # inv, matmul under jit(grad)
@example(steps=[(0, 12, 2, 0, 0), (0, 0, 3, 0, 0)], seed=3, which=11,
         owners=False)  # det, sin under jit(vmap(grad))
def test_random_mixed_program_under_a_random_composition_matches_jax(
    steps: list[Step], seed: int, which: int, owners: bool
) -> None:
    rng = np.random.default_rng(seed)
    raw = [rng.uniform(-1.5, 1.5, s) for s in SHAPES]
    kept = [x.copy() for x in raw]
    tangents = [rng.normal(size=s) for s in SHAPES]
    batch_raw = np.stack([raw[0] + 0.1 * k for k in range(3)])
    name = NAMES[which % len(NAMES)]  # linalg steps too: traced mode covers them (item 6)
    xs: list[Any] = [ts.from_numpy(x) for x in raw] if owners else raw
    batch: Any = ts.from_numpy(batch_raw) if owners else batch_raw
    got, want = _run(name, steps, xs, tangents, seed + 1, batch)
    _same(got, want, f"{name} {steps}")
    for x, k in zip(xs, kept, strict=True):  # no input changed (nor consumed)
        np.testing.assert_array_equal(x.to_numpy() if owners else x, k)
    np.testing.assert_array_equal(batch.to_numpy() if owners else batch, batch_raw)
