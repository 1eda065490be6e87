"""One host: its CPU, network device, IP layer and transport endpoints.

The host is plumbing only: it builds :class:`~cpasim.model.cpu.Cpu`, the
:class:`~cpasim.model.device.NetDevice` on its end of the link and
:class:`~cpasim.model.ip.IpLayer`, and opens TCP connections / UDP endpoints on
request, registering each with IP for its incoming packets.
"""

from __future__ import annotations

from cpasim.model.cpu import Cpu
from cpasim.model.device import NetDevice
from cpasim.model.ip import IpLayer
from cpasim.model.socket import TcpSocket, UdpSocket
from cpasim.model.tcp import TcpConnection
from cpasim.model.udp import UdpEndpoint


class Host:
    def __init__(self, env, sys: str, cfg, tracer, rng, port) -> None:
        self.env = env
        self.sys = sys
        self.hc = cfg.host(sys)
        self.mtu = cfg.link.mtu
        self.tracer = tracer
        self.cpu = Cpu(env, sys, params=self.hc.cpu, tracer=tracer)
        self.dev = NetDevice(env, sys, self.hc, tracer, rng, self.cpu, port)
        self.ip = IpLayer(
            env, sys, params=self.hc.ip, mtu=self.mtu, tracer=tracer, cpu=self.cpu, dev=self.dev
        )
        self.tcp: list[TcpConnection] = []
        self.seed = cfg.sim.seed  # seeds the connections' own generators (BBR's phase)
        self.udp: list[UdpEndpoint] = []

    def open_tcp(self, idx: int, *, peer_window: int, peer_sack: bool = True) -> TcpSocket:
        conn = TcpConnection(
            self.env,
            self.sys,
            idx,
            params=self.hc.tcp,
            tso=self.hc.nic.tso,
            csum_offload=self.hc.nic.csum_offload,
            mtu=self.mtu,
            peer_window=peer_window,
            peer_sack=peer_sack,
            tracer=self.tracer,
            cpu=self.cpu,
            ip=self.ip,
            seed=(self.seed << 20) + 2 * idx + (self.sys == "rx"),
        )
        self.tcp.append(conn)
        self.ip.register("tcp", conn.conn, conn)
        return TcpSocket(conn, self.cpu)

    def open_udp(self, idx: int) -> UdpSocket:
        ep = UdpEndpoint(
            self.env,
            self.sys,
            idx,
            params=self.hc.tcp,
            csum_offload=self.hc.nic.csum_offload,
            mtu=self.mtu,
            tracer=self.tracer,
            cpu=self.cpu,
            ip=self.ip,
        )
        self.udp.append(ep)
        self.ip.register("udp", ep.conn, ep)
        return UdpSocket(ep, self.cpu)

    def drops(self) -> dict[str, int]:
        """Packets this host dropped, by reason."""
        out = dict(self.dev.stats.drops)
        out.update(self.ip.drops)
        for ep in self.udp:
            for k, v in ep.drops.items():
                out[k] = out.get(k, 0) + v
        return out

    def retransmits(self) -> int:
        return sum(c.sender.retransmits for c in self.tcp)
