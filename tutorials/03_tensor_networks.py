"""Tutorial 3: tensor networks — contractions, complex numbers and factorizations.

Run: ``python tutorials/03_tensor_networks.py``

We build a small complex matrix product state (MPS), contract its norm with
``ad.einsum`` (pairwise, along a cached opt_einsum path), differentiate it, check the
gradient against JAX's convention, canonicalize a bond with a differentiable SVD, and
compute a ground-state energy through ``eigh`` — while the ledger proves that every
contraction intermediate was released as soon as it was consumed and nothing was copied.
"""

import numpy as np

import tenferro_ad as ad
from tenferro_ad import linalg as la
from tenferro_storage import ledger

rng = np.random.default_rng(0)
L, D, P = 5, 4, 2  # sites, bond dimension, physical dimension


def random_mps() -> list[np.ndarray]:
    shapes = [(1, P, D)] + [(D, P, D)] * (L - 2) + [(D, P, 1)]
    return [rng.standard_normal(s) + 1j * rng.standard_normal(s) for s in shapes]


# %% 1. The norm <psi|psi> as a chain of three-tensor einsums.
def norm(*tensors):
    env = ad.einsum("apb,cpd->bd", tensors[0], ad.conj(tensors[0]))
    for t in tensors[1:]:
        # one einsum per site; the planner picks the order (env with t first, then conj t)
        env = ad.einsum("ac,apb,cpd->bd", env, t, ad.conj(t))
    return ad.real(env).sum()


mps = random_mps()
print("norm:", norm(*mps).item())

# %% 2. Gradients of a real loss of complex tensors follow JAX: dL/dRe - i dL/dIm.
grads = ad.grad(norm, argnums=tuple(range(L)))(*mps)
g0 = grads[0].to_numpy()
# For the norm, d<psi|psi>/d conj(A) = (environment) * A, so JAX's gradient is 2 conj(...):
eps = 1e-6
bump = np.zeros_like(mps[0])
bump[0, 0, 0] = eps
fd_re = (norm(mps[0] + bump, *mps[1:]).item() - norm(mps[0] - bump, *mps[1:]).item()) / (2 * eps)
fd_im = (norm(mps[0] + 1j * bump, *mps[1:]).item() - norm(mps[0] - 1j * bump, *mps[1:]).item()) / (
    2 * eps
)
np.testing.assert_allclose(g0[0, 0, 0], fd_re - 1j * fd_im, rtol=1e-6)
print("gradient convention check passed (JAX: dL/dRe z - i dL/dIm z)")

# %% 3. The ledger: contraction intermediates live only until the next step consumes them.
x = [ad.stop_gradient(ad.conj(ad.conj(t))) for t in mps[:3]]  # handles, no tape
with ledger.capture() as rec:
    out = ad.einsum("apb,bqc,crd->apqrd", *x)
    del out
kinds = [(e.kind.name, e.reason.name if e.reason else None) for e in rec.events]
print("ledger events:", kinds)
assert all(k != "COPY" for k, _ in kinds), "a contraction never copies"
assert sum(k == "ALLOCATE" for k, _ in kinds) == sum(k == "RELEASE" for k, _ in kinds)

# %% 4. A differentiable SVD: truncate a two-site bond and measure the kept weight.
theta = ad.einsum("apb,bqc->apqc", mps[1], mps[2])
m = ad.reshape(theta, (D * P, P * D))
u, s, vh = la.svd(m)
kept = (s[:D] ** 2).sum() / (s**2).sum()
print("kept weight at bond dimension", D, "=", round(kept.item(), 6))


def truncation_loss(a, b):
    th = ad.reshape(ad.einsum("apb,bqc->apqc", a, b), (D * P, P * D))
    s = la.svd(th)[1]
    return 1.0 - (s[:2] ** 2).sum() / (s**2).sum()  # the weight a bond of 2 would lose


ga, gb = ad.grad(truncation_loss, argnums=(0, 1))(mps[1], mps[2])
print("|d loss / d A| =", round(float(np.abs(ga.to_numpy()).sum()), 6))

# %% 5. Ground-state energy of a transverse-field Ising chain through eigh.
sx = np.array([[0.0, 1.0], [1.0, 0.0]])
sz = np.diag([1.0, -1.0])
n = 4


def site_op(op, i):
    out = np.eye(1)
    for j in range(n):
        out = np.kron(out, op if j == i else np.eye(2))
    return out


zz = sum(site_op(sz, i) @ site_op(sz, i + 1) for i in range(n - 1))
xs = sum(site_op(sx, i) for i in range(n))
terms = np.stack([zz, xs])


def energy(couplings):
    h = ad.einsum("k,kij->ij", couplings, terms)
    return la.eigh(h)[0][0]


J_h = np.array([-1.0, -0.5])
e0 = energy(J_h).item()
dE = ad.grad(energy)(J_h).to_numpy()
# Hellmann-Feynman: dE0/dJ = <zz>, dE0/dh = <x> in the ground state
w, v = np.linalg.eigh(np.einsum("k,kij->ij", J_h, terms))
np.testing.assert_allclose(dE, [v[:, 0] @ zz @ v[:, 0], v[:, 0] @ xs @ v[:, 0]], rtol=1e-8)
print(f"E0 = {e0:.6f}, dE0/d(J, h) = {dE} (Hellmann-Feynman check passed)")
