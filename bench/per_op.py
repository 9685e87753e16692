"""Per-op overhead: a 50-op chain of small elementwise ops on a 4x4 float64 array,
forward + backward, for tenferro, hand-written numpy, and (when installed) HIPS autograd,
PyTorch eager and JAX (op-by-op and jit).  Prints microseconds per op and the ratio to
hand-written numpy.  Targets (PERFORMANCE.md): at or below PyTorch eager; HIPS-autograd
parity is the floor.

    python bench/per_op.py [--repeat 7] [--number 200]
"""

from __future__ import annotations

import argparse
import gc
import os
import timeit
from collections.abc import Callable, Mapping
from typing import Any

# One thread everywhere (PyTorch is pinned with set_num_threads(1)): on 2 shared cores,
# BLAS threads fighting each other make every framework's timing meaningless.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

N_OPS = 50
SHAPE = (4, 4)


def _chain_kinds() -> list[str]:
    kinds = ["sin", "tanh", "mul", "add", "cos"]
    return [kinds[i % len(kinds)] for i in range(N_OPS - 1)]  # + the final sum


KINDS = _chain_kinds()


def chain(
    x: Any, fns: Mapping[str, Callable[[Any], Any]], kinds: list[str] | None = None,
    c: Any = 1.1,
) -> Any:
    """The elementwise ops of the chain (default: this benchmark's 49), the same for every
    framework (``fns``: its sin/tanh/cos; ``c``: the factor of the ``mul`` steps, a
    scalar or a constant array of the framework)."""
    y = x
    for k in KINDS if kinds is None else kinds:
        if k == "mul":
            y = y * c
        elif k == "add":
            y = y + 0.5
        else:
            y = fns[k](y)
    return y


def numpy_fwd_bwd(x0: np.ndarray[Any, Any], kinds: list[str]) -> Callable[[], Any]:
    """Hand-written forward + backward of ``sum(chain(x))`` over the op ``kinds``."""

    def run() -> Any:
        y = x0
        saved = []
        for k in kinds:
            saved.append(y)
            if k == "sin":
                y = np.sin(y)
            elif k == "tanh":
                y = np.tanh(y)
                saved[-1] = y
            elif k == "mul":
                y = y * 1.1
            elif k == "add":
                y = y + 0.5
            else:
                y = np.cos(y)
        y.sum()
        g = np.ones_like(x0)
        for k, s in zip(reversed(kinds), reversed(saved), strict=True):
            if k == "sin":
                g = g * np.cos(s)
            elif k == "tanh":
                g = g * (1.0 - s * s)
            elif k == "mul":
                g = g * 1.1
            elif k == "cos":
                g = -(g * np.sin(s))
        return g

    return run


def numpy_case() -> Callable[[], Any]:
    return numpy_fwd_bwd(np.random.default_rng(0).normal(size=SHAPE), KINDS)


def tenferro_case() -> Callable[[], Any]:
    import tenferro_ad as ad
    import tenferro_storage as ts

    x0 = np.random.default_rng(0).normal(size=SHAPE)
    fns = {"sin": ad.sin, "tanh": ad.tanh, "cos": ad.cos}
    param = ts.from_numpy(x0)

    def f(x: Any) -> Any:
        y = chain(x, fns)
        return y.sum()

    g = ad.grad(f)

    def run() -> Any:
        return g(param)

    return run


def tenferro_owner_case() -> Callable[[], Any]:
    """``ad.grad(f)(x, c)`` with ``c`` a borrowed 4x4 owner (a constant the ops borrow)."""
    import tenferro_ad as ad
    import tenferro_storage as ts

    x0 = np.random.default_rng(0).normal(size=SHAPE)
    fns = {"sin": ad.sin, "tanh": ad.tanh, "cos": ad.cos}
    param, c = ts.from_numpy(x0), ts.from_numpy(np.full(SHAPE, 1.1))
    g = ad.grad(lambda x, c: chain(x, fns, c=c).sum())
    return lambda: g(param, c)


