"""DLPack: export is a zero-copy shared borrow held as long as the consumer holds the
memory (a write through the owner meanwhile is refused); import is one recorded
``TRANSFER`` copy; ops import JAX and torch arrays as they import numpy arrays."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tenferro_ad as ad
import tenferro_ad.testing as tt
import tenferro_storage as ts
from tenferro_storage import CopyReason, ledger
from tenferro_storage.errors import BorrowError, DTypeError

try:
    import torch as _torch
except ImportError:  # pragma: no cover - the suite runs with and without torch
    _torch = None

needs_torch = pytest.mark.skipif(_torch is None, reason="torch is not installed")

X = np.arange(12.0).reshape(3, 4)


def _address(a: np.ndarray[Any, Any]) -> int:
    return int(a.__array_interface__["data"][0])


def _owner_address(x: Any) -> int:
    """The owner's own memory (not borrow debug mode's staged copy). O(1)."""
    return _address(ts.kernel.read_array(x))


CONSUMERS: dict[str, Callable[[Any], Any]] = {"numpy": np.from_dlpack}
if _torch is not None:
    CONSUMERS["torch"] = _torch.from_dlpack


@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_export_shares_memory_and_records_no_copy(consumer: str) -> None:
    """The consumer sees the owner's bytes (same address), nothing is copied or allocated."""
    owner = ts.from_numpy(X)
    with ledger.capture() as rec:
        out = CONSUMERS[consumer](owner)
        ptr = out.data_ptr() if consumer == "torch" else _address(out)
        assert ptr == _owner_address(owner)
        np.testing.assert_array_equal(np.asarray(out), X)
        del out
    assert not rec.copies and not rec.allocations


@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_write_refused_while_a_consumer_holds_the_export(consumer: str) -> None:
    """While the consumer's array lives the owner cannot be written or consumed; after it
    dies it can."""
    owner = ts.from_numpy(X)
    out = CONSUMERS[consumer](owner)
    with pytest.raises(BorrowError, match="DLPack consumer"):
        owner.fill(0.0)
    with pytest.raises(BorrowError):
        owner.as_view_mut()
    tt.assert_allclose(owner, X)  # the refusal changed nothing
    del out
    gc.collect()
    owner.fill(0.0)
    tt.assert_allclose(owner, np.zeros_like(X))


def test_numpy_export_is_read_only() -> None:
    """A DLPack >= 1.0 consumer is told the memory is read-only."""
    owner = ts.from_numpy(X)
    out = np.from_dlpack(owner)
    assert not out.flags.writeable
    with pytest.raises(ValueError):
        out[0, 0] = 1.0
    del out


def test_views_export_their_strided_layout_without_a_copy() -> None:
    """A strided view exports its strides; the values equal numpy's slice."""
    owner = ts.from_numpy(X)
    with ledger.capture() as rec:
        view = owner[:, 1::2]
        out = np.from_dlpack(view)
        np.testing.assert_array_equal(out, X[:, 1::2])
        assert out.strides == X[:, 1::2].strides
        del out
        view.release()
    assert not rec.copies
    owner.fill(1.0)


def test_jax_reads_the_export() -> None:
    """JAX (a pre-1.0 DLPack consumer) reads the values; tenferro records no copy."""
    owner = ts.from_numpy(X)
    with ledger.capture() as rec:
        j = jnp.from_dlpack(owner)
        np.testing.assert_array_equal(np.asarray(j), X)
    assert not rec.copies
    del j
    gc.collect()


def test_copy_true_hands_over_a_recorded_copy() -> None:
    """``__dlpack__(copy=True)``: one TRANSFER copy, no borrow left behind."""
    owner = ts.from_numpy(X)
    with ledger.capture() as rec:
        out = np.from_dlpack(owner, copy=True)
    assert rec.copies == {CopyReason.TRANSFER: 1}
    owner.fill(0.0)  # nothing borrowed
    np.testing.assert_array_equal(out, X)


