"""Linux's TCP sender as a plain object: no SimPy, no tracing, unit-testable.

:class:`LinuxSender` has the surface :class:`~cpasim.model.tcp_rules.RenoSender`
offers :class:`~cpasim.model.tcp.TcpConnection`, and behaves like Linux's
``net/ipv4/tcp_input.c`` / ``tcp_output.c`` driving a pluggable congestion
control algorithm (:mod:`cpasim.model.cc`):

* the retransmission queue holds one record per segment (as Linux's skbs once
  SACK has split them) with its ``sacked`` bits (SACKED, LOST, RETRANS,
  EVER_RETRANS), send timestamps and rate-sampling marks;
* the SACK scoreboard (``tcp_sacktag_write_queue``), or without SACK Linux's
  "reno SACK" emulation where each duplicate ACK counts as one sacked segment;
* loss detection by RACK (``tcp_recovery.c``) or by the duplicate-ACK
  threshold (RFC 6675's IsLost, Linux's ``tcp_mark_head_lost``);
* the congestion states Open / Disorder / Recovery / Loss
  (``tcp_fastretrans_alert``), PRR in Recovery (RFC 6937,
  ``tcp_cwnd_reduction``), ``tcp_enter_loss`` on RTO;
* delivery-rate samples (``tcp_rate.c``) for algorithms with ``cong_control``;
* ``tcp_update_pacing_rate`` and, for algorithms that need pacing, the
  internal pacing clock (``tcp_update_skb_after_send``).

The algorithm is called in Linux's order (see :mod:`cpasim.model.cc.base`).
Windows are in packets as in Linux; sequence numbers are bytes.

RACK's reordering timer and the tail loss probe share the retransmission
timer, as in Linux: :meth:`timer_deadline` says when it is due and arms the one
due, :meth:`on_timeout` does it.  A loss probe always resends the last segment
(Linux sends a new segment instead when the application has one and the peer's
window allows it).

Not modelled: undo of spurious reductions (``tcp_try_undo_*``), F-RTO, D-SACK
and reordering detection (links here never reorder), ECN, TCP Small Queues.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field
from operator import attrgetter

from cpasim.model.cc.base import (
    CA_CWR,
    CA_DISORDER,
    CA_EVENT_COMPLETE_CWR,
    CA_EVENT_LOSS,
    CA_EVENT_TX_START,
    CA_LOSS,
    CA_OPEN,
    CA_RECOVERY,
    INFINITE_SSTHRESH,
    AckSample,
    CongestionOps,
    RateSample,
    TcpState,
)
from cpasim.model.cc.kclock import HZ
from cpasim.model.tcp_rules import INITIAL_RTO_NS, smooth_rtt

#: Linux's TCP_RTO_MAX.
RTO_MAX_NS = 120e9
#: ``sysctl_tcp_min_rtt_wlen``: the window of the min-RTT filter (300 s).
MIN_RTT_WLEN_NS = 300e9
#: ``sysctl_tcp_pacing_ss_ratio`` / ``_ca_ratio`` (percent).
PACING_SS_RATIO = 200
PACING_CA_RATIO = 120
#: ``sk_pacing_shift`` (10: about 1 ms of data per TSO burst) and ``sysctl_tcp_tso_rtt_log``.
PACING_SHIFT = 10
TSO_RTT_LOG = 9
#: ``sysctl_tcp_min_tso_segs``.
MIN_TSO_SEGS = 2
#: Internal pacing starts after this many data segments (``tcp_update_skb_after_send``).
PACING_AFTER_SEGS = 10
#: A jiffy, and TCP_TIMEOUT_MIN (2 jiffies) added to RACK's reordering timer.
JIFFY_NS = 1e9 / HZ
TIMEOUT_MIN_NS = 2 * JIFFY_NS

# What the retransmission timer is armed for (``icsk_pending``).
TIMER_RTO, TIMER_REO, TIMER_TLP = "rto", "reo", "tlp"

# ``TCP_SKB_CB(skb)->sacked`` bits.
SACKED = 1  # TCPCB_SACKED_ACKED
RETRANS = 2  # TCPCB_SACKED_RETRANS: retransmitted and not yet known lost again
LOST = 4  # TCPCB_LOST
EVER_RETRANS = 8  # TCPCB_EVER_RETRANS

# tcp_ack flag bits this model uses.
FLAG_DATA_ACKED = 1  # snd_una moved over new data
FLAG_DATA_SACKED = 2  # new SACK information
FLAG_WIN_UPDATE = 4
FLAG_DATA = 8  # the segment carried data
FLAG_SND_UNA_ADVANCED = 16
FLAG_NOT_DUP = FLAG_DATA | FLAG_WIN_UPDATE | FLAG_DATA_ACKED


class Seg:
    """One segment of the retransmission queue (an skb of one packet)."""

    __slots__ = (
        "seq",
        "end",
        "sacked",
        "tx_ns",
        "first_tx_ns",
        "delivered",
        "delivered_ns",
        "app_limited",
        "rate_done",
    )

    def __init__(self, seq: int, end: int) -> None:
        self.seq = seq
        self.end = end
        self.sacked = 0
        self.tx_ns = 0.0
        self.first_tx_ns = 0.0  # tp->first_tx_mstamp when sent (tcp_rate_skb_sent)
        self.delivered = 0  # tp->delivered when sent
        self.delivered_ns = 0.0  # tp->delivered_mstamp when sent
        self.app_limited = False
        self.rate_done = False  # already counted by a rate sample (delivered_mstamp = 0)


@dataclass(slots=True)
class LinuxAckOutcome:
    """What one incoming ACK did to the sender."""

    acked: int = 0  # bytes newly acknowledged (snd_una moved)
    retransmits: list[tuple[int, int]] = field(default_factory=list)  # (seq, bytes) to resend
    rtt_ns: float | None = None
    dup: bool = False
    rearm: bool = False  # the retransmission timer must be set again (timer_deadline)


class MinMax:
    """Kathleen Nichols' windowed running minimum (``lib/win_minmax.c``)."""

    __slots__ = ("s",)

    def __init__(self) -> None:
        self.s = [(0.0, 0.0)] * 3  # (time, value), best first

    def get(self) -> float:
        return self.s[0][1]

    def running_min(self, win: float, t: float, v: float) -> float:
        s = self.s
        val = (t, v)
        if s[0][1] == 0.0 or v <= s[0][1] or t - s[2][0] > win:
            self.s = [val, val, val]  # found a new min or nothing left in the window
            return v
        if v <= s[1][1]:
            s[1] = s[2] = val
        elif v <= s[2][1]:
            s[2] = val
        return self._subwin_update(win, val)

    def _subwin_update(self, win: float, val: tuple[float, float]) -> float:
        s = self.s
        dt = val[0] - s[0][0]
        if dt > win:
            s[0], s[1], s[2] = s[1], s[2], val
            if val[0] - s[0][0] > win:
                s[0], s[1] = s[1], s[2]
        elif s[1][0] == s[0][0] and dt > win / 4:
            s[1] = s[2] = val
        elif s[2][0] == s[1][0] and dt > win / 2:
            s[2] = val
        return s[0][1]


