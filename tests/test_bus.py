"""I/O bus: PCIe/PCI closed forms, and the simulated channels against them."""

from __future__ import annotations

import math

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from cpasim.config import load_scenario
from cpasim.errors import CpasimError
from cpasim.model.bus import Bus
from cpasim.model.buses import bus_timing
from cpasim.model.pcie import PcieTiming, PciTiming, encoding, pcie_bytes_per_ns
from cpasim.protocol import completion_tlps, read_requests, write_tlps
from cpasim.tracing import NULL_SM, NULL_TRACER, Tracer

# Published lane rates (GT/s) and encodings, written out independently of the model.
GT = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0}
ENC = {1: 8 / 10, 2: 8 / 10, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130}
PAYLOADS = (128, 256, 512, 1024, 2048, 4096)


def pcie(gen=1, lanes=1, mps=256, mrr=512, ovh=24, lat=100.0) -> PcieTiming:
    return PcieTiming(
        gen=gen, lanes=lanes, max_payload=mps, max_read_request=mrr, tlp_overhead=ovh, latency=lat
    )


def test_gen1_x1_is_2gbps_of_data_per_direction():
    # 2.5 GT/s with 8b/10b = 2 Gb/s (seed 004 6.2.1: "2 Gbps of peak I/O bandwidth").
    assert pcie_bytes_per_ns(1, 1) * 8 == pytest.approx(2.0)
    assert pcie_bytes_per_ns(3, 16) * 8 == pytest.approx(8 * 16 * 128 / 130)
    assert encoding(2) == 0.8 and encoding(4) == 128 / 130


@given(
    gen=st.sampled_from(sorted(GT)),
    lanes=st.sampled_from((1, 2, 4, 8, 16, 32)),
    mps=st.sampled_from(PAYLOADS),
    ovh=st.integers(0, 64),
    tlps=st.integers(1, 64),
)
def test_write_rate_matches_closed_form(gen, lanes, mps, ovh, tlps):
    t = pcie(gen, lanes, mps, ovh=ovh)
    n = tlps * mps
    closed = lanes * GT[gen] * ENC[gen] / 8 * mps / (mps + ovh)  # bytes/ns
    assert t.write_rate(n) == pytest.approx(closed, rel=1e-12)


