"""The output options of ``cpasim run`` and the commands that write a run folder: the
run folder (``--out``) and the time series (``--series``, ``--interval``).  Where each
artefact goes, and what is refused, is :mod:`cpasim.run_outputs`: the API's too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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


def warn_if_huge(cfg, trace_suffix: str | None = None) -> None:
    """Before simulating ``cfg``: one warning line on stderr with the estimate when the
    run (or its trace, recorded with ``trace_suffix``) looks huge
    (:mod:`cpasim.estimate`)."""
    from cpasim.estimate import estimate

    size = estimate(cfg, trace_suffix).warning()
    if size is not None:
        typer.echo(f"cpasim: warning: {size}", err=True)
