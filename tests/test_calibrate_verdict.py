"""The verdict of a capture: which side it was taken on, what limited the transfer, and
reasons that match the figures they cite.

``d5ms_tbf50m_w32k_tx.pcap`` (calibration/captures: tbf 50 Mb/s, 5 ms each way,
iperf3 -w 32K, BBR, captured beside the sender) is window-limited: its flight sits at
the advertised 39,096 B, which over a 10 ms round trip carries about 29 Mb/s.
"""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import cpasim.cli
from cpasim.calibrate import inspect_capture, limits, read_capture
from cpasim.calibrate.limits import PEER_WINDOW, lookup
from cpasim.errors import CpasimError

sys.path.insert(0, str(Path(__file__).parent / "captures"))
import synth  # noqa: E402

cpasim.cli._register()
ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "calibration" / "captures"
GRID = ROOT / "calibration" / "grid"
WINDOWED = CAPTURES / "d5ms_tbf50m_w32k_tx.pcap"

#: Each check's value, derived here from the report's figures (not by the module).
DERIVED = {
    "goodput / bottleneck rate": lambda r: r.steady_goodput_bps / r.bottleneck.bps,
    "bottleneck pairs in mode": lambda r: r.bottleneck.in_mode / r.bottleneck.samples,
    "time at the peer's window": lambda r: r.window_full_share,
    "goodput x round trip / peer's window": lambda r: (
        r.steady_goodput_bps / 8 * r.rtt_ns.p50 / 1e9 / r.adv_window.p50
    ),
    "median / base round trip": lambda r: r.rtt_ns.p50 / r.rtt_ns.min,
    "resent share": lambda r: r.retransmitted_bytes / r.data_bytes,
    "stalled share": lambda r: r.stalled_ns / r.duration_ns,
    "time with the window closed": lambda r: r.window_closed_share,
    "time with nothing in flight": lambda r: r.idle_share,
    "flight / peer's window": lambda r: r.in_flight.p90 / r.adv_window.p50,
    "flight growth": lambda r: r.in_flight_late_max / r.in_flight_early_max,
    "data spaced at the bottleneck rate": lambda r: r.data_at_bottleneck_share,
}
#: The checks a kind cannot be given without (any one of each group).
REQUIRED = {
    "bottleneck": [{"goodput / bottleneck rate", "median / base round trip"}],
    "link": [{"goodput / bottleneck rate"}, {"data spaced at the bottleneck rate"}],
    "window": [
        {
            "time at the peer's window",
            "goodput x round trip / peer's window",
            "flight / peer's window",
        }
    ],
    "loss": [{"resent share"}],
    "timeout": [{"stalled share"}],
    "app": [{"time with the window closed", "time with nothing in flight"}],
    "unknown": [],
}


def _decimals(number: str) -> int:
    return len(number.partition(".")[2])


def assert_reasons_match_figures(r) -> None:
    """Every reason of ``r``'s verdict cites the report's own figures, its value
    follows from them, its sentence shows them, and it holds (or, for an unknown
    verdict's tried checks, fails); a cited rate is backed by a check."""
    v = r.verdict
    assert v.kind in limits.KINDS
    assert r.limited_by == v.summary
    for c in (*v.checks, *v.tried):
        for f in c.figures:
            assert lookup(r, f.field) == pytest.approx(f.value), (c.name, f.field)
            assert f.shown() in c.text, (c.name, f.shown(), c.text)
        assert c.value == pytest.approx(DERIVED[c.name](r)), c.name
        # The value and the bound as printed: the first and last of their kind in the
        # sentence; they must say what the check says.
        unit = " x" if " x " in c.text else "%"
        printed = re.findall(r"([0-9]+(?:\.[0-9]+)?)" + re.escape(unit) + r"(?![0-9])", c.text)
        scale = 1 if unit == " x" else 100
        value, bound = float(printed[0]) / scale, float(printed[-1]) / scale
        assert bound == pytest.approx(c.bound), c.text
        assert value == pytest.approx(c.value, abs=0.5 / scale * 10 ** -_decimals(printed[0]))
        compare = {">=": value >= bound, "<=": value <= bound, ">": value > bound}
        assert compare.get(c.op, value < bound) == c.holds, c.text
    assert all(c.holds for c in v.checks), v.evidence
    assert not any(c.holds for c in v.tried)
    names = {c.name for c in v.checks}
    for group in REQUIRED[v.kind]:
        assert names & group, (v.kind, names)
    if "Mb/s" in v.resource:  # "the narrowest link on the path (50.0 Mb/s)"
        rate = next(c for c in v.checks if c.name == "goodput / bottleneck rate")
        assert limits.show(r.bottleneck.bps, "bps") in v.resource
        assert rate.holds


