"""Lengths and busy times over the measured interval (cpasim.predict.window)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cpasim.analysis import Transforms, analyze, analyze_many
from cpasim.analysis.criticalpath import CriticalPathPass
from cpasim.config import load_scenario
from cpasim.errors import CpasimError
from cpasim.predict.bounds import busy
from cpasim.predict.preamble import structure
from cpasim.predict.runs import (
    WINDOW_LEAD,
    WINDOW_MEASURE,
    load_run,
    measured_active,
    traced_run,
    window_span,
)
from cpasim.predict.transforms_table import reference
from cpasim.predict.whatif import changed_config, predict
from cpasim.predict.window import Prefix, Window, WindowSource, analyses, make_window
from cpasim.tracing import open_trace

# A 1 Gb/s link-bound stream whose send buffer (1 MiB) fills at CPU speed at the
# start: the start-up work the measured interval must leave out.
SCENARIO = """
[sim]
duration = "5ms"
warmup = "2ms"

[nic]
itr = "off"

[tcp]
wmem = "1MiB"
rmem = "1MiB"
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("w") / "s.toml"
    path.write_text(SCENARIO)
    return traced_run(load_scenario(path), path.with_name("s.cpt"))


def test_prefix_holds_exactly_the_records_before_the_cut(run):
    whole = np.concatenate(list(open_trace(run.trace).chunks()))
    cut = 1.5e6
    before = np.concatenate(list(Prefix(open_trace(run.trace), cut).chunks()))
    assert before.size == int((whole["t"] < cut).sum()) > 0
    assert np.array_equal(before, whole[: before.size])


def test_baseline_path_spans_the_measured_interval(run):
    # Reference path over the measured interval: from the receiver's last record
    # of the warm-up to its last record, i.e. close to duration - warmup (3 ms).
    measured = run.cfg.sim.duration - run.cfg.sim.warmup
    assert run.path.critical_path_ns[""] == pytest.approx(measured, rel=0.02)


def test_busy_time_leaves_the_start_up_out(run):
    [(whole, _, before)] = analyses(
        lambda: open_trace(run.trace),
        run.start,
        run.end,
        [reference()],
        run.cfg.sim.warmup,
        profiles=True,
    )
    measured = measured_active(whole, before)
    assert measured == run.state_active

    def cpu_tx(active):
        return busy(run.cfg, reference(), active)["tx:CPU cores"]

    measured_ns = run.cfg.sim.duration - run.cfg.sim.warmup
    # One core cannot be busy longer than the interval; the start-up (filling 1 MiB
    # at CPU speed) makes the whole trace's CPU work per ns of run clearly larger.
    assert 0 < cpu_tx(measured) <= measured_ns * 1.001
    per_ns_measured = cpu_tx(measured) / measured_ns
    per_ns_whole = cpu_tx(measured_active(whole, None)) / run.cfg.sim.duration
    assert per_ns_whole > 1.2 * per_ns_measured


def test_no_warmup_means_the_whole_trace(run):
    [(whole, cut, before)] = analyses(
        lambda: open_trace(run.trace), run.start, run.end, [reference()], 0, profiles=True
    )
    assert before is None and cut == {}
    dma = "tx:NIC TX:DMA packet"  # holds PCIe down: kept for the bounds
    assert measured_active(whole, None)[dma] > run.state_active[dma]


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["python", "compiled"])
@pytest.mark.parametrize("name", ["model_tcp_stream.cpt", "model_webserver.cpt"])
def test_lengths_at_the_mark_are_those_of_the_prefix(engine, name):
    # One pass notes what a second pass over just the warm-up would give.
    trace = Path(__file__).parent / "traces" / name
    start = ("tx", "Server") if "webserver" in name else ("tx", "App")
    tfs = [reference(), Transforms(scale=[("*:MAC:transmit", 0.1)])]
    for cut_ns in (1.2e6, 2.5e6):
        whole = analyze_many(
            open_trace(trace), start, ("rx", "App"), tfs, engine=engine, mark=cut_ns
        )
        prefix = analyze_many(
            Prefix(open_trace(trace), cut_ns), start, ("rx", "App"), tfs, engine=engine
        )
        for w, p in zip(whole, prefix, strict=True):
            paths = {"": p.path} if p.path is not None else dict(p.connections)
            want = {
                c: x.critical_path_ns if x.reachable and x.critical_path_ns is not None else 0.0
                for c, x in paths.items()
            }
            assert w.lengths_at_mark == want
            assert len(want) == (4 if "webserver" in name else 1)
        # By 2.5 ms some path has reached the receiver (the webserver's first
        # responses arrive after 2 ms).
        assert cut_ns < 2.5e6 or any(v > 0 for v in want.values())


# -- what-ifs over the tail of a trace (Window) ------------------------------------

TRACES = Path(__file__).parent / "traces"
START, END = ("tx", "App"), ("rx", "App")


