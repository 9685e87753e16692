"""Storage test fixtures.

``no_operator_backend``: runs a test with the operator table empty (as when
``tenferro_ad`` was never imported), restoring whatever was registered afterwards.  A
storage test that checks the refusal without a backend must use it, because in a whole
suite run ``tenferro_ad`` has already registered its operators.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tenferro_storage import _operators


@pytest.fixture
def no_operator_backend() -> Iterator[None]:
    saved = _operators._unregister_operators()
    try:
        yield
    finally:
        _operators.register_operators(saved)
