"""The streaming critical-path pass (annotations.md "Critical path"; Saidi 5.1.2-5.1.5).

Records arrive in time order, so each one is a node whose predecessors have
all been seen.  Per state machine the pass keeps only its last node's path
(:mod:`cpasim.analysis.pathlog`), its current state and what it waits for;
per queue the units it holds and who produced them
(:mod:`cpasim.analysis.queues`).  For record r of SM s at time t::

    cp(r) = max( cp(s's previous node) + w_intra,  max over deps d of cp(d) + w_d )

``w_intra`` is ``(t - previous t) x scale`` or 0 while s waits; deps come from
the units a ``deq``/``peek`` takes, the slots an ``enq``/``reserve`` fills in
a bounded buffer, or a ``link`` made to s.  Ties keep the SM's own path.

**Connections.**  Each SM works for a current connection (``-1`` = none yet):
``identify`` sets it, and the first unit it takes that carries one (queues
declared ``conn_flow=false`` carry none) or a link from an SM with one switch
it.  cp is kept per (SM, connection); an SM without a connection carries its
path into the first connection it works for.  A unit joins the consumer's
path if it carries the consumer's connection or none (free descriptors,
credits and anonymous units serve every connection).  With one connection in
the trace this filters nothing, as annotations.md requires.  Intra-SM edges
are always ``t - the SM's previous record``, whichever connection that was.

The first record of a start SM in a connection that has no path yet starts
one with cp = 0.  The result for a connection is the path at the last record
of an end SM in it.

Every ``COMMIT_EVERY`` records (more when paths take long to agree) the
settled prefix of the paths of the SMs active in the last half interval is
folded into summaries
(:func:`cpasim.analysis.pathlog.commit`), which keeps memory flat.

**One record at a time.**  :meth:`CriticalPathPass._record` closes the
record's intra edge and takes up a pending ``link``; then the op's own method
(``_begin``, ``_enq``, ``_deq`` ..., each under the sentence of
``docs/annotations.md`` it implements) adds its dependencies, makes the node
(:meth:`CriticalPathPass._node`) and applies its effects.  This is the
reference: speed is the compiled engine's (:mod:`cpasim.analysis.kernel`), and
the two agree bit for bit (``tests/test_analysis_engine.py``).
"""

from __future__ import annotations

from cpasim.analysis.pathlog import (
    CP,
    DEPTH,
    Summary,
    check_widths,
    commit,
    inter_code,
    intra_code,
)
from cpasim.analysis.queues import QueueState
from cpasim.analysis.snapshot import (
    NOT_WAITING,
    ON_EMPTY,
    ON_FULL,
    ON_LINK,
    QueueUnits,
    SmState,
    Snapshot,
)
from cpasim.analysis.transforms import (
    NameSet,
    SmRule,
    Transforms,
    edge_rule,
    queue_effect,
    sm_display,
)
from cpasim.errors import CpasimError
from cpasim.tracing.records import (
    BEGIN,
    DECLARE,
    DEQ,
    ENQ,
    FLAG_CONN_FLOW,
    IDENTIFY,
    LINK,
    PEEK,
    RESERVE,
    RESIZE,
    RUN,
    WAIT_EMPTY,
    WAIT_FULL,
    TraceKey,
)


# The pass's messages, shared with the compiled engine (cpasim.analysis.compiled),
# which must report the same words.
def short_take(key: TraceKey, rec: int, sm: int, q: int, n: int, held: int) -> str:
    """Record ``rec`` takes ``n`` units from queue ``q``, which holds only ``held``."""
    return (
        f"record {rec}: {sm_display(*key.sms[sm])} takes {n} units from queue "
        f"{sm_display(*key.queues[q])}, which holds {held}"
    )


def short_warning(op: str, qname: str, detail: str) -> str:
    """The ``--lenient`` warning of a ``short_take`` by a deq or a peek (``op``)."""
    return f"{op} of more units than held in {qname} ({detail})"


