"""``einsum(..., optimize=, memory_limit=)``: explicit paths and cotengra trees/optimizers,
sliced contraction whose value and gradients equal the unsliced ones (and JAX's), whose
ledger peak stays under the bound with the recomputation recorded as
``CHECKPOINT_RECOMPUTE_OUTPUT``, and whose plan is cached per signature."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import testing as tt
from tenferro_ad.ops import _einsum_slice as S
from tenferro_ad.ops._einsum_path import EinsumError
from tenferro_storage import ledger

RING = "ab,bc,cd,da->"
N = 12


def _ring(seed: int = 0, n: int = N) -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, n)) for _ in range(4)]


def _vg(eq: str, arrs: list[Any], **kw: Any) -> tuple[Any, list[np.ndarray[Any, Any]], Any]:
    xs = [ts.from_numpy(a) for a in arrs]
    with ledger.capture() as rec:
        v, g = ad.value_and_grad(
            lambda *x: ad.einsum(eq, *x, **kw), argnums=tuple(range(len(xs)))
        )(*xs)
    return float(v), [gi.to_numpy() for gi in g], rec


@pytest.mark.parametrize("limit", [None, 12_000, 9_500])
def test_sliced_value_and_gradient_equal_jax(limit: int | None) -> None:
    """Sliced or not, the value and every operand's gradient equal JAX's."""
    arrs = _ring()
    v, g, _ = _vg(RING, arrs, memory_limit=limit)
    jv, jg = jax.value_and_grad(lambda *x: jnp.einsum(RING, *x), argnums=(0, 1, 2, 3))(*arrs)
    assert abs(v - float(jv)) <= 1e-10 * max(1.0, abs(float(jv)))
    for a, b in zip(g, jg, strict=True):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("limit", [12_000, 9_500])
def test_ledger_peak_stays_under_the_bound(limit: int) -> None:
    """The captured peak of value-and-gradient is at most ``memory_limit``, the plan slices,
    and backward recomputes each slice as CHECKPOINT_RECOMPUTE_OUTPUT allocations."""
    plan = S.sliced_plan(RING, ((N, N),) * 4, False, "auto", limit, 8)
    assert plan.count > 1 and plan.estimate <= limit
    _, _, rec = _vg(RING, _ring(), memory_limit=limit)
    assert rec.peak_bytes <= limit
    assert rec.allocations[ts.AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT] > 0
    assert rec.copies.total() == 0


def test_tighter_bounds_slice_more() -> None:
    """A smaller bound never gives fewer slices, and slicing lowers the measured peak."""
    counts = [S.sliced_plan(RING, ((N, N),) * 4, False, "auto", lim, 8).count
              for lim in (10**6, 12_000, 9_500)]
    assert counts == sorted(counts) and counts[0] == 1 and counts[-1] > 1
    _, _, whole = _vg(RING, _ring())
    _, _, sliced = _vg(RING, _ring(), memory_limit=9_500)
    assert sliced.peak_bytes < whole.peak_bytes


def test_memory_limit_too_small_names_the_argument() -> None:
    """A bound no slicing meets is refused naming 'memory_limit', before anything runs."""
    xs = [ts.from_numpy(a) for a in _ring()]
    with ledger.capture() as rec, pytest.raises(EinsumError, match="'memory_limit'"):
        ad.einsum(RING, *xs, memory_limit=100)
    assert rec.allocations.total() == 0
    with pytest.raises(ad.errors.ArgumentTypeError, match="'memory_limit'"):
        ad.einsum(RING, *xs, memory_limit=1.5)


def test_cotengra_tree_with_its_slicing() -> None:
    """A cotengra ContractionTree (sliced by cotengra) is followed: path and slices."""
    ctg = pytest.importorskip("cotengra")
    arrs = _ring()
    tree = ctg.array_contract_tree([tuple(t) for t in ("ab", "bc", "cd", "da")], (),
                                   dict.fromkeys("abcd", N))
    sliced = tree.slice(target_size=N)
    assert sliced.sliced_inds
    plan = S.sliced_plan(RING, ((N, N),) * 4, False, sliced, None, 8)
    assert set(plan.labels) == set(sliced.sliced_inds) and plan.path == tuple(
        tuple(p) for p in sliced.get_path())
    v, g, rec = _vg(RING, arrs, optimize=sliced)
    v0, g0, _ = _vg(RING, arrs)
    assert abs(v - v0) <= 1e-10
    for a, b in zip(g, g0, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-10)
    assert rec.allocations[ts.AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT] > 0


@pytest.mark.filterwarnings("ignore:Couldn't import `kahypar`:UserWarning")
def test_cotengra_optimizer_searched_once_per_signature() -> None:
    """A searching cotengra optimizer is asked once per (subscripts, shapes)."""
    ctg = pytest.importorskip("cotengra")
    opt = ctg.HyperOptimizer(max_repeats=4, parallel=False, progbar=False,
                             slicing_opts={"target_size": N})
    calls = []
    search = opt.search

    def counted(*a: Any, **k: Any) -> Any:
        calls.append(1)
        return search(*a, **k)

    opt.search = counted  # type: ignore[method-assign]
    xs = [ts.from_numpy(a) for a in _ring()]
    r1 = ad.einsum(RING, *xs, optimize=opt)
    r2 = ad.einsum(RING, *xs, optimize=opt)
    assert len(calls) == 1
    tt.assert_allclose(r1, np.einsum(RING, *_ring()), rtol=1e-12)
    tt.assert_allclose(r2, r1)


def test_tree_over_other_labels_is_refused() -> None:
    """A tree built for other subscripts is refused naming 'optimize'."""
    ctg = pytest.importorskip("cotengra")
    tree = ctg.array_contract_tree([("x", "y"), ("y", "x")], (), {"x": 2, "y": 2})
    a = ts.from_numpy(np.ones((2, 2)))
    with pytest.raises(EinsumError, match="'optimize'"):
        ad.einsum("ij,ji->", a, a, optimize=tree)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**16), st.sampled_from([None, 6_400, 6_000]))
@example(0, 6_000)
def test_sliced_matches_numpy_property(seed: int, limit: int | None) -> None:
    """A batched chain with a shared output label, sliced under random bounds, equals
    numpy's einsum; the output label is never sliced."""
    rng = np.random.default_rng(seed)
    eq = "xab,bc,xcd->xad"
    arrs = [rng.standard_normal(s) for s in ((2, 6, 7), (7, 8), (2, 8, 5))]
    xs = [ts.from_numpy(a) for a in arrs]
    r = ad.einsum(eq, *xs, memory_limit=limit)
    tt.assert_allclose(r, np.einsum(eq, *arrs), rtol=1e-10, atol=1e-12)
    plan = S.sliced_plan(eq, tuple(a.shape for a in arrs), False, "auto", limit, 8)
    assert not set(plan.labels) & set("xad")


