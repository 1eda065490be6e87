"""BBR v1 (Linux tcp_bbr.c) driven by synthetic ACK streams."""

from __future__ import annotations

from math import log2

import pytest
from cc_driver import Path
from hypothesis import given, settings
from hypothesis import strategies as st

from cpasim.model.cc import make
from cpasim.model.cc.base import CA_OPEN, CA_RECOVERY, INFINITE_SSTHRESH, RateSample, TcpState
from cpasim.model.cc.bbr import (
    BBR_DRAIN,
    BBR_PROBE_BW,
    BBR_PROBE_RTT,
    BBR_STARTUP,
    BBR_UNIT,
    BW_UNIT,
    Bbr,
    Minmax,
)

RATE = 10_000  # packets/s at the bottleneck (~116 Mbit/s of 1448-byte segments)
PROP = 20e6  # ns two-way propagation
MSS = 1448
MIN_RTT = PROP + 1e9 / RATE  # propagation plus one packet's transmission
BDP = RATE * MIN_RTT / 1e9  # 201 packets


def _record(seconds: float, seed: int = 0, **kw):
    cc = make("bbr", seed=seed)
    rows = []

    def on_ack(p: Path) -> None:
        rows.append(
            (
                p.now,
                cc.mode,
                cc.cycle_idx,
                cc.pacing_gain,
                p.tp.snd_cwnd,
                p.tp.packets_in_flight,
                p.tp.pacing_rate,
                cc.max_bw(),
                cc.min_rtt_us,
                cc.rtt_cnt,
            )
        )

    p = Path(cc, rate_pps=RATE, prop_rtt_ns=PROP, mss=MSS, on_ack=on_ack, **kw)
    p.run_until(seconds * 1e9)
    return cc, p, rows


@pytest.fixture(scope="module")
def steady():
    return _record(12.0)


def _runs(rows, key):
    """(value, first time, last time) for each run of equal key(row)."""
    out = []
    for r in rows:
        k = key(r)
        if out and out[-1][0] == k:
            out[-1][2] = r[0]
        else:
            out.append([k, r[0], r[0]])
    return out


def _starts_drains_and_probes(rows):
    def rounds_at(t):
        return next(r[9] for r in rows if r[0] >= t)

    modes = [m for m, _, _ in _runs(rows, lambda r: r[1])]
    assert modes[:3] == [BBR_STARTUP, BBR_DRAIN, BBR_PROBE_BW]
    # STARTUP ends after 3 rounds without 25% bandwidth growth: within a few
    # rounds of filling the pipe (log2(BDP/10) ~ 4.3 rounds of doubling).
    drain_at = next(r[0] for r in rows if r[1] == BBR_DRAIN)
    assert log2(BDP / 10) + 3 <= rounds_at(drain_at) <= log2(BDP / 10) + 3 + 3
    # DRAIN lasts about one round (its gain is 1/high_gain).
    probe_at = next(r[0] for r in rows if r[1] == BBR_PROBE_BW)
    assert probe_at - drain_at < 4 * MIN_RTT
    # ...and leaves in-flight at about one BDP.
    assert next(r[5] for r in rows if r[1] == BBR_PROBE_BW) <= BDP * 1.1


@pytest.mark.slow
def test_startup_drain_probe_bw_on_a_constant_rate(steady):
    cc, p, rows = steady
    _starts_drains_and_probes(rows)
    assert p.losses == 0


def test_the_first_half_second_starts_drains_and_probes():
    """The quick suite's share of the 12 s run: its first half second, the same
    phases, and the pacing rate of the first PROBE_BW cycles."""
    cc, p, rows = _record(0.5)
    _starts_drains_and_probes(rows)
    assert p.losses == 0
    assert _pacing_checked(rows) > 1000


@pytest.mark.slow
def test_bandwidth_estimate_converges_to_the_delivery_rate(steady):
    cc, p, rows = steady
    bw_pps = cc.max_bw() * 1e6 / BW_UNIT
    assert bw_pps == pytest.approx(RATE, rel=0.01)
    assert cc.min_rtt_us == pytest.approx(MIN_RTT / 1e3, abs=2)


