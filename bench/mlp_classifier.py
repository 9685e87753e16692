"""Classifier MLP training step: 784-512-512-10 with biases, ReLU, softmax cross-entropy
with integer labels, batch 128, float32.

One step = loss + the gradients of all six parameters *read out as numpy arrays*, without
copies everywhere: tenferro ``ts.borrow_arrays(grads)`` (one shared borrow per owner),
PyTorch ``.grad.numpy()``, JAX ``np.asarray``.  The row
"tenferro (grads not read)" leaves the owners unread.  Frameworks: hand-written numpy
(the reference), tenferro (``ad.value_and_grad``), PyTorch eager, HIPS autograd and
JAX (jit) when installed.  Single-threaded, interleaved rounds, medians (see ``_harness``).

    python bench/mlp_classifier.py [--rounds 7] [--number 5]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # first: pins BLAS threads before numpy loads
import numpy as np

DIMS = (784, 512, 512, 10)
BATCH = 128
F32 = np.float32


def data() -> tuple[list[Any], Any, Any]:
    """``[W1, b1, W2, b2, W3, b3]``, inputs ``(128, 784)`` and integer labels ``(128,)``."""
    rng = np.random.default_rng(0)
    params: list[Any] = []
    for a, b in zip(DIMS[:-1], DIMS[1:], strict=True):  # noqa: RUF007
        params.append((rng.normal(size=(a, b)) / np.sqrt(a)).astype(F32))
        params.append(np.zeros(b, F32) + F32(0.01))
    x = rng.normal(size=(BATCH, DIMS[0])).astype(F32)
    labels = rng.integers(0, DIMS[-1], size=BATCH)
    return params, x, labels


def numpy_case() -> Callable[[], Any]:
    p, x, labels = data()
    rows = np.arange(BATCH)

    def step() -> Any:
        w1, b1, w2, b2, w3, b3 = p
        z1 = x @ w1 + b1
        h1 = np.maximum(z1, 0)
        z2 = h1 @ w2 + b2
        h2 = np.maximum(z2, 0)
        o = h2 @ w3 + b3
        m = o.max(axis=1, keepdims=True)
        e = np.exp(o - m)
        s = e.sum(axis=1, keepdims=True)
        loss = float(np.mean(np.log(s[:, 0]) + m[:, 0] - o[rows, labels]))
        go = e / s
        go[rows, labels] -= 1
        go *= F32(1.0 / BATCH)
        g_w3, g_b3 = h2.T @ go, go.sum(0)
        g2 = (go @ w3.T) * (z2 > 0)
        g_w2, g_b2 = h1.T @ g2, g2.sum(0)
        g1 = (g2 @ w2.T) * (z1 > 0)
        g_w1, g_b1 = x.T @ g1, g1.sum(0)
        return loss, [g_w1, g_b1, g_w2, g_b2, g_w3, g_b3]

    return step


def tenferro_cases() -> dict[str, Callable[[], Any]]:
    import tenferro_ad as ad
    import tenferro_storage as ts

    p, x, labels = data()
    rows = np.arange(BATCH)
    tp = [ts.from_numpy(a) for a in p]
    tx = ts.from_numpy(x)

    def loss(q: list[Any], xb: Any) -> Any:
        h = ad.relu(xb @ q[0] + q[1])
        h = ad.relu(h @ q[2] + q[3])
        logp = ad.log_softmax(h @ q[4] + q[5], axis=-1)
        return -ad.mean(logp[rows, labels])

    vg = ad.value_and_grad(loss)

    def step(copy: bool = False) -> Any:
        v, g = vg(tp, tx)
        with ts.borrow_arrays(g) as arrays:  # all six gradients as numpy, zero-copy
            grads = [a.copy() for a in arrays] if copy else len(arrays)
        return v.item(), grads  # the loss as a Python float (no copy; PyTorch: .item())

    return {"tenferro": step, "tenferro (grads not read)": lambda: vg(tp, tx)}


def torch_case(torch: Any) -> Callable[[], Any]:
    p, x, labels = data()
    tp = [torch.tensor(a, requires_grad=True) for a in p]
    tx, ty = torch.tensor(x), torch.tensor(labels)
    ce = torch.nn.functional.cross_entropy

    def step() -> Any:
        for t in tp:
            t.grad = None
        h = torch.relu(tx @ tp[0] + tp[1])
        h = torch.relu(h @ tp[2] + tp[3])
        v = ce(h @ tp[4] + tp[5], ty)
        v.backward()
        return v.item(), [t.grad.numpy() for t in tp]

    return step


def autograd_case(autograd: Any) -> Callable[[], Any]:
    import autograd.numpy as anp  # type: ignore[import-untyped]
    from autograd.scipy.special import logsumexp  # type: ignore[import-untyped]

    p, x, labels = data()
    rows = np.arange(BATCH)

    def loss(q: list[Any]) -> Any:
        h = anp.maximum(x @ q[0] + q[1], 0.0)
        h = anp.maximum(h @ q[2] + q[3], 0.0)
        o = h @ q[4] + q[5]
        return anp.mean(logsumexp(o, axis=1) - o[rows, labels])

    vg = autograd.value_and_grad(loss)

    def step() -> Any:
        v, g = vg(p)
        return float(v), g

    return step


def jax_case(jax: Any) -> Callable[[], Any]:
    import jax.numpy as jnp

    p, x, labels = data()
    jp = [jnp.asarray(a) for a in p]
    jx, jy = jnp.asarray(x), jnp.asarray(labels)

    def loss(q: list[Any]) -> Any:
        h = jax.nn.relu(jx @ q[0] + q[1])
        h = jax.nn.relu(h @ q[2] + q[3])
        logp = jax.nn.log_softmax(h @ q[4] + q[5], axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, jy[:, None], axis=1))

    vg = jax.jit(jax.value_and_grad(loss))

    def step() -> Any:
        v, g = vg(jp)
        return float(v), [np.asarray(t) for t in g]

    return step


def cases() -> dict[str, Callable[[], Any]]:
    out: dict[str, Callable[[], Any]] = {H.BASE: numpy_case(), **tenferro_cases()}
    torch = H.torch_or_none()
    if torch is not None:
        out["PyTorch eager"] = torch_case(torch)
    autograd = H.autograd_or_none()
    if autograd is not None:
        out["HIPS autograd"] = autograd_case(autograd)
    jax = H.jax_or_none()
    if jax is not None:
        out["JAX (jit)"] = jax_case(jax)
    return out


def check(cs: dict[str, Callable[[], Any]]) -> None:
    """Every framework computes the same loss and gradients (float32 tolerances)."""
    v0, g0 = cs[H.BASE]()[:2]
    for name, fn in cs.items():
        if "not read" in name:
            continue
        call: Any = fn
        v, g = (call(copy=True) if name == "tenferro" else call())[:2]
        np.testing.assert_allclose(v, v0, rtol=1e-4, err_msg=name)
        for a, b in zip(g, g0, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5, err_msg=name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--number", type=int, default=5)
    ap.add_argument(
        "--cpu", action="store_true", help="time CPU time of this process (steadier under load)"
    )
    args = ap.parse_args()
    cs = cases()
    check(cs)
    res = H.interleaved_ms(
        cs, rounds=args.rounds, number=args.number, clock=H.clock(args.cpu)
    )
    H.report(
        f"MLP classifier step 784-512-512-10, batch {BATCH}, float32 (commit {H.commit()})", res
    )


if __name__ == "__main__":
    main()