def wait_empty_warning(qname: str, held: int, n: int) -> str:
    return (
        f"wait_empty on {qname} while it held {held} >= {n} units"
        " (missing or misplaced annotation?)"
    )


def wait_full_warning(qname: str, held: int, cap: int) -> str:
    room = "no capacity declared" if cap < 0 else f"{held}/{cap} held"
    return f"wait_full on {qname} while it had room ({room}) (missing or misplaced annotation?)"


#: Records between two commits of the settled path prefix.
COMMIT_EVERY = 16384
#: Records prepared (columns built) at a time.
BLOCK = 8192


class CriticalPathPass:
    """One what-if's pass over a trace; feed it every chunk, then read its state."""

    def __init__(
        self,
        transforms: Transforms,
        start: tuple[str, ...],
        end: tuple[str, ...],
        *,
        lenient: bool = False,
        listing_limit: int = 10_000,
        source_name: str = "<trace>",
        commit_every: int = COMMIT_EVERY,
    ):
        self.tf = transforms
        self.start = start
        self.end = end
        self.lenient = lenient
        self.limit = listing_limit
        self.source_name = source_name
        self.commit_every = commit_every
        self.key: TraceKey | None = None
        self.records = 0
        self.folded = 0
        self.next_commit = commit_every
        # per SM
        self.s_last: list = []  # time of its latest record (None: none yet)
        self.s_rec: list[int] = []  # number of its latest record (-1: none yet)
        self.s_state: list[int] = []
        self.s_node: list = []
        self.s_wq: list[int] = []
        self.s_wk: list[int] = []
        self.s_wt: list[float] = []
        self.s_linked: list[bool] = []
        self.s_pend: list = []
        self.s_pendsm: list[int] = []
        self.s_pendconn: list[int] = []
        self.s_cur: list[int] = []
        self.s_layers: list = []
        # who runs on whose core (``run``): the SM whose core it runs on (-1: its
        # own), how many SMs run on its core, since when it has lent it (NaN: not
        # lent), and the time lent since its last record
        self.s_host: list[int] = []
        self.s_guests: list[int] = []
        self.s_lent_from: list[float] = []
        self.s_lent: list[float] = []
        # per SM, state index -> scale factor / time active / time waiting: only the
        # states an SM was in (an SM x state table would grow with their product)
        self.s_fac: list[dict[int, float]] = []
        self.s_act: list[dict[int, float]] = []
        self.s_wait: list[dict[int, float]] = []
        self.s_from: list[int] = []
        self.s_enter: list = []
        self.s_is_start: list[bool] = []
        self.s_is_end: list[bool] = []
        self.s_conns: list[set] = []
        self.s_base: list[int] = []  # SM id -> id of its (sys, sm), instances merged
        self.s_rule: list[SmRule] = []  # what the what-if does to edges from and to it
        self._base_ids: dict[tuple[str, str], int] = {}
        # per queue
        self.queues: list[QueueState] = []
        # per connection (-1 = none)
        self.started: set[int] = set()
        self.ends: dict[int, list] = {}  # conn -> [t, node, sm]
        self.conns_seen: set[int] = set()
        # compact graphs
        # (sm, from state, state, to state) -> [visits, time in state]
        self.transitions: dict[tuple, list] = {}
        # sm << 22 | queue << 1 | (1 = takes from, 0 = adds to) -> ops
        self.qedges: dict[int, int] = {}
        self.links: dict[tuple, int] = {}  # (sm, target) -> links
        self.warnings: dict[tuple, list] = {}  # kind -> [count, first record, message]

    # -- tables that follow the growing key ------------------------------------

    def _grow(self, key: TraceKey) -> None:
        n_sm, _, n_q, _ = key.sizes()
        tf = self.tf
        self.s_rule += tf.sms_rules(NameSet.of_sms(key.sms[len(self.s_last) : n_sm]))
        for sm in range(len(self.s_last), n_sm):
            sys, name, inst = key.sms[sm]
            self.s_last.append(None)
            self.s_rec.append(-1)
            self.s_state.append(0)
            self.s_node.append(None)
            self.s_wq.append(-1)
            self.s_wk.append(NOT_WAITING)
            self.s_wt.append(0.0)
            self.s_linked.append(False)
            self.s_pend.append(None)
            self.s_pendsm.append(-1)
            self.s_pendconn.append(-1)
            self.s_cur.append(-1)
            self.s_layers.append(None)
            self.s_host.append(-1)
            self.s_guests.append(0)
            self.s_lent_from.append(NAN)
            self.s_lent.append(0.0)
            self.s_fac.append({})
            self.s_act.append({})
            self.s_wait.append({})
            self.s_from.append(0)
            self.s_enter.append(None)
            self.s_is_start.append(_matches(self.start, sys, name, inst))
            self.s_is_end.append(_matches(self.end, sys, name, inst))
            self.s_conns.append(set())
            self.s_base.append(self._base_ids.setdefault((sys, name), len(self._base_ids)))
        for q in range(len(self.queues), n_q):
            rule = tf.queue_rules(*key.queues[q])
            broken, comm, extra, edgewise = queue_effect(tf, rule)
            self.queues.append(QueueState(q, broken, comm, extra, rule, edgewise))

    def _factor(self, sm: int, si: int) -> float:
        """The scale factor of SM ``sm``'s state index ``si`` (matched once, on first use)."""
        fac = self.s_fac[sm]
        f = fac.get(si)
        if f is None:
            state = "(initial)" if si == 0 else self.key.states[si - 1]
            f = fac[si] = self.tf.state_factor(*self.key.sms[sm], state)
        return f

    # -- warnings and errors ---------------------------------------------------

    def _warn(self, kind: tuple, rec: int, message: str) -> None:
        w = self.warnings.get(kind)
        if w is None:
            self.warnings[kind] = [1, rec, message]
        else:
            w[0] += 1

    def _qname(self, q: int) -> str:
        return sm_display(*self.key.queues[q])

    def _short(self, rec: int, sm: int, op: str, q: int, n: int, held: int) -> None:
        msg = short_take(self.key, rec, sm, q, n, held)
        if not self.lenient:
            raise CpasimError(f"{self.source_name}: {msg} (use --lenient to count these)")
        self._warn(("short", q), rec, short_warning(op, self._qname(q), msg))

    # -- connections -----------------------------------------------------------

    def _switch(self, sm: int, conn: int) -> None:
        cur = self.s_cur[sm]
        if cur == conn:
            return
        self.conns_seen.add(conn)
        self.s_conns[sm].add(conn)
        node = self.s_node[sm]
        if cur >= 0:
            layers = self.s_layers[sm]
            if layers is None:
                layers = self.s_layers[sm] = {}
            layers[cur] = node
            node = self.s_node[sm] = layers.pop(conn, None)
        if node is not None:
            self.started.add(conn)
        self.s_cur[sm] = conn

    # -- the pass, one record at a time ------------------------------------------

    def feed(self, chunk, key: TraceKey) -> None:
        """Process one chunk of records (``key`` must cover the chunk's ids)."""
        check_widths(key, self.source_name)
        self.key = key
        self._grow(key)
        # In blocks: the records as Python values are what the pass holds besides
        # its own state, so a bounded block keeps memory bounded.
        for lo in range(0, len(chunk), BLOCK):
            block = chunk[lo : lo + BLOCK]
            for t, op, flags, sm, a, n in zip(
                *(block[f].tolist() for f in ("t", "op", "flags", "sm", "a", "n")), strict=True
            ):
                self.records += 1
                if self.records >= self.next_commit:
                    self._commit()
                if op == RUN:
                    self._run(t, sm, a)
                else:
                    self._record(Step(self.records, t, op, flags, sm, a, n))

    def _commit(self) -> None:
        """Fold the settled prefix of the paths (:func:`cpasim.analysis.pathlog.commit`).

        "Active" SMs recorded within the last half interval.  A long unsettled
        stretch (an idle SM pins its branch point) is walked again by every
        commit: they are spaced out to match."""
        since = self.records - self.commit_every // 2
        active = [node for node, rec in zip(self.s_node, self.s_rec, strict=True) if rec >= since]
        folded, walked = commit(active, self._others(since))
        self.folded += folded
        self.next_commit = self.records + max(self.commit_every, 4 * (walked - folded))

    def _record(self, r: Step) -> None:
        """One record: the edge from its SM's previous node, the dependencies its op
        adds, its node (:meth:`_node`) and what the op changes."""
        sm = r.sm
        last = self.s_last[sm]
        r.dt = r.t - last if last is not None else NAN  # NaN: the SM's first record
        r.si = self.s_state[sm]
        lent = self._lent_since_last(sm, r.t)
        if self.tf.scale:
            f = self._factor(sm, r.si)
            r.w, r.lent = r.dt * f, lent * f
        else:
            r.w, r.lent = r.dt, lent
        r.wk = self.s_wk[sm]
        self.s_last[sm] = r.t
        self.s_rec[sm] = r.rec
        if r.op in QUEUE_EDGES:
            key = (sm << 22) | (r.a << 1) | QUEUE_EDGES[r.op]
            self.qedges[key] = self.qedges.get(key, 0) + 1
        if self.s_linked[sm]:
            self._answer(r)
        OPS[r.op](self, r)
        if r.linked and r.wk == ON_LINK:
            self.s_wk[sm] = NOT_WAITING
        if self.s_is_end[sm]:
            self.ends[self.s_cur[sm]] = [r.t, r.node, sm]

    # -- who runs on whose core (``run``: not a node) ------------------------------

    def _run(self, t: float, sm: int, a: int) -> None:
        """``run(to)``: from ``t`` on, SM ``sm`` runs on the core SM ``a`` holds (``a ==
        sm``: on its own again).  The SM it ran on before gets its core back once no
        other SM runs there; the one it runs on now has lent its core."""
        host = self.s_host[sm]
        new = a if a != sm else -1
        if host == new:
            return
        if host >= 0:
            self.s_guests[host] -= 1
            if not self.s_guests[host]:
                self.s_lent[host] = self._lent_since_last(host, t)
                self.s_lent_from[host] = NAN
        self.s_host[sm] = new
        if new >= 0:
            self.s_guests[new] += 1
            if self.s_guests[new] == 1:
                self.s_lent_from[new] = t

    def _lent_since_last(self, sm: int, t: float) -> float:
        """The time SM ``sm`` had its core lent between its last record and ``t``, taken
        out of its running total (0 before its first record: no edge to charge)."""
        last = self.s_last[sm]
        lent = self.s_lent[sm]
        self.s_lent[sm] = 0.0
        since = self.s_lent_from[sm]
        if since == since:  # lent now
            lent += t - (since if last is None or since > last else last)
        if last is None:
            return 0.0
        return lent

    def _depend(self, r: Step, node, cp: float, w: float, code: int) -> None:
        """A dependency of the record's node: kept if its cp + w beats the one so far."""
        if node is not None and (r.dep is None or cp + w > r.dcp + r.dw):
            r.dep, r.dcp, r.dw, r.dcode = node, cp, w, code

    def _node(self, r: Step) -> None:
        """The record's node: ``cp = max(cp(previous node) + w_intra, cp(dep) + w_dep)``.

        ``w_intra`` is ``dt x scale`` of the state the SM leaves, or 0 while it
        waits (the time is reported as waiting).  Ties keep the SM's own path.  A
        start SM's first record in a connection without a path starts one at 0."""
        sm, dep, dt = r.sm, r.dep, r.dt
        node = self.s_node[sm]
        new = None
        if dt == dt:  # not the SM's first record
            icode = intra_code(sm, r.si)
            table = self.s_wait[sm] if r.wk else self.s_act[sm]
            table[r.si] = table.get(r.si, 0.0) + dt
            w, wait, lent = (0.0, dt, 0.0) if r.wk else (r.w, 0.0, r.lent)
            if node is not None:
                icp = node[CP] + w
                if dep is None:
                    new = [node, node[DEPTH] + 1, icode, w, wait, icp, -1, 0.0, lent]
                else:
                    bcp = r.dcp + r.dw
                    if bcp > icp:
                        new = [dep, dep[DEPTH] + 1, r.dcode, r.dw, 0.0, bcp, icode, bcp - icp, 0.0]
                    else:
                        new = [node, node[DEPTH] + 1, icode, w, wait, icp, r.dcode, icp - bcp, lent]
        if new is None:
            if dep is not None:
                new = [dep, dep[DEPTH] + 1, r.dcode, r.dw, 0.0, r.dcp + r.dw, -1, 0.0, 0.0]
            elif node is None and self.s_is_start[sm] and self.s_cur[sm] not in self.started:
                new = self._start(r.t, sm)
        self.s_node[sm] = r.node = new

    def _stop_waiting(self, r: Step, waits: int) -> None:
        """The wait on the record's queue, if the SM was in one of kind ``waits``, ends."""
        if r.wk == waits and self.s_wq[r.sm] == r.a:
            self.s_wk[r.sm] = r.wk = NOT_WAITING

    # -- one method per op, in the words of docs/annotations.md ----------------------

    def _begin(self, r: Step) -> None:
        """``begin``: the SM enters ``state``.  Time before this record is charged to
        the previous state."""
        sm, to = r.sm, r.a + 1
        enter = self.s_enter[sm]
        spent = r.t - enter if enter is not None else 0.0
        tr = self.transitions.setdefault((sm, self.s_from[sm], r.si, to), [0, 0.0])
        tr[0] += 1
        tr[1] += spent
        self._node(r)
        self.s_state[sm], self.s_from[sm], self.s_enter[sm] = to, r.si, r.t

    def _enq(self, r: Step) -> None:
        """``enq(q,n)``: n units appended.  If q declares a capacity C, the node
        depends on the ``deq`` nodes that freed the slots of the units added
        (:meth:`_slots`).  A ``wait_full`` ends here."""
        Q = self.queues[r.a]
        self._slots(r, Q)
        self._node(r)
        if r.n > 0:
            Q.put(r.n, r.node, r.t, self.s_cur[r.sm], r.sm)
        self._stop_waiting(r, ON_FULL)

    def _reserve(self, r: Step) -> None:
        """``reserve(q,n)``: like ``enq`` for dependencies on freed space, but adds
        no units."""
        self._slots(r, self.queues[r.a])
        self._node(r)
        self._stop_waiting(r, ON_FULL)

    def _slots(self, r: Step, Q: QueueState) -> None:
        """The dependency on the ``deq`` that freed the slot of each unit added: for
        the k-th unit ever enqueued, the one that dequeued unit k - C, with weight
        ``c = t - (time the last of those slots became free)`` if the SM was blocked
        by ``wait_full`` on q and the slot freed after the wait began, else 0."""
        sm, a, n = r.sm, r.a, r.n
        waiting = r.wk == ON_FULL and self.s_wq[sm] == a
        if Q.cap >= 0 and n > 0:
            units = [] if Q.edgewise else None
            best, bsm, freed_t = Q.slots(n, self.s_wt[sm] if waiting else INF, units)
            c = r.t - freed_t if freed_t is not None else 0.0
            w = c * Q.comm
            if units is not None:
                best, bsm, w = self._edge_pick(units, Q, sm, -1, c)
            elif Q.broken:
                best = None
            if best is not None:
                self._depend(r, best, best[CP], w, inter_code(bsm, sm, a + 1))
        if waiting:
            Q.wait_full_ns += r.t - self.s_wt[sm]

    def _deq(self, r: Step) -> None:
        """``deq(q,n)``: the node depends on the nodes that enqueued each of the n
        units taken (:meth:`_take`); ``deq`` removes the units."""
        took = self._take(r, remove=True)
        self._node(r)
        Q = self.queues[r.a]
        if Q.cap >= 0 and took:
            Q.free(Q.head - took, Q.head, r.node, r.t, r.sm)
        self._stop_waiting(r, ON_EMPTY)

    def _peek(self, r: Step) -> None:
        """``peek(q,n)``: as ``deq``, but the units stay."""
        self._take(r, remove=False)
        self._node(r)
        self._stop_waiting(r, ON_EMPTY)

    def _take(self, r: Step, remove: bool) -> int:
        """The dependencies of taking n units (-1: all) from q, in FIFO order; returns
        how many were taken.

        Every edge carries ``c = t - (arrival of the latest unit)`` if the SM was
        blocked by ``wait_empty`` on q and that unit arrived after the wait began,
        else 0.  Taking more units than q holds is an error (``--lenient``: a counted
        warning).  The consumer takes up the connection of the first unit that
        carries one; units of other connections do not join its path."""
        sm, a, n = r.sm, r.a, r.n
        Q = self.queues[a]
        held = Q.tail - Q.head
        if n < 0:
            n = held
        elif n > held:
            self._short(r.rec, sm, "deq" if remove else "peek", a, n, held)
            n = held
        waiting = r.wk == ON_EMPTY and self.s_wq[sm] == a
        if n:
            p0 = Q.head
            cur = self.s_cur[sm]
            units = [] if Q.edgewise else None
            best, bsm, newest, ncur = Q.take(n, remove, cur, r.t, units)
            if ncur != cur:
                self._switch(sm, ncur)
                cur = ncur
            if Q.extra and Q.cap < 0:
                # Credit what-if: the unit k positions earlier feeds this one.
                units = [] if Q.edgewise else None
                best, bsm = Q.shifted(p0 - Q.extra, p0 + n - Q.extra, cur, units)
            c = 0.0
            if waiting and newest > self.s_wt[sm]:
                c = r.t - newest
                Q.comm_sum += c
                Q.comm_n += 1
                if c > Q.comm_max:
                    Q.comm_max = c
            w = c * Q.comm
            if units is not None:
                best, bsm, w = self._edge_pick(units, Q, sm, cur, c)
            elif Q.broken:
                best = None
            if best is not None:
                self._depend(r, best, best[CP], w, inter_code(bsm, sm, a + 1))
        if waiting:
            Q.wait_empty_ns += r.t - self.s_wt[sm]
        return n

    def _resize(self, r: Step) -> None:
        """``resize(q,n)``: the queue now holds exactly n units (anonymous units with
        no producer are appended, or units are dropped from the back)."""
        self._node(r)
        self.queues[r.a].resize(r.n, r.t, r.sm)

    def _wait_empty(self, r: Step) -> None:
        """``wait_empty(q,n)``: the SM is blocked until a record takes units from q;
        waiting on a queue that already holds n units is a warning."""
        self._node(r)
        Q = self.queues[r.a]
        Q.waits_empty += 1
        held = Q.tail - Q.head
        if held >= r.n:
            self._warn(("wait_empty", r.a), r.rec, wait_empty_warning(self._qname(r.a), held, r.n))
        self._wait(r, ON_EMPTY)

    def _wait_full(self, r: Step) -> None:
        """``wait_full(q,n)``: the SM is blocked until a record adds to q; waiting on
        a queue with room for n more units is a warning."""
        self._node(r)
        Q = self.queues[r.a]
        Q.waits_full += 1
        held = Q.tail - Q.head
        if Q.cap < 0 or held + r.n <= Q.cap:
            self._warn(("wait_full", r.a), r.rec, wait_full_warning(self._qname(r.a), held, Q.cap))
        self._wait(r, ON_FULL)

    def _wait(self, r: Step, waits: int) -> None:
        """From this record until the one that satisfies it, the SM's intra edge has
        weight 0 and its time is reported as waiting."""
        self.s_wk[r.sm] = r.wk = waits
        self.s_wq[r.sm] = r.a
        self.s_wt[r.sm] = r.t

    def _link(self, r: Step) -> None:
        """``link(to)``: the target SM's next node depends on this node with weight 0
        (:meth:`_answer`), and the emitter waits (weight 0) until some SM links back
        to it."""
        self._node(r)
        sm, to = r.sm, r.a
        self.s_linked[to] = True
        self.s_pend[to] = r.node
        self.s_pendsm[to] = sm
        self.s_pendconn[to] = self.s_cur[sm]
        self.links[(sm, to)] = self.links.get((sm, to), 0) + 1
        self.s_wk[sm] = r.wk = ON_LINK
        self.s_wq[sm] = -1
        self.s_wt[sm] = r.t
        r.linked = False  # it now waits, whether or not it was linked to

    def _answer(self, r: Step) -> None:
        """A ``link`` made to the SM: its node depends on the linking node (weight 0)
        and it takes up the linking SM's connection."""
        sm = r.sm
        dep, dsm, conn = self.s_pend[sm], self.s_pendsm[sm], self.s_pendconn[sm]
        self.s_linked[sm] = False
        self.s_pend[sm] = None
        r.linked = True
        if conn >= 0 and conn != self.s_cur[sm]:
            self._switch(sm, conn)
        if dep is not None:
            self._depend(r, dep, dep[CP], 0.0, inter_code(dsm, sm, 0))

    def _identify(self, r: Step) -> None:
        """``identify(conn)``: the SM now works for connection ``conn``."""
        self._switch(r.sm, r.a)
        self._node(r)

    def _declare(self, r: Step) -> None:
        """``declare``: queue metadata (capacity, whether units carry connection ids),
        before first use."""
        self._node(r)
        Q = self.queues[r.a]
        Q.cap = r.n
        Q.flow = bool(r.flags & FLAG_CONN_FLOW)

    def _start(self, t: float, sm: int) -> list:
        """The first node of a path: cp = 0 at a start SM's first record in its connection."""
        self.started.add(self.s_cur[sm])
        return [Summary(t, self.limit, self.s_base), 0, -1 - sm, 0.0, 0.0, 0.0, -1, 0.0, 0.0]

    def _edge_pick(self, units: list, Q: QueueState, sm: int, cur: int, c: float):
        """``(node, its SM, weight)`` of the dependency on the ``units`` taken from
        ``Q`` (an ``edgewise`` queue) by ``sm`` working for ``cur``, whose
        communication latency is ``c``: the longest path plus weight among the edges
        not broken, each weighing ``c`` times its own factor."""
        best, bsm, bw, bv = None, -1, 0.0, float("-inf")
        rules, consumer, factors = self.s_rule, self.s_rule[sm], self.tf.comm_factors
        for node, su, cu in units:
            if cu >= 0 and cu != cur:
                continue
            broken, f = edge_rule(Q.rule, rules[su], consumer, factors)
            if broken:
                continue
            w = c * f
            if node[CP] + w > bv:
                best, bsm, bw, bv = node, su, w, node[CP] + w
        return best, bsm, bw

    def end_lengths(self) -> dict[int, tuple[float, float | None]]:
        """Connection id → (time, path length) of its latest end-SM record so far
        (length ``None`` where no path reaches it)."""
        return {c: (t, None if node is None else node[CP]) for c, (t, node, _) in self.ends.items()}

    def transition_counts(self):
        """``(sm, from state, state, to state, visits, time in state)`` (state indices)."""
        for (sm, frm, si, to), (visits, time) in self.transitions.items():
            yield sm, frm, si, to, visits, time

    def queue_ops(self):
        """``(sm, queue, "in" | "out", ops)``: who adds to and takes from each queue."""
        m = (1 << 21) - 1
        for k, count in self.qedges.items():
            yield k >> 22, (k >> 1) & m, "out" if k & 1 else "in", count

    def _others(self, since: int):
        """Every path node the pass refers to but those of SMs active since record
        ``since``."""
        for rec, node in zip(self.s_rec, self.s_node, strict=True):
            if rec < since:
                yield node
        yield from self.s_pend
        for layers in self.s_layers:
            if layers:
                yield from layers.values()
        for q in self.queues:
            yield from q.handles()
        for end in self.ends.values():
            yield end[1]

    def snapshot(self) -> Snapshot:
        """Where the traced system stands after the records fed so far."""
        sms = tuple(
            SmState(
                recorded=self.s_last[sm] is not None,
                state=self.s_state[sm],
                conn=self.s_cur[sm],
                waits=self.s_wk[sm],
                queue=self.s_wq[sm] if self.s_wk[sm] in (ON_EMPTY, ON_FULL) else -1,
                called_by=self.s_pendsm[sm] if self.s_linked[sm] else -1,
                runs_on=self.s_host[sm],
            )
            for sm in range(len(self.s_last))
        )
        queues = tuple(
            QueueUnits(
                Q.cap,
                Q.flow,
                tuple(
                    (end - max(first, Q.head), conn, sm)
                    for first, end, _node, _t, conn, sm in Q.live
                    if end > max(first, Q.head)
                ),
            )
            for Q in self.queues
        )
        return Snapshot(sms, queues)

    def handles(self):
        """Every path node the pass still refers to."""
        return self._others(since=INF)


