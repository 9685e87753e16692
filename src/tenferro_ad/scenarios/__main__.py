"""``python -m tenferro_ad.scenarios run [FILES...] [--plot [FILE.png]] [--trace FILE.json]``.

Without ``FILES`` it runs the scenarios shipped inside the package (``SHIPPED``), so it
works from any directory.  A ``FILES`` entry that is not a path but names a shipped
scenario file (``mlp`` or ``mlp.toml``) runs that one.  ``run --list`` prints the shipped
files.  Nothing is written unless ``--plot``/``--trace`` are given (a bare ``--plot``
writes into a new temporary directory, as the demo's does; a missing matplotlib is
reported before any scenario runs).

Exit status: 0 when every scenario matched its expectations, 1 on any mismatch,
2 when a file could not be loaded or a report could not be written.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ._report import (
    PlotUnavailableError,
    format_table,
    plot_available,
    write_plot,
    write_trace,
)
from ._runner import Executor, execute, run_scenarios
from ._schema import SHIPPED, ScenarioError, load_files


def _resolve(f: Path) -> Path:
    """A path as given, or the shipped scenario file it names (``mlp``, ``mlp.toml``)."""
    if f.exists() or f.parent != Path("."):
        return f
    shipped = SHIPPED / (f.name if f.suffix == ".toml" else f"{f.name}.toml")
    return shipped if shipped.is_file() else f


_DEFAULT_PLOT = Path("<temporary>")


def _plot_path(plot: Path | None) -> Path | None:
    """The plot file: as given, a fresh temporary one for a bare ``--plot``, or ``None``.
    Raises ``ScenarioError`` (before any scenario runs) without matplotlib or when the
    named directory does not exist."""
    if plot is None:
        return None
    if not plot_available():
        raise ScenarioError(
            "--plot: matplotlib is not installed. Install the optional extra with  pip "
            "install 'tenferro[plot]'  (or pip install matplotlib), or leave out --plot"
        )
    if plot is _DEFAULT_PLOT:
        return Path(tempfile.mkdtemp(prefix="tenferro-scenarios-")) / "scenarios.png"
    if not plot.parent.is_dir():
        raise ScenarioError(f"--plot {plot}: directory {plot.parent} does not exist")
    return plot


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tenferro_ad.scenarios",
        description="Run ledger scenarios (forward + backward) and compare the allocation "
        "and copy multisets with their expectations.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run scenario files and print the ledger table")
    run.add_argument(
        "files",
        nargs="*",
        type=Path,
        help="scenario files or directories, or names of shipped scenarios (default: every "
        "scenario shipped with the package)",
    )
    run.add_argument(
        "--list", action="store_true", help="list the shipped scenario files and exit"
    )
    run.add_argument(
        "--plot",
        type=Path,
        nargs="?",
        const=_DEFAULT_PLOT,
        metavar="FILE.png",
        help="draw live bytes over time per scenario (needs matplotlib; checked before "
        "anything runs); without FILE.png, into a new temporary directory (the path is "
        "printed), as the demo's --plot",
    )
    run.add_argument(
        "--trace",
        type=Path,
        metavar="FILE.json",
        help="write the allocation timeline as Chrome trace events (Perfetto)",
    )
    run.add_argument(
        "-k",
        dest="select",
        metavar="SUBSTRING",
        help="only scenarios whose name contains SUBSTRING",
    )
    return parser


def main(argv: Sequence[str] | None = None, *, executor: Executor = execute) -> int:
    """The command-line entry point; returns the exit status (0 pass, 1 mismatch, 2 error)."""
    args = _parser().parse_args(argv)
    if args.list:
        for f in sorted(SHIPPED.glob("*.toml")):
            print(f)
        return 0
    files = [_resolve(f) for f in args.files] or [SHIPPED]
    try:
        plot = _plot_path(args.plot)  # refused before any work
        missing = [str(f) for f in files if not f.exists()]
        if missing:
            raise ScenarioError(
                f"{', '.join(missing)}: no such scenario file or directory (shipped scenarios: "
                f"{', '.join(sorted(p.stem for p in SHIPPED.glob('*.toml')))})"
            )
        scenarios = load_files(files)
        if args.select:
            scenarios = tuple(s for s in scenarios if args.select in s.name)
        if not scenarios:
            raise ScenarioError(f"{', '.join(map(str, files))}: no scenarios to run")
        results = run_scenarios(scenarios, executor)
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_table(results))
    status = 0 if all(r.passed for r in results) else 1
    try:
        if args.trace is not None:
            write_trace(results, args.trace)
            print(f"wrote trace {args.trace} (open in https://ui.perfetto.dev)")
        if plot is not None:
            write_plot(results, plot)
            print(f"wrote plot {plot}")
    except (PlotUnavailableError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return status


if __name__ == "__main__":
    sys.exit(main())
