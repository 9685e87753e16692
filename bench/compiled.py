"""Compiled against eager, in one run: tenferro eager, ``ad.jit`` per engine, PyTorch eager,
JAX ``jit`` and hand-written numpy on four workloads.

1. the classifier MLP step (``mlp_classifier.py``: 784-512-512-10, batch 128, float32),
   the six gradients read out as numpy (zero-copy borrows; PyTorch ``.numpy()``, JAX
   ``np.asarray``);
2. the 50-block residual MLP step (``resnet.py``: width 64, batch 256, float32), plain;
3. the same with every block checkpointed;
4. the 50-op elementwise chain on 4x4 float64, forward + backward (``per_op.py``);
5. a 30-op elementwise chain on 10^6 float64, gradient (``traced_chain.py``'s), with the
   memory of one call: tenferro's ledger peak (live allocations) and JAX's compiled
   temporaries (``memory_analysis``: temp + output bytes).

Columns: ``tenferro eager``; ``tenferro jit[host]`` (``ad.jit(f, engine="host")``, or
``ad.jit(f)`` where ``ad.jit`` has no engine names yet: the host engine is then its only
engine); ``tenferro jit[xla]`` (``ad.jit(f, engine="xla")``, "n/a" until that engine
exists); PyTorch eager and JAX ``jit`` when installed.  Every tenferro case takes owners
(``ts.from_numpy``) as its inputs.  Figures: the median ms per step over interleaved rounds
(``_harness``, one thread), ratios to hand-written numpy and ``jit / eager`` measured in the
same run; the compile time per signature is the first call of a fresh jitted function minus
the median steady call (trace + transform + compile, for tenferro and JAX alike).

    python bench/compiled.py [--cpu] [--rounds 5] [--number 3] [--only classifier,...]
    python bench/compiled.py --quick      # smoke run: one round, one call, small chains
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # first: pins BLAS threads before numpy loads
import mlp_classifier as M
import numpy as np
import per_op as P
import resnet as R
import traced_chain as T

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage.errors import TenferroError

EAGER = "tenferro eager"
ENGINES = ("host", "xla")
NA = "n/a"
Step = Callable[[], Any]


def jit_factory(
    f: Callable[..., Any], engine: str, probe: Callable[[Any], Any]
) -> Callable[[], Any] | None:
    """A maker of fresh ``ad.jit(f, engine=engine)`` when that engine exists and runs
    ``probe(jitted)``; ``None`` otherwise.  Before ``ad.jit`` names its engines, ``"host"``
    is plain ``ad.jit(f)`` (the host engine was then its only engine)."""
    try:
        probe(ad.jit(f, engine=engine))  # type: ignore[arg-type,unused-ignore]
        return lambda: ad.jit(f, engine=engine)  # type: ignore[arg-type,unused-ignore]
    except (TypeError, ValueError, TenferroError):
        if engine != "host":
            return None
    probe(ad.jit(f))
    return lambda: ad.jit(f)


def _first_call(make: Callable[[], Any], call: Callable[[Any], Any]) -> Callable[[], float]:
    """Seconds of the first ``call`` of the fresh jitted function ``make()`` returns."""

    def run() -> float:
        jf = make()
        t0 = time.perf_counter()
        call(jf)
        return time.perf_counter() - t0

    return run


@attrs.frozen
class Workload:
    """Every column's step, and per compiled column the seconds of a first call."""

    cases: dict[str, Step]
    first: dict[str, Callable[[], float]]


def tenferro_variants(
    f: Callable[..., Any], args: tuple[Any, ...], read: Callable[[Any], Any]
) -> Workload:
    """Steps ``read(g(*args))`` for ``g`` = ``f`` (eager) and ``f`` jitted on every engine
    that exists, with the first call of a freshly jitted ``f`` per engine."""
    cases: dict[str, Step] = {EAGER: lambda: read(f(*args))}
    first: dict[str, Callable[[], float]] = {}
    for engine in ENGINES:
        make = jit_factory(f, engine, lambda j: read(j(*args)))
        if make is None:
            continue
        name = f"tenferro jit[{engine}]"
        cases[name] = (lambda j: lambda: read(j(*args)))(make())
        first[name] = _first_call(make, lambda j: read(j(*args)))
    return Workload(cases, first)


def _jax_first(jax: Any, make: Callable[[], Step]) -> Callable[[], float]:
    """Seconds of the first call of a freshly jitted JAX step (JAX's caches cleared)."""

    def run() -> float:
        jax.clear_caches()
        t0 = time.perf_counter()
        make()()  # some makers call once while building: that call then compiles
        return time.perf_counter() - t0

    return run


