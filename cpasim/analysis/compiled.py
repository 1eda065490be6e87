"""The critical-path pass on the compiled kernel (:mod:`cpasim.analysis.kernel`).

:class:`CompiledPass` is fed like :class:`~cpasim.analysis.criticalpath.CriticalPathPass`
and gives bit-identical results; :meth:`CompiledPass.view` then turns its arrays
into a :class:`PassView` with the attributes :mod:`cpasim.analysis.report` and
:mod:`cpasim.analysis.dot` read from a pass (ends with their path summaries,
profile tables, queue statistics, transition and link counts), so every
consumer works unchanged.  numba is imported, and the kernel compiled or
loaded from its cache, on first use, not when :mod:`cpasim.analysis` is.
"""

from __future__ import annotations

import numpy as np

from cpasim.analysis.criticalpath import (
    COMMIT_EVERY,
    _matches,
    short_take,
    short_warning,
    wait_empty_warning,
    wait_full_warning,
)
from cpasim.analysis.pathlog import INTER, Summary, check_widths
from cpasim.analysis.queues import QueueState
from cpasim.analysis.snapshot import ON_EMPTY, ON_FULL, QueueUnits, SmState, Snapshot
from cpasim.analysis.transforms import NameSet, Transforms, queue_effect, sm_display
from cpasim.errors import CpasimError
from cpasim.trace.records import BEGIN, DEQ, RECORD_DTYPE, TraceKey

_M21 = (1 << 21) - 1


def _kernel():
    from cpasim.analysis.numba_cache import import_kernel

    return import_kernel()


_run_compiled = None


def _run(k, *args):
    """``k.run(*args)``; once compiled, its one overload called directly.  The
    dispatcher would work out the types of the nested tuples of every call anew
    (longer than a small chunk's records take), and :meth:`CompiledPass.feed`
    passes the same types every time."""
    global _run_compiled
    if _run_compiled is not None:
        return _run_compiled(*args)
    out = k.run(*args)
    signatures = getattr(k.run, "signatures", ())  # none with NUMBA_DISABLE_JIT
    if len(signatures) == 1:
        _run_compiled = k.run.get_overload(signatures[0])
    return out


