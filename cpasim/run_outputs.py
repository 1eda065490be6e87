"""What one run writes, and where: the one planner of ``cpasim run`` and :func:`cpasim.run`.

:func:`plan` settles, before anything is simulated, where each artefact goes (the
trace, the time series, the capture, the run folder's files), refusing what cannot
work (a non-empty folder, an unknown format, an interval without a series, a sidecar
that cannot be written) so that a refused run leaves nothing behind.
:func:`result_json` is what ``--json`` prints and ``result.json`` holds, whoever ran
it; :func:`finish` writes the series and the run folder once the run is over.

The two front doors spell their options differently (``--interval`` on the command
line, ``interval=`` in Python): ``flag`` turns an option's name into the caller's
spelling, so each refusal names what the user typed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cpasim import runfolder
from cpasim.errors import CpasimError
from cpasim.files import is_stream
from cpasim.pcap_spec import DEFAULT_SNAPLEN, PcapSpec


def cli_flag(name: str) -> str:
    """An option as the command line spells it: ``--interval``."""
    return "--" + name


def api_flag(name: str) -> str:
    """An option as :func:`cpasim.run` spells it: ``interval``."""
    return name


@dataclass
class Outputs:
    """Where a run's artefacts go; None: not asked for."""

    out: Path | None
    trace: Path | None
    series: Path | None
    #: The series' sample interval; None: no series is recorded.
    interval_ns: float | None
    capture: PcapSpec | None


def plan(
    cfg,
    *,
    out: str | Path | None = None,
    overwrite: bool = False,
    trace: str | Path | None = None,
    series: str | Path | None = None,
    sample: bool = False,
    interval: float | str | None = None,
    pcap: str | Path | None = None,
    pcap_side: str = "tx",
    snaplen: int = DEFAULT_SNAPLEN,
    flag: Callable[[str], str] = cli_flag,
) -> Outputs:
    """Where this run's files go; every refusal happens here, before the run.

    ``trace``, ``series``, ``pcap``: the paths asked for (a bare name goes into the run
    folder ``out``); ``sample``: record a series without writing it (the API's
    ``series=True``)."""
    from cpasim.series import check_path, default_interval, parse_interval

    out = Path(out) if out is not None else None
    trace = runfolder.artefact_path(out, runfolder.TRACE, trace) if trace else None
    if trace is not None and trace.parent.is_dir() and not is_stream(trace):
        from cpasim.predict.runs import check_sidecar_writable

        check_sidecar_writable(trace)  # (a run folder made below is empty)
    series = runfolder.artefact_path(out, runfolder.SERIES, series) if series else None
    if series is not None:
        check_path(series)
    interval_ns = None
    if series is not None or sample:
        what = flag("interval")
        interval_ns = default_interval(cfg) if interval is None else parse_interval(interval, what)
    elif interval is not None:
        raise CpasimError(
            f"{flag('interval')}: only with {flag('series')} (there is no series to sample)"
        )
    pcap = runfolder.artefact_path(out, runfolder.CAPTURE, pcap) if pcap is not None else None
    capture = PcapSpec(Path(pcap), pcap_side, snaplen) if pcap is not None else None
    if out is not None:  # after every check: a refused run leaves no folder behind
        runfolder.prepare(out, overwrite)
    return Outputs(out, trace, series, interval_ns, capture)


def result_json(result, outputs: Outputs, scenario, verdict=None, flow_verdicts=()) -> dict:
    """What ``--json`` prints and ``result.json`` holds: the result, the scenario it
    came from, the verdict when the run was explained (and each flow's: ``(flow entry,
    verdict or None)`` pairs), and where its files went."""
    data = result.to_json()
    data["scenario"] = _scenario_name(scenario)
    if verdict is not None:
        data["verdict"] = verdict.to_json()
    if flow_verdicts:
        data["flow_verdicts"] = [
            {"index": f["index"], "verdict": v.to_json() if v is not None else None}
            for f, v in flow_verdicts
        ]
    pcap = outputs.capture.path if outputs.capture is not None else None
    for name, path in (("trace", outputs.trace), ("series", outputs.series), ("pcap", pcap)):
        if path is not None:
            data[name] = str(path)
    return data


def _scenario_name(scenario) -> str:
    """The scenario as ``result.json`` names it: its file, else how it was given (the
    run folder's ``config.toml`` holds it whole either way)."""
    if scenario is None:
        return "(defaults)"
    if isinstance(scenario, str | Path):
        return str(scenario)
    return f"(a {type(scenario).__name__})"


def finish(outputs: Outputs, cfg, result, data: dict, *, analysis=None, trace=None) -> None:
    """Write the series and the run folder's config.toml, result.json and report.html
    (its verdict is ``data["verdict"]`` when the run was explained; its critical-path
    graph comes from ``analysis``, the run's unmodified analysis, and its timeline from
    the trace: ``trace`` (a file or an in-memory source, e.g. the one ``--explain``
    recorded), else the planned trace file; with a trace and no analysis the trace is
    analysed for them)."""
    if outputs.series is not None:
        result.series.write(outputs.series)
    if outputs.out is not None:
        runfolder.write_config(outputs.out, cfg)
        runfolder.write_result(outputs.out, data)
        runfolder.write_report(
            outputs.out,
            cfg,
            data,
            series=outputs.series,
            analysis=analysis,
            trace=trace if trace is not None else outputs.trace,
        )
