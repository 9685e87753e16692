"""``einsum`` and ``tensordot``: a cached pairwise plan over two self-transposing primitives.

* ``einsum_unary(x, *, subscripts, shape, src)`` -- linear: diagonals, private sums and
  permutations (``"iij->ji"``) or, the other way round, broadcasting and diagonal
  embedding (``"ji->iij"``).  Its transpose is itself with the subscripts swapped.
* ``einsum_binary(a, b, *, subscripts)`` -- bilinear, one batched GEMM.  Its transposes
  are ``einsum_binary`` (plus an ``einsum_unary`` when an operand has repeated or
  privately summed labels): :func:`~tenferro_ad.ops._einsum_path.binary_transpose_subscripts`.

The public :func:`einsum` looks up the cached plan for (subscripts, shapes) -- opt_einsum's
path, intermediates allowed to grow -- and binds one primitive per step.  Each
intermediate is an ``OPERATION_OUTPUT`` allocation owned by a handle that the next step
consumes; when nothing records, the handle dies right there and the allocation is
released before the following step runs.  Under a tape each step saves its two operands
(bilinear residuals), so reverse mode is ordinary backpropagation through the pairwise
chain -- about twice the forward cost, on the forward's path -- and forward mode pushes
``binary(da, b) + binary(a, db)`` along the same path.  Complex operands follow JAX (no
conjugation in the transposes); a real operand contracted with a complex one receives
the real part of its cotangent, as in JAX.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from opt_einsum.paths import PathOptimizer

import tenferro_storage as ts
from tenferro_storage.errors import shown

from .._checkpoint._region import checkpoint
from .._core._dispatch import bind
from .._core._handle import EagerTensor
from .._core._primitive import Primitive, defbilinear, deflinear, defprimitive
from .._traced._batch_rules import defbatch, emit, loop_fallback
from ..errors import ArgumentTypeError, AxisError
from . import _einsum_path as E
from . import _einsum_slice as S
from ._util import guarded, value_arg
from .complex import REAL, is_complex
from .elementwise import add
from .shape import getitem

Array = Any

__all__ = ["EINSUM_BINARY", "EINSUM_UNARY", "einsum", "tensordot"]


def _shape(x: Any) -> tuple[int, ...]:
    if isinstance(x, EagerTensor):
        return tuple(x._r("einsum").a.shape)
    return tuple(np.shape(x))


EINSUM_UNARY: Primitive = deflinear(
    defprimitive(
        "einsum_unary",
        lambda x, *, subscripts, shape, src: E.unary_einsum(x, subscripts, shape),
        1,
    ),
    lambda ops, g, *, subscripts, shape, src: ops.apply(
        EINSUM_UNARY,
        g,
        subscripts=E.unary_transpose_subscripts(subscripts),
        shape=src,
        src=shape,
    ),
)


def _batch_label(subscripts: str) -> str | None:
    """A label ``subscripts`` does not use (for the batch axis), or None."""
    if "." in subscripts:
        return None
    return next((c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in subscripts), None)


def _batch_einsum_unary(
    args: list[Any], batched: list[bool], size: int, *, subscripts: str, shape: Any, src: Any
) -> tuple[Any, bool]:
    z = _batch_label(subscripts)
    if z is None:
        return loop_fallback(EINSUM_UNARY, args, batched, size,
                             {"subscripts": subscripts, "shape": shape, "src": src}), True
    ins, out = subscripts.split("->")
    return emit("einsum_unary", args[0], subscripts=f"{z + ins}->{z + out}",
                shape=(size, *shape), src=(size, *src)), True


defbatch(EINSUM_UNARY, _batch_einsum_unary)


def _binary_ct(ops: Any, g: Array, x: Array, y: Array, subscripts: str, which: int) -> Array:
    bsub, usub = E.binary_transpose_subscripts(subscripts, which)
    mine, other = (x, y) if which == 0 else (y, x)
    r = ops.apply(EINSUM_BINARY, g, other, subscripts=bsub)
    if usub is not None:
        shp = tuple(mine.shape)
        r = ops.apply(EINSUM_UNARY, r, subscripts=usub, shape=shp, src=_shape(r))
    if not is_complex(mine) and is_complex(r):
        r = ops.apply(REAL, r)
    return r


EINSUM_BINARY = defbilinear(
    defprimitive("einsum_binary", lambda a, b, *, subscripts: E.binary_einsum(a, b, subscripts), 2),
    lambda ops, g, x, y, *, subscripts: _binary_ct(ops, g, x, y, subscripts, 0),
    lambda ops, g, x, y, *, subscripts: _binary_ct(ops, g, x, y, subscripts, 1),
)


def _batch_einsum_binary(
    args: list[Any], batched: list[bool], size: int, *, subscripts: str
) -> tuple[Any, bool]:
    """A fresh batch label on the batched operands and the output: one batched GEMM."""
    z = _batch_label(subscripts)
    if z is None:
        return loop_fallback(EINSUM_BINARY, args, batched, size,
                             {"subscripts": subscripts}), True
    ins, out = subscripts.split("->")
    a, b = ins.split(",")
    sub = f"{z + a if batched[0] else a},{z + b if batched[1] else b}->{z + out}"
    return emit("einsum_binary", *args, subscripts=sub), True


defbatch(EINSUM_BINARY, _batch_einsum_binary)


def _interleaved(args: tuple[Any, ...]) -> tuple[str, tuple[Any, ...], dict[int, str]]:
    """numpy's interleaved form ``einsum(op0, sub0, op1, sub1, ..., [out])`` as a
    subscripts string and the operands; sublist entries are ints (any, mapped to letters)
    or ``...``; also the letter each integer label became."""
    args = tuple(args)
    ops_ = args[0::2][: len(args) // 2]
    subs = list(args[1::2])
    out = args[-1] if len(args) % 2 == 1 else None
    letters: dict[int, str] = {}
    pool = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

    def conv(sub: Any, pos: int) -> str:
        if not isinstance(sub, list | tuple):
            raise ArgumentTypeError(
                f"einsum: argument {pos} must be a sublist (a list of ints or Ellipsis) in "
                f"the interleaved form einsum(op0, sublist0, op1, sublist1, ...), got "
                f"{type(sub).__name__}"
            )
        parts = []
        for s in sub:
            if s is Ellipsis:
                parts.append("...")
                continue
            if isinstance(s, bool) or not isinstance(s, int | np.integer):
                raise E.EinsumError(
                    f"einsum: argument {pos}: a sublist entry must be an int or Ellipsis, "
                    f"got {type(s).__name__}"
                )
            k = int(s)
            if k not in letters:
                if len(letters) == len(pool):
                    raise E.EinsumError(
                        f"einsum: argument {pos}: too many distinct sublist labels (max 52)"
                    )
                letters[k] = pool[len(letters)]
            parts.append(letters[k])
        return "".join(parts)

    ins = [conv(sb, 2 * i + 1) for i, sb in enumerate(subs)]
    spec = ",".join(ins) + ("" if out is None else "->" + conv(out, len(args) - 1))
    return spec, ops_, letters


def _user_labels(msg: str, letters: dict[int, str]) -> str:
    """An interleaved call's error message with the letters :func:`_interleaved` chose
    replaced by the user's integer labels (``label 'b'`` -> ``label 1``).  Error path
    only."""
    back = {v: k for k, v in letters.items()}
    return re.sub(
        r"label '(\w)'",
        lambda m: f"label {back[m.group(1)]}" if m.group(1) in back else m.group(0),
        msg,
    )


def _optimize_arg(optimize: Any, n: int) -> str | tuple[tuple[int, ...], ...]:
    """``optimize=`` as :func:`~._einsum_path.plan` caches it: a strategy name (``True``
    is ``"auto"``) or a path as a tuple of tuples (numpy's ``["einsum_path", ...]`` form
    accepted; ``False``: the operands in order, each step the first two). O(path)."""
    if optimize is True:
        return "auto"
    if isinstance(optimize, str | PathOptimizer):  # a name or an opt_einsum optimizer object
        return optimize
    if isinstance(optimize, list | tuple):
        items = list(optimize)
        if items and items[0] == "einsum_path":
            items = items[1:]
        try:
            path = tuple(tuple(int(i) for i in pair) for pair in items)
        except (TypeError, ValueError):
            path = ()
        if len(path) == max(n - 1, 0) and all(len(pair) == 2 for pair in path):
            return path
        raise E.EinsumError(
            f"einsum: argument 'optimize' {optimize!r} is not a contraction path for {n} "
            f"operands (it needs {max(n - 1, 0)} pairs of operand positions)"
        )
    if optimize is False:
        return tuple((0, 1) for _ in range(n - 1))
    raise ArgumentTypeError(
        f"einsum: argument 'optimize' must be an opt_einsum strategy name, True/False or a "
        f"contraction path (pairs of operand positions), got {optimize!r}"
    )


def einsum(
    subscripts: Any, *operands: Any, optimize: Any = "auto", memory_limit: int | None = None
) -> EagerTensor:
    """Einstein summation with numpy's grammar, contracted pairwise along a good path.

    Both of numpy's call forms: ``einsum("ij,jk->ik", a, b)`` and the interleaved
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` (integer labels, ``...`` allowed).

    Any explicit or implicit subscripts (traces ``"ii"``, diagonals ``"ii->i"``, batch
    labels, ``...``).  The path is opt_einsum's ``"auto"`` choice, cached per (subscripts,
    shapes); each step is one batched GEMM (or one unary reduction) and one
    ``OPERATION_OUTPUT`` allocation, released as soon as the next step has consumed it
    (unless a tape saves it as a residual of that step).  Differentiable to any order in
    both modes.

    ``optimize`` picks the pairwise order: an opt_einsum strategy (``"auto"``, the default,
    ``"greedy"``, ``"optimal"``, ``"dp"``, ...) or optimizer object, ``True`` (``"auto"``),
    ``False`` (left to right), an explicit path (``numpy.einsum_path``'s or
    ``opt_einsum``'s), or a cotengra ``ContractionTree`` (its path and its slicing) or
    searching optimizer (``cotengra.HyperOptimizer(slicing_opts=...)``: searched once per
    signature).  Trees are built over the subscripts' own labels.

    ``memory_limit`` (bytes) bounds what the contraction allocates at once, its backward
    included: when the plan's estimate (:mod:`~._einsum_slice`) exceeds it, contracted
    labels are sliced -- each slice contracts the network with those labels fixed and the
    slices are summed; the sub-trees no sliced label reaches are contracted once, before
    the slices.  Under a tape each slice is a checkpoint region: backward keeps no
    slice's intermediates and recomputes them, slice by slice, as
    ``CHECKPOINT_RECOMPUTE_OUTPUT`` allocations (about one extra forward of the sliced
    part; the invariant part too when the bound needs it checkpointed).  Sliced plans
    are cached per (subscripts, shapes, optimize, memory_limit, dtype size).

    The subscripts must fit the shapes exactly (no size-1 broadcasting).  An operand that
    is not a value is refused first (:func:`~._util.value_arg`), before anything is
    computed or recorded.

    Cost: allocates the result and the pairwise intermediates; no copy; no sync; no
    dispatch; O(the contraction's flops along its path), a cached path adding one dict
    lookup.

    Raises:
        ArgumentError: as ``tenferro_ad.ops._einsum_path.EinsumError`` (its subclass, a
            ``ValueError``) naming the argument -- ``'subscripts'`` or ``'operands'[i]``
            (by position in the interleaved form) when the subscripts do not fit the
            shapes, ``'optimize'`` for an unknown strategy or a path that does not fit,
            ``'memory_limit'`` when it is not positive or no slicing meets it; or an
            operand is a ragged list.
        ArgumentTypeError: ``subscripts`` is neither a str nor the interleaved form's
            first operand, an operand is not a value, or ``optimize`` or
            ``memory_limit`` has a type einsum cannot use.
        UseAfterMoveError: an operand was consumed."""
    interleaved = not isinstance(subscripts, str)
    if interleaved:
        if not operands or not isinstance(operands[0], list | tuple):
            raise ArgumentTypeError(
                f"einsum: argument 'subscripts' must be a str such as 'ij,jk->ik' (or, in "
                "the interleaved form einsum(op0, sublist0, op1, sublist1, ...), argument 1 "
                f"must be a sublist), got {type(subscripts).__name__}"
            )
        subscripts, operands, letters = _interleaved((subscripts, *operands))
        metas = [value_arg("einsum", 2 * i, o, imported=True) for i, o in enumerate(operands)]
    else:
        metas = [
            value_arg("einsum", "operands", o, i, imported=True) for i, o in enumerate(operands)
        ]
    shapes = tuple(m[0] for m in metas)
    try:
        if memory_limit is not None or S.is_cotengra_like(optimize):
            sp = S.sliced_plan(
                subscripts, shapes, interleaved, optimize, _limit(memory_limit),
                max(np.result_type(*(m[1] for m in metas)).itemsize, 1) if metas else 8,
            )
            return _sliced(sp, subscripts, operands, shapes, interleaved)
        how = _optimize_arg(optimize, len(operands))
        p = E.plan(subscripts, shapes, "einsum", interleaved, how)
    except E.EinsumError as e:
        if not interleaved:
            raise
        raise E.EinsumError(_user_labels(str(e), letters)) from None
    return _contract(p, operands, shapes)


def _limit(memory_limit: Any) -> int | None:
    if memory_limit is None:
        return None
    if isinstance(memory_limit, bool) or not isinstance(memory_limit, int | np.integer):
        raise ArgumentTypeError(
            f"einsum: argument 'memory_limit' must be a number of bytes (an int) or None, "
            f"got {type(memory_limit).__name__}"
        )
    if memory_limit <= 0:
        raise E.EinsumError(
            f"einsum: argument 'memory_limit' must be a positive number of bytes, got "
            f"{int(memory_limit)}"
        )
    return int(memory_limit)


def _contract(p: E.EinsumPlan, operands: Sequence[Any], shapes: Sequence[Any]) -> EagerTensor:
    """Run the plan ``p``: one primitive per step (the intermediates die as consumed)."""
    if not p.steps:  # identity, e.g. "ij->ij": still a fresh output
        (x,) = operands
        return bind(
            EINSUM_UNARY,
            x,
            subscripts=f"{p.inputs[0]}->{p.output}",
            shape=p.out_shape,
            src=shapes[0],
        )
    work: list[Any] = list(operands)
    for s in p.steps:
        if isinstance(s, E.UnaryStep):
            x = work[s.pos]
            work[s.pos] = bind(
                EINSUM_UNARY, x, subscripts=s.subscripts, shape=s.shape, src=_shape(x)
            )
            del x
        else:
            a, b = work[s.i], work[s.j]
            work = [w for k, w in enumerate(work) if k != s.i and k != s.j]
            work.append(bind(EINSUM_BINARY, a, b, subscripts=s.subscripts))
            del a, b  # the consumed intermediates die here (released unless saved)
    res: EagerTensor = work[0]
    return res


def _sliced(
    sp: S.SlicedPlan,
    subscripts: str,
    operands: Sequence[Any],
    shapes: tuple[tuple[int, ...], ...],
    interleaved: bool,
) -> EagerTensor:
    """Run a sliced plan: the slice-invariant parts once (taped, or one checkpoint region),
    then each slice as a checkpoint region, the parts summed in turn."""
    inner = E.plan(sp.subscripts, sp.shapes, "einsum", interleaved, sp.path)
    if not sp.labels:
        return _contract(inner, operands, sp.shapes)
    ops_ = [ts.from_numpy(o) if isinstance(o, np.ndarray) else o for o in operands]
    pres: list[Any] = []
    if sp.pre:
        used = sorted({i for lv, *_ in sp.pre for i in lv})

        def invariant(*xs: Any) -> tuple[Any, ...]:
            at = dict(zip(used, xs, strict=True))
            return tuple(
                _contract(E.plan(eq, shp, "einsum", interleaved, pth), [at[i] for i in lv], shp)
                for lv, eq, shp, pth in sp.pre
            )

        run_pre = checkpoint(invariant) if sp.pre_region else invariant
        pres = list(run_pre(*(ops_[i] for i in used)))
    srcs = [pres[i] if kind == "pre" else ops_[i] for kind, i in sp.sources]
    del pres

    def part(values: tuple[int, ...]) -> Any:
        def run(*xs: Any) -> Any:
            cut = []
            for x, key in zip(xs, sp.keys, strict=True):
                if key:
                    idx: list[Any] = [slice(None)] * len(_shape(x))
                    for ax, li in key:
                        idx[ax] = values[li]
                    x = getitem(x, tuple(idx))
                cut.append(x)
            return _contract(inner, cut, sp.shapes)

        return run

    total: Any = None
    for values in itertools.product(*(range(n) for n in sp.extents)):
        piece = checkpoint(part(values))(*srcs)
        total = piece if total is None else add(total, piece)
        del piece
    res: EagerTensor = total
    return res


def _tensordot_axes(
    axes: Any, sa: tuple[int, ...], sb: tuple[int, ...]
) -> tuple[list[int], list[int]]:
    """numpy's accepted ``axes`` forms, validated against the shapes: an int ``n`` (the last
    ``n`` axes of ``a`` with the first ``n`` of ``b``) or ``(axes_a, axes_b)``, each an int
    or a sequence of ints (``[-1, 0]`` is one pair); the paired axes as non-negative lists.
    Every refusal names the arguments it is about. O(rank)."""
    ra, rb = len(sa), len(sb)
    if isinstance(axes, int | np.integer) and not isinstance(axes, bool):
        n = int(axes)
        if n < 0 or n > min(ra, rb):
            raise AxisError(
                "tensordot", n, min(ra, rb), "axes",
                detail=f"axes={n} pairs the last {n} axes of 'a' with the first {n} of "
                f"'b', but arguments 'a' and 'b' have ranks {ra} and {rb}"
                + ("; axes must be non-negative" if n < 0 else ""),
            )
        pairs = (list(range(ra - n, ra)), list(range(n)))
    else:
        try:
            if not isinstance(axes, list | tuple | np.ndarray):
                raise TypeError  # an owner or view is not unpacked (it would borrow)
            xa, xb = axes
        except (TypeError, ValueError):
            text = (
                "tensordot: argument 'axes' must be an int or a pair of axis lists, got "
                f"{type(axes).__name__}"
                + (f" of length {len(axes)}" if isinstance(axes, tuple | list) else "")
                + (f" {axes!r}" if isinstance(axes, str | float) else "")
            )
            # a sequence of the wrong length is a wrong value; anything else a wrong type
            if isinstance(axes, list | tuple | np.ndarray):
                raise E.EinsumError(text) from None
            raise ArgumentTypeError(text) from None
        lists = []
        for x, r, nm in ((xa, ra, "a"), (xb, rb, "b")):
            lst = [x] if isinstance(x, int | np.integer) else x
            try:
                items = list(lst)
            except TypeError:
                raise ArgumentTypeError(
                    f"tensordot: argument 'axes': the axes of {nm!r} must be an int or a "
                    f"sequence of ints, got {type(x).__name__}"
                ) from None
            out = []
            for v in items:
                if isinstance(v, bool | np.bool_) or not isinstance(v, int | np.integer):
                    raise ArgumentTypeError(
                        f"tensordot: argument 'axes': an axis of {nm!r} must be an int, got "
                        f"{shown(v)}"
                    )
                if not -r <= int(v) < r:
                    raise AxisError(
                        "tensordot", int(v), r, "axes",
                        detail=f"an axis of argument {nm!r}, of rank {r}",
                    )
                out.append(int(v) % r)
            if len(set(out)) != len(out):
                raise E.EinsumError(
                    f"tensordot: argument 'axes' repeats an axis of {nm!r}: {items}"
                )
            lists.append(out)
        if len(lists[0]) != len(lists[1]):
            raise E.EinsumError(
                f"tensordot: argument 'axes' pairs {len(lists[0])} axes of 'a' with "
                f"{len(lists[1])} of 'b'"
            )
        pairs = (lists[0], lists[1])
    for x, y in zip(*pairs, strict=True):
        if sa[x] != sb[y]:
            raise E.EinsumError(
                f"tensordot: arguments 'a' and 'b' do not fit argument 'axes': axis {x} of "
                f"'a' has {sa[x]} entries but axis {y} of 'b' has {sb[y]} (shapes {sa} and "
                f"{sb})"
            )
    return pairs


def tensordot(a: Any, b: Any, axes: Any = 2) -> EagerTensor:
    """``numpy.tensordot`` as a differentiable :func:`einsum` (one GEMM). O(m*k*n).

    ``axes``: an int (the last ``axes`` of ``a`` with the first of ``b``) or a pair
    ``(axes_a, axes_b)``, each an int or a sequence of ints (``[-1, 0]``, ``([1], [0])``).
    Operands, axes and the paired extents are checked first; a refusal names ``tensordot``
    and ``'a'``, ``'b'`` or ``'axes'``, and changes nothing (nothing runs or is recorded).

    Cost: allocates the result; no copy; no sync; no dispatch; O(the contraction's flops).

    Raises:
        AxisError: an axis in ``axes`` is out of range for the rank of the value it
            belongs to, or an int ``axes`` is negative or larger than a rank (numpy's
            class: an ``IndexError`` and a ``ValueError``).
        ArgumentTypeError: ``axes`` (or an axis in it) is not an int or a pair of
            sequences of ints (a string, a float, a bool axis), or ``a``/``b`` is not a
            value.
        ArgumentError: ``axes`` is a sequence that is not a pair, pairs a different
            number of axes of ``a`` and ``b``, repeats an axis, or pairs axes of different
            extents (an ``EinsumError``).
        UseAfterMoveError: ``a`` or ``b`` is a consumed owner."""
    sa = value_arg("tensordot", "a", a, imported=True)[0]
    sb = value_arg("tensordot", "b", b, imported=True)[0]
    if type(axes) is int:  # the common form: checked and spelled once per shapes (cached)
        return einsum(_int_axes_subscripts(axes, sa, sb), a, b)
    ax = _tensordot_axes(axes, sa, sb)
    return einsum(E.tensordot_subscripts(len(sa), len(sb), ax), a, b)


@functools.lru_cache(maxsize=1024)
def _int_axes_subscripts(n: int, sa: tuple[int, ...], sb: tuple[int, ...]) -> str:
    """The einsum subscripts of ``tensordot(a, b, n)`` for these shapes, checked (a refusal
    is raised, not cached). Cached: O(1) on a repeated call."""
    return E.tensordot_subscripts(len(sa), len(sb), _tensordot_axes(n, sa, sb))


# argument errors from the planner, numpy or the kernel name the op (the package's classes)
# (EinsumError, already naming the op, passes through unchanged)
einsum = guarded("einsum", einsum, passthrough=(E.EinsumError,))
tensordot = guarded("tensordot", tensordot, passthrough=(E.EinsumError,))
