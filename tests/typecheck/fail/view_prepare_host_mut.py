# expect: attr-defined
"""Write preparation needs an exclusive borrow: a shared view has no prepare_host_mut()."""

import tenferro_storage as ts

ts.zeros(4).as_view().prepare_host_mut()
