"""The applications at both ends, one module-level process function per role.

Each role is one state machine ``(host, "App", <connection index>)`` (webserver
event loops: ``("tx", "Server", <process>)``).  An app takes a core for each
call and makes its system calls (:mod:`cpasim.model.socket_api`) in the states
those name; its own work per call (``cpu.cost.user``) is spent together with
the call's copy.

* ``tcp_stream``: tx writes ``write_size`` bytes per call as fast as it can
  (until ``workload.bytes``, if set); rx reads ``read_size`` per call.
* ``udp_stream``: tx sends ``message_size`` datagrams; rx receives them.  With
  ``workload.receive = "poll"`` every UDP receiver here picks datagrams up from
  a user-mapped pool without a system call (Directed Point); the
  stream's receiver then drains the pool each time it has the core.
* ``udp_gbn``: the Directed Point paper's user-level reliable layer over polled UDP (whatever
  ``workload.receive`` says: it reads sequence numbers from the pool), Go-Back-N:
  tx sends ``message_size`` datagrams numbered in order, at most ``window``
  unacknowledged, picking up the acknowledgements between sends; after
  ``retransmit_timeout`` without progress it goes back to the oldest
  unacknowledged one.  rx accepts only the next datagram in order and
  acknowledges (a ``GBN_ACK``-byte datagram carrying the next number it expects)
  every ``ack_every`` of them, and at once on one out of order (so the last few
  of a sized run are acknowledged once the timeout has sent them again).  Each
  datagram sent or picked up costs ``cpu.cost.reliable`` of protocol work.
* ``workload.duplex`` (``udp_stream``, ``udp_gbn``): each host also runs the
  sender of a stream to the other (connection ``r<i>``), as its own process.
* ``pingpong``: tx writes ``message_size`` bytes, reads as many back, and
  records the round trip; rx echoes (:func:`request_client`, :func:`request_server`:
  also an ``rpc`` flow's, with its own sizes and think time).
* a ``ping`` flow (``[[flows]]``, :mod:`cpasim.model.flows`): :func:`pinger` sends an
  ICMP echo request every ``workload.interval`` and reads the replies as they come.
* ``rpc``: request/response over UDP: tx (the client) sends a ``request_size``
  datagram, waits for the ``response_size`` reply and records the round trip;
  rx (the server) answers each request.  One call outstanding per connection
  and no retransmission, as on a lossless LAN: a lost datagram stalls its
  connection.
* ``webserver``: rx is the client with one App per connection: it writes a
  ``request_size`` request, reads the whole response and records the request's
  completion time.  tx runs ``workload.processes`` event-loop servers
  (``epoll_wait`` on their ``epoll`` queue): a server serves one connection until
  it would block — reading a whole request, then writing the response with
  non-blocking writes until the send buffer is full — and moves on.  File sizes
  are log-uniform in [``file_size_min``, ``file_size_max``] from the run's
  generator.  The response length reaches the client with the request's answer
  (as a Content-Length header would), not as bytes of its own.

With ``workload.file_copy`` the webserver and the ``udp_stream`` source read
their data from a file in the page cache before sending it (``file read``: a
system call and a kernel→user copy through memory), as a server without
``sendfile`` or a media streamer does: one more copy per byte sent.
"""

from __future__ import annotations

import math
from collections import deque

from cpasim.model.environment import timer
from cpasim.protocol import GBN_ACK
from cpasim.tracing import TracedStore


class AppStats:
    """What the applications measured: bytes, latencies, the end of a sized run."""

    def __init__(self, env, *, warmup: float, target: int) -> None:
        self.env = env
        self.warmup = warmup
        self.target = target  # bytes the receiving side must read; 0 = no target
        self.written = 0
        self.read = 0
        self.read_measured = 0  # bytes read at or after the warm-up
        self.measured_by_conn: dict[str, int] = {}  # the same, per connection
        self.latencies: list[float] = []
        self.done = env.event()
        self.end_ns: float | None = None
        self.last_ns: float | None = None  # when the receiving side last read anything

    def delivered(self, nbytes: int, conn: str) -> None:
        self.read += nbytes
        now = self.last_ns = self.env._now
        if now >= self.warmup:
            self.read_measured += nbytes
            self.measured_by_conn[conn] = self.measured_by_conn.get(conn, 0) + nbytes
        if self.target and self.read >= self.target and not self.done.triggered:
            self.end_ns = now
            self.done.succeed()

    def latency(self, started: float) -> None:
        if started >= self.warmup:
            self.latencies.append(self.env._now - started)

    def finish(self) -> None:
        """The run's transfers are complete (every sized flow's, with [[flows]])."""
        if not self.done.triggered:
            self.end_ns = self.env._now
            self.done.succeed()

    def sent_budget(self, want: int) -> int:
        """Bytes the source may still write (all of ``want`` without a target)."""
        if not self.target:
            return want
        return max(0, min(want, self.target - self.written))