def with_others(w: Workload, numpy_step: Step, torch_step: Callable[[Any], Step] | None,
                jax_step: Callable[[Any], Step] | None) -> Workload:
    """``w`` with hand-written numpy first and PyTorch eager / JAX jit when installed."""
    cases: dict[str, Step] = {H.BASE: numpy_step, **w.cases}
    first = dict(w.first)
    torch, jax = H.torch_or_none(), H.jax_or_none()
    if torch is not None and torch_step is not None:
        cases["PyTorch eager"] = torch_step(torch)
    if jax is not None and jax_step is not None:
        cases["JAX jit"] = jax_step(jax)
        first["JAX jit"] = _jax_first(jax, lambda: jax_step(jax))
    return Workload(cases, first)


# -- workloads ----------------------------------------------------------------------------


def _read_grads(out: Any) -> Any:
    """``(loss, grads)`` owners -> the loss as a float, every gradient borrowed as numpy."""
    v, g = out
    with ts.borrow_arrays(g) as arrays:
        return v.item(), [a.copy() for a in arrays] if _CHECKING else len(arrays)


_CHECKING = False  # True while check() compares gradients (copies them out of the borrows)


def classifier() -> Workload:
    p, x, labels = M.data()
    rows = np.arange(M.BATCH)
    tp, tx = [ts.from_numpy(a) for a in p], ts.from_numpy(x)

    def loss(q: list[Any], xb: Any) -> Any:
        h = ad.relu(xb @ q[0] + q[1])
        h = ad.relu(h @ q[2] + q[3])
        logp = ad.log_softmax(h @ q[4] + q[5], axis=-1)
        return -ad.mean(logp[rows, labels])

    w = tenferro_variants(ad.value_and_grad(loss), (tp, tx), _read_grads)
    return with_others(w, M.numpy_case(), M.torch_case, M.jax_case)


def _resnet(checkpointed: bool) -> Workload:
    p, x = R.data()
    tp, tx = [ts.from_numpy(a) for a in p], ts.from_numpy(x)

    def block(h: Any, w: Any, b: Any) -> Any:
        return h + ad.tanh(h @ w + b)

    blk = ad.checkpoint(block) if checkpointed else block

    def loss(q: list[Any], xb: Any) -> Any:
        h = xb
        for i in range(R.BLOCKS):
            h = blk(h, q[2 * i], q[2 * i + 1])
        return ad.mean(h * h)

    w = tenferro_variants(ad.value_and_grad(loss), (tp, tx), _read_grads)
    torch_name = "PyTorch checkpointed" if checkpointed else "PyTorch eager"
    jax_name = "JAX (jit) checkpointed" if checkpointed else "JAX (jit)"
    return with_others(w, R.numpy_case(), lambda t: R.torch_cases(t)[torch_name],
                       lambda j: R.jax_cases(j)[jax_name])


def _chain(shape: tuple[int, ...], kinds: list[str], seed: int) -> Workload:
    x0 = np.random.default_rng(seed).normal(size=shape)
    w = tenferro_variants(T._tf_grad(kinds), (ts.from_numpy(x0),), lambda g: g)
    return with_others(w, P.numpy_fwd_bwd(x0, kinds), lambda _t: T._torch(x0, kinds),
                       lambda _j: T._jax(x0, kinds))


def check(key: str, cs: dict[str, Step]) -> None:
    """Every column computes hand-written numpy's loss and gradients."""
    global _CHECKING
    _CHECKING = True
    try:
        if key.startswith("chain"):
            want = cs[H.BASE]()
            for name, fn in cs.items():
                got = fn()
                got = got.to_numpy() if hasattr(got, "to_numpy") else np.asarray(got)
                np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, err_msg=name)
            return
        v0, g0 = cs[H.BASE]()[:2]
        for name, fn in cs.items():
            v, g = fn()[:2]
            np.testing.assert_allclose(v, v0, rtol=1e-4, err_msg=name)
            for a, b in zip(g, g0, strict=True):
                np.testing.assert_allclose(a, b, rtol=2e-3, atol=1e-5, err_msg=name)
    finally:
        _CHECKING = False


# -- memory of the 10^6 chain ---------------------------------------------------------------


def ledger_peak(step: Step) -> int:
    """Peak bytes of live ledger allocations during one call (after a warm-up call)."""
    step()
    with ts.ledger.capture() as rec:
        r = step()
    del r
    return int(rec.peak_bytes)


