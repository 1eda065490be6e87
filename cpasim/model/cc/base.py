"""The interface between TCP's sender and a congestion-control algorithm.

It mirrors Linux's ``struct tcp_congestion_ops`` (``include/net/tcp.h``) and
how ``net/ipv4/tcp_input.c`` calls it, so each algorithm reads like its kernel
source.  Like Linux, algorithms count the window in *packets* (segments), not
bytes; the sender turns ``snd_cwnd`` into bytes with ``mss``.

The sender owns a :class:`TcpState`; an algorithm reads it and writes
``snd_cwnd``, ``snd_ssthresh``, ``snd_cwnd_cnt`` and ``pacing_rate`` (and BBR,
as in Linux, ``app_limited`` while in PROBE_RTT, so its own low-rate samples
are marked app-limited).  Calls, in Linux's order on each ACK (``tcp_ack``):

1. ``pkts_acked(tp, sample)`` when the ACK acknowledged or SACKed something
   (``tcp_clean_rtx_queue``);
2. ``in_ack_event(tp, flags)``;
3. ``tcp_cong_control``: ``cong_control(tp, rs)`` if the algorithm has it
   (BBR), else — outside a window reduction — ``cong_avoid(tp, acked)``
   when ``tcp_may_raise_cwnd``; inside one the sender runs PRR itself.

On loss the sender calls ``ssthresh(tp)`` on entering Recovery or Loss
(``tcp_init_cwnd_reduction``, ``tcp_enter_loss``), ``set_state`` on every
change of ``ca_state``, ``undo_cwnd`` when a reduction proves spurious, and
``cwnd_event`` for the events below.
"""

from __future__ import annotations

from dataclasses import dataclass

#: ``icsk_ca_state`` values (``enum tcp_ca_state``).
CA_OPEN, CA_DISORDER, CA_CWR, CA_RECOVERY, CA_LOSS = range(5)

#: ``enum tcp_ca_event`` values passed to ``cwnd_event``.
CA_EVENT_TX_START = "tx_start"  # first transmit when no packets in flight
CA_EVENT_CWND_RESTART = "cwnd_restart"  # congestion window restart after idle
CA_EVENT_COMPLETE_CWR = "complete_cwr"  # end of a window reduction
CA_EVENT_LOSS = "loss"  # RTO: loss timeout

#: ``in_ack_event`` flags (``enum tcp_ca_ack_event_flags``).
CA_ACK_SLOWPATH = 1
CA_ACK_WIN_UPDATE = 2

#: ``TCP_INFINITE_SSTHRESH``: "no slow-start threshold yet".
INFINITE_SSTHRESH = 0x7FFFFFFF


@dataclass(slots=True)
class TcpState:
    """What an algorithm may read (and the four fields it may write) of one sender.

    Times are ns (cpasim's internal unit); Linux keeps µs, so algorithms that
    port kernel arithmetic convert at their edges.
    """

    mss: int  # bytes per full segment (tp->mss_cache)
    snd_cwnd: int  # congestion window, packets          (written by the algorithm)
    snd_ssthresh: int  # slow-start threshold, packets       (written by the algorithm)
    snd_cwnd_cnt: int = 0  # linear-increase counter            (written by the algorithm)
    snd_cwnd_clamp: int = INFINITE_SSTHRESH  # never grow beyond this
    pacing_rate: float = 0.0  # bytes/s; 0 = not paced            (written by the algorithm)
    ca_state: int = CA_OPEN
    now_ns: float = 0.0  # the time of the current event
    packets_out: int = 0  # segments sent and not yet (s)acked
    sacked_out: int = 0
    lost_out: int = 0
    retrans_out: int = 0
    delivered: int = 0  # segments delivered (acked or sacked) since the start
    delivered_mstamp_ns: float = 0.0  # when ``delivered`` last grew
    srtt_ns: float = 0.0  # smoothed RTT (0 before the first sample)
    min_rtt_ns: float = 0.0  # windowed minimum RTT (tcp_min_rtt; 0 before a sample)
    is_cwnd_limited: bool = False  # tcp_is_cwnd_limited() at this ACK
    app_limited: int = 0  # tp->app_limited: delivered mark while app-limited, 0 if not
    snd_una: int = 0  # bytes (sequence space)
    snd_nxt: int = 0
    lost: int = 0  # tp->lost: segments marked lost since the start (BBR's policer detection)
    lsndtime_ns: float = 0.0  # tp->lsndtime: when data was last sent (CUBIC's idle restart)
    wstamp_ns: float = 0.0  # tp->tcp_wstamp_ns: earliest departure time of the next packet

    @property
    def packets_in_flight(self) -> int:
        """``tcp_packets_in_flight``: packets_out - (sacked_out + lost_out) + retrans_out."""
        return self.packets_out - (self.sacked_out + self.lost_out) + self.retrans_out

    def in_slow_start(self) -> bool:
        """``tcp_in_slow_start``."""
        return self.snd_cwnd < self.snd_ssthresh


