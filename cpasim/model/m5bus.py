"""The I/O bus as Saidi 2009's simulator modelled it (``bus.kind = "m5"``).

Saidi's chapter 6 ran M5, whose I/O bus was its generic ``Bus`` behind a ``Bridge``
to memory, with each device's DMA through a ``DmaPort``.  Their timing, as gem5's
source of February 2009 has it (commit bebbc9dc89: ``src/mem/bus.cc``,
``src/mem/bridge.cc``, ``src/dev/io_device.cc``, ``src/mem/Bus.py``,
``src/mem/Bridge.py``, ``src/dev/Device.py``, ``src/mem/PhysicalMemory.py``):

- **Bus**: one shared, half-duplex channel.  A transaction starts on a clock edge
  and occupies ``header_cycles`` plus ``ceil(data / width)`` cycles; one without
  data (a read request, a write's acknowledgement, a NACK) the header alone.
  Transactions are split: a read's request and its response cross separately, the
  bus free for others in between.  Whoever asked first goes first.
- **Bandwidth**: the thesis set it to a PCIe link's ("a single (x1) PCIe lane",
  then x4), so the bus moves ``pcie.lanes`` bytes per cycle at a lane's symbol rate
  (gen 1: 250 MHz, 2 Gb/s per lane).
- **Bridge**: a request reaches memory ``pcie.latency`` after it is put on the bus
  (the thesis: 100 ns), memory answers after ``bus.m5_memory_latency``, and the
  response is ready on the I/O side ``pcie.latency`` later.  At most
  ``bus.m5_bridge_buffer`` requests may await their responses; one more is NACKed,
  its NACK sent back ``bus.m5_nack_delay`` after it arrived.
- **DmaPort**: a DMA is cut into 64-byte blocks queued in order on its device's one
  port; the port sends them back to back.  A NACKed block goes back to the head of
  the queue and is retried after a back-off: ``bus.m5_backoff_min`` at first, doubled
  at each NACK up to ``bus.m5_backoff_max``, quartered at each response received;
  while it is not zero the port sends one block per back-off.  A DMA is complete
  when its last response (for a write, its last acknowledgement) arrives.

- **Register writes**: a CPU's uncached write to a device register (a doorbell) goes
  out through the same bridge, into its one queue towards the I/O bus in arrival
  order, behind the responses to the DMA reads already queued there.  M5 does not
  acknowledge writes early (``Bridge`` panics on ``write_ack``): the device answers
  ``pio_latency`` after the write reaches it (``Device.py``, ``Pci.py``: 1 ns), and
  the answer crosses the bus and the bridge back.  Alpha Linux's ``writel`` ends in
  a memory barrier, and M5's out-of-order CPU commits a barrier only once every
  older store has completed (``commit_impl.hh``: "Waiting for all stores to
  writeback"; ``lsq_unit_impl.hh``: a store completes on its response), so the CPU
  stalls for the whole round trip.  Here the write crosses the bridge
  (``pcie.latency``), waits its turn for the bus behind the runs already holding or
  asking for it, crosses it, the device answers and its answer crosses the bus and
  the bridge back; the core stalls all the while (:meth:`M5Bus.cpu_write`,
  untraced: M5's bridge was not annotated).  ``pcie.mmio_latency``, the CPU's stall
  for a write posted on PCIe, is not used on this bus.

How it runs here.  A DMA's timeline on an otherwise idle bus is worked out by
replaying these rules block by block (:func:`replay`), once per size, direction and
back-off the port starts with, outside the event loop.  Transactions closer than one
data block's transaction are one *run*; the DMA takes the bus pool for each run's
busy time, lets go, and waits out the run's idle time (a read's round trip, a
back-off), so other devices use those gaps: no per-block event.  A device's next
DMA waits (untraced, as M5's port queue was not annotated) until the run in which
its previous one sent its last request has ended, and starts from the back-off the
previous one left.

Not modelled: the bridge's buffer and its in-order answers shared between DMAs (each
DMA has them to itself), other DMAs' blocks interleaved inside a run (in M5 a port
frees when a read's last block is accepted, and its next DMA's blocks cross between
the read's responses; here the port frees at the end of that run, for a 24-block
read the whole read), the memory bus's own cycles (one or two 1 ns cycles per block
at M5's defaults), DMA buffers that do not start on a block boundary.  So a register
write finds the bus free during the round trip before a read's first response, where
in M5 the port's next DMA could already be sending, so ``udp-stream`` at x4 is not
monotone in the bridge's latency.  A register write also joins the bus's queue when it
is through the bridge, not in its arrival order (holding its place from arrival gives
the same ``udp-stream`` figures at x1 and x4); ``cpasim sweep scenarios/udp-stream.toml
--set pcie.lanes=4 --grid pcie.latency=25ns,50ns,100ns,200ns,400ns`` shows the first.
``calibration/m5bus_transactions.py`` arbitrates every transaction of all DMAs
together by the same rules, to check what these leave out (calibration/SEEDS.md).
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

from cpasim.errors import CpasimError
from cpasim.model.bus import Bus
from cpasim.model.bus_rules import MMIO_WAIT
from cpasim.model.pcie import BusTiming, Occupancy, encoding
from cpasim.protocol import LANE_RATE, MMIO_BYTES, ceil_div

#: Bytes per DMA packet: M5's DmaPort cuts a DMA at its bus's block size, 64 bytes
#: (gem5 Bus.py ``block_size``, and the caches' blocks).
BLOCK = 64

PS_PER_NS = 1000  # M5 counts in picosecond ticks; the replay does too

#: A device's answer to a register access, after the access reached it (gem5
#: ``Pci.py``: ``PciDevice.pio_latency``, 1 ns).
PIO_LATENCY_PS = 1000


@dataclass(frozen=True, slots=True)
class Run:
    """One run of a DMA's timeline: the bus busy ``busy_ns`` in all, over ``span_ns``
    after ``gap_ns`` of waiting since the previous run ended."""

    gap_ns: float
    busy_ns: float
    span_ns: float


@dataclass(frozen=True, slots=True)
class Timeline:
    """A DMA alone on the bus: its runs, the run in which its last request is sent
    (after which its port may send the next DMA's), and the port's back-off after it
    (ps)."""

    runs: tuple[Run, ...]
    port_run: int
    backoff_ps: int
    nacks: int

    @property
    def busy_ns(self) -> float:
        return sum(r.busy_ns for r in self.runs)

    @property
    def duration_ns(self) -> float:
        return sum(r.gap_ns + r.span_ns for r in self.runs)


@dataclass(frozen=True)
class M5Timing(BusTiming):
    """M5's I/O bus: ``width`` bytes per cycle of ``cycle_ps``; the bridge's one-way
    ``bridge_ps``, the memory's ``memory_ps``, its buffer and NACK delay; the ports'
    back-off bounds (all times in ps)."""

    width: int
    cycle_ps: int
    header_cycles: int
    bridge_ps: int
    memory_ps: int
    bridge_buffer: int
    nack_ps: int
    backoff_min_ps: int
    backoff_max_ps: int

    kind = "m5"
    shared = True
    pool = "I/O bus"

    @property
    def round_trip_ps(self) -> int:
        """From a request on the I/O bus to its response ready at the bridge."""
        return 2 * self.bridge_ps + self.memory_ps

    def block_ps(self, data: int) -> int:
        """A transaction carrying ``data`` bytes (0: the header alone)."""
        return (self.header_cycles + ceil_div(data, self.width)) * self.cycle_ps

    def transactions(self, nbytes: int, write: bool) -> tuple[list[int], list[int]]:
        """The request and response transactions (ps) of each block of a DMA: a
        write's data goes with its request and its acknowledgement is a header, a
        read's request is a header and its data comes with the response."""
        if nbytes < 1:
            raise CpasimError(f"a DMA needs at least one byte, got {nbytes!r}")
        sizes = [BLOCK] * (nbytes // BLOCK) + ([nbytes % BLOCK] if nbytes % BLOCK else [])
        data = [self.block_ps(s) for s in sizes]
        headers = [self.block_ps(0)] * len(sizes)
        return (data, headers) if write else (headers, data)

    def nacked(self, backoff: int) -> int:
        """A port's back-off (ps) after one more NACK: the least at first, then doubled
        up to the most."""
        if backoff < self.backoff_min_ps:
            return self.backoff_min_ps
        return backoff << 1 if backoff < self.backoff_max_ps else backoff

    def dma_write(self, nbytes: int) -> Occupancy:
        return self._alone(nbytes, True)

    def dma_read(self, nbytes: int) -> Occupancy:
        return self._alone(nbytes, False)

    def mmio_write(self) -> Occupancy:
        return Occupancy(0.0, self.block_ps(MMIO_BYTES) / PS_PER_NS, 0, MMIO_BYTES, 0.0)

    def register_write_ps(self) -> int:
        """A register write's time on the bus: its transaction, the device's answer
        (:data:`PIO_LATENCY_PS`) and the answer's (a header)."""
        return self.block_ps(MMIO_BYTES) + PIO_LATENCY_PS + self.block_ps(0)

    def _alone(self, nbytes: int, write: bool) -> Occupancy:
        """A DMA from an idle port: its bus time, and what it waits beyond it."""
        tl = replay(self, nbytes, write, 0)
        busy = tl.busy_ns
        if write:
            return Occupancy(busy, 0.0, nbytes, 0, tl.duration_ns - busy)
        return Occupancy(0.0, busy, 0, nbytes, tl.duration_ns - busy)


def m5_timing(bus, pcie) -> M5Timing:
    """M5's bus from a host's ``bus`` section and the PCIe link it stands for: one byte
    per lane per symbol (the lane's rate after line encoding, in bytes)."""
    if pcie.gen not in LANE_RATE:
        raise CpasimError(f"pcie.gen: expected one of 1-5, got {pcie.gen!r}")
    clock = LANE_RATE[pcie.gen] * encoding(pcie.gen) / 8  # symbols (bytes) per second
    return M5Timing(
        width=pcie.lanes,
        cycle_ps=round(1e12 / clock),
        header_cycles=bus.m5_header_cycles,
        bridge_ps=round(pcie.latency * PS_PER_NS),
        memory_ps=round(bus.m5_memory_latency * PS_PER_NS),
        bridge_buffer=bus.m5_bridge_buffer,
        nack_ps=round(bus.m5_nack_delay * PS_PER_NS),
        backoff_min_ps=round(bus.m5_backoff_min * PS_PER_NS),
        backoff_max_ps=round(bus.m5_backoff_max * PS_PER_NS),
    )


def clock_edge(t: int, cycle: int) -> int:
    """The first clock edge at or after ``t``."""
    return -(-t // cycle) * cycle


def replay(t: M5Timing, nbytes: int, write: bool, backoff: int) -> Timeline:
    """The transactions of one DMA of ``nbytes`` on an idle bus, its port starting with
    ``backoff`` ps, condensed into runs (see the module docstring)."""
    req, resp = t.transactions(nbytes, write)
    header = t.block_ps(0)
    round_trip = t.round_trip_ps
    cycle = t.cycle_ps
    pending = deque(range(len(req)))
    port_at = 0  # when the port asks for the bus next
    bus_free = 0
    bridge: list[tuple[int, int, bool, int]] = []  # (ready, order, nack, block)
    order = outstanding = received = nacks = 0
    bridge_at = -1  # the bridge asks again just after each send of its own
    spans: list[tuple[int, int]] = []
    last_request = 0
    while received < len(req):
        # The one that asked first gets the bus (M5's retry list), the bridge on a tie:
        # so a port and the bridge alternate while both have something to send.
        if bridge and (not pending or max(bridge[0][0], bridge_at) <= port_at):
            ready, _, nack, i = heapq.heappop(bridge)
            start = clock_edge(max(ready, bridge_at, bus_free), cycle)
            bridge_at = start + 1
            bus_free = start + (header if nack else resp[i])
            spans.append((start, bus_free))
            if nack:
                backoff = t.nacked(backoff)
                pending.appendleft(i)
                port_at = start + backoff
            else:
                outstanding -= 1
                received += 1
                backoff >>= 2
        else:
            i = pending.popleft()
            start = clock_edge(max(port_at, bus_free), cycle)
            bus_free = start + req[i]
            spans.append((start, bus_free))
            last_request = len(spans) - 1
            if outstanding >= t.bridge_buffer:
                nacks += 1
                heapq.heappush(bridge, (start + t.nack_ps, order, True, i))
            else:
                outstanding += 1
                heapq.heappush(bridge, (start + round_trip, order, False, i))
            order += 1
            # Back to back, or one block per back-off while it lasts.
            port_at = start + backoff
    return _runs(spans, last_request, t.block_ps(BLOCK), backoff, nacks)


def _runs(spans, last_request: int, merge: int, backoff: int, nacks: int) -> Timeline:
    """Condense transactions into runs: a gap shorter than ``merge`` (one data block's
    transaction, which nothing else could use) stays inside a run."""
    runs = []
    port_run = 0
    end = 0  # where the previous run ended
    first, busy, run_end = spans[0][0], 0, spans[0][0]
    for k, (s, e) in enumerate(spans):
        if s - run_end >= merge and busy:
            runs.append(
                Run((first - end) / PS_PER_NS, busy / PS_PER_NS, (run_end - first) / PS_PER_NS)
            )
            end, first, busy = run_end, s, 0
        busy += e - s
        run_end = e
        if k == last_request:
            port_run = len(runs)
    runs.append(Run((first - end) / PS_PER_NS, busy / PS_PER_NS, (run_end - first) / PS_PER_NS))
    return Timeline(tuple(runs), port_run, backoff, nacks)


class DmaPort:
    """One device's DMA port on an M5 bus: its DMAs in order, its back-off carried
    from one to the next.  Offers the :class:`~cpasim.model.bus.Bus` interface the
    device's engines use."""

    queues_writes = True

    def __init__(self, bus: M5Bus, name: str):
        self.bus = bus
        self.name = name
        self.stats = bus.stats
        self.backoff = 0  # ps
        self._busy = False
        self._waiting: deque = deque()

    def dma_read(self, sm, nbytes: int):
        yield from self.bus._dma(self, sm, nbytes, False)

    def dma_write(self, sm, nbytes: int, then: int = 0):
        """A write of ``nbytes``, then (a separate DMA queued behind it) ``then`` more."""
        yield from self.bus._dma(self, sm, nbytes, True)
        if then:
            yield from self.bus._dma(self, sm, then, True)

    def mmio_write(self) -> None:
        self.bus.mmio_write()

    def cpu_write(self, sm, cpu):
        return self.bus.cpu_write(sm, cpu)

    def port(self, name: str) -> DmaPort:
        return self.bus.port(name)

    def _take(self):
        """None when the port is free now, else the event of its turn."""
        if not self._busy:
            self._busy = True
            return None
        ev = self.bus.env.event()
        self._waiting.append(ev)
        return ev

    def _give(self) -> None:
        if self._waiting:
            self._waiting.popleft().succeed()
        else:
            self._busy = False


class M5Bus(Bus):
    """Host ``sys``'s I/O bus as M5 modelled it: one ``I/O bus`` pool, shared by the
    devices' :class:`DmaPort`\\ s (:meth:`port`)."""

    queues_writes = True

    def __init__(self, env, sys: str, timing: M5Timing, tracer):
        super().__init__(env, sys, timing, tracer)
        self._timelines: dict[tuple[int, bool, int], Timeline] = {}
        self._ports: dict[str, DmaPort] = {}
        self._default = self.port("")
        self._bridge_ns = timing.bridge_ps / PS_PER_NS
        self._register_ns = timing.register_write_ps() / PS_PER_NS

    def port(self, name: str) -> DmaPort:
        """The DMA port of device ``name`` (one per device, made on first use)."""
        p = self._ports.get(name)
        if p is None:
            p = self._ports[name] = DmaPort(self, name)
        return p

    def dma_read(self, sm, nbytes: int):
        yield from self._default.dma_read(sm, nbytes)

    def dma_write(self, sm, nbytes: int, then: int = 0):
        yield from self._default.dma_write(sm, nbytes, then)

    def cpu_write(self, sm, cpu):
        """Generator run by ``sm`` holding a core of ``cpu``, after its register write's
        own cost: in state ``mmio write`` (:data:`~cpasim.model.bus_rules.MMIO_WAIT`)
        the write crosses the bridge, waits in its queue for the bus, crosses it, and
        the device's answer comes back the same way, the core stalled meanwhile (busy
        time of ``driver``).  The bus records nothing."""
        sleep, pool = self._sleep, self.up
        sm.begin(MMIO_WAIT)
        start = self.env._now
        yield sleep(self._bridge_ns)
        if not pool.take_untraced():
            yield pool.wait_untraced()
        yield sleep(self._register_ns)
        pool.release_untraced()
        yield sleep(self._bridge_ns)
        cpu.stalled("driver", start)

    def _dma(self, port: DmaPort, sm, nbytes: int, write: bool):
        turn = port._take()
        if turn is not None:
            yield turn
        key = (nbytes, write, port.backoff)
        tl = self._timelines.get(key)
        if tl is None:
            tl = self._timelines[key] = replay(self.timing, nbytes, write, port.backoff)
        sleep, pool = self._sleep, self.up
        # The bytes count once, with the first run.
        occ = Occupancy(0.0, 0.0, nbytes, 0, 0.0)
        for k, run in enumerate(tl.runs):
            if run.gap_ns:
                yield sleep(run.gap_ns)
            if not pool.acquire_now(sm):
                yield pool.acquire(sm)
            yield sleep(run.busy_ns)
            pool.release(sm)
            self._count(occ, write, run.busy_ns)
            occ = _NO_BYTES
            idle = run.span_ns - run.busy_ns
            if idle > 0:
                yield sleep(idle)
            if k == tl.port_run:
                port.backoff = tl.backoff_ps
                port._give()


_NO_BYTES = Occupancy(0.0, 0.0, 0, 0, 0.0)
