"""The parameter → transform table and the bottleneck → remedy table, without simulating."""

from __future__ import annotations

import pytest

from cpasim.config import load_scenario
from cpasim.errors import CpasimError
from cpasim.model.pcie import pcie_bytes_per_ns
from cpasim.predict.bounds import busy
from cpasim.predict.remedies import diagnose, remedy_for
from cpasim.predict.runs import PathSummary, scaled_metric
from cpasim.predict.transforms_table import (
    REORDERED_POOLS,
    RULES,
    check_keys,
    plan_change,
    predictable_keys,
)


@pytest.fixture(scope="module")
def cfg():
    return load_scenario(None)


def scales(plan) -> dict[str, float]:
    return dict(plan.transforms.scale)


def test_every_rule_key_is_a_declared_parameter(cfg):
    flat = cfg.flat()
    for key in predictable_keys():
        assert key in flat or f"hosts.tx.{key}" in flat, key
    assert len(predictable_keys()) == len(set(predictable_keys()))
    assert all(r.kind in ("scale", "capacity", "bound") for r in RULES)


def test_link_rate_scales_serialization_by_old_over_new(cfg):
    plan = plan_change(cfg, cfg.with_overrides({"link.rate": "10Gbps"}))
    assert scales(plan) == {"*:MAC:transmit": pytest.approx(0.1)}
    assert plan.transforms.capacity == []
    assert plan.transforms.breaks == list(REORDERED_POOLS)


def test_link_delay_scales_propagation_by_new_over_old(cfg):
    plan = plan_change(cfg, cfg.with_overrides({"link.delay": "350us"}))
    assert scales(plan) == {"*:Link:propagate": pytest.approx(35.0)}


def test_zero_baseline_delay_cannot_be_scaled(cfg):
    zero = cfg.with_overrides({"link.delay": 0})
    with pytest.raises(CpasimError, match="link.delay is 0"):
        plan_change(zero, cfg)


def test_host_key_maps_to_its_host_only(cfg):
    plan = plan_change(cfg, cfg.with_overrides({"hosts.rx.nic.rx_ring": 300}))
    assert plan.transforms.capacity == [("rx:RX free desc", 44)]


def test_unprefixed_host_key_maps_to_both_hosts(cfg):
    plan = plan_change(cfg, cfg.with_overrides({"qdisc.len": 1001}))
    assert sorted(plan.transforms.capacity) == [("rx:qdisc", 1), ("tx:qdisc", 1)]


def test_cores_act_through_the_busy_bound_not_the_pool(cfg):
    new = cfg.with_overrides({"hosts.tx.cpu.cores": 4})
    plan = plan_change(cfg, new)
    assert plan.transforms.capacity == [] and plan.transforms.scale == []
    assert "*:CPU cores" in plan.transforms.breaks
    active = {
        "tx:App:TcpSendMsg: copy": 600.0,
        "tx:NAPI:poll": 200.0,
        "tx:NIC TX:DMA packet": 900.0,
        "tx:NIC TX:writeback": 50.0,
        "tx:NIC RX:DMA packet": 30.0,
        "rx:IP Recv:tcp_v4_rcv": 400.0,
        "tx:MAC:transmit": 5000.0,
    }
    before = busy(cfg, plan_change(cfg, cfg).transforms, active)
    assert before["tx:CPU cores"] == pytest.approx(800.0)
    assert before["rx:CPU cores"] == pytest.approx(400.0)
    assert before["tx:PCIe down"] == pytest.approx(900.0)
    assert before["tx:PCIe up"] == pytest.approx(80.0)
    after = busy(new, plan.transforms, active)
    assert after["tx:CPU cores"] == pytest.approx(200.0)
    faster = cfg.with_overrides({"hosts.tx.cpu.freq": "8GHz"})
    assert busy(faster, plan_change(cfg, faster).transforms, active)[
        "tx:CPU cores"
    ] == pytest.approx(400.0)


