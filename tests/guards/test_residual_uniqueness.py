"""Residual uniqueness and aliasing, table-driven over every registered primitive that
saves its output, an input, or both (issue 16).

The primitive list comes from ``tenferro_ad._core._primitive.REGISTRY`` and each primitive's
own residual declaration (``save_in`` / ``save_out``), so a new op is covered as soon
as it is registered.  Inputs come from a small table of argument makers: the first
candidate set on which the primitive's kernel runs without a floating-point error is
used (values in (0, 1) forming a symmetric positive-definite matrix serve almost every
op; ``arccosh`` needs values above 1).  Static parameters come from ``PARAMS``; the
only primitives skipped are listed in ``SKIPPED`` with the reason.

For every such primitive, while the tape still holds the residual:

* a saved output: ``y.into_value()`` raises ``NotUnique`` (the residual is a direct
  owner);
* a saved input that is a value on the tape: ``u.into_value()`` raises ``NotUnique``;
* a saved input that is a borrowed ``Tensor`` owner (another argument tracked):
  writing it raises ``BorrowError`` naming the tape;

and after ``backward`` all three work, the delivered gradients share no memory with
each other, with the inputs or with the output, and writing the moved-out output does
not change an already delivered gradient.

Checked by hand: each of the following makes tests here fail (on a temporary copy):
``rec.count += 1`` for ``save_out`` in ``_dispatch.bind`` removed; ``r0.count += 1``
(one saved input) removed; ``r.count += 1`` (several saved inputs) removed;
``_retain_owner`` replaced by keeping the bare owner (single and multi paths).  Each case
runs through ``bind`` and, where the public ops take one, through the straight path
(``bind1``/``bind2``), so both keep their residuals' counts and borrows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad

# importing these registers their primitives, so the table sees every op
import tenferro_ad.fft
import tenferro_ad.linalg
import tenferro_ad.scipy
import tenferro_storage as ts
from tenferro_ad import extend
from tenferro_ad._core._dispatch import bind1, bind2
from tenferro_ad._core._primitive import REGISTRY, Primitive
from tenferro_ad.errors import NotUnique
from tenferro_storage import _access
from tenferro_storage.errors import BorrowError

pytestmark = pytest.mark.both_borrow_modes  # debug mode and the default mode

# A symmetric, diagonally dominant (so positive-definite) matrix with entries in (0, 1).
SPD = np.array([[0.9, 0.2, 0.1], [0.2, 0.8, 0.3], [0.1, 0.3, 0.7]])
#: Candidate inputs per array argument, tried in order (all arguments get the same one).
CANDIDATES: tuple[np.ndarray[Any, Any], ...] = (SPD, SPD + 1.0, SPD * 0.5 + 0.05)
#: Inputs that the generic candidates cannot give.
INPUTS: dict[str, Callable[[], list[Any]]] = {
    "where": lambda: [np.array([[True, False, True]] * 3), SPD, SPD * 0.5],
    "triangular_solve": lambda: [np.tril(SPD), SPD],
}
#: Static parameters by primitive name (what the public op would pass).
PARAMS: dict[str, dict[str, Any]] = {
    "max": {"axes": (0,), "keepdims": False},
    "min": {"axes": (0,), "keepdims": False},
    "prod": {"axes": (0,), "keepdims": False},
    "prod_others": {"axes": (0,)},
    "cumprod": {"axis": 0},
    "einsum_binary": {"subscripts": "ij,jk->ik"},
    "polygamma": {"n": 1},
    "triangular_solve": {"lower": True, "trans": 0, "unit": False},
    "pinv": {"rtol": None},
}
#: Primitives that save something but cannot be exercised generically (name: reason).
SKIPPED: dict[str, str] = {}


def _saving() -> list[Primitive]:
    return sorted(
        (p for p in REGISTRY.values() if (p.save_in or p.save_out) and not p.nondiff),
        key=lambda p: p.name,
    )


def _inputs(prim: Primitive) -> tuple[list[Any], dict[str, Any]] | None:
    """Arguments on which ``prim``'s kernel runs cleanly (finite, no FP error), or None."""
    params = PARAMS.get(prim.name, {})
    nargs = max(prim.nargs, 1)
    choices = [INPUTS[prim.name]()] if prim.name in INPUTS else [
        [c.copy() for _ in range(nargs)] for c in CANDIDATES
    ]
    for args in choices:
        try:
            with np.errstate(all="raise"):
                out = np.asarray(prim.impl(*args, **params))
        except (FloatingPointError, ValueError, TypeError, np.linalg.LinAlgError):
            continue
        if out.dtype.kind in "fc" and np.all(np.isfinite(out)):
            return args, params
    return None


