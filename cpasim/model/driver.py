"""The NIC driver: transmit, interrupt handler, NAPI poll; and the rings it
shares with the NIC in host memory.

State machines (``sys`` = the host); each holds a CPU core only while working:

``Driver TX``
    ``idle`` — for a packet in the ``qdisc``;
    ``ring full`` — for a free TX descriptor (``TX free desc``, ``nic.tx_ring``
    credits, returned by NAPI's clean-up);
    ``xmit`` — takes a core, writes one descriptor per packet (``cpu.cost.descriptor``,
    category ``driver``) for up to ``driver.tx_batch`` queued packets that have
    descriptors, and rings the doorbell: one MMIO write of the ring tail, the
    core stalling ``pcie.mmio_latency``; the descriptors are then visible to
    the NIC (``TX ring``).  On M5's bus (``bus.kind = "m5"``) the core stalls
    instead for the tail write's round trip through the bridge, where it waits
    behind the DMA traffic queued there: ``mmio write``
    (:meth:`cpasim.model.m5bus.M5Bus.cpu_write`).

    Under Linux 2.6.13's UDP send path (``ip.send_path = "2.6.13"``,
    :mod:`cpasim.model.ip_send`) the driver is that kernel's e1000: it writes
    the ring tail once per frame (``e1000_xmit_frame``; no batching of tail
    writes in 2.6.13) and does ``cpu.cost.xmit_frame`` of work per frame besides
    the descriptor, and a sender that finds the qdisc idle and a descriptor
    free runs the transmit itself (``dev_queue_xmit`` → ``qdisc_run``): it puts
    the frame into the ``qdisc`` and waits in its ``qdisc_restart`` state while
    ``Driver TX`` posts it on the sender's core (``xmit``, without taking a
    core: the sender holds one) and returns (``Driver TX return``).  With the
    ring full (``netif_stop_queue``) or ``Driver TX`` holding a frame (the queue
    being run elsewhere: ``__LINK_STATE_QDISC_RUNNING``) the frame stays in the
    ``qdisc`` and ``Driver TX`` posts it on a core of its own once it can, as
    ``net_tx_action`` restarts the queue after the clean-up, one tail write per
    frame.

``ISR``
    ``idle`` — for an interrupt (``IRQ``);
    ``interrupt`` — takes a core, acknowledges (``cpu.cost.interrupt``, category
    ``interrupt``) and calls NAPI (a ``link``: the softirq runs on interrupt
    exit on the same core); waits until NAPI returns.  Under Linux 2.6.13's send
    path a sender leaving ``dev_queue_xmit`` while the handler waits for a core
    hands it its own (:meth:`Driver.run_softirq`): handler and NAPI run on the
    sender's core (``run``), NAPI polls without giving it up between rounds and
    hands it back to the sender at the end.  With ``cpu.irq_preempt`` the
    handler does not wait while the sender does interruptible work (its
    allocation, copy, fragmenting, netfilter): it takes the core from the middle
    of it (:meth:`Cpu.preempt`) the same way, and the work resumes when NAPI
    hands the core back.

``NAPI``
    ``poll`` — takes up to ``driver.napi_budget`` completed packets from the
    ``RX ring`` (``cpu.cost.descriptor`` each, plus the RX doorbell's MMIO stall:
    category ``driver``), allocates as many new buffers (``cpu.cost.skb_alloc``)
    and frees up to ``driver.tx_clean_batch`` sent packets whose descriptors the
    NIC wrote back (``TX done``, ``cpu.cost.skb_free``; both category
    ``buffer``); then hands the packets up in order (``RX backlog``, the stack's
    input), posts the new buffers (``RX free desc``) and returns the TX
    descriptors (``TX free desc``); on M5's bus the RX doorbell then waits for the
    bus as the TX's does (``mmio write``);
    repeats while the budget is used up or completions are left (giving the
    core to whoever queues for it in between), then re-enables the interrupt,
    gives the core back and returns to the ISR (``link``), waiting for the next call.

ISR and NAPI alternate strictly (the interrupt stays masked while NAPI runs),
so one SimPy process runs both, each under its own state-machine name.
"""

