"""The CPU's data cache as Waheed 2003 models it: misses as stalls on the
cycle costs.

Built only when ``cpu.cache.size`` is set; otherwise the CPU's costs are its
``cpu.cost`` cycles as given.  Waheed 2003's execution time with a cache is the
ideal one times 1 + MR·MP (one memory access per instruction, MR the share of
accesses that miss, MP the stall per miss in cycles).  Network data has no
temporal locality but perfect spatial locality: a pass over a PDU touches
words of ``cpu.cache.word`` bytes one after the other, so only the first word
of each ``cpu.cache.line``-byte line misses, MR = W/L (a 32-byte line of
16 words: 1/16 = 6.2%, Waheed 2003's figure).  That holds for data that is new
each time (``cpu.cache.working_set`` = 0, a stream of PDUs).  Data used again —
a file served over and over, an application buffer — stays in a cache larger
than it and misses only in the share that does not fit: MR = W/L ×
max(0, 1 − size / working_set), so the cost grows with the working set from
nothing to the streaming W/L.

Where it applies:

* per-byte costs (copies, checksums: every ``cpu.cost.*_per_byte``), the passes
  over data Waheed 2003's MR describes: × (1 + MR·MP);
* per-packet work (``rx_packet``, ``tx_packet``, ``ack``): it reads the packet's
  headers, which the NIC has just written to memory, so each of their lines
  misses once whatever the working set (Waheed 2003's forwarding: "1 or 2" misses
  per packet): + ⌈headers / L⌉ · MP cycles.

Everything is folded into the costs once, when the CPU first prices them, so a
modelled cache costs the simulation nothing per call; but for one cost that depends
on the run:

* ``cpu.cache.ack_footprint``: processing an ACK frees the buffers of the data it
  acknowledges, last touched when the driver took them from the device queue;
  everything sent since — the data in flight past the queue — has streamed through
  the cache in between.  When that exceeds the cache the ACK's work misses in the
  share beyond it, MR = max(0, 1 − size / footprint), the working-set rule above
  with that footprint as the working set, and costs ``ack`` × (1 + MR·MP).  So ACK
  processing grows dearer with the data rate, as Saidi 2009 traced its ladder's
  over-predictions of configuration 4 to ("as the data rate
  increases, the cache footprint of the benchmark increases as well ... The resulting
  cache misses make ACK processing approximately 10x more expensive").
"""

from __future__ import annotations

from cpasim.protocol import IP_HEADER, MAC_HEADER, TCP_HEADER, ceil_div

#: Bytes of headers per-packet work reads: Ethernet, IPv4 and TCP without options.
HEADERS = MAC_HEADER + IP_HEADER + TCP_HEADER
#: Per-packet costs that read a packet's headers.
PER_PACKET = ("rx_packet", "tx_packet", "ack")


def miss_rate(*, word: int, line: int, size: int, working_set: int) -> float:
    """Share of a sequential pass's accesses that miss: W/L for data not in the cache,
    scaled by the share of the working set the cache cannot hold (0 = all new)."""
    streaming = min(1.0, word / line)
    if working_set <= 0:
        return streaming
    return streaming * max(0.0, 1.0 - size / working_set)


def overhead(mr: float, miss_penalty: float) -> float:
    """Execution time with the cache over the ideal one: 1 + MR·MP."""
    return 1.0 + mr * miss_penalty


class Cache:
    """The factor on per-byte costs and the cycles added to per-packet work."""

    __slots__ = ("miss_rate", "per_byte", "per_packet", "size", "miss_penalty", "ack_footprint")

    def __init__(self, params) -> None:
        self.size = params.size
        self.miss_penalty = params.miss_penalty
        self.ack_footprint = params.ack_footprint
        self.miss_rate = miss_rate(
            word=params.word, line=params.line, size=params.size, working_set=params.working_set
        )
        self.per_byte = overhead(self.miss_rate, params.miss_penalty)
        self.per_packet = ceil_div(HEADERS, params.line) * params.miss_penalty

    def price(self, name: str, fixed: float, per_byte: float) -> tuple[float, float]:
        """Cost ``name``'s (fixed, per byte) cycles with the cache's stalls."""
        if fixed and name in PER_PACKET:  # a path that costs nothing reads no header
            fixed += self.per_packet
        return fixed, per_byte * self.per_byte

    def ack_stretch(self, flight: int) -> float:
        """The factor on an ACK's processing with ``flight`` bytes in flight before it
        (``cpu.cache.ack_footprint``; 1 without it)."""
        if not self.ack_footprint or flight <= self.size:
            return 1.0
        return overhead(1.0 - self.size / flight, self.miss_penalty)
