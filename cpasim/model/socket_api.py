"""The socket system calls, run inside the calling application's state machine.

Each call is a generator the app runs with ``yield from`` while it holds a
core; it gives the core up while it blocks and takes one again afterwards.
To keep events per call low, the syscall entry, the application's own work
for the call (``user`` cycles, passed in) and the context switch after a
wake-up are spent together with the copy that follows (one timeout).  States
entered in the caller's SM:

* TCP ``write()``: ``sk_stream_wait_memory`` (blocked on the ``Send buffer``),
  ``TcpSendMsg: copy`` (syscall, user→kernel copy, software checksum without
  ``nic.csum_offload``, one buffer allocation per segment), copied a few
  segments at a time; ``preempted`` while waiting kernel work has the core
  between two of them;
* TCP ``read()``: ``sk_wait_data`` (blocked on the ``Receive buffer``),
  ``TcpRecvMsg: copy`` (kernel→user copy, freeing the buffers); it may send a
  window update (``tcp_send_ack``).  With ``copy_engine.enabled`` the copies are the
  engine's, as Linux 2.6.18's NET_DMA (:mod:`cpasim.model.netdma`): ``sk_wait_data``
  on ``Reader wake`` while the softirq copies arriving segments early,
  ``TcpRecvMsg: dma issue``, ``TcpRecvMsg: dma wait`` (and ``dma wait desc``), then
  ``TcpRecvMsg: free``; every ``write()`` marks its last segment PSH;
* UDP ``sendto()``: ``UdpSendMsg: copy``, then IP output in the caller
  (``ip_fragment``, ``nf_hook``, ``ip_push_pending_frames`` into the ``qdisc``);
  with ``ip.send_path = "2.6.13"``, ``alloc_skb``, ``do_csum_partial_copy_from_user``
  and ``ip_push_pending_frames`` as :mod:`cpasim.model.ip_send` describes;
* UDP ``recvfrom()``: ``sk_wait_data``, ``UdpRecvMsg: copy``;
* polled pick-up (``workload.receive = "poll"``, no system call): ``poll_wait``
  (nothing in the pool yet; no wake-up cost), ``dp_pickup`` (``cpu.cost.poll``,
  plus ``poll_per_byte`` per byte with ``workload.copy_out``).

Copies cost ``cpu.cost.copy`` plus ``copy_send_per_byte`` (user→kernel) or
``copy_recv_per_byte`` (kernel→user) per byte.  With ``memory.bandwidth`` set, a
copy reads and writes its bytes and a software checksum reads them through the
host's memory (:mod:`cpasim.model.main_memory`), which stretches them while the
memory is busy with others; a copy that costs no cycles is no copy (a zero-copy
path) and moves nothing through memory.  A send's software checksum is computed
in the copy (``csum_and_copy_from_user``: the bytes cross the memory twice) unless
``tcp.csum_copy`` is false, when it is a pass of its own that reads them again.
"""

from __future__ import annotations

import math

#: Segments a ``write()`` copies before it lets waiting kernel work have the core.
COPY_SEGMENTS = 4


