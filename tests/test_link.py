"""The Ethernet link: framing, serialization, propagation carriers, loss, stats."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import simpy
from hypothesis import given
from hypothesis import strategies as st

from cpasim.model.link import (
    SPARE_CARRIERS,
    Link,
    link_goodput,
    serialization_ns,
    transmit_ns,
)
from cpasim.model.packet import Packet
from cpasim.protocol import IFG, frame_bytes, wire_bytes
from cpasim.tracing import NULL_TRACER, TracedStore, Tracer
from cpasim.tracing.records import OPS


def test_framing_overheads():
    # 1500-byte IP packet: 1518-byte frame, 1538 byte times with preamble and gap.
    assert frame_bytes(1500) == 1518 and wire_bytes(1500) == 1538
    # Minimum frame: a 40-byte ACK is padded to 64 bytes (+20).
    assert frame_bytes(40) == 64 and wire_bytes(40) == 84
    assert frame_bytes(46) == 64 and frame_bytes(47) == 65


def test_seed_002_frame_times():
    # Seed 002: "Theoretical 1500-byte frame time: Fast Ethernet 123.04, Gigabit 12.3 us;
    # smallest frame on the wire: FE 6.7, GE 0.67 us".
    assert serialization_ns(1500, 1e9) / 1e3 == pytest.approx(12.3, abs=0.01)
    assert serialization_ns(1500, 100e6) / 1e3 == pytest.approx(123.04, abs=0.01)
    assert serialization_ns(40, 1e9) / 1e3 == pytest.approx(0.67, abs=0.01)
    assert serialization_ns(40, 100e6) / 1e3 == pytest.approx(6.7, abs=0.05)


@given(mss=st.integers(1, 9000), hdr=st.sampled_from((28, 40, 52)))
def test_link_goodput_closed_form(mss, hdr):
    # model.md: link-limited goodput = rate x MSS / (MSS + 40 + options + 38), for
    # frames above the 64-byte minimum.
    rate = 10e9
    got = link_goodput(rate, mss, hdr)
    if mss + hdr + 18 >= 64:
        assert got == pytest.approx(rate * mss / (mss + hdr + 38))
    assert got < rate


class FakeNic:
    """Receiver side of a port: records arrivals."""

    def __init__(self, env):
        self.env = env
        self.got = []

    def arrive(self, frame, sm):
        self.got.append((self.env.now, frame.seq))


def pkt(seq: int, length: int = 1500) -> Packet:
    return Packet("c0", "udp", length, length - 28, 28, 1472, seq=seq)


def build(rate=1e9, delay=10_000.0, loss=0.0, seed=1, tracer=None):
    env = simpy.Environment()
    tracer = tracer(env) if tracer else NULL_TRACER
    cfg = SimpleNamespace(rate=rate, delay=delay, mtu=1500, loss=loss)
    link = Link(env, params=cfg, tracer=tracer, rng=np.random.default_rng(seed))
    fifos, nics = {}, {}
    for h in ("tx", "rx"):
        fifos[h] = TracedStore(env, tracer, h, "TX FIFO", "0", capacity=32)
        nics[h] = FakeNic(env)
        link.port(h).attach(fifos[h], nics[h])
    return env, tracer, link, fifos, nics


def test_back_to_back_frames_serialize_then_propagate():
    env, tracer, link, fifos, nics = build(rate=1e9, delay=10_000.0)
    sm = NULL_TRACER.sm("tx", "NIC TX")
    for i in range(20):
        fifos["tx"].put_now(pkt(i), sm)
    env.run()
    per = serialization_ns(1500, 1e9)
    gap = IFG * 8.0  # ns at 1 Gb/s
    assert [s for _, s in nics["rx"].got] == list(range(20))
    for i, (t, _) in enumerate(nics["rx"].got):
        # One period per frame; a frame is in once its last bit is, before its gap.
        assert t == pytest.approx((i + 1) * per - gap + 10_000.0)
    d = link.stats.directions["tx_to_rx"]
    assert d.frames == 20 and d.bytes == 20 * 1538
    assert d.busy_ns == pytest.approx(20 * per)
    assert link.stats.utilization(env.now)["tx_to_rx"] == pytest.approx(20 * per / env.now)
    assert link.stats.directions["rx_to_tx"].frames == 0 and not nics["tx"].got


def test_full_duplex_directions_do_not_interfere():
    env, tracer, link, fifos, nics = build(rate=1e9, delay=0.0)
    sm = NULL_TRACER.sm("tx", "NIC TX")
    for i in range(5):
        fifos["tx"].put_now(pkt(i), sm)
        fifos["rx"].put_now(pkt(100 + i, 40), sm)
    env.run()
    gap = IFG * 8.0  # ns at 1 Gb/s
    assert nics["rx"].got[-1][0] == pytest.approx(5 * serialization_ns(1500, 1e9) - gap)
    assert nics["tx"].got[-1][0] == pytest.approx(5 * serialization_ns(40, 1e9) - gap)


def test_seed_000_minimum_frame_takes_57_6_us_at_10_mbps():
    # Seed 000 (Mosberger, 4.3.2): "a minimum-sized Ethernet packet is 64 bytes long,
    # to which an 8 byte long preamble is added. At the speed of a 10Mbps Ethernet,
    # transmitting the frame takes 57.6us."  A 1-byte TCP segment is such a frame.
    env, tracer, link, fifos, nics = build(rate=10e6, delay=0.0)
    fifos["tx"].put_now(pkt(0, 41), NULL_TRACER.sm("tx", "NIC TX"))
    env.run()
    assert frame_bytes(41) == 64
    assert nics["rx"].got == [(pytest.approx(57_600.0), 0)]
    assert transmit_ns(41, 10e6) == pytest.approx(57_600.0)
    # The gap after it still counts in the link's period and busy time (seed 002).
    assert link.stats.directions["tx_to_rx"].busy_ns == pytest.approx(67_200.0)


def test_loss_uses_the_run_rng_and_is_deterministic():
    def run(seed):
        env, tracer, link, fifos, nics = build(rate=10e9, delay=1000.0, loss=0.3, seed=seed)
        sm = NULL_TRACER.sm("tx", "NIC TX")

        def feed():
            for i in range(2000):
                yield fifos["tx"].put(pkt(i), sm)

        env.process(feed())
        env.run()
        return [s for _, s in nics["rx"].got], link.stats.directions["tx_to_rx"].lost

    got, lost = run(7)
    assert len(got) + lost == 2000
    assert lost / 2000 == pytest.approx(0.3, abs=0.04)  # 4 sigma at n = 2000
    assert got == sorted(got)
    assert run(7) == (got, lost)
    assert run(8) != (got, lost)


def test_carriers_annotate_propagation_and_are_reused():
    env, tracer, link, fifos, nics = build(
        rate=1e9, delay=30_000.0, tracer=lambda e: Tracer.in_memory(e)
    )
    src = tracer.sm("tx", "NIC TX")

    def feed():
        for i in range(300):
            yield fifos["tx"].put(pkt(i), src)

    env.process(feed())
    env.run()
    source = tracer.source()
    key = source.key
    recs = [r for c in source.chunks() for r in c.tolist()]
    carriers = {key.sms[r[3]] for r in recs if key.sms[r[3]][1] == "Link"}
    # 30 us of delay / 12.3 us per frame: 2-3 frames in flight, so a pool of
    # SPARE_CARRIERS per frame in flight, reused round the pool.
    assert SPARE_CARRIERS * 2 <= len(carriers) <= SPARE_CARRIERS * 3 + 1
    assert carriers == {("tx", "Link", str(k)) for k in range(len(carriers))}
    # Each frame: MAC enq on a wire queue, carrier deq + propagate, then idle waiting.
    props = [r for r in recs if OPS[r[1]] == "begin" and key.states[r[4]] == "propagate"]
    assert len(props) == 300
    mac = key.sms.index(("tx", "MAC", "0"))
    wires = [r for r in recs if OPS[r[1]] == "enq" and r[3] == mac]
    assert len(wires) == 300 and all(key.queues[r[4]][1] == "wire" for r in wires)
    idle_waits = [r for r in recs if OPS[r[1]] == "wait_empty" and key.sms[r[3]][1] == "Link"]
    assert len(idle_waits) == 300
    assert [s for _, s in nics["rx"].got] == list(range(300))


def test_tracing_does_not_change_the_link():
    def run(tr):
        env, tracer, link, fifos, nics = build(rate=1e9, delay=5000.0, loss=0.1, tracer=tr)
        sm = tracer.sm("tx", "NIC TX")

        def feed():
            for i in range(200):
                yield fifos["tx"].put(pkt(i, 64 + 7 * i), sm)

        env.process(feed())
        env.run()
        return nics["rx"].got, link.stats.snapshot()

    assert run(None) == run(lambda e: Tracer.in_memory(e))
