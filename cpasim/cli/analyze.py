"""``cpasim analyze``: critical path, bottlenecks and what-ifs of a recorded trace."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape as escape_markup
from rich.table import Table

from cpasim.analysis import AnalysisResult, PathResult, Transforms, analyze
from cpasim.analysis.names import check_patterns, trace_names
from cpasim.analysis.transforms import check_factor, check_pattern, parse_assignment, parse_capacity
from cpasim.cli import app
from cpasim.errors import CpasimError, printable
from cpasim.files import write_text_atomically
from cpasim.progress import CountingSource, activity


def escape(text: str) -> str:
    """A name from the trace as rich prints it literally: terminal escapes written
    out (:func:`~cpasim.errors.printable`), ``[...]`` not taken for markup."""
    return escape_markup(printable(text))


def _open(path: Path):
    try:
        from cpasim.trace import open_trace
    except ImportError:  # pragma: no cover - only while the tracer package is absent
        from cpasim.trace.jsonl import read_jsonl as open_trace
    return open_trace(path)


#: Path edges kept for --timeline (the listing keeps the first ones).
TIMELINE_LISTING = 5_000_000


def _scales(values: list[str], what: str, takes: str) -> list[tuple[str, float]]:
    out = []
    for text in values:
        pat, value = parse_assignment(text, what, takes)
        out.append((pat, check_factor(value, f"{what} {text!r}")))
    return out


@app.command("analyze")
def analyze_cmd(
    trace: Annotated[Path, typer.Argument(help="Trace file (.cpt or JSON Lines).")],
    start: Annotated[str, typer.Option("--start", help="Start state machine SYS:SM[#INST].")],
    end: Annotated[str, typer.Option("--end", help="End state machine SYS:SM[#INST].")],
    conn: Annotated[str | None, typer.Option("--conn", help="Only this connection id.")] = None,
    scale: Annotated[
        list[str] | None,
        typer.Option("--scale", help="PATTERN=F: scale matching states (sys:sm:state) by F."),
    ] = None,
    scale_comm: Annotated[
        list[str] | None,
        typer.Option(
            "--scale-comm",
            help="PATTERN=F: scale communication latency through matching queues (sys:queue)"
            " or edges (sys:sm->sys:sm[queue]).",
        ),
    ] = None,
    breaks: Annotated[
        list[str] | None,
        typer.Option(
            "--break",
            help="PATTERN: ignore dependencies through matching queues (sys:queue)"
            " or edges (sys:sm->sys:sm[queue]).",
        ),
    ] = None,
    capacity: Annotated[
        list[str] | None,
        typer.Option("--capacity", help="QPATTERN=+K: grow matching queues by K units."),
    ] = None,
    lenient: Annotated[
        bool, typer.Option("--lenient", help="Count over-draws of queues as warnings.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
    dot: Annotated[Path | None, typer.Option("--dot", help="Write a Graphviz graph here.")] = None,
    graph: Annotated[
        str, typer.Option("--graph", help="Graph for --dot: high, global or sm:SYS:SM.")
    ] = "high",
    timeline: Annotated[
        Path | None,
        typer.Option(
            "--timeline",
            help="Draw the states of every SM and the critical path through them "
            "(.png, .svg or .pdf).",
        ),
    ] = None,
    window: Annotated[
        str | None,
        typer.Option(
            "--window", help="START:END of --timeline, e.g. 2ms:2.3ms (default: the last 200us)."
        ),
    ] = None,
    top: Annotated[int, typer.Option("--top", help="Rows per table.", min=1)] = 10,
    progress: Annotated[
        bool,
        typer.Option("--progress/--no-progress", help="Progress on stderr for work over 2 s."),
    ] = True,
    detail: Annotated[
        bool,
        typer.Option(
            "--detail",
            help="Also print the near-critical names (slack), the per-SM profile and the "
            "per-queue statistics.",
        ),
    ] = False,
) -> None:
    """Find the critical path from START's first record to END's last; name the bottleneck."""
    if not (graph in ("high", "global") or graph.startswith("sm:")):
        raise CpasimError(f"--graph {graph!r}: expected high, global or sm:SYS:SM")
    for pat in breaks or []:
        check_pattern(pat, "--break", "edge")
    span = None
    if timeline is not None:
        from cpasim.analysis.timeline import parse_window

        if timeline.suffix.lower() not in (".png", ".svg", ".pdf"):
            raise CpasimError(
                f"--timeline {timeline}: expected a file ending in .png, .svg or .pdf"
            )
        if breaks or scale or scale_comm or capacity:
            raise CpasimError(
                "--timeline draws the measured trace; run it without --scale, --scale-comm, "
                "--break and --capacity"
            )
        span = parse_window(window) if window is not None else None
    elif window is not None:
        raise CpasimError("--window: only with --timeline")
    tf = Transforms(
        scale=_scales(scale or [], "--scale", "state"),
        scale_comm=_scales(scale_comm or [], "--scale-comm", "edge"),
        breaks=list(breaks or []),
        capacity=[parse_capacity(c) for c in capacity or []],
    )
    with activity(f"cpasim analyze {trace.name}", progress):
        if not tf.is_identity:
            # A pattern that matches nothing would silently report the baseline.
            check_patterns(
                trace_names(CountingSource(_open(trace), "reading the names")),
                [("--scale", p) for p, _ in tf.scale],
                [("--scale-comm", p) for p, _ in tf.scale_comm]
                + [("--break", p) for p in tf.breaks]
                + [("--capacity", p) for p, _ in tf.capacity],
            )
        source = CountingSource(_open(trace), f"analysing {trace.name}")
        # The timeline needs the path's listing through the window, not its first edges.
        limit = TIMELINE_LISTING if timeline is not None else 10_000
        result = analyze(
            source, start, end, conn=conn, transforms=tf, lenient=lenient, listing_limit=limit
        )
        if timeline is not None:
            from cpasim.analysis.timeline import write_timeline

            write_timeline(timeline, _open(trace), result, span)
    if dot is not None:
        from cpasim.analysis.dot import to_dot

        text = to_dot(result, graph)
        try:
            write_text_atomically(dot, text)
        except OSError as exc:
            raise CpasimError(f"{dot}: cannot write graph: {exc.strerror}") from None
    if as_json:
        typer.echo(json.dumps(_finite(result.to_json()), indent=1, sort_keys=True))
    else:
        _print(result, top, detail)
    if not result.reachable:
        raise CpasimError(
            f"{trace}: end {result.end} not reachable from start {result.start}"
            + (" under " + ", ".join(result.transforms) if result.transforms else "")
        )


def _finite(obj):
    """JSON has no infinities or NaN; they become null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def _fmt(ns: float | None) -> str:
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.4g} {unit}"
    return f"{ns:.4g} ns"


