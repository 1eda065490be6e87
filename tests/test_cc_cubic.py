"""CUBIC (Linux tcp_cubic.c) driven by synthetic ACK streams."""

from __future__ import annotations

import pytest
from cc_driver import Path
from hypothesis import given, settings
from hypothesis import strategies as st

from cpasim.model.cc import make
from cpasim.model.cc.base import CA_EVENT_TX_START, CA_LOSS, INFINITE_SSTHRESH, AckSample, TcpState
from cpasim.model.cc.cubic import (
    HYSTART_ACK_TRAIN,
    HYSTART_DELAY,
    Cubic,
    cube_factor,
    cubic_root,
)

C = 0.4  # CUBIC's C: bic_scale 41 * 10 / 1024
BETA = 717 / 1024
FAST = 1e7  # packets/s: a link that never queues at these windows


def lose_once(w: int):
    """Drop one packet the first time cwnd reaches ``w``."""
    done = [False]

    def lose(tp: TcpState, seq: int) -> bool:
        if not done[0] and tp.snd_cwnd >= w:
            done[0] = True
            return True
        return False

    return lose


def test_cubic_root_matches_cbrt_on_the_inputs_cubic_feeds_it():
    # K = cubic_root(cube_factor * (W_max - cwnd)) for window gaps of 1..1e5 packets.
    worst = max(
        abs(cubic_root(cube_factor * d) - (cube_factor * d) ** (1 / 3))
        / (cube_factor * d) ** (1 / 3)
        for d in range(1, 100_000, 7)
    )
    assert worst < 0.005  # the kernel quotes ~0.2% average error
    assert [cubic_root(a) for a in (0, 1, 8, 27, 64, 1000)] == [0, 1, 2, 3, 4, 10]