@pytest.fixture(scope="module")
def windowed():
    return inspect_capture(read_capture(WINDOWED))


def test_window_limited_is_not_sender_limited(windowed):
    """The flight sits at the advertised window: the peer's receive window limits, and
    only the receiver's buffer is the change."""
    r = windowed
    assert r.in_flight.p50 == r.in_flight.p90 == r.in_flight.max == r.adv_window.max == 39096
    v = r.verdict
    assert (v.kind, v.resource, v.host) == ("window", PEER_WINDOW, "rx")
    assert r.limited_by == "the peer's receive window [window]"
    assert [c.name for c in v.checks] == ["time at the peer's window", "median / base round trip"]
    assert r.window_full_share > 0.7  # measured 73 %
    assert "(median 39,096 B)" in v.evidence[0]
    assert list(v.change) == ["hosts.rx.tcp.rmem"]
    # The bandwidth-delay product (49 Mb/s x 10.08 ms, 62 kB) would carry 1.6 times more.
    assert v.predicted["value"] / v.predicted["baseline"] == pytest.approx(1.62, abs=0.02)
    assert_reasons_match_figures(r)


def test_side_from_the_handshake_and_the_echoes(windowed):
    assert windowed.side == "sender"
    assert windowed.side_method == "timestamp echoes"
    # The handshake agrees: SYN -> SYN-ACK is the round trip, SYN-ACK -> ACK the sender's.
    assert "handshake: SYN→SYN-ACK 10.35 ms, SYN-ACK→ACK 35.8 us" in windowed.side_evidence
    assert windowed.handshake_rtt_ns == pytest.approx(10.38e6, rel=1e-3)


def _synth(tmp_path, name="flow.pcap", *, side, **kw):
    path = tmp_path / name
    synth.write_pcap(path, synth.bulk_flow(side=side, **kw), side=side)
    return read_capture(path)


@pytest.mark.parametrize("side", ["sender", "receiver"])
def test_timestamp_echoes_tell_the_side_and_the_round_trip(tmp_path, side):
    rate, rtt = 100e6, 2_000_000
    cap = _synth(tmp_path, side=side, rate_bps=rate, rtt_ns=rtt, window=10, timestamps=True)
    r = inspect_capture(cap)
    assert (r.side, r.side_method) == (side, "timestamp echoes")
    assert "handshake: SYN→SYN-ACK" in r.side_evidence  # which agrees
    if side == "receiver":
        # From the receiver's ACK to the first data echoing it: the round trip, the
        # sender's 2 us answer and one serialization (the window never queues); the
        # fastest is the handshake's (the sender's ACK answers in 1 us).
        assert r.rtt_ns.p50 == rtt + 2_000 + synth.wire_ns(rate)
        assert r.rtt_ns.min == rtt + 1_000
        assert r.rtt_method.startswith("timestamp echoes")
    assert_reasons_match_figures(r)


@pytest.mark.parametrize("side", ["sender", "receiver"])
def test_handshake_tells_the_side_without_timestamps(tmp_path, side):
    r = inspect_capture(_synth(tmp_path, side=side))
    assert (r.side, r.side_method) == (side, "handshake")
    assert r.handshake_rtt_ns == 2_000_000 + 1_000  # SYN -> the sender's ACK, 1 us after


def test_a_tap_between_the_hosts_falls_back_to_spacing(tmp_path):
    segs = synth.bulk_flow(side="sender")
    t = segs[0].t_ns
    # Half a round trip each way: both hosts answer a millisecond after the tap.
    handshake = [
        segs[0],
        replace(segs[1], t_ns=t + 1_000_000),
        replace(segs[2], t_ns=t + 2_000_000),
    ]
    path = tmp_path / "middle.pcap"
    synth.write_pcap(path, handshake + segs[3:], side="sender")
    r = inspect_capture(read_capture(path))
    assert "taken between the hosts" in r.side_evidence
    assert (r.side, r.side_method) == ("sender", "spacing")


