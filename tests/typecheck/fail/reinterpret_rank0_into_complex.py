# expect: misc
"""Rank policy: a rank-0 owner has no trailing axis for into_complex to remove."""

import tenferro_storage as ts

ts.zeros((), "float64").into_complex()
