"""CI compares the manifest with its base and replays its whole history.

``test_the_manifest_change_passes_the_base_commit_check`` is the suite's base-commit check: it
runs the real checker with ``--base-commit`` (HEAD's first parent, a pending change's HEAD, or the
event base a CI job passes in ``TENFERRO_LEDGER_BASE``; see ``resolve_suite_base``), so an
unversioned rewrite of an active row or an activation without its files fails ``.ci/run``.  The
replay test walks every manifest commit against its own parent; violations that landed before
the check existed must be acknowledged in the manifest, exactly.

The CI-path tests at the bottom build a temporary repository holding these test files and the
tools, commit a bad change there, and run this very check with pytest, as CI would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.contracts.ledger_support import (
    BASE_ENV,
    CHECKER,
    CHECKER_PACKAGE,
    FIXTURE_FILES,
    PRODUCTION_MANIFEST,
    REPLAY,
    REPO_ROOT,
    BaseUnavailable,
    NoRepository,
    Repo,
    activate,
    assert_clean,
    assert_envelope,
    assert_one_fault,
    fixture_manifest,
    git,
    resolve_suite_base,
    row,
    run_script,
    suite_base_check,
    toml_dumps,
)

ENVELOPE_MARK = "ledger-base-check-diagnostics:"


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def test_the_manifest_change_passes_the_base_commit_check() -> None:
    """The suite's base-commit check over this repository (CI runs it through .ci/run)."""
    try:
        base, outcome = suite_base_check(REPO_ROOT)
    except NoRepository as exc:
        if _in_ci():
            pytest.fail(f"CI must run from a git checkout so the ledger can be compared: {exc}")
        pytest.skip(f"not a git checkout, nothing to compare with: {exc}")
    except BaseUnavailable as exc:
        pytest.fail(str(exc))
    # One machine-readable line for whoever reads a failing CI log (and the CI-path tests).
    print(f"{ENVELOPE_MARK} {json.dumps(outcome.envelope, sort_keys=True)}")
    assert outcome.envelope["diagnostics"] == [], f"base: {base.how} ({base.base})"
    assert_clean(outcome)


def test_the_history_replays_clean_except_the_acknowledged_commits(tmp_path: Path) -> None:
    """Every manifest commit against its parent; only the acknowledged ones have diagnostics."""
    if subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", "--verify", "-q", "HEAD"],
        capture_output=True,
        check=False,
    ).returncode:
        if _in_ci():
            pytest.fail("CI must run from a git checkout so the ledger history can be replayed")
        pytest.skip("not a git checkout")
    report_path = tmp_path / "replay.json"
    outcome = run_script(
        REPO_ROOT / "scripts" / REPLAY.name,
        "--root",
        str(REPO_ROOT),
        "--manifest",
        PRODUCTION_MANIFEST,
        "--report-json",
        str(report_path),
        "--diagnostics-json",
    )
    assert_clean(outcome)
    report = json.loads(report_path.read_text("utf-8"))
    manifest = tomllib.loads((REPO_ROOT / PRODUCTION_MANIFEST).read_text("utf-8"))
    acknowledged = {a["commit"] for a in manifest.get("acknowledged", [])}
    for commit in report["commits"]:
        # A commit has diagnostics exactly when the manifest acknowledges it.
        assert bool(commit["diagnostics"]) == (commit["commit"] in acknowledged), commit
    if not report["shallow"]:
        replayed = {c["commit"] for c in report["commits"]}
        assert acknowledged <= replayed
        # The acknowledgements were written by one revision; every commit after it is clean.
        first_clean = next(
            i
            for i, c in enumerate(report["commits"])
            if c["transition"] == "revision" and c["commit"] not in acknowledged
        )
        assert all(not c["diagnostics"] for c in report["commits"][first_clean:]), report["commits"]


# ------------------------------------------------------------------------------------------
# Base resolution policy