def test_bound_replaces_a_shorter_path():
    path = PathSummary({"": 1000.0}, "tx:MAC:transmit", 0.9, [], [])
    assert path.bounded({"tx:CPU cores": 500.0}).critical_path_ns == {"": 1000.0}
    assert path.bounded({"tx:CPU cores": 500.0}).bottleneck == "tx:MAC:transmit"
    tight = path.bounded({"tx:CPU cores": 1500.0, "rx:PCIe up": 10.0})
    assert tight.critical_path_ns == {"": 1500.0}
    assert tight.bottleneck == "tx:CPU cores"


def test_rmem_grows_the_peers_send_window_in_bytes(cfg):
    fixed = cfg.with_overrides({"tcp.rmem": "64KiB"})
    plan = plan_change(fixed, fixed.with_overrides({"hosts.rx.tcp.rmem": "1MiB"}))
    assert plan.transforms.capacity == [("tx:Send window*", 2**20 - 2**16)]


def test_linux_buffer_rules_are_not_predicted(cfg):
    # Doubled, charged per skb and autotuned: no fixed capacity to grow.
    with pytest.raises(CpasimError, match=r"tcp.rmem = 0 means Linux's socket-buffer rules"):
        plan_change(cfg, cfg.with_overrides({"hosts.rx.tcp.rmem": "1MiB"}))
    with pytest.raises(CpasimError, match=r"tcp.rcvbuf: cannot be predicted from a trace"):
        plan_change(cfg, cfg.with_overrides({"tcp.rcvbuf": "1MiB"}))


def test_tx_fifo_growth_is_counted_in_full_size_frames(cfg):
    # 48 KiB / 1518-byte frames = 32 frames; 96 KiB = 64 frames.
    plan = plan_change(cfg, cfg.with_overrides({"hosts.tx.nic.tx_fifo": "96KiB"}))
    assert plan.transforms.capacity == [("tx:TX FIFO", 64 - 32)]


def test_shrinking_a_capacity_is_refused_with_the_queue_named(cfg):
    with pytest.raises(CpasimError, match=r"shrinks tx:qdisc by 500 units.*only predict"):
        plan_change(cfg, cfg.with_overrides({"hosts.tx.qdisc.len": 500}))


def test_unmappable_key_lists_the_predictable_ones():
    with pytest.raises(CpasimError) as err:
        check_keys(["nic.tso"])
    msg = str(err.value)
    assert msg.startswith("--change nic.tso: cannot be predicted")
    for key in predictable_keys():
        assert key in msg
    check_keys(["hosts.tx.cpu.freq", "link.rate"])  # accepted


def test_pcie_lanes_scale_transfer_and_keep_the_bridge_round_trip(cfg):
    # A DMA read state: 2 x 100 ns bridge latency + 1000 ns of transfer per entry.
    means = {"tx:NIC TX:DMA packet": 1200.0, "tx:NIC RX:DMA packet": 800.0}
    plan = plan_change(cfg, cfg.with_overrides({"hosts.tx.pcie.lanes": 4}), means)
    f = scales(plan)
    assert f["tx:NIC TX:DMA packet"] == pytest.approx((200 + 1000 / 4) / 1200)
    assert f["tx:NIC RX:DMA packet"] == pytest.approx(0.25)  # a posted write: no fixed part
    assert not any(p.startswith("rx:") for p in f)


def test_pcie_generation_uses_the_encoding(cfg):
    plan = plan_change(cfg, cfg.with_overrides({"hosts.tx.pcie.gen": 3}))
    ratio = pcie_bytes_per_ns(1, 1) / pcie_bytes_per_ns(3, 1)
    assert scales(plan)["tx:NIC RX:DMA packet"] == pytest.approx(ratio)
    assert ratio == pytest.approx((2.5 * 0.8) / (8 * 128 / 130))


def test_cpu_freq_scales_cycles_and_keeps_the_doorbell_stall(cfg):
    means = {"tx:Driver TX:xmit": 137.5, "tx:App:TcpSendMsg: copy": 1000.0}
    plan = plan_change(cfg, cfg.with_overrides({"hosts.tx.cpu.freq": "8GHz"}), means)
    f = scales(plan)
    assert f["tx:*:TcpSendMsg: copy"] == pytest.approx(0.5)
    # xmit = 100 ns MMIO stall + 37.5 ns of cycles per entry
    assert f["tx:Driver TX:xmit"] == pytest.approx((100 + 37.5 / 2) / 137.5)
    assert "tx:MAC:transmit" not in f and "tx:NIC TX:DMA packet" not in f


