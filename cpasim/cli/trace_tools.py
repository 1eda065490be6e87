"""``cpasim trace``: convert trace files between formats and summarise them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import typer

from cpasim.analysis.names import trace_names
from cpasim.cli import app
from cpasim.errors import CpasimError, printable
from cpasim.files import is_stream
from cpasim.predict.runs import carry_run_record, sidecar_path
from cpasim.tracing import TRACE_SUFFIXES, open_trace, write_trace_digested
from cpasim.tracing.records import OPS, TraceSource
from cpasim.units import TIME, human

trace_app = typer.Typer(
    help="Trace files: convert between .cpt and .jsonl, summarise.", no_args_is_help=True
)
app.add_typer(trace_app, name="trace")


class _Counting(TraceSource):
    """Passes a source through, counting its records on the way."""

    def __init__(self, source: TraceSource):
        self.source = source
        self.name = source.name
        self.records = 0

    @property
    def key(self):
        return self.source.key

    def chunks(self) -> Iterator[np.ndarray]:
        for chunk in self.source.chunks():
            self.records += len(chunk)
            yield chunk


@trace_app.command("convert")
def convert(
    src: Path = typer.Argument(..., metavar="IN", help="Trace file (.cpt or JSON Lines)."),
    dst: Path = typer.Argument(..., metavar="OUT", help="Output; its extension picks the format."),
) -> None:
    """Convert a trace: the format of OUT follows its extension (.cpt or .jsonl).

    OUT appears only once complete; on error nothing already there is touched.
    The run record beside IN (IN.run.json, from 'cpasim run --trace') is carried
    beside OUT, so that OUT predicts as IN does.
    """
    if dst.suffix.lower() not in TRACE_SUFFIXES:
        raise CpasimError(
            f"{dst}: unknown trace format {dst.suffix or '(no extension)'!r}; "
            f"expected one of {', '.join(TRACE_SUFFIXES)}"
        )
    if dst.exists() and src.exists() and dst.resolve() == src.resolve():
        raise CpasimError(f"{dst}: output is the input file")
    source = _Counting(open_trace(src))
    _, digest = write_trace_digested(source, dst)
    if is_stream(dst):
        typer.echo(f"{dst}: {source.records} records")
        return
    # The run that recorded IN recorded OUT too: predictions may take it as their baseline.
    carried = carry_run_record(src, dst, digest)
    size = dst.stat().st_size
    said = f", with the run record {sidecar_path(dst).name}" if carried else ""
    typer.echo(f"{dst}: {source.records} records, {size:,} bytes{said}")


@trace_app.command("info")
def info(
    path: Path = typer.Argument(..., metavar="FILE", help="Trace file (.cpt or JSON Lines)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Summarise a trace: records per op, state machines, queues, time span, size."""
    source = open_trace(path)
    records = 0
    per_op = np.zeros(len(OPS), dtype=np.int64)
    first = last = None
    for chunk in source.chunks():
        if not len(chunk):
            continue
        records += len(chunk)
        per_op += np.bincount(chunk["op"], minlength=len(OPS))[: len(OPS)]
        if first is None:
            first = float(chunk["t"][0])
        last = float(chunk["t"][-1])
    key = source.key
    size = path.stat().st_size
    summary = {
        "file": str(path),
        "records": records,
        "ops": {op: int(k) for op, k in zip(OPS, per_op, strict=True) if k},
        "state_machines": len(key.sms),
        "states": len(key.states),
        "queues": len(key.queues),
        "connections": len(key.conns),
        "t_first_ns": first,
        "t_last_ns": last,
        "span_ns": None if first is None else last - first,
        "bytes": size,
        "bytes_per_record": size / records if records else None,
    }
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    span = (
        "empty"
        if first is None
        else f"{human(first, TIME)} .. {human(last, TIME)} ({human(last - first, TIME)})"
    )
    per_record = f", {size / records:.2f} bytes/record" if records else ""
    lines = [
        f"file          {path}",
        f"records       {records}",
        "ops           " + ", ".join(f"{op} {k}" for op, k in summary["ops"].items()),
        f"SMs           {len(key.sms)}",
        f"states        {len(key.states)}",
        f"queues        {len(key.queues)}",
        f"connections   {len(key.conns)}",
        f"time          {span}",
        f"size          {size:,} bytes{per_record}",
    ]
    typer.echo("\n".join(lines))


@trace_app.command("names")
def names(
    path: Path = typer.Argument(..., metavar="FILE", help="Trace file (.cpt or JSON Lines)."),
    as_json: bool = typer.Option(False, "--json", help="Print the names as JSON."),
) -> None:
    """List the systems, state machines, states and queues what-if patterns can match.

    States are sys:sm:state (for analyze --scale), queues sys:queue (for analyze
    --scale-comm, --break and --capacity); a name with several instances also matches
    as sys:name#inst.
    """
    found = trace_names(open_trace(path)).to_json()
    if as_json:
        typer.echo(json.dumps(found, indent=2))
        return

    def listing(title: str, counts: dict[str, int]) -> list[str]:
        rows = [f"{title} ({len(counts)})"]
        for name, n in counts.items():
            rows.append(f"  {printable(name)}" + (f"  ({n} instances)" if n > 1 else ""))
        return rows

    systems = found["systems"]
    lines = [f"systems ({len(systems)})", *(f"  {printable(s)}" for s in systems)]
    lines += listing("state machines", found["sms"])
    lines += listing("states (--scale sys:sm:state)", found["states"])
    lines += listing("queues (--scale-comm, --break, --capacity sys:queue)", found["queues"])
    typer.echo("\n".join(lines))
