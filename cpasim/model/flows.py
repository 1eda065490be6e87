"""The flows of a scenario with ``[[flows]]`` (:mod:`cpasim.config.flow_tables`).

:func:`build` gives every flow its endpoints and applications, as
:class:`~cpasim.model.system.System` does for identical connections, each with the
``tcp`` and ``workload`` values of its own table (``Config.flow_config``) and the
applications of its kind (:mod:`cpasim.model.flow_kinds`: ``bulk``, ``rpc``,
``ping``).  Flow ``i`` is connection ``c<i>``: its state machines are instance ``i``.

A flow's applications begin ``start`` ns into the run (its connection is set up
at 0, as every connection here).  Each flow counts what it delivered
(:class:`FlowStats`) into the run's :class:`~cpasim.model.app.AppStats` as well, so
the run's goodput is the flows' sum.  When every bulk flow has a size, the run ends
as the last of them completes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cpasim.config import flow_tables as flow_config
from cpasim.model.flow_kinds import flow_kind


class FlowStats:
    """What one flow's applications measured; bytes are counted into ``run`` too."""

    # Slots, as TcpConnection's: with many flows every read meets a cold one.
    __slots__ = ("run", "env", "warmup", "target", "written", "read", "read_measured")
    __slots__ += ("latencies", "trips", "trips_ns", "end_ns", "_on_done")

    def __init__(self, run, *, target: int, on_done) -> None:
        self.run = run
        self.env = run.env
        self.warmup = run.warmup
        self.target = target  # bytes this flow's receiver must read; 0 = no target
        self.written = 0
        self.read = 0
        self.read_measured = 0
        self.latencies: list[float] = []  # round trips begun after the warm-up (ns)
        # Every round trip, warm-up included (a time series' means): count and sum.
        self.trips = 0
        self.trips_ns = 0.0
        self.end_ns: float | None = None  # when a sized flow's receiver had it all
        self._on_done = on_done

    def delivered(self, nbytes: int, conn: str) -> None:
        self.read += nbytes
        if self.env._now >= self.warmup:
            self.read_measured += nbytes
        self.run.delivered(nbytes, conn)
        if self.target and self.end_ns is None and self.read >= self.target:
            self.end_ns = self.env._now
            self._on_done()

    def latency(self, started: float) -> None:
        self.reply(started, self.env._now)

    def reply(self, sent_ns: float, now: float) -> None:
        """A round trip that began at ``sent_ns`` (a call's, or a ping's request) ended."""
        self.trips += 1
        self.trips_ns += now - sent_ns
        if sent_ns >= self.warmup:
            self.latencies.append(now - sent_ns)

    def sent_budget(self, want: int) -> int:
        """Bytes the source may still write (all of ``want`` without a target)."""
        if not self.target:
            return want
        return max(0, min(want, self.target - self.written))


@dataclass
class Flow:
    """One flow of the run."""

    index: int
    table: int  # its [[flows]] table
    kind: str  # bulk | ping | rpc
    cfg: object  # the table's Config (Config.flow_config)
    stats: FlowStats
    start: float
    #: Its TCP connections: the data sender first (tx's end), then the receiver's;
    #: none for ping.
    tcp: list = field(default_factory=list)

    @property
    def conn(self) -> str:
        return f"c{self.index}"

    @property
    def cc(self) -> str | None:
        """The sender's congestion control (None without TCP: a ping)."""
        return self.cfg.tx.tcp.cc if flow_kind(self.kind).tcp else None


