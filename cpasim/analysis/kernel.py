"""The compiled per-record loop of the critical-path pass (numba).

The same algorithm as :class:`cpasim.analysis.criticalpath.CriticalPathPass`
(the readable reference), on integer handles instead of Python objects:

- path nodes live in a pool (``ni[node] = parent, depth, code, loser, refs``,
  ``nf[node] = inc, wait, cp, margin, lent``); a parent ``>= 0`` is a node, ``<= -2``
  is summary ``-2 - parent``, ``-1`` is "no node".  Nodes are reference
  counted (children, SMs, queue units, pending links, ends) and go back to
  the pool when nothing refers to them, as Python's refcounting frees them;
- edge codes are dense ids into a code table (kind, x, y, z), so a summary's
  per-edge totals are arrays indexed by code id;
- summaries (:class:`cpasim.analysis.pathlog.Summary`) are rows of arrays;
  :func:`commit` is :func:`cpasim.analysis.pathlog.commit` on handles;
- queues keep their segments in ring buffers (live units, consumed units for
  the credit what-if, freed slots), regions of one shared segment store.

Every float is summed in the same order as the reference pass, so results are
bit-identical.

The arrays that grow with the pass live in typed lists (so the kernel can
replace them), but :func:`run` works on plain views of them: a typed-list
lookup, or the atomic reference count numba keeps on every array it passes
to a helper, costs more than a whole record.  Before each record :func:`run`
checks that every array has room for what the record may add, else grows
them: :func:`_grow` returns fresh views of every growable array and
:func:`run` rebinds all of them, so no view outlives its array.  Arrays
sized by the trace key are grown by the caller between chunks.

:func:`run` is a sequence of named steps, one per phase of a record (its
intra edge, the transition or queue edge it counts, its dependency, its
node, its effects), inlined by numba.  The steps take the arrays one by one:
a tuple of them, or a typed dict or list the step does not always use, costs
reference-count operations on every record.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import carray, njit, types
from numba.extending import intrinsic
from numba.typed import Dict, List

from cpasim.analysis.pathlog import SPLIT_MIN
from cpasim.analysis.snapshot import NOT_WAITING, ON_EMPTY, ON_FULL, ON_LINK
from cpasim.trace.records import (
    BEGIN,
    DECLARE,
    DEQ,
    ENQ,
    IDENTIFY,
    LINK,
    PEEK,
    RESERVE,
    RESIZE,
    RUN,
    WAIT_EMPTY,
    WAIT_FULL,
)

#: The arrays sized by the trace key, grown by the caller between chunks
#: (:class:`cpasim.analysis.compiled.CompiledPass`): per SM ints and floats
#: (``S_*``, ``SF_*``), per connection + 1 whether its path started and its end
#: (node, SM, order of first end; time), per queue ints and floats (``Q_*``,
#: ``QF_*``), warning counts (per kind) and scale_comm's factors (by entry).
Keyed = namedtuple(
    "Keyed",
    ["sm_i", "sm_f", "started", "ends_i", "ends_t", "q_i", "q_f", "warn_cnt", "factors"],
)

# node fields
N_PAR, N_DEPTH, N_CODE, N_LOSER, N_RC = 0, 1, 2, 3, 4
F_INC, F_WAIT, F_CP, F_MARGIN, F_LENT = 0, 1, 2, 3, 4
NNF = 5
NONE = -1

# code kinds
K_START, K_INTRA, K_INTER = 0, 1, 2

# per-SM ints
(
    S_STATE,
    S_FROM,
    S_NODE,
    S_WQ,
    S_WK,
    S_LINKED,
    S_PEND,
    S_PENDSM,
    S_PENDCONN,
    S_CUR,
    S_BASE,
    S_ISSTART,
    S_ISEND,
    S_HASLAST,
    S_LASTREC,
    S_STARTID,
    S_HASENTER,
    S_CELL,
    # what the what-if does to edges from (P) and to (C) the SM: a bit per entry
    # of breaks (B) and scale_comm (C) that holds for it (transforms.SmRule)
    S_PB,
    S_CB,
    S_PC,
    S_CC,
    # ``run``: the SM whose core it runs on (-1: its own), SMs running on its core
    S_HOST,
    S_GUESTS,
) = range(24)
NSI = 24
# per-SM floats; ``run``: since when its core is lent (NaN: not), time lent since
# its last record
SF_LAST, SF_ENTER, SF_WT, SF_LENTFROM, SF_LENT = 0, 1, 2, 3, 4
NSF = 5
# per (SM, state) cell, for the states each SM was in (not an SM x state table,
# which would grow with their product): int = intra edge code id (-1 = not yet),
# floats = scale factor, time active, time waiting
X_FAC, X_ACT, X_WAIT = 0, 1, 2

# per-queue ints; ring r's offset in the segment store, capacity, head and
# length are at Q_ROFF + r, Q_RCAP + r, Q_RH + r, Q_RN + r
(
    Q_CAP,
    Q_FLOW,
    Q_HEAD,
    Q_TAIL,
    Q_BROKEN,
    Q_EXTRA,
    Q_OCCMAX,
    Q_ARR,
    Q_WE,
    Q_WF,
    Q_COMMN,
    Q_HASOCC,
    Q_HASENQ,
) = range(13)
Q_ROFF, Q_RCAP, Q_RH, Q_RN = 13, 16, 19, 22
# a bit per entry of breaks and scale_comm whose queue glob matches
# (transforms.QueueRule), and whether each edge's SMs decide (else Q_BROKEN, QF_COMM)
Q_BREAKS, Q_COMMS, Q_EDGEWISE = 25, 26, 27
NQI = 28
# per-queue floats
QF_COMM, QF_AREA, QF_OCCT, QF_OCCT0, QF_ENQT0, QF_ENQT1, QF_WENS, QF_WFNS, QF_CSUM, QF_CMAX = range(
    10
)
NQF = 10
# rings of segments (first, end, node, conn, sm) + time
LIVE, PAST, FREED = 0, 1, 2
R_FIRST, R_END, R_NODE, R_CONN, R_SM = 0, 1, 2, 3, 4

# summary ints (smeta) and per-code columns
SM_RC, SM_COUNT, SM_NORDER, SM_NFIRST, SM_NLIST, SM_ROOTST, SM_ROOTG = range(7)
NSMETA = 7
C_VISITS, C_LOOPS, C_HASSLACK, C_ORDER = 0, 1, 2, 3
CF_TIME, CF_WAIT, CF_SLACK, CF_LENT = 0, 1, 2, 3
NCF = 4

# meta
(
    M_NFREE,
    M_NCODES,
    M_NTR,
    M_NQE,
    M_NWARN,
    M_ENDSEQ,
    M_NEXTCOMMIT,
    M_FOLDED,
    M_LIVE,
    M_PEAK,
    M_SFREE,
    M_NSUM,
    M_NPEND,
    M_STAMP,
    M_LIMIT,
    M_EVERY,
    M_LENIENT,
    M_ERR_SM,
    M_ERR_OP,
    M_ERR_Q,
    M_ERR_N,
    M_ERR_HELD,
    M_COMMITS,
    M_GROW_Q,
    M_NEED_LIVE,
    M_NEED_PAST,
    M_NEED_FREED,
    M_NEED_PEND,
    M_STORE_USED,
    M_NCELLS,
    M_NCAND,
    M_NEED_CAND,
) = range(32)
NMETA = 32

# status
OK, ERR_SHORT, ERR_RESIZE = 0, 1, 2

# warnings (kind, queue, record, held, n, cap, sm, op)
W_EMPTY, W_FULL, W_SHORT = 0, 1, 2

CACHE = 1 << 12

# where the growable arrays sit in the typed lists of new_hot()
I2_NI, I2_CODES, I2_TR, I2_QE, I2_WARN, I2_STORE, I2_TRC, I2_QEC, I2_IC, I2_SEEN = range(10)
I2_CELL, I2_CAND = 10, 11
F2_NF, F2_CELL = 0, 1
I1_FREE, I1_PEND = 0, 1
F1_TR, F1_STORE = 0, 1

_I1 = types.int64[::1]
_F1 = types.float64[::1]
_I2 = types.int64[:, ::1]
_F2 = types.float64[:, ::1]
_T4 = types.UniTuple(types.int64, 4)


# ---------------------------------------------------------------------------
# state


@njit(cache=True)
def new_hot():
    """The per-record arrays that grow with the pass, by dtype and rank (see :func:`run`)."""
    i2 = List.empty_list(_I2)
    i2.append(np.zeros((4096, 5), np.int64))  # I2_NI: node ints
    i2.append(np.zeros((256, 4), np.int64))  # I2_CODES: code table (kind, x, y, z)
    # I2_TR: transitions (sm, from, state, to, visits, cell of (sm, to))
    i2.append(np.zeros((256, 6), np.int64))
    i2.append(np.zeros((256, 2), np.int64))  # I2_QE: queue ops (key, count)
    i2.append(np.zeros((16, 8), np.int64))  # I2_WARN: first warning of each kind
    i2.append(np.zeros((1024, 5), np.int64))  # I2_STORE: segment store
    # Lookup caches in front of the typed dicts: small rows, so that the hot
    # part of each stays in the CPU cache.
    i2.append(np.full((CACHE, 4), -1, np.int64))  # I2_TRC: (sm|from, state|to, index, -)
    i2.append(np.full((CACHE, 2), -1, np.int64))  # I2_QEC: (queue-op key, index)
    i2.append(np.full((CACHE, 2), -1, np.int64))  # I2_IC: (inter code key, code id)
    i2.append(np.zeros((4096, 3), np.int64))  # I2_SEEN: commit marks (stamp, group, meet)
    i2.append(np.zeros((256, 1), np.int64))  # I2_CELL: (SM, state) cells: intra code id
    i2.append(np.zeros((16, 3), np.int64))  # I2_CAND: edges of an edgewise queue op
    f2 = List.empty_list(_F2)
    f2.append(np.zeros((4096, NNF), np.float64))  # F2_NF: node floats
    f2.append(np.zeros((256, 3), np.float64))  # F2_CELL: cells' factor, active, waiting
    i1 = List.empty_list(_I1)
    i1.append(np.arange(4095, -1, -1).astype(np.int64))  # I1_FREE: free node stack
    i1.append(np.zeros(1024, np.int64))  # I1_PEND: references released at a record's end
    f1 = List.empty_list(_F1)
    f1.append(np.zeros(256, np.float64))  # F1_TR: transition times
    f1.append(np.zeros(1024, np.float64))  # F1_STORE: segment times
    return i2, f2, i1, f1


def new_meta(limit: int, commit_every: int, lenient: bool) -> np.ndarray:
    meta = np.zeros(NMETA, np.int64)
    meta[M_NFREE] = 4096
    meta[M_LIMIT] = limit
    meta[M_EVERY] = commit_every
    meta[M_LENIENT] = 1 if lenient else 0
    meta[M_NEXTCOMMIT] = commit_every
    return meta


@njit(cache=True)
def new_cold():
    """Summaries and lookup tables (typed containers built here: cached)."""
    ints = List.empty_list(_I1)
    ints.append(np.zeros(16, np.int64))  # 0 summary free stack
    ints.append(np.zeros(256, np.int64))  # 1 scratch chain
    ints.append(np.zeros(64, np.int64))  # 2 commit: handles of the inactive holders
    ints.append(np.zeros(64, np.int64))  # 3 commit: active handles, then their groups
    ints.append(np.zeros(64, np.int64))  # 4 commit: branches of a split
    ints2 = List.empty_list(_I2)
    ints2.append(np.zeros((16, NSMETA), np.int64))  # 0 summary meta
    # 1 commit groups (chain0, meet, root, shared, fold point after the fold, its root)
    ints2.append(np.zeros((16, 6), np.int64))
    floats = List.empty_list(_F1)
    floats.append(np.zeros(16, np.float64))  # 0 summary start times
    sums = (
        List.empty_list(_I2),
        List.empty_list(_F2),
        List.empty_list(_I1),
        List.empty_list(_I1),
        List.empty_list(_F2),
    )
    dicts = (
        Dict.empty(_T4, types.int64),  # transition -> index
        Dict.empty(types.int64, types.int64),  # inter code key -> code id
        Dict.empty(types.int64, types.int64),  # queue-op key -> index
        Dict.empty(types.int64, types.int64),  # link (sm << 21 | target) -> count
        Dict.empty(types.int64, types.int64),  # (sm << 21 | state index) -> cell
        Dict.empty(types.int64, types.float64),  # (sm << 21 | state index) -> scale factor
        # (sm << 21 | conn) -> the SM's path node in a connection it is not working for
        Dict.empty(types.int64, types.int64),
        Dict.empty(types.int64, types.int64),  # (sm << 21 | conn) -> 1: connections worked for
    )
    return ints, ints2, floats, sums, dicts


@njit(cache=True)
def item(lst, k):
    """``lst[k]`` (typed-list access from Python without compiling list methods)."""
    return lst[k]


@njit(cache=True)
def nbytes(lst):
    total = 0
    for a in lst:
        total += a.size * a.itemsize
    return total


@njit(cache=True)
def dict_items(d):
    """The keys and values of a typed dict of ints, as two arrays."""
    keys = np.zeros(len(d), np.int64)
    values = np.zeros(len(d), np.int64)
    for j, (key, value) in enumerate(d.items()):
        keys[j] = key
        values[j] = value
    return keys, values


@njit(cache=True)
def live_units(q_i, rs_i, q):
    """The runs of units queue ``q`` holds, oldest first: ``(first, end, conn, sm)``
    (the oldest run may be partly taken: ``first`` before the head)."""
    n = q_i[q, Q_RN + LIVE]
    out = np.zeros((n, 4), np.int64)
    for j in range(n):
        idx = _ring_at(q_i, q, LIVE, j)
        out[j, 0] = rs_i[idx, R_FIRST]
        out[j, 1] = rs_i[idx, R_END]
        out[j, 2] = rs_i[idx, R_CONN]
        out[j, 3] = rs_i[idx, R_SM]
    return out


@njit(cache=True)
def set_factors(facs, keys, factors):
    """``facs[keys[j]] = factors[j]`` (see :func:`_cell`)."""
    for j in range(len(keys)):
        facs[keys[j]] = factors[j]


@intrinsic
def _data(typingctx, arr):
    """The data pointer of an array."""
    sig = types.CPointer(arr.dtype)(arr)

    def codegen(context, builder, signature, args):
        return context.make_array(signature.args[0])(context, builder, value=args[0]).data

    return sig, codegen


@njit(cache=True, inline="always")
def _view(a):
    """``a`` without its reference count: the per-record helpers then pass it for
    free (numba otherwise increments and decrements an atomic count per call).
    Valid while ``a`` itself is alive, i.e. during the :func:`run` call."""
    return carray(_data(a), a.shape)


# ---------------------------------------------------------------------------
# small growable helpers (cold paths)


@njit(cache=True)
def _grow1(a, need):
    """``a`` copied into a zeroed array of at least ``need`` entries (doubling)."""
    n = len(a)
    while n < need:
        n = n * 2 if n else 16
    b = np.zeros(n, a.dtype)
    b[: len(a)] = a
    return b


@njit(cache=True)
def _grow2i(a, need):
    n = a.shape[0]
    while n < need:
        n = n * 2 if n else 16
    b = np.zeros((n, a.shape[1]), np.int64)
    b[: a.shape[0]] = a
    return b


@njit(cache=True)
def _push(ints, k, pos, x):
    buf = ints[k]
    if pos >= len(buf):
        buf = _grow1(buf, pos + 1)
        ints[k] = buf
    buf[pos] = x


# ---------------------------------------------------------------------------
# nodes and reference counts


@njit(cache=True, inline="always")
def _new_node(ni, nf, free, meta, par, depth, code, inc, wait, cp, loser, margin, lent):
    """A node under node ``par`` (a summary parent's count is the caller's)."""
    k = meta[M_NFREE] - 1
    meta[M_NFREE] = k
    x = free[k]
    ni[x, N_PAR] = par
    ni[x, N_DEPTH] = depth
    ni[x, N_CODE] = code
    ni[x, N_LOSER] = loser
    ni[x, N_RC] = 0
    nf[x, F_INC] = inc
    nf[x, F_WAIT] = wait
    nf[x, F_CP] = cp
    nf[x, F_MARGIN] = margin
    nf[x, F_LENT] = lent
    if par >= 0:
        ni[par, N_RC] += 1
    live = meta[M_LIVE] + 1
    meta[M_LIVE] = live
    if live > meta[M_PEAK]:
        meta[M_PEAK] = live
    return x


@njit(cache=True, inline="always")
def _drop(meta, pend, x):
    """Release one reference to node ``x`` at the end of the current record."""
    if x >= 0:
        k = meta[M_NPEND]
        pend[k] = x
        meta[M_NPEND] = k + 1


@njit(cache=True, inline="always")
def _decref(ni, free, meta, x):
    """Release a reference to node ``x``; returns the summary handle whose count
    the caller must release too (the chain was freed up to it), else -1."""
    while x >= 0:
        rc = ni[x, N_RC] - 1
        ni[x, N_RC] = rc
        if rc > 0:
            return -1
        par = ni[x, N_PAR]
        k = meta[M_NFREE]
        free[k] = x
        meta[M_NFREE] = k + 1
        meta[M_LIVE] -= 1
        x = par
    return x


@njit(cache=True)
def _summary_decref(meta, ints, ints2, sums, s):
    smeta = ints2[0]
    smeta[s, SM_RC] -= 1
    if smeta[s, SM_RC] == 0:
        _free_summary(meta, ints, sums, s)


# ---------------------------------------------------------------------------
# summaries


@njit(cache=True)
def _new_summary(meta, ints, ints2, floats, sums, start_t):
    sums_i, sums_f, sums_first, sums_li, sums_lf = sums
    nf = meta[M_SFREE]
    if nf > 0:
        s = ints[0][nf - 1]
        meta[M_SFREE] = nf - 1
    else:
        s = meta[M_NSUM]
        meta[M_NSUM] = s + 1
        if s >= ints2[0].shape[0]:
            ints2[0] = _grow2i(ints2[0], s + 1)
            floats[0] = _grow1(floats[0], s + 1)
        sums_i.append(np.zeros((0, 4), np.int64))
        sums_f.append(np.zeros((0, NCF), np.float64))
        sums_first.append(np.zeros(0, np.int64))
        sums_li.append(np.zeros(0, np.int64))
        sums_lf.append(np.zeros((0, 3), np.float64))
    smeta = ints2[0]
    for f in range(NSMETA):
        smeta[s, f] = 0
    floats[0][s] = start_t
    sums_i[s] = np.zeros((16, 4), np.int64)
    sums_f[s] = np.zeros((16, NCF), np.float64)
    sums_first[s] = np.full(8, -1, np.int64)
    sums_li[s] = np.zeros(0, np.int64)
    sums_lf[s] = np.zeros((0, 3), np.float64)
    return s


@njit(cache=True)
def _free_summary(meta, ints, sums, s):
    sums_i, sums_f, sums_first, sums_li, sums_lf = sums
    sums_i[s] = np.zeros((0, 4), np.int64)
    sums_f[s] = np.zeros((0, NCF), np.float64)
    sums_first[s] = np.zeros(0, np.int64)
    sums_li[s] = np.zeros(0, np.int64)
    sums_lf[s] = np.zeros((0, 3), np.float64)
    _push(ints, 0, meta[M_SFREE], s)
    meta[M_SFREE] += 1


@njit(cache=True)
def _copy_summary(meta, ints, ints2, floats, sums, s):
    c = _new_summary(meta, ints, ints2, floats, sums, floats[0][s])
    sums_i, sums_f, sums_first, sums_li, sums_lf = sums
    smeta = ints2[0]
    for f in (SM_COUNT, SM_NORDER, SM_NFIRST, SM_NLIST):
        smeta[c, f] = smeta[s, f]
    sums_i[c] = sums_i[s].copy()
    sums_f[c] = sums_f[s].copy()
    sums_first[c] = sums_first[s].copy()
    sums_li[c] = sums_li[s].copy()
    sums_lf[c] = sums_lf[s].copy()
    return c


@njit(cache=True)
def _first(sums_first, s, b):
    """The first-visit table of summary ``s``, holding base SM ``b``."""
    fv = sums_first[s]
    if b >= len(fv):
        n = len(fv)
        while n <= b:
            n = n * 2 if n else 8
        g = np.full(n, -1, np.int64)
        g[: len(fv)] = fv
        sums_first[s] = g
        fv = g
    return fv


@njit(cache=True)
def _fold(ni, nf, codes, meta, ints2, sums, sm_i, s, chain, nchain):
    """Summary.fold of ``chain[nchain-1], ..., chain[0]`` (root side last in ``chain``)."""
    sums_i, sums_f, sums_first, sums_li, sums_lf = sums
    smeta = ints2[0]
    ncodes = meta[M_NCODES]
    si = sums_i[s]
    sf = sums_f[s]
    if si.shape[0] < ncodes:
        n = max(si.shape[0], 16)
        while n < ncodes:
            n *= 2
        si2 = np.zeros((n, 4), np.int64)
        si2[: si.shape[0]] = si
        sf2 = np.zeros((n, NCF), np.float64)
        sf2[: sf.shape[0]] = sf
        sums_i[s] = si2
        sums_f[s] = sf2
        si = si2
        sf = sf2
    limit = meta[M_LIMIT]
    nlist = smeta[s, SM_NLIST]
    norder = smeta[s, SM_NORDER]
    nfirst = smeta[s, SM_NFIRST]
    li = sums_li[s]
    lf = sums_lf[s]
    fv = sums_first[s]
    for j in range(nchain - 1, -1, -1):
        x = chain[j]
        code = ni[x, N_CODE]
        inc = nf[x, F_INC]
        wait = nf[x, F_WAIT]
        lent = nf[x, F_LENT]
        if nlist < limit:
            if nlist >= len(li):
                n = len(li)
                while n <= nlist:
                    n = n * 2 if n else 64
                if n > limit:
                    n = limit
                li2 = np.zeros(n, np.int64)
                li2[: len(li)] = li
                lf2 = np.zeros((n, 3), np.float64)
                lf2[: len(li)] = lf
                sums_li[s] = li2
                sums_lf[s] = lf2
                li = li2
                lf = lf2
            li[nlist] = code
            lf[nlist, 0] = nf[x, F_CP]
            lf[nlist, 1] = inc
            lf[nlist, 2] = wait
            nlist += 1
        if si[code, C_VISITS] == 0:
            si[norder, C_ORDER] = code
            norder += 1
            sf[code, CF_TIME] = inc
            sf[code, CF_WAIT] = wait
            sf[code, CF_LENT] = lent
            si[code, C_VISITS] = 1
        else:
            sf[code, CF_TIME] += inc
            sf[code, CF_WAIT] += wait
            sf[code, CF_LENT] += lent
            si[code, C_VISITS] += 1
        if codes[code, 0] == K_INTER:
            psm = sm_i[codes[code, 1], S_BASE]
            csm = sm_i[codes[code, 2], S_BASE]
            if psm >= len(fv) or csm >= len(fv):
                fv = _first(sums_first, s, psm if psm > csm else csm)
            if fv[psm] < 0:
                fv[psm] = nfirst
                nfirst += 1
            seen = fv[csm]
            if seen < 0:
                fv[csm] = nfirst
                nfirst += 1
            elif seen < fv[psm]:
                # Back upstream to an SM the path reached before this one.
                si[code, C_LOOPS] += 1
        else:
            b = sm_i[codes[code, 1], S_BASE]
            if b >= len(fv):
                fv = _first(sums_first, s, b)
            if fv[b] < 0:
                fv[b] = nfirst
                nfirst += 1
        loser = ni[x, N_LOSER]
        if loser >= 0:
            margin = nf[x, F_MARGIN]
            cur = sf[loser, CF_SLACK] if si[loser, C_HASSLACK] else margin + 1.0
            if margin < cur:
                sf[loser, CF_SLACK] = margin
                si[loser, C_HASSLACK] = 1
    smeta[s, SM_NLIST] = nlist
    smeta[s, SM_NORDER] = norder
    smeta[s, SM_NFIRST] = nfirst
    smeta[s, SM_COUNT] += nchain


# ---------------------------------------------------------------------------
# codes


@njit(cache=True, inline="always")
def _add_code(codes, meta, kind, x, y, z):
    c = meta[M_NCODES]
    codes[c, 0] = kind
    codes[c, 1] = x
    codes[c, 2] = y
    codes[c, 3] = z
    meta[M_NCODES] = c + 1
    return c


@njit(cache=True)
def _inter_code_miss(codes, cache, meta, inter, psm, csm, qi, key, slot):
    if key in inter:
        c = inter[key]
    else:
        c = _add_code(codes, meta, K_INTER, psm, csm, qi)
        inter[key] = c
    cache[slot, 0] = key
    cache[slot, 1] = c
    return c


@njit(cache=True, inline="always")
def _inter_code(codes, cache, meta, inter, psm, csm, qi):
    """Code id of the edge ``psm -> csm`` through queue index ``qi`` (0 = link)."""
    key = (psm << 42) | (csm << 21) | qi
    slot = ((psm * 1000003 + csm) * 1000003 + qi) & (CACHE - 1)
    if cache[slot, 0] == key:
        return cache[slot, 1]
    return _inter_code_miss(codes, cache, meta, inter, psm, csm, qi, key, slot)


# ---------------------------------------------------------------------------
# queues


@njit(cache=True, inline="always")
def _ring_at(q_i, q, r, j):
    """Store index of the ``j``-th segment of ring ``r`` of queue ``q``."""
    cap = q_i[q, Q_RCAP + r]
    idx = q_i[q, Q_RH + r] + j
    if idx >= cap:
        idx -= cap
    return q_i[q, Q_ROFF + r] + idx


@njit(cache=True, inline="always")
def _ring_push(rs_i, rs_t, q_i, q, r, first, end, node, conn, sm, t):
    n = q_i[q, Q_RN + r]
    idx = _ring_at(q_i, q, r, n)
    rs_i[idx, R_FIRST] = first
    rs_i[idx, R_END] = end
    rs_i[idx, R_NODE] = node
    rs_i[idx, R_CONN] = conn
    rs_i[idx, R_SM] = sm
    rs_t[idx] = t
    q_i[q, Q_RN + r] = n + 1


@njit(cache=True, inline="always")
def _ring_popleft(q_i, q, r):
    h = q_i[q, Q_RH + r] + 1
    if h >= q_i[q, Q_RCAP + r]:
        h = 0
    q_i[q, Q_RH + r] = h
    q_i[q, Q_RN + r] -= 1


@njit(cache=True, inline="always")
def _occupancy(q_i, q_f, q, t):
    if q_i[q, Q_HASOCC] == 0:
        q_i[q, Q_HASOCC] = 1
        q_f[q, QF_OCCT0] = t
    else:
        q_f[q, QF_AREA] += (q_i[q, Q_TAIL] - q_i[q, Q_HEAD]) * (t - q_f[q, QF_OCCT])
    q_f[q, QF_OCCT] = t


@njit(cache=True, inline="always")
def _put(ni, rs_i, rs_t, q_i, q_f, q, n, node, t, conn, sm):
    tail = q_i[q, Q_TAIL]
    _occupancy(q_i, q_f, q, t)
    if node >= 0:
        ni[node, N_RC] += 1
    flow_conn = conn if q_i[q, Q_FLOW] else -1
    _ring_push(rs_i, rs_t, q_i, q, LIVE, tail, tail + n, node, flow_conn, sm, t)
    tail += n
    q_i[q, Q_TAIL] = tail
    held = tail - q_i[q, Q_HEAD]
    if held > q_i[q, Q_OCCMAX]:
        q_i[q, Q_OCCMAX] = held
    q_i[q, Q_ARR] += n
    if q_i[q, Q_HASENQ] == 0:
        q_i[q, Q_HASENQ] = 1
        q_f[q, QF_ENQT0] = t
    q_f[q, QF_ENQT1] = t


@njit(cache=True, inline="always")
def _trim_freed(meta, pend, rs_i, q_i, q):
    """Forget the slots no future ``enq`` can depend on (after the tail moved)."""
    floor = q_i[q, Q_TAIL] - q_i[q, Q_CAP] - q_i[q, Q_EXTRA]
    while q_i[q, Q_RN + FREED] > 0:
        idx = _ring_at(q_i, q, FREED, 0)
        if rs_i[idx, R_END] > floor:
            break
        _drop(meta, pend, rs_i[idx, R_NODE])
        _ring_popleft(q_i, q, FREED)


@njit(cache=True, inline="always")
def _resize(meta, pend, rs_i, rs_t, q_i, q_f, q, n, t, sm):
    """QueueState.resize; False if ``n`` is negative."""
    if n < 0:
        return False
    _occupancy(q_i, q_f, q, t)
    head = q_i[q, Q_HEAD]
    tail = q_i[q, Q_TAIL]
    held = tail - head
    if n > held:
        _ring_push(rs_i, rs_t, q_i, q, LIVE, tail, tail + n - held, NONE, -1, sm, t)
        q_i[q, Q_TAIL] = tail + n - held
        if n > q_i[q, Q_OCCMAX]:
            q_i[q, Q_OCCMAX] = n
        return True
    drop = held - n
    while drop:
        ln = q_i[q, Q_RN + LIVE]
        idx = _ring_at(q_i, q, LIVE, ln - 1)
        first = rs_i[idx, R_FIRST]
        end = rs_i[idx, R_END]
        if end - first > drop:
            rs_i[idx, R_END] = end - drop
            drop = 0
        else:
            drop -= end - first
            _drop(meta, pend, rs_i[idx, R_NODE])
            q_i[q, Q_RN + LIVE] = ln - 1
    q_i[q, Q_TAIL] = head + n
    return True


@njit(cache=True, inline="always")
def _shifted(nf, rs_i, q_i, q, lo, hi, cur, collect, cand, meta):
    """QueueState.shifted: best producer among positions ``[lo, hi)`` of the history."""
    best = NONE
    best_cp = -np.inf
    best_sm = -1
    if hi <= 0:
        return best, best_sm
    for r in (PAST, LIVE):
        for j in range(q_i[q, Q_RN + r]):
            idx = _ring_at(q_i, q, r, j)
            if rs_i[idx, R_END] <= lo:
                continue
            if rs_i[idx, R_FIRST] >= hi:
                break
            node = rs_i[idx, R_NODE]
            cu = rs_i[idx, R_CONN]
            if collect and node >= 0:
                _candidate(cand, meta, node, rs_i[idx, R_SM], cu)
            if node >= 0 and (cu < 0 or cu == cur):
                c = nf[node, F_CP]
                if c > best_cp:
                    best_cp = c
                    best = node
                    best_sm = rs_i[idx, R_SM]
    return best, best_sm


@njit(cache=True, inline="always")
def _candidate(cand, meta, node, sm, conn):
    """One more edge for :func:`_edge_pick`."""
    k = meta[M_NCAND]
    cand[k, 0] = node
    cand[k, 1] = sm
    cand[k, 2] = conn
    meta[M_NCAND] = k + 1


@njit(cache=True, inline="always")
def _take(ni, nf, meta, pend, rs_i, rs_t, q_i, q_f, q, m, remove, cur, t, collect, cand):
    """QueueState.take: ``(best node, its SM, newest arrival, connection)``; with
    ``collect``, each run's producer goes to ``cand`` too."""
    if remove:
        _occupancy(q_i, q_f, q, t)
    best = NONE
    best_cp = -np.inf
    best_sm = -1
    newest = -np.inf
    pos = q_i[q, Q_HEAD]
    left = m
    j = 0
    switched = False
    credit = q_i[q, Q_EXTRA] != 0 and q_i[q, Q_CAP] < 0
    while left:
        idx = _ring_at(q_i, q, LIVE, 0 if remove else j)
        first = rs_i[idx, R_FIRST]
        end = rs_i[idx, R_END]
        node = rs_i[idx, R_NODE]
        cu = rs_i[idx, R_CONN]
        su = rs_i[idx, R_SM]
        tu = rs_t[idx]
        k = end - pos
        if k > left:
            k = left
        if cu >= 0 and not switched:
            cur = cu  # the first unit's connection flows to the consumer
            switched = True
        if collect and node >= 0:
            _candidate(cand, meta, node, su, cu)
        if node >= 0 and (cu < 0 or cu == cur):
            c = nf[node, F_CP]
            if c > best_cp:
                best_cp = c
                best = node
                best_sm = su
        newest = tu
        pos += k
        left -= k
        if remove:
            if pos >= end:
                _ring_popleft(q_i, q, LIVE)
                if credit:
                    _ring_push(rs_i, rs_t, q_i, q, PAST, first, end, node, cu, su, tu)
                else:
                    _drop(meta, pend, node)
            else:
                if credit:
                    if node >= 0:
                        ni[node, N_RC] += 1
                    _ring_push(rs_i, rs_t, q_i, q, PAST, first, pos, node, cu, su, tu)
                rs_i[idx, R_FIRST] = pos
        elif pos >= end:
            j += 1
    if remove:
        if credit:
            # Keep what this take's own shifted match may still look at.
            floor = q_i[q, Q_HEAD] - q_i[q, Q_EXTRA]
            while q_i[q, Q_RN + PAST] > 0:
                idx = _ring_at(q_i, q, PAST, 0)
                if rs_i[idx, R_END] > floor:
                    break
                _drop(meta, pend, rs_i[idx, R_NODE])
                _ring_popleft(q_i, q, PAST)
        q_i[q, Q_HEAD] = pos
    return best, best_sm, newest, cur


