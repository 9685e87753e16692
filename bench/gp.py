"""Gaussian-process negative log marginal likelihood step, N=300, float64.

RBF kernel with three log-parameters (length scale, signal and noise scale) on 300 points
in 2-d; one step computes the NLL and its gradient with respect to the three parameters::

    K = sf^2 exp(-D / (2 ls^2))  (D/-2 precomputed) + sn^2 I,   L = cholesky(K),
    alpha = L^-H L^-1 y  (two triangular solves),
    nll = y . alpha / 2 + sum(log diag L) + N log(2 pi) / 2

The same work for every framework: tenferro (``ad.value_and_grad``), a hand-written
numpy/scipy step (the closed-form gradient ``(K^-1 - alpha alpha^T) / 2`` against
``dK``), and when installed PyTorch eager, HIPS autograd and JAX (jit).
Single-threaded, interleaved rounds, medians (see ``_harness``).

    python bench/gp.py [--rounds 7] [--number 5] [--cpu]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # first: pins BLAS threads before numpy loads
import numpy as np
import scipy.linalg as sla

N = 300
LOG2PI = math.log(2 * math.pi)


def data() -> tuple[Any, Any, list[Any]]:
    rng = np.random.default_rng(0)
    x = rng.uniform(-3, 3, size=(N, 2))
    y = np.sin(x[:, 0]) * np.cos(x[:, 1]) + 0.1 * rng.standard_normal(N)
    d = -0.5 * ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)  # -|xi - xj|^2 / 2
    params = [np.asarray(0.0), np.asarray(0.0), np.asarray(math.log(0.3))]
    return d, y, params


def numpy_case() -> Callable[[], Any]:
    d, y, p = data()
    eye = np.eye(N)

    def step() -> Any:
        ls2, sf2, sn2 = (float(np.exp(2 * q)) for q in p)
        kf = sf2 * np.exp(d / ls2)
        k = kf + sn2 * eye
        lo = np.linalg.cholesky(k)
        alpha = sla.cho_solve((lo, True), y, check_finite=False)
        nll = 0.5 * y @ alpha + np.log(np.diagonal(lo)).sum() + 0.5 * N * LOG2PI
        w = sla.cho_solve((lo, True), eye, check_finite=False)
        w -= np.outer(alpha, alpha)
        w *= 0.5
        g_ls = -2 * np.vdot(w, kf * d) / ls2
        g_sf = 2 * np.vdot(w, kf)
        g_sn = 2 * sn2 * np.trace(w)
        return nll, (g_ls, g_sf, g_sn)

    return step


def tenferro_case() -> Callable[[], Any]:
    import tenferro_ad as ad
    import tenferro_storage as ts
    from tenferro_ad import linalg as la

    d, y, p = data()
    # Constants as owners passed through value_and_grad (borrowed, never copied), like
    # the other frameworks' pre-built tensors; numpy constants would be copied per op.
    consts = (ts.from_numpy(d), ts.from_numpy(np.eye(N)), ts.from_numpy(y[:, None]))

    def nll(q: list[Any], hd: Any, eye: Any, ycol: Any) -> Any:
        ls2, sf2, sn2 = ad.exp(q[0] * 2.0), ad.exp(q[1] * 2.0), ad.exp(q[2] * 2.0)
        k = sf2 * ad.exp(hd / ls2) + sn2 * eye
        lo = la.cholesky(k)
        z = la.solve_triangular(lo, ycol, lower=True)
        alpha = la.solve_triangular(lo, z, lower=True, trans=1)
        return (ycol * alpha).sum() * 0.5 + ad.log(la.diagonal(lo)).sum() + 0.5 * N * LOG2PI

    vg = ad.value_and_grad(nll)

    def step() -> Any:
        v, g = vg(p, *consts)
        # zero-copy reads (a shared borrow of each owner); the owners travel along
        return v.to_numpy(), [x.prepare_host().as_array() for x in g], g

    return step


def torch_case(torch: Any) -> Callable[[], Any]:
    d, y, p = data()
    td, ty = torch.tensor(d), torch.tensor(y)[:, None]
    tp = [torch.tensor(float(q), dtype=torch.float64) for q in p]
    eye = torch.eye(N, dtype=torch.float64)

    def step() -> Any:
        q = [t.detach().requires_grad_(True) for t in tp]
        ls2, sf2, sn2 = (torch.exp(2 * t) for t in q)
        k = sf2 * torch.exp(td / ls2) + sn2 * eye
        lo = torch.linalg.cholesky(k)
        z = torch.linalg.solve_triangular(lo, ty, upper=False)
        alpha = torch.linalg.solve_triangular(lo.mT, z, upper=True)
        v = 0.5 * (ty * alpha).sum() + torch.log(torch.diagonal(lo)).sum() + 0.5 * N * LOG2PI
        v.backward()
        return v.item(), [t.grad.numpy() for t in q]

    return step


def autograd_case(autograd: Any) -> Callable[[], Any]:
    import autograd.numpy as anp  # type: ignore[import-untyped]
    import autograd.scipy.linalg as asl  # type: ignore[import-untyped]

    d, y, p = data()
    ycol = y[:, None]
    eye = np.eye(N)

    def nll(q: list[Any]) -> Any:
        ls2, sf2, sn2 = (anp.exp(2 * t) for t in q)
        k = sf2 * anp.exp(d / ls2) + sn2 * eye
        lo = anp.linalg.cholesky(k)
        z = asl.solve_triangular(lo, ycol, lower=True)
        alpha = asl.solve_triangular(lo, z, lower=True, trans=1)
        return 0.5 * anp.sum(ycol * alpha) + anp.sum(anp.log(anp.diag(lo))) + 0.5 * N * LOG2PI

    vg = autograd.value_and_grad(nll)
    return lambda: vg(p)


def jax_case(jax: Any) -> Callable[[], Any]:
    import jax.numpy as jnp
    from jax.scipy.linalg import solve_triangular

    d, y, p = data()
    jd, jy = jnp.asarray(d), jnp.asarray(y)[:, None]
    jp = [jnp.asarray(q) for q in p]
    eye = jnp.eye(N)

    def nll(q: list[Any]) -> Any:
        ls2, sf2, sn2 = (jnp.exp(2 * t) for t in q)
        k = sf2 * jnp.exp(jd / ls2) + sn2 * eye
        lo = jnp.linalg.cholesky(k)
        z = solve_triangular(lo, jy, lower=True)
        alpha = solve_triangular(lo, z, lower=True, trans=1)
        return 0.5 * (jy * alpha).sum() + jnp.log(jnp.diagonal(lo)).sum() + 0.5 * N * LOG2PI

    vg = jax.jit(jax.value_and_grad(nll))

    def step() -> Any:
        v, g = vg(jp)
        return np.asarray(v), [np.asarray(x) for x in g]

    return step


def cases() -> dict[str, Callable[[], Any]]:
    out: dict[str, Callable[[], Any]] = {H.BASE: numpy_case(), "tenferro": tenferro_case()}
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
    """Every framework computes the same value and gradient (else the timing is moot)."""
    v0, g0 = cs[H.BASE]()[:2]
    for name, fn in cs.items():
        v, g = fn()[:2]
        np.testing.assert_allclose(float(v), v0, rtol=1e-8, err_msg=name)
        np.testing.assert_allclose(np.asarray(g, dtype=float), g0, rtol=1e-6, err_msg=name)


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
    H.report(f"Gaussian-process NLL step, N={N}, float64 (commit {H.commit()})", res)


if __name__ == "__main__":
    main()
