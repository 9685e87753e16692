"""Einsum gradients: forward + backward of ``sum(einsum(...))`` w.r.t. every operand.

Cases: ``ij,jk,kl->il`` at 200x200 and ``abc,cde,efa->bdf`` at 20^3 (float64, one
thread).  Compared: tenferro (``ad.grad``), numpy by hand on a good path (pairwise
``einsum(..., optimize=<the pairwise path>)`` forward + hand-written pairwise backward),
numpy's own ``einsum(optimize=True)`` forward only (its path keeps the 3-tensor case as one
6-loop einsum), PyTorch eager (when installed) and JAX (op-by-op and jit).  Prints
milliseconds and the ratio to PyTorch.  Target: at or below PyTorch.

    python bench/einsum.py [--repeat 5] [--number 10]
"""

from __future__ import annotations

import argparse
import os
import timeit
from collections.abc import Callable
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np

CASES: dict[str, tuple[str, list[tuple[int, ...]]]] = {
    "ij,jk,kl->il @200^2": ("ij,jk,kl->il", [(200, 200)] * 3),
    "abc,cde,efa->bdf @20^3": ("abc,cde,efa->bdf", [(20, 20, 20)] * 3),
}


def tenferro_case(sub: str, arrs: list[Any]) -> Callable[[], Any]:
    import tenferro_ad as ad
    import tenferro_storage as ts

    argnums = tuple(range(len(arrs)))
    g = ad.grad(lambda *xs: ad.sum(ad.einsum(sub, *xs)), argnums=argnums)
    # Owners made once, like the other frameworks' tensors: grad borrows them (no copy).
    owners = [ts.from_numpy(a) for a in arrs]
    return lambda: g(*owners)


def numpy_good_path_case(sub: str, arrs: list[Any]) -> Callable[[], Any]:
    """Hand-written pairwise forward and backward with tenferro's numpy-level kernels."""
    from tenferro_ad.ops import _einsum_path as E

    def run() -> Any:
        out = E.contract(sub, *arrs)
        return E.contract_vjp(sub, arrs, np.ones_like(out))

    return run


def numpy_optimize_true_forward(sub: str, arrs: list[Any]) -> Callable[[], Any]:
    return lambda: np.einsum(sub, *arrs, optimize=True)


def torch_case(sub: str, arrs: list[Any]) -> Callable[[], Any] | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    ts_ = [torch.tensor(a, requires_grad=True) for a in arrs]

    def run() -> Any:
        for t in ts_:
            t.grad = None
        torch.einsum(sub, *ts_).sum().backward()
        return [t.grad for t in ts_]

    return run


def jax_cases(sub: str, arrs: list[Any]) -> dict[str, Callable[[], Any]]:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {}
    jax.config.update("jax_enable_x64", True)
    argnums = tuple(range(len(arrs)))

    def loss(*xs: Any) -> Any:
        return jnp.einsum(sub, *xs).sum()

    g = jax.grad(loss, argnums=argnums)
    gj = jax.jit(g)
    jarrs = [jnp.asarray(a) for a in arrs]
    return {
        "jax (op-by-op)": lambda: jax.block_until_ready(g(*jarrs)),
        "jax (jit)": lambda: jax.block_until_ready(gj(*jarrs)),
    }


def best(fn: Callable[[], Any], repeat: int, number: int) -> float:
    fn()
    return min(timeit.repeat(fn, repeat=repeat, number=number)) / number


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--number", type=int, default=10)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    for name, (sub, shapes) in CASES.items():
        arrs = [rng.standard_normal(s) for s in shapes]
        rows: dict[str, float] = {}
        rows["tenferro grad"] = best(tenferro_case(sub, arrs), args.repeat, args.number)
        rows["numpy good path (fwd+bwd)"] = best(
            numpy_good_path_case(sub, arrs), args.repeat, args.number
        )
        t = torch_case(sub, arrs)
        if t is not None:
            rows["pytorch eager"] = best(t, args.repeat, args.number)
        for k, fn in jax_cases(sub, arrs).items():
            rows[k] = best(fn, args.repeat, args.number)
        rows["numpy optimize=True (fwd only)"] = best(
            numpy_optimize_true_forward(sub, arrs),
            1 if "abc" in sub else args.repeat,
            1 if "abc" in sub else args.number,
        )
        ref = rows.get("pytorch eager")
        print(f"\n{name}")
        for k, v in rows.items():
            ratio = f"  x{v / ref:5.2f} of pytorch" if ref else ""
            print(f"  {k:32s} {v * 1e3:9.3f} ms{ratio}")


if __name__ == "__main__":
    main()
