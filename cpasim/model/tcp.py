"""One end of a TCP connection: the transmit engine, ACK and data processing, timers.

The connection is assumed established at t = 0 (no handshake is modelled; each
side starts knowing the other's receive window).  Protocol rules live in
:mod:`cpasim.model.tcp_rules`; this module wires them to queues and SMs.

State machines (instance = connection index):

``TcpSend``
    The transmit engine (``tcp_write_xmit``).  ``Wait`` for unsent bytes in the
    ``Send queue`` (put there by the application's ``write()``) — waits there too
    while Nagle holds a small segment, or (classic sender with ``nic.tso``) while
    2.6.18's TSO deferral holds a send head the window cannot take whole, until an
    ACK or a timeout re-decides — then for credits of the ``Send window``
    (min(cwnd, peer's window) − bytes in flight), then a core;
    ``tcp_write_xmit`` takes as many whole segments as the window allows (up to
    64 KiB), builds them (MSS segments, or one TSO super-segment with
    ``nic.tso``), each with the current ACK and window, and hands them to IP
    (``nf_hook``, ``dev_queue_xmit``).  With an algorithm that needs pacing
    (BBR) and no ``fq`` qdisc, TCP paces itself (``tcp_internal_pacing``): it
    waits in ``pace`` until the pacing clock lets the next packet go, one
    packet of ``tcp_tso_autosize`` segments per pass.
``DelAck Timer``
    ``Idle`` until armed through ``DelAck arm``; ``armed`` for
    ``tcp.delack_timeout``; then ``tcp_send_ack`` if the ACK is still owed.
``RTO Timer``
    ``Idle`` until armed through ``RTO arm``; ``armed`` until the retransmission
    deadline (restarted by every ACK of new data; the timer wakes at least every
    ``tcp.rto_min`` to notice a later deadline and sleeps on); on expiry the window
    collapses and ``tcp_retransmit_skb`` resends the oldest segment.  Linux's
    sender with SACK also runs RACK's reordering timer (``tcp_rack_reo_timeout``:
    mark overdue segments lost, enter Recovery, resend) and the tail loss probe
    (``tcp_send_loss_probe``: resend the last segment) on it; armed sooner than
    the timer sleeps, these wake it at their deadline.

Incoming segments are processed by the host's ``IP Recv`` SM calling
:meth:`TcpConnection.receive` (state ``tcp_v4_rcv`` for data, ``tcp_ack`` for
pure ACKs, whose cost includes any ACK or retransmission sent in reply): the
ACK frees ``Send buffer`` space and opens the ``Send window``, fast retransmit
resends from there, data goes to the ``Receive buffer`` and an ACK goes out at
once (every second full segment, out-of-order data) or the delayed-ACK timer
is armed.  The app's ``read()`` may send a window update (``tcp_send_ack``).

Socket buffers follow :mod:`cpasim.model.sockbuf` (Linux's rules, or cpasim's
fixed ``tcp.wmem``/``tcp.rmem``): the window offered is computed there, and under
Linux's rules the receive buffer grows once per RTT on reads and the send buffer
with cwnd on ACKs unless ``tcp.rcvbuf``/``tcp.sndbuf`` lock them.

Queues per connection: ``Send buffer`` (free bytes of the send buffer; the
writer takes, ACKs give back, autotuning gives more), ``Send queue`` (byte
chunks from ``write()``), ``Send window`` (credits; resized down on loss or a
shrinking window),
``Receive buffer`` (in-order bytes for ``read()``), ``DelAck arm``, ``RTO arm``.
"""

from __future__ import annotations

import functools
from collections import deque

from cpasim.model import cc
from cpasim.model.environment import timer, wake_sooner
from cpasim.model.main_memory import send_touch
from cpasim.model.packet import ACK, PSH, Packet
from cpasim.model.sockbuf import SocketBuffers
from cpasim.model.tcp_linux import TIMER_REO, TIMER_RTO, TIMER_TLP, LinuxSender
from cpasim.model.tcp_rules import Receiver, RenoSender
from cpasim.protocol import (
    TCP_SACK_BASE,
    TCP_SACK_PERBLOCK,
    mss_for,
    sack_blocks_max,
    tcp_header,
)
from cpasim.tracing import TracedContainer, TracedStore

