# expect: arg-type
"""Only an owner can be inserted: a view does not own what the group would keep."""

import tenferro_storage as ts

owner = ts.zeros((3,))
group = ts.AllocationGroup()
group.insert(owner.as_view())
