"""The memory system, the per-direction copy costs and the DMA copy engine (model level).

Short whole-system runs: what each new key does, that off costs nothing (no
object is built, results are those of a host without it), that the engine is
fully annotated (the critical path explains the whole run) and keeps the byte
and CPU-time accounting true.
"""

from __future__ import annotations

import pytest
import simpy

from cpasim.config import load_scenario
from cpasim.model.bus import Bus
from cpasim.model.system import System
from cpasim.simulate import simulate
from cpasim.tracing import NULL_TRACER

SHORT = ["sim.duration=4ms", "sim.warmup=1ms"]
ENGINE = ["hosts.rx.copy_engine.enabled=true"]
IO_BUS = [*ENGINE, "hosts.rx.copy_engine.location=io_bus"]


def _run(*sets: str):
    return simulate(load_scenario(None, sets=[*SHORT, *sets]))


def _system(*sets: str) -> System:
    cfg = load_scenario(None, sets=[*SHORT, *sets])
    env = simpy.Environment()
    system = System(cfg, env, NULL_TRACER)
    env.run(until=cfg.sim.duration)
    return system


def _same(a, b) -> bool:
    ja, jb = a.to_json(), b.to_json()
    for r in (ja, jb):
        r.pop("config_digest", None)
        r.pop("wall_s", None)
        r.pop("events_per_s", None)
        r.pop("memory_utilization", None)  # reported only where a memory is modelled
    return ja == jb


# -- off costs nothing -------------------------------------------------------------------


def test_defaults_build_no_memory_and_no_engine():
    system = _system()
    for host in system.hosts.values():
        assert host.memory is None and host.cpu.memory is None
        assert host.engine is None
        assert type(host.dev.bus) is Bus
        assert not hasattr(host.tcp[0], "backlog")  # no socket lock either


def test_copy_directions_default_to_copy_per_byte():
    base = _run("cpu.cost.copy_per_byte=2")
    both = _run(
        "cpu.cost.copy_per_byte=2",
        "cpu.cost.copy_send_per_byte=2",
        "cpu.cost.copy_recv_per_byte=2",
    )
    assert _same(base, both)


def test_each_copy_direction_has_its_own_cost():
    base = _run()
    # Host rx only reads in a TCP stream: its send-side cost changes nothing, its
    # receive-side cost its copy time.
    assert _same(base, _run("hosts.rx.cpu.cost.copy_send_per_byte=5"))
    recv = _run("hosts.rx.cpu.cost.copy_recv_per_byte=5")
    assert recv.cpu_utilization["rx"]["copy"] > 3 * base.cpu_utilization["rx"]["copy"]
    assert recv.cpu_utilization["tx"]["copy"] == pytest.approx(
        base.cpu_utilization["tx"]["copy"], rel=0.1
    )
    send = _run("hosts.tx.cpu.cost.copy_send_per_byte=5")
    assert send.cpu_utilization["tx"]["copy"] > 3 * base.cpu_utilization["tx"]["copy"]


# -- the memory --------------------------------------------------------------------------


def test_an_unbounded_memory_changes_nothing():
    """The memory acts only through contention: with bandwidth to spare no access waits."""
    assert _same(_run(), _run("memory.bandwidth=100Tbps"))


def test_a_slow_memory_limits_dma_and_copies():
    base = _system()
    slow = _system("memory.bandwidth=4Gbps")
    assert slow.stats.read_measured < 0.8 * base.stats.read_measured
    mem = slow.rx.memory
    assert mem is not None and slow.rx.cpu.memory is mem
    elapsed = slow.env.now
    # DMA in, copy out (read and write): at least three times the payload went through it.
    assert mem.bytes >= 3 * slow.stats.read
    assert 0.0 < mem.utilization(elapsed) <= 1.0


def test_memory_latency_delays_device_reads():
    quiet = ["workload.kind=pingpong", "nic.itr=off", "tcp.nagle=false"]
    slow = _run(*quiet, "memory.bandwidth=100Tbps", "memory.latency=2us")
    base = _run(*quiet)
    assert slow.latency_ns["mean"] > base.latency_ns["mean"] + 2 * 2e3


# -- the copy engine ---------------------------------------------------------------------


