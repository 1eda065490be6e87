"""Nothing is created or lost without being accounted for.

* TCP: every byte the sending application handed to its socket is, at the end
  of the run, read by the receiving application, waiting in the receive
  buffer, being copied out, or not yet delivered in order (in flight, queued
  out of order, or lost and due for retransmission); and the send buffer's free
  space plus everything unacknowledged is exactly the send buffer's size (as
  autotuning has grown it).  Checked with and without random link loss, under
  Linux's buffer rules and with fixed buffers.
* Queues: replaying every traced queue's records, no queue ever holds fewer
  than 0 units or more than its declared capacity.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import simpy

from cpasim.config import load_scenario
from cpasim.model.system import System
from cpasim.simulate import simulate
from cpasim.tracing import NULL_TRACER, Tracer
from cpasim.tracing.records import DECLARE, DEQ, ENQ, RESIZE


def _run_system(sets, trace=False):
    cfg = load_scenario(None, sets=sets)
    env = simpy.Environment()
    tracer = Tracer.in_memory(env) if trace else NULL_TRACER
    system = System(cfg, env, tracer)
    env.run(until=cfg.sim.duration)
    return system, tracer


@pytest.mark.parametrize(
    "sets",
    [
        ["link.loss=0"],
        ["link.loss=0.02", "sim.seed=3"],
        ["link.loss=0.05", "sim.seed=11", "nic.tso=true"],
        ["link.loss=0.02", "workload.connections=3", "tcp.cc=reno"],
        ["link.loss=0.02", "sim.seed=5", "tcp.wmem=64KiB", "tcp.rmem=64KiB"],
        ["link.loss=0.01", "link.delay=2ms", "sim.duration=200ms", "tcp.sndbuf=16KiB"],
    ],
)
def test_tcp_bytes_are_conserved(sets):
    system, _ = _run_system(["sim.duration=20ms", "sim.warmup=1ms", *sets])
    read_by_app = system.stats.read
    assert read_by_app > 0
    total_read = 0
    for tx, rx in zip(system.tx.tcp, system.rx.tcp, strict=True):
        s, r = tx.sender, rx.receiver
        queued_in_tx = sum(tx.sendq.items) + tx.unsent
        assert tx.bytes_queued == s.snd_nxt + queued_in_tx
        assert 0 <= r.rcv_nxt <= s.snd_nxt
        assert s.snd_una <= r.rcv_nxt
        read_here = r.rcv_nxt - int(rx.rcvbuf.level) - rx.rcv_in_copy
        assert read_here >= 0
        total_read += read_here
        unacked = tx.bytes_queued - s.snd_una
        assert int(tx.sndbuf.level) + unacked + tx.snd_in_copy == tx.sndbuf_size
    assert total_read == read_by_app
    if "link.loss=0" not in sets:
        assert system.retransmits() > 0 and system.drops()["link_loss"] > 0


def _replay_levels(source):
    """Check every queue's level against 0 and its capacity, record by record."""
    key = source.key
    cap: dict[int, int] = {}
    level: dict[int, int] = {}
    checked = 0
    for chunk in source.chunks():
        for op, a, n in zip(
            chunk["op"].tolist(), chunk["a"].tolist(), chunk["n"].tolist(), strict=True
        ):
            if op == DECLARE:
                cap[a] = n
                continue
            if op == ENQ:
                level[a] = level.get(a, 0) + n
            elif op == DEQ:
                level[a] = 0 if n == -1 else level.get(a, 0) - n
            elif op == RESIZE:
                level[a] = n
            else:
                continue
            checked += 1
            name = ":".join(key.queues[a])
            assert level[a] >= 0, f"{name} below 0"
            c = cap.get(a, -1)
            assert c < 0 or level[a] <= c, f"{name} above its capacity {c}"
    return checked


@pytest.mark.parametrize("kind", ["tcp_stream", "udp_stream", "pingpong", "webserver"])
def test_no_queue_below_zero_or_above_capacity(kind):
    sets = [
        f"workload.kind={kind}",
        "sim.duration=6ms",
        "sim.warmup=1ms",
        "link.loss=0.01",
        "workload.connections=2",
        "workload.file_size_min=20kB",
        "workload.file_size_max=100kB",
        "nic.tx_ring=16",
        "qdisc.len=8",
    ]
    _, tracer = _run_system(sets, trace=True)
    checked = _replay_levels(tracer.source())
    assert checked > 1000


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scenario", "connections"),
    [("tcp-stream.toml", 1), ("webserver.toml", 4)],
)
def test_per_connection_goodput_adds_up_to_the_total(scenario, connections):
    path = Path(__file__).parent.parent / "scenarios" / scenario
    cfg = load_scenario(path, sets=["sim.duration=40ms", "sim.warmup=10ms"])
    result = simulate(cfg)
    per_conn = result.goodput_bps_per_connection
    assert sorted(per_conn) == [f"c{i}" for i in range(connections)]
    assert all(v > 0 for v in per_conn.values())
    assert sum(per_conn.values()) == pytest.approx(result.goodput_bps, rel=1e-12)
