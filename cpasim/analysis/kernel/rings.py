"""The units each queue holds, and who produced them (:class:`cpasim.analysis.queues.QueueState`
on handles).

A queue keeps its runs of units as segments (:data:`~.layout.SEGMENT`) in
three ring buffers: the units it holds (``LIVE``), the units taken that the
credit what-if may still match (``PAST``), and the slots freed that a later
``enq`` into a bounded queue reuses (``FREED``).  The rings are regions of one
segment store (:func:`cpasim.analysis.kernel.growth.move_ring` gives a ring a
bigger one).  Each operation here is its namesake method of ``QueueState``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from cpasim.analysis.kernel.layout import FREED, LIVE, NONE, PAST
from cpasim.analysis.kernel.nodes import drop, hold


@njit(inline="always")
def ring_at(rings, q, r, j):
    """Store index of the ``j``-th segment of ring ``r`` of queue ``q``."""
    ring = rings[q, r]
    idx = ring.head + j
    if idx >= ring.cap:
        idx -= ring.cap
    return ring.off + idx


@njit(inline="always")
def _push(queues, q, r, first, end, node, conn, sm, t):
    n = queues.rings[q, r].n
    seg = queues.segments[ring_at(queues.rings, q, r, n)]
    seg.first = first
    seg.end = end
    seg.node = node
    seg.conn = conn
    seg.sm = sm
    seg.t = t
    queues.rings[q, r].n = n + 1


@njit(inline="always")
def _popleft(rings, q, r):
    ring = rings[q, r]
    h = ring.head + 1
    if h >= ring.cap:
        h = 0
    ring.head = h
    ring.n -= 1


@njit(inline="always")
def _occupancy(row, t):
    """Add the units held since the last change to the queue's occupancy area."""
    if row.has_occ == 0:
        row.has_occ = 1
        row.occ_t0 = t
    else:
        row.occ_area += (row.tail - row.head) * (t - row.occ_t)
    row.occ_t = t


@njit(inline="always")
def put(nodes, queues, q, n, node, t, conn, sm):
    """``n`` units from ``node`` (one more holder) at the tail of queue ``q``."""
    row = queues.table[q]
    tail = row.tail
    _occupancy(row, t)
    hold(nodes, node)
    flow_conn = conn if row.flow else -1
    _push(queues, q, LIVE, tail, tail + n, node, flow_conn, sm, t)
    tail += n
    row.tail = tail
    held = tail - row.head
    if held > row.occ_max:
        row.occ_max = held
    row.arrivals += n
    if row.has_enq == 0:
        row.has_enq = 1
        row.enq_t0 = t
    row.enq_t1 = t


@njit(inline="always")
def put_freed(nodes, queues, q, n, node, t, sm):
    """The ``n`` slots a ``deq`` just freed remember who freed them (``node``, one
    more holder)."""
    head = queues.table[q].head
    hold(nodes, node)
    _push(queues, q, FREED, head - n, head, node, -1, sm, t)


@njit(inline="always")
def _forget(nodes, queues, m, q, r, floor):
    """Drop the oldest segments of ring ``r`` that end at or before position ``floor``."""
    while queues.rings[q, r].n > 0:
        seg = queues.segments[ring_at(queues.rings, q, r, 0)]
        if seg.end > floor:
            break
        drop(nodes, m, seg.node)
        _popleft(queues.rings, q, r)


@njit(inline="always")
def trim_freed(nodes, queues, m, q):
    """Forget the slots no future ``enq`` can depend on (after the tail moved)."""
    row = queues.table[q]
    _forget(nodes, queues, m, q, FREED, row.tail - row.cap - row.extra)


@njit(inline="always")
def resize(nodes, queues, m, q, n, t, sm):
    """QueueState.resize; False if ``n`` is negative."""
    if n < 0:
        return False
    row = queues.table[q]
    _occupancy(row, t)
    head = row.head
    tail = row.tail
    held = tail - head
    if n > held:
        _push(queues, q, LIVE, tail, tail + n - held, NONE, -1, sm, t)
        row.tail = tail + n - held
        if n > row.occ_max:
            row.occ_max = n
        return True
    cut = held - n
    live = queues.rings[q, LIVE]
    while cut:
        seg = queues.segments[ring_at(queues.rings, q, LIVE, live.n - 1)]
        if seg.end - seg.first > cut:
            seg.end -= cut
            cut = 0
        else:
            cut -= seg.end - seg.first
            drop(nodes, m, seg.node)
            live.n -= 1
    row.tail = head + n
    return True


@njit(inline="always")
def candidate(queues, m, node, sm, conn):
    """One more edge for ``edges.pick``."""
    k = m.ncand
    c = queues.cand[k]
    c.node = node
    c.sm = sm
    c.conn = conn
    m.ncand = k + 1


@njit(inline="always")
def _offer(nodes, queues, m, seg, cur, collect, best, best_cp, best_sm):
    """Segment ``seg`` offered to a consumer working for connection ``cur``: one
    more candidate edge (with ``collect``), and the best producer so far,
    ``(node, its cp, its SM)``, if its units join ``cur`` and its path is longer."""
    node = seg.node
    if collect and node >= 0:
        candidate(queues, m, node, seg.sm, seg.conn)
    if node >= 0 and (seg.conn < 0 or seg.conn == cur):
        c = nodes.table[node].cp
        if c > best_cp:
            return node, c, seg.sm
    return best, best_cp, best_sm


