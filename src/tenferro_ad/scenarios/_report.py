"""Reports of scenario results: a text table, a Chrome trace-event file, a plot."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from tenferro_storage.ledger import AllocationReason, EventKind, LedgerRecord

from ._runner import ScenarioResult

__all__ = [
    "PlotUnavailableError",
    "format_table",
    "plot_records",
    "trace_events",
    "write_plot",
    "write_trace",
]

_SHORT: Final = {
    "operation_output": "op",
    "checkpoint_recompute_output": "recompute",
    "explicit_duplicate_destination": "dup_dest",
    "transfer_destination": "transfer_dest",
    "explicit_duplicate": "dup",
    "transfer": "transfer",
}
LEGEND: Final = (
    "reasons: op=operation_output recompute=checkpoint_recompute_output "
    "dup_dest=explicit_duplicate_destination transfer_dest=transfer_destination | "
    "copies: dup=explicit_duplicate transfer=transfer"
)


class PlotUnavailableError(RuntimeError):
    """``--plot`` was requested but matplotlib is not installed."""


def _counts(counter: Counter[Any]) -> str:
    items = sorted(((r.value, n) for r, n in counter.items() if n))
    return " ".join(f"{_SHORT.get(k, k)}={n}" for k, n in items) or "-"


def format_table(results: Sequence[ScenarioResult], *, details: bool = True) -> str:
    """A fixed-width table: scenario, allocations and copies by reason, peak live bytes,
    what retention added, pass/fail; then each failure's mismatches. O(results)."""
    header = ("scenario", "allocations", "copies", "peak bytes", "retention +", "result")
    rows = [
        (
            r.scenario.name,
            _counts(r.allocations),
            _counts(r.copies),
            f"{r.peak_bytes:,}",
            f"{r.retention_allocations} alloc/{r.retention_copies} copy",
            "PASS" if r.passed else "FAIL",
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        cells = [
            c.rjust(w) if i == 3 else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    out = [line(header), "  ".join("-" * w for w in widths)]
    out.extend(line(row) for row in rows)
    out.append(LEGEND)
    if details:
        for r in results:
            for m in r.mismatches:
                out.append(f"FAIL {r.scenario.name} ({r.scenario.source}): {m}")
    passed = sum(r.passed for r in results)
    out.append(f"{passed}/{len(results)} scenarios passed")
    return "\n".join(out)


def _allocation_intervals(rec: LedgerRecord) -> list[tuple[int, int | None, Any]]:
    """(alloc position, release position or None, event) for allocations made in ``rec``."""
    events = rec.events
    open_: dict[int, tuple[int, Any]] = {}
    out: list[tuple[int, int | None, Any]] = []
    for pos, e in enumerate(events):
        if e.kind is EventKind.ALLOCATE and e.allocation is not None:
            open_[e.allocation] = (pos, e)
        elif e.kind is EventKind.RELEASE and e.allocation in open_:
            start, ev = open_.pop(e.allocation)
            out.append((start, pos, ev))
    out.extend((start, None, ev) for start, ev in open_.values())
    out.sort(key=lambda t: t[0])
    return out


def trace_events(results: Sequence[ScenarioResult]) -> dict[str, Any]:
    """The runs' allocation timelines as a Chrome trace-event document (Perfetto loads it).

    One process per scenario.  The time axis is the ledger's event order (one event =
    1 µs), not wall time.  Per scenario: a counter track ``live bytes`` (``"ph": "C"``)
    with one series per allocation reason after every allocate/release; one complete
    event (``"ph": "X"``) per allocation spanning allocation to release, named by the
    operation, categorized by reason, packed onto non-overlapping lanes; one instant
    event (``"ph": "i"``) per copy.  O(events).
    """
    trace: list[dict[str, Any]] = []
    for pid, r in enumerate(results, start=1):
        rec = r.observation.total
        trace.append(
            {
                "name": "process_name",
                "ph": "M",
                "pid": pid,
                "tid": 0,
                "args": {"name": r.scenario.name},
            }
        )
        trace.append(
            {
                "name": "process_sort_index",
                "ph": "M",
                "pid": pid,
                "tid": 0,
                "args": {"sort_index": pid},
            }
        )
        events = rec.events
        reasons = sorted({reason.value for _, live in rec.timeline() for reason in live})
        allocated = {e.allocation for e in events if e.kind is EventKind.ALLOCATE}
        live: dict[str, int] = dict.fromkeys(reasons, 0)
        for pos, e in enumerate(events):
            if e.kind is EventKind.COPY:
                trace.append(
                    {
                        "name": f"copy: {e.operation}",
                        "cat": e.reason.value,
                        "ph": "i",
                        "s": "p",
                        "ts": pos,
                        "pid": pid,
                        "tid": 0,
                        "args": {"bytes": e.nbytes, "reason": e.reason.value},
                    }
                )
                continue
            if e.allocation not in allocated:
                continue
            assert isinstance(e.reason, AllocationReason)
            delta = e.nbytes if e.kind is EventKind.ALLOCATE else -e.nbytes
            live[e.reason.value] = live.get(e.reason.value, 0) + delta
            trace.append(
                {
                    "name": "live bytes",
                    "ph": "C",
                    "ts": pos,
                    "pid": pid,
                    "tid": 0,
                    "args": dict(live),
                }
            )
        end = len(events)
        lanes: list[int] = []  # lane -> position at which it becomes free
        for start, stop, ev in _allocation_intervals(rec):
            finish = end if stop is None else stop
            lane = next((i for i, free in enumerate(lanes) if free <= start), len(lanes))
            if lane == len(lanes):
                lanes.append(finish)
                trace.append(
                    {
                        "name": "thread_name",
                        "ph": "M",
                        "pid": pid,
                        "tid": lane + 1,
                        "args": {"name": f"allocations {lane}"},
                    }
                )
            else:
                lanes[lane] = finish
            trace.append(
                {
                    "name": ev.operation,
                    "cat": ev.reason.value,
                    "ph": "X",
                    "ts": start,
                    "dur": max(finish - start, 1),
                    "pid": pid,
                    "tid": lane + 1,
                    "args": {
                        "bytes": ev.nbytes,
                        "allocation": ev.allocation,
                        "reason": ev.reason.value,
                        "released": stop is not None,
                    },
                }
            )
    return {
        "traceEvents": trace,
        "displayTimeUnit": "ns",
        "otherData": {"time_axis": "ledger event order (1 event = 1 us)"},
    }


def write_trace(results: Sequence[ScenarioResult], path: str | Path) -> None:
    """Write :func:`trace_events` as JSON to ``path`` (open it in https://ui.perfetto.dev)."""
    Path(path).write_text(json.dumps(trace_events(results), indent=None))


def write_plot(results: Sequence[ScenarioResult], path: str | Path) -> None:
    """Draw live bytes over the run, stacked by reason, one panel per scenario, to ``path``.

    Needs matplotlib (the ``plot`` extra); raises :class:`PlotUnavailableError`
    saying how to install it when it is missing.  O(events).
    """
    plot_records(
        [(f"{r.scenario.name}: peak {r.peak_bytes:,} B", r.observation.total) for r in results],
        path,
    )


def plot_available() -> bool:
    """Whether matplotlib can be imported (looked up, not imported). O(1)."""
    return importlib.util.find_spec("matplotlib") is not None


REASON_COLOURS: dict[AllocationReason, str] = {
    AllocationReason.OPERATION_OUTPUT: "tab:blue",
    AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT: "tab:orange",
    AllocationReason.EXPLICIT_DUPLICATE_DESTINATION: "tab:green",
    AllocationReason.TRANSFER_DESTINATION: "tab:purple",
}
"""One colour per allocation reason, the same in every panel of every plot."""


def plot_records(
    panels: Sequence[tuple[str, LedgerRecord]], path: str | Path, *, share_y: bool = False
) -> None:
    """One panel per ``(title, capture record)``: live bytes stacked by allocation reason
    after each allocate/release event, each reason in its :data:`REASON_COLOURS` colour
    in every panel; ``share_y`` gives every panel the same y-scale (for panels that are
    compared).  Raises :class:`PlotUnavailableError` without matplotlib.  O(events)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailableError(
            f"cannot write the plot {str(path)!r}: matplotlib is not installed. Install the "
            "optional extra with  pip install 'tenferro[plot]'  (or pip install matplotlib), "
            "or leave out --plot"
        ) from None
    n = max(len(panels), 1)
    ncols = 2 if n > 1 else 1
    nrows = (n + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.5 * ncols, 3.0 * nrows), squeeze=False,
                             sharey=share_y)
    for ax, (title, rec) in zip(axes.flat, panels, strict=False):
        timeline = rec.timeline()
        reasons = sorted({reason for _, live in timeline for reason in live}, key=lambda x: x.value)
        xs = list(range(len(timeline)))
        ys = [[live.get(reason, 0) for _, live in timeline] for reason in reasons]
        if xs:
            ax.stackplot(xs, ys, labels=[str(reason) for reason in reasons], step="post",
                         colors=[REASON_COLOURS[reason] for reason in reasons])
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("allocate/release event")
        ax.set_ylabel("live bytes")
        ax.legend(fontsize=7, loc="upper right")
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