@njit(cache=True, inline="always")
def _freed_at(rs_i, q_i, q, pos, f0, last):
    """Index in the freed ring of the segment at or before position ``pos``."""
    i = pos - f0
    if i > last:
        i = last
    while rs_i[_ring_at(q_i, q, FREED, i), R_FIRST] > pos:
        i -= 1
    return i


@njit(cache=True, inline="always")
def _slots(nf, rs_i, rs_t, q_i, q, n, since, collect, cand, meta):
    """QueueState.slots: ``(best node, its SM, t_free, has t_free)``."""
    best = NONE
    best_sm = -1
    nfr = q_i[q, Q_RN + FREED]
    if nfr == 0:
        return best, best_sm, 0.0, False
    f0 = rs_i[_ring_at(q_i, q, FREED, 0), R_FIRST]
    last = nfr - 1
    tail = q_i[q, Q_TAIL]
    qcap = q_i[q, Q_CAP]
    lo = tail - qcap - q_i[q, Q_EXTRA]
    hi = lo + n
    if hi > 0:
        pos = lo if lo > f0 else f0
        i = _freed_at(rs_i, q_i, q, pos, f0, last)
        if pos < rs_i[_ring_at(q_i, q, FREED, i), R_END]:
            best_cp = -np.inf
            for k in range(i, last + 1):
                idx = _ring_at(q_i, q, FREED, k)
                if rs_i[idx, R_FIRST] >= hi:
                    break
                node = rs_i[idx, R_NODE]
                if collect and node >= 0:
                    _candidate(cand, meta, node, rs_i[idx, R_SM], -1)
                if node >= 0 and nf[node, F_CP] > best_cp:
                    best_cp = nf[node, F_CP]
                    best = node
                    best_sm = rs_i[idx, R_SM]
    freed_t = 0.0
    has = False
    pos = tail + n - 1 - qcap
    if pos >= f0:
        idx = _ring_at(q_i, q, FREED, _freed_at(rs_i, q_i, q, pos, f0, last))
        if pos < rs_i[idx, R_END]:
            freed_t = rs_t[idx]
            has = freed_t > since
    return best, best_sm, freed_t, has


