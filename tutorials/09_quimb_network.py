"""Tutorial 9: quimb networks on tenferro — TNOptimizer, cotengra trees, a memory bound.

Run: ``python tutorials/09_quimb_network.py`` (needs the ``[tn]`` extra: autoray, quimb,
cotengra; the ``[test]`` extra installs it).

People in the tensor-network field build their networks with quimb and contract them with
cotengra, over whatever array library autoray dispatches to.  ``tenferro_ad.tn`` makes
tenferro one of those libraries: ``register_quimb()`` adds tenferro as an autoray backend
and as quimb's autodiff backend.  Here: quimb's ``TNOptimizer`` finds the ground state of a
Heisenberg chain as a matrix product state, the gradient running through quimb's own
contraction code on tenferro values; the ledger reports what one evaluation allocated and
copied; then a PEPS norm contracted along a cotengra tree, with its gradient, under a
memory bound that the ledger's peak proves.
"""

from __future__ import annotations

import warnings
from typing import Any

# cotengra notes once that the optional kahypar partitioner is missing (greedy is used here)
warnings.filterwarnings("ignore", message="Couldn't import `kahypar`")

import autoray  # noqa: E402
import cotengra as ctg  # noqa: E402
import numpy as np  # noqa: E402
import quimb as qu  # noqa: E402
import quimb.tensor as qtn  # noqa: E402

import tenferro_ad as ad  # noqa: E402
import tenferro_ad.tn as tn  # noqa: E402
import tenferro_storage as ts  # noqa: E402
from tenferro_storage import ledger  # noqa: E402

# %% 1. Register once: autoray's ``do`` on a tenferro value now runs tenferro's op.
# Registration is explicit (importing tenferro never touches autoray's global tables);
# ``register_quimb`` also registers the autoray backend.
backend = tn.register_quimb()
x = ad.asarray(np.arange(6.0).reshape(2, 3))
y = autoray.do("tensordot", x, autoray.do("transpose", x), 1)
print(f"[1] quimb autodiff backend {backend!r}; autoray.do('tensordot', ...) on tenferro "
      f"values returns a tenferro {type(y).__name__}: {y.to_numpy().tolist()}")

# %% 2. A variational MPS ground state with quimb's TNOptimizer on tenferro.
# The loss is quimb code written for any backend: align <psi|H|psi> and contract it.
# quimb hands tenferro its parameter arrays; tenferro's reverse mode runs through quimb's
# contraction (every tensordot/einsum/conj is a tenferro op) and hands the gradient back.
L, BOND = 6, 4
psi0 = qtn.MPS_rand_state(L, bond_dim=BOND, seed=0)
H = qtn.MPO_ham_heis(L)


def normalize(psi: Any) -> Any:
    return psi / (psi.H @ psi) ** 0.5


def energy(psi: Any, H: Any) -> Any:
    bra, ham, ket = qtn.tensor_network_align(psi.H, H, psi)
    return (bra | ham | ket).contract(all, optimize="auto-hq")


opt = qtn.TNOptimizer(
    psi0, loss_fn=energy, norm_fn=normalize, loss_constants={"H": H},
    autodiff_backend=backend, optimizer="L-BFGS-B", progbar=False,
)
psi = opt.optimize(60)
exact = qu.groundenergy(qu.ham_heis(L))
print(f"[2] {L}-site Heisenberg MPS, bond {BOND}: energy {opt.loss:.8f} after "
      f"{len(opt.losses)} evaluations (exact {exact:.8f}, gap {opt.loss - exact:.1e})")
assert opt.loss - exact < 1e-2

# %% 3. The ledger report of one loss-and-gradient evaluation.
# The only copies are the handovers: quimb's parameters imported (one TRANSFER each, quimb
# overwrites its vector between calls) and the gradients handed back (one TRANSFER each);
# every contraction intermediate is an op output, released by the end.
x0 = opt.vectorizer.vector.copy()
with ledger.capture() as rec:
    opt.vectorized_value_and_grad(x0)
print(f"[3] one evaluation of {len(psi.tensors)} parameter tensors:")
print("    allocations by reason:")
print("\n".join("      " + line for line in str(rec.allocations).splitlines()))
print("    copies by reason:")
print("\n".join("      " + line for line in str(rec.copies).splitlines()))
print(f"    peak {rec.peak_bytes:,} bytes, live after the call {rec.live_bytes} bytes")
assert dict(rec.copies) == {ts.CopyReason.TRANSFER: 2 * len(psi.tensors)}

# %% 4. A PEPS norm as one einsum along a cotengra tree, its gradient under a memory bound.
# ``ad.einsum(eq, *arrays, optimize=tree, memory_limit=bound)`` follows cotengra's tree;
# when the bound is below the plan's need, contracted labels are sliced: the sub-trees no
# sliced label reaches are contracted once, each slice of the rest is a checkpoint region,
# and backward recomputes the slices (CHECKPOINT_RECOMPUTE_OUTPUT).
peps = qtn.PEPS.rand(3, 3, bond_dim=3, seed=1)
norm_tn = peps.H & peps
eq = norm_tn.get_equation(output_inds=())
inputs, output, sizes = norm_tn.get_inputs_output_size_dict(output_inds=())
tree = ctg.HyperOptimizer(
    methods=["greedy"], max_repeats=4, parallel=False, progbar=False
).search(inputs, output, sizes)
arrays = [ts.from_numpy(t.data) for t in norm_tn]
print(f"[4] PEPS norm: {len(arrays)} tensors, largest intermediate {int(tree.max_size()):,} "
      "elements")
reference = None
for bound in (None, 50_000, 30_000):
    value_and_grad = ad.value_and_grad(
        lambda *xs, bound=bound: ad.einsum(eq, *xs, optimize=tree, memory_limit=bound),
        argnums=tuple(range(len(arrays))),
    )
    with ledger.capture() as rec:
        value, grads = value_and_grad(*arrays)
    if reference is None:
        reference = (value.item(), grads[0].to_numpy())
    np.testing.assert_allclose(value.item(), reference[0], rtol=1e-12)
    np.testing.assert_allclose(grads[0].to_numpy(), reference[1], rtol=1e-10)
    recomputed = rec.allocations[ts.AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT]
    limit = "no bound     " if bound is None else f"bound {bound:>7,} B"
    print(f"    {limit}: ledger peak {rec.peak_bytes:>9,} B, {recomputed:4d} recomputed "
          f"intermediates, value {value.item():.6e}")
    assert bound is None or rec.peak_bytes <= bound
    del value, grads
