"""The API-parity contract (G4 method distribution) and the pinned public surface.

The canonical method lists live once, in ``tenferro_storage._tensor``:
``READ_ONLY_API`` (home: ``TensorView``; the owner and the mutable view delegate),
``DERIVING_API`` (on all three; exclusive reborrows on the mutable view),
``MUTATION_API`` (home: ``TensorViewMut``; the owner delegates) and
``CONSUMING_API`` (owner only).  This file fails when ``Tensor``, ``TensorView`` or
``TensorViewMut`` drift from those lists, and when ``tenferro_storage.__all__``
changes without this pin being updated.  Run alone with
``python3 -m pytest tests/storage/test_api_parity.py``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import _tensor
from tenferro_storage._numpy_surface import NumpySurface
from tenferro_storage._tensor import (
    CONSUMING_API,
    DERIVING_API,
    MUTATION_API,
    NUMPY_API,
    READ_ONLY_API,
    Tensor,
    TensorView,
    TensorViewMut,
)
from tenferro_storage.errors import BorrowError

TRIAD = (Tensor, TensorView, TensorViewMut)
ALL_LISTS = {
    "READ_ONLY_API": READ_ONLY_API,
    "DERIVING_API": DERIVING_API,
    "MUTATION_API": MUTATION_API,
    "CONSUMING_API": CONSUMING_API,
    "NUMPY_API": NUMPY_API,
}
# Public names outside the canonical lists, per class, and why they are there.
EXTRA: dict[type, set[str]] = {
    Tensor: {"as_view_mut", "from_storage"},  # the exclusive borrow; the checked constructor
    TensorView: {"release"},  # ends the borrow
    TensorViewMut: {"release"},
}

PUBLIC_SURFACE = (
    "AllocationDiagnostics",
    "AllocationGroup",
    "AllocationReason",
    "AnyRank",
    "CheckedDescriptor",
    "CheckedInjectiveStrided",
    "CheckedLayout",
    "CheckedStrided",
    "Contiguous",
    "CopyReason",
    "DType",
    "DescriptorSlot",
    "DynRank",
    "HostProvider",
    "OwnedSpanClaim",
    "OwnedStorage",
    "PreparedContiguousRead",
    "PreparedContiguousWrite",
    "PreparedHostRead",
    "PreparedHostWrite",
    "PreparedStridedRead",
    "PreparedStridedWrite",
    "ProviderCounters",
    "Rank0",
    "Rank1",
    "Rank2",
    "Rank3",
    "Rank4",
    "RootResource",
    "StorageMut",
    "StorageRef",
    "Strided",
    "Tensor",
    "TensorView",
    "TensorViewMut",
    "WriteInjectivityProof",
    "allocate_storage",
    "arange",
    "bool_",
    "borrow_arrays",
    "complex64",
    "complex128",
    "dtype",
    "errors",
    "eye",
    "float32",
    "float64",
    "from_dlpack",
    "from_numpy",
    "full",
    "full_like",
    "host_provider",
    "int32",
    "int64",
    "kernel",
    "ledger",
    "linspace",
    "load",
    "ones",
    "ones_like",
    "providers",
    "random",
    "runtime",
    "save",
    "sharding",
    "view_as_complex",
    "view_as_real",
    "zeros",
    "zeros_like",
)


def _natural(name: str) -> list[Any]:
    """Sort key: digit runs compare as numbers (``complex64`` before ``complex128``)."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _public(cls: type) -> set[str]:
    names = {n for n in dir(cls) if not n.startswith("_")}
    return names | ({"__getitem__"} & set(dir(cls)))


# -- the canonical lists ----------------------------------------------------------------------


def test_canonical_lists_are_disjoint_and_duplicate_free() -> None:
    """Each method name has exactly one class in the canonical lists."""
    names = [n for lst in ALL_LISTS.values() for n in lst]
    assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]
    assert all(isinstance(lst, tuple) for lst in ALL_LISTS.values()), "lists must be immutable"


