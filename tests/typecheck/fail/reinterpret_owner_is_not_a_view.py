# expect: call-overload
"""view_as_real borrows a view; an owner converts with the consuming into_real()."""

import tenferro_storage as ts

ts.view_as_real(ts.zeros((3,), "complex128"))