def _print(result: AnalysisResult, top: int, detail: bool = False) -> None:
    console = Console(highlight=False, soft_wrap=True, emoji=False)
    if not console.is_terminal:  # a file or pipe: do not squeeze tables to 80 columns
        console.width = 160
    what = f"{result.start} -> {result.end}"
    if result.transforms:
        what += "  [" + ", ".join(result.transforms) + "]"
    console.print(escape(f"critical path {what}: {result.records} records"))
    paths = {None: result.path} if result.path is not None else dict(result.connections.items())
    for conn, path in paths.items():
        _print_path(console, path, conn, top)
        if detail and path.reachable:
            _print_slack(console, path, top)
    if detail:
        _print_profile(console, result.profile, top)
        _print_queues(console, result.queues)
    if result.warnings:
        console.print(f"warnings ({len(result.warnings)}):")
        for w in result.warnings:
            console.print(f"  {escape(w)}")


def _print_path(console: Console, path: PathResult, conn, top: int) -> None:
    title = f"connection {escape(conn)}: " if conn is not None else ""
    if not path.reachable:
        console.print(f"{title}end not reachable from start")
        return
    ratio = path.critical_path_ns / path.elapsed_ns if path.elapsed_ns else float("nan")
    console.print(
        f"{title}critical path {_fmt(path.critical_path_ns)} "
        f"(elapsed {_fmt(path.elapsed_ns)}, ratio {ratio:.4f}), {path.edge_count} edges"
    )
    # No slack column here: a name on the path lost no race at its nodes, so its
    # slack is mostly undefined; --detail lists the names that did (near-critical).
    table = Table(title="most critical", title_justify="left")
    for col in ("name", "share", "waiting", "core lent", "time"):
        table.add_column(col, justify="left" if col == "name" else "right")
    for m in path.most_critical[:top]:
        table.add_row(
            escape(m["name"]),
            f"{100 * m['share']:.2f}%",
            f"{100 * m['waiting_share']:.2f}%",
            f"{100 * m['core_lent_share']:.2f}%",
            _fmt(m["time_ns"]),
        )
    console.print(table)
    if path.loops:
        loops = Table(title="resource loops", title_justify="left")
        loops.add_column("count", justify="right")
        loops.add_column("edge")
        for lp in path.loops[:top]:
            loops.add_row(str(lp["count"]), escape(lp["edge"]))
        console.print(loops)
    else:
        console.print("resource loops: none")


