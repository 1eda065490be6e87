"""M5's I/O bus (``bus.kind = "m5"``): gem5's bus, bridge and DMA port rules, replayed and
simulated, against closed forms written out here."""

from __future__ import annotations

import dataclasses
import math

import pytest
import simpy
from hypothesis import given
from hypothesis import strategies as st

from cpasim.config import load_scenario
from cpasim.config.params import BusParams, PcieParams
from cpasim.errors import CpasimError
from cpasim.model.buses import bus_timing
from cpasim.model.m5bus import M5Bus, M5Timing, m5_timing, replay
from cpasim.protocol import MMIO_BYTES
from cpasim.simulate import simulate
from cpasim.tracing import NULL_SM, NULL_TRACER

CYCLE = 4.0  # ns: a PCIe gen 1 lane moves one byte per 4 ns (2.5 GT/s, 8b/10b)


def timing(lanes=1, **bus) -> M5Timing:
    return m5_timing(
        dataclasses.replace(BusParams(), kind="m5", **bus),
        dataclasses.replace(PcieParams(), lanes=lanes),
    )


def round_trip_edge(t: M5Timing) -> float:
    """The first clock edge after a request's response is ready at the bridge."""
    rt = 2 * 100.0 + 30.0  # pcie.latency each way (the thesis: 100 ns), gem5's 30 ns memory
    return math.ceil(rt / CYCLE) * CYCLE


def transaction(t: M5Timing, data: int) -> float:
    """gem5's Bus: one header cycle, then ceil(data / width) cycles."""
    return (1 + math.ceil(data / t.width)) * CYCLE


def test_bandwidth_is_the_pcie_links():
    # One byte per lane per 4 ns: x1 is 2 Gb/s, x4 8 Gb/s (seed 004: "2 Gbps of peak").
    for lanes in (1, 4):
        t = timing(lanes)
        assert t.width / (t.cycle_ps / 1000) * 8 == pytest.approx(2.0 * lanes)
    assert bus_timing(dataclasses.replace(BusParams(), kind="m5"), PcieParams()).kind == "m5"


