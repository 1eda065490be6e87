"""ICMP echo: a ping flow's socket on tx and the kernel that answers it on rx.

A ping flow (``[[flows]]`` ``kind = "ping"``) sends its echo requests the way
Linux's ``ping`` does through an ICMP socket (``SOCK_DGRAM``, ``IPPROTO_ICMP``):

* :class:`PingSocket` (tx): ``sendto()`` (``ping_sendmsg``: the system call, the
  copy of the data, the ICMP header and checksum) hands the request to IP
  (``ip_push_pending_frames``), which queues it in the device's qdisc behind
  whatever else the host sends; it crosses the same NIC, link and bottleneck as
  the data.  The reply is taken by ``IP Recv`` (``icmp_rcv``), which notes its
  arrival (the kernel's timestamp, what ping reports: the application's own
  delay in reading it is not in the round trip) and queues it in the socket's
  ``Receive buffer`` for the application's ``recvfrom()`` (``ping_recvmsg``).
* :class:`EchoResponder` (rx): no application.  ``IP Recv`` answers each request
  itself (``icmp_echo``: ``icmp_reply`` builds the reply in the softirq) and
  sends the reply back through IP (``icmp_reply``), in the same SM.

Packets carry ``proto = "icmp"``, the ICMP type in ``flags`` (8 request, 0
reply) and the echo sequence number in ``seq``.  A request must fit in one
packet (``workload.ping_size`` + 28 B within ``link.mtu``; checked by the
configuration): fragments are not modelled for ICMP.
"""

from __future__ import annotations

from dataclasses import replace

from cpasim.model.packet import Packet
from cpasim.protocol import PING_HEADERS as HEADERS
from cpasim.tracing import TracedStore

#: ICMP types (RFC 792).
ECHO_REQUEST, ECHO_REPLY = 8, 0


class PingSocket:
    """Flow ``c<idx>``'s ICMP socket on the pinging host; ``size`` data bytes per
    request; ``on_reply(sent_ns, now)`` is called as each reply arrives."""

    def __init__(self, env, sys, idx, *, size, tracer, cpu, ip, on_reply) -> None:
        self.env = env
        self.conn = f"c{idx}"
        self.cpu = cpu
        self.ip = ip
        self.size = size
        self.on_reply = on_reply
        self.rcvq = TracedStore(env, tracer, sys, "Receive buffer", str(idx))
        ip.register("icmp", self.conn, self)

    def send(self, sm, seq: int, *, user: float = 0.0):
        """``sendto()`` of echo request ``seq``: its cost, then IP output."""
        cpu = self.cpu
        yield cpu.spend(
            sm,
            "ping_sendmsg",
            stack=cpu.cycles("syscall") + cpu.cycles("send_call") + user,
            copy=cpu.cycles("copy_send", self.size),
            buffer=cpu.cycles("skb_alloc"),
        )
        pkt = Packet(
            conn=self.conn,
            proto="icmp",
            length=HEADERS + self.size,
            payload=self.size,
            hdr=HEADERS,
            mss=self.size,
            seq=seq,
            flags=ECHO_REQUEST,
            sent_ns=self.env._now,
        )
        yield from self.ip.output(sm, pkt, state="ip_push_pending_frames")

    def receive(self, sm, pkt: Packet):
        """``icmp_rcv`` of a reply, in ``IP Recv``: note its round trip, queue it."""
        cpu = self.cpu
        yield cpu.spend(sm, "icmp_rcv", stack=cpu.cycles("rx_packet"))
        self.on_reply(pkt.sent_ns, self.env._now)
        self.rcvq.put_now(pkt.payload, sm)

    def pending(self) -> int:
        """Replies waiting to be read."""
        return len(self.rcvq.items)

    def poll(self, sm, deadline: float):
        """``poll()`` with a timeout, the core given up meanwhile: until a reply arrives
        or ``deadline``, whichever comes first.  Returns the reply it took off the
        queue (for :meth:`recv`), or None."""
        env = self.env
        if deadline <= env._now:
            return None
        got = self.rcvq.get(sm)
        yield from self.cpu.block(sm, got | env.timeout(deadline - env._now))
        if not got.triggered:
            got.cancel()
            return None
        return got.value

    def recv(self, sm, taken: int | None = None):
        """``recvfrom()`` of one reply (``taken`` off the queue already, or the next
        waiting): the system call and the copy."""
        cpu = self.cpu
        nbytes = taken if taken is not None else self.rcvq.take_now(1, sm)[0]
        yield cpu.spend(
            sm,
            "ping_recvmsg",
            stack=cpu.cycles("syscall"),
            copy=cpu.cycles("copy_recv", nbytes),
            buffer=cpu.cycles("skb_free"),
        )


class EchoResponder:
    """The kernel of the pinged host answering flow ``c<idx>``'s echo requests."""

    def __init__(self, env, idx, *, cpu, ip) -> None:
        self.env = env
        self.cpu = cpu
        self.ip = ip
        ip.register("icmp", f"c{idx}", self)

    def receive(self, sm, pkt: Packet):
        """``icmp_echo`` in ``IP Recv``: the reply is the request turned round; it keeps
        the request's send time, as ping's timestamp rides in the echoed data."""
        cpu = self.cpu
        yield cpu.spend(
            sm,
            "icmp_echo",
            stack=cpu.cycles("rx_packet") + cpu.cycles("tx_packet"),
            buffer=cpu.cycles("skb_alloc"),
        )
        yield from self.ip.output(sm, replace(pkt, flags=ECHO_REPLY), state="icmp_reply")
