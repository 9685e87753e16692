#!/usr/bin/env python3
"""Checker for the storage-ownership obligation ledger (manifest schema v2).

The manifest ``scripts/storage-ownership-contracts.toml`` is the only machine authority for the
contract graph, the obligations and their lifecycle state.  This tool validates it structurally,
optionally compares it against a base revision (promotion and revision-only amendment rules) and
optionally validates a receipt written by ``run-storage-ownership-contracts.py``, which is the only
execution evidence it accepts.  See docs/design/storage-ownership-contracts.md.

Standard library only.  Git is invoked with argv lists; nothing runs through a shell.

The runner imports this file as a module, so everything below ``main`` is reusable library code.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn

MANIFEST_SCHEMA = "tenferro.storage-ownership-contracts.v2"
DIAGNOSTICS_SCHEMA = "tenferro.storage-ownership-diagnostics.v1"
RECEIPT_SCHEMA = "tenferro.storage-ownership-receipt.v1"
SUMMARY_SCHEMA = "tenferro.storage-ownership-summary.v1"
CLI_CONTRACT_SCHEMA = "tenferro.storage-ownership-cli-contract.v1"

CHECKER_CONTRACT: dict[str, Any] = {
    "schema": CLI_CONTRACT_SCHEMA,
    "tool": "check-storage-ownership-contracts",
    "role": "checker",
    "manifest_schema": MANIFEST_SCHEMA,
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

# Rules the contract states about named units.  The registry still owns the graph; these
# constants only encode the normative constraints the registry must satisfy.
ROOT_UNITS = ("P0", "P1")
SINGLE_INCOMING = ("P2", ("P1",))
COHORT_MEMBERS = ("P3", "P9")
COHORT_PREREQUISITES = ("P0", "P5")
PROMOTION_MODE = "activate-in-place"

INTERPRETER = "python3"
CHECK_SCRIPT = re.compile(r"scripts/[A-Za-z0-9_][A-Za-z0-9_.-]*\.py")
CHECK_SCRIPT_PATTERN = "scripts/*.py"

ARTIFACT_KINDS = frozenset(
    {
        "obligation-manifest",
        "design-document",
        "guide",
        "pytest-file",
        "pytest-suite",
        "benchmark-report",
        "evidence-report",
        "source-tree",
    }
)
# Exact allow-list: each command kind, the artifact kinds it may inspect.
COMMAND_KINDS: dict[str, frozenset[str]] = {
    "pytest": frozenset({"pytest-file", "pytest-suite"}),
    "python-check": frozenset({"obligation-manifest", "source-tree", "evidence-report"}),
    "doc-check": frozenset({"design-document", "guide"}),
    "benchmark-check": frozenset({"benchmark-report"}),
}
SELECTOR_ARTIFACT_KINDS = frozenset({"pytest-file"})

# A receipt that tries to state its own lifecycle outcome is rejected: terminality is derived.
TERMINALITY_KEYS = frozenset(
    {
        "terminal",
        "terminality",
        "terminal_state",
        "complete",
        "completed",
        "complete_units",
        "completed_units",
        "status",
    }
)

# The diagnostic registry: every stable code and its exact identifying field set.
DIAGNOSTIC_FIELDS: dict[str, frozenset[str]] = {
    code: frozenset(fields)
    for code, fields in {
        # invocation and manifest loading
        "E_USAGE": ("options",),
        "E_SUMMARY_WRITE": ("path",),
        "E_ROOT_INVALID": ("root",),
        "E_MANIFEST_PATH_ESCAPE": ("path",),
        "E_MANIFEST_MISSING": ("path",),
        "E_MANIFEST_TOML": ("path",),
        # schema shape
        "E_SCHEMA_MISMATCH": ("expected", "actual"),
        "E_SCHEMA_MISSING_KEY": ("table", "key"),
        "E_SCHEMA_UNKNOWN_KEY": ("table", "key"),
        "E_SCHEMA_TYPE": ("table", "key", "expected"),
        "E_COMMAND_SHELL_STRING": ("command_id",),
        "E_DUPLICATE_ID": ("kind", "id"),
        # tagged lifecycle state
        "E_STATE_KIND": ("obligation_id", "actual"),
        "E_DEFERRED_ACTIVATION_UNIT": ("obligation_id", "expected", "actual"),
        "E_PROMOTION_MODE": ("obligation_id", "actual"),
        # registry, graph and cohort
        "E_REVISION_INVALID": ("actual",),
        "E_REVISION_LOG": ("expected", "actual"),
        "E_ACKNOWLEDGED_INVALID": ("commit", "diagnostic_code"),
        "E_UNKNOWN_UNIT": ("obligation_id", "unit"),
        "E_UNKNOWN_GATE": ("obligation_id", "gate"),
        "E_GATE_LIST": ("obligation_id", "gates"),
        "E_GRAPH_UNKNOWN_NODE": ("from", "to", "node"),
        "E_GRAPH_DUPLICATE_EDGE": ("from", "to"),
        "E_GRAPH_COHORT_MEMBER_ENDPOINT": ("from", "to", "unit", "cohort_id"),
        "E_GRAPH_CYCLE": ("nodes",),
        "E_GRAPH_ROOT_INCOMING": ("unit", "sources"),
        "E_GRAPH_SINGLE_INCOMING": ("unit", "expected", "actual"),
        "E_COHORT_COUNT": ("expected", "actual"),
        "E_COHORT_UNKNOWN_UNIT": ("cohort_id", "unit"),
        "E_COHORT_DEFINITION": ("cohort_id", "field", "expected", "actual"),
        "E_UNIT_NO_OBLIGATIONS": ("unit",),
        "E_COHORT_PARTIAL_ACTIVATION": ("cohort_id", "active", "deferred"),
        "E_PREREQUISITE_INACTIVE": ("node", "prerequisite", "deferred"),
        # artifact and path confinement
        "E_PATH_NOT_CANONICAL": ("obligation_id", "field", "path"),
        "E_ARTIFACT_PATH_ESCAPE": ("obligation_id", "artifact_id", "path"),
        "E_ARTIFACT_MISSING": ("obligation_id", "artifact_id", "path"),
        "E_CWD_ESCAPE": ("obligation_id", "command_id", "cwd"),
        "E_CWD_MISSING": ("obligation_id", "command_id", "cwd"),
        "E_ARGV_PATH_ESCAPE": ("obligation_id", "command_id", "index", "path"),
        "E_ARGV_PATH_MISSING": ("obligation_id", "command_id", "index", "path"),
        # exact command allow-list and identity
        "E_ARTIFACT_KIND": ("artifact_id", "kind"),
        "E_ARTIFACT_SELECTOR": ("artifact_id", "kind"),
        "E_COMMAND_KIND": ("command_id", "kind"),
        "E_COMMAND_ARTIFACT_BINDING": ("obligation_id", "command_id", "expected", "actual"),
        "E_COMMAND_ARTIFACT_KIND": ("command_id", "kind", "artifact_kind"),
        "E_COMMAND_CWD": ("command_id", "expected", "actual"),
        "E_COMMAND_ARGV": ("command_id", "index", "expected", "actual"),
        "E_PATH_ARG_UNBOUND": ("command_id", "path"),
        "E_PATH_ARG_UNDECLARED": ("command_id", "index", "path"),
        "E_COMMAND_CONFLICT": ("command_id",),
        "E_ARTIFACT_CONFLICT": ("artifact_id",),
        # promotion and revision against a base
        "E_BASE_UNRESOLVED": ("revision",),
        "E_BASE_NOT_ANCESTOR": ("base_commit", "candidate_commit"),
        "E_BASE_MANIFEST": ("base_commit", "path"),
        "E_REGISTRY_CHANGED": ("field",),
        "E_REVISION_STEP": ("base_revision", "candidate_revision"),
        "E_REVISION_WITH_PROMOTION": ("obligation_id",),
        "E_OBLIGATION_CHANGED": ("obligation_id", "field"),
        "E_OBLIGATION_REMOVED": ("obligation_id",),
        "E_OBLIGATION_ADDED": ("obligation_id",),
        "E_STATE_REGRESSION": ("obligation_id",),
        "E_PREREQUISITE_NOT_ALREADY_ACTIVE": ("node", "prerequisite"),
        "E_REVISION_LOG_CHANGED": ("revision",),
        "E_ACKNOWLEDGED_CHANGED": ("base_count", "candidate_count"),
        # history replay (scripts/replay-storage-ownership-history.py)
        "E_HISTORY_UNACKNOWLEDGED": ("commit", "diagnostic_code", "fields"),
        "E_HISTORY_ACK_STALE": ("commit", "diagnostic_code", "fields"),
        # the runner's interpreter resolution
        "E_INTERPRETER_UNRESOLVED": ("argv0",),
        # provenance
        "E_GIT_CANDIDATE": ("root",),
        "E_TREE_DIRTY": ("paths",),
        "E_PATH_UNTRACKED": ("path",),
        # receipt and execution evidence
        "E_RECEIPT_MISSING": ("path",),
        "E_RECEIPT_JSON": ("path",),
        "E_RECEIPT_WRITE": ("path",),
        "E_RECEIPT_SHAPE": ("pointer",),
        "E_RECEIPT_TERMINALITY": ("pointer",),
        "E_RECEIPT_CANDIDATE": ("expected", "actual"),
        "E_RECEIPT_BASE": ("expected", "actual"),
        "E_RECEIPT_ORDER": ("index", "obligation_id"),
        "E_RECEIPT_DUPLICATE": ("obligation_id",),
        "E_RECEIPT_UNKNOWN_OBLIGATION": ("obligation_id",),
        "E_RECEIPT_DEFERRED": ("obligation_id",),
        "E_RECEIPT_INCOMPLETE": ("obligation_id",),
        "E_RECEIPT_BINDING": ("obligation_id", "field", "expected", "actual"),
        "E_COMMAND_FAILED": ("obligation_id", "exit_code"),
    }.items()
}


# --------------------------------------------------------------------------------------------
# Diagnostics


@dataclass(frozen=True)
class Diagnostic:
    code: str
    fields: dict[str, Any]
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "fields": dict(self.fields), "message": self.message}


class Diagnostics:
    """Collects diagnostics; refuses codes or field sets outside the registry."""

    def __init__(self) -> None:
        self.items: list[Diagnostic] = []

    def add(self, code: str, message: str, **fields: Any) -> None:
        expected = DIAGNOSTIC_FIELDS.get(code)
        if expected is None:
            raise AssertionError(f"unregistered diagnostic code {code}")
        if frozenset(fields) != expected:
            raise AssertionError(f"{code}: fields {sorted(fields)} != {sorted(expected)}")
        if not message:
            raise AssertionError(f"{code}: empty message")
        self.items.append(Diagnostic(code, fields, message))

    def extend(self, other: Diagnostics) -> None:
        self.items.extend(other.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def envelope(self) -> dict[str, Any]:
        return {"schema": DIAGNOSTICS_SCHEMA, "diagnostics": [d.to_json() for d in self.items]}


# --------------------------------------------------------------------------------------------
# Typed manifest model


@dataclass(frozen=True)
class Artifact:
    id: str
    kind: str
    path: str
    selector: str | None


@dataclass(frozen=True)
class Command:
    id: str
    kind: str
    argv: tuple[str, ...]
    cwd: str
    path_args: tuple[str, ...]
    artifact_id: str


@dataclass(frozen=True)
class State:
    kind: str  # "active" | "deferred"
    activation_unit: str | None
    promotion_mode: str | None


@dataclass(frozen=True)
class Obligation:
    id: str
    unit: str
    gates: tuple[str, ...]
    artifact: Artifact
    command: Command
    state: State
    raw: Mapping[str, Any]

    @property
    def active(self) -> bool:
        return self.state.kind == "active"


@dataclass(frozen=True)
class Unit:
    id: str
    name: str
    title: str


@dataclass(frozen=True)
class Edge:
    source: str
    target: str


@dataclass(frozen=True)
class Cohort:
    id: str
    members: tuple[str, ...]
    title: str


@dataclass(frozen=True)
class Registry:
    revision: int
    gates: tuple[tuple[str, str], ...]
    units: tuple[Unit, ...]
    edges: tuple[Edge, ...]
    cohorts: tuple[Cohort, ...]
    raw: Mapping[str, Any]

    @property
    def unit_ids(self) -> list[str]:
        return [u.id for u in self.units]

    @property
    def gate_ids(self) -> list[str]:
        return [g for g, _ in self.gates]


@dataclass(frozen=True)
class Acknowledgement:
    """A historical violation the ledger admits instead of hiding (see the replay tool).

    ``diagnostics`` holds one canonical key per diagnostic (``diagnostic_key``) that replaying
    ``commit`` against its first parent must reproduce exactly.
    """

    commit: str
    reason: str
    diagnostics: tuple[str, ...]


@dataclass(frozen=True)
class Manifest:
    registry: Registry
    obligations: tuple[Obligation, ...]
    # The revision log: (revision, reason) for revisions 2.. in order; None when absent (the
    # manifests written before the log existed).
    revisions: tuple[tuple[int, str], ...] | None = None
    acknowledged: tuple[Acknowledgement, ...] = ()

    def by_id(self) -> dict[str, Obligation]:
        return {o.id: o for o in self.obligations}

    def unit_rows(self, unit: str) -> list[Obligation]:
        return [o for o in self.obligations if o.unit == unit]


# --------------------------------------------------------------------------------------------
# Shape validation: TOML -> typed model, without cascading errors


class _Shape:
    """Checks one table's keys and value types, reporting each problem once."""

    def __init__(self, sink: Diagnostics) -> None:
        self.sink = sink

    def table(
        self,
        name: str,
        value: Any,
        required: Mapping[str, str],
        optional: Mapping[str, str] | None = None,
    ) -> dict[str, Any] | None:
        optional = optional or {}
        if not isinstance(value, dict):
            return None
        ok = True
        for key in value:
            if key not in required and key not in optional:
                self.sink.add(
                    "E_SCHEMA_UNKNOWN_KEY", f"{name}: unknown key {key!r}", table=name, key=key
                )
                ok = False
        for key, expected in {**required, **optional}.items():
            if key not in value:
                if key in required:
                    self.sink.add(
                        "E_SCHEMA_MISSING_KEY",
                        f"{name}: required key {key!r} is missing",
                        table=name,
                        key=key,
                    )
                    ok = False
                continue
            if not _type_ok(value[key], expected):
                self.sink.add(
                    "E_SCHEMA_TYPE",
                    f"{name}.{key}: expected {expected}, got {type(value[key]).__name__}",
                    table=name,
                    key=key,
                    expected=expected,
                )
                ok = False
        return value if ok else None


