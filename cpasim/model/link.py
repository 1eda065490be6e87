"""The Ethernet link: full duplex, serialization at the MAC, propagation on the wire.

Framing is Ethernet's (:mod:`cpasim.protocol`): an IP packet of ``length``
bytes occupies :func:`~cpasim.protocol.wire_bytes` ``(length)`` byte times
(:func:`serialization_ns`: the link's period per frame, the Directed Point paper's frame time),
of which the frame has arrived after the preamble and the frame itself
(:func:`transmit_ns`: 57.6 us in Mosberger's Scout paper for 64 bytes at 10 Mb/s); the inter-frame
gap only holds the next frame back.

Each host owns one :class:`Port` (``link.port("tx")``); its NetDevice attaches
its TX FIFO and its receiver.  With ``topology.kind = "forward"`` there are two
links, tx–fw and fw–rx, and the forwarding host has a port on each: its
interface ``0`` faces tx, ``1`` faces rx, and the port's state machines take
that instance (``fw:MAC#1``, carriers ``fw:Link#1.k``).  Per port:

``MAC`` (``sys:MAC:0``)
    ``idle`` — waits on the NIC's ``TX FIFO`` (an ideal host's ``qdisc``) for a frame;
    ``transmit`` — waits out what is left of the previous frame's inter-frame
    gap, serializes the frame with its preamble at ``link.rate``, then hands it
    to a free carrier through that carrier's ``wire`` queue.

``Link`` (``sys:Link:k``, one instance per frame in flight)
    ``propagate`` — the frame travels ``link.delay``; then (unless lost with
    probability ``link.loss``) it is offered to the peer NIC's RX FIFO;
    ``idle`` — back on the free list, blocked on its empty ``wire`` queue.

A bottleneck (:mod:`cpasim.model.bottleneck`) may sit at the receiving end
of one direction (:meth:`Link.insert`): that direction's carriers then offer
their frames to it instead of the peer NIC, and the peer waits on its arrivals.

Carriers make propagation a named state (``tx:Link:propagate``) instead of
time a frame spends in a queue the receiver already waits on.  A carrier is
driven by one timeout callback instead of a process of its own (same records,
half the events); carriers are created on demand and reused in FIFO order, up
to :data:`SPARE_CARRIERS` per frame in flight.  The MAC of an ideal host's port
(:class:`QdiscMac`) is likewise driven by calls and a timeout per frame, with the
same records and timing as the process a NIC's port runs.

A packet capture (:mod:`cpasim.capture`) watches a port through :meth:`Port.tap`;
without one nothing here does any work for it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from simpy.events import NORMAL, Event

from cpasim.model.environment import Line, sleeper
from cpasim.model.nic import instance
from cpasim.protocol import IFG, PREAMBLE_SFD, frame_bytes, wire_bytes

#: Carriers kept per frame in flight.  A carrier is reused only after the
#: whole pool has been used once, so the chain that links one carrier's frames
#: in the trace never limits a what-if that speeds the sender up by less than this.
SPARE_CARRIERS = 16


def serialization_ns(length: int, rate: float) -> float:
    """The link's period per IP packet of ``length`` bytes at ``rate`` bit/s (gap included)."""
    return wire_bytes(length) * 8e9 / rate


def transmit_ns(length: int, rate: float) -> float:
    """Time from the first bit (preamble) to the last of one frame of ``length`` IP bytes."""
    return (frame_bytes(length) + PREAMBLE_SFD) * 8e9 / rate


def link_goodput(rate: float, mss: int, hdr: int) -> float:
    """Closed form: payload bit/s of back-to-back segments of ``mss`` payload bytes."""
    return rate * mss / wire_bytes(mss + hdr)


@dataclass
class DirectionStats:
    """One direction of the link, counted from the start of the run."""

    busy_ns: float = 0.0  # serializing (includes framing and gaps)
    bytes: int = 0  # wire byte times, framing included
    frames: int = 0
    lost: int = 0

    def as_dict(self) -> dict:
        return {
            "busy_ns": self.busy_ns,
            "bytes": self.bytes,
            "frames": self.frames,
            "lost": self.lost,
        }


