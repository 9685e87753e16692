# expect: attr-defined
"""A DescriptorSlot alone has no way to reach storage: it is only a local key."""

import tenferro_storage as ts

group = ts.AllocationGroup()
slot = group.insert(ts.zeros((3,)))
slot.view()
