"""The capture grid (calibration/grid.sh, calibration/grid/): its coverage, the measured
figures, and the held-out prediction from one calibration run.

Measured on kernel 6.18 with iperf3 3.12 (calibration/grid/manifest.csv; 3 repeats of 4 s,
6 for the three 50 Mb/s / 15 kB / 20 ms configurations).  Calibrated on
``cubic_r50m_d10ms_q2bdp_w64k`` like calibration/REPORT.md: 31 of the 33 other
configurations are predicted within 5 % (median |error| 0.3 %); the two that are not
are strict xfails below, each with its reason.  Whether a run's sender was paced
(``tcp.pacing``) is read from its capture (see calibration/REPORT.md).
"""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

import pytest

from cpasim.calibrate.grid import calibrate, predict, read_grid
from cpasim.config import load_scenario
from cpasim.errors import CpasimError
from cpasim.simulate import simulate

GRID = Path(__file__).parent.parent / "calibration" / "grid"
CALIBRATE_ON = "cubic_r50m_d10ms_q2bdp_w64k"


def _sim(cfg):
    return simulate(cfg).to_json()


@pytest.fixture(scope="module")
def grid():
    return {c.name: c for c in read_grid(GRID)}


@pytest.fixture(scope="module")
def cal(grid):
    return calibrate(load_scenario(None, sets=["sim.warmup=0s"]), grid[CALIBRATE_ON], _sim)


def test_grid_covers_the_planned_settings(grid):
    configs = list(grid.values())
    assert len(configs) >= 30 and all(len(c.goodputs) >= 3 for c in configs)
    assert {c.cc for c in configs} == {"cubic", "bbr", "reno"}
    assert {c.rate_bps for c in configs} == {20e6, 50e6}
    assert {c.delay_ns for c in configs} == {5e6, 10e6}
    windows = {c.window for c in configs}
    assert None in windows and min(w for w in windows if w) == 16 * 1024
    assert max(w for w in windows if w) == 4 * 1024 * 1024
    # Queues both below and above the bandwidth-delay product.
    bdp = {c.name: c.rate_bps / 8 * 2 * c.delay_ns / 1e9 for c in configs}
    assert any(c.queue_bytes < bdp[c.name] for c in configs)
    assert any(c.queue_bytes >= 2 * bdp[c.name] for c in configs)
    assert {c.regime for c in configs} == {"lossy", "window-limited", "rate-limited"}


def test_short_queue_runs_lose_packets_at_the_tbf():
    rows = list(csv.DictReader((GRID / "manifest.csv").read_text().splitlines()))
    short = [r for r in rows if r["queue_bytes"] == "15000"]
    assert short and all(int(r["qdisc_dropped"]) > 0 for r in short)
    assert all(int(r["delayline_dropped"]) == 0 for r in rows)


def test_repeats_agree_except_where_losses_decide(grid):
    spreads = {c.name: c.spread for c in grid.values()}
    assert statistics.median(spreads.values()) < 0.01
    wide = {n for n, s in spreads.items() if s > 0.05}
    # Reno and CUBIC through a 15 kB queue at 50 Mb/s and 20 ms: a 4 s run holds a few
    # loss cycles, and where the losses fall moves goodput by up to a third.
    assert wide <= {"reno_r50m_d10ms_q15k_wauto", "cubic_r50m_d10ms_q15k_wauto"}


def test_issue_reference_ordering(grid):
    """50 Mb/s, 15 kB queue, 20 ms round trip.  The issue's Linux figures: Reno 36.8,
    CUBIC 40.1, BBR 46.2 Mb/s; measured here (medians): about 31, 41, 46.5."""
    g = {cc: grid[f"{cc}_r50m_d10ms_q15k_wauto"].median / 1e6 for cc in ("reno", "cubic", "bbr")}
    assert g["reno"] < g["cubic"] < g["bbr"]
    assert g["bbr"] == pytest.approx(46.2, rel=0.02)
    assert g["cubic"] == pytest.approx(40.1, rel=0.05)
    assert g["reno"] == pytest.approx(31.3, rel=0.05)  # 15 % below the issue's 36.8


