"""Running a list of points: executor, progress, output file, resume, Ctrl-C.

:func:`execute` knows nothing about the model: it runs ``runner(point)`` for
every point not already finished and returns the rows in grid order.
:func:`cpasim.sweeps.sweep` wires it to the configuration and the simulator.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from cpasim.errors import CpasimError, shown
from cpasim.files import check_writable, is_stream
from cpasim.sweeps import executors, table
from cpasim.sweeps.evaluate import guarded
from cpasim.sweeps.points import Point


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep, after the finished rows were written (``written``:
    whether ``out`` holds any: with none finished, it is left as it was)."""

    def __init__(self, finished: int, total: int, out: Path | None, written: bool = True):
        self.finished, self.total, self.out = finished, total, out
        where = ""
        if out is not None:
            where = f", written to {out}" if written else f"; {out} is as it was"
        super().__init__(f"interrupted: {finished} of {total} points finished{where}")


def identity_columns(keys: Sequence[str]) -> list[str]:
    return [*keys, table.REPEAT, table.SEED, table.ERROR]


def row_ident(row: Mapping, keys: Sequence[str]) -> tuple[tuple[str, ...], int]:
    return tuple(str(row[k]) for k in keys), int(row[table.REPEAT])


def load_previous(
    path: Path, keys: Sequence[str], digest: str, analyze_columns: Sequence[str]
) -> list[dict]:
    """The rows of an earlier run of the same sweep, checked to belong to it."""
    rows = table.read_rows(path, text_columns=keys, drop_cut_row=True)
    if not rows:
        # No finished row: an empty file, or the header a sweep writes before its
        # first row (its identity columns, no digest yet).  Anything else is not ours.
        header = table.read_columns(path)
        if header and header != identity_columns(header[: max(len(header) - 3, 0)]):
            raise CpasimError(
                f"--resume {path}: not a cpasim sweep file (its header is "
                f"{shown(','.join(header))}, with no {table.REPEAT!r} column); use another --out"
            )
        if header and header[:-3] != list(keys):
            raise CpasimError(
                f"--resume {path}: the file varies {', '.join(header[:-3]) or 'nothing'}, "
                f"this sweep varies {', '.join(keys) or 'nothing'}; use another --out"
            )
        return []
    header = list(rows[0])
    if table.REPEAT not in header or table.DIGEST not in header:
        raise CpasimError(
            f"--resume {path}: not a cpasim sweep file "
            f"(no {table.REPEAT!r}/{table.DIGEST!r} columns)"
        )
    varied = header[: header.index(table.REPEAT)]
    if sorted(varied) != sorted(keys):
        raise CpasimError(
            f"--resume {path}: the file varies {', '.join(varied) or 'nothing'}, "
            f"this sweep varies {', '.join(keys) or 'nothing'}; use another --out"
        )
    digests = {str(r[table.DIGEST]) for r in rows}
    if digests != {digest}:
        raise CpasimError(
            f"--resume {path}: the file was made from a different scenario or --set "
            f"(digest {', '.join(sorted(digests))}, now {digest}); use another --out"
        )
    missing = [c for c in analyze_columns if c not in header]
    if missing:
        raise CpasimError(
            f"--resume {path}: the file has no {', '.join(missing)} columns; "
            "it was made without --analyze"
        )
    return rows


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failed]} failed"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        # Plain text on stderr in a notebook too: rich's notebook display needs
        # ipywidgets, and warns without them.
        console=Console(stderr=True, force_jupyter=False),
        disable=not enabled,
    )


