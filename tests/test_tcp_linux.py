"""Linux's TCP sender rules (cpasim.model.tcp_linux) without SimPy: the SACK
scoreboard, RACK and dupack loss marking, PRR's arithmetic, RTO, rate samples,
the pacing clock; and the receiver's SACK blocks."""

from __future__ import annotations

import math

import pytest

from cpasim.model.cc.base import CA_DISORDER, CA_LOSS, CA_OPEN, CA_RECOVERY, RateSample
from cpasim.model.cc.reno import Reno
from cpasim.model.tcp_linux import LinuxSender
from cpasim.model.tcp_rules import Receiver
from cpasim.protocol import sack_blocks_max

MSS = 1000
RWND = 1 << 30


class Recording(Reno):
    """Reno that keeps every rate sample it is handed (and leaves control to cong_avoid)."""

    def __init__(self) -> None:
        super().__init__()
        self.samples: list[RateSample] = []

    def cong_control(self, tp, rs) -> bool:
        self.samples.append(RateSample(**{f: getattr(rs, f) for f in rs.__slots__}))
        return False


def sender(ca=None, **kw) -> LinuxSender:
    args = dict(
        mss=MSS,
        init_cwnd=20,
        rwnd=RWND,
        ca=ca or Reno(),
        sack=True,
        recovery="rack",
        rto_min_ns=200e6,
    )
    args.update(kw)
    return LinuxSender(**args)


def send(s: LinuxSender, n: int, t0: float = 0.0, dt: float = 0.0) -> None:
    for i in range(n):
        s.on_send(MSS, t0 + i * dt)


def blk(a: int, b: int) -> tuple[int, int]:
    """SACK block of segments a..b-1."""
    return (a * MSS, b * MSS)


# -- SACK scoreboard ------------------------------------------------------------------------


def test_sack_blocks_mark_segments_once_and_shrink_the_flight():
    s = sender(recovery="dupack")
    send(s, 10)
    tp = s.tp
    s.on_ack(0, RWND, 100.0, False, (blk(2, 4),))
    assert (tp.packets_out, tp.sacked_out, tp.delivered) == (10, 2, 2)
    assert tp.packets_in_flight == 8 and tp.ca_state == CA_DISORDER
    # The same block again adds nothing; a new block is added to it.
    s.on_ack(0, RWND, 110.0, False, (blk(7, 8), blk(2, 4)))
    assert (tp.sacked_out, tp.delivered) == (3, 3)
    s.on_ack(0, RWND, 120.0, False, (blk(7, 8), blk(2, 4)))
    assert tp.sacked_out == 3
    # A cumulative ACK over sacked segments: they leave the queue, counted once.
    out = s.on_ack(3 * MSS, RWND, 130.0, False, (blk(7, 8),))
    assert out.acked == 3 * MSS
    assert (tp.packets_out, tp.sacked_out, tp.delivered) == (7, 2, 5)
    # A block below snd_una (D-SACK) is ignored.
    s.on_ack(3 * MSS, RWND, 140.0, False, (blk(0, 1),))
    assert (tp.sacked_out, tp.delivered) == (2, 5)


def test_dupack_threshold_marks_holes_with_three_sacked_above():
    s = sender(recovery="dupack")
    send(s, 10)
    tp = s.tp
    s.on_ack(0, RWND, 100.0, False, (blk(1, 2),))
    s.on_ack(0, RWND, 101.0, False, (blk(1, 3),))
    assert tp.ca_state == CA_DISORDER and tp.lost_out == 0
    out = s.on_ack(0, RWND, 102.0, False, (blk(1, 4),))
    # RFC 6675 IsLost: segment 0 has 3 sacked above it; Reno halves cwnd (ssthresh 10).
    assert tp.ca_state == CA_RECOVERY and tp.lost_out == 1 and tp.snd_ssthresh == 10
    assert out.retransmits == [(0, MSS)] and tp.retrans_out == 1


