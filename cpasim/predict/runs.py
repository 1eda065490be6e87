"""A traced run and what predictions need from it, kept next to its trace.

Predicting from a trace needs more than the trace: the config it was
recorded with (to tell what a change changes), the run's measured metric (the
prediction scales it), its critical path as predictions see it — PCIe
arbitration order freed, :func:`~cpasim.predict.transforms_table.reference` —
(the prediction divides by its length) and the mean time per entry of every
state (for the table's fixed parts).  :func:`traced_run` simulates and analyses once and writes
them to a *sidecar* ``<trace>.run.json``; :func:`load_run` reads it back and
refuses a trace whose sidecar names another config digest.  ``cpasim run --trace``
writes the sidecar without the analysis (:func:`write_run_record`); the first
prediction from that trace analyses it and completes the sidecar.

Trace and sidecar are a pair bound by the trace's digest (:func:`trace_digest`),
which the sidecar carries as the run that wrote the trace computed it from the
bytes it wrote (``Result.trace_digest``) — never read back from the path, where
another run on the same path may have put its own trace meanwhile.  A sidecar is
published only while the trace at its path still has that digest, an analysis is
recorded only if the trace did not change while it was read, and a reader refuses
any pair whose digests differ: whatever order two runs on one path finish in, a
sidecar never vouches for another run's trace.
"""

from __future__ import annotations

import errno
import itertools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import numpy as np

from cpasim.analysis import AnalysisResult
from cpasim.config import Config
from cpasim.errors import CpasimError, shown
from cpasim.files import check_writable, write_text_atomically
from cpasim.inputs import InputError, open_input, read_bytes
from cpasim.model.workloads import WORKLOADS, workload_kind
from cpasim.predict.bounds import busy, holding
from cpasim.predict.transforms_table import reference, state_active, state_means
from cpasim.predict.window import WINDOW_COMMIT_EVERY, Window, analyses, make_window
from cpasim.progress import note
from cpasim.tracing import open_trace, trace_digest
from cpasim.tracing.records import BEGIN, TraceSource

SIDECAR_FORMAT = "cpasim-run/6"
#: Most critical entries and loops kept in a summary, and the least share listed
#: (after folding instances together; the analysis itself is asked for every name).
TOP = 10
MIN_SHARE = 0.01
_INSTANCE = re.compile(r"#\w+")


def state_entries(source: TraceSource) -> dict[str, int]:
    """``sys:sm:state`` → number of ``begin`` records entering it (display names as the
    analyzer writes them)."""
    counts: dict[tuple[int, int], int] = {}
    for chunk in source.chunks():
        begins = chunk[chunk["op"] == BEGIN]
        if not begins.size:
            continue
        pairs = begins["sm"].astype(np.int64) << 32 | begins["a"].astype(np.int64)
        values, n = np.unique(pairs, return_counts=True)
        for v, c in zip(values.tolist(), n.tolist(), strict=True):
            k = (v >> 32, v & 0xFFFFFFFF)
            counts[k] = counts.get(k, 0) + c
    key = source.key
    out = {}
    for (sm, state), c in counts.items():
        sys, name, inst = key.sms[sm]
        smname = f"{sys}:{name}" if inst == "0" else f"{sys}:{name}#{inst}"
        out[f"{smname}:{key.states[state]}"] = c
    return out


def sidecar_path(trace: Path) -> Path:
    return trace.with_name(trace.name + ".run.json")


def read_sidecar(trace: Path) -> dict | None:
    """What the sidecar of ``trace`` holds, parsed but not checked; None when there is
    none.  Read as every input is (:mod:`cpasim.inputs`): a FIFO or device there is
    refused, a sidecar that is not JSON is one line."""
    side = sidecar_path(Path(trace))
    try:
        return json.loads(read_bytes(side, "run sidecar"))
    except InputError as exc:
        if exc.errno != errno.ENOENT:
            raise
        return None
    except (ValueError, RecursionError) as exc:
        raise CpasimError(f"{side}: unreadable run sidecar ({shown(exc)})") from None