@njit(cache=True)
def _edge_pick(cand, meta, nf, sm_i, q_i, factors, q, sm, cur, c):
    """CriticalPathPass._edge_pick: ``(node, its SM, weight)`` among the edges in
    ``cand`` from queue ``q`` (edgewise) to SM ``sm`` working for ``cur``."""
    best = NONE
    bsm = -1
    bw = 0.0
    bv = -np.inf
    for k in range(meta[M_NCAND]):
        node = cand[k, 0]
        su = cand[k, 1]
        cu = cand[k, 2]
        if cu >= 0 and cu != cur:
            continue
        if q_i[q, Q_BREAKS] & sm_i[su, S_PB] & sm_i[sm, S_CB]:
            continue
        comms = q_i[q, Q_COMMS] & sm_i[su, S_PC] & sm_i[sm, S_CC]
        f = 1.0
        if comms:
            j = 0
            while not (comms >> j) & 1:
                j += 1
            f = factors[j]
        w = c * f
        if nf[node, F_CP] + w > bv:
            best = node
            bsm = su
            bw = w
            bv = nf[node, F_CP] + w
    return best, bsm, bw


# ---------------------------------------------------------------------------
# connections, warnings, counts


@njit(cache=True, inline="always")
def _switch(sm_i, layers, sconns, started, meta, pend, sm, conn):
    """SM ``sm`` now works for connection ``conn``: its path in the connection it
    leaves is put aside (``layers``), the one it had in ``conn`` taken up."""
    cur = sm_i[sm, S_CUR]
    if cur == conn:
        return
    sconns[(sm << 21) | conn] = 1
    node = sm_i[sm, S_NODE]
    if cur >= 0:
        if node != NONE:
            layers[(sm << 21) | cur] = node
        node = layers.pop((sm << 21) | conn, NONE)
        sm_i[sm, S_NODE] = node
    if node != NONE:
        started[conn + 1] = 1
    sm_i[sm, S_CUR] = conn