def build(system) -> list[Flow]:
    """Every flow of ``system``'s configuration, built and started."""
    cfg = system.cfg
    sized = [
        i
        for i, g in flow_config.expand(cfg.flows)
        if flow_kind(cfg.flows[g].kind).bulk and cfg.flow_config(g).workload.bytes
    ]
    ends_run = flow_config.sized(cfg.flat(), cfg.flows)
    left = [len(sized)]

    def done() -> None:  # a sized bulk flow completed
        left[0] -= 1
        if ends_run and not left[0]:
            system.stats.finish()

    out = []
    for index, table in flow_config.expand(cfg.flows):
        group, fcfg = cfg.flows[table], cfg.flow_config(table)
        kind = flow_kind(group.kind)
        target = fcfg.workload.bytes if kind.bulk else 0
        stats = FlowStats(system.stats, target=target, on_done=done)
        flow = Flow(index, table, group.kind, fcfg, stats, group.start)
        kind.start(system, flow, group)
        out.append(flow)
    return out


# -- what the flows measured, as plain data -----------------------------------------------------
def percentiles(samples, *, mean: bool = False) -> dict | None:
    """p50, p90, p99 (and the mean) of ``samples`` with their count; None if none.

    The percentiles are ``np.percentile``'s (its default, linear interpolation
    between the closest ranks), bit for bit, computed here: numpy spends some 70 us
    on each call, and a run of 1,000 flows makes 2,000 of them."""
    n = len(samples)
    if not n:
        return None
    ranked = sorted(map(float, samples))
    p50, p90, p99 = (_percentile(ranked, q) for q in (0.5, 0.9, 0.99))
    out = {"p50": p50, "p90": p90, "p99": p99}
    if mean:  # numpy's (pairwise) sum, in the samples' order
        out = {"mean": float(np.asarray(samples, dtype=float).mean()), **out}
    out["count"] = n
    return out


def _percentile(ranked: list[float], q: float) -> float:
    """The ``q`` quantile of sorted ``ranked`` as ``np.quantile(ranked, q)`` computes it
    (numpy's ``_quantile`` with ``_lerp``, the same operations in the same order)."""
    n = len(ranked)
    at = (n - 1) * q  # the virtual index
    if at >= n - 1:
        return ranked[-1]
    below = math.floor(at)
    gamma = at - below
    a, b = ranked[below], ranked[below + 1]
    diff = b - a
    return b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma


def jain(values) -> float | None:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all are equal, 1/n when one
    has everything; None without values or when all are 0."""
    xs = [float(v) for v in values]
    square = sum(x * x for x in xs)
    return sum(xs) ** 2 / (len(xs) * square) if xs and square > 0 else None


def result(flow: Flow, *, warmup: float, elapsed: float, losses) -> dict:
    """One flow's entry in a run's ``flows``."""
    stats = flow.stats
    rtts: list[float] = []
    srtts: list[float] = []
    for conn in flow.tcp:
        for t, rtt, srtt in conn.rtt_log or ():
            if t >= warmup:
                rtts.append(rtt)
                srtts.append(srtt)
    entry = {
        "index": flow.index,
        "table": flow.table,
        "kind": flow.kind,
        "cc": flow.cc,
        "start_ns": flow.start,
        "goodput_bps": stats.read_measured * 8e9 / elapsed if elapsed > 0 else 0.0,
        "bytes_measured": stats.read_measured,
        "retransmits": sum(c.sender.retransmits for c in flow.tcp),
        "rtt_ns": percentiles(rtts),
        "srtt_ns": percentiles(srtts),
    }
    causes = losses.by_conn.get(flow.conn)
    if causes:
        entry["retransmit_causes"] = dict(sorted(causes.items()))
    if not flow_kind(flow.kind).bulk:
        entry["latency_ns"] = percentiles(stats.latencies, mean=True)
    elif stats.target:
        entry["completion_ns"] = stats.end_ns
    return entry


def aggregate(entries: list[dict]) -> dict:
    """The run's flows together: goodput, and Jain's index over the bulk flows."""
    bulk = [e["goodput_bps"] for e in entries if flow_kind(e["kind"]).bulk]
    return {
        "flows": len(entries),
        "goodput_bps": sum(e["goodput_bps"] for e in entries),
        "bulk_flows": len(bulk),
        "bulk_goodput_bps": sum(bulk),
        "jain_index": jain(bulk),
    }
