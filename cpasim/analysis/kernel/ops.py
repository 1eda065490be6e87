"""What each queue op means for the path: the dependency it offers, and its effects.

A ``deq``/``peek`` depends on the latest unit it takes; an ``enq``/``reserve``
into a bounded queue on the unit whose slot it reuses; a wait the queue's
content does not explain is a warning (``CriticalPathPass._deq``, ``_enq``,
``_wait`` ... under the sentences of ``docs/annotations.md`` they implement).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from cpasim.analysis.kernel.conns import link
from cpasim.analysis.kernel.edges import pick
from cpasim.analysis.kernel.layout import NONE, W_EMPTY, W_FULL, W_SHORT
from cpasim.analysis.kernel.rings import put, put_freed, resize, shifted, slots, take, trim_freed
from cpasim.analysis.snapshot import NOT_WAITING, ON_EMPTY, ON_FULL, ON_LINK
from cpasim.tracing.records import (
    DECLARE,
    DEQ,
    ENQ,
    LINK,
    PEEK,
    RESERVE,
    RESIZE,
    WAIT_EMPTY,
    WAIT_FULL,
)


@njit(inline="always")
def _warn(queues, m, kind, q, rec, held, n, cap, sm, op):
    """Count a warning of ``kind`` about queue ``q``; keep the first one's details."""
    queues.warned[q, kind] += 1
    if queues.warned[q, kind] > 1:
        return
    k = m.nwarn
    w = queues.warnings[k]
    w.kind = kind
    w.queue = q
    w.rec = rec
    w.held = held
    w.n = n
    w.cap = cap
    w.sm = sm
    w.op = op
    m.nwarn = k + 1


@njit(inline="always")
def _units_taken(queues, m, sm, op, a, n, rec):
    """How many units a ``deq``/``peek`` of ``n`` takes (``n < 0``: all held);
    more than held is an error (``-1``, details in ``m``) unless lenient,
    which warns and takes what is held."""
    held = queues.table[a].tail - queues.table[a].head
    if n < 0:
        return held
    if n > held:
        if not m.lenient:
            m.err_sm = sm
            m.err_op = op
            m.err_q = a
            m.err_n = n
            m.err_held = held
            return -1
        _warn(queues, m, W_SHORT, a, rec, held, n, 0, sm, op)
        return held
    return n


@njit(inline="always")
def _take_dep(v, m, sm, op, a, n, t, wk):
    """``deq``/``peek`` of ``n > 0`` units: take them (``deq``); the candidate
    the taker depends on ``(best, its SM, edge weight, edgewise)`` and the
    connection the units belong to."""
    row = v.queues.table[a]
    p0 = row.head
    cur = v.sms[sm].conn
    edgewise = row.edgewise != 0
    m.ncand = 0
    best, bsm, newest, cur = take(v.nodes, v.queues, m, a, n, op == DEQ, cur, t, edgewise)
    extra = row.extra
    if extra and row.cap < 0:
        # Credit what-if: the unit k positions earlier feeds this one.
        m.ncand = 0
        lo = p0 - extra
        best, bsm = shifted(v.nodes, v.queues, m, a, lo, lo + n, cur, edgewise)
    c = 0.0
    if wk == ON_EMPTY and v.sms[sm].wait_q == a and newest > v.sms[sm].wait_t:
        c = t - newest
        row.comm_sum += c
        row.comm_n += 1
        if c > row.comm_max:
            row.comm_max = c
    w2 = c * row.comm
    if edgewise:
        best, bsm, w2 = pick(v.nodes, v.queues, v.sms, m, a, sm, cur, c)
    return best, bsm, w2, edgewise, cur


@njit(inline="always")
def _slot_dep(v, m, sm, a, n, wk, t):
    """``enq``/``reserve`` of ``n > 0`` units into a bounded queue: the candidate
    the adder depends on (whose slot it reuses): ``(best, its SM, edge weight,
    edgewise)``."""
    waiting = wk == ON_FULL and v.sms[sm].wait_q == a
    since = v.sms[sm].wait_t if waiting else np.inf
    row = v.queues.table[a]
    edgewise = row.edgewise != 0
    m.ncand = 0
    best, bsm, freed_t, has = slots(v.nodes, v.queues, m, a, n, since, edgewise)
    c = t - freed_t if has else 0.0
    w2 = c * row.comm
    if edgewise:
        best, bsm, w2 = pick(v.nodes, v.queues, v.sms, m, a, sm, -1, c)
    return best, bsm, w2, edgewise