@njit(cache=True, inline="always")
def _warn(meta, warn_ev, warn_cnt, kind, q, rec, held, n, cap, sm, op):
    warn_cnt[q, kind] += 1
    if warn_cnt[q, kind] > 1:
        return
    k = meta[M_NWARN]
    warn_ev[k, 0] = kind
    warn_ev[k, 1] = q
    warn_ev[k, 2] = rec
    warn_ev[k, 3] = held
    warn_ev[k, 4] = n
    warn_ev[k, 5] = cap
    warn_ev[k, 6] = sm
    warn_ev[k, 7] = op
    meta[M_NWARN] = k + 1


@njit(cache=True)
def _cell(cell_i, cell_f, meta, cells, facs, sm, si):
    """The cell of SM ``sm``'s state index ``si`` (made on first use; its factor
    from ``facs``, which the caller filled for every state a chunk enters)."""
    key = (sm << 21) | si
    if key in cells:
        return cells[key]
    c = meta[M_NCELLS]
    meta[M_NCELLS] = c + 1
    cell_i[c, 0] = -1
    cell_f[c, X_FAC] = facs.get(key, 1.0)
    cell_f[c, X_ACT] = 0.0
    cell_f[c, X_WAIT] = 0.0
    cells[key] = c
    return c


@njit(cache=True)
def _transition_index(tr_i, tr_f, cache, meta, dicts, cell_i, cell_f, sm, frm, si, to, slot):
    tr_dict = dicts[0]
    tkey = (sm, frm, si, to)
    if tkey in tr_dict:
        k = tr_dict[tkey]
    else:
        k = meta[M_NTR]
        meta[M_NTR] = k + 1
        tr_i[k, 0] = sm
        tr_i[k, 1] = frm
        tr_i[k, 2] = si
        tr_i[k, 3] = to
        tr_i[k, 4] = 0
        tr_i[k, 5] = _cell(cell_i, cell_f, meta, dicts[4], dicts[5], sm, to)
        tr_f[k] = 0.0
        tr_dict[tkey] = k
    cache[slot, 0] = (sm << 32) | frm
    cache[slot, 1] = (si << 32) | to
    cache[slot, 2] = k
    return k


@njit(cache=True)
def _qedge_index(qe, cache, meta, qe_dict, key, slot):
    if key in qe_dict:
        k = qe_dict[key]
    else:
        k = meta[M_NQE]
        meta[M_NQE] = k + 1
        qe[k, 0] = key
        qe[k, 1] = 0
        qe_dict[key] = k
    cache[slot, 0] = key
    cache[slot, 1] = k
    return k


# ---------------------------------------------------------------------------
# growth (before a record, when _room finds an array too small)


@njit(cache=True)
def _move_ring(i2, f1, meta, q_i, q, r, newcap):
    """Give ring ``r`` of queue ``q`` a region of ``newcap`` segments in the store.

    The region goes at the store's free end; when there is no room the store is
    laid out afresh (every ring packed, the garbage of moved rings dropped) at
    twice the size it needs.
    """
    store = i2[I2_STORE]
    times = f1[F1_STORE]
    used = meta[M_STORE_USED]
    if used + newcap <= store.shape[0]:
        n = q_i[q, Q_RN + r]
        for j in range(n):
            src = _ring_at(q_i, q, r, j)
            store[used + j] = store[src]
            times[used + j] = times[src]
        q_i[q, Q_ROFF + r] = used
        q_i[q, Q_RH + r] = 0
        q_i[q, Q_RCAP + r] = newcap
        meta[M_STORE_USED] = used + newcap
        return
    total = newcap - q_i[q, Q_RCAP + r]
    for qq in range(q_i.shape[0]):
        for rr in range(3):
            total += q_i[qq, Q_RCAP + rr]
    size = max(2 * total, 1024)
    new_store = np.zeros((size, 5), np.int64)
    new_times = np.zeros(size, np.float64)
    off = 0
    for qq in range(q_i.shape[0]):
        for rr in range(3):
            n = q_i[qq, Q_RN + rr]
            for j in range(n):
                src = _ring_at(q_i, qq, rr, j)
                new_store[off + j] = store[src]
                new_times[off + j] = times[src]
            cap = newcap if qq == q and rr == r else q_i[qq, Q_RCAP + rr]
            q_i[qq, Q_ROFF + rr] = off
            q_i[qq, Q_RH + rr] = 0
            q_i[qq, Q_RCAP + rr] = cap
            off += cap
    i2[I2_STORE] = new_store
    f1[F1_STORE] = new_times
    meta[M_STORE_USED] = off


