"""One-fault cases that need git history or a receipt: promotion, revision, receipt, provenance.

Promotion cases commit a base ledger, then a candidate, and run the checker with --base-commit.
Receipt cases commit the fixture ledger and hand the checker a receipt (written outside the
repository) that differs from the canonical one in exactly one way.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.contracts.ledger_support import (
    ANY,
    MANIFEST_REL,
    Outcome,
    Repo,
    activate,
    assert_clean,
    assert_one_fault,
    git,
    pytest_row,
    row,
    valid_receipt,
)

Manifest = dict[str, Any]


# ------------------------------------------------------------------------------------------
# Promotion and revision-only amendment


@dataclass(frozen=True)
class Transition:
    id: str
    change: Callable[[Manifest], None]
    code: str | None  # None: the transition is legal
    fields: dict[str, Any]


def _promote(*oids: str) -> Callable[[Manifest], None]:
    return lambda m: activate(m, *oids)


def _revise(then: Callable[[Manifest], None] | None = None) -> Callable[[Manifest], None]:
    def change(m: Manifest) -> None:
        m["registry"]["revision"] += 1
        if then is not None:
            then(m)

    return change


def _gates(oid: str, gates: list[str]) -> Callable[[Manifest], None]:
    def change(m: Manifest) -> None:
        row(m, oid)["gates"] = gates

    return change


def _both(*changes: Callable[[Manifest], None]) -> Callable[[Manifest], None]:
    def change(m: Manifest) -> None:
        for c in changes:
            c(m)

    return change


def _remove(oid: str) -> Callable[[Manifest], None]:
    def change(m: Manifest) -> None:
        m["obligations"] = [r for r in m["obligations"] if r["id"] != oid]

    return change


def _add(oid: str, unit: str, *, active: bool) -> Callable[[Manifest], None]:
    def change(m: Manifest) -> None:
        new = pytest_row(oid, unit, active=active)
        # Reuse an existing file so the new row's paths are real.
        new["artifact"]["path"] = "tests/test_p1_b.py"
        new["command"]["argv"][3] = "tests/test_p1_b.py"
        new["command"]["path_args"] = ["tests/test_p1_b.py"]
        m["obligations"].append(new)

    return change


def _demote(oid: str) -> Callable[[Manifest], None]:
    def change(m: Manifest) -> None:
        row(m, oid)["state"] = {
            "kind": "deferred",
            "activation_unit": row(m, oid)["unit"],
            "promotion": {"mode": "activate-in-place"},
        }

    return change


def _move_unit(oid: str, unit: str) -> Callable[[Manifest], None]:
    def change(m: Manifest) -> None:
        row(m, oid)["unit"] = unit
        row(m, oid)["state"]["activation_unit"] = unit

    return change


def _add_gate(m: Manifest) -> None:
    m["registry"]["gates"].append({"id": "G3", "title": "gate three"})


TRANSITIONS: list[Transition] = [
    Transition("promote-in-place", _promote("p2-a"), None, {}),
    Transition("revise-deferred-row", _revise(_gates("p2-a", ["G1", "G2"])), None, {}),
    Transition("add-deferred-row", _add("p1-c", "P1", active=False), None, {}),
    Transition("unchanged", lambda m: None, None, {}),
    Transition(
        "promotion-changes-gates",
        _both(_promote("p2-a"), _gates("p2-a", ["G1", "G2"])),
        "E_OBLIGATION_CHANGED",
        {"obligation_id": "p2-a", "field": "gates"},
    ),
    Transition(
        "deferred-row-edited-without-revision",
        _gates("p2-a", ["G2"]),
        "E_OBLIGATION_CHANGED",
        {"obligation_id": "p2-a", "field": "gates"},
    ),
    Transition(
        "registry-edit",
        _add_gate,
        "E_REGISTRY_CHANGED",
        {"field": "gates"},
    ),
    Transition(
        "revision-skips",
        lambda m: m["registry"].__setitem__("revision", 3),
        "E_REVISION_STEP",
        {"base_revision": 1, "candidate_revision": 3},
    ),
    Transition(
        "revision-goes-back",
        lambda m: m["registry"].__setitem__("revision", 0),
        "E_REVISION_INVALID",
        {"actual": 0},
    ),
    Transition(
        "revision-with-promotion",
        _revise(_promote("p2-a")),
        "E_REVISION_WITH_PROMOTION",
        {"obligation_id": "p2-a"},
    ),
    Transition(
        "revision-rewrites-active-row",
        _revise(_gates("p1-b", ["G1", "G2"])),
        "E_OBLIGATION_CHANGED",
        {"obligation_id": "p1-b", "field": "gates"},
    ),
    Transition(
        "revision-moves-deferred-row-to-other-unit",
        _revise(_move_unit("p3-b", "P9")),
        "E_OBLIGATION_CHANGED",
        {"obligation_id": "p3-b", "field": "unit"},
    ),
    Transition(
        "revision-adds-row",
        _revise(_add("p1-c", "P1", active=False)),
        "E_OBLIGATION_ADDED",
        {"obligation_id": "p1-c"},
    ),
    Transition(
        "new-row-born-active",
        _add("p1-c", "P1", active=True),
        "E_OBLIGATION_ADDED",
        {"obligation_id": "p1-c"},
    ),
    Transition("row-removed", _remove("p3-b"), "E_OBLIGATION_REMOVED", {"obligation_id": "p3-b"}),
    Transition("demotion", _demote("p1-b"), "E_STATE_REGRESSION", {"obligation_id": "p1-b"}),
    Transition(
        "promoted-with-its-prerequisite",
        _promote("p2-a", "p4-a"),
        "E_PREREQUISITE_NOT_ALREADY_ACTIVE",
        {"node": "P4", "prerequisite": "P2"},
    ),
]


@pytest.mark.parametrize("case", TRANSITIONS, ids=[t.id for t in TRANSITIONS])
def test_promotion_and_revision(
    case: Transition,
    manifest: Manifest,
    make_repo: Callable[..., Repo],
    run_checker: Callable[..., Outcome],
) -> None:
    repo = make_repo(manifest)
    base = repo.head()
    candidate = copy.deepcopy(manifest)
    case.change(candidate)
    repo.write_manifest(candidate)
    repo.commit("candidate")
    outcome = run_checker(repo, "--base-commit", base)
    if case.code is None:
        assert_clean(outcome)
    else:
        assert_one_fault(outcome, case.code, case.fields)


def test_cohort_promotes_atomically_after_its_prerequisites(
    manifest: Manifest, make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    activate(manifest, "p0-a", "p2-a", "p4-a", "p5-a")
    repo = make_repo(manifest)
    base = repo.head()
    partial = copy.deepcopy(manifest)
    activate(partial, "p3-a", "p3-b")
    repo.write_manifest(partial)
    repo.commit("partial cohort")
    assert_one_fault(
        run_checker(repo, "--base-commit", base),
        "E_COHORT_PARTIAL_ACTIVATION",
        {"cohort_id": "cutover", "active": ["p3-a", "p3-b"], "deferred": ["p9-a"]},
    )
    activate(partial, "p9-a")
    repo.write_manifest(partial)
    repo.commit("whole cohort")
    assert_clean(run_checker(repo, "--base-commit", base))


def test_base_is_canonicalized_from_a_revision_expression(
    manifest: Manifest,
    make_repo: Callable[..., Repo],
    run_checker: Callable[..., Outcome],
    tmp_path: Path,
) -> None:
    repo = make_repo(manifest)
    base = repo.head()
    activate(manifest, "p2-a")
    repo.write_manifest(manifest)
    candidate = repo.commit("promote p2-a")
    receipt = tmp_path / "receipt.json"
    receipt.write_text(json.dumps(valid_receipt(manifest, candidate, base)), encoding="utf-8")
    assert_clean(run_checker(repo, "--base-commit", "HEAD~1", "--receipt", str(receipt)))
    # The receipt records the canonical object id, never the alias.
    receipt.write_text(json.dumps(valid_receipt(manifest, candidate, "HEAD~1")), "utf-8")
    assert_one_fault(
        run_checker(repo, "--base-commit", "HEAD~1", "--receipt", str(receipt)),
        "E_RECEIPT_BASE",
        {"expected": base, "actual": "HEAD~1"},
    )


def test_base_unresolved(
    make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    outcome = run_checker(make_repo(), "--base-commit", "no-such-branch")
    assert_one_fault(outcome, "E_BASE_UNRESOLVED", {"revision": "no-such-branch"})


def test_base_option_injection_is_refused(
    make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    outcome = run_checker(make_repo(), "--base-commit=--all")
    assert_one_fault(outcome, "E_BASE_UNRESOLVED", {"revision": "--all"})


def test_base_not_an_ancestor(
    make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    repo = make_repo()
    head = repo.head()
    repo.write("notes.txt", "later\n")
    later = repo.commit("later")
    git(repo.root, "reset", "-q", "--hard", head)
    assert_one_fault(
        run_checker(repo, "--base-commit", later),
        "E_BASE_NOT_ANCESTOR",
        {"base_commit": later, "candidate_commit": head},
    )


def test_base_without_manifest(
    make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    repo = make_repo(commit=False)
    manifest_text = (repo.root / MANIFEST_REL).read_text("utf-8")
    (repo.root / MANIFEST_REL).unlink()
    first = repo.commit("before the ledger")
    repo.write_manifest(manifest_text)
    repo.commit("ledger")
    assert_one_fault(
        run_checker(repo, "--base-commit", first),
        "E_BASE_MANIFEST",
        {"base_commit": first, "path": MANIFEST_REL},
    )


# ------------------------------------------------------------------------------------------
# Receipts


@dataclass(frozen=True)
class ReceiptFault:
    id: str
    change: Callable[[dict[str, Any]], None]
    code: str
    fields: dict[str, Any]


def _ex(receipt: dict[str, Any], index: int) -> dict[str, Any]:
    execution: dict[str, Any] = receipt["executions"][index]
    return execution


def _set_ex(index: int, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda r: _ex(r, index).__setitem__(key, value)


def _append_execution(oid: str, argv: list[str], path: str) -> Callable[[dict[str, Any]], None]:
    entry = {"obligation_id": oid, "argv": argv, "cwd": ".", "artifact_path": path, "exit_code": 0}
    return lambda r: r["executions"].append(entry)


P1A_ARGV = ["python3", "scripts/verify-ok.py", "data/p1-a.json"]
P1B_ARGV = ["python3", "-m", "pytest", "tests/test_p1_b.py"]

RECEIPT_FAULTS: list[ReceiptFault] = [
    ReceiptFault(
        "extra-top-level-key",
        lambda r: r.__setitem__("runner", "ci"),
        "E_RECEIPT_SHAPE",
        {"pointer": "/runner"},
    ),
    ReceiptFault(
        "missing-executions",
        lambda r: r.pop("executions"),
        "E_RECEIPT_SHAPE",
        {"pointer": "/executions"},
    ),
    ReceiptFault(
        "missing-base-field",
        lambda r: r.pop("base_commit"),
        "E_RECEIPT_SHAPE",
        {"pointer": "/base_commit"},
    ),
    ReceiptFault(
        "wrong-schema",
        lambda r: r.__setitem__("schema", "tenferro.storage-ownership-receipt.v0"),
        "E_RECEIPT_SHAPE",
        {"pointer": "/schema"},
    ),
    ReceiptFault(
        "exit-code-string",
        _set_ex(0, "exit_code", "0"),
        "E_RECEIPT_SHAPE",
        {"pointer": "/executions/0/exit_code"},
    ),
    ReceiptFault(
        "execution-repeats-command-id",
        _set_ex(0, "command_id", "cmd-p1-a"),
        "E_RECEIPT_SHAPE",
        {"pointer": "/executions/0/command_id"},
    ),
    ReceiptFault(
        "declares-terminal",
        lambda r: r.__setitem__("terminal", True),
        "E_RECEIPT_TERMINALITY",
        {"pointer": "/terminal"},
    ),
    ReceiptFault(
        "declares-complete-units",
        lambda r: r.__setitem__("complete_units", ["P1"]),
        "E_RECEIPT_TERMINALITY",
        {"pointer": "/complete_units"},
    ),
    ReceiptFault(
        "execution-declares-status",
        _set_ex(1, "status", "complete"),
        "E_RECEIPT_TERMINALITY",
        {"pointer": "/executions/1/status"},
    ),
    ReceiptFault(
        "other-candidate",
        lambda r: r.__setitem__("candidate_commit", "0123abcd"),
        "E_RECEIPT_CANDIDATE",
        {"expected": ANY, "actual": "0123abcd"},
    ),
    ReceiptFault(
        "base-without-comparison",
        lambda r: r.__setitem__("base_commit", "0123abcd"),
        "E_RECEIPT_BASE",
        {"expected": None, "actual": "0123abcd"},
    ),
    ReceiptFault(
        "unsorted",
        lambda r: r["executions"].reverse(),
        "E_RECEIPT_ORDER",
        {"index": 1, "obligation_id": "p1-a"},
    ),
    ReceiptFault(
        "executed-twice",
        _append_execution("p1-b", P1B_ARGV, "tests/test_p1_b.py"),
        "E_RECEIPT_DUPLICATE",
        {"obligation_id": "p1-b"},
    ),
    ReceiptFault(
        "unknown-obligation",
        _append_execution("p1-zz", P1B_ARGV, "tests/test_p1_b.py"),
        "E_RECEIPT_UNKNOWN_OBLIGATION",
        {"obligation_id": "p1-zz"},
    ),
    ReceiptFault(
        "deferred-executed",
        _append_execution("p2-a", ["python3", "-m", "pytest", "tests/test_p2_a.py"], "x"),
        "E_RECEIPT_DEFERRED",
        {"obligation_id": "p2-a"},
    ),
    ReceiptFault(
        "incomplete",
        lambda r: r["executions"].pop(),
        "E_RECEIPT_INCOMPLETE",
        {"obligation_id": "p1-b"},
    ),
    ReceiptFault(
        "argv-binding",
        _set_ex(0, "argv", ["python3", "scripts/verify-ok.py", "data/other.json"]),
        "E_RECEIPT_BINDING",
        {
            "obligation_id": "p1-a",
            "field": "argv",
            "expected": P1A_ARGV,
            "actual": ["python3", "scripts/verify-ok.py", "data/other.json"],
        },
    ),
    ReceiptFault(
        "cwd-binding",
        _set_ex(1, "cwd", "tests"),
        "E_RECEIPT_BINDING",
        {"obligation_id": "p1-b", "field": "cwd", "expected": ".", "actual": "tests"},
    ),
    ReceiptFault(
        "artifact-binding",
        _set_ex(1, "artifact_path", "tests/test_p2_a.py"),
        "E_RECEIPT_BINDING",
        {
            "obligation_id": "p1-b",
            "field": "artifact_path",
            "expected": "tests/test_p1_b.py",
            "actual": "tests/test_p2_a.py",
        },
    ),
    ReceiptFault(
        "exit-status",
        _set_ex(0, "exit_code", 3),
        "E_COMMAND_FAILED",
        {"obligation_id": "p1-a", "exit_code": 3},
    ),
    ReceiptFault(
        "killed-by-signal",
        _set_ex(1, "exit_code", -9),
        "E_COMMAND_FAILED",
        {"obligation_id": "p1-b", "exit_code": -9},
    ),
]


@pytest.mark.parametrize("case", RECEIPT_FAULTS, ids=[c.id for c in RECEIPT_FAULTS])
def test_receipt_fault(
    case: ReceiptFault,
    manifest: Manifest,
    make_repo: Callable[..., Repo],
    run_checker: Callable[..., Outcome],
    tmp_path: Path,
) -> None:
    repo = make_repo(manifest)
    receipt = valid_receipt(manifest, repo.head())
    case.change(receipt)
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt), encoding="utf-8")
    assert_one_fault(run_checker(repo, "--receipt", str(path)), case.code, case.fields)


def test_valid_receipt_derives_completion(
    manifest: Manifest,
    make_repo: Callable[..., Repo],
    run_checker: Callable[..., Outcome],
    tmp_path: Path,
) -> None:
    repo = make_repo(manifest)
    receipt = tmp_path / "receipt.json"
    receipt.write_text(json.dumps(valid_receipt(manifest, repo.head())), encoding="utf-8")
    summary = tmp_path / "summary.json"
    assert_clean(run_checker(repo, "--receipt", str(receipt), "--summary-json", str(summary)))
    data = json.loads(summary.read_text("utf-8"))
    assert data["complete_units"] == ["P1"]
    assert data["terminal"] is False
    assert data["candidate_commit"] == repo.head()
    assert data["counts"] == {"units": 7, "obligations": 9, "active": 2, "deferred": 7}
    p1 = next(u for u in data["units"] if u["id"] == "P1")
    assert p1["active"] == ["p1-a", "p1-b"] and p1["complete"] is True


def test_summary_without_receipt_claims_no_completion(
    make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome], tmp_path: Path
) -> None:
    summary = tmp_path / "summary.json"
    assert_clean(run_checker(make_repo(), "--summary-json", str(summary)))
    data = json.loads(summary.read_text("utf-8"))
    assert data["complete_units"] == [] and data["terminal"] is False
    assert data["receipt_validated"] is False


def test_terminal_state_is_derived_when_every_unit_is_complete(
    manifest: Manifest,
    make_repo: Callable[..., Repo],
    run_checker: Callable[..., Outcome],
    tmp_path: Path,
) -> None:
    activate(manifest, *(r["id"] for r in manifest["obligations"]))
    repo = make_repo(manifest)
    receipt = tmp_path / "receipt.json"
    receipt.write_text(json.dumps(valid_receipt(manifest, repo.head())), encoding="utf-8")
    summary = tmp_path / "summary.json"
    assert_clean(run_checker(repo, "--receipt", str(receipt), "--summary-json", str(summary)))
    assert json.loads(summary.read_text("utf-8"))["terminal"] is True


def test_receipt_missing(
    make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    outcome = run_checker(make_repo(), "--receipt", "/nonexistent/receipt.json")
    assert_one_fault(outcome, "E_RECEIPT_MISSING", {"path": "/nonexistent/receipt.json"})


def test_receipt_not_json(
    make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome], tmp_path: Path
) -> None:
    path = tmp_path / "receipt.json"
    path.write_text("{not json", encoding="utf-8")
    assert_one_fault(
        run_checker(make_repo(), "--receipt", str(path)), "E_RECEIPT_JSON", {"path": str(path)}
    )


# ------------------------------------------------------------------------------------------
# Provenance


def test_dirty_tracked_tree_rejects_the_receipt(
    manifest: Manifest,
    make_repo: Callable[..., Repo],
    run_checker: Callable[..., Outcome],
    tmp_path: Path,
) -> None:
    repo = make_repo(manifest)
    receipt = tmp_path / "receipt.json"
    receipt.write_text(json.dumps(valid_receipt(manifest, repo.head())), encoding="utf-8")
    repo.write("data/p1-a.json", '{"edited": true}\n')
    repo.write("untracked-notes.txt", "untracked files are allowed\n")
    assert_one_fault(
        run_checker(repo, "--receipt", str(receipt)), "E_TREE_DIRTY", {"paths": ["data/p1-a.json"]}
    )


def test_untracked_active_artifact_is_not_evidence(
    manifest: Manifest,
    make_repo: Callable[..., Repo],
    run_checker: Callable[..., Outcome],
    tmp_path: Path,
) -> None:
    row(manifest, "p1-b")["artifact"]["path"] = "tests/test_fresh.py"
    row(manifest, "p1-b")["command"]["argv"][3] = "tests/test_fresh.py"
    row(manifest, "p1-b")["command"]["path_args"] = ["tests/test_fresh.py"]
    repo = make_repo(manifest)
    repo.write("tests/test_fresh.py", "def test_ok() -> None:\n    pass\n")  # never committed
    receipt = tmp_path / "receipt.json"
    receipt.write_text(json.dumps(valid_receipt(manifest, repo.head())), encoding="utf-8")
    assert_one_fault(
        run_checker(repo, "--receipt", str(receipt)),
        "E_PATH_UNTRACKED",
        {"path": "tests/test_fresh.py"},
    )


def test_receipt_needs_a_candidate_commit(
    make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome], tmp_path: Path
) -> None:
    repo = make_repo(commit=False)
    receipt = tmp_path / "receipt.json"
    receipt.write_text("{}", encoding="utf-8")
    outcome = run_checker(repo, "--receipt", str(receipt))
    assert_one_fault(outcome, "E_GIT_CANDIDATE", {"root": str(repo.root.resolve())})


# ------------------------------------------------------------------------------------------
# Invocation


def test_root_must_be_a_directory(
    make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome], tmp_path: Path
) -> None:
    missing = str(tmp_path / "absent")
    assert_one_fault(
        run_checker(make_repo(commit=False), root=missing), "E_ROOT_INVALID", {"root": missing}
    )


def test_root_must_be_the_top_level(
    make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    repo = make_repo(commit=False)
    sub = str(repo.root / "tests")
    assert_one_fault(run_checker(repo, root=sub), "E_ROOT_INVALID", {"root": sub})


@pytest.mark.parametrize(
    ("manifest_arg", "code"),
    [
        ("../elsewhere.toml", "E_MANIFEST_PATH_ESCAPE"),
        ("/etc/hosts", "E_MANIFEST_PATH_ESCAPE"),
        ("ledger/missing.toml", "E_MANIFEST_MISSING"),
    ],
)
def test_manifest_argument(
    manifest_arg: str,
    code: str,
    make_repo: Callable[..., Repo],
    run_checker: Callable[..., Outcome],
) -> None:
    outcome = run_checker(make_repo(commit=False), manifest=manifest_arg)
    assert_one_fault(outcome, code, {"path": manifest_arg})


def test_manifest_not_toml(
    make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    repo = make_repo("schema = [unterminated\n", commit=False)
    assert_one_fault(run_checker(repo), "E_MANIFEST_TOML", {"path": MANIFEST_REL})
