"""The checked-in production ledger: it parses, it is valid, and the runner's receipt validates.

These tests use the real repository.  When an active row's artifact is missing they fail loudly:
an active row without evidence is exactly what the ledger exists to reject.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.contracts.ledger_support import (
    CHECKER,
    PRODUCTION_MANIFEST,
    REPO_ROOT,
    RUNNER,
    Outcome,
    StandIn,
    assert_clean,
    assert_envelope,
    assert_one_fault,
    copy_working_tree,
    make_standin,
    run_script,
)

# The contractual lifecycle state (not a count: the IDs themselves).  Phase 1 activated
# the four P1 rows; P2 (root claims) was promoted in place once its real evidence landed
# (tests/storage/test_ownership.py), by a promotion-only change checked against its base.
ACTIVE_IDS = {
    "p1-ledger",
    "p1-contract-document",
    "p1-api-parity",
    "p1-element-access-baseline",
    "p2-root-claims",
    "p2-root-import-boundary",
    "p0-engine-identity",
    "p4-access-retirement",
    "p4-event-retirement",
    "p4-prepared-access-api",
    "p4-traversal-resolution-counts",
    # Revision 3 bound their real evidence; then promoted in place (P0 is a root, P2 was active).
    "p0-engine-discovery-docs",
    "p4-prepared-borrow-shape",
    # P4 complete in the base, so P5 (allocation groups) promoted in place: with P0 complete,
    # every prerequisite of the atomic cutover cohort is now active.
    "p5-allocation-group",
    "p5-disjointness-proof",
    "p5-group-extraction",
}


@pytest.fixture(scope="module")
def production() -> dict[str, Any]:
    with (REPO_ROOT / PRODUCTION_MANIFEST).open("rb") as f:
        return tomllib.load(f)


def test_checker_accepts_the_production_manifest(tmp_path: Path) -> None:
    """CI runs the checker over the production manifest through this test."""
    summary = tmp_path / "summary.json"
    outcome = run_script(
        CHECKER,
        "--root",
        str(REPO_ROOT),
        "--manifest",
        PRODUCTION_MANIFEST,
        "--summary-json",
        str(summary),
        "--diagnostics-json",
    )
    assert_clean(outcome)
    assert outcome.stderr == ""
    data = json.loads(summary.read_text("utf-8"))
    rows = tomllib.loads((REPO_ROOT / PRODUCTION_MANIFEST).read_text("utf-8"))["obligations"]
    assert data["counts"]["obligations"] == len(rows)
    assert data["counts"]["active"] == sum(r["state"]["kind"] == "active" for r in rows)
    assert data["complete_units"] == [] and data["terminal"] is False


def test_lifecycle_state_is_the_contractual_one(production: dict[str, Any]) -> None:
    rows = production["obligations"]
    active = {r["id"] for r in rows if r["state"]["kind"] == "active"}
    assert active == ACTIVE_IDS
    for r in rows:
        if r["state"]["kind"] == "deferred":
            assert r["state"]["activation_unit"] == r["unit"], r["id"]
            assert r["state"]["promotion"] == {"mode": "activate-in-place"}, r["id"]
    units = [u["id"] for u in production["registry"]["units"]]
    assert units == [f"P{i}" for i in range(13)] + ["P13-A", "P13-B"]
    by_unit = {u: [r for r in rows if r["unit"] == u] for u in units}
    assert all(by_unit.values()), "every unit owns at least one obligation"
    # P0, P1, P2, P4 and P5 have every row active: the cutover cohort's prerequisites (P0, P5)
    # are met; the cohort itself (P3 + P9) is still wholly deferred.
    for unit in ("P0", "P1", "P2", "P4", "P5"):
        assert all(r["state"]["kind"] == "active" for r in by_unit[unit]), unit
    for unit in ("P3", "P9"):
        assert all(r["state"]["kind"] == "deferred" for r in by_unit[unit]), unit
    assert production["registry"]["cohorts"][0]["members"] == ["P3", "P9"]
    assert [g["id"] for g in production["registry"]["gates"]] == [f"G{i}" for i in range(1, 8)]


def test_every_gate_is_bound_to_evidence(production: dict[str, Any]) -> None:
    bound = {g for r in production["obligations"] for g in r["gates"]}
    assert bound == {g["id"] for g in production["registry"]["gates"]}


# ------------------------------------------------------------------------------------------
# The runner over a committed copy of the working tree, with the real active verifiers


@pytest.fixture(scope="module")
def candidate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_working_tree(REPO_ROOT, tmp_path_factory.mktemp("production") / "candidate")


def _env(standin: StandIn, candidate: Path, **kwargs: Any) -> dict[str, str]:
    env = standin.env(**kwargs)
    # The copy's own sources, not whatever tenferro happens to be installed.
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(candidate / "src"), env.get("PYTHONPATH", "")] if p
    )
    return env


def _run(candidate: Path, receipt: Path, env: dict[str, str], standin: StandIn) -> Outcome:
    return run_script(
        RUNNER,
        "--root",
        str(candidate),
        "--manifest",
        PRODUCTION_MANIFEST,
        "--receipt-out",
        str(receipt),
        "--diagnostics-json",
        env=env,
        interpreter=standin.exe,
    )


def _check(candidate: Path, receipt: Path) -> Outcome:
    return run_script(
        CHECKER,
        "--root",
        str(candidate),
        "--manifest",
        PRODUCTION_MANIFEST,
        "--receipt",
        str(receipt),
        "--diagnostics-json",
    )


def test_runner_receipt_over_the_production_manifest_validates(
    candidate: Path, production: dict[str, Any], tmp_path: Path
) -> None:
    standin = make_standin(tmp_path)
    receipt = tmp_path / "receipt.json"
    outcome = _run(candidate, receipt, _env(standin, candidate, mode="exec"), standin)
    assert_clean(outcome)
    data = json.loads(receipt.read_text("utf-8"))
    active = sorted(
        (r for r in production["obligations"] if r["state"]["kind"] == "active"),
        key=lambda r: r["id"],
    )
    assert [e["obligation_id"] for e in data["executions"]] == [r["id"] for r in active]
    # The canonical argv of every active command ran exactly once (rows sharing one typed
    # command share its execution), and no deferred argv ran.
    commands = {r["command"]["id"]: r["command"]["argv"] for r in active}
    assert standin.calls() == list(commands.values())
    assert len(commands) < len(active)  # p5-group-extraction shares p5-allocation-group's
    assert all(e["exit_code"] == 0 for e in data["executions"])
    assert_clean(_check(candidate, receipt))


def test_exit_status_propagates_over_the_production_manifest(
    candidate: Path, production: dict[str, Any], tmp_path: Path
) -> None:
    standin = make_standin(tmp_path)
    parity = next(r for r in production["obligations"] if r["id"] == "p1-api-parity")
    failing = {" ".join(parity["command"]["argv"]): 7}
    receipt = tmp_path / "receipt.json"
    outcome = _run(candidate, receipt, _env(standin, candidate, exit_codes=failing), standin)
    assert_one_fault(
        outcome, "E_COMMAND_FAILED", {"obligation_id": "p1-api-parity", "exit_code": 7}
    )
    items = assert_envelope(_check(candidate, receipt).envelope)
    assert [(d["code"], d["fields"]) for d in items] == [
        ("E_COMMAND_FAILED", {"obligation_id": "p1-api-parity", "exit_code": 7})
    ]
