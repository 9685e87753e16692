"""The functional API: ``grad``, ``value_and_grad``, ``vjp``, ``jvp``.

They *borrow* owner arguments for the duration of the call (nothing is consumed: a
training loop needs no copies) and return fresh owners.  Arguments may be tuples, lists
and dicts of leaves (``Tensor`` owners, ``EagerTensor`` handles, numpy arrays — imported
with a recorded ``TRANSFER`` — or Python floats); gradients come back in the same
structure, and a leaf the output does not depend on gets zeros (materialized because it
was asked for, as in JAX).

Composition: called on handles that the currently recording tape tracks (inside another
``grad`` or a ``with Tape()`` block), they run on *that* tape with ``create_graph`` —
each differentiated argument first passes through a recorded identity, so the inner
sweep stops there and closed-over outer values are treated as the constants they are —
and return handles recorded on it.  ``grad(grad(f))`` and Hessian-vector products
therefore work.  Forward-over-reverse (``jvp`` of ``grad``) is not supported yet.

Allocation accounting: each returned gradient or tangent is one ``OPERATION_OUTPUT``
allocation; a cotangent that two results share is materialized once per owner (a kernel
write, never a copy event); intermediate cotangents are kernel scratch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import tenferro_storage as ts

from ._dispatch import bind, constant_record
from ._gradients import materialize
from ._handle import EagerTensor, make_handle
from ._jvp import JvpContext
from ._primitive import Primitive, defprimitive
from ._retention import AdValueRecord, record_borrow
from ._state import STATE, no_grad
from ._tape import Tape
from .errors import IntoValueError

IDENTITY: Primitive = defprimitive(
    "identity",
    lambda a: np.asarray(a).view(),
    1,
    alias=True,
    vjp=(lambda ops, g: g,),
    jvp=(lambda ops, t: t,),
)

Leaf = Any


# -- pytrees (tuple / list / dict of leaves) -----------------------------------------------------
def tree_flatten(tree: Any) -> tuple[list[Any], Callable[[list[Any]], Any]]:
    """Leaves in order and a function rebuilding the structure from new leaves."""
    if isinstance(tree, tuple | list):
        parts = [tree_flatten(t) for t in tree]
        leaves = [leaf for p in parts for leaf in p[0]]
        kind = type(tree)

        def rebuild(new: list[Any]) -> Any:
            out, i = [], 0
            for p in parts:
                n = len(p[0])
                out.append(p[1](new[i : i + n]))
                i += n
            return kind(out) if kind is tuple else out

        return leaves, rebuild
    if isinstance(tree, dict):
        keys = list(tree)
        vals, rb = tree_flatten([tree[k] for k in keys])
        return vals, lambda new: dict(zip(keys, rb(new), strict=True))
    return [tree], lambda new: new[0]


class _Call:
    """Per-call bookkeeping: the tape, borrowed records to release, watched handles."""

    def __init__(self, args: tuple[Any, ...], argnums: tuple[int, ...]) -> None:
        outer = STATE.tape
        self.nested = outer is not None and any(
            isinstance(leaf, EagerTensor) and leaf._tape is outer.key and leaf._id >= 0
            for i in argnums
            for leaf in tree_flatten(args[i])[0]
        )
        self.tape: Tape = outer if self.nested else Tape()
        self.borrowed: list[AdValueRecord] = []
        self.watched: list[EagerTensor] = []
        self.rebuild: list[Callable[[list[Any]], Any]] = []
        new_args = list(args)
        for i, a in enumerate(args):
            leaves, rb = tree_flatten(a)
            diff = i in argnums
            wrapped = [self.wrap(leaf, diff) for leaf in leaves]
            if diff:
                self.watched.extend(wrapped)
                self.rebuild.append(rb)
            new_args[i] = rb(wrapped)
        self.args = new_args

    def wrap(self, leaf: Leaf, diff: bool) -> Any:
        tape = self.tape
        if isinstance(leaf, EagerTensor):
            if not diff:
                return leaf
            if self.nested:
                with _recording_on(tape):
                    return bind(IDENTITY, leaf)
            return tape.watch(leaf)
        if isinstance(leaf, ts.Tensor):
            rec = record_borrow(leaf, "argument")
            self.borrowed.append(rec)
        elif isinstance(leaf, np.ndarray) or (diff and isinstance(leaf, float | int)):
            rec = constant_record(
                np.asarray(leaf, dtype=float) if isinstance(leaf, int) else leaf, "argument"
            )
        else:
            return leaf
        if not diff:
            return make_handle(rec, None, -1)
        vid = len(tape.nodes)
        tape.nodes.append(None)
        return make_handle(rec, tape.key, vid)

    def release(self) -> None:
        for rec in self.borrowed:
            rec.container.release_borrow()
        self.borrowed = []
        if not self.nested:
            self.tape._release()

    def results(self, out: EagerTensor, seed: Any) -> list[Any]:
        """Cotangents for every watched leaf (owners, or handles when nested)."""
        from .ops._ns import HANDLE_NS, NUMPY_NS

        tape = self.tape
        wids = [h._id for h in self.watched]
        tracked = isinstance(out, EagerTensor) and out._tape is tape.key and out._id >= 0
        if self.nested:
            cts = {}
            if tracked:
                with _recording_on(tape):
                    cts = tape.sweep(out._id, seed, wids, HANDLE_NS, True)
            return [
                cts.get(w) if w in cts else _zeros_handle(h)
                for w, h in zip(wids, self.watched, strict=True)
            ]
        cts = tape.sweep(out._id, seed, wids, NUMPY_NS, False) if tracked else {}
        owners: list[Any] = []
        seen: set[int] = set()
        for w, h in zip(wids, self.watched, strict=True):
            ct = cts.get(w)
            if ct is None:
                a = h._r("grad").a
                arr = np.zeros(a.shape, a.dtype)
            else:
                arr = materialize(ct)
                if id(arr) in seen:
                    arr = np.array(arr)  # one allocation per owner (a kernel write)
                seen.add(id(arr))
            owners.append(ts.kernel.adopt_output(arr, STATE.reason, "grad"))
        return owners


class _recording_on:
    def __init__(self, tape: Tape) -> None:
        self.tape = tape

    def __enter__(self) -> None:
        self.prev = (STATE.tape, STATE.key)
        STATE.tape, STATE.key = self.tape, self.tape.key

    def __exit__(self, *exc: object) -> None:
        STATE.tape, STATE.key = self.prev


def _zeros_handle(h: EagerTensor) -> EagerTensor:
    a = h._r("grad").a
    t = ts.kernel.adopt_output(np.zeros(a.shape, a.dtype), STATE.reason, "grad")
    from ._retention import record_owner

    return make_handle(record_owner(t, ts.kernel.read_array(t), "zeros"), None, -1)


def _argnums(argnums: int | tuple[int, ...]) -> tuple[int, ...]:
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


def _pack(call: _Call, flat: list[Any], argnums: int | tuple[int, ...]) -> Any:
    out, i = [], 0
    for rb, k in zip(call.rebuild, _argnums(argnums), strict=True):
        n = len(tree_flatten(call.args[k])[0])
        out.append(rb(flat[i : i + n]))
        i += n
    return out[0] if isinstance(argnums, int) else tuple(out)


def _owner_of(out: EagerTensor) -> Any:
    try:
        return out.into_value()
    except IntoValueError as e:  # an alias of an argument: an explicit, recorded duplicate
        return e.value.duplicate_value()


def _check_jvp_free(args: tuple[Any, ...]) -> None:
    if STATE.jvp is not None:
        raise NotImplementedError(
            "grad/vjp inside jvp (forward-over-reverse) is not supported yet; compute "
            "Hessian-vector products as grad of (grad(f)(x) * v).sum()"
        )


def value_and_grad(
    f: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """``f``'s value and its gradient with respect to ``argnums`` (see the module docstring).

    ``f`` must return a one-element value (or ``(value, aux)`` with ``has_aux``).  Returns
    ``(value, grads)`` — owners, or handles when nested.
    """

    def wrapped(*args: Any) -> Any:
        _check_jvp_free(args)
        call = _Call(args, _argnums(argnums))
        try:
            if call.nested:
                res = f(*call.args)
            else:
                with call.tape:
                    res = f(*call.args)
            out, aux = res if has_aux else (res, None)
            if not isinstance(out, EagerTensor) or out.size != 1:
                raise TypeError(
                    "grad: the function must return a one-element EagerTensor (use vjp for "
                    f"other outputs); got {out!r}"
                )
            seed: Any
            if call.nested:
                seed = _ones_handle(out)
            else:
                a = out._r("grad").a
                seed = np.ones(a.shape, a.dtype)
            flat = call.results(out, seed)
            value: Any = out
            call.release()
            if not call.nested:
                value = _owner_of(out)
            grads = _pack(call, flat, argnums)
            return ((value, aux), grads) if has_aux else (value, grads)
        finally:
            call.release()

    return wrapped


def grad(
    f: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """The gradient of scalar-valued ``f`` with respect to ``argnums`` (int or tuple).

    Borrows owner arguments for the call; returns fresh owners in the arguments'
    structure (handles recorded on the enclosing tape when nested, so it composes).
    """
    vg = value_and_grad(f, argnums, has_aux)

    def wrapped(*args: Any) -> Any:
        (value_aux, grads) = vg(*args)
        if has_aux:
            return grads, value_aux[1]
        return grads

    return wrapped


def _ones_handle(out: EagerTensor) -> EagerTensor:
    a = out._r("grad").a
    t = ts.kernel.adopt_output(np.ones(a.shape, a.dtype), STATE.reason, "seed")
    from ._retention import record_owner

    return make_handle(record_owner(t, ts.kernel.read_array(t), "seed"), None, -1)


class VjpFunction:
    """The pullback returned by :func:`vjp`.  Holds the tape (and so its residuals and the
    borrows of the primal owners) until it is released or garbage collected."""

    def __init__(self, call: _Call, out: EagerTensor, argnums: tuple[int, ...]) -> None:
        self._call: _Call | None = call
        self._out = out
        self._argnums = argnums

    def __call__(self, cotangent: Any) -> tuple[Any, ...]:
        """Cotangents for each primal (owners; handles when nested). Borrows ``cotangent``."""
        call = self._call
        if call is None:
            raise ts.errors.ExpiredBorrowError("vjp_fn: released; call vjp again")
        out = self._out
        if isinstance(cotangent, EagerTensor):
            seed: Any = cotangent if call.nested else cotangent._r("vjp_fn").a
        elif isinstance(cotangent, ts.Tensor):
            seed = (
                ts.kernel.read_array(cotangent)
                if not call.nested
                else make_handle(record_borrow(cotangent, "cotangent"), None, -1)
            )
        else:
            seed = np.asarray(cotangent, dtype=out._r("vjp_fn").a.dtype)
        if not call.nested and isinstance(seed, np.ndarray):
            seed = np.array(seed)  # scratch: a delivered cotangent must never alias the seed
        flat = call.results(out, seed)
        return tuple(_pack(call, flat, self._argnums))

    def release(self) -> None:
        """End the borrows and release the residuals now (idempotent)."""
        call = self._call
        if call is not None:
            self._call = None
            call.release()

    def __del__(self) -> None:
        self.release()


def vjp(f: Callable[..., Any], *primals: Any) -> tuple[EagerTensor, VjpFunction]:
    """``(out, vjp_fn)``: ``out`` is a read-only handle to ``f(*primals)`` (its value may be a
    residual of ``vjp_fn``: ``out.into_value()`` succeeds once ``vjp_fn`` is released;
    ``duplicate_value()`` always works), ``vjp_fn(cotangent)`` returns one cotangent per
    primal.  The primal owners stay borrowed until ``vjp_fn`` is released."""
    _check_jvp_free(primals)
    argnums = tuple(range(len(primals)))
    call = _Call(primals, argnums)
    if call.nested:
        out = f(*call.args)
    else:
        with call.tape:
            out = f(*call.args)
    return out, VjpFunction(call, out, argnums)


def jvp(f: Callable[..., Any], primals: Any, tangents: Any) -> tuple[Any, Any]:
    """Forward mode: ``(f(*primals), J @ tangents)`` as fresh owners.

    ``primals`` and ``tangents`` are matching tuples (of pytrees); both are borrowed.
    Runs the JVP rules once per op; nothing is recorded or retained.
    """
    primals = tuple(primals)
    tangents = tuple(tangents)
    ctx = JvpContext()
    borrowed: list[AdValueRecord] = []
    args: list[Any] = []
    inputs_t: list[Any] = []
    for p, t in zip(primals, tangents, strict=True):
        pl, rb = tree_flatten(p)
        tl, _ = tree_flatten(t)
        hs = []
        for leaf, tan in zip(pl, tl, strict=True):
            if isinstance(leaf, ts.Tensor):
                rec = record_borrow(leaf, "primal")
                borrowed.append(rec)
            elif isinstance(leaf, EagerTensor):
                rec = leaf._r("jvp")
            else:
                arr = np.asarray(leaf)
                if arr.dtype.kind not in "fc":  # ints/bools become float; complex stays complex
                    arr = arr.astype(float)
                rec = constant_record(arr, "primal")
            if isinstance(tan, ts.Tensor):
                trec = record_borrow(tan, "tangent")
                borrowed.append(trec)
                ctx.tangents[rec] = trec.a
            elif isinstance(tan, EagerTensor):
                ctx.tangents[rec] = tan._r("jvp").a
            else:
                ctx.tangents[rec] = np.asarray(tan, dtype=rec.a.dtype)
            inputs_t.append(ctx.tangents[rec])
            hs.append(make_handle(rec, None, -1))
        args.append(rb(hs))
    prev = STATE.jvp
    STATE.jvp = ctx
    try:
        with no_grad():
            out = f(*args)
        tan_out = ctx.tangents.get(out._r("jvp"))
        a = out._r("jvp").a
        arr = np.zeros(a.shape, a.dtype) if tan_out is None else materialize(tan_out)
        if any(arr is v for v in inputs_t):
            arr = np.array(arr)  # never adopt a caller's tangent array
        tangent = ts.kernel.adopt_output(arr, STATE.reason, "jvp")
        ctx.tangents.clear()
        del args
        value = _owner_of(out)
        return value, tangent
    finally:
        STATE.jvp = prev
        for rec in borrowed:
            rec.container.release_borrow()
