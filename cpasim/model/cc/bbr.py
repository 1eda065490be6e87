"""BBR (v1), as Linux ships it (``net/ipv4/tcp_bbr.c``).

On each ACK BBR updates a model of the path:

    bottleneck bandwidth = windowed max(delivered / elapsed, 10 rounds)
    min_rtt              = windowed min(rtt, 10 s)

and sets ``pacing_rate = pacing_gain * bw * (1 - 1%)`` and
``cwnd = cwnd_gain * bw * min_rtt`` plus a quantization budget.  Its modes:
STARTUP (gain 2/ln2 until three rounds grow bw by under 25%), DRAIN (gain
ln2/2 until in-flight is one BDP), PROBE_BW (the eight-phase gain cycle
5/4, 3/4, 1 x6, one phase per min_rtt), and PROBE_RTT (cwnd 4 for at least
200 ms and a round, when min_rtt has not been refreshed for 10 s).  It does
not back off on loss, except packet conservation in the first round of
recovery and, when two lossy intervals show the same rate, using that
"long-term" rate as a policer's.

The arithmetic is the kernel's: bandwidth in packets/µs << 24 (``BW_SCALE``),
gains in 1/256 (``BBR_SCALE``), µs for RTTs and ``delivered_mstamp``, jiffies
(``HZ``, :mod:`cpasim.model.cc.kclock`) for the min_rtt and PROBE_RTT clocks.  cpasim's ns convert
at the edges.
"""

from __future__ import annotations

import random

from cpasim.model.cc.base import (
    CA_EVENT_TX_START,
    CA_LOSS,
    CA_OPEN,
    CA_RECOVERY,
    INFINITE_SSTHRESH,
    CongestionOps,
    RateSample,
    TcpState,
)
from cpasim.model.cc.kclock import HZ, U32, USEC_PER_MSEC, USEC_PER_SEC, after, jiffies, s32, usecs
from cpasim.model.sockbuf import MAX_TCP_HEADER  # sk_pacing and skb sizes: one x86-64 layout

TCP_INIT_CWND = 10

BW_SCALE = 24  # bandwidth: packets per µs << 24 (~715 bit/s per unit at 1500 B)
BW_UNIT = 1 << BW_SCALE
BBR_SCALE = 8  # fractions (gains) in 1/256
BBR_UNIT = 1 << BBR_SCALE

# enum bbr_mode
BBR_STARTUP, BBR_DRAIN, BBR_PROBE_BW, BBR_PROBE_RTT = range(4)
MODE_NAMES = ("STARTUP", "DRAIN", "PROBE_BW", "PROBE_RTT")

CYCLE_LEN = 8  # phases in the PROBE_BW pacing-gain cycle
bbr_bw_rtts = CYCLE_LEN + 2  # bandwidth filter window, rounds
bbr_min_rtt_win_sec = 10  # min_rtt filter window
bbr_probe_rtt_mode_ms = 200  # time at least spent at bbr_cwnd_min_target in PROBE_RTT
bbr_min_tso_rate = 1_200_000  # bit/s: below it, one-segment TSO bursts
bbr_pacing_margin_percent = 1  # pace 1% below the estimated bandwidth
# 2/ln(2): the smallest gain that doubles the sending rate each round, as slow start does.
bbr_high_gain = BBR_UNIT * 2885 // 1000 + 1
bbr_drain_gain = BBR_UNIT * 1000 // 2885  # drain STARTUP's queue in about a round
bbr_cwnd_gain = BBR_UNIT * 2  # steady-state cwnd tolerates delayed/stretched ACKs
bbr_pacing_gain = (
    BBR_UNIT * 5 // 4,  # probe for more bandwidth
    BBR_UNIT * 3 // 4,  # drain the queue that probe made
    BBR_UNIT, BBR_UNIT, BBR_UNIT,  # cruise at the estimated bandwidth
    BBR_UNIT, BBR_UNIT, BBR_UNIT,
)  # fmt: skip
bbr_cycle_rand = 7  # randomize the starting phase over this many phases
bbr_cwnd_min_target = 4  # two 2-packet delayed-ACK sequences in flight
bbr_full_bw_thresh = BBR_UNIT * 5 // 4  # bandwidth grew "significantly": 1.25x
bbr_full_bw_cnt = 3  # rounds without such growth: the pipe is full
# Long-term ("LT") bandwidth: policer detection.
bbr_lt_intvl_min_rtts = 4  # minimum rounds in an LT sampling interval
bbr_lt_loss_thresh = 50  # lost/delivered >= 50/256 (~20%): the interval is lossy
bbr_lt_bw_ratio = BBR_UNIT // 8  # two intervals' rates within 1/8: consistent
bbr_lt_bw_diff = 4000 // 8  # ...or within 4 kbit/s (bytes/s here)
bbr_lt_bw_max_rtts = 48  # rounds to use lt_bw once policed
# ACK aggregation.
bbr_extra_acked_gain = BBR_UNIT
bbr_extra_acked_win_rtts = 5
bbr_ack_epoch_acked_reset_thresh = 1 << 20
bbr_extra_acked_max_us = 100 * 1000

