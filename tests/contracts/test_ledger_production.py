"""The checked-in production ledger: it parses, it is valid, and the runner's receipt validates.

These tests use the real repository.  When an active row's artifact is missing they fail loudly:
an active row without evidence is exactly what the ledger exists to reject.
"""

from __future__ import annotations

import importlib
import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.contracts.ledger_batch import run_batch
from tests.contracts.ledger_support import (
    CHECKER,
    DOC_CHECKER,
    PRODUCTION_MANIFEST,
    REPO_ROOT,
    RUNNER,
    Outcome,
    StandIn,
    assert_clean,
    assert_envelope,
    assert_one_fault,
    copy_working_tree,
    load_script,
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
    # The atomic cutover: with P0 and P5 complete in the base, every P3 and P9 row at once
    # (P9's two provider-side rows were added deferred by the candidate before).
    "p3-as-view-zero-allocation",
    "p3-owner-linearity",
    "p3-static-rank-preservation",
    "p3-typecheck-contract",
    "p9-ad-retention",
    "p9-borrowed-submission",
    "p9-checkpoint-retention",
    "p9-detached-submission",
    "p9-device-submission-retirement",
    "p9-ledger-scenarios",
    "p9-scoped-read-only",
    "p9-take-grad",
    # The cutover complete in the base, P6's zero-copy reinterpretation row was promoted in
    # place (its rank-policy row still names a type-check file that does not exist).
    "p6-reinterpret",
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
    # P0, P1, P2, P4 and P5 have every row active, and so has the cutover cohort (P3 + P9,
    # activated together); P6, the one unit after it, has one row active; everything after
    # P6 is still wholly deferred.
    done = ("P0", "P1", "P2", "P3", "P4", "P5", "P9")
    for unit in done:
        assert all(r["state"]["kind"] == "active" for r in by_unit[unit]), unit
    assert {r["id"]: r["state"]["kind"] for r in by_unit["P6"]} == {
        "p6-reinterpret": "active",
        "p6-reinterpret-rank-policy": "deferred",
    }
    for unit in units:
        if unit not in (*done, "P6"):
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
    # The runner's pytest commands run one after another inside this test's own worker:
    # serially (no xdist workers of their own, which would only add their start-up and
    # oversubscribe the cores the suite already uses); the tests they run are the same.
    env["TENFERRO_TEST_WORKERS"] = "0"
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
    """The runner starts every active argv once; the script checks run for real, and every
    ``python3 -m pytest TARGET`` gets the status pytest gives for that target alone, read
    from one pytest run over all the targets beforehand (the same tests, conftest and
    options: ~20 process start-ups and the tests named twice -- a node id beside its file --
    are what it saves).  An exit status that is not 0 reaches the receipt as before."""
    active = sorted(
        (r for r in production["obligations"] if r["state"]["kind"] == "active"),
        key=lambda r: r["id"],
    )
    standin = make_standin(tmp_path)
    env = _env(standin, candidate, mode="batch")
    targets = [r["command"]["argv"][3] for r in active if r["command"]["kind"] == "pytest"]
    batch = run_batch(candidate, targets, tmp_path / "batch.json", env)
    env["LEDGER_STANDIN_BATCH"] = str(tmp_path / "batch.json")
    receipt = tmp_path / "receipt.json"
    outcome = _run(candidate, receipt, env, standin)
    assert outcome.rc == 0, f"{outcome.envelope}\n{batch.stdout[-4000:]}"
    assert_clean(outcome)
    data = json.loads(receipt.read_text("utf-8"))
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


# ------------------------------------------------------------------------------------------
# Every state-table row is proven by a test the runner executes

_G7 = "tests/ad/test_g7_contracts.py::"
_CK = "tests/ad/test_checkpoint.py::"
_EV = "tests/providers/test_event_retirement.py::"
_DS = "tests/runtime/test_detached_submission.py::"
_SC = "tests/runtime/test_scoped_execution.py::"
_SIM = "tests/providers/test_simulated_async_provider.py::"
_BS = "tests/providers/test_borrowed_submission.py::"
_GR = "tests/storage/test_group.py::"
_AC = "tests/storage/test_access.py::"

# The 47 transitions of the contract's state tables, each with the test that proves it.
ROW_EVIDENCE: dict[str, str] = {
    # G1
    "owner -> shared view": "tests/storage/test_tensor.py::"
    "test_as_view_records_no_ledger_event_and_no_root_reference",
    "owner -> mutable view": "tests/storage/test_borrow.py::"
    "test_conflicting_request_raises_borrow_error_and_changes_nothing",
    "checked shared pairing -> prepared host/device read": _AC
    + "test_read_variant_follows_the_retained_layout",
    "checked exclusive pairing -> prepared host/device write": _AC
    + "test_write_variant_follows_the_retained_layout_and_writes_land",
    "prepared host access -> synchronous return": _AC
    + "test_prepared_access_holds_the_borrow_until_released",
    "prepared device access -> pre-admission rejection": _EV
    + "test_device_access_pre_admission_rejection_keeps_the_owners_and_creates_no_record",
    "possible enqueue -> draining": _EV
    + "test_possible_enqueue_to_draining_immediate_handle_drop_keeps_the_record_owned",
    "draining -> retired completed/failed": _EV
    + "test_draining_to_retired_completed_or_failed_releases_the_record_once",
    "draining -> completion unproven": _EV
    + "test_draining_to_completion_unproven_keeps_the_record_for_good",
    # G2
    "construct group": _GR + "test_insert_consumes_the_owner_and_keeps_its_descriptor",
    "view": _GR + "test_views_share_the_group_and_reuse_the_retained_descriptor",
    "view_mut": _GR + "test_view_mut_is_exclusive_over_the_whole_group",
    "split_mut": "tests/storage/test_disjoint.py::"
    "test_split_of_two_halves_writes_both_and_frees_the_group_after_the_last_child",
    "try_extract": _GR + "test_try_extract_refuses_an_aliased_allocation_and_changes_nothing",
    "into_tensor": _GR + "test_into_tensor_failure_returns_the_unchanged_group",
    # G3
    "Prepared -> submit result": _DS
    + "test_prepared_to_submit_result_rejection_returns_the_exact_unadmitted_inputs",
    "Admitted -> Running": _DS
    + "test_admitted_to_running_post_admission_preparation_or_enqueue_failure_enters_draining",
    "Running -> Draining": _DS
    + "test_running_to_draining_failure_and_panic_never_return_owners_immediately",
    "Draining -> Retired(Completed)": _DS
    + "test_draining_to_completed_returns_the_bundle_after_retirement",
    "Draining -> Retired(Failed)": _DS
    + "test_draining_to_retired_failed_returns_the_exact_input_owners",
    "Draining -> CompletionUnproven": _DS
    + "test_draining_to_completion_unproven_returns_no_owner_and_retains_permanently",
    "scoped call rejected": _SC + "test_scoped_call_rejected_returns_the_exact_borrowed_inputs",
    "scoped admitted call": _SC + "test_scoped_admitted_call_retires_before_return",
    # G5
    "checked shared pairing -> PreparedRead::Device": _SIM
    + "test_shared_view_prepares_device_read_without_revalidation",
    "checked exclusive pairing -> PreparedWrite::Device": _SIM
    + "test_only_an_exclusive_view_prepares_device_write",
    "PreparedDevice* -> device binding": _SIM
    + "test_bind_consumes_the_prepared_payload_and_failure_returns_it_exactly",
    "prepared submission -> proven pre-admission rejection": _SIM
    + "test_pre_admission_rejection_returns_the_exact_package_and_creates_no_record",
    "enqueue may have happened -> G3 Draining": _SIM
    + "test_after_enqueue_failures_drain_and_return_no_owner_immediately",
    "G3 Draining -> RetiredFailed": _SIM
    + "test_retired_failed_releases_bindings_event_roots_context_exactly_once",
    "G3 Draining -> Completed": _SIM
    + "test_completed_releases_bindings_event_roots_context_exactly_once",
    "asynchronous provider rejects borrowed submission": _BS
    + "test_asynchronous_provider_rejects_borrowed_submission_before_admission",
    "admitted synchronous borrowed operation -> retired result": _BS
    + "test_synchronous_borrowed_operation_returns_bindings_only_after_retirement",
    "retirement -> CompletionUnproven": _SIM
    + "test_completion_unproven_retains_bindings_event_roots_context_permanently",
    # G7
    "record op output into tape": _G7
    + "test_an_op_output_is_held_by_its_record_alone_until_something_shares_it",
    "clone EagerTensor handle": _G7
    + "test_handles_hash_by_identity_and_copy_clones_only_the_reference",
    "drop a handle while tape/checkpoint retains": _CK
    + "test_checkpoint_record_is_a_direct_owner_for_into_value",
    "tape/context drop while a handle remains": _G7
    + "test_direct_lifetime_tape_dropped_handle_keeps_value",
    "tape retains/releases descriptor record": _G7
    + "test_a_tape_released_by_backward_still_gives_back_what_it_recorded_afterwards",
    "checkpoint retains/releases boundary record": _CK
    + "test_contract_only_boundary_records_interior_released_recompute_is_fresh",
    "value() guard": _G7 + "test_g7_value_guard_holds_its_count_until_released",
    "backward execution": _CK + "test_a_failure_after_released_boundaries_leaves_the_tape_usable",
    "take_grad": _G7 + "test_take_grad_three_outcomes",
    "into_value while another direct owner exists": _G7
    + "test_structural_uniqueness_not_unique_before_extraction",
    "into_value after unique Arc ownership": _G7
    + "test_unique_value_moves_its_owner_out_without_copy",
    "checkpoint record": _CK + "test_failure_while_recording_publishes_nothing",
    "checkpoint recompute (backward)": _CK
    + "test_replayed_values_are_released_as_the_segment_sweep_passes_them",
    "tape drop": _G7 + "test_explicit_duplicate_versus_retention",
}


def _covering_active_rows(node: str, rows: list[dict[str, Any]]) -> list[str]:
    """Active pytest obligations whose target runs ``node``."""
    found = []
    for r in rows:
        if r["state"]["kind"] != "active" or r["command"]["kind"] != "pytest":
            continue
        a = r["artifact"]
        target = a["path"] + (f"::{a['selector']}" if a.get("selector") else "")
        base = node.split("[", 1)[0]
        if base == target or node == target or node.startswith(target.rstrip("/") + "/") or (
            "::" not in target and node.startswith(target + "::")
        ):
            found.append(r["id"])
    return found


def test_every_state_row_is_proven_by_a_test_the_runner_executes(
    production: dict[str, Any],
) -> None:
    """47/47: each transition of each state table names a test that exists (pytest collects
    it) inside the target of an *active* pytest obligation, so the ledger runner executes it
    and its exit status reaches the receipt."""
    document = load_script("check_contract_document", DOC_CHECKER)
    labels = [t for _, ts_ in document.STATE_TABLES.values() for t in ts_]
    assert len(labels) == 47 and set(ROW_EVIDENCE) == set(labels)
    unbound = {
        label: node
        for label, node in ROW_EVIDENCE.items()
        if not _covering_active_rows(node, production["obligations"])
    }
    assert not unbound, f"rows whose test no active obligation runs: {unbound}"
    load_script("check_storage_ownership_contracts", CHECKER)  # puts _contracts on the path
    selectors = importlib.import_module("_contracts.selectors")
    nodes, output, _ = selectors.collect(REPO_ROOT, sorted(set(ROW_EVIDENCE.values())))
    missing = sorted(n for n in set(ROW_EVIDENCE.values()) if not any(
        selectors._matches(n, c) for c in nodes
    ))
    assert not missing, f"named tests that do not exist: {missing}\n{output[-2000:]}"
