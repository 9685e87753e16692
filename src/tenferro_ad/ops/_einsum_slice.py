"""Sliced contraction plans: cotengra trees and optimizers, and slicing under a memory bound.

A *sliced* contraction fixes some contracted labels (the sliced labels) at each of their
values in turn, contracts the smaller network that remains and sums the results: the same
value with every intermediate smaller by the product of the sliced extents, paid for with
that many contractions of the smaller network.  This module is pure planning (no AD, no
arrays): :func:`sliced_plan` turns ``(subscripts, shapes, optimize, memory_limit)`` into a
cached :class:`SlicedPlan`; :func:`tenferro_ad.ops.einsum.einsum` executes it.

``optimize`` may be anything :func:`~._einsum_path.plan` takes, or a cotengra object,
recognized by its methods so that tenferro never imports cotengra:

* a ``ContractionTree`` (it has ``get_path`` and ``sliced_inds``): its path, and its
  slicing when it has one;
* an optimizer with ``search(inputs, output, size_dict)`` (cotengra's ``HyperOptimizer``,
  ``ReusableHyperOptimizer``...): searched once per signature, then as a tree.

``memory_limit`` (bytes) adds slicing when the plan's estimated peak exceeds it: contracted
labels are sliced greedily (each time the one that lowers the estimate most, then the one
with fewer flops) until the estimate fits.  Slicing splits the tree (:func:`_split`): an
intermediate none of whose operands is sliced is the same in every slice, so the
*invariant* sub-trees that feed slice-dependent steps are contracted once, before the
slices, and only the rest runs per slice (each slice a checkpoint region).  The estimate
is the peak of what one contraction allocates at once, forward and backward: the output
(twice: the running sum and a new part), the accumulated operand gradients and the
transient per-slice cotangent of every operand, and one slice's intermediates (its
backward keeps them all while it recomputes them) with two cotangents in flight, next to
the invariant results and their cotangents' running sums; plus either every invariant
intermediate (taped: kept until their backward) or, when that does not fit, only the
invariant results (the invariant part is then one checkpoint region, recomputed once in
backward: the larger of the two phases counts).  The ledger's peak stays under it
(``tests/ad/test_einsum_sliced.py`` checks that for several bounds and both invariant
modes); a forward without a tape needs less.  It does not count the operands themselves
(they exist before the call).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from . import _einsum_path as E

__all__ = ["SlicedPlan", "is_cotengra_like", "sliced_plan"]


def is_cotengra_like(optimize: Any) -> bool:
    """Whether ``optimize`` is a cotengra tree or a searching optimizer (duck-typed). O(1)."""
    return (hasattr(optimize, "get_path") and hasattr(optimize, "sliced_inds")) or callable(
        getattr(optimize, "search", None)
    )


class SlicedPlan:
    """The cached plan of a (possibly) sliced contraction.

    ``labels``: the sliced labels, ``extents``: their sizes, ``count``: the number of
    slices.  ``pre``: the slice-invariant sub-contractions, run once before the slices,
    each ``(operand positions, subscripts, shapes, path)``; ``pre_region``: whether they
    run as one checkpoint region (recomputed once in backward) rather than taped.  Each
    slice contracts ``subscripts``/``shapes`` along ``path`` (sliced labels removed)
    over ``sources``: ``("pre", k)`` (the k-th pre result) or ``("leaf", i)`` (operand
    ``i``; unsliced: the operand positions); ``keys[k]``: for source ``k``, the positions
    of its axes that are sliced, each with the index of its label in ``labels``.
    ``estimate``: the estimated peak bytes (module docstring); ``flops``: the multiplies
    of all slices together (0 unsliced).
    """

    __slots__ = ("count", "estimate", "extents", "flops", "keys", "labels", "path", "pre",
                 "pre_region", "shapes", "sources", "subscripts")

    def __init__(
        self,
        labels: tuple[str, ...],
        extents: tuple[int, ...],
        keys: tuple[tuple[tuple[int, int], ...], ...],
        sources: tuple[Any, ...],
        pre: tuple[tuple[tuple[int, ...], str, tuple[tuple[int, ...], ...],
                         tuple[tuple[int, int], ...]], ...],
        pre_region: bool,
        subscripts: str,
        shapes: tuple[tuple[int, ...], ...],
        path: tuple[tuple[int, ...], ...],
        estimate: int,
        flops: int,
    ) -> None:
        self.labels = labels
        self.extents = extents
        self.keys = keys
        self.sources = sources
        self.pre = pre
        self.pre_region = pre_region
        self.subscripts = subscripts
        self.shapes = shapes
        self.path = path
        self.estimate = estimate
        self.flops = flops
        self.count = math.prod(extents)

    def __repr__(self) -> str:
        return (
            f"SlicedPlan(sliced={dict(zip(self.labels, self.extents, strict=True))}, "
            f"slices={self.count}, invariant parts={len(self.pre)}"
            f"{' (a checkpoint region)' if self.pre_region else ''}, "
            f"estimate={self.estimate:,} bytes, {self.subscripts!r})"
        )


def _without(
    inputs: Sequence[str], output: str, sizes: dict[str, int], sliced: frozenset[str]
) -> tuple[str, tuple[tuple[int, ...], ...]]:
    terms = ["".join(c for c in t if c not in sliced) for t in inputs]
    shapes = tuple(tuple(sizes[c] for c in t) for t in terms)
    return ",".join(terms) + "->" + output, shapes


def _step_sizes(
    inputs: Sequence[str],
    output: str,
    sizes: dict[str, int],
    sliced: frozenset[str],
    path: tuple[tuple[int, ...], ...],
) -> list[int]:
    """The element count of every step :func:`~._einsum_path.plan` makes for the
    contraction sliced over ``sliced`` along ``path``, in its order (its unary
    preprocessing, its pairwise steps, a final permutation), derived from label counts
    without building the plan: O(steps * rank) per call, no path search."""
    work = ["".join(c for c in t if c not in sliced) for t in inputs]
    outset = set(output)
    held: dict[str, int] = {}  # label -> how many working terms hold it
    for t in work:
        for c in set(t):
            held[c] = held.get(c, 0) + 1
    steps: list[int] = []
    for i, t in enumerate(work):  # 1. unary preprocessing (diagonals, private sums)
        core = output if len(work) == 1 else "".join(
            c for c in dict.fromkeys(t) if c in outset or held[c] > 1
        )
        if core != t:
            steps.append(math.prod(sizes[c] for c in core))
            for c in set(t) - set(core):
                held[c] -= 1
            work[i] = core
    if len(work) > 1:  # 2. the pairwise path (opt_einsum's linear form)
        for pair in path:
            if len(pair) != 2:  # pragma: no cover - plan() skips these too
                continue
            i, j = sorted(pair)
            ta, tb = work[i], work[j]
            for c in (*set(ta), *set(tb)):
                held[c] -= 1
            work = [t for k, t in enumerate(work) if k not in (i, j)]
            res = output if not work else "".join(
                c for c in dict.fromkeys(ta + tb) if c in outset or held.get(c, 0) > 0
            )
            for c in set(res):
                held[c] = held.get(c, 0) + 1
            steps.append(math.prod(sizes[c] for c in res))
            work.append(res)
    if work[0] != output:  # 3. a final permutation
        steps.append(math.prod(sizes[c] for c in output))
    return steps


class _Split(NamedTuple):
    """The sliced network's pairwise tree split in two (:func:`_split`).

    ``pre``: one sub-contraction per *frontier* node -- an intermediate that involves no
    sliced label (its leaves are not sliced) and that a slice-dependent step consumes --
    as ``(leaf positions, subscripts, path)``; it is the same in every slice, so it runs
    once.  ``dep_sources``: the operands of the per-slice contraction, ``("pre", k)`` or
    ``("leaf", i)``; ``dep_subscripts``/``dep_path``: that contraction.  Sizes in
    elements: ``inv_sum``/``inv_max`` over the invariant steps, ``dep_sum``/``dep_max``
    over one slice's steps, ``frontier`` the pre results' total; ``flops``: the multiply
    count of all slices together (invariant steps once).
    """

    pre: tuple[tuple[tuple[int, ...], str, tuple[tuple[int, int], ...]], ...]
    dep_sources: tuple[tuple[str, int], ...]
    dep_subscripts: str
    dep_path: tuple[tuple[int, int], ...]
    inv_sum: int
    inv_max: int
    dep_sum: int
    dep_max: int
    frontier: int
    flops: int


def _linear(order: list[int], steps: list[tuple[int, int, int]]) -> tuple[tuple[int, int], ...]:
    """SSA steps ``(a, b, new)`` over operands ``order`` as an opt_einsum linear path."""
    work = list(order)
    path = []
    for a, b, new in steps:
        i, j = sorted((work.index(a), work.index(b)))
        path.append((i, j))
        work = [w for k, w in enumerate(work) if k not in (i, j)] + [new]
    return tuple(path)


def _split(
    inputs: Sequence[str],
    output: str,
    sizes: dict[str, int],
    sliced: frozenset[str],
    path: tuple[tuple[int, ...], ...],
) -> _Split:
    """Split the contraction sliced over ``sliced`` along ``path`` into its slice-invariant
    part (run once) and its per-slice part, with their sizes (:class:`_Split`); the step
    sizes are those :func:`~._einsum_path.plan` makes for each part.  O(steps * rank)."""
    n = len(inputs)
    stripped = ["".join(c for c in t if c not in sliced) for t in inputs]
    terms = list(stripped)
    dep: list[bool] = [any(c in sliced for c in t) for t in inputs]

    def size(t: str) -> int:
        return math.prod(sizes[c] for c in t)

    outset = set(output)
    held: dict[str, int] = {}
    for t in terms:
        for c in set(t):
            held[c] = held.get(c, 0) + 1
    pre_size = [0] * n  # a leaf's unary preprocessing (0: none)
    for i, t in enumerate(terms):
        core = output if n == 1 else "".join(
            c for c in dict.fromkeys(t) if c in outset or held[c] > 1)
        if core != t:
            pre_size[i] = size(core)
            for c in set(t) - set(core):
                held[c] -= 1
            terms[i] = core
    label = list(terms)
    leaves: list[list[int]] = [[i] for i in range(n)]
    steps: list[tuple[int, int, int]] = []
    work = list(range(n))
    for pair in path:
        if len(pair) != 2:  # pragma: no cover - plan() skips these too
            continue
        i, j = sorted(pair)
        a, b = work[i], work[j]
        for c in (*set(label[a]), *set(label[b])):
            held[c] -= 1
        work = [w for k, w in enumerate(work) if k not in (i, j)]
        res = output if not work else "".join(
            c for c in dict.fromkeys(label[a] + label[b]) if c in outset or held.get(c, 0) > 0)
        for c in set(res):
            held[c] = held.get(c, 0) + 1
        new = len(label)
        label.append(res)
        leaves.append(leaves[a] + leaves[b])
        dep.append(dep[a] or dep[b])
        steps.append((a, b, new))
        work.append(new)
    count = math.prod(sizes[c] for c in sliced)
    inv_sizes: list[int] = []
    dep_sizes: list[int] = []
    flops = 0
    frontier_nodes: list[int] = []
    direct: list[int] = []
    for a, b, new in steps:
        mul = size("".join(dict.fromkeys(label[a] + label[b])))
        if dep[new]:
            dep_sizes.append(size(label[new]))
            flops += mul * count
            for x in (a, b):
                if not dep[x]:
                    (frontier_nodes if x >= n else direct).append(x)
        else:
            inv_sizes.append(size(label[new]))
            flops += mul
    for i in range(n):  # a leaf's preprocessing runs where the leaf is an operand
        if pre_size[i]:
            (dep_sizes if dep[i] or i in direct else inv_sizes).append(pre_size[i])
    if not any(dep):  # pragma: no cover - only called with a sliced label in some term
        raise AssertionError("no slice-dependent operand")
    root = work[0] if work else 0
    if len(work) == 1 and n == 1 and label[root] != output:  # a lone operand: final permutation
        dep_sizes.append(size(output))
    pre = []
    for f in frontier_nodes:
        sub = [s for s in steps if s[2] in _descendants(f, steps, n)]
        lv = sorted(leaves[f])
        eq = ",".join(stripped[i] for i in lv) + "->" + label[f]
        pre.append((tuple(lv), eq, _linear(lv, sub)))
    dep_leaves = sorted(direct + [i for i in range(n) if dep[i]])
    order = frontier_nodes + dep_leaves
    dsteps = [s for s in steps if dep[s[2]]]
    dterms = [label[f] for f in frontier_nodes] + [stripped[i] for i in dep_leaves]
    return _Split(
        pre=tuple(pre),
        dep_sources=tuple([("pre", k) for k in range(len(frontier_nodes))]
                          + [("leaf", i) for i in dep_leaves]),
        dep_subscripts=",".join(dterms) + "->" + output,
        dep_path=_linear(order, dsteps),
        inv_sum=sum(inv_sizes), inv_max=max(inv_sizes, default=0),
        dep_sum=sum(dep_sizes), dep_max=max(dep_sizes, default=0),
        frontier=sum(size(label[f]) for f in frontier_nodes),
        flops=flops,
    )


def _descendants(node: int, steps: list[tuple[int, int, int]], n: int) -> set[int]:
    by = {new: (a, b) for a, b, new in steps}
    out: set[int] = set()
    stack = [node]
    while stack:
        x = stack.pop()
        if x >= n:
            out.add(x)
            stack.extend(by[x])
    return out


def _estimate(
    inputs: Sequence[str],
    output: str,
    sizes: dict[str, int],
    sliced: frozenset[str],
    path: tuple[tuple[int, ...], ...],
    itemsize: int,
) -> tuple[int, int, _Split | None]:
    """Estimated peak bytes (module docstring) of the contraction sliced over ``sliced``,
    with the slice-invariant part taped and checkpointed, and the split (``None``
    unsliced).  O(steps * rank) (:func:`_split`)."""
    operands = sum(math.prod(sizes[c] for c in t) for t in inputs)
    out = math.prod(sizes[c] for c in output)
    # the output twice (running sum + new part), the operand gradients and their
    # per-slice cotangents (a zero-padded full-size array each, transiently)
    base = 2 * out + 2 * operands
    if not sliced:
        # every intermediate (kept by the backward) + two cotangents in flight
        steps = _step_sizes(inputs, output, sizes, sliced, path)
        whole = itemsize * (sum(steps) + 2 * max(steps, default=0) + base)
        return whole, whole, None
    sp = _split(inputs, output, sizes, sliced, path)
    # one slice's intermediates (kept by its backward) + two cotangents in flight, and
    # the pre results with their cotangents' running sums (+ one new part)
    one = sp.dep_sum + 2 * sp.dep_max + 3 * sp.frontier
    taped = sp.inv_sum + one  # the invariant intermediates kept until their backward
    region = max(one, sp.inv_sum + 2 * sp.frontier + 2 * sp.inv_max)  # recomputed once
    return itemsize * (taped + base), itemsize * (region + base), sp


def _tree_parts(
    tree: Any, inputs: Sequence[str], output: str
) -> tuple[tuple[tuple[int, ...], ...], frozenset[str]]:
    """A cotengra tree's path and sliced labels, checked against the einsum's labels."""
    t_inputs = tuple("".join(map(str, t)) for t in getattr(tree, "inputs", inputs))
    if t_inputs != tuple(inputs):
        raise E.EinsumError(
            f"einsum: argument 'optimize': the contraction tree's inputs {list(t_inputs)} are "
            f"not the einsum's terms {list(inputs)} (build the tree from the same "
            "subscripts)"
        )
    path = tuple(tuple(int(i) for i in pair) for pair in tree.get_path())
    sliced = frozenset(str(c) for c in tree.sliced_inds)
    bad = sorted(sliced & set(output))
    if bad:
        raise E.EinsumError(
            f"einsum: argument 'optimize': the contraction tree slices output label(s) {bad}; "
            "einsum slices only contracted labels (slice with allow_outer=False)"
        )
    return path, sliced


@functools.lru_cache(maxsize=512)
def sliced_plan(
    subscripts: str,
    shapes: tuple[tuple[int, ...], ...],
    interleaved: bool,
    optimize: Any,
    memory_limit: int | None,
    itemsize: int,
) -> SlicedPlan:
    """The cached sliced plan of ``einsum(subscripts, *operands of shapes)``.

    Cached per (subscripts, shapes, optimize object, memory limit, itemsize): a repeated
    call is one dict lookup; the first call costs the path search (a cotengra optimizer's
    ``search``, or opt_einsum's) plus O(labels * sliced labels * steps * rank) for the
    greedy slicing (each estimate is O(steps * rank): :func:`_split`).  Raises
    :class:`~._einsum_path.EinsumError` naming ``'memory_limit'`` when no slicing fits
    (with the smallest estimate reachable) and ``'optimize'`` for a tree that does not
    match the subscripts.
    """
    inputs, output, sizes = E.parse_subscripts(subscripts, shapes, "einsum", interleaved)
    sliced: frozenset[str] = frozenset()
    if is_cotengra_like(optimize):
        tree = optimize
        if not hasattr(optimize, "get_path"):
            tree = optimize.search(
                [tuple(t) for t in inputs], tuple(output), dict(sizes)
            )
        path, sliced = _tree_parts(tree, inputs, output)
    else:
        how = optimize
        path = tuple(
            tuple(int(i) for i in pair)
            for pair in _path_of(",".join(inputs) + "->" + output, inputs, sizes, how)
        )
    taped, region, split = _estimate(inputs, output, sizes, sliced, path, itemsize)
    if memory_limit is not None and taped > memory_limit:
        contracted = frozenset(c for c in sizes if c not in output and sizes[c] > 1)
        # every contracted label sliced is the floor: a bound below it is refused at once
        # (not after slicing label by label)
        floor = _estimate(inputs, output, sizes, sliced | contracted, path, itemsize)[1]
        if floor > memory_limit:
            raise E.EinsumError(
                f"einsum: argument 'memory_limit' {memory_limit:,} bytes is below what "
                f"this contraction needs even sliced over every contracted label "
                f"(estimated {floor:,} bytes: the output, the operands' gradients and one "
                "slice's intermediates); raise the limit"
            )
        while min(taped, region) > memory_limit and contracted - sliced:
            # the label whose slicing lowers the estimate most (then: the fewest flops)
            scored = []
            for c in sorted(contracted - sliced):
                t, r, sp = _estimate(inputs, output, sizes, sliced | {c}, path, itemsize)
                scored.append((min(t, r), sp.flops if sp else 0, -sizes[c], c, t, r, sp))
            *_, best, taped, region, split = min(scored)
            sliced = sliced | {best}
    pre_region = memory_limit is not None and taped > memory_limit
    est = region if pre_region else taped
    labels = tuple(sorted(sliced))
    if split is None:
        sub, sshapes = _without(inputs, output, sizes, sliced)
        leaves = tuple(("leaf", i) for i in range(len(inputs)))
        return SlicedPlan(labels, (), (), leaves, (), False, sub, sshapes, path, est, 0)
    keys = tuple(
        tuple((ax, labels.index(c)) for ax, c in enumerate(inputs[i]) if c in sliced)
        if kind == "leaf" else ()
        for kind, i in split.dep_sources
    )
    dep_sub = split.dep_subscripts
    dep_ins, _ = dep_sub.split("->")
    pre = tuple(
        (lv, eq, tuple(tuple(sizes[c] for c in t) for t in eq.split("->")[0].split(",")), pth)
        for lv, eq, pth in split.pre
    )
    return SlicedPlan(
        labels, tuple(sizes[c] for c in labels), keys, split.dep_sources, pre, pre_region,
        dep_sub, tuple(tuple(sizes[c] for c in t) for t in dep_ins.split(",")),
        split.dep_path, est, split.flops,
    )


def _path_of(
    eq: str, inputs: Sequence[str], sizes: dict[str, int], how: Any
) -> Sequence[Sequence[int]]:
    """opt_einsum's path for ``how`` (a strategy, an explicit path, a PathOptimizer)."""
    if isinstance(how, tuple):
        return how
    p = E.plan(eq, tuple(tuple(sizes[c] for c in t) for t in inputs), "einsum", False, how)
    return p.path