def recorded_ends(trace: Path) -> tuple[str, str] | None:
    """The start and end state machines (``"tx:App"``, ``"rx:App"``) of the run that
    recorded ``trace``, from its sidecar; None without one.  A sidecar that is not
    one, or describes another trace, is refused (its ends would be a guess)."""
    side = sidecar_path(Path(trace))
    data = read_sidecar(trace)
    if data is None:
        return None
    if not isinstance(data, dict) or data.get("format") != SIDECAR_FORMAT:
        raise CpasimError(f"{side}: expected a {SIDECAR_FORMAT} sidecar; give --start and --end")
    if data.get("trace_digest") != trace_digest(trace):
        raise CpasimError(
            f"{side}: describes another trace than {Path(trace).name} (replaced after its run "
            "was recorded); give --start and --end"
        )
    _check_sidecar(data, side)
    result = data["result"]
    return ":".join(result["analysis_start"]), ":".join(result["analysis_end"])


def recorded_conns(trace: Path, start: str, end: str) -> list[str] | None:
    """The connections the run that recorded ``trace`` follows from ``start`` to
    ``end`` when those are its own ends and it does not follow them all (a run with
    ``[[flows]]`` whose pings have no path from tx:App to rx:App: its
    ``analysis_conns``); None otherwise, or without a sidecar of this trace."""
    try:
        data = read_sidecar(trace)
        result = data["result"]
        conns = result.get("analysis_conns")
        ours = (":".join(result["analysis_start"]), ":".join(result["analysis_end"]))
    except (CpasimError, KeyError, TypeError, AttributeError):
        return None  # no sidecar, or not one: the analysis follows every connection
    if conns is None or (start, end) != ours or data.get("trace_digest") != trace_digest(trace):
        return None
    return list(conns)


def metric_of(kind: str) -> tuple[str, bool]:
    """The figure a run of workload ``kind`` is judged by, and whether higher is better:
    a stream's goodput, a request/response workload's mean latency."""
    workload = workload_kind(kind)
    return workload.metric, workload.stream


def metric_value(result: dict) -> float:
    """The run's figure of merit: goodput (bit/s) or mean latency (ns)."""
    name, _ = metric_of(result["workload"])
    if name == "goodput_bps":
        return float(result["goodput_bps"])
    lat = result.get("latency_ns") or {}
    if lat.get("mean") is None:
        raise CpasimError(
            f"the {result['workload']} run completed no request, so it has no latency to "
            "predict from; lengthen sim.duration"
        )
    return float(lat["mean"])


@dataclass(frozen=True)
class PathSummary:
    """One critical path, reduced to what predictions and reports use.

    ``critical_path_ns`` is the effective length: the path's, or the busiest
    shared resource's work (:mod:`cpasim.predict.bounds`) where that is longer;
    then ``bottleneck`` names the resource.
    """

    critical_path_ns: dict[str, float]  # per connection ("" for the whole trace)
    bottleneck: str | None  # most critical sys:sm:state (or edge), or a bounding resource
    share: float  # its share of that path
    most_critical: list[dict]
    loops: list[dict]
    busy_ns: dict[str, float] = field(default_factory=dict)  # resource → work per unit

    def to_json(self) -> dict:
        return {
            "critical_path_ns": self.critical_path_ns,
            "bottleneck": self.bottleneck,
            "share": self.share,
            "most_critical": self.most_critical,
            "loops": self.loops,
            "busy_ns": self.busy_ns,
        }

    @classmethod
    def from_json(cls, d: dict) -> PathSummary:
        return cls(
            d["critical_path_ns"],
            d["bottleneck"],
            d["share"],
            d["most_critical"],
            d["loops"],
            d.get("busy_ns", {}),
        )

    def bounded(self, busy_ns: dict[str, float]) -> PathSummary:
        """This path with every connection's length at least the busiest resource's work."""
        if not busy_ns:
            return self
        resource, work = max(busy_ns.items(), key=lambda kv: (kv[1], kv[0]))
        cps = {c: max(cp, work) for c, cp in self.critical_path_ns.items()}
        if work > max(self.critical_path_ns.values()):
            return PathSummary(cps, resource, 1.0, self.most_critical, self.loops, busy_ns)
        return PathSummary(
            cps, self.bottleneck, self.share, self.most_critical, self.loops, busy_ns
        )