class CompiledPass:
    """One what-if's pass on the compiled kernel; feed it every chunk, then :meth:`view`."""

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
        k = _kernel()
        self.k = k
        self.tf = transforms
        self.start = start
        self.end = end
        self.lenient = lenient
        self.limit = listing_limit
        self.source_name = source_name
        self.key: TraceKey | None = None
        self.records = 0
        self.meta = k.new_meta(max(0, listing_limit), max(1, commit_every), lenient)
        self.hot = k.new_hot()
        self.cold = k.new_cold()
        self.sm_i = np.zeros((0, k.NSI), np.int64)
        self.sm_f = np.zeros((0, k.NSF), np.float64)
        self.factored: set[int] = set()  # (sm << 21 | state index) whose factor is known
        self.started = np.zeros(1, np.int8)
        self.ends_i = np.full((1, 3), -1, np.int64)
        self.ends_t = np.zeros(1, np.float64)
        self.q_i = np.zeros((0, k.NQI), np.int64)
        self.q_f = np.zeros((0, k.NQF), np.float64)
        self.warn_cnt = np.zeros((0, 3), np.int64)
        # per queue: its rule, broken, comm factor, extra, edgewise
        self.queue_rules: list[tuple] = []
        self.factors = np.array(transforms.comm_factors + [1.0], np.float64)
        self.s_base: list[int] = []
        self._base_ids: dict[tuple[str, str], int] = {}

    # -- tables that follow the growing key ------------------------------------

    def _grow(self, key: TraceKey) -> None:
        k = self.k
        n_sm, _, n_q, n_conn = key.sizes()
        old_sm = self.sm_i.shape[0]
        if n_sm > old_sm:
            rows = np.zeros((n_sm - old_sm, k.NSI), np.int64)
            for f in (
                k.S_NODE,
                k.S_WQ,
                k.S_PEND,
                k.S_PENDSM,
                k.S_PENDCONN,
                k.S_CUR,
                k.S_STARTID,
                k.S_CELL,
                k.S_HOST,
            ):
                rows[:, f] = -1
            names = key.sms[old_sm:n_sm]
            ids = self._base_ids
            base = [ids.setdefault((sys, name), len(ids)) for sys, name, _ in names]
            rows[:, k.S_BASE] = base
            self.s_base += base
            rows[:, k.S_ISSTART] = [_matches(self.start, *name) for name in names]
            rows[:, k.S_ISEND] = [_matches(self.end, *name) for name in names]
            rules = self.tf.sms_rules(NameSet.of_sms(names))
            rows[:, k.S_PB], rows[:, k.S_CB], rows[:, k.S_PC], rows[:, k.S_CC] = zip(
                *rules, strict=True
            )
            self.sm_i = np.concatenate([self.sm_i, rows])
            rows_f = np.zeros((n_sm - old_sm, k.NSF))
            rows_f[:, k.SF_LENTFROM] = np.nan
            self.sm_f = np.concatenate([self.sm_f, rows_f])
            if self.tf.scale:
                sms = np.arange(old_sm, n_sm, dtype=np.int64)
                self._set_factors(sms, np.zeros_like(sms), key)
        if n_conn + 1 > len(self.started):
            self.started = _pad(self.started, (n_conn + 1,), 0)
            self.ends_i = _pad(self.ends_i, (n_conn + 1, 3), -1)
            self.ends_t = _pad(self.ends_t, (n_conn + 1,), 0.0)
        old_q = self.q_i.shape[0]
        if n_q > old_q:
            qi = np.zeros((n_q - old_q, k.NQI), np.int64)
            qf = np.zeros((n_q - old_q, k.NQF), np.float64)
            qi[:, k.Q_CAP] = -1
            qi[:, k.Q_FLOW] = 1
            rules = self.tf.queues_rules(NameSet.of_queues(key.queues[old_q:n_q]))
            effects = [queue_effect(self.tf, rule) for rule in rules]
            self.queue_rules += [
                (rule, *effect) for rule, effect in zip(rules, effects, strict=True)
            ]
            qi[:, k.Q_BREAKS], qi[:, k.Q_COMMS], _ = zip(*rules, strict=True)
            qi[:, k.Q_BROKEN], qf[:, k.QF_COMM], qi[:, k.Q_EXTRA], qi[:, k.Q_EDGEWISE] = zip(
                *effects, strict=True
            )
            self.q_i = np.concatenate([self.q_i, qi])
            self.q_f = np.concatenate([self.q_f, qf])
            self.warn_cnt = _pad(self.warn_cnt, (n_q, 3), 0)

    # -- the pass --------------------------------------------------------------

    def feed(self, chunk, key: TraceKey) -> None:
        """Process one chunk of records (``key`` must cover the chunk's ids)."""
        check_widths(key, self.source_name)
        self.key = key
        self._grow(key)
        k = self.k
        # Contiguous columns of the record's dtypes: one compiled signature whatever
        # the reader, and faster.
        cols = [np.ascontiguousarray(chunk[f], RECORD_DTYPE[f]) for f in RECORD_DTYPE.names]
        if self.tf.scale:
            self._match_factors(cols[1], cols[3], cols[4], key)
        keyed = self._keyed_now()
        status, i = _run(k, *cols, self.records, keyed, self.hot, self.meta, self.cold)
        m = self.meta
        rec = self.records + i + 1
        if status == k.ERR_SHORT:
            msg = short_take(
                self.key,
                rec,
                int(m[k.M_ERR_SM]),
                int(m[k.M_ERR_Q]),
                int(m[k.M_ERR_N]),
                int(m[k.M_ERR_HELD]),
            )
            raise CpasimError(f"{self.source_name}: {msg} (use --lenient to count these)")
        if status == k.ERR_RESIZE:
            raise CpasimError(
                f"{self.source_name}: record {rec}: resize of queue "
                f"{self._qname(int(m[k.M_ERR_Q]))} to {int(m[k.M_ERR_N])} units"
                " (expected a count >= 0)"
            )
        self.records += len(chunk)

    def _match_factors(self, op, sm, a, key: TraceKey) -> None:
        """Scale factors of the states the chunk's ``begin``s enter, where not yet known
        (``op``, ``sm``, ``a``: the chunk's columns)."""
        begins = op == BEGIN
        self._set_factors(sm[begins].astype(np.int64), a[begins].astype(np.int64) + 1, key)

    def _set_factors(self, sm, si, key: TraceKey) -> None:
        """Give the kernel the factors of SMs ``sm``'s state indices ``si`` (0 = the
        state before the first ``begin``), matching each (SM, state) once."""
        known = self.factored
        todo = [c for c in np.unique((sm << 21) | si).tolist() if c not in known]
        if not todo:
            return
        known.update(todo)
        sms, states = key.sms, key.states
        factors = self.tf.state_factors(
            NameSet.of_states(
                (*sms[c >> 21], states[(c & _M21) - 1] if c & _M21 else "(initial)") for c in todo
            )
        )
        self.k.set_factors(self.cold[4][5], np.array(todo, np.int64), np.array(factors))

    def _qname(self, q: int) -> str:
        return sm_display(*self.key.queues[q])

    @property
    def live_nodes(self) -> int:
        """Path nodes in use (not yet folded or freed)."""
        return int(self.meta[self.k.M_LIVE])

    @property
    def peak_nodes(self) -> int:
        return int(self.meta[self.k.M_PEAK])

    @property
    def folded(self) -> int:
        return int(self.meta[self.k.M_FOLDED])

    def refcount_errors(self) -> int:
        """Nodes whose reference count disagrees with their holders (0 = consistent)."""
        return int(self.k.refcount_errors(self._keyed_now(), self.hot, self.meta, self.cold[4][6]))

    def pool_bytes(self) -> int:
        """Bytes of every array the pass holds (nodes, summaries, queues, tables)."""
        ints, ints2, floats, sums, _dicts = self.cold
        lists = (ints, ints2, floats, *sums, *self.hot)
        total = sum(self.k.nbytes(lst) for lst in lists)
        return total + sum(a.nbytes for a in self._keyed_now())

    def _keyed_now(self):
        return self.k.Keyed(
            sm_i=self.sm_i,
            sm_f=self.sm_f,
            started=self.started,
            ends_i=self.ends_i,
            ends_t=self.ends_t,
            q_i=self.q_i,
            q_f=self.q_f,
            warn_cnt=self.warn_cnt,
            factors=self.factors,
        )

    # -- results -----------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """As :meth:`CriticalPathPass.snapshot`."""
        k = self.k
        rows = self.sm_i.tolist()
        sms = tuple(
            SmState(
                recorded=bool(r[k.S_HASLAST]),
                state=r[k.S_STATE],
                conn=r[k.S_CUR],
                waits=r[k.S_WK],
                queue=r[k.S_WQ] if r[k.S_WK] in (ON_EMPTY, ON_FULL) else -1,
                called_by=r[k.S_PENDSM] if r[k.S_LINKED] else -1,
                runs_on=r[k.S_HOST],
            )
            for r in rows
        )
        store = k.item(self.hot[0], k.I2_STORE)
        queues = []
        for q, r in enumerate(self.q_i.tolist()):
            head = r[k.Q_HEAD]
            units = tuple(
                (end - max(first, head), conn, sm)
                for first, end, conn, sm in k.live_units(self.q_i, store, q).tolist()
                if end > max(first, head)
            )
            queues.append(QueueUnits(r[k.Q_CAP], bool(r[k.Q_FLOW]), units))
        return Snapshot(sms, tuple(queues))

    def _py_codes(self) -> list[int]:
        """The edge codes of :mod:`cpasim.analysis.pathlog`, by code id."""
        k = self.k
        table = k.item(self.hot[0], k.I2_CODES)[: self.meta[k.M_NCODES]]
        x, y, z = (table[:, j].astype(np.uint64) for j in (1, 2, 3))
        inter = np.uint64(INTER) | (x << np.uint64(42)) | (y << np.uint64(21)) | z
        codes = np.where(table[:, 0] == k.K_INTRA, (x << np.uint64(21)) | y, inter).tolist()
        # Start codes are negative: -1 - sm.
        for i in np.flatnonzero(table[:, 0] == k.K_START).tolist():
            codes[i] = -1 - int(table[i, 1])
        return codes

    def _end_node(self, node: int) -> list:
        """``node`` as a path node whose parent summary holds the rest of its path."""
        k = self.k
        s = k.finish(self._keyed_now(), self.hot, self.meta, self.cold, node)
        item = k.item
        ints, ints2, floats, sums, _dicts = self.cold
        sums_i, sums_f, sums_first, sums_li, sums_lf = sums
        smeta = item(ints2, 0)[s]
        si, sf = item(sums_i, s), item(sums_f, s)
        code = self._codes.__getitem__
        total = Summary(float(item(floats, 0)[s]), self.limit, self.s_base)
        for c in si[: smeta[k.SM_NORDER], k.C_ORDER].tolist():
            total.edges[code(c)] = [
                float(sf[c, k.CF_TIME]),
                float(sf[c, k.CF_WAIT]),
                int(si[c, k.C_VISITS]),
                float(sf[c, k.CF_LENT]),
            ]
        total.count = int(smeta[k.SM_COUNT])
        nlist = int(smeta[k.SM_NLIST])
        lf = item(sums_lf, s)[:nlist]
        total.listing = list(
            zip(
                map(code, item(sums_li, s)[:nlist].tolist()),
                lf[:, 0].tolist(),
                lf[:, 1].tolist(),
                lf[:, 2].tolist(),
                strict=True,
            )
        )
        fv = item(sums_first, s)
        order = {int(b): int(v) for b, v in enumerate(fv.tolist()) if v >= 0}
        total.first_visit = dict(sorted(order.items(), key=lambda kv: kv[1]))
        for c in np.flatnonzero(si[:, k.C_LOOPS]).tolist():
            total.loops[code(c)] = int(si[c, k.C_LOOPS])
        for c in np.flatnonzero(si[:, k.C_HASSLACK]).tolist():
            total.slack[code(c)] = float(sf[c, k.CF_SLACK])
        k.release_summary(self.meta, self.cold, s)
        ni = item(self.hot[0], k.I2_NI)[node]
        nf = item(self.hot[1], k.F2_NF)[node]
        loser = int(ni[k.N_LOSER])
        return [
            total,
            int(ni[k.N_DEPTH]),
            code(int(ni[k.N_CODE])),
            float(nf[k.F_INC]),
            float(nf[k.F_WAIT]),
            float(nf[k.F_CP]),
            code(loser) if loser >= 0 else -1,
            float(nf[k.F_MARGIN]),
            float(nf[k.F_LENT]),
        ]

    def end_lengths(self) -> dict[int, tuple[float, float | None]]:
        """As :meth:`CriticalPathPass.end_lengths`."""
        k = self.k
        cp = k.item(self.hot[1], k.F2_NF)
        out = {}
        seq = self.ends_i[:, 2]
        for c1 in np.argsort(seq, kind="stable").tolist():  # in order of first end, as view()
            if seq[c1] < 0:
                continue
            node = int(self.ends_i[c1, 0])
            out[c1 - 1] = (float(self.ends_t[c1]), float(cp[node, k.F_CP]) if node >= 0 else None)
        return out

    def view(self, details: bool = True) -> PassView:
        """The pass's results as the objects the reports read; without ``details``
        only what the paths need (no per-state, per-queue or transition tables)."""
        k = self.k
        key = self.key or TraceKey()
        self._codes = self._py_codes()
        v = PassView()
        v.tf = self.tf
        v.key = key
        v.records = self.records
        v.source_name = self.source_name
        v.s_is_start = [bool(x) for x in self.sm_i[:, k.S_ISSTART]]
        v.s_is_end = [bool(x) for x in self.sm_i[:, k.S_ISEND]]
        v.s_last = [
            float(t) if has else None
            for t, has in zip(
                self.sm_f[:, k.SF_LAST].tolist(), self.sm_i[:, k.S_HASLAST].tolist(), strict=True
            )
        ]
        v.s_act, v.s_wait, v.s_conns = self._per_sm_tables() if details else ([], [], [])
        v.s_base = self.s_base
        seq = self.ends_i[:, 2]
        v.ends = {}
        for c1 in np.argsort(seq, kind="stable").tolist():
            if seq[c1] < 0:
                continue
            node = int(self.ends_i[c1, 0])
            v.ends[c1 - 1] = [
                float(self.ends_t[c1]),
                self._end_node(node) if node >= 0 else None,
                int(self.ends_i[c1, 1]),
            ]
        v.queues = []
        qi, qf = self.q_i, self.q_f
        for q in range(qi.shape[0] if details else 0):
            Q = QueueState(q, *self.queue_rules[q][1:4])
            r, f = qi[q].tolist(), qf[q].tolist()
            Q.cap = r[k.Q_CAP]
            Q.flow = bool(r[k.Q_FLOW])
            Q.head = r[k.Q_HEAD]
            Q.tail = r[k.Q_TAIL]
            Q.occ_area = f[k.QF_AREA]
            Q.occ_t = f[k.QF_OCCT] if r[k.Q_HASOCC] else None
            Q.occ_t0 = f[k.QF_OCCT0] if r[k.Q_HASOCC] else None
            Q.occ_max = r[k.Q_OCCMAX]
            Q.arrivals = r[k.Q_ARR]
            Q.enq_t0 = f[k.QF_ENQT0] if r[k.Q_HASENQ] else None
            Q.enq_t1 = f[k.QF_ENQT1] if r[k.Q_HASENQ] else None
            Q.wait_empty_ns = f[k.QF_WENS]
            Q.wait_full_ns = f[k.QF_WFNS]
            Q.waits_empty = r[k.Q_WE]
            Q.waits_full = r[k.Q_WF]
            Q.comm_sum = f[k.QF_CSUM]
            Q.comm_n = r[k.Q_COMMN]
            Q.comm_max = f[k.QF_CMAX]
            v.queues.append(Q)
        v.warnings = {}
        events = k.item(self.hot[0], k.I2_WARN)[: self.meta[k.M_NWARN]].tolist()
        for kind, q, rec, held, n, cap, sm, op in events:
            qname = self._qname(q)
            if kind == k.W_EMPTY:
                wkey = ("wait_empty", q)
                msg = wait_empty_warning(qname, held, n)
            elif kind == k.W_FULL:
                wkey = ("wait_full", q)
                msg = wait_full_warning(qname, held, cap)
            else:
                wkey = ("short", q)
                detail = short_take(self.key, rec, sm, q, n, held)
                msg = short_warning("deq" if op == DEQ else "peek", qname, detail)
            v.warnings[wkey] = [int(self.warn_cnt[q, kind]), rec, msg]
        if not details:
            v._transitions, v._qedges, v.links = [], [], {}
            return v
        ntr = int(self.meta[k.M_NTR])
        v._transitions = [
            (sm, frm, si, to, visits, time)
            for (sm, frm, si, to, visits), time in zip(
                k.item(self.hot[0], k.I2_TR)[:ntr, :5].tolist(),
                k.item(self.hot[3], k.F1_TR)[:ntr].tolist(),
                strict=True,
            )
        ]
        nqe = int(self.meta[k.M_NQE])
        qe = k.item(self.hot[0], k.I2_QE)[:nqe]
        v._qedges = list(zip(qe[:, 0].tolist(), qe[:, 1].tolist(), strict=True))
        keys, counts = k.dict_items(self.cold[4][3])
        v.links = {
            (key_ >> 21, key_ & _M21): count
            for key_, count in zip(keys.tolist(), counts.tolist(), strict=True)
        }
        return v

    def _per_sm_tables(self):
        """Per SM: state index -> time active, -> time waiting, and the set of
        connections it worked for (as :class:`CriticalPathPass` keeps them)."""
        k = self.k
        n_sm = self.sm_i.shape[0]
        act: list[dict[int, float]] = [{} for _ in range(n_sm)]
        wait: list[dict[int, float]] = [{} for _ in range(n_sm)]
        keys, cells = k.dict_items(self.cold[4][4])
        times = k.item(self.hot[1], k.F2_CELL)[cells]
        for key_, a, w in zip(
            keys.tolist(), times[:, k.X_ACT].tolist(), times[:, k.X_WAIT].tolist(), strict=True
        ):
            sm, si = key_ >> 21, key_ & _M21
            act[sm][si] = a
            wait[sm][si] = w
        conns: list[set[int]] = [set() for _ in range(n_sm)]
        for key_ in k.dict_items(self.cold[4][7])[0].tolist():
            conns[key_ >> 21].add(key_ & _M21)
        return act, wait, conns


