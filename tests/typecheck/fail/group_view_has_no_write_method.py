# expect: attr-defined
"""A TensorView obtained from a group cannot write (fill lives on TensorViewMut)."""

import tenferro_storage as ts

group = ts.AllocationGroup()
slot = group.insert(ts.zeros((3,)))
group.view(slot).fill(1.0)
