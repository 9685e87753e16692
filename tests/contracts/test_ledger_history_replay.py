"""The revision log, the acknowledged history and the history replay, on fixture repositories.

The checker keeps ``[[revisions]]`` append-only and ``[[acknowledged]]`` write-once (introduced by
a revision, never edited).  The replay tool re-checks every manifest commit against its parent,
with existence read from that commit's own tree, and passes only when each commit's
diagnostics equal its acknowledged set exactly.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.contracts.ledger_support import (
    MANIFEST_REL,
    REPLAY,
    Outcome,
    Repo,
    activate,
    assert_clean,
    assert_envelope,
    assert_one_fault,
    row,
    run_script,
)

Manifest = dict[str, Any]


def with_log(manifest: Manifest) -> Manifest:
    """The fixture at revision 2 with its revision log."""
    manifest["registry"]["revision"] = 2
    manifest["revisions"] = [{"revision": 2, "reason": "the first amendment"}]
    return manifest


def ack(commit: str, *diagnostics: dict[str, Any]) -> dict[str, Any]:
    return {"commit": commit, "reason": "landed before the check", "diagnostics": list(diagnostics)}


def commit_candidate(repo: Repo, candidate: Manifest) -> None:
    repo.write_manifest(candidate)
    repo.commit("candidate")


# ------------------------------------------------------------------------------------------
# Revision log and acknowledged list: checker rules


def test_a_revision_appends_its_reason(
    manifest: Manifest, make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    repo = make_repo(with_log(manifest))
    base = repo.head()
    candidate = copy.deepcopy(manifest)
    candidate["registry"]["revision"] = 3
    candidate["revisions"].append({"revision": 3, "reason": "the second amendment"})
    row(candidate, "p2-a")["gates"] = ["G2"]
    commit_candidate(repo, candidate)
    assert_clean(run_checker(repo, "--base-commit", base))


def test_a_revision_without_its_log_entry(
    manifest: Manifest, make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    repo = make_repo(with_log(manifest))
    base = repo.head()
    candidate = copy.deepcopy(manifest)
    candidate["registry"]["revision"] = 3
    commit_candidate(repo, candidate)
    assert_one_fault(
        run_checker(repo, "--base-commit", base),
        "E_REVISION_LOG",
        {"expected": [2, 3], "actual": [2]},
    )


def test_a_recorded_revision_reason_is_not_rewritten(
    manifest: Manifest, make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    repo = make_repo(with_log(manifest))
    base = repo.head()
    candidate = copy.deepcopy(manifest)
    candidate["revisions"][0]["reason"] = "a nicer story"
    commit_candidate(repo, candidate)
    assert_one_fault(
        run_checker(repo, "--base-commit", base), "E_REVISION_LOG_CHANGED", {"revision": 2}
    )


def test_acknowledgements_arrive_with_a_revision(
    manifest: Manifest, make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    repo = make_repo(with_log(manifest))
    base = repo.head()
    bad = {"code": "E_OBLIGATION_REMOVED", "obligation_id": "p9-z"}
    sneaky = copy.deepcopy(manifest)
    sneaky["acknowledged"] = [ack(base, bad)]
    commit_candidate(repo, sneaky)
    assert_one_fault(
        run_checker(repo, "--base-commit", base),
        "E_ACKNOWLEDGED_CHANGED",
        {"base_count": 0, "candidate_count": 1},
    )
    revised = copy.deepcopy(sneaky)
    revised["registry"]["revision"] = 3
    revised["revisions"].append({"revision": 3, "reason": "acknowledge what landed"})
    commit_candidate(repo, revised)
    assert_clean(run_checker(repo, "--base-commit", base))


def test_acknowledgements_are_never_edited_afterwards(
    manifest: Manifest, make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    with_log(manifest)
    manifest["acknowledged"] = [
        ack("0" * 40, {"code": "E_OBLIGATION_REMOVED", "obligation_id": "x"})
    ]
    repo = make_repo(manifest)
    base = repo.head()

    def reword(m: Manifest) -> None:
        m["acknowledged"][0]["reason"] = "reworded"

    def drop(m: Manifest) -> None:
        m["acknowledged"] = []

    for change in (reword, drop):
        candidate = copy.deepcopy(manifest)
        candidate["registry"]["revision"] = 3  # not even a revision may touch them
        candidate["revisions"].append({"revision": 3, "reason": "try to tidy up"})
        change(candidate)
        commit_candidate(repo, candidate)
        outcome = run_checker(repo, "--base-commit", base)
        items = assert_envelope(outcome.envelope)
        assert [d["code"] for d in items] == ["E_ACKNOWLEDGED_CHANGED"], items


def test_an_acknowledgement_must_name_a_registered_diagnostic(
    manifest: Manifest, make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    manifest["acknowledged"] = [ack("abc", {"code": "E_OBLIGATION_CHANGED", "obligation_id": "x"})]
    outcome = run_checker(make_repo(manifest))
    assert_one_fault(
        outcome,
        "E_ACKNOWLEDGED_INVALID",
        {"commit": "abc", "diagnostic_code": "E_OBLIGATION_CHANGED"},
    )


# ------------------------------------------------------------------------------------------
# The replay tool


def replay(repo: Repo, *extra: str) -> Outcome:
    return run_script(
        REPLAY, "--root", str(repo.root), "--manifest", MANIFEST_REL, "--diagnostics-json", *extra
    )


def _bad_history(manifest: Manifest, make_repo: Callable[..., Repo]) -> tuple[Repo, str, str]:
    """Introduction, then an unversioned edit, then a fake activation later repaired."""
    repo = make_repo(manifest)
    edited = copy.deepcopy(manifest)
    row(edited, "p2-a")["gates"] = ["G2"]  # a deferred row edited without a revision
    repo.write_manifest(edited)
    unversioned = repo.commit("unversioned edit")
    (repo.root / "tests/test_p0_a.py").unlink()
    activate(edited, "p0-a")  # its test file is deleted in the same commit
    repo.write_manifest(edited)
    fake = repo.commit("fake activation")
    repo.write("tests/test_p0_a.py", "def test_ok() -> None:\n    assert True\n")
    repo.commit("the file arrives later")  # HEAD itself is structurally clean again
    return repo, unversioned, fake


def test_replay_finds_every_violation_in_history(
    manifest: Manifest, make_repo: Callable[..., Repo], run_checker: Callable[..., Outcome]
) -> None:
    repo, unversioned, fake = _bad_history(manifest, make_repo)
    assert_clean(run_checker(repo))  # today's tree hides both
    items = assert_envelope(replay(repo).envelope)
    assert [(d["code"], d["fields"]) for d in items] == [
        (
            "E_HISTORY_UNACKNOWLEDGED",
            {
                "commit": unversioned,
                "diagnostic_code": "E_OBLIGATION_CHANGED",
                "fields": {"field": "gates", "obligation_id": "p2-a"},
            },
        ),
        (
            "E_HISTORY_UNACKNOWLEDGED",
            {
                "commit": fake,
                "diagnostic_code": "E_ARTIFACT_MISSING",
                "fields": {
                    "artifact_id": "artifact-p0-a",
                    "obligation_id": "p0-a",
                    "path": "tests/test_p0_a.py",
                },
            },
        ),
    ]


def _acknowledge(manifest: Manifest, unversioned: str, fake: str) -> Manifest:
    repaired = copy.deepcopy(manifest)
    row(repaired, "p2-a")["gates"] = ["G2"]
    activate(repaired, "p0-a")
    repaired["registry"]["revision"] = 2
    repaired["revisions"] = [{"revision": 2, "reason": "acknowledge two violations"}]
    repaired["acknowledged"] = [
        ack(
            unversioned, {"code": "E_OBLIGATION_CHANGED", "obligation_id": "p2-a", "field": "gates"}
        ),
        ack(
            fake,
            {
                "code": "E_ARTIFACT_MISSING",
                "obligation_id": "p0-a",
                "artifact_id": "artifact-p0-a",
                "path": "tests/test_p0_a.py",
            },
        ),
    ]
    return repaired


def test_acknowledged_history_replays_clean_with_a_report(
    manifest: Manifest,
    make_repo: Callable[..., Repo],
    run_checker: Callable[..., Outcome],
    tmp_path: Path,
) -> None:
    repo, unversioned, fake = _bad_history(copy.deepcopy(manifest), make_repo)
    before = repo.head()
    repo.write_manifest(_acknowledge(manifest, unversioned, fake))
    repair = repo.commit("revision 2 acknowledges history")
    assert_clean(run_checker(repo, "--base-commit", before))
    report_path = tmp_path / "report.json"
    assert_clean(replay(repo, "--report-json", str(report_path)))
    report = json.loads(report_path.read_text("utf-8"))
    assert [
        (c["transition"], c["acknowledged"], len(c["diagnostics"])) for c in report["commits"]
    ] == [
        ("introduction", False, 0),
        ("edit", True, 1),
        ("promotion", True, 1),
        ("revision", False, 0),
    ]
    assert report["commits"][-1]["commit"] == repair


def test_an_acknowledgement_that_reproduces_nothing_is_stale(
    manifest: Manifest, make_repo: Callable[..., Repo]
) -> None:
    repo, unversioned, fake = _bad_history(copy.deepcopy(manifest), make_repo)
    repaired = _acknowledge(manifest, unversioned, fake)
    invented = {"code": "E_OBLIGATION_REMOVED", "obligation_id": "p3-b"}
    repaired["acknowledged"][0]["diagnostics"].append(invented)
    repaired["acknowledged"].append(ack(repo.head(), invented))  # not a manifest commit
    repo.write_manifest(repaired)
    repo.commit("over-acknowledge")
    items = assert_envelope(replay(repo).envelope)
    assert [(d["code"], d["fields"]["commit"]) for d in items] == [
        ("E_HISTORY_ACK_STALE", unversioned),
        ("E_HISTORY_ACK_STALE", repaired["acknowledged"][2]["commit"]),
    ]
    assert all(d["fields"]["fields"] == {"obligation_id": "p3-b"} for d in items)


def test_replay_of_a_clean_history_is_clean(make_repo: Callable[..., Repo]) -> None:
    repo = make_repo()
    outcome = run_script(REPLAY, "--root", str(repo.root), "--manifest", MANIFEST_REL)
    assert outcome.rc == 0, outcome.stderr
    assert outcome.stdout.splitlines()[-1].startswith("ok: 1 manifest commits replayed")
