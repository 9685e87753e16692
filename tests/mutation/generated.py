"""Generated mutation testing with cosmic-ray: mutants nobody chose, over the core.

The hand-written list (``mutants.toml``, ``run_mutants.py``) measures the tests it was
written for.  This measures what nobody tuned: cosmic-ray generates every mutant its
operators can make in the configured areas (``AREAS``), a seeded random sample is drawn
from that list, and each sampled mutant runs against the test files that
``tests/README.md``'s index names for its module.  Run by hand or from a scheduled job,
never in every CI run (see README.md beside this file for how long it takes)::

    python tests/mutation/generated.py run --per-area 45 --jobs 2   # sample, run, report
    python tests/mutation/generated.py run --area ad-core --per-area 10
    python tests/mutation/generated.py report                       # the last session again
    python tests/mutation/generated.py count                        # mutants per area
    python tests/mutation/generated.py recheck --results OLD/results.json   # survivors again

Each job works in its own copy of the repository (``src``, ``tests``, ``scripts`` ...);
the working tree is never mutated.  Results land in a cosmic-ray session database
(``--session``, default ``.mutation/session.sqlite``), so ``cr-report`` reads them too;
mutants not drawn are marked skipped there, as cosmic-ray's own filters do.

Outcomes: ``killed`` (the tests failed), ``survived`` (they passed), ``incompetent``
(the mutant does not import: counted as killed, reported apart), ``timeout`` (the tests
ran past ``--timeout``: counted as killed, as cosmic-ray does, but in a column of its own
-- on a loaded machine re-run it with a larger limit before trusting it) and
``equivalent`` (a survivor listed in ``equivalents.toml`` beside this file, keyed by
module, operator and occurrence, with the reason no test can tell).  The kill rate is
killed / (sampled - equivalent survivors).  Exit status 0 when it reaches ``--min-rate``.
``recheck`` re-applies a recorded sample's survivors to the current tree (see README.md).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
COPIED = ("src", "tests", "scripts", "docs", "tutorials", "pyproject.toml", "README.md")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", ".ruff_cache",
                                ".pytest_cache", ".hypothesis", "*.egg-info")
INDEX_ROW = re.compile(r"^\| `(src/[^`]+\.py)` \| (.*) \|$")

# the areas of issue 28: the ownership kernel, the runtime and providers, the AD core,
# the traced compiler, the op rules (paths relative to the repository root); the XLA
# engine's provider, lowering and per-op lowering rules are in runtime, traced and ops
AREAS: dict[str, tuple[str, ...]] = {
    "storage": ("src/tenferro_storage/_*.py", "src/tenferro_storage/kernel.py"),
    "runtime": ("src/tenferro_storage/runtime/_*.py", "src/tenferro_storage/providers/_*.py"),
    "ad-core": ("src/tenferro_ad/_core/_*.py", "src/tenferro_ad/_checkpoint/_*.py",
                "src/tenferro_ad/_functional.py"),
    "traced": ("src/tenferro_ad/_traced/_*.py",),
    "ops": ("src/tenferro_ad/ops/*.py", "src/tenferro_ad/ops/_lowering/*.py"),
}
EXCLUDED = {"__init__.py"}


@dataclass(frozen=True)
class Mutant:
    """One generated mutant: cosmic-ray's job id and mutation spec, and our area."""

    job_id: str
    area: str
    module: str
    operator: str
    occurrence: int
    start: tuple[int, int]
    end: tuple[int, int]

    @property
    def line(self) -> int:
        return self.start[0]

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.module, self.operator, self.occurrence)


def area_modules(root: Path = ROOT) -> dict[str, list[str]]:
    """Every module of every area (sorted; package ``__init__`` files left out)."""
    out: dict[str, list[str]] = {}
    for area, globs in AREAS.items():
        found = {str(p.relative_to(root)) for g in globs for p in root.glob(g)}
        out[area] = sorted(m for m in found if Path(m).name not in EXCLUDED)
    return out


