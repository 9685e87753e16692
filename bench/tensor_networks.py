"""A 100+-tensor contraction with gradients under a memory bound: tenferro vs quimb's stack on
JAX and on PyTorch.

The network (``--network``): ``peps`` (the default), the norm <psi|psi> of a random
``--size`` x ``--size`` PEPS of bond ``--bond`` built by quimb (2 * size^2 tensors, float64;
the loss is the norm); or ``circuit``, the amplitude <b|C|0> of a random quantum circuit
(``U3`` gates and ``CZ`` ladders on ``--qubits`` qubits, ``--depth`` layers, left
unsimplified so every gate is a tensor; the loss is ``|amplitude|^2``, complex128).  Every
tensor of the network gets a gradient.  One cotengra contraction tree (greedy hyper
search, searched once) fixes the path for everyone.  The bounds are the unsliced estimate
and ``--fractions`` of it (a fraction below what slicing can reach is skipped).  For each
memory bound tenferro runs ``ad.value_and_grad`` of
``ad.einsum(eq, *arrays, optimize=tree, memory_limit=bound)`` (eager, and under ``ad.jit``
per ``--engines``; sliced as the bound requires, the sub-trees no sliced label reaches
contracted once, each slice a checkpoint region); the eager
call runs under ``ledger.capture()``, which proves the peak; JAX
(``jax.jit(jax.value_and_grad)``) and PyTorch (eager autograd) run cotengra's own sliced
contraction of the *same* tree sliced over the *same* labels (``tree.contract(arrays,
backend=...)``, quimb's contraction engine).  The tree search is seeded (and the script
re-runs itself with ``PYTHONHASHSEED=0``) so every run contracts the same tree.

Prints, per bound: the sliced labels and slice count, tenferro's ledger peak, and the
median CPU time of each case (interleaved rounds, one thread), with the ratio to the best
of JAX and PyTorch, and each case's first call (tracing and compiling included).

    python bench/tensor_networks.py [--network peps] [--size 8] [--bond 2] [--rounds 5]
    python bench/tensor_networks.py --network circuit [--qubits 10] [--depth 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import _harness as H  # pins BLAS to one thread before numpy loads
import numpy as np


def _tree(inputs: Any, output: Any, sizes: Any) -> Any:
    import random

    import cotengra as ctg

    random.seed(0)  # the search draws from both generators; with PYTHONHASHSEED=0
    np.random.seed(0)  # (main re-runs itself so) the tree is the same in every run

    opt = ctg.HyperOptimizer(
        methods=["greedy"], max_repeats=8, parallel=False, progbar=False, minimize="flops"
    )
    return opt.search(inputs, output, sizes)


def circuit_network(qubits: int, depth: int, seed: int = 0) -> tuple[str, list[Any], Any]:
    """(einsum equation, arrays, cotengra tree over the equation's labels)."""
    import opt_einsum
    import quimb.tensor as qtn

    rng = np.random.default_rng(seed)
    circ = qtn.Circuit(qubits)
    for layer in range(depth):
        for q in range(qubits):
            circ.apply_gate("U3", *rng.uniform(0, 2 * np.pi, 3), q)
        for q in range(layer % 2, qubits - 1, 2):
            circ.apply_gate("CZ", q, q + 1)
    b = "".join(rng.choice(["0", "1"], qubits))
    tn = circ.amplitude_tn(b, simplify_sequence="")
    arrays = [np.ascontiguousarray(t.data, dtype=np.complex128) for t in tn]
    symbol: dict[str, str] = {}
    for t in tn:
        for ix in t.inds:
            symbol.setdefault(ix, opt_einsum.get_symbol(len(symbol)))
    terms = ["".join(symbol[ix] for ix in t.inds) for t in tn]
    eq = ",".join(terms) + "->"
    sizes = {symbol[ix]: d for t in tn for ix, d in zip(t.inds, t.shape, strict=True)}
    return eq, arrays, _tree([tuple(t) for t in terms], (), sizes)


def peps_network(size: int, bond: int, seed: int = 0) -> tuple[str, list[Any], Any]:
    """(einsum equation, arrays, tree) of the norm of a random ``size`` x ``size`` PEPS."""
    import quimb.tensor as qtn

    peps = qtn.PEPS.rand(size, size, bond_dim=bond, seed=seed)
    norm = peps.H & peps
    eq = norm.get_equation(output_inds=())
    inputs, output, sizes = norm.get_inputs_output_size_dict(output_inds=())
    arrays = [np.ascontiguousarray(t.data, dtype=np.float64) for t in norm]
    return eq, arrays, _tree(inputs, output, sizes)


def tenferro_case(
    eq: str, arrays: list[Any], tree: Any, bound: int, engine: str | None = None
) -> Callable[[], Any]:
    import tenferro_ad as ad
    import tenferro_storage as ts

    owners = [ts.from_numpy(a) for a in arrays]
    argnums = tuple(range(len(owners)))
    cplx = any(np.iscomplexobj(a) for a in arrays)

    def loss(*xs: Any) -> Any:
        amp = ad.einsum(eq, *xs, optimize=tree, memory_limit=bound)
        return ad.real(amp * ad.conj(amp)) if cplx else amp

    vg = ad.value_and_grad(loss, argnums=argnums)
    if engine is not None:
        vg = ad.jit(vg, engine=engine)
    return lambda: vg(*owners)


def sliced_tree(tree: Any, labels: tuple[str, ...]) -> Any:
    t = tree.copy()
    for c in labels:
        t.remove_ind_(c)
    return t


def jax_case(arrays: list[Any], tree: Any) -> Callable[[], Any]:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    xs = [jnp.asarray(a) for a in arrays]

    def loss(xs: Any) -> Any:
        amp = tree.contract(xs, backend="jax")
        return jnp.real(amp * jnp.conj(amp)) if jnp.iscomplexobj(amp) else amp

    f = jax.jit(jax.value_and_grad(loss))
    return lambda: jax.block_until_ready(f(xs))


def torch_case(arrays: list[Any], tree: Any) -> Callable[[], Any] | None:
    torch = H.torch_or_none()
    if torch is None:
        return None

    def run() -> Any:
        xs = [torch.tensor(a, requires_grad=True) for a in arrays]
        amp = tree.contract(xs, backend="torch")
        loss = (amp * amp.conj()).real if amp.is_complex() else amp
        loss.backward()
        return loss, [x.grad for x in xs]

    return run


def _lowest_estimate(S: Any, eq: str, shapes: Any, tree: Any, itemsize: int) -> int:
    """The smallest estimate slicing reaches (read from the refusal of a 1-byte bound)."""
    try:
        S.sliced_plan(eq, shapes, False, tree, 1, itemsize)
    except ValueError as e:
        return int(str(e).split("estimated ")[1].split(" bytes")[0].replace(",", ""))
    raise AssertionError("a 1-byte bound was accepted")


def main() -> None:
    if os.environ.get("PYTHONHASHSEED") != "0":  # label sets iterate in a fixed order
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, *sys.argv])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--network", choices=["peps", "circuit"], default="peps")
    ap.add_argument("--size", type=int, default=8)
    ap.add_argument("--bond", type=int, default=2)
    ap.add_argument("--qubits", type=int, default=10)
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--fractions", default="0.5,0.25", help="bounds as fractions of the "
                    "unsliced estimate, besides the unsliced estimate itself")
    ap.add_argument("--engines", default="eager,host,xla",
                    help="tenferro cases: eager and/or ad.jit engines")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--number", type=int, default=1)
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="Couldn't import `kahypar`")

    import tenferro_storage as ts
    from tenferro_ad.ops import _einsum_slice as S
    from tenferro_storage import ledger

    if args.network == "peps":
        eq, arrays, tree = peps_network(args.size, args.bond)
        what = f"{args.size}x{args.size} PEPS norm, bond {args.bond}, float64"
    else:
        eq, arrays, tree = circuit_network(args.qubits, args.depth)
        what = f"circuit amplitude, {args.qubits} qubits, depth {args.depth}, complex128"
    shapes = tuple(a.shape for a in arrays)
    itemsize = arrays[0].dtype.itemsize
    whole = S.sliced_plan(eq, shapes, False, tree, None, itemsize)
    print(f"network: {len(arrays)} tensors, {what}; tree: log2 flops "
          f"{np.log2(float(tree.contraction_cost())):.1f}, largest intermediate "
          f"{int(tree.max_size()):,} elements; unsliced estimate {whole.estimate:,} bytes")
    lowest = _lowest_estimate(S, eq, shapes, tree, itemsize)
    top = whole.estimate
    bounds = [top] + [int(top * float(f)) for f in args.fractions.split(",")]
    for bound in bounds:
        if bound < lowest:
            print(f"\nbound {bound:,} bytes: below what slicing reaches ({lowest:,}), skipped")
            continue
        plan = S.sliced_plan(eq, shapes, False, tree, bound, itemsize)
        st = sliced_tree(tree, plan.labels)
        ours = tenferro_case(eq, arrays, tree, bound)
        with ledger.capture() as rec:
            v, g = ours()
        want = st.contract(arrays, backend="numpy")
        want = abs(complex(want)) ** 2 if np.iscomplexobj(want) else float(want)
        assert abs(float(v) - want) <= 1e-10 * max(1.0, abs(want)), (float(v), want)
        jv, jg = jax_case(arrays, st)()
        np.testing.assert_allclose(g[0].to_numpy(), np.asarray(jg[0]), rtol=1e-8)
        del v, g, jv, jg
        cases: dict[str, Callable[[], Any]] = {}
        for e in args.engines.split(","):
            name = "tenferro eager" if e == "eager" else f"tenferro ad.jit ({e} engine)"
            cases[name] = ours if e == "eager" else tenferro_case(eq, arrays, tree, bound, e)
        cases["quimb/cotengra on JAX (jit)"] = jax_case(arrays, st)
        tc = torch_case(arrays, st)
        if tc is not None:
            cases["quimb/cotengra on PyTorch"] = tc
        first: dict[str, float] = {}
        for name, f in cases.items():  # the first call: tracing and compiling included
            t0 = time.perf_counter()
            f()
            first[name] = (time.perf_counter() - t0) * 1e3
        times = H.interleaved_ms(
            cases, rounds=args.rounds, number=args.number, clock=H.clock(cpu=True)
        )
        best = min(t for n, t in times.items() if not n.startswith("tenferro"))
        sliced = dict(zip(plan.labels, plan.extents, strict=True))
        print(f"\nbound {bound:,} bytes ({bound / top:.2f} of unsliced): sliced {sliced} "
              f"({plan.count} slices; {len(plan.pre)} invariant sub-trees contracted once"
              f"{', checkpointed' if plan.pre_region else ''}; log2 flops "
              f"{np.log2(max(plan.flops, 1)):.1f}), tenferro eager ledger peak "
              f"{rec.peak_bytes:,} bytes "
              f"({'under' if rec.peak_bytes <= bound else 'OVER'} the bound), recomputed "
              f"{rec.allocations[ts.AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT]} "
              "intermediates")
        for name, t in times.items():
            print(f"  {name:34s} {t:9.2f} ms  {t / best:5.2f}x best other   "
                  f"(first call {first[name]:9.1f} ms)")


if __name__ == "__main__":
    main()
