"""A critical path → the kind of resource that bounds it.

Saidi's figure 6.2 walks a sequence of bottlenecks, each of a kind a designer can
change.  :func:`diagnose` reads a :class:`~cpasim.predict.runs.PathSummary` (its
most critical entries, its resource loops and the busy-time bounds) and names the
kind:

============== ==============================================================
kind           recognised by
============== ==============================================================
``link``       ``*:MAC:transmit`` (serialization on the wire)
``bottleneck`` ``*:Bottleneck:serialize`` (the shaping router)
``window``     a resource loop through ``Send window`` or ``Send buffer``
``bus``        NIC DMA states, a register write waiting for M5's bus, a busy
               PCIe channel bound, loops through ``PCI bus``
``cores``      a busy ``CPU cores`` bound, or CPU states with a loop through
               ``CPU cores``
``cpu``        CPU states, no core contention
``tx_ring``    a loop through ``TX free desc``
``rx_ring``    a loop through ``RX free desc``
``qdisc``      a loop through ``qdisc``
``tx_fifo``    a loop through ``TX FIFO``
============== ==============================================================

Propagation (``*:Link:propagate``) and the communication latency through the
wire are out of a designer's hands: when one of them is the most critical
entry, the resource loops of the path say which resource makes the path wait
for the round trip (Saidi 6.2.2: the TCP window), and that resource is the
bottleneck.  Entries nothing here recognises are skipped in favour of the next, and
so is a serialization (the link's, the router's) on less than a tenth of the path.
What the kinds mean to a user, and the kinds that need more than the path
(loss, a retransmission timeout), are :mod:`cpasim.verdict`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from cpasim.predict.runs import PathSummary
from cpasim.predict.transforms_table import CPU_STATES

LATENCY = "latency"

#: State (``sys:sm:state``) patterns → kind.
STATE_KINDS: tuple[tuple[str, str], ...] = (
    ("*:MAC:transmit", "link"),
    ("*:Bottleneck:serialize", "bottleneck"),
    ("*:Link:propagate", LATENCY),
    ("*:NIC TX:DMA *", "bus"),
    ("*:NIC RX:DMA *", "bus"),
    ("*:NIC TX:writeback", "bus"),
    ("*:TX Desc Fetch:DMA *", "bus"),
    ("*:TX Desc Writeback:writeback", "bus"),
    ("*:*:mmio write", "bus"),  # a register write waiting for M5's bus
    # Linux 2.6.13's send call: its time is IP Send's work on the caller's core.
    ("*:*:ip_push_pending_frames", "cpu"),
    ("*:IP Send:qdisc_restart", "cpu"),
    ("*:Driver TX:xmit", "cpu"),
    ("*:NAPI:poll", "cpu"),
    *((f"*:*:{s}", "cpu") for s in CPU_STATES),
)

#: Queue (``qsys:q``) patterns → kind, for communication edges and resource loops.
QUEUE_KINDS: tuple[tuple[str, str], ...] = (
    ("*:wire*", LATENCY),
    ("*:Send window*", "window"),
    ("*:Send buffer*", "window"),
    # PCIe channel loops are arbitration-order artifacts that predictions free
    # (transforms_table.REORDERED_POOLS); the DMA states themselves name the bus.
    ("*:PCI bus", "bus"),
    ("*:CPU cores", "cores"),
    ("*:TX free desc", "tx_ring"),
    ("*:RX free desc", "rx_ring"),
    ("*:qdisc", "qdisc"),
    ("*:TX FIFO", "tx_fifo"),
)

#: Resources whose busy-time bound (cpasim.predict.bounds) can set a path's length.
RESOURCE_KINDS: tuple[tuple[str, str], ...] = (("*:CPU cores", "cores"), ("*:PCIe *", "bus"))

#: A link's or router's serialization on less of the path than this does not bound
#: it: the path waits elsewhere (a saturated link or router is named by its
#: utilisation before any path is read).
MIN_SERIALIZATION_SHARE = 0.1


@dataclass(frozen=True)
class Diagnosis:
    """What bounds one critical path.

    ``name`` is the entry that says so (a state ``sys:sm:state``, an edge, or a
    bounding resource), ``share`` its share of the path; ``queue`` and
    ``loop_count`` the resource loop that made the path wait, when one did.
    """

    kind: str
    sys: str  # host of the resource ("tx"/"rx"/"fw"), or "" for the link
    reason: str
    name: str = ""
    share: float = 0.0
    queue: str | None = None  # "sys:queue" of the loop
    loop_count: int = 0
    waited_on: str | None = None  # the entry the loop made the path wait in (propagation)


def _kind(name: str, table) -> str | None:
    for pattern, kind in table:
        if fnmatchcase(name, pattern):
            return kind
    return None


def edge_queue(edge: str) -> str | None:
    """``"a:X->b:Y[qsys:q]"`` → ``"qsys:q"``."""
    if "[" in edge and edge.endswith("]"):
        return edge[edge.index("[") + 1 : -1]
    return None


def _loop(path: PathSummary, exclude: tuple[str, ...] = ()) -> tuple[str, str, dict] | None:
    """The strongest resource loop of a kind this module knows: (kind, queue, loop)."""
    for loop in path.loops:
        q = edge_queue(loop["edge"])
        kind = _kind(q, QUEUE_KINDS) if q else None
        if kind and kind != LATENCY and kind not in exclude:
            return kind, q, loop
    return None


def diagnose(path: PathSummary, exclude: tuple[str, ...] = ()) -> Diagnosis | None:
    """The kind of bottleneck of ``path`` (see the module docstring), or None;
    ``exclude``: kinds not to name (a resource known not to bind)."""
    kind = _kind(path.bottleneck or "", RESOURCE_KINDS) if path.bottleneck in path.busy_ns else None
    if kind is not None:
        sys = path.bottleneck.split(":", 1)[0]
        return Diagnosis(
            kind,
            sys,
            f"{path.bottleneck} busy the whole run (utilization bound)",
            name=path.bottleneck,
            share=1.0,
        )
    for entry in path.most_critical:
        name = entry["name"]
        share = f"{name} ({entry['share']:.0%} of the critical path)"
        if "->" in name:
            q = edge_queue(name)
            kind = _kind(q, QUEUE_KINDS) if q else None
        else:
            kind = _kind(name, STATE_KINDS)
        if kind is None or kind in exclude:
            continue
        if kind in ("link", "bottleneck") and entry["share"] < MIN_SERIALIZATION_SHARE:
            continue
        sys = name.split(":", 1)[0]
        found = _loop(path, exclude)
        if kind == LATENCY:
            if found:
                k, q, loop = found
                why = f"resource loop {loop['edge']} ({loop['count']}×)"
                return Diagnosis(
                    k,
                    q.split(":", 1)[0],
                    f"{share} waits on the round trip; {why}",
                    name=name,
                    share=entry["share"],
                    queue=q,
                    loop_count=int(loop["count"]),
                    waited_on=name,
                )
            continue
        if kind == "cpu" and found and found[0] == "cores":
            _, q, loop = found
            return Diagnosis(
                "cores",
                sys,
                f"{share}; resource loop {loop['edge']} ({loop['count']}×)",
                name=name,
                share=entry["share"],
                queue=q,
                loop_count=int(loop["count"]),
            )
        if kind in ("link", "bottleneck"):
            sys = ""
        return Diagnosis(kind, sys, share, name=name, share=entry["share"])
    return None
