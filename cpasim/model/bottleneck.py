"""A bottleneck between the hosts: a router's drop-tail queue and a shaper.

What ns-3 users build with a queue on a slow point-to-point link, or Linux
users with ``tc qdisc add ... tbf`` on a router: frames are queued, then
serialized at ``bottleneck.rate`` counting ``IP packet + bottleneck.overhead``
bytes each (38: Ethernet on the wire; 14: a Linux qdisc on veth, which sees
the MAC header; 0: a shaper that counts IP bytes).  Padding of frames below
Ethernet's 64-byte minimum is not counted.

Where it sits.  At the receiving end of the link, in the direction ``sys`` →
peer: the frame leaves the sender's MAC, propagates ``link.delay``, enters
the bottleneck (store and forward), and is offered to the receiver's NIC the
moment its serialization ends (the router's port to the receiver adds no
delay of its own).  So the whole ``link.delay`` lies before the bottleneck,
and the round trip is the link's.  ``bottleneck.rate`` shapes tx → rx (data),
``bottleneck.reverse_rate`` rx → tx (ACKs), with the same queue, overhead and
AQM settings; each is off at 0, and off means no object and no event: the
hosts are wired back to back as without this module.

With ``bottleneck.burst = 0`` the shaper is a strict rate server, as ns-3's
point-to-point device: every packet is serialized at ``bottleneck.rate``.
With a burst it is Linux's tbf (``sch_tbf.c``): tokens (bytes) accrue at
``bottleneck.rate`` up to ``bottleneck.burst``; a packet leaves as soon as
the bucket holds its size, at once when it already does (tbf on veth sends
at memory speed), so after an idle spell up to ``burst`` bytes pass without
waiting.  ``serialize`` then lasts only the wait for tokens.

``Bottleneck`` (``path:Bottleneck:<dir>``, ``dir`` = ``tx_to_rx`` or ``rx_to_tx``)
    ``Wait`` — blocked on its empty ``Bottleneck queue`` (with fq_codel, on
    its ``Bottleneck wake-up`` queue: :mod:`cpasim.model.fq_codel`);
    ``serialize`` — one packet at ``bottleneck.rate``; at the end it is
    offered to the receiving NIC (``RX FIFO``), and the next one is taken.

``Bottleneck queue`` (``path:Bottleneck queue:<dir>``, in packets; with
fq_codel one per connection, ``<dir>:<conn>``)
    A carrier that ends its propagation enqueues the frame; it is dropped
    instead (reason ``bottleneck_queue_full``) when the queue's bytes (as the
    shaper counts them, the packet in serialization not included) would exceed
    ``bottleneck.queue``.  Dropping instead of blocking means no credit bounds
    the queue in the trace: growing it cannot be predicted from a trace.

With ``bottleneck.aqm = "codel"`` the head of the queue is dropped (reason
``aqm``) by CoDel (:mod:`cpasim.model.codel`: RFC 8289, as Linux's sch_codel,
target 5 ms, interval 100 ms, control law interval / sqrt(count)).  With
``"fq_codel"`` each connection has a CoDel queue of its own, served by
deficit round robin (:mod:`cpasim.model.fq_codel`: RFC 8290, as Linux's
sch_fq_codel); a full queue then drops from the flow with the most bytes.

Like the link's carriers, the bottleneck is driven by one timeout callback
per packet, not by a process of its own.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from cpasim.model.codel import CoDel
from cpasim.model.fq_codel import FqCoDel
from cpasim.tracing import TracedStore

#: Drop reasons the bottleneck counts (added to the run's drops only when it exists).
DROP_REASONS = ("bottleneck_queue_full", "aqm")

#: The ``sys`` of the bottleneck's state machines and queues: neither host.
SYS = "path"


@dataclass
class BottleneckStats:
    """One bottleneck, counted from the start of the run."""

    busy_ns: float = 0.0  # serializing
    bytes: int = 0  # bytes as the shaper counts them
    packets: int = 0  # serialized (not dropped)
    max_backlog: int = 0  # most bytes queued at once
    sojourn_ns: float = 0.0  # summed over the packets serialized: queued until taken
    drops: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DROP_REASONS, 0))


class Bottleneck:
    """Queue and shaper for frames sent by host ``sys`` (see the module docstring).

    ``params`` is the ``bottleneck`` section; ``rate`` the rate of this direction.  It
    inserts itself into ``link`` (:meth:`~cpasim.model.link.Link.insert`).
    """

    def __init__(self, env, *, params, rate: float, link, sys: str, tracer):
        port = link.port(sys)
        self.env = env
        self.rate = rate
        self.overhead = params.overhead
        self.limit = params.queue
        self.burst = params.burst  # 0: strict rate server
        self.tokens = float(params.burst)  # bytes in the bucket at time self.tokens_ns
        self.tokens_ns = 0.0
        self.out = link.port(port.peer)  # delivers to its receiver
        self.name = f"{sys}_to_{port.peer}"
        self.src = sys  # the host whose frames it queues
        self.on_drop = None  # called as on_drop(frame, reason) (set by the system)
        self.qsys = SYS
        self.sm = tracer.sm(SYS, "Bottleneck", self.name)
        self.stats = BottleneckStats()
        # The measured interval (set by the system): busy time outside it is left out.
        self.measure_from = 0.0
        self.measure_until = float("inf")
        packet = link.mtu + params.overhead
        self.fq = None
        if params.aqm == "fq_codel":
            # Packets wait in per-flow queues; the FIFO's methods are not used.
            self.fq = FqCoDel(self, tracer, packet)
            self.arrive = self._arrive_fq
            self.queue = self.fq.wake  # what the idle bottleneck waits on
        else:
            self.queue = TracedStore(env, tracer, SYS, "Bottleneck queue", self.name, owner=self.sm)
        self.backlog = 0  # bytes queued in the FIFO, as the shaper counts them
        self.codel = CoDel(packet) if params.aqm == "codel" else None
        # The receiving port waits on these, as on the link's carriers (Port.next_arrival).
        self.in_flight: deque[Bottleneck] = deque()
        self._sent = None
        self.arrival = None  # the timeout that ends the serialization
        self.frame = None  # in serialization
        self._done = self.done  # bound once: a callback per packet
        self.sm.begin("Wait")
        self.sm.wait_empty(self.queue.qid, 1)
        link.insert(self, sys)

    def arrive(self, frame, carrier) -> None:
        """A frame at the end of its propagation, offered by ``carrier``'s SM."""
        size = frame.length + self.overhead
        stats = self.stats
        if self.backlog + size > self.limit:
            self.lose(frame, "bottleneck_queue_full")
            return
        self.backlog += size
        if self.backlog > stats.max_backlog:
            stats.max_backlog = self.backlog
        self.queue.put_now((self.env._now, frame), carrier)
        if self.frame is None:
            self._next()

    def _arrive_fq(self, frame, carrier) -> None:
        """:meth:`arrive` under fq_codel: the flows queue, drop and wake the bottleneck."""
        fq = self.fq
        fq.enqueue(frame, frame.length + self.overhead, carrier, self.env._now)
        stats = self.stats
        if fq.backlog > stats.max_backlog:
            stats.max_backlog = fq.backlog
        if self.frame is None:
            fq.wake.put_now(None, carrier)
            fq.wake.take_now(1, self.sm)
            self._next()

    def take(self):
        """The head ``(enqueued_ns, frame)`` of the queue (a ``deq``), or None."""
        if not self.queue.items:
            return None
        item = self.queue.take_now(1, self.sm)[0]
        self.backlog -= item[1].length + self.overhead
        return item

    def drop(self, item, reason: str) -> None:
        self.lose(item[1], reason)

    def lose(self, frame, reason: str) -> None:
        """Count ``frame`` dropped for ``reason`` (and tell ``on_drop``, if set)."""
        self.stats.drops[reason] += 1
        if self.on_drop is not None:
            self.on_drop(frame, reason)

    def _next(self) -> None:
        """Serialize the next packet, or wait for one."""
        sm = self.sm
        if self.fq is not None:
            item = self.fq.dequeue(self.env._now)
        elif self.codel is not None:
            item = self.codel.dequeue(self, self.env._now)
        else:
            item = self.take()
        if item is None:
            self.frame = None
            sm.begin("Wait")
            sm.wait_empty(self.queue.qid, 1)
            return
        frame = self.frame = item[1]
        sm.begin("serialize")
        size = frame.length + self.overhead
        ns = size * 8e9 / self.rate if not self.burst else self._wait_for_tokens(size)
        stats = self.stats
        now = self.env._now
        if now >= self.measure_from and now + ns <= self.measure_until:
            stats.busy_ns += ns
        else:  # across an end of the measured interval: only the part inside it
            stats.busy_ns += max(
                0.0, min(now + ns, self.measure_until) - max(now, self.measure_from)
            )
        stats.bytes += size
        stats.packets += 1
        stats.sojourn_ns += self.env._now - item[0]
        self.arrival = self.env.timeout(ns)
        self.arrival.callbacks.append(self._done)
        self.in_flight.append(self)
        if self._sent is not None:
            self._sent.succeed()
            self._sent = None

    def _wait_for_tokens(self, size: int) -> float:
        """tbf: ns until the bucket holds ``size`` bytes (0 if it does), which it spends."""
        now = self.env._now
        tokens = min(self.burst, self.tokens + (now - self.tokens_ns) * self.rate / 8e9)
        if tokens >= size:
            self.tokens, self.tokens_ns = tokens - size, now
            return 0.0
        ns = (size - tokens) * 8e9 / self.rate
        self.tokens, self.tokens_ns = 0.0, now + ns
        return ns

    def done(self, _event) -> None:
        frame = self.frame
        self.in_flight.popleft()
        self.out.receiver.arrive(frame, self.sm)
        self._next()


def build(env, *, params, link, tracer) -> list[Bottleneck]:
    """The bottlenecks the ``bottleneck`` section ``params`` asks for, inserted into
    ``link``; none (and so no object, no event) when both rates are 0."""
    return [
        Bottleneck(env, params=params, rate=rate, link=link, sys=sys, tracer=tracer)
        for sys, rate in (("tx", params.rate), ("rx", params.reverse_rate))
        if rate
    ]
