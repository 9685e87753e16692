"""The CLI contract: --contract-schema probes, option handling, the diagnostic registry."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from tests.contracts import test_ledger_history_faults as history
from tests.contracts import test_ledger_manifest_faults as manifest_faults
from tests.contracts.ledger_support import (
    CHECKER,
    EXPECTED_FIELDS,
    MANIFEST_REL,
    REPLAY,
    RUNNER,
    Outcome,
    Repo,
    assert_one_fault,
    run_script,
)

CHECKER_CONTRACT = {
    "schema": "tenferro.storage-ownership-cli-contract.v1",
    "tool": "check-storage-ownership-contracts",
    "role": "checker",
    "manifest_schema": "tenferro.storage-ownership-contracts.v2",
    "probe": "--contract-schema",
    "options": [
        "--root",
        "--manifest",
        "--base-commit",
        "--receipt",
        "--summary-json",
        "--diagnostics-json",
    ],
}
RUNNER_CONTRACT = {
    "schema": "tenferro.storage-ownership-cli-contract.v1",
    "tool": "run-storage-ownership-contracts",
    "role": "runner",
    "manifest_schema": "tenferro.storage-ownership-contracts.v2",
    "probe": "--contract-schema",
    "options": ["--root", "--manifest", "--base-commit", "--receipt-out", "--diagnostics-json"],
}


@pytest.mark.parametrize(
    ("script", "contract"), [(CHECKER, CHECKER_CONTRACT), (RUNNER, RUNNER_CONTRACT)]
)
def test_contract_schema_probe(script: Path, contract: dict[str, object], tmp_path: Path) -> None:
    # Run from an empty directory: the probe must not look for a manifest or a repository.
    outcome = run_script(script, "--contract-schema", cwd=tmp_path)
    assert outcome.rc == 0
    assert outcome.stderr == ""
    assert outcome.stdout.count("\n") == 1
    assert json.loads(outcome.stdout) == contract


@pytest.mark.parametrize("script", [CHECKER, RUNNER])
def test_missing_required_options_is_a_usage_error(script: Path, tmp_path: Path) -> None:
    outcome = run_script(script, cwd=tmp_path)
    assert outcome.rc == 2
    assert outcome.stdout == ""
    assert "--root" in outcome.stderr


@pytest.mark.parametrize("script", [CHECKER, RUNNER])
def test_no_caller_supplied_candidate(script: Path, tmp_path: Path) -> None:
    args = ["--root", ".", "--manifest", "m.toml", "--receipt-out", "r.json"]
    outcome = run_script(script, *args, "--candidate-commit", "abc", cwd=tmp_path)
    assert outcome.rc == 2 and outcome.stdout == ""


def test_human_mode_reports_on_stderr(make_repo: Callable[..., Repo], tmp_path: Path) -> None:
    repo = make_repo("schema = 'other'\n", commit=False)
    outcome = run_script(CHECKER, "--root", str(repo.root), "--manifest", MANIFEST_REL)
    assert outcome.rc == 1 and outcome.stdout == ""
    assert "E_SCHEMA_MISMATCH" in outcome.stderr
    ok = run_script(CHECKER, "--root", str(make_repo().root), "--manifest", MANIFEST_REL)
    assert ok.rc == 0 and ok.stderr == ""
    assert ok.stdout == "ok: 9 obligations, 2 active, 7 deferred\n"


def test_cli_diagnostics_envelope_from_a_subprocess(make_repo: Callable[..., Repo]) -> None:
    repo = make_repo("schema = 'other'\n", commit=False)
    outcome = run_script(
        CHECKER, "--root", str(repo.root), "--manifest", MANIFEST_REL, "--diagnostics-json"
    )
    assert outcome.rc == 1 and outcome.stderr == ""
    assert outcome.codes == ["E_SCHEMA_MISMATCH"]


def test_checker_registry_matches_the_suite_registry(checker_module: ModuleType) -> None:
    assert checker_module.DIAGNOSTIC_FIELDS == EXPECTED_FIELDS


# Codes exercised by standalone tests rather than the case tables.
STANDALONE_CODES = {
    "E_SCHEMA_MISMATCH",
    "E_BASE_UNRESOLVED",
    "E_BASE_NOT_ANCESTOR",
    "E_BASE_MANIFEST",
    "E_RECEIPT_MISSING",
    "E_RECEIPT_JSON",
    "E_RECEIPT_WRITE",
    "E_TREE_DIRTY",
    "E_PATH_UNTRACKED",
    "E_GIT_CANDIDATE",
    "E_ROOT_INVALID",
    "E_MANIFEST_PATH_ESCAPE",
    "E_MANIFEST_MISSING",
    "E_MANIFEST_TOML",
    # test_ledger_cli.py (usage errors, summary)
    "E_USAGE",
    "E_SUMMARY_WRITE",
    # test_ledger_history_replay.py
    "E_REVISION_LOG",
    "E_REVISION_LOG_CHANGED",
    "E_ACKNOWLEDGED_INVALID",
    "E_ACKNOWLEDGED_CHANGED",
    "E_HISTORY_UNACKNOWLEDGED",
    "E_HISTORY_ACK_STALE",
    # test_ledger_runner.py (interpreter resolution)
    "E_INTERPRETER_UNRESOLVED",
    # test_ledger_manifest_faults.py (selector resolution by collection)
    "E_SELECTOR_UNRESOLVED",
}


def test_every_registered_code_has_a_one_fault_case() -> None:
    covered = {f.code for f in manifest_faults.FAULTS}
    covered |= {t.code for t in history.TRANSITIONS if t.code is not None}
    covered |= {r.code for r in history.RECEIPT_FAULTS}
    assert set(EXPECTED_FIELDS) - covered - STANDALONE_CODES == set()


def test_runner_does_not_accept_an_abbreviated_option(tmp_path: Path) -> None:
    args = ["--root", ".", "--manifest", "m.toml", "--receipt", "r.json"]
    outcome = run_script(RUNNER, *args, cwd=tmp_path)
    assert outcome.rc == 2 and "--receipt-out" in outcome.stderr


# ------------------------------------------------------------------------------------------
# Usage errors: with --diagnostics-json they are one E_USAGE diagnostic in the envelope

TOOLS = [CHECKER, RUNNER, REPLAY]
FULL_ARGS = {
    CHECKER: ["--root", ".", "--manifest", "m.toml"],
    RUNNER: ["--root", ".", "--manifest", "m.toml", "--receipt-out", "r.json"],
    REPLAY: ["--root", ".", "--manifest", "m.toml"],
}


@pytest.mark.parametrize("script", TOOLS, ids=lambda p: p.stem)
@pytest.mark.parametrize(
    ("mistake", "options"),
    [
        ("unknown-option", ["--bogus"]),
        ("missing-required", ["--manifest"]),
        ("missing-value", ["--root"]),
    ],
)
def test_usage_errors_emit_the_envelope(
    script: Path, mistake: str, options: list[str], tmp_path: Path
) -> None:
    args = list(FULL_ARGS[script])
    if mistake == "unknown-option":
        args.append("--bogus")
    elif mistake == "missing-required":
        i = args.index("--manifest")
        del args[i : i + 2]
    else:
        i = args.index("--root")
        del args[i : i + 2]
        args = [*args, "--diagnostics-json", "--root"]
    if "--diagnostics-json" not in args:
        args.append("--diagnostics-json")
    outcome = run_script(script, *args, cwd=tmp_path)
    assert outcome.rc == 2
    assert "usage:" in outcome.stderr  # the human text is still there
    # rc 2 is the usage status; assert_one_fault checks rc 1, so compare the envelope directly.
    found = assert_one_fault(_as_rc1(outcome), "E_USAGE", {"options": options})
    assert found["message"].strip()


def _as_rc1(outcome: Outcome) -> Outcome:
    return Outcome(1, outcome.stdout, outcome.stderr)


@pytest.mark.parametrize("script", TOOLS, ids=lambda p: p.stem)
def test_usage_errors_without_the_flag_keep_stdout_empty(script: Path, tmp_path: Path) -> None:
    outcome = run_script(script, *FULL_ARGS[script], "--bogus", cwd=tmp_path)
    assert outcome.rc == 2 and outcome.stdout == ""
    assert "unrecognized arguments: --bogus" in outcome.stderr


def test_an_unwritable_summary_is_a_diagnostic(
    make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome], tmp_path: Path
) -> None:
    outcome = run_checker(make_repo(), "--summary-json", str(tmp_path))  # a directory
    assert_one_fault(outcome, "E_SUMMARY_WRITE", {"path": str(tmp_path)})


def test_missing_files_are_diagnostics_not_tracebacks(tmp_path: Path) -> None:
    repo_less = tmp_path / "nowhere"
    for script in TOOLS:
        args = [a if a != "." else str(repo_less) for a in FULL_ARGS[script]]
        outcome = run_script(script, *args, "--diagnostics-json", cwd=tmp_path)
        assert_one_fault(outcome, "E_ROOT_INVALID", {"root": str(repo_less)})
        assert "Traceback" not in outcome.stderr
