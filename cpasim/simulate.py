"""Run one scenario: build the system, drive SimPy in slices, collect the metrics.

:func:`simulate` is the one entry point (``cpasim run``, sweeps and calibration
call it).  The run is driven in slices of simulated time (for the progress bar
and to take the warm-up snapshot) by stepping SimPy's event queue directly
(:meth:`~cpasim.model.environment.Kernel.run_until`), so slicing adds no events and
never reorders the model's own.  With
``workload.bytes`` > 0 the run ends the moment the receiving application has
read them all (or when nothing is left to happen).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
from simpy.core import StopSimulation

from cpasim import progress as activity
from cpasim.config import rules
from cpasim.errors import CpasimError
from cpasim.files import check_writable, write_error
from cpasim.model import flows
from cpasim.model.environment import Kernel, pending
from cpasim.model.flow_kinds import flow_kind
from cpasim.model.system import System
from cpasim.model.workloads import workload_kind
from cpasim.pcap_spec import PcapSpec
from cpasim.stall import Stall
from cpasim.tracing import NULL_TRACER, TRACE_SUFFIXES, Tracer, write_trace, write_trace_digested
from cpasim.tracing.columnar import CptWriter
from cpasim.units import TIME, human

#: Slices per run with a fixed duration; runs with a byte target use SLICE_NS.
SLICES = 50
SLICE_NS = 1e6
#: A run with a byte target stops here whatever happens (the sim.duration bound).
MAX_SIM_NS = 1000e9
#: Objects made during a run before the cycle collector looks at them (_collector_aside).
RUN_GC_THRESHOLD = 1_000_000
#: Runs shorter than this (wall seconds) never show a progress bar.
PROGRESS_AFTER_S = activity.PROGRESS_AFTER_S


def _internal(**keywords):
    """A field of the run's objects, not of its figures: in no JSON."""
    return field(default=None, repr=False, compare=False, metadata={"json": False}, **keywords)


def _when_set(default=None, *, key: str | None = None, shown: str | None = None, **keywords):
    """A field :meth:`Result.to_json` writes only when it is set (not None, False or an
    empty list), so an ordinary run's JSON and a sweep's columns stay as they were;
    ``key``/``shown``: a flag written as ``{key: shown}``."""
    meta = {"json": "when set", "key": key, "shown": shown}
    if "default_factory" not in keywords:
        keywords["default"] = default
    return field(metadata=meta, **keywords)


