"""Several processes through ``jax.distributed``: :func:`initialize` (bounded, never a
hang), :func:`process_index`, :func:`process_count`.

:func:`initialize` starts ``jax.distributed`` (coordinator address, process count and
id, with initialization and heartbeat timeouts) before the engines are discovered; a
:class:`~tenferro_storage.sharding.Mesh` then spans every process's devices, and each
process owns (and its ledger records) only the shards it addresses
(``_sharded.py``).
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterable

from ..errors import DistributedError, shown
from ._sharded import _jax


def initialize(
    coordinator_address: str,
    num_processes: int,
    process_id: int,
    *,
    initialization_timeout: int = 60,
    heartbeat_timeout: int = 10,
    local_device_ids: Iterable[int] | None = None,
) -> None:
    """Join a run of ``num_processes`` processes through ``jax.distributed`` (process
    ``process_id``; process 0 hosts the coordinator at ``coordinator_address``,
    ``"host:port"``).  Call it first, before any engine is discovered or any jit runs.

    Bounded, never a hang: a process other than 0 first waits at most
    ``initialization_timeout`` seconds for the coordinator to accept connections, else
    ``DistributedError``; once connected, JAX waits at most ``initialization_timeout``
    seconds for every process to join and then terminates the process (it cannot be
    caught in Python), after a ``DistributedError`` line on stderr naming the
    coordinator, this process and the timeout.  Afterwards a process that stops sending
    heartbeats for ``heartbeat_timeout`` seconds is declared dead and JAX's coordination
    service terminates the others with a message naming it.

    Cost: no allocation; no copy; synchronizes with every process (blocks until all
    joined: network round trips, at most ``initialization_timeout`` seconds); no
    dispatch; O(num_processes) at the coordinator.

    Raises:
        DistributedError: a bad argument, no coordinator within the timeout, or
            ``jax.distributed`` refused to start.
        ShardingError: jax is not installed.
    """
    jax = _jax("initialize")
    for name, v in (("num_processes", num_processes), ("process_id", process_id),
                    ("initialization_timeout", initialization_timeout),
                    ("heartbeat_timeout", heartbeat_timeout)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise DistributedError(f"initialize: argument {name!r} must be an int >= 0, "
                                   f"got {shown(v)}")
    if not process_id < num_processes:
        raise DistributedError(f"initialize: process_id {process_id} is not below "
                               f"num_processes {num_processes}")
    where = (f"process {process_id} of {num_processes} with the coordinator at "
             f"{coordinator_address!r}")
    deadline = time.monotonic() + initialization_timeout
    if process_id != 0:
        _await_coordinator(coordinator_address, deadline, where, initialization_timeout)
    watchdog = threading.Timer(
        max(deadline - time.monotonic(), 0.0), _report_stalled,
        (f"initialize: {where}: not every process joined within {initialization_timeout} s "
         "(a process is missing or failed); JAX now terminates this process",),
    )
    watchdog.daemon = True
    watchdog.start()
    try:
        jax.distributed.initialize(
            coordinator_address=coordinator_address, num_processes=num_processes,
            process_id=process_id, initialization_timeout=initialization_timeout,
            heartbeat_timeout_seconds=heartbeat_timeout,
            local_device_ids=None if local_device_ids is None else list(local_device_ids),
        )
    except Exception as exc:  # jax raises RuntimeError/XlaRuntimeError with its status
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DistributedError(
            f"initialize: {where} could not start (call it before anything else uses jax): "
            f"{first}"
        ) from None
    finally:
        watchdog.cancel()


def _await_coordinator(address: str, deadline: float, where: str, timeout: int) -> None:
    """Wait until ``address`` accepts a TCP connection, until ``deadline``. O(tries)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise DistributedError(f"initialize: {where}: the address must be 'host:port'")
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=1.0):
                return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise DistributedError(
                    f"initialize: {where}: the coordinator did not accept connections within "
                    f"{timeout} s ({exc.strerror or exc}); is process 0 running?"
                ) from None
            time.sleep(0.1)


def _report_stalled(message: str) -> None:
    sys.stderr.write(f"tenferro_storage.errors.DistributedError: {message}\n")
    sys.stderr.flush()


def process_index() -> int:
    """This process's id in a multi-process run (0 alone).

    Cost: no allocation; no copy; no sync; no dispatch; O(1).
    Raises: ShardingError (jax is not installed)."""
    return int(_jax("process_index").process_index())


def process_count() -> int:
    """The number of processes of the run (1 alone).

    Cost: no allocation; no copy; no sync; no dispatch; O(1).
    Raises: ShardingError (jax is not installed)."""
    return int(_jax("process_count").process_count())


__all__ = ["initialize", "process_count", "process_index"]
