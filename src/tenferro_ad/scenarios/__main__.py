"""``python -m tenferro_ad.scenarios run [FILES...] [--plot FILE.png] [--trace FILE.json]``.

Exit status: 0 when every scenario matched its expectations, 1 on any mismatch,
2 when a file could not be loaded or a report could not be written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ._report import PlotUnavailableError, format_table, write_plot, write_trace
from ._runner import Executor, execute, run_scenarios
from ._schema import ScenarioError, load_files


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tenferro_ad.scenarios",
        description="Run ledger scenarios (forward + backward) and compare the allocation "
        "and copy multisets with their expectations.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run scenario files and print the ledger table")
    run.add_argument(
        "files", nargs="*", type=Path, help="scenario files or directories (default: ./scenarios)"
    )
    run.add_argument(
        "--plot",
        type=Path,
        metavar="FILE.png",
        help="draw live bytes over time per scenario (needs matplotlib)",
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
    files = list(args.files) or [Path("scenarios")]
    try:
        missing = [str(f) for f in files if not f.exists()]
        if missing:
            raise ScenarioError(f"{', '.join(missing)}: no such scenario file or directory")
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
        if args.plot is not None:
            write_plot(results, args.plot)
            print(f"wrote plot {args.plot}")
    except (PlotUnavailableError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return status


if __name__ == "__main__":
    sys.exit(main())
