"""The classic sender's TSO deferral, as Linux 2.6.18's ``tcp_tso_should_defer``."""

from pathlib import Path

import pytest

from cpasim.config import load_scenario
from cpasim.model.environment import Kernel
from cpasim.model.system import System
from cpasim.model.tcp_rules import RenoSender
from cpasim.tracing import NULL_TRACER

MSS = 1448
MAKINENI = Path(__file__).resolve().parent.parent / "scenarios" / "makineni-pentium-m.toml"


class _Counting:
    """A host's IP layer seen by one connection, counting the data packets handed to it."""

    def __init__(self, ip, sizes: list[int]) -> None:
        self._ip = ip
        self._sizes = sizes

    def output(self, sm, pkt):
        if pkt.payload:
            self._sizes.append(pkt.segs)
        return self._ip.output(sm, pkt)


def _segments_per_packet(tso: bool) -> float:
    """Makineni's TX run at 64 KB writes: mean segments per packet the sender hands IP."""
    cfg = load_scenario(MAKINENI, sets=[f"nic.tso={str(tso).lower()}"])
    env = Kernel()
    system = System(cfg, env, NULL_TRACER)
    sizes: list[int] = []
    for conn in system.hosts["tx"].tcp:
        conn.ip = _Counting(conn.ip, sizes)
    env.run(until=cfg.sim.duration)
    return sum(sizes) / len(sizes)


def test_ca_open_is_left_on_duplicate_acks_and_after_a_timeout():
    s = RenoSender(mss=MSS, init_cwnd=10, rwnd=1 << 30, cc="newreno", rto_min_ns=200e6)
    for _ in range(10):
        s.on_send(MSS, 0.0)
    assert s.ca_open
    s.on_ack(0, 1 << 30, 1.0, False)  # a duplicate ACK: Disorder
    assert not s.ca_open
    s.on_ack(MSS, 1 << 30, 2.0, False)
    assert s.ca_open
    s.on_timeout()  # Loss until everything sent before the timeout is acknowledged
    assert not s.ca_open
    s.on_ack(10 * MSS, 1 << 30, 3.0, False)
    assert s.ca_open


@pytest.mark.slow
def test_acks_of_two_segments_add_up_to_long_super_segments():
    """16 connections at 4 Gb/s, one ACK per two segments: without deferral a TSO
    sender sends what each ACK opens (6.7 segments per packet on average in this run);
    deferring until a third of the window is free makes 26.  Without TSO every
    packet is one segment."""
    assert _segments_per_packet(tso=False) == 1.0
    assert _segments_per_packet(tso=True) > 20