@njit(cache=True)
def _grow_arrays(hot, meta, q_i):
    """Grow whatever :func:`_room` found too small for the next record."""
    i2, f2, i1, f1 = hot
    nfree = meta[M_NFREE]
    if nfree < 2:
        # Uninitialised: a node's fields are all set when it leaves the pool, and
        # zeroing megabytes of fresh pool costs as much as thousands of records.
        # The commit marks are sized by commit(), which runs rarely.
        old = i2[I2_NI].shape[0]
        ni = np.empty((2 * old, 5), np.int64)
        ni[:old] = i2[I2_NI]
        i2[I2_NI] = ni
        nf = np.empty((2 * old, NNF), np.float64)
        nf[:old] = f2[F2_NF]
        f2[F2_NF] = nf
        free = np.empty(2 * old, np.int64)
        free[:nfree] = i1[I1_FREE][:nfree]
        for k in range(old):
            free[nfree + k] = 2 * old - 1 - k
        i1[I1_FREE] = free
        meta[M_NFREE] = nfree + old
    if meta[M_NEED_PEND] > len(i1[I1_PEND]):
        i1[I1_PEND] = np.zeros(2 * meta[M_NEED_PEND], np.int64)
    if meta[M_NCODES] + 2 > i2[I2_CODES].shape[0]:
        i2[I2_CODES] = _grow2i(i2[I2_CODES], meta[M_NCODES] + 2)
    if meta[M_NTR] + 1 > i2[I2_TR].shape[0]:
        i2[I2_TR] = _grow2i(i2[I2_TR], meta[M_NTR] + 1)
        f1[F1_TR] = _grow1(f1[F1_TR], meta[M_NTR] + 1)
    if meta[M_NQE] + 1 > i2[I2_QE].shape[0]:
        i2[I2_QE] = _grow2i(i2[I2_QE], meta[M_NQE] + 1)
    if meta[M_NWARN] + 1 > i2[I2_WARN].shape[0]:
        i2[I2_WARN] = _grow2i(i2[I2_WARN], meta[M_NWARN] + 1)
    if meta[M_NEED_CAND] > i2[I2_CAND].shape[0]:
        i2[I2_CAND] = np.zeros((2 * meta[M_NEED_CAND], 3), np.int64)
    if meta[M_NCELLS] + 2 > i2[I2_CELL].shape[0]:
        n = 2 * i2[I2_CELL].shape[0]
        cell_f = np.zeros((n, 3), np.float64)
        cell_f[: meta[M_NCELLS]] = f2[F2_CELL][: meta[M_NCELLS]]
        f2[F2_CELL] = cell_f
        i2[I2_CELL] = _grow2i(i2[I2_CELL], n)
    q = meta[M_GROW_Q]
    if q >= 0:
        for r in range(3):
            need = meta[M_NEED_LIVE + r]
            cap = q_i[q, Q_RCAP + r]
            if cap < need:
                new = max(cap, 4)
                while new < need:
                    new *= 4
                _move_ring(i2, f1, meta, q_i, q, r, new)


@njit(cache=True, inline="always")
def _views(hot):
    """Views of the growable arrays for :func:`run` (see :func:`_view`).

    Only :func:`run`'s start and :func:`_grow` call this: every view a record
    uses comes from one of them, so none outlives the array it shows.
    """
    i2, f2, i1, f1 = hot
    return (
        _view(i2[I2_NI]),
        _view(f2[F2_NF]),
        _view(i1[I1_FREE]),
        _view(i1[I1_PEND]),
        _view(i2[I2_CODES]),
        _view(i2[I2_TR]),
        _view(f1[F1_TR]),
        _view(i2[I2_QE]),
        _view(i2[I2_WARN]),
        _view(i2[I2_STORE]),
        _view(f1[F1_STORE]),
        _view(i2[I2_TRC]),
        _view(i2[I2_QEC]),
        _view(i2[I2_IC]),
        _view(i2[I2_CELL]),
        _view(f2[F2_CELL]),
        _view(i2[I2_CAND]),
    )


@njit(cache=True, inline="always")
def _grow(hot, meta, q_i):
    """Grow what the next record needs and return fresh views of every growable
    array: the caller rebinds all of them, so a view of a replaced array
    cannot survive a grow.  (Inlined, so that the compiler sees the views carry
    no reference count: otherwise each use of one in the loop counts.)"""
    _grow_arrays(hot, meta, q_i)
    return _views(hot)


# ---------------------------------------------------------------------------
# the pass, one step per phase of a record


@njit(cache=True, inline="always")
def _room(pend, codes, tr_i, qe, warn_ev, cell_i, cand, meta, q_i, op, a):
    """Whether every array has room for what this record may add (else note what is
    missing for :func:`_grow`)."""
    ok = (
        meta[M_NFREE] >= 2
        and meta[M_NCELLS] + 2 <= cell_i.shape[0]
        and meta[M_NCODES] + 2 <= codes.shape[0]
        and meta[M_NTR] + 1 <= tr_i.shape[0]
        and meta[M_NQE] + 1 <= qe.shape[0]
        and meta[M_NWARN] + 1 <= warn_ev.shape[0]
    )
    need_pend = 8
    meta[M_GROW_Q] = -1
    meta[M_NEED_CAND] = 0
    if op != BEGIN and op != LINK and op != IDENTIFY:
        nl = q_i[a, Q_RN + LIVE]
        npast = q_i[a, Q_RN + PAST]
        nfr = q_i[a, Q_RN + FREED]
        need_pend += 2 * nl + npast + nfr
        if q_i[a, Q_EDGEWISE] and nl + npast + nfr + 1 > cand.shape[0]:
            ok = False
            meta[M_NEED_CAND] = nl + npast + nfr + 1
        need_past = nl + npast + 1 if q_i[a, Q_EXTRA] else 0
        if (
            nl + 1 > q_i[a, Q_RCAP + LIVE]
            or need_past > q_i[a, Q_RCAP + PAST]
            or nfr + 1 > q_i[a, Q_RCAP + FREED]
        ):
            ok = False
            meta[M_GROW_Q] = a
            meta[M_NEED_LIVE] = nl + 1
            meta[M_NEED_PAST] = need_past
            meta[M_NEED_FREED] = nfr + 1
    if need_pend > len(pend):
        ok = False
    meta[M_NEED_PEND] = need_pend
    return ok


@njit(cache=True, inline="always")
def _intra(sm_i, sm_f, cell_i, cell_f, codes, meta, sm, cell, t, rec):
    """The SM's time in its state since its last record (NaN at its first), that
    time weighted by the (SM, state) ``cell``'s factor, and the intra edge's code
    (``CriticalPathPass._prepare``); notes ``t`` as the SM's last record."""
    dt = t - sm_f[sm, SF_LAST] if sm_i[sm, S_HASLAST] else np.nan
    w = dt * cell_f[cell, X_FAC]
    ic = cell_i[cell, 0]
    if ic < 0:
        ic = _add_code(codes, meta, K_INTRA, sm, sm_i[sm, S_STATE], 0)
        cell_i[cell, 0] = ic
    sm_f[sm, SF_LAST] = t
    sm_i[sm, S_HASLAST] = 1
    sm_i[sm, S_LASTREC] = rec
    return dt, w, ic


@njit(cache=True, inline="always")
def _lent_since_last(sm_i, sm_f, sm, t):
    """The time the SM had its core lent between its last record and ``t``, taken
    out of its running total (0 before its first record: no edge to charge)."""
    lent = sm_f[sm, SF_LENT]
    sm_f[sm, SF_LENT] = 0.0
    since = sm_f[sm, SF_LENTFROM]
    has_last = sm_i[sm, S_HASLAST] != 0
    if since == since:  # lent now
        last = sm_f[sm, SF_LAST]
        lent += t - (since if not has_last or since > last else last)
    if not has_last:
        return 0.0
    return lent


@njit(cache=True)
def _run_on(sm_i, sm_f, sm, a, t):
    """``run(to)`` (``CriticalPathPass._run``): from ``t`` on, SM ``sm`` runs on the
    core SM ``a`` holds (``a == sm``: on its own again)."""
    host = sm_i[sm, S_HOST]
    new = a if a != sm else -1
    if host == new:
        return
    if host >= 0:
        sm_i[host, S_GUESTS] -= 1
        if sm_i[host, S_GUESTS] == 0:
            sm_f[host, SF_LENT] = _lent_since_last(sm_i, sm_f, host, t)
            sm_f[host, SF_LENTFROM] = np.nan
    sm_i[sm, S_HOST] = new
    if new >= 0:
        sm_i[new, S_GUESTS] += 1
        if sm_i[new, S_GUESTS] == 1:
            sm_f[new, SF_LENTFROM] = t


@njit(cache=True, inline="always")
def _transition_cached(tr_cache, sm_i, sm, a):
    """The index of the transition a ``begin`` of state ``a + 1`` makes, if cached
    (else -1), and its cache slot."""
    frm = sm_i[sm, S_FROM]
    si = sm_i[sm, S_STATE]
    to = a + 1
    slot = (((sm * 1000003 + frm) * 1000003 + si) * 1000003 + to) & (CACHE - 1)
    if tr_cache[slot, 0] == (sm << 32) | frm and tr_cache[slot, 1] == (si << 32) | to:
        return tr_cache[slot, 2], slot
    return -1, slot


@njit(cache=True, inline="always")
def _begin(sm_i, sm_f, tr_i, tr_f, sm, a, t, k):
    """``begin``: count transition ``k`` and the time spent in the state left,
    and enter state ``a + 1``."""
    spent = t - sm_f[sm, SF_ENTER] if sm_i[sm, S_HASENTER] else 0.0
    tr_i[k, 4] += 1
    tr_f[k] += spent
    sm_i[sm, S_FROM] = sm_i[sm, S_STATE]
    sm_i[sm, S_STATE] = a + 1
    sm_i[sm, S_CELL] = tr_i[k, 5]
    sm_f[sm, SF_ENTER] = t
    sm_i[sm, S_HASENTER] = 1


@njit(cache=True, inline="always")
def _queue_edge_cached(qe_cache, sm, a, op):
    """Who adds to (enq, reserve, resize) and takes from (deq, peek) each queue:
    the index of this (SM, queue, direction) if cached (else -1), its key and
    cache slot."""
    key = (sm << 22) | (a << 1) | (1 if op in (DEQ, PEEK) else 0)
    # (Not from ``key``: its low bits, which the slot keeps, leave out the SM.)
    slot = ((sm * 1000003 + a) * 1000003 + op) & (CACHE - 1)
    if qe_cache[slot, 0] == key:
        return qe_cache[slot, 1], key, slot
    return -1, key, slot


@njit(cache=True, inline="always")
def _linked_dep(sm_i, nf, codes, inter_cache, started, meta, pend, inter, layers, sconns, sm):
    """The dependency a pending link gives the SM: ``(dep, dcp, dcode)``.  The
    linked node is held until the end of the record."""
    dep = sm_i[sm, S_PEND]
    dsm = sm_i[sm, S_PENDSM]
    pconn = sm_i[sm, S_PENDCONN]
    sm_i[sm, S_LINKED] = 0
    sm_i[sm, S_PEND] = NONE
    _drop(meta, pend, dep)
    if pconn >= 0 and pconn != sm_i[sm, S_CUR]:
        _switch(sm_i, layers, sconns, started, meta, pend, sm, pconn)
    if dep == NONE:
        return dep, 0.0, -1
    return dep, nf[dep, F_CP], _inter_code(codes, inter_cache, meta, inter, dsm, sm, 0)


