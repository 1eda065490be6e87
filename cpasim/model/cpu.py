"""The CPU of one host: cores as a contended pool, cycle costs, time accounting.

Software state machines (app, TCP, IP, driver, NAPI, ISR) take a core from the
``CPU cores`` pool (:meth:`Cpu.take`) before they work and give it back
(:meth:`Cpu.release`) before they block on anything else: scheduling is
non-preemptive, so a core is held exactly while an SM is in an active state.

Costs are cycles, turned into time by ``cpu.freq``; each is a fixed part plus,
where declared, a per-byte part (``cost.<name>`` + ``cost.<name>_per_byte`` ×
bytes).  Busy time is accounted to the seed's categories (copy, stack, driver,
interrupt, buffer, user) from ``measure_from`` on; idle is what is left.
"""

from __future__ import annotations

from cpasim.trace import TracedPool

CATEGORIES = ("copy", "stack", "driver", "interrupt", "buffer", "user")


class Cpu:
    """Cores, costs and busy time of one host.

    ``acquire(sm)`` (the event of getting a core) and ``release(sm)`` (give it
    back now) are the ``CPU cores`` pool's own methods, bound once: releasing is
    one of the model's commonest calls."""

    def __init__(self, env, sys: str, params, tracer) -> None:
        self.env = env
        self.sys = sys
        self.ns_per_cycle = 1e9 / params.freq
        self.cost = params.cost
        self.n_cores = params.cores
        self.cores = TracedPool(env, tracer, sys, "CPU cores", "0", size=params.cores)
        self.busy_ns = dict.fromkeys(CATEGORIES, 0.0)
        self.measure_from = 0.0
        self._costs: dict[str, tuple[float, float]] = {}  # name -> (fixed, per byte)
        # The copies of each direction: copy_per_byte unless the direction has its own.
        cost = params.cost
        for name, per_byte in (
            ("copy_send", cost.copy_send_per_byte),
            ("copy_recv", cost.copy_recv_per_byte),
        ):
            self._costs[name] = (cost.copy, cost.copy_per_byte if per_byte < 0 else per_byte)
        # The host's Memory when memory.bandwidth is set: copies and checksums then
        # take their bytes' share of it (stall).
        self.memory = None
        self.acquire = self.cores.acquire
        self.release = self.cores.release

    def take(self, sm):
        """Generator: a core for ``sm``, without a SimPy event when one is free."""
        if not self.cores.acquire_now(sm):
            yield self.cores.acquire(sm)

    def cycles(self, name: str, nbytes: int = 0) -> float:
        """Cycles of cost ``name`` for ``nbytes`` bytes: fixed + per-byte part."""
        cost = self._costs.get(name)
        if cost is None:
            fixed = getattr(self.cost, name, None)
            per_byte = getattr(self.cost, name + "_per_byte", None)
            if fixed is None and per_byte is None:
                raise KeyError(f"no CPU cost cpu.cost.{name} or cpu.cost.{name}_per_byte")
            cost = self._costs[name] = (fixed or 0.0, per_byte or 0.0)
        return cost[0] + cost[1] * nbytes

    def stall(self, cycles: float, nbytes: int) -> float:
        """``cycles`` of work that moves ``nbytes`` through memory, stretched while the
        memory serves others first (only with a modelled memory: callers test
        ``cpu.memory``); the core stalls, so the extra counts as busy."""
        k = self.ns_per_cycle
        own = cycles * k
        ns = self.memory.access(nbytes, own)
        return cycles if ns == own else ns / k  # unstretched: exactly the cycles given

    def busy_total(self) -> float:
        """Busy time of all cores so far (see :meth:`spun`)."""
        return sum(self.busy_ns.values())

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
        """Timeout event: ``cycles`` of busy time on the held core, accounted to ``category``."""
        env = self.env
        ns = cycles * self.ns_per_cycle
        start = env._now
        if start + ns > self.measure_from:
            self.busy_ns[category] += ns - max(0.0, self.measure_from - start)
        return env.timeout(ns)

    def run(self, sm, state: str, category: str, cycles: float):
        """Enter ``state`` and work ``cycles`` in it (the common case of :meth:`work`)."""
        sm.begin(state)
        return self.work(category, cycles)

    def spend(self, sm, state: str, **cycles: float):
        """Enter ``state`` and work there; cycles given per category, one timeout."""
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
        else:
            for category, c in cycles.items():
                ns = c * k
                total += ns
                if start + ns > since:
                    busy[category] += ns - (since - start)
        return env.timeout(total)

    def block(self, sm, event):
        """Generator: give the core up, wait for ``event``, take a core again."""
        self.release(sm)
        value = yield event
        yield from self.take(sm)
        return value

    def put(self, sm, queue, item):
        """Generator: put ``item`` into a store, giving the core up while the store is full.

        With room, the item goes in at once, without a SimPy event."""
        if len(queue.items) >= queue.capacity:
            yield from self.block(sm, queue.put(item, sm))
        else:
            queue.put_now(item, sm)

    def utilization(self, elapsed_ns: float) -> dict[str, float]:
        """Share of the cores' time per category over ``elapsed_ns``, plus ``idle``."""
        total = elapsed_ns * self.n_cores
        if total <= 0:
            return {**dict.fromkeys(CATEGORIES, 0.0), "idle": 1.0}
        out = {c: min(1.0, self.busy_ns[c] / total) for c in CATEGORIES}
        out["idle"] = max(0.0, 1.0 - sum(out.values()))
        return out
