#!/usr/bin/env python3
"""Replays the storage-ownership manifest's history: every change, checked against its parent.

For each commit on HEAD's first-parent chain that changed the manifest, this tool runs the
checker's rules on that commit exactly as CI would have, had CI compared it with its base:

* the structural rules on the manifest as committed, with artifact and argv existence read from
  that commit's own tree (``git ls-tree``), not from today's working tree;
* the promotion / revision rules against the manifest of the commit's first parent (a commit
  whose parent has no manifest is the introduction and gets only the structural rules).

History cannot be rewritten, so violations that already landed are not hidden: HEAD's manifest
lists them under ``[[acknowledged]]`` (commit, reason and the exact diagnostics; read from the
manifest in the working tree, which on a clean checkout is HEAD's).  The replay
passes only when every commit's diagnostics equal its acknowledged set exactly: an unlisted
diagnostic is ``E_HISTORY_UNACKNOWLEDGED`` and a listed one that the replay no longer
reproduces is ``E_HISTORY_ACK_STALE`` (so an acknowledgement cannot be written in advance or
outlive its cause).  The checker keeps the acknowledged list immutable once a revision
introduced it.

In a shallow clone only the commits present are replayed; acknowledgements of absent commits
are reported as unavailable rather than stale.  A merge on the first-parent chain is compared
with its first parent, so a branch that landed two transitions at once is reported as one.
Existence comes from the commit's tree; symlink escapes are judged against today's checkout
(the structural check of HEAD covers the current tree exactly).

Usage: replay-storage-ownership-history.py --root ROOT --manifest REL [--report-json PATH]
       [--diagnostics-json]
Exit status: 0 clean, 1 diagnostics, 2 usage error.  Standard library only; git is invoked with
argv lists.  Cost: one ``git show`` and one ``git ls-tree`` per manifest commit.
"""

from __future__ import annotations

import json
import sys
import tomllib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# The checker's rules, from the private package beside this file (never the working directory).
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _contracts as checker

TOOL = "replay-storage-ownership-history"
REPORT_SCHEMA = "tenferro.storage-ownership-history-replay.v1"


def _git_out(root: Path, *args: str) -> str | None:
    done = checker.git(root, *args)
    return done.stdout if done.returncode == 0 else None


def _manifest_at(root: Path, commit: str, rel: str) -> str | None:
    return _git_out(root, "show", f"{commit}:{rel}")


def _parse(text: str, sink: Any, rel: str) -> Any:
    try:
        data = checker.load_manifest_text(text)
    except tomllib.TOMLDecodeError as exc:
        sink.add("E_MANIFEST_TOML", f"manifest {rel} is not valid TOML: {exc}", path=rel)
        return None
    return checker.parse_manifest(data, sink)


def _transition(base: Any, cand: Any) -> str:
    if cand is None:
        return "invalid"
    if cand.registry.revision != base.registry.revision:
        return "revision"
    before = {o.id for o in base.obligations if o.active}
    if any(o.active and o.id not in before for o in cand.obligations):
        return "promotion"
    return "edit"


def replay_commit(root: Path, commit: str, rel: str) -> tuple[str, list[Any]]:
    """The transition kind and the diagnostics of one manifest commit against its parent."""
    local = checker.Diagnostics()
    text = _manifest_at(root, commit, rel)
    if text is None:
        local.add("E_MANIFEST_MISSING", f"{commit} deletes the manifest {rel}", path=rel)
        return "deletion", list(local.items)
    cand = _parse(text, local, rel)
    if cand is not None:
        listing = _git_out(root, "ls-tree", "-r", "-z", "--name-only", commit) or ""
        tree = checker.TreeFiles(p for p in listing.split("\0") if p)
        checker.check_structure(root, cand, local, tree)
    parent_out = _git_out(root, "rev-parse", "--verify", "--quiet", f"{commit}^1^{{commit}}")
    parent = parent_out.strip() if parent_out else None
    base = None
    base_text = _manifest_at(root, parent, rel) if parent else None
    if parent is not None and base_text is not None:
        base_sink = checker.Diagnostics()
        base = _parse(base_text, base_sink, rel)
        if base is None or base_sink:
            local.add(
                "E_BASE_MANIFEST",
                f"base {parent} has no valid v2 manifest at {rel}",
                base_commit=parent,
                path=rel,
            )
            base = None
        elif cand is not None:
            checker.compare_with_base(base, cand, local)
    if base_text is None:
        kind = "introduction"
    elif base is None:
        kind = "invalid-base"
    else:
        kind = _transition(base, cand)
    return kind, list(local.items)


