# expect: attr-defined
"""A DescriptorSlot carries no storage, root or provider."""

import tenferro_storage as ts

group = ts.AllocationGroup()
slot = group.insert(ts.zeros((3,)))
print(slot.storage)
