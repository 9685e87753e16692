# expect: arg-type
"""Slots are typed keys; an integer position is not a slot."""

import tenferro_storage as ts

group = ts.AllocationGroup()
group.insert(ts.zeros((3,)))
group.into_tensor(0)
