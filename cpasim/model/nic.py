"""The network interface card: transmit and receive engines, FIFOs, interrupts.

Host-memory structures it shares with the driver are in
:class:`cpasim.model.driver.Rings`; bus accesses go through
:class:`cpasim.model.bus.Bus`.  State machines (``sys`` = the host):

``NIC TX``
    ``Wait`` — for descriptors the driver posted (``TX ring``, after a doorbell);
    ``DMA descriptors`` — when its descriptor cache is empty, reads up to
    ``nic.desc_fetch_batch`` of them (``nic.desc_size`` bytes each) in one read;
    with ``nic.tx_desc_cache`` > 0 it reads none itself: a fetch engine of its
    own (``TX Desc Fetch``, :mod:`cpasim.model.desc_fetch`) keeps a cache of
    that many entries filled, asked whenever the cache holds
    ``nic.tx_fetch_threshold`` unused descriptors or fewer (and, with
    ``nic.tx_fetch_request = "call"``, by the driver's doorbell), and ``Wait``
    is then for that cache (``TX desc cache``) when it ran dry;
    ``DMA packet`` — reads the frame (MAC header + IP packet; a TSO
    super-segment once, its headers replicated on the NIC);
    ``controller`` — with ``nic.tx_latency``, the controller's own time per
    packet (a slow controller such as the LANCE), one packet after the other;
    ``queue packet`` — cuts TSO super-segments into MSS frames
    (:meth:`Packet.split_tso`) and puts them into the ``TX FIFO`` (``nic.tx_fifo``
    bytes, counted in full-size frames), waiting while it is full;
    ``writeback`` — writes processed descriptors back (a batch, or whatever is
    done when the cache runs dry), which makes them visible to the driver
    (``TX done``) and reports the completions to the interrupt logic; with a
    descriptor cache and ``nic.tx_writeback`` = ``each`` or ``block`` the
    transmit engine hands each processed descriptor to a write-back engine of
    the cache's own instead (``TX Desc Writeback``,
    :mod:`cpasim.model.desc_writeback`) and goes on with the next packet.

``NIC RX``
    ``idle`` — for a frame in the ``RX FIFO`` (``nic.rx_fifo`` bytes; a frame
    arriving when it does not fit is dropped, reason ``rx_fifo``);
    ``DMA descriptors`` — when its descriptor cache is empty, reads a batch of
    the empty buffers the driver posted (``RX free desc``); with none posted the
    frame is dropped (reason ``rx_ring_full``);
    ``controller`` — with ``nic.rx_latency``, the controller's own time per
    frame before it writes the frame to memory;
    ``DMA packet`` — writes the frame (without FCS) and then its descriptor to
    host memory, which puts the packet on the ``RX ring`` for NAPI and reports
    the completion to the interrupt logic.

``IRQ Coalesce Timer`` (instances ``k``, one per countdown, driven by a
timeout callback)
    ``countdown`` — armed through its ``IRQ timer`` queue by whoever found the
    interrupt due later (``nic.coalesce_usecs``, the throttle interval of
    ``nic.itr``); at the
    deadline it raises the interrupt if it is still due (rule:
    :mod:`cpasim.model.moderation`);
    ``idle`` — back on the free list, blocked on its empty ``IRQ timer`` queue.

Throttling (``nic.itr``): ``adaptive`` (default) is e1000's dynamic interrupt
throttle rate (:class:`~cpasim.model.moderation.AdaptiveItr`): never two
interrupts closer than 14 us for sparse or small traffic, 50 us for mixed and
250 us for bulk transfers; the first interrupt after a quiet period is never
delayed, so a ping-pong keeps its latency.  ``fixed`` throttles at
``nic.throttle_usecs``; ``off`` not at all.

Interrupts go to the driver's ``ISR`` through the ``IRQ`` queue.  Checksum
offload costs the NIC nothing extra here; it only tells the stack not to
charge checksum cycles (``NetDevice.csum_offload``).
"""

from __future__ import annotations

from collections import deque

from cpasim.model.desc_fetch import TxDescFetch
from cpasim.model.desc_writeback import TxDescWriteback
from cpasim.model.environment import sleeper
from cpasim.model.moderation import ARM, FIRE, AdaptiveItr, Moderation
from cpasim.protocol import MAC_HEADER, frame_bytes
from cpasim.tracing import TracedStore


