"""Reno and NewReno: Linux's ``tcp_reno_*`` ops (``net/ipv4/tcp_cong.c``).

Linux has one "reno" module; what RFC 6582 calls NewReno (staying in fast
recovery until everything outstanding at the loss is acknowledged) is the
*sender's* recovery, not the congestion-control module.  So :class:`NewReno`
shares every op with :class:`Reno` and differs only in ``partial_acks``, which the
classic sender reads to choose its recovery.
"""

from __future__ import annotations

from cpasim.model.cc.base import CongestionOps, TcpState, cong_avoid_ai, slow_start


class Reno(CongestionOps):
    """``tcp_reno``: Jacobson's slow start and congestion avoidance (SIGCOMM '88)."""

    name = "reno"
    classic = True

    def __init__(self) -> None:
        # tp->prior_cwnd: Linux's sender sets it to cwnd just before calling
        # ->ssthresh() (tcp_init_cwnd_reduction, tcp_enter_loss); TcpState has
        # no such field, so ssthresh() records it here for undo_cwnd().
        self.prior_cwnd = 0

    def init(self, tp: TcpState) -> None:
        self.prior_cwnd = 0

    def cong_avoid(self, tp: TcpState, acked: int) -> None:
        """``tcp_reno_cong_avoid``."""
        # Growth only when the window, not the application, limits sending;
        # otherwise cwnd would inflate without ever being tested.
        if not tp.is_cwnd_limited:
            return
        # In the "safe" area (below ssthresh), increase by what was acked.
        if tp.in_slow_start():
            acked = slow_start(tp, acked)
            if not acked:
                return
        # In the "dangerous" area, one packet per window's worth of ACKs.
        cong_avoid_ai(tp, tp.snd_cwnd, acked)

    def ssthresh(self, tp: TcpState) -> int:
        """``tcp_reno_ssthresh``: half the window, at least 2."""
        self.prior_cwnd = tp.snd_cwnd
        return max(tp.snd_cwnd >> 1, 2)

    def undo_cwnd(self, tp: TcpState) -> int:
        """``tcp_reno_undo_cwnd``: back to the window before the reduction."""
        return max(tp.snd_cwnd, self.prior_cwnd)


class NewReno(Reno):
    """Reno's ops; the sender pairs them with NewReno partial-ACK recovery."""

    name = "newreno"
    partial_acks = True
