"""Busy time is counted over the measured interval only, so no utilisation exceeds 100%.

The interval runs from ``sim.warmup`` to ``sim.duration``: work, a frame or a DMA
that crosses either end counts only its part inside (the I/O bus's own cases are in
``tests/test_bus.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import simpy

from cpasim.config import load_scenario
from cpasim.model.cpu import Cpu
from cpasim.simulate import simulate
from cpasim.tracing import NULL_SM, NULL_TRACER

ROOT = Path(__file__).resolve().parent.parent


def _cpu(since: float, until: float) -> tuple[simpy.Environment, Cpu]:
    env = simpy.Environment()
    params = load_scenario(None, sets=["cpu.freq=1GHz"]).host("tx").cpu  # 1 ns per cycle
    cpu = Cpu(env, "tx", params=params, tracer=NULL_TRACER)
    cpu.start_measuring(since, until)
    return env, cpu


def _run(env, gen) -> None:
    env.process(gen)
    env.run()


def test_work_across_both_ends_counts_its_inside():
    env, cpu = _cpu(since=100.0, until=250.0)

    def work():
        yield env.timeout(50.0)
        yield cpu.work("copy", 300.0)  # 50..350: 150 ns inside

    _run(env, work())
    assert cpu.busy_ns["copy"] == pytest.approx(150.0)


def test_spend_counts_each_category_where_it_falls():
    """One spend is its categories' work back to back: stack 0..100, copy 100..300."""
    env, cpu = _cpu(since=150.0, until=250.0)

    def work():
        yield cpu.spend(NULL_SM, "s", stack=100.0, copy=200.0)

    _run(env, work())
    assert cpu.busy_ns["stack"] == 0.0
    assert cpu.busy_ns["copy"] == pytest.approx(100.0)


def test_spend_past_the_end_takes_its_tail_back():
    env, cpu = _cpu(since=0.0, until=150.0)

    def work():
        yield cpu.spend(NULL_SM, "s", stack=100.0, copy=200.0)  # copy 100..300

    _run(env, work())
    assert cpu.busy_ns == pytest.approx({**cpu.busy_ns, "stack": 100.0, "copy": 50.0})


@pytest.mark.parametrize(
    ("scenario", "sets"),
    [
        pytest.param(  # server core saturated
            "webserver.toml", ["sim.duration=30ms", "sim.warmup=10ms"], marks=pytest.mark.slow
        ),
        ("udp-stream.toml", ["sim.duration=6ms", "sim.warmup=1ms", "hosts.tx.pcie.lanes=4"]),
    ],
)
def test_a_saturated_core_is_busy_at_most_all_the_time(scenario, sets):
    cpu = simulate(load_scenario(ROOT / "scenarios" / scenario, sets=sets)).cpu_utilization["tx"]
    busy = sum(v for k, v in cpu.items() if k != "idle")
    # (A core busy all the time sums its categories' shares to 1 within rounding.)
    assert 0.95 < busy <= 1.0 + 1e-12


def test_saturated_link_and_bottleneck_stay_within_all_the_time():
    link = simulate(load_scenario(None, sets=["sim.duration=5ms", "sim.warmup=1ms"]))
    assert 0.9 < link.link_utilization["tx_to_rx"] <= 1.0
    shaped = simulate(
        load_scenario(None, sets=["sim.duration=20ms", "sim.warmup=3ms", "bottleneck.rate=300Mbps"])
    )
    assert 0.9 < shaped.bottleneck_utilization["tx_to_rx"] <= 1.0