@njit(cache=True, inline="always")
def _take_dep(
    ni, nf, meta, pend, rs_i, rs_t, q_i, q_f, cand, sm_i, sm_f, factors, sm, op, a, n, t, wk
):
    """``deq``/``peek`` of ``n > 0`` units: take them (``deq``); the candidate
    the taker depends on ``(best, its SM, edge weight, edgewise)`` and the
    connection the units belong to."""
    p0 = q_i[a, Q_HEAD]
    cur = sm_i[sm, S_CUR]
    edgewise = q_i[a, Q_EDGEWISE] != 0
    meta[M_NCAND] = 0
    best, bsm, newest, cur = _take(
        ni, nf, meta, pend, rs_i, rs_t, q_i, q_f, a, n, op == DEQ, cur, t, edgewise, cand
    )
    extra = q_i[a, Q_EXTRA]
    if extra and q_i[a, Q_CAP] < 0:
        # Credit what-if: the unit k positions earlier feeds this one.
        meta[M_NCAND] = 0
        lo = p0 - extra
        best, bsm = _shifted(nf, rs_i, q_i, a, lo, lo + n, cur, edgewise, cand, meta)
    c = 0.0
    if wk == ON_EMPTY and sm_i[sm, S_WQ] == a and newest > sm_f[sm, SF_WT]:
        c = t - newest
        q_f[a, QF_CSUM] += c
        q_i[a, Q_COMMN] += 1
        if c > q_f[a, QF_CMAX]:
            q_f[a, QF_CMAX] = c
    w2 = c * q_f[a, QF_COMM]
    if edgewise:
        best, bsm, w2 = _edge_pick(cand, meta, nf, sm_i, q_i, factors, a, sm, cur, c)
    return best, bsm, w2, edgewise, cur


@njit(cache=True, inline="always")
def _slot_dep(nf, meta, rs_i, rs_t, q_i, q_f, cand, sm_i, sm_f, factors, sm, a, n, wk, t):
    """``enq``/``reserve`` of ``n > 0`` units into a bounded queue: the candidate
    the adder depends on (whose slot it reuses): ``(best, its SM, edge weight,
    edgewise)``."""
    waiting = wk == ON_FULL and sm_i[sm, S_WQ] == a
    since = sm_f[sm, SF_WT] if waiting else np.inf
    edgewise = q_i[a, Q_EDGEWISE] != 0
    meta[M_NCAND] = 0
    best, bsm, freed_t, has = _slots(nf, rs_i, rs_t, q_i, a, n, since, edgewise, cand, meta)
    c = t - freed_t if has else 0.0
    w2 = c * q_f[a, QF_COMM]
    if edgewise:
        best, bsm, w2 = _edge_pick(cand, meta, nf, sm_i, q_i, factors, a, sm, -1, c)
    return best, bsm, w2, edgewise


@njit(cache=True, inline="always")
def _later(nf, q_i, a, edgewise, best, w2, dep, dcp, dw):
    """Whether queue ``a``'s candidate ``best`` (not through a broken queue) ends
    later than the dependency so far."""
    if best == NONE or not (edgewise or not q_i[a, Q_BROKEN]):
        return False
    return dep == NONE or nf[best, F_CP] + w2 > dcp + dw


@njit(cache=True, inline="always")
def _node(ni, nf, free, meta, cell_f, node, dt, wk, cell, w, lent, ic, dep, dcp, dw, dcode):
    """The record's path node: the later of the intra edge from the SM's ``node``
    and the dependency (the loser's code and margin kept); ``NONE`` if it has
    neither.  Adds the time to the cell's active or waiting total."""
    if dt == dt:  # not the SM's first record
        if wk:
            w_in = 0.0
            wd = dt
            lw = 0.0
            cell_f[cell, X_WAIT] += dt
        else:
            w_in = w
            wd = 0.0
            lw = lent
            cell_f[cell, X_ACT] += dt
        if node != NONE:
            icp = nf[node, F_CP] + w_in
            depth = ni[node, N_DEPTH] + 1
            if dep == NONE:
                return _new_node(ni, nf, free, meta, node, depth, ic, w_in, wd, icp, -1, 0.0, lw)
            bcp = dcp + dw
            if bcp > icp:
                depth = ni[dep, N_DEPTH] + 1
                return _new_node(
                    ni, nf, free, meta, dep, depth, dcode, dw, 0.0, bcp, ic, bcp - icp, 0.0
                )
            return _new_node(
                ni, nf, free, meta, node, depth, ic, w_in, wd, icp, dcode, icp - bcp, lw
            )
    if dep != NONE:
        depth = ni[dep, N_DEPTH] + 1
        return _new_node(ni, nf, free, meta, dep, depth, dcode, dw, 0.0, dcp + dw, -1, 0.0, 0.0)
    return NONE


@njit(cache=True)
def _start_path(ni, nf, free, meta, codes, sm_i, started, ints, ints2, floats, sums, sm, t):
    """The first node of a path: cp = 0 at a start SM's first record (a new
    summary as its root)."""
    started[sm_i[sm, S_CUR] + 1] = 1
    s = _new_summary(meta, ints, ints2, floats, sums, t)
    code = sm_i[sm, S_STARTID]
    if code < 0:
        code = _add_code(codes, meta, K_START, sm, 0, 0)
        sm_i[sm, S_STARTID] = code
    new = _new_node(ni, nf, free, meta, -2 - s, 0, code, 0.0, 0.0, 0.0, -1, 0.0, 0.0)
    ints2[0][s, SM_RC] += 1
    return new


@njit(cache=True, inline="always")
def _link(ni, meta, pend, sm_i, sm_f, sm, a, new, t):
    """``link``: SM ``a``'s next record depends on this one (``new``, one more
    reference); the caller waits until some SM links back to it."""
    sm_i[a, S_LINKED] = 1
    _drop(meta, pend, sm_i[a, S_PEND])
    if new != NONE:
        ni[new, N_RC] += 1
    sm_i[a, S_PEND] = new
    sm_i[a, S_PENDSM] = sm
    sm_i[a, S_PENDCONN] = sm_i[sm, S_CUR]
    sm_i[sm, S_WK] = ON_LINK
    sm_i[sm, S_WQ] = -1
    sm_f[sm, SF_WT] = t


@njit(cache=True, inline="always")
def _units_taken(meta, warn_ev, warn_cnt, q_i, sm, op, a, n, rec):
    """How many units a ``deq``/``peek`` of ``n`` takes (``n < 0``: all held);
    more than held is an error (``-1``, details in ``meta``) unless lenient,
    which warns and takes what is held."""
    held = q_i[a, Q_TAIL] - q_i[a, Q_HEAD]
    if n < 0:
        return held
    if n > held:
        if not meta[M_LENIENT]:
            meta[M_ERR_SM] = sm
            meta[M_ERR_OP] = op
            meta[M_ERR_Q] = a
            meta[M_ERR_N] = n
            meta[M_ERR_HELD] = held
            return -1
        _warn(meta, warn_ev, warn_cnt, W_SHORT, a, rec, held, n, 0, sm, op)
        return held
    return n


@njit(cache=True, inline="always")
def _wait(meta, warn_ev, warn_cnt, q_i, sm_i, sm_f, sm, op, a, n, t, rec):
    """``wait_empty``/``wait_full``: the SM now waits on queue ``a`` (a wait the
    queue's content does not explain is a warning); returns the new wait kind."""
    held = q_i[a, Q_TAIL] - q_i[a, Q_HEAD]
    if op == WAIT_EMPTY:
        q_i[a, Q_WE] += 1
        if held >= n:
            _warn(meta, warn_ev, warn_cnt, W_EMPTY, a, rec, held, n, 0, sm, op)
        wk = ON_EMPTY
    else:
        q_i[a, Q_WF] += 1
        cap = q_i[a, Q_CAP]
        if cap < 0 or held + n <= cap:
            _warn(meta, warn_ev, warn_cnt, W_FULL, a, rec, held, n, cap, sm, op)
        wk = ON_FULL
    sm_i[sm, S_WK] = wk
    sm_i[sm, S_WQ] = a
    sm_f[sm, SF_WT] = t
    return wk


@njit(cache=True, inline="always")
def _stop_waiting(sm_i, sm, a, wk, on):
    """The SM's wait of kind ``on`` on queue ``a`` (if that is its wait) is over."""
    if wk == on and sm_i[sm, S_WQ] == a:
        sm_i[sm, S_WK] = NOT_WAITING
        return NOT_WAITING
    return wk


@njit(cache=True, inline="always")
def _end(ni, meta, pend, sm_i, ends_i, ends_t, sm, new, t):
    """A record of an end SM: ``new`` is, for now, its connection's end."""
    c1 = sm_i[sm, S_CUR] + 1
    if ends_i[c1, 2] < 0:
        ends_i[c1, 2] = meta[M_ENDSEQ]
        meta[M_ENDSEQ] += 1
    _drop(meta, pend, ends_i[c1, 0])
    if new != NONE:
        ni[new, N_RC] += 1
    ends_i[c1, 0] = new
    ends_i[c1, 1] = sm
    ends_t[c1] = t


@njit(cache=True, inline="always")
def _queue_candidate(
    ni, nf, meta, pend, warn_ev, warn_cnt, rs_i, rs_t, q_i, q_f, cand, sm_i, sm_f, factors,
    sm, op, a, n, t, wk, rec,
):  # fmt: skip
    """What a queue op offers as a dependency: ``(ok, n, best, its SM, edge
    weight, edgewise, connection)``.  A ``deq``/``peek`` takes its units (``n``
    becomes how many; ``ok`` false if more than held, see :func:`_units_taken`)
    and depends on the latest; an ``enq``/``reserve`` into a bounded queue on
    the unit whose slot it reuses.  The connection is the one the taken units
    belong to (the SM's own otherwise).  Also adds the time the SM waited on the
    queue to its total."""
    best = NONE
    bsm = -1
    w2 = 0.0
    edgewise = False
    conn = sm_i[sm, S_CUR]
    waited = t - sm_f[sm, SF_WT]
    if op in (DEQ, PEEK):
        n = _units_taken(meta, warn_ev, warn_cnt, q_i, sm, op, a, n, rec)
        if n < 0:
            return False, n, best, bsm, w2, edgewise, conn
        if n:
            best, bsm, w2, edgewise, conn = _take_dep(
                ni, nf, meta, pend, rs_i, rs_t, q_i, q_f, cand, sm_i, sm_f, factors,
                sm, op, a, n, t, wk,
            )  # fmt: skip
        if wk == ON_EMPTY and sm_i[sm, S_WQ] == a:
            q_f[a, QF_WENS] += waited
    elif op in (ENQ, RESERVE):
        if q_i[a, Q_CAP] >= 0 and n > 0:
            best, bsm, w2, edgewise = _slot_dep(
                nf, meta, rs_i, rs_t, q_i, q_f, cand, sm_i, sm_f, factors, sm, a, n, wk, t
            )
        if wk == ON_FULL and sm_i[sm, S_WQ] == a:
            q_f[a, QF_WFNS] += waited
    return True, n, best, bsm, w2, edgewise, conn