class PassView:
    """A finished compiled pass, with the attributes the reports read from a pass."""

    def transition_counts(self):
        """``(sm, from state, state, to state, visits, time in state)`` (state indices)."""
        yield from self._transitions

    def queue_ops(self):
        """``(sm, queue, "in" | "out", ops)``: who adds to and takes from each queue."""
        for k, count in self._qedges:
            yield k >> 22, (k >> 1) & _M21, "out" if k & 1 else "in", count


def _pad(a: np.ndarray, shape: tuple[int, ...], fill) -> np.ndarray:
    """``a`` in the top-left corner of a new array of ``shape``, the rest ``fill``."""
    out = np.full(shape, fill, dtype=a.dtype)
    out[tuple(slice(0, s) for s in a.shape)] = a
    return out


def compile_kernel() -> None:
    """Compile the kernel now, or load it from numba's on-disk cache (``cache=True``
    keeps the machine code beside :mod:`cpasim.analysis.kernel`), by analysing a small
    synthetic pipeline with a what-if and a mark, which calls every compiled function.
    Set-up (``scripts/_env.sh``) runs this once, so that the first ``cpasim analyze``
    does not sit silent while numba compiles (``python -m cpasim.analysis.compiled``).
    """
    from cpasim.analysis import Transforms, analyze_many
    from cpasim.analysis.synthetic import PipelineSpec, pipeline_source

    spec = PipelineSpec(items=50)
    what_ifs = [Transforms(), Transforms(scale=[("tx:*", 0.5)], breaks=["tx:*"])]
    analyze_many(pipeline_source(spec), "tx:App", "rx:App", what_ifs, engine="compiled", mark=1e3)


if __name__ == "__main__":
    from cpasim.progress import activity

    with activity("compiling the critical-path analyzer (numba)"):
        compile_kernel()