def instance(inst: str, k: int) -> str:
    """The instance of the ``k``-th of many SMs (countdowns, link carriers) of interface
    ``inst``: ``k`` on interface ``0``, ``inst.k`` on another (a forwarding host's second)."""
    return str(k) if inst == "0" else f"{inst}.{k}"


#: Countdown instances kept per running countdown, reused round the pool, so
#: that the chain linking one instance's countdowns in the trace does not hold
#: back a what-if (as with the link's carriers).
SPARE_TIMERS = 16


class InterruptUnit:
    """Interrupt moderation of one NIC and the ``IRQ`` line to the host."""

    def __init__(self, env, sys: str, tracer, *, params, stats, inst: str = "0"):
        """``params``: the host's ``nic`` section; ``inst``: the interface's instance."""
        self.env = env
        self.sys = sys
        self.inst = inst
        self.tracer = tracer
        self.stats = stats
        # Adaptive throttling re-tunes the rule's gap at the end of every NAPI session.
        self.itr = AdaptiveItr() if params.itr == "adaptive" else None
        gap = self.itr.gap if self.itr is not None else params.throttle_usecs
        self.rule = Moderation(params.coalesce_frames, params.coalesce_usecs, gap)
        self.line = TracedStore(env, tracer, sys, "IRQ", inst)
        self._free: deque[_Timer] = deque()
        self._timers = 0

    def completions(self, n: int, sm, nbytes: int = 0, *, rx: bool = True, packets: int = 0):
        """``sm`` (a NIC engine) completed ``n`` descriptors: ``packets`` frames (default
        ``n``) of ``nbytes`` bytes in all, received (``rx``) or sent."""
        itr = self.itr
        if itr is not None:
            if rx:
                itr.rx_packets += packets or n
                itr.rx_bytes += nbytes
            else:
                itr.tx_packets += packets or n
                itr.tx_bytes += nbytes
        self.act(self.rule.completions(n, self.env._now), sm)

    def enable(self, sm) -> None:
        """``sm`` (NAPI) re-enables the interrupt."""
        if self.itr is not None:
            self.rule.gap = self.itr.update()
        self.act(self.rule.enable(self.env._now), sm)

    def act(self, decision: str, sm) -> None:
        if decision is FIRE:
            self.stats.interrupts += 1
            self.line.put_now(self.rule.arm_id, sm)
        elif decision is ARM:
            running = self._timers - len(self._free)
            if len(self._free) > (SPARE_TIMERS - 1) * running:
                timer = self._free.popleft()
            else:
                timer = _Timer(self, instance(self.inst, self._timers))
                self._timers += 1
            timer.start(self.rule.arm_id, self.rule.deadline, sm)


class _Timer:
    """One countdown: ``sys:IRQ Coalesce Timer:k``, driven by a timeout callback."""

    __slots__ = ("unit", "sm", "queue", "arm_id", "_expire")

    def __init__(self, unit: InterruptUnit, inst: str):
        tracer = unit.tracer
        self.unit = unit
        self.sm = tracer.sm(unit.sys, "IRQ Coalesce Timer", inst)
        self.queue = tracer.queue(unit.sys, "IRQ timer", inst)
        tracer.declare(self.queue, self.sm, 1, True)
        self.arm_id = 0
        self._expire = self.expire

    def start(self, arm_id: int, deadline: float, by) -> None:
        by.enq(self.queue, 1)
        self.sm.deq(self.queue, 1)
        self.sm.begin("countdown")
        self.arm_id = arm_id
        env = self.unit.env
        env.timeout(max(0.0, deadline - env._now)).callbacks.append(self._expire)

    def expire(self, _event) -> None:
        unit, sm = self.unit, self.sm
        unit.act(unit.rule.expired(self.arm_id, unit.env._now), sm)
        sm.begin("idle")
        sm.wait_empty(self.queue, 1)
        unit._free.append(self)