PRIMS = _saving()


def test_the_table_covers_every_saving_primitive() -> None:
    """Every registered primitive that saves something gets inputs (or is listed as
    skipped with a reason); the well-known ones are present."""
    names = {p.name for p in PRIMS}
    assert {"exp", "max", "maximum", "mul", "solve", "where", "cholesky"} <= names
    missing = [p.name for p in PRIMS if p.name not in SKIPPED and _inputs(p) is None]
    assert not missing, f"no argument maker for {missing}: add one to INPUTS/PARAMS"


@pytest.fixture
def plain_borrows() -> Iterator[None]:
    """Borrow debug mode off, so arrays read from values are the values' own memory."""
    previous = _access._set_debug_borrows(False)
    try:
        yield
    finally:
        _access._set_debug_borrows(previous)


def _float(a: Any) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.kind in "fc"


def _diff(prim: Primitive, i: int) -> bool:
    """Whether argument ``i`` has a VJP rule (``gammainc``'s ``a`` has none, as in JAX)."""
    return callable(prim.vjps[0 if prim.variadic else i])


def _ones_like_output(y: ad.EagerTensor) -> np.ndarray[Any, Any]:
    with y.value() as v:
        a = ts.kernel.read_array(v)
        return np.ones(a.shape, a.dtype)


def _arrays(values: list[Any]) -> list[np.ndarray[Any, Any]]:
    """The kernel arrays of owners / views (read in place; plain_borrows makes them the
    values' own memory)."""
    return [ts.kernel.read_array(v) for v in values]


def _assert_unshared(named: dict[str, np.ndarray[Any, Any]]) -> None:
    items = list(named.items())
    for i, (na, a) in enumerate(items):
        for nb, b in items[i + 1 :]:
            assert not np.shares_memory(a, b), f"{na} shares memory with {nb}"


def _straight(prim: Primitive, params: dict[str, Any]) -> Any:
    """The straight per-op path the public ops take for this primitive (``bind1`` for one
    argument, ``bind2`` for two, no parameters), or ``None``."""
    if params or prim.alias or prim.variadic:
        return None
    return {1: bind1, 2: bind2}.get(prim.nargs)


def _binders() -> list[tuple[Primitive, str]]:
    """Every primitive through ``bind``, and again through its straight path if it has one."""
    out = [(p, "bind") for p in PRIMS]
    for p in PRIMS:
        found = _inputs(p)
        if found is not None and _straight(p, found[1]) is not None:
            out.append((p, "straight"))
    return out


def _call(prim: Primitive, how: str, call: list[Any], params: dict[str, Any]) -> Any:
    if how == "straight":
        return _straight(prim, params)(prim, *call)
    return extend.bind(prim, *call, **params)


