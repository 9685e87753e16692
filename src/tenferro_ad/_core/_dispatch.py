"""The eager binder's straight paths, ``bind1``/``bind2``, and the binder's public names.

The general path, ``bind(prim, *args, **params)`` (resolve, run, record), is in
:mod:`._bind`; this module re-exports it and its helpers, so
``from ._core._dispatch import bind, bind1, bind2`` is the one import the ops use.

``bind1(prim, x)`` and ``bind2(prim, a, b)`` are ``bind`` written out straight for the
calls that dominate eager programs — the public unary ops, the binary ops and the
operators on live handles, scalars and borrowed owners, outside forward mode and
checkpoint regions — without argument tuples, loops or keyword dicts; anything else they
hand to ``bind``.  Their steps repeat ``bind``'s on purpose (one Python call per op is
~1.5% of the per-op budget).  Each copied step, and the test in
``tests/ad/test_bind_fast_paths.py`` that proves the copy agrees with ``bind``:

* **hand-over** — a forward-mode context, a checkpoint region, a view (``alias``), user
  (``checked``) or ``variadic`` primitive, a tracer or any other argument kind goes to
  ``bind`` unchanged: ``test_the_fast_paths_step_aside_for_forward_mode_and_checkpoint_regions``,
  ``test_the_fast_paths_hand_views_and_user_primitives_to_bind``;
* **resolve: live handles, scalars, borrowed owners** — the record array, the value id
  when tracked on the recording tape, a scalar as a parameter, an owner's read-only array
  (either way round for ``bind2``): ``test_bind1_records_what_bind_records``,
  ``test_bind2_records_what_bind_records`` (argument kinds tracked / untracked / scalar /
  owner);
* **resolve: refused arguments** — a consumed handle or owner is refused by ``bind``'s
  message naming the op and argument: ``test_refused_arguments_raise_what_bind_raises``;
* **the kernel** — ``prim.fast`` for floating input, else ``prim.impl``:
  ``test_bind1_records_what_bind_records`` (float32/float64/complex/int64 dtypes);
* **kernel errors** — ``kernel_error`` naming the op and the operands' dtypes:
  ``test_bind2_records_what_bind_records`` (shapes that do not broadcast, dtypes a
  kernel refuses: the same error class and message);
* **rank 0** — a numpy scalar result becomes a 0-d array before adoption:
  ``test_the_fast_paths_hand_a_rank0_kernel_scalar_over_as_an_array``;
* **adopt** — the fused record over ``adopt_fresh_root`` (one allocation event), or
  ``_fresh`` (a ``MATERIALIZE`` copy) for a result sharing a value's memory: the ledger
  events compared in ``test_bind1_records_what_bind_records``/``test_bind2_...``, and
  ``test_a_kernel_returning_its_argument_is_materialized_by_every_path``;
* **record: the node** — no node for untracked or ``nondiff`` calls; otherwise the argument
  ids (an untracked last argument has no entry), ``params``, residuals ``save_in`` /
  ``save_out`` with their counts up by one, a borrowed owner retained under the tape's
  named borrow (``_retain_owner``), and the value id: ``test_bind1_records_what_bind_records``,
  ``test_bind2_records_what_bind_records`` (node summary with residual counts);
* **record: cotangent targets** — ``node.shapes`` when a tracked argument broadcasts or has
  another dtype than the output: ``test_bind2_records_what_bind_records`` (broadcasting
  shapes) and ``test_mixed_dtypes_keep_the_cotangent_targets_bind_keeps``;
* **gradients** — the backward through either node agrees: both property tests, and
  ``test_a_value_used_twice_accumulates_both_cotangents``.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from ._bind import (
    _ET,
    _INEXACT,
    _LOCAL,
    _OWNERS,
    _REC,
    _SCALARS,
    _TRACERS,
    _adopt_root,
    _arg_shapes,
    _argument_error,
    _fresh,
    _retain_owner,
    arg_targets,
    bind,
    borrowed_record,
    kernel_error,
    record,
    register_tracer,
    resolve,
    run,
)
from ._handle import EagerTensor
from ._primitive import Primitive
from ._retention import constant_record
from ._tape import TapeNode

_NDARRAY: Final = np.ndarray
_NO_PARAMS: Final[dict[str, Any]] = {}  # the params of every node bind1/bind2 record (read only)


def bind1(prim: Primitive, x: Any) -> EagerTensor:
    """``bind(prim, x)`` for a one-argument op without parameters (the public unary ops).

    The straight path for the common case -- ``x`` a live handle, no forward-mode context,
    no checkpoint region, a built-in primitive that is not a view -- with no argument
    tuples and no loops; anything else goes to :func:`bind`.  Same value, node, ledger
    events and errors as ``bind``. O(1).
    """
    st = _LOCAL.fields
    if (
        type(x) is not _ET
        or (r := x._rec) is None
        or st.jvp is not None
        or st.region is not None
        or prim.alias
        or prim.checked
    ):
        return bind(prim, x)
    a = r.a
    impl = prim.fast  # the bare kernel of a float-only op, for floating input
    if impl is None or type(a.dtype) not in _INEXACT:
        impl = prim.impl
    name = prim.name
    try:
        out = impl(a)
    except (ValueError, TypeError, IndexError) as e:
        raise kernel_error(name, e, (a,)) from None
    if type(out) is not _NDARRAY:  # a rank-0 kernel's numpy scalar
        out = np.asarray(out)
    root = _adopt_root(out, st.reason, name)  # the fresh output's root, no owner yet
    if root is None:  # a view, another layout, memory a value holds: the general path
        root, out = _fresh(out, name)
    rec = _REC.__new__(_REC)  # fused: the record alone holds the allocation
    rec.a = out
    rec.container = root
    rec.slot = None
    rec.op = name
    rec.count = 1
    h = _ET.__new__(_ET)
    h._rec = rec
    key = st.key
    if key is None or x._tape is not key or prim.nondiff:
        h._tape = None
        h._id = -1
        return h
    nodes = st.tape.nodes
    node = TapeNode.__new__(TapeNode)
    node.prim = prim
    node.ids = ids = (x._id,)
    node.params = _NO_PARAMS
    node.shapes = None
    if prim.save_in:  # (a unary rule can only keep its one argument)
        r.count += 1
        res = [r]
    else:
        res = []
    if prim.save_out:
        rec.count += 1
        res.append(rec)
    node.res = res
    if prim.broadcasts or out.dtype.kind == "c":
        node.shapes = _arg_shapes(ids, (a,), out, prim.broadcasts)
    h._tape = key
    h._id = len(nodes)
    nodes.append(node)
    return h


def bind2(prim: Primitive, a: Any, b: Any) -> EagerTensor:
    """``bind(prim, a, b)`` for a two-argument op without parameters (the operators and
    the public binary ops).

    The straight path for a live handle with a scalar, another live handle or a borrowed
    owner (either way round), outside forward-mode contexts and checkpoint regions, for a
    built-in primitive that is not a view; anything else goes to :func:`bind`.  Same value,
    node, ledger events and errors as ``bind``. O(1).
    """
    st = _LOCAL.fields
    if (
        st.jvp is not None
        or st.region is not None
        or prim.alias
        or prim.checked
        or prim.variadic
    ):
        return bind(prim, a, b)
    key = st.key
    tb = type(b)
    if type(a) is _ET and (ra := a._rec) is not None:
        va = ra.a
        ia = a._id if key is not None and a._tape is key else -1
        if tb is _ET and (rb := b._rec) is not None:
            vb = rb.a
            ib = b._id if key is not None and b._tape is key else -1
            ids: tuple[int, ...] = (ia, ib)
        elif tb in _SCALARS:
            vb = rb = b
            ib = -1
            ids = (ia,)  # (an untracked last argument needs no entry)
        elif tb in _OWNERS:  # borrowed for the kernel; retained below only if needed
            try:
                vb = b._d("read_array").readonly()  # kernel.read_array, one frame fewer
            except Exception:  # bind raises it, naming the refused argument
                return bind(prim, a, b)
            rb = b
            ib = -1
            ids = (ia,)
        else:
            return bind(prim, a, b)
    elif tb is _ET and (rb := b._rec) is not None and (
        type(a) in _SCALARS or type(a) in _OWNERS
    ):  # ``2.0 * x``, ``data @ w``
        if type(a) in _SCALARS:
            va = a
        else:  # a borrowed owner: read for the kernel, retained below only if needed
            try:
                va = a._d("read_array").readonly()
            except Exception:  # bind raises it, naming the refused argument
                return bind(prim, a, b)
        ra = a
        ia = -1
        vb = rb.a
        ib = b._id if key is not None and b._tape is key else -1
        ids = (ia, ib)
    else:
        return bind(prim, a, b)
    name = prim.name
    try:
        out = prim.impl(va, vb)
    except (ValueError, TypeError, IndexError) as e:
        raise kernel_error(name, e, (va, vb)) from None
    if type(out) is not _NDARRAY:  # a rank-0 kernel's numpy scalar
        out = np.asarray(out)
    root = _adopt_root(out, st.reason, name)  # the fresh output's root, no owner yet
    if root is None:  # a view, another layout, memory a value holds: the general path
        root, out = _fresh(out, name)
    rec = _REC.__new__(_REC)  # fused: the record alone holds the allocation
    rec.a = out
    rec.container = root
    rec.slot = None
    rec.op = name
    rec.count = 1
    h = _ET.__new__(_ET)
    h._rec = rec
    if (ia < 0 and ib < 0) or prim.nondiff:
        h._tape = None
        h._id = -1
        return h
    tape = st.tape
    nodes = tape.nodes
    node = TapeNode.__new__(TapeNode)
    node.prim = prim
    node.ids = ids
    node.params = _NO_PARAMS
    node.shapes = None
    res: list[Any] = []
    for i in prim.save_in:
        r = rb if i else ra
        if type(r) is _REC:
            r.count += 1
        elif type(r) in _OWNERS:
            r = _retain_owner(r, tape, name)
        res.append(r)
    if prim.save_out:
        rec.count += 1
        res.append(rec)
    node.res = res
    bc = prim.broadcasts
    odt = out.dtype
    osh = out.shape
    if (ia >= 0 and (va.dtype is not odt or (bc and va.shape != osh))) or (
        ib >= 0 and (vb.dtype is not odt or (bc and vb.shape != osh))
    ):
        node.shapes = _arg_shapes(ids, (va, vb), out, bc)
    h._tape = key
    h._id = len(nodes)
    nodes.append(node)
    return h


__all__ = [
    "_TRACERS",
    "_argument_error",
    "arg_targets",
    "bind",
    "bind1",
    "bind2",
    "borrowed_record",
    "constant_record",
    "kernel_error",
    "record",
    "register_tracer",
    "resolve",
    "run",
]
