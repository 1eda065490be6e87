"""Fully annotated synthetic traces from a tiny discrete-event pipeline.

Independent of the cpasim model: a handful of processes written as Python
generators, FIFO queues (bounded or not) and credit pools, annotated exactly
as annotations.md prescribes (``wait_*`` before every block, ``enq``/``deq``
when the units move, a fixed wake-up latency per queue that becomes the
communication latency).  Such traces satisfy the identity invariant, which
makes them the oracle for the analyzer's tests and the workload of its bench.

A process yields commands::

    ("begin", state) | ("delay", ns) | ("get", queue, n) | ("put", queue, n)
    | ("resize", queue, n) | ("identify", conn)
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from cpasim.tracing.records import (
    BEGIN,
    DECLARE,
    DEQ,
    ENQ,
    FLAG_CONN_FLOW,
    IDENTIFY,
    RECORD_DTYPE,
    RESIZE,
    WAIT_EMPTY,
    WAIT_FULL,
    TraceKey,
    TraceSource,
)


class SimQueue:
    """A FIFO of ``count`` units; ``capacity=None`` is unbounded."""

    def __init__(self, qid: int, capacity: int | None, wake_ns: float):
        self.qid = qid
        self.capacity = capacity
        self.wake_ns = wake_ns
        self.count = 0
        self.getters: deque = deque()
        self.putters: deque = deque()


class _Proc:
    __slots__ = ("sm", "gen", "pending", "waiting")

    def __init__(self, sm: int, gen):
        self.sm = sm
        self.gen = gen
        self.pending = None
        self.waiting = False


class MiniSim:
    """Runs generator processes and emits their annotation records in time order."""

    def __init__(self, key: TraceKey | None = None):
        self.key = key or TraceKey()
        self.t = 0.0
        self.rows: list[tuple] = []
        self._heap: list = []
        self._seq = 0
        self._queues: list[SimQueue] = []

    # -- building ---------------------------------------------------------------

    def queue(
        self,
        owner: int,
        qsys: str,
        name: str,
        capacity: int | None = None,
        wake_ns: float = 0.0,
        conn_flow: bool = True,
    ) -> SimQueue:
        qid = self.key.intern_queue(qsys, name)
        q = SimQueue(qid, capacity, wake_ns)
        self._queues.append(q)
        flags = FLAG_CONN_FLOW if conn_flow else 0
        self.rows.append((self.t, DECLARE, flags, owner, qid, -1 if capacity is None else capacity))
        return q

    def sm(self, sys: str, name: str, inst: str = "0") -> int:
        return self.key.intern_sm(sys, name, inst)

    def process(self, sm: int, gen) -> None:
        self._schedule(0.0, _Proc(sm, gen))

    def _schedule(self, delay: float, proc: _Proc) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (self.t + delay, self._seq, proc))

    # -- running ----------------------------------------------------------------

    def run(self, until: float = float("inf"), max_rows: int | None = None) -> Iterator[list]:
        """Run; yield the emitted rows whenever ``max_rows`` have accumulated."""
        heap = self._heap
        while heap:
            t, _, proc = heap[0]
            if t > until:
                break
            heapq.heappop(heap)
            self.t = t
            self._step(proc)
            if max_rows is not None and len(self.rows) >= max_rows:
                rows, self.rows = self.rows, []
                yield rows
        if self.rows:
            rows, self.rows = self.rows, []
            yield rows

    def _step(self, proc: _Proc) -> None:
        rows = self.rows
        key = self.key
        sm = proc.sm
        while True:
            cmd = proc.pending
            if cmd is None:
                try:
                    cmd = next(proc.gen)
                except StopIteration:
                    return
            proc.pending = None
            kind = cmd[0]
            if kind == "delay":
                self._schedule(cmd[1], proc)
                return
            if kind == "begin":
                rows.append((self.t, BEGIN, 0, sm, key.intern_state(cmd[1]), 0))
            elif kind == "get":
                q, n = cmd[1], cmd[2]
                if q.count >= n:
                    q.count -= n
                    rows.append((self.t, DEQ, 0, sm, q.qid, n))
                    proc.waiting = False
                    self._wake(q.putters, 0.0)
                else:
                    if not proc.waiting:
                        rows.append((self.t, WAIT_EMPTY, 0, sm, q.qid, n))
                        proc.waiting = True
                    q.getters.append(proc)
                    proc.pending = cmd
                    return
            elif kind == "put":
                q, n = cmd[1], cmd[2]
                if q.capacity is None or q.count + n <= q.capacity:
                    q.count += n
                    rows.append((self.t, ENQ, 0, sm, q.qid, n))
                    proc.waiting = False
                    self._wake(q.getters, q.wake_ns)
                else:
                    if not proc.waiting:
                        rows.append((self.t, WAIT_FULL, 0, sm, q.qid, n))
                        proc.waiting = True
                    q.putters.append(proc)
                    proc.pending = cmd
                    return
            elif kind == "resize":
                q, n = cmd[1], cmd[2]
                q.count = n
                rows.append((self.t, RESIZE, 0, sm, q.qid, n))
                self._wake(q.getters, q.wake_ns)
            elif kind == "identify":
                rows.append((self.t, IDENTIFY, 0, sm, key.intern_conn(cmd[1]), 0))
            else:
                raise ValueError(f"unknown command {cmd!r}")

    def _wake(self, waiters: deque, delay: float) -> None:
        while waiters:
            self._schedule(delay, waiters.popleft())


# -- a network-like pipeline ----------------------------------------------------


@dataclass(frozen=True)
class PipelineSpec:
    """Sender app → socket (credit window) → stages … → receiver app, credits back.

    ``stages``: number of middle stages (each a state machine with a bounded
    input ring of ``ring`` slots when ``ring`` > 0); ``window``: credits the
    sender holds (0 = no credit loop); ``work_ns``: mean per-item work of each
    stage (exponentially distributed, seeded); ``wake_ns``: wake-up latency of
    every queue; ``units``: units per item on the data queues.
    """

    items: int = 1000
    stages: int = 4
    ring: int = 8
    window: int = 16
    work_ns: float = 100.0
    wake_ns: float = 5.0
    units: int = 1
    seed: int = 1
    conn: str | None = "1"


def _draws(rng: np.random.Generator, mean: float, block: int = 1024) -> Iterator[float]:
    while True:
        yield from rng.exponential(mean, size=block).tolist()


def build_pipeline(spec: PipelineSpec, sim: MiniSim | None = None) -> MiniSim:
    if 0 < spec.ring < spec.units:
        raise ValueError(f"ring of {spec.ring} slots cannot take items of {spec.units} units")
    sim = sim or MiniSim()
    n_stage = spec.stages
    # One random stream per process, drawn in blocks: the trace is a pure function
    # of the spec, and memory does not grow with the number of items.
    work = [_draws(np.random.default_rng([spec.seed, i]), spec.work_ns) for i in range(n_stage + 2)]
    app = sim.sm("tx", "App")
    stage_sms = [sim.sm("tx" if i < n_stage // 2 else "rx", f"Stage{i}") for i in range(n_stage)]
    sink = sim.sm("rx", "App")
    data = [
        sim.queue(
            app if i == 0 else stage_sms[i - 1],
            "tx" if i <= n_stage // 2 else "rx",
            f"Q{i}",
            capacity=(spec.ring if spec.ring > 0 and i > 0 else None),
            wake_ns=spec.wake_ns,
        )
        for i in range(n_stage + 1)
    ]
    credits = None
    if spec.window > 0:
        credits = sim.queue(app, "tx", "Window", wake_ns=spec.wake_ns, conn_flow=False)
    u = spec.units

    def sender():
        if spec.conn is not None:
            yield ("identify", spec.conn)
        if credits is not None:
            yield ("resize", credits, spec.window)
        for _ in range(spec.items):
            yield ("begin", "write")
            yield ("delay", next(work[0]))
            if credits is not None:
                yield ("begin", "wait window")
                yield ("get", credits, 1)
            yield ("begin", "send")
            yield ("put", data[0], u)
        yield ("begin", "done")

    def stage(i):
        for _ in range(spec.items):
            yield ("begin", "idle")
            yield ("get", data[i], u)
            yield ("begin", "process")
            yield ("delay", next(work[i + 1]))
            yield ("begin", "push")
            yield ("put", data[i + 1], u)
        yield ("begin", "done")

    def receiver():
        for _ in range(spec.items):
            yield ("begin", "idle")
            yield ("get", data[n_stage], u)
            yield ("begin", "consume")
            yield ("delay", next(work[n_stage + 1]))
            if credits is not None:
                yield ("begin", "ack")
                yield ("put", credits, 1)
        yield ("begin", "done")

    sim.process(app, sender())
    for i, sm in enumerate(stage_sms):
        sim.process(sm, stage(i))
    sim.process(sink, receiver())
    return sim


class SyntheticSource(TraceSource):
    """A trace generated on the fly (constant memory) by ``build(MiniSim)``."""

    def __init__(
        self, build: Callable[[MiniSim], MiniSim], name: str = "<synthetic>", chunk: int = 65536
    ):
        self._build = build
        self.name = name
        self.key = TraceKey()
        self.chunk = chunk

    def chunks(self) -> Iterator[np.ndarray]:
        sim = self._build(MiniSim())
        self.key = sim.key
        for rows in sim.run(max_rows=self.chunk):
            yield np.array(rows, dtype=RECORD_DTYPE)


def pipeline_source(spec: PipelineSpec, chunk: int = 65536) -> SyntheticSource:
    return SyntheticSource(
        lambda sim: build_pipeline(spec, sim), name=f"<pipeline {spec}>", chunk=chunk
    )


# -- two loops that part at the start and meet only at the end --------------------


def build_parted_loops(rounds: int, sim: MiniSim | None = None) -> MiniSim:
    """``tx:App`` hands one unit each to ``tx:Loop1`` and ``tx:Loop2``, which then
    work ``rounds`` rounds apart (neither ever waits on the other) and hand one
    unit each to ``rx:App``: the shape of two self-clocked halves of a window,
    whose paths share nothing between the start and the end."""
    sim = sim or MiniSim()
    app, sink = sim.sm("tx", "App"), sim.sm("rx", "App")
    loops = [sim.sm("tx", f"Loop{i}") for i in (1, 2)]
    into = [sim.queue(app, "tx", f"L{i}", wake_ns=1.0) for i in (1, 2)]
    out = sim.queue(loops[0], "rx", "E", wake_ns=1.0)

    def sender():
        yield ("begin", "send")
        yield ("delay", 5.0)
        for q in into:
            yield ("put", q, 1)
        yield ("begin", "done")

    def loop(i):
        yield ("begin", "idle")
        yield ("get", into[i], 1)
        for _ in range(rounds):
            yield ("begin", "a")
            yield ("delay", 10.0 + i)
            yield ("begin", "b")
            yield ("delay", 7.0 - i)
        yield ("put", out, 1)
        yield ("begin", "done")

    def receiver():
        yield ("begin", "idle")
        yield ("get", out, 2)
        yield ("begin", "done")

    sim.process(app, sender())
    for i, sm in enumerate(loops):
        sim.process(sm, loop(i))
    sim.process(sink, receiver())
    return sim


def parted_loops_source(rounds: int, chunk: int = 65536) -> SyntheticSource:
    return SyntheticSource(
        lambda sim: build_parted_loops(rounds, sim), name=f"<parted loops x{rounds}>", chunk=chunk
    )