@njit(cache=True, inline="always")
def _effects(
    ni, meta, pend, warn_ev, warn_cnt, rs_i, rs_t, q_i, q_f, sm_i, sm_f, flags,
    sm, op, a, n, t, rec, new, wk,
):  # fmt: skip
    """What the record does to its queue and to the SM's wait, once its node
    ``new`` is known (state transitions were counted before): ``(ok, wait
    kind)``; ``ok`` false for a resize the queue cannot take (details in
    ``meta``).  ``n`` is, for a ``deq``/``peek``, the units it took."""
    if op == ENQ:
        if n > 0:
            _put(ni, rs_i, rs_t, q_i, q_f, a, n, new, t, sm_i[sm, S_CUR], sm)
            if q_i[a, Q_CAP] >= 0:
                _trim_freed(meta, pend, rs_i, q_i, a)
        wk = _stop_waiting(sm_i, sm, a, wk, ON_FULL)
    elif op == RESERVE:
        wk = _stop_waiting(sm_i, sm, a, wk, ON_FULL)
    elif op in (DEQ, PEEK):
        if op == DEQ and q_i[a, Q_CAP] >= 0 and n:
            # The freed slots remember who freed them (one more reference).
            head = q_i[a, Q_HEAD]
            if new != NONE:
                ni[new, N_RC] += 1
            _ring_push(rs_i, rs_t, q_i, a, FREED, head - n, head, new, -1, sm, t)
        wk = _stop_waiting(sm_i, sm, a, wk, ON_EMPTY)
    elif op in (WAIT_EMPTY, WAIT_FULL):
        wk = _wait(meta, warn_ev, warn_cnt, q_i, sm_i, sm_f, sm, op, a, n, t, rec)
    elif op == RESIZE:
        if not _resize(meta, pend, rs_i, rs_t, q_i, q_f, a, n, t, sm):
            meta[M_ERR_Q] = a
            meta[M_ERR_N] = n
            return False, wk
    elif op == LINK:
        _link(ni, meta, pend, sm_i, sm_f, sm, a, new, t)
    elif op == DECLARE:
        q_i[a, Q_CAP] = n
        q_i[a, Q_FLOW] = 1 if flags & 1 else 0
    return True, wk


@njit(cache=True)
def run(t_col, op_col, flags_col, sm_col, a_col, n_col, base, keyed, hot, meta, cold):
    """The records of one chunk whose first record is number ``base + 1``.

    Returns ``(status, i)``: ``OK``, or an error at record ``i`` with details
    in ``meta``.  Each record: make room, what follows from the records alone,
    its dependency, its node, its effects, then the references it gave up.

    The typed dicts and lists (reference counted) are only handed to helpers on
    the paths that need them: an inlined step taking one costs two atomic
    operations per record even where it does not use it.
    """
    sm_i, sm_f, started = _view(keyed.sm_i), _view(keyed.sm_f), _view(keyed.started)
    ends_i, ends_t = _view(keyed.ends_i), _view(keyed.ends_t)
    q_i, q_f, warn_cnt = _view(keyed.q_i), _view(keyed.q_f), _view(keyed.warn_cnt)
    factors = _view(keyed.factors)
    meta = _view(meta)
    ints, ints2, floats, sums, dicts = cold
    inter, qe_dict, links, cells, facs, layers, sconns = dicts[1:]
    (ni, nf, free, pend, codes, tr_i, tr_f, qe, warn_ev, rs_i, rs_t,
     tr_cache, qe_cache, inter_cache, cell_i, cell_f, cand) = _views(hot)  # fmt: skip
    nrec = len(t_col)
    for i in range(nrec):
        rec = base + i + 1
        if rec >= meta[M_NEXTCOMMIT]:
            # A long unsettled stretch (an idle SM pins its branch point) is
            # walked again by every commit: space them out to match.
            unsettled = commit(keyed, hot, meta, cold, rec)
            every = meta[M_EVERY]
            meta[M_NEXTCOMMIT] = rec + (every if every > 4 * unsettled else 4 * unsettled)
        t = t_col[i]
        op = op_col[i]
        sm = np.int64(sm_col[i])
        a = np.int64(a_col[i])
        n = n_col[i]
        if op == RUN:
            _run_on(sm_i, sm_f, sm, a, t)
            continue
        if not _room(pend, codes, tr_i, qe, warn_ev, cell_i, cand, meta, q_i, op, a):
            (ni, nf, free, pend, codes, tr_i, tr_f, qe, warn_ev, rs_i, rs_t, tr_cache,
             qe_cache, inter_cache, cell_i, cell_f, cand) = _grow(hot, meta, q_i)  # fmt: skip
        # ---- what follows from the records alone (CriticalPathPass._prepare) ----
        cell = sm_i[sm, S_CELL]
        if cell < 0:
            cell = _cell(cell_i, cell_f, meta, cells, facs, sm, sm_i[sm, S_STATE])
            sm_i[sm, S_CELL] = cell
        lent = _lent_since_last(sm_i, sm_f, sm, t) * cell_f[cell, X_FAC]
        dt, w, ic = _intra(sm_i, sm_f, cell_i, cell_f, codes, meta, sm, cell, t, rec)
        if op == BEGIN:
            k, slot = _transition_cached(tr_cache, sm_i, sm, a)
            if k < 0:
                frm, si = sm_i[sm, S_FROM], sm_i[sm, S_STATE]
                k = _transition_index(
                    tr_i, tr_f, tr_cache, meta, dicts, cell_i, cell_f, sm, frm, si, a + 1, slot
                )
            _begin(sm_i, sm_f, tr_i, tr_f, sm, a, t, k)
        elif op < WAIT_EMPTY:
            k, key, slot = _queue_edge_cached(qe_cache, sm, a, op)
            if k < 0:
                k = _qedge_index(qe, qe_cache, meta, qe_dict, key, slot)
            qe[k, 1] += 1
        # ---- dependencies (and connection switches) ----
        wk = sm_i[sm, S_WK]
        dep = NONE
        dcp = 0.0
        dw = 0.0
        dcode = -1
        linked = sm_i[sm, S_LINKED] != 0
        if linked:
            dep, dcp, dcode = _linked_dep(
                sm_i, nf, codes, inter_cache, started, meta, pend, inter, layers, sconns, sm
            )
        ok, n, best, bsm, w2, edgewise, conn = _queue_candidate(
            ni, nf, meta, pend, warn_ev, warn_cnt, rs_i, rs_t, q_i, q_f, cand, sm_i, sm_f,
            factors, sm, op, a, n, t, wk, rec,
        )  # fmt: skip
        if not ok:
            return ERR_SHORT, i
        if conn != sm_i[sm, S_CUR]:
            _switch(sm_i, layers, sconns, started, meta, pend, sm, conn)
        elif op == IDENTIFY:
            _switch(sm_i, layers, sconns, started, meta, pend, sm, a)
        if _later(nf, q_i, a, edgewise, best, w2, dep, dcp, dw):
            dep = best
            dcp = nf[best, F_CP]
            dw = w2
            dcode = _inter_code(codes, inter_cache, meta, inter, bsm, sm, a + 1)
        # ---- the intra-SM edge and the node (the SM holds one reference) ----
        node = sm_i[sm, S_NODE]
        new = _node(
            ni, nf, free, meta, cell_f, node, dt, wk, cell, w, lent, ic, dep, dcp, dw, dcode
        )
        start = new == NONE and node == NONE and sm_i[sm, S_ISSTART]
        if start and not started[sm_i[sm, S_CUR] + 1]:
            new = _start_path(
                ni, nf, free, meta, codes, sm_i, started, ints, ints2, floats, sums, sm, t
            )
        if new != NONE:
            ni[new, N_RC] += 1
        _drop(meta, pend, node)
        sm_i[sm, S_NODE] = new
        # ---- effects of the record ----
        ok, wk = _effects(
            ni, meta, pend, warn_ev, warn_cnt, rs_i, rs_t, q_i, q_f, sm_i, sm_f, flags_col[i],
            sm, op, a, n, t, rec, new, wk,
        )  # fmt: skip
        if not ok:
            return ERR_RESIZE, i
        if op == LINK:
            key = (sm << 21) | a
            links[key] = links[key] + 1 if key in links else 1
        elif linked and wk == ON_LINK:
            sm_i[sm, S_WK] = NOT_WAITING
        if sm_i[sm, S_ISEND]:
            _end(ni, meta, pend, sm_i, ends_i, ends_t, sm, new, t)
        # ---- references this record gave up ----
        for k in range(meta[M_NPEND]):
            x = _decref(ni, free, meta, pend[k])
            if x <= -2:
                _summary_decref(meta, ints, ints2, sums, -2 - x)
        meta[M_NPEND] = 0
    return OK, nrec


# ---------------------------------------------------------------------------
# commits (pathlog.commit on handles)