@st.composite
def _networks(draw: Any) -> tuple[str, tuple[tuple[int, ...], ...], frozenset[str]]:
    """A random einsum (repeated labels, private sums, outer labels) and contracted labels
    to slice."""
    labels = "abcdefg"
    size = {c: draw(st.integers(1, 3)) for c in labels}
    n = draw(st.integers(1, 5))
    terms = [draw(st.text(alphabet=labels, min_size=0, max_size=4)) for _ in range(n)]
    used = sorted(set("".join(terms)))
    output = "".join(draw(st.permutations(used))[: draw(st.integers(0, len(used)))])
    contracted = sorted(set(used) - set(output))
    sliced = frozenset(c for c in contracted if draw(st.booleans()))
    eq = ",".join(terms) + "->" + output
    return eq, tuple(tuple(size[c] for c in t) for t in terms), sliced


@settings(max_examples=60, deadline=None)
@given(_networks())
@example(("ab,bc,cd,da->", ((3, 2), (2, 3), (3, 2), (2, 3)), frozenset("b")))
@example(("aab,bc->c", ((2, 2, 3), (3, 2)), frozenset()))
def test_step_sizes_match_the_plan(net: tuple[str, Any, frozenset[str]]) -> None:
    """The slicing estimate's step sizes, derived from label counts, are the sizes of the
    steps the plan of the sliced contraction makes (same order)."""
    eq, shapes, sliced = net
    inputs, output, sizes = S.E.parse_subscripts(eq, shapes, "einsum", False)
    path = S.E.plan(eq, shapes, "einsum", False, "greedy").path
    sub, sshapes = S._without(inputs, output, sizes, sliced)
    p = S.E.plan(sub, sshapes, "einsum", False, path)
    want = [
        int(np.prod(s.shape)) if isinstance(s, S.E.UnaryStep)
        else int(np.prod([p.sizes[c] for c in s.subscripts.split("->")[1]]))
        for s in p.steps
    ]
    assert S._step_sizes(inputs, output, sizes, sliced, path) == want


