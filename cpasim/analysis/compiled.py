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
from cpasim.tracing.records import BEGIN, DEQ, RECORD_DTYPE, TraceKey

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
        from cpasim.analysis.numba_cache import loading_uncollected

        with loading_uncollected():  # the first pass: numba loads, and its registries
            k = _kernel()
            state = k.new_state()
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
        self.state = state
        self.sms = np.zeros(0, k.SM)
        self.factored: set[int] = set()  # (sm << 21 | state index) whose factor is known
        self.conns = _new_conns(k, 1)
        self.queues = np.zeros(0, k.QUEUE)
        self.rings = np.zeros((0, 3), k.RING)
        self.warned = np.zeros((0, 3), np.int64)
        # per queue: its rule, broken, comm factor, extra, edgewise
        self.queue_rules: list[tuple] = []
        self.factors = np.array(transforms.comm_factors + [1.0], np.float64)
        self.s_base: list[int] = []
        self._base_ids: dict[tuple[str, str], int] = {}

    # -- tables that follow the growing key ------------------------------------

    def _grow(self, key: TraceKey) -> None:
        k = self.k
        n_sm, _, n_q, n_conn = key.sizes()
        old_sm = len(self.sms)
        if n_sm > old_sm:
            rows = np.zeros(n_sm - old_sm, k.SM)
            for f in _NONE_YET:
                rows[f] = -1
            rows["lent_from"] = np.nan
            names = key.sms[old_sm:n_sm]
            ids = self._base_ids
            base = [ids.setdefault((sys, name), len(ids)) for sys, name, _ in names]
            rows["base"] = base
            self.s_base += base
            rows["is_start"] = [_matches(self.start, *name) for name in names]
            rows["is_end"] = [_matches(self.end, *name) for name in names]
            rules = self.tf.sms_rules(NameSet.of_sms(names))
            rows["p_breaks"], rows["c_breaks"], rows["p_comms"], rows["c_comms"] = zip(
                *rules, strict=True
            )
            self.sms = np.concatenate([self.sms, rows])
            if self.tf.scale:
                sms = np.arange(old_sm, n_sm, dtype=np.int64)
                self._set_factors(sms, np.zeros_like(sms), key)
        if n_conn + 1 > len(self.conns):
            self.conns = np.concatenate([self.conns, _new_conns(k, n_conn + 1 - len(self.conns))])
        old_q = len(self.queues)
        if n_q > old_q:
            rows = np.zeros(n_q - old_q, k.QUEUE)
            rows["cap"] = -1
            rows["flow"] = 1
            rules = self.tf.queues_rules(NameSet.of_queues(key.queues[old_q:n_q]))
            effects = [queue_effect(self.tf, rule) for rule in rules]
            self.queue_rules += [
                (rule, *effect) for rule, effect in zip(rules, effects, strict=True)
            ]
            rows["breaks"], rows["comms"], _ = zip(*rules, strict=True)
            rows["broken"], rows["comm"], rows["extra"], rows["edgewise"] = zip(
                *effects, strict=True
            )
            self.queues = np.concatenate([self.queues, rows])
            self.rings = np.concatenate([self.rings, np.zeros((n_q - old_q, 3), k.RING)])
            self.warned = _pad(self.warned, (n_q, 3), 0)

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
        status, i = _run(k, k.Chunk(*cols), self.records, self._keyed_now(), self.state, self.meta)
        m = self.meta[0]
        rec = self.records + i + 1
        if status == k.ERR_SHORT:
            msg = short_take(
                self.key,
                rec,
                int(m["err_sm"]),
                int(m["err_q"]),
                int(m["err_n"]),
                int(m["err_held"]),
            )
            raise CpasimError(f"{self.source_name}: {msg} (use --lenient to count these)")
        if status == k.ERR_RESIZE:
            raise CpasimError(
                f"{self.source_name}: record {rec}: resize of queue "
                f"{self._qname(int(m['err_q']))} to {int(m['err_n'])} units"
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
        self.k.set_factors(self.state.lookups.factors, np.array(todo, np.int64), np.array(factors))

    def _qname(self, q: int) -> str:
        return sm_display(*self.key.queues[q])

    @property
    def live_nodes(self) -> int:
        """Path nodes in use (not yet folded or freed)."""
        return int(self.meta[0]["live"])

    @property
    def peak_nodes(self) -> int:
        return int(self.meta[0]["peak"])

    @property
    def folded(self) -> int:
        return int(self.meta[0]["folded"])

    def refcount_errors(self) -> int:
        """Nodes whose reference count disagrees with their holders (0 = consistent)."""
        return int(self.k.refcount_errors(self._keyed_now(), self.state, self.meta))

    def pool_bytes(self) -> int:
        """Bytes of every array the pass holds (nodes, summaries, queues, tables)."""
        return self.k.nbytes(self.state) + sum(a.nbytes for a in self._keyed_now())

    def _keyed_now(self):
        return self.k.Keyed(
            self.sms, self.conns, self.queues, self.rings, self.warned, self.factors
        )

    # -- results -----------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """As :meth:`CriticalPathPass.snapshot`."""
        k = self.k
        sms = tuple(
            SmState(
                recorded=bool(r["has_last"]),
                state=int(r["state"]),
                conn=int(r["conn"]),
                waits=int(r["wait_kind"]),
                queue=int(r["wait_q"]) if r["wait_kind"] in (ON_EMPTY, ON_FULL) else -1,
                called_by=int(r["link_sm"]) if r["linked"] else -1,
                runs_on=int(r["host"]),
            )
            for r in self.sms
        )
        queues = []
        keyed = self._keyed_now()
        for q, r in enumerate(self.queues):
            head = int(r["head"])
            units = tuple(
                (end - max(first, head), conn, sm)
                for first, end, conn, sm in k.live_units(keyed, self.state, q).tolist()
                if end > max(first, head)
            )
            queues.append(QueueUnits(int(r["cap"]), bool(r["flow"]), units))
        return Snapshot(sms, tuple(queues))

    def _py_codes(self) -> list[int]:
        """The edge codes of :mod:`cpasim.analysis.pathlog`, by code id."""
        k = self.k
        table = k.tables(self.state).codes[: self.meta[0]["ncodes"]]
        x, y, z = (table[f].astype(np.uint64) for f in ("x", "y", "z"))
        inter = np.uint64(INTER) | (x << np.uint64(42)) | (y << np.uint64(21)) | z
        codes = np.where(table["kind"] == k.K_INTRA, (x << np.uint64(21)) | y, inter).tolist()
        # Start codes are negative: -1 - sm.
        for i in np.flatnonzero(table["kind"] == k.K_START).tolist():
            codes[i] = -1 - int(table[i]["x"])
        return codes

    def _end_node(self, node: int) -> list:
        """``node`` as a path node whose parent summary holds the rest of its path."""
        k = self.k
        s, content = k.finish(self._keyed_now(), self.state, self.meta, node)
        row, edges = content.row[0], content.edges
        code = self._codes.__getitem__
        total = Summary(float(row["start"]), self.limit, self.s_base)
        for c in edges["order"][: row["norder"]].tolist():
            e = edges[c]
            total.edges[code(c)] = [
                float(e["time"]),
                float(e["wait"]),
                int(e["visits"]),
                float(e["lent"]),
            ]
        total.count = int(row["count"])
        listing = content.listing[: row["nlist"]]
        total.listing = list(
            zip(
                map(code, listing["code"].tolist()),
                listing["cp"].tolist(),
                listing["inc"].tolist(),
                listing["wait"].tolist(),
                strict=True,
            )
        )
        order = {int(b): int(v) for b, v in enumerate(content.first.tolist()) if v >= 0}
        total.first_visit = dict(sorted(order.items(), key=lambda kv: kv[1]))
        for c in np.flatnonzero(edges["loops"]).tolist():
            total.loops[code(c)] = int(edges[c]["loops"])
        for c in np.flatnonzero(edges["has_slack"]).tolist():
            total.slack[code(c)] = float(edges[c]["slack"])
        k.free_finished(self.state, self.meta, s)
        n = k.tables(self.state).nodes[node]
        loser = int(n["loser"])
        return [
            total,
            int(n["depth"]),
            code(int(n["code"])),
            float(n["inc"]),
            float(n["wait"]),
            float(n["cp"]),
            code(loser) if loser >= 0 else -1,
            float(n["margin"]),
            float(n["lent"]),
        ]

    def _ends(self):
        """``(connection, its end)`` in order of first end (as ``CriticalPathPass``)."""
        order = self.conns["end_order"]
        for c1 in np.argsort(order, kind="stable").tolist():
            if order[c1] >= 0:
                yield c1 - 1, self.conns[c1]

    def end_lengths(self) -> dict[int, tuple[float, float | None]]:
        """As :meth:`CriticalPathPass.end_lengths`."""
        nodes = self.k.tables(self.state).nodes
        out = {}
        for conn, e in self._ends():
            node = int(e["end_node"])
            out[conn] = (float(e["end_t"]), float(nodes[node]["cp"]) if node >= 0 else None)
        return out

    def view(self, details: bool = True) -> PassView:
        """The pass's results as the objects the reports read; without ``details``
        only what the paths need (no per-state, per-queue or transition tables)."""
        v = PassView()
        v.tf = self.tf
        v.key = self.key or TraceKey()
        v.records = self.records
        v.source_name = self.source_name
        self._codes = self._py_codes()
        sms = self.sms
        v.s_is_start = [bool(x) for x in sms["is_start"]]
        v.s_is_end = [bool(x) for x in sms["is_end"]]
        v.s_last = [
            float(t) if has else None
            for t, has in zip(sms["last_t"].tolist(), sms["has_last"].tolist(), strict=True)
        ]
        v.s_act, v.s_wait, v.s_conns = self._per_sm_tables() if details else ([], [], [])
        v.s_base = self.s_base
        v.ends = {
            conn: [
                float(e["end_t"]),
                self._end_node(int(e["end_node"])) if e["end_node"] >= 0 else None,
                int(e["end_sm"]),
            ]
            for conn, e in self._ends()
        }
        v.queues = self._queue_states() if details else []
        v.warnings = self._warnings()
        if not details:
            v._transitions, v._qedges, v.links = [], [], {}
            return v
        self._counts(v)
        return v

    def _queue_states(self) -> list[QueueState]:
        """Each queue's statistics, as the reference pass's ``QueueState``."""
        out = []
        for q, r in enumerate(self.queues.tolist()):
            r = dict(zip(self.queues.dtype.names, r, strict=True))
            Q = QueueState(q, *self.queue_rules[q][1:4])
            Q.cap, Q.flow, Q.head, Q.tail = r["cap"], bool(r["flow"]), r["head"], r["tail"]
            Q.occ_area = r["occ_area"]
            Q.occ_t = r["occ_t"] if r["has_occ"] else None
            Q.occ_t0 = r["occ_t0"] if r["has_occ"] else None
            Q.occ_max = r["occ_max"]
            Q.arrivals = r["arrivals"]
            Q.enq_t0 = r["enq_t0"] if r["has_enq"] else None
            Q.enq_t1 = r["enq_t1"] if r["has_enq"] else None
            Q.wait_empty_ns, Q.waits_empty = r["wait_empty_ns"], r["waits_empty"]
            Q.wait_full_ns, Q.waits_full = r["wait_full_ns"], r["waits_full"]
            Q.comm_sum, Q.comm_n, Q.comm_max = r["comm_sum"], r["comm_n"], r["comm_max"]
            out.append(Q)
        return out

    def _warnings(self) -> dict:
        """The first warning of each kind per queue, with its count."""
        k = self.k
        out = {}
        events = k.tables(self.state).warnings[: self.meta[0]["nwarn"]].tolist()
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
            out[wkey] = [int(self.warned[q, kind]), rec, msg]
        return out

    def _counts(self, v: PassView) -> None:
        """Transition, queue-op and link counts, onto ``v``."""
        k = self.k
        t = k.tables(self.state)
        transitions = t.transitions[: self.meta[0]["ntr"]]
        fields = ("sm", "came_from", "state", "to", "visits", "time")
        v._transitions = list(zip(*(transitions[f].tolist() for f in fields), strict=True))
        qops = t.qops[: self.meta[0]["nqe"]]
        v._qedges = list(zip(qops["key"].tolist(), qops["count"].tolist(), strict=True))
        keys, counts = k.dict_items(self.state.lookups.links)
        v.links = {
            (key_ >> 21, key_ & _M21): count
            for key_, count in zip(keys.tolist(), counts.tolist(), strict=True)
        }

    def _per_sm_tables(self):
        """Per SM: state index -> time active, -> time waiting, and the set of
        connections it worked for (as :class:`CriticalPathPass` keeps them)."""
        k = self.k
        n_sm = len(self.sms)
        act: list[dict[int, float]] = [{} for _ in range(n_sm)]
        wait: list[dict[int, float]] = [{} for _ in range(n_sm)]
        keys, cells = k.dict_items(self.state.lookups.cells)
        times = k.tables(self.state).cells[cells]
        for key_, a, w in zip(
            keys.tolist(), times["active"].tolist(), times["waiting"].tolist(), strict=True
        ):
            sm, si = key_ >> 21, key_ & _M21
            act[sm][si] = a
            wait[sm][si] = w
        conns: list[set[int]] = [set() for _ in range(n_sm)]
        for key_ in k.dict_items(self.state.lookups.worked)[0].tolist():
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


#: SM fields that start as -1 (none yet).
_NONE_YET = (
    "node",
    "wait_q",
    "link_node",
    "link_sm",
    "link_conn",
    "conn",
    "start_code",
    "cell",
    "host",
)


def _new_conns(k, n: int) -> np.ndarray:
    """Rows of connections whose path has not started nor ended."""
    rows = np.zeros(n, k.CONN)
    rows["end_node"] = rows["end_sm"] = rows["end_order"] = -1
    return rows


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

    with activity("compiling the critical-path analyzer with numba"):
        compile_kernel()