def test_rack_marks_by_time_before_three_dupacks():
    """RACK: a segment is lost once a later-sent one was delivered and more than
    RACK.rtt + min_rtt/4 has passed since it was sent; the dupack rule waits."""
    for recovery, lost in (("rack", 1), ("dupack", 0)):
        s = sender(recovery=recovery)
        tp = s.tp
        s.on_send(MSS, 0.0)
        s.on_ack(MSS, RWND, 100.0, False)  # min_rtt = 100 ns
        s.on_send(MSS, 200.0)  # B (segment 1)
        s.on_send(MSS, 300.0)  # C (segment 2)
        # C sacked at 1300: RACK.rtt = 1000; B was sent 1100 ago > 1000 + 100/4.
        out = s.on_ack(MSS, RWND, 1300.0, False, (blk(2, 3),))
        assert tp.lost_out == lost, recovery
        if lost:
            assert tp.ca_state == CA_RECOVERY and out.retransmits == [(MSS, MSS)]
        else:
            assert tp.ca_state == CA_DISORDER and out.retransmits == []


def test_rack_waits_for_the_reordering_window():
    s = sender()
    tp = s.tp
    s.on_send(MSS, 0.0)
    s.on_ack(MSS, RWND, 1000.0, False)  # min_rtt = 1000
    s.on_send(MSS, 2000.0)
    s.on_send(MSS, 2100.0)
    # C sacked: RACK.rtt = 1000; B sent 1100 ago < 1000 + 250: not yet lost.
    s.on_ack(MSS, RWND, 3100.0, False, (blk(2, 3),))
    assert tp.lost_out == 0 and tp.ca_state == CA_DISORDER


def test_rack_reordering_timer_marks_the_overdue_segment_later():
    """What RACK cannot call lost yet arms the reordering timer (in jiffies, plus
    TCP_TIMEOUT_MIN); when it fires the segment is lost, Recovery begins, it is resent."""
    s = sender()
    tp = s.tp
    s.on_send(MSS, 0.0)
    s.on_ack(MSS, RWND, 1000.0, False)  # min_rtt = 1000 ns
    s.on_send(MSS, 2000.0)
    s.on_send(MSS, 2010.0)
    out = s.on_ack(MSS, RWND, 3010.0, False, (blk(2, 3),))  # 240 ns short of overdue
    assert tp.lost_out == 0 and out.rearm and out.retransmits == []
    due = s.timer_deadline(3010.0)
    assert due == 3010.0 + 1e6 + 2e6
    assert s.on_timeout(due) == [(MSS, MSS)]
    assert tp.ca_state == CA_RECOVERY and tp.lost_out == 1 and tp.retrans_out == 1
    assert s.backoff == 0  # not an RTO
    assert s.timer_deadline(due) == due + s.rto_ns  # the RTO is armed next


def test_tail_loss_probe_resends_the_last_segment_after_two_srtt():
    s = sender()
    tp = s.tp
    send(s, 5)
    s.on_ack(2 * MSS, RWND, 1e6, False)  # srtt = 1 ms
    # 2 srtt in jiffies plus TCP_TIMEOUT_MIN (two jiffies): 4 ms; not the 200 ms RTO.
    due = s.timer_deadline(1e6)
    assert due == 1e6 + 4e6 and s.pending == "tlp"
    assert s.on_timeout(due) == [(4 * MSS, MSS)]
    assert s.tlp_high_seq == 5 * MSS and tp.retrans_out == 0 and s.backoff == 0
    assert s.timer_deadline(due) == due + s.rto_ns and s.pending == "rto"  # one probe only
    # With one segment out the probe waits rto_min longer (for a delayed ACK).
    s = sender()
    s.on_send(MSS, 0.0)
    s.on_send(MSS, 0.0)
    s.on_ack(MSS, RWND, 1e6, False)
    assert s.timer_deadline(1e6) == 1e6 + min(2e6 + 200e6, s.rto_ns)


def test_reno_sack_emulation_counts_dupacks():
    s = sender(sack=False)
    send(s, 10)
    tp = s.tp
    s.on_ack(0, RWND, 100.0, False)  # a first ACK to fix the window (not a dupack? same wnd)
    assert tp.sacked_out == 1
    s.on_ack(0, RWND, 101.0, False)
    out = s.on_ack(0, RWND, 102.0, False)
    assert tp.sacked_out == 3 and tp.ca_state == CA_RECOVERY
    assert out.retransmits == [(0, MSS)]
    # A window update is not a duplicate ACK.
    s.on_ack(0, RWND - 1, 103.0, False)
    assert tp.sacked_out == 3


