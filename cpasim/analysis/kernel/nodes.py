"""Path nodes, and who holds them.

Nodes live in a pool (:data:`~.state.Nodes`); a node goes back to the pool
when nothing refers to it, as Python's reference counting frees the reference
pass's tuples.  Its holders are its children, SMs (their current node, a node
put aside in another connection, a pending link), queue segments and
connection ends.  Every reference taken goes through :func:`hold`, every one
given up through :func:`drop` (at the end of the record) or :func:`release`
(now); :func:`cpasim.analysis.kernel.export.refcount_errors` recounts them.
"""

from __future__ import annotations

from numba import njit

from cpasim.analysis.kernel.summaries import release_summary


@njit(inline="always")
def hold(nodes, x):
    """One more holder of node ``x`` (nothing for ``NONE``)."""
    if x >= 0:
        nodes.table[x].refs += 1


@njit(inline="always")
def drop(nodes, m, x):
    """Release one reference to node ``x`` at the end of the current record."""
    if x >= 0:
        k = m.npend
        nodes.pend[k] = x
        m.npend = k + 1


@njit(inline="always")
def free_chain(nodes, m, x):
    """Release a reference to node ``x``, freeing it and then each parent left
    without holders; returns the summary handle whose count the caller must
    release too (the chain was freed up to it), else -1."""
    while x >= 0:
        node = nodes.table[x]
        node.refs -= 1
        if node.refs > 0:
            return -1
        par = node.parent
        k = m.nfree
        nodes.free[k] = x
        m.nfree = k + 1
        m.live -= 1
        x = par
    return x


@njit
def release(nodes, sums, m, h):
    """Release one reference to handle ``h`` now (a node, a summary ``<= -2``, or
    ``NONE``)."""
    if h >= 0:
        h = free_chain(nodes, m, h)
    if h <= -2:
        release_summary(sums, m, -2 - h)


@njit
def hold_handle(nodes, sums, h):
    """One more holder of handle ``h`` (a node or a summary)."""
    if h >= 0:
        hold(nodes, h)
    elif h <= -2:
        sums.table[-2 - h].refs += 1


@njit
def reparent(nodes, sums, m, x, h):
    """Hang node ``x`` under handle ``h``, releasing its old parent."""
    hold_handle(nodes, sums, h)
    old = nodes.table[x].parent
    nodes.table[x].parent = h
    release(nodes, sums, m, old)


@njit(inline="always")
def new_node(nodes, m, parent, depth, code, inc, wait, cp, loser, margin, lent):
    """A node under node ``parent``, with no holder yet (a summary parent's count
    is the caller's)."""
    k = m.nfree - 1
    m.nfree = k
    x = nodes.free[k]
    node = nodes.table[x]
    node.parent = parent
    node.depth = depth
    node.code = code
    node.loser = loser
    node.refs = 0
    node.inc = inc
    node.wait = wait
    node.cp = cp
    node.margin = margin
    node.lent = lent
    hold(nodes, parent)
    live = m.live + 1
    m.live = live
    if live > m.peak:
        m.peak = live
    return x
