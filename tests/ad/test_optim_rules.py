"""The optimizers' math: every rule and option against optax (and torch.optim where it
names the variant), the schedules against optax's, descent on complex parameters, and
updates that make no numpy temporaries."""

from __future__ import annotations

import math
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import optim
from tenferro_ad.errors import ArgumentError
from tenferro_storage import _access, ledger

optax = pytest.importorskip("optax")
import jax.numpy as jnp  # noqa: E402  (after the optional-skip of optax)

STEPS = 6


def _f64(schedule: Any) -> Callable[[Any], float]:
    """optax evaluates schedules at its int32 count in float32; ours are float64 throughout:
    compare with the schedule evaluated at a Python int (the schedules themselves are
    compared in test_schedules_match_optax)."""
    return lambda count: schedule(int(count))


def _cases() -> dict[str, tuple[Callable[[], optim.Optimizer], Callable[[], Any]]]:
    o = optax
    return {
        "sgd": (lambda: optim.SGD(0.1), lambda: o.sgd(0.1)),
        "sgd-momentum": (lambda: optim.SGD(0.1, 0.9), lambda: o.sgd(0.1, 0.9)),
        "sgd-nesterov": (lambda: optim.SGD(0.1, 0.9, nesterov=True),
                         lambda: o.sgd(0.1, 0.9, nesterov=True)),
        "sgd-weight-decay": (lambda: optim.SGD(0.1, 0.5, weight_decay=0.2),
                             lambda: o.chain(o.add_decayed_weights(0.2), o.sgd(0.1, 0.5))),
        "adam": (lambda: optim.Adam(0.05), lambda: o.adam(0.05)),
        "adam-l2": (lambda: optim.Adam(0.05, 0.8, 0.9, 1e-6, weight_decay=0.3),
                    lambda: o.chain(o.add_decayed_weights(0.3), o.adam(0.05, 0.8, 0.9, 1e-6))),
        "adamw": (lambda: optim.AdamW(0.05, weight_decay=0.3),
                  lambda: o.adamw(0.05, weight_decay=0.3)),
        "rmsprop": (lambda: optim.RMSProp(0.01), lambda: o.rmsprop(0.01)),
        "rmsprop-eps-outside": (lambda: optim.RMSProp(0.01, 0.8, 1e-3, eps_in_sqrt=False),
                                lambda: o.rmsprop(0.01, 0.8, 1e-3, eps_in_sqrt=False)),
        "rmsprop-centered-momentum": (
            lambda: optim.RMSProp(0.01, centered=True, momentum=0.9, weight_decay=0.1),
            lambda: o.chain(o.add_decayed_weights(0.1),
                            o.rmsprop(0.01, centered=True, momentum=0.9))),
        "clip-sgd": (lambda: optim.SGD(0.1, 0.9, clip_norm=0.5),
                     lambda: o.chain(o.clip_by_global_norm(0.5), o.sgd(0.1, 0.9))),
        "clip-adamw": (lambda: optim.AdamW(0.05, clip_norm=0.5),
                       lambda: o.chain(o.clip_by_global_norm(0.5),
                                       o.adamw(0.05, weight_decay=1e-2))),
        "cosine-sgd": (lambda: optim.SGD(optim.cosine_decay_schedule(0.1, 4, 0.1), 0.9),
                       lambda: o.sgd(_f64(o.cosine_decay_schedule(0.1, 4, 0.1)), 0.9)),
        "warmup-adamw": (
            lambda: optim.AdamW(optim.warmup_cosine_decay_schedule(0.0, 0.1, 2, 5, 0.01)),
            lambda: o.adamw(_f64(o.warmup_cosine_decay_schedule(0.0, 0.1, 2, 5, 0.01)),
                            weight_decay=1e-2)),
        "exponential-rmsprop": (
            lambda: optim.RMSProp(optim.exponential_decay(0.02, 2, 0.5, staircase=True)),
            lambda: o.rmsprop(_f64(o.exponential_decay(0.02, 2, 0.5, staircase=True)))),
    }


CASES = _cases()


