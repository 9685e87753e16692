"""A 100+-tensor contraction with gradients under a memory bound: tenferro vs quimb's stack on
JAX and on PyTorch.

The network: the amplitude <b|C|0> of a random quantum circuit built by quimb (``U3`` gates
and ``CZ`` ladders on ``--qubits`` qubits, ``--depth`` layers), left unsimplified so every
gate is a tensor.  The loss is ``|amplitude|^2`` and every tensor of the network gets a
gradient (complex128).  One cotengra contraction tree (greedy hyper search, searched once)
fixes the path for everyone.  For each memory bound tenferro runs
``ad.value_and_grad`` of ``ad.einsum(eq, *arrays, optimize=tree, memory_limit=bound)``
(eager; sliced as the bound requires, each slice a checkpoint region) under
``ledger.capture()``, which proves the peak; JAX (``jax.jit(jax.value_and_grad)``) and
PyTorch (eager autograd) run cotengra's own sliced contraction of the *same* tree sliced over
the *same* labels (``tree.contract(arrays, backend=...)``, quimb's contraction engine).

Prints, per bound: the sliced labels and slice count, tenferro's ledger peak, and the
median time of each framework (interleaved rounds, one thread), with the ratio to the best.

    python bench/tensor_networks.py [--qubits 10] [--depth 10] [--rounds 5]
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable
from typing import Any

import _harness as H  # pins BLAS to one thread before numpy loads
import numpy as np


def circuit_network(qubits: int, depth: int, seed: int = 0) -> tuple[str, list[Any], Any]:
    """(einsum equation, arrays, cotengra tree over the equation's labels)."""
    import cotengra as ctg
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
    opt = ctg.HyperOptimizer(
        methods=["greedy"], max_repeats=32, parallel=False, progbar=False, minimize="flops"
    )
    tree = opt.search([tuple(t) for t in terms], (), sizes)
    return eq, arrays, tree


def tenferro_case(
    eq: str, arrays: list[Any], tree: Any, bound: int, engine: str | None = None
) -> Callable[[], Any]:
    import tenferro_ad as ad
    import tenferro_storage as ts

    owners = [ts.from_numpy(a) for a in arrays]
    argnums = tuple(range(len(owners)))

    def loss(*xs: Any) -> Any:
        amp = ad.einsum(eq, *xs, optimize=tree, memory_limit=bound)
        return ad.real(amp * ad.conj(amp))

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
        return jnp.real(amp * jnp.conj(amp))

    f = jax.jit(jax.value_and_grad(loss))
    return lambda: jax.block_until_ready(f(xs))


def torch_case(arrays: list[Any], tree: Any) -> Callable[[], Any] | None:
    torch = H.torch_or_none()
    if torch is None:
        return None

    def run() -> Any:
        xs = [torch.tensor(a, requires_grad=True) for a in arrays]
        amp = tree.contract(xs, backend="torch")
        loss = (amp * amp.conj()).real
        loss.backward()
        return loss, [x.grad for x in xs]

    return run


def _lowest_estimate(S: Any, eq: str, shapes: Any, tree: Any) -> int:
    """The smallest estimate slicing reaches (read from the refusal of a 1-byte bound)."""
    try:
        S.sliced_plan(eq, shapes, False, tree, 1, 16)
    except ValueError as e:
        return int(str(e).split("estimated ")[1].split(" bytes")[0].replace(",", ""))
    raise AssertionError("a 1-byte bound was accepted")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qubits", type=int, default=10)
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--number", type=int, default=1)
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="Couldn't import `kahypar`")

    import tenferro_storage as ts
    from tenferro_ad.ops import _einsum_slice as S
    from tenferro_storage import ledger

    eq, arrays, tree = circuit_network(args.qubits, args.depth)
    shapes = tuple(a.shape for a in arrays)
    whole = S.sliced_plan(eq, shapes, False, tree, None, 16)
    print(f"network: {len(arrays)} tensors, {args.qubits} qubits, depth {args.depth}; "
          f"tree: log2 flops {np.log2(float(tree.contraction_cost())):.1f}, "
          f"largest intermediate {int(tree.max_size()):,} elements; "
          f"unsliced estimate {whole.estimate:,} bytes")
    # between the unsliced estimate and the smallest reachable (every label sliced)
    lowest = _lowest_estimate(S, eq, shapes, tree)
    top = whole.estimate
    bounds = [top, (top + lowest) // 2, lowest + (top - lowest) // 8]
    for bound in bounds:
        plan = S.sliced_plan(eq, shapes, False, tree, bound, 16)
        st = sliced_tree(tree, plan.labels)
        ours = tenferro_case(eq, arrays, tree, bound)
        with ledger.capture() as rec:
            v, g = ours()
            want = st.contract(arrays, backend="numpy")
        assert abs(float(v) - abs(complex(want)) ** 2) <= 1e-10 * max(1.0, float(v))
        del v, g
        cases: dict[str, Callable[[], Any]] = {"tenferro eager": ours,
                                               "tenferro jit (host engine)": tenferro_case(
                                                   eq, arrays, tree, bound, "host"),
                                               "tenferro jit (XLA engine)": tenferro_case(
                                                   eq, arrays, tree, bound, "xla"),
                                               "quimb/cotengra on JAX (jit)": jax_case(arrays, st)}
        tc = torch_case(arrays, st)
        if tc is not None:
            cases["quimb/cotengra on PyTorch"] = tc
        times = H.interleaved_ms(  # warms up each case first (JAX compiles there)
            cases, rounds=args.rounds, number=args.number, clock=H.clock(cpu=True)
        )
        best = min(times.values())
        sliced = dict(zip(plan.labels, plan.extents, strict=True))
        print(f"\nbound {bound:,} bytes: sliced {sliced} "
              f"({plan.count} slices), tenferro ledger peak {rec.peak_bytes:,} bytes "
              f"({'under' if rec.peak_bytes <= bound else 'OVER'} the bound), "
              f"recomputed {rec.allocations[ts.AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT]}")
        for name, t in times.items():
            print(f"  {name:32s} {t:9.2f} ms  {t / best:5.2f}x best")


if __name__ == "__main__":
    main()
