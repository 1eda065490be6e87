"""Interrupt moderation of a NIC, as an env-free rule.

Three knobs, as on real NICs:

- ``frames``: this many pending completions interrupt at once;
- ``usecs``: otherwise the interrupt waits until ``usecs`` after the first
  pending completion (ethtool ``rx-usecs``; 0 = no wait);
- ``gap``: never two interrupts closer than ``gap`` (throttling, e1000 ITR);
  the first interrupt after a quiet period is not delayed by it.

After an interrupt the cause is masked until the driver's NAPI poll
re-enables it; completions that arrive meanwhile stay pending and are judged
again on re-enable.

Callers turn each decision into actions: ``FIRE`` = raise the interrupt now;
``ARM`` = start a countdown to :attr:`Moderation.deadline` and report back with
:meth:`Moderation.expired` and the arm number :attr:`Moderation.arm_id`;
``NONE`` = nothing to do.  Countdowns cannot be cancelled: one that is no
longer current (an interrupt fired, or a sooner countdown was armed) is
recognised by its arm number and ignored.
"""

from __future__ import annotations

NONE, FIRE, ARM = "none", "fire", "arm"


class Moderation:
    __slots__ = (
        "frames",
        "usecs",
        "gap",
        "pending",
        "first",
        "last_fire",
        "enabled",
        "armed",
        "arm_id",
        "deadline",
    )

    def __init__(self, frames: int, usecs: float, gap: float = 0.0):
        if frames < 1:
            raise ValueError("coalesce frames must be >= 1")
        self.frames = frames
        self.usecs = usecs
        self.gap = gap
        self.pending = 0
        self.first = 0.0  # time of the oldest pending completion
        self.last_fire = float("-inf")
        self.enabled = True
        self.armed = False
        self.arm_id = 0
        self.deadline = 0.0

    def _judge(self, now: float) -> str:
        if not self.enabled or not self.pending:
            return NONE
        due = now if self.pending >= self.frames or self.usecs <= 0 else self.first + self.usecs
        due = max(due, self.last_fire + self.gap)
        if due <= now:
            self.enabled = False
            self.pending = 0
            self.armed = False
            self.last_fire = now
            self.arm_id += 1  # any running countdown is now stale
            return FIRE
        if self.armed and self.deadline <= due:
            return NONE  # the running countdown comes first and judges again
        self.armed = True
        self.arm_id += 1
        self.deadline = due
        return ARM

    def completions(self, n: int, now: float) -> str:
        """``n`` more frames were completed (descriptors written back)."""
        if not self.pending:
            self.first = now
        self.pending += n
        return self._judge(now)

    def expired(self, arm_id: int, now: float) -> str:
        """The countdown armed as ``arm_id`` ran out."""
        if arm_id != self.arm_id or not self.armed:
            return NONE
        self.armed = False
        return self._judge(now)

    def enable(self, now: float) -> str:
        """The driver re-enabled the interrupt (NAPI poll complete)."""
        self.enabled = True
        return self._judge(now)


# e1000's latency classes (``e1000_update_itr``) and their interrupt rates (/s).
LOWEST_LATENCY, LOW_LATENCY, BULK_LATENCY = 0, 1, 2
ITR_RATES = (70_000, 20_000, 4_000)
#: The ITR register counts the interval in units of 256 ns.
ITR_UNIT_NS = 256


def itr_gap_ns(rate: int) -> float:
    """Throttle interval the ITR register holds for ``rate`` interrupts/s."""
    return (1_000_000_000 // (rate * ITR_UNIT_NS)) * ITR_UNIT_NS


def next_latency_class(current: int, packets: int, nbytes: int) -> int:
    """e1000_update_itr: the class after a poll that cleaned ``packets``/``nbytes``."""
    if packets == 0:
        return current
    per_packet = nbytes // packets
    if current == LOWEST_LATENCY:
        if per_packet > 8000:
            return BULK_LATENCY
        if packets < 5 and nbytes > 512:
            return LOW_LATENCY
    elif current == LOW_LATENCY:
        if nbytes > 10000:
            if per_packet > 8000 or packets < 10 or per_packet > 1200:
                return BULK_LATENCY
            if packets > 35:
                return LOWEST_LATENCY
        elif per_packet > 2000:
            return BULK_LATENCY
        elif packets <= 2 and nbytes < 512:
            return LOWEST_LATENCY
    elif nbytes > 25000:  # bulk
        if packets > 35:
            return LOW_LATENCY
    elif nbytes < 6000:
        return LOW_LATENCY
    return current


class AdaptiveItr:
    """e1000's dynamic interrupt throttle rate (``InterruptThrottleRate=1``).

    The NIC counts the frames and bytes it completes per direction; at the end
    of each NAPI session (:meth:`update`) the receive and transmit traffic of
    that interrupt each move their latency class, the busier class sets the
    rate, and the rate falls at once but rises by a quarter step at a time.
    Small or sparse traffic thus gets 70,000 interrupts/s (14 us apart: a quiet
    line interrupts at once anyway), bulk transfers 4,000/s (250 us).
    """

    __slots__ = ("rx_class", "tx_class", "rate", "rx_packets", "rx_bytes", "tx_packets", "tx_bytes")

    def __init__(self):
        self.rx_class = self.tx_class = LOWEST_LATENCY
        self.rate = ITR_RATES[LOW_LATENCY]  # the driver's initial setting
        self.rx_packets = self.rx_bytes = self.tx_packets = self.tx_bytes = 0

    @property
    def gap(self) -> float:
        return itr_gap_ns(self.rate)

    def update(self) -> float:
        """Classify the traffic since the last update; returns the new interval, ns."""
        self.rx_class = next_latency_class(self.rx_class, self.rx_packets, self.rx_bytes)
        self.tx_class = next_latency_class(self.tx_class, self.tx_packets, self.tx_bytes)
        self.rx_packets = self.rx_bytes = self.tx_packets = self.tx_bytes = 0
        rate = ITR_RATES[max(self.rx_class, self.tx_class)]
        if rate > self.rate:
            rate = min(self.rate + (rate >> 2), rate)
        self.rate = rate
        return itr_gap_ns(rate)
