"""Reno/NewReno ops (Linux tcp_reno_*) driven by synthetic ACK streams."""

from __future__ import annotations

import pytest
from cc_driver import Path
from hypothesis import given, settings
from hypothesis import strategies as st

from cpasim.config.params import SPECS
from cpasim.model.cc import ALGORITHMS, make
from cpasim.model.cc.base import CA_OPEN, INFINITE_SSTHRESH, TcpState
from cpasim.model.cc.reno import NewReno, Reno

RTT = 100e6  # ns
FAST = 1e7  # packets/s: a link that never queues at these windows


def lose_once_at(w: int):
    """Drop one packet each time cwnd reaches ``w`` (re-armed once it is below)."""
    armed = [True]

    def lose(tp: TcpState, seq: int) -> bool:
        if tp.snd_cwnd < w:
            armed[0] = True
            return False
        if armed[0] and tp.ca_state == CA_OPEN:
            armed[0] = False
            return True
        return False

    return lose


def test_registry_names_and_error():
    """``tcp.cc`` offers exactly the registered algorithms, each under its own name."""
    assert SPECS["tcp.cc"].choices == tuple(ALGORITHMS)
    assert ALGORITHMS["reno"] is Reno and ALGORITHMS["newreno"] is NewReno
    for name in ALGORITHMS:
        assert make(name).name == name
    assert make("reno") is not make("reno")  # one object per connection
    with pytest.raises(ValueError, match=f"expected one of {', '.join(sorted(ALGORITHMS))}$"):
        make("vegas")


def test_only_reno_and_newreno_have_the_classic_sender():
    classic = {name for name, cls in ALGORITHMS.items() if cls.classic}
    assert classic == {"reno", "newreno"}
    assert NewReno.partial_acks and not Reno.partial_acks


def test_newreno_ops_are_renos():
    for op in ("cong_avoid", "ssthresh", "undo_cwnd"):
        assert getattr(NewReno, op) is getattr(Reno, op)


def test_slow_start_doubles_per_rtt():
    p = Path(make("reno"), rate_pps=FAST, prop_rtt_ns=RTT, init_cwnd=10)
    seen = []
    for k in range(6):
        # Just before round k+1's ACKs start to arrive.
        p.run_until((k + 1) * RTT - 1e3)
        seen.append(p.tp.snd_cwnd)
    assert seen == [10 * 2**k for k in range(6)]


def test_congestion_avoidance_one_packet_per_rtt():
    p = Path(make("reno"), rate_pps=FAST, prop_rtt_ns=RTT, init_cwnd=20)
    p.tp.snd_ssthresh = 20  # start in congestion avoidance
    p.run_until(RTT - 1e3)
    start = p.tp.snd_cwnd
    p.run_until(31 * RTT - 1e3)
    assert p.tp.snd_cwnd - start == 30


def test_not_cwnd_limited_does_not_grow():
    tp = TcpState(mss=1448, snd_cwnd=10, snd_ssthresh=INFINITE_SSTHRESH, is_cwnd_limited=False)
    Reno().cong_avoid(tp, 5)
    assert tp.snd_cwnd == 10


@pytest.mark.parametrize(
    ("cwnd", "want"), [(1, 2), (2, 2), (3, 2), (4, 2), (5, 2), (7, 3), (100, 50), (101, 50)]
)
def test_ssthresh_half_at_least_two(cwnd, want):
    tp = TcpState(mss=1448, snd_cwnd=cwnd, snd_ssthresh=INFINITE_SSTHRESH)
    assert Reno().ssthresh(tp) == want


def test_undo_restores_prior_cwnd():
    cc = Reno()
    tp = TcpState(mss=1448, snd_cwnd=40, snd_ssthresh=INFINITE_SSTHRESH)
    tp.snd_ssthresh = cc.ssthresh(tp)
    tp.snd_cwnd = tp.snd_ssthresh
    assert cc.undo_cwnd(tp) == 40


def test_sawtooth_period_and_mean_on_periodic_loss():
    """A loss whenever cwnd reaches W: cwnd saws between W/2 and W.

    Each cycle is W/2 rounds of +1 packet plus the round in which the loss is
    detected and the round of recovery; the time-average window is 3W/4.
    """
    w = 64
    samples: list[tuple[float, int, int]] = []
    p = Path(
        make("reno"),
        rate_pps=FAST,
        prop_rtt_ns=RTT,
        lose=lose_once_at(w),
        on_ack=lambda p: samples.append((p.now, p.tp.snd_cwnd, p.losses)),
    )
    p.run_until(40e9)
    loss_t = [t for (t, _, n), (_, _, prev) in zip(samples[1:], samples, strict=False) if n != prev]
    periods = [(b - a) / RTT for a, b in zip(loss_t[1:], loss_t[2:], strict=False)]
    assert len(periods) >= 8
    for per in periods:
        assert per == pytest.approx(w / 2 + 2, rel=0.01)
    # Time-average over whole cycles.
    t0, t1 = loss_t[1], loss_t[-1]
    area = 0.0
    for (ta, ca, _), (tb, _, _) in zip(samples, samples[1:], strict=False):
        if t0 <= ta < t1:
            area += ca * (tb - ta)
    mean = area / (t1 - t0)
    assert mean == pytest.approx(0.75 * w, rel=0.05)
    assert max(c for t, c, _ in samples if t > t0) <= w + 1
    assert min(c for t, c, _ in samples if t > t0) == w // 2


@settings(max_examples=200, deadline=None)
@given(
    cwnd=st.integers(1, 5000),
    ssthresh=st.integers(2, INFINITE_SSTHRESH),
    clamp=st.integers(1, 10000),
    acks=st.lists(st.integers(1, 64), max_size=60),
    losses=st.sets(st.integers(0, 59)),
)
def test_invariants(cwnd, ssthresh, clamp, acks, losses):
    cc = make("newreno")
    cwnd = min(cwnd, clamp)
    tp = TcpState(mss=1448, snd_cwnd=cwnd, snd_ssthresh=ssthresh, snd_cwnd_clamp=clamp)
    tp.is_cwnd_limited = True
    cc.init(tp)
    for i, acked in enumerate(acks):
        if i in losses:
            tp.snd_ssthresh = cc.ssthresh(tp)
            tp.snd_cwnd = min(tp.snd_cwnd, tp.snd_ssthresh)  # recovery ends at ssthresh
        else:
            cc.cong_avoid(tp, acked)
        assert 1 <= tp.snd_cwnd <= clamp
        assert tp.snd_ssthresh >= 2
