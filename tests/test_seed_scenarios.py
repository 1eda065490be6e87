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
    "against 0.70 ms, its window bursts queueing behind the PCIe x1 DMA; not the DMA rate "
    "(as fast as the seed's at config 3: 1096), not TSO (954); 2.6.18's buffer rules give "
    "no memory size with 113 KB in flight (calibration/SEEDS.md)",
)


@pytest.mark.slow
@pytest.mark.parametrize("index", [pytest.param(1, marks=CONFIG2_GAP), 2, 3])
def test_tcp_stream_ladder_matches_the_seed(index):
    seed = fit_seeds.seed_ladder()
    name, _ = fit_seeds.LADDER[index]
    got = fit_seeds.goodput_mbps(fit_seeds.configs(SHORT)[index])
    assert got == pytest.approx(seed[name], rel=TOLERANCE[name])


@pytest.mark.slow
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


_spec = importlib.util.spec_from_file_location(
    "m5bus_transactions", ROOT / "calibration" / "m5bus_transactions.py"
)
m5bus_transactions = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(m5bus_transactions)
#: The sender's TX descriptors handled as in the seed's simulator (M5's IGbE driven by
#: Linux 2.6.13's e1000): the fetch engine asked by plain calls (the transmit engine
#: when dry, the driver's tail write, each write-back), a fetch taking every posted
#: descriptor the cache has room for, write-backs of whole 64-byte blocks by the
#: cache's own engine (WTHRESH 1 with GRAN), and a tail write per packet.
M5_TX = m5bus_transactions.M5_TX


@pytest.fixture(scope="module")
def udp_x1_m5(tmp_path_factory):
    """The x1 run with the TX descriptors handled as M5 handled them (M5_TX)."""
    from cpasim.config import load_scenario
    from cpasim.predict.runs import traced_run

    cfg = load_scenario(
        ROOT / "scenarios" / "udp-stream.toml",
        sets=["sim.duration=30ms", "sim.warmup=10ms", *M5_TX],
    )
    return traced_run(cfg, tmp_path_factory.mktemp("udp_m5") / "x1.cpt")


def _link_bps(run) -> float:
    return run.result["link_utilization"]["tx_to_rx"] * run.cfg.link.rate


def _share(run, name: str) -> float:
    return next((m["share"] for m in run.path.most_critical if m["name"] == name), 0.0)


@pytest.mark.slow
def test_udp_pcie_x1_is_nic_bound_like_the_seed(udp_runs):
    x1, _ = udp_runs
    # Held out (the copy is fitted at x4): 1.86 Gb/s on the link against 1.8 (+3.6%).
    assert _link_bps(x1) == pytest.approx(saidi("link_bandwidth", "UDP stream PCIe x1"), rel=0.03)
    # The seed's path: TX Desc Fetch Wait 57% + NIC TX DMA packet 39% = 96%; the
    # model's transmit and fetch engines together hold 98.8% (DMA packet 97.7%, the
    # packet reads' waits behind the sender's tail writes in it, as in M5).
    seed_nic = saidi("critical_path_share TX descriptor fetch Wait", "UDP stream PCIe x1") + saidi(
        "critical_path_share NIC transmit DMA packet", "UDP stream PCIe x1"
    )
    nic = sum(
        m["share"]
        for m in x1.path.most_critical
        if m["name"].startswith(("tx:NIC TX:", "tx:TX Desc Fetch:", "tx:TX Desc Writeback:"))
    )
    assert nic == pytest.approx(seed_nic, abs=0.03)
    assert x1.path.most_critical[0]["name"] == "tx:NIC TX:DMA packet"
    # The sender's core is busy all the time, but two thirds of it stalled on its tail
    # writes, waiting for the bus: its work alone does not bound the run, the path does.
    assert x1.path.bottleneck == "tx:NIC TX:DMA packet"
    assert x1.result["cpu_utilization"]["tx"]["idle"] < 0.01


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="with the TX descriptors handled as M5 handled them (M5_TX: fetches asked by "
    "plain calls on the tail write, when dry and after each write-back, each taking all "
    "that fits; write-backs of 4 by the cache's own engine; a tail write per packet) the "
    "fetch engine's Wait is active, but the path reaches it only where the transmit "
    "engine waits for a fetch, and with 256 descriptors posted the calls keep the cache "
    "ahead: Wait 0% and DMA packet 98.5% against 57% and 39%, 1.84 Gb/s (30 ms, on M5's "
    "bus; on PCIe 0% / 98.5%); asked only when dry with the write-back tied to a "
    "64-descriptor batch the path locks into the fetch engine (Wait 67%, its reads "
    "31%).  Unknown: what in M5's "
    "timing (not in the thesis) left its transmit engine waiting for fetches part of "
    "the time: not M5's DMA port order, bridge NACKs, back-off (4 ns to 10 us) or its "
    "queue for register writes",
)
def test_udp_pcie_x1_splits_between_fetch_wait_and_dma_packet_like_the_seed(udp_x1_m5):
    x1 = udp_x1_m5
    wait = saidi("critical_path_share TX descriptor fetch Wait", "UDP stream PCIe x1")
    dma = saidi("critical_path_share NIC transmit DMA packet", "UDP stream PCIe x1")
    assert _share(x1, "tx:TX Desc Fetch:Wait") == pytest.approx(wait, abs=0.10)
    assert _share(x1, "tx:NIC TX:DMA packet") == pytest.approx(dma, abs=0.10)


