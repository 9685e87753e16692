"""Apply guard mutants one at a time to a temporary copy and report which the tests kill.

Run by hand (it is slow on two cores; see README.md), never collected by pytest::

    python tests/mutation/run_mutants.py                 # every mutant, one job
    python tests/mutation/run_mutants.py --jobs 2        # two mutants at a time
    python tests/mutation/run_mutants.py --only ID [--only ID2 ...]
    python tests/mutation/run_mutants.py --list          # ids, areas and files; runs nothing
    python tests/mutation/run_mutants.py --area storage  # one area only
    python tests/mutation/run_mutants.py --only ID --tests tests/x.py::test_y  # one test

Each mutant in ``mutants.toml`` (next to this file) names a ``file`` (relative to the
repository root), an exact ``original`` snippet that must occur exactly once in it, its
``replacement`` and the ``tests`` (files or node ids) that must kill it.  For every
mutant a fresh temporary directory receives a copy of ``src/``, ``tests/``, ``scripts/``
and ``pyproject.toml``; the snippet is replaced there (the working tree is never
touched) and ``python -m pytest -x -q -p no:cacheprovider <tests>`` runs with
``PYTHONPATH`` pointing at the copy's ``src`` (checked: the copy is what gets imported).

Outcomes: ``killed`` (pytest exited non-zero), ``survived`` (exit 0), ``not-applicable``
(the snippet is missing or not unique: the code moved; fix the entry), ``timeout``
(counted as killed, reported separately) and ``equivalent`` (the entry carries an
``equivalent = "reason"``: it is run and reported, but left out of the kill rate when it
survives).  The kill rate is killed / (applicable - equivalent survivors).  Exit status
0 when the rate is at least ``--min-rate`` (default 0.95) and nothing is not-applicable.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DEFAULT_LIST = HERE / "mutants.toml"
COPIED = ("src", "tests", "scripts", "docs", "tutorials", "pyproject.toml")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", ".ruff_cache",
                                ".pytest_cache", ".hypothesis", "*.egg-info")


@dataclass(frozen=True)
class Mutant:
    """One listed mutant."""

    id: str
    area: str
    file: str
    original: str
    replacement: str
    tests: tuple[str, ...]
    note: str = ""
    equivalent: str = ""


@dataclass
class Result:
    """What running one mutant gave."""

    mutant: Mutant
    outcome: str  # killed | survived | not-applicable | timeout
    seconds: float = 0.0
    detail: str = ""
    tail: list[str] = field(default_factory=list)


def load(path: Path) -> list[Mutant]:
    """Read and validate the mutant list (unique ids, required keys)."""
    with path.open("rb") as fh:
        data = tomllib.load(fh)
    out: list[Mutant] = []
    seen: set[str] = set()
    for entry in data.get("mutant", []):
        missing = {"id", "area", "file", "original", "replacement", "tests"} - set(entry)
        if missing:
            raise SystemExit(f"{path}: mutant {entry.get('id', '?')} lacks {sorted(missing)}")
        if entry["id"] in seen:
            raise SystemExit(f"{path}: duplicate mutant id {entry['id']}")
        seen.add(entry["id"])
        out.append(
            Mutant(
                id=entry["id"],
                area=entry["area"],
                file=entry["file"],
                original=entry["original"],
                replacement=entry["replacement"],
                tests=tuple(entry["tests"]),
                note=entry.get("note", ""),
                equivalent=entry.get("equivalent", ""),
            )
        )
    return out


def _source(m: Mutant, rev: str | None) -> str | None:
    """The text of ``m.file`` in the working tree or at commit ``rev`` (None: missing)."""
    if rev is None:
        path = ROOT / m.file
        return path.read_text() if path.is_file() else None
    proc = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:{m.file}"], capture_output=True, text=True
    )
    return proc.stdout if proc.returncode == 0 else None


def check_applicable(m: Mutant, rev: str | None = None) -> str:
    """'' when the snippet occurs exactly once in the file under test, else why not."""
    text = _source(m, rev)
    if text is None:
        return f"{m.file} does not exist"
    n = text.count(m.original)
    if n != 1:
        return f"the original snippet occurs {n} times in {m.file} (must be exactly once)"
    if m.original == m.replacement:
        return "replacement equals the original"
    return ""


def _copy_tree(dest: Path, rev: str | None) -> None:
    """Copy the tree under test into ``dest``: the working tree, or commit ``rev``."""
    if rev is not None:  # a committed snapshot: others' unfinished edits stay out
        present = [n for n in COPIED if (ROOT / n).exists()]
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", rev, *present],
            check=True, capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        return
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=IGNORE)
        elif src.is_file():
            shutil.copy2(src, dest / name)


def run_one(m: Mutant, timeout: float, python: str, rev: str | None = None,
            apply: bool = True) -> Result:
    """Copy the tree, apply ``m`` (unless ``apply`` is false: the baseline run), run its
    tests; the temporary copy is always removed."""
    why = check_applicable(m, rev)
    if why:
        return Result(m, "not-applicable", detail=why)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"tenferro-mutant-{m.id}-") as tmp:
        dest = Path(tmp)
        _copy_tree(dest, rev)
        target = dest / m.file
        if apply:
            text = target.read_text()
            target.write_text(text.replace(m.original, m.replacement, 1))
        env = dict(os.environ)
        env["PYTHONPATH"] = str(dest / "src")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTEST_ADDOPTS", None)
        cmd = [python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
               "-p", "no:randomly", *m.tests]
        try:
            proc = subprocess.run(
                cmd, cwd=dest, env=env, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return Result(m, "timeout", time.monotonic() - t0, f"over {timeout:.0f} s")
        lines = (proc.stdout + proc.stderr).strip().splitlines()
        if proc.returncode == 0:
            outcome = "survived"
        elif proc.returncode in (4, 5):  # usage error / nothing collected: a broken entry
            outcome = "not-applicable"
        else:
            outcome = "killed"
        detail = lines[-1] if lines else f"exit {proc.returncode}"
        return Result(m, outcome, time.monotonic() - t0, detail, lines[-15:])


def _select(mutants: list[Mutant], only: Sequence[str], area: str | None) -> list[Mutant]:
    if only:
        known = {m.id for m in mutants}
        unknown = [i for i in only if i not in known]
        if unknown:
            raise SystemExit(f"unknown mutant id(s): {', '.join(unknown)} (see --list)")
        mutants = [m for m in mutants if m.id in only]
    if area:
        mutants = [m for m in mutants if m.area == area]
    return mutants


def report(results: list[Result], elapsed: float, verbose: bool) -> int:
    """Print the summary; return the number of not-applicable entries and the rate check."""
    by: dict[str, list[Result]] = {}
    for r in results:
        key = r.outcome
        if r.outcome == "survived" and r.mutant.equivalent:
            key = "equivalent"
        by.setdefault(key, []).append(r)
    print()
    print("=" * 78)
    for key in ("survived", "not-applicable", "equivalent", "timeout"):
        for r in by.get(key, []):
            print(f"{key.upper():15} {r.mutant.id}: {r.mutant.file}  ({r.detail})")
            if key == "equivalent":
                print(f"{'':15} reason: {r.mutant.equivalent}")
            if verbose and r.tail:
                print("\n".join("    " + t for t in r.tail))
    killed = len(by.get("killed", [])) + len(by.get("timeout", []))
    survived = len(by.get("survived", []))
    equivalent = len(by.get("equivalent", []))
    na = len(by.get("not-applicable", []))
    denom = killed + survived
    rate = killed / denom if denom else 1.0
    areas: dict[str, list[int]] = {}
    for r in results:
        a = areas.setdefault(r.mutant.area, [0, 0])
        if r.outcome in ("killed", "timeout"):
            a[0] += 1
        if r.outcome in ("killed", "timeout") or (r.outcome == "survived"
                                                   and not r.mutant.equivalent):
            a[1] += 1
    print("-" * 78)
    print("by area: " + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(areas.items())))
    print(
        f"{len(results)} mutants: {killed} killed ({len(by.get('timeout', []))} by timeout), "
        f"{survived} survived, {equivalent} equivalent (survived, explained), "
        f"{na} not applicable"
    )
    print(f"kill rate {rate:.1%} ({killed}/{denom}); wall time {elapsed:.0f} s")
    return na


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list-file", type=Path, default=DEFAULT_LIST, help="the mutant list")
    ap.add_argument("--only", action="append", default=[], metavar="ID",
                    help="run only this mutant (repeatable)")
    ap.add_argument("--area", help="run only mutants of this area")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant")
    ap.add_argument("--min-rate", type=float, default=0.95, help="kill rate to pass")
    ap.add_argument("--check", action="store_true",
                    help="only check that every snippet applies (fast, runs no tests)")
    ap.add_argument("-v", "--verbose", action="store_true", help="show survivors' output")
    ap.add_argument("--tests", nargs="+", metavar="NODE", default=None,
                    help="run these test files/node ids instead of each mutant's own list "
                         "(e.g. to check that one named test kills a mutant)")
    ap.add_argument("--git", metavar="REV", default=None,
                    help="test commit REV (git archive) instead of the working tree")
    ap.add_argument("--baseline", action="store_true",
                    help="first run every distinct test set on the unmutated copy; stop if "
                         "one fails (a failing baseline would count as a kill)")
    args = ap.parse_args(argv)
    mutants = _select(load(args.list_file), args.only, args.area)
    if args.tests:
        mutants = [dataclasses.replace(m, tests=tuple(args.tests)) for m in mutants]
    if args.list or args.check:
        bad = 0
        for m in mutants:
            why = check_applicable(m, args.git)
            bad += bool(why)
            flag = f"  NOT APPLICABLE: {why}" if why else ""
            eq = "  [equivalent]" if m.equivalent else ""
            print(f"{m.id:28} {m.area:9} {m.file}{eq}{flag}")
        print(f"{len(mutants)} mutants, {bad} not applicable")
        return 1 if bad and args.check else 0
    t0 = time.monotonic()
    results: list[Result] = []
    if args.baseline:
        sets: dict[tuple[str, ...], Mutant] = {}
        for m in mutants:
            sets.setdefault(m.tests, m)
        print(f"baseline: {len(sets)} distinct test sets on the unmutated tree", flush=True)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            base = list(pool.map(
                lambda m: run_one(m, args.timeout, sys.executable, args.git, apply=False),
                sets.values()))
        failing = [r for r in base if r.outcome != "survived"]
        for r in failing:
            print(f"BASELINE FAILS for {' '.join(r.mutant.tests)}: {r.detail}")
            print("\n".join("    " + t for t in r.tail))
        if failing:
            return 2
        print(f"baseline passes ({time.monotonic() - t0:.0f} s)", flush=True)

    def one(m: Mutant) -> Result:
        r = run_one(m, args.timeout, sys.executable, args.git)
        eq = " (equivalent)" if r.outcome == "survived" and m.equivalent else ""
        print(f"[{r.seconds:6.1f}s] {r.outcome:14} {m.id}{eq}  {r.detail}", flush=True)
        return r

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(one, mutants))
    na = report(results, time.monotonic() - t0, args.verbose)
    killed = sum(r.outcome in ("killed", "timeout") for r in results)
    survived = sum(r.outcome == "survived" and not r.mutant.equivalent for r in results)
    rate = killed / (killed + survived) if killed + survived else 1.0
    return 0 if rate >= args.min_rate and not na else 1


if __name__ == "__main__":
    raise SystemExit(main())
