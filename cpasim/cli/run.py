"""``cpasim run``: simulate one scenario and print what it measured."""

from __future__ import annotations

import json
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cpasim import interrupts, runfolder
from cpasim.capture import DEFAULT_SNAPLEN, PcapSpec
from cpasim.cli import app
from cpasim.cli import outputs as outs
from cpasim.config import load_scenario
from cpasim.errors import CpasimError
from cpasim.files import is_stream
from cpasim.predict.runs import analysed_run, write_run_record
from cpasim.progress import activity
from cpasim.verdict import explain, explain_run, idle_line

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
    plan = outs.plan(
        cfg, out=out_dir, overwrite=overwrite, trace=trace, series=series, interval=interval
    )
    if pcap is not None:  # a bare file name goes into the run folder
        pcap = runfolder.artefact_path(plan.out, runfolder.CAPTURE, pcap)
    capture = PcapSpec(pcap, pcap_side, snaplen) if pcap is not None else None
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
        verdict = None
        if explain:
            # Analysed once; the sidecar then holds the analysis predict/validate reuse.
            with activity("cpasim run --explain", progress):
                run = analysed_run(cfg, trace, result.with_end_state(), digest=result.trace_digest)
                verdict = explain_run(run)
        elif trace is not None and not is_stream(trace):
            # What predict/validate need to take this trace as their baseline; bound to
            # the trace as this run wrote it (a stale one left by a failure here, or one
            # beside another run's trace, is refused).  A trace streamed to a device or
            # FIFO is no file to predict from.
            write_run_record(cfg, trace, result.with_end_state(), result.trace_digest)
        out = result.to_json()
        out["scenario"] = str(scenario)
        if verdict is not None:
            out["verdict"] = verdict.to_json()
        for name, path in (("trace", plan.trace), ("series", plan.series), ("pcap", pcap)):
            if path is not None:
                out[name] = str(path)
        # Before a temporary trace goes: the report draws the run's path from it.
        outs.finish(plan, cfg, result, out, trace=trace)
    trace = plan.trace  # the one kept, if any
    if as_json:
        json.dump(out, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
        return
    text = summary(result, cfg, scenario, trace)
    if explain:
        block = verdict.lines(str(scenario), sets or []) if verdict is not None else []
        text += "\n" + "\n".join(block or ["limited by   nothing the analysis recognises"])
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
    lines = [
        f"scenario     {scenario}  (config {r.config_digest})",
        f"workload     {wl.kind}, {wl.connections} connection(s)",
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
    if len(r.goodput_bps_per_connection) > 1:
        per_conn = r.goodput_bps_per_connection.items()
        lines.append("  per conn   " + "  ".join(f"{c} {_si(v, 'b/s')}" for c, v in per_conn))
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
    lines.append(f"retransmits  {r.retransmits}")
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