@pytest.mark.parametrize("cwnd", [2, 3, 10, 100, 1001, 50_000])
def test_ssthresh_is_717_over_1024_at_least_two(cwnd):
    tp = TcpState(mss=1448, snd_cwnd=cwnd, snd_ssthresh=INFINITE_SSTHRESH)
    assert Cubic().ssthresh(tp) == max(cwnd * 717 // 1024, 2)


def test_fast_convergence_lowers_w_max():
    cc = Cubic()
    tp = TcpState(mss=1448, snd_cwnd=1000, snd_ssthresh=INFINITE_SSTHRESH)
    cc.ssthresh(tp)
    assert cc.last_max_cwnd == 1000
    tp.snd_cwnd = 800  # the next loss comes below the last W_max
    cc.ssthresh(tp)
    assert cc.last_max_cwnd == 800 * (1024 + 717) // 2048  # W_max (1 + beta) / 2
    tp.snd_cwnd = 900  # above it: W_max is the window at the loss
    cc.ssthresh(tp)
    assert cc.last_max_cwnd == 900
    cc.fast_convergence = 0
    tp.snd_cwnd = 500
    cc.ssthresh(tp)
    assert cc.last_max_cwnd == 500


def test_rto_forgets_w_max():
    cc = Cubic()
    tp = TcpState(mss=1448, snd_cwnd=1000, snd_ssthresh=INFINITE_SSTHRESH)
    cc.ssthresh(tp)
    cc.set_state(tp, CA_LOSS)
    assert cc.last_max_cwnd == 0 and cc.epoch_start == 0


def _run_after_loss(rtt_ns: float, w: int, seconds: float, init_cwnd: int):
    cc = make("cubic")
    samples: list[tuple[float, int, int, int]] = []
    p = Path(
        cc,
        rate_pps=FAST,
        prop_rtt_ns=rtt_ns,
        init_cwnd=init_cwnd,
        lose=lose_once(w),
        on_ack=lambda p: samples.append((p.now, p.tp.snd_cwnd, p.losses, cc.epoch_start)),
    )
    p.tp.snd_ssthresh = init_cwnd  # start in congestion avoidance
    p.run_until(seconds * 1e9)
    assert p.losses == 1
    # The epoch starts with the first congestion-avoidance ACK after recovery.
    after = [s for s in samples if s[2] == 1 and s[3] != 0]
    return cc, p, after


@pytest.mark.slow
def test_window_follows_the_cubic_curve_after_a_loss():
    rtt = 100e6
    cc, p, after = _run_after_loss(rtt, 200, 12.0, 150)
    t0, cwnd0 = after[0][0], after[0][1]
    w_max = cc.last_max_cwnd
    assert cwnd0 == w_max * 717 // 1024  # ssthresh after the loss
    # K = cbrt(W_max (1 - beta) / C), up to the floor in ssthresh and cubic_root's rounding.
    k = cc.bic_K / 1024
    assert k == pytest.approx((w_max * (1 - BETA) / C) ** (1 / 3), rel=0.01)
    assert cc.bic_K == cubic_root(cube_factor * (w_max - cwnd0))

    def w(t):
        return C * (t - k) ** 3 + w_max

    # cwnd tracks W(t): CUBIC aims each ACK at W one minimum RTT ahead.
    checked = 0
    for now, cwnd, _, _ in after:
        t = (now - t0) / 1e9
        assert w(t) - 2 <= cwnd <= w(t + rtt / 1e9) + 2, (t, cwnd, w(t))
        checked += 1
    assert checked > 10_000
    # Concave then convex: a plateau near W_max around K, then faster growth.
    at = {round((now - t0) / 1e9, 1): cwnd for now, cwnd, _, _ in after}
    assert abs(at[round(k, 1)] - w_max) <= 2
    assert at[round(k + 5, 1)] > w_max + 0.4 * 5**3 - 5


def test_tcp_friendly_region_at_small_bdp():
    """With a small window and a short RTT the cubic curve hardly moves in the
    RTTs after a loss; the Reno-equivalent window wins and grows
    3(1-beta)/(1+beta) packets per RTT (3b/(2-b) with b = 1 - beta the
    decrease): one packet per cwnd * 15/8 ACKs in the kernel's integers."""
    rtt = 10e6
    rounds = 100
    cc, p, after = _run_after_loss(rtt, 40, 1.5, 30)
    t0, cwnd0 = after[0][0], after[0][1]
    round_ns = rtt + 1e9 / FAST
    end = [c for now, c, _, _ in after if now <= t0 + rounds * round_ns][-1]
    reno_gain = rounds * 3 * (1 - BETA) / (1 + BETA)
    assert end - cwnd0 == pytest.approx(reno_gain, rel=0.05)
    # ...where the cubic curve alone gains a fraction of that.
    k = cc.bic_K / 1024
    secs = rounds * round_ns / 1e9
    cubic_gain = C * ((secs + rtt / 1e9 - k) ** 3 - (-k) ** 3)
    assert cubic_gain < reno_gain / 3
    # Without friendliness CUBIC stays on its curve.
    cc2 = make("cubic")
    cc2.tcp_friendliness = 0
    p2 = Path(cc2, rate_pps=FAST, prop_rtt_ns=rtt, init_cwnd=30, lose=lose_once(40))
    p2.tp.snd_ssthresh = 30
    p2.run_until(t0 + rounds * round_ns)
    assert p2.tp.snd_cwnd <= cwnd0 + cubic_gain + 2


def test_tcp_friendly_growth_lags_at_2ms_rtt_from_the_jiffy_gate():
    """bictcp_update recomputes cnt only when cwnd changed or HZ/32 (31 ms at
    HZ=1000) passed: at a 2 ms RTT that stalls growth for up to ~15 RTTs each
    time cwnd catches the Reno estimate, so the kernel gains less than the
    nominal 3(1-beta)/(1+beta) per RTT — but still far more than the curve."""
    rtt = 2e6
    rounds = 100
    cc, p, after = _run_after_loss(rtt, 40, 0.5, 30)
    t0, cwnd0 = after[0][0], after[0][1]
    end = [c for now, c, _, _ in after if now <= t0 + rounds * (rtt + 1e9 / FAST)][-1]
    reno_gain = rounds * 3 * (1 - BETA) / (1 + BETA)
    assert 0.75 * reno_gain <= end - cwnd0 < 0.95 * reno_gain


def test_hystart_ack_train_exits_slow_start_near_bdp():
    cc = Cubic()
    cc.hystart_detect = HYSTART_ACK_TRAIN
    rate, rtt = 10_000, 20e6
    bdp = rate * rtt / 1e9
    p = Path(cc, rate_pps=rate, prop_rtt_ns=rtt)
    p.run_until(1e9)
    assert cc.found
    assert p.losses == 0  # left slow start before the (large) queue overflowed
    assert bdp / 2 <= p.tp.snd_ssthresh <= 2 * bdp


def test_hystart_delay_exits_when_the_round_rtt_rises():
    cc = Cubic()
    cc.hystart_detect = HYSTART_DELAY
    seen: list[tuple[int, int]] = []

    def watch(p: Path) -> None:
        if cc.found and not seen:
            seen.append((cc.curr_rtt, cc.delay_min))

    p = Path(cc, rate_pps=10_000, prop_rtt_ns=20e6, on_ack=watch)
    p.run_until(1e9)
    assert cc.found and p.losses == 0
    curr, delay_min = seen[0]
    # threshold: delay_min/8 clamped to 4..16 ms
    assert curr > delay_min + min(max(delay_min >> 3, 4000), 16000)


@pytest.mark.slow
def test_hystart_does_not_exit_when_rtt_is_flat():
    cc = Cubic()
    p = Path(cc, rate_pps=1e8, prop_rtt_ns=20e6)  # no queue: every RTT sample the same
    p.run_until(0.25e9)
    assert not cc.found
    assert p.tp.snd_ssthresh == INFINITE_SSTHRESH
    assert p.tp.snd_cwnd > 10 * 2**10


def test_hystart_needs_low_window():
    cc = Cubic()
    tp = TcpState(mss=1448, snd_cwnd=10, snd_ssthresh=INFINITE_SSTHRESH)
    cc.init(tp)
    for i in range(50):  # a large RTT rise, but cwnd below hystart_low_window
        tp.now_ns = i * 1e5
        cc.pkts_acked(tp, AckSample(1, 20e6 if i < 9 else 60e6, 10))
    assert not cc.found


@settings(max_examples=150, deadline=None)
@given(
    cwnd=st.integers(1, 3000),
    clamp=st.integers(1, 5000),
    steps=st.lists(
        st.tuples(st.integers(0, 2_000_000), st.integers(1, 32), st.booleans()),
        max_size=80,
    ),
)
def test_invariants(cwnd, clamp, steps):
    cc = make("cubic")
    cwnd = min(cwnd, clamp)
    tp = TcpState(mss=1448, snd_cwnd=cwnd, snd_ssthresh=INFINITE_SSTHRESH, snd_cwnd_clamp=clamp)
    tp.is_cwnd_limited = True
    cc.init(tp)
    now = 0.0
    for dt_us, acked, loss in steps:
        now += dt_us * 1e3
        tp.now_ns = now
        if loss:
            tp.snd_ssthresh = cc.ssthresh(tp)
            tp.snd_cwnd = min(tp.snd_cwnd, tp.snd_ssthresh)
        else:
            cc.pkts_acked(tp, AckSample(acked, 10e6 + dt_us, tp.snd_cwnd))
            cc.cong_avoid(tp, acked)
        assert 1 <= tp.snd_cwnd <= clamp
        assert tp.snd_ssthresh >= 2
        assert cc.cnt >= 2 or cc.cnt == 0


def test_idle_restart_shifts_the_epoch_by_the_idle_time():
    cc = Cubic()
    tp = TcpState(mss=1448, snd_cwnd=100, snd_ssthresh=50)
    cc.init(tp)
    cc.epoch_start = 1000  # jiffies (ms at HZ=1000)
    tp.lsndtime_ns = 3.0e9  # last send at 3 s
    tp.now_ns = 3.5e9  # restart after 500 ms idle
    cc.cwnd_event(tp, CA_EVENT_TX_START)
    assert cc.epoch_start == 1500
    tp.lsndtime_ns, tp.now_ns = 1.0e9, 13.5e9  # the shift would pass now: capped at now
    cc.cwnd_event(tp, CA_EVENT_TX_START)
    assert cc.epoch_start == 13_500


@pytest.mark.parametrize(
    ("pacing_rate", "cushion_us"),
    [(0, 0), (1e9, 65536 * 4 * 1_000_000 // 1_000_000_000), (1e8, 1000)],
)
def test_hystart_ack_delay_cushion(pacing_rate, cushion_us):
    """hystart_ack_delay: 4 GSO-sized packets at the pacing rate, at most 1 ms."""
    tp = TcpState(mss=1448, snd_cwnd=10, snd_ssthresh=INFINITE_SSTHRESH)
    tp.pacing_rate = pacing_rate
    assert Cubic()._hystart_ack_delay(tp) == cushion_us
