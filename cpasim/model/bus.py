"""The I/O bus of one host as contended channels.

PCIe is full duplex: ``PCIe up`` (device → host: DMA writes, read requests) and
``PCIe down`` (host → device: read completions with data, MMIO writes) are
each a :class:`~cpasim.tracing.TracedPool` of one unit, shared by packet data,
descriptors and doorbells.  Legacy PCI is one half-duplex ``PCI bus`` pool
used by both directions; a NIC on the processor die (``bus.kind = "on_die"``) one
``On-die bus`` pool, the interconnect between L1 and L2 as M5's bus models it;
M5's I/O bus (``bus.kind = "m5"``) one ``I/O bus`` pool, :mod:`cpasim.model.m5bus`.

A bus access is done *by* the state machine that needs it (NIC TX in ``DMA
packet``, NIC RX, the descriptor fetches and write-backs): it takes the
channel (waiting on the pool when another SM holds it), holds it for the
closed-form duration from :mod:`cpasim.model.pcie`, and gives it back; a
whole packet's DMA is one timeout.  A DMA read holds the data channel from its
first request to its last completion, round trip included: one outstanding
read per channel, as a NIC with a single DMA engine per direction issues them.
Small traffic in the *other* direction does not arbitrate: read requests (one
header per ``max_read_request``) and doorbells (one posted 4-byte write) are a
few percent of a channel, which the bridge interleaves between data TLPs.

Busy time is the time a channel is held for data (the bytes' own time, a read's
round trip excluded), counted from ``measure_from`` on: an access that began
before it counts only its part after it.  Traffic that does not take a channel
(read requests, doorbells) counts in the bytes only: counting its time too
would count the same bus time twice, and a saturated legacy PCI bus would show
more than 100%.
"""

from __future__ import annotations

from cpasim.model.pcie import BusTiming, Occupancy


class BusStats:
    """Bytes (overhead included) per direction since the start, and the time each
    channel was held for data since the bus's ``measure_from``.

    Kept as four plain counters (one DMA adds to all four); ``bytes`` and
    ``busy_ns`` show them per direction.  On a shared (PCI) bus both directions
    are the one bus, and ``up + down`` is its busy time."""

    __slots__ = ("up_bytes", "down_bytes", "up_ns", "down_ns")

    def __init__(self) -> None:
        self.up_bytes = self.down_bytes = 0
        self.up_ns = self.down_ns = 0.0

    @property
    def bytes(self) -> dict[str, int]:
        return {"up": self.up_bytes, "down": self.down_bytes}

    @property
    def busy_ns(self) -> dict[str, float]:
        return {"up": self.up_ns, "down": self.down_ns}

    def snapshot(self) -> dict:
        return {"bytes": self.bytes, "busy_ns": self.busy_ns}

    def utilization(self, elapsed_ns: float, since: dict | None = None) -> dict[str, float]:
        busy = self.busy_ns
        out = {}
        for d in ("up", "down"):
            b = busy[d] - (since["busy_ns"][d] if since else 0.0)
            out[d] = b / elapsed_ns if elapsed_ns > 0 else 0.0
        return out


