"""The kernel's state: what it owns, and the views a record works on.

The pass owns four things (:data:`State`): the growable tables of the
per-record steps (:class:`Tables`), the summaries (:class:`Summaries`), the
scratch arrays of commits (:class:`Scratch`), and the typed dicts behind the
lookup caches (:data:`Lookups`).  The first three are numba structrefs:
mutable structs with named fields, so the kernel can replace an array it
grows.

:func:`cpasim.analysis.kernel.step.run` does not work on them directly: a
structref field load, or the atomic reference count numba keeps on every
array it passes to a helper, costs more than a whole record.  It works on
:data:`View`, named tuples of plain views of the arrays (:func:`view`, no
reference count: passed to an inlined step for free).  Before each record it
checks that every table has room for what the record may add, else grows them
and takes a fresh :data:`View`, so no view outlives its array
(:mod:`cpasim.analysis.kernel.growth`).  Named tuples of views keep the
compiled speed of passing the arrays one by one; a structref or jitclass in
the per-record loop does not (``bench/bench_kernel_containers.py``).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import carray, njit, types
from numba.experimental import structref
from numba.extending import intrinsic
from numba.typed import Dict, List

from cpasim.analysis.kernel.layout import (
    CACHE,
    CANDIDATE,
    CELL,
    CODE,
    EDGE,
    GROUP,
    KEY_SLOT,
    LISTING,
    MARK,
    META,
    NODE,
    QUEUE_OP,
    SEGMENT,
    SUMMARY,
    TRANSITION,
    TRANSITION_SLOT,
    WARNING,
    array_type,
)

_I1 = types.int64[::1]
_T4 = types.UniTuple(types.int64, 4)
_EDGES = array_type(EDGE)
_LISTING = array_type(LISTING)


class _StructType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


@structref.register
class TablesType(_StructType):
    pass


@structref.register
class SummariesType(_StructType):
    pass


@structref.register
class ScratchType(_StructType):
    pass


# What a compiled function returns to Python, and takes back.
class Tables(structref.StructRefProxy):
    pass


class Summaries(structref.StructRefProxy):
    pass


class Scratch(structref.StructRefProxy):
    pass


structref.define_boxing(TablesType, Tables)
structref.define_boxing(SummariesType, Summaries)
structref.define_boxing(ScratchType, Scratch)

#: The tables the per-record steps grow, by name (see :mod:`.layout`): the node
#: pool (``nodes``, its ``free`` stack, ``pend``: references released at the
#: record's end), edge codes, transitions, queue ops, cells, warnings, the
#: queues' segment store, an edgewise op's candidates, commit marks; and the
#: lookup caches of codes, transitions and queue ops.
TABLES = TablesType(
    [
        ("nodes", array_type(NODE)),
        ("free", _I1),
        ("pend", _I1),
        ("codes", array_type(CODE)),
        ("inter_cache", array_type(KEY_SLOT)),
        ("transitions", array_type(TRANSITION)),
        ("tr_cache", array_type(TRANSITION_SLOT)),
        ("qops", array_type(QUEUE_OP)),
        ("qop_cache", array_type(KEY_SLOT)),
        ("cells", array_type(CELL)),
        ("warnings", array_type(WARNING)),
        ("segments", array_type(SEGMENT)),
        ("cand", array_type(CANDIDATE)),
        ("marks", array_type(MARK)),
    ]
)

#: The summaries (:class:`cpasim.analysis.pathlog.Summary`): a row each, the
#: stack of free rows, and per summary its edge totals (by code id), first-visit
#: order (by base SM, -1: not visited) and listing.
SUMMARIES = SummariesType(
    [
        ("table", array_type(SUMMARY)),
        ("free", _I1),
        ("edges", types.ListType(_EDGES)),
        ("first", types.ListType(_I1)),
        ("listing", types.ListType(_LISTING)),
    ]
)

#: A commit's scratch arrays: a chain of nodes to fold, the handles of the
#: inactive holders, the active handles and their groups, a split's branches,
#: and the groups of chains.
SCRATCH = ScratchType(
    [
        ("chain", _I1),
        ("holders", _I1),
        ("active", _I1),
        ("branches", _I1),
        ("groups", array_type(GROUP)),
    ]
)

#: The typed dicts behind the caches, and the pass's sparse tables (keys
#: ``a << 21 | b`` pack two ids): transition (sm, from, state, to) -> index;
#: inter code key -> code id; queue-op key -> index; (sm, link target) ->
#: count; (sm, state index) -> cell, -> scale factor; (sm, connection) -> the
#: SM's path node in a connection it is not working for; (sm, connection) -> 1
#: for the connections each SM worked for.
Lookups = namedtuple(
    "Lookups", ["transitions", "inter", "qops", "links", "cells", "factors", "layers", "worked"]
)

#: Everything the pass owns.
State = namedtuple("State", ["tables", "sums", "scratch", "lookups"])

#: The path-node pool, as a record sees it.
Nodes = namedtuple("Nodes", ["table", "free", "pend"])
#: The queues: their rows and rings (keyed), the segment store, warning counts
#: (per queue and kind) and first warnings, an edgewise op's candidates, and
#: scale_comm's factors (by entry).
Queues = namedtuple(
    "Queues", ["table", "rings", "segments", "warned", "warnings", "cand", "factors"]
)
#: Edge codes and the profile's counts, with their lookup caches.
Edges = namedtuple(
    "Edges", ["codes", "inter_cache", "transitions", "tr_cache", "qops", "qop_cache", "cells"]
)
#: What a record works on: views of every table (see :func:`view`).
View = namedtuple("View", ["nodes", "queues", "edges", "sms", "conns"])


def new_meta(limit: int, commit_every: int, lenient: bool) -> np.ndarray:
    """The counters of a new pass (one :data:`~.layout.META` record)."""
    meta = np.zeros(1, META)
    meta["nfree"] = 4096
    meta["limit"] = limit
    meta["every"] = commit_every
    meta["lenient"] = 1 if lenient else 0
    meta["next_commit"] = commit_every
    return meta


@njit
def _empty_slots(dtype, n):
    """A lookup cache of ``n`` empty slots (every field -1)."""
    a = np.zeros(n, dtype)
    a.view(np.int64)[:] = -1
    return a


@njit(cache=True)
def new_state():
    """A new pass's :data:`State` (its typed containers built here: cached)."""
    t = structref.new(TABLES)
    t.nodes = np.zeros(4096, NODE)
    t.free = np.arange(4095, -1, -1).astype(np.int64)
    t.pend = np.zeros(1024, np.int64)
    t.codes = np.zeros(256, CODE)
    t.inter_cache = _empty_slots(KEY_SLOT, CACHE)
    t.transitions = np.zeros(256, TRANSITION)
    t.tr_cache = _empty_slots(TRANSITION_SLOT, CACHE)
    t.qops = np.zeros(256, QUEUE_OP)
    t.qop_cache = _empty_slots(KEY_SLOT, CACHE)
    t.cells = np.zeros(256, CELL)
    t.warnings = np.zeros(16, WARNING)
    t.segments = np.zeros(1024, SEGMENT)
    t.cand = np.zeros(16, CANDIDATE)
    t.marks = np.zeros(4096, MARK)
    s = structref.new(SUMMARIES)
    s.table = np.zeros(16, SUMMARY)
    s.free = np.zeros(16, np.int64)
    s.edges = List.empty_list(_EDGES)
    s.first = List.empty_list(_I1)
    s.listing = List.empty_list(_LISTING)
    c = structref.new(SCRATCH)
    c.chain = np.zeros(256, np.int64)
    c.holders = np.zeros(64, np.int64)
    c.active = np.zeros(64, np.int64)
    c.branches = np.zeros(64, np.int64)
    c.groups = np.zeros(16, GROUP)
    lookups = Lookups(
        Dict.empty(_T4, types.int64),
        Dict.empty(types.int64, types.int64),
        Dict.empty(types.int64, types.int64),
        Dict.empty(types.int64, types.int64),
        Dict.empty(types.int64, types.int64),
        Dict.empty(types.int64, types.float64),
        Dict.empty(types.int64, types.int64),
        Dict.empty(types.int64, types.int64),
    )
    return State(t, s, c, lookups)