def test_describe_groups_patterns(cfg):
    plan = plan_change(cfg, cfg.with_overrides({"cpu.freq": "8GHz"}))
    lines = plan.describe()
    assert len(lines) == 2  # one per host
    assert all("× 0.5" in line and "more" in line for line in lines)


def _path(most, loops=()):
    return PathSummary(
        {"": 1.0},
        most[0][0] if most else None,
        0.0,
        [{"name": n, "share": s, "waiting_share": 0.0, "time_ns": 0.0} for n, s in most],
        [{"edge": e, "count": c} for e, c in loops],
    )


def test_diagnose_link_window_bus_cpu():
    assert diagnose(_path([("tx:MAC:transmit", 0.9)])).kind == "link"
    window = _path(
        [("tx:Link:propagate", 0.6), ("tx:MAC:transmit", 0.1)],
        [("tx:NIC RX->tx:NIC TX[tx:PCIe down]", 9), ("tx:IP Recv->tx:App[tx:Send buffer]", 5)],
    )
    d = diagnose(window)
    assert (d.kind, d.sys) == ("window", "tx")
    bus = diagnose(_path([("rx:NIC RX:DMA packet", 0.7)]))
    assert (bus.kind, bus.sys) == ("bus", "rx")
    cpu = diagnose(_path([("tx:App:TcpSendMsg: copy", 0.5)]))
    assert (cpu.kind, cpu.sys) == ("cpu", "tx")
    cores = diagnose(
        _path([("rx:IP Recv:tcp_v4_rcv", 0.5)], [("rx:App->rx:ISR[rx:CPU cores]", 40)])
    )
    assert (cores.kind, cores.sys) == ("cores", "rx")
    assert diagnose(_path([("tx:Something:else", 0.9)])) is None


def test_remedies(cfg):
    link = remedy_for(cfg, _path([("tx:MAC:transmit", 0.9)]))
    assert link.values == {"link.rate": pytest.approx(10e9)}
    stream = cfg.with_overrides(
        {"link.rate": "10Gbps", "link.delay": "350us", "tcp.wmem": "64KiB", "tcp.rmem": "64KiB"}
    )
    win = remedy_for(
        stream, _path([("tx:Link:propagate", 0.6)], [("tx:IP Recv->tx:App[tx:Send buffer]", 5)])
    )
    # 4 x BDP = 4 x 10 Gb/s x 700 us / 8 = 3.5 MB -> 4 MiB on both hosts
    assert set(win.values.values()) == {4 * 2**20}
    assert len(win.values) == 4
    assert win.apply(stream).tx.tcp.wmem == 4 * 2**20
    # Linux's rules: a set request grows; an autotuned side whose limit (tcp.rmem_max,
    # 32 MiB) is already above 4 x BDP is left alone.
    linux = stream.with_overrides({"tcp.wmem": 0, "tcp.rmem": 0, "tcp.sndbuf": "64KiB"})
    win = remedy_for(
        linux, _path([("tx:Link:propagate", 0.6)], [("tx:IP Recv->tx:App[tx:Send buffer]", 5)])
    )
    assert win.values == {"hosts.tx.tcp.sndbuf": 4 * 2**20, "hosts.rx.tcp.sndbuf": 4 * 2**20}
    bus = remedy_for(cfg, _path([("rx:NIC RX:DMA packet", 0.7)]))
    assert bus.values == {"hosts.rx.pcie.lanes": 4}
    cpu = remedy_for(cfg, _path([("tx:App:TcpSendMsg: copy", 0.5)]))
    assert cpu.values == {"hosts.tx.cpu.freq": pytest.approx(8e9)}
    assert "hosts.tx.cpu.freq=8GHz" in cpu.describe()


def test_scaled_metric_directions():
    base = _path([("a:b:c", 1.0)])
    half = PathSummary({"": 0.5}, None, 0.0, [], [])
    assert scaled_metric(100.0, True, base, half) == pytest.approx(200.0)
    assert scaled_metric(100.0, False, base, half) == pytest.approx(50.0)