def merge_instances(entries: list[dict]) -> list[dict]:
    """Most critical entries with SM instances folded together (``tx:Link#7:propagate``
    → ``tx:Link:propagate``): one carrier per frame in flight, or one timer per
    countdown, is one resource for the reader and for :func:`diagnose`."""
    merged: dict[str, dict] = {}
    for m in entries:
        name = _INSTANCE.sub("", m["name"])
        acc = merged.setdefault(name, {"name": name, "share": 0.0, "time_ns": 0.0, "wait": 0.0})
        acc["share"] += m["share"]
        acc["time_ns"] += m["time_ns"]
        acc["wait"] += m.get("waiting_ns", 0.0)
    out = []
    for acc in merged.values():
        total = acc["time_ns"] + acc["wait"]
        out.append(
            {
                "name": acc["name"],
                "share": acc["share"],
                "time_ns": acc["time_ns"],
                "waiting_share": acc["wait"] / total if total > 0 else 0.0,
            }
        )
    out.sort(key=lambda d: (-d["share"], d["name"]))
    return out


def summarize(res: AnalysisResult, what: str, cut: dict[str, float] | None = None) -> PathSummary:
    """Reduce an analysis; ``what`` names it in the error raised for a cut path.

    ``cut``: each path's length at the end of the warm-up; lengths are then over
    the measured interval (:mod:`cpasim.predict.window`).  Shares and names stay
    the whole path's.
    """
    paths = {"": res.path} if res.path is not None else dict(res.connections)
    if not paths:
        raise CpasimError(
            f"{what}: no connection's path runs from {res.start} to {res.end} (a run of "
            "ping flows only has none); nothing to predict from"
        )
    cps = {}
    for conn, p in paths.items():
        if not p.reachable or p.critical_path_ns is None:
            which = f" of connection {conn}" if conn else ""
            raise CpasimError(
                f"{what}: the critical path{which} from {res.start} to {res.end} is cut "
                "(the end is not reachable from the start), so no length can be predicted"
            )
        cps[conn] = float(p.critical_path_ns)
    for conn, length in (cut or {}).items():
        if conn in cps:
            cps[conn] -= length
    slowest = paths[max(cps, key=lambda c: (cps[c], c))]
    top = [m for m in merge_instances(slowest.most_critical) if m["share"] > MIN_SHARE][:TOP]
    return PathSummary(
        critical_path_ns=cps,
        bottleneck=top[0]["name"] if top else None,
        share=float(top[0]["share"]) if top else 0.0,
        most_critical=top,
        loops=slowest.loops[:TOP],
    )


def measured_active(res: AnalysisResult, before: AnalysisResult | None) -> dict[str, float]:
    """``sys:sm:state`` → active ns after the warm-up (the whole trace's minus its
    prefix's), for the states that hold a shared resource: what the busy-time
    bounds of a prediction read (:func:`cpasim.predict.bounds.holding`)."""
    active = state_active(res.profile)
    if before is not None:
        for name, ns in state_active(before.profile).items():
            active[name] = active.get(name, 0.0) - ns
    return holding({k: v for k, v in active.items() if v > 0})


def scaled_metric(value: float, higher_is_better: bool, base: PathSummary, new: PathSummary):
    """Saidi 6.1: for a long transfer, bandwidth ∝ 1 / critical-path length.

    Throughput scales by cp_base / cp_new, latency by cp_new / cp_base; with
    several connections the ratio is averaged over them (equal shares).
    """
    ratios = []
    for conn, before in base.critical_path_ns.items():
        after = new.critical_path_ns[conn]
        if after <= 0 or before <= 0:
            raise CpasimError(f"critical path of length {after:g} ns cannot be scaled")
        ratios.append(before / after if higher_is_better else after / before)
    ratio = sum(ratios) / len(ratios)
    out = value * ratio
    if not math.isfinite(out):
        raise CpasimError("the predicted metric is not finite")
    return out


@dataclass(frozen=True)
class WindowRun:
    """The baseline over the tail of its trace that predictions analyse
    (:class:`~cpasim.predict.window.Window`): the path measured from
    ``window.t_measure`` and the active time per state over the same stretch."""

    window: Window
    path: PathSummary
    state_active: dict[str, float]

    def to_json(self) -> dict:
        return {
            **self.window.to_json(),
            "path": self.path.to_json(),
            "state_active": self.state_active,
        }

    @classmethod
    def from_json(cls, d: dict) -> WindowRun:
        return cls(
            Window.from_json(d),
            PathSummary.from_json(d["path"]),
            {k: float(v) for k, v in d["state_active"].items()},
        )