@dataclass
class LinkStats:
    """Per direction: ``tx_to_rx`` and ``rx_to_tx`` (with a forwarding host, the four
    directions of its two links: ``tx_to_fw``, ``fw_to_tx``, ``fw_to_rx``, ``rx_to_fw``)."""

    directions: dict[str, DirectionStats] = field(default_factory=dict)

    def utilization(self, elapsed_ns: float, since: dict | None = None) -> dict[str, float]:
        """Busy share per direction over ``elapsed_ns`` (minus a :meth:`snapshot`)."""
        out = {}
        for name, d in self.directions.items():
            busy = d.busy_ns - (since[name]["busy_ns"] if since else 0.0)
            out[name] = busy / elapsed_ns if elapsed_ns > 0 else 0.0
        return out

    def snapshot(self) -> dict:
        return {name: d.as_dict() for name, d in self.directions.items()}


class Port:
    """One end of the link: the MAC of host ``sys``'s interface ``inst`` and its carriers."""

    #: What carries this port's frames; :meth:`tap` swaps in one that reports them.
    carrier_class: type[_Carrier]

    def __init__(self, link: Link, sys: str, peer: str, inst: str = "0"):
        self.link = link
        self.env = link.env
        self.sys = sys
        self.peer = peer
        self.inst = inst
        self.stats = link.stats.directions.setdefault(f"{sys}_to_{peer}", DirectionStats())
        self.mac = link.tracer.sm(sys, "MAC", inst)
        self.receiver = None  # set by attach(): has arrive(frame, sm)
        # Where frames sent from this port are offered (the peer's receiver, or a
        # bottleneck in between), and what feeds this port's receiver (the peer
        # port, or that bottleneck): see Link.insert.
        self.sink = None
        self.source: Port | None = None
        self._free: deque[_Carrier] = deque()
        self._carriers = 0
        self.in_flight: deque[_Carrier] = deque()  # oldest first: arrivals are in order
        # Their arrivals: one propagation delay after each is sent, in the order sent.
        self.arrivals = Line(self.env, link.delay)
        self._sent = None  # event for a receiver waiting on an idle line

    def attach(self, tx_fifo, receiver) -> None:
        """Connect the host's NIC: frames to send come from ``tx_fifo``; frames
        from the peer go to ``receiver.arrive(frame, carrier_sm)``."""
        self._connect(receiver)
        self.env.process(self._mac(tx_fifo))

    def attach_qdisc(self, qdisc, receiver) -> QdiscMac:
        """:meth:`attach` for an ideal host (:mod:`cpasim.model.ideal`), whose ``qdisc``
        feeds the MAC directly: the MAC is a :class:`QdiscMac`, which ``qdisc`` must
        hand a packet put into it while the MAC is idle (:meth:`QdiscMac.put`)."""
        self._connect(receiver)
        return QdiscMac(self, qdisc)

    def _connect(self, receiver) -> None:
        self.receiver = receiver
        peer = self.link.ports[self.peer]
        if peer.sink is None:  # no bottleneck inserted before this end
            peer.sink = receiver

    def tap(self, on_send, on_arrive) -> None:
        """Report every frame this port's MAC puts on the wire (``on_send(frame)``,
        as its serialization ends, before any loss) and every frame offered to its
        receiver (``on_arrive(frame)``); either may be None.  After the hosts
        attached, before the run.  Only a capture calls this: a port never tapped
        pays nothing, since carriers and receiver stay the plain ones."""
        if on_send is not None:
            self.on_send = on_send
            self.carrier_class = _TappedCarrier
        if on_arrive is not None:
            tapped = _TappedReceiver(self.receiver, on_arrive)
            # A bottleneck reads ``receiver`` at each delivery; the peer port keeps it.
            if getattr(self.source, "sink", None) is self.receiver:
                self.source.sink = tapped
            self.receiver = tapped

    def next_arrival(self):
        """Event for the receiver on this port: the next frame from the peer arrives
        (its callbacks run after the frame was offered), or, with nothing in flight,
        the peer sends one.  Waiting on the carrier's own timeout costs no event.
        The source (the peer port or a bottleneck) keeps ``in_flight`` (oldest
        first, each with its ``arrival`` event) and ``_sent``."""
        peer = self.source
        if peer.in_flight:
            return peer.in_flight[0].arrival
        if peer._sent is None:
            peer._sent = self.env.event()
        return peer._sent

    def _mac(self, fifo):
        env, sm, stats = self.env, self.mac, self.stats
        sleep = sleeper(env)
        rate = self.link.rate
        gap_ns = IFG * 8e9 / rate
        line_free = 0.0  # the end of the last frame's inter-frame gap
        sm.begin("idle")
        # Set by the system after the link was built, before this process first runs.
        since = self.link.measure_from
        while True:
            frame = fifo.take_one(sm) if fifo.items else (yield fifo.get(sm))
            sm.begin("transmit")
            # The frame has arrived once its last bit is on the wire; the gap after
            # it only keeps the next frame back (a frame sent back to back waits out
            # the rest of its predecessor's gap in this same stretch).
            arrived = frame_bytes(frame.length) + PREAMBLE_SFD  # transmit_ns's bytes
            wb = arrived + IFG  # wire_bytes
            ns = arrived * 8e9 / rate
            wait = line_free - env._now
            yield sleep(ns + wait if wait > 0 else ns)
            # The frame and its gap hold the line; the part before the warm-up's end
            # (measure_from) is left out.
            early = since - (env._now - ns)
            busy = ns + gap_ns
            stats.busy_ns += busy if early <= 0 else max(0.0, busy - early)
            stats.bytes += wb
            stats.frames += 1
            self._carrier().send(frame, sm)
            line_free = env._now + gap_ns
            sm.begin("idle")

    def _carrier(self) -> _Carrier:
        free = len(self._free)
        if free > (SPARE_CARRIERS - 1) * (self._carriers - free):  # in flight: the others
            return self._free.popleft()
        carrier = self.carrier_class(self, instance(self.inst, self._carriers))
        self._carriers += 1
        return carrier


