"""Scenario files: a frozen schema and a TOML loader whose errors name the file and key.

A scenario file holds one or more ``[[scenario]]`` tables::

    [[scenario]]
    name = "deep_chain_checkpointed"
    description = "64 sin ops in 8 checkpointed segments"
    program = "tenferro_ad.scenarios.programs:deep_chain"
    seed = 0
    mode = "eager"                     # or "traced": compiled forward and backward halves
    checkpoint = true                  # the program gets a policy object, else None
    policy = "save_nothing"            # or save_everything | save_named | save_contractions
    policy_labels = []                 # only for save_named (empty: every named value)
    params = { depth = 64, segments = 8 }

    [[scenario.inputs]]
    name = "x"
    shape = [4096]
    dtype = "float64"                  # float32 | float64
    init = "normal"                    # normal | uniform
    scale = 1.0
    wrt = true                         # differentiate with respect to this input

    [scenario.expect]
    allocations = { operation_output = 131, checkpoint_recompute_output = 56 }
    copies = {}
    allocation_bytes = { checkpoint_recompute_output = 1835008 }   # optional
    copy_bytes = {}                                                 # optional
    max_peak_bytes = 400000                                         # optional

Allocation and copy expectations are exact multisets: a reason that is not listed is
expected zero times.  Byte tables are checked only when present.

``mode = "traced"`` runs the same program traced: its ``value_and_grad`` graph is cut into
a forward and a backward half, each compiled (without buffer reuse, so every
non-view instruction is one allocation) and submitted detached on one group -- the
residuals pass from the first execution to the second as descriptors of that group.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from tenferro_storage.ledger import AllocationReason, CopyReason

from ..errors import ScenarioError

__all__ = [
    "MODES",
    "POLICY_NAMES",
    "Expectation",
    "InputSpec",
    "Scenario",
    "ScenarioError",
    "load_file",
    "load_files",
]

SHIPPED: Final = Path(__file__).resolve().with_name("data")
"""The directory of the scenario files shipped inside the package (package data)."""
MODES: Final = ("eager", "traced")
POLICY_NAMES: Final = ("save_nothing", "save_everything", "save_named", "save_contractions")
DTYPES: Final = ("float32", "float64")
INITS: Final = ("normal", "uniform")
_PROGRAM_RE: Final = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def _err(where: str, message: str) -> ScenarioError:
    return ScenarioError(f"{where}: {message}")


def _counts(
    pairs: Mapping[Any, int] | Sequence[tuple[Any, int]],
) -> tuple[tuple[Any, int], ...]:
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    return tuple(sorted(((r, n) for r, n in items if n), key=lambda p: p[0].value))


@attrs.frozen
class InputSpec:
    """One program input: made before the capture starts with ``tenferro_storage.random``."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float64"
    init: str = "normal"
    scale: float = 1.0
    wrt: bool = True


@attrs.frozen
class Expectation:
    """Expected ledger multisets of one scenario (forward plus backward).

    ``allocations``/``copies`` are exact counts by reason (unlisted reasons: zero);
    ``allocation_bytes``/``copy_bytes`` are checked only when not ``None``;
    ``max_peak_bytes`` bounds the peak live bytes when not ``None``.
    """

    allocations: tuple[tuple[AllocationReason, int], ...] = attrs.field(
        default=(), converter=_counts
    )
    copies: tuple[tuple[CopyReason, int], ...] = attrs.field(default=(), converter=_counts)
    allocation_bytes: tuple[tuple[AllocationReason, int], ...] | None = None
    copy_bytes: tuple[tuple[CopyReason, int], ...] | None = None
    max_peak_bytes: int | None = None


@attrs.frozen
class Scenario:
    """One ledger scenario: a program, its inputs, the checkpoint choice and expectations."""

    name: str
    program: str
    inputs: tuple[InputSpec, ...]
    expect: Expectation
    description: str = ""
    seed: int = 0
    checkpoint: bool = False
    policy: str = "save_nothing"
    policy_labels: tuple[str, ...] = ()
    params: tuple[tuple[str, Any], ...] = ()
    source: str = "<memory>"
    mode: str = "eager"

    @property
    def kwargs(self) -> dict[str, Any]:
        """The program's extra keyword arguments (``params``)."""
        return dict(self.params)