@njit(inline="always")
def queue_candidate(v, m, sm, op, a, n, t, wk, rec):
    """What a queue op offers as a dependency: ``(ok, n, best, its SM, edge
    weight, edgewise, connection)``.  A ``deq``/``peek`` takes its units (``n``
    becomes how many; ``ok`` false if more than held, see :func:`_units_taken`)
    and depends on the latest; an ``enq``/``reserve`` into a bounded queue on
    the unit whose slot it reuses.  The connection is the one the taken units
    belong to (the SM's own otherwise).  Also adds the time the SM waited on the
    queue to its total."""
    best = NONE
    bsm = -1
    w2 = 0.0
    edgewise = False
    conn = v.sms[sm].conn
    waited = t - v.sms[sm].wait_t
    if op in (DEQ, PEEK):
        n = _units_taken(v.queues, m, sm, op, a, n, rec)
        if n < 0:
            return False, n, best, bsm, w2, edgewise, conn
        if n:
            best, bsm, w2, edgewise, conn = _take_dep(v, m, sm, op, a, n, t, wk)
        if wk == ON_EMPTY and v.sms[sm].wait_q == a:
            v.queues.table[a].wait_empty_ns += waited
    elif op in (ENQ, RESERVE):
        if v.queues.table[a].cap >= 0 and n > 0:
            best, bsm, w2, edgewise = _slot_dep(v, m, sm, a, n, wk, t)
        if wk == ON_FULL and v.sms[sm].wait_q == a:
            v.queues.table[a].wait_full_ns += waited
    return True, n, best, bsm, w2, edgewise, conn


@njit(inline="always")
def later(v, a, edgewise, best, w2, dep):
    """Whether queue ``a``'s candidate ``best`` (not through a broken queue), over
    an edge of weight ``w2``, ends later than the dependency so far ``(node, its
    cp, edge weight, code)``."""
    if best == NONE or not (edgewise or not v.queues.table[a].broken):
        return False
    return dep[0] == NONE or v.nodes.table[best].cp + w2 > dep[1] + dep[2]


@njit(inline="always")
def _wait(v, m, sm, op, a, n, t, rec):
    """``wait_empty``/``wait_full``: the SM now waits on queue ``a`` (a wait the
    queue's content does not explain is a warning); returns the new wait kind."""
    row = v.queues.table[a]
    held = row.tail - row.head
    if op == WAIT_EMPTY:
        row.waits_empty += 1
        if held >= n:
            _warn(v.queues, m, W_EMPTY, a, rec, held, n, 0, sm, op)
        wk = ON_EMPTY
    else:
        row.waits_full += 1
        cap = row.cap
        if cap < 0 or held + n <= cap:
            _warn(v.queues, m, W_FULL, a, rec, held, n, cap, sm, op)
        wk = ON_FULL
    s = v.sms[sm]
    s.wait_kind = wk
    s.wait_q = a
    s.wait_t = t
    return wk


@njit(inline="always")
def _stop_waiting(sms, sm, a, wk, on):
    """The SM's wait of kind ``on`` on queue ``a`` (if that is its wait) is over."""
    if wk == on and sms[sm].wait_q == a:
        sms[sm].wait_kind = NOT_WAITING
        return NOT_WAITING
    return wk


@njit(inline="always")
def effects(v, m, flags, sm, op, a, n, t, rec, new, wk, linked):
    """What the record does to its queue and to the SM's wait, once its node
    ``new`` is known (state transitions were counted before); false for a
    resize the queue cannot take (details in ``m``).  ``n`` is, for a
    ``deq``/``peek``, the units it took; ``wk`` the SM's wait before the
    record; ``linked`` whether a link to the SM was taken up (which ends its
    wait for one)."""
    if op == ENQ:
        if n > 0:
            put(v.nodes, v.queues, a, n, new, t, v.sms[sm].conn, sm)
            if v.queues.table[a].cap >= 0:
                trim_freed(v.nodes, v.queues, m, a)
        wk = _stop_waiting(v.sms, sm, a, wk, ON_FULL)
    elif op == RESERVE:
        wk = _stop_waiting(v.sms, sm, a, wk, ON_FULL)
    elif op in (DEQ, PEEK):
        if op == DEQ and v.queues.table[a].cap >= 0 and n:
            put_freed(v.nodes, v.queues, a, n, new, t, sm)
        wk = _stop_waiting(v.sms, sm, a, wk, ON_EMPTY)
    elif op in (WAIT_EMPTY, WAIT_FULL):
        wk = _wait(v, m, sm, op, a, n, t, rec)
    elif op == RESIZE:
        if not resize(v.nodes, v.queues, m, a, n, t, sm):
            m.err_q = a
            m.err_n = n
            return False
    elif op == LINK:
        link(v.nodes, v.sms, m, sm, a, new, t)
        return True
    elif op == DECLARE:
        v.queues.table[a].cap = n
        v.queues.table[a].flow = 1 if flags & 1 else 0
    if linked and wk == ON_LINK:
        v.sms[sm].wait_kind = NOT_WAITING
    return True
