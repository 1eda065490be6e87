"""I/O bus arithmetic: how long a DMA or an MMIO access occupies the bus.

Env-free closed forms shared by the bus model (:mod:`cpasim.model.bus`), its
tests and anything that wants a back-of-the-envelope bound; the TLP counts are
:mod:`cpasim.protocol`'s.  Nothing here
schedules events: a whole packet's DMA is one duration computed here, never a
sequence of per-TLP steps.

PCI Express (full duplex, per direction):

- a lane carries ``LANE_RATE[gen]`` transfers/s; gen1/2 use 8b/10b encoding,
  gen3+ 128b/130b, so one direction moves ``lanes * rate * enc / 8`` bytes/s;
- every transaction layer packet (TLP) adds ``tlp_overhead`` bytes (framing,
  sequence number, header, LCRC; DLLP acknowledgements folded in);
- a DMA write (device → host memory, "up") is ``ceil(n / max_payload)``
  posted TLPs;
- a DMA read sends ``ceil(n / max_read_request)`` header-only requests up,
  waits one round trip through the I/O bridge (``2 * latency``,
  :func:`~cpasim.model.bus_rules.read_round_trip_ns`) and receives
  completions down, each request answered by ``ceil(chunk / max_payload)``
  TLPs; requests are pipelined, so only the first one's latency is exposed;
- an MMIO write (a doorbell, host → device, "down") is one posted TLP carrying
  a 4-byte register value.

Legacy PCI (one shared, half-duplex bus): ``width`` bytes per ``clock`` cycle,
transfers cut into bursts of at most ``burst`` bytes, each burst paying
``overhead`` cycles (arbitration, address phase, turnaround); a read burst pays
``read_wait`` more cycles while the bridge fetches from memory.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from cpasim.errors import CpasimError
from cpasim.model.bus_rules import read_round_trip_ns
from cpasim.protocol import (
    LANE_RATE,
    MMIO_BYTES,
    ceil_div,
    completion_tlps,
    read_requests,
    write_tlps,
)


def encoding(gen: int) -> float:
    """Fraction of line bits that carry data: 8b/10b up to gen2, 128b/130b after."""
    if gen not in LANE_RATE:
        raise CpasimError(f"pcie.gen: expected one of 1-5, got {gen!r}")
    return 0.8 if gen <= 2 else 128 / 130


def pcie_bytes_per_ns(gen: int, lanes: int) -> float:
    """Raw data rate of one direction of a PCIe link after line encoding, bytes/ns."""
    if lanes < 1:
        raise CpasimError(f"pcie.lanes: expected a positive lane count, got {lanes!r}")
    enc = encoding(gen)  # validates gen
    return lanes * LANE_RATE[gen] * enc / 8 / 1e9


@dataclass(frozen=True, slots=True)
class Occupancy:
    """What one bus access costs.

    ``up_ns`` / ``down_ns``: time the device→host / host→device channel is busy
    (for PCI both are the one shared bus and only ``up_ns + down_ns`` matters);
    ``up_bytes`` / ``down_bytes``: bytes on each direction including overhead;
    ``wait_ns``: time a read waits for its first completion (request and round
    trip through the bridge) beyond the data's own time; writes are posted and
    wait for nothing.  A read is request (up) → wait → data (down).
    """

    up_ns: float
    down_ns: float
    up_bytes: int
    down_bytes: int
    wait_ns: float


class BusTiming(ABC):
    """Durations of bus accesses for one host's I/O bus (PCIe or legacy PCI)."""

    kind: str
    shared: bool  # one half-duplex channel for both directions
    pool: str = "PCI bus"  # the name of the one pool of a shared bus

    @abstractmethod
    def dma_write(self, nbytes: int) -> Occupancy:
        """The device writes ``nbytes`` to host memory."""

    @abstractmethod
    def dma_read(self, nbytes: int) -> Occupancy:
        """The device reads ``nbytes`` from host memory (requests up, completions down)."""

    @abstractmethod
    def mmio_write(self) -> Occupancy:
        """The CPU writes one device register (a doorbell)."""

    def read_latency_ns(self, nbytes: int) -> float:
        """Of a read of ``nbytes``, the time the bus waits for the target to fetch
        from memory (what grows with the memory's load); none beyond
        ``memory.latency`` unless the bus says so."""
        return 0.0