@njit(inline="always")
def shifted(nodes, queues, m, q, lo, hi, cur, collect):
    """QueueState.shifted: best producer among positions ``[lo, hi)`` of the history."""
    best = NONE
    best_cp = -np.inf
    best_sm = -1
    if hi <= 0:
        return best, best_sm
    for r in (PAST, LIVE):
        for j in range(queues.rings[q, r].n):
            seg = queues.segments[ring_at(queues.rings, q, r, j)]
            if seg.end <= lo:
                continue
            if seg.first >= hi:
                break
            best, best_cp, best_sm = _offer(
                nodes, queues, m, seg, cur, collect, best, best_cp, best_sm
            )
    return best, best_sm


@njit(inline="always")
def _keep_past(nodes, queues, q, pos, first, seg):
    """The credit what-if: what a take consumed stays matchable (the part of
    ``seg`` from ``first`` to ``pos``)."""
    hold(nodes, seg.node)
    _push(queues, q, PAST, first, pos, seg.node, seg.conn, seg.sm, seg.t)


@njit(inline="always")
def take(nodes, queues, m, q, count, remove, cur, t, collect):
    """QueueState.take: ``(best node, its SM, newest arrival, connection)``; with
    ``collect``, each run's producer goes to the candidates too."""
    row = queues.table[q]
    if remove:
        _occupancy(row, t)
    best = NONE
    best_cp = -np.inf
    best_sm = -1
    newest = -np.inf
    pos = row.head
    left = count
    j = 0
    switched = False
    credit = row.extra != 0 and row.cap < 0
    while left:
        seg = queues.segments[ring_at(queues.rings, q, LIVE, 0 if remove else j)]
        first = seg.first
        end = seg.end
        node = seg.node
        cu = seg.conn
        k = end - pos
        if k > left:
            k = left
        if cu >= 0 and not switched:
            cur = cu  # the first unit's connection flows to the consumer
            switched = True
        best, best_cp, best_sm = _offer(nodes, queues, m, seg, cur, collect, best, best_cp, best_sm)
        newest = seg.t
        pos += k
        left -= k
        if remove:
            if pos >= end:
                _popleft(queues.rings, q, LIVE)
                if credit:
                    # Its references move to the past ring.
                    _push(queues, q, PAST, first, end, node, cu, seg.sm, seg.t)
                else:
                    drop(nodes, m, node)
            else:
                if credit:
                    _keep_past(nodes, queues, q, pos, first, seg)
                seg.first = pos
        elif pos >= end:
            j += 1
    if remove:
        if credit:
            # Keep what this take's own shifted match may still look at.
            _forget(nodes, queues, m, q, PAST, row.head - row.extra)
        row.head = pos
    return best, best_sm, newest, cur


@njit(inline="always")
def _freed_at(queues, q, pos, f0, last):
    """Index in the freed ring of the segment at or before position ``pos``."""
    i = pos - f0
    if i > last:
        i = last
    while queues.segments[ring_at(queues.rings, q, FREED, i)].first > pos:
        i -= 1
    return i


@njit(inline="always")
def _freed_best(nodes, queues, m, q, i, last, hi, collect):
    """The best producer among the freed slots from index ``i`` up to position
    ``hi``: ``(node, its SM)``."""
    best = NONE
    best_sm = -1
    best_cp = -np.inf
    for k in range(i, last + 1):
        seg = queues.segments[ring_at(queues.rings, q, FREED, k)]
        if seg.first >= hi:
            break
        node = seg.node
        if collect and node >= 0:
            candidate(queues, m, node, seg.sm, -1)
        if node >= 0 and nodes.table[node].cp > best_cp:
            best_cp = nodes.table[node].cp
            best = node
            best_sm = seg.sm
    return best, best_sm


@njit(inline="always")
def slots(nodes, queues, m, q, n, since, collect):
    """QueueState.slots: ``(best node, its SM, t_free, has t_free)``."""
    best = NONE
    best_sm = -1
    nfr = queues.rings[q, FREED].n
    if nfr == 0:
        return best, best_sm, 0.0, False
    f0 = queues.segments[ring_at(queues.rings, q, FREED, 0)].first
    last = nfr - 1
    row = queues.table[q]
    tail = row.tail
    qcap = row.cap
    lo = tail - qcap - row.extra
    hi = lo + n
    if hi > 0:
        pos = lo if lo > f0 else f0
        i = _freed_at(queues, q, pos, f0, last)
        if pos < queues.segments[ring_at(queues.rings, q, FREED, i)].end:
            best, best_sm = _freed_best(nodes, queues, m, q, i, last, hi, collect)
    freed_t = 0.0
    has = False
    pos = tail + n - 1 - qcap
    if pos >= f0:
        seg = queues.segments[ring_at(queues.rings, q, FREED, _freed_at(queues, q, pos, f0, last))]
        if pos < seg.end:
            freed_t = seg.t
            has = freed_t > since
    return best, best_sm, freed_t, has