@dataclass(frozen=True)
class TracedRun:
    """A simulated, traced and analysed configuration."""

    cfg: Config
    trace: Path
    result: dict  # Result.to_json()
    path: PathSummary
    state_means: dict[str, float]
    state_active: dict[str, float]  # active ns after the warm-up, resource-holding states
    window: WindowRun | None = None  # the tail predictions analyse, if shorter than all
    state_entries: dict[str, int] = field(default_factory=dict)  # begin records per state

    @property
    def start(self) -> tuple[str, str]:
        return tuple(self.result["analysis_start"])

    @property
    def end(self) -> tuple[str, str]:
        return tuple(self.result["analysis_end"])

    @property
    def metric(self) -> float:
        return metric_value(self.result)


def traced_run(
    cfg: Config, trace: Path, *, progress: bool = False, window: bool = True
) -> TracedRun:
    """Simulate ``cfg`` into ``trace``, analyse the unmodified path, write the sidecar.

    ``window``: also snapshot the tail predictions analyse (:func:`window_span`);
    a run nothing will be predicted from (a re-simulated check) can skip it.
    """
    trace = Path(trace)
    check_sidecar_writable(trace)  # before the run, not after it
    with note(f"simulating into {trace.name}"):
        from cpasim.simulate import simulate  # the model, only when a run is made

        res = simulate(cfg, trace_path=trace, progress=progress)
    return analysed_run(cfg, trace, res.with_end_state(), window=window, digest=res.trace_digest)


def check_sidecar_writable(trace: Path) -> None:
    """Refuse now, with one line, a trace whose sidecar could not be written later
    (its name taken by a directory, a read-only directory)."""
    check_writable(sidecar_path(Path(trace)), "run record")


def write_run_record(cfg: Config, trace: Path, result: dict, digest: str) -> None:
    """The sidecar of a plain traced run (``cpasim run --trace``): its config digest and
    result, without the analysis, which :func:`load_run` adds the first time the trace
    is predicted from (so a run that is never predicted from costs no analysis).
    ``digest``: the trace's, as the run wrote it (``Result.trace_digest``)."""
    side = {"config_digest": cfg.digest, "config": cfg.to_toml(), "result": result}
    _write_sidecar(trace, {**side, "analysed": False}, digest)


def _write_sidecar(trace: Path, side: dict, digest: str) -> None:
    """Write the sidecar bound to ``digest``, the trace's as written or as checked
    (:func:`load_run`): only while the trace at the path still has it, so that a run
    whose trace another run replaced leaves that run's pair alone."""
    if trace_digest(trace) != digest:
        raise CpasimError(
            f"{trace}: replaced or changed while this command used it (another run "
            f"writing the same path?); {sidecar_path(trace).name} is left as it was"
        )
    side = {"format": SIDECAR_FORMAT, "trace_digest": digest, **side}
    write_text_atomically(sidecar_path(trace), json.dumps(side, indent=1, sort_keys=True) + "\n")


def analysed_run(
    cfg: Config, trace: Path, result: dict, *, window: bool = True, digest: str
) -> TracedRun:
    """Analyse the run ``result`` recorded in ``trace`` and write its full sidecar
    (``digest``: the trace's as written, or as checked against its sidecar; the
    analysis is refused if the file changes while it is read)."""
    start, end = tuple(result["analysis_start"]), tuple(result["analysis_end"])
    ref = reference()
    with note(f"analysing the trace {trace.name}"):
        [(analysis, cut, before)] = analyses(
            lambda: open_trace(trace),
            start,
            end,
            [ref],
            cfg.sim.warmup,
            profiles=True,
            conns=result.get("analysis_conns"),
        )
    active = measured_active(analysis, before)
    entries = state_entries(open_trace(trace))
    run = TracedRun(
        cfg=cfg,
        trace=trace,
        result=result,
        path=summarize(analysis, str(trace), cut).bounded(busy(cfg, ref, active)),
        state_means=state_means(analysis.profile, entries),
        state_active=active,
        window=_window_run(cfg, trace, start, end, result.get("analysis_conns"))
        if window
        else None,
        state_entries=entries,
    )
    _write_sidecar(
        trace,
        {
            "config_digest": cfg.digest,
            "config": cfg.to_toml(),
            "result": result,
            "analysed": True,
            "path": run.path.to_json(),
            "state_means": run.state_means,
            "state_entries": run.state_entries,
            "state_active": run.state_active,
            "window": run.window.to_json() if run.window is not None else None,
        },
        digest,
    )
    return run


