"""The output options of ``cpasim run``: the run folder (``--out``) and the time
series (``--series``, ``--interval``).

:func:`plan` settles, before anything is simulated, where each artefact goes
(refusing a non-empty folder or an unknown format); :func:`finish` writes them
once the run is over.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from cpasim import runfolder
from cpasim.errors import CpasimError
from cpasim.files import is_stream

OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="Run folder for config.toml (the resolved scenario), result.json (what "
        "--json prints) and report.html; the other files asked for by a bare name go into "
        "it too.",
    ),
]
OverwriteOpt = Annotated[
    bool, typer.Option("--overwrite", help="Write into a --out folder that is not empty.")
]
SeriesOpt = Annotated[
    Path | None,
    typer.Option(
        "--series",
        help="Time series of cwnd, windows, buffers, queues and goodput (.csv, or "
        ".parquet with pyarrow); a bare name goes into --out.",
    ),
]
IntervalOpt = Annotated[
    str | None,
    typer.Option(
        "--interval",
        help="Series sample interval, e.g. 100us (default: about 500 rows over the run).",
    ),
]


@dataclass
class Outputs:
    out: Path | None
    trace: Path | None
    series: Path | None
    interval_ns: float | None  # None: no series, no sampler


def plan(
    cfg,
    *,
    out: Path | None,
    overwrite: bool,
    trace: Path | None,
    series: Path | None,
    interval: str | None = None,
) -> Outputs:
    """Where this run's files go; every refusal happens here, before the run."""
    trace = runfolder.artefact_path(out, runfolder.TRACE, trace) if trace else None
    if trace is not None and trace.parent.is_dir() and not is_stream(trace):
        from cpasim.predict.runs import check_sidecar_writable

        check_sidecar_writable(trace)  # (a run folder made below is empty)
    series = runfolder.artefact_path(out, runfolder.SERIES, series) if series else None
    if series is not None:
        from cpasim.series import check_path, default_interval, parse_interval

        check_path(series)
    if interval is not None and series is None:
        raise CpasimError("--interval: only with --series (there is no series to sample)")
    interval_ns = None
    if series is not None:
        interval_ns = parse_interval(interval) if interval is not None else default_interval(cfg)
    if out is not None:  # after every check: a refused run leaves no folder behind
        runfolder.prepare(out, overwrite)
    return Outputs(out, trace, series, interval_ns)


def finish(outputs: Outputs, cfg, result, result_json: dict, *, analysis=None, trace=None) -> None:
    """Write the series and the run folder's config.toml, result.json and report.html
    (its verdict is ``result_json["verdict"]`` when the run was explained; its
    critical-path graph comes from ``analysis``, the run's unmodified analysis, and its
    timeline from the trace: ``trace`` (a file or an in-memory source, e.g. the one
    ``--explain`` recorded), else the ``--trace`` file; with a trace and no analysis
    the trace is analysed for them)."""
    if outputs.series is not None:
        result.series.write(outputs.series)
    if outputs.out is not None:
        runfolder.write_config(outputs.out, cfg)
        runfolder.write_result(outputs.out, result_json)
        runfolder.write_report(
            outputs.out,
            cfg,
            result_json,
            series=outputs.series,
            analysis=analysis,
            trace=trace if trace is not None else outputs.trace,
        )


def warn_if_huge(cfg, trace_suffix: str | None = None) -> None:
    """Before simulating ``cfg``: one warning line on stderr with the estimate when the
    run (or its trace, recorded with ``trace_suffix``) looks huge
    (:mod:`cpasim.estimate`)."""
    from cpasim.estimate import estimate

    size = estimate(cfg, trace_suffix).warning()
    if size is not None:
        typer.echo(f"cpasim: warning: {size}", err=True)
