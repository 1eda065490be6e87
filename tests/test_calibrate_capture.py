"""Capture readers and ``inspect`` on synthetic transfers whose every figure is known."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import dpkt
import pytest

from cpasim.calibrate import inspect_capture, read_capture
from cpasim.calibrate.pcap import PROTO_UDP
from cpasim.errors import CpasimError

sys.path.insert(0, str(Path(__file__).parent / "captures"))
import synth  # noqa: E402

LINKTYPES = [1, 113, 276, 101]  # Ethernet, SLL, SLL2, raw IP


def _write(tmp_path, segs, *, side, fmt="pcap-ns", linktype=1) -> Path:
    path = tmp_path / f"flow-{side}-{fmt}-{linktype}.cap"
    if fmt == "pcapng":
        synth.write_pcapng(path, segs, side=side, linktype=linktype)
    else:
        synth.write_pcap(path, segs, side=side, linktype=linktype, nano=fmt == "pcap-ns")
    return path


@pytest.mark.parametrize("linktype", LINKTYPES)
@pytest.mark.parametrize("fmt", ["pcap-ns", "pcap-us", "pcapng"])
def test_reader_recovers_every_header_field(tmp_path, fmt, linktype):
    segs = synth.bulk_flow(side="receiver", segments=20)
    cap = read_capture(_write(tmp_path, segs, side="receiver", fmt=fmt, linktype=linktype))
    assert cap.format == ("pcapng" if fmt == "pcapng" else "pcap")
    assert cap.snaplen == 128
    assert len(cap.packets) == len(segs)
    for seg, rec in zip(segs, cap.packets, strict=True):
        resolution = 1 if fmt == "pcap-ns" else 1000
        assert abs(rec.t_ns - seg.t_ns) < resolution
        assert (rec.seq, rec.ack, rec.flags, rec.window) == (
            seg.seq,
            seg.ack,
            seg.flags,
            seg.window,
        )
        # Sizes come from the IP header although only 128 bytes were captured.
        assert rec.payload == seg.payload
        assert rec.header_bytes == (synth.HEADER if not seg.syn_options else 20 + 40)
        assert (rec.src, rec.sport) == (synth.A if seg.forward else synth.B)
    syn = cap.packets[0]
    assert (syn.mss_option, syn.wscale_option) == (synth.MSS_OPTION, synth.WSCALE)


def test_nanosecond_timestamps_are_exact(tmp_path):
    segs = synth.bulk_flow(side="receiver", segments=20, rate_bps=1e9)
    cap = read_capture(_write(tmp_path, segs, side="receiver"))
    assert [p.t_ns for p in cap.packets] == [s.t_ns for s in segs]


@pytest.mark.parametrize("linktype", [113, 276])
def test_cooked_captures_tell_the_direction(tmp_path, linktype):
    segs = synth.bulk_flow(side="sender", segments=10)
    cap = read_capture(_write(tmp_path, segs, side="sender", linktype=linktype))
    assert [p.outgoing for p in cap.packets] == [s.forward for s in segs]
    report = inspect_capture(cap)
    assert report.side == "sender"
    assert "outgoing" in report.side_evidence


def test_sender_side_figures(tmp_path):
    rate, rtt = 10e6, 2_000_000
    segs = synth.bulk_flow(side="sender", rate_bps=rate, rtt_ns=rtt, resend=50)
    r = inspect_capture(read_capture(_write(tmp_path, segs, side="sender")))
    assert (r.sender, r.receiver) == ("10.0.0.1:40000", "10.0.0.2:5201")
    assert r.side == "sender"
    # ACKs return every 2 segments, spaced by the bottleneck: the ACK clock gives the rate.
    assert r.bottleneck.method == "spacing of returning ACKs"
    assert r.bottleneck.bps == pytest.approx(rate, rel=1e-6)
    # The first ACK covers segment 1: propagation + two serialisations + turnaround.
    assert r.rtt_ns.min == rtt + 2 * synth.wire_ns(rate) + 5_000
    assert r.mss == synth.PAYLOAD and r.mss_source.startswith("SYN")
    assert r.window_scale == synth.WSCALE
    assert r.segments_per_ack == pytest.approx(2.0)
    assert (r.retransmitted_segments, r.retransmitted_bytes) == (1, synth.PAYLOAD)
    assert r.data_bytes == 200 * synth.PAYLOAD
    assert r.adv_window.max == 114 << synth.WSCALE
    assert r.super_segments == 0
    # Ten segments in flight over a path that holds 2.5: the rest queue at the bottleneck.
    assert r.verdict.kind == "bottleneck"
    assert r.limited_by == "the narrowest link on the path (10.000 Mb/s) [bottleneck]"


def test_receiver_side_figures(tmp_path):
    rate = 10e6
    segs = synth.bulk_flow(side="receiver", rate_bps=rate, ack_turnaround_ns=7_000)
    r = inspect_capture(read_capture(_write(tmp_path, segs, side="receiver")))
    assert r.side == "receiver"
    assert r.bottleneck.method == "dispersion of back-to-back data segments"
    assert r.bottleneck.bps == pytest.approx(rate, rel=1e-6)
    assert r.rtt_ns is None  # a receiver sees ACK delays, not round trips
    assert r.ack_delay_ns.min == r.ack_delay_ns.max == 7_000
    # Goodput counts payload only: rate × payload / frame bytes.
    frame = synth.PAYLOAD + synth.HEADER + synth.L2
    assert r.goodput_bps == pytest.approx(rate * synth.PAYLOAD / frame, rel=0.01)


def test_window_limited_transfer_is_named(tmp_path):
    rate, rtt, window = 100e6, 2_000_000, 10
    segs = synth.bulk_flow(side="sender", rate_bps=rate, rtt_ns=rtt, window=window)
    r = inspect_capture(read_capture(_write(tmp_path, segs, side="sender", fmt="pcapng")))
    assert (r.verdict.kind, r.verdict.resource) == ("window", "the peer's receive window")
    assert r.in_flight_plateau == window * synth.PAYLOAD
    assert r.window_full_share > 0.9
    # One window per round trip.
    assert r.goodput_bps == pytest.approx(window * synth.PAYLOAD * 8e9 / r.rtt_ns.p50, rel=0.05)


def test_mid_flow_capture_without_handshake(tmp_path):
    segs = synth.bulk_flow(side="receiver")[3:]
    r = inspect_capture(read_capture(_write(tmp_path, segs, side="receiver")))
    assert r.window_scale is None
    assert r.mss == synth.PAYLOAD and "no SYN" in r.mss_source
    assert any("handshake" in n for n in r.notes)


def test_sequence_numbers_wrap(tmp_path):
    segs = synth.bulk_flow(side="sender", segments=60)
    shift = (1 << 32) - 1_000 - 30 * synth.PAYLOAD  # wraps half-way through the transfer
    wrapped = [
        synth.Seg(
            s.t_ns,
            s.forward,
            (s.seq + shift) % (1 << 32) if s.forward else s.seq,
            s.ack if s.forward else (s.ack + shift) % (1 << 32),
            s.flags,
            s.payload,
            s.window,
            s.syn_options,
        )
        for s in segs
    ]
    r = inspect_capture(read_capture(_write(tmp_path, wrapped, side="sender")))
    assert r.data_bytes == 60 * synth.PAYLOAD
    assert r.retransmitted_segments == 0


def _udp_capture(path: Path, n=40, gap_ns=100_000):
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, linktype=1, nano=True)
        for i in range(n):
            udp = dpkt.udp.UDP(sport=7000, dport=9000, data=b"\x00" * 1000)
            udp.ulen = len(bytes(udp))
            ip = dpkt.ip.IP(src=b"\x0a\x00\x00\x01", dst=b"\x0a\x00\x00\x02", p=17, data=udp)
            ip.len = len(bytes(ip))
            eth = dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, data=ip)
            w.writepkt(bytes(eth), ts=synth.T0 / 1e9 + i * gap_ns / 1e9)


def test_udp_only_capture_needs_an_explicit_flow(tmp_path):
    path = tmp_path / "udp.pcap"
    _udp_capture(path)
    cap = read_capture(path)
    assert {p.proto for p in cap.packets} == {PROTO_UDP}
    with pytest.raises(CpasimError, match="no TCP flow"):
        inspect_capture(cap)
    r = inspect_capture(cap, flow="1")
    assert r.flow.proto == "udp" and r.data_packets == 40
    # 1028-byte IP datagrams + 14 bytes of Ethernet header every 100 us.
    assert r.bottleneck.bps == pytest.approx((1028 + 14) * 8 / 100e-6, rel=1e-6)
    assert inspect_capture(cap, flow="10.0.0.2:9000").flow.index == 1
    with pytest.raises(CpasimError, match="--flow 7"):
        inspect_capture(cap, flow="7")


def test_not_a_capture(tmp_path):
    path = tmp_path / "x.pcap"
    path.write_bytes(b"hello world, not a capture")
    with pytest.raises(CpasimError, match="not a pcap or pcapng"):
        read_capture(path)


def test_unsupported_link_type(tmp_path):
    path = tmp_path / "usb.pcap"
    with open(path, "wb") as f:
        dpkt.pcap.Writer(f, linktype=189)  # USB
    with pytest.raises(CpasimError, match="link type 189"):
        read_capture(path)


@pytest.mark.parametrize("fmt", ["pcap-ns", "pcapng"])
def test_gzip_compressed_captures_read_like_plain_ones(tmp_path, fmt):
    segs = synth.bulk_flow(side="sender", segments=30)
    plain = _write(tmp_path, segs, side="sender", fmt=fmt)
    packed = tmp_path / (plain.name + ".gz")
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    a, b = read_capture(plain), read_capture(packed)
    assert b.format == a.format and b.snaplen == a.snaplen
    assert b.packets == a.packets


def test_committed_compressed_capture_with_handshake_options():
    # The first 200 packets of a grid run (calibration/grid.sh): Linux 6.18 offers
    # MSS 1460, window scale 10, timestamps and SACK in its SYN.
    cap = read_capture(Path(__file__).parent / "captures" / "cubic_head.pcap.gz")
    assert (cap.format, cap.snaplen, len(cap.packets)) == ("pcap", 96, 200)
    syn = cap.packets[0]
    assert syn.flags == dpkt.tcp.TH_SYN
    assert (syn.mss_option, syn.wscale_option, syn.sack_permitted) == (1460, 10, True)
    assert syn.tsval is not None
    assert not any(p.sack_permitted for p in cap.packets if not p.flags & dpkt.tcp.TH_SYN)


@pytest.mark.parametrize("keep", [0.3, 0.7, -8])
def test_a_truncated_compressed_capture_is_read_to_its_cut_as_a_plain_one(tmp_path, keep):
    """As tcpdump and Wireshark read a .pcap cut short (a killed capture, an
    interrupted copy) up to its last whole record, so a .pcap.gz cut short: the
    records decompressed before the cut, and a note saying so."""
    segs = synth.bulk_flow(side="sender", segments=30)
    plain = _write(tmp_path, segs, side="sender")
    whole = read_capture(plain)
    packed = gzip.compress(plain.read_bytes())
    cut_at = int(keep * len(packed)) if keep > 0 else len(packed) + keep  # -8: no trailer
    (tmp_path / "cut.pcap.gz").write_bytes(packed[:cut_at])
    cap = read_capture(tmp_path / "cut.pcap.gz")
    assert cap.cut_short is not None and "cut short" in cap.cut_short
    assert 0 < len(cap.packets) <= len(whole.packets)
    assert cap.packets == whole.packets[: len(cap.packets)]
    if keep == -8:  # only the trailer is lost: every record is there
        assert cap.packets == whole.packets
    # The same bytes uncompressed and cut inside their last record read the same way.
    data = plain.read_bytes()
    assert read_capture(_bytes(tmp_path, data[: len(data) - 5])).cut_short is not None


def test_a_corrupt_compressed_capture_is_one_line(tmp_path):
    packed = bytearray(gzip.compress(b"\xd4\xc3\xb2\xa1" + bytes(200)))
    packed[12:20] = b"\xff" * 8  # the deflate stream damaged
    path = _bytes(tmp_path, bytes(packed), "bad.pcap.gz")
    with pytest.raises(CpasimError, match="bad.pcap.gz: corrupt gzip-compressed capture"):
        read_capture(path)


def _bytes(tmp_path, data: bytes, name: str = "cut.pcap") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path
