"""Fitted seed scenarios against their papers' figures (calibration/SEEDS.md).

The reference figures come from calibration/seeds/*.csv; the tolerances are the
ones the fit achieved (short runs here, so a little wider than the full-length
figures in SEEDS.md).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("fit_seeds", ROOT / "calibration" / "fit_seeds.py")
fit_seeds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fit_seeds)

SHORT = ["sim.duration=50ms", "sim.warmup=20ms"]

# Saidi fig. 6.2, re-simulated Mb/s; relative tolerance achieved by the fitted model
# (model at 120 ms: 1080, 1615, 2986 Mb/s; config 4 is the fitted one, 2 and 3 held out).
TOLERANCE = {
    "TCP stream config 2 (10 Gb/s link)": 0.10,
    "TCP stream config 3 (larger TCP buffers)": 0.07,
    "TCP stream config 4 (PCIe x4)": 0.03,
}
# Config 2 is window-limited: the model keeps 112.5 KB in flight on average (the
# seed's 1289 Mb/s over its 0.70 ms round trip needs 113 KB), but its round trip is
# 0.84 ms: the sender's window bursts queue in the TX ring behind the PCIe x1 DMA
# (with PCIe x4 at config 2 the model gives 1207 Mb/s, 0.74 ms).  calibration/SEEDS.md.
CONFIG2_GAP = pytest.mark.xfail(
    strict=True,
    reason="config 2: -16% (1080 against 1289 Mb/s): the model's round trip is 0.84 ms "
    "against 0.70 ms, its window bursts queueing behind the PCIe x1 DMA",
)


@pytest.mark.slow
@pytest.mark.parametrize("index", [pytest.param(1, marks=CONFIG2_GAP), 2, 3])
def test_tcp_stream_ladder_matches_the_seed(index):
    seed = fit_seeds.seed_ladder()
    name, _ = fit_seeds.LADDER[index]
    got = fit_seeds.goodput_mbps(fit_seeds.configs(SHORT)[index])
    assert got == pytest.approx(seed[name], rel=TOLERANCE[name])


def test_tcp_stream_config1_is_link_bound():
    from cpasim.config import load_scenario
    from cpasim.model.link import link_goodput

    sets = fit_seeds.configs(SHORT)[0]
    cfg = load_scenario(fit_seeds.SCENARIO, sets=sets)
    bound = link_goodput(cfg.link.rate, 1448, 52) / 1e6  # MSS and TCP/IP headers with timestamps
    got = fit_seeds.goodput_mbps(sets)
    assert 0.95 * bound <= got <= bound


# -- Saidi 6.2.1 (UDP) and 6.3 (web server): figures in calibration/SEEDS.md -------------

SAIDI_CSV = ROOT / "calibration" / "seeds" / "saidi_ch6.csv"
_GBPS = {"Gbps": 1e9, "Mbps": 1e6, "percent": 0.01}


def saidi(quantity: str, system: str) -> float:
    """One figure of seeds/saidi_ch6.csv in SI units (bit/s, fractions)."""
    import csv

    with SAIDI_CSV.open() as f:
        for row in csv.DictReader(line for line in f if not line.startswith("#")):
            if row["quantity"] == quantity and row["system"] == system:
                return float(row["value"]) * _GBPS[row["unit"]]
    raise KeyError((quantity, system))


@pytest.fixture(scope="module")
def udp_runs(tmp_path_factory):
    """x1 and x4 traced runs; 30 ms after 10 ms holds the 60 ms figures within 0.3%."""
    from cpasim.config import load_scenario
    from cpasim.predict.runs import traced_run

    d = tmp_path_factory.mktemp("udp")
    x1 = load_scenario(
        ROOT / "scenarios" / "udp-stream.toml", sets=["sim.duration=30ms", "sim.warmup=10ms"]
    )
    x4 = x1.with_overrides({"hosts.tx.pcie.lanes": "4"})
    return traced_run(x1, d / "x1.cpt"), traced_run(x4, d / "x4.cpt")


def _link_bps(run) -> float:
    return run.result["link_utilization"]["tx_to_rx"] * run.cfg.link.rate


@pytest.mark.slow
def test_udp_pcie_x1_is_nic_bound_like_the_seed(udp_runs):
    x1, _ = udp_runs
    # Model 1.72 Gb/s on the link against 1.8 (-4.4%).
    assert _link_bps(x1) == pytest.approx(saidi("link_bandwidth", "UDP stream PCIe x1"), rel=0.05)
    # The seed's path: TX Desc Fetch Wait 57% + NIC TX DMA packet 39%; the model's
    # NIC transmit states together hold 98.7% (DMA packet alone 96.5%).
    seed_nic = saidi("critical_path_share TX descriptor fetch Wait", "UDP stream PCIe x1") + saidi(
        "critical_path_share NIC transmit DMA packet", "UDP stream PCIe x1"
    )
    nic = sum(m["share"] for m in x1.path.most_critical if m["name"].startswith("tx:NIC TX:"))
    assert nic == pytest.approx(seed_nic, abs=0.03)
    assert x1.path.bottleneck == "tx:NIC TX:DMA packet"


@pytest.mark.slow
def test_udp_pcie_x4_leaves_the_nic(udp_runs):
    _, x4 = udp_runs
    assert x4.path.bottleneck == "tx:CPU cores"


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="+19.5% (3.94 against 3.3 Gb/s): the model's sender is CPU-bound on the TCP "
    "sender's fitted copy cost, where the seed's waits in ip_push_pending_frames",
)
def test_udp_pcie_x4_total_matches_the_seed(udp_runs):
    _, x4 = udp_runs
    assert _link_bps(x4) == pytest.approx(saidi("link_bandwidth", "UDP stream PCIe x4"), rel=0.1)


@pytest.mark.slow
def test_udp_x4_predicted_from_x1(udp_runs):
    from cpasim.predict.predict import predict
    from cpasim.predict.validate import relative_error

    x1, x4 = udp_runs
    p = predict(x1, x4.cfg)
    # 1.6% here, 1.0% at 60 ms.
    assert relative_error(p.predicted, x4.metric) < 0.02
    assert p.predicted_bottleneck == x4.path.bottleneck


def _web_gbps(*sets: str) -> float:
    from cpasim.config import load_scenario
    from cpasim.simulate import simulate

    cfg = load_scenario(ROOT / "scenarios" / "webserver.toml", sets=list(sets))
    return simulate(cfg).goodput_bps


# The web server serves 40 files of 0.5-4 MB in the 100 ms measured, so its total moves
# by up to 10% with the run length: these run the full 120 ms (about 5 s each).
@pytest.mark.slow
def test_webserver_one_core_total_matches_the_seed():
    # Fitted (server copy 3.5 cycles/B): 4.92 Gb/s against 4.8 (+2.6%).
    got = _web_gbps()
    assert got == pytest.approx(saidi("total_bandwidth", "web server 1 core"), rel=0.03)


@pytest.mark.slow
def test_webserver_two_cores_total_matches_the_seed():
    # Not fitted: 5.88 Gb/s against the seed's re-simulated 5.8 (+1.4%).
    got = _web_gbps("hosts.tx.cpu.cores=2", "workload.processes=2")
    assert got == pytest.approx(saidi("simulated_total_bandwidth", "web server 2 cores"), rel=0.02)


def _web(*sets: str):
    from cpasim.config import load_scenario
    from cpasim.simulate import simulate

    return simulate(load_scenario(ROOT / "scenarios" / "webserver.toml", sets=list(sets)))


THIRD_CORE = ("hosts.tx.cpu.cores=3", "hosts.tx.cpu.irq_cores=1", "workload.processes=2")


@pytest.mark.slow
def test_webserver_third_core_for_interrupts_matches_the_seed():
    """Seed 6.3: a third core only for NIC interrupts and receive processing, one
    lighttpd per other core.  The thesis gives this run's total as the error of the
    6.2 Gb/s prediction, 3%; the prediction over-estimated with two cores (the
    multicore overheads it names remain), so the run is taken as 6.2 / 1.03 = 6.02
    Gb/s.  Not fitted: the model gives 5.98 Gb/s (-0.7%)."""
    r = _web(*THIRD_CORE)
    predicted = saidi("predicted_total_bandwidth", "web server 2 cores")
    seed_total = predicted / (
        1 + saidi("prediction_error_total", "web server 3 cores (one for interrupts)")
    )
    assert r.goodput_bps == pytest.approx(seed_total, rel=0.05)
    # The connections behave uniformly: each lies in the seed's predicted per-connection
    # range (1407-1670 Mb/s) widened by the largest per-connection error (9%); model
    # 1392-1578 Mb/s.
    err = saidi("prediction_error_per_connection_max", "web server 3 cores (one for interrupts)")
    lo = saidi("predicted_per_connection_min", "web server 2 cores") / (1 + err)
    hi = saidi("predicted_per_connection_max", "web server 2 cores") * (1 + err)
    assert all(lo <= bps <= hi for bps in r.goodput_bps_per_connection.values())


def test_interrupt_cores_leave_the_application_its_own():
    """A core reserved for interrupts is not a third core for anything: the run
    differs from two shared cores, and is deterministic."""
    short = ("sim.duration=30ms", "sim.warmup=10ms", "workload.processes=2")
    two = _web(*short, "hosts.tx.cpu.cores=2")
    split = _web(*short, "hosts.tx.cpu.cores=3", "hosts.tx.cpu.irq_cores=1")
    assert split.goodput_bps != two.goodput_bps
    assert split.to_json() | {"wall_s": 0} == _web(
        *short, "hosts.tx.cpu.cores=3", "hosts.tx.cpu.irq_cores=1"
    ).to_json() | {"wall_s": 0}


@pytest.mark.slow
def test_webserver_with_the_seed_kernels_client_buffers_is_window_bound(tmp_path):
    """Why the shipped web server is CPU-bound where the seed's was bound by
    communication delay and a TCP-parameter loop: its clients have 1 MiB receive
    buffers, so no window ever binds and the copy cost fitted to the total can only
    make the server's core the limit.  With the clients at Linux 2.6.13's
    tcp_rmem[2] (174760 B) the critical path is the seed's: round trips on the link
    (89% at 60 ms) closing through the clients' receive buffers, the server's core
    not the bottleneck (calibration/SEEDS.md)."""
    from cpasim.config import load_scenario
    from cpasim.predict.runs import traced_run

    sets = ["sim.duration=60ms", "hosts.rx.tcp.rmem=174760B"]
    run = traced_run(
        load_scenario(ROOT / "scenarios" / "webserver.toml", sets=sets), tmp_path / "w.cpt"
    )
    assert run.path.bottleneck == "rx:Link:propagate"
    link = sum(m["share"] for m in run.path.most_critical if m["name"].endswith(":Link:propagate"))
    assert link > 0.8
    assert any("[rx:Receive buffer]" in loop["edge"] for loop in run.path.loops)
