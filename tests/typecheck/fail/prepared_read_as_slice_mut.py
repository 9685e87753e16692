# expect: attr-defined
"""A read-only prepared access hands out no mutable slice."""

import tenferro_storage as ts

t = ts.zeros(4)
prepared = t.as_view().prepare_host()
if isinstance(prepared, ts.PreparedContiguousRead):
    prepared.as_slice_mut()
