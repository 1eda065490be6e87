"""scenarios/rx-copy-engine.toml against Saidi 2009, section 6.4.2 (calibration/SEEDS.md).

The seed's figures come from calibration/seeds/saidi_ch6.csv.  Fitted: the
receiver's copy and per-packet costs, on the configuration without an engine
(calibration/fit_copy_engine.py); held out: both engine configurations.
Tolerances are what the model achieved (30 ms runs here; 60 ms in SEEDS.md).
"""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

from cpasim.config import load_scenario

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "rx-copy-engine.toml"
SAIDI = ROOT / "calibration" / "seeds" / "saidi_ch6.csv"
SHORT = ["sim.duration=30ms", "sim.warmup=10ms"]
_spec = importlib.util.spec_from_file_location(
    "fit_copy_engine", ROOT / "calibration" / "fit_copy_engine.py"
)
fit = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fit)
CONFIGS = dict(fit.CONFIGS)


def seed_gbps(system: str) -> float:
    with SAIDI.open() as f:
        for row in csv.DictReader(line for line in f if not line.startswith("#")):
            if row["quantity"] == "received_bandwidth" and row["system"] == system:
                return float(row["value"])
    raise KeyError(system)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from cpasim.predict.runs import traced_run

    d = tmp_path_factory.mktemp("copy_engine")
    out = {}
    for i, (name, change) in enumerate(fit.CONFIGS):
        cfg = load_scenario(SCENARIO, sets=[*SHORT, *change])
        out[name] = traced_run(cfg, d / f"c{i}.cpt")
    return out


def _gbps(run) -> float:
    return run.result["goodput_bps"] / 1e9


# (model - seed) / seed achieved: -0.3% (fitted), -4.2%, +1.9% (held out; on die the
# NIC is on die too, as the seed's figure 6.6(b): 4.584 Gb/s, before with the NIC on
# PCIe x4 4.71, +4.6%).
@pytest.mark.slow
@pytest.mark.parametrize(
    ("system", "rel"),
    [("copy engine: none", 0.01), ("copy engine on I/O bus", 0.05), ("copy engine on-die", 0.02)],
)
def test_received_bandwidth_matches_the_seed(runs, system, rel):
    assert _gbps(runs[system]) == pytest.approx(seed_gbps(system), rel=rel)


# The seed's on-die analysis shows no window loop, so its run was not window-limited;
# the scenario's 768 KiB buffers are (chosen so that no configuration loses a frame).
# With buffers that do not limit, and an RX ring that holds the start-up burst, the
# model's on-die receiver is CPU-bound and faster than the seed's.
UNLIMITED = ["tcp.rmem=1536KiB", "tcp.wmem=1536KiB", "hosts.rx.nic.rx_ring=4096"]


@pytest.fixture(scope="module")
def on_die_unlimited():
    from cpasim.simulate import simulate

    return simulate(
        load_scenario(SCENARIO, sets=[*SHORT, *CONFIGS["copy engine on-die"], *UNLIMITED])
    )


@pytest.mark.slow
def test_on_die_without_the_window_limit_the_receiver_is_cpu_bound(runs, on_die_unlimited):
    r = on_die_unlimited
    assert sum(r.drops.values()) == 0
    assert r.cpu_utilization["rx"]["idle"] < 0.05
    assert r.goodput_bps > runs["copy engine on-die"].result["goodput_bps"]


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="5.29 Gb/s against 4.5 (+17%): without the window limit the on-die receiver "
    "is CPU-bound (core 97.7% busy: stack 68.5%, spinning on the engine 16%); its "
    "per-segment cost was fitted on the run without an engine, and the model's "
    "communication with the engine (200 ns per descriptor, 20 ns registers, not "
    "fitted) costs the core less than the seed's analysis implies (calibration/SEEDS.md)",
)
def test_on_die_without_the_window_limit_matches_the_seed(on_die_unlimited):
    got = on_die_unlimited.goodput_bps / 1e9
    assert got == pytest.approx(seed_gbps("copy engine on-die"), rel=0.10)


@pytest.mark.slow
def test_the_engine_on_the_io_bus_is_slower_and_on_die_faster(runs):
    none, io, die = (_gbps(runs[name]) for name, _ in fit.CONFIGS)
    assert io < none < die


@pytest.mark.slow
def test_without_an_engine_the_receiver_is_cpu_bound_in_its_copy(runs):
    run = runs["copy engine: none"]
    # Fitted: the copy's share of the core, the seed's 68% of the path less the
    # interrupts it counts inside the copy.
    assert run.result["cpu_utilization"]["rx"]["copy"] == pytest.approx(fit.COPY_SHARE, abs=0.01)
    assert run.path.bottleneck == "rx:CPU cores"


def _unbroken(run):
    from cpasim.analysis import analyze
    from cpasim.trace import open_trace

    return analyze(open_trace(run.trace), run.start, run.end)