@dataclass(frozen=True)
class PcieTiming(BusTiming):
    gen: int
    lanes: int
    max_payload: int
    max_read_request: int
    tlp_overhead: int
    latency: float  # ns, one way through the I/O bridge
    bytes_per_ns: float = field(init=False)  # raw per-direction rate after encoding

    kind = "pcie"
    shared = False

    def __post_init__(self) -> None:
        for key, value in (
            ("pcie.max_payload", self.max_payload),
            ("pcie.max_read_request", self.max_read_request),
        ):
            if value < 1:
                raise CpasimError(f"{key}: expected a positive size in bytes, got {value!r}")
        object.__setattr__(self, "bytes_per_ns", pcie_bytes_per_ns(self.gen, self.lanes))

    def dma_write(self, nbytes: int) -> Occupancy:
        wire = nbytes + write_tlps(nbytes, self.max_payload) * self.tlp_overhead
        return Occupancy(wire / self.bytes_per_ns, 0.0, wire, 0, 0.0)

    def dma_read(self, nbytes: int) -> Occupancy:
        reqs = read_requests(nbytes, self.max_read_request) * self.tlp_overhead
        data = (
            nbytes
            + completion_tlps(nbytes, self.max_read_request, self.max_payload) * self.tlp_overhead
        )
        rate = self.bytes_per_ns
        # Only the first request's serialization and round trip are exposed:
        # later requests go out while earlier completions stream back.
        wait = self.tlp_overhead / rate + read_round_trip_ns(self.latency)
        return Occupancy(reqs / rate, data / rate, reqs, data, wait)

    def mmio_write(self) -> Occupancy:
        wire = MMIO_BYTES + self.tlp_overhead
        return Occupancy(0.0, wire / self.bytes_per_ns, 0, wire, 0.0)

    def write_rate(self, nbytes: int) -> float:
        """Closed form: bytes/ns of back-to-back DMA writes of ``nbytes`` each."""
        return nbytes / self.dma_write(nbytes).up_ns

    def read_rate(self, nbytes: int) -> float:
        """Closed form: bytes/ns of back-to-back, unoverlapped DMA reads of ``nbytes``."""
        occ = self.dma_read(nbytes)
        return nbytes / (occ.wait_ns + occ.down_ns)


@dataclass(frozen=True)
class PciTiming(BusTiming):
    """A shared bus of ``width`` bytes per ``clock`` cycle: legacy PCI, or the on-die
    interconnect (``kind = "on_die"``), which M5 models the same way."""

    width: int  # bytes per cycle
    clock: float  # Hz
    burst: int  # bytes
    overhead: float  # cycles per burst
    read_wait: float  # extra cycles per read burst
    kind: str = "pci"
    pool: str = "PCI bus"

    shared = True

    def __post_init__(self) -> None:
        if self.width < 1 or self.burst < 1 or self.clock <= 0:
            raise CpasimError(
                "bus.pci_width, bus.pci_burst, bus.pci_clock: expected positive values, got "
                f"{self.width!r}, {self.burst!r}, {self.clock!r}"
            )

    def _ns(self, nbytes: int, per_burst: float) -> float:
        bursts = ceil_div(nbytes, self.burst)
        cycles = ceil_div(nbytes, self.width) + bursts * per_burst
        return cycles * 1e9 / self.clock

    def dma_write(self, nbytes: int) -> Occupancy:
        return Occupancy(self._ns(nbytes, self.overhead), 0.0, nbytes, 0, 0.0)

    def dma_read(self, nbytes: int) -> Occupancy:
        # A PCI read holds the bus through the target's wait (delayed data).
        return Occupancy(0.0, self._ns(nbytes, self.overhead + self.read_wait), 0, nbytes, 0.0)

    def mmio_write(self) -> Occupancy:
        return Occupancy(0.0, self._ns(MMIO_BYTES, self.overhead), 0, MMIO_BYTES, 0.0)

    def read_latency_ns(self, nbytes: int) -> float:
        # Each burst is a read of its own, the bridge fetching it from memory.
        return ceil_div(nbytes, self.burst) * self.read_wait * 1e9 / self.clock
