"""Batching rules: the signature, the table ``vmap`` reads, and the shared rule builders.

Each primitive's batching rule is registered next to its JVP/VJP rules, in the op's rule
file (``ops/<family>.py``), with :func:`defbatch`; ``vmap`` (``_batching.py``) looks the
rules up here by the :class:`Primitive` object itself (as its VJP/JVP rules hang on it), so
two primitives that share a name never share a rule.  A primitive without a rule is batched
by :func:`loop_fallback`.

Rule signature: ``rule(args, batched, size, **params) -> (out, out_batched)`` where
``batched[i]`` says whether ``args[i]`` carries the batch on axis 0 (scalars never do),
``size`` is the batch size, and the output's batch (if any) is on axis 0.  Rules run
while a trace is active and emit equations with :func:`emit`.

This module imports only numpy and ``_primitive`` (the trace namespace is looked up on
first use), so op files can import it while the package loads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._core._primitive import REGISTRY, Primitive
from ._trace import TRACE_NS

BatchRule = Callable[..., tuple[Any, bool]]
RULES: dict[Primitive, BatchRule] = {}  # keyed by the primitive object (identity)


def defbatch(prim: Primitive, rule: BatchRule) -> Primitive:
    """Register ``rule`` as the batching rule of ``prim`` (replacing any earlier one).
    Returns ``prim``, so it composes with ``defprimitive``. O(1)."""
    RULES[prim] = rule
    return prim


def emit(name: str, *args: Any, **params: Any) -> Any:
    """Apply the registered primitive ``name`` to tracers (one equation)."""
    return TRACE_NS.apply(REGISTRY[name], *args, **params)


def shape_of(a: Any) -> tuple[int, ...]:
    """The shape of a tracer, array or scalar (``()``)."""
    return tuple(getattr(a, "shape", ()))


def expand_batched(a: Any, rank: int) -> Any:
    """Batched ``a`` (batch on axis 0) with unit axes after the batch up to ``rank``+1 axes."""
    s = shape_of(a)
    if len(s) - 1 >= rank:
        return a
    return emit("reshape", a, shape=(s[0], *(1,) * (rank - len(s) + 1), *s[1:]), src=s)


def broadcast_batch(a: Any, size: int) -> Any:
    """An unbatched value broadcast to carry the batch on axis 0 (a metadata alias)."""
    s = shape_of(a)
    return emit("broadcast_to", a, shape=(size, *s), src=s)


def loop_fallback(
    prim: Primitive, args: Sequence[Any], batched: Sequence[bool], size: int, params: Any
) -> Any:
    """Batch ``prim`` by applying it per batch element and stacking the results."""
    outs = []
    for k in range(size):
        sl = [
            emit("slice", a, key=(k,), shape=shape_of(a)) if bt else a
            for a, bt in zip(args, batched, strict=True)
        ]
        o = TRACE_NS.apply(prim, *sl, **params)
        s = shape_of(o)
        outs.append(emit("reshape", o, shape=(1, *s), src=s))
    if size == 1:
        return outs[0]
    return emit("concatenate", *outs, axis=0, sizes=(1,) * size)


# -- rule builders shared by several op families
def elementwise(name: str) -> BatchRule:
    """Broadcasting elementwise ops: give batched arguments unit axes up to the common rank
    (unbatched ones broadcast from the right, as numpy does)."""

    def rule(args: list[Any], batched: list[bool], size: int, **params: Any) -> tuple[Any, bool]:
        ranks = [len(shape_of(a)) - int(bt) for a, bt in zip(args, batched, strict=True)]
        top = max(ranks)
        new = [expand_batched(a, top) if bt else a for a, bt in zip(args, batched, strict=True)]
        return emit(name, *new, **params), True

    return rule


def _past_batch(v: Any) -> Any:
    """An axis parameter (an int, a tuple of them, or ``None``) moved past a leading batch
    axis: a non-negative axis gains one, a negative one (counted from the end) stays."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, tuple):
        return tuple(_past_batch(a) for a in v)
    return v + 1 if v >= 0 else v


def leading(name: str, shift: tuple[str, ...] = (), prefix: tuple[str, ...] = ()) -> BatchRule:
    """Unary ops that act on trailing axes (or elementwise): apply to the batched value with
    axis parameters in ``shift`` moved past the batch axis and shape parameters in
    ``prefix`` prefixed with the batch size.  An axis parameter of ``None`` (every axis)
    becomes every axis but the batch's."""

    def rule(args: list[Any], batched: list[bool], size: int, **params: Any) -> tuple[Any, bool]:
        for k in shift:
            v = params[k]
            params[k] = (tuple(range(1, len(shape_of(args[0])))) if v is None
                         else _past_batch(v))
        for k in prefix:
            params[k] = (size, *params[k])
        return emit(name, *args, **params), True

    return rule


def unbatched_result(name: str) -> BatchRule:
    """Ops whose result does not depend on their argument's values, only on parameters
    (``eye``) or on trailing extents the batch does not change (``eye_like``): one
    unbatched application, broadcast over the batch (a metadata alias)."""

    def rule(args: list[Any], batched: list[bool], size: int, **params: Any) -> tuple[Any, bool]:
        return broadcast_batch(emit(name, *args, **params), size), True

    return rule


def flat_index(name: str) -> BatchRule:
    """``argmax``/``argmin``: an ``axis`` moves past the batch; ``axis=None`` (an index into
    the flattened value) flattens each example, reduces its one axis and restores the
    kept unit axes with ``keepdims``."""

    def rule(args: list[Any], batched: list[bool], size: int, **params: Any) -> tuple[Any, bool]:
        (x,) = args
        if params["axis"] is not None:
            params["axis"] = _past_batch(params["axis"])
            return emit(name, x, **params), True
        s = shape_of(x)
        n = 1
        for d in s[1:]:
            n *= d
        flat = emit("reshape", x, shape=(size, n), src=s)
        out = emit(name, flat, axis=1, keepdims=False)
        if params["keepdims"]:
            out = emit("reshape", out, shape=(size, *(1,) * (len(s) - 1)), src=(size,))
        return out, True

    return rule


def filled(name: str) -> BatchRule:
    """``fill``: a batched fill value (one per example) fills a batched shape; numpy's
    ``full`` broadcasts the value with unit axes after the batch. One equation."""

    def rule(args: list[Any], batched: list[bool], size: int, **params: Any) -> tuple[Any, bool]:
        shape = tuple(params["shape"])
        params["shape"] = (size, *shape)
        return emit(name, expand_batched(args[0], len(shape)), **params), True

    return rule
