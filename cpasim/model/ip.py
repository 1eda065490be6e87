"""IP of one host: output in the caller's state machine, and the ``IP Recv`` SM.

Output (:meth:`IpLayer.output`) runs inside whichever SM sends (TcpSend, a
timer, the app for UDP) while it holds a core: ``nf_hook`` (with
``ip.netfilter``), ``ip_fragment`` for each fragment of a UDP datagram larger
than the MTU, then ``dev_queue_xmit`` (``ip_push_pending_frames`` for UDP)
puts each packet into the device's ``qdisc`` (blocking, with the core given
up, while the qdisc is full).  With ``ip.send_path = "2.6.13"`` UDP output
goes through Linux 2.6.13's path instead (:mod:`cpasim.model.ip_send`).

``IP Recv`` (one per host) is the protocol half of the receive softirq:
``Wait`` for a packet from the device (``dev.rx_out``), take a core, and for
each packet — and every further one already queued — ``nf_hook``,
``ip_defrag`` for fragments (a datagram goes up when its last fragment
arrives), then the transport's receive (TCP ``tcp_v4_rcv`` / ``tcp_ack``, UDP
``udp_rcv``), which may send (ACKs, retransmissions) from this SM.
"""

from __future__ import annotations

from dataclasses import replace

from cpasim.model.ip_send import IpSend
from cpasim.model.packet import Packet
from cpasim.protocol import IP_HEADER, UDP_HEADER


class IpLayer:
    """Host ``sys``'s IP layer; ``params`` is the host's ``ip`` section."""

    def __init__(self, env, sys, *, params, mtu, tracer, cpu, dev, loop: bool = True) -> None:
        """``loop``: run ``IP Recv`` as a process waiting on the device's ``RX backlog``;
        False when the device hands each packet to :meth:`deliver` itself (an ideal
        host's, :mod:`cpasim.model.ideal`)."""
        self.env = env
        self.cpu = cpu
        self.dev = dev
        self.mtu = mtu
        self.netfilter = params.netfilter
        # Linux 2.6.13's UDP output, only when asked for: otherwise nothing of it exists.
        self.ip_send = (
            IpSend(env, sys, tracer, netfilter=params.netfilter, cpu=cpu, ip=self)
            if params.send_path == "2.6.13"
            else None
        )
        # Fragment payloads are multiples of 8 bytes (the offset field's unit).
        self.frag_payload = (mtu - IP_HEADER) // 8 * 8
        self.sm = tracer.sm(sys, "IP Recv", "0")
        self.handlers: dict[tuple[str, str], object] = {}
        self._reasm: dict[tuple[str, int], int] = {}  # (conn, datagram id) -> bytes so far
        self.drops = {"reassembly": 0}
        if loop:
            env.process(self._recv_loop())

    def register(self, proto: str, conn: str, endpoint) -> None:
        """Deliver incoming ``proto`` packets of ``conn`` to ``endpoint.receive``."""
        self.handlers[(proto, conn)] = endpoint

    # -- output ------------------------------------------------------------------------
    def output(self, sm, pkt: Packet, state: str = "dev_queue_xmit"):
        """Send ``pkt`` (run by the sender holding a core); returns what to ``yield
        from``: a packet IP has no work for goes to the qdisc without a generator."""
        if self.netfilter or (pkt.length > self.mtu and pkt.proto == "udp"):
            return self._output(sm, pkt, state)
        sm.begin(state)
        return self.cpu.put(sm, self.dev.qdisc, pkt)

    def _output(self, sm, pkt: Packet, state: str):
        cpu = self.cpu
        if self.netfilter:
            yield cpu.spend(sm, "nf_hook", stack=cpu.cycles("netfilter"))
        if pkt.length > self.mtu and pkt.proto == "udp":
            for frag in self.fragment(pkt):
                yield cpu.spend(sm, "ip_fragment", stack=cpu.cycles("fragment"))
                sm.begin(state)
                yield from cpu.put(sm, self.dev.qdisc, frag)
        else:
            sm.begin(state)
            yield from cpu.put(sm, self.dev.qdisc, pkt)

    def fragment(self, pkt: Packet) -> list[Packet]:
        """The fragments of a UDP datagram; the first carries the UDP header."""
        total = pkt.length - IP_HEADER  # UDP header + payload
        out = []
        off = 0
        while off < total:
            size = min(self.frag_payload, total - off)
            head = UDP_HEADER if off == 0 else 0
            out.append(
                replace(
                    pkt,
                    length=IP_HEADER + size,
                    payload=size - head,
                    hdr=IP_HEADER + head,
                    frag_off=off,
                    more_frags=off + size < total,
                )
            )
            off += size
        return out

    # -- IP Recv -------------------------------------------------------------------------
    def _recv_loop(self):
        sm, rx = self.sm, self.dev.rx_out
        cpu = self.cpu.softirq()
        while True:
            sm.begin("Wait")
            pkt = yield rx.get(sm)
            yield from cpu.take(sm)
            while True:
                yield from self.deliver(sm, pkt)
                if not rx.items:
                    break
                (pkt,) = rx.take_now(1, sm)
            cpu.release(sm)

    def deliver(self, sm, pkt: Packet):
        """Generator run by ``IP Recv`` (its SM ``sm``, holding a core): one packet up.

        A packet IP has no work for (no netfilter, not a fragment) is its handler's
        ``receive`` itself, without a generator of IP's around it."""
        if self.netfilter or pkt.more_frags or pkt.frag_off:
            return self._deliver(sm, pkt)
        handler = self.handlers.get((pkt.proto, pkt.conn))
        return _nothing() if handler is None else handler.receive(sm, pkt)

    def _deliver(self, sm, pkt: Packet):
        cpu = self.cpu
        if self.netfilter:
            yield cpu.spend(sm, "nf_hook", stack=cpu.cycles("netfilter"))
        if pkt.more_frags or pkt.frag_off:
            yield cpu.spend(sm, "ip_defrag", stack=cpu.cycles("reassemble"))
            pkt = self._reassemble(pkt)
            if pkt is None:
                return
        handler = self.handlers.get((pkt.proto, pkt.conn))
        if handler is not None:
            yield from handler.receive(sm, pkt)

    def _reassemble(self, frag: Packet) -> Packet | None:
        """Count the fragment in; the whole datagram once all its bytes are in."""
        key = (frag.conn, frag.frag_id)
        got = self._reasm.get(key, 0) + frag.length - IP_HEADER
        whole = UDP_HEADER + frag.dgram_len
        if got < whole:
            self._reasm[key] = got
            return None
        self._reasm.pop(key, None)
        # Datagrams arrive in order: an older incomplete one has lost a fragment.
        stale = [k for k in self._reasm if k[0] == frag.conn and k[1] < frag.frag_id]
        for k in stale:
            del self._reasm[k]
            self.drops["reassembly"] += 1
        return replace(
            frag,
            length=IP_HEADER + whole,
            payload=frag.dgram_len,
            hdr=IP_HEADER + UDP_HEADER,
            frag_off=0,
            more_frags=False,
        )


def _nothing():
    """A delivery with nothing to do (no handler for the packet)."""
    return
    yield
