# expect: attr-defined
"""A group view cannot be converted into an owner: only try_extract/into_tensor move one out."""

import tenferro_storage as ts

group = ts.AllocationGroup()
slot = group.insert(ts.zeros((3,), "complex128"))
group.view(slot).into_real()