# -- PRR (RFC 6937) ----------------------------------------------------------------------------


def test_prr_sends_in_proportion_while_pipe_exceeds_ssthresh():
    """RFC 6937's example: cwnd 20, one loss, ssthresh 10 — one segment sent for every
    two delivered, ``sndcnt = ceil(prr_delivered * ssthresh / RecoverFS) - prr_out``."""
    s = sender(recovery="dupack")
    send(s, 20)
    tp = s.tp
    now = 100.0
    for k in range(1, 4):  # segments 1..3 sacked: recovery on the third
        out = s.on_ack(0, RWND, now, False, (blk(1, 1 + k),))
        now += 1
    assert tp.ca_state == CA_RECOVERY and s.prior_cwnd == 20 and tp.snd_ssthresh == 10
    sent = 0
    for seq, _ in out.retransmits:  # the fast retransmit
        s.on_retransmit(seq, now)
        sent += 1
    assert sent == 1 and s.prr_out == 1
    for k in range(4, 19):
        out = s.on_ack(0, RWND, now, False, (blk(1, k + 1),))
        assert out.retransmits == []
        pipe_before_sends = tp.packets_in_flight
        while s.usable() >= MSS:
            s.on_send(MSS, now)
        now += 1
        if pipe_before_sends > tp.snd_ssthresh:
            prr_delivered = k - 2  # sacked since the ACK that began recovery, that one included
            assert s.prr_out == math.ceil(prr_delivered * 10 / 20), k
        else:  # then PRR-SSRB holds the pipe at ssthresh
            assert k >= 15 and tp.packets_in_flight == tp.snd_ssthresh, k


def test_prr_slow_start_reduction_bound():
    """Once pipe < ssthresh: sndcnt = min(ssthresh - pipe, max(prr_delivered - prr_out,
    DeliveredData) + 1 on an ACK that advances snd_una without new losses)."""
    s = sender()
    tp = s.tp
    tp.ca_state = CA_RECOVERY
    tp.snd_ssthresh = 10
    s.prior_cwnd = 20
    tp.packets_out = 6  # pipe 6 < ssthresh 10
    s.prr_delivered = 8
    s.prr_out = 5
    s._cwnd_reduction(2, 0, 16)  # FLAG_SND_UNA_ADVANCED
    # prr_delivered 10: max(10 - 5, 2) + 1 = 6, bounded by ssthresh - pipe = 4.
    assert tp.snd_cwnd == 6 + 4
    s.prr_delivered, s.prr_out = 8, 7
    s._cwnd_reduction(1, 0, 0)
    assert tp.snd_cwnd == 6 + max(9 - 7, 1)


def test_recovery_ends_at_high_seq_with_cwnd_at_ssthresh():
    s = sender(recovery="dupack")
    send(s, 20)
    tp = s.tp
    for k in range(1, 4):
        out = s.on_ack(0, RWND, 100.0 + k, False, (blk(1, 1 + k),))
    s.on_retransmit(0, 104.0)
    s.on_ack(20 * MSS, RWND, 200.0, False)
    assert tp.ca_state == CA_OPEN and tp.snd_cwnd == 10 and tp.packets_out == 0
    assert out.retransmits == [(0, MSS)]


# -- RTO ---------------------------------------------------------------------------------------


def test_rto_enters_loss_with_cwnd_one_and_backs_off():
    s = sender()
    send(s, 10)
    s.xmit_done()
    tp = s.tp
    rto = s.rto_ns
    out = s.on_timeout(1e9)
    assert tp.ca_state == CA_LOSS and tp.snd_cwnd == 1 and tp.snd_ssthresh == 10
    assert tp.lost_out == 10 and tp.retrans_out == 1 and out == [(0, MSS)]
    assert s.rto_ns == 2 * rto
    s.on_retransmit(0, 1e9)
    # Each ACK in Loss slow-starts and resends further lost segments.
    out = s.on_ack(MSS, RWND, 1.1e9, False)
    assert tp.snd_cwnd == 2 and [q for q, _ in out.retransmits] == [MSS, 2 * MSS]
    assert s.backoff == 0


# -- rate samples (tcp_rate.c) ------------------------------------------------------------------


