# expect: union-attr
"""Without narrowing, neither read variant of prepare_host() offers a mutable slice."""

import tenferro_storage as ts

prepared = ts.zeros(4).as_view().prepare_host()
prepared.as_slice_mut()