def _pass_until(trace: Path, t0: float) -> CriticalPathPass:
    p = CriticalPathPass(Transforms(), START, END)
    head = Prefix(open_trace(trace), t0)
    for chunk in head.chunks():
        p.feed(chunk, head.key)
    return p


@pytest.mark.parametrize("name", ["model_tcp_stream.cpt", "model_webserver.cpt"])
@pytest.mark.parametrize("t0", [0.4e6, 1.3e6, 2.25e6])
def test_preamble_recreates_the_state_at_the_cut(name, t0):
    # States, connections, waits, pending calls and every unit held (with its
    # connection) as the reference pass has them after the records before t0.
    trace = TRACES / name
    window = make_window(trace, START, END, t0, t0)
    want = structure(_pass_until(trace, t0), window.sms)
    src = WindowSource(trace, window)
    p = CriticalPathPass(Transforms(), START, END)
    p.feed(window.rows, src.key)
    got = structure(p, window.sms)
    assert got == want
    assert any(units for _, _, units in want["queues"].values())  # something is held
    assert any(w != (0, -1) for w in want["waits"])  # and someone waits


@pytest.mark.parametrize("t0", [0.4e6, 1.3e6, 2.25e6])
def test_window_path_is_its_elapsed_time(t0):
    # The identity invariant over the window: the unmodified path from the state
    # at t0 to the receiver's last record is that record's time minus t0.
    trace = TRACES / "model_tcp_stream.cpt"
    window = make_window(trace, START, END, t0, t0)
    res = analyze(WindowSource(trace, window), START, END)
    assert res.path.critical_path_ns == pytest.approx(res.path.end_ns - t0, rel=1e-9)
    assert res.path.start_ns == t0


def test_window_reads_only_the_tail():
    trace = TRACES / "model_tcp_stream.cpt"
    window = make_window(trace, START, END, 3e6, 3.5e6)
    got = np.concatenate(list(WindowSource(trace, window).chunks()))
    whole = np.concatenate(list(open_trace(trace).chunks()))
    tail = whole[whole["t"] >= 3e6]
    assert got[len(window.rows) :].tobytes() == tail.tobytes()
    assert (got["t"][: len(window.rows)] == 3e6).all()


def test_window_survives_its_sidecar_form():
    trace = TRACES / "model_webserver.cpt"
    window = make_window(trace, START, END, 1e6, 2e6)
    back = Window.from_json(json.loads(json.dumps(window.to_json())))
    assert back.rows.tobytes() == window.rows.tobytes()
    assert (back.t0, back.t_measure, back.sms, back.origins) == (
        window.t0,
        window.t_measure,
        window.sms,
        window.origins,
    )


def test_window_of_another_trace_is_refused(tmp_path):
    window = make_window(TRACES / "model_tcp_stream.cpt", START, END, 1e6, 2e6)
    other = Window(window.t0, window.t_measure, window.sms + 1, window.origins, window.rows)
    with pytest.raises(CpasimError, match="changed since it was recorded"):
        WindowSource(TRACES / "model_tcp_stream.cpt", other)


@pytest.fixture(scope="module")
def stream_run(tmp_path_factory):
    # Long enough for a window: measured 10-45 ms, the window 23-45 ms measures 25-45.
    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "tcp-stream.toml"
    cfg = load_scenario(scenario, ["sim.duration=45ms", "sim.warmup=10ms"])
    return traced_run(cfg, tmp_path_factory.mktemp("stream") / "s.cpt")


@pytest.mark.slow
@pytest.mark.parametrize("change", [{"link.rate": "10Gbps"}, {"pcie.lanes": "4"}])
def test_stream_predictions_from_the_tail_agree_with_the_whole(stream_run, change):
    # Measured: 0.2% apart for the link (a window-loop-bound result), 0.01% for PCIe.
    assert stream_run.window is not None
    new = changed_config(stream_run.cfg, change)
    tail = predict(stream_run, new)
    whole = predict(stream_run, new, whole=True)
    assert tail.analysed_ns == (45e6 - WINDOW_MEASURE, 45e6)
    assert whole.analysed_ns == (10e6, 45e6)
    assert tail.predicted == pytest.approx(whole.predicted, rel=0.01)
    assert tail.predicted_bottleneck == whole.predicted_bottleneck
    # From the sidecar alone, the same answer.
    again = predict(load_run(stream_run.cfg, stream_run.trace), new)
    assert again.predicted == tail.predicted


def test_request_response_and_short_runs_have_no_window():
    scenarios = Path(__file__).resolve().parents[1] / "scenarios"
    stream = scenarios / "tcp-stream.toml"
    assert window_span(load_scenario(scenarios / "webserver.toml")) is None
    assert window_span(load_scenario(stream, ["workload.bytes=10MB"])) is None
    assert window_span(load_scenario(stream, ["sim.duration=30ms"])) is None  # warm-up 20 ms
    end = 120e6
    assert window_span(load_scenario(stream)) == (
        end - WINDOW_MEASURE - WINDOW_LEAD,
        end - WINDOW_MEASURE,
    )