def _type_ok(value: Any, expected: str) -> bool:
    if expected == "string":
        return isinstance(value, str) and value != ""
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "table":
        return isinstance(value, dict)
    if expected == "array of strings":
        return isinstance(value, list) and all(isinstance(v, str) and v for v in value)
    if expected == "array of tables":
        return isinstance(value, list) and all(isinstance(v, dict) for v in value)
    raise AssertionError(expected)


def parse_manifest(data: Mapping[str, Any], sink: Diagnostics) -> Manifest | None:
    """Builds the typed model; returns None when the shape is too broken to check further."""
    schema = data.get("schema")
    if schema != MANIFEST_SCHEMA:
        # A v1 (or any other) manifest is rejected by its marker alone; there is no
        # compatibility parser.
        sink.add(
            "E_SCHEMA_MISMATCH",
            f"manifest schema must be {MANIFEST_SCHEMA!r}, found {schema!r}",
            expected=MANIFEST_SCHEMA,
            actual=schema if isinstance(schema, str) else None,
        )
        return None
    shape = _Shape(sink)
    top = shape.table(
        "manifest",
        dict(data),
        {"schema": "string", "registry": "table", "obligations": "array of tables"},
        {"revisions": "array of tables", "acknowledged": "array of tables"},
    )
    if top is None:
        return None
    registry = _parse_registry(top["registry"], shape, sink)
    rows: list[Obligation] = []
    rows_ok = True
    for index, row in enumerate(top["obligations"]):
        parsed = _parse_obligation(index, row, shape, sink)
        if parsed is None:
            rows_ok = False
        else:
            rows.append(parsed)
    revisions_ok, revisions = _parse_revisions(top.get("revisions"), shape)
    acknowledged = _parse_acknowledged(top.get("acknowledged", []), shape, sink)
    if registry is None or not rows_ok or not revisions_ok or acknowledged is None:
        return None
    return Manifest(registry, tuple(rows), revisions, acknowledged)


def diagnostic_key(code: str, fields: Mapping[str, Any]) -> str:
    """One canonical string per (code, identifying fields): how replayed and acknowledged
    diagnostics are compared.  O(size of the fields); allocates one string."""
    return json.dumps({"code": code, "fields": dict(fields)}, sort_keys=True)


def _parse_revisions(value: Any, shape: _Shape) -> tuple[bool, tuple[tuple[int, str], ...] | None]:
    """The optional revision log as (well-formed, entries); entries is None when absent."""
    if value is None:
        return True, None
    entries: list[tuple[int, str]] = []
    for i, entry in enumerate(value):
        t = shape.table(f"revisions[{i}]", entry, {"revision": "integer", "reason": "string"})
        if t is None:
            return False, None
        entries.append((t["revision"], t["reason"]))
    return True, tuple(entries)


