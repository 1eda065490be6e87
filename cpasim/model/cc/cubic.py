"""CUBIC with HyStart, as Linux has it (``net/ipv4/tcp_cubic.c``, Linux's default).

After a loss at window W_max the window follows

    W(t) = C (t - K)^3 + W_max,   K = cbrt(W_max (1 - beta) / C),

with C = 0.4 (``bic_scale`` 41/1024 scaled by ``cube_rtt_scale``) and
beta = 717/1024, t the time since the epoch began.  Below the Reno-equivalent
window (``tcp_friendliness``) it grows as Reno would with that beta.  In slow
start, HyStart leaves early when ACKs of one round arrive as a train lasting
more than half the minimum RTT, or when the round's RTT has risen 1/8 above
the minimum (clamped to 4..16 ms).

The arithmetic is the kernel's: 32/64-bit integers, time in jiffies for the
cubic curve (``tcp_jiffies32``) and in µs for HyStart (``tcp_mstamp``), the
table-plus-Newton ``cubic_root``.  cpasim keeps ns, so the edges convert:
jiffies are ``floor(now_ns * HZ / 1e9)`` with ``HZ`` = 1000 (see
:mod:`cpasim.model.cc.kclock`).
"""

from __future__ import annotations

from cpasim.model.cc.base import (
    CA_EVENT_TX_START,
    CA_LOSS,
    AckSample,
    CongestionOps,
    TcpState,
    cong_avoid_ai,
    slow_start,
)
from cpasim.model.cc.kclock import (
    HZ,
    U32,
    U64,
    USEC_PER_SEC,
    after,
    jiffies,
    s32,
    usecs,
    usecs_to_jiffies,
)

BICTCP_BETA_SCALE = 1024  # beta is a fraction of 1024
BICTCP_HZ = 10  # the cubic curve's time unit is 1/2^10 s

# HyStart's fixed constants (#defines in tcp_cubic.c).
HYSTART_ACK_TRAIN = 0x1
HYSTART_DELAY = 0x2
HYSTART_MIN_SAMPLES = 8  # RTT samples per round before the delay test
HYSTART_DELAY_MIN = 4000  # µs
HYSTART_DELAY_MAX = 16000  # µs

# Load-time module parameters: the precomputed factors below depend on them.
beta = 717  # /1024: the window kept after a loss
bic_scale = 41  # C = bic_scale * 10 / 1024 = 0.4 (see cube_rtt_scale)

# cubictcp_register() precomputes these from the parameters above.
beta_scale = 8 * (BICTCP_BETA_SCALE + beta) // 3 // (BICTCP_BETA_SCALE - beta)  # = 15
cube_rtt_scale = bic_scale * 10  # 1024 * C
cube_factor = (1 << (10 + 3 * BICTCP_HZ)) // (bic_scale * 10)  # 2^40 / 410: 1/C in 2^-30 s^3

# sk->sk_gso_max_size for hystart_ack_delay(): GSO_LEGACY_MAX_SIZE, the default
# of devices without BIG TCP.
GSO_MAX_SIZE = 65536

# cbrt(x) MSB values for x in [0..63]: v = cbrt(x << 18) - 1, cbrt(x) = (v + 10) >> 6
# (cubic_root's table, refined by hand in the kernel).
_CBRT_V = (
    0, 54, 54, 54, 118, 118, 118, 118,
    123, 129, 134, 138, 143, 147, 151, 156,
    157, 161, 164, 168, 170, 173, 176, 179,
    181, 185, 187, 190, 192, 194, 197, 199,
    200, 202, 204, 206, 209, 211, 213, 215,
    217, 219, 221, 222, 224, 225, 227, 229,
    231, 232, 234, 236, 237, 239, 240, 242,
    244, 245, 246, 248, 250, 251, 252, 254,
)  # fmt: skip


