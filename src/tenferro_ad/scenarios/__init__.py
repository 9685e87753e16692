"""Ledger scenarios: declare a program and the allocation/copy multisets it must produce.

A scenario file (TOML, see :mod:`tenferro_ad.scenarios._schema` for the format) names
an importable program, its inputs, whether to checkpoint and with which policy, and
the exact expected allocation and copy multisets by reason.  The runner executes
forward plus backward under :func:`tenferro_storage.ledger.capture`, compares, and
reports::

    python -m tenferro_ad.scenarios run                 # every shipped scenario
    python -m tenferro_ad.scenarios run mlp my.toml --plot live.png --trace run.json

The shipped scenario files are package data (``tenferro_ad/scenarios/data/*.toml``,
:data:`SHIPPED`), so the command works from any directory.  From Python:
``results = run_scenarios(load_files([SHIPPED]))`` then ``print(format_table(results))``.
"""

from ._report import (
    PlotUnavailableError,
    format_table,
    plot_records,
    trace_events,
    write_plot,
    write_trace,
)
from ._runner import (
    Executor,
    Observation,
    ScenarioResult,
    check,
    execute,
    make_inputs,
    make_policy,
    resolve_program,
    run_scenarios,
)
from ._schema import (
    POLICY_NAMES,
    SHIPPED,
    Expectation,
    InputSpec,
    Scenario,
    ScenarioError,
    load_file,
    load_files,
)

__all__ = [
    "POLICY_NAMES",
    "SHIPPED",
    "Executor",
    "Expectation",
    "InputSpec",
    "Observation",
    "PlotUnavailableError",
    "Scenario",
    "ScenarioError",
    "ScenarioResult",
    "check",
    "execute",
    "format_table",
    "load_file",
    "load_files",
    "make_inputs",
    "make_policy",
    "plot_records",
    "resolve_program",
    "run_scenarios",
    "trace_events",
    "write_plot",
    "write_trace",
]
