"""The eager binder: run one primitive on handles, scalars, owners or numpy arrays.

``bind(prim, *args, **params)`` is the whole per-op path of eager mode:

1. resolve each argument to what the kernel reads: a handle's record array; a Python or
   numpy scalar as-is (a *parameter*: no allocation, no copy); a ``Tensor`` owner is
   *moved in* as a constant (the caller's owner is consumed into a retention container;
   pass ``t.duplicate()`` to keep one); a numpy array is imported as a constant with one
   recorded ``TRANSFER`` copy (``TRANSFER_DESTINATION`` allocation), never silently;
2. run ``prim.impl`` (numpy) and adopt its fresh result as an owner with the current
   allocation reason (``STATE.reason``; one allocation event, no copy) in a fused
   retention container — or, for ``alias`` primitives, record a descriptor alias over
   argument 0's container (no allocation, no copy).  The one exception: an alias of a
   value the functional API *borrows* from the caller cannot join the caller's
   allocation, so it is laid out afresh (one ``OPERATION_OUTPUT`` allocation, a kernel
   write, no copy event);
3. if a tape records and some argument is tracked on it, append a :class:`TapeNode` whose
   residuals are exactly the records ``prim.save_in``/``save_out`` declare (their counts go
   up by one: retention is a reference, never a copy);
4. if a forward-mode context is active, push tangents through the JVP rules.

It knows nothing about particular ops.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np

import tenferro_storage as ts
from tenferro_storage.errors import LayoutError, UseAfterMoveError

from ._handle import EagerTensor
from ._primitive import Primitive, RealTarget
from ._retention import AdValueRecord, RetentionContainer, move_owner, record_alias
from ._state import STATE
from ._tape import TapeNode

_adopt: Final = ts.kernel.adopt_output
_SCALARS: Final = frozenset(
    {float, int, bool, complex, np.float64, np.float32, np.int64, np.int32, np.bool_}
)
_ET: Final = EagerTensor
_REC: Final = AdValueRecord
_RC: Final = RetentionContainer


def constant_record(value: Any, operation: str) -> AdValueRecord:
    """Turn a non-handle array argument into a constant record.

    ``Tensor``: consumed (moved in; no copy, no allocation).  numpy array or other
    array-like: one ``TRANSFER`` copy into a new owner.  Anything else: ``TypeError``.
    """
    if isinstance(value, ts.Tensor):
        t = move_owner(value, f"{operation} (moved in as a constant)")  # consumed
    elif isinstance(value, np.ndarray | list | tuple) or np.isscalar(value):
        t = ts.from_numpy(value)
    elif isinstance(value, ts.TensorView | ts.TensorViewMut):
        raise TypeError(
            f"{operation}: got a {type(value).__name__}; a view cannot be moved into an op. "
            "Pass the owner (it is consumed), owner.duplicate(), or watch it on a tape"
        )
    else:
        raise TypeError(
            f"{operation}: unsupported argument type {type(value).__name__}; expected an "
            "EagerTensor, a Tensor owner (consumed), a numpy array (imported with a recorded "
            "TRANSFER copy) or a Python scalar"
        )
    arr = ts.kernel.read_array(t)
    c = _RC.__new__(_RC)
    c.owner = t
    c.group = None
    c.base_slot = None
    c.borrow = None
    c.count = 0
    c.addr = 0
    # the kernel reads the owner's own (read-only) array
    return AdValueRecord(arr, c, None, "constant")


def _target(v: Any, odt: np.dtype[Any]) -> tuple[int, ...]:
    """The cotangent target of one argument: its shape, marked real where it must be."""
    if type(v) is not np.ndarray:
        return ()
    if odt.kind == "c" and v.dtype.kind != "c":
        return RealTarget(v.shape)
    return v.shape  # type: ignore[no-any-return]


def _fresh(out: Any, vals: list[Any], name: str) -> tuple[Any, Any]:
    """Adopt a kernel result (the slow path: non-ndarray, non-contiguous, or a base)."""
    if type(out) is not np.ndarray:
        out = np.asarray(out)
    for v in vals:
        if out is v or (type(v) is np.ndarray and np.shares_memory(out, v)):
            out = np.array(out, order="C")  # the kernel handed back an input: materialize
            break
    if out.base is not None or not out.flags.c_contiguous:
        out = np.ascontiguousarray(out) if out.base is None else np.array(out, order="C")
    return _adopt(out, STATE.reason, name), out


def _resolve(prim: Primitive, a: Any, key: object | None) -> tuple[Any, Any, int]:
    """(kernel input, record-or-scalar, value id) for one argument (the general path)."""
    t = type(a)
    if t is _ET:
        rec = a._rec
        if rec is None:
            raise UseAfterMoveError(
                f"{prim.name}: an argument EagerTensor was consumed by into_value()"
            )
        return rec.a, rec, (a._id if key is not None and a._tape is key else -1)
    if t in _SCALARS or isinstance(a, np.generic):
        return a, a, -1
    rec = constant_record(a, prim.name)
    return rec.a, rec, -1


def bind(prim: Primitive, *args: Any, **params: Any) -> EagerTensor:
    """Apply ``prim`` eagerly (see the module docstring). Returns a new handle."""
    key = STATE.key
    a0 = args[0] if len(args) == 1 else None
    if type(a0) is _ET and a0._rec is not None:  # the commonest case: one live handle
        rec = a0._rec
        vals: list[Any] = [rec.a]
        recs: list[Any] = [rec]
        tracked = key is not None and a0._tape is key
        ids: list[int] = [a0._id if tracked else -1]
    else:
        vals = []
        recs = []
        ids = []
        tracked = False
        for a in args:
            if type(a) is _ET and a._rec is not None:  # the common case, inlined
                rec = a._rec
                vals.append(rec.a)
                recs.append(rec)
                if a._tape is key and key is not None:
                    ids.append(a._id)
                    tracked = True
                else:
                    ids.append(-1)
            else:
                v, r, i = _resolve(prim, a, key)
                vals.append(v)
                recs.append(r)
                ids.append(i)
                if i >= 0:
                    tracked = True
    name = prim.name
    out = prim.impl(*vals, **params)
    if prim.alias and type(recs[0]) is _REC and recs[0].container.borrow is None:
        rec = record_alias(recs[0], out, name)
        rec.count = 1
    else:
        if prim.alias:  # a view of a borrowed argument or a scalar: lay it out afresh
            out = np.array(out, order="C")
        try:
            tensor = _adopt(out, STATE.reason, name)
        except LayoutError:
            tensor, out = _fresh(out, vals, name)
        if type(out) is not np.ndarray:  # rank-0 numpy scalar: read the owner's array
            out = ts.kernel.read_array(tensor)
        c = _RC.__new__(_RC)
        c.owner = tensor
        c.group = None
        c.base_slot = None
        c.borrow = None
        c.count = 1
        c.addr = 0
        rec = _REC.__new__(_REC)
        rec.a = out
        rec.container = c
        rec.slot = None
        rec.op = name
        rec.count = 1
    h = _ET.__new__(_ET)
    h._rec = rec
    if tracked and not prim.nondiff:
        tape = STATE.tape
        vid = len(tape.nodes)
        node = TapeNode.__new__(TapeNode)
        node.prim = prim
        node.ids = ids
        node.params = params
        node.shapes = None
        save_in = prim.save_in
        if save_in:
            if len(save_in) == 1:  # most rules keep one argument
                r0 = recs[save_in[0]]
                res: list[Any] = [r0]
                if type(r0) is _REC:
                    r0.count += 1
            else:
                res = [recs[i] for i in save_in]
                for r in res:
                    if type(r) is _REC:
                        r.count += 1
        else:
            res = []
        if prim.save_out:
            rec.count += 1
            res.append(rec)
        node.res = res
        # Keep argument shapes when they broadcast, and mark real arguments of a complex
        # output: their cotangents are reduced back / keep only the real part (as JAX).
        odt = out.dtype
        bc = prim.broadcasts
        if bc or odt.kind == "c":
            osh = out.shape
            for i in range(len(ids)):
                if ids[i] >= 0:
                    v = vals[i]
                    if (bc and v.shape != osh) or (
                        v.dtype is not odt and odt.kind == "c" and v.dtype.kind != "c"
                    ):
                        node.shapes = [_target(v, odt) for v in vals]
                        break
        tape.nodes.append(node)
        h._tape = key
        h._id = vid
    else:
        h._tape = None
        h._id = -1
    if STATE.jvp is not None:
        STATE.jvp.propagate(prim, recs, rec, params)
    if STATE.region is not None:  # inside a checkpoint region: store the op (_checkpoint.py)
        STATE.region.record(prim, args, recs, h, params)
    return h
