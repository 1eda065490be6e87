"""The size of a run, told before it starts (:mod:`cpasim.estimate`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import dies_with_this_run, sigint_as_on_a_terminal

from cpasim.config import load_scenario
from cpasim.estimate import WARN_EVENTS, estimate
from cpasim.simulate import simulate

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
ZERO_COSTS = [
    f"cpu.cost.{k}=0" for k in ("copy_per_byte", "csum_per_byte", "tx_packet", "rx_packet")
]


@pytest.mark.parametrize(
    ("scenario", "sets"),
    [
        pytest.param("tcp-stream.toml", ["sim.duration=40ms"], marks=pytest.mark.slow),
        pytest.param("udp-stream.toml", ["sim.duration=30ms"], marks=pytest.mark.slow),
        ("pingpong.toml", []),
        ("tcp-stream.toml", ["workload.bytes=2MB", "sim.warmup=0s"]),
    ],
)
def test_estimate_bounds_the_events_a_run_processes(scenario, sets):
    cfg = load_scenario(SCENARIOS / scenario, sets)
    events = simulate(cfg).events
    guess = estimate(cfg).events
    # An upper bound that is not wild: within three times what the run processed.
    assert events <= guess <= 3 * events, (events, guess)


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.toml")), ids=lambda p: p.name)
def test_shipped_scenarios_draw_no_warning(path):
    assert estimate(load_scenario(path), ".cpt").warning() is None


@pytest.mark.parametrize(
    ("sets", "said"),
    [
        (["workload.bytes=1000TB"], "frames in 1000 s at up to 1 Gb/s"),
        (["workload.connections=100000"], "100,000 connections"),
        (
            [
                "link.rate=10Tbps",
                "pcie.gen=5",
                "pcie.lanes=16",
                "tcp.wmem=0",
                "tcp.rmem=0",
                "sim.duration=10s",
            ],
            "in 10 s at up to",
        ),
    ],
)
def test_absurd_scenarios_are_announced_with_the_estimate(sets, said):
    cfg = load_scenario(SCENARIOS / "tcp-stream.toml", sets + ZERO_COSTS)
    size = estimate(cfg, ".cpt")
    line = size.warning()
    assert line is not None and said in line and "Ctrl-C stops it" in line
    assert f"{size.events:.2g} events" in line and "GB" in line  # the trace it would write
    assert size.events > WARN_EVENTS or size.connections >= 10_000


def test_trace_size_follows_the_trace_format():
    cfg = load_scenario(SCENARIOS / "tcp-stream.toml")
    assert estimate(cfg).trace_bytes is None
    cpt, jsonl = estimate(cfg, ".cpt").trace_bytes, estimate(cfg, ".jsonl").trace_bytes
    assert 0 < cpt < jsonl


@pytest.mark.slow
def test_huge_run_warns_first_and_stops_cleanly_on_ctrl_c(tmp_path):
    """The warning comes before the run; Ctrl-C ends it with one line and status 130."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    sets = [a for s in ["workload.bytes=1000TB"] for a in ("--set", s)]
    with sigint_as_on_a_terminal():  # as Ctrl-C reaches it, also from a background suite
        proc = subprocess.Popen(
            [sys.executable, "-m", "cpasim.cli", "run", str(SCENARIOS / "tcp-stream.toml"), *sets],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
            preexec_fn=dies_with_this_run,  # nor must a killed suite
        )
    try:
        first = proc.stderr.readline()
        assert first.startswith("cpasim: warning: about 1.8e+09 events to simulate"), first
        time.sleep(1.0)  # well into the simulation
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()  # a failed check must not leave a run of 1000 TB behind
        proc.communicate()
    assert proc.returncode == 130, err
    assert err.strip() == "cpasim: run interrupted, no result" and out == ""


@pytest.mark.parametrize("command", ["predict", "validate", "ladder"])
def test_predictions_warn_of_a_huge_baseline_before_it_runs(command, tmp_path, capsys):
    """predict, validate and ladder simulate (and trace) a baseline: the same warning,
    before anything else can fail (here a refused --change or --out)."""
    from cpasim.cli import main

    taken = tmp_path / "taken"
    taken.write_text("")
    refused = ["--out", str(taken)] if command == "ladder" else ["--change", "link.rate=fast"]
    scenario = str(Path(__file__).resolve().parent.parent / "scenarios" / "tcp-stream.toml")
    with pytest.raises(SystemExit) as done:
        main([command, scenario, "--set", "workload.connections=100000", *refused])
    assert done.value.code == 2
    assert "100,000 connections" in capsys.readouterr().err