from __future__ import annotations

from collections import deque

from cpasim.tracing import TracedContainer, TracedStore


class Rings:
    """Host-memory structures shared by driver and NIC.

    ``tx_free`` (descriptors the driver may use) → ``tx_ring`` + ``tx_pkts``
    (posted, visible to the NIC after the doorbell) → NIC → ``tx_done`` (written
    back, to be cleaned) → ``tx_free``.  ``rx_free`` (empty buffers posted) →
    NIC → ``rx_ring`` (filled, written back) → NAPI → refill → ``rx_free``.
    Descriptor credits never carry connection ids.
    """

    def __init__(self, env, sys: str, tracer, *, params, inst: str = "0"):
        """``params``: the host's ``nic`` section (the rings' sizes); ``inst``: the
        interface's instance."""

        # Free descriptors are credit queues (declared unbounded, initial resize to the
        # ring size), so capacity(+k) on them means k more ring entries.
        def credits(name: str, init: int) -> TracedContainer:
            return TracedContainer(env, tracer, sys, name, inst, init=init, conn_flow=False)

        self.tx_free = credits("TX free desc", params.tx_ring)
        self.tx_ring = credits("TX ring", 0)
        self.tx_pkts: deque = deque()  # the packets behind tx_ring's descriptors, in order
        self.tx_done = credits("TX done", 0)
        self.rx_free = credits("RX free desc", params.rx_ring)
        self.rx_ring = TracedStore(env, tracer, sys, "RX ring", inst)
        #: Called with the driver's SM after each doorbell, when the NIC reacts to the
        #: tail write itself (M5's IGbE fetches descriptors on it); None = it does not.
        self.doorbell = None


