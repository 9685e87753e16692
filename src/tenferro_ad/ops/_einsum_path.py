"""Einsum planning and numpy kernels: subscript parsing, path choice, pairwise steps.

This module is pure math on numpy arrays; it knows nothing about tapes or handles.
``tenferro_ad.ops.einsum`` builds the differentiable ``einsum`` on top of it.

The model
---------
An n-ary einsum is executed as a sequence of *steps*, each one of two primitives:

* ``unary(x, subscripts="in->out", shape=out_shape)`` -- a general linear map of one
  operand: it takes diagonals (repeated input labels), sums labels absent from the
  output, permutes, and -- the other way round -- broadcasts new output labels and
  embeds repeated output labels on a diagonal (zeros elsewhere).  Its transpose is the
  same primitive with the subscripts swapped (``"out->in"``, shape of ``x``): the family
  is closed under transposition, so derivatives of any order stay unary einsums.
* ``binary(a, b, subscripts="ab,bc->ac")`` -- a bilinear contraction whose output labels
  are unique and each present in an input.  Executed as one batched GEMM
  (``numpy.matmul``) after putting batch / free / contracted labels together; when the
  output's label order allows it the GEMM writes straight into the final array.  Its
  transpose with respect to ``a`` is ``binary(ct, b, "out,b->a'")`` followed, only if
  ``a`` has repeated or private summed labels, by ``unary("a'->a")``.

:func:`plan` turns subscripts plus shapes into such a step list: first a unary step per
operand that has repeated labels or labels nobody else needs (traces, diagonals, private
sums), then the pairwise order chosen by opt_einsum (``optimize="auto"``: optimal for few
operands, greedy/branch for more), then a final unary step only if the last result still
needs permuting.  Plans are cached per (subscripts, shapes); a cache hit costs one dict
lookup.  Intermediate label orders are chosen so that every GEMM writes its output
without a transposing copy (batch, free of the left operand, free of the right one).

Reverse mode through the step list is ordinary backpropagation through bilinear steps,
so the VJP of an n-ary einsum costs about twice its forward (like a hand-written
pairwise contraction) and reuses the forward's path; forward mode (JVP) is, per step,
``binary(da, b) + binary(a, db)`` on the same path.  Complex operands use JAX's
conventions: the transposes carry no conjugation.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import opt_einsum

from ..errors import ArgumentError

__all__ = [
    "BinaryStep",
    "EinsumError",
    "EinsumPlan",
    "UnaryStep",
    "binary_einsum",
    "binary_transpose_subscripts",
    "contract",
    "contract_jvp",
    "contract_vjp",
    "parse_subscripts",
    "plan",
    "tensordot_subscripts",
    "unary_einsum",
    "unary_transpose_subscripts",
]

Array = np.ndarray[Any, Any]

_ELLIPSIS: Final = "..."


class EinsumError(ArgumentError):
    """Subscripts that cannot describe the given operands (names the op and the operand).
    An :class:`~tenferro_ad.errors.ArgumentError` (so a ``ValueError``)."""


# --------------------------------------------------------------------------- parsing


def _fresh_symbols(used: set[str], count: int) -> list[str]:
    out: list[str] = []
    k = 0
    while len(out) < count:
        s = opt_einsum.get_symbol(k)
        k += 1
        if s not in used and s not in ".,->":
            out.append(s)
    return out


def _operand(i: int, interleaved: bool) -> str:
    """How a message names operand ``i`` of an ``einsum`` call: ``'operands'[i]`` (the
    subscripts form ``einsum(subscripts, *operands)``) or by its position in the
    interleaved form ``einsum(op0, sublist0, op1, sublist1, ...)``."""
    return str(2 * i) if interleaved else f"'operands'[{i}]"


def _with_subscripts(i: int, interleaved: bool) -> str:
    """``arguments 'subscripts' and 'operands'[i]`` / ``arguments 2i and 2i+1``: operand
    ``i`` and the subscripts that describe it."""
    if interleaved:
        return f"arguments {2 * i} and {2 * i + 1}"
    return f"arguments 'subscripts' and 'operands'[{i}]"


@functools.lru_cache(maxsize=4096)
def parse_subscripts(
    subscripts: str,
    shapes: tuple[tuple[int, ...], ...],
    op: str = "einsum",
    interleaved: bool = False,
) -> tuple[tuple[str, ...], str, dict[str, int]]:
    """Explicit, ellipsis-free labels: ``(input label strings, output labels, sizes)``.

    Accepts numpy's grammar: explicit (``"ij,jk->ik"``) and implicit output (``"ij,jk"``:
    the labels that occur once, sorted), spaces, and ``...`` (right-aligned; operands may
    have fewer ellipsis dimensions, which then do not appear in them; the output carries
    the longest ellipsis).  Sizes must agree exactly: size-1 broadcasting is refused
    rather than silently expanded.  Raises :class:`EinsumError` naming ``op`` and the
    arguments of the call: ``'subscripts'`` and ``'operands'[i]``, or by position when the
    call used numpy's ``interleaved`` form.  Cached: O(1) on a repeated call.
    """
    sub_arg = f"argument {2 * len(shapes)}" if interleaved else "argument 'subscripts'"
    sub = subscripts.replace(" ", "")
    if "->" in sub:
        lhs, out = sub.split("->")
        explicit = True
    else:
        lhs, out, explicit = sub, "", False
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise EinsumError(
            f"{op}: arguments 'subscripts' and 'operands' do not fit: the subscripts "
            f"{subscripts!r} name {len(terms)} operand(s) but {len(shapes)} were given; write "
            "one comma-separated term per operand"
        )
    used = {c for c in sub if c not in ".,->"}
    for c in used:
        if not (c.isalpha() or ord(c) > 127):
            raise EinsumError(
                f"{op}: argument 'subscripts' {subscripts!r} contains {c!r}; labels must be "
                "letters"
            )
    ell_rank = 0
    for i, (t, shp) in enumerate(zip(terms, shapes, strict=True)):
        if _ELLIPSIS in t:
            r = len(shp) - (len(t) - len(_ELLIPSIS))
            if r < 0 or t.count(_ELLIPSIS) != 1:
                raise EinsumError(
                    f"{op}: {_with_subscripts(i, interleaved)} do not fit: term {t!r} does "
                    f"not fit the shape {shp}"
                )
            ell_rank = max(ell_rank, r)
        elif "." in t:
            raise EinsumError(
                f"{op}: {_with_subscripts(i, interleaved)}: term {t!r} has a stray '.'"
            )
    ell = "".join(_fresh_symbols(used, ell_rank))
    inputs: list[str] = []
    sizes: dict[str, int] = {}
    first: dict[str, int] = {}  # the operand a label's size was taken from
    for i, (t, shp) in enumerate(zip(terms, shapes, strict=True)):
        if _ELLIPSIS in t:
            r = len(shp) - (len(t) - len(_ELLIPSIS))
            t = t.replace(_ELLIPSIS, ell[ell_rank - r :] if r else "")
        if len(t) != len(shp):
            raise EinsumError(
                f"{op}: {_with_subscripts(i, interleaved)} do not fit: term {t!r} has "
                f"{len(t)} label(s) but argument {_operand(i, interleaved)} has rank "
                f"{len(shp)} (shape {shp})"
            )
        for c, n in zip(t, shp, strict=True):
            if sizes.setdefault(c, n) != n:
                j = first[c]
                subs = (
                    f"arguments {2 * j + 1} and {2 * i + 1}"
                    if interleaved
                    else f"argument 'subscripts' {subscripts!r}"
                )
                raise EinsumError(
                    f"{op}: label {c!r} has size {sizes[c]} in argument "
                    f"{_operand(j, interleaved)} (shape {shapes[j]}) but {n} in argument "
                    f"{_operand(i, interleaved)} (shape {shp}) under {subs}; sizes must match "
                    "exactly (no size-1 broadcasting)"
                )
            first.setdefault(c, i)
        inputs.append(t)
    if explicit:
        if _ELLIPSIS in out:
            out = out.replace(_ELLIPSIS, ell)
        elif "." in out:
            raise EinsumError(f"{op}: {sub_arg}: the output {out!r} has a stray '.'")
        for c in out:
            if c not in sizes:
                raise EinsumError(
                    f"{op}: {sub_arg}: output label {c!r} of {subscripts!r} is not in any input"
                )
            if out.count(c) > 1:
                raise EinsumError(
                    f"{op}: {sub_arg}: output label {c!r} of {subscripts!r} repeats"
                )
    else:
        counts: dict[str, int] = {}
        for t in inputs:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    return tuple(inputs), out, sizes


def tensordot_subscripts(
    rank_a: int, rank_b: int, axes: int | tuple[Sequence[int], Sequence[int]]
) -> str:
    """The einsum subscripts of ``numpy.tensordot(a, b, axes)``. O(rank)."""
    if isinstance(axes, int):
        if axes < 0 or axes > min(rank_a, rank_b):
            raise EinsumError(
                f"tensordot: axes={axes} but the operands have ranks {rank_a} and {rank_b}"
            )
        ax_a = list(range(rank_a - axes, rank_a))
        ax_b = list(range(axes))
    else:
        ax_a = [int(a) % rank_a if rank_a else int(a) for a in axes[0]]
        ax_b = [int(b) % rank_b if rank_b else int(b) for b in axes[1]]
        if len(ax_a) != len(ax_b):
            raise EinsumError(
                f"tensordot: axes {axes} pair {len(ax_a)} axes of a with {len(ax_b)} of b"
            )
    syms = _fresh_symbols(set(), rank_a + rank_b)
    la = syms[:rank_a]
    lb = syms[rank_a:]
    for x, y in zip(ax_a, ax_b, strict=True):
        lb[y] = la[x]
    out = [c for i, c in enumerate(la) if i not in ax_a] + [
        c for i, c in enumerate(lb) if i not in ax_b
    ]
    return "".join(la) + "," + "".join(lb) + "->" + "".join(out)


# --------------------------------------------------------------------------- unary


def unary_transpose_subscripts(subscripts: str) -> str:
    """``"in->out"`` becomes ``"out->in"``: the transpose of a unary einsum. O(len)."""
    lhs, out = subscripts.split("->")
    return out + "->" + lhs


@functools.lru_cache(maxsize=4096)
def _unary_plan(
    subscripts: str, in_shape: tuple[int, ...], out_shape: tuple[int, ...]
) -> tuple[str | None, bool, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(extraction einsum or None, simple?, view shape, view strides in elements, core bshape)."""
    lhs, out = subscripts.split("->")
    if len(lhs) != len(in_shape) or len(out) != len(out_shape):
        raise EinsumError(
            f"einsum_unary: subscripts {subscripts!r} do not fit input shape {in_shape} "
            f"and output shape {out_shape}"
        )
    sizes: dict[str, int] = {}
    for c, n in [*zip(lhs, in_shape, strict=True), *zip(out, out_shape, strict=True)]:
        if sizes.setdefault(c, n) != n:
            raise EinsumError(
                f"einsum_unary: label {c!r} of {subscripts!r} has sizes {sizes[c]} and {n}"
            )
    uniq = "".join(dict.fromkeys(out))
    core = "".join(c for c in uniq if c in lhs)
    extract = None if core == lhs else lhs + "->" + core
    simple = core == out  # no repeated and no new output labels
    view_shape = tuple(sizes[c] for c in uniq)
    cstr = [int(np.prod(out_shape[i + 1 :], dtype=np.int64)) for i in range(len(out_shape))]
    view_strides = tuple(sum(cstr[i] for i, d in enumerate(out) if d == c) for c in uniq)
    bshape = tuple(sizes[c] if c in lhs else 1 for c in uniq)
    return extract, simple, view_shape, view_strides, bshape


