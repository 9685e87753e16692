"""Comparing a candidate manifest with the manifest of a base commit.

The base revision is resolved to a commit that must be an ancestor of the candidate.  Against
it, a candidate is either a promotion (rows move from deferred to active in place, and only
when their prerequisites were already active in the base) or a revision (the registry revision
goes up by one and only still-deferred rows are amended); the registry graph, row ids and
active rows never change, the revision log only grows, and the acknowledged history is
written once.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from .diagnostics import Diagnostics
from .model import Manifest, Obligation
from .provenance import git
from .registry import expand_node, incoming_sources
from .schema import load_manifest_text, parse_manifest


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
            rows = [o for m in expand_node(source, cohorts) for o in cand.unit_rows(m)]
            if any(o.id not in base_active for o in rows):
                sink.add(
                    "E_PREREQUISITE_NOT_ALREADY_ACTIVE",
                    f"{node} is promoted in the same candidate that activates its prerequisite "
                    f"{source}; prerequisites must already be active in the base",
                    node=node,
                    prerequisite=source,
                )
