"""Summaries: the folded prefix of a path (:class:`cpasim.analysis.pathlog.Summary`).

A summary is a row of :data:`~.state.Summaries` and three arrays of its own:
its totals per edge code (:data:`~.layout.EDGE`, indexed by code id), the
order in which its path first visited each base SM, and the listing of its
first nodes.  :func:`fold` is :meth:`cpasim.analysis.pathlog.Summary.fold` on
node handles; every float is summed in the same order.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from cpasim.analysis.kernel.layout import EDGE, K_INTER, LISTING
from cpasim.analysis.kernel.state import grown, pushed


@njit
def new_summary(sums, m, start):
    """A new summary of a path that started at ``start``, with no holder yet."""
    nfree = m.sfree
    if nfree > 0:
        s = sums.free[nfree - 1]
        m.sfree = nfree - 1
    else:
        s = m.nsum
        m.nsum = s + 1
        if s >= len(sums.table):
            sums.table = grown(sums.table, s + 1)
        sums.edges.append(np.zeros(0, EDGE))
        sums.first.append(np.zeros(0, np.int64))
        sums.listing.append(np.zeros(0, LISTING))
    row = sums.table[s]
    row.refs = 0
    row.count = 0
    row.norder = 0
    row.nfirst = 0
    row.nlist = 0
    row.root_stamp = 0
    row.root_group = 0
    row.start = start
    sums.edges[s] = np.zeros(16, EDGE)
    sums.first[s] = np.full(8, -1, np.int64)
    sums.listing[s] = np.zeros(0, LISTING)
    return s


@njit
def copy_summary(sums, m, s):
    """A new summary with summary ``s``'s content."""
    c = new_summary(sums, m, sums.table[s].start)
    src = sums.table[s]
    dst = sums.table[c]
    dst.count = src.count
    dst.norder = src.norder
    dst.nfirst = src.nfirst
    dst.nlist = src.nlist
    sums.edges[c] = sums.edges[s].copy()
    sums.first[c] = sums.first[s].copy()
    sums.listing[c] = sums.listing[s].copy()
    return c


@njit
def free_summary(sums, m, s):
    sums.edges[s] = np.zeros(0, EDGE)
    sums.first[s] = np.zeros(0, np.int64)
    sums.listing[s] = np.zeros(0, LISTING)
    sums.free = pushed(sums.free, m.sfree, s)
    m.sfree += 1


@njit
def release_summary(sums, m, s):
    """Release one reference to summary ``s`` (freed when it has no holder left)."""
    row = sums.table[s]
    row.refs -= 1
    if row.refs == 0:
        free_summary(sums, m, s)


@njit
def _edges_for(sums, s, ncodes):
    """Summary ``s``'s edge totals, with a row for each of ``ncodes`` codes."""
    edges = sums.edges[s]
    if len(edges) < ncodes:
        edges = grown(edges, ncodes)
        sums.edges[s] = edges
    return edges


@njit
def _longer_listing(sums, s, listing, nlist, limit):
    """Summary ``s``'s listing grown to hold entry ``nlist`` (at most ``limit``)."""
    n = len(listing)
    while n <= nlist:
        n = n * 2 if n else 64
    if n > limit:
        n = limit
    longer = np.zeros(n, LISTING)
    longer[: len(listing)] = listing
    sums.listing[s] = longer
    return longer


@njit
def _first_for(sums, s, b):
    """Summary ``s``'s first-visit table, holding base SM ``b``."""
    fv = sums.first[s]
    if b >= len(fv):
        n = len(fv)
        while n <= b:
            n = n * 2 if n else 8
        g = np.full(n, -1, np.int64)
        g[: len(fv)] = fv
        sums.first[s] = g
        fv = g
    return fv


@njit(inline="always")
def _add_edge(edges, node, norder):
    """Add ``node``'s edge to the totals; returns the new length of the order."""
    e = edges[node.code]
    if e.visits == 0:
        edges[norder].order = node.code
        norder += 1
        e.time = node.inc
        e.wait = node.wait
        e.lent = node.lent
        e.visits = 1
    else:
        e.time += node.inc
        e.wait += node.wait
        e.lent += node.lent
        e.visits += 1
    return norder


@njit(inline="always")
def _visit(fv, b, nfirst):
    """Note base SM ``b``'s first visit; returns the next visit number."""
    if fv[b] < 0:
        fv[b] = nfirst
        nfirst += 1
    return nfirst


@njit(inline="always")
def _visits(codes, sms, sums, s, fv, edges, code, nfirst):
    """The first visits of the SMs of edge ``code``, and a loop back upstream to
    an SM the path reached before; returns the first-visit table and the next
    visit number."""
    c = codes[code]
    if c.kind == K_INTER:
        psm = sms[c.x].base
        csm = sms[c.y].base
        if psm >= len(fv) or csm >= len(fv):
            fv = _first_for(sums, s, psm if psm > csm else csm)
        nfirst = _visit(fv, psm, nfirst)
        seen = fv[csm]
        if seen < 0:
            fv[csm] = nfirst
            nfirst += 1
        elif seen < fv[psm]:
            edges[code].loops += 1
    else:
        b = sms[c.x].base
        if b >= len(fv):
            fv = _first_for(sums, s, b)
        nfirst = _visit(fv, b, nfirst)
    return fv, nfirst


@njit(inline="always")
def _slack(edges, node):
    """The margin by which ``node``'s losing edge lost, if the least so far."""
    loser = node.loser
    if loser >= 0:
        e = edges[loser]
        cur = e.slack if e.has_slack else node.margin + 1.0
        if node.margin < cur:
            e.slack = node.margin
            e.has_slack = 1


@njit
def fold(nodes, codes, sms, sums, m, s, chain, nchain):
    """Summary.fold of ``chain[nchain-1], ..., chain[0]`` (root side last in ``chain``)."""
    edges = _edges_for(sums, s, m.ncodes)
    row = sums.table[s]
    limit = m.limit
    nlist = row.nlist
    norder = row.norder
    nfirst = row.nfirst
    listing = sums.listing[s]
    fv = sums.first[s]
    for j in range(nchain - 1, -1, -1):
        node = nodes[chain[j]]
        if nlist < limit:
            if nlist >= len(listing):
                listing = _longer_listing(sums, s, listing, nlist, limit)
            entry = listing[nlist]
            entry.code = node.code
            entry.cp = node.cp
            entry.inc = node.inc
            entry.wait = node.wait
            nlist += 1
        norder = _add_edge(edges, node, norder)
        fv, nfirst = _visits(codes, sms, sums, s, fv, edges, node.code, nfirst)
        _slack(edges, node)
    row.nlist = nlist
    row.norder = norder
    row.nfirst = nfirst
    row.count += nchain
