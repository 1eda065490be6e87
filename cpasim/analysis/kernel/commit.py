""":func:`cpasim.analysis.pathlog.commit` on handles: fold the settled prefix of the
live paths into summaries, which keeps memory flat.

A commit walks each active SM's chain up until it meets a node already
walked (marks: :data:`~.layout.MARK`), groups the chains by root summary,
finds where they meet, then walks the other holders the same way to learn
whether one keeps the old summary's view (then the fold goes into a copy).
It folds each group's settled prefix (:func:`_fold_group`) and gives each
long branch below the fold point a summary of its own (:func:`split`).
"Active" SMs are those with a record in the last half commit interval.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from cpasim.analysis.kernel.layout import FREED, LIVE, MARK, NONE, PAST
from cpasim.analysis.kernel.nodes import hold_handle, release, reparent
from cpasim.analysis.kernel.rings import ring_at
from cpasim.analysis.kernel.state import Nodes, grown, pushed
from cpasim.analysis.kernel.summaries import copy_summary, fold
from cpasim.analysis.pathlog import SPLIT_MIN


@njit(inline="always")
def _active(sms, s, since):
    return sms[s].has_last and sms[s].last_rec >= since


@njit
def _holders(keyed, tables, scratch, layers, since):
    """Every handle of an inactive holder, into ``scratch.holders``; returns how many."""
    sms = keyed.sms
    n = 0
    for s in range(len(sms)):
        h = sms[s].node
        if h != NONE and not _active(sms, s, since):
            scratch.holders = pushed(scratch.holders, n, h)
            n += 1
        h = sms[s].link_node
        if h != NONE:
            scratch.holders = pushed(scratch.holders, n, h)
            n += 1
    for h in layers.values():  # paths put aside in other connections
        scratch.holders = pushed(scratch.holders, n, h)
        n += 1
    rings = keyed.rings
    for q in range(rings.shape[0]):
        for r in (LIVE, PAST, FREED):
            for j in range(rings[q, r].n):
                h = tables.segments[ring_at(rings, q, r, j)].node
                if h != NONE:
                    scratch.holders = pushed(scratch.holders, n, h)
                    n += 1
    for c in range(len(keyed.conns)):
        h = keyed.conns[c].end_node
        if h != NONE:
            scratch.holders = pushed(scratch.holders, n, h)
            n += 1
    return n


@njit(inline="always")
def _walk(nodes, marks, h, stamp):
    """Walk up from ``h`` to the first node this commit marked, or a summary
    handle: ``(where it stopped, nodes walked)``."""
    n = 0
    x = h
    while x >= 0 and marks[x].stamp != stamp:
        n += 1
        x = nodes[x].parent
    return x, n


@njit(inline="always")
def _mark(nodes, marks, h, n, stamp, g, meet):
    """Mark the ``n`` nodes walked up from ``h`` as in group ``g``, meeting at ``meet``."""
    y = h
    for _ in range(n):
        marks[y].stamp = stamp
        marks[y].group = g
        marks[y].meet = meet
        y = nodes[y].parent


@njit(inline="always")
def _meet_of(nodes, marks, x):
    """Group and meeting depth of marked node ``x`` (-2 = on the main chain: its own)."""
    meet = marks[x].meet
    if meet == -2:
        meet = nodes[x].depth
    return marks[x].group, meet


@njit
def _new_group(nodes, sums, scratch, h, root, stamp, ngroups):
    """A group for the chains under summary ``root``, ``h``'s its main chain."""
    g = ngroups
    if g >= len(scratch.groups):
        scratch.groups = grown(scratch.groups, g + 1)
    group = scratch.groups[g]
    group.head = h
    group.meet = nodes[h].depth
    group.root = root
    group.shared = 0
    sums.table[root].root_stamp = stamp
    sums.table[root].root_group = g
    return g


@njit
def _group_active(nodes, marks, sums, scratch, sms, since, stamp):
    """Group the active SMs' chains by root summary and find where each group's
    chains meet: ``(groups, nodes walked)``."""
    ngroups = 0
    nseen = 0
    for s in range(len(sms)):
        h = sms[s].node
        if h == NONE or not _active(sms, s, since):
            continue
        if marks[h].stamp == stamp:
            g, meet = _meet_of(nodes, marks, h)
        else:
            x, nwalk = _walk(nodes, marks, h, stamp)
            nseen += nwalk
            if x >= 0:
                g, meet = _meet_of(nodes, marks, x)
            elif sums.table[-2 - x].root_stamp != stamp:
                g = _new_group(nodes, sums, scratch, h, -2 - x, stamp, ngroups)
                ngroups += 1
                _mark(nodes, marks, h, nwalk, stamp, g, -2)
                continue
            else:
                # Two chains under one root with nothing in common: no fold.
                g = sums.table[-2 - x].root_group
                meet = -1
            _mark(nodes, marks, h, nwalk, stamp, g, meet)
        if meet < scratch.groups[g].meet:
            scratch.groups[g].meet = meet
    return ngroups, nseen


@njit
def _mark_holders(nodes, marks, sums, scratch, nholders, stamp):
    """Walk the inactive holders; a group one of them does not descend from the
    fold point of keeps the old summary's view (``shared``: fold into a copy).
    Returns the nodes walked."""
    nseen = 0
    for k in range(nholders):
        h = scratch.holders[k]
        if marks[h].stamp == stamp:
            g = marks[h].group
            meet = marks[h].meet
        else:
            x, nwalk = _walk(nodes, marks, h, stamp)
            if x < 0:
                root = sums.table[-2 - x]
                g = root.root_group if root.root_stamp == stamp else -1
                meet = -1
            else:
                g, meet = _meet_of(nodes, marks, x)
            _mark(nodes, marks, h, nwalk, stamp, g, meet)
            nseen += nwalk
        if meet == -2:
            meet = nodes[h].depth
        if g >= 0 and meet < scratch.groups[g].meet:
            scratch.groups[g].shared = 1
    return nseen


