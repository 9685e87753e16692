"""The one op-spec table of the test suites.

Every row (:class:`Op`) names an op's tenferro function (``ours``), its JAX twin
(``theirs``), the argument shape buckets, the input domain, the dtypes, the tolerances and
the *family* it belongs to.  The family decides which checks (*modes*) run it by default
(:data:`DEFAULT_MODES`); a row opts out of a mode only with a reason (``skip``), so a
missing check is always written down.  The consumers select rows with :func:`table`:

* ``oracle``  -- ``tests/ad/test_jax_oracle.py``: float64 value/VJP/JVP vs JAX on
  hypothesis-drawn inputs over every shape bucket;
* ``fd``      -- ``tests/ad/test_jax_oracle.py``: JVP/VJP dot-product identity and central
  finite differences of our own primal;
* ``first``   -- ``tests/ad/_opcheck.check_first_order`` (the family suites
  ``test_ops_math.py``, ``test_ops_manip.py``, ``test_ops_scan.py``, ``test_fft.py``,
  ``test_scipy_special.py`` and, for the core rows, ``test_jax_oracle.py``): value, VJP,
  JVP and dtype preservation per (shape bucket, dtype), the dense grid under
  ``TENFERRO_THOROUGH=1``;
* ``second``  -- reverse-over-reverse and forward-over-reverse vs JAX (same suites);
* ``traced``  -- ``tests/traced/test_ops_vs_jax.py``: the op traced into a graph, evaluated,
  and transformed (grad / vjp / jvp / vmap graphs, each type-checked) vs JAX and eager mode;
  the core rows run every traced check on every bucket, the family rows their traced value
  and type on the first bucket (with vjp / jvp graphs on every bucket under
  ``TENFERRO_THOROUGH=1``); ``TRACED_GAPS`` says why the rest cannot.

Inputs are deterministic per (row name, bucket) where a consumer seeds by name (names are
unique, checked at import), so moving a row between tables never changes what it draws.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import jax.scipy.stats as jst
import numpy as np

import tenferro_ad as ad

Shapes = tuple[tuple[int, ...], ...]
Domain = str | Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]

MODES = ("oracle", "fd", "first", "second", "traced")
DEFAULT_MODES: dict[str, frozenset[str]] = {
    "core": frozenset(MODES),
    **{f: frozenset({"first", "second", "traced"})
       for f in ("math", "manip", "scan", "fft", "scipy")},
    # linalg's eager checks live in tests/ad/test_linalg*.py; here: traced and the table
    "linalg": frozenset({"traced"}),
    "coverage": frozenset({"traced"}),
}


@dataclass(frozen=True)
class Op:
    """One row of the op table."""

    name: str
    ours: Callable[..., Any]
    theirs: Callable[..., Any]
    shapes: Sequence[Shapes] = (((2, 3),),)
    domain: Domain = "any"
    dtypes: tuple[str, ...] = ("float32", "float64")
    rtol64: float = 1e-9
    rtol32: float = 2e-4
    kw: dict[str, Any] = field(default_factory=dict)
    skip: Mapping[str, str] = field(default_factory=dict)  # mode -> why it does not run
    family: str = ""

    @property
    def nargs(self) -> int:
        return len(self.shapes[0])

    @property
    def modes(self) -> frozenset[str]:
        return DEFAULT_MODES[self.family] - set(self.skip)


def values(rng: np.random.Generator, shape: tuple[int, ...], domain: Domain) -> np.ndarray:
    """Float64 inputs of ``shape`` drawn from ``domain`` (a name or a callable)."""
    if callable(domain):
        return np.asarray(domain(rng, shape))
    if domain == "positive":
        return rng.uniform(0.5, 2.0, shape)
    if domain == "unit":  # strictly inside (-1, 1)
        return rng.uniform(-0.9, 0.9, shape)
    if domain == "prob":  # strictly inside (0, 1)
        return rng.uniform(0.1, 0.9, shape)
    if domain == "gt1":
        return rng.uniform(1.2, 3.0, shape)
    x = rng.uniform(-2.0, 2.0, shape)
    if domain == "away":  # |x| >= 0.3 and away from integers/ties for rounding-like ops
        x = np.where(np.abs(x) < 0.3, 0.3 * np.sign(x + 1e-12) + x, x)
    if domain == "distinct":  # well separated values (sort, max ...)
        n = int(np.prod(shape)) if shape else 1
        x = (rng.permutation(n).reshape(shape) + rng.uniform(0.1, 0.4, shape)) * 0.7
    return np.asarray(x)


# --- core: the primitives of ops/elementwise, reduce, shape, indexing, matmul -------------
# (formerly the eager oracle's ``SPECS`` in tests/ad/test_jax_oracle.py and the traced
# suite's ``SPECS`` in tests/traced/_specs.py, which listed the same ops twice)

UNARY: tuple[Shapes, ...] = (((),), ((3,),), ((2, 3),), ((2, 1, 3),))
BINARY: tuple[Shapes, ...] = (
    ((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3)), ((3,), ()),
)
REDUCE: tuple[Shapes, ...] = (((2, 3),), ((3, 1),), ((2, 2, 3),))
F64 = ("float64",)
_KINK = "non-smooth (kink, tie or selection): central differences are no reference"


def _core(name: str, ours: Callable[..., Any], theirs: Callable[..., Any],
          shapes: Sequence[Shapes] = UNARY, domain: Domain = "any", **kw: Any) -> Op:
    return Op(name, ours, theirs, shapes, domain, kw.pop("dtypes", ("float32", "float64")),
              **kw)


def _core_rows() -> list[Op]:
    return [
        _core("add", ad.add, jnp.add, BINARY),
        _core("sub", ad.sub, jnp.subtract, BINARY),
        _core("mul", ad.mul, jnp.multiply, BINARY),
        _core("div", ad.div, jnp.divide, BINARY, "away"),
        _core("pow", ad.pow, jnp.power, BINARY, "positive"),
        _core("maximum", ad.maximum, jnp.maximum, BINARY, skip={"fd": _KINK}),
        _core("minimum", ad.minimum, jnp.minimum, BINARY, skip={"fd": _KINK}),
        # the operator spellings (handle / tracer dunder methods) of the same primitives
        _core("add_op", lambda x, y: x + y, lambda x, y: x + y, BINARY),
        _core("sub_op", lambda x, y: x - y, lambda x, y: x - y, BINARY),
        _core("mul_op", lambda x, y: x * y, lambda x, y: x * y, BINARY),
        _core("div_op", lambda x, y: x / y, lambda x, y: x / y, BINARY, "away"),
        _core("pow_op", lambda x, y: x ** y, lambda x, y: x ** y, BINARY, "positive"),
        _core("neg_op", lambda x: -x, lambda x: -x),
        _core("neg", ad.neg, jnp.negative),
        _core("exp", ad.exp, jnp.exp),
        _core("log", ad.log, jnp.log, domain="positive"),
        _core("log1p", ad.log1p, jnp.log1p, domain="positive"),
        _core("expm1", ad.expm1, jnp.expm1),
        _core("sin", ad.sin, jnp.sin),
        _core("cos", ad.cos, jnp.cos),
        _core("tanh", ad.tanh, jnp.tanh),
        _core("sqrt", ad.sqrt, jnp.sqrt, domain="positive"),
        _core("abs", ad.abs, jnp.abs, domain="away", skip={"fd": _KINK}),
        _core("sign_x", lambda x: ad.sign(x) * x, lambda x: jnp.sign(x) * x, domain="away",
              skip={"fd": _KINK}),
        _core("clip", lambda x: ad.clip(x, -0.5, 0.7), lambda x: jnp.clip(x, -0.5, 0.7),
              domain="away", skip={"fd": _KINK}),
        _core("where", lambda x, y: ad.where(x > 0.1, x, y),
              lambda x, y: jnp.where(x > 0.1, x, y), BINARY, skip={"fd": _KINK}),
        _core("stop_gradient", lambda x: ad.stop_gradient(x) * x,
              lambda x: jax.lax.stop_gradient(x) * x,
              skip={"fd": "the derivative deliberately differs from the primal's"}),
        _core("astype", lambda x: ad.astype(x, "float32"), lambda x: x.astype(jnp.float32),
              rtol64=1e-6, dtypes=F64,
              skip={"fd": "float32 output: central differences at eps=1e-6 are noise"}),
        _core("sum", lambda x: ad.sum(x), jnp.sum, REDUCE),
        _core("sum_axis", lambda x: ad.sum(x, axis=-1, keepdims=True),
              lambda x: jnp.sum(x, axis=-1, keepdims=True), REDUCE),
        _core("mean", lambda x: ad.mean(x, axis=0), lambda x: jnp.mean(x, axis=0), REDUCE),
        _core("max", lambda x: ad.max(x, axis=-1), lambda x: jnp.max(x, axis=-1), REDUCE,
              skip={"fd": _KINK}),
        _core("min", lambda x: ad.min(x), jnp.min, REDUCE, skip={"fd": _KINK}),
        _core("prod", lambda x: ad.prod(x, axis=0), lambda x: jnp.prod(x, axis=0), REDUCE,
              "away"),
        _core("reshape", lambda x: ad.reshape(x, (-1,)), lambda x: jnp.reshape(x, (-1,))),
        _core("transpose", lambda x: ad.transpose(x), lambda x: jnp.transpose(x)),
        _core("transpose_reshape", lambda x: ad.reshape(x.T, (-1,)),
              lambda x: jnp.reshape(x.T, (-1,)), REDUCE),
        _core("broadcast_to", lambda x: ad.broadcast_to(x, (2, 2, 3)),
              lambda x: jnp.broadcast_to(x, (2, 2, 3)), (((2, 3),), ((1, 3),))),
        _core("slice", lambda x: x[1:, ::2], lambda x: x[1:, ::2], (((3, 4),), ((2, 5),))),
        _core("int_index", lambda x: x[1], lambda x: x[1], (((3, 4),),)),
        _core("gather", lambda x: x[np.array([0, 2, 0])], lambda x: x[jnp.array([0, 2, 0])],
              (((3, 4),), ((3,),))),
        _core("concatenate", lambda x, y: ad.concatenate([x, y, x], axis=0),
              lambda x, y: jnp.concatenate([x, y, x], axis=0),
              (((2, 3), (1, 3)), ((1,), (4,)))),
        _core("stack", lambda x, y: ad.stack([x, y], axis=1),
              lambda x, y: jnp.stack([x, y], axis=1), (((2, 3), (2, 3)),)),
        _core("matmul", ad.matmul, jnp.matmul,
              (((2, 3), (3, 4)), ((3,), (3, 2)), ((2, 3), (3,)), ((3,), (3,)),
               ((2, 2, 3), (3, 2)))),
        _core("matmul_op", lambda x, y: x @ y, lambda x, y: x @ y,
              (((2, 3), (3, 4)), ((3,), (3, 2)), ((2, 3), (3,)), ((3,), (3,)),
               ((2, 2, 3), (3, 2)))),
        _core("einsum", lambda x, y: ad.einsum("ij,jk->ik", x, y),
              lambda x, y: jnp.einsum("ij,jk->ik", x, y), (((2, 3), (3, 4)),)),
        _core("logsumexp", lambda x: ad.logsumexp(x, axis=-1),
              lambda x: jax.nn.logsumexp(x, axis=-1), REDUCE),
        _core("softmax", lambda x: ad.softmax(x, axis=-1),
              lambda x: jax.nn.softmax(x, axis=-1), REDUCE),
        # a leading axis as well as the last: a rule reducing over the wrong axis agrees
        # with JAX on the last axis of a square input, never on both
        _core("log_softmax", lambda x: ad.log_softmax(x, axis=-1),
              lambda x: jax.nn.log_softmax(x, axis=-1), REDUCE),
        _core("log_softmax_axis0", lambda x: ad.log_softmax(x, axis=0),
              lambda x: jax.nn.log_softmax(x, axis=0), REDUCE),
        _core("softmax_axis0", lambda x: ad.softmax(x, axis=0),
              lambda x: jax.nn.softmax(x, axis=0), REDUCE),
        _core("logsumexp_axis0", lambda x: ad.logsumexp(x, axis=0),
              lambda x: jax.nn.logsumexp(x, axis=0), REDUCE),
    ]


# --- the op families (formerly the ``TABLE`` of each family suite) --------------------------


def _math_rows() -> list[Op]:
    """The ``tests/ad/test_ops_math.py`` family."""
    U = (((2, 3),), ((),), ((4,),))
    B = (((2, 3), (2, 3)), ((2, 1), (1, 3)), ((), (3,)))
    F = ("float32", "float64")
    FC = ("float32", "float64", "complex64", "complex128")


    def _mod_domain(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        x = rng.uniform(0.6, 2.4, shape) * rng.choice([-1.0, 1.0], shape)
        return np.asarray(x)


    def _round_domain(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return np.asarray(rng.integers(-5, 5, shape) + rng.uniform(0.1, 0.4, shape))


    return [
        Op("tan", ad.tan, jnp.tan, U, "unit", FC),
        Op("sinh", ad.sinh, jnp.sinh, U, "any", FC),
        Op("cosh", ad.cosh, jnp.cosh, U, "any", FC),
        Op("arcsin", ad.arcsin, jnp.arcsin, U, "unit", FC),
        Op("arccos", ad.arccos, jnp.arccos, U, "unit", FC),
        Op("arctan", ad.arctan, jnp.arctan, U, "any", FC),
        Op("arcsinh", ad.arcsinh, jnp.arcsinh, U, "any", FC),
        Op("arccosh", ad.arccosh, jnp.arccosh, U, "gt1", F),
        Op("arctanh", ad.arctanh, jnp.arctanh, U, "unit", FC),
        Op("arctan2", ad.arctan2, jnp.arctan2, B, "away", F),
        Op("hypot", ad.hypot, jnp.hypot, B, "away", F),
        Op("square", ad.square, jnp.square, U, "any", FC),
        Op("reciprocal", ad.reciprocal, jnp.reciprocal, U, "away", FC),
        Op("log2", ad.log2, jnp.log2, U, "positive", FC),
        Op("log10", ad.log10, jnp.log10, U, "positive", FC),
        Op("exp2", ad.exp2, jnp.exp2, U, "any", FC),
        Op("cbrt", ad.cbrt, jnp.cbrt, U, "positive", F),
        Op("logaddexp", ad.logaddexp, jnp.logaddexp, B, "any", F),
        Op("logaddexp2", ad.logaddexp2, jnp.logaddexp2, B, "any", F),
        Op("sinc", ad.sinc, jnp.sinc, U, "any", F),
        Op("floor", lambda x: ad.floor(x) * x, lambda x: jnp.floor(x) * x, U, _round_domain, F),
        Op("ceil", lambda x: ad.ceil(x) * x, lambda x: jnp.ceil(x) * x, U, _round_domain, F),
        Op("round", lambda x: ad.round(x) + x, lambda x: jnp.round(x) + x, U, _round_domain, F),
        Op("trunc", lambda x: ad.trunc(x) * x, lambda x: jnp.trunc(x) * x, U, _round_domain, F),
        Op("mod", ad.mod, jnp.mod, B, _mod_domain, F),
        Op("mod_op", lambda x, y: x % y, lambda x, y: x % y, B, _mod_domain, F),
        Op("rmod_op", lambda x: 1.7 % x, lambda x: 1.7 % x, U, _mod_domain, F),
        Op("fmod", ad.fmod, jnp.fmod, B, _mod_domain, F),
        Op("fmax", ad.fmax, jnp.fmax, B, "any", F),
        Op("fmin", ad.fmin, jnp.fmin, B, "any", F),
        Op("nan_to_num", ad.nan_to_num, jnp.nan_to_num, U, "any", F),
        Op("relu", ad.relu, jax.nn.relu, U, "away", F),
        Op("leaky_relu", ad.leaky_relu, jax.nn.leaky_relu, U, "away", F),
        Op("elu", ad.elu, jax.nn.elu, U, "away", F),
        Op("sigmoid", ad.sigmoid, jax.nn.sigmoid, U, "any", F),
        Op("arccosh_complex", ad.arccosh, jnp.arccosh, U, "any", ("complex64", "complex128")),
        Op("softplus", ad.softplus, jax.nn.softplus, U, "any", F),
        Op("log_sigmoid", ad.log_sigmoid, jax.nn.log_sigmoid, U, "any", F),
        Op("silu", ad.silu, jax.nn.silu, U, "any", F),
        Op("gelu", ad.gelu, jax.nn.gelu, U, "any", F),
        Op("gelu_exact", lambda x: ad.gelu(x, approximate=False),
           lambda x: jax.nn.gelu(x, approximate=False), U, "any", F),
        Op("deg2rad", ad.deg2rad, jnp.deg2rad, U, "any", F),
        Op("rad2deg", ad.rad2deg, jnp.rad2deg, U, "any", F),
        # scipy.special kernels
        Op("gammaln", ad.scipy.special.gammaln, jss.gammaln, U, "positive", F),
        Op("digamma", ad.scipy.special.digamma, jss.digamma, U, "positive", F),
        Op("polygamma2", lambda x: ad.scipy.special.polygamma(2, x),
           lambda x: jss.polygamma(2, x), U, "positive", F),
        Op("erf", ad.scipy.special.erf, jss.erf, U, "any", F),
        Op("erfc", ad.scipy.special.erfc, jss.erfc, U, "any", F),
        Op("erfinv", ad.scipy.special.erfinv, jss.erfinv, U, "unit", F),
        Op("expit", ad.scipy.special.expit, jss.expit, U, "any", F),
        Op("logit", ad.scipy.special.logit, jss.logit, U, "prob", F),
        Op("xlogy", ad.scipy.special.xlogy, jss.xlogy, B, "positive", F),
        Op("xlog1py", ad.scipy.special.xlog1py, jss.xlog1py, B, "positive", F),
        Op("betaln", ad.scipy.special.betaln, jss.betaln, B, "positive", F),
        Op("ndtr", ad.scipy.special.ndtr, jss.ndtr, U, "any", F),
        Op("ndtri", ad.scipy.special.ndtri, jss.ndtri, U, "prob", F),
        Op("log_ndtr", ad.scipy.special.log_ndtr, jss.log_ndtr, U, "any", F),
        Op("gammainc_x", lambda x: ad.scipy.special.gammainc(1.7, x),
           lambda x: jss.gammainc(1.7, x), U, "positive", F),
        Op("gammaincc_x", lambda x: ad.scipy.special.gammaincc(1.7, x),
           lambda x: jss.gammaincc(1.7, x), U, "positive", F),
    ]


def _manip_rows() -> list[Op]:
    """The ``tests/ad/test_ops_manip.py`` family."""
    F = ("float32", "float64")
    FC = ("float32", "float64", "complex128")
    S3 = (((2, 3, 4),),)
    S2 = (((3, 4),),)


    return [
        Op("ravel", ad.ravel, jnp.ravel, S3, "any", FC),
        Op("ravel_T", lambda x: ad.ravel(x.T), lambda x: jnp.ravel(x.T), S2, "any", F),
        Op("flatten_method", lambda x: x.flatten(), lambda x: x.flatten(), S3, "any", F),
        Op("squeeze", ad.squeeze, jnp.squeeze, (((1, 3, 1, 2),),), "any", F),
        Op("squeeze_axis", lambda x: ad.squeeze(x, axis=2), lambda x: jnp.squeeze(x, axis=2),
           (((1, 3, 1, 2),),), "any", F),
        Op("moveaxis", lambda x: ad.moveaxis(x, 0, -1), lambda x: jnp.moveaxis(x, 0, -1), S3),
        Op("moveaxis_multi", lambda x: ad.moveaxis(x, (0, 1), (2, 0)),
           lambda x: jnp.moveaxis(x, (0, 1), (2, 0)), S3),
        Op("rollaxis", lambda x: ad.rollaxis(x, 2, 0), lambda x: jnp.rollaxis(x, 2, 0), S3),
        Op("repeat", lambda x: ad.repeat(x, 2, axis=1), lambda x: jnp.repeat(x, 2, axis=1), S2,
           "any", FC),
        Op("repeat_list", lambda x: ad.repeat(x, [1, 0, 3], axis=0),
           lambda x: jnp.repeat(x, jnp.array([1, 0, 3]), axis=0, total_repeat_length=4), S2),
        Op("repeat_flat", lambda x: ad.repeat(x, 2), lambda x: jnp.repeat(x, 2), S2),
        Op("tile", lambda x: ad.tile(x, (2, 1, 3)), lambda x: jnp.tile(x, (2, 1, 3)), S2, "any",
           FC),
        Op("tile_int", lambda x: ad.tile(x, 2), lambda x: jnp.tile(x, 2), S2),
        Op("roll", lambda x: ad.roll(x, 2, axis=1), lambda x: jnp.roll(x, 2, axis=1), S2),
        Op("roll_flat", lambda x: ad.roll(x, -5), lambda x: jnp.roll(x, -5), S2),
        Op("roll_multi", lambda x: ad.roll(x, (1, -2), axis=(0, 2)),
           lambda x: jnp.roll(x, (1, -2), axis=(0, 2)), S3),
        Op("flip", ad.flip, jnp.flip, S3, "any", FC),
        Op("flip_axis", lambda x: ad.flip(x, 1), lambda x: jnp.flip(x, 1), S3),
        Op("fliplr", ad.fliplr, jnp.fliplr, S2),
        Op("flipud", ad.flipud, jnp.flipud, S2),
        Op("rot90", ad.rot90, jnp.rot90, S2),
        Op("rot90_k2", lambda x: ad.rot90(x, 2), lambda x: jnp.rot90(x, 2), S2),
        Op("rot90_k3_axes", lambda x: ad.rot90(x, 3, axes=(1, 2)),
           lambda x: jnp.rot90(x, 3, axes=(1, 2)), S3),
        Op("pad_constant", lambda x: ad.pad(x, ((1, 2), (0, 1))),
           lambda x: jnp.pad(x, ((1, 2), (0, 1))), S2, "any", FC),
        Op("pad_constant_value", lambda x: ad.pad(x, 1, constant_values=2.5),
           lambda x: jnp.pad(x, 1, constant_values=2.5), S2),
        Op("pad_edge", lambda x: ad.pad(x, ((2, 1), (1, 3)), mode="edge"),
           lambda x: jnp.pad(x, ((2, 1), (1, 3)), mode="edge"), S2),
        Op("pad_reflect", lambda x: ad.pad(x, 2, mode="reflect"),
           lambda x: jnp.pad(x, 2, mode="reflect"), S2),
        Op("pad_symmetric", lambda x: ad.pad(x, (1, 2), mode="symmetric"),
           lambda x: jnp.pad(x, (1, 2), mode="symmetric"), S2),
        Op("pad_wrap", lambda x: ad.pad(x, ((1, 1), (2, 0)), mode="wrap"),
           lambda x: jnp.pad(x, ((1, 1), (2, 0)), mode="wrap"), S2),
        Op("split", lambda x: ad.stack(ad.split(x, 2, axis=1)),
           lambda x: jnp.stack(jnp.split(x, 2, axis=1)), S2),
        Op("split_indices", lambda x: ad.concatenate(ad.split(x, [1, 3], axis=1)[::-1], axis=1),
           lambda x: jnp.concatenate(jnp.split(x, [1, 3], axis=1)[::-1], axis=1), S2),
        Op("array_split", lambda x: ad.concatenate(ad.array_split(x, 3, axis=1)[1:], axis=1),
           lambda x: jnp.concatenate(jnp.array_split(x, 3, axis=1)[1:], axis=1), S2),
        Op("vsplit", lambda x: ad.vsplit(x, 3)[1], lambda x: jnp.vsplit(x, 3)[1], S2),
        Op("hsplit", lambda x: ad.hsplit(x, 2)[1], lambda x: jnp.hsplit(x, 2)[1], S2),
        Op("dsplit", lambda x: ad.dsplit(x, 2)[0], lambda x: jnp.dsplit(x, 2)[0], S3),
        Op("vstack", lambda x, y: ad.vstack([x, y, x]), lambda x, y: jnp.vstack([x, y, x]),
           (((3,), (3,)), ((2, 3), (1, 3)))),
        Op("hstack", lambda x, y: ad.hstack([x, y]), lambda x, y: jnp.hstack([x, y]),
           (((3,), (2,)), ((2, 3), (2, 1)))),
        Op("dstack", lambda x, y: ad.dstack([x, y]), lambda x, y: jnp.dstack([x, y]),
           (((3,), (3,)), ((2, 3), (2, 3)))),
        Op("column_stack", lambda x, y: ad.column_stack([x, y]),
           lambda x, y: jnp.column_stack([x, y]), (((3,), (3, 2)),)),
        Op("atleast_3d", lambda x: ad.atleast_3d(x), lambda x: jnp.atleast_3d(x),
           (((),), ((3,),), ((2, 3),))),
        Op("atleast_2d", lambda x: ad.atleast_2d(x), lambda x: jnp.atleast_2d(x),
           (((),), ((3,),))),
        Op("append", lambda x, y: ad.append(x, y), lambda x, y: jnp.append(x, y),
           (((2, 3), (4,)),)),
        Op("append_axis", lambda x, y: ad.append(x, y, axis=0),
           lambda x, y: jnp.append(x, y, axis=0), (((2, 3), (1, 3)),)),
        Op("diag_embed", lambda x: ad.diag(x), lambda x: jnp.diag(x), (((4,),),), "any", FC),
        Op("diag_embed_k", lambda x: ad.diag(x, -2), lambda x: jnp.diag(x, -2), (((3,),),)),
        Op("diag_extract", lambda x: ad.diag(x, 1), lambda x: jnp.diag(x, 1), S2),
        Op("diagflat", lambda x: ad.diagflat(x, 1), lambda x: jnp.diagflat(x, 1), (((2, 2),),)),
        Op("diagonal", lambda x: ad.diagonal(x, -1, 0, 2), lambda x: jnp.diagonal(x, -1, 0, 2),
           S3),
        Op("trace", lambda x: ad.trace(x), lambda x: jnp.trace(x), S2, "any", FC),
        Op("tril", lambda x: ad.tril(x, -1), lambda x: jnp.tril(x, -1), S3),
        Op("triu", lambda x: ad.triu(x, 1), lambda x: jnp.triu(x, 1), S2),
        Op("linspace", lambda a, b: ad.linspace(a, b, 5), lambda a, b: jnp.linspace(a, b, 5),
           (((), ()), ((3,), (3,)))),
        Op("linspace_no_endpoint", lambda a, b: ad.linspace(a, b, 4, endpoint=False),
           lambda a, b: jnp.linspace(a, b, 4, endpoint=False), (((2,), ()),)),
        Op("select", lambda x, y: ad.select([x > 0.5, y < 0.0], [x, y * x], 0.25),
           lambda x, y: jnp.select([x > 0.5, y < 0.0], [x, y * x], 0.25), (((2, 3), (2, 3)),),
           "away"),
        Op("zeros_ones_full_like",
           lambda x: x * ad.ones_like(x) + ad.zeros_like(x) + ad.full_like(x, 2.0),
           lambda x: x * jnp.ones_like(x) + jnp.zeros_like(x) + jnp.full_like(x, 2.0), S2),
        Op("eye", lambda x: x @ ad.eye(4, dtype=x.dtype.numpy) * 2.0,
           lambda x: x @ jnp.eye(4, dtype=x.dtype) * 2.0, S2),
        Op("r_", lambda x, y: ad.r_[x, 0:2, y, 1.5], lambda x, y: jnp.r_[x, 0:2, y, 1.5],
           (((3,), (2,)),)),
        Op("r_linspace", lambda x: ad.r_[x, -1:1:4j], lambda x: jnp.r_[x, -1:1:4j], (((3,),),),
           "any", ("float64",)),
        Op("c_", lambda x, y: ad.c_[x, y], lambda x, y: jnp.c_[x, y], (((3,), (3, 2)),)),
        # products
        Op("dot_vv", ad.dot, jnp.dot, (((4,), (4,)),), "any", FC),
        Op("dot_mv", ad.dot, jnp.dot, (((3, 4), (4,)),), "any", F),
        Op("dot_nd", ad.dot, jnp.dot, (((2, 3, 4), (5, 4, 2)),), "any", F),
        Op("dot_scalar", ad.dot, jnp.dot, (((), (3,)),), "any", F),
        Op("vdot", ad.vdot, jnp.vdot, (((2, 3), (3, 2)),), "any", FC),
        Op("inner", ad.inner, jnp.inner, (((2, 4), (3, 4)), ((4,), (4,))), "any", FC),
        Op("outer", ad.outer, jnp.outer, (((3,), (2, 2)),), "any", FC),
        Op("kron", ad.kron, jnp.kron, (((2, 3), (2, 2)), ((3,), (2, 2))), "any", FC),
        Op("cross", ad.cross, jnp.cross, (((3,), (3,)), ((4, 3), (3,))), "any", F),
        Op("cross_axis", lambda a, b: ad.cross(a, b, axisa=0, axisb=0),
           lambda a, b: jnp.cross(a, b, axisa=0, axisb=0), (((3, 2), (3, 2)),)),
        Op("cross_2d", ad.cross, jnp.cross, (((4, 2), (4, 2)),)),
        Op("tensordot_list_axes", lambda a, b: ad.tensordot(a, b, axes=[-1, 0]),
           lambda a, b: jnp.tensordot(a, b, axes=[-1, 0]), (((2, 3), (3, 4)),), "any", F),
        Op("tensordot_pair_lists", lambda a, b: ad.tensordot(a, b, axes=([0, 2], [1, 0])),
           lambda a, b: jnp.tensordot(a, b, axes=([0, 2], [1, 0])), (((2, 3, 4), (4, 2, 5)),)),
        Op("einsum_interleaved", lambda a, b: ad.einsum(a, [0, 1], b, [1, 2], [2, 0]),
           lambda a, b: jnp.einsum(a, [0, 1], b, [1, 2], [2, 0]), (((2, 3), (3, 4)),), "any", FC),
        Op("einsum_interleaved_implicit", lambda a, b: ad.einsum(a, [Ellipsis, 5], b, [5, 7]),
           lambda a, b: jnp.einsum(a, [Ellipsis, 5], b, [5, 7]), (((2, 3, 4), (4, 2)),)),
    ]


def _scan_rows() -> list[Op]:
    """The ``tests/ad/test_ops_scan.py`` family."""
    F = ("float32", "float64")
    FC = ("float32", "float64", "complex64", "complex128")
    M = (((3, 4),), ((2, 3, 4),))
    B_W = np.array([[1.0, 0.5, 2.0, 0.0], [0.3, 1.0, 1.0, 2.0], [1.0, 1.0, 0.2, 0.7]])
    B_NEG = np.array([[1.0, -0.5, 2.0, 0.1], [0.3, 1.0, -1.0, 2.0], [1.0, 1.0, 0.2, 0.7]])
    IDX = np.array([[2, 0, 1, 3], [1, 1, 0, 2], [3, 2, 1, 0]])

    return [
        Op("var_all", ad.var, jnp.var, M, "any", FC),
        Op("var_axis0_ddof1", lambda x: ad.var(x, axis=0, ddof=1),
           lambda x: jnp.var(x, axis=0, ddof=1), M, "any", FC),
        Op("var_keepdims", lambda x: ad.var(x, axis=(0, -1), keepdims=True),
           lambda x: jnp.var(x, axis=(0, -1), keepdims=True), M, "any", F),
        Op("std", lambda x: ad.std(x, axis=-1), lambda x: jnp.std(x, axis=-1), M, "any", F),
        Op("std_ddof", lambda x: ad.std(x, ddof=1), lambda x: jnp.std(x, ddof=1), M, "any", F),
        Op("cumsum_none", ad.cumsum, jnp.cumsum, M, "any", FC),
        Op("cumsum_axis0", lambda x: ad.cumsum(x, axis=0), lambda x: jnp.cumsum(x, axis=0),
           M, "any", FC),
        Op("cumprod_axis1", lambda x: ad.cumprod(x, axis=1), lambda x: jnp.cumprod(x, axis=1),
           M, "away", FC),
        Op("cumprod_none", ad.cumprod, jnp.cumprod, (((5,),),), "away", F),
        Op("diff", ad.diff, jnp.diff, M, "any", FC),
        Op("diff_n2_axis0", lambda x: ad.diff(x, n=2, axis=0),
           lambda x: jnp.diff(x, n=2, axis=0), M, "any", F),
        Op("diff_prepend_append",
           lambda x: ad.diff(x, prepend=0.5, append=ad.ones_like(x)[:, :1]),
           lambda x: jnp.diff(x, prepend=0.5, append=jnp.ones_like(x)[:, :1]), (((3, 4),),), "any",
           F),
        Op("sort", ad.sort, jnp.sort, M, "distinct", F),
        Op("sort_axis0", lambda x: ad.sort(x, axis=0), lambda x: jnp.sort(x, axis=0),
           M, "distinct", F),
        Op("sort_none", lambda x: ad.sort(x, axis=None), lambda x: jnp.sort(x, axis=None),
           M, "distinct", F),
        Op("sort_descending", lambda x: ad.sort(x, descending=True),
           lambda x: jnp.sort(x, descending=True), M, "distinct", F),
        Op("partition", lambda x: ad.sort(ad.partition(x, 2)),
           lambda x: jnp.sort(jnp.partition(x, 2)), M, "distinct", F),
        Op("take_along_axis", lambda x: ad.take_along_axis(x, IDX, 1),
           lambda x: jnp.take_along_axis(x, IDX, 1), (((3, 4),),), "any", FC),
        Op("norm_fro", ad.norm, jnp.linalg.norm, M, "away", FC),
        Op("norm_vec_axis", lambda x: ad.norm(x, axis=-1), lambda x: jnp.linalg.norm(x, axis=-1),
           M, "away", FC),
        Op("norm_vec_1", lambda x: ad.norm(x, 1, axis=0), lambda x: jnp.linalg.norm(x, 1, axis=0),
           M, "away", F),
        Op("norm_vec_inf", lambda x: ad.norm(x, np.inf, axis=-1),
           lambda x: jnp.linalg.norm(x, jnp.inf, axis=-1), M, "distinct", F),
        Op("norm_vec_-inf", lambda x: ad.norm(x, -np.inf, axis=-1),
           lambda x: jnp.linalg.norm(x, -jnp.inf, axis=-1), M, "distinct", F),
        Op("norm_vec_p3", lambda x: ad.norm(x, 3, axis=-1),
           lambda x: jnp.linalg.norm(x, 3, axis=-1), M, "away", F),
        Op("norm_vec_0", lambda x: ad.norm(x, 0, axis=-1) * ad.sum(x),
           lambda x: jnp.linalg.norm(x, 0, axis=-1) * jnp.sum(x), M, "away", F),
        Op("norm_vec_keepdims", lambda x: ad.norm(x, axis=1, keepdims=True),
           lambda x: jnp.linalg.norm(x, axis=1, keepdims=True), M, "away", F),
        Op("norm_mat_fro", lambda x: ad.norm(x, "fro", axis=(0, 1)),
           lambda x: jnp.linalg.norm(x, "fro", axis=(0, 1)), M, "away", FC),
        Op("norm_mat_1", lambda x: ad.norm(x, 1, axis=(-2, -1)),
           lambda x: jnp.linalg.norm(x, 1, axis=(-2, -1)), M, "distinct", F),
        Op("norm_mat_-1", lambda x: ad.norm(x, -1, axis=(-2, -1)),
           lambda x: jnp.linalg.norm(x, -1, axis=(-2, -1)), M, "distinct", F),
        Op("norm_mat_inf", lambda x: ad.norm(x, np.inf, axis=(-2, -1), keepdims=True),
           lambda x: jnp.linalg.norm(x, jnp.inf, axis=(-2, -1), keepdims=True), M, "distinct", F),
        Op("norm_mat_-inf", lambda x: ad.norm(x, -np.inf, axis=(-1, -2)),
           lambda x: jnp.linalg.norm(x, -jnp.inf, axis=(-1, -2)), M, "distinct", F),
        Op("norm_mat_nuc", lambda x: ad.norm(x, "nuc", axis=(-2, -1)),
           lambda x: jnp.linalg.norm(x, "nuc", axis=(-2, -1)), M, "any", ("float64",),
           rtol64=1e-8),
        Op("norm_mat_2", lambda x: ad.norm(x, 2, axis=(-2, -1)),
           lambda x: jnp.linalg.norm(x, 2, axis=(-2, -1)), M, "any", ("float64",), rtol64=1e-8),
        Op("norm_mat_-2", lambda x: ad.norm(x, -2, axis=(-2, -1)),
           lambda x: jnp.linalg.norm(x, -2, axis=(-2, -1)), M, "any", ("float64",), rtol64=1e-8),
        Op("median_odd", lambda x: ad.median(x, axis=-1), lambda x: jnp.median(x, axis=-1),
           (((3, 5),),), "distinct", F),
        Op("median_even_none", ad.median, jnp.median, M, "distinct", F),
        Op("median_keepdims", lambda x: ad.median(x, axis=0, keepdims=True),
           lambda x: jnp.median(x, axis=0, keepdims=True), M, "distinct", F),
        Op("average_weights", lambda x, w: ad.average(x, axis=1, weights=w),
           lambda x, w: jnp.average(x, axis=1, weights=w), (((3, 4), (4,)),), "positive", F),
        Op("average_full_weights", lambda x, w: ad.average(x, weights=w),
           lambda x, w: jnp.average(x, weights=w), (((3, 4), (3, 4)),), "positive", F),
        Op("average_returned", lambda x: ad.average(x, axis=0, returned=True)[1] * ad.average(x),
           lambda x: jnp.average(x, axis=0, returned=True)[1] * jnp.average(x), M, "any", F),
        Op("nansum_nanmean", lambda x: ad.nansum(x, axis=0) + ad.nanmean(x),
           lambda x: jnp.nansum(x, axis=0) + jnp.nanmean(x), M, "any", F),
        Op("logsumexp_axis", lambda x: ad.logsumexp(x, axis=-1),
           lambda x: jss.logsumexp(x, axis=-1), M, "any", F),
        Op("logsumexp_b", lambda x: ad.logsumexp(x, axis=1, b=B_W),
           lambda x: jss.logsumexp(x, axis=1, b=B_W), (((3, 4),),), "any", F),
        Op("logsumexp_b_keepdims", lambda x: ad.logsumexp(x, b=B_W, keepdims=True),
           lambda x: jss.logsumexp(x, b=B_W, keepdims=True), (((3, 4),),), "any", F),
        Op("logsumexp_return_sign", lambda x: ad.logsumexp(x, axis=1, b=B_NEG, return_sign=True)[0],
           lambda x: jss.logsumexp(x, axis=1, b=B_NEG, return_sign=True)[0], (((3, 4),),),
           "any", F),
        Op("logsumexp_b_neg_nan", lambda x: ad.logsumexp(x, axis=1, b=B_NEG),
           lambda x: jss.logsumexp(x, axis=1, b=B_NEG), (((3, 4),),), "any", F,
           skip={"second": "the output is NaN where the weighted sum is negative; a "
                 "second-order check through NaN compares nothing"}),
    ]


def _fft_rows() -> list[Op]:
    """The ``tests/ad/test_fft.py`` family."""
    R = ("float32", "float64")
    RC = ("float32", "float64", "complex64", "complex128")
    C = ("complex64", "complex128")
    S1 = (((6,),), ((2, 5),))
    S2 = (((4, 6),), ((2, 3, 5),))
    T32 = 5e-4


    def _fft_ops() -> list[Op]:
        out = []
        for norm in (None, "ortho", "forward"):
            tag = norm or "backward"
            out += [
                Op(f"fft-{tag}", lambda x, n=norm: ad.fft.fft(x, norm=n),
                   lambda x, n=norm: jnp.fft.fft(x, norm=n), S1, "any", RC, rtol32=T32),
                Op(f"ifft-{tag}", lambda x, n=norm: ad.fft.ifft(x, norm=n),
                   lambda x, n=norm: jnp.fft.ifft(x, norm=n), S1, "any", RC, rtol32=T32),
                Op(f"rfft-{tag}", lambda x, n=norm: ad.fft.rfft(x, norm=n),
                   lambda x, n=norm: jnp.fft.rfft(x, norm=n), S1, "any", R, rtol32=T32),
                Op(f"irfft-{tag}", lambda x, n=norm: ad.fft.irfft(x, norm=n),
                   lambda x, n=norm: jnp.fft.irfft(x, norm=n), S1, "any", C, rtol32=T32),
                Op(f"fftn-{tag}", lambda x, n=norm: ad.fft.fftn(x, norm=n),
                   lambda x, n=norm: jnp.fft.fftn(x, norm=n), S2, "any", RC, rtol32=T32),
                Op(f"irfftn-{tag}", lambda x, n=norm: ad.fft.irfftn(x, norm=n),
                   lambda x, n=norm: jnp.fft.irfftn(x, norm=n), S2, "any", C, rtol32=T32),
                Op(f"rfftn-{tag}", lambda x, n=norm: ad.fft.rfftn(x, norm=n),
                   lambda x, n=norm: jnp.fft.rfftn(x, norm=n), S2, "any", R, rtol32=T32),
            ]
        return out


    return [
        *_fft_ops(),
        Op("fft_n_pad", lambda x: ad.fft.fft(x, n=8), lambda x: jnp.fft.fft(x, n=8), S1, "any",
           RC, rtol32=T32),
        Op("fft_n_crop_axis0", lambda x: ad.fft.fft(x, n=1, axis=0),
           lambda x: jnp.fft.fft(x, n=1, axis=0), (((2, 5),),), "any", RC, rtol32=T32),
        Op("irfft_odd_n", lambda x: ad.fft.irfft(x, n=7), lambda x: jnp.fft.irfft(x, n=7), S1,
           "any", C, rtol32=T32),
        Op("rfft_odd", ad.fft.rfft, jnp.fft.rfft, (((7,),),), "any", R, rtol32=T32),
        Op("fft2", ad.fft.fft2, jnp.fft.fft2, S2, "any", RC, rtol32=T32),
        Op("ifft2", ad.fft.ifft2, jnp.fft.ifft2, S2, "any", RC, rtol32=T32),
        Op("rfft2", ad.fft.rfft2, jnp.fft.rfft2, S2, "any", R, rtol32=T32),
        Op("irfft2", ad.fft.irfft2, jnp.fft.irfft2, S2, "any", C, rtol32=T32),
        Op("irfft2_s", lambda x: ad.fft.irfft2(x, s=(3, 5)), lambda x: jnp.fft.irfft2(x, s=(3, 5)),
           S2, "any", C, rtol32=T32),
        Op("ifftn_axes", lambda x: ad.fft.ifftn(x, axes=(0, 2)),
           lambda x: jnp.fft.ifftn(x, axes=(0, 2)), (((2, 3, 5),),), "any", RC, rtol32=T32),
        Op("rfftn_s", lambda x: ad.fft.rfftn(x, s=(4, 4)), lambda x: jnp.fft.rfftn(x, s=(4, 4)),
           S2, "any", R, rtol32=T32),
        Op("fftshift", ad.fft.fftshift, jnp.fft.fftshift, S2, "any", RC),
        Op("ifftshift_axes", lambda x: ad.fft.ifftshift(x, axes=1),
           lambda x: jnp.fft.ifftshift(x, axes=1), S2, "any", RC),
        Op("rfft_irfft_roundtrip", lambda x: ad.fft.irfft(ad.fft.rfft(x) * 1.5, n=6),
           lambda x: jnp.fft.irfft(jnp.fft.rfft(x) * 1.5, n=6), (((6,),),), "any", R, rtol32=T32),
    ]


def _scipy_rows() -> list[Op]:
    """The ``tests/ad/test_scipy_special.py`` family."""
    st = ad.scipy.stats
    F = ("float32", "float64")
    U = (((2, 3),),)
    B3 = (((2, 3), (2, 3), (2, 3)),)


    def _pos3(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return np.asarray(rng.uniform(0.6, 3.0, shape))


    def _unit(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return np.asarray(rng.uniform(0.1, 0.9, shape))


    def _simplex(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        x = rng.uniform(0.2, 1.0, shape)
        return np.asarray(x / x.sum(axis=0, keepdims=True))


    def _cov(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        a = rng.normal(size=shape)
        return np.asarray(a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1]))


    ALPHA = np.array([1.5, 2.0, 0.7])
    MEAN = np.array([0.1, -0.2, 0.3])
    K = np.array([[0.0, 1.0, 3.0], [2.0, 5.0, 1.0]])
    _C3 = _cov(np.random.default_rng(3), (3, 3))

    return [
        Op("norm.logpdf", lambda x, m, s: st.norm.logpdf(x, m, s),
           lambda x, m, s: jst.norm.logpdf(x, m, s), B3, _pos3, F),
        Op("norm.pdf", st.norm.pdf, jst.norm.pdf, U, "any", F),
        Op("norm.cdf", lambda x, m, s: st.norm.cdf(x, m, s), lambda x, m, s: jst.norm.cdf(x, m, s),
           B3, _pos3, F),
        Op("norm.logcdf", st.norm.logcdf, jst.norm.logcdf, U, "any", F),
        Op("norm.sf", st.norm.sf, jst.norm.sf, U, "any", F),
        Op("norm.logsf", st.norm.logsf, jst.norm.logsf, U, "any", F),
        # float64 only: JAX's ppf/isf cast their result to the default float (float64 under x64),
        # ours keep float32 (see test_float32_stays_float32_with_python_scalar_parameters)
        Op("norm.ppf", lambda q: st.norm.ppf(q, 0.5, 2.0), lambda q: jst.norm.ppf(q, 0.5, 2.0), U,
           _unit, ("float64",)),
        Op("norm.isf", lambda q: st.norm.isf(q, 0.5, 2.0), lambda q: jst.norm.isf(q, 0.5, 2.0), U,
           _unit, ("float64",)),
        Op("t.logpdf", lambda x, df: st.t.logpdf(x, df, 0.3, 1.5),
           lambda x, df: jst.t.logpdf(x, df, 0.3, 1.5), (((2, 3), (2, 3)),), _pos3, F),
        Op("t.pdf", lambda x: st.t.pdf(x, 3.0), lambda x: jst.t.pdf(x, 3.0), U, "any", F),
        Op("gamma.logpdf", lambda x, a: st.gamma.logpdf(x, a, 0.1, 1.3),
           lambda x, a: jst.gamma.logpdf(x, a, 0.1, 1.3), (((2, 3), (2, 3)),), _pos3, F),
        Op("gamma.pdf", lambda x: st.gamma.pdf(x, 2.5), lambda x: jst.gamma.pdf(x, 2.5), U,
           _pos3, F),
        Op("gamma.cdf_x", lambda x: st.gamma.cdf(x, 2.5, 0.0, 1.5),
           lambda x: jst.gamma.cdf(x, 2.5, 0.0, 1.5), U, _pos3, F),
        Op("chi2.logpdf", lambda x, k: st.chi2.logpdf(x, k), lambda x, k: jst.chi2.logpdf(x, k),
           (((2, 3), (2, 3)),), _pos3, F),
        Op("chi2.cdf_x", lambda x: st.chi2.cdf(x, 3.0), lambda x: jst.chi2.cdf(x, 3.0), U, _pos3,
           F),
        Op("beta.logpdf", lambda x, a, b: st.beta.logpdf(x, a, b),
           lambda x, a, b: jst.beta.logpdf(x, a, b), B3, _unit, F),
        Op("beta.pdf", lambda x: st.beta.pdf(x, 2.0, 3.0), lambda x: jst.beta.pdf(x, 2.0, 3.0), U,
           _unit, F),
        Op("poisson.logpmf_mu", lambda mu: st.poisson.logpmf(K, mu),
           lambda mu: jst.poisson.logpmf(K, mu), U, _pos3, F),
        Op("poisson.pmf_mu", lambda mu: st.poisson.pmf(K, mu), lambda mu: jst.poisson.pmf(K, mu),
           U, _pos3, F),
        Op("poisson.cdf_mu", lambda mu: st.poisson.cdf(K, mu), lambda mu: jst.poisson.cdf(K, mu),
           U, _pos3, F),
        Op("dirichlet.logpdf", lambda x: st.dirichlet.logpdf(x, ALPHA),
           lambda x: jst.dirichlet.logpdf(x, ALPHA), (((3,),), ((3, 4),)), _simplex, F),
        Op("dirichlet.logpdf_alpha", lambda a: st.dirichlet.logpdf(np.array([0.2, 0.3, 0.5]), a),
           lambda a: jst.dirichlet.logpdf(jnp.array([0.2, 0.3, 0.5]), a), (((3,),),), _pos3,
           ("float64",)),
        # the covariance argument must be positive definite: both sides symmetrize and
        # shift it before the density
        Op("multivariate_normal.logpdf",
           lambda x, c: st.multivariate_normal.logpdf(
               x, MEAN, (c + ad.transpose(c)) * 0.5 + 4.0 * ad.eye(3)),
           lambda x, c: jst.multivariate_normal.logpdf(
               x, MEAN, (c + jnp.transpose(c)) * 0.5 + 4.0 * jnp.eye(3)),
           (((3,), (3, 3)),), "any", ("float64",), rtol64=1e-8),
        Op("multivariate_normal.pdf_batch", lambda x: st.multivariate_normal.pdf(x, MEAN, _C3),
           lambda x: jst.multivariate_normal.pdf(x, MEAN, _C3), (((4, 3),),), "any", ("float64",),
           rtol64=1e-8),
        Op("special.logsumexp", lambda x: ad.scipy.special.logsumexp(x, axis=0, b=2.0),
           lambda x: jss.logsumexp(x, axis=0, b=2.0), U, "any", F),
    ]

# --- linalg: every primitive of ops/dense_linalg through a public ad.linalg function --------
def _linalg_rows() -> list[Op]:
    """Well-conditioned inputs (``+ 3 I``, ``a a^T + 3 I``) and gauge-invariant outputs
    (squared eigen/singular vector entries), so values and derivatives are comparable."""
    la = ad.linalg
    eye3 = np.eye(3)
    F = ("float32", "float64")
    sq = (((3, 3),),)
    shift = np.diag([0.0, 3.0, 6.0])  # distinct eigenvalues for eig

    def spd(m: Any, a: Any) -> Any:
        return m.matmul(a, m.swapaxes(a, -1, -2)) + 3.0 * eye3

    def sylvester_jax(a: Any, b: Any, c: Any) -> Any:
        a, b = a + 3.0 * eye3, b + 3.0 * eye3
        k = jnp.kron(jnp.eye(3), a) + jnp.kron(b.T, jnp.eye(3))
        return jnp.linalg.solve(k, c.flatten(order="F")).reshape((3, 3), order="F")

    def sqrtm_jax(a: Any) -> Any:
        w, v = jnp.linalg.eigh(spd(jnp, a))
        return (v * jnp.sqrt(w)) @ v.T

    def eigh_ours(a: Any) -> Any:
        w, v = la.eigh(a + ad.swapaxes(a, -1, -2))
        return ad.concatenate([ad.reshape(w, (1, 3)), v * v], axis=0)

    def eigh_jax(a: Any) -> Any:
        w, v = jnp.linalg.eigh(a + a.T)
        return jnp.concatenate([w.reshape(1, 3), v * v], axis=0)

    def svd_ours(a: Any) -> Any:
        u, s, vh = la.svd(a)
        return ad.concatenate([ad.reshape(s, (1, 3)), u * u, vh * vh], axis=0)

    def svd_jax(a: Any) -> Any:
        u, s, vh = jnp.linalg.svd(a, full_matrices=False)
        return jnp.concatenate([s.reshape(1, 3), u * u, vh * vh], axis=0)

    return [
        Op("la.solve", lambda a, b: la.solve(a + 3.0 * eye3, b),
           lambda a, b: jnp.linalg.solve(a + 3.0 * eye3, b), (((3, 3), (3, 2)),), "any", F),
        Op("la.solve_triangular",
           lambda a, b: la.solve_triangular(a + 3.0 * eye3, b, lower=True),
           lambda a, b: jax.scipy.linalg.solve_triangular(a + 3.0 * eye3, b, lower=True),
           (((3, 3), (3, 2)),), "any", F),
        Op("la.inv", lambda a: la.inv(a + 3.0 * eye3),
           lambda a: jnp.linalg.inv(a + 3.0 * eye3), sq, "any", F),
        Op("la.det", lambda a: la.det(a + 3.0 * eye3),
           lambda a: jnp.linalg.det(a + 3.0 * eye3), sq, "any", F),
        Op("la.slogdet", lambda a: la.slogdet(a + 3.0 * eye3)[1],
           lambda a: jnp.linalg.slogdet(a + 3.0 * eye3)[1], sq, "any", F),
        Op("la.cholesky", lambda a: la.cholesky(spd(ad, a)),
           lambda a: jnp.linalg.cholesky(spd(jnp, a)), sq, "any", F),
        Op("la.qr", lambda a: ad.concatenate(list(la.qr(a)), axis=0),
           lambda a: jnp.concatenate(jnp.linalg.qr(a), axis=0), (((4, 3),),), "any", F),
        Op("la.eigh", eigh_ours, eigh_jax, sq, "any", F, rtol32=2e-3),
        Op("la.svd", svd_ours, svd_jax, (((4, 3),),), "any", F, rtol32=2e-3),
        Op("la.eigvals", lambda a: la.eigvals(a + shift), lambda a: jnp.linalg.eigvals(a + shift),
           sq, "unit", F, rtol32=2e-3),
        Op("la.expm", lambda a: la.expm(a * 0.5),
           lambda a: jax.scipy.linalg.expm(a * 0.5), sq, "any", F, rtol32=1e-3),
        Op("la.sqrtm", lambda a: la.sqrtm(spd(ad, a)), sqrtm_jax, sq, "any", F, rtol32=2e-3),
        Op("la.solve_sylvester",
           lambda a, b, c: la.solve_sylvester(a + 3.0 * eye3, b + 3.0 * eye3, c),
           sylvester_jax, (((3, 3), (3, 3), (3, 3)),), "any", F, rtol32=1e-3),
        Op("la.pinv", la.pinv, jnp.linalg.pinv, (((4, 3),),), "any", F, rtol32=2e-3),
        Op("la.svd_full", lambda a: la.svd(a, full_matrices=True)[1],
           lambda a: jnp.linalg.svd(a, full_matrices=True)[1], (((4, 3),),), "any", F),
    ]


# --- primitives the family rows do not apply (the coverage table drives each one) ---------
def _coverage_rows() -> list[Op]:
    F = ("float32", "float64")
    C = ("complex64", "complex128")
    M = (((2, 3),),)
    B = (((2, 3), (2, 3)),)
    return [
        Op("argmax_axis", lambda x: ad.argmax(x, axis=1), lambda x: jnp.argmax(x, axis=1), M,
           "distinct", F),
        Op("argmin_axis", lambda x: ad.argmin(x, axis=1), lambda x: jnp.argmin(x, axis=1), M,
           "distinct", F),
        Op("all_positive", lambda x: ad.all(x > 0.0, axis=1),
           lambda x: jnp.all(x > 0.0, axis=1), M, "any", F),
        Op("any_positive", lambda x: ad.any(x > 0.0, axis=1),
           lambda x: jnp.any(x > 0.0, axis=1), M, "any", F),
        Op("less_equal", ad.less_equal, jnp.less_equal, B, "any", F),
        Op("logical_and", lambda x, y: ad.logical_and(x > 0.0, y > 0.0),
           lambda x, y: jnp.logical_and(x > 0.0, y > 0.0), B, "any", F),
        Op("logical_or", lambda x, y: ad.logical_or(x > 0.0, y > 0.0),
           lambda x, y: jnp.logical_or(x > 0.0, y > 0.0), B, "any", F),
        Op("logical_xor", lambda x, y: ad.logical_xor(x > 0.0, y > 0.0),
           lambda x, y: jnp.logical_xor(x > 0.0, y > 0.0), B, "any", F),
        Op("logical_not", lambda x: ad.logical_not(x > 0.0),
           lambda x: jnp.logical_not(x > 0.0), M, "any", F),
        Op("rint", ad.rint, jnp.rint, M, "away", F),
        Op("log_softmax_axis", lambda x: ad.log_softmax(x, axis=-1),
           lambda x: jax.nn.log_softmax(x, axis=-1), M, "any", F),
        Op("einsum_diag", lambda x: ad.einsum("ii->i", x), lambda x: jnp.einsum("ii->i", x),
           (((3, 3),),), "any", F),
        Op("linalg.triu", lambda x: ad.linalg.triu(x, 1), lambda x: jnp.triu(x, 1),
           (((3, 3),),), "any", F),
        Op("angle", ad.angle, jnp.angle, M, "away", C),
        Op("imag", ad.imag, jnp.imag, M, "any", C),
        Op("view_as_real", ad.view_as_real, lambda x: jnp.stack([x.real, x.imag], axis=-1),
           M, "any", C),
        Op("view_as_complex", ad.view_as_complex, lambda x: x[..., 0] + 1j * x[..., 1],
           (((2, 3, 2),),), "any", F),
    ]


_CONCRETE = "TracerError: the implementation reads a concrete value (np.asarray of a tracer)"
# rows of the families that cannot run traced (tests/traced/test_ops_vs_jax.py), and why
TRACED_GAPS: dict[str, str] = {
    "mod_op": "tracers have no ``%`` operator (``__mod__``)",
    "rmod_op": "tracers have no ``%`` operator (``__rmod__``)",
    "flatten_method": "tracers have no ``.flatten()`` method",
    "eye": "the row reads ``x.dtype.numpy``, an eager-handle attribute",
    "r_": _CONCRETE, "r_linspace": _CONCRETE, "c_": _CONCRETE,
}


def _rows(family: str, rows: list[Op]) -> list[Op]:
    out = [dataclasses.replace(r, family=family,
                               skip={**r.skip, **({"traced": TRACED_GAPS[r.name]}
                                                  if r.name in TRACED_GAPS else {})})
           for r in rows]
    for r in out:
        bad = set(r.skip) - DEFAULT_MODES[family]
        assert not bad, f"{r.name}: skips {bad}, which its family does not run"
    return out


OPS: tuple[Op, ...] = (
    *_rows("core", _core_rows()),
    *_rows("math", _math_rows()),
    *_rows("manip", _manip_rows()),
    *_rows("scan", _scan_rows()),
    *_rows("fft", _fft_rows()),
    *_rows("scipy", _scipy_rows()),
    *_rows("linalg", _linalg_rows()),
    *_rows("coverage", _coverage_rows()),
)
_names = [o.name for o in OPS]
assert len(set(_names)) == len(_names), "op names must be unique (inputs are seeded by name)"
assert set(TRACED_GAPS) <= set(_names), set(TRACED_GAPS) - set(_names)
FAMILIES = tuple(DEFAULT_MODES)


def table(family: str | None = None, mode: str | None = None) -> list[Op]:
    """The rows of ``family`` (every family when None) that run in ``mode`` (any when None)."""
    assert family is None or family in DEFAULT_MODES, family
    assert mode is None or mode in MODES, mode
    return [o for o in OPS
            if (family is None or o.family == family) and (mode is None or mode in o.modes)]


def skipped(mode: str) -> dict[str, str]:
    """Row name -> the reason it does not run in ``mode``."""
    return {o.name: o.skip[mode] for o in OPS if mode in o.skip}