@pytest.mark.slow
def test_calibration_run_is_matched(cal):
    assert abs(cal.residual) < 0.005
    # Not fitted: Linux advertised at most 81,120 B for -w 64K; the model's receiver,
    # with Linux's socket-buffer rules, offers one window-scale step (640 B) less.
    assert cal.adv_window == 81120
    assert cal.model_window == 80480
    assert "tcp.sack = true" in "\n".join(cal.evidence)
    assert abs(cal.extra_delay_ns) < 1e6  # a correction, not a second delay
    assert cal.simulations <= 24


@pytest.fixture(scope="module")
def predictions(grid, cal):
    """Every configuration but the calibration one, predicted once for the module."""
    return {p.config.name: p for p in predict(cal, list(grid.values()), _sim)}


#: Held-out errors above the 5 % target, with what is known of why (figures from the
#: run that produced calibration/REPORT.md; extra one-way delay fitted: +184 us).
GAPS = {
    "cubic_r20m_d5ms_q2bdp_w16k": "-5.3 %: a 13-segment window over a 10 ms round trip; "
    "the extra delay fitted on the 20 ms calibration run (+184 us each way) is 3.7 % of "
    "this run's round trip, and the model's per-round latency is not split as Linux's",
    "reno_r50m_d10ms_q15k_wauto": "+11.1 %: lossy, and Linux's own 6 repeats spread 31 % "
    "(24.7-34.4 Mb/s): where the few losses of a 4 s run fall decides the goodput; the "
    "prediction (35.1) lies 2 % above the best run",
}
NAMES = [c.name for c in read_grid(GRID) if c.name != CALIBRATE_ON]


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=GAPS[n])) if n in GAPS else n
        for n in NAMES
    ],
)
def test_held_out_prediction(predictions, name):
    """Every configuration predicted from its nominal settings alone (rate, queue, tbf
    burst, delay, -w, congestion control) within 5 % of the median of its repeats."""
    p = predictions[name]
    assert abs(p.error) <= 0.05, f"{name}: {p.error:+.2%}"


def test_grid_manifest_errors(tmp_path):
    (tmp_path / "manifest.csv").write_text("name,cc\nx,cubic\n")
    with pytest.raises(CpasimError, match=r"manifest.csv:2: missing column\(s\) rate_bps"):
        read_grid(tmp_path)
    with pytest.raises(CpasimError, match="cannot read manifest"):
        read_grid(tmp_path / "nowhere")


#: Lossy configurations (a 15 kB tbf queue, below the bandwidth-delay product): the
#: hosts' timing decides which packets the drop-tail queue drops, and with a few loss
#: cycles in 4 s where they fall moves goodput by several percent (Linux's own repeats
#: of reno_r50m_d10ms_q15k spread 31 %).  Largest measured between the levels: +3.45 %.
LOSSY_AGREEMENT = 0.04


@pytest.mark.slow
def test_held_out_scores_are_no_worse_with_ideal_hosts(grid, cal, predictions):
    """The same calibration and predictions with ideal hosts (``host.detail = "ideal"``,
    docs/detail-levels.md).  Rate- and window-limited configurations agree with the full
    level within 1 % (largest measured: +0.65 %), lossy ones within 4 %, and the score
    above (within 5 % of Linux's median) is the same configuration for configuration:
    31 of 33 at both levels, median |error| 0.235 % full, 0.240 % ideal."""
    base = load_scenario(None, sets=["sim.warmup=0s", "host.detail=ideal"])
    ideal_cal = calibrate(base, grid[CALIBRATE_ON], _sim)
    assert abs(ideal_cal.residual) < 0.005
    # The extra delay fitted takes up what the full hosts add to the round trip:
    # measured 184 us full, 198 us ideal, each way.
    assert 0 < ideal_cal.extra_delay_ns - cal.extra_delay_ns < 30e3
    ideal = {p.config.name: p for p in predict(ideal_cal, list(grid.values()), _sim)}
    for name, p in predictions.items():
        q = ideal[name]
        tolerance = LOSSY_AGREEMENT if p.config.regime == "lossy" else 0.01
        assert q.predicted_bps == pytest.approx(p.predicted_bps, rel=tolerance), name
        assert (abs(q.error) <= 0.05) == (abs(p.error) <= 0.05), name
    err_f = [abs(p.error) for p in predictions.values()]
    err_i = [abs(p.error) for p in ideal.values()]
    assert statistics.median(err_i) <= statistics.median(err_f) + 0.0001