@dataclass(slots=True)
class AckSample:
    """``struct ack_sample`` for ``pkts_acked``."""

    pkts_acked: int  # packets newly acked or sacked
    rtt_ns: float  # RTT sample of this ACK, -1 when none (Karn)
    in_flight: int  # packets in flight before the ACK


@dataclass(slots=True)
class RateSample:
    """``struct rate_sample`` (``net/ipv4/tcp_rate.c``) for ``cong_control``."""

    prior_mstamp_ns: float = 0.0  # starting timestamp of the interval
    prior_delivered: int = 0  # tp->delivered at "prior_mstamp"
    delivered: int = 0  # packets delivered over the interval (-1: invalid sample)
    interval_ns: float = -1.0  # max(send, ack) interval; <= 0 means invalid
    rtt_ns: float = -1.0  # RTT of the last (s)acked packet never retransmitted, -1 if none
    losses: int = 0  # packets newly marked lost by this ACK
    acked_sacked: int = 0  # packets newly (s)acked by this ACK
    prior_in_flight: int = 0  # packets in flight before this ACK
    is_app_limited: bool = False
    is_retrans: bool = False  # the sample's packet was retransmitted
    is_ack_delayed: bool = False


class CongestionOps:
    """Base of every algorithm: Linux's defaults where an op is optional.

    Subclasses set ``name`` and override what their kernel module implements.
    ``cong_control`` returns False when the algorithm does not take full control
    (the sender then runs the ``cong_avoid`` path).  The class attributes below say
    what the sender and the run need to know of an algorithm.
    """

    name = "base"
    #: It asks for ``SK_PACING_NEEDED`` (BBR): with no ``fq`` qdisc, TCP then paces
    #: internally at ``tp.pacing_rate``.
    needs_pacing = False
    #: Its constructor takes a ``seed``: it draws random numbers (BBR's first
    #: PROBE_BW phase), so ``sim.seed`` changes the run.
    takes_seed = False
    #: The classic RFC 5681 sender (:class:`~cpasim.model.tcp_rules.RenoSender`) runs
    #: it when the connection has neither SACK nor pacing; Linux's sender otherwise.
    classic = False
    #: With the classic sender: stay in fast recovery until everything outstanding
    #: at the loss is acknowledged, resending the next hole on each partial ACK
    #: (RFC 6582's NewReno), rather than leave it on the first new ACK.
    partial_acks = False

    def init(self, tp: TcpState) -> None:
        pass

    def ssthresh(self, tp: TcpState) -> int:
        raise NotImplementedError

    def cong_avoid(self, tp: TcpState, acked: int) -> None:
        raise NotImplementedError

    def cong_control(self, tp: TcpState, rs: RateSample) -> bool:
        return False

    def set_state(self, tp: TcpState, new_state: int) -> None:
        pass

    def cwnd_event(self, tp: TcpState, event: str) -> None:
        pass

    def in_ack_event(self, tp: TcpState, flags: int) -> None:
        pass

    def pkts_acked(self, tp: TcpState, sample: AckSample) -> None:
        pass

    def undo_cwnd(self, tp: TcpState) -> int:
        """``tcp_reno_undo_cwnd``: the window before the reduction, at least the current."""
        return max(tp.snd_cwnd, getattr(self, "prior_cwnd", tp.snd_cwnd))

    def sndbuf_expand(self, tp: TcpState) -> int:
        """Send-buffer multiple of cwnd for autotuning (``tcp_sndbuf_expand``): 2 by default."""
        return 2


# -- Reno's helpers, shared by the algorithms that reuse them (tcp_cong.c) ----------------


def slow_start(tp: TcpState, acked: int) -> int:
    """``tcp_slow_start``: grow by ``acked`` up to ssthresh; returns the acked left over."""
    cwnd = min(tp.snd_cwnd + acked, tp.snd_ssthresh)
    acked -= cwnd - tp.snd_cwnd
    tp.snd_cwnd = min(cwnd, tp.snd_cwnd_clamp)
    return acked


def cong_avoid_ai(tp: TcpState, w: int, acked: int) -> None:
    """``tcp_cong_avoid_ai``: one packet more per ``w`` packets acked."""
    if tp.snd_cwnd_cnt >= w:
        tp.snd_cwnd_cnt = 0
        tp.snd_cwnd += 1
    tp.snd_cwnd_cnt += acked
    if tp.snd_cwnd_cnt >= w:
        delta = tp.snd_cwnd_cnt // w
        tp.snd_cwnd_cnt -= delta * w
        tp.snd_cwnd += delta
    tp.snd_cwnd = min(tp.snd_cwnd, tp.snd_cwnd_clamp)