def _print_slack(console: Console, path: PathResult, top: int) -> None:
    if not path.slack:
        console.print("near-critical (slack): none competed with the path")
        return
    table = Table(
        title="near-critical: least slack (one occurrence may grow this much before the "
        "path moves)",
        title_justify="left",
    )
    table.add_column("name")
    table.add_column("slack", justify="right")
    for s in path.slack[:top]:
        table.add_row(escape(s["name"]), _fmt(s["slack_ns"]))
    console.print(table)


def _print_profile(console: Console, profile: list[dict], top: int) -> None:
    """Per SM, over the whole trace: active and waiting time, and its busiest states."""
    table = Table(title="per-SM profile (whole trace)", title_justify="left")
    for col in ("state machine", "active", "waiting", "entries", "busiest states (active)"):
        table.add_column(col, justify="left" if col[0] in "sb" else "right")
    for sm in sorted(profile, key=lambda d: (-d["active_ns"], d["sm"])):
        if not (sm["active_ns"] or sm["waiting_ns"]):
            continue  # an SM that only declares a queue
        states = [d for d in sm["states"] if d["active_ns"] > 0][:3]
        table.add_row(
            escape(sm["sm"]),
            _fmt(sm["active_ns"]),
            _fmt(sm["waiting_ns"]),
            str(sum(d["entered"] for d in sm["states"])),
            escape(", ".join(f"{d['state']} {_fmt(d['active_ns'])}" for d in states)),
        )
    console.print(table)


def _print_queues(console: Console, queues: list[dict]) -> None:
    """Per queue: occupancy, blocking on empty/full, communication latency, arrivals."""
    table = Table(title="queues (whole trace)", title_justify="left")
    columns = (
        "queue",
        "capacity",
        "occupancy mean/max",
        "waits empty",
        "waits full",
        "comm latency mean/max",
        "arrivals",
    )
    for col in columns:
        table.add_column(col, justify="left" if col == "queue" else "right")
    for q in queues:
        rate = q["arrival_rate_per_s"]
        table.add_row(
            escape(q["queue"]),
            "-" if q["capacity"] is None else str(q["capacity"]),
            f"{q['mean_occupancy']:.3g} / {q['max_occupancy']}",
            f"{q['waits_empty']} ({_fmt(q['waited_empty_ns'])})",
            f"{q['waits_full']} ({_fmt(q['waited_full_ns'])})",
            f"{_fmt(q['comm_latency_mean_ns'])} / {_fmt(q['comm_latency_max_ns'])}",
            f"{q['arrivals']}" + ("" if rate is None else f" ({rate:.4g}/s)"),
        )
    console.print(table)
