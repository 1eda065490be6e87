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

import pytest

import cpasim.cli
from cpasim.calibrate import evidence
from cpasim.calibrate.grid import read_grid
from cpasim.calibrate.inspection import inspect_capture
from cpasim.calibrate.iperf import read_iperf
from cpasim.calibrate.pcap import read_capture
from cpasim.calibrate.search import search_1d
from cpasim.config import load_scenario
from cpasim.errors import CpasimError
from cpasim.simulate import simulate

sys.path.insert(0, str(Path(__file__).parent / "captures"))
import synth  # noqa: E402

cpasim.cli._register()
CAPTURES = Path(__file__).parent.parent / "calibration" / "captures"
WINDOWED = CAPTURES / "d5ms_tbf50m_w32k_tx.pcap"
WINDOWED_IPERF = CAPTURES / "d5ms_tbf50m_w32k.iperf3.json"


GRID = CAPTURES.parent / "grid"
TCP_STREAM = CAPTURES.parent.parent / "scenarios" / "tcp-stream.toml"
#: The issue's case: window-limited (-w 64K) at 50 Mb/s with a 20 ms round trip (CUBIC).
ISSUE_CAPTURE = GRID / "cubic_r50m_d10ms_q2bdp_w64k_r1.pcap.gz"
ISSUE_IPERF = GRID / "cubic_r50m_d10ms_q2bdp_w64k_r1.iperf3.json"


def _proposals(iperf=WINDOWED_IPERF, capture=WINDOWED):
    cap = read_capture(capture)
    report = inspect_capture(cap)
    tcp = load_scenario(None).rx.tcp
    return evidence.propose(cap, report, read_iperf(iperf) if iperf else None, tcp)


def test_proposals_carry_what_the_capture_and_report_show():
    props = {p.key: p for p in _proposals()}
    assert props["link.mtu"].value == "1500B"
    assert props["tcp.timestamps"].value == "true"
    assert props["tcp.sack"].value == "true"  # SACK-permitted in both SYNs
    assert props["tcp.cc"].value == "bbr"  # the iperf3 report's sender_tcp_congestion
    assert props["tcp.sndbuf"].value == props["tcp.rcvbuf"].value == "32768B"
    assert props["tcp.wmem"].value == props["tcp.rmem"].value == "0B"  # Linux's rules
    assert props["tcp.delayed_ack"].value == "true"
    # Base round trip 10.08 ms (2 x 5 ms plus delay-line and forwarding time).
    delay_ns = float(props["link.delay"].value.removesuffix("ns"))
    assert 4.8e6 < delay_ns < 5.1e6
    assert "base round trip 10.08" in props["link.delay"].evidence
    rate = float(props["bottleneck.rate"].value.removesuffix("bps"))
    assert rate == pytest.approx(50e6, rel=0.03)
    assert props["bottleneck.overhead"].value == "14B"
    assert "link.rate" not in props  # the bottleneck is the model's, not the link's


@pytest.mark.slow
def test_capture_alone_tells_a_fixed_buffer_from_autotuning():
    """Without iperf3's report: a window that grew only while rcv_ssthresh climbed to
    its clamp (31,819 -> 39,096 B) is a fixed SO_RCVBUF, and Linux's rules map it back
    to the request iperf3 made (-w 32K); a window that grew many-fold is autotuning."""
    props = {p.key: p for p in _proposals(iperf=None)}
    assert props["tcp.rcvbuf"].value == props["tcp.sndbuf"].value == "32768B"
    assert "tcp.cc" not in props
    auto = GRID / "cubic_r50m_d10ms_q2bdp_wauto_r1.pcap.gz"
    props = {p.key: p for p in _proposals(iperf=None, capture=auto)}
    assert props["tcp.rcvbuf"].value == "0B"
    assert "receive autotuning" in props["tcp.rcvbuf"].evidence
    # The largest windows Linux advertised in the grid's fixed-buffer runs (and one of
    # calibration/captures) map back to their -w.
    tcp = load_scenario(None).rx.tcp
    for w, window in ((16, 18824), (32, 39096), (64, 80480), (64, 81120), (256, 326880)):
        assert evidence.request_for_window(window, tcp, 1448) == w * 1024, window


