"""The per-record loop: :func:`run`, one named step per phase of a record.

Each record: make room, what follows from the records alone (its intra edge,
the transition or queue op it counts), its dependency, its node, its effects,
then the references it gave up.  The steps are inlined by numba.  The typed
dicts (reference counted) are only handed to a step on the branch that needs
them: an inlined step taking one costs two atomic operations per record even
where it does not use it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from cpasim.analysis.kernel.commit import commit
from cpasim.analysis.kernel.conns import end, linked_dep, switch
from cpasim.analysis.kernel.cores import lent_since_last, run_on
from cpasim.analysis.kernel.edges import (
    add_code,
    begin,
    inter_code,
    intra,
    new_cell,
    queue_op_cached,
    queue_op_index,
    transition_cached,
    transition_index,
)
from cpasim.analysis.kernel.growth import grow, room
from cpasim.analysis.kernel.layout import ERR_RESIZE, ERR_SHORT, K_START, NONE, OK
from cpasim.analysis.kernel.nodes import drop, free_chain, hold, hold_handle, new_node
from cpasim.analysis.kernel.ops import effects, later, queue_candidate
from cpasim.analysis.kernel.state import as_view, view
from cpasim.analysis.kernel.summaries import new_summary, release_summary
from cpasim.tracing.records import BEGIN, IDENTIFY, LINK, RUN, WAIT_EMPTY


@njit
def _commit(keyed, state, m, rec):
    """Commit, and schedule the next one.  A long unsettled stretch (an idle SM
    pins its branch point) is walked again by every commit: space them out to
    match."""
    unsettled = commit(keyed, state, m, rec)
    every = m.every
    m.next_commit = rec + (every if every > 4 * unsettled else 4 * unsettled)


#: No dependency: ``(node, its cp, edge weight, edge code)``.
NO_DEP = (NONE, 0.0, 0.0, -1)


@njit(inline="always")
def _intra_edge(v, m, sm, cell, t, rec):
    """The record's intra edge (``CriticalPathPass._prepare``): ``(the SM's time
    in its state since its last record (NaN at its first), that time weighted,
    the core time lent meanwhile (weighted), the edge's code)``."""
    lent = lent_since_last(v.sms, sm, t) * v.edges.cells[cell].factor
    dt, w, ic = intra(v.sms, v.edges, m, sm, cell, t, rec)
    return dt, w, lent, ic


@njit(inline="always")
def _node(nodes, cells, m, node, cell, wk, intra_edge, dependency):
    """The record's path node: the later of the intra edge (see :func:`_intra_edge`)
    from the SM's ``node`` and the ``dependency`` (see :data:`NO_DEP`), the
    loser's code and margin kept; ``NONE`` if it has neither.  Adds the time to
    the (SM, state) ``cell``'s active or waiting total (``wk``: the SM's wait)."""
    dt, w, lent, ic = intra_edge
    dep, dcp, dw, dcode = dependency
    if dt == dt:  # not the SM's first record
        if wk:
            w_in = 0.0
            wd = dt
            lw = 0.0
            cells[cell].waiting += dt
        else:
            w_in = w
            wd = 0.0
            lw = lent
            cells[cell].active += dt
        if node != NONE:
            icp = nodes.table[node].cp + w_in
            depth = nodes.table[node].depth + 1
            if dep == NONE:
                return new_node(nodes, m, node, depth, ic, w_in, wd, icp, -1, 0.0, lw)
            bcp = dcp + dw
            if bcp > icp:
                depth = nodes.table[dep].depth + 1
                return new_node(nodes, m, dep, depth, dcode, dw, 0.0, bcp, ic, bcp - icp, 0.0)
            return new_node(nodes, m, node, depth, ic, w_in, wd, icp, dcode, icp - bcp, lw)
    if dep != NONE:
        depth = nodes.table[dep].depth + 1
        return new_node(nodes, m, dep, depth, dcode, dw, 0.0, dcp + dw, -1, 0.0, 0.0)
    return NONE


@njit
def _start_path(v, sums, m, sm, t):
    """The first node of a path: cp = 0 at a start SM's first record (a new
    summary as its root)."""
    v.conns[v.sms[sm].conn + 1].started = 1
    s = new_summary(sums, m, t)
    code = v.sms[sm].start_code
    if code < 0:
        code = add_code(v.edges, m, K_START, sm, 0, 0)
        v.sms[sm].start_code = code
    new = new_node(v.nodes, m, -2 - s, 0, code, 0.0, 0.0, 0.0, -1, 0.0, 0.0)
    hold_handle(v.nodes, sums, -2 - s)
    return new


