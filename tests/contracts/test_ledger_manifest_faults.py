"""One-fault cases over the manifest alone: schema, lifecycle, graph, cohort, paths, commands.

Each case starts from the valid fixture ledger, injects exactly one mistake and requires exactly
one diagnostic with the registered code and the exact identifying fields.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.contracts.ledger_support import (
    V1_FIXTURE,
    Outcome,
    Repo,
    activate,
    assert_clean,
    assert_envelope,
    assert_one_fault,
    pytest_row,
    row,
    set_pytest_path,
)

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Fault:
    id: str
    code: str
    fields: dict[str, Any]
    mutate: Callable[[Manifest], None] = lambda m: None
    # Filesystem preparation inside the repository (before the checker runs).
    prepare: Callable[[Repo, Path], None] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _set(path: str, value: Any) -> Callable[[Manifest], None]:
    """Sets a dotted path such as 'obligations.p0-a.command.cwd' (obligation ids as keys)."""

    def mutate(m: Manifest) -> None:
        parts = path.split(".")
        node: Any = m
        if parts[0] == "obligations":
            node, parts = row(m, parts[1]), parts[2:]
        for p in parts[:-1]:
            node = node[int(p)] if isinstance(node, list) else node[p]
        if isinstance(node, list):
            node[int(parts[-1])] = value
        else:
            node[parts[-1]] = value

    return mutate


def _delete(oid: str, key: str) -> Callable[[Manifest], None]:
    return lambda m: row(m, oid).pop(key)


def _seq(*steps: Callable[[Manifest], None]) -> Callable[[Manifest], None]:
    def mutate(m: Manifest) -> None:
        for s in steps:
            s(m)

    return mutate


def _edges(m: Manifest) -> list[dict[str, str]]:
    edges: list[dict[str, str]] = m["registry"]["edges"]
    return edges


def _add_edge(src: str, dst: str) -> Callable[[Manifest], None]:
    return lambda m: _edges(m).append({"from": src, "to": dst})


def _drop_edge(src: str, dst: str) -> Callable[[Manifest], None]:
    def mutate(m: Manifest) -> None:
        m["registry"]["edges"] = [e for e in _edges(m) if (e["from"], e["to"]) != (src, dst)]

    return mutate


def _activate(*oids: str) -> Callable[[Manifest], None]:
    return lambda m: activate(m, *oids)


def _move(oid: str, path: str) -> Callable[[Manifest], None]:
    return lambda m: set_pytest_path(m, oid, path)


def _p1a_script(value: str) -> Callable[[Manifest], None]:
    """Replaces p1-a's verifier consistently in argv and path_args."""

    def mutate(m: Manifest) -> None:
        c = row(m, "p1-a")["command"]
        c["argv"][1] = value
        c["path_args"][0] = value

    return mutate


def _symlink_outside(link: str) -> Callable[[Repo, Path], None]:
    def prepare(repo: Repo, outside: Path) -> None:
        target = outside / "elsewhere.py"
        target.write_text("def test_x() -> None:\n    pass\n", encoding="utf-8")
        (repo.root / link).parent.mkdir(parents=True, exist_ok=True)
        (repo.root / link).symlink_to(target)

    return prepare


