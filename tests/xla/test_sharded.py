"""Sharded values, data-parallel and model-parallel training on a mesh of 4 host devices.

Each scenario runs in a subprocess (``_sharded_program.py``) with
``XLA_FLAGS=--xla_force_host_platform_device_count=4`` set before jax starts, so this
process keeps its one device.  One subprocess runs every scenario (module fixture); the
tests read its JSON record."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
pytestmark = pytest.mark.slow  # subprocesses that start jax (and a distributed run)


def run_program(name: str, *args: str, timeout: float = 240, devices: int = 4) -> Any:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{HERE.parents[1]}",
           "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    return subprocess.run([sys.executable, str(HERE / name), *args], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def record() -> dict[str, Any]:
    done = run_program("_sharded_program.py")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


SCENARIOS = {"dp_sharded": "single_adam", "dp_replicated": "single_sgd",
             "model_parallel": "single_sgd"}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_ten_sharded_training_steps_give_the_single_device_parameters(
    record: dict[str, Any], scenario: str
) -> None:
    got, want = record[scenario]["params"], record[SCENARIOS[scenario]]
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_a_sharded_gradient_call_allocates_one_buffer_per_shard_and_copies_nothing(
    record: dict[str, Any], scenario: str
) -> None:
    r = record[scenario]
    assert r["grad_copies"] == {}
    domains = [f"xla-cpu:{k}" for k in range(4)]
    # two gradients (one per parameter), each one allocation on every device; one scratch
    assert r["grad_allocations"] == {d: {"operation_output": 2, "scratch": 1} for d in domains}
    assert r["grad_domains"] == [domains, domains]
    assert r["live_matches_owned"]


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_an_optimizer_step_on_sharded_parameters_is_two_recorded_transfers_per_shard(
    record: dict[str, Any], scenario: str
) -> None:
    r = record[scenario]
    assert r["step_copies"] == {"transfer": 2 * 2 * 4}  # 2 parameters x 4 shards, down + up
    assert r["step_allocations"] == {
        "download": {"transfer_destination": 8},
        **{f"xla-cpu:{k}": {"transfer_destination": 2} for k in range(4)},
    }


def test_the_partitioner_inserts_the_collectives(record: dict[str, Any]) -> None:
    assert record["dp_replicated"]["all_reduces"] >= 1  # the gradient sum over the batch
    assert record["dp_sharded"]["all_reduces"] >= 1
    assert record["model_parallel"]["specs"] == ["P(None, 'model')", "P('model', None)"]


def test_upload_gather_and_reshard_record_one_event_per_shard(record: dict[str, Any]) -> None:
    s = record["storage"]
    domains = [f"xla-cpu:{k}" for k in range(4)]
    assert s["shard"] == [{"transfer_destination": 4}, {"transfer": 4}, domains]
    assert s["gather"] == [{"transfer": 4}, True]  # one TRANSFER per shard, explicit
    assert s["reshard"] == [{"explicit_duplicate_destination": 4}, {"explicit_duplicate": 4},
                            "P()"]
    assert s["gather_replicated"] == [{"transfer": 1}, True]  # a replica is read once
    assert s["elementwise"] == [{}, True]  # a resident sharded input is never copied
    assert s["released"] == 12  # three values x four shards


def test_a_value_in_another_layout_is_refused_not_resharded_implicitly(
    record: dict[str, Any],
) -> None:
    msg = record["storage"]["refused"]
    assert "argument leaf 0 is sharded P()" in msg and "P('data',)" in msg
    assert "Reshard it explicitly" in msg
    assert "argument leaf 1 is sharded P()" in record["storage"]["refused_two"]
    assert record["storage"]["refused_events"] == 0  # refused before anything was uploaded
