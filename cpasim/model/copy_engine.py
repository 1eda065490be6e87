"""A DMA copy engine (Intel I/OAT style) doing TCP's kernel→user copies.

Linux 2.6.18's NET_DMA hands the copies of ``tcp_recvmsg`` to the engine: the
reader builds one copy descriptor per received segment (at most
``copy_engine.copy_size`` bytes each), the ``ioatdma`` driver appends them to the
engine every ``copy_engine.batch`` descriptors with an uncached register write
(and once more for the rest at the end of the call), and before returning the
reader waits until the engine has done them all: it spins on the core
(``copy_engine.wait = "spin"``, as 2.6.18 does) or sleeps.  The descriptors come
from a ring of ``copy_engine.ring``; the buffers stay charged to the receive buffer
until their copies are done.

Where the engine sits sets what a copy crosses (``copy_engine.location``):

``io_bus``
    a device on the host's I/O bus: each descriptor is read over the bus, the
    source bytes come down it and go back up to the destination, so received
    data crosses the bus three times (the NIC's DMA, the engine's read, its
    write); a register access stalls the CPU ``pcie.mmio_latency``.
``on_die``
    next to the CPU: no bus crossing, register accesses cost
    ``copy_engine.mmio_latency``.

Either way the engine moves at most ``copy_engine.rate`` and, with
``memory.bandwidth`` set, reads and writes every byte through the host's memory.

State machine ``Copy Engine`` (instance ``0``):
    ``idle`` — for a posted descriptor (``Copy ring``);
    ``DMA descriptor`` (``io_bus``) — reads the descriptor over the bus;
    ``set-up`` (``io_bus``) — the start-up ``copy_engine.latency``;
    ``read`` (``io_bus``) — the source bytes down the bus, then hands them to the
    writer stage (``Copy staged``, ``STAGED`` copies; ``buffer full`` while it
    holds them all);
    ``set-up``, ``copy`` (``on_die``) — start-up latency, then the copy;
    then the completion: one unit into ``Copy done`` (for the reader) and the
    descriptor back to ``Copy desc free``.

``Copy Engine`` (instance ``write``, ``io_bus`` only): ``idle`` — for a read copy
(``Copy staged``); ``write`` — its bytes up the bus to the destination, then the
completion.  Reads go down the bus and writes up it, so the two stages overlap.

Queues: ``Copy desc free`` (free descriptors: a credit queue, declared unbounded
with an initial resize to the ring size, so ``--capacity`` on it means more
descriptors), ``Copy ring`` (descriptors the engine was told about), ``Copy done``
(completions).  In the reader's SM (see :meth:`CopyEngine.copy`): ``dma wait
desc`` (no free descriptor), ``TcpRecvMsg: dma issue`` (``cpu.cost.descriptor``
per descriptor and the append's register write), ``TcpRecvMsg: dma wait``
(spinning or asleep until the last completion).  ``Copy staged`` (``io_bus``)
holds the copies read and not yet written.
"""

from __future__ import annotations

from collections import deque

from cpasim.trace import TracedContainer, TracedStore

#: Copies an engine on the I/O bus holds between its read and its write.
STAGED = 2


