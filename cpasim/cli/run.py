"""``cpasim run``: simulate one scenario and print what it measured."""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cpasim import interrupts, run_outputs
from cpasim.cli import app
from cpasim.cli import outputs as outs
from cpasim.config import load_scenario
from cpasim.errors import CpasimError
from cpasim.files import is_stream
from cpasim.model.flow_kinds import flow_kind
from cpasim.pcap_spec import DEFAULT_SNAPLEN
from cpasim.predict.runs import analysed_run, write_run_record
from cpasim.progress import activity
from cpasim.verdict import explain, explain_flows, explain_run, flow_lines, idle_line

if TYPE_CHECKING:
    from cpasim.simulate import Result


def simulate(cfg, **kwargs):
    """:func:`cpasim.simulate.simulate`, imported when a run is made: the model is not
    loaded when the command line starts (every command pays for what it imports)."""
    from cpasim.simulate import simulate as run

    return run(cfg, **kwargs)


@app.command("run")
def run_cmd(
    scenario: Annotated[Path, typer.Argument(help="Scenario file (.toml).")],
    sets: Annotated[
        list[str] | None,
        typer.Option("--set", help="KEY=VALUE: override a parameter (repeatable)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
    trace: Annotated[
        Path | None,
        typer.Option("--trace", help="Write the annotation trace here (.cpt or .jsonl)."),
    ] = None,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Progress bar on stderr for long runs.")
    ] = True,
    out_dir: outs.OutOpt = None,
    overwrite: outs.OverwriteOpt = False,
    series: outs.SeriesOpt = None,
    interval: outs.IntervalOpt = None,
    pcap: Annotated[
        Path | None,
        typer.Option("--pcap", help="Write the frames on the link here (pcap, ns timestamps)."),
    ] = None,
    pcap_side: Annotated[
        str,
        typer.Option(
            "--pcap-side", help="Where the capture taps the link: beside tx's or rx's NIC."
        ),
    ] = "tx",
    snaplen: Annotated[
        int, typer.Option("--snaplen", help="Bytes of each frame the capture keeps.")
    ] = DEFAULT_SNAPLEN,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="Also trace the run (into --trace, or a temporary file), find its critical "
            "path, and say what limits it, what to change and what the change would buy.",
        ),
    ] = False,
) -> None:
    """Simulate SCENARIO and report goodput, utilisation, CPU split, latency, drops and
    what limits the run."""
    cfg = load_scenario(scenario, sets=sets or [])
    plan = run_outputs.plan(
        cfg,
        out=out_dir,
        overwrite=overwrite,
        trace=trace,
        series=series,
        interval=interval,
        pcap=pcap,
        pcap_side=pcap_side,
        snaplen=snaplen,
    )
    capture = plan.capture
    pcap = capture.path if capture is not None else None
    if explain and plan.trace is not None and is_stream(plan.trace):
        raise CpasimError(
            f"--explain: reads the trace back, and --trace {plan.trace} is a device or "
            "pipe; give a file, or leave --trace out (a temporary one is used)"
        )
    with ExitStack() as stack:
        trace = plan.trace
        if explain and trace is None:  # the analysis needs a trace: a temporary one
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="cpasim-explain-"))
            trace = Path(tmp) / "run.cpt"
        result = _simulate(cfg, trace, progress, plan.interval_ns, capture)
        verdict, flow_verdicts = None, []
        if explain:
            # Analysed once; the sidecar then holds the analysis predict/validate reuse.
            with activity("cpasim run --explain", progress):
                traced = analysed_run(
                    cfg, trace, result.with_end_state(), digest=result.trace_digest
                )
                verdict = explain_run(traced)
                flow_verdicts = explain_flows(traced)  # each flow's, from its own path
        elif trace is not None and not is_stream(trace):
            # What predict/validate need to take this trace as their baseline; bound to
            # the trace as this run wrote it (a stale one left by a failure here, or one
            # beside another run's trace, is refused).  A trace streamed to a device or
            # FIFO is no file to predict from.
            write_run_record(cfg, trace, result.with_end_state(), result.trace_digest)
        out = run_outputs.result_json(result, plan, scenario, verdict, flow_verdicts)
        # Before a temporary trace goes: the report draws the run's path from it.
        run_outputs.finish(plan, cfg, result, out, trace=trace)
    trace = plan.trace  # the one kept, if any
    if as_json:
        json.dump(out, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
        return
    text = summary(result, cfg, scenario, trace)
    if explain:
        block = verdict.lines(str(scenario), sets or []) if verdict is not None else []
        text += "\n" + "\n".join(block or ["limited by   nothing the analysis recognises"])
        if flow_verdicts:
            text += "\n" + "\n".join(flow_lines(flow_verdicts))
    else:
        text += "\n" + limited_line(cfg, result)
    if pcap is not None:
        text += (
            f"\ncapture      {pcap}  (beside {pcap_side}'s NIC; cpasim calibrate inspect {pcap})"
        )
    typer.echo(text)
    for name, path in (("series", plan.series), ("run folder", plan.out)):
        if path is not None:
            typer.echo(f"{name:12} {path}")


def _simulate(cfg, trace, progress, interval_ns, capture) -> Result:
    outs.warn_if_huge(cfg, trace.suffix.lower() if trace is not None else None)
    try:
        return simulate(cfg, trace_path=trace, progress=progress, series=interval_ns, pcap=capture)
    except KeyboardInterrupt as stop:
        # The files asked for keep what they held (and an earlier trace its sidecar).
        kept = getattr(stop, "kept", None)
        said = f"; the trace recorded so far is in {kept}" if kept is not None else ""
        if trace is not None and kept is None:
            said = f"; no trace written ({trace} is as it was)"
        interrupts.report(f"cpasim: run interrupted, no result{said}")
        raise typer.Exit(130) from None


def _pct(x: float) -> str:
    return f"{100 * x:5.1f}%"


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def _ns(value: float) -> str:
    for factor, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if abs(value) >= factor:
            return f"{value / factor:.4g} {unit}"
    return f"{value:.4g} ns"


def summary(r: Result, cfg, scenario: Path, trace: Path | None) -> str:
    """The human-readable report of one run."""
    wl = cfg.workload
    measured = r.sim_time_ns - cfg.sim.warmup
    what = f"{wl.kind}, {wl.connections} connection(s)"
    if r.flows is not None:
        what = _flows_what(cfg)
    lines = [
        f"scenario     {scenario}  (config {r.config_digest})",
        f"workload     {what}",
    ]
    if r.window_empty:
        lines.append(
            f"goodput      - (nothing measured: the run ended at {_ns(r.sim_time_ns)}, "
            f"before the {_ns(cfg.sim.warmup)} warm-up did)"
        )
    else:
        lines.append(
            f"goodput      {_si(r.goodput_bps, 'b/s')}  ({_si(r.bytes_measured, 'B')} read in "
            f"{_ns(measured)} after {_ns(cfg.sim.warmup)} warm-up)"
        )
    if r.flows is not None:
        lines += _flow_lines(r, cfg)
    elif len(r.goodput_bps_per_connection) > 1:
        lines.append("  per conn   " + _per_connection(r.goodput_bps_per_connection))
    lines += [
        "link         "
        + "  ".join(f"{k.replace('_to_', '->')} {_pct(v)}" for k, v in r.link_utilization.items()),
    ]
    if r.bottleneck_utilization is not None:
        lines.append(
            "bottleneck   "
            + "  ".join(
                f"{k.replace('_to_', '->')} {_pct(v)}" for k, v in r.bottleneck_utilization.items()
            )
        )
    for host, bus in r.io_bus_utilization.items():
        lines.append(f"I/O bus {host:4} up {_pct(bus['up'])}  down {_pct(bus['down'])}")
    if r.memory_utilization is not None:
        lines.append(
            "memory       " + "  ".join(f"{h} {_pct(v)}" for h, v in r.memory_utilization.items())
        )
    from cpasim.model.cpu import CATEGORIES

    for host, cpu in r.cpu_utilization.items():
        parts = "  ".join(f"{c} {_pct(cpu[c])}" for c in (*CATEGORIES, "idle"))
        lines.append(f"CPU {host:8} {parts}")
    if r.latency_ns is not None:
        lat = r.latency_ns
        if lat["count"]:
            lines.append(
                f"latency      mean {_ns(lat['mean'])}  p50 {_ns(lat['p50'])}  "
                f"p99 {_ns(lat['p99'])}  ({lat['count']} samples)"
            )
        else:
            lines.append("latency      no request completed after the warm-up")
    drops = {k: v for k, v in r.drops.items() if v}
    lines.append(
        "drops        " + (", ".join(f"{k} {v}" for k, v in drops.items()) if drops else "none")
    )
    lines.append(f"retransmits  {r.retransmits}{_causes(r.retransmit_causes)}")
    rate = r.events / r.wall_s if r.wall_s > 0 else 0.0
    lines.append(
        f"simulated    {_ns(r.sim_time_ns)}, {r.events} events, wall {r.wall_s:.2f} s "
        f"({_si(rate, 'events/s')})"
    )
    lines += [f"warning      {w}" for w in r.warnings]
    if trace is not None:
        lines.append(
            f"trace        {trace}  (analyze: cpasim analyze {trace} "
            f"--start {':'.join(r.analysis_start)} --end {':'.join(r.analysis_end)})"
        )
    return "\n".join(lines)


#: Connections (or flows) listed one by one; beyond, a summary (or one line per table).
LISTED = 8


def _numeric(name: str) -> tuple:
    """``c10`` after ``c9``: connection names sorted by their number."""
    head = name.rstrip("0123456789")
    tail = name[len(head) :]
    return (head, int(tail) if tail else -1)


def _per_connection(goodputs: dict[str, float]) -> str:
    """Each connection's goodput, or beyond :data:`LISTED` of them their spread and
    Jain's fairness index."""
    if len(goodputs) <= LISTED:
        names = sorted(goodputs, key=_numeric)
        return "  ".join(f"{c} {_si(goodputs[c], 'b/s')}" for c in names)
    values = sorted(goodputs.values())
    from cpasim.model.flows import jain  # the run has loaded the model already

    index = jain(values)
    return (
        f"min {_si(values[0], 'b/s')}  median {_si(float(statistics.median(values)), 'b/s')}  "
        f"max {_si(values[-1], 'b/s')}  ({len(values)} connections, Jain's index "
        + (f"{index:.3f})" if index is not None else "-)")
    )


def _causes(causes: dict[str, int] | None) -> str:
    """`` (bottleneck_queue_full 50, spurious_timeout 2)``: what the retransmissions answered."""
    if not causes:
        return ""
    return " (" + ", ".join(f"{k} {v}" for k, v in causes.items()) + ")"


def _flows_what(cfg) -> str:
    """``3 flows: 2 bulk, 1 ping``."""
    kinds: dict[str, int] = {}
    for g in cfg.flows:
        kinds[g.kind] = kinds.get(g.kind, 0) + g.count
    n = cfg.flow_count
    return f"{n} flow{'s' if n != 1 else ''}: " + ", ".join(f"{v} {k}" for k, v in kinds.items())


def _quantiles(q: dict | None, unit: str = "rtt") -> str:
    if not q:
        return f"{unit} -"
    return f"{unit} p50 {_ns(q['p50'])}  p90 {_ns(q['p90'])}  p99 {_ns(q['p99'])}"


def _flow_line(e: dict) -> str:
    """One flow: its kind and congestion control, then what it measured."""
    head = f"{e['kind']} {e['cc']}" if e["cc"] else e["kind"]
    parts = [f"{head:12}"]
    kind = flow_kind(e["kind"])
    if not kind.tcp:
        lat = e.get("latency_ns")
        parts.append(_quantiles(lat) + (f"  ({lat['count']} replies)" if lat else ""))
    else:
        parts.append(f"{_si(e['goodput_bps'], 'b/s'):>11}")
        parts.append(f"retransmits {e['retransmits']}")
        if not kind.bulk:
            lat = e.get("latency_ns")
            parts.append(
                _quantiles(lat, kind.latency) + (f"  ({lat['count']} calls)" if lat else "")
            )
        else:
            parts.append(_quantiles(e["rtt_ns"], kind.latency))
        if e.get("completion_ns") is not None:
            parts.append(f"done at {_ns(e['completion_ns'])}")
    return "  ".join(parts)


def _table_line(entries: list[dict]) -> str:
    """The flows of one [[flows]] table together: goodput spread, Jain's index,
    retransmits, and the median over the flows of their round-trip percentiles."""
    e = entries[0]
    head = f"{e['kind']} {e['cc']}" if e["cc"] else e["kind"]
    parts = [f"{head:12}"]
    kind = flow_kind(e["kind"])
    key = "rtt_ns" if kind.bulk else "latency_ns"
    qs = [x[key] for x in entries if x.get(key)]
    if kind.tcp:
        values = sorted(x["goodput_bps"] for x in entries)
        from cpasim.model.flows import jain

        index = jain(values)
        parts.append(
            f"goodput min {_si(values[0], 'b/s')} "
            f"median {_si(float(statistics.median(values)), 'b/s')} "
            f"max {_si(values[-1], 'b/s')}"
            + (f" (Jain's index {index:.3f})" if index is not None else "")
        )
        parts.append(f"retransmits {sum(x['retransmits'] for x in entries)}")
    if qs:
        median = {p: float(statistics.median([q[p] for q in qs])) for p in ("p50", "p90", "p99")}
        parts.append(kind.latency + " median of flows' " + _quantiles(median, "").strip())
    return "  ".join(parts)


def _flow_lines(r: Result, cfg) -> list[str]:
    """The flows, one line each, or one line per [[flows]] table beyond :data:`LISTED`."""
    agg = r.flows_aggregate
    lines = []
    if agg["bulk_flows"] > 1 and agg["jain_index"] is not None:
        lines.append(
            f"fairness     Jain's index {agg['jain_index']:.3f} over the "
            f"{agg['bulk_flows']} bulk flows"
        )
    if len(r.flows) <= LISTED:
        lines += [f"  flow {e['index']:<6}{_flow_line(e)}" for e in r.flows]
        return lines
    for table, group in enumerate(cfg.flows):
        first = sum(g.count for g in cfg.flows[:table])
        entries = r.flows[first : first + group.count]
        name = f"{first}" if group.count == 1 else f"{first}-{first + group.count - 1}"
        lines.append(f"  flows {name:<5}{_table_line(entries)}")
    return lines


def limited_line(cfg, result: Result) -> str:
    """What limits an untraced run, when one resource is saturated or it stalled; else
    the line saying nothing is, pointing to ``--explain``."""
    v = explain(cfg, result.with_end_state())
    if v is None:
        return f"limited by   {idle_line(result.to_json())}"
    text = f"limited by   {v.resource}  [{v.kind}]"
    if v.change:
        text += f"\n  change     {v.change_text()}  (--explain predicts what it buys)"
    return text