@pytest.mark.slow
def test_udp_pcie_x4_leaves_the_nic_for_the_send_call(udp_runs):
    _, x4 = udp_runs
    # Out of the NIC (and not in it at all, as the seed says): the sender's send call
    # of Linux 2.6.13 with netfilter, the three states of the seed's table 6.1 first,
    # in its order.
    top = [m["name"] for m in x4.path.most_critical[:3]]
    assert top == [
        "tx:App:ip_push_pending_frames",
        "tx:App:do_csum_partial_copy_from_user",
        "tx:App:alloc_skb",
    ]
    assert x4.path.bottleneck == "tx:App:ip_push_pending_frames"
    assert not any(m["name"].startswith("tx:NIC") for m in x4.path.most_critical)


@pytest.mark.slow
def test_udp_pcie_x4_bandwidth_matches_the_seed(udp_runs):
    # Held out: 3.36 Gb/s on the link against 3.3 (+1.9%).
    _, x4 = udp_runs
    assert _link_bps(x4) == pytest.approx(saidi("link_bandwidth", "UDP stream PCIe x4"), rel=0.025)


# Table 6.1 at x4: the copy is fitted to its 30.69% (calibration/fit_udp_tables.py);
# alloc_skb is held out, 2.9% against 4.77%.
@pytest.mark.slow
@pytest.mark.parametrize(
    ("state", "tol"),
    [
        pytest.param(
            "ip_push_pending_frames",
            0.10,
            marks=pytest.mark.xfail(
                strict=True,
                reason="65.0% against 53.73% (+11.3 points, 30 ms; 63.8% with "
                "cpu.irq_preempt): the call holds IP Send's fragmenting and netfilter, "
                "longer than the seed's at their default costs (memcpy 10.0% and "
                "ip_fragment 8.8% of the path without the call against 5.97% and 3.60%)",
            ),
        ),
        ("do_csum_partial_copy_from_user", 0.005),
        ("alloc_skb", 0.02),
    ],
)
def test_udp_pcie_x4_critical_states_match_table_6_1(udp_runs, state, tol):
    _, x4 = udp_runs
    seed = saidi(f"critical_state_share {state}", "UDP stream PCIe x4")
    assert _share(x4, f"tx:App:{state}") == pytest.approx(seed, abs=tol)


def _core_lent(run, state: str, without_call: bool) -> float:
    """The core-lent share (the seed's "% waiting") of ``state`` on the x4 path, with
    ``ip_push_pending_frames`` scaled away for table 6.2."""
    from cpasim.analysis import Transforms, analyze
    from cpasim.trace import open_trace

    tf = Transforms(scale=[("tx:App:ip_push_pending_frames", 0.0)] if without_call else [])
    res = analyze(open_trace(run.trace), run.start, run.end, transforms=tf)
    return next(m["core_lent_share"] for m in res.path.most_critical if m["name"] == state)


