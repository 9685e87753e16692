"""The checkpointed ODE fit (issue 29): an RK4 time loop written with ``lax.scan``.

A small neural vector field ``f(z) = tanh(z W1 + b1) W2 + b2`` (state 4, hidden 32,
float32) integrated with RK4 for ``--steps`` steps (default 200) from a batch of 16
initial states; the loss is the mean squared distance of the final states to targets, and
one step computes the loss and its gradient in the four parameters.  Two bodies: plain,
and checkpointed (``ad.checkpoint(step)`` / ``jax.checkpoint`` /
``torch.utils.checkpoint``).

Columns: tenferro eager (the scan runs as a Python loop of recorded ops), ``ad.jit`` on
the host engine (the loop runs over the body's sub-program), ``ad.jit`` on the XLA engine
(``lax.scan`` inside one executable), JAX ``jit``, PyTorch eager (a Python loop), when
installed.  Figures: the compile time (first call of a fresh jitted function minus the
median steady call), the median ms per step over interleaved rounds (``_harness``, one
thread), and the ledger's peak of live bytes during one step for tenferro (plain against
checkpointed body).  The last line states the target: the fastest ``ad.jit`` engine's step
over JAX ``jit``'s (<= 1.1 wanted).

    python bench/control_flow.py [--steps 200] [--rounds 5] [--number 3] [--cpu]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # first: pins BLAS threads before numpy loads
import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import lax
from tenferro_storage import ledger

D, HID, B, DT = 4, 32, 16, 0.02


def data() -> tuple[list[np.ndarray[Any, Any]], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    rng = np.random.default_rng(0)
    f32 = np.float32
    params = [(rng.standard_normal((D, HID)) * 0.5).astype(f32), np.zeros(HID, f32),
              (rng.standard_normal((HID, D)) * 0.5).astype(f32), np.zeros(D, f32)]
    z0 = rng.standard_normal((B, D)).astype(f32)
    target = rng.standard_normal((B, D)).astype(f32)
    return params, z0, target


def tenferro_loss(steps: int, ckpt: bool) -> Callable[..., Any]:
    def loss(params: Any, z0: Any, target: Any) -> Any:
        w1, b1, w2, b2 = params

        def field(z: Any) -> Any:
            return ad.tanh(z @ w1 + b1) @ w2 + b2

        def step(z: Any, _: Any) -> Any:
            k1 = field(z)
            k2 = field(z + (0.5 * DT) * k1)
            k3 = field(z + (0.5 * DT) * k2)
            k4 = field(z + DT * k3)
            return z + (DT / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4), None

        z, _ = lax.scan(ad.checkpoint(step) if ckpt else step, z0, None, length=steps)
        return ad.mean((z - target) ** 2)

    return loss


def jax_step(jax: Any, steps: int, ckpt: bool) -> Callable[..., Any]:
    jnp = jax.numpy

    def loss(params: Any, z0: Any, target: Any) -> Any:
        w1, b1, w2, b2 = params

        def field(z: Any) -> Any:
            return jnp.tanh(z @ w1 + b1) @ w2 + b2

        def step(z: Any, _: Any) -> Any:
            k1 = field(z)
            k2 = field(z + (0.5 * DT) * k1)
            k3 = field(z + (0.5 * DT) * k2)
            k4 = field(z + DT * k3)
            return z + (DT / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4), None

        z, _ = jax.lax.scan(jax.checkpoint(step) if ckpt else step, z0, None, length=steps)
        return jnp.mean((z - target) ** 2)

    return jax.value_and_grad(loss)  # type: ignore[no-any-return]


def torch_step(torch: Any, steps: int, ckpt: bool) -> Callable[..., Any]:
    from torch.utils.checkpoint import checkpoint

    def run(params: Any, z0: Any, target: Any) -> Any:
        w1, b1, w2, b2 = params

        def field(z: Any) -> Any:
            return torch.tanh(z @ w1 + b1) @ w2 + b2

        def step(z: Any) -> Any:
            k1 = field(z)
            k2 = field(z + (0.5 * DT) * k1)
            k3 = field(z + (0.5 * DT) * k2)
            k4 = field(z + DT * k3)
            return z + (DT / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)

        z = z0
        for _ in range(steps):
            z = checkpoint(step, z, use_reentrant=False) if ckpt else step(z)
        loss = torch.mean((z - target) ** 2)
        return loss, torch.autograd.grad(loss, params)

    return run


def ledger_peak(fn: Callable[[], Any]) -> int:
    """The ledger's peak of live bytes during one call (after a warm-up call)."""
    fn()
    with ledger.capture() as rec:
        r = fn()
    del r
    return int(rec.peak_bytes)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--number", type=int, default=3)
    ap.add_argument("--cpu", action="store_true")
    args = ap.parse_args()
    steps = args.steps
    jax, torch = H.jax_or_none(), H.torch_or_none()
    params, z0, target = data()
    print(f"commit {H.commit()}; RK4 ODE fit, {steps} steps, state {D}, hidden {HID}, "
          f"batch {B}, float32")
    owners = ([ts.from_numpy(p.copy()) for p in params], ts.from_numpy(z0.copy()),
              ts.from_numpy(target.copy()))
    want = None
    if jax is not None:
        want = jax.jit(jax_step(jax, steps, False))(params, z0, target)
    for ckpt in (False, True):
        label = "checkpointed body" if ckpt else "plain body"
        vg = ad.value_and_grad(tenferro_loss(steps, ckpt))
        cases: dict[str, Callable[[], Any]] = {
            "tenferro eager": lambda vg=vg: vg(*owners),
        }
        compile_s: dict[str, float] = {}
        for engine in ("host", "xla"):
            try:
                jitted = ad.jit(vg, engine=engine)
            except Exception as e:  # no XLA engine without jax
                print(f"   ad.jit[{engine}]: n/a ({type(e).__name__})")
                continue
            t0 = time.perf_counter()
            out = jitted(*owners)
            compile_s[f"ad.jit[{engine}]"] = time.perf_counter() - t0
            if want is not None:
                np.testing.assert_allclose(out[0].to_numpy(), np.asarray(want[0]), rtol=1e-4)
            cases[f"ad.jit[{engine}]"] = lambda j=jitted: j(*owners)
        if jax is not None:
            jf = jax.jit(jax_step(jax, steps, ckpt))
            t0 = time.perf_counter()
            jax.block_until_ready(jf(params, z0, target))
            compile_s["jax jit"] = time.perf_counter() - t0
            cases["jax jit"] = lambda jf=jf: jax.block_until_ready(jf(params, z0, target))
        if torch is not None:
            tp = [torch.tensor(p, requires_grad=True) for p in params]
            tz, tt = torch.tensor(z0), torch.tensor(target)
            ts_fn = torch_step(torch, steps, ckpt)
            cases["pytorch eager"] = lambda f=ts_fn, a=(tp, tz, tt): f(*a)
        res = H.interleaved_ms(cases, rounds=args.rounds, number=args.number,
                               clock=H.clock(args.cpu))
        print(f"\n{label}: ms per step (loss + gradient)")
        for name, ms in res.items():
            c = compile_s.get(name)
            comp = f"   compile {max(c * 1e3 - ms, 0.0):8.1f} ms" if c is not None else ""
            print(f"   {name:18s} {ms:9.3f} ms{comp}")
        for name in ("tenferro eager", "ad.jit[host]", "ad.jit[xla]"):
            if name in cases:
                peak = ledger_peak(cases[name])
                print(f"   ledger peak {name:18s} {peak / 1024:10.1f} KiB")
        jits = [res[k] for k in ("ad.jit[host]", "ad.jit[xla]") if k in res]
        if jits and "jax jit" in res:
            print(f"   fastest ad.jit / jax jit = {min(jits) / res['jax jit']:.2f} "
                  "(target <= 1.10)")


if __name__ == "__main__":
    main()