# Constants of the sending host that bbr_tso_segs_goal() reads.
SK_PACING_SHIFT = 10  # sk->sk_pacing_shift default: ~1 ms of data per TSO burst
GSO_LEGACY_MAX_SIZE = 65536  # bbr_tso_segs_goal ignores the device's (BIG TCP) gso_max_size


class Minmax:
    """``struct minmax`` (``lib/win_minmax.c``): Kathleen Nichols' windowed max
    with the best, second-best and third-best samples of the window."""

    __slots__ = ("s",)

    def __init__(self) -> None:
        self.s = [(0, 0), (0, 0), (0, 0)]  # (t, v)

    def get(self) -> int:
        return self.s[0][1]

    def reset(self, t: int, meas: int) -> int:
        self.s = [(t, meas)] * 3
        return meas

    def _subwin_update(self, win: int, val: tuple[int, int]) -> int:
        s = self.s
        dt = val[0] - s[0][0]
        if dt > win:
            # A whole window without a new best: promote 2nd and 3rd (maybe twice).
            s[0], s[1], s[2] = s[1], s[2], val
            if val[0] - s[0][0] > win:
                s[0], s[1], s[2] = s[1], s[2], val
        elif s[1][0] == s[0][0] and dt > win // 4:
            # A quarter window without a new best: take a 2nd choice from it.
            s[2] = s[1] = val
        elif s[2][0] == s[1][0] and dt > win // 2:
            # Half a window: take a 3rd choice from the second half.
            s[2] = val
        return s[0][1]

    def running_max(self, win: int, t: int, meas: int) -> int:
        """``minmax_running_max``."""
        val = (t, meas)
        s = self.s
        if meas >= s[0][1] or t - s[2][0] > win:
            return self.reset(t, meas)  # a new max, or nothing left in the window
        if meas >= s[1][1]:
            s[2] = s[1] = val
        elif meas >= s[2][1]:
            s[2] = val
        return self._subwin_update(win, val)