@pytest.mark.slow
def test_pacing_gain_cycles_eight_phases_one_per_min_rtt(steady):
    cc, p, rows = steady
    probe = [r for r in rows if r[1] == BBR_PROBE_BW and r[0] < 10e9]
    phases = _runs(probe, lambda r: r[2])
    idx = [k for k, _, _ in phases]
    assert all((b - a) % 8 == 1 for a, b in zip(idx, idx[1:], strict=False))
    assert len(phases) > 8 * 40
    gains = {k: g for (_, _, k, g, *_) in probe}
    assert gains == {0: 320, 1: 192, **{k: BBR_UNIT for k in range(2, 8)}}  # 5/4, 3/4, 1...
    # Phase lengths from the start of one phase to the start of the next.
    starts = [(k, t0) for k, t0, _ in phases]
    for (k, a), (_, b) in zip(starts[1:-1], starts[2:], strict=False):
        if k >= 2:  # cruising phases: one min_rtt (plus the ACK spacing)
            assert MIN_RTT <= b - a <= MIN_RTT + 3e6
        elif k == 0:  # probing: at least min_rtt, until in-flight reaches 5/4 BDP
            assert b - a >= MIN_RTT
        else:  # draining: at most min_rtt, ends early once in-flight is one BDP
            assert b - a <= MIN_RTT + 3e6


def _pacing_checked(rows) -> int:
    """Rows in PROBE_BW whose pacing rate is gain x bw less 1 % (all of them, or it fails)."""
    checked = 0
    for _, mode, _, gain, _, _, pacing, bw, *_ in rows:
        if mode == BBR_PROBE_BW and bw:
            want = gain / BBR_UNIT * bw / BW_UNIT * 1e6 * MSS * 0.99
            assert pacing == pytest.approx(want, rel=1e-3)
            checked += 1
    return checked


@pytest.mark.slow
def test_pacing_rate_is_gain_times_bw_less_one_percent(steady):
    cc, p, rows = steady
    assert _pacing_checked(rows) > 10_000
    # In PROBE_BW the rates are the cycle's: 5/4, 3/4 and 1 x RATE x 0.99.
    for r in rows:
        if r[1] == BBR_PROBE_BW:
            assert r[6] / (RATE * MSS * 0.99) == pytest.approx(r[3] / BBR_UNIT, rel=0.015)


@pytest.mark.slow
def test_cwnd_is_two_bdp_plus_quantization_budget(steady):
    cc, p, rows = steady
    # tso_segs_goal: ~1 ms of data at the pacing rate (sk_pacing_shift 10), at most
    # 1.25 x RATE in PROBE_BW; the budget is 3 of them, rounded up even, +2 in phase 0.
    tso_max = int(1.25 * RATE * MSS * 0.99) // 1024 // MSS
    lo, hi = 2 * BDP, 2 * BDP + 3 * tso_max + 4
    probe = [r for r in rows if r[1] == BBR_PROBE_BW and r[0] > 1e9 and r[0] < 10e9]
    for r in probe:
        assert lo <= r[4] <= hi + 4  # + the ACK-aggregation allowance (a few packets)
        assert r[5] <= r[4]
    # The flight itself stays near one BDP (gain 1 pacing), never above 1.5 BDP.
    assert max(r[5] for r in probe) <= 1.5 * BDP


@pytest.mark.slow
def test_probe_rtt_after_ten_seconds_holds_four_packets_for_200ms(steady):
    cc, p, rows = steady
    runs = _runs(rows, lambda r: r[1])
    probe_rtt = [(t0, t1) for m, t0, t1 in runs if m == BBR_PROBE_RTT]
    assert len(probe_rtt) == 1
    t0, t1 = probe_rtt[0]
    # The min_rtt filter was last refreshed early in STARTUP; it expires the
    # first jiffy after 10 s (at the next ACK, 0.1 ms apart here).
    refreshed = [r[0] for a, r in zip(rows, rows[1:], strict=False) if r[8] != a[8] and r[0] < t0]
    assert t0 - refreshed[-1] >= 10e9
    assert t0 - refreshed[-1] <= 10e9 + 2e6 + 1e9 / RATE
    inside = [r for r in rows if t0 <= r[0] <= t1]
    assert all(r[4] == 4 for r in inside)  # cwnd held at bbr_cwnd_min_target
    assert all(r[3] == BBR_UNIT for r in inside)
    # At least 200 ms once the flight has drained to 4 packets, and one round.
    drained = next(r[0] for r in inside if r[5] <= 4)
    after = next(r for r in rows if r[0] > t1)  # the ACK that ends PROBE_RTT
    assert after[0] - drained >= 200e6
    assert after[0] - drained <= 200e6 + 2 * MIN_RTT
    # Then back to PROBE_BW with the saved cwnd.
    assert after[1] == BBR_PROBE_BW and after[4] >= 2 * BDP


@pytest.mark.slow
def test_same_seed_same_run_and_seed_changes_first_phase():
    a = _record(1.0, seed=3)[2]
    b = _record(1.0, seed=3)[2]
    assert a == b
    firsts = set()
    for seed in range(12):
        rows = _record(0.5, seed=seed)[2]
        firsts.add(next(r[2] for r in rows if r[1] == BBR_PROBE_BW))
    assert len(firsts) > 1 and firsts <= set(range(1, 8))  # never starts by probing