def test_the_engine_does_the_receive_copies():
    system = _system(*ENGINE)
    engine, cpu = system.rx.engine, system.rx.cpu
    assert engine is not None and system.tx.engine is None
    assert engine.bytes >= system.stats.read - 64 * 1024  # all but the last read's
    assert engine.copies >= engine.bytes // 1448
    assert cpu.busy_ns["copy"] > 0  # the reader spins until its copies are done
    # Asleep instead, the core does no copy work at all.
    asleep = _system(*ENGINE, "hosts.rx.copy_engine.wait=sleep")
    assert asleep.rx.cpu.busy_ns["copy"] == 0.0
    assert asleep.rx.engine.bytes > 0


def test_on_the_io_bus_the_data_crosses_the_bus_three_times():
    base = _system()
    io = _system(*IO_BUS)
    per = {}
    for name, s in (("none", base), ("io", io)):
        b = s.rx.dev.stats.bus
        # Per byte received: a read still waiting for its copies at the end is not in
        # stats.read, though its bytes crossed the bus.
        got = s.rx.tcp[0].receiver.rcv_nxt
        per[name] = (b.up_bytes / got, b.down_bytes / got)
    up, down = per["io"]
    # The NIC's and the engine's writes (and the engine's read requests) go up.
    assert 1.9 * per["none"][0] < up < 2.7 * per["none"][0]
    assert down > 0.95 and down > 10 * per["none"][1]  # the engine's reads


def test_cpu_time_never_exceeds_the_cores_while_spinning():
    for sets in (ENGINE, IO_BUS, [*ENGINE, "hosts.rx.cpu.cores=2"]):
        r = _run(*sets)
        busy = sum(v for k, v in r.cpu_utilization["rx"].items() if k != "idle")
        assert busy <= 1.0 + 1e-9 and r.cpu_utilization["rx"]["idle"] >= 0.0


@pytest.mark.slow  # the quick suite checks each key in tests/test_params_matter.py
@pytest.mark.parametrize(
    ("key", "value", "sets"),
    [
        ("copy_engine.location", "io_bus", ENGINE),
        ("copy_engine.latency", "2us", ENGINE),
        ("copy_engine.completion_latency", "2us", ENGINE),
        ("copy_engine.rate", "2Gbps", ENGINE),
        ("copy_engine.ring", "8", (*ENGINE, "link.rate=10Gbps")),
        ("copy_engine.batch", "1", ENGINE),
        ("copy_engine.copy_size", "512B", ENGINE),
        ("copy_engine.page_size", "1KiB", ENGINE),
        ("copy_engine.desc_size", "1KiB", IO_BUS),
        ("copy_engine.desc_size", "4KiB", ENGINE),
        ("copy_engine.mmio_latency", "5us", ENGINE),
        ("copy_engine.wait", "sleep", ENGINE),
        ("memory.bandwidth", "2Gbps", ()),
        ("memory.latency", "5us", ("memory.bandwidth=1Tbps",)),
    ],
)
def test_every_new_key_changes_the_run(key, value, sets):
    base = _run(*sets)
    changed = _run(*sets, f"hosts.rx.{key}={value}")
    assert not _same(base, changed), key


def test_a_small_descriptor_ring_makes_the_reader_wait_for_descriptors():
    fast = (*ENGINE, "link.rate=10Gbps")  # reads of many segments
    assert _system(*fast).rx.engine.desc_waits == 0  # 128 descriptors: never short
    small = _system(*fast, "hosts.rx.copy_engine.ring=8")
    assert small.rx.engine.desc_waits > 0
    assert small.stats.read > 0


@pytest.mark.parametrize("sets", [ENGINE, IO_BUS, [*ENGINE, "link.loss=0.02", "sim.seed=3"]])
def test_bytes_are_conserved_with_the_engine(sets):
    system = _system("sim.duration=20ms", *sets)
    tx, rx = system.tx.tcp[0], system.rx.tcp[0]
    s, r = tx.sender, rx.receiver
    assert system.stats.read > 0
    early = rx.netdma.got  # copied early for a read() not yet returned
    assert r.rcv_nxt - int(rx.rcvbuf.level) - rx.rcv_in_copy - early == system.stats.read
    unacked = tx.bytes_queued - s.snd_una
    assert int(tx.sndbuf.level) + unacked + tx.snd_in_copy == tx.sndbuf_size