@njit(cache=True)
def commit(keyed, hot, meta, cold, rec):
    """Fold the settled prefix of the live paths; returns the nodes left unsettled.

    As :func:`cpasim.analysis.pathlog.commit`; "active" SMs are those with a
    record in the last half commit interval.
    """
    sm_i, ends_i, q_i = keyed.sm_i, keyed.ends_i, keyed.q_i
    i2, f2, i1, f1 = hot
    ni, nf, free, seen = i2[I2_NI], f2[F2_NF], i1[I1_FREE], i2[I2_SEEN]
    codes, rs_i = i2[I2_CODES], i2[I2_STORE]
    ints, ints2, floats, sums, dicts = cold
    if seen.shape[0] < ni.shape[0]:
        # Marks of earlier commits have older stamps: nothing to keep.
        seen = np.zeros((ni.shape[0], 3), np.int64)
        i2[I2_SEEN] = seen
    meta[M_COMMITS] += 1
    stamp = meta[M_STAMP] + 1
    meta[M_STAMP] = stamp
    # seen[x] = (stamp, group, meet); meet -2 = on the main chain (at its own depth)
    smeta = ints2[0]
    since = rec - meta[M_EVERY] // 2
    nsm = sm_i.shape[0]
    # Every handle of an inactive holder, into a buffer.
    nother = 0
    for s in range(nsm):
        h = sm_i[s, S_NODE]
        if h != NONE and not (sm_i[s, S_HASLAST] and sm_i[s, S_LASTREC] >= since):
            _push(ints, 2, nother, h)
            nother += 1
        h = sm_i[s, S_PEND]
        if h != NONE:
            _push(ints, 2, nother, h)
            nother += 1
    for h in dicts[6].values():  # paths put aside in other connections
        _push(ints, 2, nother, h)
        nother += 1
    for q in range(q_i.shape[0]):
        for r in (LIVE, PAST, FREED):
            for j in range(q_i[q, Q_RN + r]):
                h = rs_i[_ring_at(q_i, q, r, j), R_NODE]
                if h != NONE:
                    _push(ints, 2, nother, h)
                    nother += 1
    for c in range(ends_i.shape[0]):
        h = ends_i[c, 0]
        if h != NONE:
            _push(ints, 2, nother, h)
            nother += 1
    others = ints[2]
    ngroups = 0
    nseen = 0
    for s in range(nsm):
        h = sm_i[s, S_NODE]
        if h == NONE or not (sm_i[s, S_HASLAST] and sm_i[s, S_LASTREC] >= since):
            continue
        if seen[h, 0] == stamp:
            g = seen[h, 1]
            meet = seen[h, 2]
            if meet == -2:
                meet = ni[h, N_DEPTH]
            groups = ints2[1]
            if meet < groups[g, 1]:
                groups[g, 1] = meet
            continue
        nwalk = 0
        x = h
        while x >= 0 and seen[x, 0] != stamp:
            nwalk += 1
            x = ni[x, N_PAR]
        if x < 0:
            root = -2 - x
            if smeta[root, SM_ROOTST] != stamp:
                g = ngroups
                ngroups += 1
                if g >= ints2[1].shape[0]:
                    ints2[1] = _grow2i(ints2[1], g + 1)
                groups = ints2[1]
                groups[g, 0] = h
                groups[g, 1] = ni[h, N_DEPTH]
                groups[g, 2] = root
                groups[g, 3] = 0
                smeta[root, SM_ROOTST] = stamp
                smeta[root, SM_ROOTG] = g
                y = h
                for _ in range(nwalk):
                    seen[y, 0] = stamp
                    seen[y, 1] = g
                    seen[y, 2] = -2
                    y = ni[y, N_PAR]
                nseen += nwalk
                continue
            # Two chains under one root with nothing in common: no fold.
            g = smeta[root, SM_ROOTG]
            meet = -1
        else:
            g = seen[x, 1]
            meet = seen[x, 2]
            if meet == -2:
                meet = ni[x, N_DEPTH]
        groups = ints2[1]
        if meet < groups[g, 1]:
            groups[g, 1] = meet
        y = h
        for _ in range(nwalk):
            seen[y, 0] = stamp
            seen[y, 1] = g
            seen[y, 2] = meet
            y = ni[y, N_PAR]
        nseen += nwalk
    groups = ints2[1]
    for k in range(nother):
        h = others[k]
        if seen[h, 0] == stamp:
            g = seen[h, 1]
            meet = seen[h, 2]
        else:
            nwalk = 0
            x = h
            while x >= 0 and seen[x, 0] != stamp:
                nwalk += 1
                x = ni[x, N_PAR]
            if x < 0:
                root = -2 - x
                g = smeta[root, SM_ROOTG] if smeta[root, SM_ROOTST] == stamp else -1
                meet = -1
            else:
                g = seen[x, 1]
                meet = seen[x, 2]
                if meet == -2:
                    meet = ni[x, N_DEPTH]
            y = h
            for _ in range(nwalk):
                seen[y, 0] = stamp
                seen[y, 1] = g
                seen[y, 2] = meet
                y = ni[y, N_PAR]
            nseen += nwalk
        if meet == -2:
            meet = ni[h, N_DEPTH]
        if g >= 0 and meet < groups[g, 1]:
            groups[g, 3] = 1  # keeps the old summary's view: fold into a copy
    folded = 0
    for g in range(ngroups):
        meet = groups[g, 1]
        if meet < 0:  # chains under the root with nothing in common
            groups[g, 4] = NONE
            groups[g, 5] = groups[g, 2]
            continue
        lca = groups[g, 0]
        for _ in range(ni[lca, N_DEPTH] - meet):
            lca = ni[lca, N_PAR]
        groups[g, 4] = lca
        parent = ni[lca, N_PAR]
        if parent < 0:  # nothing settled since the last fold
            groups[g, 5] = -2 - parent
            continue
        nchain = 0
        x = parent
        while x >= 0:
            _push(ints, 1, nchain, x)
            nchain += 1
            x = ni[x, N_PAR]
        root = -2 - x
        if groups[g, 3]:
            root = _copy_summary(meta, ints, ints2, floats, sums, root)
        _fold(ni, nf, codes, meta, ints2, sums, sm_i, root, ints[1], nchain)
        ints2[0][root, SM_RC] += 1
        ni[lca, N_PAR] = -2 - root
        groups[g, 5] = root
        x = _decref(ni, free, meta, parent)
        if x <= -2:
            _summary_decref(meta, ints, ints2, sums, -2 - x)
        folded += nchain
    # The active handles and their groups, before the splits re-stamp their nodes.
    nact = 0
    for s in range(nsm):
        h = sm_i[s, S_NODE]
        if h != NONE and sm_i[s, S_HASLAST] and sm_i[s, S_LASTREC] >= since:
            _push(ints, 3, 2 * nact, h)
            _push(ints, 3, 2 * nact + 1, seen[h, 1])
            nact += 1
    for g in range(ngroups):
        folded += _split(ni, nf, free, seen, codes, meta, ints, ints2, floats, sums, sm_i, nact, g)
    meta[M_FOLDED] += folded
    return max(0, nseen - folded)


@njit(cache=True)
def _split(ni, nf, free, seen, codes, meta, ints, ints2, floats, sums, sm_i, nact, g):
    """:func:`cpasim.analysis.pathlog._split` for commit group ``g``: hang every long
    branch below its fold point under a copy of the summary down to it; returns
    the nodes folded."""
    groups = ints2[1]
    at = groups[g, 4]  # NONE: the root summary itself
    root = groups[g, 5]
    stamp = meta[M_STAMP] + 1
    meta[M_STAMP] = stamp
    # seen[x] = (stamp, child of ``at`` that x descends from, deepest head below a child)
    nchild = 0
    for k in range(nact):
        if ints[3][2 * k + 1] != g:
            continue
        h = ints[3][2 * k]
        nwalk = 0
        last = NONE
        x = h
        while x >= 0 and x != at and seen[x, 0] != stamp:
            last = x
            nwalk += 1
            x = ni[x, N_PAR]
        if x >= 0 and x != at:
            child = seen[x, 1]
        elif nwalk == 0:
            continue
        else:
            child = last
            _push(ints, 4, nchild, child)
            nchild += 1
            seen[child, 2] = -1
        y = h
        for _ in range(nwalk):
            seen[y, 0] = stamp
            seen[y, 1] = child
            if y != child:
                seen[y, 2] = -1
            y = ni[y, N_PAR]
        if ni[h, N_DEPTH] > seen[child, 2]:
            seen[child, 2] = ni[h, N_DEPTH]
    if nchild == 0:
        return 0
    least = SPLIT_MIN + ints2[0][root, SM_NORDER]
    # Held while the branches are moved off: the last move may free them.
    if at >= 0:
        ni[at, N_RC] += 1
    else:
        ints2[0][root, SM_RC] += 1
    folded = 0
    for k in range(nchild):
        child = ints[4][k]
        if seen[child, 2] - ni[child, N_DEPTH] < least:
            continue
        copy = _copy_summary(meta, ints, ints2, floats, sums, root)
        if at >= 0:
            _push(ints, 1, 0, at)
            _fold(ni, nf, codes, meta, ints2, sums, sm_i, copy, ints[1], 1)
            folded += 1
        ints2[0][copy, SM_RC] += 1
        ni[child, N_PAR] = -2 - copy
        if at >= 0:
            ni[at, N_RC] -= 1  # the child's reference; the hold above keeps it above 0
        else:
            ints2[0][root, SM_RC] -= 1
    if at >= 0:
        x = _decref(ni, free, meta, at)
        if x <= -2:
            _summary_decref(meta, ints, ints2, sums, -2 - x)
    else:
        _summary_decref(meta, ints, ints2, sums, root)
    return folded


# ---------------------------------------------------------------------------
# results


@njit(cache=True)
def finish(keyed, hot, meta, cold, node):
    """A new summary of the path ending at ``node``'s parent (free it with
    :func:`release_summary`)."""
    sm_i = keyed.sm_i
    ni, nf, codes = hot[0][I2_NI], hot[1][F2_NF], hot[0][I2_CODES]
    ints, ints2, floats, sums, dicts = cold
    nchain = 0
    x = ni[node, N_PAR]
    while x >= 0:
        _push(ints, 1, nchain, x)
        nchain += 1
        x = ni[x, N_PAR]
    s = _copy_summary(meta, ints, ints2, floats, sums, -2 - x)
    _fold(ni, nf, codes, meta, ints2, sums, sm_i, s, ints[1], nchain)
    return s


@njit(cache=True)
def release_summary(meta, cold, s):
    _free_summary(meta, cold[0], cold[3], s)


@njit(cache=True)
def refcount_errors(keyed, hot, meta, layers):
    """Nodes in use whose reference count is not the number of their holders
    (``layers``: the paths put aside in other connections, see :func:`_switch`)."""
    sm_i, ends_i, q_i = keyed.sm_i, keyed.ends_i, keyed.q_i
    ni, free, rs_i = hot[0][I2_NI], hot[2][I1_FREE], hot[0][I2_STORE]
    cap = ni.shape[0]
    used = np.ones(cap, np.bool_)
    for k in range(meta[M_NFREE]):
        used[free[k]] = False
    rc = np.zeros(cap, np.int64)
    for x in range(cap):
        if used[x] and ni[x, N_PAR] >= 0:
            rc[ni[x, N_PAR]] += 1
    for s in range(sm_i.shape[0]):
        for h in (sm_i[s, S_NODE], sm_i[s, S_PEND]):
            if h >= 0:
                rc[h] += 1
    for h in layers.values():
        rc[h] += 1
    for q in range(q_i.shape[0]):
        for r in (LIVE, PAST, FREED):
            for j in range(q_i[q, Q_RN + r]):
                h = rs_i[_ring_at(q_i, q, r, j), R_NODE]
                if h >= 0:
                    rc[h] += 1
    for c in range(ends_i.shape[0]):
        if ends_i[c, 0] >= 0:
            rc[ends_i[c, 0]] += 1
    bad = 0
    for x in range(cap):
        if used[x] and (rc[x] != ni[x, N_RC] or rc[x] == 0):
            bad += 1
    return bad
