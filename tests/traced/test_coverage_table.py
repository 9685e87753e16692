"""The coverage table: every primitive of the registry, through every transform, vs JAX.

Each primitive in ``tenferro_ad``'s registry is *driven* by a row of the one op table
(``tests/_opspecs.py``): the first row whose traced graph applies it (or, for a primitive
that only a derivative emits -- ``scatter_add``, ``slice_pad``, ``put_along_add``... --
the first row whose gradient or JVP graph does).  A primitive no row drives must be listed
in :data:`UNDRIVEN` with the reason, so a new op is covered automatically or fails here.

Every driving row runs, for each of its dtypes, the modes of :data:`MODES`: eager,
``jit`` (the default engine, XLA here) and ``jit`` on the host engine, ``vmap`` with
``in_axes`` 0, 1, -1 and ``(0, None, ...)``, ``grad`` of ``jit``, ``jit`` of ``grad`` (both
engines), ``jacrev``/``jacfwd``/``hessian`` inside ``jit``, ``grad`` through
``checkpoint`` with each policy, and ``custom_vjp``/``custom_jvp`` wrappers of the op
(whose rules are the op's own ``vjp``/``jvp``) eagerly and under ``jit`` -- comparing
values, dtypes and shapes with JAX.  A *cell* is (primitive, mode, dtype); the cells of a
primitive are those of its driving row.  Derivative modes exist where the output is
inexact; ``jacrev``/``jacfwd``/``hessian`` for real dtypes (JAX defines them for complex
input only as holomorphic).  Every cell passes, or is listed in :data:`REFUSALS` (a clear
error, asserted to be raised) or in :data:`KNOWN` (a difference owned by another open
item, asserted to still differ, so the entry is removed when the fix lands).

Profiles: ``TENFERRO_THOROUGH=1`` runs every cell (every dtype of every row, every mode
that applies).  dev/CI run a deterministic subset that still visits every primitive and
every mode: each row in its widest dtype (float64, or complex128 where the row defines
it), eager and ``jit`` always, and :data:`FAST_EXTRA` of its other modes in rotation by
the row's position.  JAX runs op by op (``jax.disable_jit``), each reference computed
once per case.  ``test_the_fast_profile_visits_every_mode`` checks the rotation's reach.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import traced
from tenferro_ad._core._primitive import REGISTRY
from tenferro_ad.errors import MissingRuleError
from tests._opspecs import OPS, Op
from tests.ad._opcheck import THOROUGH, inputs

jax.config.update("jax_enable_x64", True)

POLICIES = {
    "save_nothing": ad.save_nothing,
    "save_everything": ad.save_everything,
    "save_contractions": ad.save_contractions,
    "save_named": ad.save_named("x"),
}
MODES = (
    "eager", "jit", "jit[host]", "vmap0", "vmap1", "vmap-1", "vmapNone", "grad(jit)",
    "jit(grad)", "jit(grad)[host]", "jit(jacrev)", "jit(jacfwd)", "jit(hessian)",
    *(f"checkpoint[{p}]" for p in POLICIES),
    "custom_vjp", "jit(custom_vjp)", "custom_jvp", "jit(custom_jvp)",
)
DERIVATIVE = {
    m for m in MODES if not (m in ("eager", "jit", "jit[host]") or m.startswith("vmap"))
}
# dev/CI: every row runs eager and jit, plus FAST_EXTRA of the other modes, chosen by the
# row's position in rotation so that every mode is visited by many rows (and every
# primitive by its row); TENFERRO_THOROUGH=1 runs every mode of every row
FAST_ALWAYS = ("eager", "jit")
FAST_EXTRA = 3
REAL_ONLY = {"jit(jacrev)", "jit(jacfwd)", "jit(hessian)"}

# primitives no row can drive, and why (each is still exercised where stated)
UNDRIVEN: dict[str, str] = {
    "identity": "the alias op the tape records for an input returned as is; a graph never "
    "holds it (tests/ad/test_bind_fast_paths.py)",
    "reshape_copy": "traced as reshape (CANONICAL): eager's copy-or-alias split has no "
    "graph form",
    "same": "eager-only bookkeeping of an argument aliased to the output",
    "fill": "a constant constructor (full_like, zeros_like...): its argument is a Python "
    "scalar, so a trace folds it into a literal (tests/ad/test_ops_manip.py)",
    "eye": "a constant constructor: a trace folds it into a literal "
    "(tests/ad/test_ops_manip.py)",
}

_F = ("float32", "float64")
_NO_RULE = (
    MissingRuleError, "svd_full_matrices",
    "full_matrices=True of a non-square matrix has no derivative (JAX: NotImplementedError)",
)
# (row, mode, dtype) -> (error type, message fragment, why): documented refusals
REFUSALS: dict[tuple[str, str, str], tuple[type[BaseException], str, str]] = {
    **{("la.svd_full", m, d): _NO_RULE for m in DERIVATIVE for d in _F},
    **{("view_as_complex", "vmap-1", d): (
        TypeError, "unit-stride",
        "a zero-copy reinterpretation needs the trailing axis of 2 contiguous; a batch axis "
        "moved behind it breaks that (JAX copies)") for d in _F},
}

# (row, mode, dtype) -> the open item that owns a difference (asserted to still differ, so
# the entry goes when its fix lands); none is open now
KNOWN: dict[tuple[str, str, str], str] = {}


def _builtin() -> set[str]:
    """The package's own primitives: not a user primitive (``extend``), not one a test
    file registers (its kernel is defined in the test suite), whichever files share this
    worker."""
    return {
        n for n, p in REGISTRY.items()
        if not p.checked and not str(getattr(p.impl, "__module__", "")).startswith("tests")
    }


def _graph_prims(g: traced.Graph) -> list[str]:
    return [e.prim.name for e in g.eqns]


def _drive() -> tuple[dict[str, Op], dict[str, list[str]]]:
    """primitive -> its driving row; row name -> the primitives it drives."""
    rows: dict[str, Op] = {}
    later: list[tuple[Op, list[np.ndarray]]] = []
    for op in OPS:
        for dtype in dict.fromkeys(("float64" if "float64" in op.dtypes else op.dtypes[-1],
                                    op.dtypes[-1])):
            try:
                xs, _ = inputs(op, 0, dtype)
                g = traced.trace(op.ours)(*xs)
            except Exception:  # a row that cannot trace (TRACED_GAPS) drives nothing
                continue
            for p in _graph_prims(g):
                rows.setdefault(p, op)
            later.append((op, xs))
    for op, xs in later:  # primitives only a derivative emits
        if _builtin() - set(UNDRIVEN) <= set(rows):
            break
        try:
            g = traced.trace(op.ours)(*xs)
            if g.outvars[0].dtype.kind not in "fc":
                continue
            for t in (traced.vjp(g), traced.jvp(g)):
                for p in _graph_prims(t):
                    rows.setdefault(p, op)
        except Exception:
            continue
    by_row: dict[str, list[str]] = {}
    for p, op in rows.items():
        by_row.setdefault(op.name, []).append(p)
    return rows, by_row


def _widest(dtypes: tuple[str, ...]) -> tuple[str, ...]:
    out = tuple(d for d in dtypes if d in ("float64", "complex128"))
    return out or dtypes[-1:]


DRIVER, DRIVES = _drive()
ROWS = {op.name: op for op in OPS if op.name in DRIVES}
ROW_INDEX = {name: i for i, name in enumerate(ROWS)}
# dev/CI: each row in its widest dtype (float64, complex128 where defined); every dtype of
# every row (float32 and complex64 too) under TENFERRO_THOROUGH=1
CASES = [
    pytest.param(name, dtype, id=f"{name}-{dtype}")
    for name, op in ROWS.items()
    for dtype in (op.dtypes if THOROUGH else _widest(op.dtypes))
]


def test_every_registered_primitive_is_driven_or_documented() -> None:
    """A built-in primitive is covered by a row of the op table, or UNDRIVEN says why not."""
    missing = _builtin() - set(DRIVER) - set(UNDRIVEN)
    assert not missing, f"primitives no op-table row drives (add a row): {sorted(missing)}"
    stale = set(UNDRIVEN) & set(DRIVER)
    assert not stale, f"UNDRIVEN lists primitives a row drives now: {sorted(stale)}"


# -- the cells -----------------------------------------------------------------------------
def _np(x: Any) -> Any:
    if isinstance(x, tuple | list):
        return [_np(v) for v in x]
    if hasattr(x, "to_numpy"):
        return x.to_numpy()
    return np.asarray(x)


def _close(got: Any, want: Any, tol: float) -> None:
    if isinstance(want, tuple | list):
        assert isinstance(got, list) and len(got) == len(want), (type(got), len(want))
        for a, b in zip(got, want, strict=True):
            _close(a, b, tol)
        return
    a, b = np.asarray(got), np.asarray(want)
    assert a.shape == b.shape, f"shape {a.shape} != JAX {b.shape}"
    assert a.dtype == b.dtype, f"dtype {a.dtype} != JAX {b.dtype}"
    if a.dtype.kind == "b" or a.dtype.kind in "iu":
        np.testing.assert_array_equal(a, b)
        return
    fin = np.isfinite(b)
    scale = max(1.0, float(np.max(np.abs(b[fin]), initial=0.0)))
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol * scale, equal_nan=True)


def _axes(xs: list[np.ndarray], mode: str) -> tuple[Any, ...]:
    if mode == "vmapNone":
        return (0,) + (None,) * (len(xs) - 1)
    k = int(mode[4:])
    return tuple(k if k < 0 or np.ndim(x) >= k else 0 for x in xs)


def _batched(xs: list[np.ndarray], axes: tuple[Any, ...]) -> list[np.ndarray]:
    return [x if ax is None else np.stack([x, (x * 0.97).astype(x.dtype)], axis=ax)
            for x, ax in zip(xs, axes, strict=True)]


class Case:
    """One (row, dtype): its inputs, the weighted real loss, and the JAX references
    (computed on first use, op by op)."""

    def __init__(self, op: Op, dtype: str) -> None:
        self.op, self.dtype = op, dtype
        self.xs, rng = inputs(op, 0, dtype)
        with jax.disable_jit():
            ref = np.asarray(op.theirs(*self.xs))
        self.value = ref
        self.inexact = ref.dtype.kind in "fc"
        self.complex = any(np.iscomplexobj(x) for x in self.xs)
        rdt = np.real(np.zeros((), ref.dtype)).dtype if self.inexact else np.float64
        self.w = rng.normal(size=ref.shape).astype(rdt)
        self.nums = tuple(range(len(self.xs)))
        self.tol = op.rtol32 if dtype in ("float32", "complex64") else max(op.rtol64, 1e-8)
        self._refs: dict[str, Any] = {}

    def loss(self, m: Any, f: Callable[..., Any]) -> Callable[..., Any]:
        w = self.w

        def loss(*a: Any) -> Any:
            y = f(*a) * w
            return m.sum(m.real(y)) if np.iscomplexobj(self.value) else m.sum(y)

        return loss

    def ref(self, key: str) -> Any:
        got = self._refs.get(key)
        if got is None:
            op, xs = self.op, self.xs
            with jax.disable_jit():
                if key.startswith("vmap"):
                    axes = _axes(xs, key)
                    got = jax.vmap(op.theirs, in_axes=axes)(*_batched(xs, axes))
                elif key == "grad":
                    got = jax.grad(self.loss(jnp, op.theirs), argnums=self.nums)(*xs)
                elif key in ("jacrev", "jacfwd"):  # (their dtypes differ when the output's
                    # precision is lower than the input's: each mode has its own)
                    jac = jax.jacrev if key == "jacrev" else jax.jacfwd
                    got = jac(lambda a: op.theirs(a, *xs[1:]))(xs[0])
                else:  # hessian
                    got = jax.hessian(lambda a: self.loss(jnp, op.theirs)(a, *xs[1:]))(xs[0])
            got = [np.asarray(g) for g in got] if isinstance(got, tuple) else np.asarray(got)
            self._refs[key] = got
        return got


def _custom_vjp(f: Callable[..., Any]) -> Any:
    cf = ad.custom_vjp(f)
    cf.defvjp(lambda *a: (cf(*a), a), lambda res, g: tuple(ad.vjp(f, *res)[1](g)))
    return cf


def _custom_jvp(f: Callable[..., Any]) -> Any:
    cf = ad.custom_jvp(f)
    cf.defjvp(lambda p, t: ad.jvp(f, tuple(p), tuple(t)))
    return cf


def _run(c: Case, mode: str) -> tuple[Any, Any]:
    """(ours, JAX's) for one cell."""
    f, xs = c.op.ours, c.xs
    owners = [ts.from_numpy(x) for x in xs]
    if mode == "eager":
        return _np(f(*owners)), c.value
    if mode == "jit":  # the default engine: XLA when jax is installed (it is, here)
        return _np(ad.jit(f)(*xs)), c.value
    if mode == "jit[host]":
        return _np(ad.jit(f, engine="host")(*xs)), c.value
    if mode == "jit(grad)[host]":
        g = ad.jit(ad.grad(c.loss(ad, f), argnums=c.nums), engine="host")
        return _np(g(*xs)), c.ref("grad")
    if mode.startswith("vmap"):
        axes = _axes(xs, mode)
        return _np(ad.vmap(f, in_axes=axes)(*_batched(xs, axes))), c.ref(mode)
    if mode == "jit(jacrev)" or mode == "jit(jacfwd)":
        jac = ad.jacrev if mode == "jit(jacrev)" else ad.jacfwd
        return _np(ad.jit(lambda a, *r: jac(lambda b: f(b, *r))(a))(*xs)), c.ref(mode[4:-1])
    if mode == "jit(hessian)":
        loss = c.loss(ad, f)
        return _np(ad.jit(lambda a, *r: ad.hessian(lambda b: loss(b, *r))(a))(*xs)), c.ref(
            "hessian"
        )
    if mode.startswith("checkpoint"):
        policy = POLICIES[mode[len("checkpoint[") : -1]]
        got = ad.grad(c.loss(ad, ad.checkpoint(f, policy=policy)), argnums=c.nums)(*owners)
        return _np(got), c.ref("grad")
    if mode == "grad(jit)":
        return _np(ad.grad(c.loss(ad, ad.jit(f)), argnums=c.nums)(*owners)), c.ref("grad")
    if mode == "jit(grad)":
        return _np(ad.jit(ad.grad(c.loss(ad, f), argnums=c.nums))(*xs)), c.ref("grad")
    wrapped = _custom_vjp(f) if "custom_vjp" in mode else _custom_jvp(f)
    g = ad.grad(c.loss(ad, wrapped), argnums=c.nums)
    got = ad.jit(g)(*xs) if mode.startswith("jit") else g(*owners)
    return _np(got), c.ref("grad")


def _modes(c: Case) -> list[str]:
    """The modes this case runs: every mode that applies (thorough), or (dev/CI) eager,
    jit and :data:`FAST_EXTRA` others in rotation by the row's position."""
    out = _applicable(c)
    if THOROUGH:
        return out
    rest = [m for m in out if m not in FAST_ALWAYS]
    k = ROW_INDEX[c.op.name] * FAST_EXTRA
    picked = {rest[(k + j) % len(rest)] for j in range(min(FAST_EXTRA, len(rest)))}
    return [m for m in out if m in FAST_ALWAYS or m in picked]


def _applicable(c: Case) -> list[str]:
    out = []
    for m in MODES:
        if m in DERIVATIVE and not c.inexact:
            continue
        if m in REAL_ONLY and (c.complex or np.iscomplexobj(c.value)):
            continue
        if m == "vmapNone" and len(c.xs) < 2:
            continue
        out.append(m)
    return out


CELLS: dict[str, int] = {"cells": 0, "refusals": 0, "known": 0}


@pytest.mark.parametrize(("name", "dtype"), CASES)
def test_coverage_cell_matches_jax_or_is_a_documented_refusal(name: str, dtype: str) -> None:
    """Every mode of the row driving these primitives matches JAX (value, dtype, shape),
    or raises its documented refusal, or still shows its KNOWN difference."""
    c = Case(ROWS[name], dtype)
    failures = []
    n_prims = len(DRIVES[name])
    for mode in _modes(c):
        key = (name, mode, dtype)
        CELLS["cells"] += n_prims
        if key in REFUSALS:
            CELLS["refusals"] += n_prims
            err, match, _ = REFUSALS[key]
            with pytest.raises(err, match=match):
                _run(c, mode)
            continue
        try:
            got, want = _run(c, mode)
            _close(got, want, c.tol)
        except Exception as e:
            if key in KNOWN:
                CELLS["known"] += n_prims
                continue
            failures.append(f"{mode}: {type(e).__name__}: {str(e)[:300]}")
            continue
        if key in KNOWN:
            failures.append(f"{mode}: listed in KNOWN ({KNOWN[key]}) but passes: remove it")
    assert not failures, f"{name} [{dtype}] drives {DRIVES[name]}:\n" + "\n".join(failures)


def test_the_fast_profile_visits_every_mode() -> None:
    """The dev/CI subset (the cases' own mode selection, :func:`_modes`) still runs every
    mode on several rows, and every row (so every primitive) in eager and jit."""
    seen: dict[str, int] = dict.fromkeys(MODES, 0)
    for p in CASES:
        name, dtype = p.values
        for m in _modes(Case(ROWS[str(name)], str(dtype))):
            seen[m] += 1
    assert min(seen.values()) >= 3, seen
