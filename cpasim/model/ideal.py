"""The ideal host (``host.detail = "ideal"``): what ns-3 keeps of a host, and no more.

An ideal host runs the application, its socket buffers, TCP with its timers, IP and
the device queue (``qdisc``) exactly as a full host does, with the same state machines
and queues, so that a run is analysed, predicted and swept the same way.  What it does
not have is the hardware and the kernel's cost of driving it:

* no CPU: every cost is 0 cycles and takes no time, and there are no cores to wait
  for (:class:`IdealCpu`); a state that burns cycles on a full host is still entered
  (``tcp_write_xmit``, ``TcpRecvMsg: copy``), for no time;
* no NIC, driver, descriptor rings, I/O bus, DMA, interrupts or memory: a packet goes
  on the link the moment the link's ``MAC`` takes it from the ``qdisc``, and a frame
  that arrives is handed to ``IP Recv`` at once (:class:`IdealDevice`).  With no NIC
  there is no offload either: TCP builds MSS-sized segments whatever ``nic.tso`` says,
  as ns-3's TCP does.

The keys of the missing parts (:data:`cpasim.model.detail.ABSENT`) change nothing on
an ideal host; ``cpasim predict`` refuses a what-if on them.  Two settings need the
parts an ideal host lacks, and a configuration that asks for them is refused
(:mod:`cpasim.config.resolve`): Linux 2.6.13's UDP send path (``ip.send_path``, which runs the
driver's transmit in the sender) and the copy engine (``copy_engine.enabled``).

Why and when the two levels agree is in docs/detail-levels.md; whether a full run's
host mattered, so that an ideal one would have been wrong, is
:func:`cpasim.model.detail.ideal_would_differ`.
"""

from __future__ import annotations

import dataclasses

from simpy.events import Event

from cpasim.config.params import CpuCostParams
from cpasim.model.detail import is_ideal
from cpasim.model.host import Host
from cpasim.tracing import TracedStore
from cpasim.tracing.primitives import _UntracedStore

#: Zero cycles for every CPU cost, for code that reads ``cpu.cost.<name>`` itself.
NO_COSTS = CpuCostParams(**{f.name: 0.0 for f in dataclasses.fields(CpuCostParams)})


class _NoCores:
    """The cores of an ideal CPU: nobody ever waits for one."""

    __slots__ = ()
    get_queue = ()


class IdealCpu:
    """A host CPU that costs nothing: the interface of :class:`~cpasim.model.cpu.Cpu`
    that the stack and the applications use, with no cores to take and work that
    takes no time.

    Work returns an event that has already happened: a process that yields it goes
    on at once, with no SimPy event scheduled (zero-time work would cost one each)."""

    memory = None  # no memory model: copies never stall
    cache = None
    irq_preempt = False
    cores = _NoCores()
    cost = NO_COSTS

    def __init__(self, env) -> None:
        self.env = env
        done = Event(env)
        done._ok, done._value, done.callbacks = True, None, None  # processed
        self._done = done

    def softirq(self) -> IdealCpu:
        return self

    def take(self, sm):
        return ()  # ``yield from`` it: a core is always there, without waiting

    def release(self, sm) -> None:
        pass

    def cycles(self, name: str, nbytes: int = 0) -> float:
        return 0.0

    def cycles_of(self, name: str) -> float:
        return 0.0

    # The categories as parameters (cpasim.model.cpu.CATEGORIES), not ``**cycles``: no
    # dict made per call for cycles that are never looked at.
    def spend(
        self,
        sm,
        state: str,
        *,
        copy=0.0,
        stack=0.0,
        driver=0.0,
        interrupt=0.0,
        buffer=0.0,
        user=0.0,
    ):
        sm.begin(state)  # the state exists; it lasts no time
        return self._done

    def work(self, category: str, cycles: float):
        return self._done

    def interruptible(self) -> None:
        pass

    def start_measuring(self, since: float, until: float = float("inf")) -> None:
        pass

    def block(self, sm, event):
        """Generator: wait for ``event`` (no core to give up or take again)."""
        return (yield event)

    def put(self, sm, queue, item):
        """Put ``item`` into a store, waiting while it is full; returns what to ``yield
        from`` (nothing when there is room)."""
        if len(queue.items) < queue.capacity:
            queue.put_now(item, sm)
            return ()
        return self.block(sm, queue.put(item, sm))


class _Qdisc:
    """What an ideal host's ``qdisc`` adds to a store: a packet put into it while the
    link's MAC is idle goes to the MAC in the put (:class:`~cpasim.model.link.QdiscMac`).
    A put that waits for room is served when the MAC takes a packet: it is busy then."""

    mac = None  # the QdiscMac it feeds

    def put_now(self, item, sm=None) -> None:
        super().put_now(item, sm)
        if self.mac.idle:
            self.mac.put()


class _TracedQdisc(_Qdisc, TracedStore):
    pass


