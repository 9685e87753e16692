# expect: attr-defined
"""Reinterpreting a read-only view gives a read-only view."""

import tenferro_storage as ts

owner = ts.zeros((3,), "complex128")
ts.view_as_real(owner.as_view()).fill(0.0)
