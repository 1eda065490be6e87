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
from cpasim.analysis.pathlog import INTER, Summary
from cpasim.analysis.queues import QueueState
from cpasim.analysis.transforms import NameSet, Transforms, sm_display
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
    (0.13 ms, more than many a chunk's records), and :meth:`CompiledPass.feed`
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
        self.act = np.zeros((0, 1), np.float64)
        self.wait = np.zeros((0, 1), np.float64)
        self.fac = np.ones((0, 1), np.float64)
        self.intra_id = np.full((0, 1), -1, np.int64)
        self.layer = np.full((0, 0), -1, np.int64)
        self.sconn = np.zeros((0, 0), np.int8)
        self.started = np.zeros(1, np.int8)
        self.ends_i = np.full((1, 3), -1, np.int64)
        self.ends_t = np.zeros(1, np.float64)
        self.q_i = np.zeros((0, k.NQI), np.int64)
        self.q_f = np.zeros((0, k.NQF), np.float64)
        self.warn_cnt = np.zeros((0, 3), np.int64)
        self.queue_rules: list[tuple[bool, float, int]] = []
        self.s_base: list[int] = []
        self._base_ids: dict[tuple[str, str], int] = {}
        self.n_states = 0

    # -- tables that follow the growing key ------------------------------------

    def _grow(self, key: TraceKey) -> None:
        k = self.k
        n_sm, n_states, n_q, n_conn = key.sizes()
        old_sm = self.sm_i.shape[0]
        old_w = self.act.shape[1]
        w = n_states + 1
        tf = self.tf
        if n_sm > old_sm:
            rows = np.zeros((n_sm - old_sm, k.NSI), np.int64)
            for f in (k.S_NODE, k.S_WQ, k.S_PEND, k.S_PENDSM, k.S_PENDCONN, k.S_CUR, k.S_STARTID):
                rows[:, f] = -1
            names = key.sms[old_sm:n_sm]
            ids = self._base_ids
            base = [ids.setdefault((sys, name), len(ids)) for sys, name, _ in names]
            rows[:, k.S_BASE] = base
            self.s_base += base
            rows[:, k.S_ISSTART] = [_matches(self.start, *name) for name in names]
            rows[:, k.S_ISEND] = [_matches(self.end, *name) for name in names]
            self.sm_i = np.concatenate([self.sm_i, rows])
            self.sm_f = np.concatenate([self.sm_f, np.zeros((n_sm - old_sm, k.NSF))])
        if n_sm > old_sm or w > old_w:
            self.act = _pad(self.act, (n_sm, w), 0.0)
            self.wait = _pad(self.wait, (n_sm, w), 0.0)
            self.intra_id = _pad(self.intra_id, (n_sm, w), -1)
            # Factors are matched lazily (NaN = not yet), for the states an SM
            # enters (:meth:`_match_factors`): most instance SMs use a few states.
            fac = _pad(self.fac, (n_sm, w), np.nan if tf.scale else 1.0)
            if tf.scale:
                fac[old_sm:n_sm, 0] = tf.state_factors(
                    NameSet.of_states((*key.sms[sm], "(initial)") for sm in range(old_sm, n_sm))
                )
            self.fac = fac
        self.n_states = n_states
        if n_sm > old_sm or n_conn > self.layer.shape[1]:
            self.layer = _pad(self.layer, (n_sm, n_conn), -1)
            self.sconn = _pad(self.sconn, (n_sm, n_conn), 0)
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
            rules = tf.queues_rules(NameSet.of_queues(key.queues[old_q:n_q]))
            self.queue_rules += rules
            qi[:, k.Q_BROKEN], qf[:, k.QF_COMM], qi[:, k.Q_EXTRA] = zip(*rules, strict=True)
            self.q_i = np.concatenate([self.q_i, qi])
            self.q_f = np.concatenate([self.q_f, qf])
            self.warn_cnt = _pad(self.warn_cnt, (n_q, 3), 0)

    # -- the pass --------------------------------------------------------------

    def feed(self, chunk, key: TraceKey) -> None:
        """Process one chunk of records (``key`` must cover the chunk's ids)."""
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
        fac = self.fac
        width = fac.shape[1]
        begins = op == BEGIN
        cells = sm[begins].astype(np.int64) * width + a[begins] + 1  # (sm, state index + 1)
        todo = cells[np.isnan(fac.ravel()[cells])]
        if not len(todo):
            return
        x, y = np.divmod(np.unique(todo), width)
        sms, states = key.sms, key.states
        fac[x, y] = self.tf.state_factors(
            NameSet.of_states(
                (*sms[i], states[j - 1]) for i, j in zip(x.tolist(), y.tolist(), strict=True)
            )
        )

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
        return int(self.k.refcount_errors(self._keyed_now(), self.hot, self.meta))

    def pool_bytes(self) -> int:
        """Bytes of every array the pass holds (nodes, summaries, queues, tables)."""
        ints, ints2, floats, sums, _dicts = self.cold
        lists = (ints, ints2, floats, *sums, *self.hot)
        total = sum(self.k.nbytes(lst) for lst in lists)
        return total + sum(a.nbytes for a in self._keyed_now())

    def _keyed_now(self) -> tuple:
        return (
            self.sm_i,
            self.sm_f,
            self.act,
            self.wait,
            self.fac,
            self.intra_id,
            self.layer,
            self.sconn,
            self.started,
            self.ends_i,
            self.ends_t,
            self.q_i,
            self.q_f,
            self.warn_cnt,
        )

    # -- results -----------------------------------------------------------------

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
            total.edges[code(c)] = [float(sf[c, 0]), float(sf[c, 1]), int(si[c, 0])]
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
        v.s_act = self.act.tolist() if details else []
        v.s_wait = self.wait.tolist() if details else []
        v.s_conns = [set(np.flatnonzero(row).tolist()) for row in self.sconn] if details else []
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
            broken, comm, extra = self.queue_rules[q]
            Q = QueueState(q, broken, comm, extra)
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
                k.item(self.hot[0], k.I2_TR)[:ntr].tolist(),
                k.item(self.hot[3], k.F1_TR)[:ntr].tolist(),
                strict=True,
            )
        ]
        nqe = int(self.meta[k.M_NQE])
        qe = k.item(self.hot[0], k.I2_QE)[:nqe]
        v._qedges = list(zip(qe[:, 0].tolist(), qe[:, 1].tolist(), strict=True))
        keys, counts = k.link_counts(self.cold[4][3])
        v.links = {
            (key_ >> 21, key_ & _M21): count
            for key_, count in zip(keys.tolist(), counts.tolist(), strict=True)
        }
        return v


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
