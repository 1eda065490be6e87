"""``cpasim analyze``: critical path, bottlenecks and what-ifs of a recorded trace."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cpasim.analysis import AnalysisResult, PathResult, Transforms, analyze
from cpasim.analysis.fold import fold_profile, fold_queues, fold_slack
from cpasim.analysis.names import check_patterns, trace_names
from cpasim.analysis.transforms import check_factor, check_pattern, parse_assignment, parse_capacity
from cpasim.cli import app
from cpasim.errors import CpasimError, printable
from cpasim.files import write_text_atomically
from cpasim.progress import CountingSource, activity

if TYPE_CHECKING:  # rich is imported when something is printed
    from rich.console import Console


def escape(text: str) -> str:
    """A name from the trace as rich prints it literally: terminal escapes written
    out (:func:`~cpasim.errors.printable`), ``[...]`` not taken for markup."""
    from rich.markup import escape as escape_markup

    return escape_markup(printable(text))


def _open(path: Path):
    try:
        from cpasim.tracing import open_trace
    except ImportError:  # pragma: no cover - only while the tracer package is absent
        from cpasim.tracing.jsonl import read_jsonl as open_trace
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
    start: Annotated[
        str | None,
        typer.Option(
            "--start",
            help="Start state machine SYS:SM[#INST] (default: the run's, from the trace's "
            ".run.json sidecar).",
        ),
    ] = None,
    end: Annotated[
        str | None,
        typer.Option(
            "--end", help="End state machine SYS:SM[#INST] (default: the run's, as --start)."
        ),
    ] = None,
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
    start, end = _ends(trace, start, end)
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
        conns = None if conn is not None else _followed(trace, start, end)
        source = CountingSource(_open(trace), f"analysing {trace.name}")
        # The timeline needs the path's listing through the window, not its first edges.
        limit = TIMELINE_LISTING if timeline is not None else 10_000
        result = analyze(
            source,
            start,
            end,
            conn=conn,
            transforms=tf,
            lenient=lenient,
            listing_limit=limit,
            conns=conns,
        )
        if timeline is not None:
            from cpasim.analysis.timeline import write_timeline

            write_timeline(timeline, _open(trace), result, span)
            _wrote(
                timeline,
                "the critical path through every state machine's states, " + _span(result, span),
            )
    if dot is not None:
        from cpasim.analysis.dot import to_dot

        text = to_dot(result, graph)
        try:
            write_text_atomically(dot, text)
        except OSError as exc:
            raise CpasimError(f"{dot}: cannot write graph: {exc.strerror}") from None
        _wrote(dot, f"the {_graph_what(graph)}, critical path in red (Graphviz: dot -Tsvg {dot})")
    # The verdict reads the run's sidecar and its configuration: the model's side,
    # imported only here so that the analyzer itself stays free of it.
    from cpasim.verdict import flow_lines, of_trace_with_flows

    with activity("what limits the run", progress):
        verdict, flow_verdicts, why_none = of_trace_with_flows(trace)
    if as_json:
        out = result.to_json()
        out["verdict"] = verdict.to_json() if verdict is not None else None
        if flow_verdicts:
            out["flow_verdicts"] = [
                {"index": f["index"], "verdict": v.to_json() if v is not None else None}
                for f, v in flow_verdicts
            ]
        typer.echo(json.dumps(_finite(out), indent=1, sort_keys=True))
    else:
        _print_verdict(verdict, why_none, bool(result.transforms), flow_lines(flow_verdicts))
        _print(result, top, detail)
    if not result.reachable:
        raise CpasimError(
            f"{trace}: end {result.end} not reachable from start {result.start}"
            + (" under " + ", ".join(result.transforms) if result.transforms else "")
        )


def _print_verdict(verdict, why_none: str | None, transformed: bool, flows=()) -> None:
    """What limits the recorded run (and, with ``[[flows]]``, each flow), before the
    tables."""
    if verdict is None:
        typer.echo(f"limited by   (not known: {why_none})")
        return
    for line in [*verdict.lines(), *flows]:
        typer.echo(line)
    if transformed:
        typer.echo("  (the run as recorded; the tables below are under the transforms asked for)")
    typer.echo("")


def _graph_what(graph: str) -> str:
    """What a --graph view draws, for the line that says what was written."""
    if graph == "high":
        return "state machines and queues"
    if graph == "global":
        return "states of every state machine"
    return f"states of {graph[3:]} and who it exchanges with"


def _wrote(path: Path, what: str) -> None:
    """One line on stderr (stdout may be --json): the file written and what it shows."""
    typer.echo(f"cpasim: wrote {path}: {what}", err=True)


def _span(result: AnalysisResult, span: tuple[float, float] | None) -> str:
    from cpasim.analysis.timeline import default_window

    t0, t1 = span if span is not None else default_window(result)
    return f"{t0 / 1e6:.6g} ms to {t1 / 1e6:.6g} ms"


def _ends(trace: Path, start: str | None, end: str | None) -> tuple[str, str]:
    """--start and --end, the missing ones taken from the run that recorded ``trace``
    (its sidecar), said in one line on stderr."""
    if start is not None and end is not None:
        return start, end
    from cpasim.inputs import open_input
    from cpasim.predict.runs import recorded_ends, sidecar_path

    if not trace.exists():
        raise CpasimError(f"{trace}: no such trace")
    open_input(trace, "trace").close()  # a FIFO, a device: refused before its sidecar
    ends = recorded_ends(trace)
    if ends is None:
        raise CpasimError(
            f"{trace}: give --start and --end (e.g. --start tx:App --end rx:App): without "
            f"them they are read from {sidecar_path(trace).name}, which 'cpasim run --trace' "
            "writes, and there is none"
        )
    start, end = start or ends[0], end or ends[1]
    typer.echo(
        f"cpasim: --start {start} --end {end} (the run's, from {sidecar_path(trace).name})",
        err=True,
    )
    return start, end


def _followed(trace: Path, start: str, end: str) -> list[str] | None:
    """The connections the recorded run follows between its own ends, when not all
    (its ping flows have no path from tx:App), said on stderr; else None."""
    from cpasim.predict.runs import recorded_conns

    conns = recorded_conns(trace, start, end)
    if conns is not None:
        typer.echo(
            f"cpasim: connections {', '.join(conns)} (the run's; its other flows have no "
            f"path from {start} to {end}: 'cpasim flows {trace.name}' gives theirs)",
            err=True,
        )
    return conns


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
    from rich.console import Console

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
        _print_queues(console, result.queues, top)
    if result.warnings:
        console.print(f"warnings ({len(result.warnings)}):")
        for w in result.warnings:
            console.print(f"  {escape(w)}")


def _print_path(console: Console, path: PathResult, conn, top: int) -> None:
    from rich.table import Table

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


def _more(console: Console, shown: int, total: int, what: str) -> None:
    """Under a table cut to --top rows: how many were left out."""
    if total > shown:
        console.print(f"  … {total - shown} more {what} (--top {total} lists them, --json all)")


def _named(name: str, instances: int) -> str:
    return escape(name) + (f" ×{instances}" if instances > 1 else "")


def _count(x: float) -> str:
    """A count, or one instance's mean count (folded rows)."""
    return str(int(x)) if float(x).is_integer() else f"{x:.4g}"