# --- loading ------------------------------------------------------------------------

_SCENARIO_KEYS: Final = frozenset(
    {
        "name",
        "description",
        "program",
        "seed",
        "checkpoint",
        "mode",
        "policy",
        "policy_labels",
        "params",
        "inputs",
        "expect",
    }
)
_INPUT_KEYS: Final = frozenset({"name", "shape", "dtype", "init", "scale", "wrt"})
_EXPECT_KEYS: Final = frozenset(
    {"allocations", "copies", "allocation_bytes", "copy_bytes", "max_peak_bytes"}
)


def _check_keys(where: str, table: Mapping[str, Any], allowed: frozenset[str]) -> None:
    for key in table:
        if key not in allowed:
            raise _err(
                f"{where}.{key}",
                f"unknown key {key!r} (allowed: {', '.join(sorted(allowed))})",
            )


def _get(
    where: str,
    table: Mapping[str, Any],
    key: str,
    kind: type | tuple[type, ...],
    default: Any = attrs.NOTHING,
) -> Any:
    if key not in table:
        if default is attrs.NOTHING:
            raise _err(f"{where}.{key}", "required key is missing")
        return default
    value = table[key]
    bad_bool = isinstance(value, bool) and kind in (int, float, (int, float))
    if not isinstance(value, kind) or bad_bool:
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _err(f"{where}.{key}", f"expected {names}, got {type(value).__name__} {value!r}")
    return value


def _reason_table(
    where: str,
    table: Any,
    enum_type: type[AllocationReason] | type[CopyReason],
) -> tuple[tuple[Any, int], ...]:
    if not isinstance(table, dict):
        raise _err(where, f"expected a table of reason = count, got {type(table).__name__}")
    names = {r.value: r for r in enum_type}
    out: list[tuple[Any, int]] = []
    for key, value in table.items():
        if key not in names:
            raise _err(
                f"{where}.{key}",
                f"unknown {enum_type.__name__} {key!r} (expected one of: {', '.join(names)})",
            )
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise _err(f"{where}.{key}", f"expected a non-negative integer, got {value!r}")
        out.append((names[key], value))
    return _counts(out)


def _parse_input(where: str, table: Any) -> InputSpec:
    if not isinstance(table, dict):
        raise _err(where, f"expected a table, got {type(table).__name__}")
    _check_keys(where, table, _INPUT_KEYS)
    name = _get(where, table, "name", str)
    shape = _get(where, table, "shape", list)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise _err(f"{where}.shape", f"expected a list of non-negative integers, got {shape!r}")
    dtype = _get(where, table, "dtype", str, "float64")
    if dtype not in DTYPES:
        raise _err(f"{where}.dtype", f"unsupported dtype {dtype!r} (expected one of: {DTYPES})")
    init = _get(where, table, "init", str, "normal")
    if init not in INITS:
        raise _err(f"{where}.init", f"unknown init {init!r} (expected one of: {INITS})")
    scale = float(_get(where, table, "scale", (int, float), 1.0))
    wrt = _get(where, table, "wrt", bool, True)
    return InputSpec(name, tuple(shape), dtype, init, scale, wrt)


def _parse_expect(where: str, table: Any) -> Expectation:
    if not isinstance(table, dict):
        raise _err(where, f"expected a table, got {type(table).__name__}")
    _check_keys(where, table, _EXPECT_KEYS)
    allocations = _reason_table(
        f"{where}.allocations", table.get("allocations", {}), AllocationReason
    )
    copies = _reason_table(f"{where}.copies", table.get("copies", {}), CopyReason)
    allocation_bytes = (
        _reason_table(f"{where}.allocation_bytes", table["allocation_bytes"], AllocationReason)
        if "allocation_bytes" in table
        else None
    )
    copy_bytes = (
        _reason_table(f"{where}.copy_bytes", table["copy_bytes"], CopyReason)
        if "copy_bytes" in table
        else None
    )
    peak = _get(where, table, "max_peak_bytes", int, None)
    if peak is not None and peak < 0:
        raise _err(f"{where}.max_peak_bytes", f"expected a non-negative integer, got {peak}")
    return Expectation(allocations, copies, allocation_bytes, copy_bytes, peak)


