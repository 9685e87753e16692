#!/usr/bin/env python3
"""Keeps docs/design/storage-ownership-contracts.md honest against the ledger.

The artifact of the ``p1-contract-document`` obligation.  The document passes only when:

* every gate registered in the manifest has its own section (a heading naming the gate id);
* every transition of every contract state table is named, as a backticked label in the first
  column of a table row inside the section of the gate that owns the table, and no unknown
  transition label appears there;
* every obligation id the document cites (a backticked ``pN-...`` token) exists in the manifest,
  and each gate section cites every obligation the manifest binds to that gate;
* the change-control rule has its own section.

Usage: python3 scripts/check-contract-document.py --manifest MANIFEST DOCUMENT
Problems go to stderr, one per line, each starting with a stable code; exit status 1.
Standard library only.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The contract's state tables, by owning gate.  The labels are identifiers shared with the
# normative contract; the document explains each one in its own words.
STATE_TABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "G1": (
        "span access transition contract",
        (
            "owner -> shared view",
            "owner -> mutable view",
            "checked shared pairing -> prepared host/device read",
            "checked exclusive pairing -> prepared host/device write",
            "prepared host access -> synchronous return",
            "prepared device access -> pre-admission rejection",
            "possible enqueue -> draining",
            "draining -> retired completed/failed",
            "draining -> completion unproven",
        ),
    ),
    "G2": (
        "allocation group state table",
        ("construct group", "view", "view_mut", "split_mut", "try_extract", "into_tensor"),
    ),
    "G3": (
        "submission lifecycle",
        (
            "Prepared -> submit result",
            "Admitted -> Running",
            "Running -> Draining",
            "Draining -> Retired(Completed)",
            "Draining -> Retired(Failed)",
            "Draining -> CompletionUnproven",
            "scoped call rejected",
            "scoped admitted call",
        ),
    ),
    "G5": (
        "raw-handle state table",
        (
            "checked shared pairing -> PreparedRead::Device",
            "checked exclusive pairing -> PreparedWrite::Device",
            "PreparedDevice* -> device binding",
            "prepared submission -> proven pre-admission rejection",
            "enqueue may have happened -> G3 Draining",
            "G3 Draining -> RetiredFailed",
            "G3 Draining -> Completed",
            "asynchronous provider rejects borrowed submission",
            "admitted synchronous borrowed operation -> retired result",
            "retirement -> CompletionUnproven",
        ),
    ),
    "G7": (
        "retained value lifecycle",
        (
            "record op output into tape",
            "clone EagerTensor handle",
            "drop a handle while tape/checkpoint retains",
            "tape/context drop while a handle remains",
            "tape retains/releases descriptor record",
            "checkpoint retains/releases boundary record",
            "value() guard",
            "backward execution",
            "take_grad",
            "into_value while another direct owner exists",
            "into_value after unique Arc ownership",
            "checkpoint record",
            "checkpoint recompute (backward)",
            "tape drop",
        ),
    ),
}

CITATION = re.compile(r"`(p\d+-[a-z0-9][a-z0-9-]*)`")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
TABLE_LABEL = re.compile(r"^\|\s*`([^`]+)`\s*\|")
CHANGE_CONTROL = re.compile(r"change control", re.IGNORECASE)


@dataclass(frozen=True)
class Section:
    level: int
    title: str
    lines: tuple[str, ...]


def sections(text: str) -> list[Section]:
    """Splits Markdown into heading-delimited sections (fenced code is not a heading)."""
    found: list[tuple[int, str, int]] = []
    lines = text.splitlines()
    fenced = False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else HEADING.match(line)
        if m:
            found.append((len(m.group(1)), m.group(2), i))
    result: list[Section] = []
    for n, (level, title, start) in enumerate(found):
        end = len(lines)
        for later_level, _, later_start in found[n + 1 :]:
            if later_level <= level:
                end = later_start
                break
        result.append(Section(level, title, tuple(lines[start + 1 : end])))
    return result


def check(document: str, manifest: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    gates = [g["id"] for g in manifest["registry"]["gates"]]
    rows = {o["id"]: o for o in manifest["obligations"]}
    all_sections = sections(document)

    for cited in sorted(set(CITATION.findall(document))):
        if cited not in rows:
            problems.append(f"D_UNKNOWN_OBLIGATION {cited}: cited but not in the manifest")

    for gate in gates:
        owned = [s for s in all_sections if re.search(rf"\b{re.escape(gate)}\b", s.title)]
        if not owned:
            problems.append(f"D_GATE_MISSING {gate}: no section heading names this gate")
            continue
        body = "\n".join(line for s in owned for line in s.lines)
        cited = set(CITATION.findall(body))
        for oid in sorted(o for o, row in rows.items() if gate in row["gates"]):
            if oid not in cited:
                problems.append(
                    f"D_GATE_OBLIGATION_UNCITED {gate} {oid}: the manifest binds this "
                    "obligation to the gate, but the gate's section does not cite it"
                )
        if gate in STATE_TABLES:
            table, transitions = STATE_TABLES[gate]
            labels = [
                m.group(1)
                for s in owned
                for line in s.lines
                if (m := TABLE_LABEL.match(line.strip()))
            ]
            for t in transitions:
                if t not in labels:
                    problems.append(
                        f"D_TRANSITION_MISSING {gate}: {table} transition {t!r} is not named"
                    )
            for label in labels:
                if label not in transitions:
                    problems.append(
                        f"D_TRANSITION_UNKNOWN {gate}: {label!r} is not a transition of the {table}"
                    )

    if not any(CHANGE_CONTROL.search(s.title) for s in all_sections):
        problems.append("D_CHANGE_CONTROL_MISSING: no section states the change-control rule")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="check-contract-document",
        description="Check the storage-ownership contract document against the ledger.",
    )
    parser.add_argument("--manifest", required=True, help="the v2 obligation manifest")
    parser.add_argument("document", help="the contract document (Markdown)")
    args = parser.parse_args(argv)
    try:
        manifest = tomllib.loads(Path(args.manifest).read_text(encoding="utf-8"))
        document = Path(args.document).read_text(encoding="utf-8")
    except (OSError, tomllib.TOMLDecodeError) as exc:
        sys.stderr.write(f"check-contract-document: D_INPUT: {exc}\n")
        return 1
    try:
        problems = check(document, manifest)
    except (KeyError, TypeError) as exc:
        sys.stderr.write(f"check-contract-document: D_INPUT: malformed manifest ({exc})\n")
        return 1
    for p in problems:
        sys.stderr.write(f"check-contract-document: {p}\n")
    if problems:
        return 1
    transitions = sum(len(t) for _, t in STATE_TABLES.values())
    sys.stdout.write(
        f"check-contract-document: ok ({len(manifest['registry']['gates'])} gates, "
        f"{transitions} state-table transitions, {len(manifest['obligations'])} obligations)\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
