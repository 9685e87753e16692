# expect: assert-type
"""Rank policy: view_as_real of a rank-1 view is rank 2, not rank 1."""

from typing import Any, assert_type

import tenferro_storage as ts

owner = ts.zeros((3,), "complex128")
assert_type(ts.view_as_real(owner.as_view()), ts.TensorView[Any, ts.Rank1])
