"""In-place cotangent accumulation and donation: when the sweep alone holds an array.

:func:`_accumulate` adds a value's second cotangent into its first when nothing else
refers to the first; ``DONATED_REFS`` lets a VJP rule (``elementwise.into_g``'s callers)
write its result over the incoming cotangent the sweep donated.  Both rest on reference
counts, calibrated here at import against the call shapes the sweep uses
(:meth:`._tape.Tape.sweep` and :func:`._tape._general_node`: one local per holder), and
are off (0) wherever counts do not mean that.  (Split out of :mod:`._tape`, which
re-exports ``DONATED_REFS``.)
"""

from __future__ import annotations

import sys
import sysconfig
from typing import Any

import numpy as np


def _accumulate(add: Any, prev: Any, ct: Any) -> Any:
    """``prev + ct``: a value's cotangents summed (``add``: the namespace's).

    Written into ``prev`` when the sweep alone holds it -- a rule's fresh scratch that owns
    its writable memory, has ``ct``'s shape and dtype, and that nothing else refers to (no
    other value's cotangent entry, no residual, no caller, no view of it) -- as numpy elides
    its temporaries and PyTorch's engine accumulates a buffer it alone holds.  That saves
    the allocation and, for arrays above malloc's mmap threshold, the page faults of a fresh
    result.  Anything else gets a new array."""
    if (
        _SOLE_REFS
        and type(prev) is np.ndarray
        and type(ct) is np.ndarray
        and prev.base is None
        and prev.dtype == ct.dtype
        and prev.shape == ct.shape
        and prev.flags.writeable
        and sys.getrefcount(prev) <= _SOLE_REFS
    ):
        return np.add(prev, ct, out=prev)
    return add(prev, ct)


def _calibrate_sole_refs() -> int:
    """``sys.getrefcount`` of a cotangent inside ``_accumulate`` when only the sweep's dict
    entry and local hold it (counted at import, as the sweep calls it), or 0 -- no in-place
    accumulation -- where reference counts do not mean that: not CPython, a CPython whose
    stack may hold borrowed references (3.14 on) or whose counts are split between threads
    (the free-threaded build), or a count that does not grow with an extra holder."""
    if (
        sys.implementation.name != "cpython"
        or sys.version_info >= (3, 14)
        or sysconfig.get_config_var("Py_GIL_DISABLED")
    ):
        return 0

    def probe(cts: dict[int, Any], extra: list[Any]) -> int:
        prev = cts.get(0)
        return _count(prev)

    def _count(prev: Any) -> int:
        return sys.getrefcount(prev)

    alone = probe({0: np.zeros(1)}, [])
    a = np.zeros(1)
    held = probe({0: a}, [a])
    return alone if held == alone + 2 else 0  # (``a`` and the list: two more holders)


_SOLE_REFS: int = _calibrate_sole_refs()


def _calibrate_donated_refs() -> int:
    """``sys.getrefcount`` of a donated cotangent inside a rule's helper (a rule that calls
    the helper directly, as ``elementwise.into_g``'s callers do) when only the sweep holds it:
    its local, the namespace's ``donated`` token, the rule's and the helper's arguments.  0
    (never written in place) where counts do not mean that (see ``_calibrate_sole_refs``)."""
    if not _SOLE_REFS:
        return 0

    class _NS:
        donated: Any = None

    def helper(ops: Any, g: Any) -> int:
        return sys.getrefcount(g) if ops.donated is g else -1

    def rule(ops: Any, g: Any, x: Any) -> int:
        return helper(ops, g)

    def sweep_like(cts: dict[int, Any], ns: Any) -> int:
        g = cts.pop(0)
        ns.donated = g
        try:
            return rule(ns, g, None)
        finally:
            ns.donated = None

    alone = sweep_like({0: np.zeros(1)}, _NS())
    a = np.zeros(1)
    held = sweep_like({0: a}, _NS())
    return alone if held == alone + 1 else 0


DONATED_REFS: int = _calibrate_donated_refs()