def file_read(sm, cpu, nbytes: int):
    """A ``read()`` of ``nbytes`` from a cached file into the app's buffer."""
    copy = cpu.cycles("copy_recv", nbytes)
    if copy and cpu.memory is not None:  # read and write each byte
        copy = cpu.stall(copy, 2 * nbytes)
    yield cpu.spend(sm, "file read", stack=cpu.cycles("syscall"), copy=copy)


# -- tcp_stream ------------------------------------------------------------------------------
def tcp_source(sm, cpu, sock, wl, stats, conn):
    sm.identify(conn)
    user = cpu.cycles("user")
    while True:
        n = stats.sent_budget(wl.write_size)
        if n == 0:
            return
        yield from cpu.take(sm)
        yield from sock.write(sm, n, user=user)
        cpu.release(sm)
        stats.written += n


def tcp_sink(sm, cpu, sock, wl, stats, conn):
    sm.identify(conn)
    user, size = cpu.cycles("user"), wl.read_size
    while True:
        yield from cpu.take(sm)
        n = yield from sock.read(sm, size, user=user)
        cpu.release(sm)
        stats.delivered(n, conn)


# -- udp_stream ------------------------------------------------------------------------------
def udp_source(sm, cpu, sock, wl, stats, conn):
    sm.identify(conn)
    while True:
        n = stats.sent_budget(wl.message_size)
        if n == 0:
            return
        yield from cpu.take(sm)
        if wl.file_copy:
            yield from file_read(sm, cpu, n)
        yield from sock.sendto(sm, n, user=cpu.cycles("user"))
        cpu.release(sm)
        stats.written += n


def udp_sink(sm, cpu, sock, wl, stats, conn):
    sm.identify(conn)
    while True:
        yield from cpu.take(sm)
        n = yield from sock.recvfrom(sm, user=cpu.cycles("user"))
        cpu.release(sm)
        stats.delivered(n, conn)


def poll_sink(sm, cpu, sock, wl, stats, conn):
    """udp_stream's receiver with ``workload.receive = "poll"``: a polling loop, which
    once it has the core picks up every datagram in the pool (there is no system call
    at which it would give the core up)."""
    sm.identify(conn)
    user, copy_out = cpu.cycles("user"), wl.copy_out
    while True:
        yield from cpu.take(sm)
        while True:
            pkt = yield from sock.poll(sm, user=user, copy_out=copy_out)
            stats.delivered(pkt.payload, conn)
            if not sock.pending():
                break
        cpu.release(sm)


def udp_receiver(sock, wl):
    """The UDP receive call of ``workload.receive``: a generator function returning the
    payload bytes of the next datagram."""
    if wl.receive != "poll":
        return sock.recvfrom

    copy_out = wl.copy_out

    def pick(sm, *, user: float = 0.0):
        pkt = yield from sock.poll(sm, user=user, copy_out=copy_out)
        return pkt.payload

    return pick


# -- udp_gbn ---------------------------------------------------------------------------------
def gbn_source(sm, cpu, sock, wl, stats, conn):
    sm.identify(conn)
    env = cpu.env
    reliable, rto, size = cpu.cost.reliable, wl.retransmit_timeout, wl.message_size
    base = nxt = top = 0  # oldest unacknowledged, next to send, next new one
    deadline = math.inf  # when the oldest unacknowledged is sent again

    def acked(seq: int) -> None:
        nonlocal base, deadline
        if seq > base:
            base = seq
            deadline = env._now + rto if base < nxt else math.inf

    while True:
        yield from cpu.take(sm)
        while sock.pending():  # the acknowledgements that arrived meanwhile
            ack = yield from sock.poll(sm, user=reliable)
            acked(ack.seq)
        new = stats.sent_budget(size) if nxt == top else size
        if nxt < base + wl.window and new:
            yield from sock.sendto(sm, new, user=reliable, seq=nxt)
            if nxt == top:
                stats.written += new
                top += 1
            if nxt == base:
                deadline = env._now + rto
            nxt += 1
        elif base == top:  # a sized run: everything sent was acknowledged
            cpu.release(sm)
            return
        else:  # window full: wait for an acknowledgement or the timeout
            ack = yield from sock.poll(sm, user=reliable, deadline=deadline)
            if ack is None:
                nxt = base  # go back N
                deadline = env._now + rto
            else:
                acked(ack.seq)
        cpu.release(sm)


