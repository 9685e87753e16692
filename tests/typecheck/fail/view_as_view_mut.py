# expect: attr-defined
"""A shared view cannot lend exclusively: only the owner has as_view_mut()."""

import tenferro_storage as ts

t = ts.zeros((2, 3))
view = t.as_view()
view.as_view_mut()
