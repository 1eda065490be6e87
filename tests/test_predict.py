"""Predictions checked by re-simulation, the trace sidecar, and the CLI's errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import cpasim.cli
import cpasim.cli.run
from cpasim.analysis import analyze
from cpasim.config import load_scenario
from cpasim.errors import CpasimError
from cpasim.predict.runs import load_run, sidecar_path, traced_run
from cpasim.predict.validation import validate
from cpasim.predict.whatif import changed_config, parse_changes, predict
from cpasim.tracing import open_trace

CPASIM = Path(sys.executable).with_name("cpasim")

# 1 Gb/s link, 10 us delay, 64 KiB buffers, PCIe x1: the link is the bottleneck.
# Interrupt throttling is off: its countdown timers are SM instances reused in
# a fixed order, which chains every countdown behind the previous one in a
# replay where anything gets faster (cpasim.predict.transforms_table, "Known limits").
FAST = """
[sim]
duration = "6ms"
warmup = "1ms"

[nic]
itr = "off"
"""


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("scn") / "fast.toml"
    path.write_text(FAST)
    return path


@pytest.fixture(scope="module")
def run(scenario, tmp_path_factory):
    cfg = load_scenario(scenario)
    return traced_run(cfg, tmp_path_factory.mktemp("base") / "base.cpt")


@pytest.fixture(scope="module")
def runner():
    cpasim.cli._register()
    return CliRunner()


def test_baseline_is_link_bound(run):
    assert run.path.bottleneck == "tx:MAC:transmit"
    assert run.path.share > 0.9


# Changes that leave the dependence graph's structure alone: re-simulation agrees
# within 1% (measured: 0.0-0.2%).  ``link.rate`` +20% acts on the critical path
# itself; the others act off it.
@pytest.mark.parametrize(
    "change, speedup",
    [
        ({"link.rate": "1200Mbps"}, 1.2),
        ({"nic.tx_ring": "512"}, 1.0),
        # A re-simulation each: the quick suite checks one on the path and one off it.
        *[
            pytest.param(change, speedup, marks=pytest.mark.slow)
            for change, speedup in [
                ({"cpu.freq": "8GHz"}, 1.0),
                ({"hosts.rx.pcie.lanes": "4"}, 1.0),
                ({"qdisc.len": "2000"}, 1.0),
                ({"cpu.cores": "2"}, 1.0),
            ]
        ],
    ],
)
def test_structure_preserving_changes_predict_within_one_percent(run, tmp_path, change, speedup):
    new = changed_config(run.cfg, change)
    v = validate(run, new, tmp_path / "changed.cpt")
    assert v.error < 0.01, (change, v.prediction.predicted, v.actual)
    assert v.prediction.predicted / v.prediction.baseline == pytest.approx(speedup, rel=0.01)
    assert v.prediction.predicted_bottleneck == v.actual_path.bottleneck


def test_prediction_is_deterministic_and_reuses_the_sidecar(run):
    new = changed_config(run.cfg, {"link.rate": "1200Mbps"})
    again = load_run(run.cfg, run.trace)
    assert again.result == run.result
    assert predict(again, new).predicted == predict(run, new).predicted


def test_sidecar_of_another_config_is_refused(run):
    other = run.cfg.with_overrides({"link.delay": "20us"})
    with pytest.raises(CpasimError, match="recorded with config digest"):
        load_run(other, run.trace)


def test_trace_without_sidecar_is_refused(run, tmp_path):
    bare = tmp_path / "bare.cpt"
    bare.write_bytes(run.trace.read_bytes())
    with pytest.raises(CpasimError, match=r"bare.cpt: no bare.cpt.run.json next to it"):
        load_run(run.cfg, bare)


def test_parse_changes_errors():
    assert parse_changes(["link.rate=10Gbps"]) == {"link.rate": "10Gbps"}
    for bad, msg in [
        ([], "at least one"),
        (["link.rate"], "expected KEY=VALUE"),
        (["link.rate=1Gbps", "link.rate=2Gbps"], "given twice"),
    ]:
        with pytest.raises(CpasimError, match=msg):
            parse_changes(bad)


def test_cli_predict_json_with_trace_reuse(runner, scenario, tmp_path):
    trace = tmp_path / "base.cpt"
    args = ["predict", str(scenario), "--change", "link.rate=1200Mbps", "--trace", str(trace)]
    first = runner.invoke(cpasim.cli.app, [*args, "--json"])
    assert first.exit_code == 0, first.output
    assert sidecar_path(trace).exists()
    stamp = trace.stat().st_mtime_ns
    second = runner.invoke(cpasim.cli.app, [*args, "--json"])
    assert second.exit_code == 0, second.output
    assert trace.stat().st_mtime_ns == stamp  # reused, not re-recorded
    a, b = json.loads(first.output), json.loads(second.output)
    assert a == b
    assert a["predicted_goodput_bps"] / a["baseline_goodput_bps"] == pytest.approx(1.2, rel=0.01)
    assert a["predicted_bottleneck"] == "tx:MAC:transmit"
    text = runner.invoke(cpasim.cli.app, args)
    assert text.exit_code == 0
    assert "predicted" in text.output and "Mb/s" in text.output


@pytest.mark.slow
def test_a_plain_run_trace_is_a_baseline(runner, scenario, run, tmp_path):
    """``cpasim run --trace`` leaves what predict needs; the first prediction analyses the
    trace once, and predicts exactly what a baseline recorded by predict gives."""
    trace = tmp_path / "r.cpt"
    recorded = runner.invoke(cpasim.cli.app, ["run", str(scenario), "--trace", str(trace)])
    assert recorded.exit_code == 0, recorded.output
    assert json.loads(sidecar_path(trace).read_text())["analysed"] is False
    args = ["predict", str(scenario), "--change", "link.rate=1200Mbps", "--trace", str(trace)]
    first = runner.invoke(cpasim.cli.app, [*args, "--json"])
    assert first.exit_code == 0, first.output
    assert json.loads(sidecar_path(trace).read_text())["analysed"] is True
    new = changed_config(run.cfg, {"link.rate": "1200Mbps"})
    assert json.loads(first.output)["predicted_goodput_bps"] == predict(run, new).predicted
    again = runner.invoke(cpasim.cli.app, [*args, "--json"])
    assert again.output == first.output
    checked = runner.invoke(
        cpasim.cli.app,
        ["validate", str(scenario), "--change", "link.rate=1200Mbps", "--trace", str(trace)],
    )
    assert checked.exit_code == 0, checked.output
    assert "error" in checked.output


def test_an_interrupted_run_leaves_the_earlier_trace_and_its_record(
    runner, scenario, tmp_path, monkeypatch
):
    trace = tmp_path / "r.cpt"
    assert (
        runner.invoke(cpasim.cli.app, ["run", str(scenario), "--trace", str(trace)]).exit_code == 0
    )
    before = trace.read_bytes(), sidecar_path(trace).read_bytes()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cpasim.cli.run, "simulate", interrupted)
    again = runner.invoke(cpasim.cli.app, ["run", str(scenario), "--trace", str(trace)])
    assert again.exit_code == 130
    assert (trace.read_bytes(), sidecar_path(trace).read_bytes()) == before


@pytest.mark.slow
def test_cli_validate_json_keys(runner, scenario):
    res = runner.invoke(
        cpasim.cli.app, ["validate", str(scenario), "--change", "nic.tx_ring=512", "--json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    for key in (
        "baseline_goodput_bps",
        "predicted_goodput_bps",
        "actual_goodput_bps",
        "error",
        "predicted_bottleneck",
        "actual_bottleneck",
    ):
        assert key in out
    assert out["error"] < 0.01


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, message",
    [
        ("nic.tso=true", "--change nic.tso: cannot be predicted from a trace"),
        ("tcp.cc=bbr", "--change tcp.cc: cannot be predicted from a trace: changes which"),
        ("bottleneck.aqm=codel", "--change bottleneck.aqm: cannot be predicted from a trace: an"),
        ("no.such.key=1", "no.such"),
        ("link.rate=fast", "link.rate"),
        ("hosts.tx.qdisc.len=10", "shrinks tx:qdisc by 990 units"),
        ("link.rate", "expected KEY=VALUE"),
        ("link.rate=1Gbps", "already has these values"),
    ],
)
def test_cli_bad_changes_exit_2_with_one_line(scenario, change, message):
    # The installed command, so the one-line error and exit status are the real ones;
    # every case is refused before any simulation.
    proc = subprocess.run(
        [str(CPASIM), "predict", str(scenario), "--change", change],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("cpasim: error: ")
    assert message in lines[0]
    assert "Traceback" not in proc.stderr


def test_cli_trace_of_another_scenario_is_refused(runner, scenario, run):
    res = runner.invoke(
        cpasim.cli.app,
        [
            "predict",
            str(scenario),
            "--change",
            "link.rate=2Gbps",
            "--trace",
            str(run.trace),
            "--set",
            "link.delay=20us",
        ],
    )
    assert isinstance(res.exception, CpasimError)
    assert "recorded with config digest" in str(res.exception)


def test_unchanged_config_predicts_the_baseline_exactly(run):
    # The prediction's transforms without a change are the reference the baseline
    # was analysed with, so the ratio of critical paths is exactly 1.
    p = predict(run, run.cfg)
    assert p.predicted == run.metric
    assert p.predicted_path.critical_path_ns == run.path.critical_path_ns


# BBR paces itself (TcpSend ``pace``) and the bottleneck serializes in both
# directions; the RTO timer is ``armed`` every 2 ms with SACK.
BBR_BOTTLENECK = (
    "tcp.cc=bbr",
    "bottleneck.rate=200Mbps",
    "bottleneck.reverse_rate=100Mbps",
    "link.delay=100us",
)


@pytest.mark.parametrize(
    "kind, sets",
    [
        ("tcp_stream", ()),
        ("udp_stream", ()),
        (
            "udp_stream",
            (
                "ip.send_path=2.6.13",
                "ip.netfilter=true",
                "nic.tx_desc_cache=64",
                "nic.tx_fetch_threshold=56",
            ),
        ),
        ("pingpong", ()),
        ("webserver", ()),
        ("tcp_stream", BBR_BOTTLENECK),
        ("tcp_stream", (*BBR_BOTTLENECK, "bottleneck.aqm=fq_codel")),
        # Through a forwarding host: its forwarding path and direct transmit.
        ("tcp_stream", ("topology.kind=forward", "ip.netfilter=true")),
        # A copy engine on die and on the I/O bus: every step of its copies.
        ("tcp_stream", ("hosts.rx.copy_engine.enabled=true",)),
        (
            "tcp_stream",
            ("hosts.rx.copy_engine.enabled=true", "hosts.rx.copy_engine.location=io_bus"),
        ),
    ],
)
def test_every_timed_state_is_in_the_table(kind, sets, tmp_path):
    """A state with active time that no scale row names would be left unscaled by a
    change of the clock, the bus or the link: the table must follow the model."""
    from fnmatch import fnmatchcase

    from cpasim.predict.transforms_table import FIXED_TIME_STATES, RULES, state_active

    patterns = [
        t.pattern.format(sys="*", peer="*") for r in RULES if r.kind == "scale" for t in r.targets
    ]
    cfg = load_scenario(
        None, sets=[f"workload.kind={kind}", "sim.duration=3ms", "sim.warmup=0", *sets]
    )
    run = traced_run(cfg, tmp_path / "t.cpt")
    profile = analyze(open_trace(run.trace), run.start, run.end, min_share=0.0).profile
    for name in (name for name, ns in state_active(profile).items() if ns > 0):
        sys, sm, state = name.split(":", 2)
        plain = f"{sys}:{sm.partition('#')[0]}:{state}"
        assert state in FIXED_TIME_STATES or any(
            fnmatchcase(plain, p) or fnmatchcase(name, p) for p in patterns
        ), name


@pytest.mark.slow
def test_validate_re_simulates_a_refused_change(run, tmp_path):
    """A change of congestion control is no graph transform: validate says so and
    still reports the re-simulated figures, exactly those of a plain run."""
    from cpasim.predict.transforms_table import REFUSED

    new = changed_config(run.cfg, {"tcp.cc": "bbr"}, predictable=False)
    with pytest.raises(CpasimError, match="tcp.cc: cannot be predicted"):
        changed_config(run.cfg, {"tcp.cc": "bbr"})
    v = validate(run, new, tmp_path / "changed.cpt")
    assert v.prediction is None and v.error is None
    assert v.refused == f"--change tcp.cc: cannot be predicted from a trace: {REFUSED['tcp.cc']}"
    assert v.actual == traced_run(new, tmp_path / "again.cpt").metric
    assert v.baseline == run.metric and v.actual > 0
    out = v.to_json()
    assert out["predicted_goodput_bps"] is None and out["error"] is None
    assert out["actual_goodput_bps"] == v.actual and out["refused"] == v.refused


@pytest.mark.slow
def test_cli_validate_reports_a_refused_change(runner, scenario):
    args = ["validate", str(scenario), "--change", "tcp.cc=bbr"]
    res = runner.invoke(cpasim.cli.app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["predicted_goodput_bps"] is None and out["error"] is None
    assert out["actual_goodput_bps"] > 0
    assert "sent when, not how long a step takes" in out["refused"]
    text = runner.invoke(cpasim.cli.app, args)
    assert text.exit_code == 0, text.output
    assert "refused    --change tcp.cc: cannot be predicted" in text.output
    assert "actual " in text.output and "error" not in text.output


def test_api_validate_reports_a_refused_change(scenario):
    import cpasim

    v = cpasim.validate(scenario, {"tcp.cc": "reno"})
    assert v.prediction is None and v.error is None and v.actual > 0
    assert "'cpasim validate' re-simulates it" in v.refused
    with pytest.raises(CpasimError, match="tcp.cc: cannot be predicted"):
        cpasim.predict(scenario, {"tcp.cc": "reno"})