#: A TSO super-segment carries at most this many IP bytes (Linux: 64 KiB).
TSO_MAX_BYTES = 65535
#: Linux 2.6.18's ``tcp_tso_should_defer``: a window of this many bytes is a full TSO
#: frame's worth, and a deferred send goes once a ``sysctl_tcp_tso_win_divisor``'th
#: (default 3) of min(cwnd, peer's window) is free.
TSO_DEFER_FULL = 65536
TSO_WIN_DIVISOR = 3
#: What a retransmission sent by Linux's retransmission timer answers, by the timer
#: armed (cpasim.model.losses): the RTO, a tail loss probe, RACK's reordering timer.
TIMER_TRIGGER = {TIMER_RTO: "timeout", TIMER_TLP: "probe", TIMER_REO: "fast"}


@functools.cache
def _segmenting(mtu: int, timestamps: bool, tso: bool) -> tuple[int, int, int, int, int]:
    """A connection's header bytes, MSS, the most bytes one ``tcp_write_xmit`` pass
    sends (``burst``), the most one packet carries (``maxseg``) and the MSS its peer
    announces (the MSS option carries no timestamp allowance).  The same number
    objects for every connection alike: with many connections, each one's own copies
    would be as many more cache lines to miss."""
    hdr = tcp_header(timestamps)
    mss = mss_for(mtu, timestamps)
    burst = max(mss, (TSO_MAX_BYTES - hdr) // mss * mss)
    return hdr, mss, burst, burst if tso else mss, mss_for(mtu, False)


class TcpConnection:
    """One host's end of connection ``c<idx>``; ``params`` is the host's ``tcp``
    section, ``tso`` and ``csum_offload`` what its NIC offloads, ``ip`` its IP layer."""

    # Slots, as LinuxSender's: with many connections every segment meets a cold one.
    # The dictionary holds what is attached later (the socket lock's backlog).
    __slots__ = (
        "__dict__",
        "env",
        "sys",
        "conn",
        "cpu",
        "ip",
        "params",
        "sender",
        "receiver",
        "bufs",
        "linux",
        "linux_rcv",
        "paced",
        "mss",
        "hdr",
        "burst",
        "maxseg",
        "nagle",
        "tso_defer",
        "sack_max",
        "sw_csum",
        "send_touch",
        "grow_sndbuf",
        "delack_timeout",
        "c_rx_packet",
        "c_tx_packet",
        "c_ack",
        "send_sm",
        "delack_sm",
        "rto_sm",
        "sndbuf",
        "sendq",
        "window",
        "rcvbuf",
        "delack_q",
        "rto_q",
        "sndbuf_size",
        "wake_bytes",
        "unsent",
        "snd_in_copy",
        "nospace",
        "bytes_queued",
        "nagle_hold",
        "tso_deferred",
        "small_end",
        "_win_ev",
        "_win_n",
        "_grabbed",
        "rcv_in_copy",
        "netdma",
        "push_ends",
        "announced_edge",
        "delack_deadline",
        "rto_deadline",
        "_delack_running",
        "_rto_running",
        "_rto_asleep",
        "_rto_wake",
        "_rto_proc",
        "bytes_acked",
        "notify",
        "losses",
        "rtt_log",
    )

    def __init__(
        self,
        env,
        sys,
        idx,
        *,
        params,
        tso,
        csum_offload,
        mtu,
        peer_window,
        tracer,
        cpu,
        ip,
        peer_sack=True,
        seed=0,
    ) -> None:
        self.env = env
        self.sys = sys
        self.conn = f"c{idx}"
        self.cpu = cpu
        # The receive path's costs per packet, looked up once: it runs for every segment.
        self.c_rx_packet = cpu.cycles_of("rx_packet")
        self.c_tx_packet = cpu.cycles_of("tx_packet")
        self.c_ack = cpu.cycles_of("ack")
        self.ip = ip
        self.params = tp = params
        self.hdr, mss, self.burst, self.maxseg, peer_mss = _segmenting(mtu, tp.timestamps, tso)
        self.mss = mss
        self.nagle = tp.nagle
        self.bufs = bufs = SocketBuffers(tp, mss, peer_mss)
        self.linux_rcv = not bufs.fixed_rcv  # window and buffer follow the data
        self.grow_sndbuf = not bufs.snd_locked  # send-buffer autotuning
        self.sndbuf_size = bufs.sndbuf  # free + unacked + in copy
        self.delack_timeout = tp.delack_timeout
        self.sw_csum = not csum_offload
        self.send_touch = send_touch(self.sw_csum, tp.csum_copy)
        # SACK is used only when both ends permit it (negotiated on the SYNs).
        sack = tp.sack and peer_sack
        # The classic RFC sender when the algorithm has one and neither SACK nor
        # pacing is on, Linux's otherwise.
        self.linux = sack or not cc.ALGORITHMS[tp.cc].classic or tp.pacing == "on"
        if self.linux:
            self.sender = LinuxSender(
                mss=mss,
                init_cwnd=tp.init_cwnd,
                rwnd=peer_window,
                ca=cc.make(tp.cc, seed),
                sack=sack,
                recovery=tp.recovery,
                rto_min_ns=tp.rto_min,
                reordering=tp.dupack_threshold,
                paced=tp.pacing == "on",
            )
        else:
            self.sender = RenoSender(
                mss=mss,
                init_cwnd=tp.init_cwnd,
                rwnd=peer_window,
                cc=tp.cc,
                rto_min_ns=tp.rto_min,
                dupack_threshold=tp.dupack_threshold,
            )
        self.paced = self.linux and self.sender.needs_pacing
        # The classic sender with TSO defers as 2.6.18 does (tcp_tso_should_defer).
        self.tso_defer = tso and not self.linux
        self.sack_max = sack_blocks_max(tp.timestamps) if sack else 0
        self.receiver = Receiver(mss=mss, delayed_ack=tp.delayed_ack, sack=sack)

        inst = str(idx)
        self.send_sm = tracer.sm(sys, "TcpSend", inst)
        self.delack_sm = tracer.sm(sys, "DelAck Timer", inst)
        self.rto_sm = tracer.sm(sys, "RTO Timer", inst)
        q = (env, tracer, sys)
        # Free send-buffer bytes are a credit queue: declared unbounded with an
        # initial resize, so capacity(+k) on it means k more bytes of send buffer
        # (which is also how autotuning grows it).
        self.sndbuf = TracedContainer(
            *q, "Send buffer", inst, init=self.sndbuf_size, owner=self.send_sm
        )
        self.sendq = TracedStore(*q, "Send queue", inst, owner=self.send_sm)
        self.window = TracedContainer(
            *q, "Send window", inst, init=self.sender.usable(), owner=self.send_sm
        )
        self.rcvbuf = TracedContainer(*q, "Receive buffer", inst, owner=self.send_sm)
        self.delack_q = TracedStore(*q, "DelAck arm", inst, owner=self.delack_sm)
        self.rto_q = TracedStore(*q, "RTO arm", inst, owner=self.rto_sm)
        # A writer blocked on a full send buffer wakes when a third of it is free.
        self.wake_bytes = max(1, self.sndbuf_size // 3)

        self.unsent = 0  # bytes TcpSend took from the send queue, not yet segmented
        self.snd_in_copy = 0  # send-buffer bytes a write() is copying in
        self.nospace = False  # a write() found the send buffer full (SOCK_NOSPACE)
        self.bytes_queued = 0  # bytes the application handed over, in all
        self.nagle_hold = False
        self.tso_deferred = False  # TcpSend waits for an ACK to open more of the window
        self.small_end = 0  # end sequence of the last sub-MSS segment sent (Minshall)
        self._win_ev = None  # a Send window get that may have taken credits already
        self._win_n = 0
        # Credits grabbed while TcpSend still waits for a core (Linux sender only: the
        # classic path keeps its results, which count such credits twice on an ACK).
        self._grabbed = 0
        self.rcv_in_copy = 0  # bytes taken by read() and still being copied
        self.netdma = None  # with a copy engine: cpasim.model.netdma.NetDma
        # Stream offsets where write()s ended: the segment holding one carries PSH.
        self.push_ends: deque[int] = deque()
        self.announced_edge = bufs.syn_window  # right edge of the last advertised window
        self.delack_deadline: float | None = None
        self.rto_deadline: float | None = None
        self._delack_running = False
        self._rto_running = False
        self._rto_asleep = False  # the RTO Timer sleeps in "armed" until _rto_wake
        self._rto_wake = 0.0
        self.bytes_acked = 0
        # Called as notify(sm) when data arrives or send-buffer space frees
        # (an event-loop server's epoll); None for blocking applications.
        self.notify = None
        # The run's LossLog (cpasim.model.losses): told the trigger of every
        # retransmission, it counts its cause.
        self.losses = None
        # A list to note (time, RTT sample, srtt) of every RTT sample in (a flow's
        # results: cpasim.model.flows); None: not noted.
        self.rtt_log = None

        env.process(self._send_loop())
        env.process(self._delack_loop())
        self._rto_proc = env.process(self._rto_loop())

    # -- the application side ------------------------------------------------------
    # Bytes a write() or read() is copying belong to neither queue meanwhile; only
    # these methods move them, so that at every instant
    #   free send buffer + snd_in_copy + queued or unacked = sndbuf_size, and
    #   bytes read = rcv_nxt - Receive buffer - rcv_in_copy (- netdma.got, the bytes
    #   copied early for a read() not yet returned).
    def copy_in(self, sm, nbytes: int, taken: int = 0) -> int:
        """A write() takes ``nbytes`` of free send buffer (``taken`` of them taken
        already, by a blocking get) to copy into; returns the bytes taken."""
        if nbytes > taken:
            self.sndbuf.grab(nbytes - taken, sm)
        self.snd_in_copy += nbytes
        return nbytes

    def queue_data(self, sm, nbytes: int) -> None:
        """``nbytes`` of a write()'s copy are in the send buffer: hand them to TcpSend now."""
        self.snd_in_copy -= nbytes
        self.bytes_queued += nbytes
        self.sendq.put_now(nbytes, sm)

    def mark_push(self) -> None:
        """A write() ends here: tcp_push marks the segment holding its last byte PSH."""
        self.push_ends.append(self.bytes_queued)

    def send_head_free(self) -> bool:
        """Would a buffer queued now be the send head, with room in the window for
        its first segment?  (Nothing handed to TcpSend waits unsent.)"""
        return self.unsent == 0 and not self.sendq.items and self.window.level >= self.mss

    def copy_out(self, sm, nbytes: int, taken: int = 0) -> int:
        """A read() takes up to ``nbytes`` from the receive buffer (``taken`` of them
        taken already, by a blocking get) to copy them out; returns the bytes taken."""
        got = taken + self.rcvbuf.grab(nbytes - taken, sm)
        self.rcv_in_copy += got
        return got

    def copied_out(self, nbytes: int) -> None:
        """A read()'s copy of ``nbytes`` is done: Linux's receive-buffer autotuning step."""
        self.rcv_in_copy -= nbytes
        self.after_read()

    def receive_window(self) -> int:
        """The window the buffer rules offer, never shrinking the right edge already
        advertised."""
        r = self.receiver
        held = int(self.rcvbuf.level) + self.rcv_in_copy
        if r.ofo:
            held += r.ofo_bytes
        free = self.bufs.window(held)
        edge = self.announced_edge - r.rcv_nxt  # what is left of the window advertised
        win = free if free >= edge else edge
        return win if win > 0 else 0

    def end_state(self) -> dict:
        """Where this end stands when the run stops: its windows, what it has in
        flight and its retransmission timer (what :mod:`cpasim.verdict` reads to say
        which window binds, or why a connection stalled)."""
        s = self.sender
        return {
            "conn": self.conn,
            "flight": int(s.flight),
            "unsent": max(0, int(self.bytes_queued - s.snd_nxt)),
            "cwnd": int(s.cwnd),
            # Linux's sender grows cwnd in slow start up to twice what it has out
            # (tcp_is_cwnd_limited), whatever else holds the flow.
            "slow_start": self.linux and s.tp.in_slow_start(),
            "peer_window": int(s.snd_wnd),
            "sndbuf": int(self.sndbuf_size),
            "sndbuf_free": int(self.sndbuf.level),
            "rcv_unread": int(self.rcvbuf.level) + self.rcv_in_copy,
            "rcv_window": int(self.receive_window()),
            "rcvbuf": int(self.bufs.rmem if self.bufs.fixed_rcv else self.bufs.rcvbuf),
            "timer_ns": self.rto_deadline,
            "timer": getattr(s, "pending", "rto") if self.rto_deadline is not None else None,
            "rto_ns": float(s.rto_ns),
            "backoff": int(s.backoff),
            "retransmits": int(s.retransmits),
        }

    def after_read(self) -> None:
        """A read() copied data out: Linux's receive-buffer autotuning step."""
        if self.linux_rcv:
            copied_seq = self.receiver.rcv_nxt - int(self.rcvbuf.level) - self.rcv_in_copy
            self.bufs.on_read(copied_seq, self.env._now)

    def window_update_due(self) -> bool:
        """After a read: is a window update worth an ACK of its own?

        As Linux's ``tcp_cleanup_rbuf``: when the advertised window left is at most
        half the buffer and the window now offered is at least twice that."""
        left = self.announced_edge - self.receiver.rcv_nxt
        if left < 0:
            left = 0
        if 2 * left > self.bufs.window_clamp:
            return False
        new = self.receive_window()
        return new >= 2 * left and new > left

    # -- the socket lock -------------------------------------------------------------
    # Linux holds the socket lock through tcp_recvmsg (except while it sleeps for
    # data); a segment arriving meanwhile goes to the socket's backlog and is
    # processed by the reader when it releases the lock.  The model needs this only
    # where a read() waits without copying (for a copy engine's completions): a
    # copying reader holds the core anyway.  So it is added on request, and a
    # connection without it pays nothing.
    def add_socket_lock(self, env, tracer, sys: str) -> None:
        """Give this connection Linux's socket lock and backlog (``Socket backlog``)."""
        self.owned = False
        self.backlog = TracedStore(env, tracer, sys, "Socket backlog", self.conn[1:])
        process = self.receive

        def receive(sm, pkt):
            if self.owned:  # sk_add_backlog: the lock owner will process it
                self.backlog.put_now(pkt, sm)
                return ()
            return process(sm, pkt)

        self._process = process
        self.receive = receive

    def lock(self) -> None:
        """lock_sock: segments arriving from now on wait in the backlog."""
        self.owned = True

    def release(self, sm):
        """Generator run by the lock owner holding a core (release_sock): process the
        backlog in order, then give the lock up."""
        backlog = self.backlog
        while backlog.items:
            (pkt,) = backlog.take_now(1, sm)
            yield from self._process(sm, pkt)
        self.owned = False

    def send_window_update(self, sm):
        """Generator run by ``read()`` (holding a core): ACK with the new window."""
        yield from self._send_ack(sm)

    # -- TcpSend ---------------------------------------------------------------------
    def _send_loop(self):
        sm, cpu, sender, mss = self.send_sm, self.cpu, self.sender, self.mss
        sm.identify(self.conn)
        core = False
        while True:
            if self.unsent == 0 or self.nagle_hold or self.tso_deferred:
                if core:
                    cpu.release(sm)
                    core = False
                if self.linux and self.unsent == 0:
                    sender.check_app_limited(0)
                sm.begin("Wait")
                self.unsent += yield self.sendq.get(sm)
                for n in self.sendq.take_now(len(self.sendq.items), sm):
                    self.unsent += n
                self.nagle_hold = self.tso_deferred = False
                continue
            seg = min(self.unsent, self.maxseg)
            if seg < mss and self.nagle and self.small_end > sender.snd_una:
                self.nagle_hold = True  # the ACK of the earlier small segment wakes us
                continue
            if self.tso_defer and seg > mss and self._tso_should_defer():
                self.tso_deferred = True  # the next ACK (or timeout) wakes us
                continue
            if self.paced:
                # tcp_pacing_check: the next packet leaves when the pacing clock says.
                wait = sender.next_send_ns() - self.env._now
                if wait > 0:
                    if core:
                        cpu.release(sm)
                        core = False
                    sm.begin("pace")
                    yield self.env.timeout(wait)
                    continue
            maxseg = self.maxseg
            if self.linux and maxseg > mss:  # tcp_tso_autosize: ~1 ms of data per packet
                maxseg = min(maxseg, sender.tso_segs() * mss)
            # Credits of the send window: as many whole segments as are free (up to a
            # burst; one packet when paced), at least one segment's worth.
            want = min(self.unsent, maxseg if self.paced else self.burst)
            level = int(self.window.level)
            if level >= want:
                n = want
            elif level >= mss:
                n = level // mss * mss
            else:
                n = max(1, min(want, mss, sender.window()))
            if level >= n:
                self.window.grab(n, sm)
                if self.linux:
                    self._grabbed = n
            else:
                if core:
                    cpu.release(sm)
                    core = False
                sm.begin("Wait")
                self._win_ev = self.window.get(n, sm)
                self._win_n = n
                yield self._win_ev
            if not core:
                yield from cpu.take(sm)
                core = True
            self._win_ev = None
            self._grabbed = 0
            now = self.env._now
            self.unsent -= n
            packets = []
            while n > 0:
                size = min(n, maxseg)
                seq = sender.on_send(size, now)
                if size < mss:
                    self.small_end = seq + size
                packets.append(self._segment(seq, size, now))
                n -= size
            # One pass of tcp_write_xmit for the whole burst (one cost per packet handed down).
            yield cpu.spend(sm, "tcp_write_xmit", stack=cpu.cycles("tx_packet") * len(packets))
            if self.linux:
                sender.xmit_done()
            for pkt in packets:
                yield from self.ip.output(sm, pkt)
            # tcp_event_new_data_sent arms the RTO; Linux's sender re-arms a loss probe
            # after every pass that sent data.
            if self.rto_deadline is None or (self.linux and sender.probe_armed()):
                self._restart_rto(sm)

    def _tso_should_defer(self) -> bool:
        """Linux 2.6.18's ``tcp_tso_should_defer`` for a send head of more than one
        segment: in ``TCP_CA_Open``, hold it back while the window free is less than
        a full TSO frame and less than a third of min(cwnd, peer's window), so that
        the ACK clock's openings of two segments add up to larger super-segments
        instead of leaving one by one.  No deferral timer in 2.6.18: the next ACK
        re-decides, and with nothing in flight the whole window is free."""
        sender = self.sender
        if not sender.ca_open:
            return False
        limit = int(self.window.level)  # min(send window, congestion window) left
        if limit >= TSO_DEFER_FULL:
            return False
        return limit < sender.window() // TSO_WIN_DIVISOR

    def _segment(self, seq: int, n: int, now: float, retrans: bool = False) -> Packet:
        segs = -(-n // self.mss)
        r = self.receiver
        wnd = self.receive_window()
        self.announced_edge = r.rcv_nxt + wnd
        self.bufs.rcv_wnd = wnd
        r.on_ack_sent()  # the ACK rides along
        self.delack_deadline = None
        flags = ACK
        ends = self.push_ends
        if ends and n and ends[0] <= seq + n and not retrans:
            while ends and ends[0] <= seq + n:
                ends.popleft()
            flags |= PSH
        hdr = self.hdr
        return Packet(  # conn, proto, length, payload, hdr, mss, segs, seq, ack, wnd, ...
            self.conn,
            "tcp",
            n + segs * hdr,
            n,
            hdr,
            self.mss,
            segs,
            seq,
            r.rcv_nxt,
            wnd,
            flags,
            now,  # sent_ns
            retrans,
        )

    def _sync_window(self, sm) -> None:
        """Make the Send window's level equal the credits the sender has now."""
        taken = self._win_n if self._win_ev is not None and self._win_ev.triggered else 0
        target = self.sender.usable() - (taken + self._grabbed)
        if target < 0:
            target = 0
        level = int(self.window.level)
        if target > level:
            self.window.give(target - level, sm)
        elif target < level:
            self.window.resize(target, sm)
        if self.tso_deferred:  # tcp_data_snd_check: a deferred send head is decided again
            self.tso_deferred = False
            self.sendq.put_now(0, sm)

    def _footprint(self) -> int:
        """Bytes sent since the ones an incoming ACK frees were last touched
        (``cpu.cache.ack_footprint``): the flight, less what still waits in the device
        queue, untouched since TCP handed it over."""
        queued = sum(p.payload for p in self.ip.dev.qdisc.items if p.conn == self.conn)
        return self.sender.flight - queued

    # -- incoming segments (run by IP Recv, holding a core) ------------------------------
    def receive(self, sm, pkt: Packet):
        """Process one incoming segment: its ACK, then its data.

        The protocol decisions are taken on arrival; one CPU spend then covers the
        receive path and any ACK or retransmission it sends, and their effects
        (buffer space, window, data for the app, packets) follow it."""
        cpu, sender = self.cpu, self.sender
        flight = self._footprint() if cpu.cache is not None else 0
        if self.linux:
            out = sender.on_ack(pkt.ack, pkt.wnd, self.env._now, pkt.payload > 0, pkt.sack)
            rtx = out.retransmits
        else:
            out = sender.on_ack(pkt.ack, pkt.wnd, self.env._now, pkt.payload > 0)
            rtx = () if out.retransmit is None else (out.retransmit,)
        if self.rtt_log is not None and out.rtt_ns is not None:
            self.rtt_log.append((self.env._now, out.rtt_ns, sender.srtt))
        delivered, ack_now = self.receiver.on_data(pkt.seq, pkt.payload) if pkt.payload else (0, 0)
        sends = len(rtx) + bool(ack_now)
        if pkt.payload:
            csum = cpu.cycles("csum", pkt.length) if self.sw_csum else 0.0
            if csum and cpu.memory is not None:  # the sum reads the segment from memory
                csum = cpu.stall(csum, pkt.length)
            stack = self.c_rx_packet + self.c_tx_packet * sends
            yield cpu.spend(sm, "tcp_v4_rcv", stack=stack, copy=csum)
        else:
            ack = self.c_ack
            if cpu.cache is not None:  # the acknowledged buffers may have left the cache
                ack *= cpu.cache.ack_stretch(flight)
            stack = ack + self.c_tx_packet * sends
            yield cpu.spend(sm, "tcp_ack", stack=stack)
        if out.acked:
            self.bytes_acked += out.acked
            self.sndbuf.give(out.acked, sm)
            if self.nospace and self.grow_sndbuf:
                self._new_space(sm)
            self._restart_rto(sm)
        elif self.linux and out.rearm:  # RACK armed its reordering timer
            self._restart_rto(sm)
        if self.nagle_hold and self.small_end <= sender.snd_una:
            self.nagle_hold = False
            self.sendq.put_now(0, sm)
        self._sync_window(sm)
        trigger = sender.rtx_trigger() if rtx else ""
        for seq, n in rtx:
            yield from self._retransmit(sm, seq, n, trigger, charge=False)
        if delivered:
            if self.netdma is None:
                self.rcvbuf.give(delivered, sm)
            else:  # NET_DMA: the softirq may copy them to a sleeping reader
                yield from self.netdma.deliver(sm, pkt, delivered)
        if self.linux_rcv and pkt.payload:
            r = self.receiver
            queued = int(self.rcvbuf.level) + self.rcv_in_copy + r.ofo_bytes
            self.bufs.on_data(pkt.payload, queued, r.rcv_nxt, self.env._now)
        if ack_now:
            yield from self._ack_now(sm)  # its cost is in the receive path's
        elif self.receiver.ack_pending:
            self._arm_delack(sm)
        if self.notify is not None and (out.acked or pkt.payload):
            self.notify(sm)

    def _new_space(self, sm) -> None:
        """Send-buffer autotuning (``tcp_new_space``), on an ACK after a writer found
        the buffer full: with cwnd not yet filled, the buffer grows to hold two
        windows (the growth is free room for the writer); once a writer could go
        on, the no-space mark is cleared (``sk_stream_write_space``)."""
        sender = self.sender
        if sender.flight < sender.cwnd:
            # BBR asks for three windows of buffer (bbr_sndbuf_expand), the rest for two.
            factor = sender.ca.sndbuf_expand(sender.tp) if self.linux else 2
            grow = self.bufs.expand_sndbuf(sender.cwnd // self.mss, factor=factor)
            if grow:
                self.sndbuf_size += grow
                self.wake_bytes = max(1, self.sndbuf_size // 3)
                self.sndbuf.give(grow, sm)
        if self.sndbuf.level >= self.wake_bytes:
            self.nospace = False

    def _retransmit(self, sm, seq: int, n: int, trigger: str, charge: bool = True):
        """Send the segment at ``seq`` again; ``trigger``: ``timeout``, ``fast`` or
        ``probe`` (what :class:`~cpasim.model.losses.LossLog` counts it under when no
        copy of it was lost)."""
        n = min(n, self.mss)
        now = self.env._now
        self.sender.on_retransmit(seq, now)
        if self.losses is not None:
            self.losses.resent(self.conn, self.sys, seq, n, trigger)
        if charge:
            yield self.cpu.spend(sm, "tcp_retransmit_skb", stack=self.cpu.cycles("tx_packet"))
        yield from self.ip.output(sm, self._segment(seq, n, now, retrans=True))

    def _send_ack(self, sm):
        yield self.cpu.spend(sm, "tcp_send_ack", stack=self.cpu.cycles("tx_packet"))
        yield from self._ack_now(sm)

    def _ack_now(self, sm):
        """A pure ACK, sent now (its cost charged by the caller); returns what to
        ``yield from``."""
        pkt = self._segment(self.sender.snd_nxt, 0, self.env._now)
        pkt.length = self.hdr
        pkt.segs = 1
        if self.sack_max and self.receiver.sacks:  # the SACK option rides on pure ACKs
            blocks = tuple(self.receiver.sacks[: self.sack_max])
            pkt.sack = blocks
            pkt.hdr = pkt.length = self.hdr + TCP_SACK_BASE + TCP_SACK_PERBLOCK * len(blocks)
        return self.ip.output(sm, pkt)

    # -- timers ------------------------------------------------------------------------------
    def _arm_delack(self, sm) -> None:
        if self.delack_deadline is None:
            self.delack_deadline = self.env._now + self.delack_timeout
            if not self._delack_running:
                self._delack_running = True
                self.delack_q.put_now(1, sm)

    def _delack_loop(self):
        sm, env = self.delack_sm, self.env
        cpu = self.cpu.softirq()
        sm.identify(self.conn)
        while True:
            sm.begin("Idle")
            yield self.delack_q.get(sm)
            while self.delack_deadline is not None:
                sm.begin("armed")
                yield timer(env, max(0.0, self.delack_deadline - env._now))
                due = self.delack_deadline
                if due is not None and env._now >= due:
                    self.delack_deadline = None
                    if self.receiver.ack_pending:
                        yield from cpu.take(sm)
                        yield from self._send_ack(sm)
                        cpu.release(sm)
            self._delack_running = False

    def _restart_rto(self, sm) -> None:
        if self.sender.flight == 0:
            self.rto_deadline = None
            return
        if self.linux:
            self.rto_deadline = self.sender.timer_deadline(self.env._now)
        else:
            self.rto_deadline = self.env._now + self.sender.rto_ns
        if not self._rto_running:
            self._rto_running = True
            self.rto_q.put_now(1, sm)
        elif self._rto_asleep and self.rto_deadline < self._rto_wake:
            # Armed sooner than the timer sleeps (a loss probe or RACK's reordering
            # timer after an RTO): it wakes at the new deadline instead.
            self._rto_wake = self.rto_deadline
            wake_sooner(self.env, self._rto_proc, self.rto_deadline - self.env._now)

    def _rto_loop(self):
        sm, env, sender = self.rto_sm, self.env, self.sender
        cpu = self.cpu.softirq()
        sm.identify(self.conn)
        # Sleep at most rto_min at a time: a restart moves the deadline to now + RTO
        # >= now + rto_min, so the timer wakes no later than the deadline and sleeps
        # on if it moved.  Linux's sender with SACK also arms the tail loss probe and
        # RACK's reordering timer, which may fall sooner than the timer sleeps:
        # _restart_rto then wakes it at the new deadline.  A timer that slept 2 ms at
        # a time instead cost every connection 500 wake-ups a second, whatever it sent.
        nap = sender.rto_min_ns
        while True:
            sm.begin("Idle")
            yield self.rto_q.get(sm)
            while self.rto_deadline is not None:
                sm.begin("armed")
                wait = min(max(0.0, self.rto_deadline - env._now), nap)
                self._rto_wake = env._now + wait
                self._rto_asleep = True
                yield timer(env, wait)
                self._rto_asleep = False
                due = self.rto_deadline
                if due is None or env._now < due:
                    continue
                if self.linux:
                    trigger = TIMER_TRIGGER[sender.pending]
                    segs = sender.on_timeout(env._now)
                else:
                    trigger = "timeout"
                    seg = sender.on_timeout()
                    segs = () if seg is None else (seg,)
                self._sync_window(sm)
                if segs:
                    yield from cpu.take(sm)
                    for seq, n in segs:
                        yield from self._retransmit(sm, seq, n, trigger)
                    cpu.release(sm)
                if not sender.flight:
                    self.rto_deadline = None
                elif self.linux:
                    self.rto_deadline = sender.timer_deadline(env._now)
                else:
                    self.rto_deadline = env._now + sender.rto_ns
            self._rto_running = False
