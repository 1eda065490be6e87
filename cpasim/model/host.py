"""One host: its CPU, network device, IP layer and transport endpoints.

The host is plumbing only: it builds :class:`~cpasim.model.cpu.Cpu`, the
:class:`~cpasim.model.device.NetDevice` on its end of the link and
:class:`~cpasim.model.ip.IpLayer` (and, when configured, the
:class:`~cpasim.model.main_memory.Memory` they share and the
:class:`~cpasim.model.copy_engine.CopyEngine`), and opens TCP connections / UDP
endpoints on request, registering each with IP for its incoming packets.  An ideal
host (``host.detail = "ideal"``) has a CPU and a device of its own instead and no
memory, bus or copy engine (:mod:`cpasim.model.ideal`).
"""

from __future__ import annotations

from cpasim.model.buses import bus_kind, on_die_timing, plain_bus
from cpasim.model.copy_engine import CopyEngine
from cpasim.model.cpu import Cpu
from cpasim.model.device import host_device
from cpasim.model.ip import IpLayer
from cpasim.model.main_memory import make_memory
from cpasim.model.netdma import NetDma
from cpasim.model.sockbuf import datagram_buffer
from cpasim.model.socket_api import TcpSocket, UdpSocket
from cpasim.model.tcp import TcpConnection
from cpasim.model.udp import UdpEndpoint


class Host:
    def __init__(self, env, sys: str, cfg, tracer, port) -> None:
        self.env = env
        self.sys = sys
        self.hc = cfg.host(sys)
        self.mtu = cfg.link.mtu
        self.tracer = tracer
        self._hardware(port)
        self.ip = IpLayer(
            env,
            sys,
            params=self.hc.ip,
            mtu=self.mtu,
            tracer=tracer,
            cpu=self.cpu,
            dev=self.dev,
            loop=self.dev.rx_out is not None,
        )
        self.tcp: list[TcpConnection] = []
        self.seed = cfg.sim.seed  # seeds the connections' own generators (BBR's phase)
        self.udp: list[UdpEndpoint] = []

    def _hardware(self, port) -> None:
        """The CPU, memory, device on ``port`` and copy engine (an ideal host has
        others: :mod:`cpasim.model.ideal`)."""
        env, sys, tracer, hc = self.env, self.sys, self.tracer, self.hc
        self.cpu = Cpu(env, sys, params=hc.cpu, tracer=tracer)
        # No memory object unless asked for: an unmodelled memory costs nothing.
        self.memory = make_memory(env, hc.memory)
        self.cpu.memory = self.memory
        self.dev = host_device(env, sys, tracer, hc, cpu=self.cpu, port=port, memory=self.memory)
        self.bus = self.dev.bus
        self.devices = (self.dev,)
        self.engine = None
        if hc.copy_engine.enabled:
            self.engine = CopyEngine(
                env,
                sys,
                tracer,
                params=hc.copy_engine,
                bus_mmio_latency=hc.pcie.mmio_latency,
                cpu=self.cpu,
                port=self._engine_port(),
            )

    def _engine_port(self):
        """The interconnect the copy engine's DMA crosses: the host's I/O bus for an
        engine on it, and for one on die the on-die interconnect, shared with the NIC
        when the NIC is on die too (``bus.kind = "on_die"``), else its own."""
        hc, bus = self.hc, self.dev.bus
        if hc.copy_engine.location == "io_bus":
            return bus.port("Copy Engine")
        if bus_kind(hc.bus.kind).on_die:
            return bus
        return plain_bus(self.env, self.sys, on_die_timing(hc.bus), self.tracer, self.memory)

    def open_tcp(self, idx: int, *, peer_window: int, peer_sack: bool = True) -> TcpSocket:
        conn = TcpConnection(
            self.env,
            self.sys,
            idx,
            params=self.hc.tcp,
            tso=self.dev.tso,
            csum_offload=self.dev.csum_offload,
            mtu=self.mtu,
            peer_window=peer_window,
            peer_sack=peer_sack,
            tracer=self.tracer,
            cpu=self.cpu,
            ip=self.ip,
            seed=(self.seed << 20) + 2 * idx + (self.sys == "rx"),
        )
        if self.engine is not None:  # read() then waits for copies with the socket locked
            conn.add_socket_lock(self.env, self.tracer, self.sys)
            conn.netdma = NetDma(self.env, self.tracer, self.sys, conn, self.engine, self.cpu)
        self.tcp.append(conn)
        self.ip.register("tcp", conn.conn, conn)
        return TcpSocket(conn, self.cpu)

    def open_udp(self, idx: int, *, poll: bool = False, name: str = "") -> UdpSocket:
        ep = UdpEndpoint(
            self.env,
            self.sys,
            idx,
            rcvbuf=datagram_buffer(self.hc.tcp),
            csum_copy=self.hc.tcp.csum_copy,
            csum_offload=self.dev.csum_offload,
            mtu=self.mtu,
            tracer=self.tracer,
            cpu=self.cpu,
            ip=self.ip,
            poll=poll,
            name=name,
        )
        self.udp.append(ep)
        self.ip.register("udp", ep.conn, ep)
        return UdpSocket(ep, self.cpu)

    def drops(self) -> dict[str, int]:
        """Packets this host dropped, by reason."""
        out = self._device_drops()
        out.update(self.ip.drops)
        for ep in self.udp:
            for k, v in ep.drops.items():
                out[k] = out.get(k, 0) + v
        return out

    def _device_drops(self) -> dict[str, int]:
        return dict(self.dev.stats.drops)

    def retransmits(self) -> int:
        return sum(c.sender.retransmits for c in self.tcp)
