"""What :class:`cpasim.analysis.compiled.CompiledPass` reads out of the kernel
(compiled, so that Python need not compile a typed container's methods)."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from cpasim.analysis.kernel.layout import FREED, LIVE, PAST
from cpasim.analysis.kernel.rings import ring_at
from cpasim.analysis.kernel.state import pushed
from cpasim.analysis.kernel.summaries import copy_summary, fold, free_summary

#: The tables a finished pass is read from.
Tables = namedtuple(
    "Tables", ["nodes", "codes", "transitions", "qops", "warnings", "segments", "cells"]
)
#: A summary: its row (a one-row array), edge totals, first visits, listing.
Summary = namedtuple("Summary", ["row", "edges", "first", "listing"])


@njit(cache=True)
def tables(state):
    t = state.tables
    return Tables(t.nodes, t.codes, t.transitions, t.qops, t.warnings, t.segments, t.cells)


@njit(cache=True)
def finish(keyed, state, meta, node):
    """A new summary of the path ending at ``node``'s parent: ``(handle, its
    content)`` (free it with :func:`free_finished`)."""
    nodes, sums, scratch = state.tables.nodes, state.sums, state.scratch
    m = meta[0]
    nchain = 0
    x = nodes[node].parent
    while x >= 0:
        scratch.chain = pushed(scratch.chain, nchain, x)
        nchain += 1
        x = nodes[x].parent
    s = copy_summary(sums, m, -2 - x)
    fold(nodes, state.tables.codes, keyed.sms, sums, m, s, scratch.chain, nchain)
    return s, Summary(sums.table[s : s + 1], sums.edges[s], sums.first[s], sums.listing[s])


@njit(cache=True)
def free_finished(state, meta, s):
    free_summary(state.sums, meta[0], s)


@njit(cache=True)
def refcount_errors(keyed, state, meta):
    """Nodes in use whose reference count is not the number of their holders."""
    nodes, rings, segments = state.tables.nodes, keyed.rings, state.tables.segments
    cap = len(nodes)
    used = np.ones(cap, np.bool_)
    for k in range(meta[0].nfree):
        used[state.tables.free[k]] = False
    rc = np.zeros(cap, np.int64)
    for x in range(cap):
        if used[x] and nodes[x].parent >= 0:
            rc[nodes[x].parent] += 1
    for s in range(len(keyed.sms)):
        for h in (keyed.sms[s].node, keyed.sms[s].link_node):
            if h >= 0:
                rc[h] += 1
    for h in state.lookups.layers.values():  # paths put aside in other connections
        rc[h] += 1
    for q in range(rings.shape[0]):
        for r in (LIVE, PAST, FREED):
            for j in range(rings[q, r].n):
                h = segments[ring_at(rings, q, r, j)].node
                if h >= 0:
                    rc[h] += 1
    for c in range(len(keyed.conns)):
        if keyed.conns[c].end_node >= 0:
            rc[keyed.conns[c].end_node] += 1
    bad = 0
    for x in range(cap):
        if used[x] and (rc[x] != nodes[x].refs or rc[x] == 0):
            bad += 1
    return bad


@njit(cache=True)
def live_units(keyed, state, q):
    """The runs of units queue ``q`` holds, oldest first: ``(first, end, conn, sm)``
    (the oldest run may be partly taken: ``first`` before the head)."""
    rings, segments = keyed.rings, state.tables.segments
    n = rings[q, LIVE].n
    out = np.zeros((n, 4), np.int64)
    for j in range(n):
        seg = segments[ring_at(rings, q, LIVE, j)]
        out[j, 0] = seg.first
        out[j, 1] = seg.end
        out[j, 2] = seg.conn
        out[j, 3] = seg.sm
    return out


@njit(cache=True)
def nbytes(state):
    """Bytes of every array the kernel's state holds."""
    t, s, c = state.tables, state.sums, state.scratch
    total = t.nodes.nbytes + t.free.nbytes + t.pend.nbytes + t.codes.nbytes
    total += t.inter_cache.nbytes + t.transitions.nbytes + t.tr_cache.nbytes + t.qops.nbytes
    total += t.qop_cache.nbytes + t.cells.nbytes + t.warnings.nbytes + t.segments.nbytes
    total += t.cand.nbytes + t.marks.nbytes
    total += s.table.nbytes + s.free.nbytes
    for k in range(len(s.edges)):
        total += s.edges[k].nbytes + s.first[k].nbytes + s.listing[k].nbytes
    total += c.chain.nbytes + c.holders.nbytes + c.active.nbytes + c.branches.nbytes
    return total + c.groups.nbytes


@njit(cache=True)
def dict_items(d):
    """The keys and values of a typed dict of ints, as two arrays."""
    keys = np.zeros(len(d), np.int64)
    values = np.zeros(len(d), np.int64)
    for j, (key, value) in enumerate(d.items()):
        keys[j] = key
        values[j] = value
    return keys, values


@njit(cache=True)
def set_factors(factors, keys, values):
    """``factors[keys[j]] = values[j]`` (the scale factors of (SM, state) cells)."""
    for j in range(len(keys)):
        factors[keys[j]] = values[j]