#: The tail of a trace predictions of a stream analyse: lengths measured over the
#: last WINDOW_MEASURE of the run, after a lead-in of WINDOW_LEAD from the state at
#: its start.  A run whose measured interval is not longer than both, a stream of a
#: fixed size (it may end early) and request/response workloads (a few requests in
#: a window are no sample of their mix) analyse the whole measured interval.
WINDOW_MEASURE = 20e6  # ns
WINDOW_LEAD = 2e6  # ns


def window_span(cfg: Config) -> tuple[float, float] | None:
    """``(t0, t_measure)`` of the window predictions analyse, or ``None`` for all (a
    workload that is no steady stream, :attr:`~cpasim.model.workloads.WorkloadKind.steady`)."""
    if not workload_kind(cfg.workload.kind).steady or cfg.workload.bytes:
        return None
    end = cfg.sim.duration
    t_measure = end - WINDOW_MEASURE
    t0 = t_measure - WINDOW_LEAD
    if t0 <= cfg.sim.warmup:
        return None
    return t0, t_measure


def _window_run(cfg: Config, trace: Path, start, end, conns=None) -> WindowRun | None:
    """The baseline over its window (:func:`window_span`); ``None`` without one."""
    span = window_span(cfg)
    if span is None or not str(trace).endswith(".cpt"):
        return None
    window = make_window(trace, start, end, *span)
    ref = reference()
    with note(f"analysing the tail of {trace.name}"):
        [(res, cut, before)] = analyses(
            lambda: window.source(trace),
            start,
            end,
            [ref],
            window.t_measure,
            profiles=True,
            commit_every=WINDOW_COMMIT_EVERY,
            conns=conns,
        )
    active = measured_active(res, before)
    path = summarize(res, f"{trace} (window)", cut).bounded(busy(cfg, ref, active))
    return WindowRun(window, path, active)


# -- the sidecar's shape ---------------------------------------------------------------
# A sidecar is ours, but a file: an edited or damaged one is refused with the field at
# fault, before any of it is used.  A schema is a type, a tuple of allowed schemas, a
# list [item schema], a dict of fields (extra fields allowed), or ``(dict, value)``
# for a mapping of names to values.  Numbers are finite, and what they measure bounds
# them: times, counts, rates and lengths are never negative, shares lie in [0, 1].
_NUM, _INT, _NONE = "number", "integer", type(None)
_AMOUNT, _COUNT, _SHARE, _POSITIVE = "amount >= 0", "count >= 0", "share", "amount > 0"
_NAMES = (dict, _AMOUNT)
_PATH = {
    "critical_path_ns": _NAMES,
    "bottleneck": (str, _NONE),
    "share": _SHARE,
    "most_critical": [{"name": str, "share": _SHARE, "time_ns": _AMOUNT, "waiting_share": _SHARE}],
    "loops": [{"edge": str, "count": _AMOUNT}],
    "busy_ns": _NAMES,
}
_RESULT = {
    "workload": str,
    "analysis_start": [str],
    "analysis_end": [str],
    "goodput_bps": _AMOUNT,
    "latency_ns": (_NONE, {"mean": (_POSITIVE, _NONE)}),
}
_WINDOW = {
    "t0": _AMOUNT,
    "t_measure": _AMOUNT,
    "sms": _COUNT,
    "origins": [[str]],
    "preamble": [[_INT]],
    "path": _PATH,
    "state_active": _NAMES,
}
_ANALYSED = {
    "result": _RESULT,
    "path": _PATH,
    "state_means": _NAMES,
    "state_entries": (dict, _COUNT),
    "state_active": _NAMES,
    "window": (_NONE, _WINDOW),
}
#: How far a share summed from parts may exceed 1 by rounding.
_SHARE_SLACK = 1e-9


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: What a value of each named schema must be.
_LEAVES = {
    _NUM: _number,
    _AMOUNT: lambda v: _number(v) and v >= 0,
    _POSITIVE: lambda v: _number(v) and v > 0,
    _SHARE: lambda v: _number(v) and 0 <= v <= 1 + _SHARE_SLACK,
    _INT: _integer,
    _COUNT: lambda v: _integer(v) and v >= 0,
}