def _parse_acknowledged(
    value: list[Any], shape: _Shape, sink: Diagnostics
) -> tuple[Acknowledgement, ...] | None:
    result: list[Acknowledgement] = []
    ok = True
    for i, entry in enumerate(value):
        t = shape.table(
            f"acknowledged[{i}]",
            entry,
            {"commit": "string", "reason": "string", "diagnostics": "array of tables"},
        )
        if t is None:
            ok = False
            continue
        keys: list[str] = []
        if not t["diagnostics"]:
            sink.add(
                "E_ACKNOWLEDGED_INVALID",
                f"acknowledged[{i}] ({t['commit']}) lists no diagnostic",
                commit=t["commit"],
                diagnostic_code=None,
            )
            ok = False
        for d in t["diagnostics"]:
            code = d.get("code")
            fields = {k: v for k, v in d.items() if k != "code"}
            expected = DIAGNOSTIC_FIELDS.get(code) if isinstance(code, str) else None
            if expected is None or frozenset(fields) != expected:
                sink.add(
                    "E_ACKNOWLEDGED_INVALID",
                    f"acknowledged[{i}] ({t['commit']}): {code!r} with fields "
                    f"{sorted(fields)} is not a registered diagnostic shape",
                    commit=t["commit"],
                    diagnostic_code=code if isinstance(code, str) else None,
                )
                ok = False
                continue
            keys.append(diagnostic_key(code, fields))
        result.append(Acknowledgement(t["commit"], t["reason"], tuple(keys)))
    return tuple(result) if ok else None


def _parse_registry(value: Any, shape: _Shape, sink: Diagnostics) -> Registry | None:
    reg = shape.table(
        "registry",
        value,
        {
            "revision": "integer",
            "gates": "array of tables",
            "units": "array of tables",
            "edges": "array of tables",
            "cohorts": "array of tables",
        },
    )
    if reg is None:
        return None
    ok = True
    gates: list[tuple[str, str]] = []
    for i, g in enumerate(reg["gates"]):
        t = shape.table(f"registry.gates[{i}]", g, {"id": "string", "title": "string"})
        if t is None:
            ok = False
        else:
            gates.append((t["id"], t["title"]))
    units: list[Unit] = []
    for i, u in enumerate(reg["units"]):
        t = shape.table(
            f"registry.units[{i}]", u, {"id": "string", "name": "string", "title": "string"}
        )
        if t is None:
            ok = False
        else:
            units.append(Unit(t["id"], t["name"], t["title"]))
    edges: list[Edge] = []
    for i, e in enumerate(reg["edges"]):
        t = shape.table(f"registry.edges[{i}]", e, {"from": "string", "to": "string"})
        if t is None:
            ok = False
        else:
            edges.append(Edge(t["from"], t["to"]))
    cohorts: list[Cohort] = []
    for i, c in enumerate(reg["cohorts"]):
        t = shape.table(
            f"registry.cohorts[{i}]",
            c,
            {"id": "string", "members": "array of strings", "title": "string"},
        )
        if t is None:
            ok = False
        else:
            cohorts.append(Cohort(t["id"], tuple(t["members"]), t["title"]))
    if not ok:
        return None
    if reg["revision"] < 1:
        sink.add(
            "E_REVISION_INVALID",
            f"registry.revision must be a positive integer, found {reg['revision']}",
            actual=reg["revision"],
        )
        return None
    return Registry(reg["revision"], tuple(gates), tuple(units), tuple(edges), tuple(cohorts), reg)


def _parse_obligation(index: int, row: Any, shape: _Shape, sink: Diagnostics) -> Obligation | None:
    oid = row.get("id") if isinstance(row, dict) else None
    name = f"obligations[{oid}]" if isinstance(oid, str) and oid else f"obligations[{index}]"
    command_value = row.get("command") if isinstance(row, dict) else None
    if isinstance(command_value, dict) and isinstance(command_value.get("argv"), str):
        # A shell string is never an argv; say so instead of a generic type error.
        sink.add(
            "E_COMMAND_SHELL_STRING",
            f"{name}.command.argv is a shell string; commands are typed argv lists",
            command_id=str(command_value.get("id")),
        )
        return None
    t = shape.table(
        name,
        row,
        {
            "id": "string",
            "unit": "string",
            "gates": "array of strings",
            "artifact": "table",
            "command": "table",
            "state": "table",
        },
    )
    if t is None:
        return None
    a = shape.table(
        f"{name}.artifact",
        t["artifact"],
        {"id": "string", "kind": "string", "path": "string"},
        {"selector": "string"},
    )
    c = shape.table(
        f"{name}.command",
        t["command"],
        {
            "id": "string",
            "kind": "string",
            "argv": "array of strings",
            "cwd": "string",
            "path_args": "array of strings",
            "artifact_id": "string",
        },
    )
    state = _parse_state(name, t["id"], t["state"], shape, sink)
    if a is None or c is None or state is None:
        return None
    artifact = Artifact(a["id"], a["kind"], a["path"], a.get("selector"))
    command = Command(
        c["id"], c["kind"], tuple(c["argv"]), c["cwd"], tuple(c["path_args"]), c["artifact_id"]
    )
    return Obligation(t["id"], t["unit"], tuple(t["gates"]), artifact, command, state, t)


def _parse_state(
    name: str, oid: str, value: dict[str, Any], shape: _Shape, sink: Diagnostics
) -> State | None:
    kind = value.get("kind")
    table = f"{name}.state"
    if kind == "active":
        t = shape.table(table, value, {"kind": "string"})
        return None if t is None else State("active", None, None)
    if kind == "deferred":
        t = shape.table(
            table, value, {"kind": "string", "activation_unit": "string", "promotion": "table"}
        )
        if t is None:
            return None
        p = shape.table(f"{table}.promotion", t["promotion"], {"mode": "string"})
        if p is None:
            return None
        return State("deferred", t["activation_unit"], p["mode"])
    sink.add(
        "E_STATE_KIND",
        f"{name}: state.kind must be exactly 'active' or 'deferred', found {kind!r}",
        obligation_id=oid,
        actual=kind if isinstance(kind, str) else None,
    )
    return None


def load_manifest_text(text: str) -> dict[str, Any]:
    return tomllib.loads(text)


# --------------------------------------------------------------------------------------------
# Registry, graph, cohort and lifecycle rules


def _expand(node: str, cohorts: Mapping[str, Cohort]) -> tuple[str, ...]:
    return cohorts[node].members if node in cohorts else (node,)


def incoming_sources(registry: Registry) -> dict[str, list[str]]:
    """Direct prerequisite nodes for every graph node (a unit or the cohort)."""
    result: dict[str, list[str]] = {}
    for e in registry.edges:
        result.setdefault(e.target, [])
        if e.source not in result[e.target]:
            result[e.target].append(e.source)
    return result


