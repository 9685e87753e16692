"""The allocation and copy ledgers (public surface).

``capture()`` records what a block of code allocated, copied and released;
``forbid_copies()`` turns the first copy request into ``CopyForbiddenError``.
"""

from ._ledger import (
    AllocationReason,
    CopyReason,
    EventKind,
    LedgerEvent,
    LedgerRecord,
    capture,
    double_releases,
    forbid_copies,
    live_allocations,
    live_bytes,
)

__all__ = [
    "AllocationReason",
    "CopyReason",
    "EventKind",
    "LedgerEvent",
    "LedgerRecord",
    "capture",
    "double_releases",
    "forbid_copies",
    "live_allocations",
    "live_bytes",
]