@intrinsic
def _data(typingctx, arr):
    """The data pointer of an array."""
    sig = types.CPointer(arr.dtype)(arr)

    def codegen(context, builder, signature, args):
        return context.make_array(signature.args[0])(context, builder, value=args[0]).data

    return sig, codegen


@njit(inline="always")
def as_view(a):
    """``a`` without its reference count: the per-record helpers then pass it for
    free (numba otherwise increments and decrements an atomic count per call).
    Valid while ``a`` itself is alive, i.e. during the ``run`` call."""
    return carray(_data(a), a.shape)


@njit(inline="always")
def view(keyed, tables):
    """Views of every table a record works on (see :func:`as_view`).

    Only ``run``'s start and ``growth.grow`` call this: every view a record
    uses comes from one of them, so none outlives the array it shows.
    """
    nodes = Nodes(as_view(tables.nodes), as_view(tables.free), as_view(tables.pend))
    queues = Queues(
        as_view(keyed.queues),
        as_view(keyed.rings),
        as_view(tables.segments),
        as_view(keyed.warned),
        as_view(tables.warnings),
        as_view(tables.cand),
        as_view(keyed.factors),
    )
    edges = Edges(
        as_view(tables.codes),
        as_view(tables.inter_cache),
        as_view(tables.transitions),
        as_view(tables.tr_cache),
        as_view(tables.qops),
        as_view(tables.qop_cache),
        as_view(tables.cells),
    )
    return View(nodes, queues, edges, as_view(keyed.sms), as_view(keyed.conns))


@njit
def grown(a, need):
    """``a`` copied into a zeroed array of at least ``need`` rows (doubling)."""
    n = len(a)
    while n < need:
        n = n * 2 if n else 16
    b = np.zeros(n, a.dtype)
    b[: len(a)] = a
    return b


@njit
def pushed(a, pos, x):
    """``a`` with ``a[pos] = x``: ``a`` itself, or a grown copy if too short."""
    if pos >= len(a):
        a = grown(a, pos + 1)
    a[pos] = x
    return a
