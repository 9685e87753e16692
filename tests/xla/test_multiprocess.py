"""Several processes through ``jax.distributed`` over 127.0.0.1 (``sharding.initialize``):
two processes with 2 host devices each train to the same losses as one process with 4,
each ledger records only its own shards, and a killed or missing process ends the
others with a clear error well before the test's timeout (never a hang).  Every process
runs ``_multiprocess_program.py``."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
pytestmark = pytest.mark.slow  # subprocesses that start jax (and a distributed run)
TIMEOUT = 120.0  # seconds for a whole run; a failure must surface well before it


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(port: int, pid: int, nproc: int, mode: str, devices: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
           "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    return subprocess.Popen(
        [sys.executable, str(HERE / "_multiprocess_program.py"), str(port), str(pid),
         str(nproc), mode], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(procs: list[subprocess.Popen[str]]) -> list[tuple[int, str, str, float]]:
    t0 = time.monotonic()
    out = []
    try:
        for p in procs:
            so, se = p.communicate(timeout=max(TIMEOUT - (time.monotonic() - t0), 1.0))
            out.append((p.returncode, so, se, time.monotonic() - t0))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return out


def _json(stdout: str) -> Any:
    return json.loads(stdout.strip().splitlines()[-1])


def test_two_processes_train_to_the_losses_of_one_with_their_own_shards_in_each_ledger() -> None:
    port = _port()
    two = _finish([_start(port, 0, 2, "train", 2), _start(port, 1, 2, "train", 2)])
    one = _finish([_start(0, 0, 1, "train", 4)])
    for rc, _, err, _ in [*two, *one]:
        assert rc == 0, err[-3000:]
    alone = _json(one[0][1])
    for k, (_, so, _, _) in enumerate(two):
        got = _json(so)
        assert (got["process"], got["processes"], got["local_shards"]) == (k, 2, 2)
        assert got["xla_engines"] == got["mesh_engines"] == 2  # this process's devices only
        np.testing.assert_allclose(got["losses"], alone["losses"], rtol=1e-12)
        # one step: (loss + 2 gradients + scratch) on each of this process's 2 devices
        assert got["step_allocations"] == 4 * 2 and got["step_copies"] == {}
    assert alone["step_allocations"] == 4 * 4 and alone["losses"][-1] < alone["losses"][0]


@pytest.mark.parametrize("killed", [1, 0], ids=["worker-killed", "coordinator-killed"])
def test_killing_one_process_ends_the_other_with_a_clear_error_before_the_timeout(
    killed: int,
) -> None:
    port = _port()
    done = _finish([_start(port, 0, 2, f"die{killed}", 2), _start(port, 1, 2, f"die{killed}", 2)])
    (rc_dead, _, _, _), (rc, _, err, seconds) = done[killed], done[1 - killed]
    assert rc_dead == -9  # SIGKILL before its fourth step
    assert rc != 0 and seconds < TIMEOUT / 2
    assert f"process {1 - killed} step 9" not in err  # it did not train on alone
    # JAX's coordination service ends the survivor, naming the cause; a collective in
    # flight may fail first (then as tenferro's ExecutionFailed, naming the program)
    assert "another task died" in err
    if "ExecutionFailed" in err:
        assert "the sharded program failed on Mesh(data=4; 4 devices)" in err


def test_a_missing_process_is_a_clear_error_within_the_initialization_timeout() -> None:
    # process 1 without a coordinator: a DistributedError (a Python exception) after 5 s
    (rc, out, _, seconds), = _finish([_start(_port(), 1, 2, "alone", 2)])
    got = _json(out)
    assert rc == 3 and 4.5 < got["seconds"] < 30 and seconds < TIMEOUT / 2
    assert "the coordinator did not accept connections within 5 s" in got["error"]
    # the coordinator without its second process: JAX ends it after the timeout, after
    # tenferro's DistributedError line naming the run
    (rc, _, err, seconds), = _finish([_start(_port(), 0, 2, "alone", 2)])
    assert rc != 0 and seconds < TIMEOUT / 2
    assert "DistributedError: initialize: process 0 of 2" in err
    assert "not every process joined within 5 s" in err
