"""Every pytest selector a row names must name at least one real test.

A path check proves a test *file* exists; it cannot tell whether ``file.py::test_name``
(or a parametrized ``file.py::test[case]``) names anything: a row could point at a test
that was never written, be promoted, and only the runner would notice.  So the checker asks
pytest itself: one ``--collect-only`` run over every selector target whose file exists --
active rows and deferred rows alike (a deferred row whose file does not exist yet is a
future specification and is skipped) -- and reports each selector that matches no
collected test.  Collection imports the test modules but runs nothing.  A file-level
target (no selector) is proven by its path; the runner's execution of it fails when it
collects nothing (pytest's exit status 5).  No selector, no subprocess.

Only the working tree is collected; the history replay checks old commits without a
checkout and does not call this.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .diagnostics import Diagnostics
from .model import Manifest, Obligation


def _target(o: Obligation) -> str:
    a = o.artifact
    return a.path + (f"::{a.selector}" if a.selector else "")


def _matches(target: str, node: str) -> bool:
    """Whether collected node id ``node`` is (under) ``target``: the target itself, a test
    in the file/directory it names, or a parametrized case of the test it names."""
    if node == target:
        return True
    if "::" in target:
        return node.startswith((target + "::", target + "["))
    return node.startswith((target + "::", target.rstrip("/") + "/"))


def collect(root: Path, targets: list[str]) -> tuple[set[str], str, int]:
    """Node ids pytest collects for ``targets`` from ``root`` (one subprocess, serial, no
    cache written), its combined output for diagnostics and its exit status."""
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "--collect-only", "-q",
            "-p", "no:cacheprovider", "-p", "no:xdist", f"--rootdir={root}", *targets,
        ],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    nodes = {
        line.strip()
        for line in done.stdout.splitlines()
        if "::" in line and not line.startswith(("ERROR", " "))
    }
    return nodes, done.stdout + done.stderr, done.returncode


def check_selectors(root: Path, manifest: Manifest, skip: set[str], sink: Diagnostics) -> None:
    """``E_SELECTOR_UNRESOLVED`` for each pytest selector that collects no test. One
    subprocess when any row has a selector; none otherwise."""
    rows = [
        o
        for o in manifest.obligations
        if o.command.kind == "pytest"
        and o.artifact.selector
        and o.id not in skip
        and (root / o.artifact.path).exists()
    ]
    if not rows:
        return
    targets = list(dict.fromkeys(_target(o) for o in rows))
    nodes, output, status = collect(root, targets)
    found: dict[str, tuple[bool, str]] = {}
    if status == 0:
        found = {t: (any(_matches(t, n) for n in nodes), output) for t in targets}
    else:
        # One unresolved target makes pytest drop the whole listing: attribute it by
        # collecting each target alone (only on this failure path).
        for t in targets:
            alone, out, _ = collect(root, [t])
            found[t] = (any(_matches(t, n) for n in alone), out)
    for o in rows:
        target = _target(o)
        ok, output = found[target]
        if not ok:
            tail = " | ".join(output.strip().splitlines()[-3:])
            sink.add(
                "E_SELECTOR_UNRESOLVED",
                f"{o.id}: pytest target {target!r} names no test (pytest --collect-only "
                f"collected none for it: {tail})",
                obligation_id=o.id,
                command_id=o.command.id,
                target=target,
            )