@pytest.mark.parametrize(("prim", "how"), _binders(), ids=lambda v: getattr(v, "name", v))
def test_saved_values_are_owned_by_the_tape_until_backward(
    prim: Primitive, how: str, plain_borrows: None
) -> None:
    """Saved output / saved input values refuse ``into_value`` while the tape holds them;
    after backward they move out, and nothing delivered shares memory."""
    if prim.name in SKIPPED:
        pytest.skip(SKIPPED[prim.name])
    found = _inputs(prim)
    assert found is not None
    args, params = found
    floats = [i for i, a in enumerate(args) if _float(a) and _diff(prim, i)]
    saved_in = [i for i in prim.save_in if i in floats]
    with ad.Tape() as tape:
        leaves = {i: tape.watch(ts.from_numpy(args[i])) for i in floats}
        # a saved input that is an intermediate value (not a leaf): add saves nothing,
        # so its record is owned by its handle alone unless the residual counts.
        mids = {i: leaves[i] + 0.0 for i in saved_in}
        call = [mids.get(i, leaves.get(i, args[i])) for i in range(len(args))]
        y = _call(prim, how, call, params)
    if prim.save_out:
        with pytest.raises(NotUnique):
            y.into_value()
    for u in mids.values():
        with pytest.raises(NotUnique):
            u.into_value()
    seed = _ones_like_output(y)
    g = tape.backward(y, cotangent=seed, wrt=[leaves[i] for i in floats])
    grads = {f"grad{i}": g.take_grad(leaves[i]) for i in floats}
    grads = {k: v for k, v in grads.items() if v is not None}
    y_owner = y.into_value()  # nothing else owns the output now
    mid_owners = {i: u.into_value() for i, u in mids.items()}
    arrays = dict(zip(grads, _arrays(list(grads.values())), strict=True))
    arrays["output"] = ts.kernel.read_array(y_owner)
    for i, o in mid_owners.items():
        arrays[f"input{i}"] = ts.kernel.read_array(o)
    _assert_unshared(arrays)
    before = {k: ts.kernel.read_array(v).copy() for k, v in grads.items()}
    if y_owner.dtype.is_floating:
        y_owner.fill(100.0)  # writing the moved-out output never reaches a gradient
    for o in mid_owners.values():
        o.fill(-5.0)
    for k, v in grads.items():
        np.testing.assert_array_equal(ts.kernel.read_array(v), before[k])
    del arrays, before, leaves, g


def _owner_cases() -> list[tuple[Primitive, int, str]]:
    """(primitive, saved input position, binder) where another argument can be tracked."""
    out = []
    for p in PRIMS:
        if p.name in SKIPPED or p.nargs < 2:
            continue
        found = _inputs(p)
        if found is None:
            continue
        args, _ = found
        for i in p.save_in:
            if any(_float(args[j]) and _diff(p, j) for j in range(len(args)) if j != i):
                out.append((p, i, "bind"))
                if _straight(p, found[1]) is not None:
                    out.append((p, i, "straight"))
    return out


@pytest.mark.parametrize(
    ("prim", "pos", "how"), _owner_cases(), ids=lambda v: getattr(v, "name", v)
)
def test_a_saved_borrowed_owner_cannot_be_written_until_backward(
    prim: Primitive, pos: int, how: str
) -> None:
    """A ``Tensor`` owner passed as a saved input (another argument tracked) is borrowed
    by the tape: ``fill`` raises ``BorrowError`` naming it; after backward it works and
    the gradients are unchanged by the write."""
    found = _inputs(prim)
    assert found is not None
    args, params = found
    owner = ts.from_numpy(args[pos])
    with ad.Tape() as tape:
        leaves = {
            j: tape.watch(ts.from_numpy(a))
            for j, a in enumerate(args)
            if j != pos and _float(a) and _diff(prim, j)
        }
        call = [owner if j == pos else leaves.get(j, args[j]) for j in range(len(args))]
        y = _call(prim, how, call, params)
    fill = True if owner.dtype.name == "bool" else 2.0
    with pytest.raises(BorrowError, match=tape.name):
        owner.fill(fill)
    np.testing.assert_array_equal(owner.to_numpy(), args[pos])  # the refusal changed nothing
    g = tape.backward(y, cotangent=_ones_like_output(y))
    owner.fill(fill)  # the tape let go of it
    for h in leaves.values():
        assert g.grad(h) is not None
    del y, g, leaves
