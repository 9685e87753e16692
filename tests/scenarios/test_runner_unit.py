"""The scenario loader, checker and reports, driven by a fake executor (no AD involved)."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import tenferro_storage as ts
from tenferro_ad.scenarios import (
    Observation,
    PlotUnavailableError,
    Scenario,
    ScenarioError,
    check,
    format_table,
    load_file,
    load_files,
    resolve_program,
    run_scenarios,
    trace_events,
    write_plot,
)
from tenferro_ad.scenarios.__main__ import main
from tenferro_ad.scenarios._report import REASON_COLOURS
from tenferro_storage.ledger import AllocationReason, CopyReason, capture

OP = AllocationReason.OPERATION_OUTPUT
DUP = AllocationReason.EXPLICIT_DUPLICATE_DESTINATION

GOOD = """
[[scenario]]
name = "fake"
description = "two outputs and a duplicate"
program = "tenferro_ad.scenarios.programs:deep_chain"
seed = 3
checkpoint = true
policy = "save_named"
policy_labels = ["a"]
params = { depth = 4, segments = 2 }

[[scenario.inputs]]
name = "x"
shape = [4]

[[scenario.inputs]]
name = "y"
shape = [2, 3]
dtype = "float32"
init = "uniform"
scale = 2
wrt = false

