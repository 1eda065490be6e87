"""One host's network device: qdisc, driver, NIC and I/O bus, wired together.

``NetDevice`` is what the stack sees: it puts IP packets into ``dev.qdisc``
and gets received packets, in order, from ``dev.rx_out``.  Inside::

    qdisc ─▶ Driver TX ─▶ TX ring (doorbell) ─▶ NIC TX (DMA over the bus) ─▶ TX FIFO ─▶ MAC ─▶ link
                         (with nic.tx_desc_cache: ─▶ TX Desc Fetch ─▶ TX desc cache ─▶ NIC TX)
             ▲ TX free desc ◀── NAPI clean-up ◀── TX done (write-back) ◀─┘
    link ─▶ RX FIFO ─▶ NIC RX (DMA over the bus) ─▶ RX ring ─▶ NAPI poll ─▶ RX backlog (rx_out)
             ▲ RX free desc (refill) ◀── NAPI ◀── ISR ◀── IRQ (moderation) ◀─┘

The state machines are described in :mod:`cpasim.model.driver`,
:mod:`cpasim.model.nic`, :mod:`cpasim.model.desc_fetch`, :mod:`cpasim.model.bus`
and :mod:`cpasim.model.link`
(the MAC sits on the host's ``port`` of the :class:`~cpasim.model.link.Link`;
a bottleneck between the hosts is :mod:`cpasim.model.bottleneck`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpasim.model.bus import Bus, BusStats, MemoryBus, bus_timing
from cpasim.model.driver import Driver, Rings
from cpasim.model.nic import InterruptUnit, Nic
from cpasim.model.qdisc import make_qdisc
from cpasim.trace import TracedStore

#: Drop reasons counted in ``DeviceStats.drops``.
DROP_REASONS = ("rx_fifo", "rx_ring_full")


@dataclass
class DeviceStats:
    """Counters of one device since the start of the run."""

    bus: BusStats = field(default_factory=BusStats)
    drops: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DROP_REASONS, 0))
    tx_frames: int = 0  # frames put into the TX FIFO (after TSO)
    rx_frames: int = 0  # frames written to host memory
    interrupts: int = 0
    napi_polls: int = 0

    def snapshot(self) -> dict:
        return {
            "bus": self.bus.snapshot(),
            "drops": dict(self.drops),
            "tx_frames": self.tx_frames,
            "rx_frames": self.rx_frames,
            "interrupts": self.interrupts,
            "napi_polls": self.napi_polls,
        }


class NetDevice:
    """The device path of host ``sys``: its ``nic``, ``driver``, ``qdisc``, ``pcie`` and
    ``bus`` config sections, the host's ``cpu`` and ``port``, its end of the link, and
    ``memory``, the host's :class:`~cpasim.model.memory.Memory` if modelled."""

    def __init__(
        self, env, sys: str, tracer, *, nic, driver, qdisc, pcie, bus, cpu, port, memory=None
    ):
        self.sys = sys
        self.csum_offload = nic.csum_offload
        self.tso = nic.tso
        self.stats = DeviceStats()
        if memory is None:
            self.bus = Bus(env, sys, bus_timing(bus, pcie), tracer)
        else:  # DMA also takes its share of the host's memory (memory.bandwidth)
            self.bus = MemoryBus(env, sys, bus_timing(bus, pcie), tracer, memory)
        self.stats.bus = self.bus.stats
        self.qdisc = make_qdisc(env, sys, qdisc, tracer)
        self.rx_out = TracedStore(env, tracer, sys, "RX backlog", "0")
        self.rings = Rings(env, sys, tracer, params=nic)
        self.irq = InterruptUnit(env, sys, tracer, params=nic, stats=self.stats)
        self.nic = Nic(
            env,
            sys,
            tracer,
            params=nic,
            bus=self.bus,
            rings=self.rings,
            irq=self.irq,
            stats=self.stats,
            port=port,
        )
        self.driver = Driver(
            env,
            sys,
            tracer,
            params=driver,
            mmio_latency=pcie.mmio_latency,
            cpu=cpu,
            bus=self.bus,
            rings=self.rings,
            irq=self.irq,
            qdisc=self.qdisc,
            rx_out=self.rx_out,
            stats=self.stats,
        )
