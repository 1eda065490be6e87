"""Levels of detail (``host.detail``): the ideal host, its refusals, what it reports,
its trace, the predictions it refuses, and when a full run says an ideal one would
differ.  Agreement over whole scenarios and the real-Linux grids is
tests/test_detail_agreement.py (slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

import cpasim.cli
from cpasim.analysis import analyze
from cpasim.config import load_scenario, parameters
from cpasim.config.resolved import _digest
from cpasim.errors import CpasimError
from cpasim.model import ideal
from cpasim.model.detail import ABSENT, host_time, ideal_would_differ
from cpasim.predict.transforms_table import REFUSED, Refused, plan_change
from cpasim.simulate import simulate
from cpasim.sweeps.agreement import COLUMN, add_agreement
from cpasim.sweeps.points import point_seed

#: A short stream on a 100 Mb/s link: the link limits it at either level.
SHORT = ["link.rate=100Mbps", "sim.duration=12ms", "sim.warmup=2ms", "link.delay=100us"]


def cfg_at(level: str, *extra: str):
    return load_scenario(None, sets=[*SHORT, f"host.detail={level}", *extra])


@pytest.fixture(scope="module")
def pair():
    return simulate(cfg_at("full")), simulate(cfg_at("ideal"))


def test_declared_once_per_end_host_with_full_as_default():
    (spec,) = [s for s in parameters() if s.key == "host.detail"]
    assert spec.default == "full" and spec.choices == ("full", "ideal")
    assert spec.hosts == ("tx", "rx")  # the forwarding host is always detailed
    cfg = load_scenario(None, sets=["hosts.rx.host.detail=ideal"])
    assert (cfg.tx.host.detail, cfg.rx.host.detail) == ("full", "ideal")


def test_the_default_leaves_the_digest_as_it_was():
    """A full host hashes as before the key existed (run folders, trace sidecars keep
    matching); an ideal one is a different configuration."""
    cfg = load_scenario(None)
    before = {k: v for k, v in cfg.flat().items() if not k.endswith(".host.detail")}
    assert cfg.digest == _digest(before)
    assert cfg_at("ideal").digest != cfg_at("full").digest


@pytest.mark.parametrize(
    ("sets", "words"),
    [
        (["hosts.tx.ip.send_path=2.6.13"], 'hosts.tx.ip.send_path = "2.6.13"'),
        (["hosts.rx.copy_engine.enabled=true"], "hosts.rx.copy_engine.enabled"),
    ],
)
def test_what_needs_the_hardware_is_refused_on_an_ideal_host(sets, words):
    with pytest.raises(CpasimError, match="host.detail") as err:
        load_scenario(None, sets=["host.detail=ideal", *sets])
    assert words in str(err.value) and "\n" not in str(err.value)
    host = sets[0].split(".")[1]
    other = "rx" if host == "tx" else "tx"
    load_scenario(None, sets=[f"hosts.{other}.host.detail=ideal", *sets])  # the full host may


def test_refusal_is_one_line_and_exit_2_on_the_command_line(capsys):
    scenario = Path(__file__).parent.parent / "scenarios" / "tcp-stream.toml"
    argv = ["run", str(scenario), "--set", "host.detail=ideal", "--set", "ip.send_path=2.6.13"]
    with pytest.raises(SystemExit) as stop:
        cpasim.cli.main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("cpasim: error: ")
    assert 'hosts.tx.host.detail = "ideal" has no driver' in err


def test_ideal_host_has_no_cpu_or_bus_to_report(pair):
    full, ideal_run = pair
    assert set(full.cpu_utilization) == {"tx", "rx"} == set(full.io_bus_utilization)
    assert ideal_run.cpu_utilization == {} and ideal_run.io_bus_utilization == {}
    assert "rx_fifo" in full.drops and "rx_fifo" not in ideal_run.drops
    mixed = simulate(cfg_at("full", "hosts.rx.host.detail=ideal"))
    assert set(mixed.cpu_utilization) == {"tx"}


def test_link_limited_stream_agrees_and_takes_a_fraction_of_the_events(pair):
    full, ideal_run = pair
    assert ideal_run.goodput_bps == pytest.approx(full.goodput_bps, rel=0.01)
    # Measured: about 4 events per segment against 16 (bench/bench_detail.py).
    assert ideal_run.events < full.events / 3


def test_work_on_an_ideal_cpu_takes_no_time_and_no_event():
    cpu, sm = ideal.IdealCpu(env=None), _Sm()
    done = cpu.spend(sm, "tcp_v4_rcv", stack=1e9)
    assert done.callbacks is None and done.ok  # already processed: the caller goes on
    assert sm.states == ["tcp_v4_rcv"]  # the state is entered, for no time
    assert cpu.cycles("copy_recv", 10**6) == 0.0 and cpu.cost.copy_per_byte == 0.0
    assert list(cpu.take(None)) == [] and cpu.cores.get_queue == ()


class _Sm:
    def __init__(self):
        self.states = []

    def begin(self, state):
        self.states.append(state)


def test_an_ideal_run_is_traced_and_analysed_and_tracing_changes_nothing(tmp_path, pair):
    _, untraced = pair
    traced = simulate(cfg_at("ideal"), trace_path=tmp_path / "ideal.cpt")
    a, b = traced.to_json(), untraced.to_json()
    for r in (a, b):
        r.pop("wall_s")
    assert a == b
    from cpasim.tracing import open_trace

    source = open_trace(tmp_path / "ideal.cpt")
    res = analyze(source, start=("tx", "App"), end=("rx", "App"), engine="python")
    assert res.reachable
    assert res.most_critical[0]["name"] == "tx:MAC:transmit"  # the link limits it
    assert ideal_would_differ(cfg_at("ideal"), res) is None  # both hosts ideal already


def test_a_delivery_that_waits_for_a_full_qdisc_keeps_the_order(monkeypatch):
    """A one-packet qdisc on both sides of two ping-pongs: a host sends one's message
    while the other's segments arrive, whose ACKs find the qdisc full, so their
    deliveries wait in a process of their own and what arrives meanwhile queues behind
    them, in order (no segment is taken for lost)."""
    waited = []
    finish = ideal.IdealDevice._finish

    def counting(self, delivery, event):
        waited.append(1)
        return finish(self, delivery, event)

    monkeypatch.setattr(ideal.IdealDevice, "_finish", counting)
    sets = [
        "workload.kind=pingpong",
        "workload.message_size=8KiB",
        "workload.connections=2",
        "qdisc.len=1",
        "sim.duration=20ms",
    ]
    r = simulate(cfg_at("ideal", *sets))
    # Measured: 88 deliveries waited; 21 exchanges completed, nothing sent twice.
    assert len(waited) > 20 and r.latency_ns["count"] > 10 and r.retransmits == 0


def test_predict_refuses_keys_of_parts_an_ideal_host_lacks():
    base = cfg_at("full", "hosts.tx.host.detail=ideal")
    for key in ("cpu.freq=8GHz", "pcie.lanes=4", "nic.tx_ring=512"):
        k, v = key.split("=")
        with pytest.raises(Refused, match=f"host tx is ideal.*{k}") as err:
            plan_change(base, base.with_overrides({f"hosts.tx.{k}": v}))
        assert ABSENT[k.split(".")[0]] in str(err.value)
    plan_change(base, base.with_overrides({"hosts.rx.cpu.freq": "8GHz"}))  # rx is full
    plan_change(base, base.with_overrides({"link.rate": "1Gbps"}))
    with pytest.raises(Refused, match="which parts of the host exist"):
        plan_change(base, base.with_overrides({"hosts.rx.host.detail": "ideal"}))
    assert "host.detail" in REFUSED


def test_host_time_is_what_an_ideal_host_does_in_no_time():
    totals = {
        "tx:MAC:transmit": 50.0,
        "tx:Link:propagate": 30.0,
        "path:Bottleneck#tx_to_rx:serialize": 5.0,
        "tx:RTO Timer:armed": 3.0,
        "tx:App:TcpSendMsg: copy": 7.0,
        "rx:NIC RX:DMA packet": 4.0,
        "tx:NIC TX->tx:MAC[tx:TX FIFO]": 0.0,
    }
    assert host_time(totals) == {"tx:App:TcpSendMsg: copy": 7.0, "rx:NIC RX:DMA packet": 4.0}
    assert host_time(totals, ("rx",)) == {"rx:NIC RX:DMA packet": 4.0}


def test_ideal_would_differ_without_a_trace(pair):
    full, _ = pair
    cfg = cfg_at("full")
    assert full.link_utilization["tx_to_rx"] > 0.99  # the link limits it: ideal agrees
    assert ideal_would_differ(cfg, full) is None
    assert ideal_would_differ(cfg_at("ideal"), full) is None  # nothing full to compare
    dropped = {**full.to_json(), "drops": {"rx_fifo": 3}}
    assert "NIC dropped frames (3 rx_fifo)" in ideal_would_differ(cfg, dropped)
    short = {**full.to_json(), "link_utilization": {"tx_to_rx": 0.5}}
    with pytest.raises(CpasimError, match="needs its trace"):
        ideal_would_differ(cfg, short)


def test_ideal_would_differ_predicts_a_host_bound_latency(tmp_path, monkeypatch):
    """A ping-pong's round trip is mostly host time: the prediction from the full run's
    trace (its host states at 0) against the ideal run re-simulated."""
    monkeypatch.setenv("CPASIM_ANALYZER", "python")  # a small trace: no compiled kernel
    sets = ("workload.kind=pingpong", "workload.message_size=1KiB", "link.rate=10Gbps")
    sets += ("link.delay=2us", "sim.duration=3ms", "sim.warmup=1ms")
    cfg = cfg_at("full", *sets)
    full = simulate(cfg, trace_path=tmp_path / "full.cpt")
    ideal_run = simulate(cfg_at("ideal", *sets))
    why = ideal_would_differ(cfg, full, tmp_path / "full.cpt")
    change = ideal_run.latency_ns["mean"] / full.latency_ns["mean"] - 1
    assert change < -0.3  # the ideal round trip is much shorter
    predicted = float(why.split("mean latency would be ")[1].split("%")[0]) / 100
    assert predicted == pytest.approx(change, abs=0.02), why


def test_a_sweep_over_levels_shows_the_agreement_and_shares_the_seed():
    keys = ["host.detail", "link.rate"]
    rows = [
        {"host.detail": "full", "link.rate": "1Gbps", "repeat": 0, "goodput_bps": 900.0},
        {"host.detail": "ideal", "link.rate": "1Gbps", "repeat": 0, "goodput_bps": 909.0},
        {"host.detail": "ideal", "link.rate": "2Gbps", "repeat": 0, "goodput_bps": 1.0},
    ]
    assert add_agreement(rows, keys)
    assert rows[1][COLUMN] == pytest.approx(0.01) and COLUMN not in rows[0]
    assert COLUMN not in rows[2]  # no full partner
    assert not add_agreement(rows, ["link.rate"])
    a = point_seed(1, [("host.detail", "full"), ("link.rate", "1Gbps")], 0)
    assert a == point_seed(1, [("host.detail", "ideal"), ("link.rate", "1Gbps")], 0)
    assert a == point_seed(1, [("link.rate", "1Gbps")], 0)
