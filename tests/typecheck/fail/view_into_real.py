# expect: attr-defined
"""Consuming methods live on the owner only: a view has no into_real()."""

import tenferro_storage as ts

t = ts.zeros((2, 3), "complex128")
view = t.as_view()
view.into_real()