class Bbr(CongestionOps):
    """``tcp_bbr_cong_ops``: the fields are ``struct bbr``'s.

    ``seed`` drives ``get_random_u32_below`` (the random first PROBE_BW phase)
    so a run is reproducible; the sender passes the connection's seed.
    """

    name = "bbr"
    needs_pacing = True  # SK_PACING_NEEDED: Linux paces internally without fq
    takes_seed = True

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self.bw = Minmax()
        self.mode = BBR_STARTUP
        self.pacing_gain = bbr_high_gain
        self.cwnd_gain = bbr_high_gain
        self.cycle_idx = 0
        self.full_bw_reached = False
        self.min_rtt_us = U32

    # -- helpers -----------------------------------------------------------------
    def max_bw(self) -> int:
        """``bbr_max_bw``: the windowed max bandwidth, packets/µs << 24."""
        return self.bw.get()

    def bw_estimate(self) -> int:
        """``bbr_bw``: the policer's long-term rate when in use, else the max filter."""
        return self.lt_bw if self.lt_use_bw else self.max_bw()

    def _extra_acked(self) -> int:
        return max(self.extra_acked)

    @staticmethod
    def _rate_bytes_per_sec(tp: TcpState, rate: int, gain: int) -> int:
        """``bbr_rate_bytes_per_sec``: bw * gain in bytes/s, 1% margin off."""
        rate *= tp.mss
        rate *= gain
        rate >>= BBR_SCALE
        rate *= USEC_PER_SEC // 100 * (100 - bbr_pacing_margin_percent)
        return rate >> BW_SCALE

    def _bw_to_pacing_rate(self, tp: TcpState, bw: int, gain: int) -> int:
        # sk_max_pacing_rate is unlimited unless SO_MAX_PACING_RATE is set.
        return self._rate_bytes_per_sec(tp, bw, gain)

    def _init_pacing_rate_from_rtt(self, tp: TcpState) -> None:
        """``bbr_init_pacing_rate_from_rtt``: high_gain * cwnd / RTT (1 ms if none yet)."""
        if tp.srtt_ns:
            rtt_us = max(usecs(tp.srtt_ns), 1)
            self.has_seen_rtt = True
        else:
            rtt_us = USEC_PER_MSEC
        bw = tp.snd_cwnd * BW_UNIT // rtt_us
        tp.pacing_rate = self._bw_to_pacing_rate(tp, bw, bbr_high_gain)

    def _set_pacing_rate(self, tp: TcpState, bw: int, gain: int) -> None:
        """``bbr_set_pacing_rate``: never slow down before the pipe is known full."""
        rate = self._bw_to_pacing_rate(tp, bw, gain)
        if not self.has_seen_rtt and tp.srtt_ns:
            self._init_pacing_rate_from_rtt(tp)
        if self.full_bw_reached or rate > tp.pacing_rate:
            tp.pacing_rate = rate

    @staticmethod
    def _min_tso_segs(tp: TcpState) -> int:
        """``bbr_min_tso_segs``."""
        return 1 if tp.pacing_rate < (bbr_min_tso_rate >> 3) else 2

    def _tso_segs_goal(self, tp: TcpState) -> int:
        """``bbr_tso_segs_goal`` (Linux 6.17/6.18 form): segments per TSO burst,
        ~1 ms at the pacing rate, within a legacy 64 KB GSO packet."""
        nbytes = min(
            int(tp.pacing_rate) >> SK_PACING_SHIFT, GSO_LEGACY_MAX_SIZE - 1 - MAX_TCP_HEADER
        )
        segs = max(nbytes // tp.mss, self._min_tso_segs(tp))
        return min(segs, 0x7F)

    def _save_cwnd(self, tp: TcpState) -> None:
        """``bbr_save_cwnd``: the last known good cwnd, to restore after loss or PROBE_RTT."""
        if self.prev_ca_state < CA_RECOVERY and self.mode != BBR_PROBE_RTT:
            self.prior_cwnd = tp.snd_cwnd
        else:  # recovery or PROBE_RTT have cut cwnd for now
            self.prior_cwnd = max(self.prior_cwnd, tp.snd_cwnd)

    def bdp(self, bw: int, gain: int) -> int:
        """``bbr_bdp``: ceil(bw * min_rtt * gain), packets."""
        if self.min_rtt_us == U32:  # no valid RTT sample yet
            return TCP_INIT_CWND
        w = bw * self.min_rtt_us
        # Round up so the estimate cannot shrink itself (negative feedback).
        return (((w * gain) >> BBR_SCALE) + BW_UNIT - 1) // BW_UNIT

    def _quantization_budget(self, tp: TcpState, cwnd: int) -> int:
        """``bbr_quantization_budget``: room for full TSO bursts at both ends."""
        cwnd += 3 * self._tso_segs_goal(tp)  # qdisc, TSO engine, receiver's GRO
        cwnd = (cwnd + 1) & ~1  # even, to spare delayed ACKs
        # Gain cycling must get in-flight above BDP even for small BDPs.
        if self.mode == BBR_PROBE_BW and self.cycle_idx == 0:
            cwnd += 2
        return cwnd

    def inflight(self, tp: TcpState, bw: int, gain: int) -> int:
        """``bbr_inflight``."""
        return self._quantization_budget(tp, self.bdp(bw, gain))

    def _packets_in_net_at_edt(self, tp: TcpState, inflight_now: int) -> int:
        """``bbr_packets_in_net_at_edt``: in-flight when the next paced packet leaves."""
        now_ns = tp.now_ns
        edt_ns = max(tp.wstamp_ns, now_ns)
        interval_us = int((edt_ns - now_ns) // 1000)
        interval_delivered = (self.bw_estimate() * interval_us) >> BW_SCALE
        inflight_at_edt = inflight_now
        if self.pacing_gain > BBR_UNIT:  # increasing in-flight: count the EDT skb
            inflight_at_edt += self._tso_segs_goal(tp)
        if interval_delivered >= inflight_at_edt:
            return 0
        return inflight_at_edt - interval_delivered

    def _ack_aggregation_cwnd(self) -> int:
        """``bbr_ack_aggregation_cwnd``: cwnd for ACKs that arrive in bunches."""
        aggr_cwnd = 0
        if bbr_extra_acked_gain and self.full_bw_reached:
            max_aggr_cwnd = self.bw_estimate() * bbr_extra_acked_max_us // BW_UNIT
            aggr_cwnd = (bbr_extra_acked_gain * self._extra_acked()) >> BBR_SCALE
            aggr_cwnd = min(aggr_cwnd, max_aggr_cwnd)
        return aggr_cwnd

    # -- cwnd ----------------------------------------------------------------------
    def _set_cwnd_to_recover_or_restore(self, tp: TcpState, rs: RateSample, acked: int):
        """``bbr_set_cwnd_to_recover_or_restore``: packet conservation in the
        first round of recovery (send what was acked), then up to 2x; on
        leaving recovery restore the cwnd from before it.  Returns
        (conserving, cwnd)."""
        prev_state, state = self.prev_ca_state, tp.ca_state
        cwnd = tp.snd_cwnd
        # Losses first take their packets out of the window...
        if rs.losses > 0:
            cwnd = max(cwnd - rs.losses, 1)
        if state == CA_RECOVERY and prev_state != CA_RECOVERY:
            # Starting the first round of recovery: packet conservation.
            self.packet_conservation = True
            self.next_rtt_delivered = tp.delivered  # start the round now
            # Cut unused cwnd (app behaviour, TSQ, TSO deferral).
            cwnd = tp.packets_in_flight + acked
        elif prev_state >= CA_RECOVERY and state < CA_RECOVERY:
            cwnd = max(cwnd, self.prior_cwnd)  # leaving recovery
            self.packet_conservation = False
        self.prev_ca_state = state
        if self.packet_conservation:
            return True, max(cwnd, tp.packets_in_flight + acked)
        return False, cwnd

    def _set_cwnd(self, tp: TcpState, rs: RateSample, acked: int, bw: int, gain: int) -> None:
        """``bbr_set_cwnd``: slow-start up toward the target, or snap down to it."""
        cwnd = tp.snd_cwnd
        if acked:
            conserving, cwnd = self._set_cwnd_to_recover_or_restore(tp, rs, acked)
            if not conserving:
                target_cwnd = self.bdp(bw, gain)
                target_cwnd += self._ack_aggregation_cwnd()
                target_cwnd = self._quantization_budget(tp, target_cwnd)
                if self.full_bw_reached:  # only cut cwnd once the pipe was filled
                    cwnd = min(cwnd + acked, target_cwnd)
                elif cwnd < target_cwnd or tp.delivered < TCP_INIT_CWND:
                    cwnd = cwnd + acked
                cwnd = max(cwnd, bbr_cwnd_min_target)
        tp.snd_cwnd = min(cwnd, tp.snd_cwnd_clamp)  # the global cap
        if self.mode == BBR_PROBE_RTT:  # drain the queue, refresh min_rtt
            tp.snd_cwnd = min(tp.snd_cwnd, bbr_cwnd_min_target)

    # -- PROBE_BW gain cycle ----------------------------------------------------------
    def _is_next_cycle_phase(self, tp: TcpState, rs: RateSample) -> bool:
        """``bbr_is_next_cycle_phase``: a phase lasts min_rtt, unless its in-flight aim is met."""
        is_full_length = (usecs(tp.delivered_mstamp_ns) - self.cycle_mstamp) > self.min_rtt_us
        if self.pacing_gain == BBR_UNIT:
            return is_full_length  # cruising: wall-clock only
        inflight = self._packets_in_net_at_edt(tp, rs.prior_in_flight)
        bw = self.max_bw()
        if self.pacing_gain > BBR_UNIT:
            # Probing: until in-flight reaches gain*BDP (may take more than
            # min_rtt on a LAN), but give up on loss: the buffer may be small.
            return is_full_length and (
                rs.losses > 0 or inflight >= self.inflight(tp, bw, self.pacing_gain)
            )
        # Draining: done once in-flight is back at one BDP.
        return is_full_length or inflight <= self.inflight(tp, bw, BBR_UNIT)

    def _advance_cycle_phase(self, tp: TcpState) -> None:
        self.cycle_idx = (self.cycle_idx + 1) & (CYCLE_LEN - 1)
        self.cycle_mstamp = usecs(tp.delivered_mstamp_ns)

    def _update_cycle_phase(self, tp: TcpState, rs: RateSample) -> None:
        if self.mode == BBR_PROBE_BW and self._is_next_cycle_phase(tp, rs):
            self._advance_cycle_phase(tp)

    def _reset_startup_mode(self) -> None:
        self.mode = BBR_STARTUP

    def _reset_probe_bw_mode(self, tp: TcpState) -> None:
        self.mode = BBR_PROBE_BW
        self.cycle_idx = CYCLE_LEN - 1 - self._rng.randrange(bbr_cycle_rand)
        self._advance_cycle_phase(tp)  # flip to the next phase

    def _reset_mode(self, tp: TcpState) -> None:
        if not self.full_bw_reached:
            self._reset_startup_mode()
        else:
            self._reset_probe_bw_mode(tp)

    # -- long-term (policer) bandwidth ------------------------------------------------
    def _reset_lt_bw_sampling_interval(self, tp: TcpState) -> None:
        self.lt_last_stamp = usecs(tp.delivered_mstamp_ns) // USEC_PER_MSEC  # ms
        self.lt_last_delivered = tp.delivered
        self.lt_last_lost = tp.lost
        self.lt_rtt_cnt = 0

    def _reset_lt_bw_sampling(self, tp: TcpState) -> None:
        self.lt_bw = 0
        self.lt_use_bw = False
        self.lt_is_sampling = False
        self._reset_lt_bw_sampling_interval(tp)

    def _lt_bw_interval_done(self, tp: TcpState, bw: int) -> None:
        """``bbr_lt_bw_interval_done``: two consistent lossy intervals mean a policer."""
        if self.lt_bw:
            diff = abs(bw - self.lt_bw)
            if (diff * BBR_UNIT <= bbr_lt_bw_ratio * self.lt_bw) or (
                self._rate_bytes_per_sec(tp, diff, BBR_UNIT) <= bbr_lt_bw_diff
            ):
                self.lt_bw = (bw + self.lt_bw) >> 1  # average of the two intervals
                self.lt_use_bw = True
                self.pacing_gain = BBR_UNIT  # try to avoid drops
                self.lt_rtt_cnt = 0
                return
        self.lt_bw = bw
        self._reset_lt_bw_sampling_interval(tp)

    def _lt_bw_sampling(self, tp: TcpState, rs: RateSample) -> None:
        """``bbr_lt_bw_sampling``: token-bucket policer detection."""
        if self.lt_use_bw:  # already using the long-term rate
            if self.mode == BBR_PROBE_BW and self.round_start:
                self.lt_rtt_cnt += 1
                if self.lt_rtt_cnt >= bbr_lt_bw_max_rtts:
                    self._reset_lt_bw_sampling(tp)  # stop using lt_bw
                    self._reset_probe_bw_mode(tp)  # restart gain cycling
            return
        # Wait for the first loss, so the policer has exhausted its tokens.
        if not self.lt_is_sampling:
            if not rs.losses:
                return
            self._reset_lt_bw_sampling_interval(tp)
            self.lt_is_sampling = True
        if rs.is_app_limited:  # out of data: the rate would be an underestimate
            self._reset_lt_bw_sampling(tp)
            return
        if self.round_start:
            self.lt_rtt_cnt += 1
        if self.lt_rtt_cnt < bbr_lt_intvl_min_rtts:
            return  # interval needs to be longer
        if self.lt_rtt_cnt > 4 * bbr_lt_intvl_min_rtts:
            self._reset_lt_bw_sampling(tp)  # interval is too long
            return
        # End the interval at a loss: the policer's tokens are gone.
        if not rs.losses:
            return
        lost = tp.lost - self.lt_last_lost
        delivered = tp.delivered - self.lt_last_delivered
        # Is lost/delivered >= lt_loss_thresh? If not, wait.
        if not delivered or (lost << BBR_SCALE) < bbr_lt_loss_thresh * delivered:
            return
        t = s32(usecs(tp.delivered_mstamp_ns) // USEC_PER_MSEC - self.lt_last_stamp)
        if t < 1:
            return  # under a millisecond: wait
        if t >= U32 // USEC_PER_MSEC:
            self._reset_lt_bw_sampling(tp)  # interval too long
            return
        t *= USEC_PER_MSEC
        self._lt_bw_interval_done(tp, delivered * BW_UNIT // t)

    # -- the model ---------------------------------------------------------------------
    def _update_bw(self, tp: TcpState, rs: RateSample) -> None:
        """``bbr_update_bw``: count rounds, sample delivery rate into the max filter."""
        self.round_start = False
        interval_us = usecs(rs.interval_ns) if rs.interval_ns > 0 else 0
        if rs.delivered < 0 or interval_us <= 0:
            return  # not a valid observation
        # A round ends when a packet sent after the round began is delivered.
        if not after(self.next_rtt_delivered, rs.prior_delivered):
            self.next_rtt_delivered = tp.delivered
            self.rtt_cnt += 1
            self.round_start = True
            self.packet_conservation = False
        self._lt_bw_sampling(tp, rs)
        bw = rs.delivered * BW_UNIT // interval_us
        # App-limited samples only count if they show at least the current max.
        if not rs.is_app_limited or bw >= self.max_bw():
            self.bw.running_max(bbr_bw_rtts, self.rtt_cnt, bw)

    def _update_ack_aggregation(self, tp: TcpState, rs: RateSample) -> None:
        """``bbr_update_ack_aggregation``: the windowed max of data acked beyond bw * time."""
        if (
            not bbr_extra_acked_gain
            or rs.acked_sacked <= 0
            or rs.delivered < 0
            or rs.interval_ns <= 0
        ):
            return
        if self.round_start:
            self.extra_acked_win_rtts = min(0x1F, self.extra_acked_win_rtts + 1)
            if self.extra_acked_win_rtts >= bbr_extra_acked_win_rtts:
                self.extra_acked_win_rtts = 0
                self.extra_acked_win_idx ^= 1
                self.extra_acked[self.extra_acked_win_idx] = 0
        epoch_us = (usecs(tp.delivered_mstamp_ns) - self.ack_epoch_mstamp) & U32
        expected_acked = self.bw_estimate() * epoch_us // BW_UNIT
        # Restart the epoch if ACKs came slower than bw, or it is very old.
        if (
            self.ack_epoch_acked <= expected_acked
            or self.ack_epoch_acked + rs.acked_sacked >= bbr_ack_epoch_acked_reset_thresh
        ):
            self.ack_epoch_acked = 0
            self.ack_epoch_mstamp = usecs(tp.delivered_mstamp_ns)
            expected_acked = 0
        self.ack_epoch_acked = min(0xFFFFF, self.ack_epoch_acked + rs.acked_sacked)
        extra_acked = min(self.ack_epoch_acked - expected_acked, tp.snd_cwnd) & 0xFFFF
        if extra_acked > self.extra_acked[self.extra_acked_win_idx]:
            self.extra_acked[self.extra_acked_win_idx] = extra_acked

    def _check_full_bw_reached(self, rs: RateSample) -> None:
        """``bbr_check_full_bw_reached``: 3 rounds with under 25% bw growth."""
        if self.full_bw_reached or not self.round_start or rs.is_app_limited:
            return
        bw_thresh = self.full_bw * bbr_full_bw_thresh >> BBR_SCALE
        if self.max_bw() >= bw_thresh:
            self.full_bw = self.max_bw()
            self.full_bw_cnt = 0
            return
        self.full_bw_cnt += 1
        self.full_bw_reached = self.full_bw_cnt >= bbr_full_bw_cnt

    def _check_drain(self, tp: TcpState) -> None:
        """``bbr_check_drain``: STARTUP -> DRAIN -> PROBE_BW."""
        if self.mode == BBR_STARTUP and self.full_bw_reached:
            self.mode = BBR_DRAIN  # drain the queue STARTUP made
            tp.snd_ssthresh = self.inflight(tp, self.max_bw(), BBR_UNIT)
        if self.mode == BBR_DRAIN and self._packets_in_net_at_edt(
            tp, tp.packets_in_flight
        ) <= self.inflight(tp, self.max_bw(), BBR_UNIT):
            self._reset_probe_bw_mode(tp)  # the queue is drained

    def _check_probe_rtt_done(self, tp: TcpState) -> None:
        """``bbr_check_probe_rtt_done``."""
        now = jiffies(tp.now_ns)
        if not (self.probe_rtt_done_stamp and after(now, self.probe_rtt_done_stamp)):
            return
        self.min_rtt_stamp = now  # wait a while until the next PROBE_RTT
        tp.snd_cwnd = max(tp.snd_cwnd, self.prior_cwnd)
        self._reset_mode(tp)

    def _update_min_rtt(self, tp: TcpState, rs: RateSample) -> None:
        """``bbr_update_min_rtt``: the 10 s min filter and PROBE_RTT."""
        now = jiffies(tp.now_ns)
        filter_expired = after(now, self.min_rtt_stamp + bbr_min_rtt_win_sec * HZ)
        rtt_us = usecs(rs.rtt_ns) if rs.rtt_ns >= 0 else -1
        if rtt_us >= 0 and (rtt_us < self.min_rtt_us or (filter_expired and not rs.is_ack_delayed)):
            self.min_rtt_us = rtt_us
            self.min_rtt_stamp = now

        if (
            bbr_probe_rtt_mode_ms > 0
            and filter_expired
            and not self.idle_restart
            and self.mode != BBR_PROBE_RTT
        ):
            self.mode = BBR_PROBE_RTT  # dip, drain the queue
            self._save_cwnd(tp)  # to restore it afterwards
            self.probe_rtt_done_stamp = 0

        if self.mode == BBR_PROBE_RTT:
            # Ignore low-rate samples during this mode.
            tp.app_limited = (tp.delivered + tp.packets_in_flight) or 1
            # Keep the minimum in flight for max(200 ms, one round).
            if not self.probe_rtt_done_stamp and tp.packets_in_flight <= bbr_cwnd_min_target:
                self.probe_rtt_done_stamp = (now + bbr_probe_rtt_mode_ms * HZ // 1000) & U32
                self.probe_rtt_round_done = False
                self.next_rtt_delivered = tp.delivered
            elif self.probe_rtt_done_stamp:
                if self.round_start:
                    self.probe_rtt_round_done = True
                if self.probe_rtt_round_done:
                    self._check_probe_rtt_done(tp)
        # An idle restart ends with the first S/ACK of new data.
        if rs.delivered > 0:
            self.idle_restart = False

    def _update_gains(self) -> None:
        """``bbr_update_gains``."""
        if self.mode == BBR_STARTUP:
            self.pacing_gain = bbr_high_gain
            self.cwnd_gain = bbr_high_gain
        elif self.mode == BBR_DRAIN:
            self.pacing_gain = bbr_drain_gain  # slow, to drain
            self.cwnd_gain = bbr_high_gain  # keep cwnd
        elif self.mode == BBR_PROBE_BW:
            self.pacing_gain = BBR_UNIT if self.lt_use_bw else bbr_pacing_gain[self.cycle_idx]
            self.cwnd_gain = bbr_cwnd_gain
        else:  # BBR_PROBE_RTT
            self.pacing_gain = BBR_UNIT
            self.cwnd_gain = BBR_UNIT

    def _update_model(self, tp: TcpState, rs: RateSample) -> None:
        """``bbr_update_model``."""
        self._update_bw(tp, rs)
        self._update_ack_aggregation(tp, rs)
        self._update_cycle_phase(tp, rs)
        self._check_full_bw_reached(rs)
        self._check_drain(tp)
        self._update_min_rtt(tp, rs)
        self._update_gains()

    # -- tcp_congestion_ops ---------------------------------------------------------------
    def cong_control(self, tp: TcpState, rs: RateSample) -> bool:
        """``bbr_main``: update the model, then pacing rate and cwnd."""
        self._update_model(tp, rs)
        bw = self.bw_estimate()
        self._set_pacing_rate(tp, bw, self.pacing_gain)
        self._set_cwnd(tp, rs, rs.acked_sacked, bw, self.cwnd_gain)
        return True

    def cong_avoid(self, tp: TcpState, acked: int) -> None:
        """Never called: ``cong_control`` takes full control."""

    def init(self, tp: TcpState) -> None:
        """``bbr_init``."""
        self.prior_cwnd = 0
        tp.snd_ssthresh = INFINITE_SSTHRESH
        self.rtt_cnt = 0
        self.next_rtt_delivered = tp.delivered
        self.prev_ca_state = CA_OPEN
        self.packet_conservation = False
        self.probe_rtt_done_stamp = 0
        self.probe_rtt_round_done = False
        self.min_rtt_us = usecs(tp.min_rtt_ns) if tp.min_rtt_ns > 0 else U32
        self.min_rtt_stamp = jiffies(tp.now_ns)
        self.bw.reset(self.rtt_cnt, 0)  # max bw starts at 0
        self.has_seen_rtt = False
        self._init_pacing_rate_from_rtt(tp)
        self.round_start = False
        self.idle_restart = False
        self.full_bw_reached = False
        self.full_bw = 0
        self.full_bw_cnt = 0
        self.cycle_mstamp = 0
        self.cycle_idx = 0
        self._reset_lt_bw_sampling(tp)
        self._reset_startup_mode()
        self.pacing_gain = bbr_high_gain
        self.cwnd_gain = bbr_high_gain
        self.ack_epoch_mstamp = usecs(tp.now_ns)
        self.ack_epoch_acked = 0
        self.extra_acked_win_rtts = 0
        self.extra_acked_win_idx = 0
        self.extra_acked = [0, 0]

    def sndbuf_expand(self, tp: TcpState) -> int:
        """``bbr_sndbuf_expand``: 3 x cwnd, since BBR may slow-start during recovery."""
        return 3

    def undo_cwnd(self, tp: TcpState) -> int:
        """``bbr_undo_cwnd``: a spurious slow-down; restart full-pipe detection."""
        self.full_bw = 0
        self.full_bw_cnt = 0
        self._reset_lt_bw_sampling(tp)
        return tp.snd_cwnd

    def ssthresh(self, tp: TcpState) -> int:
        """``bbr_ssthresh``: save cwnd for after recovery; ssthresh unchanged."""
        self._save_cwnd(tp)
        return tp.snd_ssthresh

    def cwnd_event(self, tp: TcpState, event: str) -> None:
        """``bbr_cwnd_event_tx_start``: restarting from idle while app-limited."""
        if event == CA_EVENT_TX_START and tp.app_limited:
            self.idle_restart = True
            self.ack_epoch_mstamp = usecs(tp.now_ns)
            self.ack_epoch_acked = 0
            # No need for speed: pace at the estimated bw to avoid a burst.
            if self.mode == BBR_PROBE_BW:
                self._set_pacing_rate(tp, self.bw_estimate(), BBR_UNIT)
            elif self.mode == BBR_PROBE_RTT:
                self._check_probe_rtt_done(tp)

    def set_state(self, tp: TcpState, new_state: int) -> None:
        """``bbr_set_state``: treat an RTO like the end of a lossy round."""
        if new_state == CA_LOSS:
            self.prev_ca_state = CA_LOSS
            self.full_bw = 0
            self.round_start = True
            self._lt_bw_sampling(tp, RateSample(losses=1))
