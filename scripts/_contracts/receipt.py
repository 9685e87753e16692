"""Runner receipts and the unit summary derived from them.

A receipt is accepted only for the current candidate and base, with exactly one successful
execution per active row, each bound to the manifest's argv, cwd and artifact path; it may
not claim completeness itself.  The summary reports per unit what is active, what is deferred
and whether the unit is complete; it is output only and never read back as evidence.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .diagnostics import Diagnostics
from .loading import Loaded
from .model import Manifest
from .provenance import check_tracked, check_tree_clean

RECEIPT_SCHEMA = "tenferro.storage-ownership-receipt.v1"
SUMMARY_SCHEMA = "tenferro.storage-ownership-summary.v1"


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


def check_receipt_file(
    loaded: Loaded, receipt_path: str, candidate: str, base: str | None, sink: Diagnostics
) -> dict[str, int] | None:
    """Reads ``--receipt``, checks provenance, then the receipt itself (None: unreadable)."""
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
