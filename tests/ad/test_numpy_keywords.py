"""numpy's keywords on handle methods and numpy functions are honoured or refused by name,
never accepted and dropped: ``order=`` of ravel/flatten, ``initial=`` of reductions,
``kind=``/``order=`` of argsort, and the complex-to-real cast's warning."""

from __future__ import annotations

import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import NumpyFunctionError

NP: Any = np  # numpy's functions called on tenferro values (its stubs know only arrays)
_SHAPES = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)


@given(a=hnp.arrays(np.float64, _SHAPES, elements=st.floats(-5, 5)),
       order=st.sampled_from(["C", "F"]), how=st.sampled_from(["ravel", "flatten", "np"]))
def test_ravel_and_flatten_honour_order_like_numpy_with_the_matching_gradient(
    a: np.ndarray[Any, Any], order: str, how: str
) -> None:
    """Values equal numpy's ``ravel(order)`` and the gradient of a weighted sum of the
    flattened value is the weights put back in that order (JAX's oracle).  Mutant: ``order``
    ignored (C order always: wrong values for ``"F"``)."""
    w = np.arange(1.0, a.size + 1)

    def flat(x: Any) -> Any:
        return NP.ravel(x, order) if how == "np" else getattr(x, how)(order)

    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(a.copy()))
        y = flat(x)
        np.testing.assert_array_equal(y.to_numpy(), NP.ravel(a, order))
        g = tape.backward(ad.sum(y * w)).take_grad(x)
    assert g is not None
    want = jax.grad(lambda v: jnp.sum(jnp.ravel(v, order) * w))(a)
    np.testing.assert_allclose(g.to_numpy(), np.asarray(want))


@pytest.mark.parametrize("order", ["A", "K", "c", 1, None])
def test_ravel_refuses_an_order_it_cannot_honour_naming_it(order: Any) -> None:
    x: Any = ad.sin(np.arange(6.0).reshape(2, 3))
    calls: list[Any] = [lambda: x.ravel(order), lambda: x.flatten(order),
                        lambda: NP.ravel(x, order)]
    for call in calls:
        with pytest.raises(NumpyFunctionError, match=r"argument 'order' must be 'C' or 'F'"):
            call()


@pytest.mark.parametrize(
    "name, combine",
    [("sum", np.add), ("prod", np.multiply), ("max", np.maximum), ("min", np.minimum)],
)
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_initial_is_folded_into_a_reduction_by_method_and_by_numpy(
    name: str, combine: Any, axis: Any
) -> None:
    """``x.sum(initial=5)``, ``np.max(x, initial=...)`` equal numpy's values, and the
    gradient of the sum form is unchanged by the constant.  Mutant: ``initial`` dropped."""
    a = np.array([[0.5, -2.0, 3.0], [1.5, 0.25, -1.0]])
    initial = 2.5
    want = getattr(np, name)(a, axis=axis, initial=initial)
    x: Any = ad.sin(a) * 0.0 + a  # a handle
    np.testing.assert_allclose(getattr(x, name)(axis=axis, initial=initial).to_numpy(), want)
    np.testing.assert_allclose(getattr(np, name)(x, axis=axis, initial=initial).to_numpy(), want)
    np.testing.assert_allclose(getattr(x, name)(axis=axis).to_numpy(),
                               getattr(np, name)(a, axis=axis))
    g = ad.grad(lambda v: ad.sum(getattr(v, name)(axis=axis, initial=initial)))(a)
    jg = jax.grad(lambda v: jnp.sum(getattr(jnp, name)(v, axis=axis, initial=initial)))(a)
    np.testing.assert_allclose(g.to_numpy(), np.asarray(jg))
    assert combine is not None


def test_a_keyword_a_reduction_cannot_honour_is_refused_by_name() -> None:
    x: Any = ad.sin(np.arange(6.0))
    with pytest.raises(NumpyFunctionError, match=r"mean: argument 'initial' is not supported"):
        x.mean(initial=1.0)
    with pytest.raises(NumpyFunctionError, match=r"sum: argument 'foo' is not supported"):
        x.sum(foo=1)
    with pytest.raises(NumpyFunctionError, match=r"max: argument 'where'"):
        x.max(where=np.ones(6, bool), initial=0.0)


