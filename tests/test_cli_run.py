"""``cpasim run`` on good and bad scenarios, in-process and as the installed command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import cpasim.cli
from cpasim.cli import app, main
from cpasim.tracing import open_trace

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "scenarios").glob("*.toml"))
BAD = sorted((ROOT / "tests" / "scenarios_bad").glob("*.toml"))
CPASIM = Path(sys.executable).parent / "cpasim"
SHORT = ["--set", "sim.duration=4ms", "--set", "sim.warmup=1ms"]
JSON_KEYS = {
    "goodput_bps",
    "link_utilization",
    "io_bus_utilization",
    "cpu_utilization",
    "latency_ns",
    "drops",
    "retransmits",
    "sim_time_ns",
    "events",
    "wall_s",
    "config_digest",
}

cpasim.cli._register()
runner = CliRunner()


def test_the_four_scenarios_are_shipped():
    names = {p.stem for p in SCENARIOS}
    assert {"tcp-stream", "udp-stream", "pingpong", "webserver"} <= names


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_shipped_scenario_runs_and_reports(scenario):
    extra = ["--set", "sim.duration=8ms"] if scenario.stem == "webserver" else []
    extra += ["--set", "workload.file_size_max=600kB"] if scenario.stem == "webserver" else []
    result = runner.invoke(app, ["run", str(scenario), *SHORT, *extra])
    assert result.exit_code == 0, result.output
    out = result.output
    for word in (
        "goodput",
        "link",
        "I/O bus",
        "CPU tx",
        "CPU rx",
        "drops",
        "retransmits",
        "events",
        "wall",
        "config",
    ):
        assert word in out
    assert scenario.read_text().startswith("#")  # explained in comments at the top


def test_json_output_has_every_metric(tmp_path):
    scen = ROOT / "scenarios" / "pingpong.toml"
    result = runner.invoke(app, ["run", str(scen), *SHORT, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data) >= JSON_KEYS
    assert set(data["cpu_utilization"]["tx"]) == {
        "copy",
        "stack",
        "driver",
        "interrupt",
        "buffer",
        "user",
        "idle",
    }
    assert set(data["link_utilization"]) == {"tx_to_rx", "rx_to_tx"}
    assert set(data["io_bus_utilization"]["rx"]) == {"up", "down"}
    assert set(data["latency_ns"]) >= {"mean", "p50", "p99"}
    assert data["latency_ns"]["p50"] > 0


def test_set_overrides_change_the_run():
    scen = str(ROOT / "scenarios" / "tcp-stream.toml")
    slow = json.loads(
        runner.invoke(app, ["run", scen, *SHORT, "--json", "--set", "link.rate=50Mbps"]).output
    )
    fast = json.loads(runner.invoke(app, ["run", scen, *SHORT, "--json"]).output)
    assert slow["config_digest"] != fast["config_digest"]
    assert slow["goodput_bps"] < 0.2 * fast["goodput_bps"]


def test_trace_file_is_written_and_readable(tmp_path):
    trace = tmp_path / "run.cpt"
    scen = str(ROOT / "scenarios" / "tcp-stream.toml")
    result = runner.invoke(app, ["run", scen, *SHORT, "--trace", str(trace)])
    assert result.exit_code == 0, result.output
    source = open_trace(trace)
    assert sum(len(c) for c in source.chunks()) > 1000
    assert ("tx", "App", "0") in source.key.sms


@pytest.mark.parametrize("bad", BAD, ids=lambda p: p.stem)
def test_bad_scenario_gives_one_line_and_exit_2(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", str(bad)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("cpasim: error: ")
    assert "Traceback" not in err


def test_missing_scenario_file(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "no/such/file.toml"])
    assert exc.value.code == 2
    assert "no/such/file.toml" in capsys.readouterr().err


@pytest.mark.slow
def test_installed_command(tmp_path):
    scen = ROOT / "scenarios" / "pingpong.toml"
    ok = subprocess.run(
        [str(CPASIM), "run", str(scen), *SHORT, "--json"], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    assert set(json.loads(ok.stdout)) >= JSON_KEYS
    bad = subprocess.run([str(CPASIM), "run", str(BAD[0])], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and bad.stderr.startswith("cpasim: error: ")
    assert bad.stdout == ""


def test_jsonl_trace_and_unknown_trace_extension(tmp_path, capsys):
    scen = str(ROOT / "scenarios" / "pingpong.toml")
    trace = tmp_path / "run.jsonl"
    result = runner.invoke(app, ["run", scen, *SHORT, "--trace", str(trace)])
    assert result.exit_code == 0, result.output
    first = json.loads(trace.read_text().splitlines()[0])
    assert first["op"] == "declare"
    assert sum(len(c) for c in open_trace(trace).chunks()) > 1000
    with pytest.raises(SystemExit) as exc:
        main(["run", scen, "--trace", str(tmp_path / "run.txt")])
    assert exc.value.code == 2
    assert "run.txt: unknown trace format '.txt'" in capsys.readouterr().err


def test_more_server_processes_than_cores_is_refused(capsys):
    scen = str(ROOT / "scenarios" / "webserver.toml")
    with pytest.raises(SystemExit) as exc:
        main(["run", scen, "--set", "workload.processes=2"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "workload.processes (2) must not exceed hosts.tx.cpu.cores (1)" in err


def test_an_interrupted_run_says_so_and_keeps_its_trace(tmp_path, monkeypatch, capsys):
    from cpasim.model.environment import Kernel

    slices = 0
    run_until = Kernel.run_until

    def interrupted(self, t):
        nonlocal slices
        slices += 1
        if slices == 5:  # Ctrl-C half-way through the run
            raise KeyboardInterrupt
        return run_until(self, t)

    monkeypatch.setattr(Kernel, "run_until", interrupted)
    path = tmp_path / "run.cpt"
    path.write_bytes(b"an earlier trace")
    scenario = ROOT / "scenarios" / "tcp-stream.toml"
    with pytest.raises(SystemExit) as stop:
        main(["run", str(scenario), *SHORT, "--trace", str(path)])
    assert stop.value.code == 130
    err = capsys.readouterr().err
    partial = tmp_path / "run.partial.cpt"
    kept = f"the trace recorded so far is in {partial}"
    assert err.strip() == f"cpasim: run interrupted, no result; {kept}"
    assert path.read_bytes() == b"an earlier trace"  # the file asked for is untouched
    records = sum(len(c) for c in open_trace(partial).chunks())
    assert records > 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.cpt", "run.partial.cpt"]