def _parse_scenario(where: str, table: Any, source: str) -> Scenario:
    if not isinstance(table, dict):
        raise _err(where, f"expected a table, got {type(table).__name__}")
    _check_keys(where, table, _SCENARIO_KEYS)
    name = _get(where, table, "name", str)
    if not name or not re.fullmatch(r"[\w.\-]+", name):
        raise _err(f"{where}.name", f"expected letters, digits, '_', '-' or '.', got {name!r}")
    program = _get(where, table, "program", str)
    if not _PROGRAM_RE.match(program):
        raise _err(f"{where}.program", f"expected 'package.module:function', got {program!r}")
    mode = _get(where, table, "mode", str, "eager")
    if mode not in MODES:
        raise _err(f"{where}.mode", f"unknown mode {mode!r} (expected one of: {', '.join(MODES)})")
    policy = _get(where, table, "policy", str, "save_nothing")
    if policy not in POLICY_NAMES:
        raise _err(
            f"{where}.policy",
            f"unknown policy {policy!r} (expected one of: {', '.join(POLICY_NAMES)})",
        )
    labels = _get(where, table, "policy_labels", list, [])
    if not all(isinstance(label, str) for label in labels):
        raise _err(f"{where}.policy_labels", f"expected a list of strings, got {labels!r}")
    params = _get(where, table, "params", dict, {})
    for key, value in params.items():
        if not isinstance(value, int | float | str | bool):
            raise _err(
                f"{where}.params.{key}",
                f"expected an integer, float, string or boolean, got {value!r}",
            )
    raw_inputs = _get(where, table, "inputs", list)
    inputs = tuple(_parse_input(f"{where}.inputs[{i}]", t) for i, t in enumerate(raw_inputs))
    seen: set[str] = set()
    for i, spec in enumerate(inputs):
        if spec.name in seen:
            raise _err(f"{where}.inputs[{i}].name", f"duplicate input name {spec.name!r}")
        seen.add(spec.name)
    if not any(spec.wrt for spec in inputs):
        raise _err(f"{where}.inputs", "no input has wrt = true; nothing to differentiate")
    expect = _parse_expect(f"{where}.expect", _get(where, table, "expect", dict))
    return Scenario(
        name=name,
        program=program,
        inputs=inputs,
        expect=expect,
        description=_get(where, table, "description", str, ""),
        seed=_get(where, table, "seed", int, 0),
        checkpoint=_get(where, table, "checkpoint", bool, False),
        policy=policy,
        policy_labels=tuple(labels),
        params=tuple(sorted(params.items())),
        source=source,
        mode=mode,
    )


def load_file(path: str | Path) -> tuple[Scenario, ...]:
    """Parse one scenario file. O(file size).

    Raises :class:`ScenarioError` naming the file and the offending key (or the TOML
    syntax error's line); a missing file raises ``FileNotFoundError``.
    """
    p = Path(path)
    try:
        with p.open("rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise _err(str(p), f"not valid TOML: {exc}") from None
    if set(data) != {"scenario"}:
        extra = sorted(set(data) - {"scenario"})
        key = extra[0] if extra else "scenario"
        message = (
            f"unknown top-level key {key!r}"
            if extra
            else "no [[scenario]] table (write one or more [[scenario]] tables)"
        )
        raise _err(f"{p}: {key}", message)
    tables = data["scenario"]
    if not isinstance(tables, list):
        raise _err(f"{p}: scenario", "expected [[scenario]] (an array of tables)")
    return tuple(_parse_scenario(f"{p}: scenario[{i}]", t, str(p)) for i, t in enumerate(tables))


def load_files(paths: Sequence[str | Path]) -> tuple[Scenario, ...]:
    """Parse several files (a directory means its ``*.toml`` files, sorted).

    Scenario names must be unique across everything loaded; a duplicate raises
    :class:`ScenarioError` naming both files.
    """
    out: list[Scenario] = []
    names: dict[str, str] = {}
    for raw in paths:
        p = Path(raw)
        files = sorted(p.glob("*.toml")) if p.is_dir() else [p]
        for f in files:
            for s in load_file(f):
                if s.name in names:
                    raise _err(
                        f"{f}: scenario {s.name!r}",
                        f"duplicate scenario name (also defined in {names[s.name]})",
                    )
                names[s.name] = str(f)
                out.append(s)
    return tuple(out)