def _fixture_repo(tmp_path: Path, name: str = "repo") -> Repo:
    root = tmp_path / name
    root.mkdir()
    git(root, "init", "-q")
    repo = Repo(root)
    for rel, text in FIXTURE_FILES.items():
        repo.write(rel, text)
    repo.write(PRODUCTION_MANIFEST, toml_dumps(fixture_manifest()))
    repo.commit("introduce the ledger")
    return repo


def test_a_root_commit_has_no_base_and_is_checked_structurally(tmp_path: Path) -> None:
    repo = _fixture_repo(tmp_path)
    base = resolve_suite_base(repo.root, env={})
    assert base.base is None


def test_the_base_is_the_first_parent_or_head_for_a_pending_edit(tmp_path: Path) -> None:
    repo = _fixture_repo(tmp_path)
    first = repo.head()
    repo.write("notes.txt", "x\n")
    repo.commit("unrelated")
    assert resolve_suite_base(repo.root, env={}).base == first
    manifest = fixture_manifest()
    activate(manifest, "p2-a")
    repo.write(PRODUCTION_MANIFEST, toml_dumps(manifest))
    assert resolve_suite_base(repo.root, env={}).base == "HEAD"
    # An explicit event base wins; GitHub's all-zero "before" of a new branch does not.
    assert resolve_suite_base(repo.root, env={BASE_ENV: first}).base == first
    assert resolve_suite_base(repo.root, env={BASE_ENV: "0" * 40}).base == "HEAD"


def test_a_shallow_clone_deepens_or_fails_never_passes_unchecked(tmp_path: Path) -> None:
    origin = _fixture_repo(tmp_path, "origin")
    parent = origin.head()
    origin.write("notes.txt", "x\n")
    origin.commit("second")
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", "--depth=1", f"file://{origin.root}", str(clone)],
        check=True,
        capture_output=True,
    )
    # The remote can deepen the clone: the real parent is fetched and used.
    assert resolve_suite_base(clone, env={}).base == parent
    # Without any way to fetch it, the check refuses to pass.
    lonely = tmp_path / "lonely"
    subprocess.run(
        ["git", "clone", "-q", "--depth=1", f"file://{origin.root}", str(lonely)],
        check=True,
        capture_output=True,
    )
    git(lonely, "remote", "remove", "origin")
    with pytest.raises(BaseUnavailable, match=parent):
        resolve_suite_base(lonely, env={})


def test_an_unpacked_tree_is_not_a_repository(tmp_path: Path) -> None:
    with pytest.raises(NoRepository):
        resolve_suite_base(tmp_path, env={})


# ------------------------------------------------------------------------------------------
# The CI path, end to end: pytest runs this file's check inside a temporary repository

SUITE_FILES = [
    "tests/contracts/__init__.py",
    "tests/contracts/conftest.py",
    "tests/contracts/ledger_support.py",
    "tests/contracts/test_ledger_base_commit.py",
]
CHECK_NODE = (
    "tests/contracts/test_ledger_base_commit.py"
    "::test_the_manifest_change_passes_the_base_commit_check"
)


@pytest.fixture
def ci_repo(tmp_path: Path) -> Repo:
    """A repository with the fixture ledger at the production path, the tools and this suite."""
    repo = _fixture_repo(tmp_path, "ci")
    for rel in SUITE_FILES:
        repo.write(rel, (REPO_ROOT / rel).read_text("utf-8"))
    repo.write("tests/__init__.py", "")
    shutil.copy2(CHECKER, repo.root / "scripts" / CHECKER.name)
    shutil.copytree(
        CHECKER_PACKAGE,
        repo.root / "scripts" / CHECKER_PACKAGE.name,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    repo.commit("the suite and its checker")
    return repo


def _run_suite_check(repo: Repo) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in (BASE_ENV, "PYTEST_ADDOPTS")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            CHECK_NODE,
        ],
        cwd=repo.root,
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=120,
    )