@njit
def _fold_group(keyed, tables, sums, scratch, m, g):
    """Fold group ``g``'s settled prefix into its root summary (a copy if
    shared) and hang the fold point under it; returns the nodes folded."""
    nodes = tables.nodes
    group = scratch.groups[g]
    if group.meet < 0:  # chains under the root with nothing in common
        group.at = NONE
        group.at_root = group.root
        return 0
    lca = group.head
    for _ in range(nodes[lca].depth - group.meet):
        lca = nodes[lca].parent
    group.at = lca
    parent = nodes[lca].parent
    if parent < 0:  # nothing settled since the last fold
        group.at_root = -2 - parent
        return 0
    nchain = 0
    x = parent
    while x >= 0:
        scratch.chain = pushed(scratch.chain, nchain, x)
        nchain += 1
        x = nodes[x].parent
    root = -2 - x
    if group.shared:
        root = copy_summary(sums, m, root)
    fold(nodes, tables.codes, keyed.sms, sums, m, root, scratch.chain, nchain)
    group.at_root = root
    reparent(Nodes(nodes, tables.free, tables.pend), sums, m, lca, -2 - root)
    return nchain


@njit
def commit(keyed, state, m, rec):
    """Fold the settled prefix of the live paths; returns the nodes left unsettled
    (``m``: the pass's counters)."""
    tables, sums, scratch = state.tables, state.sums, state.scratch
    if len(tables.marks) < len(tables.nodes):
        # Marks of earlier commits have older stamps: nothing to keep.
        tables.marks = np.zeros(len(tables.nodes), MARK)
    nodes, marks, sms = tables.nodes, tables.marks, keyed.sms
    m.commits += 1
    m.stamp += 1
    stamp = m.stamp
    since = rec - m.every // 2
    nholders = _holders(keyed, tables, scratch, state.lookups.layers, since)
    ngroups, nseen = _group_active(nodes, marks, sums, scratch, sms, since, stamp)
    nseen += _mark_holders(nodes, marks, sums, scratch, nholders, stamp)
    folded = 0
    for g in range(ngroups):
        folded += _fold_group(keyed, tables, sums, scratch, m, g)
    # The active handles and their groups, before the splits re-stamp their nodes.
    nact = 0
    for s in range(len(sms)):
        h = sms[s].node
        if h != NONE and _active(sms, s, since):
            scratch.active = pushed(scratch.active, 2 * nact, h)
            scratch.active = pushed(scratch.active, 2 * nact + 1, marks[h].group)
            nact += 1
    for g in range(ngroups):
        folded += split(keyed, tables, sums, scratch, m, nact, g)
    m.folded += folded
    return max(0, nseen - folded)


@njit
def _branches(nodes, marks, scratch, nact, g, at, stamp):
    """The children of ``at`` that active handles of group ``g`` descend from,
    into ``scratch.branches``, each marked with the depth of its deepest head;
    returns how many."""
    nchild = 0
    for k in range(nact):
        if scratch.active[2 * k + 1] != g:
            continue
        h = scratch.active[2 * k]
        nwalk = 0
        last = NONE
        x = h
        while x >= 0 and x != at and marks[x].stamp != stamp:
            last = x
            nwalk += 1
            x = nodes[x].parent
        if x >= 0 and x != at:
            child = marks[x].group
        elif nwalk == 0:
            continue
        else:
            child = last
            scratch.branches = pushed(scratch.branches, nchild, child)
            nchild += 1
            marks[child].meet = -1
        y = h
        for _ in range(nwalk):
            marks[y].stamp = stamp
            marks[y].group = child
            if y != child:
                marks[y].meet = -1
            y = nodes[y].parent
        if nodes[h].depth > marks[child].meet:
            marks[child].meet = nodes[h].depth
    return nchild


@njit
def split(keyed, tables, sums, scratch, m, nact, g):
    """:func:`cpasim.analysis.pathlog._split` for commit group ``g``: hang every long
    branch below its fold point under a copy of the summary down to it; returns
    the nodes folded."""
    at = scratch.groups[g].at  # NONE: the root summary itself
    root = scratch.groups[g].at_root
    m.stamp += 1
    # marks[x] = (stamp, child of ``at`` that x descends from, deepest head below a child)
    nodes, marks = tables.nodes, tables.marks
    nchild = _branches(nodes, marks, scratch, nact, g, at, m.stamp)
    if nchild == 0:
        return 0
    least = SPLIT_MIN + sums.table[root].norder
    pool = Nodes(nodes, tables.free, tables.pend)
    top = at if at >= 0 else -2 - root
    hold_handle(pool, sums, top)  # while the branches move off: the last move may free it
    folded = 0
    for k in range(nchild):
        child = scratch.branches[k]
        if marks[child].meet - nodes[child].depth < least:
            continue
        copy = copy_summary(sums, m, root)
        if at >= 0:
            scratch.chain = pushed(scratch.chain, 0, at)
            fold(nodes, tables.codes, keyed.sms, sums, m, copy, scratch.chain, 1)
            folded += 1
        reparent(pool, sums, m, child, -2 - copy)
    release(pool, sums, m, top)
    return folded
