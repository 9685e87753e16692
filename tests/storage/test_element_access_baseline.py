"""The checked-in element-access baseline report and its verifier script.

The verifier accepts the report in ``docs/testing`` (shape and provenance: schema, a
commit in this repository's history, every case, positive ordered statistics) and
rejects broken copies of it with a message naming the problem.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "testing" / "storage-element-access-baseline.json"
VERIFIER = ROOT / "scripts" / "verify-element-access-baseline.py"


def _verify(report: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(VERIFIER), str(report), "--repo", str(ROOT), *extra],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )


def test_checked_in_report_verifies() -> None:
    """The verifier accepts the checked-in report (exit 0) and summarizes it."""
    result = _verify(REPORT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok:") and "prepared/raw" in result.stdout


def _drop_case(r: dict[str, Any]) -> None:
    r["cases"] = [c for c in r["cases"] if c["id"] != "axpy/strided/prepared/1000000"]


def _negative(r: dict[str, Any]) -> None:
    r["cases"][0]["median_ns"] = -1.0


def _unordered(r: dict[str, Any]) -> None:
    r["cases"][1]["min_ns"] = r["cases"][1]["max_ns"] * 2


def _wrong_ratio(r: dict[str, Any]) -> None:
    r["ratios"][0]["prepared_over_raw"] *= 1.5


def _missing_prep(r: dict[str, Any]) -> None:
    r["preparation"] = r["preparation"][1:]


BREAKAGES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "schema": (lambda r: r.update(schema="tenferro.something-else.v1"), "schema must be"),
    "short-commit": (lambda r: r.update(commit=r["commit"][:12]), "40-hex"),
    "unknown-commit": (lambda r: r.update(commit="0123456789abcdef" * 2 + "01234567"),
                       "does not exist in the history"),
    "no-environment": (lambda r: r.pop("environment"), "environment must be"),
    "no-numpy-version": (lambda r: r["environment"].pop("numpy"), "environment lacks numpy"),
    "missing-case": (_drop_case, "missing case axpy/strided/prepared/1000000"),
    "negative-number": (_negative, "positive finite"),
    "unordered-stats": (_unordered, "not ordered"),
    "inconsistent-ratio": (_wrong_ratio, "is not prepared/raw"),
    "missing-preparation": (_missing_prep, "missing preparation cost"),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_broken_copies_are_rejected_naming_the_problem(breakage: str, tmp_path: Path) -> None:
    """Each kind of damage makes the verifier exit non-zero with a message naming it."""
    report = json.loads(REPORT.read_text())
    broken = copy.deepcopy(report)
    damage, message = BREAKAGES[breakage]
    damage(broken)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(broken))
    result = _verify(path)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_unreadable_report_is_rejected(tmp_path: Path) -> None:
    """A missing or non-JSON file is an error, not a crash."""
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for path in (bad, tmp_path / "absent.json"):
        result = _verify(path)
        assert result.returncode == 1 and "cannot read" in result.stderr
