# expect: assert-type
"""A mutable reinterpretation needs a mutable view: a shared view never yields TensorViewMut."""

from typing import Any, assert_type

import tenferro_storage as ts

owner = ts.zeros((3,), "complex128")
assert_type(ts.view_as_real(owner.as_view()), ts.TensorViewMut[Any, ts.Rank2])
