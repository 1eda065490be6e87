"""``cpasim predict``, ``cpasim validate``, ``cpasim ladder``: what-ifs from a trace."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from cpasim import runfolder, verdict
from cpasim.cli import app
from cpasim.cli import outputs as outs
from cpasim.cli.outputs import OutOpt, OverwriteOpt
from cpasim.config import load_scenario
from cpasim.errors import CpasimError, printable
from cpasim.files import write_text_atomically
from cpasim.predict.runs import PathSummary, baseline
from cpasim.predict.whatif import changed_config, parse_changes, predict
from cpasim.progress import activity
from cpasim.verdict import Verdict

#: The changed scenario in a validate run folder (beside config.toml, the baseline).
CHANGED = "changed.toml"
#: The ladder's figure and table in its run folder.
LADDER_PLOT = "ladder.png"
LADDER_TABLE = "ladder.md"

Scenario = Annotated[Path, typer.Argument(help="Scenario file (TOML).")]
Sets = Annotated[
    list[str] | None, typer.Option("--set", help="KEY=VALUE applied to the scenario first.")
]
Changes = Annotated[
    list[str] | None,
    typer.Option("--change", help="KEY=VALUE to predict (e.g. link.rate=10Gbps); repeatable."),
]
TraceOpt = Annotated[
    Path | None,
    typer.Option(
        "--trace",
        help="Baseline trace: reused if it exists (its .run.json sidecar must match the "
        "scenario), else recorded there.",
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")]
Progress = Annotated[
    bool,
    typer.Option("--progress/--no-progress", help="Progress on stderr for work over 2 s."),
]
Whole = Annotated[
    bool,
    typer.Option(
        "--whole",
        help="Analyse the whole measured interval of the trace instead of its tail "
        "(slower; the tail is what the run's sidecar snapshots).",
    ),
]


def _fmt(metric: str, value: float) -> str:
    if metric == "goodput_bps":
        return f"{value / 1e6:.1f} Mb/s"
    return f"{value / 1e3:.2f} µs"


def _bottleneck(path: PathSummary) -> str:
    if path.bottleneck is None:
        return "(none)"
    return f"{printable(path.bottleneck)} ({path.share:.0%})"


def _limited(v: Verdict | None, path: PathSummary) -> str:
    """``limited by <resource> [kind]; most critical <state> (share)``."""
    head = "limited by (unknown)"
    if v is not None:
        head = f"limited by {printable(v.resource)} [{v.kind}]"
    return f"{head}; most critical {_bottleneck(path)}"


def _cp(path: PathSummary) -> str:
    return ", ".join(f"{v / 1e6:.3f} ms" for v in path.critical_path_ns.values())


def _configs(
    scenario: Path,
    change: list[str] | None,
    sets: list[str] | None,
    predictable: bool = True,
    simulating: bool = True,
):
    """The scenario with its ``--set``s, and the same with the ``--change``s applied
    (``predictable``: refused before any simulation if the table cannot predict it;
    ``simulating``: the baseline is to be simulated, so warn if that looks huge)."""
    cfg = load_scenario(scenario, sets=list(sets or []))
    if simulating:
        outs.warn_if_huge(cfg, ".cpt")  # the baseline is traced
    return cfg, changed_config(cfg, parse_changes(change or []), predictable=predictable)


def _echo_json(obj: dict) -> None:
    typer.echo(json.dumps(obj, indent=1, sort_keys=True))


@app.command("predict")
def predict_cmd(
    scenario: Scenario,
    change: Changes = None,
    trace: TraceOpt = None,
    set_: Sets = None,
    as_json: AsJson = False,
    whole: Whole = False,
    progress: Progress = True,
) -> None:
    """Predict a parameter change from the baseline's trace, without re-simulating it."""
    reused = trace is not None and trace.exists()
    cfg, new_cfg = _configs(scenario, change, set_, simulating=not reused)
    with (
        tempfile.TemporaryDirectory(prefix="cpasim-predict-") as tmp,
        activity("cpasim predict", progress),
    ):
        run = baseline(cfg, trace, Path(tmp), progress=progress)
        if whole:  # the verdict's own change is predicted over the tail; not here
            base_v = verdict.explain(run.cfg, run.result, run.path)
            p = predict(run, new_cfg, whole=True)
        else:
            base_v, p = verdict.baseline_and_change(run, new_cfg)
        new_v = verdict.of_prediction(run, new_cfg, p)
    if as_json:
        _echo_json(
            {**p.to_json(), "baseline_verdict": _json(base_v), "predicted_verdict": _json(new_v)}
        )
        return
    m = p.metric
    typer.echo(f"baseline   {_fmt(m, p.baseline)}  critical path {_cp(p.baseline_path)}")
    typer.echo(f"           {_limited(base_v, p.baseline_path)}")
    for line in p.effects:
        typer.echo(f"what-if    {printable(line)}")
    ratio = p.predicted / p.baseline if p.baseline else float("nan")
    typer.echo(
        f"predicted  {_fmt(m, p.predicted)} (× {ratio:.3f})  critical path {_cp(p.predicted_path)}"
    )
    typer.echo(f"           {_limited(new_v, p.predicted_path)}")
    typer.echo(f"analysed   {_span(p.analysed_ns)} of the run")
    _advice(base_v, cfg, new_cfg, scenario, set_ or [])


def _json(v: Verdict | None) -> dict | None:
    return v.to_json() if v is not None else None


def _advice(v: Verdict | None, cfg, new_cfg, scenario: Path, sets: list[str]) -> None:
    """The baseline's verdict in full, when its change is not the one asked about."""
    if v is None or not v.change or cfg.with_values(v.values).digest == new_cfg.digest:
        return
    typer.echo("")
    typer.echo("the baseline's own verdict:")
    for line in v.lines(str(scenario), sets):
        typer.echo(line)