def check_registry(manifest: Manifest, sink: Diagnostics) -> None:
    reg = manifest.registry
    _check_duplicates(manifest, sink)
    units = set(reg.unit_ids)
    cohorts = {c.id: c for c in reg.cohorts}
    member_of = {m: c.id for c in reg.cohorts for m in c.members}
    nodes = units | set(cohorts)

    graph_ok = True
    seen_edges: set[tuple[str, str]] = set()
    for e in reg.edges:
        for node in (e.source, e.target):
            if node not in nodes:
                graph_ok = False
                sink.add(
                    "E_GRAPH_UNKNOWN_NODE",
                    f"edge {e.source} -> {e.target} names {node!r}, which is neither a "
                    "registered unit nor a cohort",
                    **{"from": e.source, "to": e.target, "node": node},
                )
            elif node in member_of:
                graph_ok = False
                sink.add(
                    "E_GRAPH_COHORT_MEMBER_ENDPOINT",
                    f"edge {e.source} -> {e.target} names cohort member {node}; edges must "
                    f"name the cohort {member_of[node]!r} so its members move together",
                    **{"from": e.source, "to": e.target},
                    unit=node,
                    cohort_id=member_of[node],
                )
        if (e.source, e.target) in seen_edges:
            sink.add(
                "E_GRAPH_DUPLICATE_EDGE",
                f"edge {e.source} -> {e.target} is registered more than once",
                **{"from": e.source, "to": e.target},
            )
        seen_edges.add((e.source, e.target))
    if graph_ok:
        for cycle in _cycles(sorted(nodes), reg.edges):
            sink.add(
                "E_GRAPH_CYCLE",
                f"the registry graph has a cycle through {', '.join(cycle)}",
                nodes=cycle,
            )

    incoming = incoming_sources(reg)
    for root in ROOT_UNITS:
        if root in units and incoming.get(root):
            sink.add(
                "E_GRAPH_ROOT_INCOMING",
                f"{root} is an independent root of the graph and must have no incoming edge",
                unit=root,
                sources=sorted(incoming[root]),
            )
    target, expected_sources = SINGLE_INCOMING
    if target in units and sorted(incoming.get(target, [])) != list(expected_sources):
        sink.add(
            "E_GRAPH_SINGLE_INCOMING",
            f"{target} must have exactly one incoming edge, from {', '.join(expected_sources)}",
            unit=target,
            expected=list(expected_sources),
            actual=sorted(incoming.get(target, [])),
        )

    if len(reg.cohorts) != 1:
        sink.add(
            "E_COHORT_COUNT",
            f"the registry must define exactly one atomic cohort, found {len(reg.cohorts)}",
            expected=1,
            actual=len(reg.cohorts),
        )
    for c in reg.cohorts:
        unknown = [m for m in c.members if m not in units]
        for m in unknown:
            sink.add(
                "E_COHORT_UNKNOWN_UNIT",
                f"cohort {c.id} names unregistered unit {m!r}",
                cohort_id=c.id,
                unit=m,
            )
        if not unknown and list(c.members) != list(COHORT_MEMBERS):
            sink.add(
                "E_COHORT_DEFINITION",
                f"cohort {c.id} must contain exactly {', '.join(COHORT_MEMBERS)}",
                cohort_id=c.id,
                field="members",
                expected=list(COHORT_MEMBERS),
                actual=list(c.members),
            )
        prereqs = sorted(incoming.get(c.id, []))
        if prereqs != sorted(COHORT_PREREQUISITES):
            sink.add(
                "E_COHORT_DEFINITION",
                f"cohort {c.id} must have exactly {', '.join(COHORT_PREREQUISITES)} as "
                "direct prerequisites",
                cohort_id=c.id,
                field="prerequisites",
                expected=sorted(COHORT_PREREQUISITES),
                actual=prereqs,
            )

    gate_ids = set(reg.gate_ids)
    for o in manifest.obligations:
        if o.unit not in units:
            sink.add(
                "E_UNKNOWN_UNIT",
                f"obligation {o.id} names unregistered unit {o.unit!r}",
                obligation_id=o.id,
                unit=o.unit,
            )
        if not o.gates or len(set(o.gates)) != len(o.gates):
            sink.add(
                "E_GATE_LIST",
                f"obligation {o.id} must name one or more distinct gates",
                obligation_id=o.id,
                gates=list(o.gates),
            )
        for g in dict.fromkeys(o.gates):
            if g not in gate_ids:
                sink.add(
                    "E_UNKNOWN_GATE",
                    f"obligation {o.id} names unregistered gate {g!r}",
                    obligation_id=o.id,
                    gate=g,
                )
        if o.state.kind == "deferred":
            if o.unit in units and o.state.activation_unit != o.unit:
                sink.add(
                    "E_DEFERRED_ACTIVATION_UNIT",
                    f"deferred obligation {o.id} must name its own unit {o.unit} as "
                    "activation_unit",
                    obligation_id=o.id,
                    expected=o.unit,
                    actual=o.state.activation_unit,
                )
            if o.state.promotion_mode != PROMOTION_MODE:
                sink.add(
                    "E_PROMOTION_MODE",
                    f"deferred obligation {o.id} must use promotion mode {PROMOTION_MODE!r}",
                    obligation_id=o.id,
                    actual=o.state.promotion_mode,
                )
    if manifest.revisions is not None:
        expected_log = list(range(2, reg.revision + 1))
        actual_log = [r for r, _ in manifest.revisions]
        if actual_log != expected_log:
            sink.add(
                "E_REVISION_LOG",
                f"the revision log must record revisions {expected_log} in order (revision 1 "
                f"is the original registry), found {actual_log}",
                expected=expected_log,
                actual=actual_log,
            )
    owned = {o.unit for o in manifest.obligations}
    for u in reg.unit_ids:
        if u not in owned:
            sink.add(
                "E_UNIT_NO_OBLIGATIONS",
                f"unit {u} owns no obligation; an empty unit is invalid, not vacuously complete",
                unit=u,
            )


def _check_duplicates(manifest: Manifest, sink: Diagnostics) -> None:
    reg = manifest.registry
    groups: list[tuple[str, Iterable[str]]] = [
        ("gate", reg.gate_ids),
        ("unit", reg.unit_ids),
        ("cohort", [c.id for c in reg.cohorts]),
        ("obligation", [o.id for o in manifest.obligations]),
    ]
    for kind, ids in groups:
        seen: set[str] = set()
        for i in ids:
            if i in seen:
                sink.add("E_DUPLICATE_ID", f"{kind} id {i!r} is not unique", kind=kind, id=i)
            seen.add(i)
    for i in set(reg.unit_ids) & {c.id for c in reg.cohorts}:
        sink.add("E_DUPLICATE_ID", f"{i!r} names both a unit and a cohort", kind="node", id=i)