def execute(
    points: Sequence[Point],
    runner: Callable[[Point], Mapping],
    *,
    keys: Sequence[str],
    digest: str,
    workers: int | None = None,
    dask: str | None = None,
    out: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    analyze_columns: Sequence[str] = (),
) -> list[dict]:
    """Run the points not finished yet; the rows of every point, in grid order.

    A failing point gives a row with its ``error`` and no metrics.  Rows with
    an error in a resumed file are run again.  On Ctrl-C the finished rows
    are written and :class:`SweepInterrupted` is raised.
    """
    keys = list(keys)
    first = identity_columns(keys)
    out = Path(out) if out is not None else None
    previous: list[dict] = []
    if out is not None and out.is_dir():
        raise CpasimError(f"--out {out}: is a directory, expected a .csv or .parquet file")
    kind = table.check_format(out) if out is not None else None
    # A device or FIFO gets the table once, at the end: a reader of a FIFO would
    # take the first of several writes for the whole.  It holds nothing to keep.
    streamed = out is not None and is_stream(out)
    if out is not None:
        if out.exists() and resume:
            previous = load_previous(out, keys, digest, analyze_columns)
        elif out.exists() and not overwrite and not streamed:
            raise CpasimError(
                f"--out {out}: the file exists; pass --resume to continue it or --overwrite"
            )
        if not out.parent.is_dir():
            raise CpasimError(f"--out {out}: the directory {out.parent} does not exist")
        try:  # now, not after every point has run
            check_writable(out)
        except CpasimError as exc:
            raise CpasimError(f"--out {exc}") from None
    if workers is not None and workers < 1:
        raise CpasimError(f"--workers: expected a whole number >= 1, got {workers}")
    if dask is not None:
        executors.import_distributed()

    kept = [r for r in previous if not r.get(table.ERROR)]
    done = {row_ident(r, keys) for r in kept}
    todo = [p for p in points if p.ident not in done]
    finished: dict[tuple, dict] = {row_ident(r, keys): r for r in kept}
    appender = None  # the CSV file is (re)written once the first new row is in

    def ordered() -> list[dict]:
        in_grid = [finished[p.ident] for p in points if p.ident in finished]
        wanted = {p.ident for p in points}
        return in_grid + [r for ident, r in finished.items() if ident not in wanted]

    fn = functools.partial(guarded, runner)
    if dask is not None:
        stream = executors.run_dask(fn, todo, dask, workers)
    else:
        count = min(workers or executors.cores(), max(len(todo), 1))
        stream = (
            executors.run_inline(fn, todo)
            if count == 1
            else executors.run_processes(fn, todo, count)
        )

    failed = 0
    lost: list[str] = []  # points lost to the executor, not to the model
    with _progress(progress) as bar:
        task = bar.add_task("sweep", total=len(todo), failed=0)
        try:
            for position, value in stream:
                point = todo[position]
                if isinstance(value, executors.ExecutorFailure):
                    metrics, error = {}, value.message
                    lost.append(error)
                else:
                    metrics, error = value
                row = {
                    **dict(point.values),
                    table.REPEAT: point.repeat,
                    table.SEED: point.seed,
                    table.ERROR: error or None,
                    **metrics,
                    table.DIGEST: digest,
                }
                finished[point.ident] = row
                if kind == ".csv" and not streamed:
                    if appender is None:
                        appender = table.CsvAppender(out, kept, first)
                    appender.append(row)
                failed += bool(error)
                bar.update(task, advance=1, failed=failed)
        except BaseException as exc:
            # Whatever stops the sweep, the rows finished by now reach the file.
            stream.close()
            added = len(finished) > len(kept)
            if out is not None and added:
                table.write_rows(out, ordered(), first)
            if isinstance(exc, KeyboardInterrupt):
                written = added or (bool(kept) and not streamed)  # (a resumed file's rows)
                raise SweepInterrupted(len(finished), len(points), out, written) from None
            raise
        finally:
            stream.close()
    rows = ordered()
    if out is not None:
        table.write_rows(out, rows, first)
    if todo and len(lost) == len(todo):
        # A table of nothing but infrastructure errors would pass for a result.
        raise CpasimError(f"no point of the sweep could run on the workers: {lost[0]}")
    return rows
