"""Parameter sweeps: many (Config → run → Result) on local processes or Dask.

The package is named ``sweeps`` so that ``cpasim.sweep`` can be the function.

* :mod:`~cpasim.sweeps.points`: axes, product/zip expansion, repeats, seeds;
* :mod:`~cpasim.sweeps.executors`: in-process, local worker processes, Dask;
* :mod:`~cpasim.sweeps.evaluate`: one point on a worker (simulate, analyze);
* :mod:`~cpasim.sweeps.table`: rows, CSV/parquet files;
* :mod:`~cpasim.sweeps.runner`: progress, resume, failures, Ctrl-C.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cpasim.errors import CpasimError
from cpasim.sweeps.agreement import add_agreement
from cpasim.sweeps.evaluate import ANALYSIS_COLUMNS, evaluate
from cpasim.sweeps.points import make_points, normalize_axes
from cpasim.sweeps.runner import SweepInterrupted, execute, identity_columns
from cpasim.sweeps.table import ERROR, columns_of, write_rows

__all__ = ["SweepInterrupted", "SweepResult", "plan", "sweep", "sweep_rows"]


def plan(
    scenario=None,
    grid: Mapping[str, Sequence] | None = None,
    *,
    zip: bool = False,
    repeat: int = 1,
    sets: Sequence[str] = (),
):
    """The base configuration and the points of a sweep, every key and value checked.

    An unknown key or a value the configuration refuses fails here, before
    anything runs.  A combination that only fails together fails later, as
    that point's row.
    """
    from cpasim.config import Config, load_scenario, parse_set, resolve

    if isinstance(scenario, Config):
        base = scenario.with_overrides(dict(parse_set(s) for s in sets), where="--set")
    else:
        base = load_scenario(scenario, sets=list(sets))
    axes = normalize_axes(grid or {})
    if "sim.seed" in axes:
        raise CpasimError(
            "--grid sim.seed: seeds are derived per point; use --repeat N for several seeds"
        )
    points = make_points(axes, zip_axes=zip, repeat=repeat, base_seed=base.sim.seed)
    # Each key and value on its own: name, type, unit and range.  Rules that
    # tie parameters together are checked per point, where a clash is that
    # point's error row (a small window may suit a small MTU in the grid).
    flat = base.flat()
    for key, values in axes.items():
        for value in values:
            resolve.apply(flat, [(key, resolve.parse_text(value, f"--grid {key}"))], "--grid")
    return base, list(axes), points


@dataclass
class SweepResult:
    """The table of a sweep: one row (a dict) per (point, repeat), in grid order.

    ``keys`` are the varied parameters; each row holds them, ``repeat``,
    ``seed``, ``error`` (None when the point ran) and the run's metrics.
    """

    rows: list[dict]
    keys: list[str]
    out: Path | None = None
    #: What a person should know about the sweep as a whole (repeats that cannot differ).
    notes: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[dict]:
        """The rows of the points that failed."""
        return [r for r in self.rows if r.get(ERROR)]

    def column(self, name: str) -> list:
        """One column's values, row by row (None where a row lacks it)."""
        return [r.get(name) for r in self.rows]

    def to_dict(self) -> dict:
        return {"keys": list(self.keys), "rows": [dict(r) for r in self.rows]}

    def to_frame(self):
        """The rows as a pandas DataFrame, varied keys and identity columns first."""
        from cpasim.results import frame

        return frame(self.rows, columns_of(self.rows, identity_columns(self.keys)))

    def __len__(self) -> int:
        return len(self.rows)


def sweep(
    scenario=None,
    grid: Mapping[str, Sequence] | None = None,
    zip: bool = False,
    repeat: int = 1,
    workers: int | None = None,
    dask: str | None = None,
    out: str | Path | None = None,
    resume: bool = False,
    analyze: bool = False,
    sets: Sequence[str] = (),
    *,
    overrides: Mapping[str, object] | None = None,
    overwrite: bool = False,
    progress: bool = True,
) -> SweepResult:
    """Run a sweep and return its table (:class:`SweepResult`; ``.to_frame()`` for
    pandas), one row per (point, repeat) in grid order.

    ``scenario``: a file, a dict or a Config (see :func:`cpasim.load`), with
    ``overrides`` (``{"sim.duration": "50ms"}``) or ``sets`` (``["KEY=VALUE"]``).
    ``grid`` maps dotted keys to lists of values (``{"link.rate": ["1Gbps",
    "10Gbps"]}``); ``zip=True`` pairs the lists instead of crossing them.
    ``workers`` local processes (default: one per core; 1 runs here), or
    ``dask="tcp://host:8786"`` / ``dask="local"``.  Worker processes never
    import the caller's ``__main__``, so a plain script, ``python -`` and a
    notebook may call this at top level.  ``out`` (.csv or .parquet) is written
    as rows finish; ``resume=True`` skips the points it already holds.
    ``analyze=True`` adds the most critical state and resource loop.  Ctrl-C
    writes the finished rows and raises :class:`SweepInterrupted`.  If no point
    could run at all (every worker lost), raises :class:`CpasimError` naming why.
    """
    if overrides or not isinstance(scenario, str | Path | type(None)):
        from cpasim.config import scenario_config

        scenario = scenario_config(scenario, overrides)
    notes: list[str] = []
    rows, keys = sweep_rows(
        scenario,
        grid,
        zip,
        repeat,
        workers,
        dask,
        out,
        resume,
        analyze,
        sets,
        overwrite,
        progress,
        note=notes.append,
    )
    return SweepResult(rows, keys, Path(out) if out is not None else None, notes)


def sweep_rows(
    scenario=None,
    grid=None,
    zip=False,
    repeat=1,
    workers=None,
    dask=None,
    out=None,
    resume=False,
    analyze=False,
    sets=(),
    overwrite=False,
    progress=True,
    *,
    note: Callable[[str], None] | None = None,
) -> tuple[list[dict], list[str]]:
    """:func:`sweep` returning the rows as dicts and the varied keys; ``note`` is told,
    before anything runs, what a person should know about the sweep as a whole."""
    base, keys, points = plan(scenario, grid, zip=zip, repeat=repeat, sets=sets)
    said = repeat_note(base, points, repeat)
    if said is not None and note is not None:
        note(said)
    rows = execute(
        points,
        functools.partial(evaluate, base, analyze),
        keys=keys,
        digest=base.digest,
        workers=workers,
        dask=dask,
        out=out,
        resume=resume,
        overwrite=overwrite,
        progress=progress,
        analyze_columns=ANALYSIS_COLUMNS if analyze else (),
    )
    if add_agreement(rows, keys) and out is not None:  # the file gets the column too
        write_rows(Path(out), rows, identity_columns(keys))
    return rows, keys


def repeat_note(base, points, repeat: int) -> str | None:
    """Repeats differ only by their seed: say so when no point of the sweep draws a
    random number (:func:`~cpasim.model.system.random_draws`), as its rows will be
    the same."""
    if repeat <= 1:
        return None
    from cpasim.model.system import random_draws

    seen: set[tuple] = set()
    for point in points:
        values = tuple(sorted(point.overrides.items()))
        if values in seen:
            continue
        seen.add(values)
        try:
            cfg = base.with_overrides(point.overrides, where="--grid")
        except CpasimError:
            continue  # a clash of values: that point's row says so
        if random_draws(cfg):
            return None
    return (
        f"--repeat {repeat}: nothing in this scenario draws random numbers (no link.loss, "
        "no BBR, no webserver file sizes), so every repeat of a point gives the same row"
    )
