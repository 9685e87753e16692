"""The central disjointness proof behind ``AllocationGroup.split_mut`` (the one audited module).

Given the requested slots of one exclusively borrowed group, :func:`prove_disjoint`
either returns, per request, the allocation entry and the retained descriptor a
mutable child may be built from, or raises ``DisjointViewError``.  It runs the
contract's steps in their normative order:

1. resolve every requested slot (table position and occupancy only);
2. read each record's retained metadata -- dtype, checked layout, the exact span it
   was validated against (``start``/``stop``) and its reachable element envelope
   (``lo``/``hi``).  Nothing is recomputed: no layout, range, storage or provider
   validation runs here, and the provider's ``validations`` counter does not move;
3. use the record's retained write-injectivity proof, computing it once (and
   retaining it in the record) only when the record has never been asked;
4. partition the requests by allocation entry.  Distinct entries hold distinct
   owners, whose claims are disjoint by construction (G1), so only requests over the
   same entry can conflict;
5. set empty descriptors aside: they reach no byte, so they are disjoint from
   everything, including themselves when repeated;
6. prove pairwise disjointness of the reachable byte envelopes by sorting each
   partition by envelope start and sweeping once (O(N log N), independent of element
   count).  Envelopes that intersect are refused -- as ``OVERLAP`` when a cheap,
   exact argument shows a shared byte (the same record twice; the first or last
   element of one layout, which it certainly reaches, lies in a reached byte of the
   other; a row-major contiguous layout covers every byte of its envelope), and
   otherwise conservatively as ``NOT_PROVABLY_DISJOINT``.  Elements are never
   enumerated, so interleaved strided requests are refused even when their elements
   happen not to meet;
7. hand the proven records back; the caller builds the non-cloneable children under
   the group's exclusive borrow.  Nothing is built before the proof is complete, so
   a refusal leaves no partial child set and changes nothing.

The outcome depends on the set of requests, not on their order: partitions are
visited in entry order and sorted by envelope, and the slots named by an error are
listed in record order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._descriptor import CheckedDescriptor
from ._layout import Contiguous
from .errors import DisjointCause, DisjointViewError, GroupError

# (envelope start byte, envelope stop byte, record index, request position)
_Entry = tuple[int, int, int, int]


def prove_disjoint(
    slots: Sequence[Any],
    resolve: Callable[[Any], int],
    descs: Mapping[int, CheckedDescriptor],
    rec_alloc: Mapping[int, int],
) -> list[tuple[int, CheckedDescriptor]]:
    """Prove that the records named by ``slots`` may be written simultaneously.

    ``resolve`` maps a slot to its record index or raises ``GroupError``; ``descs`` and
    ``rec_alloc`` are the group's record tables.  Returns ``(allocation entry,
    descriptor)`` per request, in request order.  Raises ``DisjointViewError``.
    """
    # 1. Resolve every requested slot.
    indices: list[int] = []
    invalid: list[tuple[Any, GroupError]] = []
    for slot in slots:
        try:
            indices.append(resolve(slot))
        except GroupError as exc:
            invalid.append((slot, exc))
    if invalid:
        first = invalid[0][1]
        error = DisjointViewError(
            DisjointCause.INVALID_SLOT,
            f"{len(invalid)} requested slot(s) cannot be resolved ({first}); nothing was "
            "borrowed",
            tuple(s for s, _ in invalid),
        )
        # The caught GroupErrors' tracebacks hold this frame; drop the frame's references
        # to them so no cycle keeps the group (and its roots) alive past its last use.
        invalid.clear()
        try:
            raise error from first
        finally:
            del first, error

    # 2. Retained metadata only.
    records: list[tuple[int, CheckedDescriptor]] = []
    for index in indices:
        desc = descs[index]  # resolve() checked occupancy
        records.append((rec_alloc[index], desc))

    # 3. Write injectivity: retained, or computed once and retained by the record.
    non_injective = sorted(
        {
            index
            for index, (_, desc) in zip(indices, records, strict=True)
            if desc.injectivity() is None
        }
    )
    if non_injective:
        raise DisjointViewError(
            DisjointCause.NON_INJECTIVE,
            f"record(s) {non_injective} are read-only aliases whose layouts reach one element "
            "from two coordinates; they cannot be mutably borrowed (use view())",
            tuple(slots[indices.index(i)] for i in non_injective),
        )

    # 4 + 5. Partition by allocation entry, leaving empty descriptors out.
    partitions: dict[int, list[_Entry]] = {}
    for pos, (index, (a, desc)) in enumerate(zip(indices, records, strict=True)):
        if desc.size == 0:
            continue
        item = desc.dtype.itemsize
        entry = (desc.start + desc.lo * item, desc.start + (desc.hi + 1) * item, index, pos)
        part = partitions.get(a)
        if part is None:
            partitions[a] = [entry]
        else:
            part.append(entry)

    # 6. Pairwise disjointness of the byte envelopes: sort, then one sweep.
    for a in sorted(partitions):
        part = partitions[a]
        if len(part) < 2:
            continue
        part.sort()
        holder = part[0]
        for entry in part[1:]:
            if entry[0] < holder[1]:
                _refuse(holder, entry, records, slots)
            if entry[1] > holder[1]:
                holder = entry

    # 7. The proof is complete; the caller builds the children.
    return records


def _refuse(
    x: _Entry, y: _Entry, records: list[tuple[int, CheckedDescriptor]], slots: Sequence[Any]
) -> None:
    """Raise for two requests whose byte envelopes intersect (named in record order)."""
    if x[2] > y[2]:
        x, y = y, x
    dx, dy = records[x[3]][1], records[y[3]][1]
    pair = (slots[x[3]], slots[y[3]])
    where = (
        f"record {x[2]} reaches bytes [{x[0]}, {x[1]}) and record {y[2]} reaches bytes "
        f"[{y[0]}, {y[1]}) of the same allocation"
    )
    if x[2] == y[2]:
        raise DisjointViewError(
            DisjointCause.OVERLAP,
            f"record {x[2]} (bytes [{x[0]}, {x[1]}) of its allocation) is requested twice; two "
            "mutable views of it would write the same bytes. Request each record once (only "
            "empty records may repeat)",
            pair,
        )
    if _surely_shared(x, y, dx, dy):
        raise DisjointViewError(
            DisjointCause.OVERLAP,
            f"{where}, and they share at least one byte, so two mutable views would write it. "
            "Request non-overlapping records, or write one record at a time with view_mut()",
            pair,
        )
    raise DisjointViewError(
        DisjointCause.NOT_PROVABLY_DISJOINT,
        f"{where}; the envelopes intersect and the proof does not enumerate elements "
        "(interleaved strided layouts are refused conservatively). Use view_mut() on each "
        "record in turn, or alias non-interleaved blocks",
        pair,
    )


def _surely_shared(x: _Entry, y: _Entry, dx: CheckedDescriptor, dy: CheckedDescriptor) -> bool:
    """Exact (but incomplete) evidence that two intersecting envelopes share a byte."""
    ix, iy = dx.dtype.itemsize, dy.dtype.itemsize
    # The first and last element of a non-empty layout are always reached.
    reached_x = ((x[0], x[0] + ix), (x[1] - ix, x[1]))
    reached_y = ((y[0], y[0] + iy), (y[1] - iy, y[1]))
    for lo_a, hi_a in reached_x:
        for lo_b, hi_b in reached_y:
            if lo_a < hi_b and lo_b < hi_a:
                return True
    # A row-major contiguous layout reaches every byte of its envelope.
    if isinstance(dx.layout, Contiguous) and any(lo < x[1] and x[0] < hi for lo, hi in reached_y):
        return True
    return isinstance(dy.layout, Contiguous) and any(
        lo < y[1] and y[0] < hi for lo, hi in reached_x
    )


__all__ = ["prove_disjoint"]
