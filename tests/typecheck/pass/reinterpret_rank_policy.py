"""Rank policy of every reinterpretation, as the type checker sees it.

complex -> real adds one trailing axis (extent 2); real -> complex removes it.
``Rank4`` -> ``DynRank`` for view_as_real/into_real because no ``Rank5`` marker exists;
``DynRank`` maps to ``DynRank``.  Each form keeps its kind: a view gives a view, a
mutable view a mutable view, an owner an owner.
"""

from typing import Any, assert_type

import tenferro_storage as ts
from tenferro_storage import (
    DynRank,
    Rank0,
    Rank1,
    Rank2,
    Rank3,
    Rank4,
    Tensor,
    TensorView,
    TensorViewMut,
    view_as_complex,
    view_as_real,
)

c0 = ts.zeros((), "complex128")
c1 = ts.zeros((3,), "complex128")
c2 = ts.zeros((2, 3), "complex128")
c3 = ts.zeros((2, 3, 4), "complex64")
c4 = ts.zeros((1, 2, 3, 4), "complex64")
cd = ts.zeros((1, 2, 3, 4, 5), "complex64")

# read-only view -> read-only view, one axis more
assert_type(view_as_real(c0.as_view()), TensorView[Any, Rank1])
assert_type(view_as_real(c1.as_view()), TensorView[Any, Rank2])
assert_type(view_as_real(c2.as_view()), TensorView[Any, Rank3])
assert_type(view_as_real(c3.as_view()), TensorView[Any, Rank4])
assert_type(view_as_real(c4.as_view()), TensorView[Any, DynRank])
assert_type(view_as_real(cd.as_view()), TensorView[Any, DynRank])

# mutable view -> mutable view, one axis more
assert_type(view_as_real(c0.as_view_mut()), TensorViewMut[Any, Rank1])
assert_type(view_as_real(c1.as_view_mut()), TensorViewMut[Any, Rank2])
assert_type(view_as_real(c2.as_view_mut()), TensorViewMut[Any, Rank3])
assert_type(view_as_real(c3.as_view_mut()), TensorViewMut[Any, Rank4])
assert_type(view_as_real(c4.as_view_mut()), TensorViewMut[Any, DynRank])

# owner -> owner, one axis more
assert_type(c0.into_real(), Tensor[Any, Rank1])
assert_type(c1.into_real(), Tensor[Any, Rank2])
assert_type(c2.into_real(), Tensor[Any, Rank3])
assert_type(c3.into_real(), Tensor[Any, Rank4])
assert_type(c4.into_real(), Tensor[Any, DynRank])
assert_type(cd.into_real(), Tensor[Any, DynRank])

r1 = ts.zeros((2,), "float64")
r2 = ts.zeros((3, 2), "float64")
r3 = ts.zeros((2, 3, 2), "float32")
r4 = ts.zeros((1, 2, 3, 2), "float32")
rd = ts.zeros((1, 1, 2, 3, 2), "float32")

# real -> complex removes the trailing axis, in all three forms
assert_type(view_as_complex(r1.as_view()), TensorView[Any, Rank0])
assert_type(view_as_complex(r2.as_view()), TensorView[Any, Rank1])
assert_type(view_as_complex(r3.as_view()), TensorView[Any, Rank2])
assert_type(view_as_complex(r4.as_view()), TensorView[Any, Rank3])
assert_type(view_as_complex(rd.as_view()), TensorView[Any, DynRank])
assert_type(view_as_complex(r1.as_view_mut()), TensorViewMut[Any, Rank0])
assert_type(view_as_complex(r2.as_view_mut()), TensorViewMut[Any, Rank1])
assert_type(view_as_complex(r4.as_view_mut()), TensorViewMut[Any, Rank3])
assert_type(r1.into_complex(), Tensor[Any, Rank0])
assert_type(r2.into_complex(), Tensor[Any, Rank1])
assert_type(r3.into_complex(), Tensor[Any, Rank2])
assert_type(r4.into_complex(), Tensor[Any, Rank3])
assert_type(rd.into_complex(), Tensor[Any, DynRank])
