"""The verifier of ``p0-engine-discovery-docs``: the engine guide against the real runtime."""

from __future__ import annotations

from pathlib import Path

from tests.contracts.ledger_support import REPO_ROOT, SCRIPTS, run_script

DOC_CHECK = SCRIPTS / "check-runtime-engine-docs.py"
GUIDE = REPO_ROOT / "docs/guides/runtime-engines.md"


def test_the_engine_guide_matches_the_runtime() -> None:
    outcome = run_script(DOC_CHECK, str(GUIDE), cwd=REPO_ROOT)
    assert outcome.rc == 0, outcome.stderr
    assert outcome.stdout.startswith("ok:")


def test_a_guide_that_drifts_from_the_runtime_fails(tmp_path: Path) -> None:
    text = GUIDE.read_text("utf-8")
    assert "| `description` |" in text
    broken = (
        text.replace("| `description` |", "| `label` |", 1)  # a field the runtime lacks
        + "\n```python\nfirst = rt.engines()[0]\n```\n"  # selection by position
        + "\n```python\nrt.submit_everything()\n```\n"  # no such runtime name
        + "\n```python\nraise RuntimeError('stale example')\n```\n"  # an example that fails
    )
    guide = tmp_path / "guide.md"
    guide.write_text(broken, "utf-8")
    outcome = run_script(DOC_CHECK, str(guide), cwd=REPO_ROOT)
    assert outcome.rc == 1
    codes = sorted({line.split(":")[0] for line in outcome.stderr.splitlines()})
    assert codes == [
        "E_DOC_BLOCK_FAILS",
        "E_DOC_FIELDS",
        "E_DOC_POSITIONAL",
        "E_DOC_UNKNOWN_NAME",
    ], outcome.stderr