@njit(inline="always")
def _starts(v, sm, node, new):
    """Whether this record starts its connection's path."""
    s = v.sms[sm]
    return new == NONE and node == NONE and s.is_start and not v.conns[s.conn + 1].started


@njit(cache=True)
def run(chunk, base, keyed, state, meta):
    """The records of ``chunk`` (a :data:`~.layout.Chunk`), the first of them number
    ``base + 1``.  Returns ``(status, i)``: ``OK``, or an error at record ``i``
    with details in ``meta``."""
    m = as_view(meta)[0]
    lookups = state.lookups
    v = view(keyed, state.tables)
    nrec = len(chunk.t)
    for i in range(nrec):
        rec = base + i + 1
        if rec >= m.next_commit:
            _commit(keyed, state, m, rec)
        t, op, n = chunk.t[i], chunk.op[i], chunk.n[i]
        sm, a = np.int64(chunk.sm[i]), np.int64(chunk.a[i])
        if op == RUN:
            run_on(v.sms, sm, a, t)
            continue
        if not room(v, m, op, a):
            v = grow(keyed, state.tables, m)
        # ---- what follows from the records alone (CriticalPathPass._prepare) ----
        cell = v.sms[sm].cell
        if cell < 0:
            cell = new_cell(v.edges, m, lookups.cells, lookups.factors, sm, v.sms[sm].state)
            v.sms[sm].cell = cell
        intra_edge = _intra_edge(v, m, sm, cell, t, rec)
        if op == BEGIN:
            k, slot = transition_cached(v.edges, v.sms, sm, a)
            if k < 0:
                frm, si = v.sms[sm].came_from, v.sms[sm].state
                k = transition_index(v.edges, m, lookups, sm, frm, si, a + 1, slot)
            begin(v.sms, v.edges, sm, a, t, k)
        elif op < WAIT_EMPTY:
            k, key, slot = queue_op_cached(v.edges, sm, a, op)
            if k < 0:
                k = queue_op_index(v.edges, m, lookups.qops, key, slot)
            v.edges.qops[k].count += 1
        # ---- dependencies (and connection switches) ----
        wk = v.sms[sm].wait_kind
        dep = NO_DEP
        linked = v.sms[sm].linked != 0
        if linked:
            dep = linked_dep(v, m, lookups.inter, lookups.layers, lookups.worked, sm)
        ok, n, best, bsm, w2, edgewise, conn = queue_candidate(v, m, sm, op, a, n, t, wk, rec)
        if not ok:
            return ERR_SHORT, i
        if conn != v.sms[sm].conn:
            switch(v.sms, v.conns, lookups.layers, lookups.worked, sm, conn)
        elif op == IDENTIFY:
            switch(v.sms, v.conns, lookups.layers, lookups.worked, sm, a)
        if later(v, a, edgewise, best, w2, dep):
            code = inter_code(v.edges, m, lookups.inter, bsm, sm, a + 1)
            dep = (best, v.nodes.table[best].cp, w2, code)
        # ---- the intra-SM edge and the node (the SM holds one reference) ----
        node = v.sms[sm].node
        new = _node(v.nodes, v.edges.cells, m, node, cell, wk, intra_edge, dep)
        if _starts(v, sm, node, new):
            new = _start_path(v, state.sums, m, sm, t)
        hold(v.nodes, new)
        drop(v.nodes, m, node)
        v.sms[sm].node = new
        # ---- effects of the record ----
        if not effects(v, m, chunk.flags[i], sm, op, a, n, t, rec, new, wk, linked):
            return ERR_RESIZE, i
        if op == LINK:
            key = (sm << 21) | a
            lookups.links[key] = lookups.links[key] + 1 if key in lookups.links else 1
        if v.sms[sm].is_end:
            end(v.nodes, v.sms, v.conns, m, sm, new, t)
        # ---- references this record gave up ----
        for k in range(m.npend):
            x = free_chain(v.nodes, m, v.nodes.pend[k])
            if x <= -2:
                release_summary(state.sums, m, -2 - x)
        m.npend = 0
    return OK, nrec
