#!/usr/bin/env python3
"""Verify the element-access baseline report's shape and provenance.

    python3 scripts/verify-element-access-baseline.py \
        docs/testing/storage-element-access-baseline.json

Checks: the schema name; the measured commit is a 40-hex object id that exists in this
repository's history (``git cat-file -e <commit>^{commit}``); the environment block; every
required case (sum/axpy x contiguous/strided x raw/prepared x 10**2..10**7 elements) with
positive, ordered statistics (min <= q1 <= median <= q3 <= max); a ratio per
(op, layout, size) equal to prepared/raw medians; preparation costs for every size.
Prints a summary (including whether the prepared/raw target was met) and exits 0, or
lists every problem and exits 1.  ``--enforce-target`` also fails when the target was
missed.  ``--repo`` selects the repository (default: the one holding the report).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

SCHEMA = "tenferro.storage-element-access-baseline.v1"
SIZES = tuple(10**k for k in range(2, 8))
OPS = ("sum", "axpy")
LAYOUTS = ("contiguous", "strided")
VARIANTS = ("raw", "prepared")
MODES = ("read", "write")
STATS = ("min_ns", "q1_ns", "median_ns", "q3_ns", "max_ns")
ENVIRONMENT = ("python", "numpy", "platform", "cpu_count")
HEX40 = re.compile(r"^[0-9a-f]{40}$")


def _positive(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _repo_of(path: Path) -> Path | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(path.parent), "rev-parse", "--show-toplevel"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return Path(out)


def _commit_exists(repo: Path, commit: str) -> bool:
    result = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "-e", f"{commit}^{{commit}}"],
        capture_output=True,
    )
    return result.returncode == 0


def _check_stats(where: str, entry: dict[str, Any], problems: list[str]) -> None:
    values = [entry.get(k) for k in STATS]
    bad = [k for k, v in zip(STATS, values, strict=True) if not _positive(v)]
    if bad:
        problems.append(f"{where}: {', '.join(bad)} must be positive finite numbers")
        return
    if sorted(values) != values:  # type: ignore[type-var]
        problems.append(f"{where}: statistics are not ordered min <= q1 <= median <= q3 <= max")
    for k in ("number", "samples"):
        if not (isinstance(entry.get(k), int) and entry[k] > 0):
            problems.append(f"{where}: {k} must be a positive integer")


def verify(report: Any, repo: Path | None) -> list[str]:
    """Every problem with the report (empty when it is well-formed and traceable)."""
    problems: list[str] = []
    if not isinstance(report, dict):
        return ["the report must be a JSON object"]
    if report.get("schema") != SCHEMA:
        problems.append(f"schema must be {SCHEMA!r}, got {report.get('schema')!r}")
    commit = report.get("commit")
    if not (isinstance(commit, str) and HEX40.match(commit)):
        problems.append(f"commit must be a 40-hex git object id, got {commit!r}")
    elif repo is None:
        problems.append("cannot check the commit: the report is not inside a git repository "
                        "(pass --repo)")
    elif not _commit_exists(repo, commit):
        problems.append(f"commit {commit} does not exist in the history of {repo}")
    env = report.get("environment")
    if not isinstance(env, dict):
        problems.append("environment must be an object")
    else:
        missing = [k for k in ENVIRONMENT if env.get(k) in (None, "")]
        if missing:
            problems.append(f"environment lacks {', '.join(missing)}")
        elif not _positive(env["cpu_count"]):
            problems.append("environment.cpu_count must be a positive integer")

    cases = report.get("cases")
    by_key: dict[tuple[str, str, str, int], dict[str, Any]] = {}
    if not isinstance(cases, list):
        problems.append("cases must be a list")
        cases = []
    for i, case in enumerate(cases):
        if not isinstance(case, dict):
            problems.append(f"cases[{i}] must be an object")
            continue
        key = (case.get("op"), case.get("layout"), case.get("variant"), case.get("elements"))
        if key in by_key:
            problems.append(f"case {key} appears twice")
        by_key[key] = case  # type: ignore[index]
        _check_stats(f"case {case.get('id', key)}", case, problems)
    for op in OPS:
        for layout in LAYOUTS:
            for variant in VARIANTS:
                for n in SIZES:
                    if (op, layout, variant, n) not in by_key:
                        problems.append(f"missing case {op}/{layout}/{variant}/{n}")

    ratios = report.get("ratios")
    seen: set[tuple[Any, Any, Any]] = set()
    for i, r in enumerate(ratios if isinstance(ratios, list) else []):
        key = (r.get("op"), r.get("layout"), r.get("elements"))
        seen.add(key)
        value = r.get("prepared_over_raw")
        raw = by_key.get((key[0], key[1], "raw", key[2]))
        prepared = by_key.get((key[0], key[1], "prepared", key[2]))
        if not _positive(value):
            problems.append(f"ratios[{i}] {key}: prepared_over_raw must be positive")
        elif raw and prepared and _positive(raw.get("median_ns")) and _positive(
            prepared.get("median_ns")
        ):
            expected = prepared["median_ns"] / raw["median_ns"]
            if not math.isclose(value, expected, rel_tol=1e-9):
                problems.append(f"ratios[{i}] {key}: {value} is not prepared/raw = {expected}")
    if not isinstance(ratios, list):
        problems.append("ratios must be a list")
    for op in OPS:
        for layout in LAYOUTS:
            for n in SIZES:
                if (op, layout, n) not in seen:
                    problems.append(f"missing ratio {op}/{layout}/{n}")

    prep = report.get("preparation")
    have: set[tuple[Any, Any, Any]] = set()
    for i, p in enumerate(prep if isinstance(prep, list) else []):
        have.add((p.get("layout"), p.get("mode"), p.get("elements")))
        _check_stats(f"preparation[{i}]", p, problems)
    if not isinstance(prep, list):
        problems.append("preparation must be a list")
    for layout in LAYOUTS:
        for mode in MODES:
            for n in SIZES:
                if (layout, mode, n) not in have:
                    problems.append(f"missing preparation cost {layout}/{mode}/{n}")
    target = report.get("target")
    if not (isinstance(target, dict) and isinstance(target.get("met"), bool)
            and _positive(target.get("ratio_max"))):
        problems.append("target must be an object with ratio_max and a boolean met")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Verify the element-access baseline report.")
    parser.add_argument("report", type=Path)
    parser.add_argument("--repo", type=Path, default=None)
    parser.add_argument("--enforce-target", action="store_true")
    args = parser.parse_args(argv)
    try:
        report = json.loads(args.report.read_text())
    except (OSError, ValueError) as exc:
        print(f"error: cannot read {args.report}: {exc}", file=sys.stderr)
        return 1
    repo = args.repo if args.repo is not None else _repo_of(args.report.resolve())
    problems = verify(report, repo)
    if not problems and args.enforce_target and not report["target"]["met"]:
        problems.append(f"target missed: worst case {report['target'].get('worst')}")
    if problems:
        print(f"error: {args.report} is not a valid element-access baseline:", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    target = report["target"]
    statistic = target.get("statistic", "prepared_over_raw")
    judged = [r for r in report["ratios"] if r["elements"] >= target.get("min_elements", 10**5)]
    worst = max(r.get(statistic, r["prepared_over_raw"]) for r in judged) if judged else math.nan
    print(
        f"ok: {args.report} ({report['schema']}, commit {report['commit'][:12]}, "
        f"{len(report['cases'])} cases); worst prepared/raw ({statistic}) at >= "
        f"{target.get('min_elements')} elements: {worst:.3f} "
        f"(target {target['ratio_max']}: {'met' if target['met'] else 'MISSED'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