def _leaf(schema) -> Callable[[object], bool] | None:
    """Whether a value fits ``schema``, where it is one value's (a name or a type)."""
    if isinstance(schema, str):
        return _LEAVES[schema]
    if isinstance(schema, type):
        return lambda v: isinstance(v, schema)
    return None


def _fits(value, schema) -> str | None:
    """Where ``value`` breaks ``schema`` (a dotted field, or ``""`` for itself); None if
    it fits.  The items of a list or a mapping of single values are checked in one
    loop: a sidecar holds thousands (its window's preamble, the states' means)."""
    leaf = _leaf(schema)
    if leaf is not None:
        return None if leaf(value) else ""
    if isinstance(schema, list):
        if not isinstance(value, list):
            return ""
        leaf = _leaf(schema[0])
        if leaf is not None and all(map(leaf, value)):
            return None
        if isinstance(schema[0], list) and (leaf := _leaf(schema[0][0])) is not None:
            rows = all(isinstance(row, list) for row in value)  # a table: one loop
            if rows and all(map(leaf, itertools.chain.from_iterable(value))):
                return None
        for i, item in enumerate(value):
            where = _fits(item, schema[0])
            if where is not None:
                return f"[{i}]{where}"
        return None
    if isinstance(schema, tuple) and schema[:1] == (dict,):
        if not isinstance(value, dict):
            return ""
        leaf = _leaf(schema[1])
        if leaf is not None and all(map(leaf, value.values())):
            return None
        for name, item in value.items():
            if _fits(item, schema[1]) is not None:
                return f".{shown(name, 40)}"
        return None
    if isinstance(schema, tuple):
        return None if any(_fits(value, s) is None for s in schema) else ""
    if not isinstance(value, dict):
        return ""
    for name, field_schema in schema.items():
        if name not in value:
            if name == "busy_ns":  # older analyses have none
                continue
            return f".{name}"
        where = _fits(value[name], field_schema)
        if where is not None:
            return f".{name}{where}"
    return None


def _check_sidecar(data: dict, side: Path) -> None:
    """Refuse a sidecar whose fields are of the wrong type or sense."""
    schema = _ANALYSED if data.get("analysed") is True else {"result": _RESULT}
    where = None if isinstance(data.get("analysed"), bool) else ".analysed"
    where = where or _fits(data, schema)
    result = data.get("result")
    if where is None and result["workload"] not in WORKLOADS:
        where = ".result.workload"
    if where is None and (len(result["analysis_start"]) != 2 or len(result["analysis_end"]) != 2):
        where = ".result.analysis_start"
    window = data.get("window") if data.get("analysed") else None
    if where is None and window is not None:
        if any(len(o) != 3 for o in window["origins"]):
            where = ".window.origins"
        elif any(len(r) != 5 for r in window["preamble"]):
            where = ".window.preamble"
    if where is not None:
        _malformed(side, where)


def _check_window_of(data: dict, side: Path, cfg: Config) -> None:
    """Refuse a checked sidecar (:func:`_check_sidecar`) whose window is not ``cfg``'s:
    the window is the config's (window_span), one elsewhere is not this run's."""
    window = data["window"] if data["analysed"] else None
    if window is not None and (window["t0"], window["t_measure"]) != window_span(cfg):
        _malformed(side, ".window.t0")


def _malformed(side: Path, where: str) -> NoReturn:
    raise CpasimError(
        f"{side}: malformed run sidecar (field {where.lstrip('.')}); record the trace "
        "again with 'cpasim run --trace'"
    )


