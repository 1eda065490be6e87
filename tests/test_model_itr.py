"""Adaptive interrupt throttling (``nic.itr=adaptive``, e1000's dynamic ITR)."""

from __future__ import annotations

import pytest
import simpy

from cpasim.config import load_scenario
from cpasim.errors import CpasimError
from cpasim.model.moderation import (
    BULK_LATENCY,
    LOW_LATENCY,
    LOWEST_LATENCY,
    AdaptiveItr,
    itr_gap_ns,
    next_latency_class,
)
from cpasim.model.system import System
from cpasim.simulate import simulate
from cpasim.tracing import NULL_TRACER


@pytest.mark.parametrize(
    ("current", "packets", "nbytes", "expected"),
    [
        (LOWEST_LATENCY, 0, 0, LOWEST_LATENCY),  # nothing cleaned: no change
        (LOWEST_LATENCY, 1, 9000, BULK_LATENCY),  # jumbo frames
        (LOWEST_LATENCY, 2, 1200, LOW_LATENCY),  # few, not tiny
        (LOWEST_LATENCY, 2, 200, LOWEST_LATENCY),  # ping-pong of small messages
        (LOW_LATENCY, 8, 12112, BULK_LATENCY),  # a writeback of full frames
        (LOW_LATENCY, 40, 12000, LOWEST_LATENCY),  # many small packets
        (LOW_LATENCY, 4, 6056, LOW_LATENCY),  # mixed: stays
        (LOW_LATENCY, 2, 4400, BULK_LATENCY),  # > 2000 bytes per packet
        (LOW_LATENCY, 2, 132, LOWEST_LATENCY),  # two ACKs
        (BULK_LATENCY, 20, 30280, BULK_LATENCY),  # a 1 Gb/s stream at 4000/s
        (BULK_LATENCY, 40, 30000, LOW_LATENCY),  # many packets
        (BULK_LATENCY, 3, 4000, LOW_LATENCY),  # traffic fell off
    ],
)
def test_latency_class_rules_of_e1000_update_itr(current, packets, nbytes, expected):
    assert next_latency_class(current, packets, nbytes) == expected


def test_itr_register_granularity_and_rates():
    assert itr_gap_ns(4000) == 976 * 256  # 249.856 us
    assert itr_gap_ns(20000) == 195 * 256
    assert itr_gap_ns(70000) == 55 * 256


def test_rate_falls_at_once_and_rises_a_quarter_step_at_a_time():
    itr = AdaptiveItr()
    assert itr.gap == itr_gap_ns(20000)  # the driver's initial setting
    itr.tx_packets, itr.tx_bytes = 8, 12112  # full frames, from the lowest class: stays
    assert itr.update() == itr_gap_ns(37500)  # 70000/s, approached a quarter at a time
    itr.tx_packets, itr.tx_bytes = 2, 3028  # few full frames: low latency class
    itr.update()
    itr.tx_packets, itr.tx_bytes = 8, 12112
    assert itr.update() == itr_gap_ns(4000)  # bulk: the rate falls at once
    rates = []
    for _ in range(4):  # traffic falls off: back up towards 20000/s by 5000 a step
        itr.tx_packets, itr.tx_bytes = 3, 4000
        itr.update()
        rates.append(itr.rate)
    assert rates == [9000, 14000, 19000, 20000]


def _interrupts(sets, until=20e6):
    cfg = load_scenario(None, sets=["link.delay=100us", "sim.warmup=0s", *sets])
    env = simpy.Environment()
    system = System(cfg, env, NULL_TRACER)
    env.run(until=until)
    return {h: system.hosts[h].dev.stats.interrupts for h in ("tx", "rx")}, system


@pytest.mark.slow
def test_bulk_stream_interrupts_at_most_at_the_bulk_rate():
    adaptive, system = _interrupts(["nic.itr=adaptive"])
    off, _ = _interrupts(["nic.itr=off"])
    # 20 ms at 4000/s = 80 interrupts; the start (slow start, lower classes) adds some.
    for h in ("tx", "rx"):
        assert adaptive[h] < off[h] / 3
    assert adaptive["tx"] <= 20e6 / itr_gap_ns(20000) + 1  # never above the mixed rate
    assert system.hosts["tx"].dev.irq.itr.rate == 4000  # the sender settles in bulk


def test_small_message_ping_pong_latency_is_kept():
    """A quiet line interrupts at once, and small messages keep the 14 us class:
    the round trip of 64-byte messages is what it is without throttling."""

    def p50(itr):
        cfg = load_scenario(
            None,
            sets=[
                "workload.kind=pingpong",
                "workload.message_size=64B",
                "link.delay=10us",
                "sim.duration=5ms",
                "sim.warmup=1ms",
                f"nic.itr={itr}",
            ],
        )
        return simulate(cfg).latency_ns["p50"]

    assert p50("adaptive") == pytest.approx(p50("off"), rel=0.01)  # achieved: equal


def test_throttle_usecs_needs_fixed_mode():
    # Refused with the configuration, before anything is built.
    sets = ["nic.throttle_usecs=50us", "sim.duration=1ms", "sim.warmup=0s"]
    with pytest.raises(CpasimError, match="nic.throttle_usecs.*nic.itr=fixed"):
        load_scenario(None, sets=sets)
    fixed = load_scenario(None, sets=[*sets, "nic.itr=fixed"])
    assert simulate(fixed).bytes_delivered > 0
