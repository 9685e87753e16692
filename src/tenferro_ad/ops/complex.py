"""Complex numbers with JAX's conventions: conj, real, imag, complex, angle, reinterpretation.

JAX's convention, which every rule here follows: a VJP is the *transpose* of the JVP
under the real bilinear pairing ``<a, b> = Re sum(a * b)``.  Consequences:

* holomorphic ops (add, mul, div, exp, log, sin, matmul, einsum, ...) need no special
  complex rule -- their real-valued rules already are the transposes (no conjugation);
* for a real loss ``L`` of complex ``z``, ``grad(L)(z) = dL/dRe z - i dL/dIm z`` (the
  conjugate of PyTorch's), equal to ``jax.grad``; ``grad`` of a holomorphic ``f``
  seeded with 1 equals ``jax.grad(f, holomorphic=True)``.

The four linear maps ``real``, ``imag`` (complex -> real) and their transposes
``real_t`` (``x -> x + 0j``), ``imag_t`` (``x -> -1j * x``) are primitives; ``complex``
is derived.  ``conj`` is linear and self-transposing.  ``abs`` (the core's primitive)
gets complex-aware rules here (``g * conj(sign z)``, ``Re(conj(sign z) t)``), re-registered
through ``Primitive.defvjp``/``defjvp``.  ``view_as_real`` / ``view_as_complex`` are
metadata-only aliases (the storage kernel's zero-copy reinterpretation; no allocation,
no copy) whose transposes are each other up to a conjugation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_storage as ts

from .._core._dispatch import bind
from .._core._handle import EagerTensor
from .._core._primitive import Primitive, Zero, deflinear, defprimitive
from .._traced._batch_rules import defbatch, leading
from ..errors import ArgumentTypeError
from . import elementwise
from ._util import op, stored_value_arg
from .shape import value_of

Array = Any

__all__ = [
    "ANGLE",
    "CONJ",
    "IMAG",
    "IMAG_T",
    "REAL",
    "REAL_T",
    "VIEW_AS_COMPLEX",
    "VIEW_AS_REAL",
    "angle",
    "complex",
    "conj",
    "imag",
    "is_complex",
    "real",
    "view_as_complex",
    "view_as_real",
]

_COMPLEX_OF = {np.dtype(np.float64): np.complex128, np.dtype(np.float32): np.complex64}


def _dtype(x: Any) -> np.dtype[Any]:
    dt: np.dtype[Any]
    if isinstance(x, EagerTensor):
        dt = x._r("dtype").a.dtype
    elif isinstance(x, ts.Tensor | ts.TensorView | ts.TensorViewMut):
        dt = ts.kernel.read_array(x).dtype  # borrowed for the read
    else:
        dt = np.result_type(x)
    return dt


def is_complex(x: Any) -> bool:
    """Whether ``x`` (a handle, numpy array or scalar) holds complex numbers. O(1).  (A
    predicate for rules and the ops here: the calling op names a failure.)"""
    return _dtype(x).kind == "c"


def _real_impl(x: Array) -> Array:
    return np.array(np.real(x)) if np.iscomplexobj(x) else np.array(x, copy=True)


def _imag_impl(x: Array) -> Array:
    return np.array(np.imag(x)) if np.iscomplexobj(x) else np.zeros_like(x)


def _real_t_impl(x: Array) -> Array:
    return np.asarray(x).astype(_COMPLEX_OF.get(np.result_type(x), np.complex128))


def _imag_t_impl(x: Array) -> Array:
    return np.multiply(_real_t_impl(x), -1j)


REAL = defprimitive("real", _real_impl, 1)
defbatch(REAL, leading("real"))
IMAG = defprimitive("imag", _imag_impl, 1)
defbatch(IMAG, leading("imag"))
REAL_T = defprimitive("real_t", _real_t_impl, 1)
defbatch(REAL_T, leading("real_t"))
IMAG_T = defprimitive("imag_t", _imag_t_impl, 1)
defbatch(IMAG_T, leading("imag_t"))


# real(x) of a real x is the identity (and its transpose too); of a complex x its
# transpose embeds: real_t.  The rule sees only g, so the primal dtype rides as a param.
deflinear(REAL, lambda ops, g, *, src_complex=True: ops.apply(REAL_T, g) if src_complex else g)
deflinear(
    IMAG,
    lambda ops, g, *, src_complex=True: (
        ops.apply(IMAG_T, g) if src_complex else Zero(tuple(g.shape), g.dtype)
    ),
)
deflinear(REAL_T, lambda ops, g: ops.apply(REAL, g, src_complex=True))
deflinear(IMAG_T, lambda ops, g: ops.apply(IMAG, g, src_complex=True))
REAL.impl = lambda x, *, src_complex=True: _real_impl(x)
IMAG.impl = lambda x, *, src_complex=True: _imag_impl(x)

CONJ: Primitive = deflinear(
    defprimitive("conj", lambda x: np.conj(x) if np.iscomplexobj(x) else np.array(x, copy=True), 1),
    lambda ops, g: ops.apply(CONJ, g),
)
defbatch(CONJ, leading("conj"))


def _angle_rule(ops: Any, g: Array, z: Array) -> Array:
    # d angle = Im(dz / z) = Im(conj(z) dz) / |z|^2;  transpose: ct -> -i ct conj(z) / |z|^2
    if not is_complex(z):
        return Zero(tuple(z.shape), _dtype(z))
    w = ops.apply(CONJ, z) / (ops.apply(REAL, z) ** 2 + ops.apply(IMAG, z) ** 2)
    return ops.apply(IMAG_T, g) * w


def _angle_jvp(ops: Any, t: Array, z: Array) -> Array:
    if not is_complex(z):
        return Zero(tuple(z.shape), np.float64)
    den = ops.apply(REAL, z) ** 2 + ops.apply(IMAG, z) ** 2
    return ops.apply(IMAG, ops.apply(CONJ, z) * t) / den


ANGLE = defprimitive(
    "angle", lambda z: np.angle(z), 1, save_in=(0,), vjp=(_angle_rule,), jvp=(_angle_jvp,)
)
defbatch(ANGLE, leading("angle"))


# -- abs: complex-aware rules for the core's primitive (JAX: ct * conj(z)/|z|) -----------------
def _unit(ops: Any, x: Array) -> Array:
    """``x / |x|`` (0 where ``x == 0``).  For complex ``x`` this direction depends on ``x``,
    so it is built from differentiable ops (``sign`` is non-differentiable: right for real
    ``x``, wrong for complex ``x`` once the backward itself is differentiated)."""
    if not is_complex(x):
        return ops.sign(x)
    a = ops.abs(x)
    return ops.div(x, ops.where(ops.eq(a, 0.0), 1.0, a))


def _real_abs_d(ops: Any, g: Array, x: Array) -> Array:
    """``g`` where ``x >= 0`` else ``-g``: JAX's real ``abs`` derivative (1 at 0, -1 at nan)."""
    return ops.where(ops.gt(x, 0), g, ops.where(ops.eq(x, 0), g, ops.neg(g)))


