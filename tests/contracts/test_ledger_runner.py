"""The runner over the fixture ledger, with a stand-in interpreter that records its argv.

The runner starts every `python3` argv with the interpreter that runs it (sys.executable), so
the tests launch the runner *with* the stand-in: it becomes the real interpreter under its own
name and every child `python3` argv comes back to it and is recorded.  It is a test fixture
only, not a production command mode.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.contracts.ledger_batch import batch_status, run_batch
from tests.contracts.ledger_support import (
    MANIFEST_REL,
    REPO_ROOT,
    RUNNER,
    Outcome,
    Repo,
    StandIn,
    activate,
    assert_clean,
    assert_one_fault,
    load_script,
    pytest_row,
    row,
    run_script,
    valid_receipt,
)

Manifest = dict[str, Any]
P1A = ["python3", "scripts/verify-ok.py", "data/p1-a.json"]
P1B = ["python3", "-m", "pytest", "tests/test_p1_b.py"]


def run_runner(
    repo: Repo, receipt: Path, env: dict[str, str], *extra: str, interpreter: Path | None = None
) -> Outcome:
    """Runs the runner; with a stand-in env, under the stand-in interpreter."""
    if interpreter is None and "LEDGER_STANDIN_LOG" in env:
        interpreter = Path(env["LEDGER_STANDIN_LOG"]).parent / "standin-bin" / "python3"
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
        interpreter=interpreter,
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
        interpreter=standin.exe,
    )
    assert outcome.rc == 0
    assert outcome.stdout.startswith("ok: 2 active obligations executed")
    assert "python3 -m pytest tests/test_p1_b.py" in outcome.stderr


# ------------------------------------------------------------------------------------------
# Interpreter resolution: `python3` argv run with the runner's own interpreter


def test_python3_argv_runs_with_the_runners_interpreter_not_path(
    make_repo: Callable[..., Repo], tmp_path: Path
) -> None:
    """A different `python3` first on PATH (a user's stale global one) is never used."""
    repo = make_repo()
    decoy_dir = tmp_path / "decoy-bin"
    decoy_dir.mkdir()
    marker = tmp_path / "decoy-was-called"
    decoy = decoy_dir / "python3"
    decoy.write_text(f"#!/bin/sh\ntouch {marker}\nexit 97\n", encoding="utf-8")
    decoy.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_STANDIN")}
    env["PATH"] = f"{decoy_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    receipt = tmp_path / "receipt.json"
    outcome = run_runner(repo, receipt, env)  # the current interpreter runs the runner
    assert_clean(outcome)
    assert not marker.exists()
    data = json.loads(receipt.read_text("utf-8"))
    # The receipt keeps the canonical argv; the resolution is reported on stderr.
    assert [e["argv"] for e in data["executions"]] == [P1A, P1B]
    assert all(e["exit_code"] == 0 for e in data["executions"])
    assert f"(argv[0] -> {sys.executable})" in outcome.stderr


def test_an_interpreter_without_a_path_runs_nothing(
    make_repo: Callable[..., Repo], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = load_script("run_storage_ownership_contracts", RUNNER)
    repo = make_repo()
    monkeypatch.setattr(sys, "executable", "")
    started: list[object] = []

    def execute(*argv: object) -> int:
        started.append(argv)
        return 0

    monkeypatch.setattr(runner, "execute", execute)
    args = argparse.Namespace(
        root=str(repo.root), manifest=MANIFEST_REL, base_commit=None, receipt_out="unused"
    )
    sink, receipt = runner.run(args)
    assert receipt is None and started == []
    assert [(d.code, d.fields) for d in sink.items] == [
        ("E_INTERPRETER_UNRESOLVED", {"argv0": "python3"})
    ]


def test_other_argv0_is_looked_up_on_path(make_repo: Callable[..., Repo]) -> None:
    runner = load_script("run_storage_ownership_contracts", RUNNER)
    assert runner.resolve_argv(["python3", "-m", "pytest"]) == [sys.executable, "-m", "pytest"]
    assert runner.resolve_argv(["cargo", "test"]) == ["cargo", "test"]
    assert runner.resolve_argv(["python3.11", "x.py"]) == ["python3.11", "x.py"]


# ------------------------------------------------------------------------------------------
# The stand-in's mode "batch" answers as pytest itself would

_BATCH_FILES = {
    "tests/test_good.py": "import pytest\n\n\ndef test_a() -> None:\n    pass\n\n\n"
    "@pytest.mark.parametrize('k', [1, 2])\ndef test_p(k: int) -> None:\n    assert k\n\n\n"
    "@pytest.mark.skip(reason='skipped')\ndef test_s() -> None:\n    pass\n",
    "tests/test_bad.py": "def test_ok() -> None:\n    pass\n\n\n"
    "def test_no() -> None:\n    assert False\n",
    "tests/test_teardown.py": "import pytest\n\n\n@pytest.fixture\ndef broken():\n    yield\n"
    "    raise RuntimeError('teardown')\n\n\ndef test_t(broken: None) -> None:\n    pass\n",
    "tests/test_broken.py": "import not_a_module_anywhere\n",
    "tests/test_empty.py": "X = 1\n",
    "tests/sub/test_deep.py": "def test_d() -> None:\n    pass\n",
    "tests/sub/test_deep_bad.py": "def test_d() -> None:\n    assert False\n",
}

_BATCH_TARGETS = [
    "tests/test_good.py",
    "tests/test_good.py::test_a",
    "tests/test_good.py::test_p",
    "tests/test_good.py::test_p[2]",
    "tests/test_good.py::test_s",
    "tests/test_good.py::test_never_written",
    "tests/test_good.py::test_p[3]",
    "tests/test_bad.py",
    "tests/test_bad.py::test_ok",
    "tests/test_bad.py::test_no",
    "tests/test_teardown.py",
    "tests/test_broken.py",
    "tests/test_empty.py",
    "tests/sub",
    "tests/sub/test_deep.py",
]


def test_batch_mode_gives_every_target_the_status_pytest_gives_it_alone(
    tmp_path: Path,
) -> None:
    """What lets the production receipt test run its pytest commands as one run: for a
    passing, a failing (in the call and in teardown), a skipped, an uncollectable, an empty
    and a nonexistent target, a parametrized case and a directory, the status read from one
    batch run equals the exit status of ``python -m pytest TARGET`` run by itself."""
    root = tmp_path / "batch"
    for rel, text in _BATCH_FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
        "PYTHONDONTWRITEBYTECODE": "1",
        # plain pytest for this plain tree (hypothesis, xdist, ... would cost ~1 s a run)
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    out = tmp_path / "batch.json"
    run_batch(root, _BATCH_TARGETS, out, env)
    record = json.loads(out.read_text("utf-8"))
    alone = {
        t: subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", t],
            cwd=root, env=env, capture_output=True, check=False,
        ).returncode
        for t in _BATCH_TARGETS
    }
    assert {t: batch_status(record, t) for t in _BATCH_TARGETS} == alone
    assert set(alone.values()) == {0, 1, 2, 4, 5}
    # A batch that never reached its tests gives its own status to every target.
    assert batch_status({**record, "status": 3}, "tests/test_good.py") == 3