def _edit(repo: Repo, change: Callable[[dict[str, Any]], None], message: str) -> None:
    manifest = tomllib.loads((repo.root / PRODUCTION_MANIFEST).read_text("utf-8"))
    change(manifest)
    repo.write(PRODUCTION_MANIFEST, toml_dumps(manifest))
    repo.commit(message)


def _diagnostics(output: str) -> list[dict[str, Any]]:
    """The checker envelope that the failing check printed (pytest shows captured stdout)."""
    lines = [line for line in output.splitlines() if line.startswith(ENVELOPE_MARK)]
    assert len(lines) == 1, output
    return assert_envelope(json.loads(lines[0][len(ENVELOPE_MARK) :]))


def test_ci_path_rejects_an_unversioned_rewrite_of_an_active_row(ci_repo: Repo) -> None:
    def rewrite(m: dict[str, Any]) -> None:
        row(m, "p1-b")["gates"] = ["G1", "G2"]  # active; registry.revision untouched

    _edit(ci_repo, rewrite, "quietly widen an active row")
    done = _run_suite_check(ci_repo)
    assert done.returncode == 1, done.stdout + done.stderr
    diagnostics = _diagnostics(done.stdout)
    assert [(d["code"], d["fields"]) for d in diagnostics] == [
        ("E_OBLIGATION_CHANGED", {"obligation_id": "p1-b", "field": "gates"})
    ]


def test_ci_path_accepts_a_promotion_in_place(ci_repo: Repo) -> None:
    _edit(ci_repo, lambda m: activate(m, "p0-a"), "promote p0-a in place")
    done = _run_suite_check(ci_repo)
    assert done.returncode == 0, done.stdout + done.stderr


# The same check called directly (no pytest start-up) for the other ways to cheat.


def test_base_check_rejects_a_revision_that_rewrites_an_active_row(ci_repo: Repo) -> None:
    def revise(m: dict[str, Any]) -> None:
        m["registry"]["revision"] += 1
        row(m, "p1-b")["gates"] = ["G1", "G2"]  # a revision may only touch deferred rows

    _edit(ci_repo, revise, "revise an active row")
    _, outcome = suite_base_check(ci_repo.root)
    assert_one_fault(outcome, "E_OBLIGATION_CHANGED", {"obligation_id": "p1-b", "field": "gates"})


def test_base_check_rejects_an_activation_without_its_files(ci_repo: Repo) -> None:
    (ci_repo.root / "tests/test_p0_a.py").unlink()
    _edit(ci_repo, lambda m: activate(m, "p0-a"), "activate p0-a, whose test does not exist")
    _, outcome = suite_base_check(ci_repo.root)
    assert_one_fault(
        outcome,
        "E_ARTIFACT_MISSING",
        {"obligation_id": "p0-a", "artifact_id": "artifact-p0-a", "path": "tests/test_p0_a.py"},
    )


def test_base_check_rejects_an_unversioned_removal(ci_repo: Repo) -> None:
    def remove(m: dict[str, Any]) -> None:
        m["obligations"] = [r for r in m["obligations"] if r["id"] != "p3-b"]

    _edit(ci_repo, remove, "drop an obligation")
    _, outcome = suite_base_check(ci_repo.root)
    assert_one_fault(outcome, "E_OBLIGATION_REMOVED", {"obligation_id": "p3-b"})


def test_base_check_checks_a_pending_edit_against_head(ci_repo: Repo) -> None:
    manifest = tomllib.loads((ci_repo.root / PRODUCTION_MANIFEST).read_text("utf-8"))
    row(manifest, "p1-b")["gates"] = ["G2"]
    ci_repo.write(PRODUCTION_MANIFEST, toml_dumps(manifest))  # not committed
    base, outcome = suite_base_check(ci_repo.root)
    assert base.base == "HEAD"
    assert_one_fault(outcome, "E_OBLIGATION_CHANGED", {"obligation_id": "p1-b", "field": "gates"})
