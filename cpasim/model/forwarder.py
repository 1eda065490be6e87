"""The forwarding host: two interfaces on one I/O bus, IP forwarding between them.

With ``topology.kind = "forward"`` host ``fw`` sits between tx and rx, a Linux
router as Waheed 2003 measured one: interface ``0`` faces tx, interface ``1``
faces rx, each a whole :class:`~cpasim.model.device.NetDevice` (qdisc, driver,
rings, NIC, interrupt moderation) with that instance, and both on the host's
one I/O bus (``bus``/``pcie``; with ``memory.bandwidth`` its DMA shares the
host's memory), so a forwarded packet crosses that bus twice: written to memory
by the receiving NIC, read from it by the sending one.  Its CPU (``cpu.cores``,
``cpu.freq``) runs the drivers and the forwarding path; nothing else runs on it.

``IP Forward`` (``fw:IP Forward:i``: the packets arriving on interface ``i``,
sent out of the other one)
    ``Wait`` — for a packet NAPI handed up (the interface's ``RX backlog``);
    then, on a core of the softirq side, for it and every further one already
    queued:
    ``nf_hook`` — with ``ip.netfilter``: the FORWARD hook (``cpu.cost.netfilter``);
    ``ip_forward`` — ``ip_rcv``, the route lookup, the TTL and header checksum
    update and ``ip_output`` (``cpu.cost.forward``, category ``stack``);
    ``dev_queue_xmit`` — the packet to the other interface: when its ``qdisc``
    is empty, its ``Driver TX`` holds no packet and its ring has a free
    descriptor, the driver's transmit runs here, in the forwarding softirq, as
    Linux's ``qdisc_run`` does (``xmit``: the descriptor and the doorbell,
    ``cpu.cost.descriptor`` and the core's ``pcie.mmio_latency``, category
    ``driver``); otherwise the packet waits in the ``qdisc`` for ``Driver TX``
    (a full ring: Linux's ``net_tx_action`` once the clean-up frees
    descriptors), and a full queue drops it (reason ``qdisc_full``), as Linux's
    forwarding path does: no socket waits behind a router's queue;
    then it gives the core back.  (Left to ``Driver TX``, every transmit would
    wait for a core behind the receive side's next poll, and a saturated core
    would forward a fraction of what it can.)

The packet is the one received (Linux reuses the skb): its buffer was allocated
by the receiving interface's NAPI (``cpu.cost.skb_alloc``) and is freed by the
sending interface's clean-up (``cpu.cost.skb_free``); each interface's driver
costs its descriptors, doorbells and interrupts as on an end host.
"""

from __future__ import annotations

from cpasim.config import FORWARDER
from cpasim.model.buses import make_bus
from cpasim.model.cpu import Cpu
from cpasim.model.device import NetDevice, host_device
from cpasim.model.main_memory import make_memory

#: The forwarding host's interfaces: the one facing tx, the one facing rx.
INTERFACES = ("0", "1")


class Forwarder:
    """Host ``fw`` (see the module docstring); ``ports``: its port on the tx side's link
    and on the rx side's, in the order of :data:`INTERFACES`."""

    tcp: tuple = ()  # no sockets: nothing for the per-connection readers
    udp: tuple = ()

    def __init__(self, env, cfg, tracer, ports) -> None:
        self.env = env
        self.sys = sys = FORWARDER
        self.hc = hc = cfg.host(sys)
        self.cpu = Cpu(env, sys, params=hc.cpu, tracer=tracer)
        self.memory = make_memory(env, hc.memory)
        self.cpu.memory = self.memory
        self.bus = make_bus(env, sys, tracer, bus=hc.bus, pcie=hc.pcie, memory=self.memory)
        self.devices = tuple(
            host_device(
                env,
                sys,
                tracer,
                hc,
                cpu=self.cpu,
                port=port,
                memory=self.memory,
                inst=inst,
                io_bus=self.bus,
            )
            for inst, port in zip(INTERFACES, ports, strict=True)
        )
        self.netfilter = hc.ip.netfilter
        self.c_forward = self.cpu.cycles("forward")
        self.c_netfilter = self.cpu.cycles("netfilter")
        self.dropped = 0  # packets a full qdisc turned away
        a, b = self.devices
        for inst, src, dst in ((INTERFACES[0], a, b), (INTERFACES[1], b, a)):
            env.process(self._forward(tracer.sm(sys, "IP Forward", inst), src, dst))

    def _forward(self, sm, src: NetDevice, dst: NetDevice):
        backlog, qdisc, driver = src.rx_out, dst.qdisc, dst.driver
        free = dst.rings.tx_free
        cpu = self.cpu.softirq()
        while True:
            sm.begin("Wait")
            pkt = backlog.take_now(1, sm)[0] if backlog.items else (yield backlog.get(sm))
            yield from cpu.take(sm)
            while True:
                if self.netfilter:
                    yield cpu.spend(sm, "nf_hook", stack=self.c_netfilter)
                yield cpu.spend(sm, "ip_forward", stack=self.c_forward)
                sm.begin("dev_queue_xmit")
                # Straight to the ring only with nothing queued before it (order kept).
                if not qdisc.items and not driver.busy and free.grab(1, sm):
                    sm.begin("xmit")
                    yield from driver.post(sm, cpu, [pkt])
                elif len(qdisc.items) < qdisc.capacity:
                    qdisc.put_now(pkt, sm)
                else:
                    self.dropped += 1
                if not backlog.items:
                    break
                (pkt,) = backlog.take_now(1, sm)
            cpu.release(sm)

    def drops(self) -> dict[str, int]:
        """Packets this host dropped, by reason (both interfaces together)."""
        out = {"qdisc_full": self.dropped}
        for dev in self.devices:
            for reason, n in dev.stats.drops.items():
                out[reason] = out.get(reason, 0) + n
        return out

    def retransmits(self) -> int:
        return 0  # no TCP here
