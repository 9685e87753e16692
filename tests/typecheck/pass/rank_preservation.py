"""Static rank survives as_view(), as_view_mut(), slicing with slices and transposition."""

from typing import Any, assert_type

import tenferro_storage as ts
from tenferro_storage import (
    DynRank,
    PreparedContiguousRead,
    PreparedStridedRead,
    Rank0,
    Rank1,
    Rank2,
    Rank3,
    Rank4,
    Tensor,
    TensorView,
    TensorViewMut,
)

assert_type(ts.zeros(()), Tensor[Any, Rank0])
assert_type(ts.zeros(3), Tensor[Any, Rank1])
assert_type(ts.ones((3,)), Tensor[Any, Rank1])
assert_type(ts.full((2, 3, 4), 1.0), Tensor[Any, Rank3])
assert_type(ts.zeros((2, 3, 4, 5)), Tensor[Any, Rank4])
assert_type(ts.arange(5), Tensor[Any, Rank1])

t = ts.zeros((2, 3))
assert_type(t, Tensor[Any, Rank2])
assert_type(t.as_view(), TensorView[Any, Rank2])
assert_type(t.as_view().as_view(), TensorView[Any, Rank2])
assert_type(t.as_view()[1:, ::-2], TensorView[Any, Rank2])
assert_type(t[::2], TensorView[Any, Rank2])
assert_type(t.T, TensorView[Any, Rank2])
assert_type(t.transpose(1, 0), TensorView[Any, Rank2])
assert_type(t.as_view().T.T, TensorView[Any, Rank2])
assert_type(t.duplicate(), Tensor[Any, Rank2])
assert_type(
    t.as_view().prepare_host(), PreparedContiguousRead[Any, Rank2] | PreparedStridedRead[Any, Rank2]
)

m = t.as_view_mut()
assert_type(m, TensorViewMut[Any, Rank2])
assert_type(m[1:, :], TensorViewMut[Any, Rank2])
assert_type(m.T, TensorViewMut[Any, Rank2])
assert_type(m.transpose(1, 0), TensorViewMut[Any, Rank2])
assert_type(m.as_view(), TensorView[Any, Rank2])

# Integer indices drop axes: the rank becomes dynamic rather than wrong.
assert_type(t[0], TensorView[Any, DynRank])
assert_type(m[0, 1:], TensorViewMut[Any, DynRank])
assert_type(ts.from_numpy([1.0, 2.0]), Tensor[Any, DynRank])
assert_type(t.reshape(6), TensorView[Any, DynRank])
