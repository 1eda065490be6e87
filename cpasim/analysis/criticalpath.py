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
settled prefix of the active SMs' paths is folded into summaries
(:func:`cpasim.analysis.pathlog.commit`), which keeps memory flat.

**Speed.**  Whatever follows from the records alone -- each record's ``dt``
since its SM's previous record, the state it leaves, the intra edge code and
weight, the state-transition and queue-operation counts -- is computed per
block of records with numpy (:meth:`CriticalPathPass._prepare`).  The
per-record loop (:meth:`CriticalPathPass._run`) then only builds path nodes
and moves queue units; ``begin``, ``enq``, ``deq`` and ``wait_*`` are inlined
there, every other record takes the general :meth:`CriticalPathPass._record`.
Float sums are accumulated in record order either way, so results are
bit-identical to a record-at-a-time pass (``tests/test_analysis_regression.py``).
"""

from __future__ import annotations

import numpy as np

from cpasim.analysis.pathlog import CP, DEPTH, INTER, Summary, check_widths, commit
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
from cpasim.trace.records import (
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
        self.t_active = float("-inf")  # SMs with a record since then count as active
        # per SM
        self.s_last: list = []
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
        self.n_states = 0
        self._chunk = None  # the chunk being fed
        # per queue
        self.queues: list[QueueState] = []
        # per connection (-1 = none)
        self.started: set[int] = set()
        self.ends: dict[int, list] = {}  # conn -> [t, node, sm]
        self.conns_seen: set[int] = set()
        # compact graphs
        # (sm, from, state, to) packed 21 bits each -> [visits, time]
        self.transitions: dict[int, list] = {}
        # sm << 22 | queue << 1 | (1 = takes from, 0 = adds to) -> ops
        self.qedges: dict[int, int] = {}
        self.links: dict[tuple, int] = {}  # (sm, target) -> links
        self.warnings: dict[tuple, list] = {}  # kind -> [count, first record, message]

    # -- tables that follow the growing key ------------------------------------

    def _grow(self, key: TraceKey) -> None:
        n_sm, n_states, n_q, _ = key.sizes()
        tf = self.tf
        self.n_states = n_states
        self.s_rule += tf.sms_rules(NameSet.of_sms(key.sms[len(self.s_last) : n_sm]))
        for sm in range(len(self.s_last), n_sm):
            sys, name, inst = key.sms[sm]
            self.s_last.append(None)
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

    # -- per-chunk preprocessing ---------------------------------------------------

    def _prepare(self, chunk) -> tuple[list, list, list, list]:
        """What every record needs that follows from the records alone, with numpy.

        Per record: ``dt`` (time since the SM's previous record, NaN for its
        first), the intra-SM weight ``dt x scale`` of the state it leaves, that
        state's index and the intra edge code.  The state transitions and the
        queue operations of the chunk are counted here too (in record order,
        so the float sums are the same as one record at a time), and the SMs'
        last time, state and previous state are carried to the next chunk.
        """
        n = len(chunk)
        t = chunk["t"]
        op = chunk["op"]
        sm = chunk["sm"].astype(np.int64)
        a = chunk["a"].astype(np.int64)
        # Group the records by SM, keeping their order within each SM.
        # A radix sort when the ids fit in 16 bits (numpy's stable sort of int16).
        narrow = sm.astype(np.uint16) if len(self.s_last) <= 1 << 16 else sm
        order = np.argsort(narrow, kind="stable")
        ss = sm[order]
        head = np.empty(n, dtype=bool)
        head[0] = True
        np.not_equal(ss[1:], ss[:-1], out=head[1:])
        heads = np.flatnonzero(head)
        tails = np.append(heads[1:] - 1, n - 1)
        group = np.cumsum(head) - 1
        gsm = ss[heads].tolist()
        s_last, s_state, s_from, s_enter = self.s_last, self.s_state, self.s_from, self.s_enter
        nan = float("nan")
        c_last = np.array([nan if s_last[x] is None else s_last[x] for x in gsm])
        c_state = np.array([s_state[x] for x in gsm], dtype=np.int64)[group]
        ts = t[order]
        prev_t = np.empty(n)
        prev_t[1:] = ts[:-1]
        prev_t[heads] = c_last
        # The state an SM is in at each record: set by its latest earlier begin.
        as_ = a[order]
        is_begin = op[order] == BEGIN
        pos = np.arange(n)
        last_begin = np.maximum.accumulate(np.where(is_begin, pos, -1))
        prev_begin = np.empty(n, dtype=np.int64)
        prev_begin[0] = -1
        prev_begin[1:] = last_begin[:-1]
        in_group = prev_begin >= heads[group]
        si_s = np.where(in_group, as_[prev_begin] + 1, c_state)
        dt = np.empty(n)
        dt[order] = ts - prev_t
        si = np.empty(n, dtype=np.int64)
        si[order] = si_s
        # dt x 1.0 is dt: no factors needed for the identity.
        w = dt * self._factors(sm, si) if self.tf.scale else dt
        icode = (sm << 21) | si
        if is_begin.any():
            c_from = np.array([s_from[x] for x in gsm], dtype=np.int64)[group]
            c_enter = np.array([nan if s_enter[x] is None else s_enter[x] for x in gsm])[group]
            fr_s = np.where(in_group, si_s[prev_begin], c_from)
            spent_s = ts - np.where(in_group, ts[prev_begin], c_enter)
            spent_s[~in_group & np.isnan(c_enter)] = 0.0
            fr = np.empty(n, dtype=np.int64)
            fr[order] = fr_s
            spent = np.empty(n)
            spent[order] = spent_s
            b = np.flatnonzero(op == BEGIN)
            self._count_transitions(sm[b], fr[b], si[b], a[b] + 1, spent[b])
            # Carry each SM's state, previous state and time of entry.
            lb = last_begin[tails]
            for x, k, g in zip(gsm, lb.tolist(), heads.tolist(), strict=True):
                if k >= g:
                    s_state[x] = int(as_[k]) + 1
                    s_from[x] = int(si_s[k])
                    s_enter[x] = float(ts[k])
        for x, v in zip(gsm, ts[tails].tolist(), strict=True):
            s_last[x] = v
        self._count_queue_ops(op, sm, a)
        dts = dt.tolist()
        return dts, (w.tolist() if w is not dt else dts), si.tolist(), icode.tolist()

    def _factors(self, sm, si):
        """Per record, the scale factor of the state it leaves (``sm``, ``si``: columns)."""
        # Distinct (SM, state) pairs are few: match each once.
        cells, inv = np.unique(sm * (self.n_states + 1) + si, return_inverse=True)
        sms, sis = np.divmod(cells, self.n_states + 1)
        factor = self._factor
        table = [factor(x, y) for x, y in zip(sms.tolist(), sis.tolist(), strict=True)]
        return np.array(table, dtype=np.float64)[inv.reshape(-1)]

    def _count_transitions(self, sm, frm, si, to, spent) -> None:
        """Add the chunk's begins (in record order) to ``transitions``."""
        cols = np.stack([sm, frm, si, to], axis=1)
        width = self.n_states + 1
        if len(self.s_last) * width**3 < 1 << 62:
            compact = ((sm * width + frm) * width + si) * width + to
            _, first, inv = np.unique(compact, return_index=True, return_inverse=True)
        else:
            _, first, inv = np.unique(cols, axis=0, return_index=True, return_inverse=True)
        # Number the distinct transitions in order of first appearance.
        seen_order = np.argsort(first, kind="stable")
        rename = np.empty_like(seen_order)
        rename[seen_order] = np.arange(len(seen_order))
        inv = rename[inv.reshape(-1)]
        uniq_keys = [
            (((s << 21 | f) << 21) | i) << 21 | o for s, f, i, o in cols[first[seen_order]].tolist()
        ]
        transitions = self.transitions
        counts = np.bincount(inv, minlength=len(uniq_keys)).tolist()
        acc = np.array([transitions[k][1] if k in transitions else 0.0 for k in uniq_keys])
        np.add.at(acc, inv, spent)  # in record order, as one record at a time
        for k, c, s in zip(uniq_keys, counts, acc.tolist(), strict=True):
            tr = transitions.get(k)
            if tr is None:
                transitions[k] = [c, s]
            else:
                tr[0] += c
                tr[1] = s

    def _count_queue_ops(self, op, sm, a) -> None:
        """Who adds to (enq, reserve, resize) and takes from (deq, peek) each queue."""
        takes = (op == DEQ) | (op == PEEK)
        adds = (op == ENQ) | (op == RESERVE) | (op == RESIZE)
        sel = np.flatnonzero(takes | adds)
        if not len(sel):
            return
        keys = (sm[sel] << 22) | (a[sel] << 1) | takes[sel]
        uniq, first, counts = np.unique(keys, return_index=True, return_counts=True)
        qedges = self.qedges
        for j in np.argsort(first, kind="stable").tolist():
            k = int(uniq[j])
            qedges[k] = qedges.get(k, 0) + int(counts[j])

    def _sync_last(self, chunk, upto: int) -> None:
        """``s_last`` as of record ``upto`` of ``chunk`` (for a commit within it)."""
        rev_sm = chunk["sm"][:upto][::-1]
        uniq, idx = np.unique(rev_sm, return_index=True)
        times = chunk["t"][:upto][::-1][idx].tolist()
        s_last = self.s_last
        for x, v in zip(uniq.tolist(), times, strict=True):
            s_last[x] = v

    # -- the pass --------------------------------------------------------------

    def _start(self, t: float, sm: int) -> list:
        """The first node of a path: cp = 0 at a start SM's first record in its connection."""
        self.started.add(self.s_cur[sm])
        return [Summary(t, self.limit, self.s_base), 0, -1 - sm, 0.0, 0.0, 0.0, -1, 0.0]

    def feed(self, chunk, key: TraceKey) -> None:
        """Process one chunk of records (``key`` must cover the chunk's ids)."""
        check_widths(key, self.source_name)
        self.key = key
        self._grow(key)
        # In blocks: the per-record columns of a block are what the pass holds
        # besides its own state, so a bounded block keeps memory bounded.
        times = chunk["t"]
        for lo in range(0, len(chunk), BLOCK):
            self._feed_block(chunk[lo : lo + BLOCK], times, lo)

    def _feed_block(self, block, times, offset: int) -> None:
        """Records ``offset : offset + len(block)`` of a chunk whose times are ``times``."""
        n = len(block)
        # _prepare carries s_last to the block's end: keep the view before it for commits.
        last_before = self.s_last[:]
        cols = (
            block["t"].tolist(),
            block["op"].tolist(),
            block["sm"].tolist(),
            block["a"].tolist(),
            block["n"].tolist(),
            *self._prepare(block),
        )
        self._chunk = block
        base = self.records
        lo = 0
        while lo < n:
            i = self.next_commit - base - 1  # first record at which to commit
            if i <= lo:
                # "Active" = recorded within the last half interval (or this chunk).
                self.t_active = float(times[max(0, offset + lo - self.commit_every // 2)])
                final_last = self.s_last
                self.s_last = last_before[:]
                self._sync_last(block, lo)
                folded, walked = commit(self._active(), self._others())
                self.s_last = final_last
                self.folded += folded
                # A long unsettled stretch (an idle SM pins its branch point) is
                # walked again by every commit: space them out to match.
                self.next_commit = base + lo + 1 + max(self.commit_every, 4 * (walked - folded))
                continue
            hi = min(n, i)
            self._run(base, lo, hi, cols)
            lo = hi
        self.records = base + n
        self._chunk = None

    def _run(self, base: int, lo: int, hi: int, cols) -> None:
        """Records ``lo:hi`` of the block: the path node of each.

        ``begin``, ``deq``, ``enq`` and ``wait_*`` without a pending link are
        inlined (they are nearly every record); every other record goes
        through :meth:`_record`, which handles all cases.
        """
        s_node = self.s_node
        s_wk = self.s_wk
        s_wq = self.s_wq
        s_wt = self.s_wt
        s_linked = self.s_linked
        s_cur = self.s_cur
        s_act = self.s_act
        s_wait = self.s_wait
        s_is_start = self.s_is_start
        s_is_end = self.s_is_end
        queues = self.queues
        ends = self.ends
        started = self.started
        record = self._record
        inf = float("inf")
        for i, t, op, sm, a, n, dt, w, si, ic in zip(
            range(lo, hi), *(c[lo:hi] for c in cols), strict=True
        ):
            if s_linked[sm]:
                record(base, i, t, op, sm, a, n, dt, w, si, ic)
                continue
            if op == BEGIN:
                # The most common record: only the SM's own edge, no dependencies.
                node = s_node[sm]
                if node is not None:
                    if s_wk[sm]:
                        cell = s_wait[sm]
                        cell[si] = cell.get(si, 0.0) + dt
                        node = [node, node[DEPTH] + 1, ic, 0.0, dt, node[CP], -1, 0.0]
                    else:
                        cell = s_act[sm]
                        cell[si] = cell.get(si, 0.0) + dt
                        node = [node, node[DEPTH] + 1, ic, w, 0.0, node[CP] + w, -1, 0.0]
                    s_node[sm] = node
                else:
                    if dt == dt:  # not the SM's first record
                        if s_wk[sm]:
                            cell = s_wait[sm]
                            cell[si] = cell.get(si, 0.0) + dt
                        else:
                            cell = s_act[sm]
                            cell[si] = cell.get(si, 0.0) + dt
                    if s_is_start[sm] and s_cur[sm] not in started:
                        s_node[sm] = node = self._start(t, sm)
                if s_is_end[sm]:
                    ends[s_cur[sm]] = [t, node, sm]
                continue
            if (op == DEQ or op == ENQ) and queues[a].edgewise:  # noqa: SIM109
                record(base, i, t, op, sm, a, n, dt, w, si, ic)
                continue
            if op == DEQ:
                wk = s_wk[sm]
                Q = queues[a]
                held = Q.tail - Q.head
                if n < 0:
                    n = held
                elif n > held:
                    self._short(base + i + 1, sm, "deq", a, n, held)
                    n = held
                waiting = wk == ON_EMPTY and s_wq[sm] == a
                dep = None
                if n:
                    cur = s_cur[sm]
                    live = Q.live
                    seg = live[0]
                    pos = Q.head
                    if seg[1] - pos >= n and not Q.extra:
                        # QueueState.take for units from one segment, inlined.
                        occ_t = Q.occ_t
                        if occ_t is None:
                            Q.occ_t0 = t
                        else:
                            Q.occ_area += held * (t - occ_t)
                        Q.occ_t = t
                        _, end, best, newest, cu, bsm = seg
                        if cu >= 0 and cu != cur:
                            self._switch(sm, cu)
                        pos += n
                        if pos >= end:
                            live.popleft()
                        else:
                            live[0] = (pos, end, best, newest, cu, bsm)
                        Q.head = pos
                    else:
                        best, bsm, newest, ncur = Q.take(n, True, cur, t)
                        if ncur != cur:
                            self._switch(sm, ncur)
                            cur = ncur
                        if Q.extra and Q.cap < 0:
                            # Credit what-if: the unit k positions earlier feeds this one.
                            best, bsm = Q.shifted(pos - Q.extra, pos + n - Q.extra, cur)
                    c = 0.0
                    if waiting and newest > s_wt[sm]:
                        c = t - newest
                        Q.comm_sum += c
                        Q.comm_n += 1
                        if c > Q.comm_max:
                            Q.comm_max = c
                    if best is not None and not Q.broken:
                        dep = best
                        dw = c * Q.comm
                        dcp = best[CP]
                        dcode = INTER | (bsm << 42) | (sm << 21) | (a + 1)
                if waiting:
                    Q.wait_empty_ns += t - s_wt[sm]
            elif op == ENQ:
                wk = s_wk[sm]
                Q = queues[a]
                waiting = wk == ON_FULL and s_wq[sm] == a
                dep = None
                if Q.cap >= 0 and n > 0:
                    best, bsm, freed_t = Q.slots(n, s_wt[sm] if waiting else inf)
                    if best is not None and not Q.broken:
                        dep = best
                        dw = (t - freed_t if freed_t is not None else 0.0) * Q.comm
                        dcp = best[CP]
                        dcode = INTER | (bsm << 42) | (sm << 21) | (a + 1)
                if waiting:
                    Q.wait_full_ns += t - s_wt[sm]
            elif op == WAIT_EMPTY or op == WAIT_FULL:  # noqa: SIM109 - no tuple per record
                wk = s_wk[sm]
                waiting = False
                dep = None
            else:
                record(base, i, t, op, sm, a, n, dt, w, si, ic)
                continue
            # ---- deq / enq / wait: the intra-SM edge and the node ----
            node = s_node[sm]
            new = None
            if dt == dt:
                if wk:
                    w_in = 0.0
                    wd = dt
                    cell = s_wait[sm]
                    cell[si] = cell.get(si, 0.0) + dt
                else:
                    w_in = w
                    wd = 0.0
                    cell = s_act[sm]
                    cell[si] = cell.get(si, 0.0) + dt
                if node is not None:
                    icp = node[CP] + w_in
                    if dep is not None:
                        bcp = dcp + dw
                        if bcp > icp:
                            new = [dep, dep[DEPTH] + 1, dcode, dw, 0.0, bcp, ic, bcp - icp]
                        else:
                            new = [node, node[DEPTH] + 1, ic, w_in, wd, icp, dcode, icp - bcp]
                    else:
                        new = [node, node[DEPTH] + 1, ic, w_in, wd, icp, -1, 0.0]
            if new is None:
                if dep is not None:
                    new = [dep, dep[DEPTH] + 1, dcode, dw, 0.0, dcp + dw, -1, 0.0]
                elif node is None and s_is_start[sm] and s_cur[sm] not in started:
                    new = self._start(t, sm)
            s_node[sm] = new
            # ---- effects ----
            if op == DEQ:
                if Q.cap >= 0 and n:
                    Q.freed.append((Q.head - n, Q.head, new, t, sm))
            elif op == ENQ:
                if n > 0:
                    # QueueState.put, inlined.
                    tail = Q.tail
                    held = tail - Q.head
                    occ_t = Q.occ_t
                    if occ_t is None:
                        Q.occ_t0 = t
                    else:
                        Q.occ_area += held * (t - occ_t)
                    Q.occ_t = t
                    Q.live.append((tail, tail + n, new, t, s_cur[sm] if Q.flow else -1, sm))
                    Q.tail = tail = tail + n
                    held += n
                    if held > Q.occ_max:
                        Q.occ_max = held
                    Q.arrivals += n
                    if Q.enq_t0 is None:
                        Q.enq_t0 = t
                    Q.enq_t1 = t
                    if Q.cap >= 0:
                        Q.trim_freed()
            else:
                self._waits(base + i + 1, op, sm, a, n, t)
            if waiting:
                s_wk[sm] = NOT_WAITING
            if s_is_end[sm]:
                ends[s_cur[sm]] = [t, new, sm]

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

    def _waits(self, rec: int, op: int, sm: int, a: int, n: int, t: float) -> None:
        """Effects of ``wait_empty`` / ``wait_full``: the SM now waits on queue ``a``."""
        Q = self.queues[a]
        held = Q.tail - Q.head
        if op == WAIT_EMPTY:
            Q.waits_empty += 1
            if held >= n:
                self._warn(("wait_empty", a), rec, wait_empty_warning(self._qname(a), held, n))
            self.s_wk[sm] = ON_EMPTY
        else:
            Q.waits_full += 1
            if Q.cap < 0 or held + n <= Q.cap:
                self._warn(("wait_full", a), rec, wait_full_warning(self._qname(a), held, Q.cap))
            self.s_wk[sm] = ON_FULL
        self.s_wq[sm] = a
        self.s_wt[sm] = t

    def _record(self, base, i, t, op, sm, a, n, dt, w_in, si, icode) -> None:
        """Any record, in full: dependencies, its node, its effects."""
        rec = base + i + 1
        s_node = self.s_node
        s_wk = self.s_wk
        s_wq = self.s_wq
        s_wt = self.s_wt
        s_linked = self.s_linked
        s_cur = self.s_cur
        s_pend = self.s_pend
        queues = self.queues
        wk = s_wk[sm]
        # ---- dependencies (and connection switches) ----
        dep = None
        dcp = 0.0
        dw = 0.0
        dcode = -1
        linked = s_linked[sm]
        if linked:
            dep, dsm, pconn = s_pend[sm], self.s_pendsm[sm], self.s_pendconn[sm]
            s_linked[sm] = False
            s_pend[sm] = None
            if pconn >= 0 and pconn != s_cur[sm]:
                self._switch(sm, pconn)
            if dep is not None:
                dcp = dep[CP]
                dcode = INTER | (dsm << 42) | (sm << 21)
        Q = None
        if op == BEGIN:
            pass
        elif op == DEQ or op == PEEK:  # noqa: SIM109 - no tuple per record
            Q = queues[a]
            held = Q.tail - Q.head
            if n < 0:
                n = held
            elif n > held:
                self._short(rec, sm, "deq" if op == DEQ else "peek", a, n, held)
                n = held
            took = n
            if n:
                p0 = Q.head
                cur = s_cur[sm]
                units = [] if Q.edgewise else None
                best, bsm, newest, ncur = Q.take(n, op == DEQ, cur, t, units)
                if ncur != cur:
                    self._switch(sm, ncur)
                    cur = ncur
                if Q.extra and Q.cap < 0:
                    # Credit what-if: the unit k positions earlier feeds this one.
                    units = [] if Q.edgewise else None
                    best, bsm = Q.shifted(p0 - Q.extra, p0 + n - Q.extra, cur, units)
                c = 0.0
                if wk == ON_EMPTY and s_wq[sm] == a and newest > s_wt[sm]:
                    c = t - newest
                    Q.comm_sum += c
                    Q.comm_n += 1
                    if c > Q.comm_max:
                        Q.comm_max = c
                w = c * Q.comm
                if units is not None:
                    best, bsm, w = self._edge_pick(units, Q, sm, cur, c)
                if best is not None and (units is not None or not Q.broken):
                    bcp = best[CP]
                    if dep is None or bcp + w > dcp + dw:
                        dep = best
                        dcp = bcp
                        dw = w
                        dcode = INTER | (bsm << 42) | (sm << 21) | (a + 1)
            if wk == ON_EMPTY and s_wq[sm] == a:
                Q.wait_empty_ns += t - s_wt[sm]
        elif op == ENQ or op == RESERVE:  # noqa: SIM109
            Q = queues[a]
            if Q.cap >= 0 and n > 0:
                waiting = wk == ON_FULL and s_wq[sm] == a
                units = [] if Q.edgewise else None
                best, bsm, freed_t = Q.slots(n, s_wt[sm] if waiting else float("inf"), units)
                c = t - freed_t if freed_t is not None else 0.0
                w = c * Q.comm
                if units is not None:
                    best, bsm, w = self._edge_pick(units, Q, sm, -1, c)
                if best is not None and (units is not None or not Q.broken):
                    bcp = best[CP]
                    if dep is None or bcp + w > dcp + dw:
                        dep = best
                        dcp = bcp
                        dw = w
                        dcode = INTER | (bsm << 42) | (sm << 21) | (a + 1)
            if wk == ON_FULL and s_wq[sm] == a:
                Q.wait_full_ns += t - s_wt[sm]
        elif op == IDENTIFY:
            self._switch(sm, a)
        # ---- the intra-SM edge and the node ----
        node = s_node[sm]
        new = None
        if dt == dt:  # not the SM's first record
            if wk:
                w_in = 0.0
                wd = dt
                cell = self.s_wait[sm]
                cell[si] = cell.get(si, 0.0) + dt
            else:
                wd = 0.0
                cell = self.s_act[sm]
                cell[si] = cell.get(si, 0.0) + dt
            if node is not None:
                icp = node[CP] + w_in
                if dep is not None:
                    bcp = dcp + dw
                    if bcp > icp:
                        new = [dep, dep[DEPTH] + 1, dcode, dw, 0.0, bcp, icode, bcp - icp]
                    else:
                        new = [node, node[DEPTH] + 1, icode, w_in, wd, icp, dcode, icp - bcp]
                else:
                    new = [node, node[DEPTH] + 1, icode, w_in, wd, icp, -1, 0.0]
        if new is None:
            if dep is not None:
                new = [dep, dep[DEPTH] + 1, dcode, dw, 0.0, dcp + dw, -1, 0.0]
            elif node is None and self.s_is_start[sm] and s_cur[sm] not in self.started:
                new = self._start(t, sm)
        s_node[sm] = new
        # ---- effects of the record (state transitions were counted by _prepare) ----
        if op == BEGIN:
            pass
        elif Q is not None:
            if op == ENQ:
                if n > 0:
                    Q.put(n, new, t, s_cur[sm], sm)
                if wk == ON_FULL and s_wq[sm] == a:
                    s_wk[sm] = wk = NOT_WAITING
            elif op == RESERVE:
                if wk == ON_FULL and s_wq[sm] == a:
                    s_wk[sm] = wk = NOT_WAITING
            else:  # DEQ or PEEK
                if op == DEQ and Q.cap >= 0 and took:
                    Q.free(Q.head - took, Q.head, new, t, sm)
                if wk == ON_EMPTY and s_wq[sm] == a:
                    s_wk[sm] = wk = NOT_WAITING
        elif op == WAIT_EMPTY or op == WAIT_FULL:  # noqa: SIM109
            self._waits(rec, op, sm, a, n, t)
            wk = s_wk[sm]
        elif op == RESIZE:
            queues[a].resize(n, t, sm)
        elif op == LINK:
            s_linked[a] = True
            s_pend[a] = new
            self.s_pendsm[a] = sm
            self.s_pendconn[a] = s_cur[sm]
            self.links[(sm, a)] = self.links.get((sm, a), 0) + 1
            # The caller now waits until some SM links back to it.
            s_wk[sm] = ON_LINK
            s_wq[sm] = -1
            s_wt[sm] = t
            linked = False
        elif op == DECLARE:
            Q = queues[a]
            Q.cap = n
            Q.flow = bool(int(self._chunk["flags"][i]) & FLAG_CONN_FLOW)
        if linked and wk == ON_LINK:
            s_wk[sm] = NOT_WAITING
        if self.s_is_end[sm]:
            self.ends[s_cur[sm]] = [t, new, sm]

    def end_lengths(self) -> dict[int, tuple[float, float | None]]:
        """Connection id → (time, path length) of its latest end-SM record so far
        (length ``None`` where no path reaches it)."""
        return {c: (t, None if node is None else node[CP]) for c, (t, node, _) in self.ends.items()}

    def transition_counts(self):
        """``(sm, from state, state, to state, visits, time in state)`` (state indices)."""
        m = (1 << 21) - 1
        for k, (visits, time) in self.transitions.items():
            yield k >> 63, (k >> 42) & m, (k >> 21) & m, k & m, visits, time

    def queue_ops(self):
        """``(sm, queue, "in" | "out", ops)``: who adds to and takes from each queue."""
        m = (1 << 21) - 1
        for k, count in self.qedges.items():
            yield k >> 22, (k >> 1) & m, "out" if k & 1 else "in", count

    def _active(self):
        """Path nodes of SMs that recorded something lately."""
        since = self.t_active
        for last, node in zip(self.s_last, self.s_node, strict=True):
            if last is not None and last >= since:
                yield node

    def _others(self):
        """Every other path node the pass still refers to."""
        since = self.t_active
        for last, node in zip(self.s_last, self.s_node, strict=True):
            if last is None or last < since:
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
        yield from self.s_node
        yield from self.s_pend
        for layers in self.s_layers:
            if layers:
                yield from layers.values()
        for q in self.queues:
            yield from q.handles()
        for end in self.ends.values():
            yield end[1]


def _matches(spec: tuple[str, ...], sys: str, sm: str, inst: str) -> bool:
    """``(sys, sm)`` matches every instance; ``(sys, sm, inst)`` one."""
    if len(spec) == 2:
        return spec == (sys, sm)
    return spec == (sys, sm, inst)
