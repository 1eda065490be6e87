"""``calibrate fit``: recover known parameters, flag unidentifiable ones, fit a real capture."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import cpasim.cli
from cpasim.calibrate.fit import Target, fit, read_targets
from cpasim.config import load_scenario
from cpasim.simulate import simulate

cpasim.cli._register()
runner = CliRunner()
CAPTURES = Path(__file__).parent.parent / "calibration" / "captures"
SHORT = ["sim.duration=100ms"]


def _sim(cfg):
    return simulate(cfg).to_json()


@pytest.mark.slow
def test_recovers_a_link_rate_from_its_own_goodput():
    truth = load_scenario(None, sets=[*SHORT, "link.rate=30Mbps"])
    measured = _sim(truth)["goodput_bps"]
    start = load_scenario(None, sets=[*SHORT, "link.rate=60Mbps"])
    result = fit(start, [Target("goodput_bps", measured, "synthetic")], ["link.rate"], _sim)
    assert result.fitted["link.rate"][0] == 60e6
    assert result.fitted["link.rate"][1] == pytest.approx(30e6, rel=0.01)
    assert result.config.value("link.rate") == result.fitted["link.rate"][1]
    assert result.rms_error < 0.005
    assert result.start_residuals[0].relative > 0.5  # it really started far off


def test_parameter_without_influence_is_reported_not_invented():
    cfg = load_scenario(None, sets=[*SHORT, "link.rate=30Mbps"])
    measured = _sim(cfg)["goodput_bps"] * 0.9
    result = fit(cfg, [Target("goodput_bps", measured, "synthetic")], ["tcp.delack_timeout"], _sim)
    assert "tcp.delack_timeout" in result.unidentifiable
    assert result.fitted == {}
    assert result.config.value("tcp.delack_timeout") == cfg.value("tcp.delack_timeout")
    assert result.residuals[0].relative == pytest.approx(1 / 0.9 - 1)


@pytest.mark.slow
def test_fit_a_real_capture_through_the_cli(tmp_path):
    out = tmp_path / "calibrated.toml"
    base = tmp_path / "base.toml"
    base.write_text('[sim]\nduration = "100ms"\n')
    capture = CAPTURES / "tbf20m_rx.pcap"
    args = [
        "calibrate",
        "fit",
        str(base),
        str(capture),
        "--out",
        str(out),
        "--set",
        "link.rate=50Mbps",
        "--params",
        "link.rate",
    ]
    result = runner.invoke(cpasim.cli.app, args)
    assert result.exit_code == 0, result.output
    assert "fitted link.rate: 50 Mb/s -> " in result.output  # in units, not 5e+07
    assert re.search(r"measured [\d.]+ Mb/s, simulated [\d.]+ Mb/s -> [\d.]+ Mb/s", result.output)
    cfg = load_scenario(out)
    # tbf charges 14 B of Ethernet header per frame; cpasim's link also carries FCS,
    # preamble and inter-frame gap, so its fitted rate sits ~1.8 % above the shaper's.
    assert cfg.value("link.rate") == pytest.approx(20e6, rel=0.03)
    header = out.read_text().splitlines()[:4]
    assert any(str(capture) in line for line in header)
    assert "internal units" not in out.read_text()
    assert "# fitted link.rate: 50 Mb/s -> " in out.read_text()


def test_targets_from_iperf3_with_conditions():
    (t,) = read_targets(f"{CAPTURES / 'tbf100m.iperf3.json'}@link.rate=100Mbps, tcp.rmem=1MiB")
    assert t.overrides == {"link.rate": "100Mbps", "tcp.rmem": "1MiB"}
    assert t.figure == "goodput_bps" and 90e6 < t.measured < 100e6


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--params", "tcp.nosuch"], "--params: unknown key 'tcp.nosuch'"),
        pytest.param(
            ["--params", "tcp.nagle"], "only numeric parameters fit", marks=pytest.mark.slow
        ),
    ],
)
def test_bad_parameters(capsys, tmp_path, extra, message):
    base = tmp_path / "b.toml"
    base.write_text("")
    args = [
        "calibrate",
        "fit",
        str(base),
        str(CAPTURES / "tbf20m_rx.pcap"),
        "--out",
        str(tmp_path / "o.toml"),
        *extra,
    ]
    with pytest.raises(SystemExit) as info:
        cpasim.cli.main(args)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("cpasim: error: ") and message in err and err.count("\n") == 1


@pytest.mark.slow
def test_bad_measurements(capsys, tmp_path):
    base = tmp_path / "b.toml"
    base.write_text("")
    table = tmp_path / "bench.csv"
    table.write_text("size_bytes,L_us\n1,6.9\n")
    cap = CAPTURES / "tbf20m_rx.pcap"
    out = str(tmp_path / "o.toml")
    for measurement, params, message in [
        (str(table), ["--params", "link.rate"], "microbenchmark tables carry no figure"),
        (str(table), [], "microbenchmark tables carry no figure"),
        (f"{cap}@link.rate=20Mbps", ["--params", "link.rate"], "link.rate is being fitted"),
        (f"{cap}@link.rate=20Mbps", [], "conditions (FILE@KEY=VALUE) need --params"),
        (f"{cap}@nonsense", ["--params", "link.rate"], "should be KEY=VALUE"),
    ]:
        with pytest.raises(SystemExit) as info:
            cpasim.cli.main(["calibrate", "fit", str(base), measurement, "--out", out, *params])
        assert info.value.code == 2
        assert message in capsys.readouterr().err