def _span(ns: tuple[float, float]) -> str:
    return f"{ns[0] / 1e6:g}-{ns[1] / 1e6:g} ms"


@app.command("validate")
def validate_cmd(
    scenario: Scenario,
    change: Changes = None,
    trace: TraceOpt = None,
    set_: Sets = None,
    as_json: AsJson = False,
    whole: Whole = False,
    progress: Progress = True,
    out_dir: OutOpt = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Predict a change, then re-simulate it and report the prediction's error.

    A change the parameter table cannot predict is re-simulated all the same,
    with the reason the prediction was refused.  With --out DIR: DIR/config.toml
    (the baseline), DIR/changed.toml, DIR/result.json (what --json prints) and
    DIR/report.html."""
    from cpasim.predict.validation import validate  # here: predict needs none of it

    cfg, new_cfg = _configs(scenario, change, set_, predictable=False)
    if out_dir is not None:
        runfolder.prepare(out_dir, overwrite)
        trace = runfolder.artefact_path(out_dir, runfolder.TRACE, trace) if trace else None
    with (
        tempfile.TemporaryDirectory(prefix="cpasim-validate-") as tmp,
        activity("cpasim validate", progress),
    ):
        run = baseline(cfg, trace, Path(tmp), progress=progress)
        v = validate(run, new_cfg, Path(tmp) / "changed.cpt", whole=whole, progress=progress)
    if out_dir is not None:
        runfolder.write_config(out_dir, cfg)
        runfolder.write_config(out_dir, new_cfg, CHANGED)
        runfolder.write_result(out_dir, v.to_json())
        runfolder.write_report(out_dir, cfg, v.to_json())
    if as_json:
        _echo_json(v.to_json())
        return
    p = v.prediction
    m = v.metric
    typer.echo(f"baseline   {_fmt(m, v.baseline)}  {_limited(v.baseline_verdict, v.baseline_path)}")
    if p is None:
        typer.echo(f"refused    {v.refused}")
        typer.echo(f"actual     {_fmt(m, v.actual)}  {_limited(v.actual_verdict, v.actual_path)}")
        return
    for line in p.effects:
        typer.echo(f"what-if    {printable(line)}")
    typer.echo(
        f"predicted  {_fmt(m, p.predicted)}  {_limited(v.predicted_verdict, p.predicted_path)}"
    )
    typer.echo(f"actual     {_fmt(m, v.actual)}  {_limited(v.actual_verdict, v.actual_path)}")
    typer.echo(f"error      {v.error:.1%}  (predicted over {_span(p.analysed_ns)} of the run)")


@app.command("ladder")
def ladder_cmd(
    scenario: Scenario,
    steps: Annotated[
        int, typer.Option("--steps", help="Bottlenecks to remove one after the other.", min=1)
    ] = 3,
    set_: Sets = None,
    as_json: AsJson = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a bar chart (PNG) like Saidi's fig. 6.2.")
    ] = None,
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Also write the table as markdown here.")
    ] = None,
    keep: Annotated[
        Path | None, typer.Option("--keep", help="Keep the traces of every run in this directory.")
    ] = None,
    progress: Progress = True,
    out_dir: OutOpt = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Remove bottlenecks one by one; predict each configuration from every earlier run.

    With --out DIR: DIR/config.toml, DIR/result.json (what --json prints),
    DIR/report.html, DIR/ladder.md and DIR/ladder.png unless --markdown/--plot say
    otherwise."""
    from cpasim.predict import ladder as ladder_mod  # here: predict needs none of it

    cfg = load_scenario(scenario, sets=list(set_ or []))
    outs.warn_if_huge(cfg, ".cpt")
    if out_dir is not None:
        runfolder.prepare(out_dir, overwrite)
        plot = runfolder.artefact_path(out_dir, LADDER_PLOT, plot)
        markdown = runfolder.artefact_path(out_dir, LADDER_TABLE, markdown)
        keep = runfolder.artefact_path(out_dir, "traces", keep) if keep else None
    if keep is not None:
        try:
            keep.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CpasimError(f"--keep {keep}: cannot create directory: {exc.strerror}") from None
        with activity("cpasim ladder", progress):
            lad = ladder_mod.ladder(cfg, steps, keep, progress=progress)
    else:
        with (
            tempfile.TemporaryDirectory(prefix="cpasim-ladder-") as tmp,
            activity("cpasim ladder", progress),
        ):
            lad = ladder_mod.ladder(cfg, steps, Path(tmp), progress=progress)
    table = ladder_mod.markdown(lad)
    for target, write in ((plot, lambda p: ladder_mod.plot(lad, p)), (markdown, None)):
        if target is None:
            continue
        try:
            if write is not None:
                write(target)
            else:
                write_text_atomically(target, table)
        except OSError as exc:
            raise CpasimError(f"{target}: cannot write: {exc.strerror}") from None
        if write is not None:
            # stderr: stdout is the table (or --json).
            typer.echo(
                f"cpasim: wrote {target}: {ladder_mod.plot_what(lad)}",
                err=True,
            )
    if out_dir is not None:
        runfolder.write_config(out_dir, cfg)
        runfolder.write_result(out_dir, lad.to_json())
        chart = (
            [(ladder_mod.plot_what(lad), plot)] if plot and plot.suffix.lower() == ".png" else []
        )
        runfolder.write_report(out_dir, cfg, lad.to_json(), images=chart)
    if as_json:
        _echo_json(lad.to_json())
        return
    typer.echo(table, nl=False)
