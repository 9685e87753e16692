# expect: attr-defined
"""A split_mut child is a mutable view: it can write but never consume the allocation."""

import tenferro_storage as ts

group = ts.AllocationGroup()
slot = group.insert(ts.zeros((3,)))
(child,) = group.split_mut([slot])
child.into_storage()
