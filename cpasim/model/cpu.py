"""The CPU of one host: cores as a contended pool, cycle costs, time accounting.

Software state machines (app, TCP, IP, driver, NAPI, ISR) take a core from the
``CPU cores`` pool (:meth:`Cpu.take`) before they work and give it back
(:meth:`Cpu.release`) before they block on anything else: scheduling is
non-preemptive (but see ``cpu.irq_preempt`` below), so a core is held exactly while
an SM is in an active state.

With ``cpu.irq_cores`` set, that many of the cores form a pool of their own,
``IRQ cores``, taken by the softirq side (interrupt handler, NAPI poll, IP and
TCP receive processing, TCP's timers) through :attr:`Cpu.irq`; the application
side (system calls, TCP's send path, the driver's transmit) takes the rest.
Without it :attr:`Cpu.irq` is the CPU itself: one pool for everything.

Costs are cycles, turned into time by ``cpu.freq``; each is a fixed part plus,
where declared, a per-byte part (``cost.<name>`` + ``cost.<name>_per_byte`` ×
bytes); ``copy_send`` and ``copy_recv`` are ``copy`` with the per-byte cost of
their direction (``cost.copy_send_per_byte``, ``cost.copy_recv_per_byte``; by
default ``cost.copy_per_byte``).  With ``cpu.cache.size`` set the data cache's
misses stretch them (:mod:`cpasim.model.cache`).  Busy time is accounted to Saidi 2009's
categories (copy, stack, driver, interrupt, buffer, user) from ``measure_from``
on; idle is what is left.

With ``cpu.irq_preempt`` (Linux 2.6.13's send path) the work of the processes
registered by :meth:`Cpu.interruptible` — the sender in its system call — is the one
exception to non-preemptive scheduling: an interrupt takes the core in the middle of
it (:meth:`Cpu.preempt`) and the work goes on, for what was left of it, once the
handler gives the core back.
"""

from __future__ import annotations

import copy
import weakref

from cpasim.errors import CpasimError
from cpasim.model.cache import Cache
from cpasim.model.environment import sleeper
from cpasim.tracing import TracedPool

CATEGORIES = ("copy", "stack", "driver", "interrupt", "buffer", "user")


class _Work:
    """A stretch of interruptible work in progress (:meth:`Cpu.spend`): its SM, the
    categories' cycles, when its stretches began (shifted by each preemption), when
    it ends, the timer that ends it and the event its SM waits on."""

    __slots__ = ("sm", "cycles", "origin", "end", "timer", "done")

    def __init__(self, sm, cycles: dict, origin: float, done) -> None:
        self.sm = sm
        self.cycles = cycles
        self.origin = origin
        self.end = origin
        self.timer = None
        self.done = done