class TcpSocket:
    """The application's handle on one :class:`~cpasim.model.tcp.TcpConnection`."""

    __slots__ = ("conn", "cpu", "c_syscall", "c_wake", "c_free")  # as TcpConnection's

    def __init__(self, conn, cpu) -> None:
        self.conn = conn
        self.cpu = cpu
        # read()'s fixed costs, looked up once: it runs for every segment a reader gets.
        self.c_syscall = cpu.cycles("syscall")
        self.c_wake = cpu.cycles("context_switch")
        self.c_free = cpu.cycles("skb_free")

    def write(self, sm, nbytes: int, *, block: bool = True, user: float = 0.0):
        """Copy ``nbytes`` into the send buffer; returns the bytes taken.

        A blocking write waits for room; a non-blocking one takes what fits now."""
        c, cpu = self.conn, self.cpu
        done = 0
        # Syscall entry and the app's own work are spent with the first copy.
        extra = cpu.cycles("syscall") + cpu.cycles("send_call") + user
        # tcp_sendmsg starts a new buffer when the tail one holds size_goal bytes:
        # one MSS without TSO, a whole super-segment with it (tcp_xmit_size_goal).
        goal, room = c.maxseg, 0
        held = 0  # bytes copied into the tail buffer, not yet handed to TCP
        while done < nbytes:
            left = nbytes - done
            free = int(c.sndbuf.level)
            if free > 0:
                n = c.copy_in(sm, min(left, free))
            elif not block:
                c.nospace = True
                break
            else:
                c.nospace = True  # SOCK_NOSPACE: the writer found no room
                n = min(left, c.wake_bytes)
                sm.begin("sk_stream_wait_memory")
                yield from cpu.block(sm, c.sndbuf.get(n, sm))
                extra += cpu.cycles("context_switch")
                c.copy_in(sm, n, taken=n)
            while n > 0:
                # Linux copies into one segment-sized buffer at a time and hands each
                # to TCP output; interrupts and softirqs preempt the copy between
                # buffers.  So a long copy never holds the core for its whole length:
                # waiting kernel work (ACK processing, NAPI, TCP output) runs in between.
                k = min(n, c.mss * COPY_SEGMENTS)
                if k <= room:
                    segs = 0
                    room -= k
                else:
                    segs = -(-(k - room) // goal)
                    room = segs * goal - (k - room)
                copy = cpu.cycles("copy_send", k)
                if c.sw_csum:
                    copy += cpu.cycles("csum", k)
                if copy and cpu.memory is not None:  # read and write each byte
                    copy = cpu.stall(copy, c.send_touch * k)
                yield cpu.spend(
                    sm,
                    "TcpSendMsg: copy",
                    stack=extra,
                    copy=copy,
                    buffer=cpu.cycles("skb_alloc") * segs,
                )
                extra = 0.0
                held += k
                done += k
                n -= k
                # Without TSO every buffer goes to TCP output as it is filled; with
                # TSO tcp_sendmsg pushes a buffer once it holds size_goal bytes, and
                # whatever it holds before it waits for room or returns.
                if goal == c.mss or room == 0 or n == 0:
                    c.queue_data(sm, held)
                    held = 0
                elif not c.linux and held >= c.mss and c.send_head_free():
                    # Linux 2.6.18's tcp_sendmsg: a tail buffer holding an MSS that is
                    # also the send head goes out at once if the window lets its first
                    # segment go (tcp_push_one: no TSO deferral), whole segments of it;
                    # the rest stays in the buffer.  Linux 6's waits for size_goal.
                    push = held // c.mss * c.mss
                    c.queue_data(sm, push)
                    held -= push
                    room = goal - held if held else 0
                if n > 0 and cpu.cores.get_queue:
                    cpu.release(sm)
                    sm.begin("preempted")  # runnable, waiting for the core: no CPU work
                    yield from cpu.take(sm)
        if done:
            c.mark_push()
        if extra:  # nothing copied (non-blocking, no room): the call still cost its entry
            yield cpu.spend(sm, "sys_write", stack=extra)
        return done

    def read(self, sm, nbytes: int, *, user: float = 0.0):
        """Wait for data, then copy up to ``nbytes`` of it out; returns the bytes read."""
        c, cpu = self.conn, self.cpu
        extra = self.c_syscall + user
        if c.netdma is not None:  # the copies are the engine's
            return (yield from c.netdma.read(sm, nbytes, extra))
        taken = 0
        if c.rcvbuf.level < 1:
            sm.begin("sk_wait_data")
            yield from cpu.block(sm, c.rcvbuf.get(1, sm))
            extra += self.c_wake
            taken = 1
        got = c.copy_out(sm, nbytes, taken)
        segs = -(-got // c.mss)
        copy = cpu.cycles("copy_recv", got)
        if copy and cpu.memory is not None:
            copy = cpu.stall(copy, 2 * got)
        yield cpu.spend(
            sm,
            "TcpRecvMsg: copy",
            stack=extra,
            copy=copy,
            buffer=self.c_free * segs,  # the copied buffers are freed
        )
        c.copied_out(got)
        if c.window_update_due():
            yield from c.send_window_update(sm)
        return got


class UdpSocket:
    """The application's handle on one :class:`~cpasim.model.udp.UdpEndpoint`."""

    def __init__(self, endpoint, cpu) -> None:
        self.ep = endpoint
        self.cpu = cpu

    def sendto(self, sm, nbytes: int, *, user: float = 0.0, seq: int | None = None):
        """Send one datagram of ``nbytes`` payload bytes (blocks while the qdisc is full);
        ``seq``: a user-level protocol's sequence number it carries."""
        ep, cpu = self.ep, self.cpu
        if ep.ip.ip_send is not None:  # Linux 2.6.13's path (cpasim.model.ip_send)
            yield from ep.ip.ip_send.sendmsg(sm, ep.datagram(nbytes), user=user)
            return
        copy = cpu.cycles("copy_send", nbytes)
        if ep.sw_csum:
            copy += cpu.cycles("csum", nbytes)
        if copy and cpu.memory is not None:
            copy = cpu.stall(copy, ep.send_touch * nbytes)
        yield cpu.spend(
            sm,
            "UdpSendMsg: copy",
            stack=cpu.cycles("syscall") + cpu.cycles("send_call") + user + cpu.cycles("udp_send"),
            copy=copy,
            buffer=cpu.cycles("skb_alloc"),
        )
        yield from ep.send(sm, nbytes, seq)

    def recvfrom(self, sm, *, user: float = 0.0):
        """Wait for one datagram and copy it out; returns its payload bytes."""
        ep, cpu = self.ep, self.cpu
        extra = cpu.cycles("syscall") + user
        if not ep.rcvq.items:
            sm.begin("sk_wait_data")
            nbytes = yield from cpu.block(sm, ep.rcvq.get(sm))
            extra += cpu.cycles("context_switch")
        else:
            (nbytes,) = ep.rcvq.take_now(1, sm)
        ep.rcv_bytes -= ep.charge(nbytes)
        copy = cpu.cycles("copy_recv", nbytes)
        if copy and cpu.memory is not None:
            copy = cpu.stall(copy, 2 * nbytes)
        yield cpu.spend(
            sm,
            "UdpRecvMsg: copy",
            stack=extra,
            copy=copy,
            buffer=cpu.cycles("skb_free"),
        )
        return nbytes

    def poll(self, sm, *, user: float = 0.0, copy_out: bool = False, deadline: float = math.inf):
        """Pick up the next datagram from the user-mapped pool (``workload.receive =
        "poll"``), copying it out with ``copy_out``; returns its
        :class:`~cpasim.model.packet.Packet`, or None if none came by ``deadline``.

        DP's receiver checks the pool in user space: no system call, no block and
        wake-up.  While the pool is empty the poller lets the kernel's receive work
        have the core (as the interrupt preempts it) and is not counted busy."""
        ep, cpu = self.ep, self.cpu
        if ep.rcvq.items:
            (pkt,) = ep.rcvq.take_now(1, sm)
        else:
            sm.begin("poll_wait")
            got = ep.rcvq.get(sm)
            if deadline == math.inf:
                pkt = yield from cpu.block(sm, got)
            else:
                env = cpu.env
                yield from cpu.block(sm, got | env.timeout(max(0.0, deadline - env._now)))
                if not got.triggered:
                    got.cancel()
                    return None
                pkt = got.value
        ep.rcv_bytes -= ep.charge(pkt.payload)
        yield cpu.spend(
            sm,
            "dp_pickup",
            user=cpu.cost.poll + user,
            copy=cpu.cost.poll_per_byte * pkt.payload if copy_out else 0.0,
        )
        return pkt

    def pending(self) -> int:
        """Datagrams waiting in the pool (a poll that finds them costs no wait)."""
        return len(self.ep.rcvq.items)
