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
labels are sliced greedily (each time the one that lowers the estimate most) until the
estimate fits.  The estimate is the peak of what one contraction allocates at once,
forward and backward: the output (twice: the running sum and a new part), the accumulated
operand gradients and the transient per-slice cotangent of every operand, two cotangents
in flight, and every intermediate of one slice (the backward of a slice keeps all of them
while it recomputes them).  The ledger's peak stays under it
(``tests/ad/test_einsum_sliced.py`` checks that for several bounds); a forward without a
tape needs less.  It does not count the operands themselves (they exist before the call).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

from . import _einsum_path as E

__all__ = ["SlicedPlan", "is_cotengra_like", "sliced_plan"]


def is_cotengra_like(optimize: Any) -> bool:
    """Whether ``optimize`` is a cotengra tree or a searching optimizer (duck-typed). O(1)."""
    return (hasattr(optimize, "get_path") and hasattr(optimize, "sliced_inds")) or callable(
        getattr(optimize, "search", None)
    )


class SlicedPlan:
    """The cached plan of a (possibly) sliced contraction.

    ``labels``: the sliced labels, ``extents``: their sizes; ``keys[i]``: for operand ``i``,
    the positions of its axes that are sliced, each with the index of its label in
    ``labels`` (empty: the operand is not sliced).  ``subscripts``/``shapes``/``path``: the
    contraction each slice runs (sliced labels removed).  ``estimate``: the estimated peak
    bytes (module docstring); ``count``: the number of slices.
    """

    __slots__ = ("count", "estimate", "extents", "keys", "labels", "path", "shapes", "subscripts")

    def __init__(
        self,
        labels: tuple[str, ...],
        extents: tuple[int, ...],
        keys: tuple[tuple[tuple[int, int], ...], ...],
        subscripts: str,
        shapes: tuple[tuple[int, ...], ...],
        path: tuple[tuple[int, ...], ...],
        estimate: int,
    ) -> None:
        self.labels = labels
        self.extents = extents
        self.keys = keys
        self.subscripts = subscripts
        self.shapes = shapes
        self.path = path
        self.estimate = estimate
        self.count = math.prod(extents)

    def __repr__(self) -> str:
        return (
            f"SlicedPlan(sliced={dict(zip(self.labels, self.extents, strict=True))}, "
            f"slices={self.count}, estimate={self.estimate:,} bytes, {self.subscripts!r})"
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


def _estimate(
    inputs: Sequence[str],
    output: str,
    sizes: dict[str, int],
    sliced: frozenset[str],
    path: tuple[tuple[int, ...], ...],
    itemsize: int,
) -> int:
    """Estimated peak bytes (module docstring) of the contraction sliced over ``sliced``.
    O(steps * rank) (:func:`_step_sizes`)."""
    steps = _step_sizes(inputs, output, sizes, sliced, path)
    inter = sum(steps)
    largest = max(steps, default=0)
    operands = sum(math.prod(sizes[c] for c in t) for t in inputs)
    out = math.prod(sizes[c] for c in output)
    # one slice's intermediates (kept by its backward) + two cotangents in flight, the
    # output twice (running sum + new part), the operand gradients and their per-slice
    # cotangents (a zero-padded full-size array each, transiently)
    return itemsize * (inter + 2 * largest + 2 * out + 2 * operands)


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
    greedy slicing (each estimate is O(steps * rank): :func:`_step_sizes`).  Raises
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
    est = _estimate(inputs, output, sizes, sliced, path, itemsize)
    if memory_limit is not None and est > memory_limit:
        contracted = frozenset(c for c in sizes if c not in output and sizes[c] > 1)
        # the estimate only falls as labels are sliced: every label sliced is the floor,
        # so a bound below it is refused at once (not after slicing label by label)
        floor = _estimate(inputs, output, sizes, sliced | contracted, path, itemsize)
        if floor > memory_limit:
            raise E.EinsumError(
                f"einsum: argument 'memory_limit' {memory_limit:,} bytes is below what "
                f"this contraction needs even sliced over every contracted label "
                f"(estimated {floor:,} bytes: the output, the operands' gradients and one "
                "slice's intermediates); raise the limit"
            )
        while est > memory_limit:
            scored = [
                (_estimate(inputs, output, sizes, sliced | {c}, path, itemsize), -sizes[c], c)
                for c in sorted(contracted - sliced)
            ]
            est, _, best = min(scored)
            sliced = sliced | {best}
    labels = tuple(sorted(sliced))
    sub, sshapes = _without(inputs, output, sizes, sliced)
    keys = tuple(
        tuple((ax, labels.index(c)) for ax, c in enumerate(t) if c in sliced) for t in inputs
    )
    return SlicedPlan(
        labels, tuple(sizes[c] for c in labels), keys, sub, sshapes, path, est
    )


def _path_of(
    eq: str, inputs: Sequence[str], sizes: dict[str, int], how: Any
) -> Sequence[Sequence[int]]:
    """opt_einsum's path for ``how`` (a strategy, an explicit path, a PathOptimizer)."""
    if isinstance(how, tuple):
        return how
    p = E.plan(eq, tuple(tuple(sizes[c] for c in t) for t in inputs), "einsum", False, how)
    return p.path
