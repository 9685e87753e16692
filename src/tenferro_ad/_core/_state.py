"""Recording state, one per thread.

Each thread has its own ``STATE`` (its fields live in a ``threading.local``; the per-op path
reads ``LOCAL.fields`` once and then plain slots): a tape entered in one thread
records only that thread's ops, and a thread that dies takes its state with it.  Values
themselves (handles, owners) may cross threads, but their borrow cells are not locked:
hand a value to another thread only when this one no longer uses it.

``STATE.tape`` is the tape that records new ops (``None`` when nothing records, e.g.
outside every ``Tape`` or inside ``no_grad()``); ``STATE.key`` is that tape's identity
token, compared by ``is`` against the token each handle carries.  ``STATE.reason`` is
the :class:`~tenferro_storage.AllocationReason` every eager op kernel records for its
fresh outputs: ``OPERATION_OUTPUT`` normally; a checkpoint region's backward replay sets
``CHECKPOINT_RECOMPUTE_OUTPUT`` through :func:`allocation_reason` (the seam for
issue 6).  ``STATE.jvp`` is the active forward-mode context, if any.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, cast

from tenferro_storage import AllocationReason


class Fields:
    """One thread's recording fields (a plain object: reading a field is one slot load)."""

    __slots__ = ("jvp", "key", "reason", "region", "tape")

    tape: Any
    key: object | None
    reason: AllocationReason
    jvp: Any
    region: Any  # the checkpoint region recording ops (_checkpoint/_region.py)

    def __init__(self) -> None:
        self.tape = None
        self.key = None
        self.reason = AllocationReason.OPERATION_OUTPUT
        self.jvp = None
        self.region = None


class _Local(threading.local):
    """``fields`` is built once in every thread that touches it."""

    def __init__(self) -> None:
        self.fields = Fields()


LOCAL: Final = _Local()
"""Hot paths read ``LOCAL.fields`` once (one thread-local lookup) and then plain slots."""


class _ThisThread:
    """``STATE``: attribute access forwards to the calling thread's :class:`Fields`."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        return getattr(LOCAL.fields, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(LOCAL.fields, name, value)


STATE: Final = cast(Fields, _ThisThread())


@contextmanager
def allocation_reason(reason: AllocationReason) -> Iterator[None]:
    """Inside the block, eager op kernels record ``reason`` for their fresh outputs.

    Used by checkpoint recomputation (``CHECKPOINT_RECOMPUTE_OUTPUT``). O(1).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to enter and leave.
    Raises: nothing."""
    prev = STATE.reason
    STATE.reason = reason
    try:
        yield
    finally:
        STATE.reason = prev


@contextmanager
def no_grad() -> Iterator[None]:
    """Suspend recording: ops inside the block compute values but add no tape nodes
    (and so retain nothing). O(1).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to enter and leave.
    Raises: nothing."""
    prev_tape, prev_key = STATE.tape, STATE.key
    STATE.tape = None
    STATE.key = None
    try:
        yield
    finally:
        STATE.tape, STATE.key = prev_tape, prev_key