FAULTS: list[Fault] = [
    # --- schema shape and tagged state --------------------------------------------------
    Fault(
        "missing-key",
        "E_SCHEMA_MISSING_KEY",
        {"table": "obligations[p0-a]", "key": "gates"},
        _delete("p0-a", "gates"),
    ),
    Fault(
        "unknown-key-status-string",
        "E_SCHEMA_UNKNOWN_KEY",
        {"table": "obligations[p0-a]", "key": "status"},
        _set("obligations.p0-a.status", "done"),
    ),
    Fault(
        "terminal-flag-on-row",
        "E_SCHEMA_UNKNOWN_KEY",
        {"table": "obligations[p1-a]", "key": "terminal"},
        _set("obligations.p1-a.terminal", True),
    ),
    Fault(
        "wrong-type",
        "E_SCHEMA_TYPE",
        {"table": "registry", "key": "revision", "expected": "integer"},
        _set("registry.revision", "1"),
    ),
    Fault(
        "empty-string-id",
        "E_SCHEMA_TYPE",
        {"table": "obligations[p0-a].artifact", "key": "id", "expected": "string"},
        _set("obligations.p0-a.artifact.id", ""),
    ),
    Fault(
        "shell-string-argv",
        "E_COMMAND_SHELL_STRING",
        {"command_id": "cmd-p0-a"},
        _set("obligations.p0-a.command.argv", "python3 -m pytest tests/test_p0_a.py && true"),
    ),
    Fault(
        "duplicate-obligation",
        "E_DUPLICATE_ID",
        {"kind": "obligation", "id": "p0-a"},
        lambda m: m["obligations"].append(pytest_row("p0-a", "P0")),
    ),
    Fault(
        "duplicate-unit",
        "E_DUPLICATE_ID",
        {"kind": "unit", "id": "P0"},
        lambda m: m["registry"]["units"].append({"id": "P0", "name": "again", "title": "again"}),
    ),
    Fault(
        "state-kind",
        "E_STATE_KIND",
        {"obligation_id": "p0-a", "actual": "done"},
        _set("obligations.p0-a.state", {"kind": "done"}),
    ),
    Fault(
        "active-with-deferred-payload",
        "E_SCHEMA_UNKNOWN_KEY",
        {"table": "obligations[p1-a].state", "key": "activation_unit"},
        _set("obligations.p1-a.state", {"kind": "active", "activation_unit": "P1"}),
    ),
    Fault(
        "deferred-without-promotion",
        "E_SCHEMA_MISSING_KEY",
        {"table": "obligations[p0-a].state", "key": "promotion"},
        _set("obligations.p0-a.state", {"kind": "deferred", "activation_unit": "P0"}),
    ),
    Fault(
        "activation-unit",
        "E_DEFERRED_ACTIVATION_UNIT",
        {"obligation_id": "p0-a", "expected": "P0", "actual": "P1"},
        _set("obligations.p0-a.state.activation_unit", "P1"),
    ),
    Fault(
        "promotion-mode",
        "E_PROMOTION_MODE",
        {"obligation_id": "p0-a", "actual": "rewrite"},
        _set("obligations.p0-a.state.promotion", {"mode": "rewrite"}),
    ),
    # --- registry, graph, cohort ---------------------------------------------------------
    Fault("revision-zero", "E_REVISION_INVALID", {"actual": 0}, _set("registry.revision", 0)),
    Fault(
        "unknown-unit",
        "E_UNKNOWN_UNIT",
        {"obligation_id": "p3-b", "unit": "P99"},
        _set("obligations.p3-b.unit", "P99"),
    ),
    Fault(
        "unknown-gate",
        "E_UNKNOWN_GATE",
        {"obligation_id": "p0-a", "gate": "G9"},
        _set("obligations.p0-a.gates", ["G9"]),
    ),
    Fault(
        "empty-gates",
        "E_GATE_LIST",
        {"obligation_id": "p0-a", "gates": []},
        _set("obligations.p0-a.gates", []),
    ),
    Fault(
        "repeated-gate",
        "E_GATE_LIST",
        {"obligation_id": "p0-a", "gates": ["G1", "G1"]},
        _set("obligations.p0-a.gates", ["G1", "G1"]),
    ),
    Fault(
        "edge-unknown-unit",
        "E_GRAPH_UNKNOWN_NODE",
        {"from": "P4", "to": "P7", "node": "P7"},
        _add_edge("P4", "P7"),
    ),
    Fault(
        "duplicate-edge",
        "E_GRAPH_DUPLICATE_EDGE",
        {"from": "P2", "to": "P4"},
        _add_edge("P2", "P4"),
    ),
    Fault(
        "edge-names-cohort-member",
        "E_GRAPH_COHORT_MEMBER_ENDPOINT",
        {"from": "P3", "to": "P4", "unit": "P3", "cohort_id": "cutover"},
        _add_edge("P3", "P4"),
    ),
    Fault("cycle", "E_GRAPH_CYCLE", {"nodes": ["P4", "P5"]}, _add_edge("P5", "P4")),
    Fault(
        "root-with-incoming",
        "E_GRAPH_ROOT_INCOMING",
        {"unit": "P0", "sources": ["P1"]},
        _add_edge("P1", "P0"),
    ),
    Fault(
        "p2-second-incoming",
        "E_GRAPH_SINGLE_INCOMING",
        {"unit": "P2", "expected": ["P1"], "actual": ["P0", "P1"]},
        _add_edge("P0", "P2"),
    ),
    Fault(
        "no-cohort",
        "E_COHORT_COUNT",
        {"expected": 1, "actual": 0},
        _seq(
            _set("registry.cohorts", []),
            _drop_edge("P0", "cutover"),
            _drop_edge("P5", "cutover"),
        ),
    ),
    Fault(
        "cohort-unknown-member",
        "E_COHORT_UNKNOWN_UNIT",
        {"cohort_id": "cutover", "unit": "P77"},
        _set("registry.cohorts.0.members", ["P3", "P9", "P77"]),
    ),
    Fault(
        "cohort-members",
        "E_COHORT_DEFINITION",
        {"cohort_id": "cutover", "field": "members", "expected": ["P3", "P9"], "actual": ["P3"]},
        _set("registry.cohorts.0.members", ["P3"]),
    ),
    Fault(
        "cohort-prerequisites",
        "E_COHORT_DEFINITION",
        {
            "cohort_id": "cutover",
            "field": "prerequisites",
            "expected": ["P0", "P5"],
            "actual": ["P5"],
        },
        _drop_edge("P0", "cutover"),
    ),
    Fault(
        "empty-unit",
        "E_UNIT_NO_OBLIGATIONS",
        {"unit": "P6"},
        lambda m: m["registry"]["units"].append({"id": "P6", "name": "six", "title": "six"}),
    ),
    Fault(
        "partial-cohort",
        "E_COHORT_PARTIAL_ACTIVATION",
        {"cohort_id": "cutover", "active": ["p3-a"], "deferred": ["p3-b", "p9-a"]},
        _activate("p0-a", "p2-a", "p4-a", "p5-a", "p3-a"),
    ),
    Fault(
        "prerequisite-deferred",
        "E_PREREQUISITE_INACTIVE",
        {"node": "P4", "prerequisite": "P2", "deferred": ["p2-a"]},
        _activate("p4-a"),
    ),
    Fault(
        "cohort-before-p0",
        "E_PREREQUISITE_INACTIVE",
        {"node": "cutover", "prerequisite": "P0", "deferred": ["p0-a"]},
        _activate("p2-a", "p4-a", "p5-a", "p3-a", "p3-b", "p9-a"),
    ),
    # --- artifact and path confinement -------------------------------------------------
    Fault(
        "artifact-not-canonical",
        "E_PATH_NOT_CANONICAL",
        {"obligation_id": "p0-a", "field": "artifact.path", "path": "tests/./test_p0_a.py"},
        _move("p0-a", "tests/./test_p0_a.py"),
    ),
    Fault(
        "artifact-dotdot-escape",
        "E_ARTIFACT_PATH_ESCAPE",
        {"obligation_id": "p0-a", "artifact_id": "artifact-p0-a", "path": "../outside.py"},
        _move("p0-a", "../outside.py"),
    ),
    Fault(
        "artifact-absolute",
        "E_ARTIFACT_PATH_ESCAPE",
        {"obligation_id": "p0-a", "artifact_id": "artifact-p0-a", "path": "/etc/hosts"},
        _move("p0-a", "/etc/hosts"),
    ),
    Fault(
        "artifact-symlink-escape",
        "E_ARTIFACT_PATH_ESCAPE",
        {"obligation_id": "p1-b", "artifact_id": "artifact-p1-b", "path": "tests/link.py"},
        _move("p1-b", "tests/link.py"),
        prepare=_symlink_outside("tests/link.py"),
    ),
    Fault(
        "active-artifact-missing",
        "E_ARTIFACT_MISSING",
        {"obligation_id": "p1-b", "artifact_id": "artifact-p1-b", "path": "tests/test_gone.py"},
        _move("p1-b", "tests/test_gone.py"),
    ),
    Fault(
        "cwd-escape-before-cwd-identity",
        "E_CWD_ESCAPE",
        {"obligation_id": "p0-a", "command_id": "cmd-p0-a", "cwd": ".."},
        _set("obligations.p0-a.command.cwd", ".."),
    ),
    Fault(
        "cwd-not-canonical",
        "E_PATH_NOT_CANONICAL",
        {"obligation_id": "p0-a", "field": "command.cwd", "path": "./"},
        _set("obligations.p0-a.command.cwd", "./"),
    ),
    Fault(
        "active-cwd-missing",
        "E_CWD_MISSING",
        {"obligation_id": "p1-a", "command_id": "cmd-p1-a", "cwd": "nowhere"},
        _set("obligations.p1-a.command.cwd", "nowhere"),
    ),
    Fault(
        "argv-path-escape-before-argv-identity",
        "E_ARGV_PATH_ESCAPE",
        {"obligation_id": "p1-a", "command_id": "cmd-p1-a", "index": 1, "path": "../verify.py"},
        _p1a_script("../verify.py"),
    ),
    Fault(
        "argv-path-symlink-escape",
        "E_ARGV_PATH_ESCAPE",
        {
            "obligation_id": "p1-a",
            "command_id": "cmd-p1-a",
            "index": 1,
            "path": "scripts/linked.py",
        },
        _p1a_script("scripts/linked.py"),
        prepare=_symlink_outside("scripts/linked.py"),
    ),
    Fault(
        "argv-path-not-canonical",
        "E_PATH_NOT_CANONICAL",
        {"obligation_id": "p1-a", "field": "command.path_args", "path": "scripts//verify-ok.py"},
        _p1a_script("scripts//verify-ok.py"),
    ),
    Fault(
        "active-verifier-missing",
        "E_ARGV_PATH_MISSING",
        {
            "obligation_id": "p1-a",
            "command_id": "cmd-p1-a",
            "index": 1,
            "path": "scripts/verify-nope.py",
        },
        _p1a_script("scripts/verify-nope.py"),
    ),
    # --- exact command allow-list and identity ---------------------------------------------
    Fault(
        "artifact-kind",
        "E_ARTIFACT_KIND",
        {"artifact_id": "artifact-p0-a", "kind": "notebook"},
        _set("obligations.p0-a.artifact.kind", "notebook"),
    ),
    Fault(
        "selector-on-report",
        "E_ARTIFACT_SELECTOR",
        {"artifact_id": "artifact-p1-a", "kind": "evidence-report"},
        _set("obligations.p1-a.artifact.selector", "$.cases"),
    ),
    Fault(
        "command-kind",
        "E_COMMAND_KIND",
        {"command_id": "cmd-p0-a", "kind": "cargo-test"},
        _set("obligations.p0-a.command.kind", "cargo-test"),
    ),
    Fault(
        "command-inspects-other-artifact",
        "E_COMMAND_ARTIFACT_BINDING",
        {
            "obligation_id": "p0-a",
            "command_id": "cmd-p0-a",
            "expected": "artifact-p0-a",
            "actual": "artifact-p2-a",
        },
        _set("obligations.p0-a.command.artifact_id", "artifact-p2-a"),
    ),
    Fault(
        "command-artifact-kind",
        "E_COMMAND_ARTIFACT_KIND",
        {"command_id": "cmd-p0-a", "kind": "doc-check", "artifact_kind": "pytest-file"},
        _set("obligations.p0-a.command.kind", "doc-check"),
    ),
    Fault(
        "command-cwd",
        "E_COMMAND_CWD",
        {"command_id": "cmd-p0-a", "expected": ".", "actual": "tests"},
        _set("obligations.p0-a.command.cwd", "tests"),
    ),
    Fault(
        "pytest-argv-flag",
        "E_COMMAND_ARGV",
        {"command_id": "cmd-p0-a", "index": 1, "expected": "-m", "actual": "-c"},
        _set("obligations.p0-a.command.argv.1", "-c"),
    ),
    Fault(
        "pytest-argv-extra",
        "E_COMMAND_ARGV",
        {"command_id": "cmd-p0-a", "index": 4, "expected": None, "actual": "-x"},
        lambda m: row(m, "p0-a")["command"]["argv"].append("-x"),
    ),
    Fault(
        "pytest-argv-other-target",
        "E_COMMAND_ARGV",
        {
            "command_id": "cmd-p0-a",
            "index": 3,
            "expected": "tests/test_p0_a.py",
            "actual": "tests/test_p2_a.py",
        },
        _seq(
            _set("obligations.p0-a.command.argv.3", "tests/test_p2_a.py"),
            _set("obligations.p0-a.command.path_args", ["tests/test_p2_a.py"]),
        ),
    ),
    Fault(
        "check-argv-interpreter",
        "E_COMMAND_ARGV",
        {"command_id": "cmd-p1-a", "index": 0, "expected": "python3", "actual": "bash"},
        _set("obligations.p1-a.command.argv.0", "bash"),
    ),
    Fault(
        "check-argv-inline-code",
        "E_COMMAND_ARGV",
        {"command_id": "cmd-p1-a", "index": 1, "expected": "scripts/*.py", "actual": "-c"},
        _set("obligations.p1-a.command.argv.1", "-c"),
    ),
    Fault(
        "check-argv-other-artifact",
        "E_COMMAND_ARGV",
        {
            "command_id": "cmd-p1-a",
            "index": 2,
            "expected": "data/p1-a.json",
            "actual": "data/other.json",
        },
        _set("obligations.p1-a.command.argv.2", "data/other.json"),
    ),
    Fault(
        "path-arg-unbound",
        "E_PATH_ARG_UNBOUND",
        {"command_id": "cmd-p1-a", "path": "scripts/other.py"},
        lambda m: row(m, "p1-a")["command"]["path_args"].append("scripts/other.py"),
    ),
    Fault(
        "path-arg-undeclared",
        "E_PATH_ARG_UNDECLARED",
        {"command_id": "cmd-p1-a", "index": 1, "path": "scripts/verify-ok.py"},
        _set("obligations.p1-a.command.path_args", ["data/p1-a.json"]),
    ),
    Fault(
        "shared-command-differs",
        "E_COMMAND_CONFLICT",
        {"command_id": "cmd-p3-a"},
        _set("obligations.p3-b.command.id", "cmd-p3-a"),
    ),
    Fault(
        "shared-artifact-differs",
        "E_ARTIFACT_CONFLICT",
        {"artifact_id": "artifact-p3-a"},
        _seq(
            _set("obligations.p3-b.artifact.id", "artifact-p3-a"),
            _set("obligations.p3-b.command.artifact_id", "artifact-p3-a"),
        ),
    ),
]


