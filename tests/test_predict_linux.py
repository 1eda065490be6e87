"""Predictions of the Linux stack's keys (locked socket buffers, the bottleneck's
overhead, BBR's pacing) checked by re-simulation, at the tolerance achieved."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpasim.config import load_scenario
from cpasim.predict.runs import traced_run
from cpasim.predict.validation import validate
from cpasim.predict.whatif import changed_config, predict

# As tests/test_predict.py's scenario: 1 Gb/s link, no interrupt throttling;
# Linux's defaults otherwise (CUBIC, SACK, autotuned buffers).
BASE = """
[sim]
duration = "{duration}"
warmup = "{warmup}"

[nic]
itr = "off"
"""


def _run(tmp: Path, duration: str, warmup: str, *sets: str):
    path = tmp / "s.toml"
    path.write_text(BASE.format(duration=duration, warmup=warmup))
    cfg = load_scenario(path, sets=list(sets))
    return traced_run(cfg, tmp / "base.cpt")


def _validate(run, tmp: Path, change: dict):
    return validate(run, changed_config(run.cfg, change), tmp / "changed.cpt")


@pytest.fixture(scope="module")
def window_limited(tmp_path_factory):
    # 200 us each way: a 16 KiB request (an 18,824-byte window) limits the stream.
    tmp = tmp_path_factory.mktemp("rcv")
    return _run(tmp, "6ms", "1ms", "link.delay=200us", "tcp.rcvbuf=16KiB")


# Measured: 1.03% (16 -> 32 KiB, both hosts) and 0.06% (the receiver to 24 KiB).  The
# re-simulated goodput counts whole segments in the 5 ms measured, one segment being
# 0.34% of it: since frames stop waiting out their inter-frame gap (12 byte times
# earlier each), one more segment arrives in time than the 0.69% measured before.
MEASURED_NS = 5e6
MSS = 1448


@pytest.mark.parametrize(
    "change, window",
    [
        pytest.param({"tcp.rcvbuf": "32KiB"}, 39096 - 18824, marks=pytest.mark.slow),
        ({"hosts.rx.tcp.rcvbuf": "24KiB"}, 10136),
    ],
)
def test_locked_rcvbuf_predicts_within_one_percent(window_limited, tmp_path, change, window):
    v = _validate(window_limited, tmp_path, change)
    assert f"capacity tx:Send window* +{window}" in " ".join(v.prediction.effects)
    assert v.actual > 1.5 * v.baseline  # the window was the limit
    one_segment = MSS * 8 / (MEASURED_NS * 1e-9) / v.actual
    assert v.error < 0.01 + one_segment, (v.prediction.predicted, v.actual)


@pytest.mark.slow
def test_locked_sndbuf_predicts_as_the_fixed_buffer_it_equals(tmp_path):
    """SO_SNDBUF = 8 KiB locks a 16 KiB buffer: the same run and the same prediction
    as cpasim's tcp.wmem = 16 KiB.  The send-buffer capacity transform over-predicts
    (measured 8.6% here; 20.9% for tcp.wmem 32 -> 64 KiB on tcp-stream, 40 ms), for
    a cause not established (see transforms_table, "Known limits")."""
    locked = _run(tmp_path, "6ms", "1ms", "link.delay=200us", "tcp.sndbuf=8KiB")
    v = _validate(locked, tmp_path, {"tcp.sndbuf": "16KiB"})
    (tmp_path / "w").mkdir()
    fixed = _run(tmp_path / "w", "6ms", "1ms", "link.delay=200us", "tcp.wmem=16KiB")
    assert fixed.metric == locked.metric
    same = predict(fixed, changed_config(fixed.cfg, {"tcp.wmem": "32KiB"}))
    assert same.predicted == v.prediction.predicted
    assert v.actual > 1.5 * v.baseline
    assert v.error < 0.10, (v.prediction.predicted, v.actual)


def test_bottleneck_overhead_predicts_within_one_percent(tmp_path):
    # 200 Mb/s counting 1538 B per 1500-byte packet, then 1514 B: measured 0.46%.
    run = _run(tmp_path, "20ms", "5ms", "bottleneck.rate=200Mbps")
    assert run.path.bottleneck == "path:Bottleneck:serialize"
    v = _validate(run, tmp_path, {"bottleneck.overhead": "14B"})
    assert v.prediction.predicted / v.baseline == pytest.approx(1538 / 1514, rel=0.01)
    assert v.error < 0.01, (v.prediction.predicted, v.actual)


# BBR, link-bound: measured 0.01% (1.2 Gb/s) and 1.1% (2 Gb/s, where the tx
# host's DMA becomes the bottleneck).
@pytest.mark.slow
@pytest.mark.parametrize("rate, tolerance", [("1200Mbps", 0.01), ("2Gbps", 0.02)])
def test_bbr_link_rate_predicts(tmp_path, rate, tolerance):
    run = _run(tmp_path, "10ms", "2ms", "tcp.cc=bbr")
    v = _validate(run, tmp_path, {"link.rate": rate})
    assert any("*:TcpSend:pace" in e for e in v.prediction.effects)
    assert v.error < tolerance, (v.prediction.predicted, v.actual)


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="predicted from the trace's 20 ms tail at 815.3 Mb/s against 941.0 "
    "re-simulated (13% low): the tail's replayed path starts with a round trip (1 ms of "
    "propagation, 18% of it) before the wire leads it, which the whole measured run "
    "amortises (937.5, 0.4%: the next test).  Before the window followed the buffer "
    "(the sender was in slow start, cwnd 93 segments against 46 in flight at most): "
    "494.8 (47% low)",
)
def test_a_send_buffer_beyond_the_baseline_cwnd(tmp_path):
    """1 Gb/s, 1 ms each way, a fixed 64 KiB send buffer: the verdict's own change
    (hosts.tx.tcp.wmem = 1 MiB) checked by re-simulation.  A larger buffer lets the
    slow-starting sender's window follow it (transforms_table's ``_CWND_FOLLOWS``)."""
    run = _run(tmp_path, "200ms", "50ms", "link.delay=1ms", "tcp.wmem=64KiB", "tcp.rmem=1MiB")
    v = _validate(run, tmp_path, {"hosts.tx.tcp.wmem": "1MiB"})
    assert v.actual > 4 * v.baseline  # the buffer was the limit
    assert v.error < 0.10, (v.prediction.predicted, v.actual)


@pytest.mark.slow
def test_a_slow_starting_senders_window_follows_its_buffer(tmp_path):
    """The same run: the sender was in slow start, so the larger buffer's prediction
    grows its window too, and the wire leads the predicted path; from the whole
    measured run the prediction is the re-simulation's (measured 937.5 against 941.0
    Mb/s, 0.4%).  Without the window's growth the replay kept the baseline's cwnd and
    the path stayed the round trip's."""
    run = _run(tmp_path, "200ms", "50ms", "link.delay=1ms", "tcp.wmem=64KiB", "tcp.rmem=1MiB")
    assert run.result["end_state"]["tcp"]["tx"][0]["slow_start"]
    new = changed_config(run.cfg, {"hosts.tx.tcp.wmem": "1MiB"})
    v = validate(run, new, tmp_path / "changed.cpt")
    assert any(": capacity tx:Send window +" in e for e in v.prediction.effects)
    assert v.prediction.predicted_path.bottleneck == "tx:MAC:transmit"
    whole = predict(run, new, whole=True)
    assert abs(whole.predicted - v.actual) / v.actual < 0.01, (whole.predicted, v.actual)
