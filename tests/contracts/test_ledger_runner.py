"""The runner over the fixture ledger, with a stand-in `python3` that records its argv.

The stand-in sits first on PATH, so the runner's ordinary argv execution reaches it; it is a
test fixture only, not a production command mode.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.contracts.ledger_support import (
    MANIFEST_REL,
    RUNNER,
    Outcome,
    Repo,
    StandIn,
    activate,
    assert_clean,
    assert_one_fault,
    pytest_row,
    row,
    run_script,
    valid_receipt,
)

Manifest = dict[str, Any]
P1A = ["python3", "scripts/verify-ok.py", "data/p1-a.json"]
P1B = ["python3", "-m", "pytest", "tests/test_p1_b.py"]


def run_runner(repo: Repo, receipt: Path, env: dict[str, str], *extra: str) -> Outcome:
    return run_script(
        RUNNER,
        "--root",
        str(repo.root),
        "--manifest",
        MANIFEST_REL,
        "--receipt-out",
        str(receipt),
        "--diagnostics-json",
        *extra,
        env=env,
    )


def share_p1b_command(manifest: Manifest) -> None:
    """Adds active p1-c whose typed command and artifact are identical to p1-b's."""
    shared = pytest_row("p1-c", "P1", active=True)
    shared["artifact"] = dict(row(manifest, "p1-b")["artifact"])
    shared["command"] = {**row(manifest, "p1-b")["command"]}
    manifest["obligations"].append(shared)


def test_every_active_argv_runs_exactly_once_and_no_deferred_one(
    manifest: Manifest,
    make_repo: Callable[..., Repo],
    run_checker: Callable[..., Outcome],
    standin: StandIn,
    tmp_path: Path,
) -> None:
    share_p1b_command(manifest)
    repo = make_repo(manifest)
    receipt = tmp_path / "receipt.json"
    outcome = run_runner(repo, receipt, standin.env())
    assert_clean(outcome)
    assert standin.calls() == [P1A, P1B]  # the shared command ran once
    data = json.loads(receipt.read_text("utf-8"))
    assert data == valid_receipt(manifest, repo.head())
    assert [e["obligation_id"] for e in data["executions"]] == ["p1-a", "p1-b", "p1-c"]
    assert_clean(run_checker(repo, "--receipt", str(receipt)))


def test_exit_status_propagates_into_receipt_and_checker(
    manifest: Manifest,
    make_repo: Callable[..., Repo],
    run_checker: Callable[..., Outcome],
    standin: StandIn,
    tmp_path: Path,
) -> None:
    repo = make_repo(manifest)
    receipt = tmp_path / "receipt.json"
    outcome = run_runner(repo, receipt, standin.env(exit_codes={" ".join(P1A): 5}))
    assert_one_fault(outcome, "E_COMMAND_FAILED", {"obligation_id": "p1-a", "exit_code": 5})
    data = json.loads(receipt.read_text("utf-8"))
    assert [(e["obligation_id"], e["exit_code"]) for e in data["executions"]] == [
        ("p1-a", 5),
        ("p1-b", 0),
    ]
    assert standin.calls() == [P1A, P1B]  # a failure does not stop the remaining rows
    assert_one_fault(
        run_checker(repo, "--receipt", str(receipt)),
        "E_COMMAND_FAILED",
        {"obligation_id": "p1-a", "exit_code": 5},
    )


def test_real_interpreter_runs_the_canonical_argv(
    make_repo: Callable[..., Repo],
    run_checker: Callable[..., Outcome],
    standin: StandIn,
    tmp_path: Path,
) -> None:
    repo = make_repo()
    # The verifier itself now fails, so the status comes from a real child process.
    repo.write("scripts/verify-ok.py", "import sys\nsys.exit(4 if sys.argv[1:] else 9)\n")
    repo.commit("verifier fails")
    receipt = tmp_path / "receipt.json"
    outcome = run_runner(repo, receipt, standin.env(mode="exec"))
    assert_one_fault(outcome, "E_COMMAND_FAILED", {"obligation_id": "p1-a", "exit_code": 4})
    assert standin.calls() == [P1A, P1B]


def test_dirty_tree_runs_nothing(
    make_repo: Callable[..., Repo], standin: StandIn, tmp_path: Path
) -> None:
    repo = make_repo()
    repo.write("data/p1-a.json", '{"uncommitted": 1}\n')
    receipt = tmp_path / "receipt.json"
    outcome = run_runner(repo, receipt, standin.env())
    assert_one_fault(outcome, "E_TREE_DIRTY", {"paths": ["data/p1-a.json"]})
    assert standin.calls() == [] and not receipt.exists()


def test_invalid_manifest_runs_nothing(
    manifest: Manifest, make_repo: Callable[..., Repo], standin: StandIn, tmp_path: Path
) -> None:
    activate(manifest, "p4-a")  # P2 is still deferred
    repo = make_repo(manifest)
    receipt = tmp_path / "receipt.json"
    outcome = run_runner(repo, receipt, standin.env())
    assert_one_fault(
        outcome,
        "E_PREREQUISITE_INACTIVE",
        {"node": "P4", "prerequisite": "P2", "deferred": ["p2-a"]},
    )
    assert standin.calls() == [] and not receipt.exists()


def test_receipt_records_the_canonical_base(
    manifest: Manifest,
    make_repo: Callable[..., Repo],
    run_checker: Callable[..., Outcome],
    standin: StandIn,
    tmp_path: Path,
) -> None:
    repo = make_repo(manifest)
    base = repo.head()
    activate(manifest, "p2-a")
    repo.write_manifest(manifest)
    repo.commit("promote p2-a")
    receipt = tmp_path / "receipt.json"
    assert_clean(run_runner(repo, receipt, standin.env(), "--base-commit", "HEAD~1"))
    data = json.loads(receipt.read_text("utf-8"))
    assert data["base_commit"] == base
    assert data["candidate_commit"] == repo.head()
    assert_clean(run_checker(repo, "--base-commit", base, "--receipt", str(receipt)))
    # Without the base, the same receipt no longer matches the comparison it claims.
    assert_one_fault(
        run_checker(repo, "--receipt", str(receipt)),
        "E_RECEIPT_BASE",
        {"expected": None, "actual": base},
    )


def test_unwritable_receipt(
    make_repo: Callable[..., Repo], standin: StandIn, tmp_path: Path
) -> None:
    outcome = run_runner(make_repo(), tmp_path, standin.env())  # a directory
    assert_one_fault(outcome, "E_RECEIPT_WRITE", {"path": str(tmp_path)})


def test_human_output_keeps_stdout_for_the_summary_line(
    make_repo: Callable[..., Repo], standin: StandIn, tmp_path: Path
) -> None:
    repo = make_repo()
    receipt = tmp_path / "receipt.json"
    outcome = run_script(
        RUNNER,
        "--root",
        str(repo.root),
        "--manifest",
        MANIFEST_REL,
        "--receipt-out",
        str(receipt),
        env=standin.env(),
    )
    assert outcome.rc == 0
    assert outcome.stdout.startswith("ok: 2 active obligations executed")
    assert "python3 -m pytest tests/test_p1_b.py" in outcome.stderr
