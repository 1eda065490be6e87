"""A DMA copy engine (Intel I/OAT style) doing TCP's kernel→user copies.

Linux 2.6.18's NET_DMA hands TCP's receive copies to the engine
(:mod:`cpasim.model.netdma`: who posts them, when, and who waits).  The
``ioatdma`` driver here makes each copy one descriptor per segment (at most
``copy_engine.copy_size`` bytes each, cut at the reader's pages), links them into the
engine's chain and rings it (``IOAT_CHANCMD_APPEND``, one uncached register write)
each time ``copy_engine.batch`` descriptors are pending, and once more for the rest
when the reader is done issuing (``dma_async_memcpy_issue_pending``); a running
engine also reaches descriptors linked behind the one it fetched without an append
(through their next pointers).  Checking for completions costs no register access:
the driver reads the completion status the engine wrote to memory.  The
descriptors come from a ring of ``copy_engine.ring``; the reader waits for free ones
(Linux allocates more).

The engine is the simulator of Saidi 2009's (M5's, now gem5's ``CopyEngine``, one
channel: net_dma gives each CPU its own): for each descriptor, in series,

1. ``DMA next address`` / ``next address`` — only when the previous descriptor it
   fetched ended the chain (its next pointer was null) and an append came since:
   it re-reads that descriptor's next pointer (8 bytes);
2. ``DMA descriptor`` / ``descriptor`` — reads the descriptor
   (``copy_engine.desc_size``), then ``set-up``: ``copy_engine.latency``
   (gem5's ``latBeforeBegin``);
3. ``read`` / ``copy read`` — reads the source bytes into its buffer;
4. ``write`` / ``copy write`` — writes them to the destination;
5. ``DMA status`` / ``status`` — writes the 8-byte completion status the driver
   polls, then ``report``: ``copy_engine.completion_latency``
   (``latAfterCompletion``); only after the last descriptor of a copy.

Then the next descriptor, or ``idle`` when none was linked.  Nothing overlaps:
gem5's channel has one copy buffer and one request outstanding at a time, and no
rate of its own, so its copies move as fast as its DMA crosses its interconnect
(``copy_engine.rate`` adds a rate limit, off by default).  Where the engine sits
(``copy_engine.location``) sets that interconnect:

``io_bus``
    a device on the host's I/O bus: every step above is a DMA over the bus
    (first names above, :data:`cpasim.model.bus_rules.BUS_STATES`), so received
    data crosses the bus three times (the NIC's DMA, the engine's read, its
    write); a register access stalls the CPU ``pcie.mmio_latency`` (on M5's bus, its
    round trip through the bridge).
``on_die``
    next to the CPU, between L1 and L2: every step is a transfer on the on-die
    interconnect (second names above; M5's bus, ``bus.on_die_*``), the NIC's own
    when the NIC is on die too (``bus.kind = "on_die"``); register accesses cost
    ``copy_engine.mmio_latency``.

With ``memory.bandwidth`` set every transfer also takes its bytes' share of the
host's memory (:class:`cpasim.model.bus.MemoryBus`).

State machine ``Copy Engine`` (instance ``0``): ``idle`` — for a posted descriptor
(``Copy ring``); then the steps above; then the completion: one unit into ``Copy
done`` (for the reader) and the descriptor back to ``Copy desc free``.

Queues: ``Copy desc free`` (free descriptors: a credit queue, declared unbounded
with an initial resize to the ring size, so ``--capacity`` on it means more
descriptors), ``Copy ring`` (descriptors announced to the engine by an append),
``Copy done`` (completions, one instance per reader: :meth:`CopyEngine.done_for`).
In the poster's SM: ``TcpRecvMsg: dma issue`` (the reader, :meth:`CopyEngine.post`)
or ``tcp_dma_try_early_copy`` (the softirq, :meth:`CopyEngine.post_early`),
``cpu.cost.descriptor`` per descriptor and the append's register write; ``dma wait
desc`` (the reader finds no free descriptor); ``TcpRecvMsg: dma wait`` (spinning or
asleep until the last completion); on M5's bus each append's register write then
crosses the bridge and back, waiting there behind the DMA traffic, the core stalled:
``mmio write``.
"""

from __future__ import annotations

from collections import deque

from cpasim.model.bus_rules import COPY_ENGINE_STATES
from cpasim.model.environment import sleeper
from cpasim.protocol import IOAT_COMPLETION_BYTES, IOAT_NEXT_POINTER_BYTES
from cpasim.tracing import TracedContainer

#: The engine's state names by where it sits (declared with the bus's states, which
#: the predictions read without the model).
STATES = COPY_ENGINE_STATES


