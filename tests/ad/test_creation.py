"""Creation in one place: every creation function is reachable from both packages with the
same results; ``asarray`` never copies a tenferro value and records the one import it
makes; both packages carry ``__version__``."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_ad.testing as tt
import tenferro_storage as ts
from tenferro_storage import CopyReason, ledger

CREATION: dict[str, tuple[Any, tuple[Any, ...], Any]] = {
    "zeros": (np.zeros, ((2, 3),), None),
    "ones": (np.ones, ((4,),), None),
    "full": (np.full, ((2, 2), 1.5), None),
    "arange": (np.arange, (1.0, 4.0, 0.5), None),
    "eye": (np.eye, (3, 4, 1), None),
    "linspace": (np.linspace, (0.0, 2.0, 5), None),
    "zeros_like": (np.zeros_like, (np.ones((2, 3)),), None),
    "ones_like": (np.ones_like, (np.ones((3,), np.float32),), None),
    "full_like": (np.full_like, (np.ones((2,)), 4.0), None),
}


@pytest.mark.parametrize("name", list(CREATION))
def test_every_creation_function_is_in_both_packages_with_numpys_values(name: str) -> None:
    """``ad.<name>`` and ``ts.<name>`` exist and equal numpy's ``<name>``."""
    ref, args, _ = CREATION[name]
    expected = ref(*args)
    for module in (ad, ts):
        got = getattr(module, name)(*args)
        tt.assert_array_equal(got, expected)
        assert np.dtype(got.dtype.numpy) == expected.dtype, (module.__name__, name)


def test_asarray_returns_tenferro_values_as_they_are() -> None:
    """An owner, a view, a handle: the same object back, nothing recorded."""
    owner = ts.ones(3)
    view = owner.as_view()
    handle = ad.sin(owner)
    with ledger.capture() as rec:
        assert ad.asarray(owner) is owner
        assert ad.asarray(view) is view
        assert ad.asarray(handle) is handle
        assert ad.asarray(owner, "float64") is owner
    assert not rec.copies and not rec.allocations
    view.release()


def test_asarray_imports_foreign_arrays_with_one_recorded_copy() -> None:
    """numpy arrays, lists, JAX arrays: one TRANSFER each into a new owner."""
    for source in (np.arange(3.0), [0.0, 1.0, 2.0], jnp.arange(3.0)):
        with ledger.capture() as rec:
            out = ad.asarray(source)
        assert rec.copies == {CopyReason.TRANSFER: 1}, type(source)
        assert isinstance(out, ts.Tensor)
        tt.assert_allclose(out, np.arange(3.0))


def test_asarray_with_another_dtype_converts() -> None:
    """``asarray(owner, dtype)`` with a different dtype is a converted value."""
    out = ad.asarray(ts.ones(2), "float32")
    assert out.dtype == ts.float32


def test_both_packages_carry_the_project_version() -> None:
    """``__version__`` equals pyproject's version, in both packages."""
    root = Path(__file__).resolve().parents[2]
    version = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    assert ts.__version__ == ad.__version__ == version


def test_a_numpy_constant_is_imported_per_call_and_hoisting_removes_it() -> None:
    """What the guide says: passing a numpy array to a jitted or differentiated function
    records one TRANSFER per call; importing it once with asarray records none per call."""
    x_np = np.ones((4, 3))
    w = ts.ones(3)
    f = ad.jit(lambda w, x: ad.sum(x @ w))
    g = ad.grad(lambda w, x: ad.sum(x @ w))
    f(w, x_np)  # (the first call traces)
    for call in (lambda: f(w, x_np), lambda: g(w, x_np)):
        with ledger.capture() as rec:
            call()
        assert rec.copies == {CopyReason.TRANSFER: 1}
    x = ad.asarray(x_np)
    f(w, x)
    for call in (lambda: f(w, x), lambda: g(w, x)):
        with ledger.capture() as rec:
            call()
        assert rec.copies == {}
