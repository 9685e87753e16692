"""Storage test fixtures.

* Every test of the suite runs in borrow debug mode (``tests/conftest.py``): arrays
  handed out by prepared access lie over staging buffers that are poisoned when the
  access ends (see ``tenferro_storage._access``).  ``debug_borrows_off`` runs one test
  in normal mode (zero-copy arrays over the storage).
* ``no_operator_backend``: runs a test with the operator table empty (as when
  ``tenferro_ad`` was never imported), restoring whatever was registered afterwards.  A
  storage test that checks the refusal without a backend must use it, because in a whole
  suite run ``tenferro_ad`` has already registered its operators.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tenferro_storage import _access, _numpy_surface, _operators


@pytest.fixture
def debug_borrows_off() -> Iterator[None]:
    previous = _access._set_debug_borrows(False)
    try:
        yield
    finally:
        _access._set_debug_borrows(previous)


@pytest.fixture
def no_operator_backend() -> Iterator[None]:
    saved = _operators._unregister_operators()
    saved_numpy = _numpy_surface._unregister_numpy()
    try:
        yield
    finally:
        _operators.register_operators(saved)
        _numpy_surface.register_numpy(saved_numpy)
