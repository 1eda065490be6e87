"""``cpasim analyze``: critical path, bottlenecks and what-ifs of a recorded trace."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cpasim.analysis import AnalysisResult, PathResult, Transforms, analyze
from cpasim.analysis.names import check_patterns, trace_names
from cpasim.analysis.transforms import check_factor, check_pattern, parse_assignment, parse_capacity
from cpasim.cli import app
from cpasim.errors import CpasimError


def _open(path: Path):
    try:
        from cpasim.trace import open_trace
    except ImportError:  # pragma: no cover - only while the tracer package is absent
        from cpasim.trace.jsonl import read_jsonl as open_trace
    return open_trace(path)


def _scales(values: list[str], what: str) -> list[tuple[str, float]]:
    out = []
    for text in values:
        pat, value = parse_assignment(text, what)
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
        typer.Option("--scale-comm", help="QPATTERN=F: scale communication latency via queues."),
    ] = None,
    breaks: Annotated[
        list[str] | None,
        typer.Option("--break", help="QPATTERN: ignore dependencies through matching queues."),
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
    top: Annotated[int, typer.Option("--top", help="Rows per table.", min=1)] = 10,
) -> None:
    """Find the critical path from START's first record to END's last; name the bottleneck."""
    if not (graph in ("high", "global") or graph.startswith("sm:")):
        raise CpasimError(f"--graph {graph!r}: expected high, global or sm:SYS:SM")
    for pat in breaks or []:
        check_pattern(pat, "--break")
    tf = Transforms(
        scale=_scales(scale or [], "--scale"),
        scale_comm=_scales(scale_comm or [], "--scale-comm"),
        breaks=list(breaks or []),
        capacity=[parse_capacity(c) for c in capacity or []],
    )
    if not tf.is_identity:
        # A pattern that matches nothing would silently report the baseline.
        check_patterns(
            trace_names(_open(trace)),
            [("--scale", p) for p, _ in tf.scale],
            [("--scale-comm", p) for p, _ in tf.scale_comm]
            + [("--break", p) for p in tf.breaks]
            + [("--capacity", p) for p, _ in tf.capacity],
        )
    result = analyze(_open(trace), start, end, conn=conn, transforms=tf, lenient=lenient)
    if dot is not None:
        from cpasim.analysis.dot import to_dot

        text = to_dot(result, graph)
        try:
            dot.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CpasimError(f"{dot}: cannot write graph: {exc.strerror}") from None
    if as_json:
        typer.echo(json.dumps(_finite(result.to_json()), indent=1, sort_keys=True))
    else:
        _print(result, top)
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


def _print(result: AnalysisResult, top: int) -> None:
    console = Console(highlight=False, soft_wrap=True, emoji=False)
    what = f"{result.start} -> {result.end}"
    if result.transforms:
        what += "  [" + ", ".join(result.transforms) + "]"
    console.print(escape(f"critical path {what}: {result.records} records"))
    paths = {None: result.path} if result.path is not None else dict(result.connections.items())
    for conn, path in paths.items():
        _print_path(console, path, conn, top)
    if result.warnings:
        console.print(f"warnings ({len(result.warnings)}):")
        for w in result.warnings:
            console.print(f"  {escape(w)}")


def _print_path(console: Console, path: PathResult, conn, top: int) -> None:
    title = f"connection {conn}: " if conn is not None else ""
    if not path.reachable:
        console.print(f"{title}end not reachable from start")
        return
    ratio = path.critical_path_ns / path.elapsed_ns if path.elapsed_ns else float("nan")
    console.print(
        f"{title}critical path {_fmt(path.critical_path_ns)} "
        f"(elapsed {_fmt(path.elapsed_ns)}, ratio {ratio:.4f}), {path.edge_count} edges"
    )
    table = Table(title="most critical", title_justify="left")
    for col in ("name", "share", "waiting", "time", "slack"):
        table.add_column(col, justify="left" if col == "name" else "right")
    for m in path.most_critical[:top]:
        table.add_row(
            escape(m["name"]),
            f"{100 * m['share']:.2f}%",
            f"{100 * m['waiting_share']:.2f}%",
            _fmt(m["time_ns"]),
            _fmt(m["slack_ns"]),
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
