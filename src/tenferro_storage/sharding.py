"""Sharded values over a mesh of XLA engines, and several processes (needs jax).

* :class:`Mesh`: named axes over JAX devices, built as a ``jax.sharding.Mesh`` is; each
  device this process addresses is one XLA engine with its own allocation domain.
* Sharding specs: JAX's own ``jax.sharding.PartitionSpec`` (a tuple of axis names or
  ``None`` is accepted as shorthand; ``None`` alone replicates).
* :class:`ShardedTensor`: the one owner of a value split over a mesh -- one ledger
  allocation per shard in that shard's domain; :meth:`ShardedTensor.gather` (explicit
  host read, one recorded ``TRANSFER`` per shard) and :meth:`ShardedTensor.reshard`
  (explicit recorded copy); :func:`shard` uploads a host value.
* :func:`initialize`, :func:`process_index`, :func:`process_count`: several processes
  through ``jax.distributed``.

``tenferro_ad.jit(f, mesh=..., in_shardings=..., out_shardings=...)`` compiles sharded
programs (XLA's partitioner inserts the collectives).  ``docs/guides/scale-out.md`` is
the guide.
"""

from .providers._distributed import initialize, process_count, process_index
from .providers._sharded import Mesh, ShardedTensor, shard

__all__ = ["Mesh", "ShardedTensor", "initialize", "process_count", "process_index", "shard"]
