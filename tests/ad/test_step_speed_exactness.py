"""The no-record fast forms behind the training-step benchmarks compute exactly what their
general formulas compute (issue 13; nothing here is timed):

* ``log_softmax``'s kernel (ufunc reductions, log and last subtraction written over its own
  scratch) and its VJP (product and difference over the fresh ``exp(out)``);
* the rule namespace's ``broadcast_to`` (a zero-stride view of a one-element source) and
  ``reshape`` (the array's own method);
* the gradient delivery of ``grad`` (one allocation reason read per call).

Bit-for-bit comparisons: ``np.array_equal`` plus the sign of zero and NaN positions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad._core._namespace import HANDLE_NS, NUMPY_NS
from tenferro_ad._core._state import allocation_reason
from tenferro_ad.ops import reduce as R

_FLOATS = [np.float32, np.float64, np.complex64, np.complex128]


def _same_bits(got: Any, want: Any) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    bits = [np.ascontiguousarray(a).view(np.uint8) for a in (got, want)]
    assert np.array_equal(bits[0], bits[1])


def _reference_log_softmax(a: Any, axes: tuple[int, ...]) -> Any:
    """The composition the kernel had before its in-place form (np.max / np.sum)."""
    shifted = a - np.max(a, axis=axes, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axes, keepdims=True))


def _data(shape: tuple[int, ...], dtype: Any, seed: int = 0) -> Any:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=shape) * 4
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.normal(size=shape)
    return a.astype(dtype)


@pytest.mark.parametrize("dtype", _FLOATS)
@pytest.mark.parametrize(
    ("shape", "axes"), [((128, 10), (1,)), ((128, 10), (0,)), ((7,), (0,)), ((2, 3, 4), (1,))]
)
def test_log_softmax_kernel_equals_the_reference_composition_bit_for_bit(
    dtype: Any, shape: tuple[int, ...], axes: tuple[int, ...]
) -> None:
    """Same bits as the out-of-place ``np.max``/``np.sum`` composition, any dtype and axis."""
    a = _data(shape, dtype)
    a.flags.writeable = False  # the kernel must not write its input
    _same_bits(R._log_softmax_impl(a, axes=axes), _reference_log_softmax(a, axes))


def test_log_softmax_kernel_keeps_special_values_and_int_promotion() -> None:
    """Infinities and NaN give the reference's NaN/-inf pattern; ints compute in float."""
    a = np.array([[0.0, -np.inf, 3.0], [np.inf, 1.0, 2.0], [np.nan, 0.0, 1.0]])
    with np.errstate(invalid="ignore"):
        want = _reference_log_softmax(a, (1,))
        got = R._log_softmax_impl(a, axes=(1,))
    _same_bits(got, want)
    ints = np.array([[1, 2, 3]], np.int32)
    want = _reference_log_softmax(ints.astype(np.float32), (1,))
    _same_bits(R._log_softmax_impl(ints, axes=(1,)), want)


def test_log_softmax_kernel_refuses_an_empty_axis_like_numpy() -> None:
    """A zero-length axis raises numpy's reduction error, as np.max does."""
    with pytest.raises(ValueError, match="zero-size array"):
        R._log_softmax_impl(np.ones((2, 0)), axes=(1,))


@pytest.mark.parametrize("dtype", _FLOATS)
@pytest.mark.parametrize("axes", [(1,), (0,)])
def test_log_softmax_vjp_fast_form_equals_the_namespace_formula_bit_for_bit(
    dtype: Any, axes: tuple[int, ...]
) -> None:
    """``g - exp(out) * sum(g)`` computed in place over ``exp(out)`` gives the same bits."""
    out = R._log_softmax_impl(_data((16, 5), dtype, 1), axes=axes)
    g = _data((16, 5), dtype, 2)
    want = np.subtract(g, np.multiply(np.exp(out), np.sum(g, axis=axes, keepdims=True)))
    got = R._log_softmax_d(NUMPY_NS, g, out, axes=axes)
    _same_bits(got, want)
    assert got is not g and not np.shares_memory(got, g) and not np.shares_memory(got, out)


