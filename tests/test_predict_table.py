"""The parameter → transform table and the bottleneck → remedy table, without simulating."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpasim.config import load_scenario
from cpasim.errors import CpasimError
from cpasim.model.pcie import pcie_bytes_per_ns
from cpasim.predict.bounds import busy
from cpasim.predict.remedies import diagnose, remedy_for
from cpasim.predict.runs import PathSummary, scaled_metric
from cpasim.predict.transforms_table import (
    REFUSED,
    REORDERED_POOLS,
    RULES,
    Refused,
    check_keys,
    plan_change,
    predictable_keys,
)
from cpasim.predict.whatif import changed_config

ROOT = Path(__file__).resolve().parent.parent


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
    # BBR's pacing follows the path's rate, here the link's.
    assert scales(plan) == {"*:MAC:transmit": pytest.approx(0.1), "*:TcpSend:pace": 0.1}
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
    with pytest.raises(Refused, match=r"tcp.rmem = 0 means Linux's socket-buffer rules"):
        plan_change(cfg, cfg.with_overrides({"hosts.rx.tcp.rmem": "1MiB"}))
    with pytest.raises(Refused, match=r"tcp.rcvbuf = 0 leaves the buffer to Linux's autotuning"):
        plan_change(cfg, cfg.with_overrides({"tcp.rcvbuf": "1MiB"}))
    with pytest.raises(Refused, match=r"tcp.sndbuf = 0 leaves the buffer to Linux's autotuning"):
        plan_change(cfg, cfg.with_overrides({"hosts.tx.tcp.sndbuf": "1MiB"}))
    fixed = cfg.with_overrides({"tcp.rmem": "64KiB"})
    with pytest.raises(Refused, match=r"fixed buffer tcp.rmem is set, so tcp.rcvbuf and its"):
        plan_change(fixed, fixed.with_overrides({"tcp.rx_truesize": "4KiB"}))


# Advertised windows measured on this project's Linux 6.18 host with iperf3 -w
# (docs/PLAN: 39,096 B for -w 32K, 326,240 B for -w 256K), which
# sockbuf.largest_window reproduces.
def test_locked_rcvbuf_grows_the_peers_window_by_linux_arithmetic(cfg):
    locked = cfg.with_overrides({"tcp.rcvbuf": "32KiB"})
    plan = plan_change(locked, locked.with_overrides({"hosts.rx.tcp.rcvbuf": "256KiB"}))
    assert plan.transforms.capacity == [("tx:Send window*", 326240 - 39096)]
    # A request above net.core.rmem_max is clamped to it: raising the limit grows it.
    big = cfg.with_overrides({"tcp.rcvbuf": "8MiB", "tcp.core_rmem_max": "1MiB"})
    plan = plan_change(big, big.with_overrides({"hosts.rx.tcp.core_rmem_max": "2MiB"}))
    ((pattern, growth),) = plan.transforms.capacity
    assert pattern == "tx:Send window*"
    # One more MiB requested is 2 MiB of buffer, of which scaling_ratio = 1448 * 256 //
    # 2304 = 160/256 is window (up to the window-scale rounding).
    assert growth == pytest.approx(2 * 2**20 * 160 / 256, abs=2**7)


def test_locked_sndbuf_grows_the_send_buffer_by_the_doubled_request(cfg):
    locked = cfg.with_overrides({"tcp.sndbuf": "16KiB"})
    plan = plan_change(locked, locked.with_overrides({"hosts.tx.tcp.sndbuf": "64KiB"}))
    assert plan.transforms.capacity == [("tx:Send buffer*", 2 * (64 - 16) * 1024)]
    # Clamped by net.core.wmem_max (4 MiB): 8 MiB asks for no more than 4 MiB does.
    at_max = cfg.with_overrides({"tcp.sndbuf": "4MiB"})
    assert plan_change(at_max, at_max.with_overrides({"tcp.sndbuf": "8MiB"})).effects == ()
    with pytest.raises(Refused, match=r"shrinks tx:Send buffer\* by 24576 units"):
        plan_change(locked, locked.with_overrides({"hosts.tx.tcp.sndbuf": "4KiB"}))


def _end(conn, *, slow_start, flight=40_000, cwnd=100_000, peer_window=1_000_000):
    return {
        "conn": conn,
        "slow_start": slow_start,
        "flight": flight,
        "cwnd": cwnd,
        "peer_window": peer_window,
    }


def test_a_larger_send_buffer_grows_cwnd_in_slow_start_only(cfg):
    """A Linux sender in slow start grows cwnd to twice what it has out, so the window
    follows a larger buffer there, up to the peer's window; in congestion avoidance,
    with nothing out, or without the baseline's end state, it does not."""
    fixed = cfg.with_overrides({"tcp.wmem": "64KiB"})
    new = fixed.with_overrides({"hosts.tx.tcp.wmem": "1MiB"})
    growth = (1024 - 64) * 1024
    senders = {
        "tx": [
            _end("c0", slow_start=True),  # the peer's window leaves 900,000 above cwnd
            _end("c1", slow_start=True, peer_window=150_000),
            _end("c2", slow_start=False),
            _end("c3", slow_start=True, flight=0),
        ]
    }
    plan = plan_change(fixed, new, senders=senders)
    assert plan.transforms.capacity == [
        ("tx:Send buffer*", growth),
        ("tx:Send window", 900_000),
        ("tx:Send window#1", 50_000),
    ]
    assert plan_change(fixed, new).transforms.capacity == [("tx:Send buffer*", growth)]
    # One flow's buffer (flows-buffers: flows 0 and 1 are c0 and c1): its own
    # connection's window only.
    flows = load_scenario(ROOT / "scenarios" / "flows-buffers.toml")
    plan = plan_change(flows, changed_config(flows, {"flows.1.tcp.wmem": "1MiB"}), senders=senders)
    assert sorted(plan.transforms.capacity) == [
        ("rx:Send buffer#1", growth),
        ("tx:Send buffer#1", growth),
        ("tx:Send window#1", 50_000),
    ]


