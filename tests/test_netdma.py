"""Linux 2.6.18's NET_DMA receive (cpasim.model.netdma) and the sender's PSH marks."""

from __future__ import annotations

import pytest
import simpy

from cpasim.config import load_scenario
from cpasim.model.bus import Bus
from cpasim.model.buses import on_die_timing
from cpasim.model.copy_engine import CopyEngine
from cpasim.model.packet import PSH
from cpasim.model.system import System
from cpasim.tracing import NULL_TRACER

SHORT = ["sim.duration=6ms", "sim.warmup=1ms"]
ENGINE = ["hosts.rx.copy_engine.enabled=true"]
IO_BUS = [*ENGINE, "hosts.rx.copy_engine.location=io_bus"]


def _system(*sets: str, watch=None) -> System:
    """A short run; ``watch(pkt)`` sees every segment the receiver's TCP processes."""
    cfg = load_scenario(None, sets=[*SHORT, *sets])
    env = simpy.Environment()
    system = System(cfg, env, NULL_TRACER)
    if watch is not None:
        conn = system.rx.tcp[0]
        receive = conn.receive

        def watched(sm, pkt):
            watch(pkt)
            return receive(sm, pkt)

        conn.receive = watched
    env.run(until=cfg.sim.duration)
    return system


def test_the_segment_holding_the_end_of_each_write_carries_psh():
    seen = []
    _system(watch=lambda p: p.payload and seen.append((p.seq, p.payload, p.flags)))
    write = load_scenario(None).workload.write_size
    assert len(seen) > 100
    pushed = [(s, n) for s, n, f in seen if f & PSH]
    # tcp_push marks the segment the write's last byte is in: one per write.
    for seq, n in pushed:
        assert (seq + n) // write > seq // write or (seq + n) % write == 0
    ends = {(seq + n - 1) // write for seq, n in pushed}
    first, last = seen[0][0] // write, (seen[-1][0] + seen[-1][1]) // write
    assert ends >= set(range(first + 1, last))
    assert len(pushed) < len(seen) / 20


def test_a_sleeping_reader_gets_its_segments_copied_by_the_softirq():
    """Link-bound (1 Gb/s, the engine on die): the reader sleeps, the softirq hands each
    segment to the engine as it comes, and wakes the reader at the end of the sender's
    write."""
    system = _system(*ENGINE, "sim.duration=20ms")
    nd, read = system.rx.tcp[0].netdma, system.stats.read
    assert nd.early_bytes > 0.9 * read
    # Reads end where the sender's writes did (PSH): most are a write long, or the
    # few segments queued while the last reader had not run yet.
    assert read / nd.reads > 16 * 1024
    assert system.rx.engine.bytes >= read


def test_a_reader_that_finds_data_queued_copies_it_itself():
    """Receiver-bound (the engine on PCIe x1, about 0.5 Gb/s): data is queued when the
    reader comes, so it issues the copies itself, and the softirq copies little early."""
    system = _system(*IO_BUS, "sim.duration=20ms")
    nd = system.rx.tcp[0].netdma
    assert system.stats.read > 0
    assert nd.early_bytes < 0.2 * system.stats.read


def _engine():
    p = load_scenario(None, sets=ENGINE).rx
    env = simpy.Environment()
    cpu = type("Cpu", (), {"ns_per_cycle": 0.25, "cost": type("C", (), {"descriptor": 150.0})})
    port = Bus(env, "rx", on_die_timing(p.bus), NULL_TRACER)
    engine = CopyEngine(
        env, "rx", NULL_TRACER, params=p.copy_engine, bus_mmio_latency=0.0, cpu=cpu, port=port
    )
    return env, engine


def test_a_running_engine_reaches_descriptors_linked_behind_it_without_an_append():
    env, engine = _engine()
    engine._link([-1448], engine.done_for("0"))
    env.run(until=env.process(engine._append(None)))
    while engine.sizes:  # until the engine has read the descriptor and begun its copy
        env.step()
    engine._link(
        [-1448], engine.done_for("0")
    )  # linked, not announced: the driver's pending < batch
    env.run(until=env.now + 100_000.0)
    assert engine.copies == 1  # fetched before the link: its next pointer was null
    engine._link([-1448], engine.done_for("0"))
    assert engine.pending == 2 and engine.linked == 2
    env.run(until=env.now + 100_000.0)
    assert engine.copies == 1  # an idle engine waits for the append
    env.run(until=env.process(engine._append(None)))
    env.run(until=env.now + 100_000.0)
    assert engine.copies == 3 and engine.pending == engine.linked == 0


def test_descriptors_linked_before_the_engine_fetches_the_last_are_chained():
    env, engine = _engine()
    engine._link([-1448], engine.done_for("0"))
    env.run(until=env.process(engine._append(None)))
    engine._link(
        [-1448, -1448], engine.done_for("0")
    )  # before the engine has read the first descriptor
    env.run(until=env.now + 100_000.0)
    assert engine.copies == 3
    assert engine.linked == 0 and engine.pending == 2  # reached without an append


@pytest.mark.parametrize("sets", [IO_BUS, [*ENGINE, "hosts.rx.copy_engine.batch=1"]])
def test_every_copy_completes_and_its_descriptor_comes_back(sets):
    system = _system(*sets, "sim.duration=20ms")
    engine = system.rx.engine
    ring = load_scenario(None, sets=list(sets)).rx.copy_engine.ring
    # Free, linked and waiting, or the one in the engine's hands.
    outstanding = len(engine.sizes)
    assert ring - 1 <= int(engine.free.level) + outstanding <= ring
    assert engine.copies > 0


def test_each_reader_returns_once_its_own_copies_are_done(monkeypatch):
    """Two connections' readers share the engine and, asleep, have their segments copied
    early in turn: each waits for its own descriptors (Linux: for its last cookie), not
    for as many completions as it posted."""
    from cpasim.model.netdma import NetDma

    returned = []
    read = NetDma.read

    def checked(self, sm, nbytes, extra):
        got = yield from read(self, sm, nbytes, extra)
        returned.append(self.done not in self.engine.owners)
        return got

    monkeypatch.setattr(NetDma, "read", checked)
    system = _system(*IO_BUS, "workload.connections=2", "link.rate=400Mbps", "sim.duration=20ms")
    assert all(c.netdma.early_bytes > 0 for c in system.rx.tcp)
    assert len(returned) > 20 and all(returned)
