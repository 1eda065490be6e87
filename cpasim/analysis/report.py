"""Results of a pass: the critical path and everything aggregated alongside it.

Path-dependent parts (per connection): the length, the listing, the most
critical states, resource loops and slack.  Trace-wide parts: per-SM profile,
per-queue statistics, the connection trace and warnings.

Definitions:

- ``share`` of a name = time it adds to the critical path / path length;
  ``waiting_share`` = its on-path waiting time (edges of weight 0 while the SM
  was blocked) / (its on-path time + that waiting time);
  ``core_lent_share`` = the part of its on-path time during which another state
  machine ran on its core (Saidi's "waiting": the caller of a call served on
  its core, annotations.md ``run``) / its on-path time.
- A **resource loop** edge is an inter-SM edge of the path that goes back to
  an SM the path first reached *before* the SM it leaves (upstream: credits,
  free slots, free cores); ``count`` is how often the path took it.
- **Slack** of a name is the least margin by which one of its edges lost at a
  node of the critical path: at that node the path came from another
  predecessor that was longer by ``slack_ns``, so that one occurrence could
  grow by up to ``slack_ns`` before the path would move through it (a local
  bound: growing several occurrences at once can move the path sooner).
  Names that never competed at a node of the path have no slack (``None``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpasim.analysis.criticalpath import CriticalPathPass
from cpasim.analysis.pathlog import CP, Summary, decode, finish
from cpasim.tracing.records import TraceKey

INITIAL_STATE = "(initial)"


class Names:
    """Display names for SM, state, queue ids and edge codes."""

    def __init__(self, key: TraceKey):
        self.key = key
        self._cache: dict[int, str] = {}

    def base_sm(self, sm: int) -> str:
        sys, name, _inst = self.key.sms[sm]
        return f"{sys}:{name}"

    def base_queue(self, q: int) -> str:
        qsys, name, _qinst = self.key.queues[q]
        return f"{qsys}:{name}"

    def edge_base(self, code: int) -> str:
        """The edge's name with SM and queue instances left out (``sys:sm:state``)."""
        kind, x, y, z = decode(code)
        if kind == "start":
            return f"{self.base_sm(x)}:(start)"
        if kind == "intra":
            return f"{self.base_sm(x)}:{self.state(y)}"
        via = "link" if z == 0 else self.base_queue(z - 1)
        return f"{self.base_sm(x)}->{self.base_sm(y)}[{via}]"

    def sm(self, sm: int) -> str:
        sys, name, inst = self.key.sms[sm]
        return f"{sys}:{name}" if inst == "0" else f"{sys}:{name}#{inst}"

    def state(self, index: int) -> str:
        return INITIAL_STATE if index == 0 else self.key.states[index - 1]

    def queue(self, q: int) -> str:
        qsys, name, qinst = self.key.queues[q]
        return f"{qsys}:{name}" if qinst == "0" else f"{qsys}:{name}#{qinst}"

    def edge(self, code: int) -> str:
        name = self._cache.get(code)
        if name is None:
            kind, x, y, z = decode(code)
            if kind == "start":
                name = f"{self.sm(x)}:(start)"
            elif kind == "intra":
                name = f"{self.sm(x)}:{self.state(y)}"
            else:
                via = "link" if z == 0 else self.queue(z - 1)
                name = f"{self.sm(x)}->{self.sm(y)}[{via}]"
            self._cache[code] = name
        return name


@dataclass
class PathResult:
    """The critical path of one connection (or of the whole trace)."""

    conn: str | None
    reachable: bool
    critical_path_ns: float | None
    start_ns: float | None
    end_ns: float | None
    elapsed_ns: float | None
    most_critical: list[dict] = field(default_factory=list)
    loops: list[dict] = field(default_factory=list)
    edges: list[dict] = field(default_factory=list)
    edge_count: int = 0
    slack: list[dict] = field(default_factory=list)
    state_totals: dict[str, float] = field(default_factory=dict)
    #: Times the path took each name (same keys as ``state_totals``).
    state_visits: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "conn": self.conn,
            "reachable": self.reachable,
            "critical_path_ns": self.critical_path_ns,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "elapsed_ns": self.elapsed_ns,
            "most_critical": self.most_critical,
            "loops": self.loops,
            "slack": self.slack,
            "edge_count": self.edge_count,
            "edges_listed": len(self.edges),
            "edges": self.edges,
        }


