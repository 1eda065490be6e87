"""Critical paths as shared chains of nodes, summarised as their prefix settles.

A *path node* is a small list ``[parent, depth, code, inc, wait, cp, loser, margin,
lent]``: the last edge of a path (``code``, see below), the time it added (``inc``),
the waiting time it spent at weight 0 (``wait``), the path length at its end
(``cp``), the runner-up at the node where the edge was chosen (``loser`` edge code
and ``margin`` = winner − runner-up, or ``loser = -1``), and the part of ``inc``
during which another state machine ran on the SM's core (``lent``: a call served
on its core, annotations.md "Critical path").  Paths share
their prefixes (Saidi 5.1.4's shallow-copy trick): adopting another SM's path
is one new node pointing at that SM's node; nothing is copied.

To keep memory independent of trace length the pass periodically *commits*
(:func:`commit`): it finds the deepest common ancestor L of the paths of the
state machines that are still active — everything above L is shared by all
of them and can never change for them — folds those nodes into the root
:class:`Summary` (per-edge totals, loop counts, slack, the bounded listing)
and hangs L directly under it; the detached nodes are then freed.  Paths
held elsewhere that do not pass through L (an idle timer, an old unit) keep
their own short chain to the previous summary, which is copied rather than
changed in that case.  Active paths that part for good (two loops that each
adopt only their own past, as the two halves of a TCP window on a saturated
link do) would keep L where they parted: once a branch below L is long, it
is hung under a copy of the summary of its own and folds on its own.  Memory
is thus bounded by what active paths have not yet agreed on (a few commit
intervals in a pipeline) plus a short chain per idle SM or held unit — never
by the length of the trace.

Edge codes are ints: ``sm << 21 | state_index`` for the intra-SM edge of a
state (index 0 = the state before the SM's first ``begin``), ``INTER | psm <<
42 | csm << 21 | queue_index`` for an inter-SM edge (queue index 0 = a
``link``), and ``-1 - sm`` for the start node.
"""

from __future__ import annotations

from cpasim.errors import CpasimError

PARENT, DEPTH, CODE, INC, WAIT, CP, LOSER, MARGIN, LENT = range(9)

INTER = 1 << 63
#: Nodes a branch needs, beyond one per distinct edge, to be split off (:func:`_split`).
SPLIT_MIN = 1024
_M21 = (1 << 21) - 1
#: The most state machines, states, queues (+ 1 for links) or connections a trace
#: may name: their ids are 21-bit fields of the edge codes.
MAX_IDS = _M21


def check_widths(key, source_name: str) -> None:
    """Refuse a trace key (:class:`cpasim.tracing.records.TraceKey`) whose ids do not
    fit the 21-bit fields of the edge codes."""
    n_sm, n_states, n_q, n_conn = key.sizes()
    for what, n, most in (
        ("state machines", n_sm, MAX_IDS),
        ("states", n_states, MAX_IDS),
        ("queues", n_q, MAX_IDS - 1),
        ("connections", n_conn, MAX_IDS),
    ):
        if n > most:
            raise CpasimError(
                f"{source_name}: names {n} {what}; the analyzer handles at most {most}"
            )


def intra_code(sm: int, state_index: int) -> int:
    return (sm << 21) | state_index


def inter_code(psm: int, csm: int, queue_index: int) -> int:
    return INTER | (psm << 42) | (csm << 21) | queue_index


def decode(code: int) -> tuple[str, int, int, int]:
    """``("start", sm, 0, 0)``, ``("intra", sm, state_index, 0)`` or ``("inter", psm, csm, qi)``."""
    if code < 0:
        return ("start", -1 - code, 0, 0)
    if code & INTER:
        return ("inter", (code >> 42) & _M21, (code >> 21) & _M21, code & _M21)
    return ("intra", code >> 21, code & _M21, 0)