def _cycles(nodes: list[str], edges: Sequence[Edge]) -> list[list[str]]:
    """Strongly connected components that form cycles (Tarjan), each sorted."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for e in edges:
        succ[e.source].append(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in succ[v]:
                found.append(sorted(comp))

    for n in nodes:
        if n not in index:
            visit(n)
    return sorted(found)


def check_lifecycle(manifest: Manifest, sink: Diagnostics) -> None:
    """Atomic cohort activation and direct prerequisites, derived from edges and states."""
    reg = manifest.registry
    cohorts = {c.id: c for c in reg.cohorts}
    for c in reg.cohorts:
        rows = [o for m in c.members for o in manifest.unit_rows(m)]
        active = sorted(o.id for o in rows if o.active)
        deferred = sorted(o.id for o in rows if not o.active)
        if active and deferred:
            sink.add(
                "E_COHORT_PARTIAL_ACTIVATION",
                f"cohort {c.id} activates atomically: {len(active)} member obligation(s) are "
                f"active while {len(deferred)} remain deferred",
                cohort_id=c.id,
                active=active,
                deferred=deferred,
            )
    for node, sources in sorted(incoming_sources(reg).items()):
        if not any(o.active for m in _expand(node, cohorts) for o in manifest.unit_rows(m)):
            continue
        for source in sources:
            deferred = sorted(
                o.id
                for m in _expand(source, cohorts)
                for o in manifest.unit_rows(m)
                if not o.active
            )
            if deferred:
                sink.add(
                    "E_PREREQUISITE_INACTIVE",
                    f"{node} has active obligations, so every obligation of its direct "
                    f"prerequisite {source} must already be active",
                    node=node,
                    prerequisite=source,
                    deferred=deferred,
                )


# --------------------------------------------------------------------------------------------
# Path confinement (reported before any command identity comparison)


def confine(root: Path, base: Path, path: str) -> tuple[str, Path | None]:
    """Classifies a manifest path: ("ok", resolved) | ("escape", None) | ("noncanonical", None).

    Resolution follows ordinary filesystem rules, so a symlink that points outside the
    repository is an escape even though the string looks repository-relative.
    """
    if "\\" in path or "\x00" in path:
        return "noncanonical", None
    pure = PurePosixPath(path)
    if pure.is_absolute() or re.match(r"^[A-Za-z]:", path):
        return "escape", None
    if ".." in pure.parts:
        normal = os.path.normpath(path)
        if normal == ".." or normal.startswith("../"):
            return "escape", None
        return "noncanonical", None
    if pure.as_posix() != path:
        return "noncanonical", None
    resolved = (base / path).resolve()
    try:
        resolved.relative_to(root.resolve())
    except ValueError:
        return "escape", None
    return "ok", resolved


def _argv_index(argv: Sequence[str], path: str) -> int | None:
    for i, value in enumerate(argv):
        if value == path or value.startswith(path + "::"):
            return i
    return None


class TreeFiles:
    """The files of one commit's tree (``git ls-tree -r``): existence without a checkout.

    The history replay checks old candidates against the files they committed, not against
    today's working tree.  Construction is O(files x depth); lookups are O(1).
    """

    def __init__(self, files: Iterable[str]) -> None:
        self.files = frozenset(files)
        dirs = {"."}
        for f in self.files:
            parts = f.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:i]))
        self.dirs = frozenset(dirs)

    def exists(self, rel: str) -> bool:
        return rel in self.files or rel in self.dirs

    def is_dir(self, rel: str) -> bool:
        return rel in self.dirs


def check_paths(
    root: Path, manifest: Manifest, sink: Diagnostics, tree: TreeFiles | None = None
) -> set[str]:
    """Confines every artifact, cwd and path argument; returns obligation ids with failures.

    Existence is read from the filesystem, or from ``tree`` (a commit's files) when given.
    """
    failed: set[str] = set()
    real_root = root.resolve()

    def rel(resolved: Path) -> str:
        return resolved.relative_to(real_root).as_posix() or "."

    def exists(resolved: Path) -> bool:
        return resolved.exists() if tree is None else tree.exists(rel(resolved))

    def is_dir(resolved: Path) -> bool:
        return resolved.is_dir() if tree is None else tree.is_dir(rel(resolved))

    for o in manifest.obligations:
        before = len(sink)
        a, c = o.artifact, o.command
        status, resolved = confine(root, root, a.path)
        if status == "noncanonical":
            sink.add(
                "E_PATH_NOT_CANONICAL",
                f"{o.id}: artifact path {a.path!r} is not an exact repository-relative path",
                obligation_id=o.id,
                field="artifact.path",
                path=a.path,
            )
        elif status == "escape":
            sink.add(
                "E_ARTIFACT_PATH_ESCAPE",
                f"{o.id}: artifact path {a.path!r} resolves outside the repository",
                obligation_id=o.id,
                artifact_id=a.id,
                path=a.path,
            )
        elif o.active and resolved is not None and not exists(resolved):
            # Only active rows need evidence on disk; a deferred path is a future
            # specification and is never fabricated.
            sink.add(
                "E_ARTIFACT_MISSING",
                f"{o.id}: active artifact {a.path!r} does not exist",
                obligation_id=o.id,
                artifact_id=a.id,
                path=a.path,
            )
        cwd_status, cwd_resolved = confine(root, root, c.cwd)
        if cwd_status == "noncanonical":
            sink.add(
                "E_PATH_NOT_CANONICAL",
                f"{o.id}: command cwd {c.cwd!r} is not an exact repository-relative path",
                obligation_id=o.id,
                field="command.cwd",
                path=c.cwd,
            )
        elif cwd_status == "escape":
            sink.add(
                "E_CWD_ESCAPE",
                f"{o.id}: command cwd {c.cwd!r} resolves outside the repository",
                obligation_id=o.id,
                command_id=c.id,
                cwd=c.cwd,
            )
        elif o.active and cwd_resolved is not None and not is_dir(cwd_resolved):
            sink.add(
                "E_CWD_MISSING",
                f"{o.id}: command cwd {c.cwd!r} is not a directory",
                obligation_id=o.id,
                command_id=c.id,
                cwd=c.cwd,
            )
        if cwd_resolved is not None and is_dir(cwd_resolved):
            for p in dict.fromkeys(c.path_args):
                index = _argv_index(c.argv, p)
                if index is None or p == a.path:
                    continue  # unbound: reported with command identity; artifact: above
                status, resolved = confine(root, cwd_resolved, p)
                if status == "noncanonical":
                    sink.add(
                        "E_PATH_NOT_CANONICAL",
                        f"{o.id}: path argument {p!r} is not an exact repository-relative path",
                        obligation_id=o.id,
                        field="command.path_args",
                        path=p,
                    )
                elif status == "escape":
                    sink.add(
                        "E_ARGV_PATH_ESCAPE",
                        f"{o.id}: argv[{index}] {p!r} resolves outside the repository",
                        obligation_id=o.id,
                        command_id=c.id,
                        index=index,
                        path=p,
                    )
                elif o.active and resolved is not None and not exists(resolved):
                    sink.add(
                        "E_ARGV_PATH_MISSING",
                        f"{o.id}: argv[{index}] {p!r} does not exist",
                        obligation_id=o.id,
                        command_id=c.id,
                        index=index,
                        path=p,
                    )
        if len(sink) != before:
            failed.add(o.id)
    return failed


# --------------------------------------------------------------------------------------------
# Exact command allow-list and identity


def pytest_argv(artifact: Artifact) -> list[str]:
    """The one allowed pytest argv: the interpreter runs pytest on the artifact (node id)."""
    target = artifact.path + (f"::{artifact.selector}" if artifact.selector else "")
    return [INTERPRETER, "-m", "pytest", target]


def _argv_mismatch(command: Command, artifact: Artifact) -> tuple[int, Any, Any] | None:
    argv = command.argv
    if command.kind == "pytest":
        want = pytest_argv(artifact)
        for i in range(max(len(want), len(argv))):
            exp = want[i] if i < len(want) else None
            act = argv[i] if i < len(argv) else None
            if exp != act:
                return i, exp, act
        return None
    # python-check / doc-check / benchmark-check: python3 scripts/<verifier>.py [...] <artifact>
    if not argv or argv[0] != INTERPRETER:
        return 0, INTERPRETER, argv[0] if argv else None
    if len(argv) < 2 or not CHECK_SCRIPT.fullmatch(argv[1]):
        return 1, CHECK_SCRIPT_PATTERN, argv[1] if len(argv) > 1 else None
    last = len(argv) - 1
    if last < 2 or argv[last] != artifact.path:
        index = max(last, 2)
        return index, artifact.path, argv[index] if index < len(argv) else None
    return None


def _path_positions(command: Command) -> list[int]:
    if command.kind == "pytest":
        return [3]
    return [1, len(command.argv) - 1]


def check_commands(manifest: Manifest, skip: set[str], sink: Diagnostics) -> None:
    artifacts: dict[str, Artifact] = {}
    commands: dict[str, tuple[Command, str]] = {}
    checked_commands: set[str] = set()
    checked_artifacts: set[str] = set()
    for o in manifest.obligations:
        a, c = o.artifact, o.command
        if a.id in artifacts and artifacts[a.id] != a:
            sink.add(
                "E_ARTIFACT_CONFLICT",
                f"artifact id {a.id!r} is reused with a different typed value",
                artifact_id=a.id,
            )
        artifacts.setdefault(a.id, a)
        if c.id in commands and commands[c.id] != (c, a.id):
            sink.add(
                "E_COMMAND_CONFLICT",
                f"command id {c.id!r} is shared by rows whose command value or artifact "
                "binding differ",
                command_id=c.id,
            )
        commands.setdefault(c.id, (c, a.id))
        if o.id in skip:
            continue  # a path failure already explains this row
        if a.id not in checked_artifacts:
            checked_artifacts.add(a.id)
            if a.kind not in ARTIFACT_KINDS:
                sink.add(
                    "E_ARTIFACT_KIND",
                    f"artifact {a.id}: kind {a.kind!r} is not one of {sorted(ARTIFACT_KINDS)}",
                    artifact_id=a.id,
                    kind=a.kind,
                )
            elif a.selector is not None and a.kind not in SELECTOR_ARTIFACT_KINDS:
                sink.add(
                    "E_ARTIFACT_SELECTOR",
                    f"artifact {a.id}: a selector is only meaningful for "
                    f"{sorted(SELECTOR_ARTIFACT_KINDS)}",
                    artifact_id=a.id,
                    kind=a.kind,
                )
        if c.artifact_id != a.id:
            sink.add(
                "E_COMMAND_ARTIFACT_BINDING",
                f"{o.id}: command {c.id} may inspect only artifact {c.artifact_id!r}, but the "
                f"row's artifact is {a.id!r}",
                obligation_id=o.id,
                command_id=c.id,
                expected=a.id,
                actual=c.artifact_id,
            )
            continue
        if c.id in checked_commands:
            continue
        checked_commands.add(c.id)
        if c.kind not in COMMAND_KINDS:
            sink.add(
                "E_COMMAND_KIND",
                f"command {c.id}: kind {c.kind!r} is not allow-listed ({sorted(COMMAND_KINDS)})",
                command_id=c.id,
                kind=c.kind,
            )
            continue
        if a.kind in ARTIFACT_KINDS and a.kind not in COMMAND_KINDS[c.kind]:
            sink.add(
                "E_COMMAND_ARTIFACT_KIND",
                f"command {c.id}: a {c.kind} command cannot inspect a {a.kind} artifact",
                command_id=c.id,
                kind=c.kind,
                artifact_kind=a.kind,
            )
            continue  # its argv template would not fit the artifact either
        if c.cwd != ".":
            sink.add(
                "E_COMMAND_CWD",
                f"command {c.id}: cwd must be the repository root '.', found {c.cwd!r}",
                command_id=c.id,
                expected=".",
                actual=c.cwd,
            )
        mismatch = _argv_mismatch(c, a)
        if mismatch is not None:
            index, exp, act = mismatch
            sink.add(
                "E_COMMAND_ARGV",
                f"command {c.id}: argv[{index}] must be {exp!r}, found {act!r}",
                command_id=c.id,
                index=index,
                expected=exp,
                actual=act,
            )
            continue
        for p in c.path_args:
            if _argv_index(c.argv, p) is None:
                sink.add(
                    "E_PATH_ARG_UNBOUND",
                    f"command {c.id}: path argument {p!r} does not occur in argv",
                    command_id=c.id,
                    path=p,
                )
        for index in _path_positions(c):
            value = c.argv[index].split("::", 1)[0]
            if value not in c.path_args:
                sink.add(
                    "E_PATH_ARG_UNDECLARED",
                    f"command {c.id}: argv[{index}] {value!r} is a path and must be listed in "
                    "path_args so it is confined",
                    command_id=c.id,
                    index=index,
                    path=value,
                )


def check_structure(
    root: Path, manifest: Manifest, sink: Diagnostics, tree: TreeFiles | None = None
) -> None:
    check_registry(manifest, sink)
    check_lifecycle(manifest, sink)
    failed = check_paths(root, manifest, sink, tree)
    check_commands(manifest, failed, sink)


# --------------------------------------------------------------------------------------------
# Git


def git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(root), *args],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def candidate_commit(root: Path) -> str | None:
    out = git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def require_candidate(root: Path, sink: Diagnostics) -> str | None:
    head = candidate_commit(root)
    if head is None:
        sink.add(
            "E_GIT_CANDIDATE",
            f"{root} has no resolvable HEAD commit; the candidate is always git rev-parse HEAD",
            root=str(root),
        )
    return head


def resolve_base(root: Path, revision: str, candidate: str, sink: Diagnostics) -> str | None:
    """Canonicalizes the base with rev-parse --verify <rev>^{commit}; it must be an ancestor."""
    if not revision or revision.startswith("-"):
        sink.add(
            "E_BASE_UNRESOLVED", f"base revision {revision!r} is not a revision", revision=revision
        )
        return None
    out = git(root, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    base = out.stdout.strip()
    if out.returncode != 0 or not base:
        sink.add(
            "E_BASE_UNRESOLVED",
            f"base revision {revision!r} does not name a commit in {root}",
            revision=revision,
        )
        return None
    if git(root, "merge-base", "--is-ancestor", base, candidate).returncode != 0:
        sink.add(
            "E_BASE_NOT_ANCESTOR",
            f"base {base} is not an ancestor of candidate {candidate}",
            base_commit=base,
            candidate_commit=candidate,
        )
        return None
    return base


def load_base_manifest(
    root: Path, base: str, manifest_rel: str, sink: Diagnostics
) -> Manifest | None:
    out = git(root, "show", f"{base}:{manifest_rel}")
    base_sink = Diagnostics()
    manifest = None
    if out.returncode == 0:
        try:
            manifest = parse_manifest(load_manifest_text(out.stdout), base_sink)
        except tomllib.TOMLDecodeError:
            manifest = None
    if manifest is None or base_sink:
        sink.add(
            "E_BASE_MANIFEST",
            f"base {base} has no valid v2 manifest at {manifest_rel}",
            base_commit=base,
            path=manifest_rel,
        )
        return None
    return manifest


def tree_dirty_paths(root: Path) -> list[str]:
    # The single cleanliness check: tracked files must match HEAD.  Untracked or ignored
    # files (receipts, caches, logs) are deliberately allowed.
    out = git(root, "status", "--porcelain=v1", "-z", "--untracked-files=no")
    entries = [e for e in out.stdout.split("\0") if e]
    return sorted(e[3:] for e in entries if len(e) > 3)


def check_tree_clean(root: Path, sink: Diagnostics) -> None:
    dirty = tree_dirty_paths(root)
    if dirty:
        sink.add(
            "E_TREE_DIRTY",
            f"tracked files differ from HEAD ({', '.join(dirty[:5])}"
            f"{', ...' if len(dirty) > 5 else ''}); commit or stash them first",
            paths=dirty,
        )


def check_tracked(root: Path, manifest: Manifest, manifest_rel: str, sink: Diagnostics) -> None:
    """Active evidence (manifest, artifacts, verifiers) must be tracked at the candidate."""
    out = git(root, "ls-files", "-z")
    tracked = {p for p in out.stdout.split("\0") if p}
    wanted: list[str] = [manifest_rel]
    for o in manifest.obligations:
        if o.active:
            wanted.append(o.artifact.path)
            wanted.extend(p for p in o.command.path_args if p != ".")
    for p in dict.fromkeys(wanted):
        if not (root / p).exists():
            continue  # already reported as missing by the structural checks
        if p not in tracked and not any(t.startswith(p.rstrip("/") + "/") for t in tracked):
            sink.add(
                "E_PATH_UNTRACKED",
                f"{p} is not tracked at the candidate commit; evidence must be committed",
                path=p,
            )


# --------------------------------------------------------------------------------------------
# Promotion and revision-only amendment against a base manifest


def _row_fields(o: Obligation) -> dict[str, Any]:
    return {
        "unit": o.raw["unit"],
        "gates": o.raw["gates"],
        "artifact": o.raw["artifact"],
        "command": o.raw["command"],
    }


def compare_with_base(base: Manifest, cand: Manifest, sink: Diagnostics) -> None:
    for field in ("gates", "units", "edges", "cohorts"):
        if base.registry.raw[field] != cand.registry.raw[field]:
            sink.add(
                "E_REGISTRY_CHANGED",
                f"registry.{field} differs from the base; graph edits are neither promotions "
                "nor revision-only amendments",
                field=field,
            )
    rb, rc = base.registry.revision, cand.registry.revision
    revision = rc == rb + 1
    _compare_history_records(base, cand, revision, sink)
    if rc not in (rb, rb + 1):
        sink.add(
            "E_REVISION_STEP",
            f"registry.revision may stay at {rb} or advance to {rb + 1}, found {rc}",
            base_revision=rb,
            candidate_revision=rc,
        )
        return
    brows, crows = base.by_id(), cand.by_id()
    for oid in sorted(set(brows) - set(crows)):
        sink.add(
            "E_OBLIGATION_REMOVED",
            f"obligation {oid} exists in the base but not in the candidate; IDs are immutable",
            obligation_id=oid,
        )
    for oid in sorted(set(crows) - set(brows)):
        if revision or crows[oid].active:
            sink.add(
                "E_OBLIGATION_ADDED",
                f"new obligation {oid} is not admissible here: a revision preserves membership "
                "and a new row starts deferred",
                obligation_id=oid,
            )
    promoted_units: set[str] = set()
    for oid in sorted(set(brows) & set(crows)):
        b, c = brows[oid], crows[oid]
        changed = [f for f, v in _row_fields(b).items() if _row_fields(c)[f] != v]
        if b.active and not c.active:
            sink.add(
                "E_STATE_REGRESSION",
                f"obligation {oid} was active in the base and cannot return to deferred",
                obligation_id=oid,
            )
            continue
        if revision:
            if b.state.kind != c.state.kind:
                sink.add(
                    "E_REVISION_WITH_PROMOTION",
                    f"obligation {oid} changes state in a revision candidate; revise and "
                    "promote in separate candidates",
                    obligation_id=oid,
                )
                continue
            # activation_unit and promotion mode are pinned by the structural rules (own unit,
            # activate-in-place), so a state difference beyond the kind cannot survive them.
            # Still-deferred rows may revise gates, artifact and command; nothing else moves.
            allowed = {"gates", "artifact", "command"} if not b.active else set()
            changed = [f for f in changed if f not in allowed]
        for field in changed:
            sink.add(
                "E_OBLIGATION_CHANGED",
                f"obligation {oid}: {field} differs from the base; a changed value is a new "
                "obligation, not a promotion",
                obligation_id=oid,
                field=field,
            )
        if not b.active and c.active:
            promoted_units.add(c.unit)
    if promoted_units and not revision:
        _check_already_active(base, cand, promoted_units, sink)


def _compare_history_records(
    base: Manifest, cand: Manifest, revision: bool, sink: Diagnostics
) -> None:
    """The revision log only grows; the acknowledged history is written once, by a revision.

    Once a base records why each revision happened, a candidate keeps those entries byte for
    byte (the structural check already requires one entry per revision).  The list of
    acknowledged historical violations may appear only in a revision candidate (the revision
    log records why) and is immutable afterwards, so no later change can excuse itself.
    """
    if base.revisions is not None:
        cand_log = cand.revisions or ()
        for i, entry in enumerate(base.revisions):
            if i >= len(cand_log) or cand_log[i] != entry:
                sink.add(
                    "E_REVISION_LOG_CHANGED",
                    f"the revision log entry for revision {entry[0]} differs from the base; "
                    "recorded revisions are append-only",
                    revision=entry[0],
                )
                break
    if base.acknowledged != cand.acknowledged and (base.acknowledged or not revision):
        sink.add(
            "E_ACKNOWLEDGED_CHANGED",
            "the acknowledged history differs from the base; it is introduced once, by a "
            "revision candidate, and never edited afterwards",
            base_count=len(base.acknowledged),
            candidate_count=len(cand.acknowledged),
        )


def _check_already_active(
    base: Manifest, cand: Manifest, promoted_units: set[str], sink: Diagnostics
) -> None:
    reg = cand.registry
    cohorts = {c.id: c for c in reg.cohorts}
    member_of = {m: c.id for c in reg.cohorts for m in c.members}
    base_active = {o.id for o in base.obligations if o.active}
    nodes = sorted({member_of.get(u, u) for u in promoted_units})
    incoming = incoming_sources(reg)
    for node in nodes:
        for source in incoming.get(node, []):
            rows = [o for m in _expand(source, cohorts) for o in cand.unit_rows(m)]
            if any(o.id not in base_active for o in rows):
                sink.add(
                    "E_PREREQUISITE_NOT_ALREADY_ACTIVE",
                    f"{node} is promoted in the same candidate that activates its prerequisite "
                    f"{source}; prerequisites must already be active in the base",
                    node=node,
                    prerequisite=source,
                )


# --------------------------------------------------------------------------------------------
# Receipt


def receipt_executions(manifest: Manifest) -> list[dict[str, Any]]:
    """The canonical execution skeleton (without exit codes) for every active row."""
    return [
        {
            "obligation_id": o.id,
            "argv": list(o.command.argv),
            "cwd": o.command.cwd,
            "artifact_path": o.artifact.path,
        }
        for o in sorted(manifest.obligations, key=lambda o: o.id)
        if o.active
    ]


def validate_receipt(
    receipt: Any,
    manifest: Manifest,
    candidate: str,
    base: str | None,
    sink: Diagnostics,
) -> dict[str, int]:
    """Checks shape, candidate binding and completeness; returns obligation -> exit code."""
    results: dict[str, int] = {}
    if not isinstance(receipt, dict):
        sink.add("E_RECEIPT_SHAPE", "the receipt must be a JSON object", pointer="")
        return results
    top = ("schema", "candidate_commit", "base_commit", "executions")
    shape_ok = _receipt_keys(receipt, top, "", sink)
    if "schema" in receipt and receipt["schema"] != RECEIPT_SCHEMA:
        sink.add("E_RECEIPT_SHAPE", f"receipt schema must be {RECEIPT_SCHEMA!r}", pointer="/schema")
        shape_ok = False
    if "candidate_commit" in receipt and not (
        isinstance(receipt["candidate_commit"], str) and receipt["candidate_commit"]
    ):
        sink.add(
            "E_RECEIPT_SHAPE",
            "candidate_commit must be a non-empty string",
            pointer="/candidate_commit",
        )
        shape_ok = False
    if "base_commit" in receipt and not (
        receipt["base_commit"] is None
        or (isinstance(receipt["base_commit"], str) and receipt["base_commit"])
    ):
        sink.add("E_RECEIPT_SHAPE", "base_commit must be a string or null", pointer="/base_commit")
        shape_ok = False
    executions = receipt.get("executions", [])
    if not isinstance(executions, list):
        sink.add("E_RECEIPT_SHAPE", "executions must be a list", pointer="/executions")
        return results
    fields = ("obligation_id", "argv", "cwd", "artifact_path", "exit_code")
    valid: list[tuple[int, dict[str, Any]]] = []
    for i, ex in enumerate(executions):
        pointer = f"/executions/{i}"
        if not isinstance(ex, dict):
            sink.add("E_RECEIPT_SHAPE", f"{pointer} must be an object", pointer=pointer)
            shape_ok = False
            continue
        ok = _receipt_keys(ex, fields, pointer, sink)
        checks = {
            "obligation_id": isinstance(ex.get("obligation_id"), str),
            "argv": isinstance(ex.get("argv"), list)
            and all(isinstance(v, str) for v in ex["argv"]),
            "cwd": isinstance(ex.get("cwd"), str),
            "artifact_path": isinstance(ex.get("artifact_path"), str),
            "exit_code": isinstance(ex.get("exit_code"), int)
            and not isinstance(ex.get("exit_code"), bool),
        }
        for key, good in checks.items():
            if key in ex and not good:
                sink.add(
                    "E_RECEIPT_SHAPE",
                    f"{pointer}/{key} has the wrong type",
                    pointer=f"{pointer}/{key}",
                )
                ok = False
        if ok:
            valid.append((i, ex))
        else:
            shape_ok = False
    if not shape_ok:
        return results
    if receipt["candidate_commit"] != candidate:
        sink.add(
            "E_RECEIPT_CANDIDATE",
            f"receipt was produced for {receipt['candidate_commit']}, the candidate is {candidate}",
            expected=candidate,
            actual=receipt["candidate_commit"],
        )
    if receipt["base_commit"] != base:
        sink.add(
            "E_RECEIPT_BASE",
            f"receipt base_commit is {receipt['base_commit']!r}, expected {base!r}",
            expected=base,
            actual=receipt["base_commit"],
        )
    rows = manifest.by_id()
    previous: str | None = None
    seen: set[str] = set()
    for i, ex in valid:
        oid = ex["obligation_id"]
        if previous is not None and oid < previous:
            sink.add(
                "E_RECEIPT_ORDER",
                f"executions must be sorted by obligation id; {oid} follows {previous}",
                index=i,
                obligation_id=oid,
            )
        previous = oid if previous is None or oid > previous else previous
        if oid in seen:
            sink.add(
                "E_RECEIPT_DUPLICATE",
                f"obligation {oid} was executed more than once",
                obligation_id=oid,
            )
            continue
        seen.add(oid)
        row = rows.get(oid)
        if row is None:
            sink.add(
                "E_RECEIPT_UNKNOWN_OBLIGATION",
                f"receipt executes {oid}, which is not in the candidate manifest",
                obligation_id=oid,
            )
            continue
        if not row.active:
            sink.add(
                "E_RECEIPT_DEFERRED",
                f"receipt executes deferred obligation {oid}; deferred rows are never run",
                obligation_id=oid,
            )
            continue
        bound = {
            "argv": list(row.command.argv),
            "cwd": row.command.cwd,
            "artifact_path": row.artifact.path,
        }
        binding_ok = True
        for key, exp in bound.items():
            if ex[key] != exp:
                binding_ok = False
                sink.add(
                    "E_RECEIPT_BINDING",
                    f"{oid}: receipt {key} does not match the candidate manifest",
                    obligation_id=oid,
                    field=key,
                    expected=exp,
                    actual=ex[key],
                )
        if binding_ok:
            results[oid] = ex["exit_code"]
            if ex["exit_code"] != 0:
                sink.add(
                    "E_COMMAND_FAILED",
                    f"{oid}: {' '.join(row.command.argv)} exited with status {ex['exit_code']}",
                    obligation_id=oid,
                    exit_code=ex["exit_code"],
                )
    for o in sorted(manifest.obligations, key=lambda o: o.id):
        if o.active and o.id not in seen:
            sink.add(
                "E_RECEIPT_INCOMPLETE",
                f"active obligation {o.id} has no execution in the receipt",
                obligation_id=o.id,
            )
    return results


def _receipt_keys(
    value: Mapping[str, Any], keys: Sequence[str], pointer: str, sink: Diagnostics
) -> bool:
    ok = True
    for key in value:
        if key in keys:
            continue
        ok = False
        if key in TERMINALITY_KEYS:
            sink.add(
                "E_RECEIPT_TERMINALITY",
                f"{pointer}/{key}: a receipt cannot declare terminality; the checker derives it",
                pointer=f"{pointer}/{key}",
            )
        else:
            sink.add(
                "E_RECEIPT_SHAPE", f"{pointer}/{key}: unexpected key", pointer=f"{pointer}/{key}"
            )
    for key in keys:
        if key not in value:
            ok = False
            sink.add("E_RECEIPT_SHAPE", f"{pointer}/{key}: missing key", pointer=f"{pointer}/{key}")
    return ok


# --------------------------------------------------------------------------------------------
# Summary (derived; never read back as evidence)


def build_summary(
    manifest: Manifest, candidate: str | None, results: Mapping[str, int] | None
) -> dict[str, Any]:
    units = []
    for u in manifest.registry.units:
        rows = sorted(manifest.unit_rows(u.id), key=lambda o: o.id)
        active = [o.id for o in rows if o.active]
        deferred = [o.id for o in rows if not o.active]
        complete = (
            bool(rows)
            and not deferred
            and results is not None
            and all(results.get(o) == 0 for o in active)
        )
        units.append(
            {
                "id": u.id,
                "name": u.name,
                "title": u.title,
                "obligations": [o.id for o in rows],
                "active": active,
                "deferred": deferred,
                "complete": complete,
            }
        )
    complete_units = [u["id"] for u in units if u["complete"]]
    return {
        "schema": SUMMARY_SCHEMA,
        "registry_revision": manifest.registry.revision,
        "candidate_commit": candidate,
        "receipt_validated": results is not None,
        "counts": {
            "units": len(units),
            "obligations": len(manifest.obligations),
            "active": sum(1 for o in manifest.obligations if o.active),
            "deferred": sum(1 for o in manifest.obligations if not o.active),
        },
        "units": units,
        "complete_units": complete_units,
        "terminal": bool(units) and len(complete_units) == len(units),
    }


# --------------------------------------------------------------------------------------------
# Shared front half of both tools


@dataclass
class Loaded:
    root: Path
    manifest_rel: str
    manifest: Manifest


def resolve_root(value: str, sink: Diagnostics) -> Path | None:
    root = Path(value).resolve()
    if not root.is_dir():
        sink.add("E_ROOT_INVALID", f"--root {value!r} is not a directory", root=value)
        return None
    top = git(root, "rev-parse", "--show-toplevel")
    if top.returncode == 0 and top.stdout.strip() and Path(top.stdout.strip()).resolve() != root:
        sink.add(
            "E_ROOT_INVALID",
            f"--root {value!r} must be the repository's top-level directory ({top.stdout.strip()})",
            root=value,
        )
        return None
    return root


def load(root_arg: str, manifest_rel: str, sink: Diagnostics) -> Loaded | None:
    """Root, manifest confinement, TOML parse, shape and structural checks."""
    root = resolve_root(root_arg, sink)
    if root is None:
        return None
    status, path = confine(root, root, manifest_rel)
    if status != "ok" or path is None:
        sink.add(
            "E_MANIFEST_PATH_ESCAPE",
            f"--manifest {manifest_rel!r} must be a repository-relative path inside {root}",
            path=manifest_rel,
        )
        return None
    if not path.is_file():
        sink.add("E_MANIFEST_MISSING", f"manifest {manifest_rel} does not exist", path=manifest_rel)
        return None
    try:
        data = load_manifest_text(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        sink.add(
            "E_MANIFEST_TOML",
            f"manifest {manifest_rel} is not valid TOML: {exc}",
            path=manifest_rel,
        )
        return None
    manifest = parse_manifest(data, sink)
    if manifest is None:
        return None
    check_structure(root, manifest, sink)
    return Loaded(root, manifest_rel, manifest)


def compare_base_revision(
    loaded: Loaded, revision: str, candidate: str, sink: Diagnostics
) -> str | None:
    base = resolve_base(loaded.root, revision, candidate, sink)
    if base is None:
        return None
    base_manifest = load_base_manifest(loaded.root, base, loaded.manifest_rel, sink)
    if base_manifest is not None:
        compare_with_base(base_manifest, loaded.manifest, sink)
    return base


def emit(sink: Diagnostics, as_json: bool, tool: str, ok_line: str) -> int:
    if as_json:
        sys.stdout.write(json.dumps(sink.envelope(), indent=2, sort_keys=False) + "\n")
    else:
        for d in sink.items:
            detail = ", ".join(f"{k}={json.dumps(v)}" for k, v in d.fields.items())
            sys.stderr.write(f"{tool}: {d.code}: {d.message} [{detail}]\n")
        if not sink:
            sys.stdout.write(ok_line + "\n")
    return 1 if sink else 0


USAGE_EXIT = 2


def usage_options(message: str) -> list[str]:
    """The option names or tokens an argparse error message is about (best effort, stable)."""
    for prefix in ("unrecognized arguments: ", "the following arguments are required: "):
        if message.startswith(prefix):
            rest = message[len(prefix) :]
            sep = ", " if prefix.startswith("the following") else " "
            return [t for t in rest.split(sep) if t]
    found = re.match(r"argument ([^:]+):", message)
    if found:
        return [o for o in found.group(1).split("/") if o]
    return []


class _Parser(argparse.ArgumentParser):
    """Exact options only: no prefix abbreviations (``--receipt`` is not ``--receipt-out``).

    A usage error (unknown option, missing required option, missing value) exits with status 2.
    When ``--diagnostics-json`` occurs anywhere in the argument list, the error is reported as
    the diagnostics envelope (code ``E_USAGE``) on stdout, like every other failure, and the
    human usage text still goes to stderr.
    """

    def __init__(self, *, wants_json: bool = False, **kwargs: Any) -> None:
        super().__init__(allow_abbrev=False, **kwargs)
        self.wants_json = wants_json

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        if self.wants_json:
            sink = Diagnostics()
            sink.add("E_USAGE", f"{self.prog}: {message}", options=usage_options(message))
            sys.stdout.write(json.dumps(sink.envelope(), indent=2) + "\n")
        raise SystemExit(USAGE_EXIT)


def probe_requested(argv: Sequence[str]) -> bool:
    return "--contract-schema" in argv


def write_probe(contract: Mapping[str, Any]) -> int:
    sys.stdout.write(json.dumps(contract) + "\n")
    return 0


# --------------------------------------------------------------------------------------------
# CLI


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if probe_requested(args_list):
        # Availability handshake: no manifest is loaded and nothing goes to stderr.
        return write_probe(CHECKER_CONTRACT)
    parser = _Parser(
        wants_json="--diagnostics-json" in args_list,
        prog="check-storage-ownership-contracts",
        description="Validate the storage-ownership obligation manifest (v2), optionally a "
        "promotion against a base commit and a runner receipt.",
    )
    parser.add_argument("--root", required=True, help="repository top-level directory")
    parser.add_argument("--manifest", required=True, help="repository-relative manifest path")
    parser.add_argument("--base-commit", help="base revision for promotion/revision comparison")
    parser.add_argument("--receipt", help="receipt written by run-storage-ownership-contracts")
    parser.add_argument("--summary-json", metavar="PATH", help="write the unit summary here")
    parser.add_argument(
        "--diagnostics-json", action="store_true", help="print the diagnostics envelope on stdout"
    )
    parser.add_argument("--contract-schema", action="store_true", help="print the CLI contract")
    args = parser.parse_args(args_list)

    sink = Diagnostics()
    loaded = load(args.root, args.manifest, sink)
    candidate: str | None = None
    results: dict[str, int] | None = None
    if loaded is not None:
        needs_git = args.base_commit is not None or args.receipt is not None
        candidate = require_candidate(loaded.root, sink) if needs_git else None
        if not needs_git:
            candidate = candidate_commit(loaded.root)
        base: str | None = None
        if candidate is not None and args.base_commit is not None:
            base = compare_base_revision(loaded, args.base_commit, candidate, sink)
        base_ok = args.base_commit is None or base is not None
        if candidate is not None and args.receipt is not None and base_ok:
            # A receipt is only meaningful against the comparison it claims to record.
            results = _check_receipt_file(loaded, args.receipt, candidate, base, sink)
        if args.summary_json:
            summary = build_summary(loaded.manifest, candidate, results if not sink else None)
            try:
                Path(args.summary_json).write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
            except OSError:
                sink.add(
                    "E_SUMMARY_WRITE",
                    f"cannot write the summary to {args.summary_json}",
                    path=args.summary_json,
                )
    counts = ""
    if loaded is not None:
        rows = loaded.manifest.obligations
        active = sum(1 for o in rows if o.active)
        counts = f": {len(rows)} obligations, {active} active, {len(rows) - active} deferred"
    return emit(sink, args.diagnostics_json, "check-storage-ownership-contracts", f"ok{counts}")


def _check_receipt_file(
    loaded: Loaded, receipt_path: str, candidate: str, base: str | None, sink: Diagnostics
) -> dict[str, int] | None:
    path = Path(receipt_path)
    if not path.is_file():
        sink.add("E_RECEIPT_MISSING", f"receipt {receipt_path} does not exist", path=receipt_path)
        return None
    try:
        receipt = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        sink.add("E_RECEIPT_JSON", f"receipt {receipt_path} is not JSON", path=receipt_path)
        return None
    # Provenance before accepting execution evidence: one cleanliness check, tracked evidence.
    check_tree_clean(loaded.root, sink)
    check_tracked(loaded.root, loaded.manifest, loaded.manifest_rel, sink)
    return validate_receipt(receipt, loaded.manifest, candidate, base, sink)


if __name__ == "__main__":
    sys.exit(main())