[scenario.expect]
allocations = { operation_output = 2, explicit_duplicate_destination = 1 }
copies = { explicit_duplicate = 1 }
allocation_bytes = { operation_output = 48, explicit_duplicate_destination = 32 }
max_peak_bytes = 80
"""


def _write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def fake_execute(scenario: Scenario) -> Observation:
    """Forward: a 32-byte output and its duplicate; backward: a 16-byte output."""
    with capture() as total:
        with capture() as forward:
            a = ts.zeros((4,))
            b = a.duplicate()
        with capture() as backward:
            c = ts.zeros((2,))
        del a, b, c
    with capture() as untaped:
        a = ts.zeros((4,))
        b = a.duplicate()
        del a, b
    return Observation(total, forward, backward, untaped, 1.0, ())


def test_load_file_builds_the_frozen_schema(tmp_path: Path) -> None:
    (s,) = load_file(_write(tmp_path, GOOD))
    assert s.name == "fake" and s.seed == 3 and s.checkpoint and s.policy == "save_named"
    assert s.policy_labels == ("a",)
    assert s.kwargs == {"depth": 4, "segments": 2}
    assert [(i.name, i.shape, i.dtype, i.init, i.scale, i.wrt) for i in s.inputs] == [
        ("x", (4,), "float64", "normal", 1.0, True),
        ("y", (2, 3), "float32", "uniform", 2.0, False),
    ]
    assert dict(s.expect.allocations) == {OP: 2, DUP: 1}
    assert dict(s.expect.copies) == {CopyReason.EXPLICIT_DUPLICATE: 1}
    assert s.expect.copy_bytes is None
    assert s.expect.max_peak_bytes == 80
    with pytest.raises(AttributeError):
        s.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("old", "new", "key", "words"),
    [
        ("seed = 3", 'seed = "3"', "scenario[0].seed", "expected int"),
        ("seed = 3", "sead = 3", "scenario[0].sead", "unknown key"),
        ('policy = "save_named"', 'policy = "save_some"', "scenario[0].policy", "unknown policy"),
        (
            "explicit_duplicate = 1 }",
            "explicit_dup = 1 }",
            "scenario[0].expect.copies.explicit_dup",
            "unknown CopyReason",
        ),
        (
            "operation_output = 2,",
            "operation_output = -2,",
            "scenario[0].expect.allocations.operation_output",
            "non-negative",
        ),
        (
            'program = "tenferro_ad.scenarios.programs:deep_chain"',
            'program = "nocolon"',
            "scenario[0].program",
            "package.module:function",
        ),
        ("shape = [2, 3]", "shape = [2, -3]", "scenario[0].inputs[1].shape", "non-negative"),
        ('dtype = "float32"', 'dtype = "int8"', "scenario[0].inputs[1].dtype", "unsupported"),
        ('name = "y"', 'name = "x"', "scenario[0].inputs[1].name", "duplicate input"),
        (
            "max_peak_bytes = 80",
            "max_peak_bytes = true",
            "scenario[0].expect.max_peak_bytes",
            "expected int",
        ),
        ('description = "two outputs and a duplicate"\n', "", None, None),
    ],
)
def test_loader_errors_name_the_file_and_the_key(
    tmp_path: Path, old: str, new: str, key: str | None, words: str | None
) -> None:
    assert old in GOOD
    p = _write(tmp_path, GOOD.replace(old, new, 1))
    if key is None:
        load_file(p)  # description is optional
        return
    with pytest.raises(ScenarioError) as info:
        load_file(p)
    message = str(info.value)
    assert message.startswith(f"{p}: {key}: "), message
    assert words is not None and words in message


def test_loader_rejects_missing_keys_bad_toml_and_stray_tables(tmp_path: Path) -> None:
    p = _write(tmp_path, GOOD.replace('name = "fake"\n', ""))
    with pytest.raises(ScenarioError, match=r"scenario\[0\]\.name: required key is missing"):
        load_file(p)
    p = _write(tmp_path, "[[scenario]\n")
    with pytest.raises(ScenarioError, match="not valid TOML"):
        load_file(p)
    p = _write(tmp_path, GOOD + "\n[other]\nx = 1\n")
    with pytest.raises(ScenarioError, match="unknown top-level key 'other'"):
        load_file(p)
    p = _write(
        tmp_path,
        GOOD.replace("wrt = false", "wrt = false").replace(
            'name = "x"\nshape = [4]', 'name = "x"\nshape = [4]\nwrt = false'
        ),
    )
    with pytest.raises(ScenarioError, match="no input has wrt = true"):
        load_file(p)


def test_load_files_reads_directories_and_refuses_duplicate_names(tmp_path: Path) -> None:
    _write(tmp_path, GOOD, "a.toml")
    assert [s.name for s in load_files([tmp_path])] == ["fake"]
    _write(tmp_path, GOOD, "b.toml")
    with pytest.raises(
        ScenarioError,
        match=r"b\.toml: scenario 'fake': duplicate scenario name "
        r"\(also defined in .*a\.toml\)",
    ):
        load_files([tmp_path])


def test_resolve_program_errors_name_the_program(tmp_path: Path) -> None:
    (s,) = load_file(_write(tmp_path, GOOD.replace("programs:deep_chain", "programs:nope")))
    with pytest.raises(
        ScenarioError,
        match=r"program: module 'tenferro_ad\.scenarios\.programs' has no callable 'nope'",
    ):
        resolve_program(s)
    (s,) = load_file(_write(tmp_path, GOOD.replace("tenferro_ad.scenarios.programs", "no_such")))
    with pytest.raises(ScenarioError, match="cannot import module 'no_such'"):
        resolve_program(s)


def test_check_passes_on_the_exact_multisets(tmp_path: Path) -> None:
    (s,) = load_file(_write(tmp_path, GOOD))
    (r,) = run_scenarios([s], fake_execute)
    assert r.passed, r.mismatches
    assert r.allocations == {OP: 2, DUP: 1}
    assert r.copies == {CopyReason.EXPLICIT_DUPLICATE: 1}
    assert r.peak_bytes == 80
    assert (r.retention_allocations, r.retention_copies) == (0, 0)


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        (
            "operation_output = 2,",
            "operation_output = 3,",
            "allocations differ (operation_output: expected 3, observed 2)",
        ),
        (
            "copies = { explicit_duplicate = 1 }",
            "copies = {}",
            "copies differ (explicit_duplicate: expected 0, observed 1)",
        ),
        (
            "allocation_bytes = { operation_output = 48,",
            "allocation_bytes = { operation_output = 40,",
            "allocation bytes differ (operation_output: expected 40, observed 48)",
        ),
        (
            "max_peak_bytes = 80",
            "max_peak_bytes = 79",
            "peak live bytes 80 exceed max_peak_bytes 79",
        ),
    ],
)
def test_a_wrong_expectation_fails_and_says_why(
    tmp_path: Path, old: str, new: str, words: str
) -> None:
    (s,) = load_file(_write(tmp_path, GOOD.replace(old, new)))
    (r,) = run_scenarios([s], fake_execute)
    assert not r.passed
    assert r.mismatches == (words,)
    table = format_table([r])
    assert "FAIL" in table and words in table and "0/1 scenarios passed" in table


def test_retention_that_allocates_is_a_failure(tmp_path: Path) -> None:
    (s,) = load_file(_write(tmp_path, GOOD))
    obs = fake_execute(s)
    with capture() as untaped:  # an untaped forward that made no duplicate
        a = ts.zeros((4,))
        del a
    r = check(s, Observation(obs.total, obs.forward, obs.backward, untaped, 1.0, ()))
    assert (r.retention_allocations, r.retention_copies) == (1, 1)
    assert any(m.startswith("retention is not free") for m in r.mismatches)


def test_table_lists_reasons_peak_and_result(tmp_path: Path) -> None:
    (s,) = load_file(_write(tmp_path, GOOD))
    table = format_table(run_scenarios([s], fake_execute))
    header, _rule, row, *rest = table.splitlines()
    assert header.split() == [
        "scenario",
        "allocations",
        "copies",
        "peak",
        "bytes",
        "retention",
        "+",
        "result",
    ]
    assert row.split() == [
        "fake",
        "dup_dest=1",
        "op=2",
        "dup=1",
        "80",
        "0",
        "alloc/0",
        "copy",
        "PASS",
    ]
    assert rest[-1] == "1/1 scenarios passed"


def test_trace_is_chrome_trace_events_with_counters_and_one_slice_per_allocation(
    tmp_path: Path,
) -> None:
    (s,) = load_file(_write(tmp_path, GOOD))
    results = run_scenarios([s, s], fake_execute)
    doc = json.loads(json.dumps(trace_events(results)))
    events = doc["traceEvents"]
    assert {e["ph"] for e in events} == {"M", "C", "X", "i"}
    for pid in (1, 2):
        mine = [e for e in events if e["pid"] == pid]
        names = [e["args"]["name"] for e in mine if e["ph"] == "M" and e["name"] == "process_name"]
        assert names == ["fake"]
        counters = [e["args"] for e in mine if e["ph"] == "C"]
        assert counters[-1] == {"operation_output": 0, "explicit_duplicate_destination": 0}
        assert max(sum(c.values()) for c in counters) == 80
        slices = [e for e in mine if e["ph"] == "X"]
        assert sorted(e["args"]["bytes"] for e in slices) == [16, 32, 32]
        assert all(e["args"]["released"] for e in slices)
        by_lane: dict[int, list[tuple[int, int]]] = {}
        for e in slices:
            by_lane.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
        for spans in by_lane.values():  # slices on one lane never overlap
            spans.sort()
            assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
        copies = [e for e in mine if e["ph"] == "i"]
        assert [(e["name"], e["args"]["reason"]) for e in copies] == [
            ("copy: duplicate", "explicit_duplicate")
        ]


def test_plot_without_matplotlib_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (s,) = load_file(_write(tmp_path, GOOD))
    results = run_scenarios([s], fake_execute)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(PlotUnavailableError, match=r"pip install 'tenferro\[plot\]'"):
        write_plot(results, tmp_path / "p.png")
    assert not (tmp_path / "p.png").exists()


def test_plot_writes_a_png_when_matplotlib_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    (s,) = load_file(_write(tmp_path, GOOD))
    write_plot(run_scenarios([s, s, s], fake_execute), tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_exit_status_and_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _write(tmp_path, GOOD, "good.toml")
    trace = tmp_path / "t.json"
    assert main(["run", str(good), "--trace", str(trace)], executor=fake_execute) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "1/1 scenarios passed" in out
    assert json.loads(trace.read_text())["traceEvents"]
    bad = _write(
        tmp_path,
        GOOD.replace('"fake"', '"bad"').replace("operation_output = 2,", "operation_output = 5,"),
        "bad.toml",
    )
    assert main(["run", str(good), str(bad)], executor=fake_execute) == 1
    out = capsys.readouterr().out
    assert "FAIL bad" in out and "1/2 scenarios passed" in out
    assert main(["run", str(good), str(bad), "-k", "fak"], executor=fake_execute) == 0
    capsys.readouterr()
    assert main(["run", str(tmp_path / "missing.toml")], executor=fake_execute) == 2
    assert "missing.toml: no such scenario file" in capsys.readouterr().err
    broken = _write(tmp_path, GOOD.replace("seed = 3", "seed = 3.5"), "broken.toml")
    assert main(["run", str(broken)], executor=fake_execute) == 2
    assert "broken.toml: scenario[0].seed: expected int" in capsys.readouterr().err


def test_cli_plot_without_matplotlib_is_refused_before_any_scenario_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--plot`` without matplotlib: exit 2 naming the install, and no scenario ran."""
    good = _write(tmp_path, GOOD, "good.toml")
    ran: list[object] = []

    def executor(*args: Any, **kw: Any) -> Any:
        ran.append(args)
        return fake_execute(*args, **kw)

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    for argv in (["--plot", str(tmp_path / "p.png")], ["--plot"]):
        assert main(["run", str(good), *argv], executor=executor) == 2
        assert "pip install 'tenferro[plot]'" in capsys.readouterr().err
    assert ran == []


def test_cli_bare_plot_writes_into_a_temporary_directory_like_the_demo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bare ``--plot`` (no file name) writes a PNG somewhere new and prints where."""
    pytest.importorskip("matplotlib")
    good = _write(tmp_path, GOOD, "good.toml")
    assert main(["run", str(good), "--plot"], executor=fake_execute) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("wrote plot"))
    path = Path(line.removeprefix("wrote plot "))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    path.unlink()
    path.parent.rmdir()


def test_every_reason_has_one_colour_in_every_panel() -> None:
    """REASON_COLOURS names every allocation reason once, with distinct colours."""
    assert set(REASON_COLOURS) == set(AllocationReason)
    assert len(set(REASON_COLOURS.values())) == len(REASON_COLOURS)
