"""The data cache model (cpasim.model.cache) against seed 001's (Waheed 2003) cache figures.

The seed's cache overhead is 1 + MR·MP (execution time with the cache over the
ideal one), with MR = W/L for a sequential pass over PDU data (W the access
width, L the line length): a 32-byte line of 16 words gives MR = 1/16, "6.2%";
the worst case MR = 1, MP = 10 makes a transaction 11 times slower; the average
case MR = 0.1, MP = 10 (MR·MP about 1) doubles it, "restricting the throughput
to 1/2".  Figures from calibration/seeds/waheed_bounds.csv; the formulas are the
seed's, so these are checks of the implementation, not fits.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from cpasim.calibrate.reference import read_reference
from cpasim.config import load_scenario
from cpasim.model.cache import HEADERS, Cache, miss_rate, overhead
from cpasim.model.cpu import Cpu
from cpasim.simulate import simulate
from cpasim.tracing import NULL_TRACER

ROOT = Path(__file__).resolve().parent.parent


WAHEED = {f.quantity: f.value for f in read_reference(ROOT / "calibration/seeds/waheed_bounds.csv")}


def seed(quantity: str) -> float:
    return WAHEED[quantity]


def test_sequential_miss_rate_is_word_over_line():
    # 32-byte line, 16 words of 2 bytes: 1/16 = 6.25%, which the seed prints as 6.2%.
    line = int(seed("cache_line_bytes L"))
    mr = miss_rate(word=line // 16, line=line, size=512 * 1024, working_set=0)
    assert mr == 1 / 16
    assert mr * 100 == pytest.approx(seed("miss_rate_sequential MR"), abs=0.05)


def test_overhead_worst_and_average_case():
    mp = seed("miss_penalty_cycles MP")
    assert overhead(1.0, mp) == seed("cache_overhead_worst_case")
    # Average case: MR·MP = 1, the cache doubles the ideal time.
    assert overhead(seed("miss_rate_average_case MR"), mp) == pytest.approx(2.0)


def test_defaults_are_the_seeds_example():
    cache = load_scenario(None).tx.cpu.cache
    assert cache.size == 0  # off
    assert cache.line == seed("cache_line_bytes L")
    assert cache.miss_penalty == seed("miss_penalty_cycles MP")
    assert miss_rate(word=cache.word, line=cache.line, size=1, working_set=0) == 1 / 16


@pytest.mark.parametrize(
    ("working_set", "share"),
    [(0, 1.0), (256 * 1024, 0.0), (512 * 1024, 0.0), (1024 * 1024, 0.5), (8 << 20, 15 / 16)],
)
def test_misses_grow_with_the_working_set(working_set, share):
    mr = miss_rate(word=2, line=32, size=512 * 1024, working_set=working_set)
    assert mr == pytest.approx(share / 16)


def test_per_packet_work_misses_on_its_header_lines():
    # The seed's forwarding: 1 or 2 misses per packet; 54 bytes of headers span
    # two 32-byte lines, one 64-byte line.
    params = SimpleNamespace(
        size=1, line=32, word=2, miss_penalty=10.0, working_set=0, ack_footprint=False
    )
    assert HEADERS == 54
    assert Cache(params).per_packet == 2 * 10.0
    params.line = 64
    assert Cache(params).per_packet == 10.0


def _cpu(*sets):
    cfg = load_scenario(None, sets=list(sets))
    return Cpu(SimpleNamespace(), "tx", params=cfg.tx.cpu, tracer=NULL_TRACER)


def test_cpu_costs_carry_the_overhead():
    plain = _cpu()
    cached = _cpu("cpu.cache.size=512KiB", "cpu.cache.miss_penalty=16")  # MR·MP = 1
    for name in ("copy_send", "copy_recv", "csum"):
        fixed = plain.cycles(name, 0)
        assert cached.cycles(name, 1000) - fixed == pytest.approx(
            2 * (plain.cycles(name, 1000) - fixed)
        )
    assert cached.cycles("rx_packet") == plain.cycles("rx_packet") + 2 * 16
    assert cached.cycles("syscall") == plain.cycles("syscall")  # no data of its own


def test_a_copy_bound_sender_slows_by_the_overhead():
    # A UDP sender whose CPU does little but copy: with MR·MP = 1 each byte's copy
    # takes twice as long, so the copy's busy time per byte sent doubles.
    # (400 Mb/s of copying on the sender: it, not the link or the receiver, binds.)
    base = ["workload.kind=udp_stream", "workload.message_size=8KiB", "cpu.freq=1GHz"]
    base += ["hosts.tx.cpu.cost.copy_per_byte=20", "sim.duration=20ms", "sim.warmup=2ms"]
    goodput = {}

    def copy_ns_per_byte(*sets):
        r = simulate(load_scenario(None, sets=[*base, *sets]))
        goodput[sets] = r.goodput_bps
        return r.cpu_utilization["tx"]["copy"] / r.goodput_bps

    plain = copy_ns_per_byte()
    cached = copy_ns_per_byte(
        "hosts.tx.cpu.cache.size=512KiB", "hosts.tx.cpu.cache.miss_penalty=16"
    )
    assert cached / plain == pytest.approx(2.0, rel=0.02)
    # The seed's "throughput restricted to 1/2": achieved 0.51 (the per-packet work
    # does not double).
    plain_bps, cached_bps = goodput.values()
    assert cached_bps / plain_bps == pytest.approx(0.5, rel=0.03)
    # A working set that fits in the cache: no misses on the data.
    fits = copy_ns_per_byte(
        "hosts.tx.cpu.cache.size=512KiB",
        "hosts.tx.cpu.cache.miss_penalty=16",
        "hosts.tx.cpu.cache.working_set=64KiB",
    )
    assert fits / plain == pytest.approx(1.0, rel=0.02)


def _cache(**over) -> Cache:
    params = dict(size=64 * 1024, line=64, word=8, miss_penalty=10.0, working_set=0)
    return Cache(SimpleNamespace(**{**params, "ack_footprint": True, **over}))


def test_an_ack_misses_in_the_share_of_its_footprint_beyond_the_cache():
    """cpu.cache.ack_footprint: the working-set rule with the data sent since the
    acknowledged buffers were last touched as the working set."""
    cache = _cache()
    assert cache.ack_stretch(32 * 1024) == 1.0  # all of it still in the cache
    assert cache.ack_stretch(64 * 1024) == 1.0
    assert cache.ack_stretch(128 * 1024) == pytest.approx(1 + 0.5 * 10)
    # Far beyond the cache the ACK's work all misses: the seed's "approximately 10x".
    assert cache.ack_stretch(1 << 30) == pytest.approx(11, rel=1e-3)
    assert _cache(ack_footprint=False).ack_stretch(1 << 30) == 1.0


def test_acks_grow_dearer_as_the_window_outgrows_the_cache():
    """A TCP stream whose flight outgrows a small cache spends more on its ACKs with
    the footprint rule on; with the flight inside the cache, nothing changes."""
    base = ["sim.duration=4ms", "sim.warmup=1ms", "hosts.tx.cpu.cache.size=4KiB"]
    off = simulate(load_scenario(None, sets=base))
    on = simulate(load_scenario(None, sets=[*base, "hosts.tx.cpu.cache.ack_footprint=true"]))
    assert on.cpu_utilization["tx"]["stack"] > 1.2 * off.cpu_utilization["tx"]["stack"]
    big = [*base[:2], "hosts.tx.cpu.cache.size=64MiB"]
    a = simulate(load_scenario(None, sets=big)).to_json()
    b = simulate(load_scenario(None, sets=[*big, "hosts.tx.cpu.cache.ack_footprint=true"]))
    b = b.to_json()
    for r in (a, b):
        r.pop("wall_s"), r.pop("config_digest")
    assert a == b