class Summary:
    """Aggregates of a committed path prefix; the root of every chain."""

    __slots__ = (
        "start_t",
        "edges",
        "count",
        "listing",
        "limit",
        "base",
        "first_visit",
        "loops",
        "slack",
    )

    def __init__(self, start_t: float, limit: int, base: list[int]):
        self.start_t = start_t
        self.base = base  # SM id -> id of its (sys, sm): loops ignore instances
        self.edges: dict[int, list] = {}  # code -> [time, waiting, visits, lent]
        self.count = 0  # edges folded so far
        self.listing: list[tuple] = []  # (code, cp, inc, wait), at most ``limit``
        self.limit = limit
        self.first_visit: dict[int, int] = {}  # base SM -> order of first visit on the path
        self.loops: dict[int, int] = {}  # inter code -> loops closed
        self.slack: dict[int, float] = {}  # code -> least margin it lost by

    def copy(self) -> Summary:
        new = Summary(self.start_t, self.limit, self.base)
        new.edges = {k: v[:] for k, v in self.edges.items()}
        new.count = self.count
        new.listing = self.listing[:]
        new.first_visit = dict(self.first_visit)
        new.loops = dict(self.loops)
        new.slack = dict(self.slack)
        return new

    def fold(self, nodes: list[list]) -> None:
        """Add ``nodes`` (in path order, root side first) to the aggregates."""
        edges = self.edges
        listing = self.listing
        first = self.first_visit
        loops = self.loops
        slack = self.slack
        base = self.base
        room = self.limit - len(listing)
        for _parent, _depth, code, inc, wait, cp, loser, margin, lent in nodes:
            if room > 0:
                listing.append((code, cp, inc, wait))
                room -= 1
            agg = edges.get(code)
            if agg is None:
                edges[code] = [inc, wait, 1, lent]
            else:
                agg[0] += inc
                agg[1] += wait
                agg[2] += 1
                agg[3] += lent
            if code < 0:
                b = base[-1 - code]
                if b not in first:
                    first[b] = len(first)
            elif code & INTER:
                psm = base[(code >> 42) & _M21]
                csm = base[(code >> 21) & _M21]
                if psm not in first:
                    first[psm] = len(first)
                seen = first.get(csm)
                if seen is None:
                    first[csm] = len(first)
                elif seen < first[psm]:
                    # Back upstream to an SM the path reached before this one.
                    loops[code] = loops.get(code, 0) + 1
            else:
                b = base[code >> 21]
                if b not in first:
                    first[b] = len(first)
            if loser >= 0 and margin < slack.get(loser, margin + 1.0):
                slack[loser] = margin
        self.count += len(nodes)


def root_of(node: list) -> Summary:
    while not isinstance(node, Summary):
        node = node[PARENT]
    return node


def chain_to_root(node: list) -> tuple[Summary, list[list]]:
    """The root summary and the nodes from it down to ``node`` (root side first)."""
    nodes = []
    while not isinstance(node, Summary):
        nodes.append(node)
        node = node[PARENT]
    nodes.reverse()
    return node, nodes


def finish(node: list) -> Summary:
    """A summary of the whole path ending at ``node`` (the live summary is not touched)."""
    root, nodes = chain_to_root(node)
    total = root.copy()
    total.fold(nodes)
    return total


def commit(active, others) -> tuple[int, int]:
    """Fold the settled prefix of the live paths; return ``(nodes folded, nodes walked)``.

    ``active``: path nodes of state machines that recorded something lately;
    ``others``: every other node the pass still holds (idle SMs, queued units,
    slot histories, pending links, ends).  ``None`` entries are skipped.

    Per root summary, the fold point L is the deepest common ancestor of the
    *active* nodes, found by walking each up only until it meets a node
    already walked (cost: the union of the unsettled branches; callers space
    commits by at least that much).  Nodes above L are folded into the
    summary and L is hung under it.  A node of ``others`` that does not
    descend from L (an idle timer's early node, an old unit) keeps its own
    chain to the old summary, which is then left untouched and copied for
    the fold instead: so an idle SM costs its own short chain, and never pins
    the history of the others.  Long branches below L get summaries of their
    own (:func:`_split`).  ``nodes walked`` less ``nodes folded`` is what the
    next commit will walk again.
    """
    # id(node) -> (group, depth it meets the main chain); None = on the main
    # chain itself (it meets it at its own depth).
    seen: dict[int, tuple] = {}
    # [main chain (deepest first), fold depth, root, shared, active nodes]
    groups: list[list] = []
    roots: dict[int, int] = {}  # id(root summary) -> group
    for h in active:
        if h is not None:
            _group_active(h, seen, groups, roots)
    for h in others:
        if h is not None:
            _mark_holder(h, seen, groups, roots)
    folded = 0
    for chain, meet, root, shared, heads in groups:
        if meet < 0:  # chains under the root with nothing in common
            folded += _split(heads, root, root)
            continue
        lca = chain[chain[0][DEPTH] - meet]  # depths fall by one per step up the chain
        root = lca[PARENT]
        if not isinstance(root, Summary):
            root, nodes = chain_to_root(root)
            if shared:
                root = root.copy()
            root.fold(nodes)
            lca[PARENT] = root
            folded += len(nodes)
        folded += _split(heads, lca, root)
    return folded, len(seen)