def replay(root: Path, rel: str, sink: Any) -> dict[str, Any]:
    """Replays every first-parent manifest commit; adds history diagnostics to ``sink``."""
    head = checker.require_candidate(root, sink)
    report: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "head": head,
        "manifest": rel,
        "shallow": False,
        "commits": [],
        "unavailable_acknowledgements": [],
    }
    if head is None:
        return report
    shallow = (_git_out(root, "rev-parse", "--is-shallow-repository") or "").strip() == "true"
    report["shallow"] = shallow
    # The acknowledged list comes from the manifest as it stands in the working tree (the one
    # the checker validates; on a clean checkout that is HEAD's), else from HEAD.
    on_disk = root / rel
    head_text = (
        on_disk.read_text(encoding="utf-8") if on_disk.is_file() else _manifest_at(root, head, rel)
    )
    authority = None
    if head_text is not None:
        quiet = checker.Diagnostics()
        authority = _parse(head_text, quiet, rel)
    acks = {a.commit: a for a in (authority.acknowledged if authority is not None else ())}
    listed = _git_out(root, "rev-list", "--first-parent", "--reverse", head, "--", rel) or ""
    commits = [c for c in listed.split() if c]
    for commit in commits:
        kind, items = replay_commit(root, commit, rel)
        found = Counter(checker.diagnostic_key(d.code, d.fields) for d in items)
        ack = acks.get(commit)
        admitted = Counter(ack.diagnostics if ack is not None else ())
        for key in sorted((found - admitted).elements()):
            d = json.loads(key)
            sink.add(
                "E_HISTORY_UNACKNOWLEDGED",
                f"{commit[:12]} ({kind}): {d['code']} is not acknowledged in the manifest",
                commit=commit,
                diagnostic_code=d["code"],
                fields=d["fields"],
            )
        for key in sorted((admitted - found).elements()):
            d = json.loads(key)
            sink.add(
                "E_HISTORY_ACK_STALE",
                f"{commit[:12]}: acknowledged {d['code']} is not reproduced by the replay",
                commit=commit,
                diagnostic_code=d["code"],
                fields=d["fields"],
            )
        subject = (_git_out(root, "log", "-1", "--format=%s", commit) or "").strip()
        report["commits"].append(
            {
                "commit": commit,
                "subject": subject,
                "transition": kind,
                "diagnostics": [d.to_json() for d in items],
                "acknowledged": ack is not None,
            }
        )
    replayed = set(commits)
    for commit, ack in acks.items():
        if commit in replayed:
            continue
        present = checker.git(root, "cat-file", "-e", f"{commit}^{{commit}}").returncode == 0
        if shallow and not present:
            report["unavailable_acknowledgements"].append(commit)
            continue
        for key in ack.diagnostics:
            d = json.loads(key)
            sink.add(
                "E_HISTORY_ACK_STALE",
                f"{commit[:12]} is not a manifest commit on HEAD's first-parent history, so its "
                f"acknowledged {d['code']} cannot be reproduced",
                commit=commit,
                diagnostic_code=d["code"],
                fields=d["fields"],
            )
    return report


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = checker.UsageParser(
        wants_json="--diagnostics-json" in args_list,
        prog=TOOL,
        description="Replay every manifest commit against its first parent; old violations "
        "must be acknowledged in the manifest exactly.",
    )
    parser.add_argument("--root", required=True, help="repository top-level directory")
    parser.add_argument("--manifest", required=True, help="repository-relative manifest path")
    parser.add_argument("--report-json", metavar="PATH", help="write the per-commit report here")
    parser.add_argument(
        "--diagnostics-json", action="store_true", help="print the diagnostics envelope on stdout"
    )
    args = parser.parse_args(args_list)

    sink = checker.Diagnostics()
    root = checker.resolve_root(args.root, sink)
    report: dict[str, Any] | None = None
    if root is not None:
        status, _ = checker.confine(root, root, args.manifest)
        if status != "ok":
            sink.add(
                "E_MANIFEST_PATH_ESCAPE",
                f"--manifest {args.manifest!r} must be a repository-relative path inside {root}",
                path=args.manifest,
            )
        else:
            report = replay(root, args.manifest, sink)
    if report is not None and args.report_json:
        try:
            Path(args.report_json).write_text(json.dumps(report, indent=2) + "\n", "utf-8")
        except OSError:
            sink.add(
                "E_SUMMARY_WRITE",
                f"cannot write the report to {args.report_json}",
                path=args.report_json,
            )
    ok = "ok"
    if report is not None:
        if not args.diagnostics_json:
            for c in report["commits"]:
                n = len(c["diagnostics"])
                mark = " (acknowledged)" if c["acknowledged"] else ""
                sys.stdout.write(
                    f"{c['commit'][:12]} {c['transition']:<12} {n:>3} diagnostic(s){mark}  "
                    f"{c['subject'][:60]}\n"
                )
        acked = sum(1 for c in report["commits"] if c["acknowledged"])
        ok = (
            f"ok: {len(report['commits'])} manifest commits replayed against their parents; "
            f"{acked} with acknowledged violations, every other one clean"
        )
    return int(checker.emit(sink, args.diagnostics_json, TOOL, ok))


if __name__ == "__main__":
    sys.exit(main())