def cubic_root(a: int) -> int:
    """``cubic_root``: table lookup then one Newton-Raphson step (avg error ~0.2%).

    Kept bit for bit rather than ``round(a ** (1/3))`` because K, and so the
    whole curve, inherits its rounding.
    """
    b = a.bit_length()  # fls64
    if b < 7:
        return (_CBRT_V[a] + 35) >> 6
    b = ((b * 84) >> 8) - 1
    shift = a >> (b * 3)
    x = (((_CBRT_V[shift] + 10) << b) & U32) >> 6
    # x_{k+1} = (2 x_k + a / x_k^2) / 3, with x(x-1) for x^2 and *341>>10 for /3.
    x = (2 * x + ((a // (x * (x - 1))) & U32)) & U32
    return ((x * 341) & U32) >> 10


def _clock_us(now_ns: float) -> int:
    """``bictcp_clock_us``: ``tcp_mstamp`` (µs) as u32."""
    return usecs(now_ns) & U32


class Cubic(CongestionOps):
    """``cubictcp``: the fields are ``struct bictcp``'s."""

    name = "cubic"

    # Run-time module parameters (writable in /sys/module/tcp_cubic/parameters),
    # at their defaults; an instance may override them.
    fast_convergence = 1
    tcp_friendliness = 1
    initial_ssthresh = 0
    hystart = 1
    hystart_detect = HYSTART_ACK_TRAIN | HYSTART_DELAY
    hystart_low_window = 16  # packets: HyStart only above this window
    hystart_ack_delta_us = 2000  # ACKs closer than this form a train

    # Slots, for the state every ACK reads (with many connections, a cold one); the
    # parameters above may still be set on an instance (its dictionary holds them).
    __slots__ = ("prior_cwnd", "cnt", "last_max_cwnd", "last_cwnd", "last_time", "ack_cnt")
    __slots__ += ("bic_origin_point", "bic_K", "delay_min", "epoch_start", "tcp_cwnd")
    __slots__ += ("found", "round_start", "end_seq", "last_ack", "curr_rtt", "sample_cnt")

    def __init__(self) -> None:
        self.prior_cwnd = 0  # tp->prior_cwnd for tcp_reno_undo_cwnd (see Reno)
        self._reset()
        self.round_start = 0
        self.end_seq = 0
        self.last_ack = 0
        self.curr_rtt = U32
        self.sample_cnt = 0

    def _reset(self) -> None:
        """``bictcp_reset``: zero everything up to ``unused`` (HyStart's round kept)."""
        self.cnt = 0  # increase cwnd by 1 after this many ACKed packets
        self.last_max_cwnd = 0  # W_max
        self.last_cwnd = 0
        self.last_time = 0  # jiffies when last_cwnd was taken
        self.bic_origin_point = 0  # W_max of the current curve
        self.bic_K = 0  # time from epoch start to the origin, 2^-10 s
        self.delay_min = 0  # µs
        self.epoch_start = 0  # jiffies; 0 = no epoch
        self.ack_cnt = 0
        self.tcp_cwnd = 0  # Reno-equivalent window (tcp_friendliness)
        self.found = 0  # HyStart found the exit point

    def _hystart_reset(self, tp: TcpState) -> None:
        """``bictcp_hystart_reset``: start a HyStart round at snd_nxt."""
        self.round_start = self.last_ack = _clock_us(tp.now_ns)
        self.end_seq = tp.snd_nxt
        self.curr_rtt = U32
        self.sample_cnt = 0

    def init(self, tp: TcpState) -> None:
        """``cubictcp_init``."""
        self._reset()
        self.prior_cwnd = 0
        if self.hystart:
            self._hystart_reset(tp)
        if not self.hystart and self.initial_ssthresh:
            tp.snd_ssthresh = self.initial_ssthresh

    def cwnd_event(self, tp: TcpState, event: str) -> None:
        """``cubictcp_cwnd_event``: after idle, shift the epoch so the curve resumes."""
        if event != CA_EVENT_TX_START:
            return
        now = jiffies(tp.now_ns)
        delta = s32(now - jiffies(tp.lsndtime_ns))
        if self.epoch_start and delta > 0:
            self.epoch_start = (self.epoch_start + delta) & U32
            if after(self.epoch_start, now):
                self.epoch_start = now

    def _update(self, tp: TcpState, cwnd: int, acked: int) -> None:
        """``bictcp_update``: set ``cnt``, the ACKs per one-packet increase."""
        now = jiffies(tp.now_ns)
        self.ack_cnt = (self.ack_cnt + acked) & U32

        # Nothing changed within 1/32 s: keep the last cnt.
        if self.last_cwnd == cwnd and s32(now - self.last_time) <= HZ // 32:
            return

        # The cubic function may update cnt at most once per jiffy; every
        # reduction zeroes epoch_start, which forces a recalculation.
        if not (self.epoch_start and now == self.last_time):
            self.last_cwnd = cwnd
            self.last_time = now

            if self.epoch_start == 0:
                self.epoch_start = now  # record beginning
                self.ack_cnt = acked  # start counting
                self.tcp_cwnd = cwnd  # sync with cubic
                if self.last_max_cwnd <= cwnd:
                    self.bic_K = 0
                    self.bic_origin_point = cwnd
                else:
                    # K = cbrt((W_max - cwnd) / C), in 2^-10 s.
                    self.bic_K = cubic_root(cube_factor * (self.last_max_cwnd - cwnd))
                    self.bic_origin_point = self.last_max_cwnd

            # t: time since the epoch, plus one minimum RTT (the window
            # acts a round later), in 2^-10 s.
            t = s32(now - self.epoch_start) + usecs_to_jiffies(self.delay_min)
            t = ((t << BICTCP_HZ) // HZ) & U64
            offs = self.bic_K - t if t < self.bic_K else t - self.bic_K
            # C (t - K)^3 in packets: cube_rtt_scale = 1024 C, offs in 2^-10 s.
            delta = (((cube_rtt_scale * offs * offs * offs) & U64) >> (10 + 3 * BICTCP_HZ)) & U32
            if t < self.bic_K:  # below origin
                bic_target = (self.bic_origin_point - delta) & U32
            else:  # above origin
                bic_target = (self.bic_origin_point + delta) & U32

            if bic_target > cwnd:
                self.cnt = cwnd // (bic_target - cwnd)
            else:
                self.cnt = (100 * cwnd) & U32  # very small increment

            # Growth from the very first epoch (W_max unknown) is at least 5% per RTT.
            if self.last_max_cwnd == 0 and self.cnt > 20:
                self.cnt = 20

        # tcp_friendliness: never grow slower than Reno with CUBIC's beta,
        # which gains 3(1-beta)/(1+beta) packets per RTT, one per
        # cwnd * beta_scale / 8 ACKs.
        if self.tcp_friendliness:
            delta = (cwnd * beta_scale) >> 3
            if delta:
                while self.ack_cnt > delta:
                    self.ack_cnt -= delta
                    self.tcp_cwnd += 1
            if self.tcp_cwnd > cwnd:  # cubic is slower than Reno
                max_cnt = cwnd // (self.tcp_cwnd - cwnd)
                if self.cnt > max_cnt:
                    self.cnt = max_cnt

        # At most 1 packet per 2 ACKed: 1.5x per RTT.
        self.cnt = max(self.cnt, 2)

    def cong_avoid(self, tp: TcpState, acked: int) -> None:
        """``cubictcp_cong_avoid``."""
        if not tp.is_cwnd_limited:
            return
        if tp.in_slow_start():
            acked = slow_start(tp, acked)
            if not acked:
                return
        self._update(tp, tp.snd_cwnd, acked)
        cong_avoid_ai(tp, self.cnt, acked)

    def ssthresh(self, tp: TcpState) -> int:
        """``cubictcp_recalc_ssthresh``: end the epoch, remember W_max, keep beta."""
        self.prior_cwnd = tp.snd_cwnd
        self.epoch_start = 0  # end of epoch
        cwnd = tp.snd_cwnd
        # Fast convergence: a loss below the last W_max means a new flow is
        # taking its share, so release some: W_max = cwnd (1 + beta) / 2.
        if cwnd < self.last_max_cwnd and self.fast_convergence:
            self.last_max_cwnd = (cwnd * (BICTCP_BETA_SCALE + beta)) // (2 * BICTCP_BETA_SCALE)
        else:
            self.last_max_cwnd = cwnd
        return max((cwnd * beta) // BICTCP_BETA_SCALE, 2)

    def set_state(self, tp: TcpState, new_state: int) -> None:
        """``cubictcp_state``: an RTO forgets everything (W_max included)."""
        if new_state == CA_LOSS:
            self._reset()
            self._hystart_reset(tp)

    def undo_cwnd(self, tp: TcpState) -> int:
        """``tcp_reno_undo_cwnd``."""
        return max(tp.snd_cwnd, self.prior_cwnd)

    def _hystart_ack_delay(self, tp: TcpState) -> int:
        """``hystart_ack_delay``: a TSO/GRO cushion, 4 GSO packets at the pacing rate, <= 1 ms."""
        rate = int(tp.pacing_rate)
        if not rate:
            return 0
        return min(1000, GSO_MAX_SIZE * 4 * USEC_PER_SEC // rate)

    def _hystart_update(self, tp: TcpState, delay: int) -> None:
        """``hystart_update``: look for the slow-start exit point."""
        if after(tp.snd_una, self.end_seq):
            self._hystart_reset(tp)  # a new round

        # HyStart triggers only above hystart_low_window.
        if tp.snd_cwnd < self.hystart_low_window:
            return

        if self.hystart_detect & HYSTART_ACK_TRAIN:
            now = _clock_us(tp.now_ns)
            # ACK-train detection: ACKs closely spaced since the round began
            # for longer than half the minimum RTT mean the pipe is full.
            if s32(now - self.last_ack) <= self.hystart_ack_delta_us:
                self.last_ack = now
                threshold = self.delay_min + self._hystart_ack_delay(tp)
                # Without fq pacing (SK_PACING_NONE: cpasim has no fq), half
                # the RTT; a paced flow may have spread packets over RTT/2.
                if not self.needs_pacing:
                    threshold >>= 1
                if s32(now - self.round_start) > threshold:
                    self.found = 1
                    tp.snd_ssthresh = tp.snd_cwnd

        if self.hystart_detect & HYSTART_DELAY:
            # The round's minimum RTT over HYSTART_MIN_SAMPLES samples.
            if self.curr_rtt > delay:
                self.curr_rtt = delay
            if self.sample_cnt < HYSTART_MIN_SAMPLES:
                self.sample_cnt += 1
            else:
                thresh = min(max(self.delay_min >> 3, HYSTART_DELAY_MIN), HYSTART_DELAY_MAX)
                if self.curr_rtt > self.delay_min + thresh:
                    self.found = 1
                    tp.snd_ssthresh = tp.snd_cwnd

    def pkts_acked(self, tp: TcpState, sample: AckSample) -> None:
        """``cubictcp_acked``: track the minimum delay and run HyStart."""
        if sample.rtt_ns < 0:  # duplicates without timestamps
            return
        # Discard delay samples right after fast recovery.
        if self.epoch_start and s32(jiffies(tp.now_ns) - self.epoch_start) < HZ:
            return
        delay = int(sample.rtt_ns // 1000) or 1  # µs, never 0
        if self.delay_min == 0 or self.delay_min > delay:
            self.delay_min = delay
        if not self.found and tp.in_slow_start() and self.hystart:
            self._hystart_update(tp, delay)
