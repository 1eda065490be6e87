"""Same scenario and seed, same results; tracing and the progress bar change nothing.

Results are compared as the whole ``Result.to_json()`` minus the wall time.
"""

from __future__ import annotations

import pytest

from cpasim.config import load_scenario
from cpasim.simulate import simulate
from cpasim.tracing import Tracer

BASE = ["sim.duration=6ms", "sim.warmup=1ms"]


def _json(cfg, **kw):
    out = simulate(cfg, **kw).to_json()
    out.pop("wall_s")
    return out


@pytest.mark.parametrize(
    "sets",
    [
        pytest.param(["workload.kind=tcp_stream", "link.loss=0.01"], marks=pytest.mark.slow),
        # Both buffers autotuned over a 1 ms RTT: they grow several times.
        ["workload.kind=tcp_stream", "link.delay=500us"],
        ["workload.kind=tcp_stream", "tcp.wmem=64KiB", "tcp.rmem=64KiB"],
        ["workload.kind=udp_stream", "link.loss=0.01"],
        # The TX descriptor cache's fetch engine and Linux 2.6.13's send path.
        [
            "workload.kind=udp_stream",
            "link.loss=0.01",
            "nic.tx_desc_cache=64",
            "nic.tx_fetch_threshold=56",
            "ip.send_path=2.6.13",
            "ip.netfilter=true",
        ],
        # The fetch engine asked by plain calls (untraced events).
        [
            "workload.kind=udp_stream",
            "link.loss=0.01",
            "nic.tx_desc_cache=64",
            "nic.tx_fetch_request=call",
        ],
        # The cache's own write-back engine, in blocks, with a tail write per packet.
        [
            "workload.kind=udp_stream",
            "link.loss=0.01",
            "nic.tx_desc_cache=64",
            "nic.tx_writeback=block",
            "driver.tx_batch=1",
        ],
        ["workload.kind=pingpong"],
        [
            "workload.kind=webserver",
            "workload.connections=3",
            "workload.file_size_max=100kB",
            "workload.file_size_min=10kB",
        ],
        # The memory's latency under load, DMA in series, the data cache, file reads.
        [
            "workload.kind=webserver",
            "workload.connections=3",
            "workload.file_size_max=100kB",
            "workload.file_size_min=10kB",
            "workload.file_copy=true",
            "bus.kind=pci",
            "memory.bandwidth=8Gbps",
            "memory.load_window=50us",
            "memory.dma_holds=true",
            "cpu.cache.size=256KiB",
            "cpu.cache.working_set=1MiB",
            "nic.csum_offload=false",
            "tcp.csum_copy=false",
        ],
    ],
)
def test_same_seed_same_results_and_tracing_changes_nothing(sets, tmp_path):
    cfg = load_scenario(None, sets=[*BASE, *sets])
    plain = _json(cfg)
    assert _json(cfg) == plain
    assert _json(cfg, tracer=Tracer.in_memory) == plain
    assert _json(cfg, trace_path=tmp_path / "run.cpt") == plain
    assert (tmp_path / "run.cpt").stat().st_size > 0


def test_progress_slicing_changes_nothing():
    cfg = load_scenario(None, sets=[*BASE, "link.loss=0.01"])
    assert _json(cfg, progress=True) == _json(cfg)


def test_another_seed_gives_other_results_with_random_loss():
    a = load_scenario(None, sets=[*BASE, "link.loss=0.02", "sim.seed=1"])
    b = a.with_overrides({"sim.seed": 2})
    ja, jb = _json(a), _json(b)
    assert ja["config_digest"] != jb["config_digest"]
    ja.pop("config_digest"), jb.pop("config_digest")
    assert ja != jb
    assert (
        ja["drops"]["link_loss"] != jb["drops"]["link_loss"]
        or ja["goodput_bps"] != jb["goodput_bps"]
    )


@pytest.mark.slow
def test_sized_run_ends_when_the_sink_has_read_everything():
    cfg = load_scenario(None, sets=["workload.bytes=2MB", "sim.warmup=0ms"])
    r = simulate(cfg)
    assert r.bytes_delivered >= 2_000_000
    assert r.bytes_delivered - 2_000_000 < cfg.workload.read_size
    assert 0 < r.sim_time_ns < 50e6
    assert _json(cfg) == _json(cfg)


def test_sized_run_that_cannot_finish_stops_when_nothing_is_left():
    # UDP does not retransmit: with loss the sink never reads the whole target.
    cfg = load_scenario(
        None,
        sets=["workload.kind=udp_stream", "workload.bytes=1MB", "link.loss=0.1", "sim.warmup=0s"],
    )
    r = simulate(cfg)
    assert 0 < r.bytes_delivered < 1_000_000
    assert r.sim_time_ns < 50e6
