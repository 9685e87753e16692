"""Reading the manifest TOML into the typed model.

Every table's keys and value types are checked once, so one malformed value yields one
diagnostic rather than a cascade; when the shape is too broken to go on, parsing returns
``None`` and the rule checks are skipped.  A manifest whose ``schema`` marker is not the v2 one
is refused outright.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from typing import Any

from .diagnostics import DIAGNOSTIC_FIELDS, Diagnostics, diagnostic_key
from .model import (
    Acknowledgement,
    Artifact,
    Cohort,
    Command,
    Edge,
    Manifest,
    Obligation,
    Registry,
    State,
    Unit,
)

MANIFEST_SCHEMA = "tenferro.storage-ownership-contracts.v2"


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