class _UntracedQdisc(_TracedQdisc, _UntracedStore):  # a _TracedQdisc: __init__ runs
    pass


_TracedQdisc._untraced = _UntracedQdisc
_UntracedQdisc._untraced = _UntracedQdisc


class IdealDevice:
    """The device of an ideal host: its ``qdisc`` feeds the link's ``MAC`` directly,
    and a frame from the link goes up the stack in the event it arrives in.

    ``IP Recv`` takes it from the ``RX backlog`` and delivers it at once, as ns-3's
    stack does on a device's receive: the ``RX backlog`` is there for the records (the
    carrier's ``enq``, ``IP Recv``'s ``deq``), so that the dependence graph links the
    arrival to its processing as on a full host.  Only a delivery that must wait (an
    ACK for a full ``qdisc``) goes on in a process of its own, and what arrives
    meanwhile queues behind it, in order."""

    tso = False  # no NIC to segment for TCP
    csum_offload = True  # no checksum work: there is no CPU to charge it to
    rx_out = None  # nothing for IP's receive loop: the device hands packets up itself

    def __init__(self, env, sys: str, tracer, *, qdisc, port, inst: str = "0") -> None:
        self.env = env
        self.qdisc = _TracedQdisc(env, tracer, sys, "qdisc", inst, capacity=qdisc.len)
        self.backlog = TracedStore(env, tracer, sys, "RX backlog", inst)
        self.qid = self.backlog.qid
        self.traced = tracer.enabled  # untraced, no record is written: none is made
        self.ip = None  # the IpLayer packets go up to (bind)
        self.sm = None
        self.busy = False  # a delivery waits (in a process of its own)
        self.qdisc.mac = port.attach_qdisc(self.qdisc, self)

    def bind(self, ip) -> None:
        """Hand received packets to ``ip`` (the host's :class:`IpLayer`), whose ``IP
        Recv`` starts out waiting for the first."""
        self.ip, self.sm = ip, ip.sm
        self._wait()

    def _wait(self) -> None:
        self.sm.begin("Wait")
        self.sm.wait_empty(self.qid, 1)

    def arrive(self, frame, sm) -> None:
        """A frame from the wire, offered by carrier ``sm``."""
        if self.busy:  # behind a delivery that waits
            self.backlog.put_now(frame, sm)
            return
        if self.traced:
            # The records of a put into the empty backlog and IP Recv's take, without
            # moving the frame through it.
            sm.enq(self.qid, 1)
            self.sm.deq(self.qid, 1)
            if self._deliver(frame):
                self._wait()
        else:
            self._deliver(frame)

    def _deliver(self, pkt) -> bool:
        """Deliver ``pkt`` now; False when the delivery has to wait, and goes on in a
        process of its own.

        IP's delivery runs until it is done or yields an event that has not happened
        yet.  The events it yields that have happened are an :class:`IdealCpu`'s work,
        whose value is None: the delivery goes on at once, as SimPy would resume it
        (iterating passes it the None, and ends without a StopIteration raised)."""
        delivery = self.ip.deliver(self.sm, pkt)
        for event in delivery:
            if event.callbacks is not None:
                self.busy = True
                self.env.process(self._finish(delivery, event))
                return False
        return True

    def _drain(self) -> None:
        """Deliver what queued behind a delivery that waited, in order, until the
        backlog is empty or another has to wait."""
        backlog, sm = self.backlog, self.sm
        while backlog.items:
            (pkt,) = backlog.take_now(1, sm)
            if not self._deliver(pkt):
                return
        self._wait()

    def _finish(self, delivery, event):
        """Process: the rest of a delivery that waits for ``event``, then the backlog."""
        value = yield event
        while True:
            try:
                event = delivery.send(value)
            except StopIteration:
                break
            value = yield event
        self.busy = False
        self._drain()


class IdealHost(Host):
    """A :class:`~cpasim.model.host.Host` with an :class:`IdealCpu` and an
    :class:`IdealDevice`: no memory, bus or copy engine."""

    def __init__(self, env, sys: str, cfg, tracer, port) -> None:
        super().__init__(env, sys, cfg, tracer, port)
        self.dev.bind(self.ip)

    def _hardware(self, port) -> None:
        self.cpu = IdealCpu(self.env)
        self.memory = None
        self.dev = IdealDevice(self.env, self.sys, self.tracer, qdisc=self.hc.qdisc, port=port)
        self.bus = None
        self.devices = ()
        self.engine = None

    def _device_drops(self) -> dict[str, int]:
        return {}  # nothing of the device drops: no FIFO, no ring


def make_host(env, sys: str, cfg, tracer, port) -> Host:
    """End host ``sys`` at the level of detail its ``host.detail`` asks for."""
    cls = IdealHost if is_ideal(cfg, sys) else Host
    return cls(env, sys, cfg, tracer, port)