def unary_einsum(x: Array, subscripts: str, shape: tuple[int, ...]) -> Array:
    """Apply the unary einsum ``subscripts`` (``"in->out"``) to ``x``; fresh C-contiguous output.

    Input labels may repeat (diagonal) or be absent from the output (summed); output
    labels may repeat (embedded on a diagonal, zeros elsewhere) or be new (broadcast);
    ``shape`` gives the output shape.  Cost O(size(x) + size(output)).
    """
    extract, simple, view_shape, view_strides, bshape = _unary_plan(subscripts, x.shape, shape)
    core = x if extract is None else np.einsum(extract, x)
    if simple:
        if core is x or not core.flags.c_contiguous or not core.flags.owndata:
            return np.array(core, order="C", copy=True)
        return core
    res = np.zeros(shape, dtype=x.dtype)
    item = res.itemsize
    view = np.lib.stride_tricks.as_strided(
        res, shape=view_shape, strides=tuple(item * s for s in view_strides), writeable=True
    )
    view[...] = np.reshape(core, bshape)
    return res


# --------------------------------------------------------------------------- binary


@functools.lru_cache(maxsize=4096)
def _binary_plan(subscripts: str, sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple[Any, ...]:
    lhs, out = subscripts.split("->")
    ta, tb = lhs.split(",")
    if len(ta) != len(sa) or len(tb) != len(sb):
        raise EinsumError(
            f"einsum_binary: subscripts {subscripts!r} do not fit shapes {sa} and {sb}"
        )
    sizes: dict[str, int] = {}
    for c, n in [*zip(ta, sa, strict=True), *zip(tb, sb, strict=True)]:
        if sizes.setdefault(c, n) != n:
            raise EinsumError(
                f"einsum_binary: label {c!r} of {subscripts!r} has sizes {sizes[c]} and {n}"
            )
    if len(set(out)) != len(out) or any(c not in sizes for c in out):
        raise EinsumError(
            f"einsum_binary: output {out!r} of {subscripts!r} must be unique labels taken "
            "from the inputs"
        )
    # prepare each operand: diagonals and private sums -> unique core labels
    ua = "".join(c for c in dict.fromkeys(ta) if c in out or c in tb)
    ub = "".join(c for c in dict.fromkeys(tb) if c in out or c in ta)
    pre_a = None if ua == ta else ta + "->" + ua
    pre_b = None if ub == tb else tb + "->" + ub
    batch = [c for c in out if c in ua and c in ub]
    contr = [c for c in ua if c in ub and c not in out]
    fa = [c for c in out if c in ua and c not in ub]
    fb = [c for c in out if c in ub and c not in ua]
    # choose GEMM operand order so the product's natural order matches out if possible
    pos = {c: i for i, c in enumerate(out)}
    nb = len(batch)
    direct = False
    swap = False
    if [pos[c] for c in batch] == list(range(nb)):
        rest = out[nb:]
        if rest == "".join(fa + fb):
            direct = True
        elif rest == "".join(fb + fa):
            direct, swap = True, True
    if not direct:
        # canonical natural order (batch, fa, fb) then a transposing copy to out
        pass
    left, right, fl, fr = (ub, ua, fb, fa) if swap else (ua, ub, fa, fb)
    perm_l = tuple(left.index(c) for c in (*batch, *fl, *contr))
    perm_r = tuple(right.index(c) for c in (*batch, *contr, *fr))
    bsz = int(np.prod([sizes[c] for c in batch], dtype=np.int64))
    m = int(np.prod([sizes[c] for c in fl], dtype=np.int64))
    k = int(np.prod([sizes[c] for c in contr], dtype=np.int64))
    n = int(np.prod([sizes[c] for c in fr], dtype=np.int64))
    natural = (*batch, *fl, *fr)
    nat_shape = tuple(sizes[c] for c in natural)
    out_shape = tuple(sizes[c] for c in out)
    final_perm = None if direct else tuple(natural.index(c) for c in out)
    return (
        pre_a,
        pre_b,
        swap,
        perm_l,
        perm_r,
        (bsz, m, k),
        (bsz, k, n),
        (bsz, m, n),
        nat_shape,
        out_shape,
        final_perm,
        tuple(sizes[c] for c in ua),
        tuple(sizes[c] for c in ub),
    )


def binary_einsum(a: Array, b: Array, subscripts: str) -> Array:
    """The bilinear contraction ``subscripts`` (``"ta,tb->out"``); fresh C-contiguous output.

    One batched GEMM after at most one reordering copy per operand (numpy's
    ``tensordot`` strategy extended to batch labels); output labels must be unique and
    present in an input.  Cost O(batch*m*k*n) flops plus the operand reorderings.
    """
    (
        pre_a,
        pre_b,
        swap,
        perm_l,
        perm_r,
        sl,
        sr,
        so,
        nat_shape,
        out_shape,
        final_perm,
        ua_shape,
        ub_shape,
    ) = _binary_plan(subscripts, a.shape, b.shape)
    if pre_a is not None:
        a = unary_einsum(a, pre_a, ua_shape)
    if pre_b is not None:
        b = unary_einsum(b, pre_b, ub_shape)
    left, right = (b, a) if swap else (a, b)
    if sl[0] == 1:  # no batch label: plain 2-D GEMM (numpy's stacked path costs ~8% more)
        sl, sr, so = sl[1:], sr[1:], so[1:]
    lm = left.transpose(perm_l).reshape(sl)
    rm = right.transpose(perm_r).reshape(sr)
    dtype = np.result_type(a.dtype, b.dtype)
    # no contracted label: an outer/elementwise product, not a GEMM of 1-wide matrices
    kernel = np.multiply if sl[-1] == 1 else np.matmul
    if final_perm is None:
        res = np.empty(out_shape, dtype=dtype)
        kernel(lm, rm, out=res.reshape(so))
        return res
    nat = kernel(lm, rm).reshape(nat_shape)
    t = nat.transpose(final_perm)
    return np.array(t, order="C") if t.base is not None else t


def binary_transpose_subscripts(subscripts: str, which: int) -> tuple[str, str | None]:
    """How to transpose a binary einsum with respect to operand ``which`` (0 or 1).

    Returns ``(binary, unary)``: the cotangent of operand ``which`` is
    ``binary(ct, other, binary)`` followed, when ``unary`` is not ``None``, by
    ``unary_einsum(..., unary, operand_shape)`` (operands with repeated labels or labels
    summed privately).  No conjugation (JAX's transpose convention). O(len).
    """
    lhs, out = subscripts.split("->")
    terms = lhs.split(",")
    mine, other = terms[which], terms[1 - which]
    core = "".join(c for c in dict.fromkeys(mine) if c in out or c in other)
    return out + "," + other + "->" + core, (None if core == mine else core + "->" + mine)


# --------------------------------------------------------------------------- planning


class UnaryStep:
    """Replace operand ``pos`` of the working list by ``unary(x, subscripts, shape)``."""

    __slots__ = ("pos", "shape", "subscripts")

    def __init__(self, pos: int, subscripts: str, shape: tuple[int, ...]) -> None:
        self.pos = pos
        self.subscripts = subscripts
        self.shape = shape

    def __repr__(self) -> str:
        return f"UnaryStep({self.pos}, {self.subscripts!r}, {self.shape})"


class BinaryStep:
    """Pop operands ``i`` and ``j`` and append ``binary(w[i], w[j], subscripts)``."""

    __slots__ = ("i", "j", "subscripts")

    def __init__(self, i: int, j: int, subscripts: str) -> None:
        self.i = i
        self.j = j
        self.subscripts = subscripts

    def __repr__(self) -> str:
        return f"BinaryStep({self.i}, {self.j}, {self.subscripts!r})"


class EinsumPlan:
    """A cached contraction schedule for one (subscripts, shapes) pair.

    ``steps`` run on a working list that starts as the operands; at the end it holds
    exactly one array (the result) -- or, if ``steps`` is empty, the single operand is
    the result unchanged (an identity einsum such as ``"ij->ij"``).
    """

    __slots__ = ("flops", "inputs", "out_shape", "output", "path", "sizes", "steps")

    def __init__(
        self,
        inputs: tuple[str, ...],
        output: str,
        sizes: dict[str, int],
        steps: tuple[UnaryStep | BinaryStep, ...],
        flops: int,
        path: tuple[tuple[int, ...], ...] = (),
    ) -> None:
        self.inputs = inputs
        self.path = path  # the pairwise order (opt_einsum's linear path form)
        self.output = output
        self.sizes = sizes
        self.steps = steps
        self.out_shape = tuple(sizes[c] for c in output)
        self.flops = flops

    def __repr__(self) -> str:
        return (
            f"EinsumPlan({','.join(self.inputs)}->{self.output}, steps={list(self.steps)}, "
            f"flops={self.flops})"
        )


def _order_for_gemm(ta: str, tb: str, keep: set[str]) -> str:
    """Natural GEMM output order of a pairwise step: batch, free(a), free(b)."""
    batch = [c for c in ta if c in tb and c in keep]
    fa = [c for c in ta if c not in tb and c in keep]
    fb = [c for c in tb if c not in ta and c in keep]
    return "".join(dict.fromkeys(batch + fa + fb))


@functools.lru_cache(maxsize=2048)
def plan(
    subscripts: str,
    shapes: tuple[tuple[int, ...], ...],
    op: str = "einsum",
    interleaved: bool = False,
    optimize: Any = "auto",
) -> EinsumPlan:
    """The cached schedule of ``einsum(subscripts, *operands of shapes)``.

    The pairwise order is opt_einsum's path for ``optimize``: a strategy name (``"auto"``,
    the default, ``"greedy"``, ``"optimal"``, ``"dp"``, ``"branch-2"`` ...) or an explicit
    path (pairs of positions, as ``numpy.einsum_path`` / ``opt_einsum.contract_path``
    return); no memory limit, so intermediates larger than the inputs are allowed --
    unlike ``numpy.einsum``'s ``optimize=True``.  First call: O(opt_einsum's search);
    later calls with the same
    subscripts and shapes: one dict lookup.  Raises :class:`EinsumError` on bad
    subscripts (naming the arguments: see :func:`parse_subscripts`).
    """
    inputs, output, sizes = parse_subscripts(subscripts, shapes, op, interleaved)
    steps: list[UnaryStep | BinaryStep] = []
    work = list(inputs)
    # 1. per-operand unary preprocessing (diagonals, private sums)
    for i, t in enumerate(work):
        others = set(output).union(*(set(u) for j, u in enumerate(work) if j != i))
        core = "".join(c for c in dict.fromkeys(t) if c in others)
        if len(work) == 1:
            core = output
        if core != t:
            steps.append(UnaryStep(i, t + "->" + core, tuple(sizes[c] for c in core)))
            work[i] = core
    # 2. pairwise path
    flops = 0
    path: Any = ()
    if len(work) > 1:
        try:
            path, info = opt_einsum.contract_path(
                ",".join(work) + "->" + output,
                *[tuple(sizes[c] for c in t) for t in work],
                shapes=True,
                optimize=list(optimize) if isinstance(optimize, tuple) else optimize,
            )
        except (KeyError, ValueError, TypeError, IndexError) as e:
            raise EinsumError(
                f"{op}: argument 'optimize' {optimize!r} is neither an opt_einsum strategy "
                f"nor a contraction path for {len(work)} operands: {e}"
            ) from None
        flops = int(info.opt_cost)
        for pair in path:
            if len(pair) == 1:  # pragma: no cover - opt_einsum emits these only for 1 operand
                continue
            i, j = sorted(pair)
            ta, tb = work[i], work[j]
            rest = [t for k, t in enumerate(work) if k not in (i, j)]
            keep = set(output).union(*(set(t) for t in rest))
            if not rest:
                res = output
            else:
                res = _order_for_gemm(ta, tb, keep)
            steps.append(BinaryStep(i, j, f"{ta},{tb}->{res}"))
            work = [*rest, res]
    # 3. final permutation if needed
    if work[0] != output:
        steps.append(UnaryStep(0, work[0] + "->" + output, tuple(sizes[c] for c in output)))
    return EinsumPlan(
        inputs, output, sizes, tuple(steps), flops, tuple(tuple(int(i) for i in q) for q in path)
    )


# --------------------------------------------------------------------------- numpy drivers


def _run(p: EinsumPlan, operands: Sequence[Array], keep: bool) -> tuple[Array, list[Any]]:
    work = list(operands)
    trail: list[Any] = []
    for s in p.steps:
        if isinstance(s, UnaryStep):
            if keep:
                trail.append(work[s.pos])
            work[s.pos] = unary_einsum(work[s.pos], s.subscripts, s.shape)
        else:
            a, b = work[s.i], work[s.j]
            if keep:
                trail.append((a, b))
            res = binary_einsum(a, b, s.subscripts)
            work = [w for k, w in enumerate(work) if k not in (s.i, s.j)]
            work.append(res)
    return work[0], trail


def contract(subscripts: str, *operands: Array) -> Array:
    """numpy-level ``einsum`` along the cached plan (for tests and benchmarks)."""
    p = plan(subscripts, tuple(o.shape for o in operands))
    res, _ = _run(p, operands, keep=False)
    if not p.steps:
        return np.array(res, copy=True)
    return res


def contract_vjp(subscripts: str, operands: Sequence[Array], ct: Array) -> list[Array]:
    """numpy-level VJP of ``contract``: the operands' cotangents (reverse through the plan).

    Cost about twice the forward contraction; used to prove the step transposes
    against JAX independently of the tape.
    """
    p = plan(subscripts, tuple(o.shape for o in operands))
    _, trail = _run(p, operands, keep=True)
    # bookkeeping: which working slots came from which original operand
    n = len(operands)
    origin: list[list[int]] = [[i] for i in range(n)]
    slot_hist = []
    for s in p.steps:
        slot_hist.append(list(origin))
        if isinstance(s, BinaryStep):
            rest = [o for k, o in enumerate(origin) if k not in (s.i, s.j)]
            origin = [*rest, [-1]]
    # reverse: working cotangents
    cts: list[Array | None] = [ct]
    for s, saved, hist in zip(reversed(p.steps), reversed(trail), reversed(slot_hist), strict=True):
        if isinstance(s, UnaryStep):
            x = saved
            g = cts[s.pos]
            cts[s.pos] = (
                None
                if g is None
                else unary_einsum(g, unary_transpose_subscripts(s.subscripts), x.shape)
            )
        else:
            a, b = saved
            g = cts[-1]
            rest_cts = cts[:-1]
            ga: Array | None = None
            gb: Array | None = None
            if g is not None:
                ga = _binary_ct(g, a, b, s.subscripts, 0)
                gb = _binary_ct(g, a, b, s.subscripts, 1)
            # reinsert at positions i, j (i < j) in the pre-step list
            full: list[Array | None] = []
            it = iter(rest_cts)
            for k in range(len(hist)):
                full.append(ga if k == s.i else gb if k == s.j else next(it))
            cts = full
    return [c if c is not None else np.zeros_like(o) for c, o in zip(cts, operands, strict=True)]


def _binary_ct(g: Array, a: Array, b: Array, subscripts: str, which: int) -> Array:
    bsub, usub = binary_transpose_subscripts(subscripts, which)
    other = b if which == 0 else a
    mine = a if which == 0 else b
    r = binary_einsum(g, other, bsub)
    if usub is not None:
        r = unary_einsum(r, usub, mine.shape)
    return r


def contract_jvp(
    subscripts: str, operands: Sequence[Array], tangents: Sequence[Array | None]
) -> tuple[Array, Array | None]:
    """numpy-level JVP of ``contract``: ``(primal_out, tangent_out)`` along the same plan."""
    p = plan(subscripts, tuple(o.shape for o in operands))
    work = list(operands)
    tw: list[Array | None] = list(tangents)
    for s in p.steps:
        if isinstance(s, UnaryStep):
            t = tw[s.pos]
            work[s.pos] = unary_einsum(work[s.pos], s.subscripts, s.shape)
            tw[s.pos] = None if t is None else unary_einsum(t, s.subscripts, s.shape)
        else:
            a, b, da, db = work[s.i], work[s.j], tw[s.i], tw[s.j]
            res = binary_einsum(a, b, s.subscripts)
            dres: Array | None = None
            if da is not None:
                dres = binary_einsum(da, b, s.subscripts)
            if db is not None:
                x = binary_einsum(a, db, s.subscripts)
                dres = x if dres is None else dres + x
            work = [w for k, w in enumerate(work) if k not in (s.i, s.j)]
            tw = [w for k, w in enumerate(tw) if k not in (s.i, s.j)]
            work.append(res)
            tw.append(dres)
    return work[0], tw[0]