def _abs_vjp(ops: Any, g: Array, x: Array) -> Array:
    if not is_complex(x):
        return _real_abs_d(ops, g, x)
    return ops.mul(g, ops.apply(CONJ, _unit(ops, x)))


def _abs_jvp(ops: Any, t: Array, x: Array) -> Array:
    if is_complex(x):
        return ops.apply(REAL, ops.mul(ops.apply(CONJ, _unit(ops, x)), t))
    return _real_abs_d(ops, t, x)


elementwise.ABS.defvjp(_abs_vjp).defjvp(_abs_jvp)


# -- zero-copy reinterpretation ------------------------------------------------------------------
def _as_real(z: Array) -> Array:
    z = np.asarray(z)
    if z.dtype.kind != "c":
        raise ArgumentTypeError(
            f"view_as_real: argument 'z' must be complex, got dtype {z.dtype}"
        )
    return z[..., None].view(z.real.dtype)


def _as_complex(x: Array) -> Array:
    x = np.asarray(x)
    if x.dtype.kind != "f" or x.ndim == 0 or x.shape[-1] != 2 or x.strides[-1] != x.itemsize:
        raise ArgumentTypeError(
            "view_as_complex: argument 'x' must be a real value with a unit-stride trailing "
            f"axis of extent 2, got dtype {x.dtype} shape {x.shape}; make it contiguous first"
        )
    return x.view(_COMPLEX_OF[x.dtype])[..., 0]