def index_tests(root: Path = ROOT) -> dict[str, list[str]]:
    """``tests/README.md``'s module -> test files index (only files that exist)."""
    out: dict[str, list[str]] = {}
    for line in (root / "tests" / "README.md").read_text().splitlines():
        m = INDEX_ROW.match(line.strip())
        if m:
            tests = re.findall(r"`(tests/[^`]+)`", m.group(2))
            out[m.group(1)] = [t for t in tests if (root / t.split("::")[0]).exists()]
    return out


def make_copy(dest: Path) -> Path:
    """A fresh copy of the parts of the repository the tests need."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=IGNORE)
        elif src.exists():
            shutil.copy2(src, dest / name)
    env = {**os.environ, "PYTHONPATH": str(dest.resolve() / "src")}
    where = subprocess.run([sys.executable, "-c", "import tenferro_ad, tenferro_storage; "
                            "print(tenferro_ad.__file__); print(tenferro_storage.__file__)"],
                           cwd=dest, env=env, capture_output=True, text=True, check=True)
    for path in where.stdout.split():  # a mutant must be what the tests import
        if not Path(path).resolve().is_relative_to(dest.resolve()):
            raise SystemExit(f"the copy in {dest} is not what Python imports ({path})")
    return dest


def init_session(work: Path, session: Path) -> None:
    """``cosmic-ray init`` over every area's modules, run in the copy ``work``."""
    modules = [m for ms in area_modules(work).values() for m in ms]
    config = work / "cosmic-ray.toml"
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(modules)}\n"
        "timeout = 900.0\n"
        "excluded-modules = []\n"
        'test-command = "python -m pytest -x -q"\n'  # each mutant gets its own (see run_one)
        '[cosmic-ray.distributor]\nname = "local"\n'
    )
    session.parent.mkdir(parents=True, exist_ok=True)
    if session.exists():
        session.unlink()
    subprocess.run(["cosmic-ray", "init", str(config), str(session)], cwd=work, check=True)


def all_mutants(session: Path) -> list[Mutant]:
    """The session's work items as mutants, in a stable order (module, operator, occurrence)."""
    from cosmic_ray.work_db import WorkDB, use_db

    by_module = {m: a for a, ms in area_modules().items() for m in ms}
    out = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in db.work_items:
            (spec,) = item.mutations
            module = str(spec.module_path)
            out.append(Mutant(item.job_id, by_module[module], module, spec.operator_name,
                              spec.occurrence, tuple(spec.start_pos), tuple(spec.end_pos)))
    return sorted(out, key=lambda m: (m.area, *m.key))


