"""Saving and resuming optimizers: ``state_dict`` keyed by tree path, training resumed in a
fresh process bit-identical to an uninterrupted run, refusals that change nothing, no
pickling of owners, and state that does not outlive replaced parameters (issue 26 item 11)."""

from __future__ import annotations

import copy
import os
import pathlib
import pickle
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import ArgumentError
from tenferro_storage import ledger

from . import _resume_program as prog

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _bytes(tree: Any) -> Any:
    """Every owner as (dtype, shape, bytes); everything else as it is."""
    if isinstance(tree, dict):
        return {k: _bytes(v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return [_bytes(v) for v in tree]
    if isinstance(tree, ts.Tensor):
        return (tree.dtype.name, tree.shape, tree.to_numpy().tobytes())
    return tree


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_training_resumed_in_a_fresh_process_is_bit_identical(
    kind: str, tmp_path: pathlib.Path
) -> None:
    """Train N steps, save parameters, optimizer state and the batch generator's state;
    a fresh Python process loads them and trains M more steps; the parameters and the
    optimizer state equal N + M uninterrupted steps bit for bit."""
    n, m = 7, 5
    state = prog.fresh(kind)
    prog.train(state, n)
    prog.save(str(tmp_path / "ck"), state)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]))
    subprocess.run(
        [sys.executable, "-W", "error", "-m", "tests.ad._resume_program", kind,
         str(tmp_path / "ck"), str(tmp_path / "out"), str(m)],
        cwd=ROOT, env=env, check=True, timeout=300, capture_output=True,
    )
    resumed = ts.load(tmp_path / "out")
    straight = prog.fresh(kind)
    prog.train(straight, n + m)
    assert _bytes(resumed["params"]) == _bytes(straight[0])
    assert _bytes(resumed["opt"]) == _bytes(straight[1].state_dict())
    assert resumed["rng"] == straight[2].state
    assert resumed["opt"]["steps"] == n + m


@pytest.mark.parametrize("kind", list(prog.OPTIMIZERS))
def test_state_dict_round_trips_into_new_owners_in_process(
    kind: str, tmp_path: pathlib.Path
) -> None:
    """The same through save/load in this process, for every optimizer kind (schedules
    included: the step count drives them)."""
    state = prog.fresh(kind)
    prog.train(state, 4)
    prog.save(str(tmp_path / "ck"), state)
    again = prog.resume(str(tmp_path / "ck"), kind)
    assert again[0]["w"].span != state[0]["w"].span  # new owners: state follows the path
    prog.train(state, 3)
    prog.train(again, 3)
    assert _bytes(again[0]) == _bytes(state[0])
    assert _bytes(again[1].state_dict()) == _bytes(state[1].state_dict())


def test_state_dict_is_keyed_by_tree_path_and_holds_copies() -> None:
    opt = ad.optim.Adam(0.1)
    p = {"layer": [ts.ones(2), ts.ones(3, "complex64")]}
    opt.step(p, {"layer": [np.ones(2), None]})
    with ledger.capture() as rec:
        sd = opt.state_dict()
    assert rec.allocations == {ledger.AllocationReason.EXPLICIT_DUPLICATE_DESTINATION: 2}
    assert sd["optimizer"] == "Adam" and sd["steps"] == 1
    assert sd["structure"] == "PyTreeDef({'layer': [*, *]})"
    assert list(sd["state"]) == ["params['layer'][0]"]  # the skipped parameter has none yet
    entry = sd["state"]["params['layer'][0]"]
    assert entry["count"] == 1 and entry["dtype"] == "float64" and entry["shape"] == [2]
    assert entry["m"].span != opt._state["params['layer'][0]"].buffers["m"].span
    opt.step(p, {"layer": [np.ones(2), np.ones(3)]})
    v = opt.state_dict()["state"]["params['layer'][1]"]["v"]
    assert v.dtype == "float32"  # the second moment of a complex parameter is real


def _adam_after_one_step() -> tuple[ad.optim.Adam, dict[str, Any]]:
    opt = ad.optim.Adam(0.1)
    p = {"w": ts.ones(2)}
    opt.step(p, {"w": np.ones(2)})
    return opt, p


def _edit(sd: dict[str, Any], **changes: Any) -> dict[str, Any]:
    entry = dict(sd["state"]["params['w']"], **changes)
    return dict(sd, state={"params['w']": entry})


BAD_STATE_DICTS = {
    "not-a-dict": (lambda sd: [sd], "not an optimizer state dict"),
    "other-optimizer": (lambda sd: dict(sd, optimizer="SGD"), "is for 'SGD'"),
    "negative-steps": (lambda sd: dict(sd, steps=-1), "'steps'"),
    "missing-buffer": (lambda sd: _edit(sd, m=None) | {}, "expected an owner"),
    "extra-entry": (lambda sd: _edit(sd, momentum=ts.ones(2)), "same optimizer, same options"),
    "wrong-buffer-shape": (lambda sd: _edit(sd, v=ts.ones(3)), r"expected float64 of shape \(2,\)"),
    "bad-dtype": (lambda sd: _edit(sd, dtype="float16"), "'dtype' and 'shape'"),
}


@pytest.mark.parametrize("bad", list(BAD_STATE_DICTS), ids=list(BAD_STATE_DICTS))
def test_a_bad_state_dict_is_refused_and_changes_nothing(bad: str) -> None:
    opt, _ = _adam_after_one_step()
    before = _bytes(opt.state_dict())
    edit, message = BAD_STATE_DICTS[bad]
    with pytest.raises(ad.errors.TenferroError, match=message):
        opt.load_state_dict(edit(opt.state_dict()))
    assert _bytes(opt.state_dict()) == before


def test_loaded_state_is_checked_against_the_parameters_at_the_next_step() -> None:
    """A state dict for other paths or shapes is refused at the step, showing the saved
    structure and the parameters'; nothing is updated."""
    opt, _ = _adam_after_one_step()
    sd = opt.state_dict()
    other = ad.optim.Adam(0.1)
    other.load_state_dict(sd)
    q = {"v": ts.ones(2)}
    with pytest.raises(ArgumentError, match=r"(?s)params\['w'\].*PyTreeDef\(\{'w': \*\}\)"
                       r".*PyTreeDef\(\{'v': \*\}\)"):
        other.step(q, {"v": np.ones(2)})
    with pytest.raises(ArgumentError, match=r"shape \(3,\).*shape \(2,\)"):
        other.step({"w": ts.ones(3)}, {"w": np.ones(3)})
    np.testing.assert_array_equal(q["v"].to_numpy(), np.ones(2))
    assert other.steps == 1


def test_optimizers_refuse_pickle_and_copy_and_offer_state_dict() -> None:
    opt, _ = _adam_after_one_step()
    for attempt in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match=r"state_dict\(\).*tenferro_storage\.save"):
            attempt(opt)


def test_state_of_replaced_parameters_does_not_accumulate() -> None:
    """Issue 26 item 11: 2,000 steps that each replace the parameter with a new owner keep
    one state per path; the optimizer holds no parameter, so every replaced one is released
    (ledger live bytes return to zero) and the state does not grow (it used to be kept per
    parameter identity: about 1 KB more per step)."""
    opt = ad.optim.Adam(0.01)
    g = {"w": np.ones(64), "b": np.ones(8)}
    opt.step({"w": ts.zeros(64), "b": ts.zeros(8)}, g)
    with ledger.capture() as rec:
        for i in range(2000):
            params = {"w": ts.full(64, float(i)), "b": ts.zeros(8)}
            opt.step(params, g)
        del params
        assert rec.live_bytes == 0
    assert len(opt._state) == 2
