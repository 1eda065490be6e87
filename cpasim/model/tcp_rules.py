"""TCP's protocol rules as plain objects: no SimPy, no tracing, unit-testable.

* :class:`RenoSender` — sequence space, the peer's window, the congestion
  window (slow start, congestion avoidance, Reno / NewReno fast recovery) and
  the RTO estimator (RFC 6298, Karn's rule).
* :class:`Receiver` — in-order delivery with an out-of-order list, and the ACK
  policy (every second full segment at once, otherwise after the delayed-ACK
  timer; out-of-order and duplicate data are ACKed at once).

Sequence numbers start at 0 and never wrap (Python ints): the connection is
assumed established at t = 0 (no handshake modelled).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from cpasim.model.cc import ALGORITHMS
from cpasim.protocol import TCP_NUM_SACKS

#: RFC 6298's initial RTO, before any RTT sample (no handshake sample either).
INITIAL_RTO_NS = 1e9
#: RFC 6298 caps the backed-off RTO.
MAX_RTO_NS = 60e9


def smooth_rtt(srtt: float | None, rttvar: float, r: float) -> tuple[float, float]:
    """RFC 6298's smoothed RTT and its variation after the sample ``r`` (Linux's
    ``tcp_rtt_estimator`` keeps the same gains, 1/8 and 1/4)."""
    if srtt is None:
        return r, r / 2
    return 0.875 * srtt + 0.125 * r, 0.75 * rttvar + 0.25 * abs(srtt - r)


@dataclass(slots=True)
class AckOutcome:
    """What one incoming ACK did to the sender."""

    acked: int = 0  # bytes newly acknowledged
    retransmit: tuple[int, int] | None = None  # (seq, bytes) to resend now
    rtt_ns: float | None = None  # RTT sample taken, if any
    dup: bool = False  # a duplicate ACK


class RenoSender:
    """The sending half of one TCP connection (byte counts, ints).

    ``cc`` names a classic algorithm (:data:`cpasim.model.cc.ALGORITHMS`): Reno
    leaves fast recovery on the first new ACK, NewReno stays until everything
    outstanding at the loss is acked, retransmitting the next hole on each partial
    ACK (RFC 6582; the algorithm's ``partial_acks``).
    """

    def __init__(
        self,
        *,
        mss: int,
        init_cwnd: int,
        rwnd: int,
        cc: str,
        rto_min_ns: float,
        dupack_threshold: int = 3,
    ) -> None:
        algorithm = ALGORITHMS.get(cc)
        if algorithm is None or not algorithm.classic:
            raise ValueError(f"unknown congestion control {cc!r}")
        self.mss = mss
        self.cc = cc
        self.partial_acks = algorithm.partial_acks
        self.dupack_threshold = dupack_threshold
        self.snd_una = 0  # oldest unacknowledged byte
        self.snd_nxt = 0  # next new byte to send
        self.snd_wnd = rwnd  # the peer's advertised window
        self.cwnd = init_cwnd * mss
        self.ssthresh = 1 << 40  # "infinite" until the first loss
        self._ca_acked = 0  # bytes acked towards the next congestion-avoidance step
        self.dupacks = 0
        self.in_recovery = False
        self.recover = 0  # snd_nxt when fast recovery began
        self.rto_recover = 0  # snd_nxt when the last RTO fired
        self.rto_min_ns = rto_min_ns
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.rto_ns = max(rto_min_ns, INITIAL_RTO_NS)
        self.backoff = 0
        # Largest flight in this and the previous window (is cwnd the limit?).
        self._max_flight = 0
        self._max_flight_prev = 0
        self._flight_mark = 0
        # Segments sent and not yet acked: (seq, end, sent_ns, retransmitted).
        self.outstanding: deque[list] = deque()
        self.retransmits = 0

    # -- what may be sent ------------------------------------------------
    @property
    def flight(self) -> int:
        return self.snd_nxt - self.snd_una

    def window(self) -> int:
        """Bytes the sender may have in flight: min(cwnd, peer's window)."""
        return min(self.cwnd, self.snd_wnd)

    def usable(self) -> int:
        """New bytes that may be sent now: the window less the flight, at least 0.
        (On every segment received: written out, without the calls.)"""
        room = min(self.cwnd, self.snd_wnd) - (self.snd_nxt - self.snd_una)
        return room if room > 0 else 0

    @property
    def ca_open(self) -> bool:
        """Linux's ``TCP_CA_Open``: no duplicate ACKs, no fast recovery, no RTO hole left."""
        return not self.dupacks and not self.in_recovery and self.snd_una >= self.rto_recover

    def on_send(self, nbytes: int, now: float) -> int:
        """Record ``nbytes`` of new data sent; returns its first sequence number."""
        seq = self.snd_nxt
        self.snd_nxt += nbytes
        flight = self.snd_nxt - self.snd_una
        if flight > self._max_flight:
            self._max_flight = flight
        self.outstanding.append([seq, self.snd_nxt, now, False])
        return seq

    def rtx_trigger(self) -> str:
        """What a retransmission an ACK just asked for answers: the holes after an RTO
        (``timeout``) or fast retransmit and recovery (``fast``)."""
        return "timeout" if self.snd_una < self.rto_recover else "fast"

    def on_retransmit(self, seq: int, now: float) -> None:
        for seg in self.outstanding:
            if seg[0] == seq:
                seg[2] = now
                seg[3] = True
                break
        self.retransmits += 1

    def segment_at(self, seq: int) -> tuple[int, int] | None:
        """(seq, bytes) of the outstanding segment starting at ``seq``."""
        for s, e, _, _ in self.outstanding:
            if s == seq:
                return s, e - s
            if s > seq:
                break
        return None

    # -- acknowledgements -------------------------------------------------
    def on_ack(self, ack: int, wnd: int, now: float, carries_data: bool) -> AckOutcome:
        """Process the ACK field (and window) of an incoming segment."""
        out = AckOutcome()
        if ack > self.snd_nxt:  # acks data never sent: ignore (cannot happen here)
            return out
        if ack <= self.snd_una:
            # A pure ACK that moves nothing and keeps the window is a duplicate.
            if ack == self.snd_una and not carries_data and self.flight > 0 and wnd == self.snd_wnd:
                out.dup = True
                out.retransmit = self._on_dupack()
            self.snd_wnd = wnd
            return out
        acked = ack - self.snd_una
        # Grow cwnd only while it limits the sender (RFC 7661; Linux's
        # tcp_is_cwnd_limited): a window-limited flow does not inflate it.
        used = max(self._max_flight_prev, self._max_flight)
        if self.cwnd < self.ssthresh:
            cwnd_limited = 2 * used >= self.cwnd
        else:
            cwnd_limited = used + self.mss >= self.cwnd
        if ack >= self._flight_mark:  # a window's worth acked: start a new maximum
            self._flight_mark = self.snd_nxt
            self._max_flight_prev = self._max_flight
            self._max_flight = self.snd_nxt - ack
        out.acked = acked
        self.snd_una = ack
        self.snd_wnd = wnd
        self.backoff = 0
        # Drop acked segments; RTT sample from the newest one never resent (Karn).
        sample_sent = None
        q = self.outstanding
        while q and q[0][1] <= ack:
            seg = q.popleft()
            if not seg[3]:
                sample_sent = seg[2]
        if q and q[0][0] < ack:  # partially acked segment
            q[0][0] = ack
        if sample_sent is not None:
            out.rtt_ns = now - sample_sent
            self._rtt_sample(out.rtt_ns)
        if self.in_recovery:
            if ack >= self.recover or not self.partial_acks:
                self.in_recovery = False
                self.cwnd = self.ssthresh  # deflate; no growth on this ACK
                self.dupacks = 0
                return out
            else:  # NewReno partial ACK: resend the next hole, deflate
                out.retransmit = self.segment_at(ack)
                self.cwnd = max(self.cwnd - acked + self.mss, self.mss)
                return out
        self.dupacks = 0
        if cwnd_limited:
            self._grow(acked)
        if ack < self.rto_recover:  # after an RTO, resend each further hole at once
            out.retransmit = self.segment_at(ack)
        return out

    def _grow(self, acked: int) -> None:
        if self.cwnd < self.ssthresh:  # slow start, byte counting with L = 2 (RFC 3465)
            self.cwnd += min(acked, 2 * self.mss)
        else:  # congestion avoidance: one MSS per window acked
            self._ca_acked += acked
            if self._ca_acked >= self.cwnd:
                self._ca_acked -= self.cwnd
                self.cwnd += self.mss

    def _on_dupack(self) -> tuple[int, int] | None:
        self.dupacks += 1
        if self.in_recovery:
            self.cwnd += self.mss  # inflate: one more segment left the network
            return None
        if self.dupacks == self.dupack_threshold and self.snd_una >= self.recover:
            self.ssthresh = max(self.flight // 2, 2 * self.mss)
            self.cwnd = self.ssthresh + 3 * self.mss
            self.in_recovery = True
            self.recover = self.snd_nxt
            return self.segment_at(self.snd_una)
        return None

    def on_timeout(self) -> tuple[int, int] | None:
        """RTO expired: collapse the window, back off, resend the oldest segment."""
        if self.flight == 0:
            return None
        self.ssthresh = max(self.flight // 2, 2 * self.mss)
        self.cwnd = self.mss
        self.in_recovery = False
        self.recover = self.rto_recover = self.snd_nxt
        self.dupacks = 0
        self.backoff += 1
        self.rto_ns = min(self.rto_ns * 2, MAX_RTO_NS)
        return self.segment_at(self.snd_una)

    def _rtt_sample(self, r: float) -> None:
        self.srtt, self.rttvar = smooth_rtt(self.srtt, self.rttvar, r)
        self.rto_ns = min(max(self.rto_min_ns, self.srtt + 4 * self.rttvar), MAX_RTO_NS)


class Receiver:
    """The receiving half of one TCP connection.

    :meth:`on_data` returns how many bytes became deliverable in order and
    whether an ACK must go out at once; otherwise the caller arms the
    delayed-ACK timer when :attr:`ack_pending` is set.  With ``sack`` it keeps
    the SACK blocks Linux's ``tcp_sack_new_ofo_skb`` would: the out-of-order
    range that just grew first, then the others most recent first.
    """

    # Slots, as TcpConnection's: with many connections every segment meets a cold one.
    __slots__ = ("mss", "delayed_ack", "sack", "sacks", "rcv_nxt", "ofo", "ofo_bytes")
    __slots__ += ("unacked_segs", "ack_pending")

    def __init__(self, *, mss: int, delayed_ack: bool, sack: bool = False) -> None:
        self.mss = mss
        self.delayed_ack = delayed_ack
        self.sack = sack
        self.sacks: list[tuple[int, int]] = []  # (start, end), most recent first
        self.rcv_nxt = 0
        self.ofo: list[tuple[int, int]] = []  # out-of-order (seq, end), sorted, disjoint
        # Their bytes, kept as they change: every window offered counts them.
        self.ofo_bytes = 0
        self.unacked_segs = 0  # full-sized segments received since the last ACK
        self.ack_pending = False

    def on_data(self, seq: int, nbytes: int, segs: int = 1) -> tuple[int, bool]:
        """A data segment (or ``segs`` coalesced ones) arrived: (bytes delivered, ack now)."""
        end = seq + nbytes
        if end <= self.rcv_nxt:  # a duplicate: tell the sender at once
            self.ack_pending = True
            return 0, True
        if seq > self.rcv_nxt:  # a hole before it: keep it, duplicate-ACK at once
            block = self._store_ofo(seq, end)
            if self.sack:
                self._sack_new(block)
            self.ack_pending = True
            return 0, True
        delivered = end - self.rcv_nxt
        self.rcv_nxt = end
        filled_hole = bool(self.ofo)
        while self.ofo and self.ofo[0][0] <= self.rcv_nxt:
            s, e = self.ofo.pop(0)
            self.ofo_bytes -= e - s
            if e > self.rcv_nxt:
                delivered += e - self.rcv_nxt
                self.rcv_nxt = e
        if self.sacks:  # tcp_sack_remove: blocks now below rcv_nxt go
            self.sacks = [b for b in self.sacks if b[0] > self.rcv_nxt]
        self.ack_pending = True
        if nbytes >= self.mss:
            self.unacked_segs += segs
        now = filled_hole or not self.delayed_ack or self.unacked_segs >= 2
        return delivered, now

    def _store_ofo(self, seq: int, end: int) -> tuple[int, int]:
        """Keep ``[seq, end)`` out of order, merged with the ranges it overlaps or
        touches; returns the range that holds it now.  The ranges are sorted and
        disjoint, so the ones it meets are consecutive: found by a walk from the
        front (a few ranges), replaced in place, their bytes counted as they go."""
        ofo = self.ofo
        n = len(ofo)
        i = 0
        while i < n and ofo[i][1] < seq:
            i += 1
        j = i
        gone = 0
        while j < n and ofo[j][0] <= end:
            s, e = ofo[j]
            gone += e - s
            if s < seq:
                seq = s
            if e > end:
                end = e
            j += 1
        block = (seq, end)
        ofo[i:j] = (block,)
        self.ofo_bytes += end - seq - gone
        return block

    def _sack_new(self, first: tuple[int, int]) -> None:
        """The out-of-order range ``first`` (the one that just grew) becomes the first
        block; blocks it swallowed go, and only the ``TCP_NUM_SACKS`` most recent stay."""
        rest = [b for b in self.sacks if b[1] < first[0] or b[0] > first[1]]
        self.sacks = [first, *rest][:TCP_NUM_SACKS]

    def on_ack_sent(self) -> None:
        self.unacked_segs = 0
        self.ack_pending = False