def jax_memory(n: int) -> int | None:
    """JAX's compiled temporaries + output bytes for the 10^6 chain's gradient."""
    jax = H.jax_or_none()
    if jax is None:
        return None
    import jax.numpy as jnp

    fns = {"sin": jnp.sin, "tanh": jnp.tanh, "cos": jnp.cos}
    g = jax.jit(jax.grad(lambda x: jnp.sum(P.chain(x, fns, T.BIG_KINDS))))
    ma = g.lower(jnp.zeros(n)).compile().memory_analysis()
    if ma is None:
        return None
    return int(ma.temp_size_in_bytes + ma.output_size_in_bytes)


# -- main ----------------------------------------------------------------------------------

WORKLOADS = {
    "classifier": "MLP 784-512-512-10 classifier step, float32, gradients read",
    "resnet": "50-block residual MLP step (width 64, batch 256), float32, plain",
    "resnet_ckpt": "the same, every block checkpointed",
    "chain4x4": "50-op chain on 4x4 float64, fwd+bwd",
    "chain1e6": "30-op chain on 10^6 float64, grad",
}
COLUMNS = (H.BASE, EAGER, *(f"tenferro jit[{e}]" for e in ENGINES), "PyTorch eager", "JAX jit")


def _fmt(x: float | None, spec: str) -> str:
    return NA if x is None else format(x, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--number", type=int, default=3)
    ap.add_argument("--cpu", action="store_true", help="time this process's CPU time")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: one round of one call, the long chain at 10^4")
    ap.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads")
    args = ap.parse_args()
    rounds, number = (1, 1) if args.quick else (args.rounds, args.number)
    big_n = 10**4 if args.quick else T.BIG_N
    makers: dict[str, Callable[[], Workload]] = {
        "classifier": classifier,
        "resnet": lambda: _resnet(False),
        "resnet_ckpt": lambda: _resnet(True),
        "chain4x4": lambda: _chain(P.SHAPE, P.KINDS, 0),
        "chain1e6": lambda: _chain((big_n,), T.BIG_KINDS, 1),
    }
    clock = H.clock(args.cpu)
    print(f"commit {H.commit()}; {'CPU' if args.cpu else 'wall'} time; median ms per step over "
          f"{rounds} interleaved rounds; ratios to numpy and jit/eager from this run")
    rows: list[tuple[str, dict[str, float], dict[str, float]]] = []
    for key in args.only.split(","):
        w = makers[key]()
        check(key, w.cases)
        per_round = number * (20 if key == "chain4x4" else 1)  # a 4x4 step is ~0.3 ms
        res = H.interleaved_ms(w.cases, rounds=rounds, number=per_round, clock=clock)
        comp = {name: first() * 1e3 - res[name] for name, first in w.first.items()}
        rows.append((key, res, comp))
        print(f"\n{WORKLOADS[key]}")
        print(f"   {'':24s} {'ms':>9s} {'x numpy':>8s} {'x eager':>8s} {'compile ms':>11s}")
        for col in COLUMNS:
            ms = res.get(col)
            base = res[H.BASE]
            rel = None if ms is None or col in (H.BASE, EAGER) else ms / res[EAGER]
            print(f"   {col:24s} {_fmt(ms, '9.3f'):>9s} "
                  f"{_fmt(None if ms is None else ms / base, '8.2f'):>8s} "
                  f"{'' if col in (H.BASE, EAGER) else _fmt(rel, '8.2f'):>8s} "
                  f"{_fmt(comp.get(col), '11.1f') if col in comp or 'jit' in col else '':>11s}")
        if key == "chain1e6":
            print(f"   memory of one call (ledger peak, live allocations; JAX: compiled temp + "
                  f"output), {big_n * 8 / 2**20:.1f} MiB per array")
            for col in (EAGER, *(f"tenferro jit[{e}]" for e in ENGINES)):
                if col in w.cases:
                    print(f"   {col:24s} {ledger_peak(w.cases[col]) / 2**20:9.1f} MiB")
            jm = jax_memory(big_n)
            print(f"   {'JAX jit':24s} {_fmt(None if jm is None else jm / 2**20, '9.1f'):>9s} MiB")
    print("\nsummary: x numpy (jit / eager)")
    print("   | workload | " + " | ".join(COLUMNS[1:]) + " |")
    for key, res, _comp in rows:
        cells = []
        for col in COLUMNS[1:]:
            ms = res.get(col)
            cell = _fmt(None if ms is None else ms / res[H.BASE], ".2f")
            if ms is not None and col.startswith("tenferro jit"):
                cell += f" ({ms / res[EAGER]:.2f})"
            cells.append(cell)
        print(f"   | {WORKLOADS[key]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
