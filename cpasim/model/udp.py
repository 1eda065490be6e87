"""One host's end of a UDP flow.

Sending runs in the application's SM (see :mod:`cpasim.model.socket_api`): the
datagram goes straight to IP, which fragments it when it exceeds the MTU.
Receiving runs in ``IP Recv`` (``udp_rcv``): the reassembled datagram joins the
socket's ``Receive buffer`` unless the buffer is full, in which case it is
dropped and counted — UDP has no flow control.  The buffer is sized by the
host's ``tcp`` socket-buffer keys: a fixed ``tcp.rmem`` holds that many payload
bytes; under Linux's rules ``sk_rcvbuf`` is the doubled ``tcp.rcvbuf`` request
(or ``tcp.core_rmem_default``), each datagram is charged ``tcp.rx_truesize``
per fragment, and one is dropped when the memory already charged exceeds the
buffer (``__udp_enqueue_schedule_skb``).

With ``workload.receive = "poll"`` the endpoint is Directed Point's:
the receive path itself copies the datagram into a buffer pool mapped into the
application (``copy_recv`` per byte, in ``udp_rcv``, where DP's interrupt
handler makes its memory-to-memory copy), frees the kernel buffer, and queues
the :class:`Packet` (its ``seq`` is what a user-level protocol reads); the
application picks it up without a system call (:meth:`UdpSocket.poll`).
"""

from __future__ import annotations

from cpasim.model.main_memory import send_touch
from cpasim.model.packet import Packet
from cpasim.model.sockbuf import DatagramBuffer
from cpasim.protocol import IP_HEADER, UDP_HEADER
from cpasim.tracing import TracedStore


class UdpEndpoint:
    """One end of flow ``c<idx>`` (or ``name``); ``rcvbuf`` its receive buffer,
    ``csum_copy`` whether the copy computes the checksum, ``csum_offload`` the NIC's;
    ``poll``: Directed Point's receive (see the module's docstring)."""

    def __init__(
        self,
        env,
        sys,
        idx,
        *,
        rcvbuf: DatagramBuffer,
        csum_copy: bool,
        csum_offload,
        mtu,
        tracer,
        cpu,
        ip,
        poll=False,
        name="",
    ) -> None:
        self.env = env
        self.conn = name or f"c{idx}"
        self.cpu = cpu
        self.ip = ip
        self.mtu = mtu
        self.sw_csum = not csum_offload
        self.send_touch = send_touch(self.sw_csum, csum_copy)
        self.fixed = rcvbuf.fixed
        self.rmem = rcvbuf.limit
        self.frag_payload = mtu - IP_HEADER  # IP payload bytes per fragment
        self.truesize = rcvbuf.truesize
        self.rcvq = TracedStore(env, tracer, sys, "Receive buffer", name or str(idx))
        self.rcv_bytes = 0  # buffer memory charged for the datagrams in rcvq
        self.next_id = 0
        self.drops = {"udp_rcvbuf": 0}
        self.sent = 0
        if poll:  # the kernel copies into the user-mapped pool: see the module's docstring
            self.receive = self._receive_pool

    def charge(self, payload: int) -> int:
        """Buffer memory a datagram of ``payload`` bytes takes while queued."""
        if self.fixed:
            return payload
        return -(-(payload + UDP_HEADER) // self.frag_payload) * self.truesize

    def datagram(self, nbytes: int, seq: int | None = None) -> Packet:
        """The next datagram of ``nbytes`` payload bytes, as IP gets it; ``seq`` is a
        user-level protocol's sequence number (default: the datagram's own id)."""
        dgram_id = self.next_id
        self.next_id += 1
        self.sent += 1
        return Packet(
            conn=self.conn,
            proto="udp",
            length=IP_HEADER + UDP_HEADER + nbytes,
            payload=nbytes,
            hdr=IP_HEADER + UDP_HEADER,
            mss=self.mtu - IP_HEADER - UDP_HEADER,
            seq=dgram_id if seq is None else seq,
            frag_id=dgram_id,
            dgram_len=nbytes,
            sent_ns=self.env._now,
        )

    def send(self, sm, nbytes: int, seq: int | None = None):
        """Generator run by ``sendto()``: hand one datagram to IP."""
        yield from self.ip.output(sm, self.datagram(nbytes, seq), state="ip_push_pending_frames")

    def receive(self, sm, pkt: Packet):
        cpu = self.cpu
        csum = cpu.cycles("csum", pkt.length) if self.sw_csum else 0.0
        if csum and cpu.memory is not None:  # the sum reads the datagram from memory
            csum = cpu.stall(csum, pkt.length)
        yield cpu.spend(sm, "udp_rcv", stack=cpu.cycles("rx_packet"), copy=csum)
        charge = self.charge(pkt.payload)
        if self._full(charge):
            self.drops["udp_rcvbuf"] += 1
            return
        self.rcv_bytes += charge
        self.rcvq.put_now(pkt.payload, sm)

    def _full(self, charge: int) -> bool:
        """The receive buffer turns away a datagram charged ``charge`` bytes (Linux's
        rule: only once what is already charged exceeds it)."""
        return (self.rcv_bytes + charge if self.fixed else self.rcv_bytes) > self.rmem

    def _receive_pool(self, sm, pkt: Packet):
        """``udp_rcv`` of a polled endpoint: copy into the user-mapped pool, free the
        kernel buffer, queue the packet (dropped when the pool is full)."""
        cpu = self.cpu
        charge = self.charge(pkt.payload)
        full = self._full(charge)
        copy = 0.0 if full else cpu.cycles("copy_recv", pkt.payload)
        if self.sw_csum:
            copy += cpu.cycles("csum", pkt.length)
        if copy and cpu.memory is not None:
            copy = cpu.stall(copy, 2 * pkt.payload)
        yield cpu.spend(
            sm,
            "udp_rcv",
            stack=cpu.cycles("rx_packet"),
            copy=copy,
            buffer=cpu.cycles("skb_free"),
        )
        if full:
            self.drops["udp_rcvbuf"] += 1
            return
        self.rcv_bytes += charge
        self.rcvq.put_now(pkt, sm)