def test_packet_conservation_in_the_first_round_of_recovery():
    cc = Bbr()
    tp = TcpState(mss=MSS, snd_cwnd=100, snd_ssthresh=INFINITE_SSTHRESH)
    cc.init(tp)
    tp.packets_out = 60
    tp.delivered = 500
    cc.next_rtt_delivered = 10_000  # mid-round
    # Entering recovery: ssthresh() saves cwnd and leaves ssthresh alone.
    assert cc.ssthresh(tp) == INFINITE_SSTHRESH and cc.prior_cwnd == 100
    tp.ca_state = CA_RECOVERY
    rs = RateSample(delivered=1, interval_ns=-1, acked_sacked=2, losses=1, prior_in_flight=62)
    assert cc.cong_control(tp, rs)
    assert cc.packet_conservation
    assert tp.snd_cwnd == tp.packets_in_flight + 2  # send what was acked
    # Leaving recovery restores the saved cwnd.
    tp.ca_state = CA_OPEN
    cc.packet_conservation = False
    cc.cong_control(tp, RateSample(delivered=1, interval_ns=-1, acked_sacked=1))
    assert tp.snd_cwnd >= 100


@pytest.mark.slow
def test_policer_detected_and_long_term_rate_used():
    """A token-bucket policer at half the link rate: after two lossy intervals
    with the same delivery rate BBR paces at that long-term rate."""
    police_pps, bucket = RATE / 2, 60
    state = {"tokens": float(bucket), "t": 0.0}

    def policer(tp: TcpState, seq: int) -> bool:
        state["tokens"] = min(bucket, state["tokens"] + (tp.now_ns - state["t"]) * police_pps / 1e9)
        state["t"] = tp.now_ns
        if state["tokens"] >= 1:
            state["tokens"] -= 1
            return False
        return True

    cc = make("bbr")
    seen = []  # (t, lt_use_bw, lt_bw, pacing_gain, pacing_rate, rtt_cnt)
    p = Path(
        cc,
        rate_pps=RATE,
        prop_rtt_ns=PROP,
        mss=MSS,
        lose=policer,
        on_ack=lambda p: seen.append(
            (p.now, cc.lt_use_bw, cc.lt_bw, cc.pacing_gain, p.tp.pacing_rate, cc.rtt_cnt)
        ),
    )
    p.run_until(3e9)
    using = [r for r in seen if r[1]]
    assert using and using[0][0] < 1e9  # detected within the first second
    for _, _, lt_bw, gain, pacing, _ in using:
        assert lt_bw * 1e6 / BW_UNIT == pytest.approx(police_pps, rel=0.03)
        assert gain == BBR_UNIT  # no probing above a policer
        assert pacing == pytest.approx(lt_bw / BW_UNIT * 1e6 * MSS * 0.99, rel=1e-3)
    # lt_bw is used for bbr_lt_bw_max_rtts = 48 rounds, then sampling restarts.
    runs = _runs(seen, lambda r: r[1])
    first_use = next(i for i, (k, _, _) in enumerate(runs) if k)
    t0, t1 = runs[first_use][1], runs[first_use][2]
    rounds = {r[5] for r in seen if t0 <= r[0] <= t1}
    assert max(rounds) - min(rounds) + 1 == pytest.approx(48, abs=1)
    assert len(runs) > first_use + 1


def test_minmax_window_expires_old_max():
    m = Minmax()
    m.reset(0, 0)
    assert m.running_max(10, 1, 100) == 100
    for t in range(2, 11):
        assert m.running_max(10, t, 50) == 100
    # Ten rounds later the 100 has left the window; the best since then remains.
    assert m.running_max(10, 12, 40) == 50


