"""The functional API, reverse mode: ``grad``, ``value_and_grad``, ``vjp``, ``constant``
(forward mode, ``jvp``, is in :mod:`._forward` and builds on the call machinery here).

They *borrow* owner arguments for the duration of the call (nothing is consumed: a
training loop needs no copies) and return fresh owners.  Arguments may be tuples, lists
and dicts of leaves (``Tensor`` owners, ``EagerTensor`` handles, numpy arrays — imported
with a recorded ``TRANSFER`` — or Python floats); gradients come back in the same
structure, and a leaf the output does not depend on gets zeros (materialized because it
was asked for, as in JAX).

Arguments that are not differentiated reach ``f`` unchanged (a numpy array stays an
array, an owner stays an owner: ops then borrow it), as in JAX; keyword arguments too.

Composition: called while a tape records (inside another ``grad``/``vjp`` or a
``with Tape()`` block), they run on *that* tape with a recorded backward — each
differentiated argument first passes through a recorded identity, so the inner sweep
stops there while values the function closes over keep their dependence on the outer
level — and return handles recorded on it.  ``grad(grad(f))``, gradients of functions
that call ``grad`` on closures, and Hessian-vector products therefore work.  Inside a
forward-mode context they run their backward through recorded ops too, so ``jvp`` of
``grad`` is exact.  On tracers (inside ``jit``) they transform the traced graph.

Allocation accounting: each returned gradient or tangent is one ``OPERATION_OUTPUT``
allocation.  A gradient whose bytes belong to another value (the seed cotangent, a
residual, or a gradient already delivered to another argument) is delivered as a fresh
owner with a recorded ``MATERIALIZE`` copy; intermediate cotangents are kernel scratch.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

import tenferro_storage as ts
from tenferro_storage._dtypes import STORED_NUMPY as _STORED
from tenferro_storage._pytree import PyTreeDef, tree_flatten, tree_leaves
from tenferro_storage.errors import (
    ExpiredBorrowError,
    TenferroError,
    UseAfterMoveError,
    shown,
)

from ._core._dispatch import _TRACERS, _argument_error, bind
from ._core._gradients import foreign_roots, own
from ._core._handle import EagerTensor, make_handle
from ._core._namespace import HANDLE_NS, NUMPY_NS
from ._core._nocopy import NoCopy
from ._core._primitive import IDENTITY
from ._core._retention import AdValueRecord, constant_record, record_borrow, record_owner
from ._core._state import LOCAL, STATE
from ._core._tape import Tape, check_cotangent
from ._core._tape import recording_on as _recording_on
from ._traced._eval import eval_graph as _eval_graph
from ._traced._trace import trace_closed as _trace_closed
from ._traced._transform import value_and_grad as _graph_value_and_grad
from ._traced._transform import vjp as _graph_vjp
from .errors import (
    ArgumentError,
    ArgumentTypeError,
    IntoValueError,
    UnsupportedDTypeError,
    _reason,
)

Leaf = Any
_read_array = ts.kernel.read_array
_TENSOR = ts.Tensor


class _Call(NoCopy):
    """Per-call bookkeeping: the tape, borrowed records to release, watched handles.

    Nesting: when a tape is recording already (an enclosing ``grad``/``vjp`` or a
    ``with Tape()`` block), the call runs on *that* tape with a recorded backward, so
    values the function closes over that the outer level tracks keep their dependence
    (no perturbation confusion): each differentiated argument enters through a recorded
    identity (a new value id), and the inner sweep stops at those ids.
    """

    def __init__(
        self,
        args: tuple[Any, ...],
        argnums: tuple[int, ...],
        what: str,
        fname: str,
        items: str = "",
    ) -> None:
        st = LOCAL.fields
        outer = st.tape
        self.nested = outer is not None
        # results are handles when an enclosing transform must see the computation: a
        # recording tape (reverse over reverse) or a forward-mode context (jvp of grad)
        self.handles = self.nested or st.jvp is not None
        self.tape: Tape = outer if self.nested else Tape(f"{what}({fname})")
        self.tape_released = False
        self.what = what
        self.borrowed: list[AdValueRecord] = []
        self.watched: list[EagerTensor] = []
        self.rebuild: dict[int, PyTreeDef] = {}
        self.counts: dict[int, int] = {}
        new_args = list(args)
        flat = {i: tree_flatten(args[i]) for i in argnums}
        for i in argnums:  # every leaf is checked before anything is watched or borrowed
            for leaf in flat[i][0]:
                if (  # the common leaf, a live floating-point owner: its checks in line
                    type(leaf) is not _TENSOR
                    or leaf._moved_by is not None
                    or leaf._exclusive is not None
                    or leaf._desc.dtype.kind not in "fc"
                ):
                    _check_leaf(leaf, i, what, items)
        tape = self.tape
        nodes = tape.nodes
        n0 = len(nodes)
        try:
            for i in argnums:
                leaves, rb = flat[i]
                holder = f"{tape.name}: argument {i}"  # one name per argument
                wrapped = []
                for leaf in leaves:
                    if type(leaf) is _TENSOR:  # (checked above) what ``wrap`` does, in line
                        rec = record_borrow(leaf, "argument", holder)
                        self.borrowed.append(rec)
                        wrapped.append(make_handle(rec, tape.key, len(nodes)))
                        nodes.append(None)
                    else:
                        wrapped.append(self.wrap(leaf, holder))
                self.watched.extend(wrapped)
                self.rebuild[i] = rb
                self.counts[i] = len(wrapped)
                new_args[i] = rb.unflatten(wrapped)
        except BaseException:  # e.g. a borrow refused: undo what was watched or borrowed
            self.watched = []
            for rec in self.borrowed:
                rec.container.release_borrow()
            self.borrowed = []
            for node in nodes[n0:]:
                if node is not None and node.res:
                    for r in node.res:
                        if type(r) is AdValueRecord:
                            r.count -= 1
            del nodes[n0:]
            raise
        self.args = new_args  # arguments that are not differentiated reach f unchanged
        self.order = argnums

    def wrap(self, leaf: Leaf, holder: str) -> Any:
        """Watch one checked leaf on the call's tape (a borrow for owners and views, held
        by ``holder``: the tape's name and the argument; ``__init__`` does this in line for
        the common leaf, an exact ``Tensor``). O(1)."""
        tape = self.tape
        if isinstance(leaf, EagerTensor):
            rec = leaf._r(self.what)
            if self.nested:
                with _recording_on(tape):
                    return bind(IDENTITY, leaf)
            return tape.watch(leaf)
        elif isinstance(leaf, ts.Tensor | ts.TensorView | ts.TensorViewMut):
            rec = record_borrow(leaf, "argument", holder)
            self.borrowed.append(rec)
        else:
            rec = constant_record(leaf, "argument")
        vid = len(tape.nodes)
        tape.nodes.append(None)
        return make_handle(rec, tape.key, vid)

    def discard(self, n0: int) -> None:
        """The call raised: on an enclosing tape, what it recorded from ``n0`` on is
        discarded (a private tape goes with ``release``)."""
        if self.nested:
            self.tape._discard_from(n0)

    def escape(self, *trees: Any) -> None:
        """Hand the borrow of every argument value that ``trees`` (outputs, aux) hold
        themselves -- ``lambda a: a`` -- to that value: it ends when the value's last
        holder dies (as an ``ad.constant`` handle's does), not at :meth:`release`, so the
        handle the caller receives stays readable.  O(leaves), no copy."""
        borrowed = self.borrowed
        if not borrowed:
            return
        held: set[int] = set()
        for tree in trees:
            if isinstance(tree, EagerTensor):
                held.add(id(tree._rec))
            elif tree is not None:
                held.update(
                    id(leaf._rec) for leaf in tree_leaves(tree) if isinstance(leaf, EagerTensor)
                )
        if held and any(id(rec) in held for rec in borrowed):
            self.borrowed = [rec for rec in borrowed if id(rec) not in held]

    def release(self) -> None:
        """End the argument borrows and release a private tape's residuals (idempotent:
        the tape's O(nodes) release runs once however often this is called)."""
        for rec in self.borrowed:
            rec.container.release_borrow()
        self.borrowed = []
        if not self.nested and not self.tape_released:
            self.tape_released = True
            self.tape._release()

    def results(
        self, seeds: dict[int, Any], given: bool = True, last: bool = False
    ) -> list[Any]:
        """Cotangents for every watched leaf (owners, or handles when nested), from the
        seed cotangents ``{value id: cotangent}`` of the outputs (``given``: the caller's
        own values, which a delivered gradient must never share; ``last``: the private
        tape is released right after, so the sweep may consume it)."""
        tape = self.tape
        wids = [h._id for h in self.watched]
        if self.handles:
            cts = {}
            if seeds:
                with _recording_on(tape):
                    cts = tape.sweep(seeds, None, wids, HANDLE_NS, True)
            seed_ids = {id(v) for v in seeds.values()}
            return [
                _fresh_handle(cts[w], seed_ids) if w in cts else _zeros_handle(h)
                for w, h in zip(wids, self.watched, strict=True)
            ]
        tape.consuming = last and not self.nested
        try:
            cts = tape.sweep(seeds, None, wids, NUMPY_NS, False) if seeds else {}
        finally:
            tape.consuming = False
        foreign = foreign_roots(seeds.values() if given else ())
        owners: list[Any] = []
        reason = LOCAL.fields.reason
        what = self.what
        for w, h in zip(wids, self.watched, strict=True):
            ct = cts.get(w)
            if ct is None:
                a = h._r(what).a
                arr = np.zeros(a.shape, a.dtype)
                owners.append(ts.kernel.adopt_output(arr, reason, what))
            else:
                owners.append(own(ct, foreign, what, reason))
        return owners

    def pack(self, flat: list[Any], argnums: int | tuple[int, ...]) -> Any:
        """Rebuild each requested argument's structure, in the order ``argnums`` asks."""
        out, i = [], 0
        for k in self.order:
            n = self.counts[k]
            out.append(self.rebuild[k].unflatten(flat[i : i + n]))
            i += n
        return out[0] if _single(argnums) else tuple(out)


def _has_tracer(tree: Any) -> bool:
    """Whether any leaf of the pytree ``tree`` is a tracer of traced mode (registered with
    the binder). O(nodes); nothing when no tracer type is registered."""
    if not _TRACERS:
        return False
    tracers = _TRACERS
    for leaf in tree_leaves(tree):
        if type(leaf) in tracers:
            return True
    return False


def _traced_value_and_grad(
    f: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    argnums: Any,
    has_aux: bool,
    holomorphic: bool,
) -> Any:
    """``value_and_grad`` on tracers: trace ``f``, transform the graph, inline it (with
    ``has_aux``: ``((value, aux), grads)``, the aux passed through undifferentiated)."""
    graph, consts = _trace_closed(lambda *a: f(*a, **kwargs), args)
    vg = _graph_value_and_grad(graph, argnums, has_aux, holomorphic)
    return _eval_graph(vg, *args) if consts is None else _eval_graph(vg, *args, consts)


def _tape_length() -> int:
    """How many entries the recording tape has (0 when none records)."""
    tape = LOCAL.fields.tape
    return 0 if tape is None else len(tape.nodes)


def _check_leaf(leaf: Leaf, argnum: int, what: str, items: str = "") -> None:
    """Refuse a leaf that cannot be differentiated (before anything changes); a refusal
    names ``what`` and the argument (a consumed owner, an unsupported numpy dtype...):
    ``argument <argnum>``, or ``argument '<items>'[<argnum>]`` when the arguments are the
    items of the parameter ``items`` (``vjp``'s ``primals``). O(1)."""
    try:
        if type(leaf) is ts.Tensor:  # the common leaf (a parameter owner) first
            dt = _read_array(leaf).dtype
        elif isinstance(leaf, EagerTensor):
            dt = leaf._r(what).a.dtype
        elif isinstance(leaf, ts.Tensor | ts.TensorView | ts.TensorViewMut):
            dt = _read_array(leaf).dtype
        elif isinstance(leaf, np.ndarray | np.generic | float | complex) and not isinstance(
            leaf, bool | np.bool_
        ):
            dt = np.asarray(leaf).dtype
            if (dt if dt.isnative else dt.newbyteorder("=")) not in _STORED:
                raise UnsupportedDTypeError(what, _argument_name(argnum, items), dt)
        else:
            _check_other(leaf, _argument_name(argnum, items), what)
        if dt.kind not in "fc":
            _refuse_dtype(dt, what, _argument_name(argnum, items))
    except UnsupportedDTypeError:
        raise
    except TenferroError as e:  # the error path: name the argument
        name = _argument_name(argnum, items)
        if not str(e).startswith(f"{what}: {name}"):
            dead = isinstance(e, UseAfterMoveError | ExpiredBorrowError)  # named by a read
            e.args = (f"{what}: {name}: {_reason(e) if dead else e}", *e.args[1:])
        raise


def _check_other(leaf: Leaf, name: str, what: str) -> NoReturn:
    """Refuse a leaf that is not an array, an owner, a handle or a float."""
    if isinstance(leaf, int) and not isinstance(leaf, bool):
        raise ArgumentTypeError(
            f"{what}: {name} is the Python int {leaf!r}; differentiation needs "
            "floating-point inputs (pass a float, as JAX requires)"
        )
    else:
        raise ArgumentTypeError(
            f"{what}: {name} is a {type(leaf).__name__}, which cannot be "
            "differentiated; pass a float, a numpy array, a Tensor owner or an EagerTensor "
            "(or leave it out of argnums)"
        )


def _argument_name(argnum: int, items: str) -> str:
    return f"argument {items!r}[{argnum}]" if items else f"argument {argnum}"


def _refuse_dtype(dt: np.dtype[Any], what: str, name: str) -> NoReturn:
    raise ArgumentTypeError(
        f"{what}: {name} has dtype {dt.name}; differentiation needs "
        "floating-point or complex inputs (as in JAX). Convert it with astype, or leave "
        "it out of argnums"
    )


def _fresh_handle(h: EagerTensor, given: set[int]) -> EagerTensor:
    """A nested result is a new handle object, never a caller's seed handle itself."""
    return h.clone() if id(h) in given else h


def _zeros_handle(h: EagerTensor) -> EagerTensor:
    a = h._r("grad").a
    t = ts.kernel.adopt_output(np.zeros(a.shape, a.dtype), STATE.reason, "grad")

    return make_handle(record_owner(t, ts.kernel.read_array(t), "zeros"), None, -1)


def constant(value: Any) -> EagerTensor:
    """An untracked handle to ``value``, reusable by any number of ops.

    An owner or a view is **borrowed**, not moved and not copied: the handle holds a
    shared borrow until it (and every value aliasing it) is gone, so mutating the owner
    meanwhile raises ``BorrowError`` naming ``ad.constant``.  A numpy array or scalar is
    imported with one recorded ``TRANSFER`` copy; a handle gives an untracked handle to
    the same value (``stop_gradient`` without an op).

    Cost: no allocation for an owner, view or handle (a numpy array or scalar allocates
    its import: one ``TRANSFER_DESTINATION``); no copy of tenferro values (the import is
    one recorded ``TRANSFER``); no sync; no dispatch; O(1) (O(n) to import n numpy
    elements).
    Raises: ArgumentTypeError, DTypeError, BorrowError, UseAfterMoveError."""
    if isinstance(value, EagerTensor):
        return make_handle(value._r("constant"), None, -1)
    if isinstance(value, ts.Tensor | ts.TensorView | ts.TensorViewMut):
        try:
            rec = record_borrow(value, "constant", "an ad.constant handle")
        except TenferroError as e:  # a consumed or exclusively borrowed owner
            e.args = (f"constant: argument 'value': {e}", *e.args[1:])
            raise
        return make_handle(rec, None, -1)
    if isinstance(value, np.ndarray | np.generic | list | tuple | float | int | complex):
        try:
            return make_handle(constant_record(value, "constant"), None, -1)
        except Exception as e:
            raise _argument_error("constant", 0, e) from None
    raise ArgumentTypeError(
        f"constant: argument 'value' is a {type(value).__name__}; pass an owner, a view, a numpy "
        "array, a scalar or an EagerTensor"
    )


def _single(argnums: object) -> bool:
    """Whether ``argnums`` names one argument (an int or a numpy integer, as JAX takes it):
    its gradient is returned alone, not in a tuple. O(1)."""
    return isinstance(argnums, int | np.integer) and not isinstance(argnums, bool)


def _argnums(argnums: int | tuple[int, ...], nargs: int, what: str) -> tuple[int, ...]:
    """Normalize and check ``argnums`` against the number of positional arguments."""
    raw = (argnums,) if isinstance(argnums, int | np.integer) else argnums
    try:
        if not isinstance(raw, tuple | list):
            raise TypeError
        nums = tuple(int(operator.index(k)) for k in raw)
    except TypeError:
        raise ArgumentTypeError(
            f"{what}: argument 'argnums' must be an int or a tuple of ints, got {shown(argnums)}"
        ) from None
    if not nums:
        raise ArgumentError(f"{what}: argument 'argnums' is empty; name at least one argument")
    out = []
    for k in nums:
        if not -nargs <= k < nargs:
            raise ArgumentError(
                f"{what}: argnums={argnums!r} names argument {k}, but the function was "
                f"called with {nargs} positional argument(s)"
            )
        out.append(k % nargs)
    if len(set(out)) != len(out):
        raise ArgumentError(f"{what}: argnums={argnums!r} names an argument twice")
    return tuple(out)


def _flag(value: Any, name: str, what: str) -> None:
    """Refuse a flag argument that is not a bool (numpy's bool included). O(1)."""
    if not isinstance(value, bool | np.bool_):
        raise ArgumentTypeError(
            f"{what}: argument {name!r} must be a bool, got {type(value).__name__}"
        )


def _owner_of(out: EagerTensor) -> Any:
    try:
        return out.into_value()
    except IntoValueError as e:  # an alias of an argument: an explicit, recorded duplicate
        return e.value.duplicate_value()


def _in_tree(h: EagerTensor, tree: Any) -> bool:
    """Whether a leaf of ``tree`` is ``h`` or another handle of its value. O(leaves)."""
    rec = h._rec
    return any(
        leaf is h or (isinstance(leaf, EagerTensor) and leaf._rec is rec)
        for leaf in tree_leaves(tree)
    )


def owners_of(leaves: list[Any]) -> list[Any]:
    """Each output leaf as an owner: a handle's value is moved out (no copy) where it first
    appears; the same value appearing again (``lambda x: (y, y)``) is an explicit, recorded
    duplicate of that owner -- JAX hands out one immutable array twice, an owner has one
    holder.  Arrays and scalars are imported (one ``TRANSFER`` each). O(leaves)."""
    seen: dict[int, Any] = {}
    out: list[Any] = []
    for leaf in leaves:
        if not isinstance(leaf, EagerTensor):
            out.append(ts.from_numpy(np.asarray(leaf)))
            continue
        owner = seen.get(id(leaf))  # the same handle again (it was consumed)
        if owner is None:
            key = id(leaf._r("output"))  # or another handle of the same value
            owner = seen.get(key)
            if owner is None:
                owner = seen[key] = seen[id(leaf)] = _owner_of(leaf)
                out.append(owner)
                continue
        out.append(owner.duplicate())
    return out


def value_and_grad(
    f: Callable[..., Any],
    argnums: int | tuple[int, ...] = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
) -> Callable[..., Any]:
    """``f``'s value and its gradient with respect to ``argnums`` (see the module docstring).

    ``f`` must return a real one-element value (or ``(value, aux)`` with ``has_aux``); with
    ``holomorphic=True`` a complex one (the derivative of a holomorphic function, as in
    JAX).  Keyword arguments are passed to ``f`` unchanged and never differentiated.
    Returns ``(value, grads)`` — owners, or handles when nested.

    Cost: allocates what ``f``'s ops allocate (the tape's residuals, fresh result owners); no copy;
    no sync; no dispatch; O(the cost of ``f``) per evaluation.
    Raises: ArgumentError, ArgumentTypeError, BackwardError."""
    if not callable(f):
        raise ArgumentTypeError(
            f"value_and_grad: argument 'f' must be callable, got {type(f).__name__}"
        )
    _flag(has_aux, "has_aux", "value_and_grad")
    _flag(holomorphic, "holomorphic", "value_and_grad")
    fname = getattr(f, "__name__", "f")
    checked: dict[int, tuple[int, ...]] = {}  # argnums normalized per number of arguments

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nums = checked.get(len(args))
        if nums is None:
            nums = checked[len(args)] = _argnums(argnums, len(args), "grad")
        if _has_tracer(args):  # inside a trace (e.g. jit of grad): transform the graph
            # the normalized argnums (a negative or numpy integer is a plain index there)
            return _traced_value_and_grad(
                f, args, kwargs, nums[0] if _single(argnums) else nums, has_aux, holomorphic
            )
        n0 = _tape_length()
        call = _Call(args, nums, "grad", fname)
        try:
            if call.nested:
                res = f(*call.args, **kwargs)
            else:
                with call.tape:
                    res = f(*call.args, **kwargs)
            if has_aux:
                if not isinstance(res, tuple | list) or len(res) != 2:
                    raise ArgumentTypeError(
                        "grad: arguments 'f' and 'has_aux': with has_aux=True the function "
                        f"must return a pair (value, aux), got {type(res).__name__}"
                    )
                out, aux = res
            else:
                out, aux = res, None
            out = _scalar_output(out, call, holomorphic)
            seed: Any
            if call.handles:
                seed = _ones_handle(out)
            else:
                a = out._r("grad").a
                seed = np.ones(a.shape, a.dtype)
            tracked = out._tape is call.tape.key and out._id >= 0
            flat = call.results({out._id: seed} if tracked else {}, given=False, last=True)
            value: Any = out
            call.escape(out, aux)
            call.release()
            if not call.handles:
                # the value is moved out, unless aux hands out the same value (then the
                # value is an explicit, recorded duplicate and aux keeps its handle)
                value = (
                    out.duplicate_value() if _in_tree(out, aux) else _owner_of(out)
                )
            grads = call.pack(flat, argnums)
            return ((value, aux), grads) if has_aux else (value, grads)
        except BaseException:
            call.discard(n0)
            raise
        finally:
            call.release()

    return wrapped


def _scalar_output(out: Any, call: _Call, holomorphic: bool) -> EagerTensor:
    """Check the differentiated output: a real, one-element value (a constant is fine)."""
    if isinstance(out, ts.Tensor | ts.TensorView | np.ndarray | float | np.generic):
        out = make_handle(
            constant_record(np.asarray(out), "grad")
            if not isinstance(out, ts.Tensor | ts.TensorView)
            else record_borrow(out, "output", f"{call.tape.name}: output"),
            None,
            -1,
        )
    if not isinstance(out, EagerTensor):
        raise ArgumentTypeError(
            "grad: argument 'f' must return a one-element EagerTensor (use vjp for other "
            f"outputs); got {type(out).__name__}"
        )
    a = out._r("grad").a
    if a.size != 1:
        raise ArgumentTypeError(  # a TypeError, as in JAX
            f"grad: argument 'f' must return a one-element value, got shape {a.shape}; use "
            "vjp (or jacrev) for non-scalar outputs"
        )
    if a.dtype.kind == "c" and not holomorphic:
        raise ArgumentTypeError(
            f"grad: argument 'f': the function returned a complex value ({a.dtype.name}); grad "
            "requires real-valued outputs (as JAX). Use vjp with an explicit cotangent, or take "
            "the real part / abs first"
        )
    if a.dtype.kind not in "fc":
        raise ArgumentTypeError(
            f"grad: argument 'f': the function returned a {a.dtype.name} value; grad requires "
            "a floating-point output"
        )
    return out


def grad(
    f: Callable[..., Any],
    argnums: int | tuple[int, ...] = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
) -> Callable[..., Any]:
    """The gradient of scalar-valued ``f`` with respect to ``argnums`` (int or tuple).

    Borrows owner arguments for the call; returns fresh owners in the arguments'
    structure (handles recorded on the enclosing tape when nested, so it composes).

    Cost: allocates what ``f``'s ops allocate (the tape's residuals, fresh result owners); no copy;
    no sync; no dispatch; O(the cost of ``f``) per evaluation.
    Raises: ArgumentError, ArgumentTypeError, BackwardError."""
    vg = value_and_grad(f, argnums, has_aux, holomorphic)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        (value_aux, grads) = vg(*args, **kwargs)
        if has_aux:
            return grads, value_aux[1]
        return grads

    return wrapped


def _ones_handle(out: EagerTensor) -> EagerTensor:
    a = out._r("grad").a
    t = ts.kernel.adopt_output(np.ones(a.shape, a.dtype), STATE.reason, "seed")

    return make_handle(record_owner(t, ts.kernel.read_array(t), "seed"), None, -1)


def _output_leaves(out: Any, what: str) -> tuple[list[Any], PyTreeDef]:
    """The leaves and structure of ``f``'s output (any pytree: ``None`` holds no leaf);
    refuses a leaf that is not a value. O(nodes)."""
    leaves, rb = tree_flatten(out)
    for leaf in leaves:
        if not isinstance(leaf, EagerTensor | np.ndarray | float | int | complex | np.generic):
            raise ArgumentTypeError(
                f"{what}: argument 'f': the function returned a {type(leaf).__name__} leaf; "
                "outputs must be EagerTensors (or arrays/scalars, which do not depend on the "
                "inputs), in a pytree (tuples, lists, dicts, namedtuples, None, registered "
                "nodes)"
            )
    return leaves, rb


class VjpFunction(NoCopy):
    """The pullback returned by :func:`vjp`.  Holds the tape (and so its residuals and the
    borrows of the primal owners) until it is released or garbage collected.

    Cost: constructing: O(1); calling it runs the backward sweep: allocates the cotangents; no copy;
    no sync; no dispatch; O(the forward's cost).
    Raises: ArgumentError, ArgumentTypeError."""

    def __init__(
        self,
        call: _Call,
        outs: list[Any],
        argnums: tuple[int, ...],
        what: str = "vjp_fn",
        out_tree: PyTreeDef | None = None,
    ) -> None:
        self._call: _Call | None = None
        if type(call) is not _Call:
            raise ArgumentTypeError("VjpFunction: returned by vjp(), not constructed directly")
        self._call = call
        self._outs = outs
        self._out_tree = out_tree
        self._argnums = argnums
        self._what = what

    def __call__(self, cotangent: Any) -> tuple[Any, ...]:
        """Cotangents for each primal (owners; handles when nested).

        ``cotangent`` has the output's structure; each leaf must have its output's shape
        and dtype (checked first; nothing changes on error).  Borrows ``cotangent``."""
        call = self._call
        what = self._what
        if call is None:
            raise ts.errors.ExpiredBorrowError(f"{what}: released; call vjp again")
        outs = self._outs
        if cotangent is None and outs:  # (an empty subtree: a missing cotangent, not a shape)
            raise ArgumentTypeError(
                f"{what}: the cotangent is None; pass one array per output value, in the "
                "output's structure"
            )
        cts, ct_tree = tree_flatten(cotangent)
        if len(cts) != len(outs):
            raise ArgumentError(
                f"{what}: the cotangent has {len(cts)} leaves but the output has {len(outs)}; "
                "pass one cotangent per output value, in the output's structure"
            )
        if self._out_tree is not None and ct_tree != self._out_tree:
            raise ArgumentError(  # as in JAX: the cotangent has the output's structure
                f"{what}: the cotangent's structure {ct_tree} differs from the output's "
                f"{self._out_tree}; pass one cotangent per output value, in the output's "
                "structure"
            )
        seeds: dict[int, Any] = {}
        tape = call.tape
        checked = [
            check_cotangent(ct, _leaf_array(o, what), what, k, call.handles)
            for k, (ct, o) in enumerate(zip(cts, outs, strict=True))
        ]
        for ct, o in zip(checked, outs, strict=True):
            if isinstance(o, EagerTensor) and o._tape is tape.key and o._id >= 0:
                prev = seeds.get(o._id)
                seeds[o._id] = ct if prev is None else prev + ct
        flat = call.results(seeds)
        return tuple(call.pack(flat, self._argnums))

    def release(self) -> None:
        """End the borrows and release the residuals now (idempotent); calling the
        function afterwards raises ``ExpiredBorrowError``.  Also runs when it dies.

        Cost: no allocation; no copy; no sync; no dispatch; O(recorded nodes) the first
        time (a nested call's tape is the enclosing one's: only the borrows end), O(1)
        after.
        Raises: nothing."""
        call = self._call
        if call is not None:
            self._call = None
            self._outs = []  # (an output that is a primal's value keeps its borrow alone)
            call.release()

    def __del__(self) -> None:
        self.release()


def _traced_vjp(f: Callable[..., Any], primals: tuple[Any, ...]) -> tuple[Any, Any]:
    """``vjp`` on tracers: the pullback evaluates the traced VJP graph (inlined)."""
    graph, consts = _trace_closed(f, primals)
    args = primals if consts is None else (*primals, consts)
    vgraph = _graph_vjp(graph)
    out = _eval_graph(graph, *args)

    def pullback(ct: Any) -> Any:
        cts = _eval_graph(vgraph, *args, ct)[1]
        return cts if consts is None else tuple(cts)[:-1]  # not the captured values'

    return out, pullback


def _leaf_array(o: Any, what: str) -> np.ndarray[Any, Any]:
    return o._r(what).a if isinstance(o, EagerTensor) else np.asarray(o)


def vjp(f: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``(out, vjp_fn)`` (``(out, vjp_fn, aux)`` with ``has_aux``).

    ``out`` is ``f(*primals)`` — any tuple/list/dict structure of read-only handles (a
    handle's value may be a residual of ``vjp_fn``: ``into_value()`` succeeds once
    ``vjp_fn`` is released; ``duplicate_value()`` always works).  ``vjp_fn(cotangent)``
    returns one cotangent per primal (zeros for primals the output does not depend on).
    The primal owners stay borrowed until ``vjp_fn`` is released; an ``out`` (or aux)
    leaf that *is* a primal owner's value (``lambda a: a``) reads through its own borrow of
    that owner, which ends when the leaf's last handle dies (no copy).

    Cost: allocates what ``f``'s ops allocate (the tape's residuals, fresh result owners); no copy;
    no sync; no dispatch; O(the cost of ``f``) per evaluation.
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    if not callable(f):
        raise ArgumentTypeError(f"vjp: argument 'f' must be callable, got {type(f).__name__}")
    _flag(has_aux, "has_aux", "vjp")
    argnums = tuple(range(len(primals)))
    if _has_tracer(primals):
        if has_aux:
            raise NotImplementedError("vjp(has_aux=True) inside a traced function")
        return _traced_vjp(f, primals)
    n0 = _tape_length()
    call = _Call(primals, argnums, "vjp", getattr(f, "__name__", "f"), "primals")
    try:
        if call.nested:
            res = f(*call.args)
        else:
            with call.tape:
                res = f(*call.args)
        if has_aux:
            if not isinstance(res, tuple | list) or len(res) != 2:
                raise ArgumentTypeError(
                    "vjp: arguments 'f' and 'has_aux': with has_aux=True the function must "
                    f"return a pair (out, aux), got {type(res).__name__}"
                )
            out, aux = res
        else:
            out, aux = res, None
        outs, out_tree = _output_leaves(out, "vjp")
        call.escape(outs, aux)
    except BaseException:
        call.discard(n0)
        call.release()
        raise
    fn = VjpFunction(call, outs, argnums, out_tree=out_tree)
    return (out, fn, aux) if has_aux else (out, fn)
