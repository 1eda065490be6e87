"""``cpasim run --pcap``: the simulated frames as a capture, read back by dpkt,
tcpdump and ``cpasim calibrate inspect``."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import dpkt
import pytest

import cpasim
import cpasim.cli
from cpasim import capture as capture_module
from cpasim.calibrate import read_capture
from cpasim.calibrate.inspection import inspect_capture
from cpasim.capture import PCAP_MAGIC_NS
from cpasim.cli import main
from cpasim.config import load_scenario
from cpasim.model.link import serialization_ns
from cpasim.pcap_spec import PcapSpec
from cpasim.protocol import mss_for
from cpasim.simulate import simulate

ROOT = Path(__file__).resolve().parent.parent
TCP = ROOT / "scenarios" / "tcp-stream.toml"
UDP = ROOT / "scenarios" / "udp-stream.toml"
# A slow bottleneck and a long path: the ACK clock shows the rate, and the host
# times are small beside the round trip.
RATE = 50e6
DELAY = 10e6
SLOW_PATH = ["bottleneck.rate=50Mbps", "link.delay=10ms", "sim.duration=120ms"]
# The bottleneck's default overhead (Ethernet on the wire): what inspect must be told.
L2 = 38

cpasim.cli._register()


def _run(tmp_path, sets, side="tx", snaplen=96, scenario=TCP, name="run.pcap"):
    cfg = load_scenario(scenario, sets=sets)
    path = tmp_path / name
    result = simulate(cfg, pcap=PcapSpec(path, side, snaplen))
    return cfg, result, path


def _frames(path: Path):
    """The magic, and (ns, caplen, Ethernet) of every record, read by dpkt."""
    with path.open("rb") as f:
        magic = struct.unpack("<I", f.read(4))[0]
        f.seek(0)
        reader = dpkt.pcap.Reader(f)
        assert reader.snaplen > 0
        out = []
        for ts, buf in reader:
            out.append((int(ts * 10**9), len(buf), dpkt.ethernet.Ethernet(buf)))
    return magic, out


def _checksum_ok(ip) -> bool:
    """IP and transport checksums recomputed by dpkt (the payload is zeros)."""
    raw = bytes(ip)
    header = dpkt.ip.IP(raw)
    header.sum = 0
    ok = dpkt.ip.IP(bytes(header)).sum == ip.sum
    if ip.mf or ip.offset:
        return ok  # a fragment: the UDP checksum covers the whole datagram
    l4 = ip.data
    want = l4.sum
    l4.sum = 0
    ip.sum = 0
    rebuilt = dpkt.ip.IP(bytes(ip))  # dpkt fills in both checksums
    return ok and rebuilt.data.sum == want


def test_sender_side_round_trip_through_calibrate_inspect(tmp_path):
    cfg, _, path = _run(tmp_path, SLOW_PATH)
    report = inspect_capture(read_capture(path), l2_overhead=L2)
    assert report.side == "sender"
    assert report.bottleneck.bps == pytest.approx(RATE, rel=0.02)
    # Twice the one-way delay, the data segment's serialization at the bottleneck
    # and the ACK's on the link; what the hosts add must stay within 5 %.
    mtu = cfg.link.mtu
    base = 2 * DELAY + (mtu + L2) * 8e9 / RATE + serialization_ns(52, cfg.link.rate)
    assert report.rtt_ns.min == pytest.approx(base, rel=0.05)
    assert report.mss == mss_for(mtu, True) == 1448
    assert report.window_scale is not None


def test_receiver_side_round_trip_through_calibrate_inspect(tmp_path):
    _, _, path = _run(tmp_path, SLOW_PATH, side="rx")
    report = inspect_capture(read_capture(path), l2_overhead=L2)
    assert report.side == "receiver"
    assert report.bottleneck.bps == pytest.approx(RATE, rel=0.02)
    assert report.mss == 1448


def test_dpkt_reads_headers_checksums_and_every_frame(tmp_path):
    sets = ["sim.duration=20ms", "sim.warmup=0ms", "tcp.sack=true", "tcp.cc=cubic"]
    sets += ["link.loss=0.01", "nic.tso=true"]
    cfg, result, path = _run(tmp_path, sets, snaplen=2000)
    magic, frames = _frames(path)
    assert magic == PCAP_MAGIC_NS
    times = [t for t, _, _ in frames]
    assert times == sorted(times)
    data, acks, sacks = [], [], 0
    for _, caplen, eth in frames:
        ip = eth.data
        assert isinstance(ip, dpkt.ip.IP) and isinstance(ip.data, dpkt.tcp.TCP)
        assert caplen == max(14 + ip.len, 60)  # snaplen above every frame: all kept
        assert ip.len <= cfg.link.mtu
        assert _checksum_ok(ip)
        tcp = ip.data
        opts = dict(dpkt.tcp.parse_opts(tcp.opts))
        if not tcp.flags & dpkt.tcp.TH_SYN:
            assert dpkt.tcp.TCP_OPT_TIMESTAMP in opts
        sacks += dpkt.tcp.TCP_OPT_SACK in opts
        (data if ip.src == bytes((10, 0, 0, 1)) else acks).append(tcp)
    # Tapped beside tx: every frame tx's MAC sent, lost ones included, plus the
    # synthetic SYN and ACK; each TSO segment is a frame of its own.
    assert len(data) - 2 == result.frames["tx_to_rx"]
    assert max(len(t.data) for t in data) == 1448
    assert sacks > 0 and result.drops["link_loss"] > 0
    # The SYN-ACK announces rx's window scale; the ACKs' windows carry it.
    syn_ack = acks[0]
    assert syn_ack.flags & dpkt.tcp.TH_SYN
    shift = dpkt.tcp.parse_opts(syn_ack.opts)[-1][1][0]
    assert shift == 2 and max(t.win for t in acks[1:]) << shift > 65535
    # Sequence numbers count from 1 after the SYN; nothing is skipped in what tx sent.
    end = 1
    for t in data[2:]:
        assert t.seq <= end
        end = max(end, t.seq + len(t.data))


def test_udp_fragments_as_the_ip_layer_cuts_them(tmp_path):
    sets = ["sim.duration=2ms", "sim.warmup=0ms"]
    cfg, _, path = _run(tmp_path, sets, scenario=UDP, snaplen=2000)
    _, frames = _frames(path)
    by_id: dict[int, list] = {}
    for _, _, eth in frames:
        ip = eth.data
        assert _checksum_ok(ip)
        by_id.setdefault(ip.id, []).append(ip)
    size = cfg.workload.message_size
    complete = 0
    for frags in by_id.values():
        assert frags[0].offset == 0 and isinstance(frags[0].data, dpkt.udp.UDP)
        if frags[-1].mf:
            continue  # the run ended before its last fragment
        assert frags[0].data.ulen == 8 + size
        offsets = [f.offset * 8 for f in frags]  # dpkt counts 8-byte units
        lengths = [f.len - 20 for f in frags]
        assert offsets == [sum(lengths[:i]) for i in range(len(frags))]
        assert sum(lengths) == 8 + size
        complete += 1
    assert complete > 3


def test_snaplen_cuts_frames_and_keeps_their_length(tmp_path):
    _, _, path = _run(tmp_path, ["sim.duration=5ms", "sim.warmup=0ms"], snaplen=70)
    with path.open("rb") as f:
        records = list(dpkt.pcap.Reader(f))
    assert records
    with path.open("rb") as f:
        f.seek(24)
        raw = f.read()
    lengths = []
    while raw:
        _, _, caplen, orig = struct.unpack("<IIII", raw[:16])
        lengths.append((caplen, orig))
        raw = raw[16 + caplen :]
    assert all(cap == min(orig, 70) for cap, orig in lengths)
    assert max(orig for _, orig in lengths) == 1514
    # A cut frame still tells the reader its sizes.
    report = inspect_capture(read_capture(path))
    assert report.mss == 1448


def test_sides_see_different_times(tmp_path):
    _, _, tx = _run(tmp_path, SLOW_PATH[:2] + ["sim.duration=30ms"], name="tx.pcap")
    _, _, rx = _run(tmp_path, SLOW_PATH[:2] + ["sim.duration=30ms"], side="rx", name="rx.pcap")
    first_data = {}
    for side, path in (("tx", tx), ("rx", rx)):
        _, frames = _frames(path)
        first_data[side] = next(t for t, _, eth in frames if len(eth.data.data.data))
    # tx's first frame leaves its MAC; rx sees it after the delay and the bottleneck.
    gap = first_data["rx"] - first_data["tx"]
    assert gap == pytest.approx(DELAY + 1538 * 8e9 / RATE, rel=1e-6)


def test_off_costs_nothing_and_on_changes_nothing(tmp_path, monkeypatch):
    cfg = load_scenario(
        TCP, sets=["sim.duration=10ms", "sim.warmup=0ms", "tcp.sack=true", "link.loss=0.01"]
    )
    with_pcap = simulate(cfg, pcap=PcapSpec(tmp_path / "x.pcap")).to_json()

    def no_tap(*args, **kwargs):
        raise AssertionError("a tap was built without --pcap")

    monkeypatch.setattr(capture_module.PcapTap, "__init__", no_tap)
    without = simulate(cfg).to_json()
    for out in (with_pcap, without):
        out.pop("wall_s")
    assert with_pcap == without


def test_tcpdump_reads_it(tmp_path):
    _, _, path = _run(tmp_path, ["sim.duration=5ms", "sim.warmup=0ms"])
    out = subprocess.run(
        ["tcpdump", "-nr", str(path)], capture_output=True, text=True, check=True
    ).stdout
    lines = out.splitlines()
    assert "Flags [S]" in lines[0] and "mss 1460" in lines[0] and "wscale" in lines[0]
    assert "length 1448" in out


def test_unwritable_path_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "no" / "such" / "dir" / "x.pcap"
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "run",
                str(TCP),
                "--set",
                "sim.duration=2ms",
                "--set",
                "sim.warmup=0ms",
                "--pcap",
                str(bad),
            ]
        )
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert str(bad) in err and "cannot write capture" in err
    assert not bad.parent.exists()


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [("--pcap-side", "middle", "expected one of tx, rx"), ("--snaplen", "4", "expected 14 to")],
)
def test_bad_options_are_one_line_and_exit_2(tmp_path, capsys, option, value, expected):
    with pytest.raises(SystemExit) as exc:
        main(["run", str(TCP), "--pcap", str(tmp_path / "x.pcap"), option, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and expected in err
    assert not list(tmp_path.iterdir())  # nothing written, not even a temporary file


def test_a_failed_run_leaves_no_file(tmp_path, monkeypatch):
    cfg = load_scenario(TCP, sets=["sim.duration=2ms", "sim.warmup=0ms"])

    def fail(self):
        raise RuntimeError("boom")

    monkeypatch.setattr("cpasim.simulate._Runner.run", fail)
    with pytest.raises(RuntimeError):
        simulate(cfg, pcap=PcapSpec(tmp_path / "x.pcap"))
    assert not list(tmp_path.iterdir())


def test_cli_and_api_write_the_same_capture(tmp_path):
    a, b = tmp_path / "cli.pcap", tmp_path / "api.pcap"
    sets = {"sim.duration": "5ms", "sim.warmup": "0ms", "tcp.sack": True}
    flags = [x for k, v in sets.items() for x in ("--set", f"{k}={str(v).lower()}")]
    with pytest.raises(SystemExit) as exc:
        main(["run", str(TCP), *flags, "--pcap", str(a), "--pcap-side", "rx", "--snaplen", "80"])
    assert exc.value.code == 0
    cpasim.run(TCP, sets, pcap=b, pcap_side="rx", snaplen=80)
    assert a.read_bytes() == b.read_bytes()
    assert a.stat().st_size > 10_000


def test_handshake_takes_the_paths_round_trip(tmp_path):
    """tx's ACK leaves at time 0, when the run starts; the SYN a round trip earlier, so
    the SYN -> SYN-ACK gap is the round trip beside tx and near zero beside rx."""
    sets = SLOW_PATH[:2] + ["sim.duration=25ms", "sim.warmup=0ms"]
    first = {}
    for side in ("tx", "rx"):
        _, _, path = _run(tmp_path, sets, side=side, name=f"{side}.pcap")
        _, frames = _frames(path)
        first[side] = [(t, eth.data.data.flags) for t, _, eth in frames[:3]]
    syn, syn_ack, ack = first["tx"]
    assert syn[0] == 0  # the capture's clock starts at tx's SYN
    assert [f for _, f in first["tx"]] == [dpkt.tcp.TH_SYN, dpkt.tcp.TH_SYN | 0x10, 0x10]
    # The SYN (60 IP bytes) is shaped by the 50 Mb/s bottleneck, counting its 38 B of
    # overhead; the SYN-ACK crosses the link back unshaped and leaves rx's MAC at 1 Gb/s.
    shaped = (60 + L2) * 8e9 / RATE
    link = capture_module.transmit_ns(60, 1e9)
    assert syn_ack[0] - syn[0] == pytest.approx(2 * DELAY + shaped + link, abs=1)
    ack_link = capture_module.transmit_ns(52, 1e9)
    assert ack[0] - syn_ack[0] == pytest.approx(ack_link, abs=1)
    rx_syn, rx_syn_ack, rx_ack = first["rx"]
    assert rx_syn_ack[0] - rx_syn[0] == pytest.approx(link, abs=1)
    ack_shaped = (52 + L2) * 8e9 / RATE
    assert rx_ack[0] - rx_syn_ack[0] == pytest.approx(2 * DELAY + ack_link + ack_shaped, abs=1)


def test_a_short_run_read_back_tells_its_side(tmp_path):
    for side, name in (("tx", "sender"), ("rx", "receiver")):
        _, _, path = _run(tmp_path, SLOW_PATH[:2] + ["sim.duration=60ms"], side=side)
        report = inspect_capture(read_capture(path), l2_overhead=L2)
        assert report.side == name
        assert "SYN→SYN-ACK" in report.side_evidence


@pytest.mark.slow
@pytest.mark.parametrize("side", ["tx", "rx"])
def test_run_with_pcap_read_back_by_inspect(tmp_path, capsys, side):
    """``cpasim run scenarios/tcp-stream.toml --pcap`` at a 1 ms round trip, then
    ``calibrate inspect``: the run's goodput, its round trip within 15 % and its MSS.
    Measured: the steady goodput 0.01 % from the run's (727.4 against 727.3 Mb/s),
    the round trip 1.00 ms at either side."""
    path = tmp_path / "run.pcap"
    args = ["run", str(TCP), "--set", "link.delay=500us", "--json"]
    with pytest.raises(SystemExit) as exc:
        main([*args, "--pcap", str(path), "--pcap-side", side])
    assert exc.value.code == 0
    run = json.loads(capsys.readouterr().out)
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", "inspect", str(path), "--json"])
    assert exc.value.code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["side"] == {"tx": "sender", "rx": "receiver"}[side]
    # The run measures 100 ms after a 20 ms warm-up; the capture its last 90 ms.
    assert report["steady_goodput_bps"] == pytest.approx(run["goodput_bps"], rel=0.01)
    rtt = 2 * 500e3
    assert report["rtt_ns"]["p50"] == pytest.approx(rtt, rel=0.15)
    assert report["handshake_rtt_ns"] == pytest.approx(rtt, rel=0.15)
    assert report["mss"] == 1448


@pytest.mark.slow
def test_the_verdict_of_cpasims_own_capture_matches_the_model(tmp_path):
    """Beside tx, at the scenario's 0.7 ms round trip the link limits (97.6 % busy in
    the run); at 1 ms the 128 KiB send buffer does, and the change the capture's
    verdict gives buys what the model says it buys (predicted 941.5 Mb/s, simulated
    941.1 Mb/s)."""
    _, _, fast = _run(tmp_path, ["sim.duration=60ms"], name="link.pcap")
    v = inspect_capture(read_capture(fast)).verdict
    assert (v.kind, v.host) == ("link", "tx")
    cfg, _, slow = _run(tmp_path, ["link.delay=500us"], name="wmem.pcap")
    r = inspect_capture(read_capture(slow))
    v = r.verdict
    assert (v.kind, v.resource, v.host) == ("window", "the send buffer", "tx")
    assert list(v.change) == ["hosts.tx.tcp.wmem"]
    changed = load_scenario(
        TCP, sets=["link.delay=500us", *(f"{k}={x}" for k, x in v.change.items())]
    )
    got = simulate(changed).goodput_bps
    assert v.predicted["value"] == pytest.approx(got, rel=0.01)
