"""Check a prediction by re-simulating the changed configuration.

A prediction is honest only next to the re-simulation of the real parameter
change (``annotations.md``).  The re-simulation is traced too, so that its
actual bottleneck can be set beside the predicted one.  A change the
parameter table refuses (``tcp.cc``, a drop-tail queue, ...) is still
re-simulated: the validation then carries the refusal's reason instead of a
prediction, and no error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cpasim.config import Config
from cpasim.predict.runs import PathSummary, TracedRun, metric_of, traced_run
from cpasim.predict.whatif import Prediction, predict, refusal
from cpasim.progress import note


def relative_error(predicted: float, actual: float) -> float:
    """|predicted − actual| / actual (infinite when actual is 0 and they differ)."""
    if actual == 0:
        return 0.0 if predicted == 0 else float("inf")
    return abs(predicted - actual) / abs(actual)


@dataclass(frozen=True)
class Validation:
    """The re-simulated change beside its prediction, or beside the reason there is none."""

    metric: str  # goodput_bps | latency_ns
    baseline: float
    baseline_path: PathSummary
    prediction: Prediction | None  # None when refused
    actual: float
    actual_path: PathSummary
    refused: str | None = None  # why the table cannot predict the change
    #: What limits each: the baseline (its own change predicted), the changed system as
    #: predicted, and as re-simulated (:class:`cpasim.verdict.Verdict`, None if unknown).
    baseline_verdict: object = None
    predicted_verdict: object = None
    actual_verdict: object = None

    @property
    def error(self) -> float | None:
        """Relative error of the prediction; None when it was refused."""
        if self.prediction is None:
            return None
        return relative_error(self.prediction.predicted, self.actual)

    def to_dict(self) -> dict:
        """Prediction, re-simulation and error as plain data (``cpasim validate --json``)."""
        return self.to_json()

    def _repr_html_(self) -> str:
        """Baseline, prediction, re-simulation and error as a small table (notebooks)."""
        from cpasim.results import html_table, metric_text

        m = self.metric
        p = self.prediction
        rows = [
            ("baseline", metric_text(m, self.baseline)),
            ("predicted", metric_text(m, p.predicted) if p else f"refused: {self.refused}"),
            ("re-simulated", metric_text(m, self.actual)),
            ("error", "-" if self.error is None else f"{self.error:.1%}"),
            ("bottleneck before", self.baseline_path.bottleneck or "(none)"),
        ]
        if p is not None:
            rows.append(("bottleneck predicted", p.predicted_bottleneck or "(none)"))
        rows.append(("bottleneck re-simulated", self.actual_path.bottleneck or "(none)"))
        return html_table(f"validation of {m}", rows)

    def to_json(self) -> dict:
        m = self.metric
        if self.prediction is not None:
            head = self.prediction.to_json()
        else:
            head = {
                "metric": m,
                f"baseline_{m}": self.baseline,
                "baseline_critical_path_ns": self.baseline_path.critical_path_ns,
                "baseline_bottleneck": self.baseline_path.bottleneck,
                f"predicted_{m}": None,
            }
        return {
            **head,
            "refused": self.refused,
            f"actual_{m}": self.actual,
            "actual_critical_path_ns": self.actual_path.critical_path_ns,
            "actual_bottleneck": self.actual_path.bottleneck,
            "actual_most_critical": self.actual_path.most_critical,
            "error": self.error,
            "baseline_verdict": _json(self.baseline_verdict),
            "predicted_verdict": _json(self.predicted_verdict),
            "actual_verdict": _json(self.actual_verdict),
        }


def _json(v) -> dict | None:
    return v.to_json() if v is not None else None


def validate(
    run: TracedRun, new_cfg: Config, trace: Path, *, whole: bool = False, progress: bool = False
) -> Validation:
    """Predict ``new_cfg`` from ``run`` (over its window, or ``whole`` trace) unless
    the table refuses it, then simulate it (traced into ``trace``; ``progress``:
    its bar on stderr)."""
    from cpasim import verdict

    why_not = refusal(run.cfg, new_cfg)
    base_path = _baseline_path(run, whole)
    base_v = verdict.explain(run.cfg, run.result, run.path)
    prediction = predicted_v = None
    if why_not is None and not whole:
        base_v, prediction = verdict.baseline_and_change(run, new_cfg)
    elif why_not is None:
        prediction = predict(run, new_cfg, whole=True)
    if prediction is not None:
        predicted_v = verdict.of_prediction(run, new_cfg, prediction)
    with note("re-simulating the change"):
        actual = traced_run(new_cfg, trace, window=False, progress=progress)
    metric, _ = metric_of(run.result["workload"])
    return Validation(
        metric,
        run.metric,
        base_path,
        prediction,
        actual.metric,
        actual.path,
        why_not,
        baseline_verdict=base_v,
        predicted_verdict=predicted_v,
        actual_verdict=verdict.explain(new_cfg, actual.result, actual.path),
    )


def _baseline_path(run: TracedRun, whole: bool) -> PathSummary:
    """The baseline's critical path as a prediction would have set beside it."""
    if not whole and run.window is not None:
        return run.window.path
    return run.path
