"""quimb's ``TNOptimizer`` with tenferro as its autodiff backend
(``tenferro_ad.tn.register_quimb``): an MPS ground state, a PEPS overlap and a circuit
fidelity, each loss and gradient through quimb's own contraction code, against quimb on JAX
and on PyTorch to 1e-10 in float64, and optimization runs that follow JAX's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import quimb.tensor as qtn

import tenferro_ad.tn as tn
from tenferro_storage import ledger

tn.register_quimb()
pytestmark = [
    # third-party notices: cotengra without the optional kahypar, torch reading quimb's
    # read-only parameter views (quimb on PyTorch, the comparison side)
    pytest.mark.filterwarnings("ignore:Couldn't import `kahypar`:UserWarning"),
    pytest.mark.filterwarnings("ignore:The given NumPy array is not writable:UserWarning"),
]
BACKENDS = ["jax"] + (["torch"] if __import__("importlib").util.find_spec("torch") else [])


def _mps_problem() -> tuple[Any, Callable[..., Any], Callable[..., Any], dict[str, Any]]:
    L = 6
    psi = qtn.MPS_rand_state(L, bond_dim=4, seed=0)

    def norm_fn(p: Any) -> Any:
        return p / (p.H @ p) ** 0.5

    def loss_fn(p: Any, H: Any) -> Any:
        b, h, k = qtn.tensor_network_align(p.H, H, p)
        return (b | h | k).contract(all, optimize="auto-hq")

    return psi, loss_fn, norm_fn, {"H": qtn.MPO_ham_heis(L)}


def _peps_problem() -> tuple[Any, Callable[..., Any], Callable[..., Any], dict[str, Any]]:
    peps = qtn.PEPS.rand(3, 3, bond_dim=2, seed=1)
    target = qtn.PEPS.rand(3, 3, bond_dim=2, seed=2)

    def norm_fn(p: Any) -> Any:
        return p / (p.H @ p) ** 0.5

    def loss_fn(p: Any, target: Any) -> Any:
        t = target / (target.H @ target) ** 0.5
        return -((p.H @ t) ** 2)

    return peps, loss_fn, norm_fn, {"target": target}


def _circuit_problem() -> tuple[Any, Callable[..., Any], None, dict[str, Any]]:
    n = 4
    circ = qtn.Circuit(n)
    rng = np.random.default_rng(3)
    for layer in range(2):
        for i in range(n):
            circ.apply_gate("U3", *rng.uniform(0, 2 * np.pi, 3), i, parametrize=True)
        for i in range(layer % 2, n - 1, 2):
            circ.apply_gate("CZ", i, i + 1)
    target = qtn.MPS_rand_state(n, bond_dim=2, seed=4, dtype="complex128")

    def loss_fn(psi: Any, target: Any) -> Any:
        # "greedy": cotengra's hyper search would fork worker processes under JAX
        return -abs((psi.H & target).contract(all, optimize="greedy")) ** 2

    return circ.psi, loss_fn, None, {"target": target}


PROBLEMS = {"mps_energy": _mps_problem, "peps_overlap": _peps_problem,
            "circuit_fidelity": _circuit_problem}


def _opt(problem: str, backend: str) -> Any:
    tn0, loss_fn, norm_fn, consts = PROBLEMS[problem]()
    # L-BFGS-B's line search on the circuit tries steps whose contraction overflows (the
    # suite's strict numpy errors raise there): the circuit uses quimb's adam
    optimizer = "adam" if problem == "circuit_fidelity" else "L-BFGS-B"
    return qtn.TNOptimizer(
        tn0, loss_fn=loss_fn, norm_fn=norm_fn, loss_constants=consts, optimizer=optimizer,
        autodiff_backend=backend, progbar=False,
        **({"jit_fn": False} if backend == "jax" else {}),
    )


@pytest.mark.parametrize("other", BACKENDS)
@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_loss_and_gradient_match_quimb_backends(problem: str, other: str) -> None:
    """The loss and its gradient at the start point agree with quimb on JAX/PyTorch."""
    if problem == "circuit_fidelity" and other == "torch":
        pytest.skip("quimb 1.16's TorchHandler cannot hand back a complex gradient "
                    "(torch's conjugate bit); the circuit is compared with JAX")
    ours, theirs = _opt(problem, "tenferro"), _opt(problem, other)
    x = theirs.vectorizer.vector.copy()
    np.testing.assert_array_equal(ours.vectorizer.vector, x)
    v0, g0 = ours.vectorized_value_and_grad(x.copy())
    g0 = g0.copy()
    v1, g1 = theirs.vectorized_value_and_grad(x.copy())
    assert abs(v0 - v1) <= 1e-10
    np.testing.assert_allclose(g0, g1, rtol=0, atol=1e-10)
    assert np.linalg.norm(g0) > 1e-3  # a gradient that could disagree
    assert abs(ours.vectorized_value(x.copy()) - v1) <= 1e-10


@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_optimization_follows_jax(problem: str) -> None:
    """Ten optimizer steps on tenferro and on JAX visit the same losses (1e-8: the optimizer
    amplifies rounding) and lower the loss."""
    runs = {}
    for backend in ("tenferro", "jax"):
        opt = _opt(problem, backend)
        opt.optimize(10)
        runs[backend] = np.array(opt.losses)
    a, b = runs["tenferro"], runs["jax"]
    n = min(len(a), len(b))
    assert n >= 5 and a[-1] < a[0]
    np.testing.assert_allclose(a[:n], b[:n], rtol=0, atol=1e-8)


def test_mps_evaluation_ledger() -> None:
    """One value-and-gradient: the parameter imports and gradient hand-backs are the only
    copies (TRANSFER, one per tensor each way), everything else is op outputs."""
    opt = _opt("mps_energy", "tenferro")
    n = len(opt.vectorizer.infos)
    x = opt.vectorizer.vector.copy()
    with ledger.capture() as rec:
        opt.vectorized_value_and_grad(x)
    assert dict(rec.copies) == {ledger.CopyReason.TRANSFER: 2 * n}


def test_jit_fn_matches_eager() -> None:
    """``jit_fn=True`` (the loss traced once by ``tenferro_ad.jit``) gives the eager values."""
    tn0, loss_fn, norm_fn, consts = _mps_problem()
    kw = {"loss_fn": loss_fn, "norm_fn": norm_fn, "loss_constants": consts,
          "autodiff_backend": "tenferro", "progbar": False}
    eager = qtn.TNOptimizer(tn0, **kw)
    jitted = qtn.TNOptimizer(tn0, jit_fn=True, **kw)
    x = eager.vectorizer.vector.copy()
    v0, g0 = eager.vectorized_value_and_grad(x.copy())
    g0 = g0.copy()
    v1, g1 = jitted.vectorized_value_and_grad(x.copy())
    assert abs(v0 - v1) <= 1e-12
    np.testing.assert_allclose(g0, g1, atol=1e-12)


def test_handler_refuses_a_device() -> None:
    """A GPU device is refused by name (tenferro runs on the host)."""
    with pytest.raises(ValueError, match="argument 'device'"):
        tn.TenferroHandler(device="cuda")
