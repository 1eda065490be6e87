"""A small packet-level driver for congestion-control rules objects (no SimPy).

One bulk sender (always has data) sends through one FIFO bottleneck of
``rate_pps`` packets/s and ``buffer_pkts`` packets (drop-tail) over a path of
``prop_rtt_ns`` two-way propagation delay; the receiver ACKs every packet at
once.  The driver does what Linux's ``tcp_ack`` does around the algorithm, in
its order: ``pkts_acked``, then ``cong_control`` or (outside recovery)
``cong_avoid``; delivery-rate samples as ``tcp_rate.c`` builds them; on a loss
``ssthresh`` then ``set_state(CA_RECOVERY)``, and at the end of recovery the
window set to ssthresh (``tcp_end_cwnd_reduction``; the driver cuts at once
where Linux's PRR takes one round — a simplification of the test harness).
Lost packets are not retransmitted: the data is endless, only the window
dynamics are under test.  Pacing follows ``tp.pacing_rate`` for algorithms
that ask for it (``needs_pacing``).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from cpasim.model.cc.base import (
    CA_OPEN,
    CA_RECOVERY,
    INFINITE_SSTHRESH,
    AckSample,
    CongestionOps,
    RateSample,
    TcpState,
)

MSS = 1448


@dataclass(slots=True)
class _Pkt:
    seq: int
    sent_ns: float
    delivered: int  # tp.delivered when sent
    delivered_mstamp_ns: float
    first_tx_mstamp_ns: float
    is_app_limited: bool
    in_flight_at_send: int


class Path:
    """One flow through one bottleneck; ``run_until(t_ns)`` advances it."""

    def __init__(
        self,
        cc: CongestionOps,
        *,
        rate_pps: float,
        prop_rtt_ns: float,
        buffer_pkts: int = 1 << 30,
        init_cwnd: int = 10,
        mss: int = MSS,
        cwnd_clamp: int = INFINITE_SSTHRESH,
        lose: Callable[[TcpState, int], bool] | None = None,
        on_ack: Callable[[Path], None] | None = None,
    ) -> None:
        self.cc = cc
        self.tx_ns = 1e9 / rate_pps
        self.prop_rtt_ns = prop_rtt_ns
        self.buffer_pkts = buffer_pkts
        self.lose = lose
        self.on_ack = on_ack
        self.tp = TcpState(
            mss=mss, snd_cwnd=init_cwnd, snd_ssthresh=INFINITE_SSTHRESH, snd_cwnd_clamp=cwnd_clamp
        )
        self.tp.is_cwnd_limited = True  # bulk data: the window always limits
        self.now = 0.0
        self._events: list[tuple[float, int, str, object]] = []
        self._order = 0
        self._link_free = 0.0
        self._departures: deque[float] = deque()
        self._next_seq = 0
        self._first_tx_ns = 0.0
        self._next_send_ns = 0.0
        self._send_timer = False
        self._pending_losses = 0
        self.recovery_point = -1
        self.losses = 0
        self.sent = 0
        cc.init(self.tp)
        self._try_send()

    def set_rate(self, rate_pps: float) -> None:
        """Change the bottleneck rate from now on (packets already queued keep theirs)."""
        self.tx_ns = 1e9 / rate_pps

    # -- events ----------------------------------------------------------------
    def _push(self, t: float, kind: str, obj: object) -> None:
        self._order += 1
        heapq.heappush(self._events, (t, self._order, kind, obj))

    def run_until(self, t_end: float) -> None:
        while self._events and self._events[0][0] <= t_end:
            t, _, kind, obj = heapq.heappop(self._events)
            self.now = t
            self.tp.now_ns = t
            if kind == "ack":
                self._on_ack(obj)
            elif kind == "loss":
                self._on_loss(obj)
            else:  # pacing timer
                self._send_timer = False
            self._try_send()
        self.now = t_end
        self.tp.now_ns = t_end

    # -- sending ---------------------------------------------------------------
    def _try_send(self) -> None:
        tp = self.tp
        while tp.packets_in_flight < tp.snd_cwnd:
            paced = self.cc.needs_pacing and tp.pacing_rate > 0
            if paced and self._next_send_ns > self.now:
                if not self._send_timer:
                    self._send_timer = True
                    self._push(self._next_send_ns, "timer", None)
                return
            self._send()
            if paced:
                start = max(self._next_send_ns, self.now)
                self._next_send_ns = start + tp.mss / tp.pacing_rate * 1e9
                tp.wstamp_ns = self._next_send_ns

    def _send(self) -> None:
        tp = self.tp
        now = self.now
        if tp.packets_out == 0:  # tcp_rate_skb_sent: a fresh flight starts now
            self._first_tx_ns = now
            tp.delivered_mstamp_ns = now
        seq = self._next_seq
        self._next_seq += 1
        pkt = _Pkt(
            seq,
            now,
            tp.delivered,
            tp.delivered_mstamp_ns,
            self._first_tx_ns,
            tp.app_limited != 0,
            tp.packets_in_flight,
        )
        tp.packets_out += 1
        tp.snd_nxt = self._next_seq * tp.mss
        tp.lsndtime_ns = now
        self.sent += 1
        while self._departures and self._departures[0] <= now:
            self._departures.popleft()
        queued = len(self._departures)
        dropped = queued >= self.buffer_pkts or (self.lose is not None and self.lose(tp, seq))
        if dropped:
            # Detected when the packets behind it are (s)acked: one path RTT after
            # the queue ahead of it has drained.
            self._push(max(self._link_free, now) + self.tx_ns + self.prop_rtt_ns, "loss", pkt)
            return
        depart = max(self._link_free, now) + self.tx_ns
        self._link_free = depart
        self._departures.append(depart)
        self._push(depart + self.prop_rtt_ns, "ack", pkt)

    # -- ACKs and losses ---------------------------------------------------------
    def _on_loss(self, pkt: _Pkt) -> None:
        tp = self.tp
        tp.packets_out -= 1
        tp.lost += 1
        self.losses += 1
        self._pending_losses += 1
        if tp.ca_state == CA_OPEN:
            # tcp_enter_recovery: tcp_init_cwnd_reduction (->ssthresh) then the state.
            tp.snd_ssthresh = self.cc.ssthresh(tp)
            self.cc.set_state(tp, CA_RECOVERY)
            tp.ca_state = CA_RECOVERY
            tp.snd_cwnd_cnt = 0
            self.recovery_point = self._next_seq
            if not self._takes_control():
                tp.snd_cwnd = min(tp.snd_cwnd, tp.snd_ssthresh)

    def _takes_control(self) -> bool:
        return type(self.cc).cong_control is not CongestionOps.cong_control

    def _on_ack(self, pkt: _Pkt) -> None:
        tp = self.tp
        now = self.now
        prior_in_flight = tp.packets_in_flight
        rtt = now - pkt.sent_ns
        tp.packets_out -= 1
        tp.delivered += 1
        tp.delivered_mstamp_ns = now
        tp.snd_una = max(tp.snd_una, (pkt.seq + 1) * tp.mss)
        tp.srtt_ns = rtt if tp.srtt_ns == 0 else tp.srtt_ns + (rtt - tp.srtt_ns) / 8
        tp.min_rtt_ns = rtt if tp.min_rtt_ns == 0 else min(tp.min_rtt_ns, rtt)

        # tcp_rate_skb_delivered + tcp_rate_gen, one packet per ACK.
        rs = RateSample(
            prior_mstamp_ns=pkt.delivered_mstamp_ns,
            prior_delivered=pkt.delivered,
            delivered=tp.delivered - pkt.delivered,
            rtt_ns=rtt,
            losses=self._pending_losses,
            acked_sacked=1,
            prior_in_flight=prior_in_flight,
            is_app_limited=pkt.is_app_limited,
        )
        self._pending_losses = 0
        self._first_tx_ns = pkt.sent_ns
        if tp.app_limited and tp.delivered > tp.app_limited:
            tp.app_limited = 0
        send_interval = pkt.sent_ns - pkt.first_tx_mstamp_ns
        ack_interval = now - pkt.delivered_mstamp_ns
        rs.interval_ns = max(send_interval, ack_interval)
        if rs.interval_ns < tp.min_rtt_ns:
            rs.interval_ns = -1.0  # an interval shorter than min_rtt is not a rate

        if tp.ca_state == CA_RECOVERY and pkt.seq >= self.recovery_point:
            tp.ca_state = CA_OPEN
            self.cc.set_state(tp, CA_OPEN)
            if not self._takes_control():
                tp.snd_cwnd = tp.snd_ssthresh  # tcp_end_cwnd_reduction

        self.cc.pkts_acked(tp, AckSample(pkts_acked=1, rtt_ns=rtt, in_flight=prior_in_flight))
        if not self.cc.cong_control(tp, rs) and tp.ca_state == CA_OPEN:
            self.cc.cong_avoid(tp, 1)
        if self.on_ack is not None:
            self.on_ack(self)
