"""``calibrate fit`` without --params: evidence first, then a search that survives plateaus.

The captures are real (calibration/captures, calibration/grid; see calibration/README.md).
``d5ms_tbf50m_w32k``: tbf 50 Mb/s, 5 ms one-way delay, iperf3 -w 32K, BBR: window-limited
(39,096 B advertised over a 10 ms round trip is about 31 Mb/s).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import dpkt
import pytest

import cpasim.cli
from cpasim.calibrate import evidence
from cpasim.calibrate.inspect import inspect_capture
from cpasim.calibrate.iperf import read_iperf
from cpasim.calibrate.pcap import read_capture
from cpasim.calibrate.search import search_1d
from cpasim.config import load_scenario

sys.path.insert(0, str(Path(__file__).parent / "captures"))
import synth  # noqa: E402

cpasim.cli._register()
CAPTURES = Path(__file__).parent.parent / "calibration" / "captures"
WINDOWED = CAPTURES / "d5ms_tbf50m_w32k_tx.pcap"
WINDOWED_IPERF = CAPTURES / "d5ms_tbf50m_w32k.iperf3.json"


def _proposals():
    cap = read_capture(WINDOWED)
    return evidence.propose(cap, inspect_capture(cap), read_iperf(WINDOWED_IPERF))


def test_proposals_carry_what_the_capture_and_report_show():
    props = {p.key: p for p in _proposals()}
    assert props["link.mtu"].value == "1500B"
    assert props["tcp.timestamps"].value == "true"
    assert props["tcp.sack"].value == "true"
    assert props["tcp.cc"].value == "bbr"
    assert props["tcp.sndbuf"].value == props["tcp.rcvbuf"].value == "32768B"
    assert props["tcp.wmem"].value == "65536B"  # Linux doubles SO_SNDBUF
    assert props["tcp.rmem"].value == "39096B"  # what the receiver advertised
    assert props["tcp.delayed_ack"].value == "true"
    # Base round trip 10.08 ms (2 x 5 ms plus delay-line and forwarding time).
    delay_ns = float(props["link.delay"].value.removesuffix("ns"))
    assert 4.8e6 < delay_ns < 5.1e6
    assert "base round trip 10.08" in props["link.delay"].evidence
    rate = float(props["bottleneck.rate"].value.removesuffix("bps"))
    assert rate == pytest.approx(50e6, rel=0.03)
    assert props["link.rate"].fallback_for == "bottleneck.rate"


def test_apply_sets_known_keys_and_reports_the_rest():
    cfg = load_scenario(None)
    done = evidence.apply(cfg, _proposals(), where="test")
    applied = {p.key for p in done.applied}
    skipped = {p.key: why for p, why in done.not_modelled}
    # This version has no bottleneck section: link.rate stands in for it.
    if "bottleneck.rate" in skipped:
        assert "link.rate" in applied
    else:
        assert "link.rate" not in applied
    for p in done.applied:
        assert p.key not in skipped
    assert done.config.value("link.mtu") == 1500
    assert 4.8e6 < done.config.value("link.delay") < 5.1e6
    if "tcp.cc" in skipped:  # CUBIC/BBR not modelled yet
        assert "reno" in skipped["tcp.cc"]


def test_window_limited_capture_fits_the_delay_not_the_rate(tmp_path):
    """The failure of a rate-only fit: it slowed link.rate to 31.7 Mb/s and left link.delay
    at its default although the capture shows the round trip."""
    base = tmp_path / "base.toml"
    base.write_text('[sim]\nduration = "500ms"\nwarmup = "100ms"\n')
    out = tmp_path / "fitted.toml"
    result = _run(["calibrate", "fit", str(base), str(WINDOWED), str(WINDOWED_IPERF)], out)
    assert "regime: window-limited" in result
    assert "fitted link.delay:" in result
    assert "not modelled in this version: tcp.cc = bbr" in result or "set tcp.cc = bbr" in result
    cfg = load_scenario(out)
    assert cfg.value("link.rate") == pytest.approx(50e6 * 1538 / 1514, rel=0.03)
    assert 4.0e6 < cfg.value("link.delay") < 5.5e6
    assert cfg.value("tcp.rmem") == 39096
    line = next(x for x in result.splitlines() if "goodput_bps measured" in x)
    assert abs(float(line.rsplit("(", 1)[1].rstrip("%)"))) < 1.0  # within 1 %
    assert out.read_text().count("# set ") >= 5


def test_issue_case_twenty_ms_window_limited(tmp_path):
    """The issue's capture: window-limited (-w 64K) at 50 Mb/s with a 20 ms round trip,
    from the grid (gzip-compressed).  The evidence sets the delay to about 10 ms per
    direction before anything is fitted."""
    grid = CAPTURES.parent / "grid"
    base = tmp_path / "base.toml"
    base.write_text('[sim]\nduration = "1s"\nwarmup = "200ms"\n')
    out = tmp_path / "fitted.toml"
    args = [
        "calibrate",
        "fit",
        str(base),
        str(grid / "cubic_r50m_d10ms_q2bdp_w64k_r1.pcap.gz"),
        str(grid / "cubic_r50m_d10ms_q2bdp_w64k_r1.iperf3.json"),
    ]
    result = _run(args, out)
    assert "regime: window-limited" in result
    set_delay = next(x for x in result.splitlines() if x.startswith("set link.delay"))
    assert 9.8e6 < float(set_delay.split("= ")[1].split("ns")[0]) < 10.1e6
    cfg = load_scenario(out)
    assert cfg.value("link.rate") == pytest.approx(50e6 * 1538 / 1514, rel=0.03)
    assert 9.0e6 < cfg.value("link.delay") < 10.5e6
    assert cfg.value("tcp.rmem") == 81120


def _run(args, out, expect=0):
    from typer.testing import CliRunner

    result = CliRunner().invoke(cpasim.cli.app, [*args, "--out", str(out)])
    assert result.exit_code == expect, result.output
    return result.output


def _error(capsys, *args) -> str:
    with pytest.raises(SystemExit) as info:
        cpasim.cli.main(list(args))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("cpasim: error: ")
    return err


def test_bad_inputs_one_line_exit_2(capsys, tmp_path):
    base = tmp_path / "b.toml"
    base.write_text("")
    out = str(tmp_path / "o.toml")
    # A capture with no TCP flow at all.
    udp_only = tmp_path / "udp.pcap"
    with open(udp_only, "wb") as f:
        w = dpkt.pcap.Writer(f, linktype=1)
        udp = dpkt.udp.UDP(sport=1, dport=2, data=b"x" * 10)
        udp.ulen = len(bytes(udp))
        ip = dpkt.ip.IP(src=b"\x01\x02\x03\x04", dst=b"\x05\x06\x07\x08", p=17, data=udp)
        ip.len = len(bytes(ip))
        w.writepkt(bytes(dpkt.ethernet.Ethernet(data=ip)), ts=1.0)
    err = _error(capsys, "calibrate", "fit", str(base), str(udp_only), "--out", out)
    assert "udp.pcap: no TCP flow in the capture" in err
    # A capture with data but no ACKs.
    only_data = [s for s in synth.bulk_flow(side="sender", segments=40) if s.forward]
    no_acks = tmp_path / "noacks.pcap"
    synth.write_pcap(no_acks, only_data, side="sender")
    err = _error(capsys, "calibrate", "fit", str(base), str(no_acks), "--out", out)
    assert "noacks.pcap: no ACKs from the receiver" in err
    # An iperf3 report without the congestion control and buffer request.
    doc = json.loads(WINDOWED_IPERF.read_text())
    del doc["end"]["sender_tcp_congestion"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(doc))
    err = _error(capsys, "calibrate", "fit", str(base), str(WINDOWED), str(bare), "--out", out)
    assert "bare.json: iperf3 report lacks end.sender_tcp_congestion" in err
    # The report of another transfer.
    other = CAPTURES / "d5ms_tbf20m_w32k.iperf3.json"
    err = _error(capsys, "calibrate", "fit", str(base), str(WINDOWED), str(other), "--out", out)
    assert "d5ms_tbf20m_w32k.iperf3.json: iperf3 report is of the transfer" in err
    # A budget too small for the search.
    err = _error(
        capsys, "calibrate", "fit", str(base), str(WINDOWED), "--out", out, "--max-simulations", "5"
    )
    assert "--max-simulations 5 is too few" in err
    # Two captures: which one would the evidence come from?
    err = _error(capsys, "calibrate", "fit", str(base), str(WINDOWED), str(WINDOWED), "--out", out)
    assert "expected one capture and at most one iperf3 report" in err
    assert not Path(out).exists()


def test_search_crosses_a_plateau_to_the_answer():
    # Window-limited goodput: flat (rate-bound) below x = 5, falling as 1/x beyond.
    calls = []

    def residual(x):
        calls.append(x)
        return min(1.0, 5.0 / x) - 0.5  # zero at x = 10

    found = search_1d(residual, 0.1, 1000.0, near=1.0)
    assert found.x == pytest.approx(10.0, rel=2e-3)
    assert found.method == "bisection" and not found.at_edge
    assert len(calls) == found.evaluations <= 24


def test_search_without_a_root_finds_the_closest_point_and_says_at_edge():
    found = search_1d(lambda x: abs(math.log(x / 3)) + 0.1, 0.5, 50.0)
    assert found.x == pytest.approx(3.0, rel=0.01)
    assert found.method == "golden section" and not found.at_edge
    edge = search_1d(lambda x: 1.0 + 1.0 / x, 1.0, 10.0)
    assert edge.at_edge and edge.x == pytest.approx(10.0)