def test_log_softmax_vjp_general_form_serves_a_wider_cotangent() -> None:
    """A float64 cotangent of a float32 output is not squeezed into float32 scratch."""
    out = R._log_softmax_impl(_data((4, 3), np.float32), axes=(1,))
    g64 = _data((4, 3), np.float64, 3)
    want = g64 - np.exp(out) * np.sum(g64, axis=(1,), keepdims=True)
    got = R._log_softmax_d(NUMPY_NS, g64, out, axes=(1,))
    assert got.dtype == np.float64
    _same_bits(got, want)


def test_log_softmax_gradient_matches_the_composition_through_grad() -> None:
    """End to end: d/dx of a classifier loss equals softmax - onehot over the batch."""
    rng = np.random.default_rng(4)
    o = rng.normal(size=(8, 5)).astype(np.float32)
    labels = rng.integers(0, 5, size=8)
    rows = np.arange(8)
    g = ad.grad(lambda x: -ad.mean(ad.log_softmax(x, axis=-1)[rows, labels]))(o)
    sm = np.exp(o - o.max(1, keepdims=True))
    sm /= sm.sum(1, keepdims=True)
    sm[rows, labels] -= 1
    np.testing.assert_allclose(g.to_numpy(), sm / 8, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    ("x", "shape"),
    [
        (np.float32(2.5), (128,)),
        (np.array(3.0), (2, 3)),
        (np.full((1, 1), 7.0, np.float32), (4, 5)),
        (np.array([4.0, 5.0])[1:], (3, 1)),  # a one-element view with an offset
        (np.array([[1.0 + 2j]]), (0, 1)),
        (np.arange(3.0), (2, 3)),  # not one element: numpy's own broadcast
    ],
)
def test_namespace_broadcast_to_is_numpys_view(x: Any, shape: tuple[int, ...]) -> None:
    """Shape, dtype, zero strides, values and read-only flag are np.broadcast_to's."""
    got = NUMPY_NS.broadcast_to(x, shape)
    want = np.broadcast_to(x, shape)
    assert (got.shape, got.dtype, got.strides) == (want.shape, want.dtype, want.strides)
    assert np.array_equal(got, want) and not got.flags.writeable
    if isinstance(x, np.ndarray):
        assert np.shares_memory(got, x) or got.size == 0


def test_namespace_broadcast_to_refuses_what_numpy_refuses() -> None:
    """A shape the source cannot broadcast to raises numpy's ValueError."""
    for x, shape in ((np.ones(2), (3,)), (np.ones((1, 1, 1)), (4, 4))):
        with pytest.raises(ValueError):
            NUMPY_NS.broadcast_to(x, shape)


@pytest.mark.parametrize("x", [np.arange(6.0), np.float32(1.5), 2.0, [1.0, 2.0]])
def test_namespace_reshape_is_numpys(x: Any) -> None:
    """Arrays, numpy scalars, Python scalars and lists reshape as np.reshape does."""
    shape = (1,) if np.ndim(x) == 0 else (-1, 1)
    got, want = NUMPY_NS.reshape(x, shape), np.reshape(x, shape)
    _same_bits(got, want)
    if isinstance(x, np.ndarray):
        assert np.shares_memory(got, x)


def test_the_sum_vjp_broadcasts_a_scalar_cotangent_exactly() -> None:
    """``mean``'s backward: a 0-d cotangent repeated over the input, read-only, no copy."""
    rule = R.SUM.vjps[0]
    assert callable(rule)
    g = np.float32(0.25)
    got = rule(NUMPY_NS, g, axes=(0, 1), keepdims=False, shape=(3, 4))
    _same_bits(got, np.broadcast_to(np.reshape(g, (1, 1)), (3, 4)))
    assert not got.flags.writeable
    assert HANDLE_NS is not NUMPY_NS


