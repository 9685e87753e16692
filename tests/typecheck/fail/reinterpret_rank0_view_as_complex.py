# expect: arg-type
"""Rank policy: real -> complex removes the trailing axis, so a rank-0 view has none to remove."""

import tenferro_storage as ts

owner = ts.zeros((), "float64")
ts.view_as_complex(owner.as_view())
