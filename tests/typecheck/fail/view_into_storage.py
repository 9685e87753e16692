# expect: attr-defined
"""Consuming methods live on the owner only: neither view has into_storage()."""

import tenferro_storage as ts

t = ts.zeros(4)
t.as_view().into_storage()
t.as_view_mut().into_storage()