@pytest.mark.parametrize("fault", FAULTS, ids=[f.id for f in FAULTS])
def test_one_fault(
    fault: Fault,
    manifest: Manifest,
    make_repo: Callable[..., Repo],
    run_checker: Callable[..., Outcome],
    tmp_path: Path,
) -> None:
    fault.mutate(manifest)
    repo = make_repo(manifest, commit=False)
    if fault.prepare is not None:
        outside = tmp_path / "outside"
        outside.mkdir(exist_ok=True)
        fault.prepare(repo, outside)
    assert_one_fault(run_checker(repo), fault.code, fault.fields)


def test_fixture_ledger_is_valid(
    make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    assert_clean(run_checker(make_repo(commit=False)))


def test_v1_manifest_is_rejected_by_its_marker_alone(
    make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    text = V1_FIXTURE.read_text(encoding="utf-8")
    assert [line for line in text.splitlines() if not line.startswith("#")] == [
        'schema = "tenferro.storage-ownership-contracts.v1"'
    ]
    outcome = run_checker(make_repo(text, commit=False))
    assert_one_fault(
        outcome,
        "E_SCHEMA_MISMATCH",
        {
            "expected": "tenferro.storage-ownership-contracts.v2",
            "actual": "tenferro.storage-ownership-contracts.v1",
        },
    )


def test_path_failures_are_reported_before_command_identity(
    manifest: Manifest, make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    # An identity mistake in an earlier row and a path escape in a later row: the path
    # diagnostic still comes first.
    row(manifest, "p0-a")["command"]["argv"][2] = "unittest"
    set_pytest_path(manifest, "p9-a", "../escape.py")
    items = assert_envelope(run_checker(make_repo(manifest, commit=False)).envelope)
    assert [d["code"] for d in items] == ["E_ARTIFACT_PATH_ESCAPE", "E_COMMAND_ARGV"]


def test_identical_shared_command_is_accepted(
    manifest: Manifest, make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    shared = row(manifest, "p3-a")
    other = row(manifest, "p3-b")
    other["artifact"] = dict(shared["artifact"])
    other["command"] = {**shared["command"], "argv": list(shared["command"]["argv"])}
    assert_clean(run_checker(make_repo(manifest, commit=False)))


def test_pytest_selector_binds_a_node_id(
    manifest: Manifest, make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    r = row(manifest, "p1-b")
    r["artifact"]["selector"] = "test_ok"
    assert_one_fault(
        run_checker(make_repo(copy.deepcopy(manifest), commit=False)),
        "E_COMMAND_ARGV",
        {
            "command_id": "cmd-p1-b",
            "index": 3,
            "expected": "tests/test_p1_b.py::test_ok",
            "actual": "tests/test_p1_b.py",
        },
    )
    r["command"]["argv"][3] = "tests/test_p1_b.py::test_ok"
    assert_clean(run_checker(make_repo(manifest, commit=False)))


def test_complete_fixture_cohort_activation_is_valid(
    manifest: Manifest, make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    activate(manifest, *(r["id"] for r in manifest["obligations"]))
    assert_clean(run_checker(make_repo(manifest, commit=False)))


def test_deferred_artifact_may_be_a_future_path(
    manifest: Manifest, make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    set_pytest_path(manifest, "p2-a", "tests/future/test_not_written_yet.py")
    assert_clean(run_checker(make_repo(manifest, commit=False)))


def _select(manifest: Manifest, oid: str, selector: str) -> None:
    r = row(manifest, oid)
    r["artifact"]["selector"] = selector
    r["command"]["argv"][3] = f"{r['artifact']['path']}::{selector}"


@pytest.mark.parametrize("oid", ["p1-b", "p3-a"], ids=["active", "deferred"])
def test_a_selector_that_names_no_test_is_reported_by_collection(
    oid: str,
    manifest: Manifest,
    make_repo: Callable[..., Repo],
    run_checker: Callable[..., Outcome],
) -> None:
    """The file exists, so the path checks pass; pytest --collect-only finds no test for
    the selector, for an active row and for a deferred one whose file already exists (a
    revision cannot point a deferred row at a test that was never written)."""
    _select(manifest, oid, "test_never_written")
    path = row(manifest, oid)["artifact"]["path"]
    assert_one_fault(
        run_checker(make_repo(manifest, commit=False)),
        "E_SELECTOR_UNRESOLVED",
        {
            "obligation_id": oid,
            "command_id": f"cmd-{oid}",
            "target": f"{path}::test_never_written",
        },
    )


def test_selectors_resolve_to_tests_and_parametrized_cases(
    manifest: Manifest, make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    """A test name, a parametrized test's name and one of its cases all resolve."""
    repo = make_repo(manifest, commit=False)
    repo.write(
        "tests/test_p3_b.py",
        "import pytest\n\n\n@pytest.mark.parametrize('k', ['a', 'b'])\n"
        "def test_case(k: str) -> None:\n    assert k\n",
    )
    _select(manifest, "p1-b", "test_ok")
    _select(manifest, "p3-a", "test_ok")
    _select(manifest, "p3-b", "test_case[b]")
    repo.write_manifest(manifest)
    assert_clean(run_checker(repo))
    _select(manifest, "p3-b", "test_case")
    repo.write_manifest(manifest)
    assert_clean(run_checker(repo))
    _select(manifest, "p3-b", "test_case[c]")
    repo.write_manifest(manifest)
    assert_one_fault(
        run_checker(repo),
        "E_SELECTOR_UNRESOLVED",
        {
            "obligation_id": "p3-b",
            "command_id": "cmd-p3-b",
            "target": "tests/test_p3_b.py::test_case[c]",
        },
    )
