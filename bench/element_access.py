"""Element-access baseline: raw numpy versus prepared contiguous and prepared strided traversal.

Not a test.  Measures, for 10**2 .. 10**7 float64 elements, two traversals
(``sum`` and the axpy-style update ``y += a * x``) over

* a contiguous layout: raw numpy arrays versus ``PreparedContiguous*.as_slice()`` /
  ``as_slice_mut()`` handed out by prepared access (one API call per traversal);
* a strided layout (a transposed 2-D view): raw numpy ``.T`` versus
  ``PreparedStrided*.as_array()``;

plus the cost of preparation itself (``as_view().prepare_host()`` + ``release()``, and the
write variant) per size, which must be flat in the element count.  Raw and prepared
samples are interleaved so drift hits both alike.  Writes the report to
``docs/testing/storage-element-access-baseline.json`` (or ``--out``); check it with
``scripts/verify-element-access-baseline.py``.

    python3 bench/element_access.py            # about a minute
    python3 bench/element_access.py --quick    # smoke run (fewer samples, up to 10**5)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import tenferro_storage as ts

SCHEMA = "tenferro.storage-element-access-baseline.v1"
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "testing" / "storage-element-access-baseline.json"
SIZES = tuple(10**k for k in range(2, 8))
OPS = ("sum", "axpy")
LAYOUTS = ("contiguous", "strided")
TARGET_RATIO = 1.05
TARGET_MIN_ELEMENTS = 10**5
# Judged on the median of adjacent-pair ratios: on a shared machine it is robust to load
# drift that shifts whole runs of samples; the ratio of medians is reported alongside.
TARGET_STATISTIC = "paired_ratio_median"
ALPHA = 1e-3


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def _grid(n: int) -> tuple[int, int]:
    """A 2-D shape with ``n`` elements, as square as powers of ten allow."""
    k = round(np.log10(n))
    rows = 10 ** (k // 2)
    return rows, n // rows


def _stats(per_call_ns: list[float]) -> dict[str, float]:
    q1, _, q3 = statistics.quantiles(per_call_ns, n=4, method="inclusive")
    return {
        "median_ns": statistics.median(per_call_ns),
        "min_ns": min(per_call_ns),
        "q1_ns": q1,
        "q3_ns": q3,
        "max_ns": max(per_call_ns),
    }


def _calibrate(fn: Callable[[], object], budget_ns: float) -> int:
    """Calls per sample so that one sample lasts about ``budget_ns``."""
    fn()
    start = time.perf_counter_ns()
    fn()
    once = max(time.perf_counter_ns() - start, 1)
    return max(1, int(budget_ns // once))


def _sample(fn: Callable[[], object], number: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(number):
        fn()
    return (time.perf_counter_ns() - start) / number


def _pair(
    raw: Callable[[], object], prepared: Callable[[], object], samples: int, budget_ns: float
) -> tuple[dict[str, Any], dict[str, Any], list[float]]:
    """Interleaved (order alternating) timing of a raw/prepared pair.

    Returns both sides' statistics and the per-pair ratios prepared_i / raw_i of
    adjacent samples, which cancel slow drift in machine load.
    """
    number = min(_calibrate(raw, budget_ns), _calibrate(prepared, budget_ns))
    a: list[float] = []
    b: list[float] = []
    for i in range(samples):
        if i % 2:
            b.append(_sample(prepared, number))
            a.append(_sample(raw, number))
        else:
            a.append(_sample(raw, number))
            b.append(_sample(prepared, number))
    meta = {"number": number, "samples": samples}
    paired = [y / x for x, y in zip(a, b, strict=True)]
    return {**meta, **_stats(a)}, {**meta, **_stats(b)}, paired


def _workloads(n: int, layout: str) -> dict[str, Any]:
    """Raw arrays and prepared accesses over equal data for one size and layout."""
    rng = np.random.default_rng(n)
    shape = (n,) if layout == "contiguous" else _grid(n)
    x = ts.from_numpy(rng.uniform(-1.0, 1.0, shape))
    y = ts.from_numpy(rng.uniform(-1.0, 1.0, shape))
    # Raw numpy works on the very same bytes (the roots' buffers, bypassing the API), so
    # the comparison isolates access overhead from page placement and cache effects.
    x_raw = x._storage.root._allocation.reshape(shape)  # the raw baseline, on purpose
    y_raw = y._storage.root._allocation.reshape(shape)
    if layout == "strided":
        x_raw, y_raw = x_raw.T, y_raw.T
        px = x.T.prepare_host()
        py = y.as_view_mut().T.prepare_host_mut()
        assert isinstance(px, ts.PreparedStridedRead) and isinstance(py, ts.PreparedStridedWrite)
        read, write = px.as_array, py.as_array
    else:
        px = x.as_view().prepare_host()
        py = y.as_view_mut().prepare_host_mut()
        assert isinstance(px, ts.PreparedContiguousRead)
        assert isinstance(py, ts.PreparedContiguousWrite)
        read, write = px.as_slice, py.as_slice_mut

    def raw_sum() -> object:
        return x_raw.sum()

    def prepared_sum() -> object:
        return read().sum()

    def raw_axpy() -> None:
        y_raw.__iadd__(ALPHA * x_raw)

    def prepared_axpy() -> None:
        write().__iadd__(ALPHA * read())

    return {
        "shape": list(shape),
        "keep": (x, y, px, py),
        "sum": (raw_sum, prepared_sum),
        "axpy": (raw_axpy, prepared_axpy),
    }


def _preparation(n: int, layout: str, samples: int) -> list[dict[str, Any]]:
    """Cost of preparing and releasing read and write access for one size."""
    t = ts.zeros((n,) if layout == "contiguous" else _grid(n))

    def read() -> None:
        v = t.as_view() if layout == "contiguous" else t.T
        v.prepare_host().release()

    def write() -> None:
        m = t.as_view_mut()
        (m if layout == "contiguous" else m.T).prepare_host_mut().release()
        m.release()

    out = []
    for mode, fn in (("read", read), ("write", write)):
        number = _calibrate(fn, 2e6)
        per_call = [_sample(fn, number) for _ in range(samples)]
        out.append({"elements": n, "layout": layout, "mode": mode, "number": number,
                    "samples": samples, **_stats(per_call)})
    return out


def _counters_per_preparation(n: int) -> dict[str, int]:
    t = ts.zeros(n)
    before = ts.host_provider.counters.snapshot()
    t.as_view().prepare_host().release()
    after = ts.host_provider.counters.snapshot()
    return {k: after[k] - before[k] for k in ("validations", "resolutions", "maps", "syncs",
                                                "dispatches")}


def run(sizes: tuple[int, ...], samples: int, budget_ns: float) -> dict[str, Any]:
    cases: list[dict[str, Any]] = []
    ratios: list[dict[str, Any]] = []
    preparation: list[dict[str, Any]] = []
    with np.errstate(all="raise"):
        for n in sizes:
            # Fewer samples at 10**7: each call is already long (tens of ms) and stable.
            m = samples if n < 10**7 else max(11, samples // 2)
            for layout in LAYOUTS:
                work = _workloads(n, layout)
                for op in OPS:
                    raw, prepared, paired = _pair(*work[op], samples=m, budget_ns=budget_ns)
                    q1, med, q3 = statistics.quantiles(paired, n=4, method="inclusive")
                    for variant, result in (("raw", raw), ("prepared", prepared)):
                        cases.append({"id": f"{op}/{layout}/{variant}/{n}", "op": op,
                                      "layout": layout, "variant": variant, "elements": n,
                                      "shape": work["shape"], **result})
                    ratios.append({
                        "op": op, "layout": layout, "elements": n,
                        "prepared_over_raw": prepared["median_ns"] / raw["median_ns"],
                        "prepared_over_raw_min": prepared["min_ns"] / raw["min_ns"],
                        "paired_ratio_median": med,
                        "paired_ratio_q1": q1,
                        "paired_ratio_q3": q3,
                    })
                    print(f"{op:4s} {layout:10s} {n:>9d}  raw {raw['median_ns'] / 1e3:10.2f} us"
                          f"  prepared {prepared['median_ns'] / 1e3:10.2f} us"
                          f"  ratio {ratios[-1]['prepared_over_raw']:.3f}"
                          f"  paired {med:.3f} [{q1:.3f}, {q3:.3f}]", flush=True)
                del work
                preparation += _preparation(n, layout, max(7, samples // 2))
    prep_medians = [p["median_ns"] for p in preparation]
    judged = [r for r in ratios if r["elements"] >= TARGET_MIN_ELEMENTS]
    worst = max(judged, key=lambda r: r[TARGET_STATISTIC]) if judged else None
    return {
        "cases": cases,
        "ratios": ratios,
        "preparation": preparation,
        "preparation_flatness": {
            "max_over_min_median": max(prep_medians) / min(prep_medians),
            "per_group_max_over_min_median": {
                f"{layout}/{mode}": (max(g) / min(g))
                for layout in LAYOUTS for mode in ("read", "write")
                if (g := [p["median_ns"] for p in preparation
                          if p["layout"] == layout and p["mode"] == mode])
            },
        },
        "counters_per_preparation": {
            str(n): _counters_per_preparation(n) for n in (sizes[0], sizes[-1])
        },
        "target": {
            "ratio_max": TARGET_RATIO,
            "min_elements": TARGET_MIN_ELEMENTS,
            "statistic": TARGET_STATISTIC,
            "met": bool(judged) and all(r[TARGET_STATISTIC] <= TARGET_RATIO for r in judged),
            "worst": worst,
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--samples", type=int, default=61)
    parser.add_argument(
        "--sample-ms", type=float, default=5.0, help="target duration of one sample"
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: up to 10**5, 5 samples")
    args = parser.parse_args(argv)
    sizes = SIZES[:4] if args.quick else SIZES
    samples = 5 if args.quick else args.samples
    started = time.perf_counter()
    results = run(sizes, samples, args.sample_ms * 1e6)
    report = {
        "schema": SCHEMA,
        "commit": _git("rev-parse", "HEAD"),
        "worktree_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "generated_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "environment": {
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "numpy": np.__version__,
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
        },
        "method": {
            "dtype": "float64",
            "timer": "time.perf_counter_ns",
            "unit": "nanoseconds per call",
            "estimate": "median over samples",
            "ratio": "prepared_over_raw = ratio of medians; paired_ratio_* = quartiles of "
                     "prepared_i / raw_i over adjacent interleaved samples",
            "spread": ["min_ns", "q1_ns", "q3_ns", "max_ns"],
            "interleaved": True,
            "raw": "plain numpy arrays over the same buffers, bypassing tenferro",
            "strided_layout": "transposed 2-D view of a row-major array",
            "prepared_contiguous": "one as_slice()/as_slice_mut() call per traversal",
            "prepared_strided": "one as_array() call per traversal",
            "axpy": "y += a * x with a = 1e-3",
        },
        "sizes": list(sizes),
        **results,
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    target = report["target"]
    print(f"wrote {args.out} in {report['wall_seconds']} s; target "
          f"(<= {TARGET_RATIO} at >= {TARGET_MIN_ELEMENTS}) met: {target['met']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
