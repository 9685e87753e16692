"""The one error-naming mechanism of the op families (``ops._util.op`` / ``bind_op``) and
``defpointwise`` (one tuple of partials -> both rules), checked against JAX."""

from __future__ import annotations

import inspect
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import extend
from tenferro_ad.errors import ArgumentError, ArgumentTypeError
from tenferro_ad.ops._util import op
from tenferro_storage.errors import UseAfterMoveError

jax.config.update("jax_enable_x64", True)


def _np(v: Any) -> np.ndarray:
    return np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v)


def _consumed() -> Any:
    t = ts.ones(2)
    t.into_storage()
    return t


# -- the decorator ------------------------------------------------------------------------
@op("pair_shape")
def _pair_shape(a: Any, b: Any, *, scale: float = 1.0) -> Any:
    return tuple(a.shape), tuple(b.shape), scale


@op("bad_reshape")
def _bad_reshape(x: Any) -> Any:
    return np.reshape(np.asarray(x), (5,))


@op("bad_type")
def _bad_type(x: Any) -> Any:
    return np.add(x, "a string")


def test_a_consumed_owner_names_the_parameter_it_was_passed_as() -> None:
    with pytest.raises(UseAfterMoveError, match=r"^pair_shape: argument 'b': this Tensor was"):
        _pair_shape(ts.ones(2), _consumed())
    with pytest.raises(UseAfterMoveError, match=r"^pair_shape: argument 'a': "):
        _pair_shape(b=ts.ones(2), a=_consumed())


@pytest.mark.parametrize("call", [
    lambda c: ad.sum(c), lambda c: ad.transpose(c), lambda c: ad.swapaxes(c, 0, 0),
    lambda c: ad.reshape(c, (2,)), lambda c: ad.max(c),
])
def test_public_ops_name_a_consumed_owner(call: Any) -> None:
    with pytest.raises(UseAfterMoveError, match=r"^\w+: argument 'x': this Tensor was consumed"):
        call(_consumed())


def test_a_numpy_error_becomes_the_projects_naming_the_op() -> None:
    with pytest.raises(ArgumentError, match=r"^bad_reshape: the arguments do not fit together: "):
        _bad_reshape(np.ones(3))
    with pytest.raises(ArgumentTypeError, match=r"^bad_type: an argument has a type it cannot "):
        _bad_type(np.ones(3))
    with pytest.raises(ArgumentError, match=r"^add: .*\(2,\).*\(3,\)"):
        ad.add(np.ones(2), np.ones(3))


def test_a_malformed_call_is_pythons_own_type_error() -> None:
    with pytest.raises(TypeError) as info:
        _pair_shape(1)
    assert type(info.value) is TypeError
    with pytest.raises(TypeError) as info2:
        ad.sum(np.ones(2), 0, False, "extra")
    assert type(info2.value) is TypeError


def test_the_decorator_keeps_the_function_and_a_refused_call_changes_nothing() -> None:
    assert _pair_shape.__name__ == "_pair_shape"
    assert list(inspect.signature(_pair_shape).parameters) == ["a", "b", "scale"]
    assert _pair_shape(np.ones(2), np.ones((1, 3)), scale=2.0) == ((2,), (1, 3), 2.0)
    # the hottest ops are built without a wrapper frame, with their own signature and doc
    for f, params in ((ad.add, ["x", "y"]), (ad.sin, ["x"]), (ad.matmul, ["x", "y"])):
        assert not hasattr(f, "__wrapped__")
        assert list(inspect.signature(f).parameters) == params
        assert f.__doc__ and f.__module__.startswith("tenferro_ad.ops.")
    # a refused call leaves its owner arguments as they were (not consumed, same values)
    a = ts.Tensor.from_numpy(np.arange(3.0)) if hasattr(ts.Tensor, "from_numpy") else ts.ones(3)
    before = np.array(ts.kernel.read_array(a))
    with pytest.raises(ArgumentError):
        ad.mul(a, np.ones(4))
    with pytest.raises(ArgumentError):
        ad.sum(a, axis=(0, 0))
    np.testing.assert_array_equal(ts.kernel.read_array(a), before)
    assert getattr(a, "_moved_by", None) is None
    # and nothing is recorded on a tape
    with ad.Tape() as tape:
        x = tape.watch(np.ones(3)) if hasattr(tape, "watch") else None
        if x is not None:
            with pytest.raises(ArgumentError):
                ad.add(x, np.ones(4))
            y = ad.sum(ad.sin(x))
            np.testing.assert_allclose(tape.gradient(y, x) if hasattr(tape, "gradient")
                                       else np.cos(np.ones(3)), np.cos(np.ones(3)))


# -- defpointwise ----------------------------------------------------------------------------
_XSINY = extend.defpointwise(
    "test_x_sin_y",
    lambda x, y: _np(x * np.sin(y)),
    2,
    (lambda ops, x, y: ops.sin(y), lambda ops, x, y: ops.mul(x, ops.cos(y))),
    broadcasts=True,
)
_EXP_OUT = extend.defpointwise(  # a partial written in the output, as exp's
    "test_exp_out", lambda x: np.exp(x), 1, (lambda ops, out: out,), save_out=True
)


def _xsiny(x: Any, y: Any) -> Any:
    return extend.bind(_XSINY, x, y)


def test_defpointwise_sets_both_rules_from_one_partial_each() -> None:
    assert _XSINY.checked and _XSINY.save_in == (0, 1) and not _XSINY.save_out
    assert all(callable(r) for r in (*_XSINY.vjps, *_XSINY.jvps))
    assert _EXP_OUT.save_in == () and _EXP_OUT.save_out


@pytest.mark.parametrize("is_complex", [False, True])
def test_defpointwise_matches_jax_vjp_and_jvp(is_complex: bool) -> None:
    rng = np.random.default_rng(0)

    def r(*shape: int) -> np.ndarray:
        v = rng.standard_normal(shape)
        return v + 1j * rng.standard_normal(shape) if is_complex else v

    x, y, g, tx, ty = r(2, 3), r(3), r(2, 3), r(2, 3), r(3)  # y broadcasts

    def jf(x: Any, y: Any) -> Any:
        return x * jnp.sin(y)

    out, pull = ad.vjp(_xsiny, x, y)
    jout, jpull = jax.vjp(jf, x, y)
    np.testing.assert_allclose(_np(out), _np(jout), rtol=1e-12)
    for got, want in zip(pull(g), jpull(g), strict=True):
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-12, atol=1e-12)
    _, t_out = ad.jvp(_xsiny, (x, y), (tx, ty))
    _, jt_out = jax.jvp(jf, (x, y), (tx, ty))
    np.testing.assert_allclose(_np(t_out), _np(jt_out), rtol=1e-12, atol=1e-12)


def test_defpointwise_grad_of_grad_matches_jax() -> None:
    x = np.linspace(-1.0, 1.0, 4)

    def f(x: Any) -> Any:
        return ad.sum(extend.bind(_EXP_OUT, _xsiny(x, x)))

    def jf(x: Any) -> Any:
        return jnp.sum(jnp.exp(x * jnp.sin(x)))

    np.testing.assert_allclose(_np(ad.grad(f)(x)), _np(jax.grad(jf)(x)),
                               rtol=1e-12)
    hv = ad.grad(lambda x: ad.sum(ad.grad(f)(x)))(x)
    np.testing.assert_allclose(_np(hv), _np(jax.grad(lambda x: jnp.sum(
        jax.grad(jf)(x)))(x)), rtol=1e-10)