@given(lanes=st.sampled_from((1, 2, 4, 8, 16)), n=st.integers(1, 16 * 64))
def test_a_read_alone_is_its_requests_a_round_trip_and_its_responses(lanes, n):
    # Within the bridge's 16 blocks nothing is NACKed: the requests (a header each) go
    # out back to back, the first response is ready one round trip after the first
    # request, and the responses (header + data) follow each other on the bus.
    t = timing(lanes)
    blocks = [64] * (n // 64) + ([n % 64] if n % 64 else [])
    tl = replay(t, n, False, 0)
    responses = sum(transaction(t, b) for b in blocks)
    assert tl.nacks == 0
    assert tl.duration_ns == pytest.approx(round_trip_edge(t) + responses)
    assert tl.busy_ns == pytest.approx(len(blocks) * CYCLE + responses)


@given(lanes=st.sampled_from((1, 4)), n=st.integers(1, 64))
def test_a_one_block_write_waits_for_its_acknowledgement(lanes, n):
    # The data goes with the request; the bridge's acknowledgement (a header) comes
    # back a round trip later, or when the data has left the bus if that is later.
    t = timing(lanes)
    data = transaction(t, n)
    tl = replay(t, n, True, 0)
    assert tl.duration_ns == pytest.approx(max(data, round_trip_edge(t)) + CYCLE)
    assert tl.busy_ns == pytest.approx(data + CYCLE)


def test_a_read_beyond_the_bridge_buffer_is_nacked_and_backs_off():
    t = timing(4)
    tl = replay(t, 1514, False, 0)  # 24 blocks against 16 places
    assert tl.nacks > 0
    # The responses still follow each other: the bus carries them back to back, the
    # retried requests and the NACKs (a header each) in between.
    blocks = [64] * 23 + [1514 - 23 * 64]
    responses = sum(transaction(t, b) for b in blocks)
    assert tl.busy_ns == pytest.approx(responses + (24 + 2 * tl.nacks) * CYCLE)
    roomy = replay(timing(4, m5_bridge_buffer=32), 1514, False, 0)
    assert roomy.nacks == 0
    assert roomy.duration_ns == pytest.approx(round_trip_edge(t) + responses)


def _run(bus_timing_, jobs):
    """Run ``jobs`` (start ns, port name, write, bytes) on one M5 bus; end times."""
    env = simpy.Environment()
    bus = M5Bus(env, "h", bus_timing_, NULL_TRACER)
    done = {}

    def job(k, start, port, write, n):
        yield env.timeout(start)
        p = bus.port(port)
        yield from (p.dma_write(NULL_SM, n) if write else p.dma_read(NULL_SM, n))
        done[k] = env.now

    for k, j in enumerate(jobs):
        env.process(job(k, *j))
    env.run()
    return bus, done


def test_split_transactions_free_the_bus_during_a_round_trip():
    # Two devices each read a block at once: the second's request crosses while the
    # first waits for its response, so the second's response follows the first's.
    # Held through the round trip, the second read would begin after the first ended.
    t = timing(4)
    one = round_trip_edge(t) + transaction(t, 64)
    _, done = _run(t, [(0, "a", False, 64), (0, "b", False, 64)])
    assert done[0] == pytest.approx(one)
    assert done[1] == pytest.approx(one + transaction(t, 64))
    assert done[1] < 2 * one


def test_one_port_sends_its_dmas_in_order():
    # Two reads on the same device's port: the second's request waits for the first's
    # to be sent, its response for the first's responses.
    t = timing(4)
    _, done = _run(t, [(0, "a", False, 64), (0, "a", False, 64)])
    assert done[0] < done[1]
    assert done[1] == pytest.approx(round_trip_edge(t) + 2 * transaction(t, 64))


def test_the_bus_counts_its_busy_time_and_bytes():
    t = timing(1)
    bus, done = _run(t, [(0, "a", True, 1514), (0, "b", False, 64)])
    busy = replay(t, 1514, True, 0).busy_ns + replay(t, 64, False, 0).busy_ns
    assert bus.stats.up_ns + bus.stats.down_ns == pytest.approx(busy)
    assert bus.stats.up_bytes == 1514 and bus.stats.down_bytes == 64
    assert max(done.values()) >= busy  # one shared bus: the two never overlap


def test_m5_bus_with_a_modelled_memory_is_refused(capsys):
    from test_bad_input import refused

    msg = refused(
        capsys,
        "run",
        "scenarios/udp-stream.toml",
        "--set",
        "hosts.rx.bus.kind=m5",
        "--set",
        "hosts.rx.memory.bandwidth=100Gbps",
    )
    assert "hosts.rx.bus.kind = m5" in msg and "expected hosts.rx.memory.bandwidth = 0" in msg
    msg = refused(capsys, "run", "scenarios/udp-stream.toml", "--set", "bus.kind=m4")
    assert "bus.kind" in msg and "m5" in msg
    with pytest.raises(CpasimError, match=r"hosts\.tx\.bus\.kind = m5"):
        load_scenario(None, sets=["hosts.tx.bus.kind=m5", "hosts.tx.memory.bandwidth=1Gbps"])
    msg = refused(
        capsys,
        "run",
        "scenarios/udp-stream.toml",
        "--set",
        "bus.kind=m5",
        "--set",
        "bus.m5_backoff_max=2ns",
    )
    assert "bus.m5_backoff_max (2ns) must be at least" in msg and "(4ns)" in msg


def test_m5_bus_is_deterministic_tracing_on_or_off(tmp_path):
    sets = ["sim.duration=3ms", "sim.warmup=1ms", "bus.kind=m5"]
    cfg = load_scenario("scenarios/udp-stream.toml", sets=sets)
    a = simulate(cfg).to_json()
    b = simulate(cfg, trace_path=tmp_path / "t.cpt").to_json()
    for r in (a, b):
        r.pop("wall_s")
    assert a == b
    assert a["goodput_bps"] > 0


def test_pcie_lanes_on_m5s_bus_scale_transfers_and_keep_the_round_trips():
    # M5's bus has the link's bandwidth, and its reads and writes alike wait for
    # their responses: 2 x 100 ns through the bridge and gem5's 30 ns memory.
    from cpasim.predict.transforms_table import plan_change

    cfg = load_scenario(None).with_overrides({"bus.kind": "m5"})
    means = {"tx:NIC TX:DMA packet": 1230.0, "tx:NIC RX:DMA packet": 830.0}
    plan = plan_change(cfg, cfg.with_overrides({"hosts.tx.pcie.lanes": 4}), means)
    f = dict(plan.transforms.scale)
    assert f["tx:NIC TX:DMA packet"] == pytest.approx((230 + 1000 / 4) / 1230)
    assert f["tx:NIC RX:DMA packet"] == pytest.approx((230 + 600 / 4) / 830)


def _write_during(t: M5Timing, at: float, dma: tuple | None):
    """A CPU's register write issued at ``at`` ns, and ``dma`` = (start ns, write, bytes)
    on a device's port; returns (when the write's stall ends, its busy ns, the DMA's
    end, the pool's level after)."""
    from cpasim.model.cpu import Cpu

    env = simpy.Environment()
    bus = M5Bus(env, "h", t, NULL_TRACER)
    cpu = Cpu(env, "h", params=load_scenario(None).host("tx").cpu, tracer=NULL_TRACER)
    out = {}

    def cpu_side():
        yield env.timeout(at)
        yield from bus.cpu_write(NULL_SM, cpu)
        out["write"] = env.now

    def device():
        start, write, n = dma
        yield env.timeout(start)
        p = bus.port("NIC")
        yield from (p.dma_write(NULL_SM, n) if write else p.dma_read(NULL_SM, n))
        out["dma"] = env.now

    env.process(cpu_side())
    if dma is not None:
        env.process(device())
    env.run()
    return out["write"], cpu.busy_ns["driver"], out.get("dma"), bus.up.free


BRIDGE = 100.0  # ns: pcie.latency, the thesis's bridge, crossed both ways
PIO = 1.0  # ns: gem5's PciDevice.pio_latency, the register's answer


def register(t: M5Timing) -> float:
    """A register write's bus time: its transaction, the device's answer, a header."""
    return transaction(t, MMIO_BYTES) + PIO + transaction(t, 0)


def test_a_register_write_on_an_idle_bus_stalls_its_round_trip():
    # M5's bridge does not acknowledge writes early and writel's barrier waits for the
    # store's response: the bridge both ways, the bus both ways, the device's answer.
    t = timing(4)
    done, busy, _, free = _write_during(t, 10.0, None)
    assert done - 10.0 == pytest.approx(2 * BRIDGE + register(t))
    assert busy == pytest.approx(done - 10.0)  # the core stalls: busy
    assert free == 1


def test_a_register_write_waits_behind_the_dma_traffic_queued_ahead():
    # M5's bridge forwards the CPU's write in its one queue towards the I/O bus, behind
    # the responses queued there: issued while a 1514-byte read holds the bus, the
    # write crosses after the read's bus time, and the core stalls all the while.
    t = timing(4)
    (run,) = replay(t, 1514, False, 0).runs
    done, busy, dma_end, free = _write_during(t, 100.0, (0.0, False, 1514))
    assert done == pytest.approx(run.busy_ns + register(t) + BRIDGE)
    assert busy == pytest.approx(done - 100.0)
    assert dma_end == pytest.approx(run.span_ns)  # the read, ahead of it, is not delayed
    assert free == 1


def test_a_dma_asking_after_a_register_write_waits_for_it():
    # The write reaches the bus after the bridge; a DMA asking just after waits for it.
    t = timing(1)
    alone = replay(t, 64, True, 0).duration_ns
    _, _, dma_end, _ = _write_during(t, 0.0, (BRIDGE + 1.0, True, 64))
    assert dma_end == pytest.approx(BRIDGE + register(t) + alone)


def test_register_writes_queue_only_on_m5s_bus():
    from cpasim.model.bus import Bus
    from cpasim.model.m5bus import DmaPort

    assert M5Bus.queues_writes and DmaPort.queues_writes
    assert not Bus.queues_writes  # PCIe: posted, a fixed stall (pcie.mmio_latency)
