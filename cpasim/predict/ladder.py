"""Saidi's prediction ladder (figure 6.2) in one call.

From the baseline: find the bottleneck, apply its remedy
(:mod:`cpasim.predict.remedies`), re-simulate (traced), and repeat ``steps``
times.  Then every traced run predicts every later configuration — the
cumulative change from its own configuration — in one ``analyze_many`` pass
over its trace.  The table sets each configuration's predictions from every
earlier run beside its re-simulated figure and the bottlenecks predicted and
found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cpasim.config import Config
from cpasim.files import replace_atomically
from cpasim.predict.remedies import Remedy, remedy_for
from cpasim.predict.runs import TracedRun, metric_of, traced_run
from cpasim.predict.validation import relative_error
from cpasim.predict.whatif import Prediction, predict_many
from cpasim.progress import note


@dataclass
class Rung:
    """One configuration of the ladder."""

    index: int  # 1-based, as in Saidi 2009's figure
    remedy: Remedy | None  # the change from the previous rung (None for the baseline)
    run: TracedRun
    predictions: dict[int, Prediction] = field(default_factory=dict)  # from rung index

    @property
    def actual(self) -> float:
        return self.run.metric

    @property
    def verdict(self):
        """What limits this configuration as re-simulated (:mod:`cpasim.verdict`)."""
        from cpasim.verdict import explain

        return explain(self.run.cfg, self.run.result, self.run.path)

    def error(self, source: int) -> float:
        return relative_error(self.predictions[source].predicted, self.actual)


@dataclass
class Ladder:
    metric: str
    rungs: list[Rung]
    stopped: str | None  # why the ladder ended early, if it did

    def to_dict(self) -> dict:
        """The ladder as plain data (what ``cpasim ladder --json`` prints)."""
        return self.to_json()

    def _repr_html_(self) -> str:
        """Per configuration: its change, re-simulated figure and bottleneck (notebooks)."""
        from cpasim.results import html_table, metric_text

        rows = [
            (
                f"config {r.index}: {r.remedy.describe() if r.remedy else 'baseline'}",
                f"{metric_text(self.metric, r.actual)}, bottleneck {r.run.path.bottleneck}",
            )
            for r in self.rungs
        ]
        if self.stopped:
            rows.append(("stopped", self.stopped))
        return html_table(f"prediction ladder of {self.metric}", rows)

    def to_json(self) -> dict:
        rows = []
        for r in self.rungs:
            rows.append(
                {
                    "config": r.index,
                    "change": r.remedy.describe() if r.remedy else None,
                    "reason": r.remedy.diagnosis.reason if r.remedy else None,
                    "kind": r.remedy.diagnosis.kind if r.remedy else None,
                    f"actual_{self.metric}": r.actual,
                    "actual_bottleneck": r.run.path.bottleneck,
                    "limited_by": _verdict_json(r),
                    "predictions": [
                        {
                            "from_config": src,
                            f"predicted_{self.metric}": p.predicted,
                            "error": r.error(src),
                            "predicted_bottleneck": p.predicted_bottleneck,
                        }
                        for src, p in sorted(r.predictions.items())
                    ],
                }
            )
        return {"metric": self.metric, "configs": rows, "stopped": self.stopped}


def ladder(cfg: Config, steps: int, workdir: Path, *, progress: bool = False) -> Ladder:
    """Run the ladder from ``cfg`` for up to ``steps`` remedies; traces go to ``workdir``."""
    workdir = Path(workdir)
    with note("config 1: the baseline"):
        rungs = [Rung(1, None, traced_run(cfg, workdir / "config1.cpt", progress=progress))]
    stopped = None
    while len(rungs) <= steps:
        last = rungs[-1]
        remedy = remedy_for(last.run.cfg, last.run.path)
        if remedy is None:
            stopped = (
                f"config {last.index}: no remedy known for its bottleneck "
                f"{last.run.path.bottleneck}"
            )
            break
        new_cfg = remedy.apply(last.run.cfg)
        index = last.index + 1
        with note(f"config {index}: {remedy.describe()}"):
            run = traced_run(new_cfg, workdir / f"config{index}.cpt", progress=progress)
        rungs.append(Rung(index, remedy, run))
    for i, source in enumerate(rungs):
        later = rungs[i + 1 :]
        with note(f"predicting the later configurations from config {source.index}"):
            preds = predict_many(source.run, [r.run.cfg for r in later])
        for r, p in zip(later, preds, strict=True):
            r.predictions[source.index] = p
    metric, _ = metric_of(cfg.workload.kind)
    return Ladder(metric, rungs, stopped)


def _verdict_json(r: Rung) -> dict | None:
    v = r.verdict
    return v.to_json() if v is not None else None


def _limited(r: Rung) -> str:
    v = r.verdict
    return f"{v.kind}: {v.resource}" if v is not None else "—"


def _fmt(metric: str, value: float) -> str:
    return f"{value / 1e6:.0f}" if metric == "goodput_bps" else f"{value / 1e3:.1f}"


def unit_of(metric: str) -> str:
    return "Mb/s" if metric == "goodput_bps" else "µs"


def markdown(lad: Ladder) -> str:
    """The ladder as a markdown table (figure 6.2's numbers)."""
    n = len(lad.rungs)
    unit = unit_of(lad.metric)
    head = ["config", "change"]
    head += [f"predicted from {i} ({unit})" for i in range(1, n)]
    head += [
        f"re-simulated ({unit})",
        "bottleneck (predicted from 1 / re-simulated)",
        "limited by (re-simulated)",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in lad.rungs:
        cells = [str(r.index), r.remedy.describe() if r.remedy else "baseline"]
        for src in range(1, n):
            p = r.predictions.get(src)
            cells.append(
                f"{_fmt(lad.metric, p.predicted)} ({r.error(src):.1%})" if p is not None else "—"
            )
        cells.append(_fmt(lad.metric, r.actual))
        first = r.predictions.get(1)
        cells.append(f"{first.predicted_bottleneck if first else '—'} / {r.run.path.bottleneck}")
        cells.append(_limited(r))
        lines.append("| " + " | ".join(cells) + " |")
    if lad.stopped:
        lines.append("")
        lines.append(f"Stopped early: {lad.stopped}.")
    return "\n".join(lines) + "\n"


def _wrap(text: str, width: int = 22) -> str:
    """``text`` in lines of about ``width`` characters, broken between words, or after
    the ``=`` of a ``key=value`` too long for a line; never inside a word: a value
    and its unit (``4MiB``) stay whole."""
    pieces = []
    for word in text.split():
        key, eq, value = word.partition("=")
        if eq and value and len(word.rstrip(",")) > width:
            pieces += [key + eq, value]
        else:
            pieces.append(word)
    lines: list[str] = []
    line = ""
    for piece in pieces:
        joined = line + ("" if line.endswith("=") else " ") + piece if line else piece
        if line and len(joined.rstrip(",")) > width:
            lines.append(line)
            line = piece
        else:
            line = joined
    return "\n".join([*lines, line]) if line else text


def _label(ax, bar, text: str, **style) -> None:
    """``text`` just above the top of ``bar``."""
    ax.annotate(
        text,
        (bar.get_x() + bar.get_width() / 2, bar.get_height()),
        xytext=(0, 2),
        textcoords="offset points",
        ha="center",
        va="bottom",
        fontsize=8,
        **style,
    )


def draw(lad: Ladder):
    """Grouped bars like figure 6.2, named: per configuration the change that made
    it, its predictions (each with its error against the re-simulation) and the
    re-simulated figure, and the bottleneck predicted and found."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scale = 1e6 if lad.metric == "goodput_bps" else 1e3
    unit = unit_of(lad.metric)
    n = len(lad.rungs)
    fig, ax = plt.subplots(figsize=(2.5 + 2.6 * n, 5.4))
    width = 0.8 / n
    colours = plt.get_cmap("tab10").colors
    top = max(
        [r.actual for r in lad.rungs]
        + [p.predicted for r in lad.rungs for p in r.predictions.values()]
    )
    for src in range(1, n):
        xs, ys, errs = [], [], []
        for r in lad.rungs:
            p = r.predictions.get(src)
            if p is not None:
                xs.append(r.index - 0.4 + (src - 0.5) * width)
                ys.append(p.predicted / scale)
                # Signed, so the bar says whether the prediction was over or under.
                errs.append((p.predicted - r.actual) / r.actual if r.actual else float("nan"))
        if xs:
            bars = ax.bar(
                xs, ys, width, color=colours[(src - 1) % 10], label=f"predicted from config {src}"
            )
            for bar, err in zip(bars, errs, strict=True):
                _label(ax, bar, f"{err:+.1%}" if err == err else "n/a")
    xs = [r.index - 0.4 + (n - 0.5) * width for r in lad.rungs]
    bars = ax.bar(
        xs, [r.actual / scale for r in lad.rungs], width, color="black", label="re-simulated"
    )
    for bar, r in zip(bars, lad.rungs, strict=True):
        _label(ax, bar, _fmt(lad.metric, r.actual), fontweight="bold")
    ax.axhline(lad.rungs[0].actual / scale, linestyle=":", color="grey", label="baseline")
    ax.set_ylim(0, top / scale * 1.18)
    ticks = []
    for r in lad.rungs:
        change = r.remedy.describe() if r.remedy else "baseline"
        found = r.run.path.bottleneck
        first = r.predictions.get(1)
        v = r.verdict
        limited = f"limited by ({v.kind}):\n{_wrap(v.resource)}\n\n" if v is not None else ""
        label = f"config {r.index}: {_wrap(change)}\n\n{limited}bottleneck:\n{_wrap(found)}"
        if first is not None and first.predicted_bottleneck != found:
            label += f"\n(predicted from 1:\n{_wrap(first.predicted_bottleneck)})"
        ticks.append(label)
    ax.set_xticks([r.index for r in lad.rungs], ticks, fontsize=8)
    name = "goodput" if lad.metric == "goodput_bps" else "mean latency"
    ax.set_ylabel(f"{name} ({unit})")
    ax.set_title(
        "Prediction ladder: each step applies the remedy for the bottleneck; "
        "predictions are labelled (predicted − re-simulated) / re-simulated",
        fontsize=9,
    )
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if lad.stopped:
        fig.text(0.01, 0.01, _wrap(f"Stopped early: {lad.stopped}.", 140), fontsize=8)
    fig.tight_layout()
    return fig


def plot_what(lad: Ladder) -> str:
    """What the chart of :func:`plot` shows, in a line."""
    name = "goodput" if lad.metric == "goodput_bps" else "mean latency"
    return (
        f"{name} of {len(lad.rungs)} configurations, each predicted from every earlier "
        "one (bars labelled with their error) beside its re-simulation, and the bottlenecks"
    )


def plot(lad: Ladder, path: Path) -> None:
    """Write :func:`draw` to ``path`` (.png, .svg or .pdf)."""
    import matplotlib.pyplot as plt

    fig = draw(lad)
    try:
        fmt = Path(path).suffix.lower()[1:] or "png"
        replace_atomically(path, lambda tmp: fig.savefig(tmp, format=fmt, dpi=110))
    finally:
        plt.close(fig)
