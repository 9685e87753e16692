# expect: attr-defined
"""A TensorView obtained from a group has no consuming method (into_* live on owners)."""

import tenferro_storage as ts

group = ts.AllocationGroup()
slot = group.insert(ts.zeros((3,)))
group.view(slot).into_storage()