class QdiscMac:
    """The ``MAC`` of a port fed by an ideal host's qdisc: :meth:`Port._mac`'s states,
    records and timing, driven by calls instead of a process.

    A packet put into the qdisc while the MAC is ``idle`` is handed over in the put
    (:meth:`put`), where the process would wait for its get to be served in an event
    of its own; the end of a frame's serialization is a timer's callback, which takes
    the next packet from the qdisc, if any.  A frame starts at the instant it would
    start on the process: the packet leaves the qdisc when put either way.  One timer
    event serves every frame (one frame is serialized at a time), rescheduled each."""

    __slots__ = ("port", "fifo", "env", "sm", "traced", "rate", "gap_ns", "line_free")
    __slots__ += ("frame", "bytes", "ns", "idle", "_timer", "_callbacks")

    def __init__(self, port: Port, fifo) -> None:
        self.port = port
        self.fifo = fifo
        self.env = env = port.env
        self.sm = port.mac
        self.traced = port.link.tracer.enabled  # untraced, no record is made
        self.rate = port.link.rate
        self.gap_ns = IFG * 8e9 / self.rate
        self.line_free = 0.0  # the end of the last frame's inter-frame gap
        self.frame = None  # the frame being serialized: its wire bytes and time to send
        self.bytes = 0
        self.ns = 0.0
        self.idle = True
        self._timer = timer = Event(env)  # an event that has happened, each time it is due
        timer._ok, timer._value = True, None
        self._callbacks = [self.sent]
        self.sm.begin("idle")
        self.sm.wait_empty(fifo.qid, 1)  # as the get of an idle MAC records

    def put(self) -> None:
        """A packet was put into the idle MAC's qdisc: take it and start the frame."""
        self.idle = False
        self._start(self.fifo.take_one(self.sm))

    def _start(self, frame) -> None:
        if self.traced:
            self.sm.begin("transmit")
        self.frame = frame
        # As Port._mac: the frame has arrived once its last bit is on the wire; the gap
        # after it only keeps the next frame back.
        self.bytes = arrived = frame_bytes(frame.length) + PREAMBLE_SFD  # transmit_ns's bytes
        self.ns = ns = arrived * 8e9 / self.rate
        env = self.env
        wait = self.line_free - env._now
        timer = self._timer
        timer.callbacks = self._callbacks
        env.schedule(timer, NORMAL, ns + wait if wait > 0 else ns)

    def sent(self, _event) -> None:
        """The frame's last bit is on the wire: the carrier takes it; the next one starts."""
        env, port, frame, sm, ns = self.env, self.port, self.frame, self.sm, self.ns
        # The frame and its gap hold the line; the part before the warm-up's end
        # (measure_from) is left out.
        stats = port.stats
        early = port.link.measure_from - (env._now - ns)
        busy = ns + self.gap_ns
        stats.busy_ns += busy if early <= 0 else max(0.0, busy - early)
        stats.bytes += self.bytes + IFG
        stats.frames += 1
        port._carrier().send(frame, sm)
        self.frame = None
        self.line_free = env._now + self.gap_ns
        fifo = self.fifo
        if fifo.items:
            if self.traced:
                sm.begin("idle")
            self._start(fifo.take_one(sm))
        else:
            self.idle = True
            sm.begin("idle")
            sm.wait_empty(fifo.qid, 1)


