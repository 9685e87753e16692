"""Recording state, one per thread.

Each thread has its own ``STATE`` (a ``threading.local``): a tape entered in one thread
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
from typing import Any

from tenferro_storage import AllocationReason


class _State(threading.local):
    """Per-thread fields; ``__init__`` runs once in every thread that touches them."""

    tape: Any
    key: object | None
    reason: AllocationReason
    jvp: Any
    region: Any

    def __init__(self) -> None:
        self.tape: Any = None
        self.key: object | None = None
        self.reason: AllocationReason = AllocationReason.OPERATION_OUTPUT
        self.jvp: Any = None
        self.region: Any = None  # the checkpoint region recording ops (_checkpoint.py)


STATE = _State()


@contextmanager
def allocation_reason(reason: AllocationReason) -> Iterator[None]:
    """Inside the block, eager op kernels record ``reason`` for their fresh outputs.

    Used by checkpoint recomputation (``CHECKPOINT_RECOMPUTE_OUTPUT``). O(1).
    """
    prev = STATE.reason
    STATE.reason = reason
    try:
        yield
    finally:
        STATE.reason = prev


@contextmanager
def no_grad() -> Iterator[None]:
    """Suspend recording: ops inside the block compute values but add no tape nodes
    (and so retain nothing). O(1)."""
    prev_tape, prev_key = STATE.tape, STATE.key
    STATE.tape = None
    STATE.key = None
    try:
        yield
    finally:
        STATE.tape, STATE.key = prev_tape, prev_key
