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

The shaper is a strict rate server, as ns-3's point-to-point device: a token
bucket with a burst of one packet.  A Linux tbf with a larger ``burst`` lets
that many bytes through at the link rate after an idle spell; that is not
modelled.

``Bottleneck`` (``path:Bottleneck:<dir>``, ``dir`` = ``tx_to_rx`` or ``rx_to_tx``)
    ``Wait`` — blocked on its empty ``Bottleneck queue``;
    ``serialize`` — one packet at ``bottleneck.rate``; at the end it is
    offered to the receiving NIC (``RX FIFO``), and the next one is taken.

``Bottleneck queue`` (``path:Bottleneck queue:<dir>``, in packets)
    A carrier that ends its propagation enqueues the frame; it is dropped
    instead (reason ``bottleneck_queue_full``) when the queue's bytes (as the
    shaper counts them, the packet in serialization not included) would exceed
    ``bottleneck.queue``.  Dropping instead of blocking means no credit bounds
    the queue in the trace: growing it cannot be predicted from a trace.

With ``bottleneck.aqm = "codel"`` the head of the queue is dropped (reason
``aqm``) by CoDel (RFC 8289, as Linux ``codel_dequeue``): target 5 ms,
interval 100 ms, control law interval / sqrt(count), computed exactly rather
than with Linux's Newton step.  fq_codel is not offered: its scheduler waits
on whichever of its per-flow queues fills first, and a ``wait_empty`` names
one queue (``annotations.md``), so the wait could not be annotated truthfully.

Like the link's carriers, the bottleneck is driven by one timeout callback
per packet, not by a process of its own.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from cpasim.trace import TracedStore

#: Drop reasons the bottleneck counts (added to the run's drops only when it exists).
DROP_REASONS = ("bottleneck_queue_full", "aqm")

#: The ``sys`` of the bottleneck's state machines and queues: neither host.
SYS = "path"

#: CoDel's constants (RFC 8289 section 4; Linux codel_params_init), ns.
CODEL_TARGET = 5e6
CODEL_INTERVAL = 100e6


@dataclass
class BottleneckStats:
    """One bottleneck, counted from the start of the run."""

    busy_ns: float = 0.0  # serializing
    bytes: int = 0  # bytes as the shaper counts them
    packets: int = 0  # serialized (not dropped)
    max_backlog: int = 0  # most bytes queued at once
    sojourn_ns: float = 0.0  # summed over the packets serialized: queued until taken
    drops: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DROP_REASONS, 0))


class CoDel:
    """The CoDel state of one queue (RFC 8289; Linux ``struct codel_vars``).

    :meth:`dequeue` is Linux's ``codel_dequeue``: it takes packets off the
    head, dropping those the control law says to, and returns the one to send.
    """

    def __init__(self, mtu: int, target: float = CODEL_TARGET, interval: float = CODEL_INTERVAL):
        self.mtu = mtu  # a backlog of at most one packet is never reduced
        self.target = target
        self.interval = interval
        self.first_above_time = 0.0
        self.drop_next = 0.0
        self.count = 0
        self.lastcount = 0
        self.dropping = False

    def _control_law(self, t: float) -> float:
        return t + self.interval / math.sqrt(self.count)

    def _should_drop(self, item, backlog: int, now: float) -> bool:
        if item is None:
            self.first_above_time = 0.0
            return False
        if now - item[0] < self.target or backlog <= self.mtu:
            # Below target (or too little queued to matter): stay out of
            # dropping for at least an interval.
            self.first_above_time = 0.0
            return False
        if self.first_above_time == 0.0:
            self.first_above_time = now + self.interval
            return False
        return now >= self.first_above_time

    def dequeue(self, box, now: float):
        """The next ``(enqueued_ns, frame)`` of ``box`` to send, or None; drops on the way."""
        item = box.take()
        if item is None:
            self.dropping = False
            return None
        drop = self._should_drop(item, box.backlog, now)
        if self.dropping:
            if not drop:
                self.dropping = False
            else:
                while self.dropping and now >= self.drop_next:
                    self.count += 1
                    box.drop(item, "aqm")
                    item = box.take()
                    if not self._should_drop(item, box.backlog, now):
                        self.dropping = False
                    else:
                        self.drop_next = self._control_law(self.drop_next)
        elif drop:
            box.drop(item, "aqm")
            item = box.take()
            self._should_drop(item, box.backlog, now)
            self.dropping = True
            # Re-entering soon after leaving: resume near the old drop rate.
            delta = self.count - self.lastcount
            if delta > 1 and now - self.drop_next < 16 * self.interval:
                self.count = delta
            else:
                self.count = 1
            self.lastcount = self.count
            self.drop_next = self._control_law(now)
        return item