@pytest.mark.slow
def test_apply_sets_every_proposal():
    cfg = evidence.apply(load_scenario(None), _proposals(), where="test")
    assert cfg.value("link.mtu") == 1500
    assert 4.8e6 < cfg.value("link.delay") < 5.1e6
    assert cfg.value("bottleneck.rate") == pytest.approx(50e6, rel=0.03)
    assert cfg.value("bottleneck.overhead") == 14
    assert cfg.value("tcp.cc") == "bbr"
    assert cfg.value("tcp.sack") is True
    assert cfg.value("tcp.sndbuf") == cfg.value("tcp.rcvbuf") == 32768


def test_apply_refuses_a_value_with_its_key_and_evidence():
    bad = evidence.Proposal("bottleneck.rate", "-3bps", "spacing of returning ACKs")
    with pytest.raises(CpasimError, match=r"bottleneck.rate.*measured: spacing of returning"):
        evidence.apply(load_scenario(None), [bad], where="cap.pcap")


@pytest.mark.slow
def test_window_limited_capture_fits_the_delay_not_the_rate(tmp_path):
    """The failure of a rate-only fit: it slowed link.rate to 31.7 Mb/s and left link.delay
    at its default although the capture shows the round trip."""
    base = tmp_path / "base.toml"
    base.write_text('[sim]\nduration = "500ms"\nwarmup = "100ms"\n')
    out = tmp_path / "fitted.toml"
    result = _run(["calibrate", "fit", str(base), str(WINDOWED), str(WINDOWED_IPERF)], out)
    assert "regime: window-limited" in result
    assert "fitted link.delay:" in result
    assert "set tcp.cc = bbr" in result
    assert "not in the capture: bottleneck.burst = 0 B kept" in result
    cfg = load_scenario(out)
    assert cfg.value("link.rate") == 1e9  # the hosts' link is left alone
    assert cfg.value("bottleneck.rate") == pytest.approx(50e6, rel=0.03)
    assert 4.8e6 < cfg.value("link.delay") < 5.2e6
    assert cfg.value("tcp.rcvbuf") == 32768 and cfg.value("tcp.cc") == "bbr"
    line = next(x for x in result.splitlines() if "goodput_bps measured" in x)
    assert abs(float(line.rsplit("(", 1)[1].rstrip("%)"))) < 1.0  # within 1 %
    assert out.read_text().count("# set ") >= 10


@pytest.mark.slow
def test_rate_limited_capture_fits_the_bottleneck_rate(tmp_path):
    """tbf 20 Mb/s, 1 ms, -w 256K: the bottleneck holds the goodput, so its rate (not the
    hosts' link) is what remains; it lands on the tbf's rate within 0.5 %."""
    base = tmp_path / "base.toml"
    base.write_text('[sim]\nduration = "500ms"\nwarmup = "100ms"\n')
    out = tmp_path / "fitted.toml"
    cap = CAPTURES / "d1ms_tbf20m_w256k_tx.pcap"
    report = CAPTURES / "d1ms_tbf20m_w256k.iperf3.json"
    result = _run(["calibrate", "fit", str(base), str(cap), str(report)], out)
    assert "regime: rate-limited" in result and "fitted bottleneck.rate:" in result
    cfg = load_scenario(out)
    assert cfg.value("bottleneck.rate") == pytest.approx(20e6, rel=0.005)
    assert cfg.value("link.rate") == 1e9


@pytest.fixture(scope="module")
def issue_fit(tmp_path_factory):
    """``calibrate fit`` on the issue's capture with no --params: (output, scenario path)."""
    tmp = tmp_path_factory.mktemp("issue")
    base = tmp / "base.toml"
    base.write_text('[sim]\nduration = "1s"\nwarmup = "200ms"\n')
    out = tmp / "fitted.toml"
    args = ["calibrate", "fit", str(base), str(ISSUE_CAPTURE), str(ISSUE_IPERF)]
    return _run(args, out), out


