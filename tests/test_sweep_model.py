"""Sweeps of the real model: executors agree, closed-form bounds, analysis, resume."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pandas
import pytest
from typer.testing import CliRunner

import cpasim
import cpasim.cli
from cpasim.cli import app
from cpasim.errors import CpasimError
from cpasim.plot import link_bound, window_bound

CPASIM = Path(sys.executable).parent / "cpasim"
TINY = ["sim.duration=2ms", "sim.warmup=500us"]
#: Measured numbers that depend on the machine, not on the model.
WALL = ["wall_s"]


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def rows_of(frame):
    return frame.drop(columns=WALL).to_dict("records")


def test_python_api_returns_a_frame_in_grid_order():
    frame = cpasim.sweep(
        grid={"link.rate": ["100Mbps", "1Gbps"]}, repeat=2, sets=TINY, workers=1, progress=False
    ).to_frame()
    assert isinstance(frame, pandas.DataFrame)
    assert list(frame.columns[:4]) == ["link.rate", "repeat", "seed", "error"]
    assert list(frame["link.rate"]) == ["100Mbps", "100Mbps", "1Gbps", "1Gbps"]
    assert frame["error"].isna().all()
    assert frame["goodput_bps"].iloc[2] > 5 * frame["goodput_bps"].iloc[0]
    assert {"cpu_utilization.tx.copy", "cfg.link.rate", "cfg.link.delay", "cfg.link.mtu"} <= set(
        frame.columns
    )
    assert list(frame["cfg.link.rate"]) == [1e8, 1e8, 1e9, 1e9]
    assert frame["seed"].nunique() == 4


@pytest.mark.slow
def test_dask_local_cluster_gives_the_rows_of_the_local_executor():
    grid = {"link.rate": ["100Mbps", "1Gbps"], "tcp.wmem": ["64KiB", "256KiB"]}
    local = cpasim.sweep(grid=grid, sets=TINY, workers=2, progress=False).to_frame()
    dask = cpasim.sweep(grid=grid, sets=TINY, workers=1, dask="local", progress=False).to_frame()
    assert len(local) == 4 and local["error"].isna().all(), list(local["error"])
    assert dask["error"].isna().all(), list(dask["error"])
    assert rows_of(dask) == rows_of(local)


@pytest.mark.slow
def test_goodput_follows_min_of_link_and_window_bounds():
    # Receive window (tcp.rmem) against link rate, with a send buffer that never
    # limits: 1 Gb/s with 64 KiB is window-bound (131 Mb/s, a seventh of the
    # link), the others sit well inside the link-bound regime.  Tolerance: 3%
    # (achieved: within 0.5% on link-bound points, about 1% window-bound).  The bounds
    # have no host latency term, so no interrupt throttling (it adds up to 250 us a
    # round trip: -7.5% on the window-bound point).
    frame = cpasim.sweep(
        grid={"link.rate": ["100Mbps", "1Gbps"], "tcp.rmem": ["64KiB", "4MiB"]},
        sets=[
            "link.delay=2ms",
            "tcp.wmem=8MiB",
            "sim.duration=70ms",
            "sim.warmup=30ms",
            "nic.itr=off",
        ],
        workers=2,
        progress=False,
    ).to_frame()
    regimes = []
    for row in frame.to_dict("records"):
        rate, mtu, delay = row["cfg.link.rate"], row["cfg.link.mtu"], row["cfg.link.delay"]
        window = min(row["cfg.hosts.tx.tcp.wmem"], row["cfg.hosts.rx.tcp.rmem"])
        link, win = link_bound(rate, mtu), window_bound(window, rate, delay, mtu)
        regimes.append("window" if win < link else "link")
        assert row["goodput_bps"] == pytest.approx(min(link, win), rel=0.03), row
    assert regimes == ["link", "link", "window", "link"]


@pytest.mark.slow
def test_an_impossible_combination_is_a_row_and_the_rest_runs(tmp_path):
    cpasim.cli._register()
    out = tmp_path / "s.csv"
    sets = [arg for s in TINY for arg in ("--set", s)]
    result = CliRunner().invoke(
        app,
        [
            "sweep",
            "--grid",
            "link.mtu=576,1500,9000",
            "--grid",
            "tcp.wmem=1KiB,1KiB,64KiB",
            "--zip",
            "--no-progress",
            "--out",
            str(out),
            *sets,
        ],
    )
    assert result.exit_code == 0, result.output
    rows = read_csv(out)
    # 1 KiB holds one MSS at MTU 576 but not at 1500: only the pair decides.
    assert [r["link.mtu"] for r in rows] == ["576", "1500", "9000"]
    assert rows[0]["error"] == ""
    assert rows[1]["error"].startswith("--grid: hosts.tx.tcp.wmem (1024 B)")
    assert rows[1]["error"].endswith(
        "is smaller than one MSS (1448 B from link.mtu = 1500 B and hosts.tx.tcp.timestamps)"
    )
    assert rows[1]["goodput_bps"] == ""
    assert rows[2]["error"] == "" and float(rows[2]["goodput_bps"]) > 1e8
    assert "smaller than one MSS" in result.output  # the summary table shows it


@pytest.mark.slow
def test_analyze_adds_the_critical_state_and_loop(tmp_path):
    out = tmp_path / "s.csv"
    done = subprocess.run(
        [
            str(CPASIM),
            "sweep",
            "--grid",
            "link.rate=100Mbps,1Gbps",
            "--analyze",
            "--workers",
            "1",
            "--no-progress",
            "--out",
            str(out),
            *[arg for s in TINY for arg in ("--set", s)],
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    rows = read_csv(out)
    assert [r["link.rate"] for r in rows] == ["100Mbps", "1Gbps"]
    for row in rows:
        assert row["critical_state"].count(":") == 2  # sys:sm:state
        assert 0 < float(row["critical_state_share"]) <= 1
    assert "critical_state" in done.stdout


def test_resume_on_the_real_model_and_a_changed_scenario_is_refused(tmp_path):
    out = tmp_path / "s.csv"
    grid = {"link.rate": ["100Mbps", "200Mbps", "1Gbps"]}
    full = cpasim.sweep(grid=grid, sets=TINY, workers=1, progress=False).to_frame()
    cpasim.sweep(grid={"link.rate": ["200Mbps"]}, sets=TINY, out=out, workers=1, progress=False)
    resumed = cpasim.sweep(
        grid=grid, sets=TINY, out=out, resume=True, workers=1, progress=False
    ).to_frame()
    # The resumed middle row comes back from the file; wall time is a measurement.
    assert rows_of(resumed) == rows_of(full)
    with pytest.raises(CpasimError, match="different scenario or --set"):
        cpasim.sweep(
            grid=grid,
            sets=[*TINY, "link.delay=1ms"],
            out=out,
            resume=True,
            workers=1,
            progress=False,
        )


def test_analyze_changes_no_metric():
    grid = {"link.rate": ["100Mbps", "1Gbps"]}
    plain = cpasim.sweep(grid=grid, sets=TINY, workers=1, progress=False).to_frame()
    traced = cpasim.sweep(grid=grid, sets=TINY, workers=1, analyze=True, progress=False).to_frame()
    analysis = [
        c for c in traced.columns if c.startswith(("critical_state", "resource_loop", "limited_by"))
    ]
    assert len(analysis) == 6
    assert set(traced["limited_by"]) == {"link"}  # both rates fill their link
    assert rows_of(traced.drop(columns=analysis)) == rows_of(plain)
