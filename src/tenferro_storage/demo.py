"""A short tour of the storage kernel: ``python -m tenferro_storage.demo``.

Creates owners, borrows them, makes one explicit duplicate and one transfer, and
prints the ledger of what happened.
"""

from __future__ import annotations

import numpy as np

from . import errors, from_numpy, ledger, zeros


def _table(rec: ledger.LedgerRecord) -> str:
    rows = [("ledger", "reason", "events", "bytes")]
    for reason, n in sorted(rec.allocations.items(), key=lambda kv: kv[0].name):
        rows.append(("allocation", str(reason), str(n), str(rec.allocation_bytes[reason])))
    for creason, n in sorted(rec.copies.items(), key=lambda kv: kv[0].name):
        rows.append(("copy", str(creason), str(n), str(rec.copy_bytes[creason])))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(f"peak live bytes: {rec.peak_bytes}; live now: {rec.live_bytes}")
    return "\n".join(lines)


def main() -> None:
    """Run the tour and print its ledger."""
    with ledger.capture() as rec:
        x = from_numpy(np.arange(12.0).reshape(3, 4))  # one TRANSFER in
        with x.as_view_mut() as m:  # the only way to write: an exclusive borrow
            m[0].fill(-1.0)
        y = x.duplicate()  # explicit copy: EXPLICIT_DUPLICATE
        with x.T.prepare_host() as p:  # strided read, no copy
            total = float(p.as_array().sum())
        view = y.as_view()
        try:
            y.as_view_mut()
        except errors.BorrowError as exc:
            print("refused as expected:", exc)
        view.release()
        scratch = zeros((1000,))
        del scratch
    print(f"sum through a transposed view: {total}")
    print(_table(rec))


if __name__ == "__main__":
    main()
