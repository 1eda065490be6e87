"""One host's network device: qdisc, driver, NIC and I/O bus, wired together.

``NetDevice`` is what the stack sees: it puts IP packets into ``dev.qdisc``
and gets received packets, in order, from ``dev.rx_out``.  Inside::

    qdisc ─▶ Driver TX ─▶ TX ring (doorbell) ─▶ NIC TX (DMA over the bus) ─▶ TX FIFO ─▶ MAC ─▶ link
                         (with nic.tx_desc_cache: ─▶ TX Desc Fetch ─▶ TX desc cache ─▶ NIC TX)
             ▲ TX free desc ◀── NAPI clean-up ◀── TX done (write-back) ◀─┘
    link ─▶ RX FIFO ─▶ NIC RX (DMA over the bus) ─▶ RX ring ─▶ NAPI poll ─▶ RX backlog (rx_out)
             ▲ RX free desc (refill) ◀── NAPI ◀── ISR ◀── IRQ (moderation) ◀─┘

The state machines are described in :mod:`cpasim.model.driver`,
:mod:`cpasim.model.nic`, :mod:`cpasim.model.desc_fetch`,
:mod:`cpasim.model.desc_writeback` (with ``nic.tx_writeback``, the write-back goes
through ``TX Desc Writeback``), :mod:`cpasim.model.bus` and :mod:`cpasim.model.link`
(the MAC sits on the host's ``port`` of the :class:`~cpasim.model.link.Link`;
a bottleneck between the hosts is :mod:`cpasim.model.bottleneck`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpasim.model.bus import Bus, BusStats
from cpasim.model.buses import make_bus
from cpasim.model.driver import Driver, Rings
from cpasim.model.nic import InterruptUnit, Nic
from cpasim.model.qdisc import make_qdisc
from cpasim.tracing import TracedStore

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
    ``memory``, the host's :class:`~cpasim.model.main_memory.Memory` if modelled.

    A host with several interfaces (the forwarding host) builds one per interface,
    each with its own ``inst`` (the instance of all its state machines and queues),
    on the one I/O bus it passes as ``io_bus``."""

    def __init__(
        self,
        env,
        sys: str,
        tracer,
        *,
        nic,
        driver,
        qdisc,
        pcie,
        bus,
        cpu,
        port,
        memory=None,
        inst: str = "0",
        io_bus: Bus | None = None,
    ):
        self.sys = sys
        self.csum_offload = nic.csum_offload
        self.tso = nic.tso
        self.stats = DeviceStats()
        if io_bus is None:
            io_bus = make_bus(env, sys, tracer, bus=bus, pcie=pcie, memory=memory)
        self.bus = io_bus
        self.stats.bus = self.bus.stats
        self.qdisc = make_qdisc(env, sys, qdisc, tracer, inst)
        self.rx_out = TracedStore(env, tracer, sys, "RX backlog", inst)
        self.rings = Rings(env, sys, tracer, params=nic, inst=inst)
        self.irq = InterruptUnit(env, sys, tracer, params=nic, stats=self.stats, inst=inst)
        self.nic = Nic(
            env,
            sys,
            tracer,
            params=nic,
            bus=self.bus.port(f"NIC {inst}"),
            rings=self.rings,
            irq=self.irq,
            stats=self.stats,
            port=port,
            inst=inst,
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
            inst=inst,
        )


def host_device(
    env, sys: str, tracer, hc, *, cpu, port, memory, inst: str = "0", io_bus: Bus | None = None
) -> NetDevice:
    """A :class:`NetDevice` with host ``sys``'s sections of ``hc`` (its HostParams)."""
    return NetDevice(
        env,
        sys,
        tracer,
        nic=hc.nic,
        driver=hc.driver,
        qdisc=hc.qdisc,
        pcie=hc.pcie,
        bus=hc.bus,
        cpu=cpu,
        port=port,
        memory=memory,
        inst=inst,
        io_bus=io_bus,
    )
