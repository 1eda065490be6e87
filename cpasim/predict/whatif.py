"""Predict a changed configuration from the trace of a baseline run.

The change is translated into transforms by the parameter table
(:mod:`cpasim.predict.transforms_table`), the baseline trace is re-analysed
with them, and the metric is scaled by the ratio of critical-path lengths
(:func:`cpasim.predict.runs.scaled_metric`).  Lengths and busy times are
taken over the measured interval, after ``sim.warmup``
(:mod:`cpasim.predict.window`), like the metric itself: the changed graph does
the measured interval's work in the predicted length, so the measured goodput
scales by the ratio of the lengths.  Latency workloads scale their mean
latency the other way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cpasim.config import Config
from cpasim.errors import CpasimError
from cpasim.predict.bounds import busy
from cpasim.predict.runs import (
    PathSummary,
    TracedRun,
    metric_of,
    scaled_metric,
    summarize,
)
from cpasim.predict.transforms_table import Refused, check_keys, plan_change
from cpasim.predict.window import WINDOW_COMMIT_EVERY, analyses
from cpasim.progress import note
from cpasim.tracing import open_trace


def parse_changes(items: Sequence[str]) -> dict[str, str]:
    """``["link.rate=10Gbps", ...]`` → ``{"link.rate": "10Gbps"}``; at least one."""
    if not items:
        raise CpasimError("--change: give at least one KEY=VALUE (e.g. --change link.rate=10Gbps)")
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise CpasimError(f"--change {item!r}: expected KEY=VALUE, e.g. link.rate=10Gbps")
        if key in out:
            raise CpasimError(f"--change {key}: given twice")
        out[key] = value
    return out


def changed_config(cfg: Config, changes: Mapping[str, str], *, predictable: bool = True) -> Config:
    """``cfg`` with ``changes`` applied.  With ``predictable`` a change the table cannot
    map or predict (a refused key, a shrinking capacity) is refused before any
    simulation; without it (``validate``, which re-simulates whatever it is given)
    only a change that changes nothing is."""
    if predictable:
        check_keys(changes)
    new = cfg.with_overrides(dict(changes), where="--change")
    if not cfg.changes(new):
        raise CpasimError(
            f"--change {', '.join(f'{k}={v}' for k, v in changes.items())}: "
            "the configuration already has these values; nothing to predict"
        )
    if predictable:
        plan_change(cfg, new)
    return new


def refusal(cfg: Config, new: Config) -> str | None:
    """Why ``cfg → new`` cannot be predicted from a trace, or None if it can."""
    try:
        plan_change(cfg, new)
    except Refused as why:
        return str(why)
    return None


@dataclass(frozen=True)
class Prediction:
    """A what-if answered from one traced run."""

    metric: str  # goodput_bps | latency_ns
    baseline: float
    predicted: float
    baseline_path: PathSummary
    predicted_path: PathSummary
    effects: tuple[str, ...]
    analysed_ns: tuple[float, float]  # the stretch of the run the lengths cover

    @property
    def predicted_bottleneck(self) -> str | None:
        return self.predicted_path.bottleneck

    def to_dict(self) -> dict:
        """The prediction as plain data (what ``cpasim predict --json`` prints)."""
        return self.to_json()

    @property
    def ratio(self) -> float:
        """predicted / baseline (NaN for a baseline of 0)."""
        return self.predicted / self.baseline if self.baseline else float("nan")

    def __repr__(self) -> str:
        from cpasim.results import metric_text

        return (
            f"Prediction({self.metric}: {metric_text(self.metric, self.baseline)} -> "
            f"{metric_text(self.metric, self.predicted)} (x{self.ratio:.3f}), bottleneck "
            f"{self.baseline_path.bottleneck} -> {self.predicted_path.bottleneck})"
        )

    def _repr_html_(self) -> str:
        """Baseline, prediction and bottlenecks as a small table (notebooks)."""
        from cpasim.results import html_table, metric_text

        rows = [
            ("baseline", metric_text(self.metric, self.baseline)),
            ("predicted", f"{metric_text(self.metric, self.predicted)} (×{self.ratio:.3f})"),
            ("bottleneck before", self.baseline_path.bottleneck or "(none)"),
            ("bottleneck after", self.predicted_path.bottleneck or "(none)"),
        ]
        rows += [("what-if", e) for e in self.effects]
        return html_table(f"prediction of {self.metric}", rows)

    def to_json(self) -> dict:
        m = self.metric
        return {
            "metric": m,
            f"baseline_{m}": self.baseline,
            f"predicted_{m}": self.predicted,
            "baseline_critical_path_ns": self.baseline_path.critical_path_ns,
            "predicted_critical_path_ns": self.predicted_path.critical_path_ns,
            "baseline_bottleneck": self.baseline_path.bottleneck,
            "predicted_bottleneck": self.predicted_path.bottleneck,
            "predicted_most_critical": self.predicted_path.most_critical,
            "predicted_loops": self.predicted_path.loops,
            "transforms": list(self.effects),
            "analysed_ns": list(self.analysed_ns),
        }


def predict_many(
    run: TracedRun, configs: Sequence[Config], *, whole: bool = False
) -> list[Prediction]:
    """Predict every config in ``configs`` from ``run`` in one pass over its trace:
    over the run's window (the tail of the trace) when it has one, over the whole
    measured interval with ``whole`` or without a window."""
    senders = (run.result.get("end_state") or {}).get("tcp")
    plans = [plan_change(run.cfg, c, run.state_means, run.state_entries, senders) for c in configs]
    if not plans:
        return []
    window = None if whole else run.window
    end = run.cfg.sim.duration
    what = "predicting from the tail of" if window is not None else "predicting from"
    with note(f"{what} {run.trace.name}"):
        results, base_path, active, analysed = _analyse_plans(run, plans, window, end)
    metric, higher = metric_of(run.result["workload"])
    out = []
    for cfg, plan, (res, cut, _) in zip(configs, plans, results, strict=True):
        lines = plan.describe()
        path = summarize(res, f"prediction ({'; '.join(lines)})", cut).bounded(
            busy(cfg, plan.transforms, active)
        )
        out.append(
            Prediction(
                metric=metric,
                baseline=run.metric,
                predicted=scaled_metric(run.metric, higher, base_path, path),
                baseline_path=base_path,
                predicted_path=path,
                effects=tuple(lines),
                analysed_ns=analysed,
            )
        )
    return out


def _analyse_plans(run: TracedRun, plans, window, end):
    """One pass over the window (or the whole measured interval) for every plan."""
    if window is not None:
        base_path, active = window.path, window.state_active
        analysed = (window.window.t_measure, end)
        results = analyses(
            lambda: window.window.source(run.trace),
            run.start,
            run.end,
            [p.transforms for p in plans],
            window.window.t_measure,
            commit_every=WINDOW_COMMIT_EVERY,
            conns=run.result.get("analysis_conns"),
        )
    else:
        base_path, active = run.path, run.state_active
        analysed = (run.cfg.sim.warmup, end)
        results = analyses(
            lambda: open_trace(run.trace),
            run.start,
            run.end,
            [p.transforms for p in plans],
            run.cfg.sim.warmup,
            conns=run.result.get("analysis_conns"),
        )
    return results, base_path, active, analysed


def predict(run: TracedRun, new_cfg: Config, *, whole: bool = False) -> Prediction:
    """Predict ``new_cfg`` from ``run`` (one pass over its window or whole trace)."""
    return predict_many(run, [new_cfg], whole=whole)[0]