def gbn_sink(sm, cpu, sock, wl, stats, conn):
    sm.identify(conn)
    reliable = cpu.cost.reliable
    expected = unacked = 0
    while True:
        yield from cpu.take(sm)
        pkt = yield from sock.poll(sm, user=reliable, copy_out=wl.copy_out)
        in_order = pkt.seq == expected
        if in_order:
            expected += 1
            unacked += 1
            stats.delivered(pkt.payload, conn)
        if unacked >= wl.ack_every or not in_order:
            unacked = 0
            yield from sock.sendto(sm, GBN_ACK, user=reliable, seq=expected)
        cpu.release(sm)


# -- pingpong --------------------------------------------------------------------------------
def _read_exactly(sm, sock, nbytes):
    got = 0
    while got < nbytes:
        got += yield from sock.read(sm, nbytes - got)
    return got


def ping_client(sm, cpu, sock, wl, stats, conn):
    m = wl.message_size
    return request_client(sm, cpu, sock, stats, conn, request=m, response=m)


def ping_server(sm, cpu, sock, wl, stats, conn):
    m = wl.message_size
    return request_server(sm, cpu, sock, stats, conn, request=m, response=m)


def request_client(sm, cpu, sock, stats, conn, *, request, response, think=0.0, count=False):
    """A client over TCP: write a ``request``-byte request, read the whole
    ``response``, record the round trip, pause ``think`` ns; ``count``: the response
    counts as delivered (an rpc flow's), else only the server's reads do."""
    sm.identify(conn)
    env = cpu.env
    while True:
        started = env._now
        yield from cpu.take(sm)
        yield from sock.write(sm, request, user=cpu.cycles("user"))
        stats.written += request
        yield from _read_exactly(sm, sock, response)
        cpu.release(sm)
        if count:
            stats.delivered(response, conn)
        stats.latency(started)
        if think:
            sm.begin("think")
            yield timer(env, think)  # with many rpc flows, mostly asleep: kept apart


def request_server(sm, cpu, sock, stats, conn, *, request, response):
    """The server of :func:`request_client`: read a whole request, write the response."""
    sm.identify(conn)
    while True:
        yield from cpu.take(sm)
        yield from _read_exactly(sm, sock, request)
        stats.delivered(request, conn)
        yield from sock.write(sm, response, user=cpu.cycles("user"))
        cpu.release(sm)


# -- ping flows ------------------------------------------------------------------------------
def pinger(sm, cpu, sock, interval, stats, conn):
    """``ping -i interval``: an echo request every ``interval`` ns, whatever came back.

    As ping's loop: send the request that is due, then ``poll()`` until a reply
    arrives (read it) or the next request is due, and again.  The round trip ping
    reports is the kernel's timestamps' (the reply's arrival,
    :class:`~cpasim.model.icmp.PingSocket`), not when it is read."""
    sm.identify(conn)
    env = cpu.env
    seq = 0
    due = env._now
    reply = None  # a reply poll() took off the queue
    yield from cpu.take(sm)
    while True:
        if env._now >= due:
            yield from sock.send(sm, seq, user=cpu.cycles("user"))
            seq += 1
            due += interval
        if reply is not None:
            yield from sock.recv(sm, reply)
        while sock.pending():
            yield from sock.recv(sm)
        sm.begin("poll")
        reply = yield from sock.poll(sm, due)


# -- rpc -------------------------------------------------------------------------------------
def rpc_client(sm, cpu, sock, wl, stats, conn):
    sm.identify(conn)
    env = cpu.env
    receive = udp_receiver(sock, wl)
    while True:
        started = env._now
        yield from cpu.take(sm)
        yield from sock.sendto(sm, wl.request_size, user=cpu.cycles("user"))
        stats.written += wl.request_size
        yield from receive(sm)
        cpu.release(sm)
        stats.latency(started)