VIEW_AS_REAL = defprimitive("view_as_real", _as_real, 1, alias=True)
VIEW_AS_COMPLEX = defprimitive("view_as_complex", _as_complex, 1, alias=True)
# <g, vr(dz)> = Re sum((g0 - i g1) dz):  the transpose of view_as_real is conj(vc(g)).
VIEW_AS_REAL.defvjp(lambda ops, g: ops.apply(CONJ, ops.apply(VIEW_AS_COMPLEX, g)))
VIEW_AS_REAL.defjvp(lambda ops, t: ops.apply(VIEW_AS_REAL, t))
VIEW_AS_COMPLEX.defvjp(lambda ops, g: ops.apply(VIEW_AS_REAL, ops.apply(CONJ, g)))
VIEW_AS_COMPLEX.defjvp(lambda ops, t: ops.apply(VIEW_AS_COMPLEX, t))


# -- public functions ----------------------------------------------------------------------------
@op("conj")
def conj(x: Any) -> EagerTensor:
    """Complex conjugate: one allocation; linear, saves nothing.  Of a real value: the
    value itself, as a metadata alias (no allocation, no copy).

    Cost: allocates unless an alias; no copy; no sync; no dispatch; O(n), O(1) as an alias.
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    if value_of("conj", x)[1].kind != "c":
        return bind(elementwise.SAME, x)
    return bind(CONJ, x)


@op("real")
def real(x: Any) -> EagerTensor:
    """Real part: one allocation.  Of a real value: the value itself, as a metadata alias
    (no allocation, no copy).

    Cost: allocates unless an alias; no copy; no sync; no dispatch; O(n), O(1) as an alias.
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    if value_of("real", x)[1].kind != "c":
        return bind(elementwise.SAME, x)
    return bind(REAL, x, src_complex=True)


@op("imag")
def imag(x: Any) -> EagerTensor:
    """Imaginary part (zeros for real input, with a zero gradient). One allocation.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    return bind(IMAG, x, src_complex=value_of("imag", x)[1].kind == "c")


@op("complex")
def complex(re: Any, im: Any) -> EagerTensor:
    """``re + 1j * im`` from two real values (derived: real_t(re) - imag_t(im)). O(n).

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, UseAfterMoveError."""
    stored_value_arg("complex", "re", re)
    stored_value_arg("complex", "im", im)
    return bind(REAL_T, re) - bind(IMAG_T, im)


@op("angle")
def angle(z: Any) -> EagerTensor:
    """Argument of ``z`` in radians (``numpy.angle``); gradient ``-i ct conj(z)/|z|^2``
    (JAX's); zero gradient for real input.  At ``z = 0`` the gradient is ``nan``.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(ANGLE, z)


@op("view_as_real")
def view_as_real(z: Any) -> EagerTensor:
    """The complex value ``z`` seen as real with a trailing axis of 2 (re, im).

    Metadata-only: no allocation, no copy (the storage kernel's sealed complex<->real
    reinterpretation).  Differentiable: the cotangent maps back as ``g0 - 1j*g1``.

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(VIEW_AS_REAL, z)


@op("view_as_complex")
def view_as_complex(x: Any) -> EagerTensor:
    """The real value ``x`` (trailing axis of 2, unit stride) seen as complex. Zero-copy.

    Raises ``TypeError`` naming the op when ``x`` is not real with such a trailing axis.

    Cost: no allocation (an alias); no copy; no sync; no dispatch; O(1).
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return bind(VIEW_AS_COMPLEX, x)

# batching rules: both views act on the trailing axis only
defbatch(VIEW_AS_REAL, leading("view_as_real"))
defbatch(VIEW_AS_COMPLEX, leading("view_as_complex"))
