"""Linux 2.6.18's NET_DMA: TCP's kernel→user copies handed to the host's copy engine.

With ``copy_engine.enabled`` a TCP connection's ``read()`` copies through the engine
(:mod:`cpasim.model.copy_engine`), as ``tcp_recvmsg`` and ``tcp_rcv_established`` of
Linux 2.6.18 with ``CONFIG_NET_DMA`` do:

* A reader that finds data queued copies it: one engine copy per segment
  (``TcpRecvMsg: dma issue``), the engine rung every ``copy_engine.batch`` pending
  descriptors and once more at the end of the call.
* A reader that finds none sleeps (``sk_wait_data``) installed as the connection's
  reader (``tp->ucopy``: its buffer pinned, ``ucopy.len`` the bytes it asked for).
  Meanwhile the softirq copies each segment that arrives in order, with nothing
  unread before it and room left in the reader's buffer, straight to the reader
  (``tcp_dma_try_early_copy``, a state of the softirq's SM): the segment is never
  queued, and the engine's copies run while the protocol works on the next segments.
  The softirq wakes the reader (``Reader wake``) once its buffer is full or a segment
  carries PSH (the end of a ``write()`` at the sender), or when a segment cannot be
  copied early and is queued instead; it copies early no more until the reader has run.
* Either way the reader then rings the engine for what is pending, waits for every
  copy of the call with the socket locked (``TcpRecvMsg: dma wait``; segments
  arriving meanwhile wait in the backlog), frees the buffers (``TcpRecvMsg:
  free``) and processes the backlog (``release_sock``).

Left out: the wake-up when the queued (not early-copied) bytes pass half the receive
buffer (they are none while the softirq copies early); ``tcp_dma_copybreak`` (reads of
at most 4 KiB copy on the CPU: the workloads read more).
"""

from __future__ import annotations

from cpasim.model.packet import PSH
from cpasim.tracing import TracedContainer


class NetDma:
    """One connection's NET_DMA state (``tp->ucopy``), see the module docstring."""

    def __init__(self, env, tracer, sys: str, conn, engine, cpu) -> None:
        self.conn = conn
        self.engine = engine
        self.cpu = cpu
        self.wake = TracedContainer(env, tracer, sys, "Reader wake", conn.conn[1:])
        self.done = engine.done_for(conn.conn[1:])  # this reader's completions
        self.want = 0  # ucopy.len: bytes the sleeping reader can still take early
        self.woken = True  # ucopy.wakeup: no early copy until the reader has run
        # What the softirq copied early for the current read() (bytes: until it returns).
        self.got = 0
        self.descs = 0
        self.segs = 0
        self.reads = 0  # read() calls returned
        self.early_bytes = 0  # bytes the softirq copied early, in all

    def deliver(self, sm, pkt, delivered: int):
        """Generator run by the softirq (``sm``, holding a core) for ``delivered`` new
        in-order bytes of ``pkt``: copy them early, or queue them."""
        c = self.conn
        if (
            self.want >= delivered
            and not self.woken
            and delivered == pkt.payload  # the fast path: in order, nothing out of order
            and not c.receiver.ofo_bytes
            and not c.rcvbuf.level  # copied_seq == rcv_nxt: nothing unread before it
            and not c.sw_csum  # the NIC checked the sum (CHECKSUM_UNNECESSARY)
        ):
            descs = self.engine.descriptors(delivered, c.mss, at=self.got)
            if (yield from self.engine.post_early(sm, descs, self.done)):
                self.want -= delivered
                self.got += delivered
                self.early_bytes += delivered
                self.descs += len(descs)
                self.segs += 1
                c.after_read()  # copied_seq moves on (tcp_rcv_space_adjust)
                if not self.want or pkt.flags & PSH:
                    self._wake_reader(sm)
                return
        c.rcvbuf.give(delivered, sm)
        if self.want and not self.woken:  # sk_data_ready
            self._wake_reader(sm)

    def _wake_reader(self, sm) -> None:
        self.woken = True
        self.wake.give(1, sm)

    def read(self, sm, nbytes: int, extra: float):
        """Generator: ``read()`` of up to ``nbytes`` by ``sm`` holding a core, ``extra``
        the CPU work due with it (system call, the app's own); returns the bytes read."""
        c, cpu, engine = self.conn, self.cpu, self.engine
        if c.rcvbuf.level < 1:
            # sk_wait_data, installed as the reader: the softirq copies early.
            self.want, self.woken = nbytes, False
            sm.begin("sk_wait_data")
            yield from cpu.block(sm, self.wake.get(1, sm))
            extra += cpu.cycles("context_switch")
        early, descs, segs = self.got, self.descs, self.segs
        self.want, self.woken = 0, True
        self.descs = self.segs = 0
        c.lock()  # segments arriving while the copies run wait in the backlog
        got = c.copy_out(sm, nbytes - early) if nbytes > early else 0
        queued = engine.descriptors(got, c.mss, at=early)
        extra = yield from engine.post(sm, queued, self.done, stack=extra, final=True)
        switch = yield from engine.wait_done(sm, descs + len(queued), self.done)
        # The buffers wait for their copies to be done before they are freed.
        segs += -(-got // c.mss)
        yield cpu.spend(
            sm, "TcpRecvMsg: free", stack=extra + switch, buffer=cpu.cycles("skb_free") * segs
        )
        c.copied_out(got)
        self.got = 0
        self.reads += 1
        if c.window_update_due():
            yield from c.send_window_update(sm)
        yield from c.release(sm)  # release_sock: the backlog, in order
        return early + got
