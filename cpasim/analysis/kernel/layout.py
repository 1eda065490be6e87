"""What each array of the compiled pass holds: its record type, by field name.

Tables are numpy structured arrays, one record per row, so the kernel reads
``sms[sm].node`` and ``nodes[x].cp`` where it once read column constants; numba
compiles a field to a fixed offset into the row, as fast as a column of a
2-D array.  The containers the per-record steps take are named tuples of
such arrays (:mod:`cpasim.analysis.kernel.state`).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import from_dtype, types

I8, F8 = np.int64, np.float64


def _record(*fields: tuple[str, type]) -> np.dtype:
    return np.dtype(list(fields))


# -- sized by the trace key (grown by the caller between chunks) ---------------

#: A state machine.  ``node`` is its path node in the connection it works for
#: (``conn``); ``link_*`` a pending ``link`` made to it; ``wait_*`` what it
#: waits for (a ``snapshot`` wait kind, on queue ``wait_q`` since ``wait_t``).
#: ``p_*``/``c_*`` hold a bit per entry of breaks and scale_comm that holds for
#: edges from (p) and to (c) it (``transforms.SmRule``).  ``host``: the SM whose
#: core it runs on (-1: its own), ``guests`` the SMs running on its core,
#: ``lent_from`` since when its core is lent (NaN: not), ``lent`` the time lent
#: since its last record.
SM = _record(
    ("state", I8), ("came_from", I8), ("cell", I8), ("has_enter", I8), ("enter_t", F8),
    ("node", I8), ("conn", I8), ("base", I8), ("is_start", I8), ("is_end", I8),
    ("start_code", I8), ("has_last", I8), ("last_rec", I8), ("last_t", F8),
    ("wait_kind", I8), ("wait_q", I8), ("wait_t", F8),
    ("linked", I8), ("link_node", I8), ("link_sm", I8), ("link_conn", I8),
    ("p_breaks", I8), ("c_breaks", I8), ("p_comms", I8), ("c_comms", I8),
    ("host", I8), ("guests", I8), ("lent_from", F8), ("lent", F8),
)  # fmt: skip

#: A queue: its declaration and the what-if's rule for it (``breaks``/``comms``:
#: a bit per entry of breaks and scale_comm whose glob matches, ``edgewise``:
#: whether each edge's SMs decide, else ``broken`` and ``comm``); the units it
#: has taken in and given out (``head``, ``tail``), and its statistics.
QUEUE = _record(
    ("cap", I8), ("flow", I8), ("head", I8), ("tail", I8),
    ("broken", I8), ("comm", F8), ("extra", I8), ("breaks", I8), ("comms", I8), ("edgewise", I8),
    ("has_occ", I8), ("occ_area", F8), ("occ_t", F8), ("occ_t0", F8), ("occ_max", I8),
    ("arrivals", I8), ("has_enq", I8), ("enq_t0", F8), ("enq_t1", F8),
    ("waits_empty", I8), ("wait_empty_ns", F8), ("waits_full", I8), ("wait_full_ns", F8),
    ("comm_n", I8), ("comm_sum", F8), ("comm_max", F8),
)  # fmt: skip

#: A ring buffer of a queue's segments, a region of the shared segment store.
#: Each queue has three (index ``LIVE``, ``PAST``, ``FREED``).
RING = _record(("off", I8), ("cap", I8), ("head", I8), ("n", I8))
LIVE, PAST, FREED = 0, 1, 2  # units held; taken (the credit what-if); slots freed

#: Per connection + 1 (index 0: none yet): whether its path started, and its
#: end for now (node, SM, order of first end, time).
CONN = _record(("started", I8), ("end_node", I8), ("end_sm", I8), ("end_order", I8), ("end_t", F8))

# -- grown by the kernel -------------------------------------------------------

#: A path node.  ``parent >= 0`` is a node, ``<= -2`` summary ``-2 - parent``,
#: ``NONE`` none; ``refs`` counts its holders (see :mod:`.nodes`).
NODE = _record(
    ("parent", I8), ("depth", I8), ("code", I8), ("loser", I8), ("refs", I8),
    ("inc", F8), ("wait", F8), ("cp", F8), ("margin", F8), ("lent", F8),
)  # fmt: skip
NONE = -1

#: Edge codes, dense ids into this table: an SM's start, an intra edge (SM,
#: state) or an inter edge (producer SM, consumer SM, queue index + 1, 0 = link).
CODE = _record(("kind", I8), ("x", I8), ("y", I8), ("z", I8))
K_START, K_INTRA, K_INTER = 0, 1, 2

#: A units run in a queue: positions ``[first, end)``, its producer's node and
#: SM, the connection it carries (-1: any) and when it arrived (or was freed).
SEGMENT = _record(("first", I8), ("end", I8), ("node", I8), ("conn", I8), ("sm", I8), ("t", F8))

#: A state transition of an SM, its visits, time in the state left, and the
#: cell of (SM, state entered).
TRANSITION = _record(
    ("sm", I8), ("came_from", I8), ("state", I8), ("to", I8), ("visits", I8), ("cell", I8),
    ("time", F8),
)  # fmt: skip

#: Who adds to and takes from each queue: ``key`` = sm << 22 | queue << 1 | out.
QUEUE_OP = _record(("key", I8), ("count", I8))

#: An (SM, state) the SM was in (not an SM x state table, which would grow with
#: their product): its intra edge code (-1: not yet), scale factor, and time
#: active and waiting in it.
CELL = _record(("code", I8), ("factor", F8), ("active", F8), ("waiting", F8))

#: The first warning of each kind per queue.
WARNING = _record(
    ("kind", I8), ("queue", I8), ("rec", I8), ("held", I8), ("n", I8), ("cap", I8), ("sm", I8),
    ("op", I8),
)  # fmt: skip
W_EMPTY, W_FULL, W_SHORT = 0, 1, 2

#: An edge of an edgewise queue op, for ``edges.pick``.
CANDIDATE = _record(("node", I8), ("sm", I8), ("conn", I8))

#: Lookup caches in front of the typed dicts: small rows, so that the hot part
#: of each stays in the CPU cache.  Empty slots have key -1.
CACHE = 1 << 12
TRANSITION_SLOT = _record(("sm_from", I8), ("state_to", I8), ("index", I8))
KEY_SLOT = _record(("key", I8), ("value", I8))

#: A commit's mark on a node: the commit's stamp, the group of chains it
#: belongs to, and where that chain meets the group's first (-2: on it).
MARK = _record(("stamp", I8), ("group", I8), ("meet", I8))

# -- summaries and commits -----------------------------------------------------

#: A summary (:class:`cpasim.analysis.pathlog.Summary`): holders, nodes folded,
#: lengths of its edge order, first-visit order and listing, the commit that
#: last found it a root and the group it got then, and its path's start time.
SUMMARY = _record(
    ("refs", I8), ("count", I8), ("norder", I8), ("nfirst", I8), ("nlist", I8),
    ("root_stamp", I8), ("root_group", I8), ("start", F8),
)  # fmt: skip

#: A summary's totals per edge code; ``order`` is a separate column (the codes
#: in order of first visit) that shares the rows.
EDGE = _record(
    ("visits", I8), ("loops", I8), ("has_slack", I8), ("order", I8),
    ("time", F8), ("wait", F8), ("slack", F8), ("lent", F8),
)  # fmt: skip

#: One node of a summary's listing.
LISTING = _record(("code", I8), ("cp", F8), ("inc", F8), ("wait", F8))

#: A commit group: the chains under one root summary.  ``head`` the first
#: chain's node, ``meet`` the depth where all chains meet (-1: nowhere),
#: ``shared`` whether an inactive holder keeps the old summary's view, ``at``
#: the fold point after the fold (``NONE``: the root itself), ``at_root`` its
#: root summary.
GROUP = _record(
    ("head", I8), ("meet", I8), ("root", I8), ("shared", I8), ("at", I8), ("at_root", I8)
)

# -- the pass's counters -------------------------------------------------------

#: Counters and settings of a pass, one record.  ``n*``: rows in use of the
#: kernel's tables; ``err_*``: the details of an error; ``grow_q`` and
#: ``need_*``: what the next record needs grown (``growth.room``).
META = _record(
    ("limit", I8), ("every", I8), ("lenient", I8),
    ("nfree", I8), ("live", I8), ("peak", I8), ("npend", I8),
    ("ncodes", I8), ("ntr", I8), ("nqe", I8), ("nwarn", I8), ("ncells", I8), ("ncand", I8),
    ("store_used", I8), ("sfree", I8), ("nsum", I8),
    ("end_seq", I8), ("next_commit", I8), ("folded", I8), ("stamp", I8), ("commits", I8),
    ("err_sm", I8), ("err_op", I8), ("err_q", I8), ("err_n", I8), ("err_held", I8),
    ("grow_q", I8), ("need_live", I8), ("need_past", I8), ("need_freed", I8),
    ("need_pend", I8), ("need_cand", I8),
)  # fmt: skip

# status of a chunk
OK, ERR_SHORT, ERR_RESIZE = 0, 1, 2


def array_type(dtype: np.dtype, ndim: int = 1) -> types.Array:
    """numba's type of a C-contiguous array of ``dtype``."""
    return types.Array(from_dtype(dtype), ndim, "C")


# -- what the caller owns ------------------------------------------------------

#: The tables sized by the trace key, grown by the caller between chunks
#: (:class:`cpasim.analysis.compiled.CompiledPass`): SMs, connections, queues,
#: their rings (``(queues, 3)``), warning counts (``(queues, kind)``) and
#: scale_comm's factors (by entry).
Keyed = namedtuple("Keyed", ["sms", "conns", "queues", "rings", "warned", "factors"])

#: A chunk's records, one array per field (``cpasim.tracing.records.RECORD_DTYPE``).
Chunk = namedtuple("Chunk", ["t", "op", "flags", "sm", "a", "n"])
