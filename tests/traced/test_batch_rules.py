"""Every primitive has a batching rule, and each rule equals the per-example computation.

``test_every_builtin_primitive_has_a_batching_rule`` reads the registry, so a new
primitive without a rule (it would be batched by the loop fallback: one equation per
batch element) fails here.  ``SAMPLES`` applies each primitive once to example arguments
(``TRACE_NS.apply``: no public wrapper in between); the rule's batched graph, under
several ``in_axes``, must equal the primitive's own kernel applied per example and
stacked, with a graph whose size does not grow with the batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad  # noqa: F401  (registers every built-in primitive)
from tenferro_ad import traced
from tenferro_ad._core._primitive import REGISTRY
from tenferro_ad._traced._batch_rules import RULES
from tenferro_ad._traced._trace import TRACE_NS

_RNG = np.random.default_rng(2026)


def _u(lo: float, hi: float, *shape: int) -> np.ndarray:
    return _RNG.uniform(lo, hi, shape)


def _spd(n: int) -> np.ndarray:
    a = _RNG.normal(size=(n, n))
    return a @ a.T + n * np.eye(n)


def _lower(n: int) -> np.ndarray:
    return np.tril(_RNG.normal(size=(n, n))) + 3 * np.eye(n)


_X = _u(0.2, 0.8, 3, 4)
_Y = _u(0.2, 0.8, 4)
_C = _X + 1j * _u(-1, 1, 3, 4)
_UNARY = (
    "tan", "sinh", "cosh", "arcsin", "arccos", "arctan", "arcsinh", "arctanh", "log2",
    "log10", "exp2", "cbrt", "isnan", "isinf", "isfinite", "sinc_derivative", "sinc",
    "floor", "ceil", "trunc", "rint", "logical_not", "relu", "digamma", "gammaln", "erf",
    "erfc", "erfinv", "ndtr", "ndtri", "log_ndtr", "expit", "logit", "same",
)
_BINARY = (
    "arctan2", "hypot", "logaddexp", "logaddexp2", "mod", "fmod", "fmax", "fmin",
    "logical_and", "logical_or", "logical_xor", "betaln", "gammainc", "gammaincc", "xlogy",
    "xlog1py",
)

# (primitive name, arguments, parameters); several rows may name one primitive
Sample = tuple[str, tuple[np.ndarray, ...], dict[str, Any]]
SAMPLES: list[Sample] = [
    *[(n, (_X,), {}) for n in _UNARY],
    ("arccosh", (1.0 + _X,), {}),
    ("round", (_X * 10,), {"decimals": 1}),
    ("polygamma", (_X,), {"n": 1}),
    *[(n, (_X, _Y), {}) for n in _BINARY],
    ("fmax_mask", (_X, _Y), {"lt": True}),
    ("any", (_X > 0.5,), {"axis": None, "keepdims": False}),
    ("any", (_X > 0.5,), {"axis": (1,), "keepdims": True}),
    ("all", (_X > 0.3,), {"axis": (0,), "keepdims": False}),
    ("all", (_X > 0.3,), {"axis": None, "keepdims": True}),
    ("argmax", (_X,), {"axis": None, "keepdims": False}),
    ("argmax", (_X,), {"axis": None, "keepdims": True}),
    ("argmin", (_X,), {"axis": 1, "keepdims": False}),
    ("argmin", (_X,), {"axis": 0, "keepdims": True}),
    ("argsort", (_X,), {"axis": 1, "descending": True}),
    ("argpartition", (_X,), {"kth": 1, "axis": 1}),
    ("cumsum", (_X,), {"axis": 1, "reverse": True}),
    ("cumsum", (_X,), {"axis": 0, "reverse": False}),
    ("cumprod", (_X,), {"axis": 1}),
    ("prod_others", (_X,), {"axes": (0,)}),
    ("prod_others", (_X,), {"axes": (0, 1)}),
    ("fftn", (_C,), {"axes": (0, 1), "norm": "backward", "inverse": False}),
    ("fftn", (_C,), {"axes": (1,), "norm": "ortho", "inverse": True}),
    ("rfftn", (_X,), {"axes": (0, 1), "norm": "backward", "n": 4}),
    ("rfftn_transpose", (_C[:, :3],), {"axes": (0, 1), "norm": "backward", "n": 4}),
    ("irfftn", (_C,), {"axes": (0, 1), "lengths": (3, 6), "norm": "backward"}),
    ("irfftn_transpose", (_u(-1, 1, 3, 6),), {"axes": (0, 1), "lengths": (3, 6),
                                               "norm": "backward"}),
    ("view_as_real", (_C,), {}),
    ("view_as_complex", (_u(-1, 1, 3, 2),), {}),
    ("eye", (np.array(0.0),), {"n": 3, "m": 4, "k": 1, "dtype": np.dtype(np.float64)}),
    ("fill", (np.array(2.5),), {"shape": (2, 3), "dtype": np.dtype(np.float64)}),
    ("eye_like", (_spd(3),), {}),
    ("diagonal", (_X,), {"offset": 1, "axis1": 0, "axis2": 1, "shape": (3, 4)}),
    ("diag_embed", (_u(0, 1, 2),), {"offset": 1, "axis1": 0, "axis2": 1, "shape": (3, 3)}),
    *[(n, (_spd(3),), {}) for n in ("inv", "det", "slogdet", "cholesky", "eigh", "expm",
                                     "sqrtm", "eig")],
    ("qr", (_u(-1, 1, 4, 3),), {}),
    ("svd", (_u(-1, 1, 4, 3),), {}),
    ("svd_full_matrices", (_u(-1, 1, 3, 4),), {}),
    ("pinv", (_u(-1, 1, 4, 3),), {"rtol": None}),
    ("solve", (_spd(3), _u(-1, 1, 3, 2)), {}),
    ("triangular_solve", (_lower(3), _u(-1, 1, 3, 2)),
     {"lower": True, "trans": 0, "unit": False}),
    ("sylvester", (_spd(3), _spd(2), _u(-1, 1, 3, 2)), {}),
]


def _builtin() -> list[str]:
    return sorted(n for n, p in REGISTRY.items() if not p.checked)


def test_every_builtin_primitive_has_a_batching_rule() -> None:
    """No built-in primitive falls back to the per-example loop under vmap."""
    missing = [n for n in _builtin() if REGISTRY[n] not in RULES]
    assert missing == [], f"primitives without a batching rule: {missing}"


def test_every_primitive_without_a_rule_test_elsewhere_has_a_sample() -> None:
    """The rules added for the loop-fallback primitives are each checked below (the rest
    are checked by tests/traced/test_ops_vs_jax.py's vmap rows)."""
    sampled = {n for n, _, _ in SAMPLES}
    assert not sampled - set(REGISTRY)
    for n in ("cumprod", "eigh", "argmax", "fill", "eye", "sylvester", "irfftn_transpose"):
        assert n in sampled


def _perturbed(x: np.ndarray, k: int) -> np.ndarray:
    if x.dtype.kind == "b":
        return np.roll(x, k)
    return x * (1.0 + 0.05 * k)


def _batch(args: tuple[np.ndarray, ...], axes: tuple[int | None, ...], size: int
           ) -> tuple[list[Any], list[list[np.ndarray]]]:
    """The batched arguments (stacked at their axis) and each example's arguments."""
    examples = [[a if ax is None else _perturbed(a, k) for a, ax in zip(args, axes, strict=True)]
                for k in range(size)]
    batched = [a if ax is None else np.stack([ex[i] for ex in examples], axis=ax)
               for i, (a, ax) in enumerate(zip(args, axes, strict=True))]
    return batched, examples


def _axes_choices(name: str, args: tuple[np.ndarray, ...]) -> list[tuple[int | None, ...]]:
    n = len(args)
    out: list[tuple[int | None, ...]] = [(0,) * n]
    if name != "view_as_complex":  # (an example sliced off the last axis is strided: that
        out.append(tuple(-1 for _ in args))  # alias refuses it per example too)
    if n > 1:
        out += [(0,) + (None,) * (n - 1), (None,) * (n - 1) + (1,)]
    return out


def _graph(name: str, args: tuple[np.ndarray, ...], params: dict[str, Any]) -> Any:
    prim = REGISTRY[name]
    f: Callable[..., Any] = lambda *a: TRACE_NS.apply(prim, *a, **params)  # noqa: E731
    return traced.trace(f)(*args)


@pytest.mark.parametrize(
    "sample", SAMPLES, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(SAMPLES)]
)
def test_batching_rule_equals_the_kernel_per_example(sample: Sample) -> None:
    """vmap of one application (each in_axes choice) equals the kernel per example,
    stacked; the batched graph's size does not depend on the batch size."""
    name, args, params = sample
    prim = REGISTRY[name]
    g = _graph(name, args, params)
    with np.errstate(all="ignore"):
        for axes in _axes_choices(name, args):
            counts = []
            for size in (2, 3):
                batched, examples = _batch(args, axes, size)
                vg = traced.vmap(g, size, in_axes=axes)
                traced.check(vg)
                counts.append(len(vg.eqns))
                got = traced.eval_graph(vg, *batched).to_numpy()
                want = np.stack([np.asarray(prim.impl(*ex, **params)) for ex in examples])
                assert got.shape == want.shape, (name, axes)
                assert got.dtype == want.dtype, (name, axes)
                np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12,
                                           err_msg=f"{name} in_axes={axes}")
            assert counts[0] == counts[1], f"{name}: the batched graph grows with the batch"
