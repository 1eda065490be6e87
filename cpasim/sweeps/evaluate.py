"""What runs on a worker for one point: the model, and the guard around it.

Both functions are top-level so that worker processes and Dask can pickle
them by reference; the base configuration travels with each task.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from cpasim.errors import CpasimError
from cpasim.sweeps.points import Point
from cpasim.sweeps.table import flatten

#: Resolved settings copied into every row as ``cfg.<key>`` so that a results
#: file alone is enough to draw the closed-form bounds (see cpasim.plot).
CONTEXT_KEYS = (
    "link.rate",
    "link.delay",
    "link.mtu",
    "hosts.tx.tcp.wmem",
    "hosts.rx.tcp.rmem",
    "hosts.rx.tcp.rcvbuf",
    "hosts.rx.tcp.core_rmem_max",
    "hosts.rx.tcp.rx_truesize",
    "hosts.tx.tcp.timestamps",
)

#: Analysis columns added with ``analyze=True``.
ANALYSIS_COLUMNS = (
    "critical_state",
    "critical_state_share",
    "critical_state_waiting",
    "resource_loop",
    "resource_loop_count",
    "limited_by",
)


def guarded(runner: Callable[[Point], Mapping], point: Point) -> tuple[dict, str]:
    """``(metrics, "")`` when the point ran, ``({}, message)`` when it failed."""
    try:
        return dict(runner(point)), ""
    except CpasimError as exc:
        return {}, str(exc)
    except Exception as exc:  # any failure of one point becomes its row
        return {}, f"{type(exc).__name__}: {exc}"


def point_config(base, point: Point):
    """The base configuration with the point's values and seed applied."""
    return base.with_overrides({**point.overrides, "sim.seed": point.seed}, where="--grid")


def context(cfg, keys) -> dict[str, object]:
    """``cfg.<key>`` columns: the resolved values of ``keys``.

    A per-host key without prefix whose hosts differ has no single value and
    gets no column (``hosts.tx.*`` / ``hosts.rx.*`` hold them).
    """
    columns = {}
    for key in keys:
        try:
            columns[f"cfg.{key}"] = cfg.value(key)
        except CpasimError:
            continue
    return columns


def evaluate(base, analyze: bool, point: Point) -> dict[str, object]:
    """Simulate one point of the real model; the metrics of ``run --json``, flattened."""
    from cpasim.simulate import simulate

    cfg = point_config(base, point)
    row = context(cfg, dict.fromkeys([*CONTEXT_KEYS, *(k for k, _ in point.values)]))
    if not analyze:
        return {**_metrics(simulate(cfg)), **row}
    with tempfile.TemporaryDirectory(prefix="cpasim-sweep-") as tmp:
        trace = Path(tmp) / "point.cpt"
        result = simulate(cfg, trace_path=trace)
        return {**_metrics(result), **analysis_columns(trace, result, cfg), **row}


#: Fields of ``Result.to_json()`` that describe the run rather than measure it.
NOT_METRICS = ("analysis_start", "analysis_end")


def _metrics(result) -> dict[str, object]:
    data = {k: v for k, v in result.to_json().items() if k not in NOT_METRICS}
    return flatten(data)


def analysis_columns(trace: Path, result, cfg=None) -> dict[str, object]:
    """The most critical state and the strongest resource loop of one run, and (given
    its ``cfg``) the kind of what limits it (:mod:`cpasim.verdict`).

    With several connections in the trace, those of the connection with the
    longest critical path.
    """
    from cpasim.analysis import analyze
    from cpasim.predict.runs import summarize
    from cpasim.tracing import open_trace
    from cpasim.verdict import explain

    report = analyze(
        open_trace(trace), start=result.analysis_start, end=result.analysis_end, listing_limit=0
    )
    paths = [report.path] if report.path is not None else list(report.connections.values())
    paths = [p for p in paths if p.reachable and p.critical_path_ns is not None]
    if not paths:
        raise CpasimError("--analyze: the end of the run is not reachable from its start")
    path = max(paths, key=lambda p: p.critical_path_ns)
    state = path.most_critical[0] if path.most_critical else {}
    loop = path.loops[0] if path.loops else {}
    verdict = None
    if cfg is not None:
        verdict = explain(cfg, result.with_end_state(), summarize(report, str(trace)))
    return {
        "critical_state": state.get("name"),
        "critical_state_share": state.get("share"),
        "critical_state_waiting": state.get("waiting_share"),
        "resource_loop": loop.get("edge"),
        "resource_loop_count": loop.get("count"),
        "limited_by": verdict.kind if verdict is not None else None,
    }