def test_grad_delivers_each_gradient_as_one_owner_with_the_current_reason() -> None:
    """grad's delivery (one reason read per call) adopts each fresh cotangent: one
    allocation with the reason in force, no copy."""
    w = [ts.from_numpy(np.ones((3, 2), np.float32)), ts.from_numpy(np.zeros(2, np.float32))]
    xs = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    x = ts.from_numpy(xs)
    reason = ts.AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT
    f = ad.grad(lambda q, x: ad.sum(ad.tanh(x @ q[0] + q[1])))
    with ts.ledger.capture() as rec, allocation_reason(reason):
        g = f(w, x)
    assert not rec.copies
    assert rec.allocations[reason] >= 2  # the two delivered gradients (and the op outputs)
    with ts.borrow_arrays(g) as (gw, gb):
        t = np.tanh(xs @ np.ones((3, 2), np.float32))
        np.testing.assert_allclose(gb, (1 - t * t).sum(0), rtol=1e-6)
        np.testing.assert_allclose(gw, xs.T @ (1 - t * t), rtol=1e-6)
    with ts.ledger.capture() as rec:
        f(w, x)
    assert rec.allocations[reason] == 0  # outside the block: the ordinary reason again


@pytest.mark.parametrize(
    ("gs", "shape"),
    [((256, 64), (64,)), ((2, 3, 4), (3, 1)), ((5, 3), (1, 3)), ((4,), (4,)), ((2, 1), ()),
     ((3, 1, 2), (1, 1, 2)), ((6,), (1,))],
)
def test_unbroadcast_sums_exactly_the_broadcast_axes_every_time(
    gs: tuple[int, ...], shape: tuple[int, ...]
) -> None:
    """The remembered axes give numpy's own reduction back to the shape, on the first call
    and on a repeated one (a RealTarget of the same shape shares the entry)."""
    from tenferro_ad._core._primitive import RealTarget

    g = np.arange(float(np.prod(gs))).reshape(gs) + 0.5
    nd = len(gs) - len(shape)
    kept = tuple(i + nd for i, n in enumerate(shape) if n == 1 and gs[i + nd] != 1)
    want = np.sum(g, axis=tuple(range(nd)) + kept).reshape(shape)
    for target in (shape, shape, RealTarget(shape)):
        got = NUMPY_NS.unbroadcast(g, target)
        _same_bits(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize(
    "special", [None, np.inf, -np.inf, np.nan, 1e200],  # inf/nan/overflow: the where path
)
def test_relu_mask_product_equals_the_where_form(dtype: Any, special: Any) -> None:
    """The fast ``g * (x > 0)`` has the where's values (zeros compare equal whatever their
    sign); non-finite cotangents and overflowing sums of squares take the where itself, so
    a masked inf gives 0, not nan.  x has exact zeros (relu'(0) = 0) and a NaN."""
    from tenferro_ad.ops import math as M

    rng = np.random.default_rng(5)
    x = rng.normal(size=(6, 5)).astype(np.float64)
    x[0, :2] = 0.0
    x[1, 1] = np.nan
    g = rng.normal(size=(6, 5)).astype(dtype)
    if special is not None:
        if np.dtype(dtype) == np.float32 and special == 1e200:
            special = np.float32(3e38)  # its square overflows float32
        g[2, 0] = special  # x[2, 0] may be either side: both paths are checked
        g[0, 0] = special  # a masked position (x == 0)
    with np.errstate(invalid="ignore", over="ignore"):
        want = np.where(x > 0.0, g, 0.0).astype(dtype)
        got = M._relu_d(NUMPY_NS, g, x)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want, equal_nan=True)
    if special is not None and not (np.isfinite(special) and abs(special) < 1e30):
        _same_bits(got, want)  # non-finite g: the where form itself


def test_relu_gradient_through_grad_is_the_mask() -> None:
    """End to end: the gradient of sum(relu(x) * w) is w where x > 0, else 0."""
    x = np.array([-1.0, 0.0, 2.0, np.nan])
    w = np.array([3.0, 4.0, 5.0, 6.0])
    g = ad.grad(lambda x: ad.sum(ad.relu(x) * w))(x)
    assert np.array_equal(g.to_numpy(), [0.0, 0.0, 5.0, 0.0])
