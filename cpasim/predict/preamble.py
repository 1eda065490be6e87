"""The state of a traced system at a time ``t0``, as records that recreate it.

A what-if over the tail of a trace (:mod:`cpasim.predict.window`) must start
where the system stood at ``t0``: which state each state machine was in and
for which connection, who was waiting on which queue or call, and which units
each queue held, of which connection.  The reference pass
(either engine, run unmodified over the records before ``t0``) knows exactly
that; :func:`preamble` writes it out
as a few records at ``t0``, so that any analyzer reading *preamble + records
from t0 on* starts from the same structure, with every path at length 0 at
``t0``:

- one *origin* SM per connection (and one for none), an instance of the start
  SM (so its first record starts that connection's path): it declares the
  queues, enqueues the units they hold (in queue order, each unit by the
  origin of its connection) and ``link``s every SM that had recorded;
- each such SM then ``begin``s the state it was in (taking the origin's link:
  its path starts at 0, and its next record's intra edge covers ``t - t0``);
- SMs blocked on a queue emit the ``wait_empty``/``wait_full`` they blocked
  with, and pending calls (``link`` not yet answered) are made again.

What the preamble does not carry: the paths themselves (every unit and SM
starts at length 0), slots freed before ``t0`` (so the first ``cap - held``
enqueues after ``t0`` wait on nothing, as their frees lie before ``t0``) and
the wait start times (waits begin at ``t0``).  :func:`structure` reduces a pass to
what the preamble must reproduce; the tests compare it before and after.  Both
read a pass only through its :meth:`snapshot` (:mod:`cpasim.analysis.snapshot`),
which either engine provides.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from cpasim.analysis.snapshot import ON_EMPTY, ON_FULL, ON_LINK, QueueUnits, Snapshot
from cpasim.tracing.records import (
    BEGIN,
    DECLARE,
    ENQ,
    FLAG_CONN_FLOW,
    IDENTIFY,
    LINK,
    RECORD_DTYPE,
    RUN,
    WAIT_EMPTY,
    WAIT_FULL,
)

#: Instance name of the origin SMs (one per connection id; ``-`` for none).
ORIGIN = "window@{conn}"


def origin_names(start: tuple[str, ...], conns: list[int]) -> list[tuple[str, str, str]]:
    """The origin SMs' names, for connections ``conns`` (``-1`` first)."""
    sys, sm = start[0], start[1]
    return [(sys, sm, ORIGIN.format(conn="-" if c < 0 else c)) for c in conns]


def preamble(p, t0: float, first_origin: int) -> tuple[np.ndarray, list[int]]:
    """Records at ``t0`` that recreate the structure of pass ``p`` (fed every record
    before ``t0``), and the connection ids of the origin SMs they use, which take SM
    ids ``first_origin, first_origin + 1, ...`` in that order."""
    snap: Snapshot = p.snapshot()
    sms = snap.sms
    recorded = [sm for sm, s in enumerate(sms) if s.recorded]
    conns = sorted({-1} | {sms[sm].conn for sm in recorded} | _unit_conns(snap))
    origin = {c: first_origin + i for i, c in enumerate(conns)}
    rows: list[tuple] = []

    def add(op: int, sm: int, a: int, n: int = 0, flags: int = 0) -> None:
        rows.append((t0, op, flags, sm, a, n))

    # Each origin's first record starts its connection's path at 0.
    none = origin[-1]
    for c in conns:
        if c >= 0:
            add(IDENTIFY, origin[c], c)
    for q, Q in enumerate(snap.queues):
        if Q.cap >= 0 or not Q.flow:
            add(DECLARE, none, q, Q.cap, FLAG_CONN_FLOW if Q.flow else 0)
    for q, Q in enumerate(snap.queues):
        for n, conn in _held(Q):
            add(ENQ, origin[conn if Q.flow else -1], q, n)
    for sm in recorded:
        add(LINK, origin[sms[sm].conn], sm)
    for sm in recorded:
        if sms[sm].state:
            add(BEGIN, sm, sms[sm].state - 1)
    for sm in recorded:
        s = sms[sm]
        if s.waits in (ON_EMPTY, ON_FULL):
            Q = snap.queues[s.queue]
            held = Q.held
            if s.waits == ON_EMPTY:
                add(WAIT_EMPTY, sm, s.queue, held + 1)
            else:
                add(WAIT_FULL, sm, s.queue, max(1, Q.cap - held + 1) if Q.cap >= 0 else 1)
    # Calls still unanswered: the caller waits (ON_LINK) and the callee has the link.
    answered = set()
    for callee in recorded:
        caller = sms[callee].called_by
        if caller >= 0 and sms[caller].recorded:
            add(LINK, caller, callee)
            answered.add(caller)
    for sm in recorded:
        if sms[sm].waits == ON_LINK and sm not in answered:
            add(LINK, sm, origin[sms[sm].conn])  # waits for an answer that comes later
    # Calls served on their caller's core: the caller's core is lent from here on.
    for sm, s in enumerate(sms):
        if s.runs_on >= 0:
            add(RUN, sm, s.runs_on)
    return np.array(rows, dtype=RECORD_DTYPE), conns


def _held(Q: QueueUnits) -> Iterator[tuple[int, int]]:
    """``(units, connection)`` of each run of units queue ``Q`` holds, oldest first."""
    for n, conn, _sm in Q.units:
        yield n, conn


def _unit_conns(snap: Snapshot) -> set[int]:
    return {conn for Q in snap.queues if Q.flow for _n, conn, _sm in Q.units}


def structure(p, sms: int) -> dict:
    """What :func:`preamble` must reproduce of pass ``p``, for SMs ``0 .. sms-1``."""
    snap: Snapshot = p.snapshot()
    held = {}
    for q, Q in enumerate(snap.queues):
        units = list(_held(Q))
        if units or Q.cap >= 0 or not Q.flow:
            held[q] = (Q.cap, Q.flow, _merge(units))
    mine = snap.sms[:sms]
    return {
        "state": [s.state for s in mine],
        "conn": [s.conn for s in mine],
        "waits": [(s.waits, s.queue) for s in mine],
        # A pending link from an origin SM (id >= sms) is the path's start, not a call.
        "links": [s.called_by if s.called_by < sms else -1 for s in mine],
        "queues": held,
    }


def _merge(units: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for n, conn in units:
        if out and out[-1][1] == conn:
            out[-1][0] += n
        else:
            out.append([n, conn])
    return [tuple(u) for u in out]