@dataclass
class Result:
    """The metrics of one run; :meth:`to_json` is the machine-readable form, written
    from the fields themselves: a new figure is declared here once."""

    goodput_bps: float
    goodput_bps_per_connection: dict[str, float]
    link_utilization: dict[str, float]
    io_bus_utilization: dict[str, dict[str, float]]
    cpu_utilization: dict[str, dict[str, float]]
    latency_ns: dict[str, float] | None
    drops: dict[str, int]
    retransmits: int
    sim_time_ns: float
    events: int
    wall_s: float
    config_digest: str
    bytes_delivered: int
    bytes_measured: int
    frames: dict[str, int]
    workload: str
    analysis_start: tuple[str, str] = ("tx", "App")
    analysis_end: tuple[str, str] = ("rx", "App")
    #: The connections the run's analysis follows from start to end; None: every one
    #: (a ping flow's runs from its own tx:Ping to itself: :mod:`cpasim.predict.flow_paths`).
    analysis_conns: list[str] | None = _when_set()
    #: Busy share of each bottleneck (``tx_to_rx``, ``rx_to_tx``); None without one.
    bottleneck_utilization: dict[str, float] | None = _when_set()
    #: Busy share of each host's memory (``memory.bandwidth``); None when none is modelled.
    memory_utilization: dict[str, float] | None = _when_set()
    #: Retransmissions by cause (:mod:`cpasim.model.losses`); None without any.
    retransmit_causes: dict[str, int] | None = _when_set()
    #: With ``[[flows]]``: one entry per flow (:func:`cpasim.model.flows.result`), and
    #: the flows together (:func:`cpasim.model.flows.aggregate`); None without.
    flows: list[dict] | None = _when_set()
    flows_aggregate: dict | None = _when_set()
    #: Set by :func:`cpasim.run`: the configuration simulated, and the trace recorded
    #: (its file, or the in-memory :class:`~cpasim.tracing.records.TraceSource`).
    config: object = _internal()
    trace: object = _internal()
    #: The ``trace_digest`` of the trace file this run wrote, taken from the bytes it
    #: wrote (:func:`cpasim.tracing.trace_digest`); None without one.
    trace_digest: str | None = _internal()
    #: The time series (:class:`~cpasim.series.Sampler`) when one was asked for.
    series: object = _internal()
    #: The run ended before the warm-up did: no figure is measured (goodput 0 says nothing).
    window_empty: bool = _when_set(False, key="window", shown="empty")
    #: A run with a byte target stopped before the receiver read them all.
    transfer_incomplete: bool = _when_set(False, key="transfer", shown="incomplete")
    #: Why a stream delivered nothing or stopped delivering (:class:`cpasim.stall.Stall`).
    stall: object = _when_set(repr=False, compare=False)
    #: One sentence per condition above, for people.
    warnings: list[str] = _when_set(default_factory=list)
    #: Where the run stood when it stopped (:meth:`~cpasim.model.system.System.end_state`):
    #: what :mod:`cpasim.verdict` reads; not part of :meth:`to_json`.
    end_state: dict | None = _internal()

    def to_dict(self) -> dict:
        """The metrics as plain data (what ``cpasim run --json`` prints)."""
        return self.to_json()

    def _repr_html_(self) -> str:
        """The run's main figures as a small table (notebooks)."""
        from cpasim.results import html_table, metric_text

        rows: list[tuple[str, object]] = [
            ("workload", self.workload),
            ("goodput", metric_text("goodput_bps", self.goodput_bps)),
        ]
        if self.latency_ns is not None and self.latency_ns.get("count"):
            lat = self.latency_ns
            rows.append(
                (
                    "latency mean / p99",
                    f"{metric_text('latency', lat['mean'])} / {metric_text('latency', lat['p99'])}",
                )
            )
        rows += [
            (f"link {k.replace('_to_', '->')} busy", f"{v:.1%}")
            for k, v in self.link_utilization.items()
        ]
        rows += [
            (f"CPU {h} busy", f"{1 - cpu.get('idle', 0.0):.1%}")
            for h, cpu in self.cpu_utilization.items()
        ]
        drops = {k: v for k, v in self.drops.items() if v}
        rows += [
            ("drops", ", ".join(f"{k} {v}" for k, v in drops.items()) or "none"),
            ("retransmits", self.retransmits),
            ("simulated", metric_text("time", self.sim_time_ns)),
        ]
        rows += [("warning", w) for w in self.warnings]
        return html_table(f"cpasim run (config {self.config_digest})", rows)

    def to_json(self) -> dict:
        out = {}
        for f in fields(self):
            how = f.metadata.get("json", "always")
            value = getattr(self, f.name)
            unset = value is None or value is False or (isinstance(value, list) and not value)
            if how is False or (how == "when set" and unset):
                continue
            if f.metadata.get("shown") is not None:
                out[f.metadata["key"]] = f.metadata["shown"]
            elif hasattr(value, "to_json"):
                out[f.name] = value.to_json()
            else:
                out[f.name] = list(value) if isinstance(value, tuple | list) else value
        return out

    def with_end_state(self) -> dict:
        """:meth:`to_json` with the run's end state: what a verdict is made from."""
        return {**self.to_json(), "end_state": self.end_state}


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a run that records a trace.  ``kept``: where the trace recorded
    so far was kept (a partial file beside the one asked for), or None; the file
    asked for keeps what it held."""

    def __init__(self, kept: Path | None):
        super().__init__()
        self.kept = kept


def _stop_trace(tracer, writer, path: Path, keep: bool) -> Path | None:
    """Close the trace of a run that stopped early: keep what was recorded as a
    partial file (``keep``) and return where, or drop it.  Nothing replaces ``path``."""
    try:
        if writer is not None:
            if not keep:
                writer.abandon()
                return None
            writer.keep_partial()
            tracer.close()
            return writer.written
        tracer.close()
        return write_trace(tracer.source(), path, partial=True) if keep else None
    except (KeyboardInterrupt, OSError, CpasimError):  # Ctrl-C again, or a full disk
        if writer is not None:
            writer.abandon()
        return None


def simulate(
    cfg,
    *,
    tracer=None,
    trace_path=None,
    progress: bool = False,
    series=None,
    pcap: PcapSpec | None = None,
) -> Result:
    """Simulate ``cfg``; record the annotation trace into ``tracer`` or ``trace_path``,
    and the frames on the link into the capture ``pcap`` asks for (:mod:`cpasim.capture`).

    ``tracer`` may be a :class:`~cpasim.tracing.Tracer` made for any environment
    (it is bound to this run's) or a callable ``env -> Tracer``.  A tracer made
    here for ``trace_path`` is closed at the end; a given one is flushed.  The file
    at ``trace_path`` is replaced only when the run succeeds; on Ctrl-C the trace
    recorded so far is kept beside it as ``X.partial.cpt`` and :class:`Interrupted`
    says where.
    ``series``: a sample interval in ns to record a time series
    (:mod:`cpasim.series`), then ``result.series`` is its
    :class:`~cpasim.series.Sampler`; None records none and changes nothing.
    """
    wall0 = time.perf_counter()
    env = Kernel()
    writer = None  # the .cpt file this run writes, when it writes one
    if trace_path is not None:
        trace_path = Path(trace_path)
        suffix = trace_path.suffix.lower()
        if suffix not in TRACE_SUFFIXES:
            raise CpasimError(
                f"{trace_path}: unknown trace format {suffix or '(no extension)'!r}; "
                f"expected one of {', '.join(TRACE_SUFFIXES)}"
            )
        # Either way the file at trace_path is replaced only once the run succeeded.
        if suffix == ".cpt":
            writer = CptWriter(trace_path)
            tracer = Tracer(env, writer)
        else:  # JSON Lines: recorded in memory, written at the end
            check_writable(trace_path, "trace file")
            tracer = Tracer.in_memory(env)
    elif tracer is None:
        tracer = NULL_TRACER
    elif callable(tracer) and not isinstance(tracer, Tracer):
        tracer = tracer(env)
    else:
        tracer.env = env
    tap = None
    try:
        with _collector_aside() as built:
            system = System(cfg, env, tracer)
            if pcap is not None:
                from cpasim.capture import PcapTap

                tap = PcapTap(system, pcap)
            runner = _Runner(env, system, cfg, progress, wall0)
            if series is not None:
                from cpasim.series import Sampler

                runner.sampler = Sampler(system, series)
            built()
            runner.run()
    except BaseException as exc:
        if tap is not None:
            tap.discard()
        if trace_path is None:
            raise
        interrupted = isinstance(exc, KeyboardInterrupt)
        kept = _stop_trace(tracer, writer, trace_path, keep=interrupted)
        if interrupted:
            raise Interrupted(kept) from None
        if isinstance(exc, OSError):  # the trace could not be written (a full disk)
            raise write_error(trace_path, exc, "trace file") from None
        raise
    else:
        if tap is not None:
            tap.close()
    digest = None
    if trace_path is not None:
        try:
            tracer.close()
            if writer is None:
                digest = write_trace_digested(tracer.source(), trace_path)[1]
            else:
                digest = writer.digest
        except KeyboardInterrupt:
            if writer is not None:
                writer.abandon()
            raise Interrupted(None) from None
        except OSError as exc:
            if writer is not None:
                writer.abandon()
            raise write_error(trace_path, exc, "trace file") from None
    else:
        tracer.flush()
    result = runner.result(time.perf_counter() - wall0)
    result.trace_digest = digest
    if runner.sampler is not None:
        runner.sampler.finish(runner.end_ns)
        result.series = runner.sampler
    return result


@contextmanager
def _collector_aside() -> Iterator[Callable[[], None]]:
    """Build and run with the cycle collector out of the way; call what this yields
    once the system is built, before running it.

    No collection while the system is built: all of it lives as long as the run.
    Once built, it is left out of every collection (``gc.freeze``) until the run
    ends: a system holds some forty objects per connection, every full collection
    would walk them all again, and collections come with every few thousand objects
    made, so a run of 10,000 connections spent three quarters of its time in them.
    (Turned back on before the freeze, the collector walked the whole young system
    once at its first allocation.)

    The run itself makes no cyclic garbage (its events, packets and segments go with
    their last reference), yet a young collection every 700 objects made reads the
    headers of the thousands of old objects the young ones point to: with 1,000
    connections these had left the cache every time, a sixth of the run's CPU time.
    So during the run the collector waits for :data:`RUN_GC_THRESHOLD` objects (a
    bound on what a model that did make cycles could leave), and what lived through
    the run is set aside with the system at its end: both go to the oldest
    generation together, collected with the system once nothing refers to it,
    rather than walked young once more."""
    enabled, threshold = gc.isenabled(), gc.get_threshold()
    gc.disable()

    def built() -> None:
        gc.freeze()
        gc.set_threshold(RUN_GC_THRESHOLD, *threshold[1:])
        if enabled:
            gc.enable()

    try:
        yield built
    finally:
        gc.freeze()
        gc.set_threshold(*threshold)
        gc.unfreeze()
        if enabled:
            gc.enable()


class _Runner:
    def __init__(self, env, system, cfg, progress, wall0) -> None:
        self.env = env
        self.system = system
        self.cfg = cfg
        self.progress = progress
        self.wall0 = wall0
        self.warm: dict | None = None
        self.end_ns = 0.0
        self.sampler = None  # a cpasim.series.Sampler when a time series is recorded

    def _run_until(self, t: float) -> None:
        """Process every event before time ``t`` (or until the byte target is met).

        Stepping the queue directly (rather than ``env.run(until=...)``) adds no
        event of its own: pausing between two steps cannot reorder anything."""
        env = self.env
        sampler = self.sampler
        if sampler is not None:  # samples are taken in the pauses between events
            while sampler.next_ns <= t:
                at = sampler.next_ns
                if not env.run_until(at):
                    return  # stopped: the byte target is met
                sampler.sample(at)
        if not env.run_until(t):
            return  # stopped: the byte target is met
        if env._queue:  # paused, not finished: the clock stands at the slice's end
            env.advance(t)

    def _snapshot(self) -> dict:
        s = self.system
        return {
            "link": s.link_stats.snapshot(),
            "bus": {h: host.bus.stats.snapshot() for h, host in _hardware(s).items()},
            "bottleneck": {b.name: b.stats.busy_ns for b in s.bottlenecks},
            "memory": {h: m.busy_ns for h, m in self._memories().items()},
        }

    def run(self) -> None:
        env, cfg, stats = self.env, self.cfg, self.system.stats
        sized = self.system.sized
        horizon = MAX_SIM_NS if sized else cfg.sim.duration
        step = SLICE_NS if sized else cfg.sim.duration / SLICES
        stats.done.callbacks.append(StopSimulation.callback)
        bar = None
        try:
            warm = cfg.sim.warmup
            if warm > 0:
                self._run_until(min(warm, horizon))
            self.warm = self._snapshot()
            t = env.now
            while not stats.done.triggered and t < horizon:
                if not env._queue:
                    break  # nothing left to happen
                t = min(t + step, horizon)
                self._run_until(t)
                if stats.done.processed:
                    break
                if self.progress and time.perf_counter() - self.wall0 > PROGRESS_AFTER_S:
                    self.progress = False  # asked once: a bar, or none off a terminal
                    bar = _Progress.on_terminal(cfg, horizon if not sized else None)
                if bar is not None:
                    bar.update(env.now, stats)
        finally:
            if bar is not None:
                bar.close()
        self.end_ns = stats.end_ns if stats.end_ns is not None else env.now

    def _memories(self) -> dict:
        """Host → its modelled memory (``memory.bandwidth``), for the hosts that have one."""
        return {h: host.memory for h, host in self.system.hosts.items() if host.memory is not None}

    def result(self, wall_s: float) -> Result:
        s, cfg, env = self.system, self.cfg, self.env
        warm = cfg.sim.warmup
        elapsed = max(0.0, self.end_ns - warm)
        stats = s.stats
        scheduled = next(env._eid)
        processed = scheduled - pending(env)
        latencies = np.asarray(stats.latencies, dtype=float)
        kind = workload_kind(cfg.workload.kind)
        latency = None
        if not kind.stream:
            latency = (
                {
                    "mean": float(latencies.mean()),
                    "p50": float(np.percentile(latencies, 50)),
                    "p99": float(np.percentile(latencies, 99)),
                    "count": int(latencies.size),
                }
                if latencies.size
                else {"mean": None, "p50": None, "p99": None, "count": 0}
            )
        start, end = kind.ends
        warnings = rules.unread(cfg.flat())
        window_empty = self.end_ns <= warm
        if window_empty:
            warnings.append(
                f"measurement window empty: the run ended at {human(self.end_ns, TIME)}, "
                f"before the {human(warm, TIME)} warm-up did; nothing was measured "
                "(lower sim.warmup)"
            )
        incomplete = s.sized and stats.end_ns is None
        if incomplete:
            why = (
                f"the {human(MAX_SIM_NS, TIME)} bound on a sized run"
                if self.end_ns >= MAX_SIM_NS
                else "nothing was left to happen"
            )
            target = sum(f.stats.target for f in s.flows) if s.flows else cfg.workload.bytes
            warnings.append(
                f"transfer incomplete: {stats.read} of {target} B read when the "
                f"run stopped at {human(self.end_ns, TIME)} ({why})"
            )
        flow_entries = [
            flows.result(f, warmup=warm, elapsed=elapsed, losses=s.losses) for f in s.flows
        ]
        end_state = s.end_state()
        frames = {
            name: d.frames - self.warm["link"][name]["frames"]
            for name, d in s.link_stats.directions.items()
        }
        result = Result(
            goodput_bps=stats.read_measured * 8e9 / elapsed if elapsed > 0 else 0.0,
            goodput_bps_per_connection={
                conn: n * 8e9 / elapsed if elapsed > 0 else 0.0
                for conn, n in sorted(stats.measured_by_conn.items())
            },
            link_utilization=s.link_stats.utilization(elapsed, self.warm["link"]),
            io_bus_utilization={
                h: host.bus.stats.utilization(elapsed, self.warm["bus"][h])
                for h, host in _hardware(s).items()
            },
            cpu_utilization={h: host.cpu.utilization(elapsed) for h, host in _hardware(s).items()},
            latency_ns=latency,
            drops=s.drops(),
            retransmits=s.retransmits(),
            sim_time_ns=float(self.end_ns),
            events=int(processed),
            wall_s=wall_s,
            config_digest=cfg.digest,
            bytes_delivered=int(stats.read),
            bytes_measured=int(stats.read_measured),
            frames=frames,
            workload=kind.name,
            analysis_start=start,
            analysis_end=end,
            bottleneck_utilization={
                b.name: (b.stats.busy_ns - self.warm["bottleneck"][b.name]) / elapsed
                if elapsed > 0
                else 0.0
                for b in s.bottlenecks
            }
            or None,
            memory_utilization={
                h: m.utilization(elapsed, self.warm["memory"][h])
                for h, m in self._memories().items()
            }
            or None,
            window_empty=window_empty,
            transfer_incomplete=incomplete,
            warnings=warnings,
            retransmit_causes=dict(sorted(s.losses.causes.items())) or None,
            flows=flow_entries or None,
            analysis_conns=_tcp_conns(s.flows),
            flows_aggregate=flows.aggregate(flow_entries) if flow_entries else None,
            end_state=end_state,
        )
        # No silent zero: a stream that stopped delivering says why.
        result.stall = Stall.of(cfg, result.with_end_state())
        if result.stall is not None:
            warnings.append(result.stall.sentence)
        return result


def _tcp_conns(flows) -> list[str] | None:
    """The flows' TCP connections, the run's analysis follows, when some flow has none
    (a ping's path ends on its own application: :mod:`cpasim.predict.flow_paths`)."""
    tcp = [f.conn for f in flows if flow_kind(f.kind).tcp]
    return tcp if len(tcp) < len(flows) else None


def _hardware(system) -> dict:
    """Host -> host, of the hosts with a CPU and a bus to report: not an ideal one
    (``host.detail``), which has neither."""
    return {h: host for h, host in system.hosts.items() if host.bus is not None}


class _Progress:
    """A rich progress bar on stderr: simulated time, or bytes for a sized run."""

    @classmethod
    def on_terminal(cls, cfg, horizon: float | None) -> _Progress | None:
        """The bar when stderr is a terminal; None (nothing drawn) in a file or pipe."""
        console = activity.terminal_console()
        return cls(cfg, horizon, console) if console is not None else None

    def __init__(self, cfg, horizon: float | None, console) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.sized = horizon is None
        total = cfg.workload.bytes if self.sized else horizon
        what = "bytes read" if self.sized else "simulated time"
        self.bar = Progress(
            TextColumn(f"cpasim run ({what})"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task = self.bar.add_task("run", total=total)
        activity.suspend()  # one live display at a time: a command's spinner steps aside
        self.bar.start()

    def update(self, now: float, stats) -> None:
        self.bar.update(self.task, completed=stats.read if self.sized else now)

    def close(self) -> None:
        self.bar.stop()
        activity.resume()
