"""The hand-written guard mutants stay applicable: each ``original`` snippet in
``tests/mutation/mutants.toml`` occurs exactly once in its file, so a refactor that moves or
rewrites guarded code must move its mutant too (``run_mutants.py`` runs by hand; this
check runs in every suite, without running the mutants)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_hand_written_mutant_applies_to_the_current_tree() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "mutation" / "run_mutants.py"), "--check"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " 0 not applicable" in out.stdout, out.stdout[-3000:]