@pytest.mark.parametrize("cls", TRIAD, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", READ_ONLY_API + DERIVING_API)
def test_read_only_and_deriving_names_exist_on_all_three(cls: type, name: str) -> None:
    """Every read-only and deriving name is available on owner, view and mutable view."""
    assert hasattr(cls, name), f"{cls.__name__} lacks {name} (READ_ONLY/DERIVING_API)"


@pytest.mark.parametrize("name", MUTATION_API)
def test_mutation_names_exist_only_on_the_mutable_view_and_the_owner(name: str) -> None:
    """Mutation is on TensorViewMut (home) and Tensor (delegating), never on TensorView."""
    assert name in vars(TensorViewMut), f"{name} must be implemented on TensorViewMut"
    assert hasattr(Tensor, name)
    assert not hasattr(TensorView, name), f"TensorView must not offer mutation ({name})"


@pytest.mark.parametrize("name", CONSUMING_API)
def test_consuming_names_exist_only_on_the_owner(name: str) -> None:
    """Consuming operations live on the owner only; views cannot consume."""
    assert name in vars(Tensor)
    assert not hasattr(TensorView, name) and not hasattr(TensorViewMut, name)


@pytest.mark.parametrize("cls", TRIAD, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", NUMPY_API)
def test_numpy_surface_has_one_home_inherited_by_all_three(cls: type, name: str) -> None:
    """numpy's surface is implemented once (NumpySurface) and inherited, never redefined."""
    assert getattr(cls, name) is getattr(NumpySurface, name)


@pytest.mark.parametrize("name", READ_ONLY_API + DERIVING_API)
def test_read_only_behaviour_is_implemented_on_the_view(name: str) -> None:
    """TensorView is the home of every read-only and deriving name (defined in its class)."""
    assert name in vars(TensorView), f"{name} must be implemented on TensorView itself"


@pytest.mark.parametrize("cls", TRIAD, ids=lambda c: c.__name__)
def test_no_public_name_outside_the_canonical_lists(cls: type) -> None:
    """A public method added to one class without a canonical list entry is drift."""
    allowed = set(READ_ONLY_API) | set(DERIVING_API) | set(NUMPY_API) | EXTRA[cls]
    if cls is not TensorView:
        allowed |= set(MUTATION_API)
    if cls is Tensor:
        allowed |= set(CONSUMING_API)
    assert _public(cls) - allowed == set(), "add the name to a canonical list in _tensor.py"
    assert allowed - _public(cls) == set(), "a canonical name is missing"


def test_no_as_view_mut_from_shared_or_mutable_views() -> None:
    """Only the owner lends exclusively by as_view_mut(); views reborrow by slicing instead."""
    assert not hasattr(TensorView, "as_view_mut") and not hasattr(TensorViewMut, "as_view_mut")


# -- behavioural parity -----------------------------------------------------------------------


VALUE_NAMES = ("shape", "strides", "offset", "dtype", "ndim", "size", "nbytes", "span")


@pytest.mark.parametrize("name", VALUE_NAMES)
def test_read_only_values_agree_across_owner_view_and_mutable_view(name: str) -> None:
    """Owner, view and mutable view return the same metadata for the same tensor."""
    t = ts.arange(24).reshape(2, 3, 4).duplicate()
    owner_value = getattr(t, name)
    view_value = getattr(t.as_view(), name)
    with t.as_view_mut() as m:
        mut_value = getattr(m, name)
    assert owner_value == view_value == mut_value


def test_read_only_methods_agree_across_the_triad() -> None:
    """to_numpy, item, duplicate, layout, prepare_host and derivations agree on all three."""
    t = ts.arange(6).reshape(2, 3).duplicate()
    expected = t.to_numpy()

    def observe(x: Any) -> list[Any]:
        dup = x.duplicate()
        out = [
            x.to_numpy().tolist(), x[1, 2].item(), dup.to_numpy().tolist(), type(x.layout).__name__,
            x.T.shape, x.transpose(1, 0).strides, x.reshape(3, 2).shape,
            x[:, ::-1].to_numpy().tolist(),
        ]
        del dup
        with x.prepare_host() as p:  # last: on a view this consumes it
            out.append((type(p).__name__, p.as_array().tolist()))
        return out

    owner = observe(t)
    view = observe(t.as_view())
    with t.as_view_mut() as m:
        mut = observe(m)
    assert owner == view == mut
    assert owner[0] == expected.tolist()


def test_deriving_on_a_mutable_view_reborrows_exclusively() -> None:
    """DERIVING_API on a mutable view returns TensorViewMut children that block the parent."""
    t = ts.zeros((2, 2))
    with t.as_view_mut() as m:
        for derive in (lambda: m[0], lambda: m.T, lambda: m.transpose(1, 0), lambda: m.reshape(4)):
            child = derive()
            assert type(child) is TensorViewMut
            with pytest.raises(BorrowError):
                m.as_view()
            child.release()
    for x in (t, t.as_view()):
        assert type(x[0]) is TensorView and type(x.T) is TensorView
    del x


def test_owner_exposes_no_mutable_projection_of_its_storage() -> None:
    """No read-only name on the owner returns its storage, claim or a write capability."""
    t = ts.zeros(3)
    forbidden = (ts.OwnedStorage, ts.OwnedSpanClaim, ts.StorageMut, ts.StorageRef, ts.RootResource)
    for name in READ_ONLY_API:
        value = getattr(t, name)
        if callable(value) and name in {"as_view", "to_numpy", "item", "duplicate"}:
            value = value() if name != "item" else None
        assert not isinstance(value, forbidden), name
        del value
    assert isinstance(t.to_numpy(), np.ndarray)


# -- the public surface ----------------------------------------------------------------------


def test_public_surface_is_sorted() -> None:
    """tenferro_storage.__all__ (and its submodules') is sorted (digit runs numerically)."""
    for module in (ts, ts.ledger, ts.errors, ts.kernel, ts.random, ts.sharding):
        names = list(module.__all__)
        assert names == sorted(names, key=_natural), module.__name__
        assert len(names) == len(set(names)), module.__name__


def test_public_surface_is_pinned() -> None:
    """__all__ equals the pinned list: update PUBLIC_SURFACE here when the API changes."""
    assert tuple(ts.__all__) == PUBLIC_SURFACE


def test_public_surface_resolves_and_is_complete() -> None:
    """Every name in __all__ exists, and every public package attribute is in __all__."""
    for name in ts.__all__:
        assert hasattr(ts, name), name
    public = {n for n in vars(ts) if not n.startswith("_")}
    assert public - set(ts.__all__) == set()
    assert _tensor.Tensor is ts.Tensor
