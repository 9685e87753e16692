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
    RUNNER,
    Repo,
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