#: The seed's "% waiting" of tables 6.1 and 6.2 (another state machine ran on the CPU
#: while in the state) against the model's core-lent share, in the tests' 30 ms x4 run.
#: The calls run on the caller's core, so they are lent all the time (100%), and so is
#: do_softirq, where the interrupt and NAPI run on the sender's core; the model is
#: non-preemptive, so no state doing its own work is ever lent (0%): the seed's 8-12%
#: there is its interrupts.
CORE_LENT = [
    ("tx:App:ip_push_pending_frames", "critical_state_waiting ip_push_pending_frames", False),
    (
        "tx:App:do_csum_partial_copy_from_user",
        "critical_state_waiting do_csum_partial_copy_from_user",
        False,
    ),
    pytest.param(
        "tx:App:alloc_skb",
        "critical_state_waiting alloc_skb",
        False,
        marks=pytest.mark.xfail(
            strict=True,
            reason="0% against the seed's 12.41%: the scenario's allocation is never "
            "interrupted (no preemption: an interrupt waits for the core until the sender "
            "leaves a fragment's dev_queue_xmit, where it runs in do_softirq), where the "
            "seed's interrupts ran on the sender's CPU inside it; with cpu.irq_preempt "
            "0% too (30 ms), the copy's 7.0%",
        ),
    ),
    (
        "tx:IP Send:qdisc_restart",
        "critical_state_waiting without ip_push_pending_frames qdisc_restart",
        True,
    ),
    (
        "tx:IP Send:ip_defrag",
        "critical_state_waiting without ip_push_pending_frames ip_defrag",
        True,
    ),
    ("tx:IP Send:memcpy", "critical_state_waiting without ip_push_pending_frames memcpy", True),
    (
        "tx:IP Send:ip_fragment",
        "critical_state_waiting without ip_push_pending_frames ip_fragment",
        True,
    ),
    (
        "tx:IP Send:do_softirq",
        "critical_state_waiting without ip_push_pending_frames do_softirq",
        True,
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("state", "quantity", "without_call"), CORE_LENT)
def test_udp_pcie_x4_core_lent_matches_the_seeds_waiting(udp_runs, state, quantity, without_call):
    _, x4 = udp_runs
    seed = saidi(quantity, "UDP stream PCIe x4")
    assert _core_lent(x4, state, without_call) == pytest.approx(seed, abs=0.10)


def _shares_without_the_call(run) -> dict[str, float]:
    """Shares of the x4 path with ``ip_push_pending_frames`` scaled away (table 6.2)."""
    from cpasim.analysis import Transforms, analyze
    from cpasim.trace import open_trace

    tf = Transforms(scale=[("tx:App:ip_push_pending_frames", 0.0)])
    res = analyze(open_trace(run.trace), run.start, run.end, transforms=tf)
    return {m["name"]: m["share"] for m in res.path.most_critical}


@pytest.mark.slow
def test_udp_pcie_x4_qdisc_restart_is_the_tail_writes_stall(udp_runs):
    """Table 6.2's qdisc_restart, 32.57% of the path without ip_push_pending_frames:
    the driver's transmit of each fragment, whose tail write (Linux 2.6.13's writel, a
    memory barrier after it) crosses M5's bridge both ways, waiting there behind the
    NIC's DMA; held out (no cost of the transmit fitted): 33.4%."""
    share = _shares_without_the_call(udp_runs[1])
    seed = saidi(
        "critical_state_share without ip_push_pending_frames qdisc_restart", "UDP stream PCIe x4"
    )
    assert share["tx:IP Send:qdisc_restart"] == pytest.approx(seed, abs=0.015)


@pytest.mark.slow
def test_udp_pcie_x4_without_the_call_exposes_fragment_then_defragment(udp_runs):
    """The seed's table 6.2: with ip_push_pending_frames removed, the next path runs
    through IP Send, where netfilter reassembles what IP just fragmented."""
    from cpasim.analysis import Transforms, analyze
    from cpasim.trace import open_trace

    _, x4 = udp_runs
    base = analyze(open_trace(x4.trace), x4.start, x4.end)
    res = analyze(
        open_trace(x4.trace),
        x4.start,
        x4.end,
        transforms=Transforms(scale=[("tx:App:ip_push_pending_frames", 0.0)]),
    )
    names = [m["name"] for m in res.path.most_critical]
    assert "tx:App:ip_push_pending_frames" not in names
    for state in ("ip_defrag", "memcpy", "ip_fragment", "qdisc_restart"):
        assert f"tx:IP Send:{state}" in names, names
    # Held out (no cost of IP Send fitted), in points of the path: model ip_defrag 5.8%,
    # memcpy 10.0%, ip_fragment (twice per datagram) 8.8%; seed (table 6.2) 6.26%, 5.97%,
    # 3.60%: within 5.2 points.
    share = {m["name"]: m["share"] for m in res.path.most_critical}
    for state, tol in (("ip_defrag", 0.005), ("memcpy", 0.05), ("ip_fragment", 0.06)):
        seed = saidi(
            f"critical_state_share without ip_push_pending_frames {state}", "UDP stream PCIe x4"
        )
        assert share[f"tx:IP Send:{state}"] == pytest.approx(seed, abs=tol), state
    # IP Send's work was on the baseline's path already, inside the call: removing the
    # call shortens the path by the little it waited on the device, not by IP Send's work.
    assert res.path.critical_path_ns <= base.path.critical_path_ns
    # qdisc_restart carries the driver's transmit of the fragment: removed too, the path
    # runs through Driver TX's xmit and its tail write's wait for the bus, as long.
    deeper = analyze(
        open_trace(x4.trace),
        x4.start,
        x4.end,
        transforms=Transforms(
            scale=[("tx:App:ip_push_pending_frames", 0.0), ("tx:IP Send:qdisc_restart", 0.0)]
        ),
    )
    driver = {m["name"]: m["share"] for m in deeper.path.most_critical}
    xmit = driver.get("tx:Driver TX:xmit", 0.0) + driver.get("tx:Driver TX:mmio write", 0.0)
    assert xmit == pytest.approx(share["tx:IP Send:qdisc_restart"], abs=0.01)


@pytest.fixture(scope="module")
def udp_x4_preempted(tmp_path_factory):
    """The x4 run of :func:`udp_runs` with interrupts preempting the system call."""
    from cpasim.config import load_scenario
    from cpasim.predict.runs import traced_run

    cfg = load_scenario(
        ROOT / "scenarios" / "udp-stream.toml",
        sets=["sim.duration=30ms", "sim.warmup=10ms", "hosts.tx.pcie.lanes=4"],
    ).with_overrides({"hosts.tx.cpu.irq_preempt": "true"})
    return traced_run(cfg, tmp_path_factory.mktemp("udp_preempt") / "x4.cpt", window=False)


@pytest.mark.slow
@pytest.mark.parametrize(
    "preempt",
    [
        False,
        pytest.param(
            True,
            marks=pytest.mark.xfail(
                strict=True,
                reason="2.7% against the seed's 3.94% (-31%, 30 ms): fewer interrupts come "
                "inside dev_queue_xmit than the seed's; the sender's copy, lent to "
                "interrupts 7.0% of its time (the seed's 9.10%), takes the others",
            ),
        ),
    ],
)
def test_udp_pcie_x4_do_softirq_share_of_the_seed_needs_preemption(request, udp_runs, preempt):
    """Linux 2.6.13's local_bh_enable on leaving dev_queue_xmit ran the pending softirq
    (the interrupt's NAPI poll) in the sender's context: IP Send's do_softirq, held out
    (no cost fitted).  With interrupts preempting the call (cpu.irq_preempt), as Linux
    took them, only those that come inside dev_queue_xmit wait for it: 2.7% against the
    seed's 3.94%; without, those from the copy wait there too: 6.3%."""
    run = request.getfixturevalue("udp_x4_preempted") if preempt else udp_runs[1]
    share = _shares_without_the_call(run)
    seed = saidi(
        "critical_state_share without ip_push_pending_frames do_softirq", "UDP stream PCIe x4"
    )
    if preempt:
        assert share["tx:IP Send:do_softirq"] == pytest.approx(seed, abs=0.01)
    else:
        assert share["tx:IP Send:do_softirq"] > 1.5 * seed


@pytest.mark.slow
def test_udp_pcie_x4_preempting_interrupts_run_in_the_copy(udp_x4_preempted):
    """With cpu.irq_preempt the interrupts that come while the sender copies run in the
    copy, which is then lent: 7.0% against the seed's 9.10% "waiting" (held out)."""
    seed = saidi("critical_state_waiting do_csum_partial_copy_from_user", "UDP stream PCIe x4")
    lent = _core_lent(udp_x4_preempted, "tx:App:do_csum_partial_copy_from_user", False)
    assert lent == pytest.approx(seed, abs=0.03)


@pytest.mark.slow
def test_udp_x4_predicted_from_x1(udp_runs):
    from cpasim.predict.predict import predict
    from cpasim.predict.validate import relative_error

    x1, x4 = udp_runs
    p = predict(x1, x4.cfg)
    # 1.4% here (20 ms analysed).  The x1 sender's tail writes wait behind the NIC's
    # slower reads inside its send call: their wait (mmio write, but for the bridge
    # crossed both ways) scales with the bus, and so does the part of the call states
    # that holds them.
    assert relative_error(p.predicted, x4.metric) < 0.02
    # Predicted and re-simulated, the path runs through the send call.
    assert p.predicted_bottleneck.startswith("tx:App:")
    assert x4.path.bottleneck == "tx:App:ip_push_pending_frames"


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_webserver_with_a_sendfile_server_is_not_cpu_bound():
    """lighttpd sends files with sendfile(): no send copy (the thesis's 2.9.2).  With
    the server's send copy at zero the shipped scenario's server has time to spare
    (35% idle at 120 ms) and its total overshoots the seed's by 29% (6.17 Gb/s, PCIe
    x4's DMA the limit): the fitted copy cost is what makes the 1-core server busy
    and brings the total to the seed's (calibration/SEEDS.md)."""
    r = _web("hosts.tx.cpu.cost.copy_send_per_byte=0")
    assert r.cpu_utilization["tx"]["idle"] > 0.3
    assert r.goodput_bps > 1.1 * saidi("total_bandwidth", "web server 1 core")