@pytest.mark.slow
def test_on_the_io_bus_the_engine_and_the_nic_contend_for_the_bus(runs):
    a = _unbroken(runs["copy engine on I/O bus"])
    loops = [loop["edge"] for loop in a.loops[:2]]
    # The seed: "dominated by the copy engine reading and writing data", the data
    # crossing the bus three times.  Here the two commonest loops of the path are
    # the engine's reads and writes waiting for the NIC's DMA on the bus.
    assert "rx:Copy Engine->rx:NIC RX[rx:PCIe up]" in loops
    assert "rx:NIC TX->rx:Copy Engine[rx:PCIe down]" in loops
    engine = sum(m["share"] for m in a.most_critical if m["name"].startswith("rx:Copy Engine:"))
    assert engine > 0.1


@pytest.mark.slow
def test_on_die_the_path_loops_through_the_engines_completions(runs):
    run = runs["copy engine on-die"]
    # The seed: the reader "queueing up several requests to send to the copy engine,
    # and then waiting for copy engine to complete the copies and report back".
    assert run.path.loops[0]["edge"] == "rx:Copy Engine->rx:App[rx:Copy done]"


@pytest.mark.slow
def test_on_the_io_bus_the_named_bottleneck_is_the_engine(runs):
    path = runs["copy engine on I/O bus"].path
    assert path.bottleneck.startswith("rx:Copy Engine:"), (path.bottleneck, path.most_critical[:4])


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="the seed names the communication with the engine; with the NIC on die the "
    "model's commonest loops are the engine's completions and the send window (39 and 31 "
    "in 20 ms), but 82% of the path is propagation (tx:Link:propagate 41.7%, the most "
    "critical state): the stream is receive-window limited, the receiver's core 91% busy "
    "(stack 65%: the fitted 5470 cycles per packet), so the path can run through the "
    "window loop and be as long as the run; the engine's states hold 1.2%",
)
def test_on_die_the_named_bottleneck_is_the_engine_communication(runs):
    assert runs["copy engine on-die"].path.bottleneck.startswith(
        ("rx:App:TcpRecvMsg: dma", "rx:Copy")
    )


@pytest.mark.slow
def test_more_copy_descriptors_predicted_and_validated(tmp_path):
    """--capacity on the engine's descriptor queue: a ring that binds (4 descriptors per
    batch) grown to 16, predicted from the trace and re-simulated: 1.3% apart."""
    from cpasim.predict.predict import predict
    from cpasim.predict.runs import traced_run
    from cpasim.predict.validate import relative_error
    from cpasim.simulate import simulate

    base = load_scenario(
        SCENARIO,
        sets=[*SHORT, *CONFIGS["copy engine on-die"], "hosts.rx.copy_engine.ring=4"],
    )
    grown = base.with_overrides({"hosts.rx.copy_engine.ring": "16"})
    run = traced_run(base, tmp_path / "ring4.cpt")
    p = predict(run, grown)
    assert any("rx:Copy desc free" in e for e in p.effects)
    actual = simulate(grown).goodput_bps
    assert actual > p.baseline  # the ring did bind
    assert relative_error(p.predicted, actual) < 0.03


def _what_if(tmp_path, base_sets: list[str], change: dict[str, str]) -> tuple[float, float]:
    """(predicted, re-simulated) goodput of ``change`` from a traced baseline."""
    from cpasim.predict.predict import predict
    from cpasim.predict.runs import traced_run
    from cpasim.simulate import simulate

    base = load_scenario(SCENARIO, sets=[*SHORT, *base_sets])
    new = base.with_overrides(change)
    return predict(traced_run(base, tmp_path / "base.cpt"), new).predicted, simulate(
        new
    ).goodput_bps


@pytest.mark.slow
def test_a_slower_engine_predicted_and_validated(tmp_path):
    # On die at 10 instead of 40 Gb/s: predicted 3725 Mb/s, re-simulated 3696 (0.8%).
    predicted, actual = _what_if(
        tmp_path, CONFIGS["copy engine on-die"], {"hosts.rx.copy_engine.rate": "10Gbps"}
    )
    assert predicted == pytest.approx(actual, rel=0.02)


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="predicted 2.63 Gb/s, re-simulated 3.43 (-23.5%): the baseline's path runs "
    "half through the receive-window loop's propagation, which a wider bus does not "
    "shorten; the re-simulation is bound by the reader's backlog (rx:App:tcp_v4_rcv)",
)
def test_a_wider_bus_for_the_io_bus_engine_predicted_within_10_percent(tmp_path):
    predicted, actual = _what_if(
        tmp_path, CONFIGS["copy engine on I/O bus"], {"hosts.rx.pcie.lanes": "8"}
    )
    assert predicted == pytest.approx(actual, rel=0.10)
