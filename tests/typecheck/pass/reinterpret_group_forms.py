"""Group borrows reinterpret like any view; split children like any mutable view."""

from typing import Any, assert_type

import tenferro_storage as ts
from tenferro_storage import (
    AllocationGroup,
    DescriptorSlot,
    DynRank,
    Tensor,
    TensorView,
    TensorViewMut,
    view_as_real,
)

group = AllocationGroup()
slot = group.insert(ts.zeros((3,), "complex128"))
assert_type(slot, DescriptorSlot)
assert_type(group.alias(slot, shape=(3, 2), strides=(2, 1), dtype="float64"), DescriptorSlot)
assert_type(group.view(slot), TensorView[Any, DynRank])
assert_type(view_as_real(group.view(slot)), TensorView[Any, DynRank])
assert_type(group.view_mut(slot), TensorViewMut[Any, DynRank])
assert_type(group.split_mut([slot]), list[TensorViewMut[Any, DynRank]])
assert_type(view_as_real(group.split_mut([slot])[0]), TensorViewMut[Any, DynRank])
assert_type(group.try_extract(slot), Tensor[Any, DynRank])
assert_type(group.into_tensor(slot), Tensor[Any, DynRank])