class Bottleneck:
    """Queue and shaper for frames sent by host ``sys`` (see the module docstring).

    ``cfg`` is ``cfg.bottleneck``; ``rate`` the rate of this direction.  It
    inserts itself into ``link`` (:meth:`~cpasim.model.link.Link.insert`).
    """

    def __init__(self, env, cfg, rate: float, link, sys: str, tracer):
        port = link.port(sys)
        self.env = env
        self.rate = rate
        self.overhead = cfg.overhead
        self.limit = cfg.queue
        self.out = link.port(port.peer)  # delivers to its receiver
        self.name = f"{sys}_to_{port.peer}"
        self.sm = tracer.sm(SYS, "Bottleneck", self.name)
        self.queue = TracedStore(env, tracer, SYS, "Bottleneck queue", self.name, owner=self.sm)
        self.backlog = 0  # bytes queued, as the shaper counts them
        self.stats = BottleneckStats()
        self.codel = CoDel(link.mtu + cfg.overhead) if cfg.aqm == "codel" else None
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
            stats.drops["bottleneck_queue_full"] += 1
            return
        self.backlog += size
        if self.backlog > stats.max_backlog:
            stats.max_backlog = self.backlog
        self.queue.put_now((self.env._now, frame), carrier)
        if self.frame is None:
            self._next()

    def take(self):
        """The head ``(enqueued_ns, frame)`` of the queue (a ``deq``), or None."""
        if not self.queue.items:
            return None
        item = self.queue.take_now(1, self.sm)[0]
        self.backlog -= item[1].length + self.overhead
        return item

    def drop(self, item, reason: str) -> None:
        self.stats.drops[reason] += 1

    def _next(self) -> None:
        """Serialize the next packet, or wait for one."""
        sm = self.sm
        item = self.codel.dequeue(self, self.env._now) if self.codel else self.take()
        if item is None:
            self.frame = None
            sm.begin("Wait")
            sm.wait_empty(self.queue.qid, 1)
            return
        frame = self.frame = item[1]
        sm.begin("serialize")
        size = frame.length + self.overhead
        ns = size * 8e9 / self.rate
        stats = self.stats
        stats.busy_ns += ns
        stats.bytes += size
        stats.packets += 1
        stats.sojourn_ns += self.env._now - item[0]
        self.arrival = self.env.timeout(ns)
        self.arrival.callbacks.append(self._done)
        self.in_flight.append(self)
        if self._sent is not None:
            self._sent.succeed()
            self._sent = None

    def done(self, _event) -> None:
        frame = self.frame
        self.in_flight.popleft()
        self.out.receiver.arrive(frame, self.sm)
        self._next()


def build(env, cfg, link, tracer) -> list[Bottleneck]:
    """The bottlenecks ``cfg`` (``cfg.bottleneck``) asks for, inserted into ``link``;
    none (and so no object, no event) when both rates are 0."""
    boxes = []
    if cfg.rate:
        boxes.append(Bottleneck(env, cfg, cfg.rate, link, "tx", tracer))
    if cfg.reverse_rate:
        boxes.append(Bottleneck(env, cfg, cfg.reverse_rate, link, "rx", tracer))
    return boxes