class LinuxSender:
    """The sending half of one TCP connection, as Linux's.

    ``ca`` is the congestion-control algorithm; ``sack`` whether the peer sends
    SACK blocks; ``recovery`` ``"rack"`` or ``"dupack"`` (ignored without SACK,
    where Linux also falls back to the duplicate-ACK count); ``reordering`` is
    ``tp->reordering``, the duplicate-ACK threshold (``sysctl_tcp_reordering``).
    """

    # Slots: a run of many connections touches a different sender at every ACK, and
    # attributes in slots take a third of the cache lines a dictionary's do.  The
    # dictionary stays for whatever is attached to one sender (a check wrapping its
    # methods), empty and never made otherwise.
    __slots__ = (
        "__dict__",
        "tp",
        "q",
        "h",
        "tsorted",
        "mss",
        "ca",
        "sack",
        "rack",
        "snd_wnd",
        "reordering",
        "needs_pacing",
        "high_seq",
        "prior_cwnd",
        "prr_delivered",
        "prr_out",
        "cwnd_limited",
        "max_packets_out",
        "cwnd_usage_seq",
        "rack_ns",
        "rack_end",
        "rack_rtt_ns",
        "rack_advanced",
        "reo_at",
        "pending",
        "tlp_high_seq",
        "tlp_retrans",
        "first_tx_ns",
        "min_rtt",
        "rto_min_ns",
        "srtt",
        "rttvar",
        "rto_ns",
        "backoff",
        "data_segs_out",
        "retransmits",
    )

    def __init__(
        self,
        *,
        mss: int,
        init_cwnd: int,
        rwnd: int,
        ca: CongestionOps,
        sack: bool,
        recovery: str,
        rto_min_ns: float,
        reordering: int = 3,
        paced: bool = False,
    ) -> None:
        if recovery not in ("rack", "dupack"):
            raise ValueError(f"unknown loss recovery {recovery!r}")
        self.mss = mss
        self.ca = ca
        self.sack = sack
        self.rack = sack and recovery == "rack"
        self.reordering = reordering
        # Internal pacing (tcp_needs_internal_pacing): the algorithm asks, or the socket does.
        self.needs_pacing = ca.needs_pacing or paced
        self.tp = tp = TcpState(mss=mss, snd_cwnd=init_cwnd, snd_ssthresh=INFINITE_SSTHRESH)
        ca.init(tp)
        self.snd_wnd = rwnd
        self.q: list[Seg] = []  # the retransmission queue, in sequence order, from index h
        self.h = 0
        self.tsorted: dict[int, Seg] = {}  # segments not (s)acked or lost, in send order
        self.high_seq = 0  # snd_nxt when Recovery / Loss began
        self.prior_cwnd = 0
        self.prr_delivered = 0
        self.prr_out = 0
        # tcp_cwnd_validate's memory.
        self.cwnd_limited = False
        self.max_packets_out = 0
        self.cwnd_usage_seq = 0
        # RACK: the most recently sent segment known delivered.
        self.rack_ns = 0.0
        self.rack_end = 0
        self.rack_rtt_ns = 0.0
        self.rack_advanced = False
        self.reo_at: float | None = None  # RACK's reordering timer, when armed
        self.pending = TIMER_RTO  # what the retransmission timer does when it fires
        self.tlp_high_seq = 0  # snd_nxt when a loss probe went out (0: none outstanding)
        self.tlp_retrans = False  # that probe was a retransmission
        self.first_tx_ns = 0.0  # tp->first_tx_mstamp
        self.min_rtt = MinMax()
        self.rto_min_ns = rto_min_ns
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.rto_ns = max(rto_min_ns, INITIAL_RTO_NS)
        self.backoff = 0
        self.data_segs_out = 0
        self.retransmits = 0

    # -- sequence space and windows (bytes, RenoSender's surface) -------------------------
    @property
    def snd_una(self) -> int:
        return self.tp.snd_una

    @property
    def snd_nxt(self) -> int:
        return self.tp.snd_nxt

    @property
    def cwnd(self) -> int:
        """The congestion window in bytes."""
        return self.tp.snd_cwnd * self.mss

    @property
    def flight(self) -> int:
        """Bytes between snd_una and snd_nxt (what the RTO timer guards)."""
        return self.tp.snd_nxt - self.tp.snd_una

    @property
    def in_flight(self) -> int:
        """``tcp_packets_in_flight``, packets."""
        return self.tp.packets_in_flight

    def window(self) -> int:
        """Bytes the sender may have outstanding: min(cwnd, peer's window)."""
        return min(self.cwnd, self.snd_wnd)

    def usable(self) -> int:
        """New bytes that may be sent now: ``tcp_cwnd_test`` and ``tcp_snd_wnd_test``."""
        tp = self.tp
        by_cwnd = (tp.snd_cwnd - tp.packets_in_flight) * self.mss
        by_rwnd = self.snd_wnd - (tp.snd_nxt - tp.snd_una)
        return max(0, min(by_cwnd, by_rwnd))

    def segment_at(self, seq: int) -> tuple[int, int] | None:
        """(seq, bytes) of the outstanding segment starting at ``seq``."""
        i = bisect_left(self.q, seq, lo=self.h, key=_seq)
        if i < len(self.q) and self.q[i].seq == seq:
            s = self.q[i]
            return s.seq, s.end - s.seq
        return None

    # -- sending ------------------------------------------------------------------------
    def on_send(self, nbytes: int, now: float) -> int:
        """Record ``nbytes`` of new data sent (one packet); returns its first sequence number."""
        tp = self.tp
        tp.now_ns = now
        if tp.packets_in_flight == 0:
            self.ca.cwnd_event(tp, CA_EVENT_TX_START)
        tp.lsndtime_ns = now
        seq = start = tp.snd_nxt
        end = seq + nbytes
        while seq < end:
            s = Seg(seq, min(end, seq + self.mss))
            self._sent(s, now)
            self.q.append(s)
            tp.packets_out += 1
            self.data_segs_out += 1
            seq = s.end
        tp.snd_nxt = end
        if self.needs_pacing:
            self._pace(nbytes, now)
        return start

    def rtx_trigger(self) -> str:
        """What the retransmissions an ACK just asked for answer: the RTO's recovery
        (``timeout``, in Loss) or fast recovery (``fast``)."""
        return "timeout" if self.tp.ca_state == CA_LOSS else "fast"

    def on_retransmit(self, seq: int, now: float) -> None:
        """The segment at ``seq``, chosen by :meth:`on_ack` or :meth:`on_timeout`, left now."""
        i = bisect_left(self.q, seq, lo=self.h, key=_seq)
        if i < len(self.q) and self.q[i].seq == seq:
            s = self.q[i]
            self.tsorted.pop(s.seq, None)
            self._sent(s, now)
            if self.needs_pacing:
                self._pace(s.end - s.seq, now)
        self.retransmits += 1

    def _sent(self, s: Seg, now: float) -> None:
        """``tcp_rate_skb_sent`` plus the send-order list."""
        tp = self.tp
        if tp.packets_out == 0:
            self.first_tx_ns = tp.delivered_mstamp_ns = now
        s.tx_ns = now
        s.first_tx_ns = self.first_tx_ns
        s.delivered = tp.delivered
        s.delivered_ns = tp.delivered_mstamp_ns
        s.app_limited = tp.app_limited != 0
        s.rate_done = False
        self.tsorted[s.seq] = s
        if tp.ca_state == CA_RECOVERY:
            self.prr_out += 1

    def xmit_done(self) -> None:
        """End of a ``tcp_write_xmit`` pass: ``tcp_cwnd_validate``."""
        tp = self.tp
        limited = tp.packets_in_flight >= tp.snd_cwnd
        if (
            tp.snd_una >= self.cwnd_usage_seq
            or limited
            or (not self.cwnd_limited and tp.packets_out > self.max_packets_out)
        ):
            self.cwnd_limited = limited
            self.max_packets_out = tp.packets_out
            self.cwnd_usage_seq = tp.snd_nxt

    def check_app_limited(self, unsent: int) -> None:
        """``tcp_rate_check_app_limited``: the application has less than a segment to send."""
        tp = self.tp
        in_flight = tp.packets_in_flight
        if unsent < self.mss and in_flight < tp.snd_cwnd and tp.lost_out <= tp.retrans_out:
            tp.app_limited = (tp.delivered + tp.packets_in_flight) or 1

    # -- pacing and TSO sizing ------------------------------------------------------------
    def _pace(self, nbytes: int, now: float) -> None:
        """``tcp_update_skb_after_send``: advance the pacing clock by this skb's time."""
        rate = self.tp.pacing_rate
        prior = self.tp.wstamp_ns
        self.tp.wstamp_ns = max(prior, now)
        if rate > 0 and self.data_segs_out >= PACING_AFTER_SEGS:
            len_ns = nbytes * 1e9 / rate
            credit = self.tp.wstamp_ns - prior  # idle time: allow catching up a little
            self.tp.wstamp_ns += len_ns - min(len_ns / 2, credit)

    def next_send_ns(self) -> float:
        """When internal pacing (``tcp_pacing_check``) lets the next packet go
        (``tp.wstamp_ns``, the pacing clock)."""
        return self.tp.wstamp_ns

    def tso_segs(self) -> int:
        """``tcp_tso_autosize``: segments per TSO packet at the current pacing rate."""
        tp = self.tp
        nbytes = int(tp.pacing_rate) >> PACING_SHIFT
        r = int(self.min_rtt.get() / 1000) >> TSO_RTT_LOG
        if r < 32:
            nbytes += 65536 >> r
        nbytes = min(nbytes, 65536)
        return max(nbytes // self.mss, MIN_TSO_SEGS)

    def _update_pacing_rate(self) -> None:
        """``tcp_update_pacing_rate``: 200 % of cwnd/srtt in slow start, 120 % after."""
        tp = self.tp
        if not tp.srtt_ns:
            return
        ratio = PACING_SS_RATIO if tp.snd_cwnd < tp.snd_ssthresh // 2 else PACING_CA_RATIO
        pkts = max(tp.snd_cwnd, tp.packets_out)
        tp.pacing_rate = self.mss * pkts * ratio / 100 / (tp.srtt_ns / 1e9)

    # -- acknowledgements -------------------------------------------------------------------
    def on_ack(
        self,
        ack: int,
        wnd: int,
        now: float,
        carries_data: bool,
        sack: tuple[tuple[int, int], ...] | None = None,
    ) -> LinuxAckOutcome:
        """``tcp_ack``: process the ACK field, window and SACK blocks of an incoming segment."""
        tp, ca = self.tp, self.ca
        out = LinuxAckOutcome()
        if ack > tp.snd_nxt or ack < tp.snd_una:  # never sent / old: ignored
            return out
        tp.now_ns = now
        flag = FLAG_DATA if carries_data else 0
        if wnd != self.snd_wnd:
            flag |= FLAG_WIN_UPDATE
        self.snd_wnd = wnd
        if not tp.packets_out:  # no_queue: nothing outstanding to acknowledge
            self.ca.in_ack_event(tp, 0)
            return out
        prior_snd_una = tp.snd_una
        prior_in_flight = tp.packets_in_flight
        prior_delivered = tp.delivered
        prior_lost = self.tp.lost
        rs = RateSample(prior_mstamp_ns=-1.0, prior_in_flight=prior_in_flight)
        # RTT candidates: oldest newly acked never-resent (seq_rtt), newest (ca_rtt).
        rtt = _RttTrack()
        if sack and self.sack and tp.packets_out:
            flag |= self._sacktag(sack, now, rs, rtt)
        if ack > tp.snd_una:
            flag |= FLAG_SND_UNA_ADVANCED | FLAG_DATA_ACKED
            out.acked = ack - tp.snd_una
            self._clean_rtx_queue(ack, now, rs, rtt)
            self.backoff = 0
        # RTT and RTO (tcp_ack_update_rtt).
        if rtt.ca >= 0:
            self.min_rtt.running_min(MIN_RTT_WLEN_NS, now, max(rtt.ca, 1.0))
            tp.min_rtt_ns = self.min_rtt.get()
            seq_rtt = rtt.seq if rtt.seq >= 0 else rtt.ca
            self._rtt_estimator(seq_rtt)
            out.rtt_ns = seq_rtt
        rs.rtt_ns = rtt.ca
        newly = tp.delivered - prior_delivered
        if newly:
            ca.pkts_acked(tp, AckSample(newly, rtt.ca, prior_in_flight))
        ca.in_ack_event(tp, 0)
        if self.tlp_high_seq:
            self._process_tlp_ack(ack, flag)
        # Loss detection and the congestion state machine.
        rexmit = False
        dubious = not (flag & FLAG_NOT_DUP) or flag & FLAG_DATA_SACKED or tp.ca_state != CA_OPEN
        num_dupack = 0
        if dubious:
            if not flag & (FLAG_SND_UNA_ADVANCED | FLAG_NOT_DUP) and tp.packets_out:
                num_dupack = 1
                out.dup = True
            rexmit = self._fastretrans_alert(prior_snd_una, num_dupack, flag)
        if flag & FLAG_DATA_ACKED:  # tcp_set_xmit_timer: the RTO replaces the REO timer
            self.reo_at = None
            out.rearm = True
        elif self.reo_at is not None:
            out.rearm = True
        # Rate sample and the window (tcp_rate_gen, tcp_cong_control).
        newly = tp.delivered - prior_delivered
        self._rate_gen(newly, self.tp.lost - prior_lost, now, rs)
        tp.is_cwnd_limited = self._is_cwnd_limited()
        if not ca.cong_control(tp, rs):
            if tp.ca_state == CA_RECOVERY:
                self._cwnd_reduction(newly, rs.losses, flag)
            elif flag & FLAG_DATA_ACKED:  # tcp_may_raise_cwnd (no reordering seen)
                ca.cong_avoid(tp, newly)
            self._update_pacing_rate()
        if rexmit:
            out.retransmits = self._xmit_retransmit_queue()
        return out

    def _is_cwnd_limited(self) -> bool:
        tp = self.tp
        if self.cwnd_limited:
            return True
        if tp.in_slow_start():
            return tp.snd_cwnd < 2 * self.max_packets_out
        return False

    def _sacktag(self, blocks, now: float, rs: RateSample, rtt: _RttTrack) -> int:
        """``tcp_sacktag_write_queue``: mark the segments the SACK blocks cover."""
        tp, q = self.tp, self.q
        flag = 0
        for start, end in blocks:
            if end <= tp.snd_una or start >= tp.snd_nxt:  # D-SACK or bogus: ignored
                continue
            i = bisect_left(q, start, lo=self.h, key=_seq)
            while i < len(q) and q[i].end <= end:
                s = q[i]
                i += 1
                if s.sacked & SACKED:
                    continue
                if s.sacked & LOST:
                    tp.lost_out -= 1
                if s.sacked & RETRANS:
                    tp.retrans_out -= 1
                s.sacked = (s.sacked & ~(LOST | RETRANS)) | SACKED
                tp.sacked_out += 1
                tp.delivered += 1
                self.tsorted.pop(s.seq, None)
                self._delivered(s, now, rs, rtt, sacked=True)
                flag |= FLAG_DATA_SACKED
        return flag

    def _clean_rtx_queue(self, ack: int, now: float, rs: RateSample, rtt: _RttTrack) -> None:
        """``tcp_clean_rtx_queue``: drop the cumulatively acknowledged segments."""
        tp, q = self.tp, self.q
        h = self.h
        acked_pkts = 0
        while h < len(q) and q[h].end <= ack:
            s = q[h]
            h += 1
            acked_pkts += 1
            tp.packets_out -= 1
            if s.sacked & SACKED:
                tp.sacked_out -= 1
                continue
            if s.sacked & LOST:
                tp.lost_out -= 1
            if s.sacked & RETRANS:
                tp.retrans_out -= 1
            if self.sack:
                tp.delivered += 1
            self.tsorted.pop(s.seq, None)
            self._delivered(s, now, rs, rtt, sacked=False)
        if h < len(q) and q[h].seq < ack:  # a partly acknowledged segment
            q[h].seq = ack
        if h > 1024 and 2 * h > len(q):
            del q[:h]
            h = 0
        self.h = h
        tp.snd_una = ack
        if not self.sack and acked_pkts:  # tcp_remove_reno_sacks
            tp.delivered += max(acked_pkts - tp.sacked_out, 1)
            tp.sacked_out = max(0, tp.sacked_out - (acked_pkts - 1))

    def _delivered(self, s: Seg, now: float, rs: RateSample, rtt: _RttTrack, sacked: bool) -> None:
        """One segment newly (s)acked: RTT candidates, RACK, ``tcp_rate_skb_delivered``."""
        if not s.sacked & EVER_RETRANS:
            r = now - s.tx_ns
            if rtt.seq < 0 and not sacked:
                rtt.seq = r
            rtt.ca = r
        self._rack_advance(s, now)
        if s.rate_done:
            return
        if not rs.prior_delivered or _sent_after(s.tx_ns, s.end, self.first_tx_ns, rtt.last_end):
            rs.prior_delivered = s.delivered
            rs.prior_mstamp_ns = s.delivered_ns
            rs.is_app_limited = s.app_limited
            rs.is_retrans = bool(s.sacked & EVER_RETRANS)
            rs.interval_ns = s.tx_ns - s.first_tx_ns
            self.first_tx_ns = s.tx_ns
            rtt.last_end = s.end
        if sacked:
            s.rate_done = True

    def _rack_advance(self, s: Seg, now: float) -> None:
        """``tcp_rack_advance``: remember the most recently sent delivered segment."""
        r = now - s.tx_ns
        if s.sacked & EVER_RETRANS and r < self.min_rtt.get():
            return  # may be the original's ACK: ambiguous
        self.rack_advanced = True
        self.rack_rtt_ns = r
        if _sent_after(s.tx_ns, s.end, self.rack_ns, self.rack_end):
            self.rack_ns = s.tx_ns
            self.rack_end = s.end

    def _rate_gen(self, delivered: int, lost: int, now: float, rs: RateSample) -> None:
        """``tcp_rate_gen``: finish the rate sample of this ACK."""
        tp = self.tp
        if tp.app_limited and tp.delivered > tp.app_limited:
            tp.app_limited = 0
        if delivered:
            tp.delivered_mstamp_ns = now
        rs.acked_sacked = delivered
        rs.losses = lost
        if rs.prior_mstamp_ns < 0:  # nothing newly delivered was sampled
            rs.delivered = -1
            rs.interval_ns = -1.0
            return
        rs.delivered = tp.delivered - rs.prior_delivered
        rs.interval_ns = max(rs.interval_ns, now - rs.prior_mstamp_ns)
        if rs.interval_ns < tp.min_rtt_ns:
            rs.interval_ns = -1.0

    # -- loss detection and the congestion states ---------------------------------------------
    def _fastretrans_alert(self, prior_snd_una: int, num_dupack: int, flag: int) -> bool:
        """``tcp_fastretrans_alert``: returns whether lost segments should be resent."""
        tp = self.tp
        advanced = bool(flag & FLAG_SND_UNA_ADVANCED)
        if tp.ca_state != CA_OPEN and tp.snd_una >= self.high_seq:
            if tp.ca_state == CA_RECOVERY:
                if not self.sack:
                    tp.sacked_out = 0
                if not self.sack and tp.snd_una == self.high_seq:
                    return False  # Reno holds Recovery until something above high_seq is acked
                self._set_state(CA_OPEN)
                self._end_cwnd_reduction()
            elif tp.ca_state == CA_LOSS:
                self._set_state(CA_OPEN)  # then on as in Open (tcp_process_loss)
        state = tp.ca_state
        if state == CA_RECOVERY:
            if not advanced and not self.sack:
                self._add_reno_sacks(num_dupack)
            self._identify_loss(advanced)
            return True
        if state == CA_LOSS:
            if not self.sack and advanced:
                tp.sacked_out = 0
            self._identify_loss(advanced)
            return True
        if not self.sack:
            if advanced:
                tp.sacked_out = 0
            self._add_reno_sacks(num_dupack)
        self._identify_loss(advanced)
        if not self._time_to_recover():
            left_out = tp.sacked_out or tp.lost_out or tp.retrans_out
            self._set_state(CA_DISORDER if left_out else CA_OPEN)  # tcp_try_to_open
            return False
        self._enter_recovery()
        if self.sack and not self.rack:
            self._mark_head_lost()
        return True

    def _add_reno_sacks(self, num_dupack: int) -> None:
        tp = self.tp
        if num_dupack:
            prior = tp.sacked_out
            tp.sacked_out = min(tp.sacked_out + num_dupack, max(0, tp.packets_out - 1))
            tp.delivered += tp.sacked_out - prior

    def _time_to_recover(self) -> bool:
        tp = self.tp
        return tp.lost_out > 0 or (not self.rack and tp.sacked_out + 1 > self.reordering)

    def _identify_loss(self, advanced: bool) -> None:
        """``tcp_identify_packet_loss``."""
        tp = self.tp
        if not tp.packets_out:
            return
        if not self.sack:  # tcp_newreno_mark_lost
            if (tp.ca_state < CA_RECOVERY and tp.sacked_out >= self.reordering) or (
                tp.ca_state == CA_RECOVERY and advanced
            ):
                self._mark_lost(self.q[self.h])
        elif self.rack:
            self._rack_mark_lost()
        elif tp.ca_state == CA_RECOVERY:
            self._mark_head_lost()

    def _rack_mark_lost(self) -> None:
        """``tcp_rack_detect_loss``: lost if a later-sent segment was delivered more than
        RACK's RTT + reordering window after this one was sent."""
        if not self.rack_advanced:
            return
        self.rack_advanced = False
        tp = self.tp
        if tp.ca_state >= CA_RECOVERY or tp.sacked_out >= self.reordering:
            reo_wnd = 0.0  # no reordering seen: be aggressive
        else:
            reo_wnd = min(self.min_rtt.get() / 4, tp.srtt_ns)
        now = tp.now_ns
        lost = []
        timeout = 0.0
        rack_ns, rack_end = self.rack_ns, self.rack_end
        for s in self.tsorted.values():
            tx_ns = s.tx_ns  # _sent_after(rack_ns, rack_end, tx_ns, s.end), inline
            if not (rack_ns > tx_ns or (rack_ns == tx_ns and rack_end > s.end)):
                break
            remaining = self.rack_rtt_ns + reo_wnd - (now - s.tx_ns)
            if remaining <= 0:
                lost.append(s)
            else:
                timeout = max(timeout, remaining)
        for s in lost:
            self._mark_lost(s)
        if timeout:  # tcp_rack_mark_lost: arm the reordering timer in jiffies
            self.reo_at = now + math.ceil(timeout / JIFFY_NS) * JIFFY_NS + TIMEOUT_MIN_NS

    def _mark_head_lost(self) -> None:
        """RFC 6675 IsLost: a hole with at least ``reordering`` sacked segments above it."""
        q = self.q
        above = 0
        for i in range(len(q) - 1, self.h - 1, -1):
            s = q[i]
            if s.sacked & SACKED:
                above += 1
            elif above >= self.reordering and not s.sacked & LOST:
                self._mark_lost(s)

    def _mark_lost(self, s: Seg) -> None:
        """``tcp_mark_skb_lost``."""
        tp = self.tp
        if s.sacked & SACKED:
            return
        if s.sacked & LOST:
            if s.sacked & RETRANS:  # a retransmission lost again
                s.sacked &= ~RETRANS
                tp.retrans_out -= 1
        else:
            s.sacked |= LOST
            if s.sacked & RETRANS:
                s.sacked &= ~RETRANS
                tp.retrans_out -= 1
            tp.lost_out += 1
            self.tp.lost += 1
        self.tsorted.pop(s.seq, None)

    def _set_state(self, state: int) -> None:
        tp = self.tp
        if state != tp.ca_state:
            self.ca.set_state(tp, state)
            tp.ca_state = state

    def _enter_recovery(self) -> None:
        """``tcp_enter_recovery``."""
        self._init_cwnd_reduction()
        self._set_state(CA_RECOVERY)

    def _init_cwnd_reduction(self) -> None:
        """``tcp_init_cwnd_reduction``."""
        tp = self.tp
        self.high_seq = tp.snd_nxt
        self.tlp_high_seq = 0
        self.prior_cwnd = tp.snd_cwnd
        self.prr_delivered = 0
        self.prr_out = 0
        tp.snd_ssthresh = self.ca.ssthresh(tp)

    def _process_tlp_ack(self, ack: int, flag: int) -> None:
        """``tcp_process_tlp_ack``: did the loss probe repair a loss?"""
        tp = self.tp
        if ack < self.tlp_high_seq:
            return
        if not self.tlp_retrans:  # a probe of new data was acknowledged
            self.tlp_high_seq = 0
        elif ack > self.tlp_high_seq:  # it repaired a loss: reduce cwnd once (CWR)
            self._init_cwnd_reduction()
            self._set_state(CA_CWR)
            self._end_cwnd_reduction()
            left_out = tp.sacked_out or tp.lost_out or tp.retrans_out
            self._set_state(CA_DISORDER if left_out else CA_OPEN)  # tcp_try_keep_open
        elif not flag & (FLAG_SND_UNA_ADVANCED | FLAG_NOT_DUP | FLAG_DATA_SACKED):
            self.tlp_high_seq = 0  # a pure duplicate ACK: original and probe arrived

    def _end_cwnd_reduction(self) -> None:
        tp = self.tp
        if tp.snd_ssthresh < INFINITE_SSTHRESH:
            tp.snd_cwnd = tp.snd_ssthresh
        self.ca.cwnd_event(tp, CA_EVENT_COMPLETE_CWR)

    def _cwnd_reduction(self, newly_acked_sacked: int, newly_lost: int, flag: int) -> None:
        """``tcp_cwnd_reduction``: Proportional Rate Reduction (RFC 6937)."""
        tp = self.tp
        if newly_acked_sacked <= 0 or not self.prior_cwnd:
            return
        in_flight = tp.packets_in_flight
        delta = tp.snd_ssthresh - in_flight
        self.prr_delivered += newly_acked_sacked
        if delta < 0:
            dividend = tp.snd_ssthresh * self.prr_delivered + self.prior_cwnd - 1
            sndcnt = dividend // self.prior_cwnd - self.prr_out
        else:
            sndcnt = max(self.prr_delivered - self.prr_out, newly_acked_sacked)
            if flag & FLAG_SND_UNA_ADVANCED and not newly_lost:
                sndcnt += 1
            sndcnt = min(delta, sndcnt)
        sndcnt = max(sndcnt, 0 if self.prr_out else 1)  # force the fast retransmit
        tp.snd_cwnd = in_flight + sndcnt

    def _xmit_retransmit_queue(self) -> list[tuple[int, int]]:
        """``tcp_xmit_retransmit_queue``: resend lost segments while cwnd allows."""
        tp, q = self.tp, self.q
        out = []
        # cwnd - packets in flight, and lost - retransmitted: each segment resent adds
        # one to retrans_out, so both go down by one, and nothing else moves them here.
        room = tp.snd_cwnd - tp.packets_in_flight
        unsent = tp.lost_out - tp.retrans_out
        for i in range(self.h, len(q)):
            if room <= 0 or unsent <= 0:
                break
            s = q[i]
            if s.sacked & LOST and not s.sacked & (SACKED | RETRANS):
                s.sacked |= RETRANS | EVER_RETRANS
                tp.retrans_out += 1
                room -= 1
                unsent -= 1
                out.append((s.seq, s.end - s.seq))
        return out

    # -- the retransmission timer ----------------------------------------------------------
    def timer_deadline(self, now: float) -> float:
        """Arm the retransmission timer now: RACK's reordering timer when armed,
        else a tail loss probe (``tcp_schedule_loss_probe``: SACK, Open, no probe
        outstanding) after 2 srtt plus 2 jiffies (plus rto_min with one segment
        out), or the RTO if sooner, else the RTO.  Returns when it fires."""
        tp = self.tp
        if self.reo_at is not None:
            self.pending = TIMER_REO
            return self.reo_at
        if tp.packets_out and self.probe_armed():
            if self.srtt is not None:
                pto = math.ceil(2 * self.srtt / JIFFY_NS) * JIFFY_NS
                pto += self.rto_min_ns if tp.packets_out == 1 else TIMEOUT_MIN_NS
            else:
                pto = INITIAL_RTO_NS
            self.pending = TIMER_TLP
            return now + min(pto, self.rto_ns)
        self.pending = TIMER_RTO
        return now + self.rto_ns

    def probe_armed(self) -> bool:
        """Whether a new transmission should re-arm the timer (a loss probe reschedules
        after every ``tcp_write_xmit`` that sent data)."""
        return (
            self.sack
            and self.tp.ca_state == CA_OPEN
            and not self.tlp_high_seq
            and self.reo_at is None
        )

    def on_timeout(self, now: float) -> list[tuple[int, int]]:
        """The retransmission timer fired: RACK's reordering timeout when that was
        armed, else the RTO (``tcp_retransmit_timer``): enter Loss, back off, resend
        the head."""
        tp = self.tp
        tp.now_ns = now
        pending, self.pending = self.pending, TIMER_RTO
        if pending == TIMER_REO:
            self.reo_at = None
            return self._rack_reo_timeout()
        if tp.snd_nxt == tp.snd_una:
            return []
        if pending == TIMER_TLP:
            return self._send_loss_probe()
        self.tlp_high_seq = 0
        head = self.q[self.h]
        if head.sacked & SACKED:  # the receiver reneged: forget every SACK
            for i in range(self.h, len(self.q)):
                self.q[i].sacked &= ~SACKED
            tp.sacked_out = 0
        elif not self.sack:
            tp.sacked_out = 0
        for i in range(self.h, len(self.q)):  # tcp_timeout_mark_lost
            s = self.q[i]
            if self.rack and s is not head and self.rack_rtt_ns - (tp.now_ns - s.tx_ns) > 0:
                continue  # sent too recently to call lost
            self._mark_lost(s)
        if tp.ca_state <= CA_DISORDER or self.high_seq <= tp.snd_una:
            self.prior_cwnd = tp.snd_cwnd
            tp.snd_ssthresh = self.ca.ssthresh(tp)
            self.ca.cwnd_event(tp, CA_EVENT_LOSS)
        tp.snd_cwnd = tp.packets_in_flight + 1
        tp.snd_cwnd_cnt = 0
        self._set_state(CA_LOSS)
        self.high_seq = tp.snd_nxt
        self.backoff += 1
        self.rto_ns = min(self.rto_ns * 2, RTO_MAX_NS)
        if head.sacked & RETRANS or not head.sacked & LOST:
            return []
        head.sacked |= RETRANS | EVER_RETRANS
        tp.retrans_out += 1
        return [(head.seq, head.end - head.seq)]

    def _send_loss_probe(self) -> list[tuple[int, int]]:
        """``tcp_send_loss_probe``: resend the last segment to draw an ACK (with SACK
        blocks) that lets RACK find a lost tail; the RTO is armed next."""
        tail = self.q[-1]
        if self.tlp_high_seq or tail.sacked & SACKED:
            return []
        tail.sacked |= EVER_RETRANS  # __tcp_retransmit_skb: not counted in retrans_out
        self.tlp_retrans = True
        self.tlp_high_seq = self.tp.snd_nxt
        return [(tail.seq, tail.end - tail.seq)]

    def _rack_reo_timeout(self) -> list[tuple[int, int]]:
        """``tcp_rack_reo_timeout``: mark what is now overdue, recover, resend."""
        tp = self.tp
        prior_in_flight = tp.packets_in_flight
        prior_lost = tp.lost
        self.rack_advanced = True
        self._rack_mark_lost()
        self.reo_at = None  # tcp_rack_detect_loss only: the RTO is armed next
        if tp.packets_in_flight == prior_in_flight:
            return []
        if tp.ca_state != CA_RECOVERY:
            self._enter_recovery()
            if type(self.ca).cong_control is CongestionOps.cong_control:
                self._cwnd_reduction(1, tp.lost - prior_lost, 0)
        return self._xmit_retransmit_queue()

    def _rtt_estimator(self, r: float) -> None:
        """``tcp_rtt_estimator`` / ``tcp_set_rto``: RTO = srtt + max(4 rttvar, rto_min)."""
        self.srtt, self.rttvar = smooth_rtt(self.srtt, self.rttvar, r)
        self.tp.srtt_ns = self.srtt
        self.rto_ns = min(self.srtt + max(4 * self.rttvar, self.rto_min_ns), RTO_MAX_NS)


class _RttTrack:
    """RTT candidates gathered while one ACK is processed."""

    __slots__ = ("seq", "ca", "last_end")

    def __init__(self) -> None:
        self.seq = -1.0  # oldest cumulatively acked, never retransmitted
        self.ca = -1.0  # newest (s)acked, never retransmitted
        self.last_end = 0  # end of the segment the rate sample is taken from


#: A segment's sequence number: the retransmission queue's sort key (a C function,
#: called at every step of a search).
_seq = attrgetter("seq")


def _sent_after(t1: float, seq1: int, t2: float, seq2: int) -> bool:
    """``tcp_skb_sent_after``: sent later, ties broken by the higher sequence."""
    return t1 > t2 or (t1 == t2 and seq1 > seq2)