def read_record(trace: Path) -> dict:
    """The sidecar of ``trace`` (its run's config digest and result, and the analysis
    once made), checked to be a sidecar of this trace as it is now."""
    trace = Path(trace)
    side = sidecar_path(trace)
    if not trace.exists():
        raise CpasimError(f"{trace}: no such trace")
    open_input(trace, "trace").close()  # a FIFO, a device: refused before its sidecar
    data = read_sidecar(trace)
    if data is None:
        raise CpasimError(
            f"{trace}: no {side.name} next to it, so the config and result of the run that "
            "recorded it are unknown; record it with 'cpasim run --trace' or 'cpasim "
            "predict --trace' (which runs the baseline when the trace does not exist yet)"
        )
    if not isinstance(data, dict) or data.get("format") != SIDECAR_FORMAT:
        raise CpasimError(
            f"{side}: expected a {SIDECAR_FORMAT} sidecar (one of an older cpasim, or not "
            "one at all); record the trace again with 'cpasim run --trace'"
        )
    digest = trace_digest(trace)
    if data.get("trace_digest") != digest:
        raise CpasimError(
            f"{side}: describes another trace than {trace.name} (the trace was replaced or "
            "changed after its run was recorded); record it again with 'cpasim run --trace'"
        )
    _check_sidecar(data, side)
    return data


def load_run(cfg: Config, trace: Path) -> TracedRun:
    """The run recorded in ``trace``, checked to belong to ``cfg``."""
    trace = Path(trace)
    data = read_record(trace)
    side = sidecar_path(trace)
    digest = data["trace_digest"]
    if data.get("config_digest") != cfg.digest:
        raise CpasimError(
            f"{trace}: recorded with config digest {shown(data.get('config_digest'))}, but "
            f"the scenario and --set options resolve to {cfg.digest}; predict from a trace "
            "of this configuration (or pass a new --trace path to record one)"
        )
    _check_window_of(data, side, cfg)  # read_record checked the rest
    if not data["analysed"]:
        # Recorded by a plain traced run: analyse it once, keep the analysis beside it.
        return analysed_run(cfg, trace, data["result"], digest=digest)
    try:
        return TracedRun(
            cfg=cfg,
            trace=trace,
            result=data["result"],
            path=PathSummary.from_json(data["path"]),
            state_means={k: float(v) for k, v in data["state_means"].items()},
            state_active={k: float(v) for k, v in data["state_active"].items()},
            window=WindowRun.from_json(data["window"]) if data["window"] is not None else None,
            state_entries={k: int(v) for k, v in data["state_entries"].items()},
        )
    except (KeyError, TypeError, AttributeError, ValueError, OverflowError) as exc:
        raise CpasimError(f"{side}: malformed run sidecar ({shown(exc)})") from None


def carry_run_record(src: Path, dst: Path, digest: str) -> bool:
    """Give ``dst``, a conversion of the trace ``src`` (``trace convert``) written with
    ``digest``, the run record of ``src``: its config digest and result, bound to
    ``dst``.  The analysis is left to be redone (its window refers to the ids of the
    file it was made from).  Nothing is written when ``src`` has no sidecar that
    matches it; returns whether one was written."""
    try:
        data = read_sidecar(Path(src))
    except CpasimError:
        return False
    if (
        not isinstance(data, dict)
        or data.get("format") != SIDECAR_FORMAT
        or data.get("trace_digest") != trace_digest(src)
        or not isinstance(data.get("config_digest"), str)
        or not isinstance(data.get("analysed"), bool)
        or _fits(data, {"result": _RESULT}) is not None
    ):
        return False
    record = {"config_digest": data["config_digest"], "result": data["result"], "analysed": False}
    if isinstance(data.get("config"), str):  # the configuration, for the run's verdict
        record["config"] = data["config"]
    _write_sidecar(Path(dst), record, digest)
    return True


def baseline(cfg: Config, trace: Path | None, workdir: Path, *, progress: bool = False):
    """Reuse ``trace`` when it exists, else record the baseline (into ``trace`` if given)."""
    if trace is not None and Path(trace).exists():
        return load_run(cfg, Path(trace))
    target = Path(trace) if trace is not None else Path(workdir) / "baseline.cpt"
    return traced_run(cfg, target, progress=progress)
