"""``cpasim calibrate``: read measurements of real systems (``inspect``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from cpasim.cli import app
from cpasim.errors import CpasimError
from cpasim.files import write_text_atomically
from cpasim.protocol import DEFAULT_L2_OVERHEAD

if TYPE_CHECKING:  # the readers (dpkt, numpy) are imported when a command runs
    from cpasim.calibrate.inspection import Distribution, FlowReport

calibrate_app = typer.Typer(
    help="Measurements of real systems: read them, inspect captures (bottleneck, RTT, windows).",
    no_args_is_help=True,
)
app.add_typer(calibrate_app, name="calibrate")


@calibrate_app.command("inspect")
def inspect_cmd(
    capture: Path = typer.Argument(..., help="pcap or pcapng file of a TCP (or UDP) transfer."),
    flow: str = typer.Option(
        None, "--flow", help="Flow to analyse: index from the listing, or ADDR:PORT of one end."
    ),
    side: str = typer.Option(
        None,
        "--side",
        help="Where the capture was taken: tx (beside the data's sender) or rx (beside "
        "its receiver). Default: told by the handshake, timestamp echoes or packet timing.",
    ),
    l2_overhead: int = typer.Option(
        DEFAULT_L2_OVERHEAD,
        "--l2-overhead",
        min=0,
        help="Bytes per frame beyond the IP packet that the bottleneck carries "
        "(14: what a Linux qdisc counts; 38: Ethernet wire incl. FCS, preamble, gap).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the full report as JSON."),
) -> None:
    """Figures a capture tells about the path (bottleneck rate, RTT, MSS, ACKs, windows),
    and what limited the transfer."""
    from cpasim.calibrate.inspection import inspect_capture
    from cpasim.calibrate.pcap import read_capture

    cap = read_capture(capture)
    report = inspect_capture(cap, flow=flow, l2_overhead=l2_overhead, side=side)
    _warn_cut_short(cap)
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2, sort_keys=True))
    else:
        typer.echo(format_report(report))


def _warn_cut_short(cap) -> None:
    """A capture that ends inside a record is read up to it, as tcpdump and Wireshark do,
    and the cut is said on stderr as well as in the report."""
    if cap.cut_short is not None:
        typer.echo(f"cpasim: warning: {cap.path}: {cap.cut_short}", err=True)


@calibrate_app.command("show")
def show_cmd(
    measurement: Path = typer.Argument(
        ..., help="pcap/pcapng capture, iperf3 --json report, or microbenchmark CSV."
    ),
) -> None:
    """Print what cpasim reads from a measurement file, as JSON (checks that it is usable)."""
    typer.echo(json.dumps(read_measurement(measurement), indent=2, sort_keys=True))


def read_measurement(path: Path) -> dict:
    """A measurement file's contents as plain data; the kind is told by the file's content."""
    from cpasim.calibrate.iperf import read_iperf
    from cpasim.calibrate.microbench import read_microbench
    from cpasim.calibrate.pcap import head_bytes, is_capture, read_capture

    head = head_bytes(path)
    if is_capture(head):
        cap = read_capture(path)
        _warn_cut_short(cap)
        return {
            "kind": "capture",
            "path": cap.path,
            "format": cap.format,
            "linktype": cap.linktype,
            "snaplen": cap.snaplen,
            "packets": len(cap.packets),
            "skipped": cap.skipped,
            "cut_short": cap.cut_short,
        }
    if head.lstrip()[:1] == b"{":
        return {"kind": "iperf3", **read_iperf(path).to_json()}
    table = read_microbench(path)
    return {
        "kind": "microbench",
        "path": table.path,
        "metrics": table.metrics,
        "rows": [{"size_bytes": r.size_bytes, **r.values, **r.labels} for r in table.rows],
    }


@calibrate_app.command("fit")
def fit_cmd(
    scenario: Path = typer.Argument(..., help="Scenario TOML to start from."),
    measurements: list[str] = typer.Argument(
        ...,
        help="Without --params: one capture and optionally its iperf3 --json report. "
        "With --params: captures or iperf3 reports, each optionally with the conditions "
        "it was measured under: FILE@link.rate=20Mbps,tcp.rmem=64KiB",
    ),
    params: str = typer.Option(
        None,
        "--params",
        help="Comma-separated keys to fit by least squares, skipping the evidence step. "
        "Default: set what the capture determines, then fit what remains.",
    ),
    out: Path = typer.Option(..., "--out", help="Where to write the calibrated scenario."),
    sets: list[str] = typer.Option([], "--set", help="Override KEY=VALUE before fitting."),
    max_simulations: int = typer.Option(
        None,
        "--max-simulations",
        min=2,
        help="Simulation budget (default 24 without --params, 60 with).",
    ),
    side: str = typer.Option(
        None,
        "--side",
        help="Without --params: where the capture was taken, tx (beside the data's "
        "sender) or rx (beside its receiver), if the capture cannot tell.",
    ),
) -> None:
    """Set what a capture determines, then fit what remains so that simulated goodput
    matches the measurement over the span the capture measured."""
    from cpasim.calibrate.fit import calibrated_toml, show_figure, show_parameter
    from cpasim.config import load_scenario

    cfg = load_scenario(scenario, sets=sets)
    if params is None:
        from cpasim.calibrate.evidence import fit_from_evidence

        result, header = fit_from_evidence(
            cfg, measurements, max_simulations=max_simulations or 24, say=typer.echo, side=side
        )
    else:
        if side is not None:
            raise CpasimError("--side: only without --params (a fit of goodput needs no side)")
        result, header = _fit_params(cfg, measurements, params, max_simulations or 60), []
    for before, after in zip(result.start_residuals, result.residuals, strict=True):
        t = after.target
        typer.echo(
            f"{t.source}: {t.figure} measured {show_figure(t.figure, t.measured)}, simulated "
            f"{show_figure(t.figure, before.simulated)} -> "
            f"{show_figure(t.figure, after.simulated)} ({after.relative:+.2%})"
        )
    for k, (a, b) in result.fitted.items():
        typer.echo(f"fitted {k}: {show_parameter(k, a)} -> {show_parameter(k, b)}")
    for k, why in result.unidentifiable.items():
        typer.echo(f"not identifiable: {k} ({why}); left unchanged")
    for note in result.notes:
        typer.echo(f"note: {note}")
    typer.echo(f"rms relative error {result.rms_error:.3%} after {result.simulations} simulations")
    try:
        write_text_atomically(out, calibrated_toml(result, str(scenario), header))
    except OSError as exc:
        raise CpasimError(f"{out}: cannot write calibrated scenario ({exc.strerror})") from None
    typer.echo(f"wrote {out}")


def _fit_params(cfg, measurements: list[str], params: str, max_simulations: int):
    from cpasim.calibrate.fit import fit, read_targets
    from cpasim.simulate import simulate

    targets = [t for m in measurements for t in read_targets(m)]
    for t in targets:
        if t.note is not None:
            typer.echo(f"cpasim: warning: {t.source}: {t.note}", err=True)
    keys = [k.strip() for k in params.split(",") if k.strip()]
    if not keys:
        raise CpasimError("--params: expected at least one parameter key")
    return fit(cfg, targets, keys, lambda c: simulate(c).to_json(), max_simulations=max_simulations)


def _us(ns: float) -> str:
    return f"{ns / 1e3:.1f} us" if ns < 1e6 else f"{ns / 1e6:.2f} ms"


def _dist(d: Distribution | None, fmt=_us) -> str:
    if d is None:
        return "-"
    return f"min {fmt(d.min)}, median {fmt(d.p50)}, p90 {fmt(d.p90)}, max {fmt(d.max)} (n={d.n})"


def _bytes(v: float) -> str:
    return f"{v:,.0f} B"


def _mbps(bps: float) -> str:
    return f"{bps / 1e6:.3f} Mb/s"


def format_report(r: FlowReport) -> str:
    lines = [f"capture  {r.capture}", "flows"]
    for f in r.flows:
        mark = "*" if f.index == r.flow.index else " "
        lines.append(
            f" {mark}{f.index:3d} {f.proto} {f.a} -> {f.b}  {f.packets} packets, "
            f"{f.payload_bytes:,} payload bytes"
        )
    lines += [
        f"sender   {r.sender}",
        f"receiver {r.receiver}",
        f"side     {r.side}: {r.side_evidence}",
        f"goodput  {_mbps(r.goodput_bps)} ({r.data_bytes:,} B in {r.duration_ns / 1e9:.3f} s)"
        if r.duration_ns or not r.data_bytes
        else f"goodput  - ({r.data_bytes:,} B, all at one instant)",
    ]
    if r.steady_goodput_bps is not None:
        lines.append(
            f"  steady {_mbps(r.steady_goodput_bps)} (ACKs from {r.steady_from_ns / 1e9:.3f} s "
            f"to {r.steady_until_ns / 1e9:.3f} s after the first data: the start-up left out)"
        )
    if r.bottleneck:
        b = r.bottleneck
        lines.append(
            f"bottleneck {_mbps(b.bps)} from {b.method} "
            f"({b.in_mode} of {b.samples} pairs within 5 %)"
        )
        for alt in r.bottleneck_alternatives:
            lines.append(f"           {_mbps(alt.bps)} from {alt.method}")
    else:
        lines.append("bottleneck - (too few back-to-back packets)")
    if r.flow.proto == "tcp":
        lines += [
            f"rtt      {_dist(r.rtt_ns)}  [{r.rtt_method}]",
            "  handshake "
            + (_us(r.handshake_rtt_ns) if r.handshake_rtt_ns is not None else "- (not captured)"),
            f"mss      {r.mss} ({r.mss_source}); largest segment {r.largest_segment:,} B, "
            f"{r.super_segments} super-segments (TSO/GSO/GRO)",
            "acks     "
            + (f"{r.segments_per_ack:.2f} segments per ACK" if r.segments_per_ack else "-"),
        ]
        if r.ack_delay_ns:
            lines.append(f"ack delay {_dist(r.ack_delay_ns)}")
            lines.append(
                f"  single-segment ACKs (delayed-ACK timer) {_dist(r.single_segment_ack_delay_ns)}"
            )
        scale = "unknown" if r.window_scale is None else str(r.window_scale)
        lines.append(f"rwnd     {_dist(r.adv_window, _bytes)}, window scale {scale}")
        if r.adv_window_growth:
            steps = ", ".join(f"{t / 1e6:.0f} ms: {w:,}" for t, w in r.adv_window_growth[:8])
            lines.append(f"  growth {steps}{' ...' if len(r.adv_window_growth) > 8 else ''}")
        lines.append(
            f"in flight {_dist(r.in_flight, _bytes)}; plateau (p95) "
            f"{_bytes(r.in_flight_plateau) if r.in_flight_plateau is not None else '-'}"
        )
        shares = [
            (r.window_full_share, "at the peer's window"),
            (r.idle_share, "with nothing in flight"),
            (r.window_closed_share, "with the peer's window closed"),
        ]
        shown = [f"{share:.0%} {what}" for share, what in shares if share is not None]
        if shown:
            lines.append(f"  steady part: {', '.join(shown)}")
        lines.append(f"retrans  {r.retransmitted_segments} segments, {r.retransmitted_bytes:,} B")
        if r.stalls:
            lines.append(f"  {r.stalls} after a silence, {_us(r.stalled_ns)} in all")
    if r.verdict is not None:
        lines += r.verdict.lines()
    lines += [f"note     {n}" for n in r.notes]
    return "\n".join(lines)
