"""Diagnostic codes and how they are collected and printed.

``DIAGNOSTIC_FIELDS`` is the closed catalogue: each stable code with the exact set of field
names that identify one occurrence.  ``Diagnostics`` is the sink every rule writes into; it
refuses a code or a field set the catalogue does not know.  ``emit`` turns a sink into the
tools' output (the JSON envelope on stdout, or one line per diagnostic on stderr) and exit code.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DIAGNOSTICS_SCHEMA = "tenferro.storage-ownership-diagnostics.v1"

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
        "E_SELECTOR_UNRESOLVED": ("obligation_id", "command_id", "target"),
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


def diagnostic_key(code: str, fields: Mapping[str, Any]) -> str:
    """One canonical string per (code, identifying fields): how replayed and acknowledged
    diagnostics are compared.  O(size of the fields); allocates one string."""
    return json.dumps({"code": code, "fields": dict(fields)}, sort_keys=True)


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