def rpc_server(sm, cpu, sock, wl, stats, conn):
    sm.identify(conn)
    receive = udp_receiver(sock, wl)
    while True:
        yield from cpu.take(sm)
        n = yield from receive(sm)
        stats.delivered(n, conn)
        yield from sock.sendto(sm, wl.response_size, user=cpu.cycles("user"))
        cpu.release(sm)


# -- webserver -------------------------------------------------------------------------------
class WebServer:
    """One event-loop process serving a fixed set of connections.

    ``epoll`` holds the index of each connection that became ready: readable while
    the server waits for its request, writable (a third of the send buffer free)
    while a response is pending.
    """

    def __init__(self, env, tracer, k: int, socks: dict, wl, rng, sizes: dict) -> None:
        self.env = env
        self.sm = tracer.sm("tx", "Server", str(k))
        self.epoll = TracedStore(env, tracer, "tx", "epoll", str(k), owner=self.sm)
        self.socks = socks  # connection index -> TcpSocket
        self.wl = wl
        self.rng = rng
        self.sizes = sizes  # connection index -> deque of response lengths (to the client)
        self.want = dict.fromkeys(socks, "r")  # what each connection waits for: r / w
        self.req_got = dict.fromkeys(socks, 0)
        self.remaining = dict.fromkeys(socks, 0)
        # Bytes of the response read from its file and not yet written (file_copy).
        self.buffered = dict.fromkeys(socks, 0)
        for i, sock in socks.items():
            sock.conn.notify = self._notifier(i)

    def _notifier(self, i):
        conn = self.socks[i].conn

        def notify(sm) -> None:
            want = self.want[i]
            ready = (want == "r" and conn.rcvbuf.level > 0) or (
                want == "w" and conn.sndbuf.level >= conn.wake_bytes
            )
            if ready:
                self.want[i] = ""  # queued once until served
                self.epoll.put_now(i, sm)

        return notify

    def _file_size(self) -> int:
        lo, hi = self.wl.file_size_min, self.wl.file_size_max
        if hi <= lo:
            return lo
        return int(math.exp(self.rng.uniform(math.log(lo), math.log(hi))))

    def run(self):
        sm, wl = self.sm, self.wl
        cpu = next(iter(self.socks.values())).cpu
        while True:
            sm.begin("epoll_wait")
            i = yield self.epoll.get(sm)
            yield from cpu.take(sm)
            yield cpu.spend(sm, "epoll_wait", stack=cpu.cycles("syscall"))
            sock = self.socks[i]
            while True:  # serve connection i until it would block
                if self.remaining[i] == 0:
                    if sock.conn.rcvbuf.level < 1:
                        self.want[i] = "r"
                        break
                    need = wl.request_size - self.req_got[i]
                    self.req_got[i] += yield from sock.read(sm, need)
                    if self.req_got[i] < wl.request_size:
                        continue
                    self.req_got[i] = 0
                    size = self._file_size()
                    self.sizes[i].append(size)
                    self.remaining[i] = size
                if not wl.file_copy:
                    n = yield from sock.write(
                        sm, self.remaining[i], block=False, user=cpu.cycles("user")
                    )
                else:  # the next chunk is read from the file once the last is sent
                    if self.buffered[i] == 0:
                        chunk = min(self.remaining[i], wl.write_size)
                        yield from file_read(sm, cpu, chunk)
                        self.buffered[i] = chunk
                    n = yield from sock.write(
                        sm, self.buffered[i], block=False, user=cpu.cycles("user")
                    )
                    self.buffered[i] -= n
                self.remaining[i] -= n
                if n == 0:
                    self.want[i] = "w"
                    break
            cpu.release(sm)
            self.socks[i].conn.notify(sm)  # ready again already: queue it behind the others


def web_client(sm, cpu, sock, wl, stats, conn, sizes: deque):
    sm.identify(conn)
    env = cpu.env
    while True:
        started = env._now
        yield from cpu.take(sm)
        yield from sock.write(sm, wl.request_size, user=cpu.cycles("user"))
        got = yield from sock.read(sm, wl.read_size)
        size = sizes.popleft()
        while got < size:
            got += yield from sock.read(sm, min(wl.read_size, size - got))
        cpu.release(sm)
        stats.delivered(size, conn)
        stats.latency(started)
        if wl.think_time:
            sm.begin("think")
            yield env.timeout(wl.think_time)
