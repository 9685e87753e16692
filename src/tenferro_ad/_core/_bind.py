"""The general eager binder: run one primitive on handles, scalars, owners or numpy arrays.

``bind(prim, *args, **params)`` is the whole per-op path of eager mode, in three steps
(:func:`resolve`, :func:`run`, :func:`record`):

1. **resolve** each argument to what the kernel reads: a handle's record array; a Python or
   numpy scalar as-is (a *parameter*: no allocation, no copy); a ``Tensor`` owner or a
   view is *borrowed* (shared) — the kernel reads its read-only array and the caller keeps
   it; a numpy array is imported as a constant with one recorded ``TRANSFER`` copy
   (``TRANSFER_DESTINATION`` allocation), never silently.  An argument of a registered
   tracer type hands the whole call to traced mode before anything is touched;
2. **run** ``prim.impl`` (numpy), push the tangents through the JVP rules if a forward-mode
   context is active (before the result is owned: a missing JVP rule raises with nothing
   allocated), and adopt the kernel's fresh result as an owner with the current
   allocation reason (``STATE.reason``; one allocation event, no copy) in a fused
   record — or, for ``alias`` primitives, record a descriptor alias over
   argument 0 (no allocation, no copy; over a borrowed owner the alias holds its own
   shared borrow of it).  A kernel that hands back memory of an existing value is
   materialized with a recorded ``MATERIALIZE`` copy, never adopted twice;
3. **record**: the tangent is kept for the new record, and if a tape records and some
   argument is tracked on it, a :class:`TapeNode` is appended whose
   residuals are exactly the records ``prim.save_in``/``save_out`` declare (their counts go
   up by one: retention is a reference, never a copy).  A borrowed owner that a residual
   needs becomes a record holding a shared borrow named after the tape and the op, so
   mutating the owner meanwhile raises ``BorrowError`` naming them.  Inside a checkpoint
   region the op is also stored for replay.

Every step that can fail runs before anything observable changes: a call that raises
leaves its arguments, the tape and the ledger's live bytes as they were.
It knows nothing about particular ops.  The straight paths of the common calls,
``bind1``/``bind2``, are in :mod:`._dispatch` (which re-exports this module's names).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np

import tenferro_storage as ts
from tenferro_storage.errors import (
    AliasedOutputError,
    ExpiredBorrowError,
    LayoutError,
    TenferroError,
    UseAfterMoveError,
)

from ..errors import (
    ArgumentError,
    ArgumentTypeError,
    IndexOutOfBoundsError,
    LinAlgError,
    UnsupportedDTypeError,
    _reason,
)
from ._handle import EagerTensor
from ._primitive import CastTarget, Primitive
from ._retention import AdValueRecord, constant_record, record_alias, record_borrow
from ._state import LOCAL, STATE
from ._tape import TapeNode

_adopt: Final = ts.kernel.adopt_output
_adopt_root: Final = ts.kernel.adopt_fresh_root
_SCALARS: Final = frozenset(
    {float, int, bool, complex, np.float64, np.float32, np.int64, np.int32, np.bool_}
)
_OWNERS: Final = frozenset({ts.Tensor, ts.TensorView, ts.TensorViewMut})
_ALIASABLE: Final = frozenset({AdValueRecord}) | _OWNERS
# numpy's dtype classes of the floating and complex dtypes (a class test is cheaper than
# reading ``dtype.kind``)
_INEXACT: Final = frozenset(type(np.dtype(c)) for c in "efdgFDG")
_read: Final = ts.kernel.read_array
_ET: Final = EagerTensor
_REC: Final = AdValueRecord
_LOCAL: Final = LOCAL
# Tracer types and their binders (traced mode registers itself; the core knows no tracer).
_TRACERS: dict[type, Callable[[Primitive, tuple[Any, ...], dict[str, Any]], Any]] = {}


def register_tracer(
    cls: type, bind_fn: Callable[[Primitive, tuple[Any, ...], dict[str, Any]], Any]
) -> None:
    """Route every ``bind`` that has an argument of exactly type ``cls`` to ``bind_fn``.

    ``bind_fn(prim, args, params)`` is called before ``bind`` does anything else (no
    borrow, no allocation, no tape node). O(1).
    """
    _TRACERS[cls] = bind_fn


def borrowed_record(a: Any, holder: str) -> Any:
    """The record a retained argument needs: ``a`` itself unless it is a borrowed owner or
    view, which becomes a record holding a shared borrow named ``holder``. O(1)."""
    if type(a) in _OWNERS:
        return record_borrow(a, "borrowed argument", holder)
    return a


def _target(v: Any, odt: np.dtype[Any]) -> tuple[int, ...]:
    """The cotangent target of one argument: its shape, with its dtype where the output's
    differs (the cotangent is cast back: real part, precision, as in JAX)."""
    if type(v) is not np.ndarray:
        return ()
    if v.dtype != odt and v.dtype.kind in "fc":
        return CastTarget(v.shape, v.dtype)
    return v.shape  # type: ignore[no-any-return]


def _arg_shapes(
    ids: Sequence[int], vals: Sequence[Any], out: Any, bc: bool
) -> list[Any] | None:
    """``node.shapes``: every argument's cotangent target when a tracked argument broadcasts
    (``bc``: the primitive broadcasts) or has another floating dtype than the output, else
    ``None`` (the common case: cotangents come back as they are)."""
    odt = out.dtype
    osh = out.shape
    for i, v in zip(ids, vals):  # noqa: B905 - ``ids`` may omit untracked trailing arguments
        if i >= 0 and (v.dtype is not odt or (bc and v.shape != osh)):
            if (bc and v.shape != osh) or (v.dtype != odt and v.dtype.kind in "fc"):
                return [_target(v, odt) for v in vals]
    return None


def arg_targets(
    prim: Primitive, ids: list[int], vals: list[Any], out_shape: Any, odt: np.dtype[Any]
) -> list[Any] | None:
    """``node.shapes`` for a node built outside ``bind`` (checkpoint replay): argument
    targets when a tracked argument broadcasts or has another dtype than the output."""
    for i, v in zip(ids, vals, strict=True):
        if i >= 0 and (
            (prim.broadcasts and np.shape(v) != tuple(out_shape))
            or (type(v) is np.ndarray and v.dtype != odt and v.dtype.kind in "fc")
        ):
            return [_target(v, odt) for v in vals]
    return None


def _fresh(out: Any, name: str) -> tuple[Any, Any]:
    """Own a kernel result that ``kernel.adopt_fresh_root`` declined (the slow path).

    Memory an existing value holds (the kernel returned an input, or a view of one) is
    copied into a fresh owner with a recorded ``MATERIALIZE`` copy; a view of kernel
    scratch or a non-contiguous result is laid out afresh (a kernel write)."""
    if type(out) is not np.ndarray:
        out = np.asarray(out)
    try:
        return _adopt(out, STATE.reason, name), out
    except AliasedOutputError:
        t = ts.kernel.materialize_output(out, STATE.reason, name)
        return t, ts.kernel.read_array(t)
    except LayoutError:
        out = np.array(out, order="C")
        return _adopt(out, STATE.reason, name), out


_DTYPE_REFUSALS: Final = ("not supported for the input types", "did not contain a loop",
                          "numpy boolean")


def _operands(vals: Sequence[Any]) -> str:
    """``argument 0 (dtype bool)`` / ``arguments 0 and 1 (dtypes complex64, float64)``."""
    dts = ", ".join(str(getattr(v, "dtype", type(v).__name__)) for v in vals)
    if len(vals) == 1:
        return f"argument 0 (dtype {dts})"
    idx = ", ".join(str(i) for i in range(len(vals) - 1))
    return f"arguments {idx} and {len(vals) - 1} (dtypes {dts})"


def kernel_error(name: str, e: Exception, vals: Sequence[Any] | None = None) -> Exception:
    """The project error for an exception a numpy kernel raised inside op ``name``.

    Project errors are returned unchanged; numpy's ``LinAlgError``/``ValueError``/
    ``TypeError``/``IndexError`` become ``LinAlgError``/``ArgumentError``/
    ``ArgumentTypeError``/``IndexOutOfBoundsError`` naming the op (each still an instance
    of the builtin a caller catches).  A kernel that has no loop for its operands' dtypes
    is reported against those operands (``vals``: what the kernel was given)."""
    if isinstance(e, TenferroError):
        return e
    msg = f"{name}: {e}"
    if vals and isinstance(e, TypeError) and any(s in str(e) for s in _DTYPE_REFUSALS):
        msg = f"{name}: {_operands(vals)}: {e}"
    if isinstance(e, np.linalg.LinAlgError):
        return LinAlgError(msg)
    if isinstance(e, IndexError):
        return IndexOutOfBoundsError(msg)
    if isinstance(e, TypeError):
        return ArgumentTypeError(msg)
    if isinstance(e, ValueError):
        return ArgumentError(msg)
    return e


def _argument_error(name: str, i: int, e: Exception) -> Exception:
    """A refused argument (consumed owner, unsupported dtype...): the same project error,
    its message naming the op and the argument; other exceptions as ``kernel_error``."""
    if isinstance(e, UnsupportedDTypeError):  # by position: the op's function names it
        if e.operation == name and not e.argument.startswith(("argument ", "an ")):
            return e
        if e.operation == name and e.argument.startswith("argument ") and e.argument[9:].isdigit():
            i = int(e.argument[9:])
        return UnsupportedDTypeError(name, f"argument {i}", e.dtype)
    if isinstance(e, TenferroError):
        dead = isinstance(e, UseAfterMoveError | ExpiredBorrowError)  # named by a read
        msg = f"{name}: argument {i}: {_reason(e) if dead else e}"
        try:
            e.args = (msg, *e.args[1:])
        except (AttributeError, TypeError):  # pragma: no cover - every class allows it
            return e
        return e if str(e) == msg else ArgumentTypeError(msg)
    return kernel_error(f"{name}: argument {i}", e)


class _Traced(Exception):
    """A later argument is a tracer: traced mode took the call (``result``)."""

    def __init__(self, result: Any) -> None:
        self.result = result


def _resolve_other(
    prim: Primitive, a: Any, key: object | None, args: tuple[Any, ...], params: dict[str, Any]
) -> tuple[Any, Any, int]:
    """(kernel input, record-or-scalar, value id) for an argument the loop in
    :func:`resolve` does not inline (a consumed handle, a numpy scalar type, an array to
    import)."""
    t = type(a)
    if t is _ET:
        rec = a._rec
        if rec is None:
            raise UseAfterMoveError(  # (its position is named by the caller)
                f"{prim.name}: this EagerTensor was consumed by into_value(); use the owner "
                "it returned"
            )
        return rec.a, rec, (a._id if key is not None and a._tape is key else -1)
    if t in _SCALARS or isinstance(a, np.generic):
        return a, a, -1
    for b in args:  # an import is a side effect: traced mode first, if a tracer is coming
        tb = _TRACERS.get(type(b))
        if tb is not None:
            raise _Traced(tb(prim, args, params))
    rec = constant_record(a, prim.name)
    return rec.a, rec, -1


def _retain_owner(owner: Any, tape: Any, name: str) -> AdValueRecord:
    """A tape residual that is a borrowed owner: the record holding the tape's named shared
    borrow of it (made on first use, shared by every later node of the tape). O(1)."""
    hit: tuple[Any, AdValueRecord] | None = tape._borrowed.get(id(owner))
    if hit is not None and hit[0] is owner:
        r = hit[1]
    else:
        r = record_borrow(owner, "borrowed argument", f"{tape.name}: residual of {name}")
        tape._borrowed[id(owner)] = (owner, r)
    r.count += 1
    return r


# (kernel inputs, records-or-scalars, value ids, some argument tracked, kernel)
_Resolved = tuple[Sequence[Any], Sequence[Any], Sequence[int], bool, Callable[..., Any]]


def resolve(
    prim: Primitive, args: tuple[Any, ...], params: dict[str, Any], key: object | None
) -> _Resolved:
    """Step 1 of :func:`bind`: what the kernel reads for each argument, what a residual
    keeps (a record, a scalar or a borrowed owner), each argument's value id on the
    recording tape (``-1``: untracked) and the kernel to call.  Raises :class:`_Traced`
    when traced mode takes the call; a refused argument raises the project error naming
    it.  Nothing observable changes before an argument is refused. O(arguments)."""
    a0 = args[0] if len(args) == 1 else None
    if type(a0) is _ET and a0._rec is not None:  # the commonest case: one live handle
        rec = a0._rec
        impl = prim.fast  # the bare kernel of a float-only op, for floating input
        if impl is None or type(rec.a.dtype) not in _INEXACT:
            impl = prim.impl
        # tuples (cheaper to build than lists; nothing appends to them); the general path
        # below builds lists
        tracked = key is not None and a0._tape is key
        return (rec.a,), (rec,), (a0._id if tracked else -1,), tracked, impl
    if (
        len(args) == 2
        and type(a0 := args[0]) is _ET
        and a0._rec is not None
        and (
            type(b := args[1]) in _SCALARS
            or (type(b) is _ET and b._rec is not None)
            or type(b) in _OWNERS
        )
    ):  # a binary op on a live handle and a scalar, another live handle or an owner
        ra = a0._rec
        ta = key is not None and a0._tape is key
        if type(b) is _ET:
            rb: Any = b._rec
            tb = key is not None and b._tape is key
            pair = (a0._id if ta else -1, b._id if tb else -1)
            return (ra.a, rb.a), (ra, rb), pair, ta or tb, prim.impl
        if type(b) in _OWNERS:  # borrowed for the kernel; retained below only if needed
            try:
                vb = _read(b)
            except Exception as e:
                raise _argument_error(prim.name, 1, e) from None
            # (an untracked last argument needs no entry)
            return (ra.a, vb), (ra, b), (a0._id if ta else -1,), ta, prim.impl
        return (ra.a, b), (ra, b), (a0._id if ta else -1,), ta, prim.impl
    vals: list[Any] = []
    recs: list[Any] = []
    ids: list[int] = []
    tracked = False
    try:
        for a in args:
            t = type(a)
            if t is _ET and a._rec is not None:  # the common case, inlined
                rec = a._rec
                vals.append(rec.a)
                recs.append(rec)
                if a._tape is key and key is not None:
                    ids.append(a._id)
                    tracked = True
                else:
                    ids.append(-1)
            elif t in _SCALARS:  # a parameter: no allocation, no copy
                vals.append(a)
                recs.append(a)
                ids.append(-1)
            elif t in _OWNERS:  # borrowed for the kernel; retained below only if needed
                vals.append(_read(a))
                recs.append(a)
                ids.append(-1)
            elif t in _TRACERS:  # traced mode takes the call (nothing was touched yet)
                raise _Traced(_TRACERS[t](prim, args, params))
            else:
                v, r, i = _resolve_other(prim, a, key, args, params)
                vals.append(v)
                recs.append(r)
                ids.append(i)
                if i >= 0:
                    tracked = True
    except _Traced:
        raise
    except Exception as e:
        raise _argument_error(prim.name, len(vals), e) from None
    return vals, recs, ids, tracked, prim.impl


def run(
    prim: Primitive,
    impl: Callable[..., Any],
    vals: Sequence[Any],
    recs: Sequence[Any],
    params: dict[str, Any],
    st: Any,
) -> tuple[AdValueRecord, Any, Any]:
    """Step 2 of :func:`bind`: call the kernel, push the tangents (forward mode), and own
    the result — a fused record adopting the fresh output, or an alias of argument 0 for
    a view primitive.  Returns ``(record, output array, tangent or None)``.  A kernel or
    JVP rule that raises leaves nothing allocated. O(1) beyond the kernel."""
    name = prim.name
    try:
        out = impl(*vals, **params) if params else impl(*vals)
    except (ValueError, TypeError, IndexError) as e:
        raise kernel_error(name, e, vals) from None
    tans = st.jvp
    tan = None if tans is None else tans.push(prim, recs, vals, out, params)
    if prim.alias and type(recs[0]) in _ALIASABLE:  # a view of argument 0: zero-copy
        r0 = recs[0]
        if type(r0) is not _REC:  # over a borrowed owner: the alias holds its own borrow
            r0 = borrowed_record(r0, f"the value of {name}")
        rec = record_alias(r0, out, name)
        rec.count = 1
        return rec, out, tan
    if prim.alias:  # a view of a scalar parameter: lay it out afresh
        out = np.array(out, order="C")
    elif type(out) is not np.ndarray:  # a rank-0 kernel's numpy scalar
        out = np.asarray(out)
    tensor = _adopt_root(out, st.reason, name)  # the fresh output's root, no owner yet
    if tensor is None:  # a view, another layout, memory a value holds: the general path
        tensor, out = _fresh(out, name)
    rec = _REC.__new__(_REC)  # fused: the record alone holds the allocation
    rec.a = out
    rec.container = tensor
    rec.slot = None
    rec.op = name
    rec.count = 1
    return rec, out, tan


def record(
    prim: Primitive,
    args: tuple[Any, ...],
    params: dict[str, Any],
    resolved: _Resolved,
    rec: AdValueRecord,
    out: Any,
    tan: Any,
    st: Any,
) -> EagerTensor:
    """Step 3 of :func:`bind`: the new handle, with the tangent kept for its record
    (forward mode), a :class:`TapeNode` when a tracked argument is on the recording tape
    (residuals counted, borrowed owners retained under the tape's named borrow) and the
    op stored in the active checkpoint region. O(arguments)."""
    vals, recs, ids, tracked, _ = resolved
    name = prim.name
    h = _ET.__new__(_ET)
    h._rec = rec
    if tan is not None:
        st.jvp.tangents[rec] = tan
    if tracked and not prim.nondiff:
        tape = st.tape
        vid = len(tape.nodes)
        node = TapeNode.__new__(TapeNode)
        node.prim = prim
        node.ids = ids
        node.params = params
        node.shapes = None
        save_in = prim.save_in
        if not save_in:
            res: list[Any] = []
        elif len(save_in) == 1:  # most rules keep one argument
            r0 = recs[save_in[0]]
            if type(r0) is _REC:
                r0.count += 1
            elif type(r0) in _OWNERS:
                r0 = _retain_owner(r0, tape, name)
            res = [r0]
        else:
            res = []
            for i in save_in:
                r = recs[i]
                if type(r) is _REC:
                    r.count += 1
                elif type(r) in _OWNERS:
                    r = _retain_owner(r, tape, name)
                res.append(r)
        if prim.save_out:
            rec.count += 1
            res.append(rec)
        node.res = res
        # Keep argument shapes when they broadcast, and dtypes when they differ from the
        # output's: their cotangents are reduced and cast back (real part, precision: JAX).
        # (Any call with several arguments is checked, as ``bind2`` checks it: one tracked
        # float32 argument and an untracked float64 one promote the output.)
        bc = prim.broadcasts
        if bc or len(vals) > 1 or out.dtype.kind == "c":
            node.shapes = _arg_shapes(ids, vals, out, bc)
        if prim.checked:  # a user primitive: keep every argument's layout for the checks
            node.shapes = [
                CastTarget(v.shape, v.dtype) if type(v) is np.ndarray else () for v in vals
            ]
        tape.nodes.append(node)
        h._tape = st.key
        h._id = vid
    else:
        h._tape = None
        h._id = -1
    region = st.region
    if region is not None:  # inside a checkpoint region: store the op (_checkpoint.py)
        kept = [
            borrowed_record(r, f"checkpoint region {region.label}: {name}")
            if type(r) in _OWNERS
            else r
            for r in recs
        ]
        region.record(prim, args, kept, h, params)
    return h


def bind(prim: Primitive, *args: Any, **params: Any) -> EagerTensor:
    """Apply ``prim`` eagerly (see the module docstring): :func:`resolve`, :func:`run`,
    :func:`record`. Returns a new handle.

    Cost: allocates the primitive's results; no copy; no sync; no dispatch; O(the primitive's
    kernel).
    Raises: ArgumentError, ArgumentTypeError, MissingRuleError."""
    st = _LOCAL.fields
    try:
        resolved = resolve(prim, args, params, st.key)
    except _Traced as e:
        return e.result  # type: ignore[no-any-return]
    rec, out, tan = run(prim, resolved[4], resolved[0], resolved[1], params, st)
    return record(prim, args, params, resolved, rec, out, tan, st)
