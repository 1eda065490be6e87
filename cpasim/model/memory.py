"""Main memory of one host as a bandwidth that DMA, CPU copies and the copy engine share.

Built only when ``memory.bandwidth`` is set (otherwise no object exists and no
component pays anything).  The memory is a first-come first-served bandwidth
server kept as a calendar, without SimPy events of its own: an access of
``nbytes`` made now is given the next ``nbytes / bandwidth`` of the memory's
time after everything reserved before it.  The access is done when both its own
work (the CPU's cycles, the bus transfer) and its share of the memory are, so
a lone access runs at its own speed and a memory kept busy by others stretches
it.  Each access is accounted by whoever makes it:

* device DMA, both directions (:class:`cpasim.model.bus.MemoryBus`): the frame or
  descriptor bytes; reads also wait ``memory.latency`` for the first data;
* CPU copies (read and write: twice the bytes) and software checksums (the bytes
  once), in the state of the call that does them (:mod:`cpasim.model.socket`);
* the copy engine (:mod:`cpasim.model.copy_engine`): each copy is a read and a
  write of its bytes.

The wait shows on the critical path inside the state that made the access (a
longer ``DMA packet`` or ``copy``); ``busy_ns`` gives the memory's utilization.
"""

from __future__ import annotations


class Memory:
    """The memory bandwidth of one host (see the module docstring)."""

    __slots__ = ("env", "ns_per_byte", "latency", "free_at", "busy_ns", "bytes")

    def __init__(self, env, params) -> None:
        self.env = env
        self.ns_per_byte = 8e9 / params.bandwidth
        self.latency = params.latency
        self.free_at = 0.0  # when the memory has served everything reserved so far
        self.busy_ns = 0.0
        self.bytes = 0

    def access(self, nbytes: int, own_ns: float) -> float:
        """Reserve ``nbytes`` of transfer for an access made now that takes ``own_ns`` by
        itself; returns how long it takes with the memory's share (at least ``own_ns``)."""
        now = self.env._now
        free_at = self.free_at
        start = free_at if free_at > now else now
        ns = nbytes * self.ns_per_byte
        self.free_at = end = start + ns
        self.busy_ns += ns
        self.bytes += nbytes
        done = end - now
        return done if done > own_ns else own_ns

    def utilization(self, elapsed_ns: float, since: float = 0.0) -> float:
        """Share of ``elapsed_ns`` the memory was transferring (``since`` = busy_ns before)."""
        return min(1.0, (self.busy_ns - since) / elapsed_ns) if elapsed_ns > 0 else 0.0