def test_refused_keys_give_their_own_reason(cfg):
    assert not set(REFUSED) & set(predictable_keys())
    flat = cfg.flat()
    for key, reason in REFUSED.items():
        assert key in flat or f"hosts.tx.{key}" in flat, key
        with pytest.raises(Refused) as err:
            check_keys([key])
        assert str(err.value) == f"--change {key}: cannot be predicted from a trace: {reason}"
        assert "'cpasim validate' re-simulates it" in reason
    with pytest.raises(Refused, match=r"^--change tcp.cc: .*sent when, not how long a step"):
        plan_change(cfg, cfg.with_overrides({"tcp.cc": "bbr"}))
    with pytest.raises(Refused, match=r"^--change hosts.tx.tcp.sack: "):
        plan_change(cfg, cfg.with_overrides({"hosts.tx.tcp.sack": False}))


def _bottleneck(cfg, **more):
    return cfg.with_overrides({"bottleneck.rate": "50Mbps", **more})


def test_bottleneck_rates_scale_their_own_direction(cfg):
    both = _bottleneck(cfg, **{"bottleneck.reverse_rate": "10Mbps"})
    plan = plan_change(both, both.with_overrides({"bottleneck.rate": "100Mbps"}))
    assert scales(plan) == {
        "path:Bottleneck#tx_to_rx:serialize": 0.5,
        "*:TcpSend:pace": pytest.approx(0.5),
    }
    plan = plan_change(both, both.with_overrides({"bottleneck.reverse_rate": "20Mbps"}))
    assert scales(plan) == {"path:Bottleneck#rx_to_tx:serialize": 0.5}
    with pytest.raises(Refused, match="no reverse bottleneck"):
        plan_change(both.with_overrides({"bottleneck.reverse_rate": 0}), both)


def test_pacing_follows_the_narrowest_rate(cfg):
    narrow = _bottleneck(cfg)
    # The 50 Mb/s bottleneck, not the 1 Gb/s link, sets the pacing rate.
    assert scales(plan_change(narrow, narrow.with_overrides({"link.rate": "2Gbps"}))) == {
        "*:MAC:transmit": 0.5
    }
    # Past the link's rate the link paces: 1 Gb/s of 1538-byte wire slots per 1500 B,
    # against 50 Mb/s of 1538 counted bytes.
    plan = plan_change(narrow, narrow.with_overrides({"bottleneck.rate": "5Gbps"}))
    assert scales(plan)["*:TcpSend:pace"] == pytest.approx(50e6 / 1e9)