def test_dlpack_device_is_the_cpu() -> None:
    """``__dlpack_device__`` is (kDLCPU, 0) on owners and views; other devices refused."""
    owner = ts.from_numpy(X)
    assert owner.__dlpack_device__() == (1, 0)
    assert owner.as_view().__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError, match="dl_device"):
        owner.__dlpack__(dl_device=(2, 0))
    owner.fill(0.0)  # the refusal borrowed nothing


PRODUCERS: dict[str, Callable[[np.ndarray[Any, Any]], Any]] = {
    "numpy": lambda a: a,
    "jax": jnp.asarray,
    "tenferro": ts.from_numpy,
}
if _torch is not None:
    PRODUCERS["torch"] = lambda a: _torch.from_numpy(a)


@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_from_dlpack_is_one_recorded_transfer(producer: str) -> None:
    """``ts.from_dlpack``: exactly one TRANSFER copy into a fresh owner; the producer keeps
    its memory (and a tenferro producer its borrow ends)."""
    src = PRODUCERS[producer](X.astype(np.float32))
    with ledger.capture() as rec:
        owner = ts.from_dlpack(src)
    assert rec.copies == {CopyReason.TRANSFER: 1}
    tt.assert_array_equal(owner, X.astype(np.float32))
    if producer == "tenferro":
        src.fill(0.0)  # not borrowed any more
    assert owner.dtype == ts.float32


@pytest.mark.parametrize("producer", list(CONSUMERS))
def test_round_trip_through_a_consumer_gives_the_values_back(producer: str) -> None:
    """owner -> consumer (zero copy) -> from_dlpack (one recorded copy) -> equal values."""
    owner = ts.from_numpy(X)
    with ledger.capture() as rec:
        foreign = CONSUMERS[producer](owner)
        back = ts.from_dlpack(foreign)
    assert rec.copies == {CopyReason.TRANSFER: 1}  # the import, nothing on the way out
    del foreign
    gc.collect()
    tt.assert_array_equal(back, owner)
    owner.fill(0.0)


def test_from_dlpack_refuses_what_is_not_dlpack() -> None:
    """A list or object without __dlpack__ is refused naming from_dlpack and 'x'."""
    with pytest.raises(DTypeError, match="from_dlpack: argument 'x'"):
        ts.from_dlpack([1.0, 2.0])


def test_ops_import_jax_arrays_like_numpy_arrays() -> None:
    """``ad.sin(jax_array)`` runs (one recorded TRANSFER import), and gradients flow to the
    tenferro operand when the other one is a JAX array."""
    a = jnp.asarray(X)
    with ledger.capture() as rec:
        out = ad.sin(a)
    assert rec.copies == {CopyReason.TRANSFER: 1}
    tt.assert_allclose(out, np.sin(X))
    g = ad.grad(lambda w: ad.sum(w * a))(ts.from_numpy(np.ones_like(X)))
    tt.assert_allclose(g, X)


@needs_torch
def test_ops_import_torch_tensors() -> None:
    """``ad.exp(torch_tensor)`` runs with one recorded import."""
    assert _torch is not None
    with ledger.capture() as rec:
        out = ad.exp(_torch.from_numpy(X))
    assert rec.copies == {CopyReason.TRANSFER: 1}
    tt.assert_allclose(out, np.exp(X))


@given(hnp.arrays(st.sampled_from([np.float32, np.float64, np.int64, np.complex128]),
                  hnp.array_shapes(min_dims=0, max_dims=3, max_side=4)))
@example(np.zeros((0, 3)))
@example(np.array(2.5))
def test_numpy_round_trip_is_exact(a: np.ndarray[Any, Any]) -> None:
    """Any stored dtype and shape: export then import gives the same bytes back."""
    owner = ts.from_numpy(a)
    out = np.from_dlpack(owner)
    np.testing.assert_array_equal(out, a)
    assert out.dtype == a.dtype
    del out
    back = ts.from_dlpack(owner)
    tt.assert_array_equal(back, a)
    owner.fill(0)