class Nic:
    """Transmit and receive engines of one NIC (see the module docstring).

    ``params`` is the host's ``nic`` section; ``port`` its end of the link."""

    #: Called as ``on_drop(frame, reason)`` for each frame dropped (set by the system).
    on_drop = None

    def __init__(self, env, sys: str, tracer, *, params, bus, rings, irq, stats, port, inst="0"):
        self.env = env
        self._sleep = sleeper(env)  # the controller's latency
        self.bus = bus
        self.rings = rings
        self.irq = irq
        self.stats = stats
        self.desc_size = params.desc_size
        self.tx_latency = params.tx_latency
        self.rx_latency = params.rx_latency
        self.batch = params.desc_fetch_batch
        self.tx_fifo = TracedStore(
            env,
            tracer,
            sys,
            "TX FIFO",
            inst,
            capacity=max(1, params.tx_fifo // frame_bytes(port.link.mtu)),
        )
        self.rx_fifo = TracedStore(env, tracer, sys, "RX FIFO", inst)
        self.rx_fifo_size = params.rx_fifo
        self.rx_fifo_bytes = 0
        self.tx_cached = 0  # TX descriptors fetched and not processed yet
        self.rx_cached = 0  # RX descriptors fetched and not used yet
        self.tx_sm = tracer.sm(sys, "NIC TX", inst)
        self.rx_sm = tracer.sm(sys, "NIC RX", inst)
        self.port = port
        if params.tx_desc_cache:
            self.fetch = TxDescFetch(
                env, sys, tracer, params=params, bus=bus, rings=rings, inst=inst
            )
            if params.tx_writeback != "batch":
                self.writeback = TxDescWriteback(
                    env,
                    sys,
                    tracer,
                    params=params,
                    write_back=self._tx_writeback,
                    fetch=self.fetch,
                    inst=inst,
                )
                env.process(self._transmit_each())
            else:
                env.process(self._transmit_cached())
        else:
            self.fetch = None
            env.process(self._transmit())
        env.process(self._receive())
        port.attach(self.tx_fifo, self)

    # --- transmit ------------------------------------------------------------------

    def _transmit(self):
        sm, ring, fifo, bus = self.tx_sm, self.rings.tx_ring, self.tx_fifo, self.bus
        pkts, batch, stats = self.rings.tx_pkts, self.batch, self.stats
        tx_latency = self.tx_latency
        done = 0  # processed descriptors not written back yet
        done_segs = done_bytes = 0  # their frames and bytes (MAC header on), for the ITR
        sm.begin("Wait")
        while True:
            if not self.tx_cached:
                if done:
                    yield from self._tx_writeback(sm, done, done_segs, done_bytes)
                    done = done_segs = done_bytes = 0
                if ring.level:
                    k = ring.grab(batch, sm)
                else:
                    sm.begin("Wait")
                    yield ring.get(1, sm)
                    k = 1 + ring.grab(batch - 1, sm)
                sm.begin("DMA descriptors")
                yield from bus.dma_read(sm, k * self.desc_size)
                self.tx_cached = k
            self.tx_cached -= 1
            pkt = pkts.popleft()
            # _tx_packet, written out: this loop runs once per packet of every run.
            sm.begin("DMA packet")
            yield from bus.dma_read(sm, MAC_HEADER + pkt.hdr + pkt.payload)
            if tx_latency:
                sm.begin("controller")
                yield self._sleep(tx_latency)
            sm.begin("queue packet")
            for seg in pkt.split_tso() if pkt.segs > 1 else (pkt,):
                if len(fifo.items) < fifo.capacity:
                    fifo.put_now(seg, sm)
                else:
                    yield fifo.put(seg, sm)
                stats.tx_frames += 1
            done += 1
            done_segs += pkt.segs
            done_bytes += pkt.length + MAC_HEADER * pkt.segs
            if done >= batch:
                yield from self._tx_writeback(sm, done, done_segs, done_bytes)
                done = done_segs = done_bytes = 0

    def _transmit_cached(self):
        """The transmit engine fed by the fetch engine's cache (``nic.tx_desc_cache``)."""
        sm, fifo, fetch = self.tx_sm, self.tx_fifo, self.fetch
        cache, pkts, batch, stats = fetch.cache, self.rings.tx_pkts, self.batch, self.stats
        done = 0  # processed descriptors not written back yet
        done_segs = done_bytes = 0  # their frames and bytes (MAC header on), for the ITR
        sm.begin("Wait")
        while True:
            if fetch.low():
                fetch.ask(sm)
            if not cache.level:
                if done:
                    # Ran dry: what is done goes back before the engine waits.
                    yield from self._tx_writeback(sm, done, done_segs, done_bytes)
                    fetch.used -= done
                    done = done_segs = done_bytes = 0
                    if fetch.low():
                        fetch.ask(sm)
                sm.begin("Wait")
                yield cache.get(1, sm)
            else:
                cache.grab(1, sm)
            fetch.used += 1
            pkt = pkts.popleft()
            yield from self._tx_packet(sm, fifo, pkt, stats)
            done += 1
            done_segs += pkt.segs
            done_bytes += pkt.length + MAC_HEADER * pkt.segs
            if done >= batch:
                yield from self._tx_writeback(sm, done, done_segs, done_bytes)
                fetch.used -= done
                done = done_segs = done_bytes = 0

    def _transmit_each(self):
        """The transmit engine with a write-back engine of the cache's own
        (``nic.tx_writeback`` = ``each`` or ``block``): every processed descriptor goes
        to it, and when nothing is left to send (the cache dry, nothing posted or being
        fetched) all of them are due."""
        sm, fifo, fetch, wb = self.tx_sm, self.tx_fifo, self.fetch, self.writeback
        cache, pkts, stats, ring = fetch.cache, self.rings.tx_pkts, self.stats, self.rings.tx_ring
        sm.begin("Wait")
        while True:
            if fetch.low():
                fetch.ask(sm)
            if cache.level:
                cache.grab(1, sm)
            else:
                if not ring.level and not fetch.fetching:
                    # Nothing posted beyond what is cached (M5's descLeft() == 0).
                    wb.flush(sm)
                sm.begin("Wait")
                yield cache.get(1, sm)
            fetch.used += 1
            pkt = pkts.popleft()
            yield from self._tx_packet(sm, fifo, pkt, stats)
            wb.done(sm, pkt.segs, pkt.length + MAC_HEADER * pkt.segs)

    def _tx_packet(self, sm, fifo, pkt, stats):
        """``DMA packet``, ``controller`` and ``queue packet`` for one descriptor's packet."""
        sm.begin("DMA packet")
        yield from self.bus.dma_read(sm, MAC_HEADER + pkt.hdr + pkt.payload)
        if self.tx_latency:
            sm.begin("controller")
            yield self._sleep(self.tx_latency)
        sm.begin("queue packet")
        for seg in pkt.split_tso() if pkt.segs > 1 else (pkt,):
            if len(fifo.items) < fifo.capacity:
                fifo.put_now(seg, sm)
            else:
                yield fifo.put(seg, sm)
            stats.tx_frames += 1

    def _tx_writeback(self, sm, n: int, segs: int, nbytes: int):
        """``writeback``: ``n`` processed descriptors (``segs`` frames of ``nbytes``) back
        to the driver in one DMA, and their completions to the interrupt logic."""
        sm.begin("writeback")
        yield from self.bus.dma_write(sm, n * self.desc_size)
        self.rings.tx_done.give(n, sm)
        self.irq.completions(n, sm, nbytes, rx=False, packets=segs)

    # --- receive -------------------------------------------------------------------

    def arrive(self, frame, sm) -> None:
        """A frame from the wire, offered by carrier ``sm``; dropped if it does not fit."""
        size = frame_bytes(frame.length)
        if self.rx_fifo_bytes + size > self.rx_fifo_size:
            self.stats.drops["rx_fifo"] += 1
            if self.on_drop is not None:
                self.on_drop(frame, "rx_fifo")
            return
        self.rx_fifo_bytes += size
        self.rx_fifo.put_now(frame, sm)

    def _receive(self):
        sm, fifo, bus, rings = self.rx_sm, self.rx_fifo, self.bus, self.rings
        desc, stats, port = self.desc_size, self.stats, self.port
        sm.begin("idle")
        while True:
            if not fifo.items:
                # Frames enter the FIFO only from the wire: wait for the next
                # arrival itself rather than for a get of our own (one event less).
                sm.wait_empty(fifo.qid, 1)
                while not fifo.items:  # a frame lost on the way leaves it empty
                    yield port.next_arrival()
            frame = fifo.take_now(1, sm)[0]
            if self.rx_latency:
                sm.begin("controller")
                yield self._sleep(self.rx_latency)
            if not self.rx_cached:
                k = rings.rx_free.grab(self.batch, sm)
                if not k:
                    self.rx_fifo_bytes -= frame_bytes(frame.length)
                    stats.drops["rx_ring_full"] += 1
                    if self.on_drop is not None:
                        self.on_drop(frame, "rx_ring_full")
                    continue
                sm.begin("DMA descriptors")
                yield from bus.dma_read(sm, k * desc)
                self.rx_cached = k
            sm.begin("DMA packet")
            yield from bus.dma_write(sm, MAC_HEADER + frame.length, desc)
            self.rx_fifo_bytes -= frame_bytes(frame.length)
            self.rx_cached -= 1
            stats.rx_frames += 1
            rings.rx_ring.put_now(frame, sm)
            self.irq.completions(1, sm, MAC_HEADER + frame.length)
            sm.begin("idle")
