"""The host stack's rules and components, mostly without a whole system.

Protocol rules (:mod:`cpasim.model.tcp_rules`) are plain objects checked
against RFC behaviour; packets, fragmentation and the CPU are checked in
isolation; a few tiny whole-system runs check each workload moves its data.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from cpasim.config import load_scenario
from cpasim.model.cpu import CATEGORIES, Cpu
from cpasim.model.ip import IpLayer
from cpasim.model.packet import Packet
from cpasim.model.tcp_rules import Receiver, RenoSender
from cpasim.protocol import mss_for, tcp_header
from cpasim.simulate import simulate
from cpasim.tracing import NULL_TRACER, TracedStore

MSS = 1448
SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def sender(**kw) -> RenoSender:
    args = dict(mss=MSS, init_cwnd=10, rwnd=1 << 30, cc="newreno", rto_min_ns=200e6)
    args.update(kw)
    return RenoSender(**args)


def test_mss_from_mtu():
    assert mss_for(1500, timestamps=True) == 1448
    assert mss_for(1500, timestamps=False) == 1460
    assert tcp_header(True) == 52


def test_slow_start_doubles_per_window_with_an_ack_per_segment():
    s = sender(init_cwnd=2)
    for _ in range(2):
        s.on_send(MSS, 0.0)
    s.on_ack(MSS, 1 << 30, 1.0, False)
    s.on_ack(2 * MSS, 1 << 30, 1.0, False)
    assert s.cwnd == 4 * MSS


def test_congestion_avoidance_adds_one_mss_per_window():
    s = sender(init_cwnd=10)
    s.ssthresh = 5 * MSS  # already above: congestion avoidance
    for _ in range(10):
        s.on_send(MSS, 0.0)
    for k in range(1, 11):
        s.on_ack(k * MSS, 1 << 30, 1.0, False)
    assert s.cwnd == 11 * MSS


def test_window_limited_sender_does_not_inflate_cwnd():
    s = sender(init_cwnd=10)
    s.on_send(MSS, 0.0)  # one segment in flight, cwnd 10: not cwnd-limited
    s.on_ack(MSS, 1 << 30, 1.0, False)
    assert s.cwnd == 10 * MSS


def _lose_first_of(s: RenoSender, n: int) -> None:
    for _ in range(n):
        s.on_send(MSS, 0.0)


def test_three_dupacks_trigger_fast_retransmit_and_halve():
    s = sender()
    _lose_first_of(s, 10)
    outs = [s.on_ack(0, 1 << 30, 1.0, False) for _ in range(3)]
    assert [o.dup for o in outs] == [True, True, True]
    assert outs[0].retransmit is None and outs[1].retransmit is None
    assert outs[2].retransmit == (0, MSS)
    assert s.ssthresh == 5 * MSS
    assert s.cwnd == s.ssthresh + 3 * MSS
    assert s.in_recovery


def test_newreno_partial_ack_resends_next_hole_and_full_ack_deflates():
    s = sender()
    _lose_first_of(s, 10)  # segments 0 and 2 lost
    for _ in range(3):
        s.on_ack(0, 1 << 30, 1.0, False)
    out = s.on_ack(2 * MSS, 1 << 30, 2.0, False)  # partial: hole at 2*MSS
    assert out.retransmit == (2 * MSS, MSS)
    assert s.in_recovery
    s.on_ack(10 * MSS, 1 << 30, 3.0, False)
    assert not s.in_recovery and s.cwnd == s.ssthresh


def test_reno_leaves_recovery_on_first_new_ack():
    s = sender(cc="reno")
    _lose_first_of(s, 10)
    for _ in range(3):
        s.on_ack(0, 1 << 30, 1.0, False)
    s.on_ack(2 * MSS, 1 << 30, 2.0, False)
    assert not s.in_recovery


def test_rto_collapses_window_and_backs_off():
    s = sender()
    _lose_first_of(s, 4)
    rto = s.rto_ns
    assert s.on_timeout() == (0, MSS)
    assert s.cwnd == MSS and s.rto_ns == 2 * rto and s.ssthresh == 2 * MSS


def test_rtt_estimator_follows_rfc6298_and_karn():
    s = sender(rto_min_ns=1.0)
    s.on_send(MSS, 0.0)
    out = s.on_ack(MSS, 1 << 30, 100.0, False)
    assert out.rtt_ns == 100.0 and s.srtt == 100.0 and s.rto_ns == 300.0
    s.on_send(MSS, 200.0)
    s.on_retransmit(MSS, 250.0)
    out = s.on_ack(2 * MSS, 1 << 30, 400.0, False)
    assert out.rtt_ns is None  # Karn: no sample from a resent segment


def test_receiver_acks_every_second_segment_and_reorders():
    r = Receiver(mss=MSS, delayed_ack=True)
    assert r.on_data(0, MSS) == (MSS, False)
    assert r.on_data(MSS, MSS) == (MSS, True)
    r.on_ack_sent()
    assert r.on_data(3 * MSS, MSS) == (0, True)  # hole: duplicate ACK at once
    assert r.on_data(2 * MSS, MSS) == (2 * MSS, True)  # fills it: both delivered
    assert r.rcv_nxt == 4 * MSS and r.ofo == []
    assert r.on_data(0, MSS) == (0, True)  # old duplicate


def test_receiver_without_delayed_ack_acks_each_segment():
    r = Receiver(mss=MSS, delayed_ack=False)
    assert r.on_data(0, 100) == (100, True)


def test_split_tso_cuts_mss_segments_with_headers():
    p = Packet("c0", "tcp", length=3000 + 3 * 52, payload=3000, hdr=52, mss=MSS, segs=3, seq=10)
    parts = p.split_tso()
    assert [q.payload for q in parts] == [MSS, MSS, 3000 - 2 * MSS]
    assert [q.seq for q in parts] == [10, 10 + MSS, 10 + 2 * MSS]
    assert sum(q.length for q in parts) == p.length
    assert Packet("c0", "tcp", 100, 48, 52, MSS).split_tso()[0].payload == 48


class _FakeDevice:
    def __init__(self, env):
        self.qdisc = TracedStore(env, NULL_TRACER, "tx", "qdisc", capacity=1000)
        self.rx_out = TracedStore(env, NULL_TRACER, "tx", "RX backlog")


def _host_cfg(*sets):
    return load_scenario(None, sets=list(sets)).host("tx")


def test_ip_fragments_a_large_datagram_into_mtu_sized_pieces():
    env = simpy.Environment()
    hc = _host_cfg()
    cpu = Cpu(env, "tx", params=hc.cpu, tracer=NULL_TRACER)
    dev = _FakeDevice(env)
    ip = IpLayer(env, "tx", params=hc.ip, mtu=1500, tracer=NULL_TRACER, cpu=cpu, dev=dev)
    dgram = Packet(
        "c0", "udp", length=20 + 8 + 16384, payload=16384, hdr=28, mss=1472, dgram_len=16384
    )
    frags = ip.fragment(dgram)
    assert all(f.length <= 1500 for f in frags)
    assert sum(f.payload for f in frags) == 16384
    assert sum(f.length - 20 for f in frags) == 8 + 16384
    assert [f.more_frags for f in frags] == [True] * (len(frags) - 1) + [False]
    assert all(f.frag_off % 8 == 0 for f in frags)
    whole = None
    for f in frags:
        whole = ip._reassemble(f) or whole
    assert whole is not None and whole.payload == 16384


def test_cpu_costs_scale_with_frequency_and_are_accounted():
    env = simpy.Environment()
    hc = _host_cfg("cpu.freq=2GHz", "cpu.cost.copy=100", "cpu.cost.copy_per_byte=0.5")
    cpu = Cpu(env, "tx", params=hc.cpu, tracer=NULL_TRACER)
    assert cpu.cycles("copy", 1000) == 600
    assert cpu.cycles("csum", 1000) == 1000 * hc.cpu.cost.csum_per_byte

    def job():
        yield from cpu.take(NULL_TRACER.sm("tx", "x"))
        yield cpu.work("copy", 600)
        yield cpu.spend(NULL_TRACER.sm("tx", "x"), "s", stack=200, user=200)

    env.process(job())
    env.run()
    assert env.now == pytest.approx(500.0)  # 1000 cycles at 2 GHz
    u = cpu.utilization(1000.0)
    assert u["copy"] == pytest.approx(0.3) and u["stack"] == pytest.approx(0.1)
    assert u["idle"] == pytest.approx(0.5)
    assert set(u) == {*CATEGORIES, "idle"}


def _run(*sets):
    return simulate(load_scenario(None, sets=["sim.duration=4ms", "sim.warmup=1ms", *sets]))


@pytest.mark.parametrize(
    "kind",
    ["tcp_stream", "udp_stream", "pingpong", "webserver"],
)
def test_every_workload_moves_data(kind):
    extra = ["workload.file_size_min=20kB", "workload.file_size_max=100kB", "sim.duration=8ms"]
    r = _run(f"workload.kind={kind}", "workload.connections=2", *extra)
    assert r.bytes_measured > 0 and r.goodput_bps > 0
    if kind in ("pingpong", "webserver"):
        assert r.latency_ns["count"] > 0 and r.latency_ns["p50"] > 0
    else:
        assert r.latency_ns is None


def test_pingpong_round_trip_is_at_least_the_wire_time():
    r = _run("workload.kind=pingpong", "workload.message_size=100B", "link.delay=100us")
    assert r.latency_ns["p50"] > 200e3
    assert r.latency_ns["p50"] < 260e3  # two one-way delays plus a few microseconds


def test_udp_large_datagrams_are_fragmented_on_the_wire():
    r = _run("workload.kind=udp_stream", "workload.message_size=16KiB")
    per_dgram = -(-(16384 + 8) // 1480)
    dgrams = r.bytes_measured // 16384
    assert dgrams > 5
    # Frames and reads are both counted from the warm-up: allow one datagram in the pipe.
    assert r.frames["tx_to_rx"] >= per_dgram * (dgrams - 1)


@pytest.mark.parametrize(
    "sets",
    [
        ["workload.kind=tcp_stream"],
        # Fixed buffers: under Linux's larger windows a loss here ends in an RTO
        # (200 ms) that outlasts the 4 ms run.
        [
            "workload.kind=tcp_stream",
            "link.loss=0.02",
            "nic.tso=true",
            "tcp.wmem=64KiB",
            "tcp.rmem=64KiB",
        ],
        ["workload.kind=tcp_stream", "link.rate=10Gbps", "link.delay=350us", "tcp.nagle=false"],
        ["workload.kind=udp_stream", "ip.netfilter=true", "nic.csum_offload=false"],
        ["workload.kind=pingpong", "workload.message_size=3000B"],
        # RPC over UDP through slow controllers (seed 000's LANCE).
        [
            "workload.kind=rpc",
            "workload.request_size=3000B",
            "workload.response_size=100B",
            "nic.tx_latency=20us",
            "nic.rx_latency=5us",
        ],
        ["workload.kind=webserver", "workload.file_size_min=20kB", "workload.file_size_max=60kB"],
        # The copy engine, its reader and the memory (cpasim.model.copy_engine, memory).
        ["hosts.rx.copy_engine.enabled=true"],
        ["hosts.rx.copy_engine.enabled=true", "hosts.rx.copy_engine.location=io_bus"],
        [
            "hosts.rx.copy_engine.enabled=true",
            "hosts.rx.copy_engine.wait=sleep",
            "hosts.rx.copy_engine.ring=8",
        ],
        [
            "hosts.rx.copy_engine.enabled=true",
            "memory.bandwidth=20Gbps",
            "link.rate=10Gbps",
            "link.delay=350us",
        ],
        ["memory.bandwidth=8Gbps", "workload.kind=udp_stream", "nic.csum_offload=false"],
        # The memory's latency under load on legacy PCI, DMA in series, the data
        # cache and file reads (cpasim.model.main_memory, cache; app's file read).
        [
            "memory.bandwidth=8Gbps",
            "memory.load_window=50us",
            "memory.dma_holds=true",
            "bus.kind=pci",
            "cpu.cache.size=256KiB",
            "workload.kind=udp_stream",
            "workload.file_copy=true",
            "nic.csum_offload=false",
        ],
    ],
)
def test_identity_invariant_critical_path_equals_elapsed_time(sets):
    """Every wait in the stack is explained by a traced dependency (annotations.md)."""
    from cpasim.analysis import analyze
    from cpasim.tracing import Tracer

    kept = {}

    def tracer(env):
        kept["t"] = Tracer.in_memory(env)
        return kept["t"]

    cfg = load_scenario(None, sets=["sim.duration=4ms", "sim.warmup=0ms", *sets])
    r = simulate(cfg, tracer=tracer)
    a = analyze(kept["t"].source(), r.analysis_start, r.analysis_end)
    assert a.reachable
    assert a.critical_path_ns == pytest.approx(a.elapsed_ns, rel=1e-9)
    assert a.elapsed_ns > 0.5 * cfg.sim.duration
    assert a.warnings == []


def test_rto_recovers_single_segment_losses():
    """One-segment messages cannot get three duplicate ACKs: only the RTO saves them."""
    r = _run(
        "workload.kind=pingpong",
        "workload.message_size=100B",
        "link.loss=0.05",
        "tcp.rto_min=2ms",
        "sim.duration=150ms",
    )
    assert r.retransmits > 0 and r.drops["link_loss"] > 0
    assert r.latency_ns["count"] > 100
    assert r.latency_ns["p50"] < 100e3  # most round trips see no loss
    assert r.latency_ns["p99"] >= 2e6  # a lost one waits for the timer


@pytest.mark.slow
def test_fast_retransmit_keeps_a_stream_going_under_loss():
    clean = _run("sim.duration=20ms")
    lossy = _run("sim.duration=20ms", "link.loss=0.005", "tcp.rto_min=200ms")
    assert lossy.retransmits > 0
    # No RTO stall of 200 ms can have happened in a 20 ms run that still moves data.
    assert lossy.goodput_bps > 0.3 * clean.goodput_bps


# Saidi 2009 (seeds/004), section 6.2.2, figure 6.2: TCP stream re-simulated goodput
# per configuration, Mb/s.  The shipped scenario uses the seed's set-up with cpasim's
# default CPU costs (not fitted); measured here over 30 ms after a 10 ms warm-up.
# The seed's first two configurations ran at the link's rate and then beyond 1 Gb/s,
# so no interrupt throttle bound there: the ladder runs with nic.itr=off.  With the
# default adaptive throttle the sender's NIC settles in e1000's bulk class (250 us
# between interrupts), which delays its ACK processing and makes the 128 KiB send
# buffer the limit: 801 and 781 Mb/s for the first two, 1624 for the third.
SEED_LADDER = [
    # (change from the scenario, seed Mb/s, relative tolerance achieved)
    ([], 1000, 0.10),  # link-bound: 917 Mb/s (the 1 Gb/s link's goodput is 941)
    pytest.param(
        ["link.rate=10Gbps"],
        1289,
        0.10,
        marks=pytest.mark.xfail(
            strict=True,
            reason="send-buffer loop: 1072 Mb/s (-17%): the model's round trip is 0.84 ms "
            "against 0.70, its window bursts queueing behind the PCIe x1 DMA; a DMA as fast "
            "as the seed's at config 3 buys 1.5%, and Linux 2.6.18's buffer rules keep less "
            "than the 113 KB in flight the seed's figure needs (calibration/SEEDS.md)",
        ),
    ),
    (["link.rate=10Gbps", "tcp.wmem=4MiB", "tcp.rmem=4MiB"], 1705, 0.10),  # PCIe x1: 1615
]


def _tcp_stream(*sets, trace=False):
    from cpasim.tracing import Tracer

    kept = {}

    def tracer(env):
        kept["t"] = Tracer.in_memory(env)
        return kept["t"]

    cfg = load_scenario(
        SCENARIOS / "tcp-stream.toml",
        sets=["sim.duration=30ms", "sim.warmup=10ms", "nic.itr=off", *sets],
    )
    r = simulate(cfg, tracer=tracer if trace else None)
    return r, kept.get("t")


@pytest.mark.slow
@pytest.mark.parametrize(("sets", "seed_mbps", "tol"), SEED_LADDER)
def test_seed_tcp_stream_ladder(sets, seed_mbps, tol):
    r, _ = _tcp_stream(*sets)
    assert r.goodput_bps / 1e6 == pytest.approx(seed_mbps, rel=tol)


@pytest.mark.slow
def test_seed_bottlenecks_link_then_send_buffer_loop():
    from cpasim.analysis import analyze
    from cpasim.predict.transforms_table import REORDERED_POOLS

    r, t = _tcp_stream(trace=True)
    a = analyze(t.source(), r.analysis_start, r.analysis_end)
    assert a.most_critical[0]["name"] == "tx:MAC:transmit"  # the link (seed: NIC TX FIFO)
    r, t = _tcp_stream("link.rate=10Gbps", trace=True)
    a = analyze(t.source(), r.analysis_start, r.analysis_end)
    # Seed: the TCP send-window loop.  Loops through the pools whose order
    # predictions free (CPU cores, PCIe channels: arbitration order) do not count.
    loops = [
        lp["edge"]
        for lp in a.loops
        if not any(fnmatchcase(lp["edge"].split("[")[1][:-1], p) for p in REORDERED_POOLS)
    ]
    assert "[tx:Send buffer]" in loops[0]


@settings(max_examples=60, deadline=None)
@given(st.permutations(list(range(12))), st.integers(min_value=1, max_value=4))
def test_receiver_delivers_every_byte_once_in_any_arrival_order(order, dup_every):
    r = Receiver(mss=MSS, delayed_ack=True)
    delivered = 0
    for k, i in enumerate(order):
        got, _ = r.on_data(i * MSS, MSS)
        delivered += got
        if k % dup_every == 0:  # a duplicate arrival delivers nothing new
            got, ack_now = r.on_data(i * MSS, MSS)
            assert got == 0 and ack_now
    assert delivered == 12 * MSS == r.rcv_nxt
    assert r.ofo == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 8)), min_size=1, max_size=60))
def test_sender_invariants_under_any_ack_sequence(steps):
    s = sender(init_cwnd=4)
    for kind, k in steps:
        if kind == 0:  # send what the window allows, in MSS segments
            for _ in range(s.usable() // MSS):
                s.on_send(MSS, 0.0)
        elif kind == 1:  # cumulative ACK of k more segments (never beyond snd_nxt)
            s.on_ack(min(s.snd_una + k * MSS, s.snd_nxt), 1 << 30, 1.0, False)
        elif kind == 2:  # a duplicate ACK
            s.on_ack(s.snd_una, 1 << 30, 1.0, False)
        else:
            s.on_timeout()
        assert 0 <= s.snd_una <= s.snd_nxt
        assert s.cwnd >= MSS and s.usable() >= 0
        assert sum(e - b for b, e, _, _ in s.outstanding) == s.flight


def test_irq_cores_take_the_softirq_side_and_only_it(tmp_path):
    """With cpu.irq_cores, ISR, NAPI and IP receive take the IRQ cores; the
    application, TCP's send path and the driver's transmit take the others."""
    import json
    from collections import defaultdict

    cfg = load_scenario(
        SCENARIOS / "pingpong.toml",
        sets=["sim.duration=1ms", "sim.warmup=0ms", "cpu.cores=2", "cpu.irq_cores=1"],
    )
    simulate(cfg, trace_path=tmp_path / "t.jsonl")
    pools = defaultdict(set)
    for line in (tmp_path / "t.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["op"] in ("deq", "enq") and r.get("q") in ("IRQ cores", "CPU cores"):
            pools[r["q"]].add(r["sm"])
    assert pools["IRQ cores"] == {"ISR", "NAPI", "IP Recv"}
    assert pools["CPU cores"] == {"App", "TcpSend", "Driver TX"}