def test_rate_sample_on_a_constant_rate_drive():
    """Send one segment every 10 us, each ACKed 100 us later: every valid sample
    measures one segment per 10 us."""
    ca = Recording()
    s = sender(ca=ca, init_cwnd=1000)
    gap, rtt = 10_000.0, 100_000.0
    events = []  # (time, kind, seq)
    for i in range(300):
        events.append((i * gap, 0, i))
        events.append((i * gap + rtt, 1, i))
    for t, kind, i in sorted(events):
        if kind == 0:
            s.on_send(MSS, t)
        else:
            s.on_ack((i + 1) * MSS, RWND, t, False)
    valid = [rs for rs in ca.samples[50:] if rs.interval_ns > 0]
    assert len(valid) > 200
    for rs in valid:
        assert rs.delivered / rs.interval_ns == pytest.approx(1 / gap, rel=1e-9)
        assert rs.rtt_ns == pytest.approx(rtt) and rs.acked_sacked == 1
    assert s.tp.min_rtt_ns == pytest.approx(rtt)


def test_app_limited_marks_samples():
    ca = Recording()
    s = sender(ca=ca)
    s.on_send(MSS, 0.0)
    s.check_app_limited(0)  # nothing more to send, cwnd not full
    assert s.tp.app_limited > 0
    s.on_send(MSS, 10.0)
    s.on_ack(2 * MSS, RWND, 1000.0, False)
    assert ca.samples[-1].is_app_limited
    assert s.tp.app_limited == 0  # delivered went beyond the mark


# -- pacing -------------------------------------------------------------------------------------


def test_pacing_clock_advances_by_len_over_rate_from_the_tenth_segment():
    ca = Reno()
    ca.needs_pacing = True
    s = sender(ca=ca)
    s.tp.pacing_rate = 1e6  # bytes/s: 1 ms per 1000-byte segment
    send(s, 9)  # the first nine go unpaced
    assert s.next_send_ns() == 0.0
    s.on_send(MSS, 0.0)  # the tenth is the first paced (data_segs_out >= 10)
    assert s.next_send_ns() == pytest.approx(1e6)
    s.on_send(MSS, 1e6)
    assert s.next_send_ns() == pytest.approx(2e6)
    # After idle, the clock restarts from now with at most half a packet of credit.
    s.on_send(MSS, 10e6)
    assert s.next_send_ns() == pytest.approx(10.5e6)


def test_tso_autosize_follows_the_pacing_rate():
    s = sender()
    s.min_rtt.running_min(300e9, 0.0, 20e6)  # 20 ms: no RTT-based extra
    s.tp.pacing_rate = 100e6 / 8  # 100 Mbit/s -> 12207 B per 1/1024 s
    assert s.tso_segs() == 12
    s.tp.pacing_rate = 1e3
    assert s.tso_segs() == 2  # tcp_min_tso_segs


# -- the receiver's SACK blocks ------------------------------------------------------------------


def test_receiver_reports_most_recent_block_first_and_forgets_filled_ones():
    r = Receiver(mss=MSS, delayed_ack=False, sack=True)
    r.on_data(0, MSS)
    r.on_data(2 * MSS, MSS)
    assert r.sacks == [blk(2, 3)]
    r.on_data(5 * MSS, MSS)
    assert r.sacks == [blk(5, 6), blk(2, 3)]
    r.on_data(3 * MSS, MSS)  # extends the older block: it moves to the front
    assert r.sacks == [blk(2, 4), blk(5, 6)]
    r.on_data(4 * MSS, MSS)  # joins both
    assert r.sacks == [blk(2, 6)]
    for k in (7, 9, 11, 13, 15):
        r.on_data(k * MSS, MSS)
    assert r.sacks == [blk(15, 16), blk(13, 14), blk(11, 12), blk(9, 10)]  # TCP_NUM_SACKS
    r.on_data(MSS, MSS)  # fills the first hole: blocks below rcv_nxt go
    assert r.rcv_nxt == 6 * MSS and blk(2, 6) not in r.sacks
    assert sack_blocks_max(True) == 3 and sack_blocks_max(False) == 4


def test_receiver_without_sack_keeps_no_blocks():
    r = Receiver(mss=MSS, delayed_ack=False)
    r.on_data(2 * MSS, MSS)
    assert r.sacks == []