def test_a_bound_below_the_floor_is_refused_without_a_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bound below the every-label-sliced estimate is refused after two estimates (the
    plan's and the floor's), not after slicing label by label."""
    calls = []
    real = S._estimate
    monkeypatch.setattr(S, "_estimate", lambda *a: calls.append(1) or real(*a))
    eq = "ab,bc,cd,de,ef,fg,ga->"
    with pytest.raises(EinsumError, match="'memory_limit'") as e:
        S.sliced_plan(eq, ((4, 4),) * 7, False, "greedy", 10, 8)
    assert len(calls) == 2
    floor = int(str(e.value).split("estimated ")[1].split(" bytes")[0].replace(",", ""))
    ok = S.sliced_plan(eq, ((4, 4),) * 7, False, "greedy", floor, 8)
    assert ok.estimate <= floor  # the floor itself is met


def _plan_sizes(eq: str, shapes: Any, path: Any) -> list[int]:
    p = S.E.plan(eq, shapes, "einsum", False, path)
    return [
        int(np.prod(s.shape)) if isinstance(s, S.E.UnaryStep)
        else int(np.prod([p.sizes[c] for c in s.subscripts.split("->")[1]]))
        for s in p.steps
    ]


@settings(max_examples=60, deadline=None)
@given(_networks())
@example(("ab,bc,cd,de,ef,fa->", ((2, 3),) + ((3, 3),) * 4 + ((3, 2),), frozenset("b")))
def test_split_parts_match_their_plans(net: tuple[str, Any, frozenset[str]]) -> None:
    """The invariant/per-slice split: its sizes are those of the plans of its parts, the
    invariant parts use no sliced operand, and contracting the parts (pre results, then
    every slice) equals numpy's einsum."""
    eq, shapes, sliced = net
    inputs, output, sizes = S.E.parse_subscripts(eq, shapes, "einsum", False)
    if not sliced or not any(set(t) & sliced for t in inputs):
        return
    path = S.E.plan(eq, shapes, "einsum", False, "greedy").path
    sp = S._split(inputs, output, sizes, sliced, path)
    inv = [x for lv, e, pth in sp.pre
           for x in _plan_sizes(e, tuple(shapes[i] for i in lv), pth)]
    assert (sp.inv_sum, sp.inv_max) == (sum(inv), max(inv, default=0))
    assert all(not set(inputs[i]) & sliced for lv, _, _ in sp.pre for i in lv)
    dins = sp.dep_subscripts.split("->")[0].split(",")
    dshapes = tuple(tuple(sizes[c] for c in t) for t in dins)
    dep = _plan_sizes(sp.dep_subscripts, dshapes, sp.dep_path)
    assert (sp.dep_sum, sp.dep_max) == (sum(dep), max(dep, default=0))
    rng = np.random.default_rng(0)
    arrs = [rng.standard_normal(s) for s in shapes]
    pres = [np.einsum(e, *(arrs[i] for i in lv)) for lv, e, _ in sp.pre]
    labels = sorted(sliced)
    total = 0.0
    for values in np.ndindex(*(sizes[c] for c in labels)):
        at = dict(zip(labels, values, strict=True))
        ops = [pres[i] if kind == "pre" else arrs[i][tuple(
            at.get(c, slice(None)) for c in inputs[i])] for kind, i in sp.dep_sources]
        total = total + np.einsum(sp.dep_subscripts, *ops)
    np.testing.assert_allclose(total, np.einsum(eq, *arrs), rtol=1e-10, atol=1e-12)


