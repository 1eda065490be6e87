"""``cpasim calibrate inspect`` and ``show``: output, JSON, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import cpasim.cli

sys.path.insert(0, str(Path(__file__).parent / "captures"))
import synth  # noqa: E402

cpasim.cli._register()
runner = CliRunner()
REAL = Path(__file__).parent.parent / "calibration" / "captures" / "tbf20m_tx.pcap"
CPASIM = Path(sys.executable).parent / "cpasim"


@pytest.fixture
def sender_capture(tmp_path) -> Path:
    path = tmp_path / "sender.pcap"
    synth.write_pcap(path, synth.bulk_flow(side="sender", resend=10), side="sender")
    return path


def test_inspect_plain(sender_capture):
    result = runner.invoke(cpasim.cli.app, ["calibrate", "inspect", str(sender_capture)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "sender   10.0.0.1:40000" in out
    assert "bottleneck 10.000 Mb/s from spacing of returning ACKs" in out
    assert "retrans  1 segments, 1,448 B" in out
    assert "mss      1448 (SYN option minus 12 B of timestamps)" in out


def test_inspect_json_and_flow_choice(sender_capture):
    result = runner.invoke(
        cpasim.cli.app, ["calibrate", "inspect", str(sender_capture), "--json", "--flow", "1"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["side"] == "sender"
    assert doc["bottleneck"]["bps"] == pytest.approx(10e6, rel=1e-6)
    assert doc["segments_per_ack"] == pytest.approx(2.0)
    assert doc["flow"]["index"] == 1


def test_l2_overhead_scales_the_rate(sender_capture):
    args = ["calibrate", "inspect", str(sender_capture), "--json", "--l2-overhead", "38"]
    doc = json.loads(runner.invoke(cpasim.cli.app, args).output)
    frame = synth.PAYLOAD + synth.HEADER
    assert doc["bottleneck"]["bps"] == pytest.approx(10e6 * (frame + 38) / (frame + 14), rel=1e-6)


def test_show_reads_each_kind(tmp_path, sender_capture):
    csv = tmp_path / "m.csv"
    csv.write_text("size_bytes,L_us\n1,6.9\n")
    kinds = {}
    for path in (sender_capture, REAL.with_name("tbf20m.iperf3.json"), csv):
        result = runner.invoke(cpasim.cli.app, ["calibrate", "show", str(path)])
        assert result.exit_code == 0, result.output
        kinds[path.suffix] = json.loads(result.output)
    assert kinds[".pcap"]["packets"] == 3 + 200 + 1 + 100  # handshake, data, resend, ACKs
    assert kinds[".json"]["protocol"] == "TCP"
    assert kinds[".csv"]["rows"] == [{"size_bytes": 1, "L": pytest.approx(6900.0)}]


def _error(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as info:
        cpasim.cli.main(list(argv))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("cpasim: error: ")
    assert "Traceback" not in err
    return err


def test_unreadable_capture(capsys, tmp_path):
    bad = tmp_path / "garbage.pcap"
    bad.write_bytes(b"\x00" * 100)
    assert "garbage.pcap: not a pcap or pcapng capture" in _error(
        capsys, "calibrate", "inspect", str(bad)
    )
    truncated = tmp_path / "short.pcap"
    truncated.write_bytes(b"\xd4\xc3\xb2\xa1\x02\x00")
    assert "short.pcap: unreadable pcap header" in _error(
        capsys, "calibrate", "inspect", str(truncated)
    )


def test_capture_without_tcp(capsys, tmp_path):
    path = tmp_path / "udp.pcap"
    synth.write_udp_only(path)
    err = _error(capsys, "calibrate", "inspect", str(path))
    assert "udp.pcap: no TCP flow in the capture (1 UDP flow(s)" in err


def test_csv_with_missing_columns(capsys, tmp_path):
    path = tmp_path / "bench.csv"
    path.write_text("message,latency_us\n64,10\n")
    assert "bench.csv: missing column 'size_bytes'" in _error(
        capsys, "calibrate", "show", str(path)
    )


@pytest.mark.slow
def test_installed_command():
    proc = subprocess.run(
        [str(CPASIM), "calibrate", "inspect", str(REAL)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "side     sender" in proc.stdout
    proc = subprocess.run(
        [str(CPASIM), "calibrate", "inspect", "/nonexistent.pcap"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        "cpasim: error: /nonexistent.pcap: cannot read capture: No such file or directory\n"
    )
