"""Check a prediction by re-simulating the changed configuration.

A prediction is honest only next to the re-simulation of the real parameter
change (``annotations.md``).  The re-simulation is traced too, so that its
actual bottleneck can be set beside the predicted one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cpasim.config import Config
from cpasim.predict.predict import Prediction, predict
from cpasim.predict.runs import PathSummary, TracedRun, traced_run
from cpasim.progress import note


def relative_error(predicted: float, actual: float) -> float:
    """|predicted − actual| / actual (infinite when actual is 0 and they differ)."""
    if actual == 0:
        return 0.0 if predicted == 0 else float("inf")
    return abs(predicted - actual) / abs(actual)


@dataclass(frozen=True)
class Validation:
    prediction: Prediction
    actual: float
    actual_path: PathSummary

    @property
    def error(self) -> float:
        return relative_error(self.prediction.predicted, self.actual)

    def to_dict(self) -> dict:
        """Prediction, re-simulation and error as plain data (``cpasim validate --json``)."""
        return self.to_json()

    def to_json(self) -> dict:
        p = self.prediction
        m = p.metric
        return {
            **p.to_json(),
            f"actual_{m}": self.actual,
            "actual_critical_path_ns": self.actual_path.critical_path_ns,
            "actual_bottleneck": self.actual_path.bottleneck,
            "actual_most_critical": self.actual_path.most_critical,
            "error": self.error,
        }


def validate(
    run: TracedRun, new_cfg: Config, trace: Path, *, whole: bool = False, progress: bool = False
) -> Validation:
    """Predict ``new_cfg`` from ``run`` (over its window, or ``whole`` trace), then
    simulate it (traced into ``trace``; ``progress``: its bar on stderr)."""
    prediction = predict(run, new_cfg, whole=whole)
    with note("re-simulating the change"):
        actual = traced_run(new_cfg, trace, window=False, progress=progress)
    return Validation(prediction, actual.metric, actual.path)
