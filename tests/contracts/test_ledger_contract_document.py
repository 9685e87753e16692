"""scripts/check-contract-document.py over the real document and one-fault edits of it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.contracts.ledger_support import DOC_CHECKER, PRODUCTION_MANIFEST, REPO_ROOT, run_script

DOCUMENT = REPO_ROOT / "docs" / "design" / "storage-ownership-contracts.md"


def check(document: Path) -> tuple[int, list[str]]:
    outcome = run_script(
        DOC_CHECKER, "--manifest", str(REPO_ROOT / PRODUCTION_MANIFEST), str(document)
    )
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    codes = [line.split(": ", 1)[1].split(" ", 1)[0].rstrip(":") for line in lines]
    return outcome.rc, codes


def test_the_contract_document_passes() -> None:
    outcome = run_script(
        DOC_CHECKER, "--manifest", str(REPO_ROOT / PRODUCTION_MANIFEST), str(DOCUMENT)
    )
    assert outcome.rc == 0, outcome.stderr
    assert outcome.stderr == ""
    assert "7 gates, 47 state-table transitions" in outcome.stdout


def _rename_heading(text: str) -> str:
    return text.replace("## G3 — submission", "## Submission", 1)


def _drop_transition(text: str) -> str:
    return re.sub(r"^\| `Running -> Draining` \|.*\n", "", text, count=1, flags=re.M)


def _add_transition(text: str) -> str:
    return text.replace(
        "| `view` |", "| `view_all` | an invented transition | none |\n| `view` |", 1
    )


def _cite_unknown(text: str) -> str:
    return text + "\nSee also `p9-imaginary-evidence`.\n"


def _uncite(text: str) -> str:
    return text.replace("`p5-disjointness-proof`", "the disjointness tests")


def _drop_change_control(text: str) -> str:
    return text.replace("## Change control", "Change-management notes:", 1)


EDITS = [
    ("gate-missing", _rename_heading, ["D_GATE_MISSING"]),
    ("transition-missing", _drop_transition, ["D_TRANSITION_MISSING"]),
    ("transition-unknown", _add_transition, ["D_TRANSITION_UNKNOWN"]),
    ("unknown-obligation", _cite_unknown, ["D_UNKNOWN_OBLIGATION"]),
    ("obligation-uncited", _uncite, ["D_GATE_OBLIGATION_UNCITED"]),
    ("change-control-missing", _drop_change_control, ["D_CHANGE_CONTROL_MISSING"]),
]


@pytest.mark.parametrize(("name", "edit", "codes"), EDITS, ids=[e[0] for e in EDITS])
def test_one_fault_edits_are_caught(
    name: str, edit: Callable[[str], str], codes: list[str], tmp_path: Path
) -> None:
    original = DOCUMENT.read_text(encoding="utf-8")
    edited = edit(original)
    assert edited != original, f"{name}: the edit did not apply"
    path = tmp_path / "doc.md"
    path.write_text(edited, encoding="utf-8")
    rc, got = check(path)
    assert rc == 1
    assert got == codes