def test_memory_utilization_is_reported_only_where_modelled():
    assert "memory_utilization" not in _run().to_json()
    r = _run("hosts.rx.memory.bandwidth=8Gbps")
    assert set(r.memory_utilization) == {"rx"}
    assert 0.0 < r.memory_utilization["rx"] <= 1.0


def test_a_copy_that_costs_nothing_moves_nothing_through_memory():
    """A zero-copy path (no copy cycles) leaves the memory to the DMA alone."""
    zero = _system("memory.bandwidth=100Tbps", "cpu.cost.copy_per_byte=0", "cpu.cost.copy=0")
    copying = _system("memory.bandwidth=100Tbps")
    assert zero.rx.memory.bytes < 1.2 * zero.stats.read
    assert copying.rx.memory.bytes > 2.5 * copying.stats.read


@pytest.mark.parametrize(
    "sets",
    [
        (*IO_BUS, "memory.bandwidth=20Gbps", "link.loss=0.01"),
        pytest.param(
            (*ENGINE, "hosts.rx.copy_engine.wait=sleep", "workload.connections=2"),
            marks=pytest.mark.slow,
        ),
    ],
)
def test_same_seed_same_results_and_tracing_changes_nothing(sets, tmp_path):
    from cpasim.tracing import Tracer

    cfg = load_scenario(None, sets=[*SHORT, *sets])

    def plain(**kw):
        out = simulate(cfg, **kw).to_json()
        out.pop("wall_s")
        return out

    first = plain()
    assert plain() == first
    assert plain(tracer=Tracer.in_memory) == first
    assert plain(trace_path=tmp_path / "t.cpt") == first


# -- the engine's timing: the seed's simulator's (gem5's CopyEngine) ------------------------


def test_the_driver_cuts_copies_at_user_pages_and_the_transfer_cap():
    engine = _system(*ENGINE).rx.engine
    descs = engine.descriptors(64 * 1024, 1448)
    assert sum(abs(d) for d in descs) == 64 * 1024
    # 46 segments, 7 of them across one of the buffer's 8 KiB pages (Alpha Linux's).
    assert len(descs) == 53 and all(d < 0 for d in descs)
    engine.page_size = 0
    assert len(engine.descriptors(64 * 1024, 1448)) == 46
    # A copy longer than the engine's transfer cap is cut; only its last descriptor
    # writes a completion status.
    engine.copy_size = 512
    assert engine.descriptors(1448, 1448) == [512, 512, -424]


def test_each_descriptor_is_done_in_series_as_gem5s_engine():
    """An on-die engine alone on its interconnect: one copy takes the next-pointer read
    (the append found the chain's end), the descriptor read, latBeforeBegin, the read,
    the write, the completion status and latAfterCompletion, one after another."""
    from types import SimpleNamespace

    from cpasim.config import load_scenario
    from cpasim.model.buses import on_die_timing
    from cpasim.model.copy_engine import CopyEngine
    from cpasim.protocol import IOAT_COMPLETION_BYTES, IOAT_NEXT_POINTER_BYTES

    p = load_scenario(None, sets=ENGINE).rx
    env = simpy.Environment()
    timing = on_die_timing(p.bus)
    cpu = SimpleNamespace(ns_per_cycle=0.25, cost=SimpleNamespace(descriptor=150.0))
    engine = CopyEngine(
        env,
        "rx",
        NULL_TRACER,
        params=p.copy_engine,
        bus_mmio_latency=0.0,
        cpu=cpu,
        port=Bus(env, "rx", timing, NULL_TRACER),
    )
    engine._link([-1448], engine.done_for("0"))
    engine.ring.give(1, None)
    env.run(until=engine.done_for("0").get(1, None))

    def read(n):
        occ = timing.dma_read(n)
        return occ.wait_ns + occ.down_ns

    expected = (
        read(IOAT_NEXT_POINTER_BYTES)
        + read(p.copy_engine.desc_size)
        + p.copy_engine.latency
        + read(1448)
        + timing.dma_write(1448).up_ns
        + timing.dma_write(IOAT_COMPLETION_BYTES).up_ns
        + p.copy_engine.completion_latency
    )
    assert env.now == pytest.approx(expected)
    assert engine.copies == 1 and engine.bytes == 1448
