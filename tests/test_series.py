"""Time series (``--series``): columns, time, capacities, goodput, and no effect on
the run it samples."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

import cpasim
from cpasim.cli import main
from cpasim.errors import CpasimError
from cpasim.series import nice_interval, read_series

ROOT = Path(__file__).resolve().parent.parent
STREAM = str(ROOT / "scenarios" / "tcp-stream.toml")
#: A queue that fills: a 100 Mb/s bottleneck behind a 1 Gb/s link, two connections.
FILLED = {
    "bottleneck.rate": "100Mbps",
    "bottleneck.queue": "60kB",
    "workload.connections": 2,
    "sim.duration": "30ms",
    "sim.warmup": "5ms",
}
PER_CONN = ("cwnd", "ssthresh", "snd_wnd", "inflight", "srtt", "sndbuf", "rcvbuf")


def _same(a, b) -> None:
    """The same results.  Not the same count of SimPy events: sampling pauses the run
    at every row, and a wait that would have gone on at once across a pause
    (Kernel.sleep) is an event."""
    x, y = a.to_json(), b.to_json()
    for key in ("wall_s", "events"):
        x.pop(key), y.pop(key)
    assert x == y


@pytest.fixture(scope="module")
def filled():
    return cpasim.run(STREAM, FILLED, series=True, interval="250us")


def test_columns_time_and_capacities(filled):
    s = filled.series
    for host in ("tx", "rx"):
        for conn in ("c0", "c1"):
            for what in PER_CONN:
                assert any(c.startswith(f"{host}.{conn}.{what}_") for c in s.columns), what
        for q in ("qdisc_pkts", "tx_ring_desc", "rx_ring_pkts", "tx_fifo_frames"):
            assert f"{host}.{q}" in s.columns
    assert "bottleneck.tx_to_rx_bytes" in s.columns and "goodput_bps" in s.columns
    t = s["time_ns"].to_numpy()
    assert np.all(np.diff(t) > 0)
    assert t[-1] == filled.sim_time_ns
    assert np.allclose(np.diff(t), 250e3)
    assert 5e6 in t  # the warm-up is a row boundary
    caps = s.attrs["capacities"]
    for column, cap in caps.items():
        assert s[column].max() <= cap, column
        assert s[column].min() >= 0, column
    # The queue the run is about did fill, and the window grew past its start.
    assert s["bottleneck.tx_to_rx_bytes"].max() > 0.5 * caps["bottleneck.tx_to_rx_bytes"]
    assert s["tx.c0.cwnd_bytes"].max() > s["tx.c0.cwnd_bytes"].iloc[0]
    assert s["tx.c0.srtt_ns"].dropna().between(1e3, 1e9).all()


def test_goodput_column_averages_to_the_runs_goodput(filled):
    s = filled.series
    after = s[s["time_ns"] > 5e6]  # rows inside the measured interval (after the warm-up)
    mean = (after["goodput_bps"] * after["interval_ns"]).sum() / after["interval_ns"].sum()
    assert filled.goodput_bps > 20e6
    assert mean == pytest.approx(filled.goodput_bps, rel=1e-9)


def test_series_changes_nothing(filled):
    plain = cpasim.run(STREAM, FILLED)
    _same(filled, plain)
    assert plain.events <= filled.events


@pytest.mark.slow  # two traced runs; test_series_changes_nothing is the quick one
@pytest.mark.parametrize("suffix", [".jsonl", ".cpt"])
def test_series_with_trace_changes_neither(tmp_path, suffix):
    short = {"sim.duration": "4ms", "sim.warmup": "1ms"}
    a, b = tmp_path / f"a{suffix}", tmp_path / f"b{suffix}"
    plain = cpasim.run(STREAM, short, trace=a)
    sampled = cpasim.run(STREAM, short, trace=b, series=True, interval="37us")
    _same(plain, sampled)
    assert len(sampled.series) > 100
    assert a.read_bytes() == b.read_bytes()


def test_parquet_without_pyarrow_is_refused(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now fails
    with pytest.raises(CpasimError, match=r"s.parquet: writing Parquet needs pyarrow"):
        cpasim.run(STREAM, series=tmp_path / "s.parquet")


@pytest.mark.slow
def test_sized_run_ends_with_its_last_row():
    r = cpasim.run(STREAM, {"workload.bytes": "2MB", "sim.warmup": 0}, series=True)
    s = r.series
    assert s["time_ns"].iloc[-1] == r.sim_time_ns
    got = (s["goodput_bps"] * s["interval_ns"]).sum() / s["interval_ns"].sum()
    assert got == pytest.approx(r.goodput_bps, rel=1e-9)


def test_cli_csv_and_parquet(tmp_path, capsys):
    for name in ("s.csv", "s.parquet"):
        with pytest.raises(SystemExit) as exc:
            main(["run", STREAM, "--set", "sim.duration=4ms", "--set", "sim.warmup=1ms",
                  "--no-progress", "--series", str(tmp_path / name)])  # fmt: skip
        assert exc.value.code in (0, None), capsys.readouterr().err
    csv, parquet = read_series(tmp_path / "s.csv"), read_series(tmp_path / "s.parquet")
    assert list(csv.columns) == list(parquet.columns)
    assert len(csv) == 800  # the default interval: 3 ms / 500 = 6 us, rounded to 5 us
    assert np.allclose(csv.to_numpy(), parquet.to_numpy(), equal_nan=True)


def test_bad_series_options(tmp_path, capsys):
    for extra, msg in (
        (["--series", str(tmp_path / "s.txt")], "unknown series format"),
        (["--interval", "1ms"], "--interval: only with --series"),
        (["--series", str(tmp_path / "s.csv"), "--interval", "fast"], "--interval"),
        (["--series", "s.csv", "--interval", "0us", "--out", str(tmp_path / "r")], "positive"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(["run", STREAM, "--no-progress", *extra])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1 and msg in err, err
    assert not (tmp_path / "r").exists()  # refused before the run folder was made
    with pytest.raises(CpasimError, match="interval"):
        cpasim.run(STREAM, series=True, interval=0)


def test_nice_interval():
    assert nice_interval(100e6) == 200e3
    assert nice_interval(3e6) == 5e3
    assert nice_interval(7.3e6) == 1e4
    assert nice_interval(1) == 1
    assert not math.isnan(nice_interval(0))


def test_plot_draws_a_series(tmp_path, capsys):
    path = tmp_path / "s.csv"
    cpasim.run(STREAM, FILLED, series=path, interval="250us")
    with pytest.raises(SystemExit) as exc:
        main(["plot", str(path)])
    assert exc.value.code in (0, None), capsys.readouterr().err
    png = (tmp_path / "s.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    with pytest.raises(SystemExit) as exc:  # neither a series nor a sweep: said so
        (tmp_path / "sweep.csv").write_text("a,b\n1,2\n")
        main(["plot", str(tmp_path / "sweep.csv")])
    assert exc.value.code == 2 and "not a cpasim sweep file" in capsys.readouterr().err


@pytest.mark.parametrize(
    "scenario, over",
    [
        ("tcp-stream", {"tcp.cc": "cubic", "tcp.sack": True}),  # LinuxSender
        pytest.param(
            "tcp-stream",
            {"tcp.cc": "bbr", "tcp.sack": True, "bottleneck.rate": "200Mbps"},
            marks=pytest.mark.slow,
        ),
        pytest.param("udp-stream", {}, marks=pytest.mark.slow),
        ("pingpong", {}),
        pytest.param("webserver", {}, marks=pytest.mark.slow),
    ],
)
def test_every_workload_and_sender(scenario, over):
    over = {"sim.duration": "8ms", "sim.warmup": "2ms", **over}
    path = str(ROOT / "scenarios" / f"{scenario}.toml")
    r = cpasim.run(path, over, series=True)
    s = r.series
    assert len(s) == 800  # 6 ms / 500 = 12 us, rounded down to 10 us
    for column, cap in s.attrs["capacities"].items():
        assert s[column].min() >= 0 and s[column].max() <= cap, column
    after = s[s["time_ns"] > 2e6]
    got = (after["goodput_bps"] * after["interval_ns"]).sum() / after["interval_ns"].sum()
    assert got == pytest.approx(r.goodput_bps, rel=1e-9)
    if scenario != "udp-stream":
        assert s["tx.c0.srtt_ns"].notna().any() and (s["tx.c0.cwnd_bytes"] > 0).all()
    _same(r, cpasim.run(path, over))
