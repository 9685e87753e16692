"""Hypothesis-generated random programs with a checkpoint region around a random slice of
their steps: the traced gradient (graph and compiled) == the eager checkpoint's ==
``jax.checkpoint``'s, for every policy, and the compiled backward recomputes no more
values than the eager checkpoint does.  ``TF_CKPT_EXAMPLES`` sets the example count
(default 30; 300 was run while developing)."""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import traced
from tenferro_storage.ledger import AllocationReason, capture
from tests.traced._specs import close
from tests.traced.test_random_programs import (
    SHAPES,
    Step,
    apply_steps,
    programs,
)

RECOMPUTE = AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT
POLICIES = [
    (ad.save_nothing, jax.checkpoint_policies.nothing_saveable),
    (ad.save_everything, jax.checkpoint_policies.everything_saveable),
    (ad.save_contractions, jax.checkpoint_policies.dots_saveable),
]


def _loss(m: Any, wrap: Any, steps: list[Step], cut: tuple[int, int], *inputs: Any) -> Any:
    """Steps ``[:lo]`` plainly, ``[lo:hi]`` inside ``wrap`` (a checkpoint), the rest plainly."""
    lo, hi = sorted(c % (len(steps) + 1) for c in cut)
    pool = apply_steps(m, steps[:lo], list(inputs))

    def region(*p: Any) -> Any:
        made = apply_steps(m, steps[lo:hi], list(p))[len(p):]
        return tuple(made) if made else (m.sin(p[-1]),)

    pool += list(wrap(region)(*pool))
    pool = apply_steps(m, steps[hi:], pool)
    return m.sum(pool[-1] * 0.5) + m.sum(m.sin(inputs[0]))


def _inputs(seed: int) -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.5, 1.5, s) for s in SHAPES]


@settings(deadline=None, max_examples=int(os.environ.get("TF_CKPT_EXAMPLES", "30")))
@given(steps=programs, seed=st.integers(0, 2**16), cut=st.tuples(st.integers(0, 8),
                                                                  st.integers(0, 8)),
       which=st.integers(0, len(POLICIES) - 1))
def test_random_checkpointed_program_matches_eager_and_jax(
    steps: list[Step], seed: int, cut: tuple[int, int], which: int
) -> None:
    ours, theirs = POLICIES[which]
    xs = _inputs(seed)
    nums = (0, 1, 2)

    def f(*a: Any) -> Any:
        return _loss(ad, lambda r: ad.checkpoint(r, policy=ours), steps, cut, *a)

    def jf(*a: Any) -> Any:
        return _loss(jnp, lambda r: jax.checkpoint(r, policy=theirs), steps, cut, *a)

    g = traced.trace(f)(*xs)
    traced.check(g)
    vg = traced.value_and_grad(g, argnums=nums)
    traced.check(vg)
    value, grads = traced.eval_graph(vg, *xs)
    jv, jg = jax.value_and_grad(jf, argnums=nums)(*xs)
    close(value, jv)
    owners = [ts.from_numpy(x) for x in xs]
    with capture() as eager_rec:
        eager = ad.grad(f, argnums=nums)(*owners)
    jitted = ad.jit(ad.grad(f, argnums=nums), reuse=False)
    jitted.lower(*owners)
    with capture() as compiled_rec:
        compiled = jitted(*owners)
    for a, b, c, d in zip(grads, jg, eager, compiled, strict=True):
        close(a, b)
        close(c, b)
        close(d, b)
    # the traced sweep recomputes only what a rule on a cotangent path reads; the eager
    # replay may also rebuild values for region outputs that receive no cotangent
    assert compiled_rec.allocations[RECOMPUTE] <= eager_rec.allocations[RECOMPUTE]


def test_traced_backward_recomputes_nothing_for_region_outputs_without_cotangent() -> None:
    """Only ``c`` reaches the loss: its rule reads the region input, so nothing is
    recomputed (``b = sin(a)``'s rule would read ``a``, but ``b`` gets no cotangent)."""

    def region(x: Any) -> Any:
        a = ad.sin(x)
        return a, ad.sin(a), ad.sin(x)

    def f(x: Any) -> Any:
        return ad.sum(ad.checkpoint(region)(x)[2])

    g = traced.grad(traced.trace(f)(np.ones(3)))
    assert not any(e.note is not None and e.note.recompute for e in g.eqns)
    close(traced.eval_graph(g, np.ones(3)), np.cos(np.ones(3)))