@given(n=st.integers(1, 1 << 20), mps=st.sampled_from(PAYLOADS), mrr=st.sampled_from(PAYLOADS))
def test_tlp_counts(n, mps, mrr):
    assert write_tlps(n, mps) == math.ceil(n / mps)
    assert read_requests(n, mrr) == math.ceil(n / mrr)
    # Completions: one per max_payload of each request, never fewer than the data needs.
    chunks = [mrr] * (n // mrr) + ([n % mrr] if n % mrr else [])
    assert completion_tlps(n, mrr, mps) == sum(math.ceil(c / mps) for c in chunks)
    assert completion_tlps(n, mrr, mps) >= write_tlps(n, mps)


def test_read_pays_one_round_trip_and_request_overhead():
    t = pcie(gen=1, lanes=1, mps=256, mrr=512, ovh=24, lat=100.0)
    occ = t.dma_read(1024)
    assert occ.up_bytes == 2 * 24  # two read requests
    assert occ.down_bytes == 1024 + 4 * 24  # four completions
    assert occ.wait_ns == pytest.approx(24 / 0.25 + 200.0)
    assert occ.down_ns == pytest.approx((1024 + 96) / 0.25)


def test_bad_bus_values_name_the_key():
    with pytest.raises(CpasimError, match="pcie.gen"):
        pcie(gen=6)
    with pytest.raises(CpasimError, match="pcie.lanes"):
        pcie(lanes=0)
    with pytest.raises(CpasimError, match="pcie.max_payload"):
        pcie(mps=0)


def _back_to_back(timing, op: str, nbytes: int, count: int, writers: int = 1) -> float:
    """Simulated bytes/ns of ``writers`` SMs doing ``count`` DMAs each, back to back."""
    env = simpy.Environment()
    tracer = Tracer.in_memory(env)
    bus = Bus(env, "tx", timing, tracer)
    done = []

    def engine(i):
        sm = tracer.sm("tx", "DMA", str(i))
        sm.begin("DMA packet")
        for _ in range(count):
            yield from getattr(bus, op)(sm, nbytes)
        done.append(env.now)

    for i in range(writers):
        env.process(engine(i))
    env.run()
    return writers * count * nbytes / max(done)


@pytest.mark.parametrize(("gen", "lanes", "mps"), [(1, 1, 256), (2, 4, 128), (3, 8, 512)])
def test_simulated_back_to_back_dma_within_2pct_of_closed_form(gen, lanes, mps):
    """The issue's check: PCIe-limited DMA rate from lanes, encoding, TLP overhead and
    max payload, measured through a simulation of back-to-back DMA."""
    t = pcie(gen, lanes, mps, mrr=4096, ovh=24)
    closed = lanes * GT[gen] * ENC[gen] / 8 * mps / (mps + 24)
    # Writes, one engine and two engines contending for the up channel.
    assert _back_to_back(t, "dma_write", 64 * 1024, 50) == pytest.approx(closed, rel=0.02)
    assert _back_to_back(t, "dma_write", 64 * 1024, 25, writers=2) == pytest.approx(
        closed, rel=0.02
    )
    # Reads hold the channel through their round trip (one outstanding read per
    # channel): exactly the closed form with the round trip, within 2% of the
    # bound for 256 KiB reads, and the same with two readers taking turns.
    for readers in (1, 2):
        got = _back_to_back(t, "dma_read", 256 * 1024, 20 // readers, writers=readers)
        assert got == pytest.approx(t.read_rate(256 * 1024), rel=1e-9)
    assert t.read_rate(256 * 1024) == pytest.approx(closed, rel=0.02)


def test_small_reads_are_latency_bound():
    """One engine reading 1.5 KB at a time loses the round trip each time (seed 004:
    x1 gives 1.8 of 2 Gb/s); the measured rate equals the closed form exactly."""
    t = pcie(1, 1, 256, 512)
    rate = _back_to_back(t, "dma_read", 1514, 100)
    assert rate == pytest.approx(t.read_rate(1514), rel=1e-9)
    assert rate < t.write_rate(1514)  # 4% lower: 200 ns per 6 us read


def test_channels_count_bytes_and_busy_time():
    env = simpy.Environment()
    bus = Bus(env, "tx", pcie(), NULL_TRACER)

    def run():
        yield from bus.dma_read(NULL_SM, 1024)
        yield from bus.dma_write(NULL_SM, 512, 16)
        bus.mmio_write()

    env.process(run())
    env.run()
    s = bus.stats
    assert s.bytes == {"up": 2 * 24 + 512 + 2 * 24 + 16 + 24, "down": 1024 + 4 * 24 + 4 + 24}
    # The doorbell (28 B) does not take the channel: bytes only.
    assert s.busy_ns["down"] == pytest.approx((1024 + 96) / 0.25)
    assert s.utilization(env.now)["up"] == pytest.approx(s.busy_ns["up"] / env.now)


def test_pcie_channels_are_full_duplex_and_pci_is_shared():
    def both(timing):
        env = simpy.Environment()
        bus = Bus(env, "tx", timing, NULL_TRACER)

        def reader():
            yield from bus.dma_read(NULL_SM, 8192)

        def writer():
            yield from bus.dma_write(NULL_SM, 8192)

        env.process(reader())
        env.process(writer())
        env.run()
        return env.now

    t = pcie()
    alone = t.dma_read(8192).down_ns + t.dma_read(8192).wait_ns
    assert both(t) == pytest.approx(alone)  # the write goes up meanwhile
    p = PciTiming(width=8, clock=33e6, burst=256, overhead=16, read_wait=42)
    assert both(p) == pytest.approx(p.dma_read(8192).down_ns + p.dma_write(8192).up_ns)


@settings(max_examples=30)
@given(n=st.integers(1, 20000), burst=st.sampled_from((64, 128, 256, 512)))
def test_pci_closed_form(n, burst):
    p = PciTiming(width=8, clock=33e6, burst=burst, overhead=16, read_wait=42)
    cycles_w = math.ceil(n / 8) + math.ceil(n / burst) * 16
    assert p.dma_write(n).up_ns == pytest.approx(cycles_w / 33e6 * 1e9)
    assert p.dma_read(n).down_ns == pytest.approx((cycles_w + math.ceil(n / burst) * 42) / 0.033)


def test_bus_timing_from_config():
    cfg = load_scenario(None, sets=["pcie.gen=3", "pcie.lanes=4", "hosts.rx.bus.kind=pci"])
    tx, rx = (bus_timing(cfg.host(h).bus, cfg.host(h).pcie) for h in ("tx", "rx"))
    assert tx.kind == "pcie" and tx.bytes_per_ns == pytest.approx(4 * 8 * 128 / 130 / 8)
    assert rx.kind == "pci" and rx.width == 8 and rx.clock == 33e6


def test_an_on_die_nic_crosses_m5s_bus():
    # Seed 004's figure 6.6(b) puts the NIC on die, between L1 and L2; its simulator's
    # bus (M5, defaults kept) moves a 64-byte block per transaction at 64 B per 1 GHz
    # cycle, each paying one header cycle: 2 ns per block, both directions shared.
    cfg = load_scenario(None, sets=["hosts.rx.bus.kind=on_die"])
    t = bus_timing(cfg.host("rx").bus, cfg.host("rx").pcie)
    assert t.kind == "on_die" and t.shared
    assert t.dma_write(1514).up_ns == pytest.approx(math.ceil(1514 / 64) * 2)
    occ = t.dma_read(1514)
    assert occ.down_ns == pytest.approx(math.ceil(1514 / 64) * 2) and occ.wait_ns == 0
    tracer = Tracer.in_memory(simpy.Environment())
    bus = Bus(simpy.Environment(), "rx", t, tracer)
    assert bus.up is bus.down


def test_busy_time_before_the_measurement_window_is_left_out():
    """An access that began in the warm-up counts only its part after it."""
    env = simpy.Environment()
    t = pcie()
    bus = Bus(env, "tx", t, NULL_TRACER)
    write = t.dma_write(4096).up_ns
    bus.measure_from = write / 4  # a quarter of the write falls in the warm-up

    def run():
        yield from bus.dma_write(NULL_SM, 4096)

    env.process(run())
    env.run()
    assert bus.stats.busy_ns["up"] == pytest.approx(0.75 * write)
    assert bus.stats.bytes["up"] == t.dma_write(4096).up_bytes  # bytes are not clipped


def test_a_saturated_shared_bus_is_busy_at_most_all_the_time():
    """Seed 002's DP sender saturates its 33 MHz PCI bus: the one bus's two
    directions together stay within 100% (doorbells do not take the bus, so they
    count in bytes only)."""
    from pathlib import Path

    from cpasim.config import load_scenario
    from cpasim.simulate import simulate

    root = Path(__file__).resolve().parent.parent
    cfg = load_scenario(root / "scenarios" / "dp-gedp-smp.toml", sets=["sim.duration=8ms"])
    tx = simulate(cfg).io_bus_utilization["tx"]
    assert 0.95 < tx["up"] + tx["down"] <= 1.0