def _walk(h: list, seen: dict) -> tuple[list, object]:
    """The nodes from ``h`` up to the first one already seen, and where the walk
    stopped (that node, or the root summary)."""
    walked = []
    n = h
    while not isinstance(n, Summary) and id(n) not in seen:
        walked.append(n)
        n = n[PARENT]
    return walked, n


def _group_active(h: list, seen: dict, groups: list, roots: dict) -> None:
    """Put active node ``h``'s chain in the group of its root summary, and lower
    the group's fold depth to where the chain meets the group's main chain."""
    hit = seen.get(id(h))
    if hit is not None:
        g, meet = hit
        if meet is None:
            meet = h[DEPTH]
        group = groups[g]
        if meet < group[1]:
            group[1] = meet
        group[4].append(h)
        return
    walked, n = _walk(h, seen)
    if isinstance(n, Summary):
        g = roots.get(id(n))
        if g is None:
            g = roots[id(n)] = len(groups)
            groups.append([walked, walked[0][DEPTH], n, False, [h]])
            seen.update(dict.fromkeys(map(id, walked), (g, None)))
            return
        meet = -1  # two chains under one root with nothing in common: no fold
    else:
        g, meet = seen[id(n)]
        if meet is None:
            meet = n[DEPTH]
    if meet < groups[g][1]:
        groups[g][1] = meet
    groups[g][4].append(h)
    seen.update(dict.fromkeys(map(id, walked), (g, meet)))


def _mark_holder(h: list, seen: dict, groups: list, roots: dict) -> None:
    """Walk inactive holder ``h``; if it does not descend from its group's fold
    point, the group keeps the old summary's view (fold into a copy)."""
    hit = seen.get(id(h))
    if hit is None:
        walked, n = _walk(h, seen)
        if isinstance(n, Summary):
            hit = (roots.get(id(n), -1), -1)
        else:
            hit = seen[id(n)]
            if hit[1] is None:
                hit = (hit[0], n[DEPTH])
        seen.update(dict.fromkeys(map(id, walked), hit))
    g, meet = hit
    if meet is None:
        meet = h[DEPTH]
    if g >= 0 and meet < groups[g][1]:
        groups[g][3] = True  # keeps the old summary's view: fold into a copy


def split_min(root: Summary) -> int:
    """Nodes a branch must have before it gets a summary of its own: about what
    that summary costs, one entry per distinct edge."""
    return SPLIT_MIN + len(root.edges)


def _split(heads: list[list], at, root: Summary) -> int:
    """Hang every long branch below ``at`` (a node right under ``root``, or
    ``root`` itself) under a copy of the summary down to ``at``; returns the
    nodes folded.

    Active paths that part at ``at`` and never meet again (two loops that each
    adopt only their own past) would otherwise keep the fold point at ``at``
    for good, and every node since in memory.  Once apart, each branch folds
    on its own.
    """
    below: dict[int, list] = {}  # id(node) -> the child of ``at`` it descends from
    deepest: dict[int, list] = {}  # id(child) -> [child, depth of its deepest head]
    for h in heads:
        walked = []
        n = h
        while n is not at and id(n) not in below:
            walked.append(n)
            n = n[PARENT]
        if n is at:
            if not walked:
                continue
            child = walked[-1]
        else:
            child = below[id(n)]
        below.update(dict.fromkeys(map(id, walked), child))
        d = deepest.setdefault(id(child), [child, h[DEPTH]])
        if h[DEPTH] > d[1]:
            d[1] = h[DEPTH]
    folded = 0
    least = split_min(root)
    for child, depth in deepest.values():
        if depth - child[DEPTH] < least:
            continue
        copy = root.copy()
        if at is not root:
            copy.fold([at])
            folded += 1
        child[PARENT] = copy
    return folded