GRID = "am,abn,bco,cp,dmq,denr,efos,fpt,gqu,ghrv,hisw,itx,ju,jkv,klw,lx->"  # 4x4, open
GRID_SHAPES = tuple((3,) * len(t) for t in GRID[:-2].split(","))  # bond 3
BOUNDS = (23_868, 21_216, 15_912)  # the invariant part taped / checkpointed / 9 slices


@pytest.mark.parametrize("limit", BOUNDS)
def test_invariant_part_runs_once_under_the_bound(limit: int) -> None:
    """When slicing leaves part of the network untouched, that part is contracted once
    (not once per slice): the forward allocates fewer intermediates than the slices
    times the steps; the value and gradients equal JAX's and the ledger peak stays under
    the bound, whether the invariant part is taped or a checkpoint region."""
    rng = np.random.default_rng(3)
    shapes = GRID_SHAPES
    arrs = [rng.standard_normal(s) for s in shapes]
    plan = S.sliced_plan(GRID, shapes, False, "greedy", limit, 8)
    assert plan.count > 1 and plan.pre and plan.estimate <= limit
    xs = [ts.from_numpy(a) for a in arrs]
    with ledger.capture() as fwd:
        ad.einsum(GRID, *xs, optimize="greedy", memory_limit=limit)
    steps = len(S.E.plan(GRID, shapes, "einsum", False, "greedy").steps)
    assert fwd.allocations[ts.AllocationReason.OPERATION_OUTPUT] < plan.count * steps
    v, g, rec = _vg(GRID, arrs, optimize="greedy", memory_limit=limit)
    jv, jg = jax.value_and_grad(lambda *x: jnp.einsum(GRID, *x), argnums=tuple(range(16)))(
        *arrs)
    assert abs(v - float(jv)) <= 1e-10 * max(1.0, abs(float(jv)))
    for a, b in zip(g, jg, strict=True):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-10, atol=1e-10)
    assert rec.peak_bytes <= limit
    assert rec.copies.total() == 0


def test_both_invariant_modes_are_exercised() -> None:
    """Among the bounds above, one plan tapes its invariant part and one checkpoints it."""
    modes = {S.sliced_plan(GRID, GRID_SHAPES, False, "greedy", lim, 8).pre_region
             for lim in BOUNDS}
    assert modes == {True, False}


@pytest.mark.parametrize("engine", ["host", "xla"])
def test_split_under_jit_equals_eager(engine: str) -> None:
    """Traced by ``ad.jit``, the split plan (invariant region + sliced regions) gives the
    eager value and gradients."""
    rng = np.random.default_rng(5)
    arrs = [rng.standard_normal(s) for s in GRID_SHAPES]
    xs = [ts.from_numpy(a) for a in arrs]
    vg = ad.value_and_grad(
        lambda *x: ad.einsum(GRID, *x, optimize="greedy", memory_limit=BOUNDS[1]),
        argnums=tuple(range(16)),
    )
    v, g = ad.jit(vg, engine=engine)(*xs)
    v0, g0, _ = _vg(GRID, arrs, optimize="greedy", memory_limit=BOUNDS[1])
    assert abs(float(v) - v0) <= 1e-10 * max(1.0, abs(v0))
    for a, b in zip(g, g0, strict=True):
        np.testing.assert_allclose(a.to_numpy(), b, rtol=1e-10, atol=1e-10)