class Driver:
    """The driver's state machines for one NIC (see the module docstring)."""

    def __init__(
        self,
        env,
        sys: str,
        tracer,
        *,
        params,
        mmio_latency,
        cpu,
        bus,
        rings,
        irq,
        qdisc,
        rx_out,
        stats,
        inst: str = "0",
    ):
        """``params``: the host's ``driver`` section; ``mmio_latency``: the core's stall per
        doorbell (``pcie.mmio_latency``); costs come from ``cpu``; ``inst``: the
        interface's instance."""
        self.env = env
        self.cpu = cpu
        self.bus = bus
        self.rings = rings
        self.irq = irq
        self.qdisc = qdisc
        self.rx_out = rx_out
        self.stats = stats
        self.tx_batch = params.tx_batch
        self.budget = params.napi_budget
        self.clean_batch = params.tx_clean_batch
        self.c_desc = cpu.cycles("descriptor")
        self.c_post = self.c_desc  # per frame posted (2.6.13's adds e1000_xmit_frame's own)
        self.c_irq = cpu.cycles("interrupt")
        self.c_alloc = cpu.cycles("skb_alloc")
        self.c_free = cpu.cycles("skb_free")
        # A posted write's fixed stall; where writes queue (M5's bus) the stall is the
        # write's own round trip through the bridge (cpu_write) instead.
        self.c_mmio = 0.0 if bus.queues_writes else mmio_latency / cpu.ns_per_cycle
        self.busy = False  # Driver TX holds a packet it has not posted yet
        self.tx_sm = tracer.sm(sys, "Driver TX", inst)
        self._tracer, self._name = tracer, (sys, inst)
        #: Linux 2.6.13's transmit (:meth:`serve_calls`): the returns to the senders
        #: that run the qdisc themselves; None: the driver posts after them, batched.
        self.returns: TracedStore | None = None
        self._caller = None  # (event, SM) of the sender waiting for its frame's post
        # Linux 2.6.13's softirq on the sender's core: the interrupt handler's pending
        # request for a core, and the (SM, event) of the sender that hands it one
        self._isr_waits = None
        self._softirq = None
        self.isr_sm = tracer.sm(sys, "ISR", inst)
        self.napi_sm = tracer.sm(sys, "NAPI", inst)
        env.process(self._xmit())
        env.process(self._interrupts())

    def serve_calls(self) -> None:
        """Transmit as Linux 2.6.13's e1000 driver (see the module docstring); called
        while the host is built, before the run starts."""
        sys, inst = self._name
        self.returns = TracedStore(self.env, self._tracer, sys, "Driver TX return", inst)
        self.c_post = self.c_desc + self.cpu.cycles("xmit_frame")
        if self.cpu.irq_preempt:
            self.cpu.on_work = self._preempt_waiting

    def idle(self) -> bool:
        """Whether a sender may run the qdisc itself now: ``Driver TX`` waits for a
        frame (the queue is empty and nobody runs it) and a descriptor is free (the
        queue is not stopped)."""
        return bool(self.qdisc.get_queue) and self.rings.tx_free.level >= 1

    def call(self, sm, pkt):
        """The sender ``sm``, holding a core and having found the driver :meth:`idle`,
        hands ``pkt`` over through the ``qdisc``; returns the event of its post, after
        which the sender takes its unit of ``Driver TX return``."""
        done = self.env.event()
        self._caller = (done, sm)
        self.qdisc.put_now(pkt, sm)
        return done

    def _xmit(self):
        sm, q, rings, cpu = self.tx_sm, self.qdisc, self.rings, self.cpu
        free = rings.tx_free
        sm.begin("idle")
        while True:
            first = q.take_now(1, sm)[0] if q.items else (yield q.get(sm))
            self.busy = True  # a packet taken and not posted: whoever posts waits behind
            caller, self._caller = self._caller, None
            if caller is not None:
                # Linux 2.6.13: the sender's qdisc_restart → e1000_xmit_frame, on the
                # sender's core; it saw a free descriptor.
                done, sender = caller
                sm.run_on(sender)
                free.grab(1, sm)
                sm.begin("xmit")
                yield from self.post(sm, cpu, [first])
                sm.run_on(sm)
                self.returns.put_now(None, sm)
                done.succeed()
                self.busy = False
                sm.begin("idle")
                continue
            if not free.grab(1, sm):
                sm.begin("ring full")
                yield free.get(1, sm)
            sm.begin("xmit")
            yield from self.cpu.take(sm)
            # Whatever queued meanwhile and has a descriptor goes with this doorbell.
            more = min(len(q.items), int(free.level), self.tx_batch - 1)
            batch = [first, *q.take_now(more, sm)]
            free.grab(more, sm)
            if self.returns is None:
                yield from self.post(sm, cpu, batch)
            else:
                # 2.6.13's net_tx_action: each frame its own descriptor and tail write.
                for i, pkt in enumerate(batch):
                    if i and self.bus.queues_writes:
                        sm.begin("xmit")  # the next frame, after the tail write's wait
                    yield from self.post(sm, cpu, [pkt])
            self.busy = False
            cpu.release(sm)
            sm.begin("idle")

    def post(self, sm, cpu, batch):
        """Generator: ``sm``, holding a core of ``cpu`` and the descriptors' credits,
        writes ``batch``'s descriptors and rings the doorbell, in one stretch of work;
        the packets are then the NIC's (``TX ring``)."""
        bus = self.bus
        bus.mmio_write()
        yield cpu.work("driver", self.c_post * len(batch) + self.c_mmio)
        if bus.queues_writes:  # the tail write waits for the bus (M5's bridge)
            yield from bus.cpu_write(sm, cpu)
        rings = self.rings
        rings.tx_pkts.extend(batch)
        rings.tx_ring.give(len(batch), sm)
        if rings.doorbell is not None:
            rings.doorbell(sm)

    def _interrupts(self):
        isr, napi, line = self.isr_sm, self.napi_sm, self.irq.line
        cpu, rings, stats = self.cpu.softirq(), self.rings, self.stats
        isr.begin("idle")
        while True:
            if line.items:
                line.take_now(1, isr)
            else:
                yield line.get(isr)
            isr.begin("interrupt")
            if self.returns is None:
                yield from cpu.take(isr)
                lent = None
            else:
                lent = yield from self._core_for_isr(cpu, isr)
            yield cpu.work("interrupt", self.c_irq)
            isr.begin("idle")
            isr.link(napi)
            if lent is not None:
                isr.run_on(isr)
                napi.run_on(lent[0])
            while True:
                stats.napi_polls += 1
                pkts = rings.rx_ring.take_now(self.budget, napi)
                cleaned = rings.tx_done.grab(self.clean_batch, napi)
                if pkts or cleaned:
                    if pkts:
                        self.bus.mmio_write()  # RX tail doorbell for the refilled buffers
                    n = len(pkts)
                    yield cpu.spend(
                        napi,
                        "poll",
                        driver=self.c_desc * n + (self.c_mmio if n else 0.0),
                        buffer=self.c_alloc * n + self.c_free * cleaned,
                    )
                    if pkts and self.bus.queues_writes:  # the RX doorbell, as the TX's
                        yield from self.bus.cpu_write(napi, cpu)
                        napi.begin("poll")
                    for pkt in pkts:
                        self.rx_out.put_now(pkt, napi)
                    if n:
                        rings.rx_free.give(n, napi)
                    if cleaned:
                        rings.tx_free.give(cleaned, napi)
                if len(pkts) < self.budget and not rings.tx_done.level:
                    break
                if lent is not None:
                    continue  # a softirq keeps the core it runs on until it is done
                # More work: let whoever waits for a core go first.
                cpu.release(napi)
                yield from cpu.take(napi)
            if lent is None:
                cpu.release(napi)
            else:
                # Back to the sender that ran the softirq, which goes on on its core.
                sender, done = lent
                napi.run_on(napi)
                cpu.cores.hand_over(napi, sender)
                done.succeed()
            self.irq.enable(napi)
            napi.link(isr)

    def _core_for_isr(self, cpu, isr):
        """Generator (Linux 2.6.13, :meth:`serve_calls`): a core of ``cpu`` for the
        interrupt handler, from the pool or, while it waits for one, from a sender that
        runs the pending softirq on leaving ``dev_queue_xmit`` (:meth:`run_softirq`);
        returns that sender's ``(SM, event)``, or None."""
        cores = cpu.cores
        if cores.acquire_now(isr):
            return None
        if cpu.working:  # cpu.irq_preempt: the sender's system call is interrupted
            work = cpu.working[0]
            lent = self._lend(cpu, work.sm, cpu.preempt(work))
        else:
            self._isr_waits = cores.acquire(isr)
            yield self._isr_waits
            self._isr_waits = None
            lent, self._softirq = self._softirq, None
        if lent is not None:
            isr.run_on(lent[0])
        return lent

    def _lend(self, cpu, sm, back, request=None):
        """``sm`` hands the core it runs on to the interrupt handler, serving the
        handler's pending ``request`` if it waits for one; returns the ``(SM, event)``
        NAPI hands the core back to and succeeds when done."""
        cpu.cores.hand_over(sm, self.isr_sm, request)
        return sm, back

    def _preempt_waiting(self, work) -> None:
        """``cpu.on_work``: interruptible ``work`` starts; an interrupt handler waiting
        for a core of its CPU's pool takes it at once."""
        cpu = self.cpu
        if self.softirq_pending(cpu):
            self._softirq = self._lend(cpu, work.sm, cpu.preempt(work), self._isr_waits)

    def softirq_pending(self, cpu) -> bool:
        """Whether the interrupt handler waits for a core of ``cpu``'s pool: the NET_RX
        softirq Linux 2.6.13 ran on leaving ``dev_queue_xmit`` (``local_bh_enable`` →
        ``do_softirq``) on the sender's core, if pending."""
        waits = self._isr_waits
        return waits is not None and waits.resource is cpu.cores

    def run_softirq(self, sm, cpu):
        """The sender ``sm``, holding a core of ``cpu`` and finding :meth:`softirq_pending`,
        hands it to the interrupt handler, which runs with NAPI on it; returns the event
        of NAPI handing it back, after which ``sm`` goes on (its ``do_softirq``)."""
        done = self.env.event()
        self._softirq = self._lend(cpu, sm, done, self._isr_waits)
        return done
