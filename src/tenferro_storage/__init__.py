"""tenferro_storage: the explicit-ownership storage kernel.

Every allocation has one owner (:class:`Tensor`, :class:`OwnedStorage`); reads go
through shared borrows (:class:`TensorView`), writes through exclusive borrows
(:class:`TensorViewMut`); layouts are validated once and then accessed through
prepared objects whose hot loop is numpy's; two ledgers (:mod:`tenferro_storage.ledger`)
record every allocation and every byte-preserving copy with its reason.
"""

from . import errors, kernel, ledger, providers, random, runtime, sharding
from ._access import (
    PreparedContiguousRead,
    PreparedContiguousWrite,
    PreparedHostRead,
    PreparedHostWrite,
    PreparedStridedRead,
    PreparedStridedWrite,
)
from ._borrow_arrays import borrow_arrays
from ._creation import (
    allocate_storage,
    arange,
    eye,
    from_dlpack,
    from_numpy,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    zeros,
    zeros_like,
)

__version__ = "0.1.0"
from ._descriptor import CheckedDescriptor
from ._dtypes import (
    DType,
    bool_,
    complex64,
    complex128,
    dtype,
    float32,
    float64,
    int32,
    int64,
)
from ._group import AllocationGroup, DescriptorSlot
from ._layout import (
    CheckedInjectiveStrided,
    CheckedLayout,
    CheckedStrided,
    Contiguous,
    Strided,
    WriteInjectivityProof,
)
from ._ledger import AllocationReason, CopyReason
from ._provider import HOST as host_provider
from ._provider import HostProvider, ProviderCounters
from ._rank import AnyRank, DynRank, Rank0, Rank1, Rank2, Rank3, Rank4
from ._reinterpret import view_as_complex, view_as_real
from ._root import (
    AllocationDiagnostics,
    OwnedSpanClaim,
    OwnedStorage,
    RootResource,
    StorageMut,
    StorageRef,
)
from ._save import load, save
from ._tensor import Tensor, TensorView, TensorViewMut

__all__ = [
    "AllocationDiagnostics",
    "AllocationGroup",
    "AllocationReason",
    "AnyRank",
    "CheckedDescriptor",
    "CheckedInjectiveStrided",
    "CheckedLayout",
    "CheckedStrided",
    "Contiguous",
    "CopyReason",
    "DType",
    "DescriptorSlot",
    "DynRank",
    "HostProvider",
    "OwnedSpanClaim",
    "OwnedStorage",
    "PreparedContiguousRead",
    "PreparedContiguousWrite",
    "PreparedHostRead",
    "PreparedHostWrite",
    "PreparedStridedRead",
    "PreparedStridedWrite",
    "ProviderCounters",
    "Rank0",
    "Rank1",
    "Rank2",
    "Rank3",
    "Rank4",
    "RootResource",
    "StorageMut",
    "StorageRef",
    "Strided",
    "Tensor",
    "TensorView",
    "TensorViewMut",
    "WriteInjectivityProof",
    "allocate_storage",
    "arange",
    "bool_",
    "borrow_arrays",
    "complex64",
    "complex128",
    "dtype",
    "errors",
    "eye",
    "float32",
    "float64",
    "from_dlpack",
    "from_numpy",
    "full",
    "full_like",
    "host_provider",
    "int32",
    "int64",
    "kernel",
    "ledger",
    "linspace",
    "load",
    "ones",
    "ones_like",
    "providers",
    "random",
    "runtime",
    "save",
    "sharding",
    "view_as_complex",
    "view_as_real",
    "zeros",
    "zeros_like",
]