def _never_evaluated(path: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Source ranges whose code never runs: annotations (every module here starts with
    ``from __future__ import annotations``, so they stay strings) and ``if TYPE_CHECKING:``
    bodies."""
    tree = ast.parse(path.read_text())
    spans: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            spans.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
            spans.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            spans.append(node.annotation)
        elif (isinstance(node, ast.If) and isinstance(node.test, ast.Name)
              and node.test.id == "TYPE_CHECKING"):
            spans.extend(node.body)
    return [((n.lineno, n.col_offset), (n.end_lineno or n.lineno, n.end_col_offset or 0))
            for n in spans]


def evaluated(mutants: Sequence[Mutant], root: Path = ROOT) -> list[Mutant]:
    """The mutants of code that runs (a mutant inside an annotation or a ``TYPE_CHECKING``
    block is equivalent by construction, so it is never drawn)."""
    spans: dict[str, list[tuple[tuple[int, int], tuple[int, int]]]] = {}
    out = []
    for m in mutants:
        ranges = spans.get(m.module)
        if ranges is None:
            ranges = spans[m.module] = _never_evaluated(root / m.module)
        if not any(lo <= m.start and m.end <= hi for lo, hi in ranges):
            out.append(m)
    return out


def draw(mutants: Sequence[Mutant], per_area: int, seed: int,
         areas: Iterable[str]) -> list[Mutant]:
    """A seeded random sample of ``per_area`` mutants from each area (all, if fewer)."""
    rng = random.Random(seed)
    grouped: dict[str, list[Mutant]] = defaultdict(list)
    for m in mutants:
        grouped[m.area].append(m)
    picked: list[Mutant] = []
    for area in areas:
        pool = grouped.get(area, [])
        picked.extend(rng.sample(pool, min(per_area, len(pool))))
    return picked


def mark_skipped(session: Path, keep: set[str]) -> None:
    """Mark every mutant not drawn as skipped (what cosmic-ray's filters do)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(session), WorkDB.Mode.open) as db:
        skipped = [w.job_id for w in db.pending_work_items if w.job_id not in keep]
        db.set_multiple_results(skipped, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))


def run_one(work: Path, m: Mutant, tests: list[str], timeout: float) -> tuple[str, float, str]:
    """Apply ``m`` in ``work`` with cosmic-ray, run its tests, restore. Returns
    ``(outcome, seconds, diff)`` with outcome ``killed``/``survived``/``incompetent``/
    ``timeout`` (the tests ran past ``timeout``: counted as killed, reported apart)."""
    command = " ".join(["python", "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                        "-p", "no:randomly", *tests])
    t0 = time.perf_counter()
    code, stdout, stderr = _run_group(
        [sys.executable, "-c", _WORKER, m.module, m.operator, str(m.occurrence), command,
         str(timeout), json.dumps([m.start, m.end])], work, timeout + 120)
    seconds = time.perf_counter() - t0
    if code is None:  # the worker itself hung (killed mid-mutation: put the file back)
        shutil.copy2(ROOT / m.module, work / m.module)
        return "timeout", seconds, ""
    try:
        result = json.loads(stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return "incompetent", seconds, stderr[-2000:]
    outcome = {"killed": "killed", "survived": "survived"}.get(
        str(result.get("test_outcome")), "incompetent")
    if result.get("worker_outcome") == "no-test":
        outcome = "incompetent"
    if outcome == "killed" and result.get("timed_out"):
        outcome = "timeout"
    return outcome, seconds, str(result.get("diff") or "")


def _env(work: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(work.resolve() / "src"), "TENFERRO_TEST_WORKERS": "0",
           "HYPOTHESIS_PROFILE": os.environ.get("HYPOTHESIS_PROFILE", "dev")}
    env.pop("CI", None)
    return env


def _run_group(argv: list[str], work: Path, timeout: float) -> tuple[int | None, str, str]:
    """Run ``argv`` in ``work`` in its own process group; ``(None, ...)`` when it ran past
    ``timeout`` (the whole group, pytest included, is then killed)."""
    proc = subprocess.Popen(argv, cwd=work, env=_env(work), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, out, err
    return proc.returncode, out, err


def recheck(work: Path, row: dict[str, object], tests: list[str],
            timeout: float) -> tuple[str, float]:
    """Re-apply a recorded mutant's diff (``row["diff"]``) to the *current* source with
    ``patch`` (context fuzz allowed: lines may have moved since the sample was drawn), run
    ``tests``, restore the file.  Outcome ``killed``/``survived``/``timeout``,
    ``not-applicable`` (the mutated line no longer exists) or ``ambiguous`` (its context
    now occurs more than once): the last two need a check by hand."""
    diff = "\n".join(ln for ln in str(row["diff"]).splitlines()
                     if ln != "--- mutation diff ---") + "\n"
    target = work / str(row["module"])
    original = target.read_bytes()
    t0 = time.perf_counter()
    before = "".join(ln[1:] + "\n" for ln in diff.splitlines()[2:]
                     if ln[:1] in (" ", "-"))
    if original.decode().count(before) > 1:  # patch would pick the nearest: maybe not it
        return "ambiguous", 0.0
    applied = subprocess.run(["patch", "-p1", "-F2", "-s", "--no-backup-if-mismatch",
                              "-r", "-"], cwd=work, input=diff, text=True,
                             capture_output=True)
    try:
        if applied.returncode != 0:
            return "not-applicable", time.perf_counter() - t0
        code, _, _ = _run_group([sys.executable, "-m", "pytest", "-x", "-q", "-p",
                                 "no:cacheprovider", "-p", "no:randomly", *tests],
                                work, timeout)
    finally:
        target.write_bytes(original)
    outcome = "timeout" if code is None else "survived" if code == 0 else "killed"
    return outcome, time.perf_counter() - t0


# runs inside the copy: cosmic-ray applies the mutation, runs the command, restores the file
_WORKER = r"""
import json, sys
from pathlib import Path
from cosmic_ray.mutating import mutate_and_test
from cosmic_ray.work_item import MutationSpec
module, operator, occurrence, command, timeout, pos = sys.argv[1:7]
start, end = json.loads(pos)
spec = MutationSpec(module_path=Path(module), operator_name=operator,
                    occurrence=int(occurrence), start_pos=tuple(start), end_pos=tuple(end),
                    operator_args={})
r = mutate_and_test([spec], command, float(timeout))
print(json.dumps({"worker_outcome": r.worker_outcome.value,
                  "test_outcome": r.test_outcome.value if r.test_outcome else None,
                  "timed_out": r.output == "timeout", "diff": r.diff}))
"""


def record_results(session: Path, sample: Sequence[Mutant], rows: list[dict[str, object]]) -> None:
    """Store each outcome in the cosmic-ray session too (``cr-report`` then reads it)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    outcome = {"killed": TestOutcome.KILLED, "survived": TestOutcome.SURVIVED,
               "incompetent": TestOutcome.INCOMPETENT, "timeout": TestOutcome.KILLED}
    by_key = {(r["module"], r["operator"], r["occurrence"]): r for r in rows}
    with use_db(str(session), WorkDB.Mode.open) as db:
        for m in sample:
            r = by_key.get(m.key)
            if r is not None:
                db.set_result(m.job_id, WorkResult(
                    worker_outcome=WorkerOutcome.NORMAL, diff=str(r["diff"]),
                    test_outcome=outcome[str(r["outcome"])]))


def load_equivalents() -> dict[tuple[str, str, int], str]:
    path = HERE / "equivalents.toml"
    if not path.exists():
        return {}
    data = tomllib.loads(path.read_text())
    return {(e["module"], e["operator"], int(e["occurrence"])): e["reason"]
            for e in data.get("equivalent", [])}


def save_results(results_path: Path, rows: list[dict[str, object]]) -> None:
    results_path.parent.mkdir(parents=True, exist_ok=True)
    results_path.write_text(json.dumps(rows, indent=1))


def report(rows: list[dict[str, object]], min_rate: float) -> int:
    """Per-area and total kill rates; survivors listed with their diffs."""
    equivalents = load_equivalents()
    per: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rows:
        outcome = str(r["outcome"])
        key = (str(r["module"]), str(r["operator"]), int(str(r["occurrence"])))
        if outcome in ("survived", "not-applicable", "ambiguous") and key in equivalents:
            outcome = "equivalent"
        per[str(r["area"])][outcome] += 1
    total: Counter[str] = Counter()
    print(f"{'area':10} {'sampled':>7} {'killed':>6} {'incomp.':>7} {'timeout':>7} "
          f"{'survived':>8} {'equiv.':>6} {'rate':>7}")
    for area in sorted(per):
        c = per[area]
        total.update(c)
        print(_row(area, c))
    print(_row("total", total))
    for r in rows:
        key = (str(r["module"]), str(r["operator"]), int(str(r["occurrence"])))
        if r["outcome"] in ("survived", "not-applicable", "ambiguous") and (
                key not in equivalents):
            print(f"\n{str(r['outcome']).upper()} {r['area']} {r['module']}:{r['line']} "
                  f"{r['operator']} #{r['occurrence']}\n{r['diff']}")
    return 0 if _rate(total) >= min_rate else 1


def _rate(c: Counter[str]) -> float:  # a mutant not re-applied counts as a survivor
    counted = (c["killed"] + c["incompetent"] + c["timeout"] + c["survived"]
               + c["not-applicable"] + c["ambiguous"])
    return (c["killed"] + c["incompetent"] + c["timeout"]) / counted if counted else 1.0


def _row(name: str, c: Counter[str]) -> str:
    n = sum(c.values())
    return (f"{name:10} {n:7} {c['killed']:6} {c['incompetent']:7} {c['timeout']:7} "
            f"{c['survived'] + c['not-applicable'] + c['ambiguous']:8} {c['equivalent']:6} "
            f"{100 * _rate(c):6.1f}%")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("run", "report", "count", "recheck"))
    p.add_argument("--per-area", type=int, default=45)
    p.add_argument("--seed", type=int, default=28)
    p.add_argument("--area", action="append", choices=sorted(AREAS))
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--min-rate", type=float, default=0.90)
    p.add_argument("--workdir", type=Path, default=ROOT / ".mutation")
    p.add_argument("--reinit", action="store_true", help="enumerate the mutants afresh")
    p.add_argument("--results", type=Path, help="recheck: a results.json (default: the last)")
    a = p.parse_args(argv)
    a.workdir = a.workdir.resolve()  # the copies' PYTHONPATH must not depend on the cwd
    session = a.workdir / "session.sqlite"
    results = a.workdir / "results.json"
    if a.command == "report":
        return report(json.loads(results.read_text()), a.min_rate)
    if a.command == "recheck":
        return _recheck(a, json.loads((a.results or results).read_text()))
    copies = [make_copy(a.workdir / f"copy{j}") for j in range(max(1, a.jobs))]
    if a.reinit or not session.exists():  # (enumerating every mutant takes a few minutes)
        init_session(copies[0], session)
    generated = all_mutants(session)
    mutants = evaluated(generated)
    if a.command == "count":
        for area, n in sorted(Counter(m.area for m in mutants).items()):
            print(f"{area:10} {n:6}")
        print(f"{'total':10} {len(mutants):6} (and {len(generated) - len(mutants)} in "
              "annotations or TYPE_CHECKING blocks, never drawn)")
        return 0
    sample = draw(mutants, a.per_area, a.seed, a.area or sorted(AREAS))
    mark_skipped(session, {m.job_id for m in sample})
    tests_of = index_tests()
    print(f"{len(generated)} mutants generated, {len(mutants)} in code that runs; "
          f"{len(sample)} drawn (seed {a.seed})", flush=True)
    free = list(copies)
    rows: list[dict[str, object]] = []
    t0 = time.perf_counter()

    def work(m: Mutant) -> dict[str, object]:
        copy = free.pop()
        try:
            tests = tests_of.get(m.module) or [f"tests/{m.area}"]
            outcome, secs, diff = run_one(copy, m, tests, a.timeout)
        finally:
            free.append(copy)
        row = {"area": m.area, "module": m.module, "operator": m.operator,
               "occurrence": m.occurrence, "line": m.line, "outcome": outcome,
               "seconds": round(secs, 1), "tests": tests, "diff": diff}
        print(f"[{len(rows) + 1}/{len(sample)} {time.perf_counter() - t0:6.0f}s] {outcome:11} "
              f"{m.module}:{m.line} {m.operator} #{m.occurrence} ({secs:.0f}s)", flush=True)
        rows.append(row)
        save_results(results, rows)
        return row

    with ThreadPoolExecutor(max_workers=len(copies)) as pool:
        list(pool.map(work, sample))
    record_results(session, sample, rows)
    print(f"\n{len(rows)} mutants in {time.perf_counter() - t0:.0f} s on {len(copies)} job(s)")
    return report(rows, a.min_rate)


def _recheck(a: argparse.Namespace, rows: list[dict[str, object]]) -> int:
    """Re-run a recorded sample's survivors (not listed as equivalent) against the current
    tree and tests; the sample's rows with the new outcomes go to ``recheck.json``."""
    equivalents = load_equivalents()
    work = make_copy(a.workdir / "recheck")
    tests_of = index_tests()
    out = []
    for r in rows:
        key = (str(r["module"]), str(r["operator"]), int(str(r["occurrence"])))
        if r["outcome"] == "survived" and key not in equivalents and (
                not a.area or r["area"] in a.area):
            tests = tests_of.get(str(r["module"])) or [f"tests/{r['area']}"]
            outcome, secs = recheck(work, r, tests, a.timeout)
            print(f"{outcome:14} {r['module']}:{r['line']} {r['operator']} "
                  f"#{r['occurrence']} ({secs:.0f}s)", flush=True)
            r = {**r, "outcome": outcome, "tests": tests, "rechecked": True}
        out.append(r)
    save_results(a.workdir / "recheck.json", out)
    return report(out, a.min_rate)


if __name__ == "__main__":
    sys.exit(main())
