"""Connections, links and ends: which connection each SM works for, the paths
it puts aside in the others, the dependency a ``link`` hands over, and each
connection's end (the "Connections" paragraph of :mod:`cpasim.analysis.criticalpath`)."""

from __future__ import annotations

from numba import njit

from cpasim.analysis.kernel.edges import inter_code
from cpasim.analysis.kernel.layout import NONE
from cpasim.analysis.kernel.nodes import drop, hold
from cpasim.analysis.snapshot import ON_LINK


@njit(inline="always")
def switch(sms, conns, layers, worked, sm, conn):
    """SM ``sm`` now works for connection ``conn``: its path in the connection it
    leaves is put aside (``layers``), the one it had in ``conn`` taken up."""
    s = sms[sm]
    cur = s.conn
    if cur == conn:
        return
    worked[(sm << 21) | conn] = 1
    node = s.node
    if cur >= 0:
        if node != NONE:
            layers[(sm << 21) | cur] = node
        node = layers.pop((sm << 21) | conn, NONE)
        s.node = node
    if node != NONE:
        conns[conn + 1].started = 1
    s.conn = conn


@njit(inline="always")
def linked_dep(v, m, inter, layers, worked, sm):
    """The dependency a pending link gives the SM: ``(node, its cp, edge weight,
    edge code)``.  The linked node is held until the end of the record."""
    s = v.sms[sm]
    dep = s.link_node
    dsm = s.link_sm
    pconn = s.link_conn
    s.linked = 0
    s.link_node = NONE
    drop(v.nodes, m, dep)
    if pconn >= 0 and pconn != s.conn:
        switch(v.sms, v.conns, layers, worked, sm, pconn)
    if dep == NONE:
        return dep, 0.0, 0.0, -1
    return dep, v.nodes.table[dep].cp, 0.0, inter_code(v.edges, m, inter, dsm, sm, 0)


@njit(inline="always")
def link(nodes, sms, m, sm, a, new, t):
    """``link``: SM ``a``'s next record depends on this one (``new``, one more
    holder); the caller waits until some SM links back to it."""
    target = sms[a]
    target.linked = 1
    drop(nodes, m, target.link_node)
    hold(nodes, new)
    target.link_node = new
    target.link_sm = sm
    target.link_conn = sms[sm].conn
    s = sms[sm]
    s.wait_kind = ON_LINK
    s.wait_q = -1
    s.wait_t = t


@njit(inline="always")
def end(nodes, sms, conns, m, sm, new, t):
    """A record of an end SM: ``new`` (one more holder) is, for now, its
    connection's end."""
    c = conns[sms[sm].conn + 1]
    if c.end_order < 0:
        c.end_order = m.end_seq
        m.end_seq += 1
    drop(nodes, m, c.end_node)
    hold(nodes, new)
    c.end_node = new
    c.end_sm = sm
    c.end_t = t
