"""``cpasim sweep`` and ``cpasim plot`` on the command line."""

from __future__ import annotations

import csv
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import sigint_as_on_a_terminal
from typer.testing import CliRunner

import cpasim.cli
import cpasim.sweeps
from cpasim.cli import app
from cpasim.errors import CpasimError
from cpasim.sweeps import SweepInterrupted

CPASIM = Path(sys.executable).parent / "cpasim"
cpasim.cli._register()
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, list(args))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--grid", "link.rat=1Gbps,2Gbps"],
            "--grid: unknown key 'link.rat'; did you mean 'link.rate'?",
        ),
        (["--grid", "link.rate=1Gbps,2Gbs"], "unknown unit 'Gbs'"),
        (["--grid", "link.rate=1Gbps,2Gbps", "--grid", "tcp.wmem=1MiB", "--zip"], "--zip needs"),
        (["--grid", "sim.seed=1,2"], "use --repeat"),
        (["--grid", "link.rate=1Gbps", "--out", "x.txt"], ".csv or .parquet"),
        (["--grid", "link.rate=1Gbps", "--workers", "0"], "--workers"),
    ],
)
def test_bad_sweeps_fail_before_running(args, message):
    result = invoke("sweep", "--no-progress", *args)
    assert isinstance(result.exception, CpasimError)
    assert message in str(result.exception)


def test_ctrl_c_exits_130_with_one_line(monkeypatch):
    def interrupted(*args, **kwargs):
        raise SweepInterrupted(3, 8, Path("s.csv"))

    monkeypatch.setattr(cpasim.sweeps, "sweep_rows", interrupted)
    result = invoke("sweep", "--grid", "link.rate=1Gbps")
    assert result.exit_code == 130
    assert result.output.strip() == "cpasim: interrupted: 3 of 8 points finished, written to s.csv"


@pytest.mark.slow
def test_installed_command_gives_one_line_and_exit_2(tmp_path):
    done = subprocess.run(
        [str(CPASIM), "sweep", "--grid", "link.rate=1Gbps", "--grid", "tcp.wmem=1,2", "--zip"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "cpasim: error: --zip needs the same number of values on every axis: "
        "link.rate has 1, tcp.wmem has 2\n"
    )
    assert "Traceback" not in done.stderr


def small_results(path):
    path.write_text(
        "link.rate,repeat,seed,error,goodput_bps,cfg.link.rate,scenario_digest\n"
        "1Gbps,0,5,,9.0e8,1e9,abc\n"
        "2Gbps,0,6,,1.8e9,2e9,abc\n"
        "3Gbps,0,7,impossible,,3e9,abc\n"
    )
    return path


@pytest.mark.slow
def test_plot_command_writes_the_figure(tmp_path):
    results = small_results(tmp_path / "s.csv")
    result = invoke("plot", str(results), "--x", "link.rate", "--y", "goodput_bps")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "s.png").stat().st_size > 1000
    out = tmp_path / "other.png"
    result = invoke(
        "plot", str(results), "--x", "link.rate", "--y", "goodput_bps", "--out", str(out)
    )
    assert result.exit_code == 0 and out.exists()


@pytest.mark.slow
def test_plot_command_names_the_available_columns(tmp_path):
    results = small_results(tmp_path / "s.csv")
    done = subprocess.run(
        [str(CPASIM), "plot", str(results), "--x", "link.rate", "--y", "goodput"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"cpasim: error: --y goodput: no such column in {results}; available: "
        "link.rate, repeat, seed, error, goodput_bps, cfg.link.rate\n"
    )


@pytest.mark.slow
def test_sigint_stops_the_workers_and_keeps_the_finished_rows(tmp_path):
    out = tmp_path / "s.csv"
    rates = ",".join(f"{r}Mbps" for r in range(100, 1300, 100))
    command = [
        str(CPASIM),
        "sweep",
        "--grid",
        f"link.rate={rates}",
        "--workers",
        "2",
        "--out",
        str(out),
        "--set",
        "sim.duration=20ms",
        "--set",
        "sim.warmup=1ms",
    ]
    # A new session: the signal goes to the sweep and its workers, as Ctrl-C in a terminal.
    with sigint_as_on_a_terminal():  # also from a suite started in the background
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and out.read_text().count("\n") >= 3:  # header + two rows
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130
    last = stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"cpasim: interrupted: (\d+) of 12 points finished, written to {out}", last
    )
    finished = int(re.search(r"(\d+) of", last).group(1))
    with out.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == finished >= 2
    assert all(r["error"] == "" and float(r["goodput_bps"]) > 0 for r in rows)
    order = rates.split(",")
    assert [r["link.rate"] for r in rows] == sorted((r["link.rate"] for r in rows), key=order.index)
