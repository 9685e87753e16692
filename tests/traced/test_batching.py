"""Batching rules beyond the op table: einsum (a fresh batch label), the loop fallback
for primitives without a rule, in/out axes, and the errors of vmap."""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
from tenferro_ad import traced
from tenferro_ad._traced._batching import RULES
from tests.traced._specs import close

RNG = np.random.default_rng(5)
EINSUMS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,ij->i", [(2, 3), (2, 3)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("i,j->ij", [(2,), (3,)]),
    ("iij->ji", [(2, 2, 3)]),
    ("ij->", [(2, 3)]),
]


def _batch(xs: list[np.ndarray], axes: tuple[Any, ...]) -> list[np.ndarray]:
    return [x if a is None else np.stack([x, 2 * x, x - 1], axis=a) for x, a in zip(xs, axes,
                                                                                  strict=True)]


@pytest.mark.parametrize(("sub", "shapes"), EINSUMS, ids=[s for s, _ in EINSUMS])
def test_einsum_batches_with_a_fresh_label_and_matches_jax(sub: str, shapes: Any) -> None:
    """One batched contraction (no per-element loop) equal to jax.vmap(jnp.einsum)."""
    xs = [RNG.normal(size=s) for s in shapes]
    g = traced.trace(lambda *a: ad.einsum(sub, *a))(*xs)
    for axes in [(0,) * len(xs), (0,) + (None,) * (len(xs) - 1), (1,) * len(xs)]:
        if any(a == 1 and not s for a, s in zip(axes, shapes, strict=True)):
            continue
        bg = traced.vmap(g, 3, in_axes=axes)
        assert "concatenate" not in {e.prim.name for e in bg.eqns}
        bs = _batch(xs, axes)
        close(traced.eval_graph(bg, *bs), jax.vmap(lambda *a: jnp.einsum(sub, *a),
                                                   in_axes=axes)(*bs))


def test_a_primitive_without_a_rule_is_batched_by_the_loop_fallback() -> None:
    """Correct (one application per batch element, then a stack), so vmap never refuses."""
    prim = ad.extend.defprimitive("test_cumsum_last", lambda a: np.cumsum(a, axis=-1), 1)
    assert prim not in RULES
    assert all(p.name != prim.name for p in RULES)
    x = RNG.normal(size=(4, 3))
    bg = traced.vmap(traced.trace(lambda a: ad.extend.bind(prim, a) * 2.0)(x[0]), 4)
    assert sum(e.prim is prim for e in bg.eqns) == 4
    close(traced.eval_graph(bg, x), np.cumsum(x, axis=-1) * 2.0)


def test_out_axes_and_unbatched_outputs() -> None:
    """out_axes moves the batch axis; an output independent of the batch is broadcast."""
    x, w = RNG.normal(size=(5, 3)), RNG.normal(size=(3, 2))
    g = traced.trace(lambda a, b: (a @ b, ad.sum(b, axis=0)))(x[0], w)
    prod, s = traced.eval_graph(traced.vmap(g, 5, in_axes=(0, None), out_axes=1), x, w)
    close(prod, (x @ w).T)
    close(s, np.repeat(w.sum(axis=0)[:, None], 5, axis=1))
    with pytest.raises(ValueError, match="an out_axes entry of None"):
        traced.vmap(g, 5, in_axes=(0, None), out_axes=None)


def test_vmap_errors_name_the_problem() -> None:
    """Disagreeing batch sizes, no batched argument, bad axes: clear ValueErrors."""
    f = ad.vmap(lambda a, b: a + b)
    with pytest.raises(ValueError, match="disagree on the batch size"):
        f(np.ones((2, 3)), np.ones((3, 3)))
    with pytest.raises(ValueError, match=r"in_axes.*no argument is batched"):
        ad.vmap(lambda a: a, in_axes=None)(np.ones(2))
    with pytest.raises(ValueError, match="in_axes has 1 entries for 2 arguments"):
        ad.vmap(lambda a, b: a, in_axes=(0,))(np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match="out of range"):
        ad.vmap(lambda a: a, in_axes=2)(np.ones(2))


def test_vmap_traces_once_per_signature() -> None:
    """The batched graph is cached: repeated calls with the same types do not retrace."""
    calls = []

    def f(a: Any) -> Any:
        calls.append(1)
        return ad.sin(a)

    vf = ad.vmap(f)
    for _ in range(3):
        close(vf(np.ones((2, 3))), np.sin(np.ones((2, 3))))
    assert len(calls) == 1


def test_tril_triu_ride_along_the_batch() -> None:
    """Ops on the trailing two axes batch without a loop."""
    x = RNG.normal(size=(3, 4, 4))
    bg = traced.vmap(traced.trace(lambda a: ad.linalg.tril(a) - ad.linalg.triu(a, 1))(x[0]), 3)
    assert "concatenate" not in {e.prim.name for e in bg.eqns}
    close(traced.eval_graph(bg, x), np.tril(x) - np.triu(x, 1))


@pytest.mark.parametrize(
    "args, in_axes, where",
    [
        ((np.ones(3), (np.ones(3), np.ones(4))), 0, "argument 0 and argument 1 (leaf 1) disagree"),
        ((np.ones(3), (np.ones(4), np.ones(3))), 0, "argument 0 and argument 1 (leaf 0) disagree"),
        ((np.ones(4), np.ones(3), np.ones(3)), 0, "argument 0 and argument 1 disagree"),
        ((np.ones(3), (np.ones(3), np.ones(3))), (0, (0, 2)), "argument 1 (leaf 1) has 1 axes"),
    ],
    ids=["tuple-leaf-1", "tuple-leaf-0", "plain", "axis-out-of-range"],
)
def test_a_vmap_refusal_names_the_argument_and_the_leaf_inside_it(
    args: tuple[Any, ...], in_axes: Any, where: str
) -> None:
    """A refused ``vmap`` call names the positional argument holding the offending value,
    and the leaf inside a tuple argument (a nested ``in_axes`` prefix is spread over the
    tuple's leaves first).  Mutants: ``_argument_of``'s ``leaf < start + kid.num_leaves``
    turned into ``start & kid.num_leaves``; ``_prefix_axes``' ``axes is None`` turned into
    ``is not None`` (a nested prefix taken as one axis)."""

    def f(a: Any, b: Any, c: Any = 0.0) -> Any:
        return ad.sum(a) + sum(ad.sum(t) for t in (b if isinstance(b, tuple) else (b,)))

    with pytest.raises(ad.errors.ArgumentError, match=f"^vmap: {re.escape(where)}"):
        ad.vmap(f, in_axes=in_axes)(*args)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("batched", [(True, True), (True, False), (False, True)])
def test_vmap_of_concatenate_joins_along_the_same_axis_of_each_example(
    axis: int, batched: tuple[bool, bool]
) -> None:
    """``vmap(concatenate)`` joins each example's operands along ``axis`` of the example
    (one past the batch axis), an unbatched operand broadcast to every example, as JAX.
    Mutant: the batching rule's ``axis + 1`` made ``axis + 2``."""
    rng = np.random.default_rng(5)
    a = rng.normal(size=(4, 2, 3) if batched[0] else (2, 3))
    b = rng.normal(size=(4, 2, 3) if batched[1] else (2, 3))
    in_axes = tuple(0 if t else None for t in batched)
    got = ad.vmap(lambda p, q: ad.concatenate([p, q], axis=axis), in_axes=in_axes)(a, b)
    want = jax.vmap(lambda p, q: jnp.concatenate([p, q], axis=axis), in_axes=in_axes)(a, b)
    close(got, want)