def test_bottleneck_overhead_rescales_full_size_packets(cfg):
    base = _bottleneck(cfg)
    # A TCP stream's data: 1500-byte IP packets, 1538 counted bytes each, 1514 with 14.
    plan = plan_change(base, base.with_overrides({"bottleneck.overhead": "14B"}))
    f = scales(plan)
    assert f["path:Bottleneck#tx_to_rx:serialize"] == pytest.approx(1514 / 1538)
    assert f["*:TcpSend:pace"] == pytest.approx(1514 / 1538)
    with pytest.raises(Refused, match="no bottleneck"):
        plan_change(cfg, cfg.with_overrides({"bottleneck.overhead": "14B"}))
    for other in ({"bottleneck.reverse_rate": "10Mbps"}, {"workload.kind": "pingpong"}):
        varied = _bottleneck(cfg, **other)
        with pytest.raises(Refused, match="exact only for full-size packets"):
            plan_change(varied, varied.with_overrides({"bottleneck.overhead": 0}))


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


def test_a_bus_change_scales_the_tail_writes_the_2613_calls_hold():
    """On M5's bus a register write (``mmio write``) scales with the bus but for the
    bridge, crossed both ways, and so does the part of each 2.6.13 call state its
    callees' tail writes took: one per ``qdisc_restart``, as many per
    ``ip_push_pending_frames`` as it held."""
    cfg = load_scenario(ROOT / "scenarios" / "udp-stream.toml")
    assert cfg.tx.bus.kind == "m5"
    new = cfg.with_overrides({"hosts.tx.pcie.lanes": 4})
    means = {
        "tx:Driver TX:mmio write": 3000.0,
        "tx:IP Send:qdisc_restart": 4000.0,
        "tx:App:ip_push_pending_frames": 60000.0,
    }
    entries = {"tx:IP Send:qdisc_restart": 120, "tx:App:ip_push_pending_frames": 10}
    plan = plan_change(cfg, new, means, entries)
    factors = dict(plan.transforms.scale)
    bridge = 2 * 100.0  # pcie.latency, both ways
    assert factors["tx:Driver TX:mmio write"] == pytest.approx(
        (bridge + (3000 - bridge) * 0.25) / 3000
    )
    assert factors["tx:IP Send:qdisc_restart"] == pytest.approx(
        (1000 + bridge + (3000 - bridge) * 0.25) / 4000
    )
    held = 12 * 3000.0  # twelve transmits per call
    assert factors["tx:App:ip_push_pending_frames"] == pytest.approx(
        (60000 - held + 12 * bridge + (held - 12 * bridge) * 0.25) / 60000
    )
    # A slower bridge lengthens each write by its latency both ways, nothing else.
    slow = cfg.with_overrides({"hosts.tx.pcie.latency": 150e-9})
    f = dict(plan_change(cfg, slow, means, entries).transforms.scale)
    assert f["tx:Driver TX:mmio write"] == pytest.approx((3000 + 100) / 3000)
    assert f["tx:App:ip_push_pending_frames"] == pytest.approx((60000 + 12 * 100) / 60000)
    # A faster clock leaves the writes as they are and halves the rest of the calls.
    fast = cfg.with_overrides({"hosts.tx.cpu.freq": 8e9})
    f = dict(plan_change(cfg, fast, means, entries).transforms.scale)
    assert f["tx:IP Send:qdisc_restart"] == pytest.approx((3000 + 1000 * 0.5) / 4000)
    assert f["tx:App:ip_push_pending_frames"] == pytest.approx((held + 24000 * 0.5) / 60000)
    assert "tx:*:mmio write" not in f
    # Without the baseline's counts nothing is known of that part: the calls stay.
    bare = dict(plan_change(cfg, new, means).transforms.scale)
    assert "tx:IP Send:qdisc_restart" not in bare
    # On PCIe the tail write is posted: no wait to scale, the calls untouched.
    pcie = cfg.with_overrides({"hosts.tx.bus.kind": "pcie"})
    posted = dict(
        plan_change(pcie, pcie.with_overrides({"hosts.tx.pcie.lanes": 4}), {}, {}).transforms.scale
    )
    assert "tx:App:ip_push_pending_frames" not in posted