@pytest.mark.slow
def test_issue_case_twenty_ms_window_limited(issue_fit):
    """The evidence sets the delay to about 10 ms per direction, the bottleneck, the
    buffer request and the congestion control before anything is fitted; the fit then
    moves the delay by a fraction of a per cent."""
    result, out = issue_fit
    assert "regime: window-limited" in result
    set_delay = next(x for x in result.splitlines() if x.startswith("set link.delay"))
    assert 9.8e6 < float(set_delay.split("= ")[1].split("ns")[0]) < 10.1e6
    for line in ("set tcp.cc = cubic", "set tcp.sack = true", "set tcp.sndbuf = 65536B"):
        assert line in result
    cfg = load_scenario(out)
    assert cfg.value("bottleneck.rate") == pytest.approx(50e6, rel=0.01)
    assert cfg.value("bottleneck.overhead") == 14
    assert 9.9e6 < cfg.value("link.delay") < 10.2e6
    assert cfg.value("tcp.sndbuf") == cfg.value("tcp.rcvbuf") == 65536
    assert cfg.value("tcp.cc") == "cubic"


#: The written scenario with only nominal settings changed, against the grid's runs of
#: the same path (median of the repeats).  Achieved: within 1.9 % (rate-limited runs
#: +1.8 %: the fitted bottleneck rate is the ACK-spacing estimate, 50.1 Mb/s).
TRANSFERS = [
    ("cubic_r50m_d10ms_q2bdp_w16k", ["tcp.sndbuf=16KiB", "tcp.rcvbuf=16KiB"]),
    ("cubic_r50m_d10ms_q2bdp_w32k", ["tcp.sndbuf=32KiB", "tcp.rcvbuf=32KiB"]),
    ("cubic_r50m_d10ms_q2bdp_w256k", ["tcp.sndbuf=256KiB", "tcp.rcvbuf=256KiB"]),
    ("cubic_r50m_d10ms_q2bdp_wauto", ["tcp.sndbuf=0B", "tcp.rcvbuf=0B"]),
    ("bbr_r50m_d10ms_q2bdp_w64k", ["tcp.cc=bbr"]),
    ("reno_r50m_d10ms_q2bdp_w64k", ["tcp.cc=reno"]),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "sets"), TRANSFERS)
def test_written_scenario_transfers(issue_fit, name, sets):
    """A user changes only what they know (iperf3 -w, the congestion control, the tbf
    limit of 250,000 B these runs had) and predicts another run of the grid."""
    _, out = issue_fit
    run = {c.name: c for c in read_grid(GRID)}[name]
    cfg = load_scenario(out, sets=[*sets, f"bottleneck.queue={run.queue_bytes}B"])
    got = simulate(cfg).to_json()["goodput_bps"]
    assert got == pytest.approx(run.median, rel=0.019), f"{name}: {got / run.median - 1:+.2%}"


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


@pytest.mark.slow
def test_bad_inputs_one_line_exit_2(capsys, tmp_path):
    base = tmp_path / "b.toml"
    base.write_text("")
    out = str(tmp_path / "o.toml")
    # A capture with no TCP flow at all.
    udp_only = tmp_path / "udp.pcap"
    synth.write_udp_only(udp_only)
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


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "paced"),
    [
        # calibration/pacing.sh: the same transfers with the sending namespace's default
        # congestion control bbr (Linux keeps the socket paced after -C switches it) or
        # reno (ACK-clocked).
        ("pacing/cubic_defbbr", "on"),
        ("pacing/cubic_defreno", "auto"),
        ("pacing/reno_defbbr", "on"),
        ("pacing/reno_defreno", "auto"),
        # The grid: a cubic socket created under bbr, one created after a reno run,
        # Reno, and BBR (which asks for pacing itself).
        ("grid/cubic_r50m_d10ms_q15k_wauto_r1", "on"),
        ("grid/cubic_r50m_d10ms_q2bdp_w64k_r1", "auto"),
        ("grid/reno_r50m_d10ms_q15k_wauto_r1", "auto"),
        ("grid/bbr_r50m_d10ms_q15k_wauto_r1", "on"),
    ],
)
def test_capture_tells_a_paced_sender(path, paced):
    cap = read_capture(CAPTURES.parent / f"{path}.pcap.gz")
    found = evidence.pacing(cap, inspect_capture(cap))
    assert found.key == "tcp.pacing" and found.value == paced, found.evidence


