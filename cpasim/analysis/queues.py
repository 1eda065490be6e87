"""The analyzer's model of one queue instance: FIFO units that remember their producer.

Units are kept as run-length segments ``(first, end, node, t, conn, sm)``:
positions ``[first, end)`` in the queue's enqueue order, all enqueued by path
node ``node`` of SM ``sm`` at time ``t`` for connection ``conn`` (``-1`` =
none).  ``head`` is the position of the oldest unit held, ``tail`` the position
the next unit gets, so the queue holds ``tail - head`` units.

Two histories exist only when a what-if needs them:

- ``freed`` (queues with a declared capacity): which node dequeued each
  position and when, so an ``enq`` can depend on the ``deq`` that freed its
  slot (position − capacity);
- ``past`` (credit queues grown by ``capacity(+k)``): the last ``k`` units
  already consumed, so the m-th unit taken can be matched with the unit
  enqueued ``k`` positions earlier.
"""

from __future__ import annotations

from collections import deque

from cpasim.analysis.pathlog import CP

_NEG = float("-inf")


class QueueState:
    __slots__ = (
        "qid",
        "cap",
        "flow",
        "live",
        "past",
        "freed",
        "head",
        "tail",
        "broken",
        "comm",
        "extra",
        "rule",
        "edgewise",
        # statistics
        "occ_area",
        "occ_t",
        "occ_t0",
        "occ_max",
        "arrivals",
        "enq_t0",
        "enq_t1",
        "wait_empty_ns",
        "wait_full_ns",
        "waits_empty",
        "waits_full",
        "comm_sum",
        "comm_n",
        "comm_max",
    )

    def __init__(self, qid: int, broken: bool, comm: float, extra: int, rule=None, edgewise=False):
        self.qid = qid
        # What the what-if does to edges through the queue: ``broken`` and
        # ``comm`` for all of them, unless ``edgewise``: then its
        # :class:`~cpasim.analysis.transforms.QueueRule` with each edge's SMs decides.
        self.rule = rule
        self.edgewise = edgewise
        self.cap = -1
        self.flow = True
        self.live: deque = deque()
        self.past: deque = deque()
        self.freed: deque = deque()
        self.head = 0
        self.tail = 0
        self.broken = broken
        self.comm = comm
        self.extra = extra
        self.occ_area = 0.0
        self.occ_t = None
        self.occ_t0 = None
        self.occ_max = 0
        self.arrivals = 0
        self.enq_t0 = None
        self.enq_t1 = None
        self.wait_empty_ns = 0.0
        self.wait_full_ns = 0.0
        self.waits_empty = 0
        self.waits_full = 0
        self.comm_sum = 0.0
        self.comm_n = 0
        self.comm_max = 0.0

    def occupancy(self, t: float) -> None:
        """Integrate occupancy up to ``t`` (call before every change)."""
        if self.occ_t is None:
            self.occ_t0 = t
        else:
            self.occ_area += (self.tail - self.head) * (t - self.occ_t)
        self.occ_t = t

    # -- adding ----------------------------------------------------------------

    def put(self, n: int, node, t: float, conn: int, sm: int) -> None:
        tail = self.tail
        held = tail - self.head
        # occupancy() and _trim_freed() inlined: this runs for every enqueue.
        if self.occ_t is None:
            self.occ_t0 = t
        else:
            self.occ_area += held * (t - self.occ_t)
        self.occ_t = t
        self.live.append((tail, tail + n, node, t, conn if self.flow else -1, sm))
        self.tail = tail = tail + n
        held += n
        if held > self.occ_max:
            self.occ_max = held
        self.arrivals += n
        if self.enq_t0 is None:
            self.enq_t0 = t
        self.enq_t1 = t
        if self.cap >= 0:
            self.trim_freed()

    def trim_freed(self) -> None:
        """Forget the slots no future ``enq`` can depend on (after the tail moved)."""
        floor = self.tail - self.cap - self.extra
        freed = self.freed
        while freed and freed[0][1] <= floor:
            freed.popleft()

    def resize(self, n: int, t: float, sm: int) -> None:
        """Hold exactly ``n`` units: anonymous ones appended, or the newest dropped."""
        self.occupancy(t)
        held = self.tail - self.head
        if n > held:
            self.live.append((self.tail, self.tail + n - held, None, t, -1, sm))
            self.tail += n - held
            if n > self.occ_max:
                self.occ_max = n
        else:
            drop = held - n
            live = self.live
            while drop:
                first, end, node, tu, cu, su = live.pop()
                if end - first > drop:
                    live.append((first, end - drop, node, tu, cu, su))
                    drop = 0
                else:
                    drop -= end - first
            self.tail = self.head + n

    # -- taking ----------------------------------------------------------------

    def take(self, m: int, remove: bool, cur: int, t: float, units: list | None = None):
        """Take (or peek at) the ``m`` oldest units.

        Returns ``(best node, its SM, arrival time of the newest unit, new
        connection)``: the producer with the longest path among the units
        whose connection joins ``cur`` (after the consumer switched to the
        first unit's connection), and that connection (``cur`` if none flows).
        ``units``, if given, gets ``(node, sm, conn)`` of each run taken that
        has a producer node.
        """
        if remove:
            if self.occ_t is None:
                self.occ_t0 = t
            else:
                self.occ_area += (self.tail - self.head) * (t - self.occ_t)
            self.occ_t = t
        best = None
        best_cp = _NEG
        best_sm = -1
        newest = _NEG
        live = self.live
        pos = self.head
        left = m
        i = 0
        switched = False
        while left:
            seg = live[0] if remove else live[i]
            first, end, node, tu, cu, su = seg
            k = end - pos
            if k > left:
                k = left
            if cu >= 0 and not switched:
                cur = cu  # the first unit's connection flows to the consumer
                switched = True
            if units is not None and node is not None:
                units.append((node, su, cu))
            if node is not None and (cu < 0 or cu == cur):
                c = node[CP]
                if c > best_cp:
                    best_cp = c
                    best = node
                    best_sm = su
            newest = tu
            pos += k
            left -= k
            if remove:
                if pos >= end:
                    live.popleft()
                    if self.extra and self.cap < 0:
                        self.past.append(seg)
                else:
                    if self.extra and self.cap < 0:
                        self.past.append((first, pos, node, tu, cu, su))
                    live[0] = (pos, end, node, tu, cu, su)
            else:
                i += 1 if pos >= end else 0
        if remove:
            if self.extra and self.cap < 0:
                # Keep what this take's own shifted match may still look at.
                floor = self.head - self.extra
                past = self.past
                while past and past[0][1] <= floor:
                    past.popleft()
            self.head = pos
        return best, best_sm, newest, cur

    def shifted(self, lo: int, hi: int, cur: int, units: list | None = None):
        """Best producer among positions ``[lo, hi)`` of the history (credit what-if);
        ``units`` as for :meth:`take`."""
        best = None
        best_cp = _NEG
        best_sm = -1
        if hi <= 0:
            return best, best_sm
        for segs in (self.past, self.live):
            for first, end, node, _tu, cu, su in segs:
                if end <= lo:
                    continue
                if first >= hi:
                    break
                if units is not None and node is not None:
                    units.append((node, su, cu))
                if node is not None and (cu < 0 or cu == cur):
                    c = node[CP]
                    if c > best_cp:
                        best_cp = c
                        best = node
                        best_sm = su
        return best, best_sm

    # -- slots of a bounded buffer --------------------------------------------

    def free(self, first: int, end: int, node, t: float, sm: int) -> None:
        self.freed.append((first, end, node, t, sm))

    def slots(self, n: int, since: float, units: list | None = None):
        """Dependencies of enqueueing ``n`` units at ``tail`` (``units`` as for
        :meth:`take`, of the slots' freeing nodes).

        Returns ``(best node, its SM, t_free)``: the deq node with the longest
        path among those that freed the slots at the (possibly grown)
        capacity, and the time the last slot at the recorded capacity was
        freed, or None if that was at or before ``since`` (no latency then).
        """
        freed = self.freed
        best = None
        best_sm = -1
        if not freed:
            return best, best_sm, None
        # Segments are contiguous and hold at least one unit: the segment holding
        # position p is at index p - first position or before it.
        f0 = freed[0][0]
        last = len(freed) - 1
        lo = self.tail - self.cap - self.extra
        hi = lo + n
        if hi > 0:
            pos = lo if lo > f0 else f0
            i = pos - f0
            if i > last:
                i = last
            while freed[i][0] > pos:
                i -= 1
            if pos < freed[i][1]:
                best_cp = _NEG
                for k in range(i, last + 1):
                    first, _end, node, _tu, su = freed[k]
                    if first >= hi:
                        break
                    if units is not None and node is not None:
                        units.append((node, su, -1))
                    if node is not None and node[CP] > best_cp:
                        best_cp = node[CP]
                        best = node
                        best_sm = su
        freed_t = None
        pos = self.tail + n - 1 - self.cap
        if pos >= f0:
            j = pos - f0
            if j > last:
                j = last
            while freed[j][0] > pos:
                j -= 1
            if pos < freed[j][1]:
                freed_t = freed[j][3]
                if freed_t <= since:
                    freed_t = None
        return best, best_sm, freed_t

    def handles(self):
        for segs in (self.live, self.past, self.freed):
            for seg in segs:
                yield seg[2]