def _print_slack(console: Console, path: PathResult, top: int) -> None:
    from rich.table import Table

    if not path.slack:
        console.print("near-critical (slack): none competed with the path")
        return
    rows = fold_slack(path.slack)
    table = Table(
        title="near-critical: least slack (one occurrence may grow this much before the "
        "path moves)",
        title_justify="left",
    )
    table.add_column("name")
    table.add_column("slack", justify="right")
    for s in rows[:top]:
        table.add_row(_named(s["name"], s["instances"]), _fmt(s["slack_ns"]))
    console.print(table)
    _more(console, min(top, len(rows)), len(rows), "names")


def _print_profile(console: Console, profile: list[dict], top: int) -> None:
    """Per SM over the whole trace (instances folded, busiest first): active and
    waiting time, and its busiest states."""
    from rich.table import Table

    rows = [sm for sm in fold_profile(profile) if sm["active_ns"] or sm["waiting_ns"]]
    table = Table(
        title="per-SM profile (whole trace; ×N: N instances, figures of one on average)",
        title_justify="left",
    )
    for col in ("state machine", "active", "waiting", "entries", "busiest states (active)"):
        table.add_column(col, justify="left" if col[0] in "sb" else "right")
    for sm in rows[:top]:  # an SM with no time only declares a queue
        states = [d for d in sm["states"] if d["active_ns"] > 0][:3]
        table.add_row(
            _named(sm["sm"], sm["instances"]),
            _fmt(sm["active_ns"]),
            _fmt(sm["waiting_ns"]),
            _count(sm["entered"]),
            escape(", ".join(f"{d['state']} {_fmt(d['active_ns'])}" for d in states)),
        )
    console.print(table)
    _more(console, min(top, len(rows)), len(rows), "state machines")


def _print_queues(console: Console, queues: list[dict], top: int) -> None:
    """Per queue (instances folded; the longest waits for space first): occupancy,
    blocking on empty/full, communication latency, arrivals."""
    from rich.table import Table

    rows = fold_queues(queues)
    table = Table(
        title="queues (whole trace, longest waits for space, then for data, first; ×N: N "
        "instances, figures of one on average)",
        title_justify="left",
    )
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
    for q in rows[:top]:
        rate = q["arrival_rate_per_s"]
        table.add_row(
            _named(q["queue"], q["instances"]),
            "-" if q["capacity"] is None else str(q["capacity"]),
            f"{q['mean_occupancy']:.3g} / {q['max_occupancy']}",
            f"{_count(q['waits_empty'])} ({_fmt(q['waited_empty_ns'])})",
            f"{_count(q['waits_full'])} ({_fmt(q['waited_full_ns'])})",
            f"{_fmt(q['comm_latency_mean_ns'])} / {_fmt(q['comm_latency_max_ns'])}",
            _count(q["arrivals"]) + ("" if rate is None else f" ({rate:.4g}/s)"),
        )
    console.print(table)
    _more(console, min(top, len(rows)), len(rows), "queues")