class _Carrier:
    """A frame in flight: ``sys:Link:k`` (see the module docstring)."""

    __slots__ = ("port", "sm", "wire", "traced", "frame", "arrival", "_timer", "_arrive")

    def __init__(self, port: Port, inst: str):
        tracer = port.link.tracer
        self.port = port
        self.sm = tracer.sm(port.sys, "Link", inst)
        self.wire = tracer.queue(port.sys, "wire", inst)
        tracer.declare(self.wire, self.sm, 1, True)
        self.traced = tracer.enabled  # untraced, no record is written: none is made
        self.frame = None
        self.arrival = None  # the event that ends the propagation (while in flight)
        # One frame at a time: one event, rescheduled for each (it has happened when
        # due, as a timeout has), and no timeout made and freed per frame.
        self._timer = timer = Event(port.env)
        timer._ok, timer._value = True, None
        self._arrive = self.arrive  # bound once: a callback per frame

    def send(self, frame, mac) -> None:
        if self.traced:
            mac.enq(self.wire, 1)
            self.sm.deq(self.wire, 1)
            self.sm.begin("propagate")
        self.frame = frame
        port = self.port
        self.arrival = arrival = self._timer
        arrival.callbacks = [self._arrive]  # a NIC waiting on the arrival adds its own
        port.arrivals.schedule(arrival)
        port.in_flight.append(self)
        if port._sent is not None:
            port._sent.succeed()
            port._sent = None

    def arrive(self, _event) -> None:
        port, frame, sm = self.port, self.frame, self.sm
        self.frame = self.arrival = None
        port.arrivals.advance()
        port.in_flight.popleft()
        link = port.link
        if link.loss and link.rng.random() < link.loss:
            port.stats.lost += 1
            if link.on_drop is not None:
                link.on_drop(frame, port)
        else:
            port.sink.arrive(frame, sm)
        if self.traced:
            # Idle means blocked on the own wire queue, so that idle time is never
            # mistaken for work on the critical path.
            sm.begin("idle")
            sm.wait_empty(self.wire, 1)
        port._free.append(self)


Port.carrier_class = _Carrier


class _TappedCarrier(_Carrier):
    """A carrier of a tapped port: reports each frame it is handed (:meth:`Port.tap`)."""

    __slots__ = ()

    def send(self, frame, mac) -> None:
        self.port.on_send(frame)
        _Carrier.send(self, frame, mac)


class _TappedReceiver:
    """A tapped port's receiver: reports each frame, then offers it to the NIC."""

    __slots__ = ("receiver", "on_arrive")

    def __init__(self, receiver, on_arrive) -> None:
        self.receiver = receiver
        self.on_arrive = on_arrive

    def arrive(self, frame, sm) -> None:
        self.on_arrive(frame)
        self.receiver.arrive(frame, sm)


class Link:
    """Full-duplex Ethernet between two hosts; ``params`` is the ``link`` section.

    ``on_drop(frame, port)`` (set by the system) is told of each frame lost on the
    way from ``port``.

    ``ends``: the two hosts' (name, interface instance), tx and rx by default;
    ``stats``: the counters to add this link's directions to (a forwarding
    topology's two links share one :class:`LinkStats`)."""

    def __init__(
        self,
        env,
        *,
        params,
        tracer,
        rng,
        ends: tuple[tuple[str, str], tuple[str, str]] = (("tx", "0"), ("rx", "0")),
        stats: LinkStats | None = None,
    ):
        self.env = env
        self.tracer = tracer
        self.rng = rng
        self.rate = params.rate
        self.delay = params.delay
        self.mtu = params.mtu
        self.loss = params.loss
        self.on_drop = None
        self.stats = LinkStats() if stats is None else stats
        # Busy time before this (the warm-up) is left out: a frame serialized across
        # it counts only its part after it (set by the system).
        self.measure_from = 0.0
        (a, a_inst), (b, b_inst) = ends
        self.ports = {a: Port(self, a, b, a_inst), b: Port(self, b, a, b_inst)}
        for port in self.ports.values():
            port.source = self.ports[port.peer]

    def insert(self, box, sys: str) -> None:
        """Put ``box`` between the two hosts in the direction ``sys`` sends: frames
        sent from ``sys`` are offered to ``box.arrive(frame, carrier_sm)`` at the end
        of their propagation, and the peer's receiver waits on ``box``'s arrivals
        (``box`` delivers to ``ports[peer].receiver``).  Before the hosts attach."""
        port = self.ports[sys]
        port.sink = box
        self.ports[port.peer].source = box

    def port(self, sys: str) -> Port:
        return self.ports[sys]