class CopyEngine:
    """The copy engine of one host and the driver side of its use (module docstring):
    ``params`` is the host's ``copy_engine`` section, ``bus_mmio_latency`` what a
    register access on the I/O bus stalls the CPU (``pcie.mmio_latency``), ``port``
    the interconnect its DMA crosses (a :class:`~cpasim.model.bus.Bus`)."""

    def __init__(self, env, sys: str, tracer, *, params, bus_mmio_latency, cpu, port) -> None:
        p = params
        self.env = env
        self._sleep = sleeper(env)  # set-up, reports and the rate's hold
        self.cpu = cpu
        self.port = port
        on_bus = p.location == "io_bus"
        self.bus = port if on_bus else None  # the I/O bus its doorbells cross
        self.states = STATES[p.location]
        self.latency = p.latency
        self.completion_latency = p.completion_latency
        self.ns_per_byte = 8e9 / p.rate if p.rate else 0.0
        self.batch = min(p.batch, p.ring)  # a batch never waits for more than the ring
        self.copy_size = p.copy_size
        self.page_size = p.page_size
        self.desc_size = p.desc_size
        self.spin = p.wait == "spin"
        # On M5's bus the stall is the append's round trip through the bridge (cpu_write).
        mmio_ns = (0.0 if port.queues_writes else bus_mmio_latency) if on_bus else p.mmio_latency
        self.c_mmio = mmio_ns / cpu.ns_per_cycle
        self.c_desc = cpu.cost.descriptor
        self.sm = tracer.sm(sys, "Copy Engine", "0")
        q = (env, tracer, sys)
        self.free = TracedContainer(*q, "Copy desc free", "0", init=p.ring, conn_flow=False)
        self.ring = TracedContainer(*q, "Copy ring", "0", owner=self.sm)
        self._q = q
        self._done: dict[str, TracedContainer] = {}
        self.done_for("0")  # the first reader's, declared with the engine's own queues
        # Bytes of each posted descriptor, in order, negative for the last descriptor
        # of a copy (the one that writes a completion status).
        self.sizes: deque[int] = deque()
        self.owners: deque[TracedContainer] = deque()  # each descriptor's Copy done
        self.pending = 0  # descriptors linked since the last append (ioatdma's pending)
        self.linked = 0  # of those, the ones the engine has not reached yet
        self.copies = 0  # descriptors done
        self.desc_waits = 0  # times the reader found too few free descriptors
        self.bytes = 0
        env.process(self._run())

    # --- the driver (ioatdma of Linux 2.6.18), run by its callers holding a core ----------

    def descriptors(self, nbytes: int, mss: int, at: int = 0) -> list[int]:
        """The descriptors copying ``nbytes`` received in segments of ``mss`` into a
        page-aligned user buffer from its offset ``at``: Linux's ``dma_memcpy_to_iovec``
        makes one copy per segment and cuts it where it would cross a page of the buffer
        (``copy_engine.page_size``), the driver cuts each copy into descriptors of at
        most the engine's transfer cap (``copy_size``); the last descriptor of each
        copy is negative (see ``sizes``)."""
        cap, page = self.copy_size, self.page_size
        out: list[int] = []
        while nbytes > 0:
            seg = min(mss, nbytes)
            nbytes -= seg
            while seg > 0:
                piece = min(seg, page - at % page) if page else seg
                seg -= piece
                at += piece
                while piece > cap:
                    out.append(cap)
                    piece -= cap
                out.append(-piece)
        return out

    def done_for(self, inst: str) -> TracedContainer:
        """The ``Copy done`` queue of reader ``inst`` (a connection): one unit per
        descriptor of its done.  The channel completes in order, so a reader waiting
        for its own descriptors waits for every one linked before its last, as Linux
        waits for its last cookie."""
        done = self._done.get(inst)
        if done is None:
            done = self._done[inst] = TracedContainer(*self._q, "Copy done", inst, owner=self.sm)
        return done

    def post(self, sm, descs: list[int], done, *, stack: float = 0.0, final: bool = False):
        """Generator run by ``read()``: link ``descs`` into the engine's chain, ringing it
        each time ``copy_engine.batch`` descriptors are pending and, with ``final``, for
        the rest (``dma_async_memcpy_issue_pending``), in state ``TcpRecvMsg: dma
        issue``; with too few free descriptors it waits (``dma wait desc``).  ``stack``
        is CPU work due with the first issue; ``done`` the reader's ``Copy done``
        (:meth:`done_for`).  Returns the ``stack`` still due (none was issued)."""
        cpu, free = self.cpu, self.free
        total, i = len(descs), 0
        while i < total or (final and self.pending):
            k = min(self.batch - self.pending, total - i)
            if free.level < k:
                # The resource loop: descriptors come back only as copies complete.
                sm.begin("dma wait desc")
                self.desc_waits += 1
                stack += yield from self._wait(sm, free.get(k, sm))
            elif k:
                free.grab(k, sm)
            self._link(descs[i : i + k], done)
            i += k
            append = self.pending >= self.batch or (final and i == total)
            yield cpu.spend(
                sm,
                "TcpRecvMsg: dma issue",
                stack=stack,
                driver=self.c_desc * k + (self.c_mmio if append else 0.0),
            )
            stack = 0.0
            if append:
                yield from self._append(sm)
        return stack

    def post_early(self, sm, descs: list[int], done):
        """Generator run by the softirq (``tcp_dma_try_early_copy``): link ``descs``,
        ringing the engine if ``copy_engine.batch`` are pending now, in state
        ``tcp_dma_try_early_copy``; returns False, posting nothing, when too few
        descriptors are free (the softirq cannot wait)."""
        k = len(descs)
        if self.free.level < k:
            return False
        self.free.grab(k, sm)
        self._link(descs, done)
        append = self.pending >= self.batch
        yield self.cpu.spend(
            sm,
            "tcp_dma_try_early_copy",
            driver=self.c_desc * k + (self.c_mmio if append else 0.0),
        )
        if append:
            yield from self._append(sm)
        return True

    def wait_done(self, sm, n: int, done):
        """Generator run by ``read()``: wait until ``n`` more of its descriptors (those
        posted with ``done``) are done, in ``TcpRecvMsg: dma wait``; returns the CPU
        cycles still due for the wait."""
        sm.begin("TcpRecvMsg: dma wait")
        return (yield from self._wait(sm, done.get(n, sm)))

    def _link(self, descs: list[int], done) -> None:
        """Link ``descs`` (their completions into ``done``) behind the chain's last
        descriptor: an engine that fetches that one from now on finds them through its
        next pointer."""
        self.sizes.extend(descs)
        self.owners.extend([done] * len(descs))
        self.pending += len(descs)
        self.linked += len(descs)

    def _append(self, sm):
        """Generator, after the register write's CPU cost: ring the engine
        (``IOAT_CHANCMD_APPEND``): the descriptors linked since the last append are
        announced to it."""
        if self.bus is not None:
            self.bus.mmio_write()
            if self.bus.queues_writes:
                yield from self.bus.cpu_write(sm, self.cpu)  # M5's bridge and back
        if self.linked:
            self.ring.give(self.linked, sm)
        self.linked = self.pending = 0

    def _wait(self, sm, event):
        """Generator: wait for ``event`` (the reader's core given up meanwhile); returns
        the CPU cycles still due for the wait.

        Spinning (Linux 2.6.18) keeps the core busy, but interrupts and NAPI, which run
        on interrupt exit, still take it in between: so the core is given up to them
        and the spin's own time is accounted as busy (``copy``).  Sleeping leaves the
        core idle and costs a context switch."""
        cpu = self.cpu
        if self.spin:
            start, before = self.env._now, cpu.busy_total()
            yield from cpu.block(sm, event)
            cpu.spun("copy", start, before)
            return 0.0
        yield from cpu.block(sm, event)
        return cpu.cycles("context_switch")

    # --- the engine ---------------------------------------------------------------------

    def _run(self):
        sm, ring, port = self.sm, self.ring, self.port
        s_next, s_desc, s_read, s_write, s_status = self.states
        # The channel starts on the driver's null descriptor: the first append finds
        # the chain's end.
        chained = False
        sm.begin("idle")
        while True:
            if chained and not ring.level:
                # Linked behind the one just done, not announced yet: the engine reaches
                # it through the next pointer it read.
                self.linked -= 1
            elif ring.level:
                ring.grab(1, sm)
            else:
                sm.begin("idle")
                yield ring.get(1, sm)
            if not chained:
                # The append that brought this descriptor found the engine at the end
                # of the chain: it re-reads the last descriptor's next pointer.
                sm.begin(s_next)
                yield from port.dma_read(sm, IOAT_NEXT_POINTER_BYTES)
            sm.begin(s_desc)
            yield from port.dma_read(sm, self.desc_size)
            # Its next pointer is set if the driver had linked another one by now.
            chained = ring.level > 0 or self.linked > 0
            sm.begin("set-up")
            yield self._sleep(self.latency)
            n = self.sizes.popleft()
            owner = self.owners.popleft()
            last = n < 0
            if last:
                n = -n
            sm.begin(s_read)
            yield from self._transfer(port.dma_read(sm, n), n)
            sm.begin(s_write)
            yield from self._transfer(port.dma_write(sm, n), n)
            if last:
                sm.begin(s_status)
                yield from port.dma_write(sm, IOAT_COMPLETION_BYTES)
                sm.begin("report")
                yield self._sleep(self.completion_latency)
            self.copies += 1
            self.bytes += n
            owner.give(1, sm)
            self.free.give(1, sm)

    def _transfer(self, dma, n: int):
        """Generator: one of a copy's DMAs, held to ``copy_engine.rate`` when set."""
        if not self.ns_per_byte:
            yield from dma
            return
        start = self.env._now
        yield from dma
        left = n * self.ns_per_byte - (self.env._now - start)
        if left > 0:
            yield self._sleep(left)