@settings(max_examples=100, deadline=None)
@given(
    clamp=st.integers(1, 3000),
    steps=st.lists(
        st.tuples(
            st.integers(1, 50_000),  # µs since the last ACK
            st.integers(0, 40),  # delivered in the sample
            st.integers(0, 5_000_000),  # interval, ns
            st.integers(-1, 200_000),  # rtt, µs
            st.integers(0, 3),  # losses
            st.sampled_from([CA_OPEN, CA_OPEN, CA_RECOVERY]),
            st.booleans(),  # app-limited
        ),
        max_size=120,
    ),
)
def test_invariants(clamp, steps):
    cc = make("bbr")
    tp = TcpState(mss=MSS, snd_cwnd=min(10, clamp), snd_ssthresh=INFINITE_SSTHRESH)
    tp.snd_cwnd_clamp = clamp
    cc.init(tp)
    now = 0.0
    for dt_us, dlv, interval, rtt_us, losses, state, app in steps:
        now += dt_us * 1e3
        tp.now_ns = now
        prior_in_flight = tp.packets_in_flight
        tp.packets_out = max(0, min(tp.snd_cwnd, tp.packets_out + 2) - dlv)
        if state == CA_RECOVERY and tp.ca_state == CA_OPEN:
            tp.snd_ssthresh = cc.ssthresh(tp)
        tp.ca_state = state
        tp.delivered += dlv
        tp.lost += losses
        tp.delivered_mstamp_ns = now
        tp.min_rtt_ns = 1e6
        rs = RateSample(
            prior_delivered=tp.delivered - dlv,
            delivered=dlv,
            interval_ns=float(interval),
            rtt_ns=rtt_us * 1e3 if rtt_us >= 0 else -1.0,
            losses=losses,
            acked_sacked=dlv,
            prior_in_flight=prior_in_flight,
            is_app_limited=app,
        )
        cc.cong_control(tp, rs)
        assert 1 <= tp.snd_cwnd <= clamp
        assert tp.snd_ssthresh >= 2
        assert tp.pacing_rate >= 0
        assert cc.mode in (BBR_STARTUP, BBR_DRAIN, BBR_PROBE_BW, BBR_PROBE_RTT)


@pytest.mark.parametrize(
    ("pacing_rate", "segs"),
    [
        (100_000, 1),  # below bbr_min_tso_rate (1.2 Mbit/s): one segment
        (200_000, 2),  # min_tso_segs 2, ~1 ms of data is under one segment
        (RATE * MSS * 0.99, int(RATE * MSS * 0.99) // 1024 // MSS),  # ~1 ms of data
        (10e9, (65536 - 1 - 320) // MSS),  # capped by one legacy 64 KB GSO packet
    ],
)
def test_tso_segs_goal(pacing_rate, segs):
    cc = Bbr()
    tp = TcpState(mss=MSS, snd_cwnd=10, snd_ssthresh=INFINITE_SSTHRESH)
    cc.init(tp)
    tp.pacing_rate = pacing_rate
    assert cc._tso_segs_goal(tp) == segs


@pytest.mark.slow
def test_bandwidth_filter_forgets_a_lost_rate_within_ten_rounds():
    """The max filter spans bbr_bw_rtts = 10 packet-timed rounds: when the
    bottleneck halves, the old rate is kept for a few rounds, then forgotten."""
    cc = make("bbr")
    rows = []
    p = Path(
        cc,
        rate_pps=RATE,
        prop_rtt_ns=PROP,
        mss=MSS,
        on_ack=lambda p: rows.append((p.now, cc.rtt_cnt, cc.max_bw() * 1e6 / BW_UNIT)),
    )
    p.run_until(2e9)
    p.set_rate(RATE / 2)  # the bottleneck halves
    p.run_until(4e9)
    r_drop = next(r[1] for r in rows if r[0] >= 2e9)
    held = [r[2] for r in rows if r[1] == r_drop + 2]
    assert min(held) >= 0.95 * RATE  # still the windowed max of the old rate
    r_forget = next(r[1] for r in rows if r[0] >= 2e9 and r[2] < 0.6 * RATE)
    assert r_forget - r_drop <= 10 + 1
    assert rows[-1][2] == pytest.approx(RATE / 2, rel=0.01)


@pytest.mark.slow
def test_loss_does_not_make_bbr_back_off():
    """A drop-tail buffer of a quarter BDP: BBR v1's 2 BDP cwnd keeps it
    losing, but its model ignores loss: the link stays full and the estimate
    stays the link rate; recovery rounds use packet conservation."""
    cc = make("bbr")
    rows = []
    p = Path(
        cc,
        rate_pps=RATE,
        prop_rtt_ns=PROP,
        mss=MSS,
        buffer_pkts=int(BDP / 4),
        on_ack=lambda p: rows.append((p.tp.ca_state, cc.packet_conservation, p.tp.snd_cwnd)),
    )
    seconds = 4.0
    p.run_until(seconds * 1e9)
    assert p.losses > 100
    assert p.tp.delivered / seconds >= 0.95 * RATE
    assert cc.max_bw() * 1e6 / BW_UNIT == pytest.approx(RATE, rel=0.01)
    assert any(cons for state, cons, _ in rows if state == CA_RECOVERY)
    assert not any(cons for state, cons, _ in rows if state == CA_OPEN)
    assert min(c for _, _, c in rows) >= 1
