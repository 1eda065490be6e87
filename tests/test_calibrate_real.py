"""``inspect`` on real Linux TCP captured through a tbf-shaped router (calibration/capture.sh).

Each transfer was captured at the sender (and, without delay, at the receiver
too); the tbf rate is the truth the bottleneck estimate is held to.  Without
delay the largest error was 0.07 % (tolerance 0.5 %).  Through the delay line,
whose release jitter (tens of microseconds) blurs the ACK clock, it was 1.74 %
(tolerance 2 %) over the runs whose window exceeds the bandwidth-delay product;
window-limited runs never fill the bottleneck, so no estimate is held there.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from cpasim.calibrate import inspect_capture, read_capture, read_iperf

CAPTURES = Path(__file__).parent.parent / "calibration" / "captures"
MANIFEST = list(csv.DictReader((CAPTURES / "manifest.csv").read_text().splitlines()))
RATE_TOLERANCE = 0.005
DELAYED_RATE_TOLERANCE = 0.02
#: Advertised window per iperf3 -w, as Linux 6.18 offered it (max over the transfer).
ADVERTISED = {"32K": 39096, "64K": 80480, "256K": 326240}


def _window_limited(row) -> bool:
    delay_s = float(row["delay_ns"]) / 1e9
    if delay_s == 0 or row["window"] == "-":
        return False
    return ADVERTISED[row["window"]] * 8 / (2 * delay_s) < float(row["tbf_rate_bps"])


#: Neither limit's figures hold here: steady goodput is 84.5 % of the bottleneck rate
#: (85 % needed) and goodput x median round trip fills 88 % of the 39,096 B window
#: (90 % needed): the 1 ms delay line's jitter (median round trip 3.27 ms against a
#: base of 2.31 ms) makes the window nearly as tight as the shaper.
NEITHER = {"d1ms_tbf100m_w32k_tx.pcap"}
SHAPED = [r for r in MANIFEST if not _window_limited(r)]
SIDES = sorted({r["name"].rsplit("_", 1)[0] for r in MANIFEST if r["side"] == "rx"})


def test_manifest_covers_both_regimes():
    assert len(SHAPED) >= 15 and len(MANIFEST) - len(SHAPED) >= 3


@pytest.mark.slow
@pytest.mark.parametrize("row", SHAPED, ids=[r["name"] for r in SHAPED])
def test_bottleneck_rate_matches_the_shaper(row):
    report = inspect_capture(read_capture(CAPTURES / row["name"]))
    # BBR paces the runs with -w 256K and 5 ms: data does not follow the ACKs, but the
    # handshake and the timestamp echoes still tell the side.
    assert report.side == {"tx": "sender", "rx": "receiver"}[row["side"]]
    tol = DELAYED_RATE_TOLERANCE if float(row["delay_ns"]) else RATE_TOLERANCE
    assert report.bottleneck.bps == pytest.approx(float(row["tbf_rate_bps"]), rel=tol)
    assert report.verdict.kind == ("unknown" if row["name"] in NEITHER else "bottleneck")
    assert report.mss == 1448
    assert report.retransmitted_segments == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", SIDES)
def test_both_sides_and_iperf3_agree(name):
    tx = inspect_capture(read_capture(CAPTURES / f"{name}_tx.pcap"))
    rx = inspect_capture(read_capture(CAPTURES / f"{name}_rx.pcap"))
    iperf = read_iperf(CAPTURES / f"{name}.iperf3.json")
    assert tx.flow.a == rx.flow.a == iperf.local
    # iperf3 closes the connection at the end of the test, so what was still
    # queued in the tbf never reaches the receiver.
    assert 0.97 * tx.data_bytes <= rx.data_bytes <= tx.data_bytes
    # The sender sees TSO/GSO super-segments; the tbf cut them into MSS frames.
    assert tx.super_segments > 0.5 * tx.data_packets
    assert rx.largest_segment <= 3 * 1448
    assert tx.goodput_bps == pytest.approx(iperf.received.bps, rel=0.03)
    # Round trips at the sender include the tbf queue; the iperf3 kernel RTT lies inside them.
    assert tx.rtt_ns.min < iperf.min_rtt_ns < tx.rtt_ns.max