def tenferro_tape_case() -> Callable[[], Any]:
    """An explicit tape: watch a fresh owner, run the chain, backward."""
    import tenferro_ad as ad
    import tenferro_storage as ts

    x0 = np.random.default_rng(0).normal(size=SHAPE)
    fns = {"sin": ad.sin, "tanh": ad.tanh, "cos": ad.cos}
    param = ts.from_numpy(x0)

    def run() -> Any:
        with ad.Tape() as t:
            h = t.watch(param.duplicate())
            loss = chain(h, fns).sum()
        return t.backward(loss, wrt=[h])

    return run


def autograd_case() -> Callable[[], Any] | None:
    try:
        import autograd  # type: ignore[import-untyped]
        import autograd.numpy as anp  # type: ignore[import-untyped]
    except ImportError:
        return None
    x0 = np.random.default_rng(0).normal(size=SHAPE)
    fns = {"sin": anp.sin, "tanh": anp.tanh, "cos": anp.cos}

    def f(x: Any) -> Any:
        y = chain(x, fns)
        return anp.sum(y)

    g = autograd.grad(f)
    return lambda: g(x0)


def torch_case() -> Callable[[], Any] | None:
    try:
        import torch  # type: ignore[import-not-found]
    except ImportError:
        return None
    torch.set_num_threads(1)
    x0 = torch.tensor(np.random.default_rng(0).normal(size=SHAPE), dtype=torch.float64)
    fns = {"sin": torch.sin, "tanh": torch.tanh, "cos": torch.cos}

    def run() -> Any:
        x = x0.detach().requires_grad_(True)
        y = chain(x, fns)
        y.sum().backward()
        return x.grad

    return run


def torch_tensor_constant_case() -> Callable[[], Any] | None:
    """PyTorch with the ``mul`` factor a constant 4x4 tensor (tenferro's owner case)."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    x0 = torch.tensor(np.random.default_rng(0).normal(size=SHAPE), dtype=torch.float64)
    c = torch.full(SHAPE, 1.1, dtype=torch.float64)
    fns = {"sin": torch.sin, "tanh": torch.tanh, "cos": torch.cos}

    def run() -> Any:
        x = x0.detach().requires_grad_(True)
        chain(x, fns, c=c).sum().backward()
        return x.grad

    return run


def jax_cases() -> dict[str, Callable[[], Any]]:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {}
    jax.config.update("jax_enable_x64", True)
    x0 = jnp.asarray(np.random.default_rng(0).normal(size=SHAPE))
    fns = {"sin": jnp.sin, "tanh": jnp.tanh, "cos": jnp.cos}

    def f(x: Any) -> Any:
        y = chain(x, fns)
        return jnp.sum(y)

    g = jax.grad(f)
    gj = jax.jit(jax.grad(f))
    gj(x0).block_until_ready()
    return {
        "jax (op-by-op)": lambda: g(x0).block_until_ready(),
        "jax (jit)": lambda: gj(x0).block_until_ready(),
    }


def measure(fn: Callable[[], Any], number: int, repeat: int) -> float:
    """Best-of-``repeat`` microseconds per op."""
    fn()
    gc.collect()
    best = min(timeit.repeat(fn, number=number, repeat=repeat)) / number
    return best / N_OPS * 1e6


def collect(number: int, repeat: int, jax_number: int | None = None) -> dict[str, float]:
    cases: dict[str, Callable[[], Any] | None] = {
        "numpy (hand-written)": numpy_case(),
        "tenferro": tenferro_case(),
        "tenferro, explicit tape": tenferro_tape_case(),
        "tenferro, owner constant": tenferro_owner_case(),
        "HIPS autograd": autograd_case(),
        "PyTorch eager": torch_case(),
        "PyTorch, tensor constant": torch_tensor_constant_case(),
    }
    out: dict[str, float] = {}
    for name, fn in cases.items():
        if fn is not None:
            out[name] = measure(fn, number, repeat)
    for name, fn in jax_cases().items():
        n = jax_number if jax_number is not None and "op-by-op" in name else number
        out[name] = measure(fn, max(n // 10, 5) if "op-by-op" in name else n, repeat)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--number", type=int, default=200)
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    res = collect(args.number, args.repeat)
    base = res["numpy (hand-written)"]
    print(f"per-op overhead: {N_OPS}-op elementwise chain on {SHAPE} float64, fwd+bwd")
    for name, us in res.items():
        print(f"  {name:26s} {us:8.2f} us/op   {us / base:6.2f}x numpy")


if __name__ == "__main__":
    main()