@dataclass
class AnalysisResult:
    """What :func:`cpasim.analysis.analyze` returns.

    With one connection (or none) in the trace the path fields describe it and
    ``connections`` is empty; with several, ``connections`` maps each id to a
    :class:`PathResult` and the top-level path fields are ``None``/empty.
    """

    start: str
    end: str
    transforms: list[str]
    records: int
    path: PathResult | None
    connections: dict[str, PathResult]
    warnings: list[str]
    profile: list[dict]
    queues: list[dict]
    connection_trace: dict[str, list[str]]
    pass_state: CriticalPathPass = field(repr=False, default=None)
    #: With ``analyze_many(mark=t)``: path length (ns) per path, keyed like the
    #: paths ("" for the single one), at the last end-SM record before ``t``; 0
    #: where no path reached one yet.
    lengths_at_mark: dict[str, float] | None = field(repr=False, default=None)

    # Flat access for the common single-connection case.
    @property
    def critical_path_ns(self):
        return self.path.critical_path_ns if self.path else None

    @property
    def start_ns(self):
        return self.path.start_ns if self.path else None

    @property
    def end_ns(self):
        return self.path.end_ns if self.path else None

    @property
    def elapsed_ns(self):
        return self.path.elapsed_ns if self.path else None

    @property
    def reachable(self) -> bool:
        if self.path is not None:
            return self.path.reachable
        return all(p.reachable for p in self.connections.values())

    @property
    def most_critical(self):
        return self.path.most_critical if self.path else []

    @property
    def loops(self):
        return self.path.loops if self.path else []

    @property
    def edges(self):
        return self.path.edges if self.path else []

    @property
    def slack(self):
        return self.path.slack if self.path else []

    #: The tables :meth:`to_frame` can make, and their columns.
    TABLES = {
        "most_critical": (
            "name",
            "share",
            "time_ns",
            "waiting_ns",
            "waiting_share",
            "core_lent_ns",
            "core_lent_share",
            "visits",
            "slack_ns",
        ),
        "loops": ("edge", "count"),
        "edges": None,
        "slack": None,
        "profile": None,
        "queues": None,
    }

    def to_dict(self) -> dict:
        """Everything as plain data (what ``cpasim analyze --json`` prints)."""
        return self.to_json()

    def _repr_html_(self) -> str:
        """The critical path's length and its most critical names (notebooks)."""
        from cpasim.results import html_table, metric_text

        rows: list[tuple[str, object]] = [("records", self.records)]
        paths = {"": self.path} if self.path is not None else self.connections
        for conn, path in paths.items():
            where = f" (connection {conn})" if conn else ""
            if not path.reachable:
                rows.append((f"critical path{where}", "end not reachable from start"))
                continue
            rows.append(
                (
                    f"critical path{where}",
                    f"{metric_text('time', path.critical_path_ns)} of "
                    f"{metric_text('time', path.elapsed_ns)} elapsed",
                )
            )
            rows += [(m["name"], f"{m['share']:.1%} of the path") for m in path.most_critical[:5]]
            rows += [(f"loop ×{lp['count']}", lp["edge"]) for lp in path.loops[:1]]
        if self.warnings:
            rows.append(("warnings", len(self.warnings)))
        title = f"critical path {self.start} -> {self.end}"
        return html_table(
            title + (f" [{', '.join(self.transforms)}]" if self.transforms else ""), rows
        )

    def to_frame(self, table: str = "most_critical"):
        """One table as a pandas DataFrame: ``most_critical`` (default), ``loops``,
        ``edges`` (the path's listing), ``slack``, ``profile`` or ``queues``."""
        from cpasim.errors import CpasimError
        from cpasim.results import frame

        if table not in self.TABLES:
            raise CpasimError(f"to_frame({table!r}): expected one of {', '.join(self.TABLES)}")
        return frame(getattr(self, table), self.TABLES[table])

    def to_json(self) -> dict:
        out: dict = {
            "start": self.start,
            "end": self.end,
            "transforms": self.transforms,
            "records": self.records,
        }
        if self.path is not None:
            out.update(self.path.to_json())
        else:
            out["connections"] = {c: p.to_json() for c, p in self.connections.items()}
        out["warnings"] = self.warnings
        out["profile"] = self.profile
        out["queues"] = self.queues
        out["connection_trace"] = self.connection_trace
        return out


