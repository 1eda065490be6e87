"""Annotation records in their compact, columnar form.

This is the in-memory and on-disk representation of the records defined in
``docs/annotations.md``.  A trace is a sequence of *chunks*: numpy
structured arrays of :data:`RECORD_DTYPE`, plus one :class:`TraceKey` that maps
the integer ids in those arrays to names.  The key only ever grows; a chunk
refers only to ids the key already holds when the chunk is handed out.

Field meaning per op (``a`` and ``n`` are overloaded to keep records small):

=========== =========================== =============================================
op          ``a``                       ``n``
=========== =========================== =============================================
begin       state id (``key.states``)   unused (0)
enq, deq,   queue id (``key.queues``)   unit count; ``-1`` on deq means "all units"
peek,
reserve,
resize,
wait_empty,
wait_full
link        target SM id (``key.sms``)  unused (0)
run         SM id whose core the        unused (0)
            emitter runs on (itself:
            its own again)
identify    connection id (``key.conns``) unused (0)
declare     queue id                    capacity in units, ``-1`` = unbounded;
                                        ``flags & FLAG_CONN_FLOW`` = units carry
                                        connection ids
=========== =========================== =============================================

``t`` is the time in nanoseconds (float64), non-decreasing through the trace;
records with equal ``t`` keep emission order.  ``sm`` is the emitting state
machine's id (``key.sms``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

#: Operation names, in op-code order.  The op code is the index.
OPS: tuple[str, ...] = (
    "begin",
    "enq",
    "deq",
    "peek",
    "reserve",
    "resize",
    "wait_empty",
    "wait_full",
    "link",
    "identify",
    "declare",
    "run",
)
OP_CODE: dict[str, int] = {name: code for code, name in enumerate(OPS)}

(BEGIN, ENQ, DEQ, PEEK, RESERVE, RESIZE, WAIT_EMPTY, WAIT_FULL, LINK, IDENTIFY, DECLARE, RUN) = (
    range(len(OPS))
)

#: Ops whose ``a`` field is a queue id.
QUEUE_OPS = frozenset({ENQ, DEQ, PEEK, RESERVE, RESIZE, WAIT_EMPTY, WAIT_FULL, DECLARE})

#: ``declare`` flag: units of this queue carry connection ids.
FLAG_CONN_FLOW = 1

RECORD_DTYPE = np.dtype(
    [
        ("t", "<f8"),  # time, ns
        ("op", "u1"),  # index into OPS
        ("flags", "u1"),  # FLAG_* bits (declare only, so far)
        ("sm", "<u4"),  # emitting state machine id
        ("a", "<i4"),  # state / queue / target SM / connection id, by op
        ("n", "<i8"),  # unit count or capacity, by op
    ]
)

SmName = tuple[str, str, str]  # (sys, sm, inst)
QueueName = tuple[str, str, str]  # (qsys, q, qinst)


@dataclass
class TraceKey:
    """Names behind the integer ids of a trace; append-only.

    ``intern_*`` return the id of a name, adding it if it is new.
    """

    sms: list[SmName] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    queues: list[QueueName] = field(default_factory=list)
    conns: list[str] = field(default_factory=list)
    _sm_ids: dict[SmName, int] = field(default_factory=dict, repr=False)
    _state_ids: dict[str, int] = field(default_factory=dict, repr=False)
    _queue_ids: dict[QueueName, int] = field(default_factory=dict, repr=False)
    _conn_ids: dict[str, int] = field(default_factory=dict, repr=False)

    def intern_sm(self, sys: str, sm: str, inst: str = "0") -> int:
        return _intern(self.sms, self._sm_ids, (sys, sm, inst))

    def intern_state(self, state: str) -> int:
        return _intern(self.states, self._state_ids, state)

    def intern_queue(self, qsys: str, q: str, qinst: str = "0") -> int:
        return _intern(self.queues, self._queue_ids, (qsys, q, qinst))

    def intern_conn(self, conn: str) -> int:
        return _intern(self.conns, self._conn_ids, conn)

    def sizes(self) -> tuple[int, int, int, int]:
        """Lengths of (sms, states, queues, conns): what a chunk may refer to."""
        return len(self.sms), len(self.states), len(self.queues), len(self.conns)


def _intern(names: list, ids: dict, name) -> int:
    found = ids.get(name)
    if found is None:
        found = ids[name] = len(names)
        names.append(name)
    return found


class TraceSource(ABC):
    """A readable trace: a growing :class:`TraceKey` and an ordered stream of chunks.

    Readers (columnar files, JSON Lines, in-memory lists) subclass this.  The
    analyzer consumes only this interface and never imports the model.
    ``name`` is what error messages call the trace (usually its path); record
    numbers in messages count from 1 across all chunks.
    """

    name: str = "<trace>"
    key: TraceKey

    @abstractmethod
    def chunks(self) -> Iterator[np.ndarray]:
        """Yield numpy arrays of :data:`RECORD_DTYPE`, in trace order."""
