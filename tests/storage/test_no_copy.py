"""Every storage object that holds an owner or a borrow refuses copy, deepcopy and pickle.

A copy of such an object would be a second holder of the same owner or borrow: when
the copy dies or is released it gives back a borrow (or frees bytes) the original
still relies on.  ``NoCopy`` (``_linear.py``) refuses all three.  The audit below
classifies every class of the storage kernel's core modules, so a new class must be
placed on one side or the other.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import pickle
from collections.abc import Callable
from typing import Any

import pytest

import tenferro_storage as ts
from tenferro_storage._linear import Borrow, Lender, NoCopy
from tenferro_storage.errors import OwnershipError

CORE_MODULES = (
    "_access", "_borrow_arrays", "_descriptor", "_dtypes", "_group", "_layout", "_ledger",
    "_linear", "_operators", "_provider", "_rank", "_root", "_tensor",
)

# Classes that hold no owner and no borrow (values, metadata, counters, mixins), and why
# copying them is harmless.
HOLD_NOTHING: dict[str, str] = {
    "_access.AccessTarget": "an enum",
    "_access._Staging": "debug instrumentation: a private staging buffer, never an owner",
    "_descriptor.CheckedDescriptor": "validated metadata; reached only through owners",
    "_dtypes.DType": "a value object (copy returns itself)",
    "_group.DescriptorSlot": "two integers; grants nothing (copy returns itself, no pickle)",
    "_layout.CheckedInjectiveStrided": "layout metadata",
    "_layout.CheckedStrided": "layout metadata",
    "_layout.Contiguous": "layout metadata",
    "_layout.Strided": "layout metadata",
    "_layout.WriteInjectivityProof": "a retained proof (metadata)",
    "_ledger.AllocationReason": "an enum",
    "_ledger._Attribution": "per-thread state: which thread's captures see the events",
    "_ledger.CopyReason": "an enum",
    "_ledger.EventKind": "an enum",
    "_ledger.LedgerEvent": "an observation record",
    "_ledger.LedgerRecord": "observations (event tuples)",
    "_ledger._ForbidDepth": "a per-thread counter inside the ledger (never handed out)",
    "_ledger._Ledger": "the process ledger (never handed out)",
    "_ledger._Reason": "the enum base of the ledger reasons (values, not capabilities)",
    "_ledger.Counts": "a Counter of reasons (an observation)",
    "_operators.OperatorMixin": "a stateless mixin (no slots)",
    "_provider.HostProvider": "the process-wide provider singleton",
    "_provider.ProviderCounters": "counters",
    "_rank.AnyRank": "a type marker (the base of the rank markers)",
    "_rank.DynRank": "a type marker",
    "_rank.Rank0": "a type marker",
    "_rank.Rank1": "a type marker",
    "_rank.Rank2": "a type marker",
    "_rank.Rank3": "a type marker",
    "_rank.Rank4": "a type marker",
    "_root.AllocationDiagnostics": "an observation record (never an authority)",
}


def _core_classes() -> dict[str, type]:
    out: dict[str, type] = {}
    for name in CORE_MODULES:
        module = importlib.import_module(f"tenferro_storage.{name}")
        for cls_name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and not issubclass(cls, BaseException):
                out[f"{name}.{cls_name}"] = cls
    return out


def _refuses_copies(cls: type) -> bool:
    return all(
        getattr(cls, hook, None) is getattr(NoCopy, hook)
        for hook in ("__copy__", "__deepcopy__", "__reduce_ex__")
    )


def test_every_core_class_is_classified() -> None:
    """Each storage class either refuses copies (NoCopy) or is listed as holding nothing."""
    classes = _core_classes()
    unclassified = {name for name, cls in classes.items() if not _refuses_copies(cls)}
    unclassified -= set(HOLD_NOTHING)
    assert unclassified == set(), "make it NoCopy, or list it in HOLD_NOTHING with a reason"
    assert set(HOLD_NOTHING) <= set(classes), "a HOLD_NOTHING entry names no class"


def test_every_lender_borrower_and_root_refuses_copies() -> None:
    """Lenders, borrowers, roots and the borrow_arrays scope are all NoCopy."""
    for name, cls in _core_classes().items():
        if issubclass(cls, Lender | Borrow) or name in (
            "_root.RootResource", "_borrow_arrays.BorrowedArrays",
        ):
            assert _refuses_copies(cls), name
            assert name not in HOLD_NOTHING, name


DUPLICATORS: dict[str, Callable[[Any], Any]] = {
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
    "pickle": pickle.dumps,
}


def _make(subject: str) -> tuple[Any, list[Any]]:
    """(object, things to keep alive) for each holder not covered by test_ownership.py."""
    if subject == "strided read access":
        t = ts.zeros((2, 2))
        return t.T.prepare_host(), [t]
    if subject == "strided write access":
        t = ts.zeros((2, 2))
        m = t.as_view_mut()
        return m.T.prepare_host_mut(), [t, m]
    if subject == "group":
        g = ts.AllocationGroup()
        g.insert(ts.zeros(2))
        return g, []
    if subject == "group view":
        g = ts.AllocationGroup()
        return g.view(g.insert(ts.zeros(2))), [g]
    if subject == "split_mut child":
        g = ts.AllocationGroup()
        children = g.split_mut([g.insert(ts.zeros(2)), g.insert(ts.zeros(3))])
        return children[0], [g, children]
    if subject == "split_mut borrow":
        g = ts.AllocationGroup()
        children = g.split_mut([g.insert(ts.zeros(2))])
        return children[0]._lender, [g, children]
    assert subject == "borrow_arrays scope"
    t = ts.zeros(2)
    scope = ts.borrow_arrays(t)
    scope.__enter__()
    return scope, [t]


SUBJECTS = (
    "strided read access", "strided write access", "group", "group view", "split_mut child",
    "split_mut borrow", "borrow_arrays scope",
)


@pytest.mark.parametrize("how", list(DUPLICATORS))
@pytest.mark.parametrize("subject", SUBJECTS)
def test_holders_of_owners_and_borrows_cannot_be_copied_or_pickled(
    subject: str, how: str
) -> None:
    """copy/deepcopy/pickle raise OwnershipError naming the class and change nothing."""
    obj, keep = _make(subject)
    before = repr(obj)
    with pytest.raises(OwnershipError, match=type(obj).__name__):
        DUPLICATORS[how](obj)
    assert repr(obj) == before
    if hasattr(obj, "release"):
        obj.release()
    del obj, keep
