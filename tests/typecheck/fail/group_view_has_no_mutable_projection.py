# expect: attr-defined
"""A TensorView obtained from a group has no mutable projection."""

import tenferro_storage as ts

group = ts.AllocationGroup()
slot = group.insert(ts.zeros((3,)))
view = group.view(slot)
view.as_view_mut()