def path_result(
    p: CriticalPathPass,
    names: Names,
    conn: str | None,
    end: list | None,
    min_share: float,
    top_slack: int = 10,
) -> PathResult:
    """Summarise the path that ends at ``end`` (``[t, node, sm]`` or None)."""
    if end is None or end[1] is None:
        return PathResult(conn, False, None, None, end[0] if end else None, None)
    t_end, node, _sm = end
    total: Summary = finish(node)
    cp = node[CP]
    start_t = total.start_t
    by_name = _by_name(total, names)
    most = _most_critical(by_name, cp, min_share)
    loop_counts: dict[str, int] = {}
    for c, n in total.loops.items():
        name = names.edge_base(c)
        loop_counts[name] = loop_counts.get(name, 0) + n
    loops = [
        {"edge": e, "count": n}
        for e, n in sorted(loop_counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    least: dict[str, float] = {}
    for c, m in total.slack.items():
        name = names.edge_base(c)
        if m < least.get(name, float("inf")):
            least[name] = m
    slack = [
        {"name": n, "slack_ns": m} for n, m in sorted(least.items(), key=lambda kv: (kv[1], kv[0]))
    ][:top_slack]
    edges = [
        {"name": names.edge(code), "cumulative_ns": cum, "increment_ns": inc, "waiting": wait > 0}
        for code, cum, inc, wait in total.listing
    ]
    return PathResult(
        conn=conn,
        reachable=True,
        critical_path_ns=cp,
        start_ns=start_t,
        end_ns=t_end,
        elapsed_ns=t_end - start_t,
        most_critical=most,
        loops=loops,
        edges=edges,
        edge_count=total.count,
        slack=slack,
        state_totals={n: v[0] for n, v in by_name.items()},
        state_visits={n: v[2] for n, v in by_name.items()},
    )


def _by_name(total: Summary, names: Names) -> dict[str, list]:
    """The path's totals per edge name: ``[time, waiting, visits, least slack,
    core lent]``."""
    by_name: dict[str, list] = {}
    for code, (time, waiting, visits, lent) in total.edges.items():
        if code < 0:
            continue
        agg = by_name.setdefault(names.edge_base(code), [0.0, 0.0, 0, None, 0.0])
        agg[0] += time
        agg[1] += waiting
        agg[2] += visits
        agg[4] += lent
        s = total.slack.get(code)
        if s is not None and (agg[3] is None or s < agg[3]):
            agg[3] = s
    return by_name


def _most_critical(by_name: dict[str, list], cp: float, min_share: float) -> list[dict]:
    """The edge names with more than ``min_share`` of the path's length ``cp``, longest first."""
    ranked = sorted(by_name.items(), key=lambda kv: (-kv[1][0], kv[0]))
    most = []
    for name, (time, waiting, visits, slack, lent) in ranked:
        share = time / cp if cp > 0 else 0.0
        if share <= min_share:
            continue
        most.append(
            {
                "name": name,
                "share": share,
                "time_ns": time,
                "waiting_ns": waiting,
                "waiting_share": waiting / (time + waiting) if time + waiting > 0 else 0.0,
                "core_lent_ns": lent,
                "core_lent_share": lent / time if time > 0 else 0.0,
                "visits": visits,
                "slack_ns": slack,
            }
        )
    return most


def profile(p: CriticalPathPass, names: Names) -> list[dict]:
    """Per SM: time per state, active and waiting, and how often it was entered.

    Covers every record of the trace, not only the critical path.
    """
    entered: dict[tuple[int, int], int] = {}
    for sm, _frm, _state, to, visits, _time in p.transition_counts():
        entered[(sm, to)] = entered.get((sm, to), 0) + visits
    # States with time or entries, per SM (most of the SM x state table is empty).
    used: dict[int, set[int]] = {}
    for sm, si in entered:
        used.setdefault(sm, set()).add(si)
    for table in (p.s_act, p.s_wait):
        for sm, times in enumerate(table):
            used.setdefault(sm, set()).update(si for si, x in times.items() if x != 0)
    out = []
    for sm in range(len(p.s_last)):
        if p.s_last[sm] is None:
            continue  # only ever named as a link target
        states = []
        acts, waits = p.s_act[sm], p.s_wait[sm]
        for si in sorted(used.get(sm, set()) | {0}):
            act, wait = acts.get(si, 0.0), waits.get(si, 0.0)
            entries = entered.get((sm, si), 1 if si == 0 else 0)
            if act or wait or entries:
                states.append(
                    {
                        "state": names.state(si),
                        "active_ns": act,
                        "waiting_ns": wait,
                        "entered": entries,
                    }
                )
        states.sort(key=lambda d: (-d["active_ns"], d["state"]))
        active = sum(d["active_ns"] for d in states)
        waiting = sum(d["waiting_ns"] for d in states)
        out.append(
            {"sm": names.sm(sm), "active_ns": active, "waiting_ns": waiting, "states": states}
        )
    out.sort(key=lambda d: d["sm"])
    return out


def queue_stats(p: CriticalPathPass, names: Names) -> list[dict]:
    out = []
    for q in p.queues:
        span = (q.occ_t - q.occ_t0) if q.occ_t is not None else 0.0
        enq_span = (q.enq_t1 - q.enq_t0) if q.enq_t0 is not None else 0.0
        out.append(
            {
                "queue": names.queue(q.qid),
                "capacity": q.cap if q.cap >= 0 else None,
                "held_at_end": q.tail - q.head,
                "mean_occupancy": q.occ_area / span if span > 0 else float(q.tail - q.head),
                "max_occupancy": q.occ_max,
                "waits_empty": q.waits_empty,
                "waited_empty_ns": q.wait_empty_ns,
                "waits_full": q.waits_full,
                "waited_full_ns": q.wait_full_ns,
                "comm_latency_mean_ns": q.comm_sum / q.comm_n if q.comm_n else 0.0,
                "comm_latency_max_ns": q.comm_max,
                "arrivals": q.arrivals,
                "arrival_rate_per_s": (q.arrivals - 1) / enq_span * 1e9 if enq_span > 0 else None,
            }
        )
    out.sort(key=lambda d: d["queue"])
    return out


def connection_trace(p: CriticalPathPass, names: Names) -> dict[str, list[str]]:
    key = p.key
    return {
        names.sm(sm): sorted(key.conns[c] for c in conns)
        for sm, conns in enumerate(p.s_conns)
        if conns
    }


def warning_lines(p: CriticalPathPass) -> list[str]:
    out = []
    for count, first, message in p.warnings.values():
        times = "" if count == 1 else f"; {count} times"
        out.append(f"{message} (record {first}{times})")
    return out
