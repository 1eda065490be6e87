"""``cpasim flows``: the critical path of each flow of a traced run with ``[[flows]]``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from cpasim.cli import app
from cpasim.errors import CpasimError
from cpasim.predict.flow_paths import flow_paths, flows_json
from cpasim.predict.runs import read_record
from cpasim.progress import activity
from cpasim.tracing import open_trace


@app.command("flows")
def flows_cmd(
    trace: Annotated[
        Path, typer.Argument(help="Trace of a run with flows tables (cpasim run --trace).")
    ],
    flow: Annotated[
        list[int] | None, typer.Option("--flow", help="Only this flow (repeatable).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
    top: Annotated[int, typer.Option("--top", help="Most critical states per flow.", min=1)] = 3,
) -> None:
    """Per flow: its critical path's length, what limits it, its busiest loop."""
    entries = read_record(trace)["result"].get("flows")
    if not entries:
        raise CpasimError(f"{trace}: its run has no [[flows]]; analyse it with 'cpasim analyze'")
    if flow:
        known = {e["index"] for e in entries}
        unknown = sorted(set(flow) - known)
        if unknown:
            raise CpasimError(
                f"--flow {unknown[0]}: no such flow; the run has flows 0 to {len(entries) - 1}"
            )
        entries = [e for e in entries if e["index"] in set(flow)]
    with activity(f"analysing {len(entries)} flow(s) of {trace.name}"):
        paths = flow_paths(lambda: open_trace(trace), entries)
    out = flows_json(entries, paths)
    if as_json:
        json.dump({"trace": str(trace), "flows": out}, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
        return
    for e in out:
        who = f"flow {e['index']} ({e['kind']}{', ' + e['cc'] if e['cc'] else ''})"
        typer.echo(f"{who}: critical path {e['critical_path_ns'] / 1e6:.4g} ms")
        for m in e["most_critical"][:top]:
            typer.echo(f"    {m['share']:6.1%}  {m['name']}")
        if e["loops"]:
            loop = e["loops"][0]
            typer.echo(f"    loop   {loop['edge']} ({loop['count']:g} times)")
