"""The Python API: what ``import cpasim`` offers, built on the same code as the CLI.

Each function returns a result object with plain attributes, ``to_dict()``
and, where it is a table, ``to_frame()`` (pandas, optional).  Scenarios are
given as a file path, a dict or a :class:`~cpasim.config.Config`; parameters
are overridden with ``overrides={"link.rate": "10Gbps"}`` or as keywords,
``**{"link.rate": "10Gbps"}`` (keys are dotted, so they are passed as a dict).
Errors a user can cause raise :class:`~cpasim.errors.CpasimError` with one
line naming the key, file or record.  See ``docs/api.md``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cpasim.config import Config, scenario_config
from cpasim.errors import CpasimError
from cpasim.pcap_spec import DEFAULT_SNAPLEN

Scenario = str | Path | Mapping[str, Any] | Config | None


def _merged(overrides: Mapping[str, Any] | None, keywords: Mapping[str, Any]) -> dict:
    return {**(overrides or {}), **keywords}


def load(scenario: Scenario = None, overrides: Mapping[str, Any] | None = None, **keywords):
    """The resolved :class:`~cpasim.config.Config` of a scenario (defaults if None).

    >>> cfg = load("scenarios/tcp-stream.toml", **{"link.rate": "10Gbps"})
    >>> cfg.link.rate, cfg.value("link.rate"), cfg.digest
    """
    return scenario_config(scenario, _merged(overrides, keywords))


def run(
    scenario: Scenario = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    trace: bool | str | Path | None = None,
    progress: bool = False,
    series: bool | str | Path | None = None,
    interval: float | str | None = None,
    out: str | Path | None = None,
    overwrite: bool = False,
    pcap: str | Path | None = None,
    pcap_side: str = "tx",
    snaplen: int = DEFAULT_SNAPLEN,
    **keywords,
):
    """Simulate a scenario; a :class:`~cpasim.simulate.Result`.

    ``trace=True`` records the annotation trace in memory, a path (``.cpt`` or
    ``.jsonl``) writes it there with its ``.run.json`` sidecar (the run's config
    digest and result, what :func:`predict` and :func:`analyze` read beside it);
    ``result.trace`` is then what :func:`analyze` reads, and ``result.config`` the
    configuration simulated.
    ``series=True`` records the time series (:mod:`cpasim.series`) every
    ``interval`` (ns or ``"100us"``; default about 500 rows), a path also writes it
    there (.csv/.parquet); ``result.series`` is then a pandas DataFrame.
    ``out``: a run folder (refused if not empty unless ``overwrite``) receiving
    ``config.toml``, ``result.json``, ``report.html`` and the trace/series given as
    bare names.
    ``pcap`` writes the frames on the link there, as ``cpasim run --pcap``
    (tapped beside ``pcap_side``'s NIC, ``snaplen`` bytes kept per frame).
    """
    from cpasim import run_outputs
    from cpasim.simulate import simulate
    from cpasim.tracing import Tracer

    cfg = load(scenario, overrides, **keywords)
    # The planner of 'cpasim run': the same refusals, the same places, the same result.json.
    plan = run_outputs.plan(
        cfg,
        out=out,
        overwrite=overwrite,
        trace=trace if trace is not True and trace is not False else None,
        series=series if series is not True and series is not False else None,
        sample=series is True,
        interval=interval,
        pcap=pcap,
        pcap_side=pcap_side,
        snaplen=snaplen,
        flag=run_outputs.api_flag,
    )
    every, capture = plan.interval_ns, plan.capture
    if trace is True:
        tracer = Tracer.in_memory(None)
        result = simulate(cfg, tracer=tracer, progress=progress, series=every, pcap=capture)
        tracer.close()
        result.trace = tracer.source()
    elif plan.trace is not None:
        from cpasim.files import is_stream
        from cpasim.predict.runs import write_run_record

        result = simulate(cfg, trace_path=plan.trace, progress=progress, series=every, pcap=capture)
        result.trace = plan.trace
        if not is_stream(result.trace):  # as 'cpasim run --trace'
            write_run_record(cfg, result.trace, result.with_end_state(), result.trace_digest)
    else:
        result = simulate(cfg, progress=progress, series=every, pcap=capture)
    result.config = cfg
    run_outputs.finish(
        plan, cfg, result, run_outputs.result_json(result, plan, scenario), trace=result.trace
    )
    if every is not None:
        result.series = result.series.to_frame()
    return result


def _pairs(value, what: str) -> list:
    if value is None:
        return []
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, str):
        raise CpasimError(f"{what}: expected a dict {{pattern: value}}, got the string {value!r}")
    return list(value)


def transforms(
    scale: Mapping[str, float] | None = None,
    scale_comm: Mapping[str, float] | None = None,
    breaks: str | Iterable[str] | None = None,
    capacity: Mapping[str, int] | None = None,
):
    """A what-if for :func:`analyze`: ``scale={"tx:App:write": 0.5}`` (states),
    ``scale_comm={"tx:Q*": 0}`` (latency through queues), ``breaks=["tx:Window"]``
    (an infinite resource), ``capacity={"tx:Window": 1}`` (one more slot or credit)."""
    from cpasim.analysis import Transforms

    if isinstance(breaks, str):
        breaks = [breaks]
    return Transforms(
        scale=_pairs(scale, "scale"),
        scale_comm=_pairs(scale_comm, "scale_comm"),
        breaks=list(breaks or []),
        capacity=_pairs(capacity, "capacity"),
    )


def _source(trace):
    """A TraceSource and the default (start, end) of what ``analyze`` was given."""
    from cpasim.simulate import Result
    from cpasim.tracing import Tracer, TraceSource, open_trace

    ends = ("tx:App", "rx:App")
    if isinstance(trace, Result):
        if trace.trace is None:
            raise CpasimError("analyze: this run recorded no trace; run it with trace=True")
        ends = (":".join(trace.analysis_start), ":".join(trace.analysis_end))
        trace = trace.trace
    if isinstance(trace, Tracer):
        return trace.source(), ends  # flushes what it still buffers
    if isinstance(trace, TraceSource):
        return trace, ends
    if isinstance(trace, str | Path):
        return open_trace(trace), ends
    raise CpasimError(
        f"analyze: expected a run result, a Tracer, a TraceSource or a trace file, "
        f"got {type(trace).__name__}"
    )


def analyze(
    trace,
    start: str | None = None,
    end: str | None = None,
    *,
    scale: Mapping[str, float] | None = None,
    scale_comm: Mapping[str, float] | None = None,
    breaks: str | Iterable[str] | None = None,
    capacity: Mapping[str, int] | None = None,
    conn: str | None = None,
    lenient: bool = False,
    engine: str | None = None,
):
    """The critical path of a trace from ``start``'s first record to ``end``'s last;
    an :class:`~cpasim.analysis.AnalysisResult`.

    ``trace``: the result of ``run(..., trace=True)`` (its own start and end are
    the defaults), a :class:`~cpasim.tracing.Tracer` that recorded in memory, a
    :class:`~cpasim.tracing.TraceSource` or a ``.cpt``/``.jsonl`` file.
    ``start``/``end`` default to the run's (a result's own, a trace file's from the
    ``.run.json`` sidecar ``run`` writes beside it), else ``"tx:App"`` and
    ``"rx:App"``.  The what-if
    arguments are those of :func:`transforms`.
    """
    from cpasim.analysis import analyze as analyze_trace

    what_if = transforms(scale, scale_comm, breaks, capacity)  # checked before any reading
    source, (default_start, default_end) = _source(trace)
    if (start is None or end is None) and isinstance(trace, str | Path):
        from cpasim.predict.runs import recorded_ends

        default_start, default_end = recorded_ends(Path(trace)) or (default_start, default_end)
    return analyze_trace(
        source,
        start or default_start,
        end or default_end,
        conn=conn,
        transforms=what_if,
        lenient=lenient,
        engine=engine,
    )


def explain(
    scenario: Scenario = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    trace: str | Path | None = None,
    progress: bool = False,
    **keywords,
):
    """Simulate ``scenario`` traced, analyse it, and say what limits it; a
    :class:`~cpasim.verdict.Verdict` (``.summary``, ``.kind``, ``.change``,
    ``.predicted``, ``.next``), as ``cpasim run --explain`` prints it.  ``trace``: a
    baseline ``.cpt`` to reuse (checked against the scenario) or where to keep the
    one recorded now."""
    from cpasim.predict.runs import baseline
    from cpasim.verdict import explain_run

    cfg = load(scenario, overrides, **keywords)
    with tempfile.TemporaryDirectory(prefix="cpasim-explain-") as tmp:
        return explain_run(baseline(cfg, trace, Path(tmp), progress=progress))


def _what_if(scenario, change, overrides, keywords, predictable=True):
    from cpasim.predict.whatif import changed_config

    if not change:
        raise CpasimError('change: give at least one key, e.g. change={"link.rate": "10Gbps"}')
    cfg = load(scenario, overrides, **keywords)
    return cfg, changed_config(cfg, dict(change), predictable=predictable)


def predict(
    scenario: Scenario,
    change: Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
    *,
    trace: str | Path | None = None,
    whole: bool = False,
    **keywords,
):
    """Predict what ``change`` would give from a traced run of ``scenario``, without
    simulating the change; a :class:`~cpasim.predict.whatif.Prediction`.

    ``trace``: a baseline ``.cpt`` recorded earlier by ``predict``/``validate``
    (checked against the scenario) or where to keep the one recorded now.
    """
    from cpasim.predict.runs import baseline
    from cpasim.predict.whatif import predict as predict_change

    cfg, new_cfg = _what_if(scenario, change, overrides, keywords)
    with tempfile.TemporaryDirectory(prefix="cpasim-predict-") as tmp:
        return predict_change(baseline(cfg, trace, Path(tmp)), new_cfg, whole=whole)


def validate(
    scenario: Scenario,
    change: Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
    *,
    trace: str | Path | None = None,
    whole: bool = False,
    **keywords,
):
    """:func:`predict`, then simulate the change and compare; a
    :class:`~cpasim.predict.validation.Validation` (``.error``, ``.actual``).  A change
    the parameter table refuses (``tcp.cc``, ...) is simulated all the same: its
    ``.prediction`` and ``.error`` are None and ``.refused`` says why."""
    from cpasim.predict.runs import baseline
    from cpasim.predict.validation import validate as validate_change

    cfg, new_cfg = _what_if(scenario, change, overrides, keywords, predictable=False)
    with tempfile.TemporaryDirectory(prefix="cpasim-validate-") as tmp:
        run_ = baseline(cfg, trace, Path(tmp))
        return validate_change(run_, new_cfg, Path(tmp) / "changed.cpt", whole=whole)


def calibrate(
    scenario: Scenario,
    measurements: str | Path | Iterable[str | Path],
    params: str | Iterable[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    max_simulations: int | None = None,
    side: str | None = None,
    **keywords,
):
    """Fit the scenario to ``measurements``; a :class:`~cpasim.calibrate.fit.FitResult`
    whose ``config`` is the fitted scenario (``config.to_toml()`` writes it out).

    Without ``params``, as ``cpasim calibrate fit`` without ``--params``: one capture
    and optionally its iperf3 ``--json`` report; what they determine is set first
    (listed in ``result.notes``), the run is as long as the span the capture measured,
    then the one parameter left is fitted (``side``: "tx" or "rx", where the capture
    was taken, if it cannot tell).  With
    ``params``, those keys are fitted by least squares to captures or iperf3 reports,
    each ``"FILE@key=value,..."`` with the conditions it was measured under."""
    from cpasim.calibrate.fit import fit, read_targets
    from cpasim.simulate import simulate

    cfg = load(scenario, overrides, **keywords)
    if isinstance(measurements, str | Path):
        measurements = [measurements]
    if params is None:
        from cpasim.calibrate.evidence import fit_from_evidence

        result, lines = fit_from_evidence(
            cfg, list(measurements), max_simulations=max_simulations or 24, side=side
        )
        result.notes[:0] = lines
        return result
    if isinstance(params, str):
        params = params.split(",")
    keys = [k.strip() for k in params if k.strip()]
    if not keys:
        raise CpasimError("calibrate: params names no parameter to fit")
    targets = [t for m in measurements for t in read_targets(str(m))]
    budget = max_simulations or 60
    return fit(cfg, targets, keys, lambda c: simulate(c).to_json(), max_simulations=budget)


def inspect_capture(capture: str | Path, flow: str | None = None, side: str | None = None):
    """What a tcpdump capture tells about a transfer (bottleneck rate, RTT, MSS,
    windows, goodput) and what limited it (``report.verdict``); a
    :class:`~cpasim.calibrate.inspection.FlowReport`.  ``side``: "tx" or "rx", where the
    capture was taken, if the capture cannot tell."""
    from cpasim.calibrate.inspection import inspect_capture as inspect
    from cpasim.calibrate.pcap import read_capture

    return inspect(read_capture(Path(capture)), flow=flow, side=side)