@pytest.mark.slow
def test_python_api_fits_from_the_evidence_on_a_fixed_buffer_scenario():
    """cpasim.calibrate without params is calibrate fit without --params, library-side;
    started from a shipped scenario with cpasim's fixed buffers, the evidence replaces
    them with the capture's SO_SNDBUF/SO_RCVBUF request (the keys are set together)."""
    import cpasim

    scenario = CAPTURES.parent.parent / "scenarios" / "tcp-stream.toml"
    capture = CAPTURES / "d5ms_tbf50m_w32k_tx.pcap"
    report = CAPTURES / "d5ms_tbf50m_w32k.iperf3.json"
    result = cpasim.calibrate(scenario, [capture, report])
    cfg = result.config
    assert cfg.value("tcp.cc") == "bbr" and cfg.value("tcp.wmem") == 0
    assert cfg.value("tcp.sndbuf") == cfg.value("tcp.rcvbuf") == 32768
    assert list(result.fitted) == ["link.delay"] and abs(result.residuals[0].relative) < 0.01
    assert any(n.startswith("set tcp.cc = bbr") for n in result.notes)


@pytest.mark.slow
def test_fit_runs_as_long_as_the_capture_measured(tmp_path):
    """The issue's own command, ``calibrate fit scenarios/tcp-stream.toml CAPTURE
    REPORT``, on the window-limited 20 ms capture: the run covers the span whose
    goodput the capture measured (0.977 s to 3.908 s after its first data), so the
    fit keeps link.delay within 2 % of the 9.91 ms the capture shows (measured:
    +0.75 %) and nothing is called beyond the evidence."""
    out = tmp_path / "fitted.toml"
    result = _run(["calibrate", "fit", str(TCP_STREAM), str(ISSUE_CAPTURE), str(ISSUE_IPERF)], out)
    assert "set sim.warmup = 9.77113e+08ns" in result
    assert "set sim.duration = 3.90765e+09ns" in result
    set_delay = next(x for x in result.splitlines() if x.startswith("set link.delay"))
    shown = float(set_delay.split("= ")[1].split("ns")[0])
    cfg = load_scenario(out)
    assert cfg.value("link.delay") == pytest.approx(shown, rel=0.02)
    assert cfg.value("sim.duration") == pytest.approx(3.90765e9)
    assert "the fit hides it" not in result
    line = next(x for x in result.splitlines() if "goodput_bps measured" in x)
    assert abs(float(line.rsplit("(", 1)[1].rstrip("%)"))) < 1.0


@pytest.mark.slow
def test_a_fit_of_another_run_length_is_called_beyond_the_evidence():
    """What the fit did before it ran as long as the capture: the scenario's 120 ms
    (mostly slow start at a 20 ms round trip) against the capture's steady goodput
    moved link.delay from 9.91 ms to 8.19 ms; the fit says so instead of hiding it."""
    from cpasim.calibrate.fit import Target, fit_one

    cap = read_capture(ISSUE_CAPTURE)
    report = inspect_capture(cap)
    cfg = load_scenario(TCP_STREAM)
    proposals = evidence.propose(cap, report, read_iperf(ISSUE_IPERF), cfg.rx.tcp)
    fixed = evidence.apply(cfg, proposals, where="test")
    target = Target("goodput_bps", report.steady_goodput_bps, "capture")
    result = fit_one(fixed, target, "link.delay", lambda c: simulate(c).to_json())
    start, fitted = result.fitted["link.delay"]
    assert fitted / start - 1 == pytest.approx(-0.174, abs=0.01)
    (line,) = evidence.beyond_evidence(result, proposals)
    assert line.startswith("fitted link.delay = 8.19")
    assert "-17.4% from the 9.91456 ms the capture shows, beyond the 2.0%" in line
    assert "the fit hides it" in line


def test_beyond_evidence_names_only_measured_values_moved_too_far():
    from cpasim.calibrate.fit import FitResult

    def result(**fitted):
        return FitResult(load_scenario(None), fitted, {}, [], [], 0, [])

    props = [
        evidence.Proposal("link.delay", "10ms", "base round trip", allowed=0.02),
        evidence.Proposal("tcp.cc", "cubic", "iperf3 report"),
    ]
    assert evidence.beyond_evidence(result(**{"link.delay": (10e6, 10.19e6)}), props) == []
    (line,) = evidence.beyond_evidence(result(**{"link.delay": (10e6, 10.21e6)}), props)
    assert "+2.1% from the 10 ms the capture shows, beyond the 2.0%" in line
    # A key no measurement set (here the bottleneck's rate) may move freely.
    assert evidence.beyond_evidence(result(**{"bottleneck.rate": (5e7, 1e7)}), props) == []
