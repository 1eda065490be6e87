"""``cpasim sweep`` and ``cpasim plot``: run a parameter grid, draw its results."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from cpasim import interrupts
from cpasim.cli import app


@app.command("sweep")
def sweep_command(
    scenario: Path | None = typer.Argument(None, help="Scenario file (TOML); defaults if omitted."),
    grid: list[str] = typer.Option(
        [], "--grid", "-g", help="KEY=V1,V2,... an axis of the sweep; repeat for more axes."
    ),
    zip_axes: bool = typer.Option(
        False, "--zip", help="Pair the i-th values of every axis instead of crossing them."
    ),
    repeat: int = typer.Option(1, "--repeat", "-r", help="Runs per point, each with its own seed."),
    workers: int | None = typer.Option(
        None, "--workers", "-w", help="Local worker processes (default: one per core; 1 = here)."
    ),
    dask: str | None = typer.Option(
        None, "--dask", help="Run on a Dask scheduler (tcp://HOST:PORT) or 'local' (LocalCluster)."
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="Results file: .csv or .parquet."),
    resume: bool = typer.Option(False, "--resume", help="Skip the points --out already holds."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --out file."),
    analyze: bool = typer.Option(
        False, "--analyze", help="Also trace each run: most critical state, strongest loop."
    ),
    sets: list[str] = typer.Option([], "--set", help="KEY=VALUE applied to every point."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bar on stderr."),
) -> None:
    """Run SCENARIO over a grid of parameter values; one row per point and repeat."""
    from cpasim.sweeps import SweepInterrupted, sweep_rows, table
    from cpasim.sweeps.points import parse_axes

    try:
        rows, keys = sweep_rows(
            scenario,
            parse_axes(grid),
            zip=zip_axes,
            repeat=repeat,
            workers=workers,
            dask=dask,
            out=out,
            resume=resume,
            analyze=analyze,
            sets=sets,
            overwrite=overwrite,
            progress=progress,
            note=lambda text: print(f"cpasim: note: {text}", file=sys.stderr),
        )
    except SweepInterrupted as stop:
        interrupts.report(f"cpasim: {stop}")
        raise typer.Exit(130) from None
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # a file or pipe: do not squeeze to 80 columns
        console.width = 160
    console.print(table.render(rows, keys))
    if out is not None:
        print(f"wrote {len(rows)} rows to {out}", file=sys.stderr)


@app.command("plot")
def plot_command(
    results: Path = typer.Argument(..., help="Sweep results or a time series (.csv/.parquet)."),
    x: str | None = typer.Option(
        None, "--x", help="Column on the x axis (default: the first swept key)."
    ),
    y: str | None = typer.Option(
        None, "--y", help="Metric on the y axis (default: goodput, or mean latency)."
    ),
    hue: str | None = typer.Option(None, "--hue", help="One line per value of this column."),
    heatmap: bool = typer.Option(False, "--heatmap", help="Heat map of --y over --x and --hue."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Image file (default RESULTS.png)."),
) -> None:
    """Draw a sweep (mean with min/max band over repeats, or a heat map), or a time
    series from 'cpasim run --series' (windows, queues and goodput over time)."""
    from cpasim.plot_series import is_series, plot_series

    if is_series(results):
        written = plot_series(results, out=out)
    else:
        from cpasim.plot import default_axes, load, plot

        if x is None or y is None:
            rows, keys = load(results)
            default_x, default_y = default_axes(rows, keys, results)
            x, y = x or default_x, y or default_y
            print(f"cpasim: plotting {y} against {x} (--x, --y choose others)", file=sys.stderr)
        written = plot(results, x=x, y=y, hue=hue, heatmap=heatmap, out=out)
    print(f"wrote {written}", file=sys.stderr)