class CopyEngine:
    """The copy engine of one host and the driver side of its use (module docstring):
    ``params`` is the host's ``copy_engine`` section, ``bus_mmio_latency`` what a
    register access on the I/O bus stalls the CPU (``pcie.mmio_latency``)."""

    def __init__(
        self, env, sys: str, tracer, *, params, bus_mmio_latency, cpu, bus, memory
    ) -> None:
        p = params
        self.env = env
        self.cpu = cpu
        self.bus = bus if p.location == "io_bus" else None
        self.memory = memory
        self.latency = p.latency
        self.ns_per_byte = 8e9 / p.rate
        self.batch = min(p.batch, p.ring)  # a batch never waits for more than the ring
        self.copy_size = p.copy_size
        self.desc_size = p.desc_size
        self.spin = p.wait == "spin"
        mmio_ns = bus_mmio_latency if self.bus is not None else p.mmio_latency
        self.c_mmio = mmio_ns / cpu.ns_per_cycle
        self.c_desc = cpu.cost.descriptor
        self.sm = tracer.sm(sys, "Copy Engine", "0")
        q = (env, tracer, sys)
        self.free = TracedContainer(*q, "Copy desc free", "0", init=p.ring, conn_flow=False)
        self.ring = TracedContainer(*q, "Copy ring", "0", owner=self.sm)
        self.done = TracedContainer(*q, "Copy done", "0", owner=self.sm)
        self.sizes: deque[int] = deque()  # bytes of each posted descriptor, in order
        self.copies = 0  # descriptors done
        self.desc_waits = 0  # times the reader found too few free descriptors
        self.bytes = 0
        env.process(self._run())
        if self.bus is not None:
            # Reads and writes cross the bus in opposite directions: the engine streams
            # them side by side, through an on-engine buffer of STAGED copies.
            self.write_sm = tracer.sm(sys, "Copy Engine", "write")
            self.staged = TracedStore(*q, "Copy staged", "0", capacity=STAGED, owner=self.write_sm)
            env.process(self._write())

    # --- the reader's side (tcp_recvmsg with NET_DMA) ------------------------------------

    def copy(self, sm, nbytes: int, mss: int, stack: float):
        """Generator run by ``read()`` holding a core: copy ``nbytes`` (segments of
        ``mss``) with the engine and wait for the copies; ``stack`` is CPU work due with
        the first issue (system call, the app's own)."""
        cpu, free = self.cpu, self.free
        chunk = min(mss, self.copy_size)
        total = -(-nbytes // chunk)
        last = nbytes - (total - 1) * chunk
        posted = 0
        while posted < total:
            k = min(self.batch, total - posted)
            if free.level < k:
                # The resource loop: descriptors come back only as copies complete.
                sm.begin("dma wait desc")
                self.desc_waits += 1
                stack += yield from self._wait(sm, free.get(k, sm))
            else:
                free.grab(k, sm)
            if self.bus is not None:
                self.bus.mmio_write()
            yield cpu.spend(
                sm,
                "TcpRecvMsg: dma issue",
                stack=stack,
                driver=self.c_desc * k + self.c_mmio,
            )
            stack = 0.0
            posted += k
            sizes = self.sizes
            sizes.extend([chunk] * (k - 1 if posted == total else k))
            if posted == total:
                sizes.append(last)
            self.ring.give(k, sm)
        sm.begin("TcpRecvMsg: dma wait")
        return (yield from self._wait(sm, self.done.get(total, sm)))

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
        sm, ring, env, bus, memory = self.sm, self.ring, self.env, self.bus, self.memory
        sm.begin("idle")
        while True:
            if ring.level:
                ring.grab(1, sm)
            else:
                sm.begin("idle")
                yield ring.get(1, sm)
            n = self.sizes.popleft()
            own = n * self.ns_per_byte
            if bus is None:
                sm.begin("set-up")
                yield env.timeout(self.latency)
                sm.begin("copy")
                if memory is not None:
                    own = memory.copy_access(2 * n, own) + memory.latency
                yield env.timeout(own)
            else:
                sm.begin("DMA descriptor")
                yield from bus.dma_read(sm, self.desc_size)
                sm.begin("set-up")
                yield env.timeout(self.latency)
                start = env._now
                sm.begin("read")
                yield from bus.dma_read(sm, n)
                # The engine's own data path, when slower than the bus.
                if env._now - start < own:
                    yield env.timeout(own - (env._now - start))
                # The writer stage writes while the next descriptor is read.
                if len(self.staged.items) < self.staged.capacity:
                    self.staged.put_now(n, sm)
                else:
                    sm.begin("buffer full")
                    yield self.staged.put(n, sm)
                sm.begin("idle")
                continue
            self._complete(sm, n)

    def _complete(self, sm, n: int) -> None:
        self.copies += 1
        self.bytes += n
        self.done.give(1, sm)
        self.free.give(1, sm)

    def _write(self):
        """The writer stage of an engine on the I/O bus: each read copy's bytes up the bus
        to their destination, then the completion."""
        sm, staged, bus = self.write_sm, self.staged, self.bus
        sm.begin("idle")
        while True:
            if staged.items:
                (n,) = staged.take_now(1, sm)
            else:
                sm.begin("idle")
                n = yield staged.get(sm)
            sm.begin("write")
            yield from bus.dma_write(sm, n)
            self._complete(sm, n)