@pytest.mark.parametrize(
    "kind", [None, "quicksort", "mergesort", "heapsort", "stable", "Q", "heap", "stablesort"]
)
def test_argsort_accepts_every_numpy_kind_with_numpy_s_stable_order(kind: Any) -> None:
    a = np.array([[3.0, 1.0, 3.0, 0.0], [2.0, 2.0, 1.0, 2.0]])
    x: Any = ad.sin(a) * 0.0 + a
    want = np.argsort(a, axis=-1, kind="stable")
    np.testing.assert_array_equal(x.argsort(kind=kind).to_numpy(), want)
    np.testing.assert_array_equal(NP.argsort(x, kind=kind).to_numpy(), want)


def test_argsort_refuses_an_unknown_kind_and_a_field_order() -> None:
    x: Any = ad.sin(np.arange(4.0))
    with pytest.raises(NumpyFunctionError, match=r"argsort: argument 'kind' must be one of"):
        x.argsort(kind="bubble")
    with pytest.raises(NumpyFunctionError, match=r"numpy\.argsort: argument 'kind'"):
        NP.argsort(x, kind="xyz")
    with pytest.raises(NumpyFunctionError, match=r"argument 'order' \(structured fields\)"):
        x.argsort(order="f0")


def test_a_complex_to_real_cast_warns_at_the_user_s_line_like_numpy() -> None:
    """Values keep the real part; the warning is numpy's ``ComplexWarning`` attributed to
    the caller's line (not a frame inside tenferro_ad).  Mutant: the warning removed."""
    z = np.array([1.0 + 2.0j, -3.0 - 1.0j])
    with pytest.warns(np.exceptions.ComplexWarning, match="discards the imaginary part") as rec:
        r = ad.astype(z, "float64")
    assert rec[0].filename == __file__
    np.testing.assert_array_equal(r.to_numpy(), z.real)
    with pytest.warns(np.exceptions.ComplexWarning):
        ad.sin(z).astype(np.float32)  # the method warns too


def test_the_derivatives_of_a_real_to_complex_cast_warn_nothing() -> None:
    """A real input's cotangent is the real part of the complex one by design: backward,
    jit, vmap and second order through ``astype(x, complex)`` raise no warning (the suite
    turns warnings into errors)."""

    def f(x: Any) -> Any:
        return ad.sum(ad.real(ad.astype(x, "complex128") ** 2 * (1.0 + 2.0j)))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = np.array([0.5, -1.0, 2.0])
        np.testing.assert_allclose(ad.grad(f)(x).to_numpy(), 2 * x)
        np.testing.assert_allclose(ad.jit(ad.grad(f))(x).to_numpy(), 2 * x)
        np.testing.assert_allclose(ad.vmap(ad.grad(f))(np.stack([x, x])).to_numpy(),
                                   np.stack([2 * x, 2 * x]))
        np.testing.assert_allclose(ad.grad(lambda v: ad.sum(ad.grad(f)(v)))(x).to_numpy(),
                                   np.full(3, 2.0))


@given(a=hnp.arrays(np.float64, _SHAPES, elements=st.floats(-5, 5)), data=st.data())
def test_transpose_takes_axes_by_keyword_as_numpy_transpose_does(
    a: np.ndarray[Any, Any], data: st.DataObject
) -> None:
    """``ad.transpose(x, axes=p)`` is ``numpy.transpose(a, axes=p)`` (value, and under
    ``ad.jit``), the same as ``ad.transpose(x, p)``; ``axes=None`` reverses; giving the
    permutation both ways, or another keyword, is refused by name.  Mutant: the keyword
    dropped (axes reversed whatever ``p`` says)."""
    p = tuple(data.draw(st.permutations(range(a.ndim))))
    np.testing.assert_array_equal(ad.transpose(a, axes=p).to_numpy(), np.transpose(a, axes=p))
    np.testing.assert_array_equal(
        ad.jit(lambda t: ad.transpose(t, axes=p))(a).to_numpy(), np.transpose(a, p)
    )
    np.testing.assert_array_equal(ad.transpose(a, axes=None).to_numpy(), a.T)
    with pytest.raises(ad.errors.ArgumentTypeError, match="transpose: argument 'axes'"):
        ad.transpose(a, p, axes=p)
    with pytest.raises(ad.errors.ArgumentTypeError, match="keyword argument 'order'"):
        ad.transpose(a, order=p)