class Bus:
    """Channels of host ``sys``'s I/O bus; DMA methods are generators for ``yield from``.

    Statistics count an access when it ends, like the link's, so an access still
    under way when the run ends is not counted, and busy time before
    ``measure_from`` (the warm-up) is left out.

    A CPU's register write (:meth:`mmio_write`) is posted here: it does not wait for
    the bus, and the CPU pays a fixed stall.  Buses where it queues for the bus
    (``queues_writes``, M5's) also offer ``cpu_write(sm, cpu)``, which the writer
    runs instead of that stall: its round trip.
    """

    queues_writes = False

    def __init__(self, env, sys: str, timing: BusTiming, tracer):
        # SimPy's, imported by a run alone: a prediction reads the bus kinds
        # (cpasim.model.buses) without SimPy.
        from cpasim.model.environment import sleeper
        from cpasim.tracing.primitives import TracedPool

        self.env = env
        self._sleep = sleeper(env)  # an access's hold (no event when nothing comes first)
        self.timing = timing
        self.stats = BusStats()
        self.measure_from = 0.0
        if timing.shared:
            self.up = self.down = TracedPool(env, tracer, sys, timing.pool, "0", size=1)
        else:
            self.up = TracedPool(env, tracer, sys, "PCIe up", "0", size=1)
            self.down = TracedPool(env, tracer, sys, "PCIe down", "0", size=1)
        # Occupancy by size: a run moves the same few sizes over and over.
        self._reads: dict[int, Occupancy] = {}
        self._writes: dict[int, Occupancy] = {}
        self._mmio = timing.mmio_write()

    def port(self, name: str) -> Bus:
        """What device ``name`` does its DMA through: the bus itself (M5's bus gives
        each device a port of its own, :mod:`cpasim.model.m5bus`)."""
        return self

    def dma_read(self, sm, nbytes: int):
        """Device reads ``nbytes`` of host memory: request, round trip, data down."""
        occ = self._reads.get(nbytes)
        if occ is None:
            occ = self._reads[nbytes] = self.timing.dma_read(nbytes)
        pool = self.down
        if not pool.acquire_now(sm):
            yield pool.acquire(sm)
        yield self._sleep(occ.wait_ns + occ.down_ns)
        pool.release(sm)
        self._count(occ, False, occ.down_ns)

    def dma_write(self, sm, nbytes: int, then: int = 0):
        """Device writes ``nbytes`` to host memory, followed by ``then`` bytes more as a
        separate write (a frame and then its descriptor); posted, so nothing waits
        for them to reach memory."""
        occ = self._writes.get(nbytes)
        if occ is None:
            occ = self._writes[nbytes] = self.timing.dma_write(nbytes)
        busy = occ.up_ns
        more = None
        if then:
            more = self._writes.get(then)
            if more is None:
                more = self._writes[then] = self.timing.dma_write(then)
            busy += more.up_ns
        pool = self.up
        if not pool.acquire_now(sm):
            yield pool.acquire(sm)
        yield self._sleep(busy)
        pool.release(sm)
        if more is None:
            self._count(occ, True, busy)
        else:  # the frame's part ends where the descriptor's begins
            self._count(occ, True, occ.up_ns, more.up_ns)
            self._count(more, True, more.up_ns)

    def mmio_write(self) -> None:
        """Account a doorbell (posted register write); the CPU side pays its stall.
        It does not take the bus, so it counts in the bytes only."""
        self._count(self._mmio, False, 0.0)

    def _count(self, occ: Occupancy, up: bool, held_ns: float, later_ns: float = 0.0) -> None:
        """Count ``occ``'s bytes, and ``held_ns`` of data time on the data's channel
        (``up`` or down), which ended ``later_ns`` before now; the part before
        ``measure_from`` is left out."""
        s = self.stats
        if held_ns:
            early = self.measure_from - (self.env._now - later_ns - held_ns)
            if early > 0:
                held_ns = max(0.0, held_ns - early)
        if self.timing.shared:
            # One bus: attribute the whole occupancy to the data's direction.
            if up:
                s.up_bytes += occ.up_bytes + occ.down_bytes
                s.up_ns += held_ns
            else:
                s.down_bytes += occ.up_bytes + occ.down_bytes
                s.down_ns += held_ns
            return
        s.up_bytes += occ.up_bytes
        s.down_bytes += occ.down_bytes
        if up:
            s.up_ns += held_ns
        else:
            s.down_ns += held_ns


class MemoryBus(Bus):
    """The I/O bus of a host whose memory is modelled (:mod:`cpasim.model.main_memory`):
    each DMA also takes its bytes' share of the memory (its whole transfer with
    ``memory.dma_holds``), and holds its channel until both are done; with
    ``memory.load_window`` a read's memory latency is stretched by the memory's
    load.  A host without ``memory.bandwidth`` gets a plain :class:`Bus`, so the
    memory costs nothing there."""

    def __init__(self, env, sys: str, timing: BusTiming, tracer, memory):
        super().__init__(env, sys, timing, tracer)
        self.memory = memory
        self._read_latency: dict[int, float] = {}  # by size: the target's memory wait

    # Bus's two methods written out with the memory's share in the hold: a hook
    # inside Bus would cost every run a call per DMA, memory or not.

    def dma_read(self, sm, nbytes: int):
        occ = self._reads.get(nbytes)
        if occ is None:
            occ = self._reads[nbytes] = self.timing.dma_read(nbytes)
        pool = self.down
        if not pool.acquire_now(sm):
            yield pool.acquire(sm)
        mem = self.memory
        data, latency = occ.down_ns, mem.latency
        if mem.loaded:  # the memory's part of the read waits longer under load
            extra = mem.read_stretch() - 1.0
            if extra:
                rl = self._read_latency.get(nbytes)
                if rl is None:
                    rl = self._read_latency[nbytes] = self.timing.read_latency_ns(nbytes)
                data += extra * rl  # a PCI burst holds the bus through its target's wait
                latency += extra * latency
        own = occ.wait_ns + data
        # With dma_holds the memory streams at the bus's pace for the whole transfer.
        held = mem.hold(nbytes, data, own) if mem.dma_holds else mem.access(nbytes, own)
        yield self._sleep(held + latency)
        pool.release(sm)
        self._count(occ, False, data)

    def dma_write(self, sm, nbytes: int, then: int = 0):
        occ = self._writes.get(nbytes)
        if occ is None:
            occ = self._writes[nbytes] = self.timing.dma_write(nbytes)
        busy = occ.up_ns
        more = None
        if then:
            more = self._writes.get(then)
            if more is None:
                more = self._writes[then] = self.timing.dma_write(then)
            busy += more.up_ns
        pool = self.up
        if not pool.acquire_now(sm):
            yield pool.acquire(sm)
        # Posted: the memory's latency delays nobody, its bandwidth does.
        mem = self.memory
        if mem.dma_holds:
            yield self._sleep(mem.hold(nbytes + then, busy, busy))
        else:
            yield self._sleep(mem.access(nbytes + then, busy))
        pool.release(sm)
        if more is None:
            self._count(occ, True, occ.up_ns)
        else:  # the frame's part ends where the descriptor's begins
            self._count(occ, True, occ.up_ns, more.up_ns)
            self._count(more, True, more.up_ns)
