"""Why each TCP segment was sent again: a drop, and where, or a timer that fired early.

A run's ``retransmits`` counts segments TCP sent a second time.  Each has a cause:

* a copy of it was dropped: the drop's reason, as the run's ``drops`` names it
  (``bottleneck_queue_full``, ``aqm``, ``link_loss``, ``rx_fifo``, ``rx_ring_full``);
* no copy was lost, and it went again all the same: ``spurious_timeout`` (the
  retransmission timer, or the recovery that follows it, went back over segments
  still on their way: the round trip outgrew the timeout), ``spurious_fast``
  (fast retransmit or RACK called a late segment lost), or ``loss_probe`` (a tail
  loss probe, which resends the last segment by design, lost or not).

Every place that drops frames tells the :class:`LossLog` which TCP segment it
dropped and which end host sent it; every retransmission asks the log whether a
copy of that segment was dropped since it was last sent.  The log costs nothing
until something is dropped or sent again.
"""

from __future__ import annotations

#: Causes of a retransmission that lost nothing (see the module docstring).
SPURIOUS = {"timeout": "spurious_timeout", "fast": "spurious_fast", "probe": "loss_probe"}


class LossLog:
    """The run's dropped TCP segments and the causes of its retransmissions."""

    def __init__(self) -> None:
        # (conn, sending host) -> sequence number -> reasons of its drops not yet resent
        self._lost: dict[tuple[str, str], dict[int, list[str]]] = {}
        self.causes: dict[str, int] = {}  # cause -> retransmissions
        self.by_conn: dict[str, dict[str, int]] = {}  # conn -> cause -> retransmissions

    def dropped(self, frame, src: str, reason: str) -> None:
        """``frame``, sent by end host ``src``, was dropped for ``reason``."""
        if frame.proto != "tcp" or not frame.payload:
            return  # pure ACKs and other protocols are never retransmitted as such
        lost = self._lost.setdefault((frame.conn, src), {})
        lost.setdefault(frame.seq, []).append(reason)

    def resent(self, conn: str, src: str, seq: int, nbytes: int, trigger: str) -> str:
        """End host ``src`` sends ``conn``'s segment at ``seq`` (``nbytes``) again,
        ``trigger`` being ``timeout``, ``fast`` or ``probe``; returns the cause counted."""
        cause = self._drop_of(conn, src, seq, nbytes) or SPURIOUS[trigger]
        self.causes[cause] = self.causes.get(cause, 0) + 1
        mine = self.by_conn.setdefault(conn, {})
        mine[cause] = mine.get(cause, 0) + 1
        return cause

    def _drop_of(self, conn: str, src: str, seq: int, nbytes: int) -> str | None:
        """The reason of the oldest unanswered drop of a segment in ``[seq, seq+nbytes)``."""
        lost = self._lost.get((conn, src))
        if not lost:
            return None
        at = seq if seq in lost else next((s for s in lost if seq <= s < seq + nbytes), None)
        if at is None:
            return None
        reasons = lost[at]
        reason = reasons.pop(0)
        if not reasons:
            del lost[at]
        return reason
