"""iperf3 JSON and microbenchmark CSV readers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cpasim.calibrate import read_iperf, read_microbench
from cpasim.errors import CpasimError

CAPTURES = Path(__file__).parent.parent / "calibration" / "captures"


def test_iperf3_report_of_a_real_run():
    path = CAPTURES / "tbf50m_w32k.iperf3.json"
    doc = json.loads(path.read_text())
    run = read_iperf(path)
    assert (run.protocol, run.num_streams, run.reverse) == ("TCP", 1, False)
    assert run.remote == "10.200.1.2:5201"
    assert run.sock_bufsize == 32 * 1024  # iperf3 -w 32K
    assert run.mss == doc["start"]["tcp_mss_default"]
    assert len(run.intervals) == len(doc["intervals"])
    first = doc["intervals"][0]["streams"][0]
    iv = run.intervals[0]
    assert iv.rtt_ns == first["rtt"] * 1000  # iperf3 reports microseconds
    assert (iv.snd_cwnd, iv.snd_wnd) == (first["snd_cwnd"], first["snd_wnd"])
    assert iv.bytes == doc["intervals"][0]["sum"]["bytes"]
    assert run.sent.bps == doc["end"]["sum_sent"]["bits_per_second"]
    assert run.received.bytes == doc["end"]["sum_received"]["bytes"]
    assert run.sent.retransmits == 0
    assert run.congestion == doc["end"]["sender_tcp_congestion"]
    assert run.min_rtt_ns == doc["end"]["streams"][0]["sender"]["min_rtt"] * 1000


def test_iperf3_udp_report(tmp_path):
    doc = {
        "start": {
            "connected": [
                {"local_host": "a", "local_port": 1, "remote_host": "b", "remote_port": 2}
            ],
            "test_start": {"protocol": "UDP", "num_streams": 2, "blksize": 1448, "duration": 3},
        },
        "intervals": [{"sum": {"start": 0, "end": 1.5, "bytes": 100, "bits_per_second": 533.3}}],
        "end": {"sum": {"seconds": 3.0, "bytes": 200, "bits_per_second": 533.3}},
    }
    path = tmp_path / "udp.json"
    path.write_text(json.dumps(doc))
    run = read_iperf(path)
    assert run.protocol == "UDP" and run.num_streams == 2
    assert run.intervals[0].end_ns == 1_500_000_000 and run.intervals[0].rtt_ns is None
    assert run.sent.bytes == 200 and run.received is None


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('{"error": "unable to connect to server"}', "iperf3 reported an error: unable to connect"),
        ("not json", "not JSON"),
        ('{"start": {}}', "start.test_start is missing; expected an object"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_iperf3_bad_reports(tmp_path, text, match):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(CpasimError, match=match) as info:
        read_iperf(path)
    assert str(path) in str(info.value)


def test_microbench_table_units_and_labels(tmp_path):
    path = tmp_path / "dp.csv"
    path.write_text(
        "# one-way figures\n"
        "size_bytes,Os_us,gr_ns,latency_ms,bandwidth_MBps,system\n"
        "1,7,10600,0.0163,,GEDP-UP\n"
        "1500,7.5,,,79.5,GEDP-SMP\n"
    )
    table = read_microbench(path)
    assert table.metrics == ["Os", "gr", "latency", "bandwidth"]
    assert table.series("Os") == [(1, 7000.0), (1500, 7500.0)]
    assert table.series("gr") == [(1, 10600.0)]
    assert table.rows[0].values["latency"] == pytest.approx(16300.0)
    assert table.rows[1].values["bandwidth"] == pytest.approx(79.5 * 8e6)
    assert [r.labels["system"] for r in table.rows] == ["GEDP-UP", "GEDP-SMP"]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("bytes,Os_us\n1,2\n", "missing column 'size_bytes'"),
        ("size_bytes,system\n1,x\n", "no measurement column"),
        ("size_bytes,Os_parsecs\n1,2\n", "unknown unit 'parsecs'"),
        ("size_bytes,Os_us\n1,fast\n", "row 2: Os_us 'fast' is not a number"),
        ("size_bytes,Os_us\n-4,2\n", "size_bytes '-4' is not a byte count"),
        ("size_bytes,Os_us\n1\n", "row 2: expected 2 fields"),
    ],
)
def test_microbench_bad_tables(tmp_path, text, match):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(CpasimError, match=match):
        read_microbench(path)