def test_side_given_overrides(tmp_path, capsys):
    cap = _synth(tmp_path, side="sender", timestamps=True)
    r = inspect_capture(cap, side="rx")
    assert (r.side, r.side_method, r.side_evidence) == ("receiver", "--side", "given by --side rx")
    with pytest.raises(CpasimError, match="--side beside: expected one of tx, rx"):
        inspect_capture(cap, side="beside")
    with pytest.raises(SystemExit) as exc:
        cpasim.cli.main(["calibrate", "inspect", cap.path, "--side", "middle"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def _refused(capsys, *args) -> str:
    with pytest.raises(SystemExit) as exc:
        cpasim.cli.main(["calibrate", "inspect", *map(str, args)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("cpasim: error: "), err
    return err


def test_a_capture_that_cannot_be_read_is_one_line_and_exit_2(tmp_path, capsys):
    nothing = tmp_path / "nothing.pcap"
    nothing.write_bytes(b"")
    assert "nothing.pcap: not a pcap or pcapng capture (first bytes empty)" in _refused(
        capsys, nothing
    )
    empty = tmp_path / "empty.pcap"
    synth.write_pcap(empty, [], side="sender")  # a header and no packet
    assert "empty.pcap: no TCP or UDP packets found" in _refused(capsys, empty)
    udp = tmp_path / "udp.pcap"
    synth.write_udp_only(udp)
    assert "udp.pcap: no TCP flow in the capture" in _refused(capsys, udp)
    cap = _synth(tmp_path, side="sender")
    assert "--side sender: expected one of tx, rx" in _refused(capsys, cap.path, "--side", "sender")


def test_a_capture_begun_mid_flow_is_read_and_says_what_it_lacks(tmp_path, capsys):
    """No handshake is no error: a capture started after the connection opened still
    shows the rate, the round trip and, by the timestamp echoes, its side; it says
    that the window scale is unknown."""
    segs = synth.bulk_flow(side="sender", timestamps=True)
    path = tmp_path / "midflow.pcap"
    synth.write_pcap(path, segs[3:], side="sender")
    with pytest.raises(SystemExit) as exc:
        cpasim.cli.main(["calibrate", "inspect", str(path)])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "side     sender: the sender echoes the receiver's timestamps" in out
    assert "handshake not captured: window scale unknown" in out
    r = inspect_capture(read_capture(path))
    assert r.handshake_rtt_ns is None
    assert r.verdict.kind == "bottleneck"


def test_a_fast_dispersion_is_no_bottleneck(tmp_path):
    """Packets that leave back to back at 12 Gb/s while the window carries 58 Mb/s: the
    dispersion rate is the sender's, and the reason says the window."""
    rate, rtt, window = 12e9, 2_000_000, 10
    cap = _synth(tmp_path, side="sender", rate_bps=rate, rtt_ns=rtt, window=window)
    r = inspect_capture(cap)
    assert r.bottleneck.bps == pytest.approx(rate, rel=1e-3)
    assert r.verdict.kind == "window"
    assert "Mb/s" not in r.verdict.resource
    assert_reasons_match_figures(r)


def test_a_full_window_over_a_standing_queue_is_the_bottleneck(tmp_path):
    """Ten segments over a path that holds 2.5: the window is full, but the rest waits
    in the bottleneck's queue, so a larger window would buy nothing."""
    r = inspect_capture(_synth(tmp_path, side="sender", resend=50))
    assert r.verdict.kind == "bottleneck"
    names = [c.name for c in r.verdict.checks]
    assert names[:2] == ["time at the peer's window", "median / base round trip"]
    assert r.verdict.checks[1].op == ">"
    assert_reasons_match_figures(r)


def test_a_saturated_bottleneck_is_named_with_its_rate(tmp_path):
    """Five segments in flight, below the peer's 10-segment window, over a path that
    holds 2.5: the bottleneck runs full and its rate is the limit."""
    r = inspect_capture(_synth(tmp_path, side="sender", window=5, timestamps=True))
    v = r.verdict
    assert (v.kind, v.resource) == ("bottleneck", "the narrowest link on the path (10.000 Mb/s)")
    assert [c.name for c in v.checks] == ["bottleneck pairs in mode", "goodput / bottleneck rate"]
    assert_reasons_match_figures(r)


def test_a_silence_before_a_resend_is_a_timeout(tmp_path):
    """The sender stops for a second with data outstanding, then resends."""
    segs = synth.bulk_flow(side="sender", segments=200, rate_bps=100e6, window=10)
    data = [s for s in segs if s.forward and s.payload]
    cut = data[100].t_ns
    out = [s if s.t_ns <= cut else replace(s, t_ns=s.t_ns + 10**9) for s in segs]
    out.append(replace(data[100], t_ns=cut + 10**9 - 1))
    path = tmp_path / "stalled.pcap"
    synth.write_pcap(path, sorted(out, key=lambda s: s.t_ns), side="sender")
    r = inspect_capture(read_capture(path))
    assert r.stalls == 1 and r.stalled_ns == pytest.approx(1e9, rel=0.01)
    assert (r.verdict.kind, r.verdict.resource) == ("timeout", "the retransmission timer")
    assert_reasons_match_figures(r)


def test_nothing_in_flight_is_the_sending_application(tmp_path):
    """Ten writes of 20 segments, 50 ms apart: each is acknowledged within 6 ms."""
    segs = synth.bulk_flow(side="sender", segments=20, rate_bps=100e6, window=10)
    burst = len(segs[3:])
    out = segs[:3]
    for k in range(10):
        off = k * 20 * synth.PAYLOAD
        for s in segs[3:]:
            moved = replace(s, t_ns=s.t_ns + k * 50_000_000)
            out.append(
                replace(moved, seq=s.seq + off) if s.forward else replace(moved, ack=s.ack + off)
            )
    assert len(out) == 3 + 10 * burst
    path = tmp_path / "writes.pcap"
    synth.write_pcap(path, out, side="sender")
    r = inspect_capture(read_capture(path))
    assert r.idle_share > 0.85  # 89 %
    assert (r.verdict.kind, r.verdict.host) == ("app", "tx")
    assert_reasons_match_figures(r)


def test_the_kinds_are_a_simulated_runs():
    """A capture's verdict speaks the vocabulary of a run's (cpasim.verdict), plus
    "unknown" where a capture does not show the limit."""
    from cpasim import verdict

    assert set(limits.KINDS) - {"unknown"} <= set(verdict.KINDS)


def test_inspect_prints_the_verdict(tmp_path, capsys):
    cap = _synth(tmp_path, side="sender", rate_bps=100e6, window=10, timestamps=True)
    with pytest.raises(SystemExit) as exc:
        cpasim.cli.main(["calibrate", "inspect", cap.path])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "limited by   the peer's receive window  [window]" in out
    assert "  evidence   the flight sat within one MSS of the peer's advertised window" in out
    assert "  change     hosts.rx.tcp.rmem=" in out


#: What limited the real captures that are not bottleneck-limited (the window runs are
#: those whose window over the round trip is below the shaper's rate; the loss runs
#: lost packets at a 15 kB tbf queue without filling the link).
EXPECTED = {
    "d1ms_tbf100m_w32k_tx.pcap": "unknown",  # see test_calibrate_real.NEITHER
    "d5ms_tbf100m_w32k_tx.pcap": "window",
    "d5ms_tbf100m_w64k_tx.pcap": "window",
    "d5ms_tbf50m_w32k_tx.pcap": "window",
    "bbr_r50m_d10ms_q2bdp_w64k_r1.pcap.gz": "window",
    "cubic_r20m_d5ms_q2bdp_w16k_r1.pcap.gz": "window",
    "cubic_r50m_d10ms_q2bdp_w16k_r1.pcap.gz": "window",
    "cubic_r50m_d10ms_q2bdp_w32k_r1.pcap.gz": "window",
    "cubic_r50m_d10ms_q2bdp_w64k_r1.pcap.gz": "window",
    "reno_r50m_d10ms_q2bdp_w64k_r1.pcap.gz": "window",
    "cubic_r50m_d10ms_q15k_wauto_r1.pcap.gz": "loss",
    "reno_r50m_d10ms_q15k_wauto_r1.pcap.gz": "loss",
    "reno_r50m_d5ms_q15k_wauto_r1.pcap.gz": "loss",
}
REAL = sorted(CAPTURES.glob("*.pcap")) + sorted(GRID.glob("*.pcap.gz"))


@pytest.mark.slow
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_every_real_capture_gives_reasons_that_match_its_figures(path):
    r = inspect_capture(read_capture(path))
    assert r.side == ("receiver" if "_rx" in path.name else "sender")
    assert r.verdict.kind == EXPECTED.get(path.name, "bottleneck")
    if r.verdict.kind == "window":
        assert r.verdict.resource == PEER_WINDOW  # fixed -w buffers: the receiver's
    assert_reasons_match_figures(r)
