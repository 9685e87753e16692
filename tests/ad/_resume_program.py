"""The training program of the resume test (``test_optim_resume.py``): minibatch regression
with a seeded generator for the batches.  Run as ``python -m tests.ad._resume_program KIND
CHECKPOINT OUT M`` it resumes from ``CHECKPOINT`` in a fresh process, trains ``M`` steps and
saves the result to ``OUT``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts

OPTIMIZERS: dict[str, Callable[[], ad.optim.Optimizer]] = {
    "sgd": lambda: ad.optim.SGD(0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "adam": lambda: ad.optim.Adam(0.05, clip_norm=1.0),
    "adamw-cosine": lambda: ad.optim.AdamW(ad.optim.warmup_cosine_decay_schedule(0.0, 0.1, 3, 20)),
    "rmsprop": lambda: ad.optim.RMSProp(0.01, centered=True, momentum=0.5),
}
State = tuple[dict[str, Any], ad.optim.Optimizer, ts.random.Generator]


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 5))
    return x, np.tanh(x @ np.array([1.0, -2.0, 0.5, 0.0, 1.0]))


def _loss(p: dict[str, Any], xb: Any, yb: Any) -> Any:
    d = ad.tanh(xb @ p["w"] + p["b"]) - yb
    return ad.mean(d * d)


def fresh(kind: str) -> State:
    r = ts.random.default_rng(1)
    return {"w": r.normal((5,), scale=0.1), "b": ts.zeros(())}, OPTIMIZERS[kind](), r


def train(state: State, n: int) -> None:
    params, opt, rng = state
    x, y = _data()
    step = ad.value_and_grad(_loss)
    for _ in range(n):
        idx = rng.permutation(64).to_numpy()[:16]
        _, g = step(params, ts.from_numpy(x[idx]), ts.from_numpy(y[idx]))
        opt.step(params, g)


def save(path: str, state: State) -> None:
    params, opt, rng = state
    ts.save(path, {"params": params, "opt": opt.state_dict(), "rng": rng.state})


def resume(path: str, kind: str) -> State:
    ck = ts.load(path)
    opt = OPTIMIZERS[kind]()
    opt.load_state_dict(ck["opt"])
    rng = ts.random.default_rng(0)
    rng.state = ck["rng"]
    return ck["params"], opt, rng


if __name__ == "__main__":
    kind, src, dst, m = sys.argv[1:]
    state = resume(src, kind)
    train(state, int(m))
    save(dst, state)