class Step:
    """One record on its way through :meth:`CriticalPathPass._record`: its fields,
    the intra edge it closes, the best dependency so far and the node it made."""

    __slots__ = (
        *("rec", "t", "op", "flags", "sm", "a", "n"),  # the record (``rec``: its number)
        *("dt", "w", "si", "wk", "linked"),  # intra edge; what the SM waited on; linked to
        "lent",  # the weighted part of the intra edge another SM ran on the SM's core
        *("dep", "dcp", "dw", "dcode", "node"),  # dependency: node, its cp, weight, code
    )

    def __init__(self, rec: int, t: float, op: int, flags: int, sm: int, a: int, n: int):
        self.rec, self.t, self.op, self.flags, self.sm, self.a, self.n = rec, t, op, flags, sm, a, n
        self.linked = False
        self.dep = None
        self.dcp = 0.0
        self.dw = 0.0
        self.dcode = -1
        self.node = None


#: The method of each op.
OPS = {
    BEGIN: CriticalPathPass._begin,
    ENQ: CriticalPathPass._enq,
    DEQ: CriticalPathPass._deq,
    PEEK: CriticalPathPass._peek,
    RESERVE: CriticalPathPass._reserve,
    RESIZE: CriticalPathPass._resize,
    WAIT_EMPTY: CriticalPathPass._wait_empty,
    WAIT_FULL: CriticalPathPass._wait_full,
    LINK: CriticalPathPass._link,
    IDENTIFY: CriticalPathPass._identify,
    DECLARE: CriticalPathPass._declare,
}
#: Queue ops that add to (0) or take from (1) a queue, for the queue-op counts.
QUEUE_EDGES = {ENQ: 0, RESERVE: 0, RESIZE: 0, DEQ: 1, PEEK: 1}
NAN = float("nan")
INF = float("inf")


def _matches(spec: tuple[str, ...], sys: str, sm: str, inst: str) -> bool:
    """``(sys, sm)`` matches every instance; ``(sys, sm, inst)`` one."""
    if len(spec) == 2:
        return spec == (sys, sm)
    return spec == (sys, sm, inst)
