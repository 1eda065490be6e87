"""Edges: their codes, the (SM, state) cells they weigh, and the profile's counts.

Edge codes are dense ids into a code table (:data:`~.layout.CODE`), so a
summary's per-edge totals are arrays indexed by code id; each is looked up in
a small cache in front of a typed dict (``*_cached`` then, on a miss, the
dict).  The profile counts each state transition and who adds to and takes
from each queue (:meth:`cpasim.analysis.criticalpath.CriticalPathPass._prepare`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from cpasim.analysis.kernel.layout import CACHE, K_INTER, K_INTRA, NONE
from cpasim.tracing.records import DEQ, PEEK


@njit(inline="always")
def add_code(edges, m, kind, x, y, z):
    c = m.ncodes
    code = edges.codes[c]
    code.kind = kind
    code.x = x
    code.y = y
    code.z = z
    m.ncodes = c + 1
    return c


@njit
def _inter_code_miss(edges, m, inter, psm, csm, qi, key, slot):
    if key in inter:
        c = inter[key]
    else:
        c = add_code(edges, m, K_INTER, psm, csm, qi)
        inter[key] = c
    edges.inter_cache[slot].key = key
    edges.inter_cache[slot].value = c
    return c


@njit(inline="always")
def inter_code(edges, m, inter, psm, csm, qi):
    """Code id of the edge ``psm -> csm`` through queue index ``qi`` (0 = link)."""
    key = (psm << 42) | (csm << 21) | qi
    slot = ((psm * 1000003 + csm) * 1000003 + qi) & (CACHE - 1)
    if edges.inter_cache[slot].key == key:
        return edges.inter_cache[slot].value
    return _inter_code_miss(edges, m, inter, psm, csm, qi, key, slot)


@njit
def new_cell(edges, m, cells, factors, sm, si):
    """The cell of SM ``sm``'s state index ``si`` (made on first use; its factor
    from ``factors``, which the caller filled for every state a chunk enters)."""
    key = (sm << 21) | si
    if key in cells:
        return cells[key]
    c = m.ncells
    m.ncells = c + 1
    cell = edges.cells[c]
    cell.code = -1
    cell.factor = factors.get(key, 1.0)
    cell.active = 0.0
    cell.waiting = 0.0
    cells[key] = c
    return c


@njit(inline="always")
def intra(sms, edges, m, sm, cell, t, rec):
    """The SM's time in its state since its last record (NaN at its first), that
    time weighted by the (SM, state) ``cell``'s factor, and the intra edge's code
    (``CriticalPathPass._prepare``); notes ``t`` as the SM's last record."""
    s = sms[sm]
    dt = t - s.last_t if s.has_last else np.nan
    w = dt * edges.cells[cell].factor
    ic = edges.cells[cell].code
    if ic < 0:
        ic = add_code(edges, m, K_INTRA, sm, s.state, 0)
        edges.cells[cell].code = ic
    s.last_t = t
    s.has_last = 1
    s.last_rec = rec
    return dt, w, ic


@njit(inline="always")
def transition_cached(edges, sms, sm, a):
    """The index of the transition a ``begin`` of state ``a + 1`` makes, if cached
    (else -1), and its cache slot."""
    frm = sms[sm].came_from
    si = sms[sm].state
    to = a + 1
    slot = (((sm * 1000003 + frm) * 1000003 + si) * 1000003 + to) & (CACHE - 1)
    cached = edges.tr_cache[slot]
    if cached.sm_from == (sm << 32) | frm and cached.state_to == (si << 32) | to:
        return cached.index, slot
    return -1, slot


@njit
def transition_index(edges, m, lookups, sm, frm, si, to, slot):
    """The index of transition ``(sm, frm, si, to)`` (made on first use), cached."""
    tkey = (sm, frm, si, to)
    if tkey in lookups.transitions:
        k = lookups.transitions[tkey]
    else:
        k = m.ntr
        m.ntr = k + 1
        tr = edges.transitions[k]
        tr.sm = sm
        tr.came_from = frm
        tr.state = si
        tr.to = to
        tr.visits = 0
        tr.cell = new_cell(edges, m, lookups.cells, lookups.factors, sm, to)
        tr.time = 0.0
        lookups.transitions[tkey] = k
    cached = edges.tr_cache[slot]
    cached.sm_from = (sm << 32) | frm
    cached.state_to = (si << 32) | to
    cached.index = k
    return k


@njit(inline="always")
def begin(sms, edges, sm, a, t, k):
    """``begin``: count transition ``k`` and the time spent in the state left,
    and enter state ``a + 1``."""
    s = sms[sm]
    spent = t - s.enter_t if s.has_enter else 0.0
    tr = edges.transitions[k]
    tr.visits += 1
    tr.time += spent
    s.came_from = s.state
    s.state = a + 1
    s.cell = tr.cell
    s.enter_t = t
    s.has_enter = 1


@njit(inline="always")
def queue_op_cached(edges, sm, a, op):
    """Who adds to (enq, reserve, resize) and takes from (deq, peek) each queue:
    the index of this (SM, queue, direction) if cached (else -1), its key and
    cache slot."""
    key = (sm << 22) | (a << 1) | (1 if op in (DEQ, PEEK) else 0)
    # (Not from ``key``: its low bits, which the slot keeps, leave out the SM.)
    slot = ((sm * 1000003 + a) * 1000003 + op) & (CACHE - 1)
    if edges.qop_cache[slot].key == key:
        return edges.qop_cache[slot].value, key, slot
    return -1, key, slot


@njit
def queue_op_index(edges, m, qops, key, slot):
    """The index of queue op ``key`` (made on first use), cached."""
    if key in qops:
        k = qops[key]
    else:
        k = m.nqe
        m.nqe = k + 1
        edges.qops[k].key = key
        edges.qops[k].count = 0
        qops[key] = k
    edges.qop_cache[slot].key = key
    edges.qop_cache[slot].value = k
    return k


@njit
def pick(nodes, queues, sms, m, q, sm, cur, c):
    """CriticalPathPass._edge_pick: ``(node, its SM, weight)`` among the candidate
    edges from queue ``q`` (edgewise) to SM ``sm`` working for ``cur``."""
    best = NONE
    bsm = -1
    bw = 0.0
    bv = -np.inf
    row = queues.table[q]
    for k in range(m.ncand):
        cand = queues.cand[k]
        node = cand.node
        su = cand.sm
        cu = cand.conn
        if cu >= 0 and cu != cur:
            continue
        if row.breaks & sms[su].p_breaks & sms[sm].c_breaks:
            continue
        comms = row.comms & sms[su].p_comms & sms[sm].c_comms
        f = 1.0
        if comms:
            j = 0
            while not (comms >> j) & 1:
                j += 1
            f = queues.factors[j]
        w = c * f
        cp = nodes.table[node].cp
        if cp + w > bv:
            best = node
            bsm = su
            bw = w
            bv = cp + w
    return best, bsm, bw
