"""Interrupts preempting the sender's system call (``cpu.irq_preempt``, Linux 2.6.13's
send path): the work is cut where the interrupt comes, resumes for what was left when
the handler gives the core back, and its busy time follows it."""

from __future__ import annotations

from pathlib import Path

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from cpasim.config import load_scenario
from cpasim.errors import CpasimError
from cpasim.model.cpu import Cpu
from cpasim.tracing import NULL_SM, NULL_TRACER

ROOT = Path(__file__).resolve().parent.parent
PREEMPT = ["cpu.freq=1GHz", "ip.send_path=2.6.13", "cpu.irq_preempt=true"]  # 1 ns per cycle


def _cpu(sets, since: float = 0.0, until: float = float("inf")):
    env = simpy.Environment()
    cpu = Cpu(env, "tx", params=load_scenario(None, sets=sets).host("tx").cpu, tracer=NULL_TRACER)
    cpu.start_measuring(since, until)
    return env, cpu


def test_preempted_work_resumes_for_what_was_left_and_its_busy_time_moves_with_it():
    # stack 0..40 then copy 40..100; the interrupt takes the core from 30 to 80, so the
    # work ends at 150: stack 0..30 and 80..90, copy 90..150, of which 90..120 is measured.
    env, cpu = _cpu(PREEMPT, until=120.0)
    ended = []

    def sender():
        cpu.interruptible()
        yield cpu.spend(NULL_SM, "s", stack=40.0, copy=60.0)
        ended.append(env.now)

    def interrupt():
        yield env.timeout(30.0)
        (work,) = cpu.working
        back = cpu.preempt(work)
        assert cpu.working == []
        yield env.timeout(50.0)
        back.succeed()

    env.process(sender())
    env.process(interrupt())
    env.run()
    assert ended == [150.0]
    assert cpu.busy_ns["stack"] == pytest.approx(40.0)
    assert cpu.busy_ns["copy"] == pytest.approx(30.0)


def test_work_preempted_twice_still_does_all_of_it():
    env, cpu = _cpu(PREEMPT)
    ended = []

    def sender():
        cpu.interruptible()
        yield cpu.spend(NULL_SM, "s", copy=100.0)
        ended.append(env.now)

    def interrupts():
        for at in (10.0, 60.0):  # 10..30, then 70..75 of the work's own clock + 20
            yield env.timeout(at - env.now)
            back = cpu.preempt(cpu.working[0])
            yield env.timeout(20.0 if at == 10.0 else 5.0)
            back.succeed()

    env.process(sender())
    env.process(interrupts())
    env.run()
    assert ended == [125.0]
    assert cpu.busy_ns["copy"] == pytest.approx(100.0)


def test_without_irq_preempt_nothing_is_interruptible():
    env, cpu = _cpu(["cpu.freq=1GHz", "ip.send_path=2.6.13"])
    events = []

    def sender():
        cpu.interruptible()
        events.append(cpu.spend(NULL_SM, "s", copy=10.0))
        yield events[-1]

    env.process(sender())
    env.run()
    assert isinstance(events[0], simpy.events.Timeout)


def test_only_the_registered_process_is_interruptible():
    """Untraced, every SM is the same handle: what is interruptible is the process."""
    env, cpu = _cpu(PREEMPT)
    kinds = {}

    def worker(name, register):
        if register:
            cpu.interruptible()
        event = cpu.spend(NULL_SM, "s", copy=10.0)
        kinds[name] = type(event)
        yield event

    env.process(worker("sender", True))
    env.process(worker("softirq", False))
    env.run()
    assert kinds["softirq"] is simpy.events.Timeout
    assert kinds["sender"] is not simpy.events.Timeout


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        (["cpu.irq_preempt=true"], 'ip.send_path = "2.6.13"'),
        (
            ["cpu.irq_preempt=true", "ip.send_path=2.6.13", "cpu.cores=2", "cpu.irq_cores=1"],
            "cpu.irq_cores = 0",
        ),
    ],
)
def test_irq_preempt_needs_the_2613_path_and_shared_cores(sets, expected):
    with pytest.raises(CpasimError, match="hosts.tx.cpu.irq_preempt needs") as err:
        load_scenario(None, sets=sets)
    assert expected in str(err.value)


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(
    size=st.sampled_from(["1400B", "4KiB", "16KiB", "60000B"]),
    lanes=st.sampled_from(["1", "4"]),
    netfilter=st.booleans(),
    xmit_frame=st.sampled_from(["0", "3000"]),
)
def test_preempted_runs_keep_the_path_whole_and_no_core_over_full(
    size, lanes, netfilter, xmit_frame
):
    """Whatever the datagram, bus and transmit: the critical path is the whole measured
    run (the identity invariant), no core is busy more than all the time, and the run
    is the same traced or not."""
    from cpasim.analysis import analyze
    from cpasim.simulate import simulate
    from cpasim.tracing import Tracer

    cfg = load_scenario(
        ROOT / "scenarios" / "udp-stream.toml",
        sets=[
            "sim.duration=4ms",
            "sim.warmup=1ms",
            f"workload.message_size={size}",
            f"hosts.tx.pcie.lanes={lanes}",
            f"hosts.tx.ip.netfilter={str(netfilter).lower()}",
            f"hosts.tx.cpu.cost.xmit_frame={xmit_frame}",
            "hosts.tx.cpu.irq_preempt=true",
        ],
    )
    holder = {}

    def make(env):
        holder["t"] = Tracer.in_memory(env)
        return holder["t"]

    traced = simulate(cfg, tracer=make)
    plain = simulate(cfg)
    assert traced.goodput_bps == plain.goodput_bps
    assert traced.cpu_utilization == plain.cpu_utilization
    busy = sum(v for k, v in traced.cpu_utilization["tx"].items() if k != "idle")
    assert busy <= 1.0 + 1e-9
    path = analyze(holder["t"].source(), traced.analysis_start, traced.analysis_end).path
    assert path.critical_path_ns == pytest.approx(path.elapsed_ns, rel=1e-9)
