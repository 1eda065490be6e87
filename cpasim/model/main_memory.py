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
  once), in the state of the call that does them (:mod:`cpasim.model.socket_api`);
* the copy engine (:mod:`cpasim.model.copy_engine`): its DMAs, as a device's
  (each copy a read and a write of its bytes), through its interconnect.

The wait shows on the critical path inside the state that made the access (a
longer ``DMA packet`` or ``copy``); ``busy_ns`` gives the memory's utilization.

Two refinements, each off by default:

* **Latency under load** (``memory.load_window``, :class:`LoadedMemory`).  A real
  memory controller's read latency grows with its load long before its bandwidth
  runs out: requests queue behind the others' in its queues and the bus in front
  of it, and the wait of a queue with occupancy ρ is the unloaded time over
  1 − ρ (an M/M/1 server's time in system, the shape of a measured
  loaded-latency curve).  The memory keeps the share of the last
  ``load_window`` it spent on CPU copies and checksums (an
  exponentially weighted average), and a device read's memory latency —
  ``memory.latency``, and on legacy PCI each burst's target wait
  ``bus.pci_read_wait``, the bridge fetching the burst from memory — is
  stretched by 1 / (1 − ρ).  So a copy slows every read burst made while its
  traffic is in the controller, not only one it happens to meet, which is how
  the Directed Point paper explains the faster zero-copy send.  Devices' own traffic (the NIC's
  and the copy engine's DMA) is not counted: a DMA engine does not queue behind
  itself.  ρ is capped at
  :data:`MAX_LOAD`: a controller's queues are finite, so the wait is too.
* **DMA in series** (``memory.dma_holds``): a DMA holds the memory for its
  whole transfer on the I/O bus instead of its bytes at ``memory.bandwidth``, as
  a bridge that streams at the bus's pace does; transfers are then in series,
  which is what Waheed 2003's latency model T = T_cpu + Σ n_i S/B_i and its peak
  throughputs (IP forwarding Be/2, HTTP BiBe/(5Be + Bi), RTP BiBe/(4Be + Bi))
  assume.
"""

from __future__ import annotations

import math

#: Highest occupancy the loaded latency is computed at (a 10x stretch): a memory
#: controller's request queues are finite, so a read's wait is bounded.
MAX_LOAD = 0.9


def send_touch(sw_csum: bool, csum_copy: bool) -> int:
    """Bytes a send copy moves through memory per byte copied: read and write, and one
    read more when the software checksum is a pass of its own (``tcp.csum_copy`` false)."""
    return 3 if sw_csum and not csum_copy else 2


class Memory:
    """The memory bandwidth of one host (see the module docstring)."""

    __slots__ = ("env", "ns_per_byte", "latency", "free_at", "busy_ns", "bytes", "dma_holds")

    #: Latency under load is :class:`LoadedMemory`'s; here device reads wait the same.
    loaded = False

    def __init__(self, env, params) -> None:
        self.env = env
        self.ns_per_byte = 8e9 / params.bandwidth
        self.latency = params.latency
        self.dma_holds = params.dma_holds
        self.free_at = 0.0  # when the memory has served everything reserved so far
        self.busy_ns = 0.0
        self.bytes = 0

    def access(self, nbytes: int, own_ns: float) -> float:
        """Reserve ``nbytes`` of transfer for an access made now that takes ``own_ns`` by
        itself; returns how long it takes with the memory's share (at least ``own_ns``)."""
        return self.hold(nbytes, nbytes * self.ns_per_byte, own_ns)

    def hold(self, nbytes: int, ns: float, own_ns: float) -> float:
        """:meth:`access` for an access of ``nbytes`` that keeps the memory busy for
        ``ns``: its bytes' time, or a DMA's whole transfer on the I/O bus
        (``memory.dma_holds``)."""
        now = self.env._now
        free_at = self.free_at
        start = free_at if free_at > now else now
        self.free_at = end = start + ns
        self.busy_ns += ns
        self.bytes += nbytes
        done = end - now
        return done if done > own_ns else own_ns

    #: Accesses of the CPU (the load a device read waits behind).
    copy_access = access

    def utilization(self, elapsed_ns: float, since: float = 0.0) -> float:
        """Share of ``elapsed_ns`` the memory was transferring (``since`` = busy_ns before)."""
        return min(1.0, (self.busy_ns - since) / elapsed_ns) if elapsed_ns > 0 else 0.0


class LoadedMemory(Memory):
    """A :class:`Memory` whose device reads wait longer while the CPU and the copy
    engine keep it busy (``memory.load_window``; see the module docstring)."""

    __slots__ = ("window", "load", "load_at")

    loaded = True

    def __init__(self, env, params) -> None:
        super().__init__(env, params)
        self.window = params.load_window
        self.load = 0.0  # share of the recent window spent on copies, as of load_at
        self.load_at = 0.0

    def _decay(self) -> float:
        now = self.env._now
        if now != self.load_at:
            self.load *= math.exp((self.load_at - now) / self.window)
            self.load_at = now
        return self.load

    def copy_access(self, nbytes: int, own_ns: float) -> float:
        """:meth:`Memory.access` for the CPU, counted in the load."""
        self._decay()
        self.load += nbytes * self.ns_per_byte / self.window
        return self.access(nbytes, own_ns)

    def read_stretch(self) -> float:
        """Factor on a device read's memory latency now: 1 / (1 - occupancy)."""
        load = self._decay()
        return 1.0 / (1.0 - (load if load < MAX_LOAD else MAX_LOAD))


def make_memory(env, params) -> Memory | None:
    """The memory of a host from its ``memory`` section; None when not modelled."""
    if not params.bandwidth:
        return None
    return (LoadedMemory if params.load_window else Memory)(env, params)