class Cpu:
    """Cores, costs and busy time of one host; ``params`` is its ``cpu`` section.

    ``release(sm)`` (give the core back now) is the ``CPU cores`` pool's own
    method, bound once: releasing is one of the model's commonest calls."""

    def __init__(self, env, sys: str, *, params, tracer) -> None:
        self.env = env
        self.sys = sys
        self.ns_per_cycle = 1e9 / params.freq
        self.cost = params.cost
        self.n_cores = params.cores
        irq = params.irq_cores
        if irq >= params.cores:
            raise CpasimError(
                f"hosts.{sys}.cpu.irq_cores: expected fewer than cpu.cores "
                f"({params.cores}) so the application keeps a core, got {irq}"
            )
        self.cores = TracedPool(env, tracer, sys, "CPU cores", "0", size=params.cores - irq)
        self.busy_ns = dict.fromkeys(CATEGORIES, 0.0)
        self.measure_from = 0.0
        self.measure_until = float("inf")
        self._costs: dict[str, tuple[float, float]] = {}  # name -> (fixed, per byte)
        self._fixed: dict[str, float] = {}  # name -> cycles for no bytes (cycles_of)
        # The data cache's misses, folded into each cost as it is first priced.
        self.cache = Cache(params.cache) if params.cache.size else None
        # The copies of each direction: copy_per_byte unless the direction has its own.
        cost = params.cost
        for name, per_byte in (
            ("copy_send", cost.copy_send_per_byte),
            ("copy_recv", cost.copy_recv_per_byte),
        ):
            fixed, per_byte = cost.copy, cost.copy_per_byte if per_byte < 0 else per_byte
            if self.cache is not None:
                fixed, per_byte = self.cache.price(name, fixed, per_byte)
            self._costs[name] = (fixed, per_byte)
        # The host's Memory when memory.bandwidth is set: copies and checksums then
        # take their bytes' share of it (stall).
        self.memory = None
        self.release = self.cores.release
        self._sleep = sleeper(env)  # work's wait (no event when nothing comes first)
        self.irq_preempt = params.irq_preempt
        # cpu.irq_preempt: the processes whose work an interrupt may preempt (processes,
        # not SM handles, as for _irq_procs), their work in progress (oldest first), and
        # the handler's hook to take a core as soon as such work starts while it waits.
        self._interruptible: set = set()
        self.working: list[_Work] = []
        self.on_work = None
        #: The CPU the softirq side runs on: these cores, or the reserved IRQ cores.
        self.irq = self
        # Processes of the softirq side: code shared with the application side (IP
        # output) blocks through this CPU, which must then give up the IRQ core they
        # hold.  (Processes, not SM handles: untraced, every SM is the same handle.)
        self._irq_procs: weakref.WeakSet | None = None
        if irq:
            self.irq = self._on(TracedPool(env, tracer, sys, "IRQ cores", "0", size=irq))
            self._irq_procs = weakref.WeakSet()

    def _on(self, pool: TracedPool) -> Cpu:
        """This CPU's costs and busy time (shared, not copied), on cores ``pool``."""
        view = copy.copy(self)
        view.cores = pool
        view.acquire = pool.acquire
        view.release = pool.release
        view.irq = view
        view._irq_procs = None
        return view

    def softirq(self):
        """The CPU the calling process, one of the softirq side, runs on (:attr:`irq`).
        Called from the process's own generator."""
        if self._irq_procs is not None:
            self._irq_procs.add(self.env.active_process)
        return self.irq

    def start_measuring(self, since: float, until: float = float("inf")) -> None:
        """Account busy time between ``since`` (the end of the warm-up) and ``until``
        (the end of the run): work across either counts only its part inside."""
        for cpu in {self, self.irq}:
            cpu.measure_from, cpu.measure_until = since, until

    def take(self, sm):
        """What the calling process yields from for a core for ``sm``: when one is free,
        nothing (no SimPy event, and not even a generator: this is called for every
        stretch of work), else the wait for one."""
        if self.cores.acquire_now(sm):
            return ()
        return self._wait_for_core(sm)

    def _wait_for_core(self, sm):
        yield self.cores.acquire(sm)

    def cycles(self, name: str, nbytes: int = 0) -> float:
        """Cycles of cost ``name`` for ``nbytes`` bytes: fixed + per-byte part."""
        cost = self._costs.get(name)
        if cost is None:
            fixed = getattr(self.cost, name, None)
            per_byte = getattr(self.cost, name + "_per_byte", None)
            if fixed is None and per_byte is None:
                raise KeyError(f"no CPU cost cpu.cost.{name} or cpu.cost.{name}_per_byte")
            cost = (fixed or 0.0, per_byte or 0.0)
            if self.cache is not None:
                cost = self.cache.price(name, *cost)
            self._costs[name] = cost
        return cost[0] + cost[1] * nbytes

    def cycles_of(self, name: str) -> float:
        """:meth:`cycles` of ``name`` for no bytes, the same float object at every call:
        what each of many connections keeps, one object for all of them."""
        got = self._fixed.get(name)
        if got is None:
            got = self._fixed[name] = self.cycles(name)
        return got

    def stall(self, cycles: float, nbytes: int) -> float:
        """``cycles`` of work that moves ``nbytes`` through memory, stretched while the
        memory serves others first (only with a modelled memory: callers test
        ``cpu.memory``); the core stalls, so the extra counts as busy."""
        k = self.ns_per_cycle
        own = cycles * k
        ns = self.memory.copy_access(nbytes, own)
        return cycles if ns == own else ns / k  # unstretched: exactly the cycles given

    def busy_total(self) -> float:
        """Busy time of all cores so far (see :meth:`spun`)."""
        return sum(self.busy_ns.values())

    def stalled(self, category: str, start: float) -> None:
        """The held core stalled from ``start`` until now (waiting for a register
        write to cross the I/O bus): busy time of ``category``, its part inside the
        measured interval."""
        ns = min(self.env._now, self.measure_until) - max(start, self.measure_from)
        if ns > 0:
            self.busy_ns[category] += ns

    def spun(self, category: str, start: float, busy_before: float) -> None:
        """A process spun from ``start`` until now, letting interrupts and softirqs run
        on its core in between (``busy_before`` = :meth:`busy_total` at ``start``): the
        time nobody else worked is busy time of ``category``.  With several cores the
        others' work is counted against the spin too, so a spin is never overcounted."""
        since = max(start, self.measure_from)
        spin = self.env._now - since - (self.busy_total() - busy_before)
        if spin > 0:
            self.busy_ns[category] += spin

    def work(self, category: str, cycles: float):
        """What the calling process yields for ``cycles`` of busy time on the held core,
        accounted to ``category`` (a timeout, or none needed: :meth:`Kernel.sleep
        <cpasim.model.environment.Kernel.sleep>`)."""
        env = self.env
        ns = cycles * self.ns_per_cycle
        start = env._now
        end = start + ns
        if start >= self.measure_from and end <= self.measure_until:
            self.busy_ns[category] += ns
        elif end > self.measure_from and start < self.measure_until:
            self.busy_ns[category] += min(end, self.measure_until) - max(start, self.measure_from)
        return self._sleep(ns)

    def spend(self, sm, state: str, **cycles: float):
        """Enter ``state`` and work there; cycles given per category.  What the calling
        process yields at once: one wait, as :meth:`work`'s."""
        sm.begin(state)
        env = self.env
        start = env._now
        total = 0.0
        k, busy, since = self.ns_per_cycle, self.busy_ns, self.measure_from
        if start >= since:  # measuring already: all of it counts
            for category, c in cycles.items():
                ns = c * k
                total += ns
                busy[category] += ns
            if start + total > self.measure_until:  # past the end: take the tail back
                self._clip(start, cycles, self.measure_until, float("inf"), -1.0)
        else:
            for c in cycles.values():
                total += c * k
            self._clip(start, cycles, since, self.measure_until, 1.0)
        if self._interruptible and env.active_process in self._interruptible:
            return self._start(sm, start, total, cycles)
        return self._sleep(total)

    def interruptible(self) -> None:
        """With ``cpu.irq_preempt``, the calling process's :meth:`spend` is work an
        interrupt may preempt (the sender in its system call); without, nothing
        changes.  Called from the process's own generator."""
        if self.irq_preempt:
            self._interruptible.add(self.env.active_process)

    def _start(self, sm, start: float, total: float, cycles: dict):
        """The event ``sm`` waits on for its interruptible work (:meth:`spend`)."""
        work = _Work(sm, cycles, start, self.env.event())
        self._arm(work, total)
        if self.on_work is not None:
            self.on_work(work)  # an interrupt waiting for a core takes it now
        return work.done

    def _arm(self, work: _Work, ns: float) -> None:
        """Run ``work`` for ``ns`` more from now."""
        env = self.env
        work.end = env._now + ns
        work.timer = timer = env.timeout(ns)
        timer.callbacks.append(lambda event: self._finish(work, event))
        self.working.append(work)

    def _finish(self, work: _Work, timer) -> None:
        if work.timer is timer:  # not preempted since it was armed
            self.working.remove(work)
            work.done.succeed()

    def preempt(self, work: _Work):
        """An interrupt takes ``work``'s core now; returns the event that gives it
        back, after which the work runs for what was left of it.  Its busy time moves
        with it: what was accounted for the rest is taken back, and accounted again
        when it runs."""
        now = self.env._now
        left = work.end - now
        work.timer = None
        self.working.remove(work)
        self._clip(work.origin, work.cycles, max(now, self.measure_from), self.measure_until, -1.0)
        back = self.env.event()

        def resume(_event) -> None:
            t = self.env._now
            work.origin += t - now
            self._clip(work.origin, work.cycles, max(t, self.measure_from), self.measure_until, 1.0)
            self._arm(work, left)

        back.callbacks.append(resume)
        return back

    def _clip(self, start: float, cycles: dict, lo: float, hi: float, sign: float) -> None:
        """Add (``sign`` 1) or take back (-1) the parts of the categories' consecutive
        stretches of work, from ``start`` on, that fall between ``lo`` and ``hi``."""
        t, k, busy = start, self.ns_per_cycle, self.busy_ns
        for category, c in cycles.items():
            end = t + c * k
            inside = min(end, hi) - max(t, lo)
            if inside > 0:
                busy[category] += sign * inside
            t = end

    def block(self, sm, event):
        """Generator: give the core up, wait for ``event``, take a core again."""
        if self._irq_procs is not None and self.env.active_process in self._irq_procs:
            return (yield from self.irq.block(sm, event))
        self.release(sm)
        value = yield event
        yield from self.take(sm)
        return value

    def put(self, sm, queue, item):
        """Put ``item`` into a store, giving the core up while the store is full; returns
        what to ``yield from``.

        With room, the item goes in at once, without a SimPy event (nor a generator)."""
        if len(queue.items) < queue.capacity:
            queue.put_now(item, sm)
            return ()
        return self.block(sm, queue.put(item, sm))

    def utilization(self, elapsed_ns: float) -> dict[str, float]:
        """Share of the cores' time per category over ``elapsed_ns``, plus ``idle``."""
        total = elapsed_ns * self.n_cores
        if total <= 0:
            return {**dict.fromkeys(CATEGORIES, 0.0), "idle": 1.0}
        out = {c: min(1.0, self.busy_ns[c] / total) for c in CATEGORIES}
        out["idle"] = max(0.0, 1.0 - sum(out.values()))
        return out
