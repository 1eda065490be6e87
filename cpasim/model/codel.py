"""CoDel, the Controlled-Delay AQM (RFC 8289), as Linux's ``codel_dequeue``.

A queue under CoDel remembers when each packet entered it.  When the packets
leaving it have waited longer than ``target`` (5 ms) for a whole ``interval``
(100 ms), CoDel starts dropping at the head, the k-th drop of a dropping
spell ``interval / sqrt(k)`` after the previous one, until a packet leaves
below target again (Linux include/net/codel_impl.h).  The square root is
computed exactly rather than with Linux's Newton step.
"""

from __future__ import annotations

import math

#: RFC 8289 section 4 and Linux codel_params_init, ns.
CODEL_TARGET = 5e6
CODEL_INTERVAL = 100e6


class CoDel:
    """The CoDel state of one queue (RFC 8289; Linux ``struct codel_vars``).

    :meth:`dequeue` is Linux's ``codel_dequeue``: it takes packets off the
    head of ``queue``, dropping those the control law says to, and returns the
    one to send.  ``queue`` provides ``take()`` (the head ``(enqueued_ns,
    frame)`` or None), ``drop(item, reason)`` and ``backlog`` (the bytes still
    queued, which ``mtu`` is compared with: Linux passes the whole qdisc's).
    """

    def __init__(self, mtu: int, target: float = CODEL_TARGET, interval: float = CODEL_INTERVAL):
        self.mtu = mtu  # a backlog of at most one packet is never reduced
        self.target = target
        self.interval = interval
        self.first_above_time = 0.0
        self.drop_next = 0.0
        self.count = 0
        self.lastcount = 0
        self.dropping = False

    def _control_law(self, t: float) -> float:
        return t + self.interval / math.sqrt(self.count)

    def _should_drop(self, item, backlog: int, now: float) -> bool:
        if item is None:
            self.first_above_time = 0.0
            return False
        if now - item[0] < self.target or backlog <= self.mtu:
            # Below target (or too little queued to matter): stay out of
            # dropping for at least an interval.
            self.first_above_time = 0.0
            return False
        if self.first_above_time == 0.0:
            self.first_above_time = now + self.interval
            return False
        return now >= self.first_above_time

    def dequeue(self, queue, now: float):
        """The next ``(enqueued_ns, frame)`` of ``queue`` to send, or None; drops on the way."""
        item = queue.take()
        if item is None:
            self.dropping = False
            return None
        drop = self._should_drop(item, queue.backlog, now)
        if self.dropping:
            if not drop:
                self.dropping = False
            else:
                while self.dropping and now >= self.drop_next:
                    self.count += 1
                    queue.drop(item, "aqm")
                    item = queue.take()
                    if not self._should_drop(item, queue.backlog, now):
                        self.dropping = False
                    else:
                        self.drop_next = self._control_law(self.drop_next)
        elif drop:
            queue.drop(item, "aqm")
            item = queue.take()
            self._should_drop(item, queue.backlog, now)
            self.dropping = True
            # Re-entering soon after leaving: resume near the old drop rate.
            delta = self.count - self.lastcount
            if delta > 1 and now - self.drop_next < 16 * self.interval:
                self.count = delta
            else:
                self.count = 1
            self.lastcount = self.count
            self.drop_next = self._control_law(now)
        return item