def _grads(dtype: str, step: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(100 + step)
    out = {}
    for name, shape in (("b", (4,)), ("w", (3, 4))):
        g = rng.normal(size=shape)
        if dtype.startswith("complex"):
            g = g + 1j * rng.normal(size=shape)
        out[name] = g.astype(dtype) * (3.0 if step % 2 else 0.2)
    return out


def _start(dtype: str) -> dict[str, np.ndarray]:
    return {k: (v * 5.0).astype(dtype) for k, v in _grads(dtype, -1).items()}


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_every_rule_and_option_matches_optax(case: str, dtype: str) -> None:
    """Six steps with the same gradients: the parameters match optax's within float64
    rounding.  For complex parameters optax is given conj(grad) (optax leaves the
    convention to the caller; tenferro's optimizers conjugate JAX-convention gradients)."""
    make, make_ref = CASES[case]
    opt, ref = make(), make_ref()
    params = {k: ts.from_numpy(v) for k, v in _start(dtype).items()}
    theirs = {k: jnp.asarray(v) for k, v in _start(dtype).items()}
    state = ref.init(theirs)
    for step in range(STEPS):
        g = _grads(dtype, step)
        opt.step(params, g)
        updates, state = ref.update({k: jnp.conj(jnp.asarray(v)) for k, v in g.items()},
                                    state, theirs)
        theirs = optax.apply_updates(theirs, updates)
    assert opt.steps == STEPS
    for k in params:
        np.testing.assert_allclose(params[k].to_numpy(), np.asarray(theirs[k]), rtol=1e-11,
                                   atol=1e-13)


def test_the_torch_variants_match_torch_optim() -> None:
    """torch's SGD (Nesterov, weight decay), Adam with L2, AdamW and RMSprop (eps outside the
    root, ``alpha`` = decay, centered, momentum) on the same gradients."""
    torch = pytest.importorskip("torch")
    pairs = [
        (optim.SGD(0.1, 0.9, nesterov=True, weight_decay=0.1),
         lambda p: torch.optim.SGD(p, 0.1, momentum=0.9, nesterov=True, weight_decay=0.1)),
        (optim.Adam(0.05, weight_decay=0.2), lambda p: torch.optim.Adam(p, 0.05, weight_decay=0.2)),
        (optim.AdamW(0.05, weight_decay=0.2),
         lambda p: torch.optim.AdamW(p, 0.05, weight_decay=0.2)),
        (optim.RMSProp(0.01, 0.95, 1e-4, eps_in_sqrt=False, centered=True, momentum=0.5),
         lambda p: torch.optim.RMSprop(p, 0.01, alpha=0.95, eps=1e-4, centered=True,
                                       momentum=0.5)),
    ]
    for ours, make in pairs:
        params = {k: ts.from_numpy(v) for k, v in _start("float64").items()}
        tp = {k: torch.tensor(v, requires_grad=True) for k, v in _start("float64").items()}
        topt = make(list(tp.values()))
        for step in range(STEPS):
            g = _grads("float64", step)
            ours.step(params, g)
            for k, t in tp.items():
                t.grad = torch.tensor(g[k])
            topt.step()
        for k in params:
            np.testing.assert_allclose(params[k].to_numpy(), tp[k].detach().numpy(),
                                       rtol=1e-10, atol=1e-13)


SCHEDULES = [
    (optim.constant_schedule(0.3), optax.constant_schedule(0.3)),
    (optim.exponential_decay(0.1, 3, 0.5), optax.exponential_decay(0.1, 3, 0.5)),
    (optim.exponential_decay(0.1, 3, 0.5, transition_begin=2, staircase=True),
     optax.exponential_decay(0.1, 3, 0.5, transition_begin=2, staircase=True)),
    (optim.cosine_decay_schedule(0.1, 7, 0.2), optax.cosine_decay_schedule(0.1, 7, 0.2)),
    (optim.linear_schedule(0.0, 0.1, 4, 1), optax.linear_schedule(0.0, 0.1, 4, 1)),
    (optim.warmup_cosine_decay_schedule(0.0, 1.0, 3, 10, 0.1),
     optax.warmup_cosine_decay_schedule(0.0, 1.0, 3, 10, 0.1)),
]


@pytest.mark.parametrize("ours,theirs", SCHEDULES, ids=[type(s).__name__ for s, _ in SCHEDULES])
def test_schedules_match_optax(ours: optim.Schedule, theirs: Any) -> None:
    for count in range(14):
        assert math.isclose(ours(count), float(theirs(count)), rel_tol=1e-12, abs_tol=1e-15)


def test_schedules_refuse_bad_arguments() -> None:
    with pytest.raises(ValueError, match="transition_steps"):
        optim.exponential_decay(0.1, 0, 0.5)
    with pytest.raises(ValueError, match="decay_steps"):
        optim.warmup_cosine_decay_schedule(0.0, 1.0, 5, 5)
    with pytest.raises(ValueError, match="finite"):
        optim.constant_schedule(math.inf)
    with pytest.raises(ArgumentError, match="lr"):
        optim.SGD(math.nan)
    with pytest.raises(ArgumentError, match="nesterov"):
        optim.SGD(0.1, nesterov=True)
    with pytest.raises(ArgumentError, match="b2"):
        optim.Adam(b2=1.0)
    with pytest.raises(ArgumentError, match="clip_norm"):
        optim.Adam(clip_norm=0.0)


ALL = {name: make for name, (make, _) in CASES.items()}


@pytest.mark.parametrize("name", list(ALL), ids=list(ALL))
def test_every_optimizer_descends_on_a_complex_least_squares_problem(name: str) -> None:
    """min |A z - b|^2 over complex z, with tenferro's own gradient (JAX's convention,
    conj of the ascent direction): the loss falls for every optimizer and option (before the
    fix SGD took such a loss from 6.4 to 2.5e16)."""
    rng = np.random.default_rng(0)
    a_np = (rng.normal(size=(8, 3)) + 1j * rng.normal(size=(8, 3))) / 4
    a = ts.from_numpy(a_np)
    b = ts.from_numpy(rng.normal(size=8) + 1j * rng.normal(size=8))
    z = {"z": ts.from_numpy(rng.normal(size=3) + 1j * rng.normal(size=3))}

    def loss(p: Any) -> Any:
        r = a @ p["z"] - b
        return ad.sum(ad.real(r * ad.conj(r)))

    opt = ALL[name]()
    losses = []
    for _ in range(60):
        value, g = ad.value_and_grad(loss)(z)
        losses.append(float(value.to_numpy()))
        opt.step(z, g)
    best = np.linalg.lstsq(a_np, b.to_numpy(), rcond=None)[0]
    floor = float(np.sum(np.abs(a_np @ best - b.to_numpy()) ** 2))
    assert max(losses) < 2 * losses[0], (losses[0], max(losses))
    assert losses[-1] < losses[0] - 0.1 * (losses[0] - floor), (losses[0], losses[-1], floor)


@pytest.mark.parametrize("name", ["adam", "rmsprop-centered-momentum", "sgd-nesterov",
                                  "clip-adamw"])
def test_steady_state_steps_make_no_numpy_temporaries(name: str) -> None:
    """After the first step (state and scratch allocated, as ledger events) a step on an 8 MB
    parameter allocates no numpy memory: every ufunc writes in place.  (Adam used to make
    about four parameter-sized temporaries per step, 32 MB the ledger did not see.)"""
    opt = ALL[name]()
    p = {"w": ts.zeros(2**20), "b": ts.zeros(3)}
    g = {"w": np.full(2**20, 0.5), "b": np.ones(3)}
    opt.step(p, g)
    debug = _access._set_debug_borrows(False)  # (debug mode stages every access's arrays)
    tracemalloc.start()
    try:
        with ledger.capture() as rec:
            opt.step(p, g)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        _access._set_debug_borrows(debug)
    assert rec.allocations == {} and rec.copies == {}
    assert peak < 2**16, peak


def test_float32_parameters_stay_float32_and_match_a_float64_run() -> None:
    p32 = {"w": ts.from_numpy(np.linspace(-1, 1, 5, dtype=np.float32))}
    p64 = {"w": ts.from_numpy(np.linspace(-1, 1, 5))}
    o32, o64 = optim.Adam(0.1, clip_norm=1.0), optim.Adam(0.1, clip_norm=1.0)
    for step in range(4):
        g = np.random.default_rng(step).normal(size=5)
        o32.step(p32, {"w": g.astype(np.float32)})
        o64.step(p64, {"w": g})
    assert p32["w"].dtype == "float32"
    assert {k[1] for k in o32._scratch} == {"float32"}
    np.testing.assert_allclose(p32["w"].to_numpy(), p64["w"].to_numpy(), rtol=1e-5)


def test_numpy_error_settings_cannot_interrupt_a_step_halfway() -> None:
    """With numpy set to raise on overflow, a gradient that overflows in the last parameter
    does not leave the first ones updated and the rest not: the step completes for all."""
    opt = optim.Adam(0.1)
    a, b = ts.zeros(2), ts.zeros(2)
    with np.errstate(all="raise"):
        opt.step([a, b], [np.ones(2), np.full(2, 1e300)])
    assert opt.steps == 1
    assert np.all(a.to_numpy() != 0) and b.to_numpy().shape == (2,)
    assert opt._state["params[1]"].count == 1
