"""Room for the next record: what it may add, checked before it; the tables grown
when one is too small (cold paths), and the record's views taken afresh."""

from __future__ import annotations

import numpy as np
from numba import njit

from cpasim.analysis.kernel.layout import CANDIDATE, FREED, LIVE, NODE, PAST, SEGMENT
from cpasim.analysis.kernel.rings import ring_at
from cpasim.analysis.kernel.state import grown, view
from cpasim.tracing.records import BEGIN, IDENTIFY, LINK


@njit(inline="always")
def room(v, m, op, a):
    """Whether every table has room for what this record may add (else note in
    ``m`` what is missing for :func:`grow`)."""
    ok = (
        m.nfree >= 2
        and m.ncells + 2 <= len(v.edges.cells)
        and m.ncodes + 2 <= len(v.edges.codes)
        and m.ntr + 1 <= len(v.edges.transitions)
        and m.nqe + 1 <= len(v.edges.qops)
        and m.nwarn + 1 <= len(v.queues.warnings)
    )
    need_pend = 8
    m.grow_q = -1
    m.need_cand = 0
    if op != BEGIN and op != LINK and op != IDENTIFY:
        nl = v.queues.rings[a, LIVE].n
        npast = v.queues.rings[a, PAST].n
        nfr = v.queues.rings[a, FREED].n
        need_pend += 2 * nl + npast + nfr
        if v.queues.table[a].edgewise and nl + npast + nfr + 1 > len(v.queues.cand):
            ok = False
            m.need_cand = nl + npast + nfr + 1
        need_past = nl + npast + 1 if v.queues.table[a].extra else 0
        if (
            nl + 1 > v.queues.rings[a, LIVE].cap
            or need_past > v.queues.rings[a, PAST].cap
            or nfr + 1 > v.queues.rings[a, FREED].cap
        ):
            ok = False
            m.grow_q = a
            m.need_live = nl + 1
            m.need_past = need_past
            m.need_freed = nfr + 1
    if need_pend > len(v.nodes.pend):
        ok = False
    m.need_pend = need_pend
    return ok


@njit
def _move_ring(tables, m, rings, q, r, newcap):
    """Give ring ``r`` of queue ``q`` a region of ``newcap`` segments in the store.

    The region goes at the store's free end; when there is no room the store is
    laid out afresh (every ring packed, the garbage of moved rings dropped) at
    twice the size it needs.
    """
    store = tables.segments
    used = m.store_used
    if used + newcap <= len(store):
        for j in range(rings[q, r].n):
            store[used + j] = store[ring_at(rings, q, r, j)]
        rings[q, r].off = used
        rings[q, r].head = 0
        rings[q, r].cap = newcap
        m.store_used = used + newcap
        return
    total = newcap - rings[q, r].cap
    for qq in range(rings.shape[0]):
        for rr in range(3):
            total += rings[qq, rr].cap
    packed = np.zeros(max(2 * total, 1024), SEGMENT)
    off = 0
    for qq in range(rings.shape[0]):
        for rr in range(3):
            for j in range(rings[qq, rr].n):
                packed[off + j] = store[ring_at(rings, qq, rr, j)]
            cap = newcap if qq == q and rr == r else rings[qq, rr].cap
            rings[qq, rr].off = off
            rings[qq, rr].head = 0
            rings[qq, rr].cap = cap
            off += cap
    tables.segments = packed
    m.store_used = off


@njit
def _grow_pool(tables, m):
    """Twice the node pool.  Uninitialised: a node's fields are all set when it
    leaves the pool, and zeroing megabytes of fresh pool costs as much as
    thousands of records.  (The commit marks are sized by ``commit``, which
    runs rarely.)"""
    nfree = m.nfree
    old = len(tables.nodes)
    nodes = np.empty(2 * old, NODE)
    nodes[:old] = tables.nodes
    tables.nodes = nodes
    free = np.empty(2 * old, np.int64)
    free[:nfree] = tables.free[:nfree]
    for k in range(old):
        free[nfree + k] = 2 * old - 1 - k
    tables.free = free
    m.nfree = nfree + old


@njit
def _grow_rings(tables, m, rings, q):
    """Rings of queue ``q`` big enough for what :func:`room` found it needs."""
    for r in range(3):
        need = (m.need_live, m.need_past, m.need_freed)[r]
        cap = rings[q, r].cap
        if cap < need:
            new = max(cap, 4)
            while new < need:
                new *= 4
            _move_ring(tables, m, rings, q, r, new)


@njit
def _grow_tables(tables, m, rings):
    """Grow whatever :func:`room` found too small for the next record."""
    if m.nfree < 2:
        _grow_pool(tables, m)
    if m.need_pend > len(tables.pend):
        tables.pend = np.zeros(2 * m.need_pend, np.int64)
    if m.ncodes + 2 > len(tables.codes):
        tables.codes = grown(tables.codes, m.ncodes + 2)
    if m.ntr + 1 > len(tables.transitions):
        tables.transitions = grown(tables.transitions, m.ntr + 1)
    if m.nqe + 1 > len(tables.qops):
        tables.qops = grown(tables.qops, m.nqe + 1)
    if m.nwarn + 1 > len(tables.warnings):
        tables.warnings = grown(tables.warnings, m.nwarn + 1)
    if m.need_cand > len(tables.cand):
        tables.cand = np.zeros(2 * m.need_cand, CANDIDATE)
    if m.ncells + 2 > len(tables.cells):
        cells = np.zeros(2 * len(tables.cells), tables.cells.dtype)
        cells[: m.ncells] = tables.cells[: m.ncells]
        tables.cells = cells
    if m.grow_q >= 0:
        _grow_rings(tables, m, rings, m.grow_q)


@njit(inline="always")
def grow(keyed, tables, m):
    """Grow what the next record needs and return a fresh view of every table:
    the caller rebinds it, so a view of a replaced array cannot survive a grow.
    (Inlined, so that the compiler sees the views carry no reference count:
    otherwise each use of one in the loop counts.)"""
    _grow_tables(tables, m, keyed.rings)
    return view(keyed, tables)
