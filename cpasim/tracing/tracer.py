"""The tracer: collects annotation records from a running simulation.

A :class:`Tracer` hands out state-machine handles (:class:`SM`); components call
``sm.begin(state)``, ``sm.link(other)`` and ``sm.identify(conn)``, and the traced
queues (:mod:`cpasim.tracing.primitives`) emit the queue records.  The records go
to a sink as one :data:`RECORD_DTYPE` chunk every ``chunk_records`` records, so
memory stays flat however long the run.

Per-record cost matters (the target is at most ~1.3x the untraced run), so while
the run goes the usual record is one ``list.append`` of one number, its *packed
code*: the fields that repeat, ``(op, flags, sm, a)``, are interned once
as a code index, and the count ``n`` rides along when it is the usual 0 or 1
(:func:`packed`).  Callers keep the packed codes they use (a handle per state
and queue, a traced queue per SM), so such a record allocates nothing.  Any
other count goes to a side list, its record carrying the slot ``COUNTED``.  Time
is not stored per record either: records come in runs at the same simulated
time (several per SimPy event), so only a change of ``env.now`` is noted, by
appending the new time itself to the same list.  Packed codes are negative and
times are not (the clock must start at 0 or later), which tells them apart; codes
are kept as floats (exact integers), because a list of floats becomes an array
faster than one of ints.  A flush turns the buffer into a chunk with a few
vectorised numpy operations.

Who notes the time depends on the environment.  On a plain SimPy environment
every record compares the clock with the time last noted, and checks whether the
chunk is full (:class:`SM`).  An environment with ``note_times`` (the model's
:class:`~cpasim.model.environment.Kernel`) is handed the buffer and notes the time
itself before each event it processes, flushing between events once a chunk is
full; its records are then one dictionary look-up and one append
(:class:`ClockedSM`), and a chunk may end a few records past ``chunk_records``,
with the event that filled it.

A sink is anything with ``write(chunk, key)`` and ``close()``: the columnar
file writer (:meth:`Tracer.to_file`) or :class:`MemorySink` (:meth:`Tracer.in_memory`).

:data:`NULL_TRACER` has the same interface and records nothing; its handles'
methods are empty.  Tracing never schedules SimPy events, so a model run with
either tracer produces the same simulation, event for event.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Protocol

import numpy as np

from cpasim.tracing.memory import MemorySource
from cpasim.tracing.records import (
    BEGIN,
    DECLARE,
    DEQ,
    ENQ,
    FLAG_CONN_FLOW,
    IDENTIFY,
    LINK,
    OPS,
    PEEK,
    RECORD_DTYPE,
    RESERVE,
    RESIZE,
    RUN,
    WAIT_EMPTY,
    WAIT_FULL,
    TraceKey,
    TraceSource,
)

#: Records buffered before a chunk goes to the sink (64 Ki records = 1.6 MiB).
DEFAULT_CHUNK_RECORDS = 1 << 16

#: A packed code is ``-(index + 1 + (slot << COUNT_SHIFT))`` as a float (exact below
#: 2**53): slot 0 or 1 is the count itself, slot ``COUNTED`` says the count is the
#: record's entry in the side list.
COUNT_SHIFT = 24
COUNTED = 2
_INDEX_MASK = (1 << COUNT_SHIFT) - 1
MAX_CODES = _INDEX_MASK - 1
_COUNTED = COUNTED << COUNT_SHIFT

_NO_TIME = float("nan")  # the time noted before any record: differs from every time


def packed(index: int, n: int = 0) -> float:
    """The packed code of a record of code ``index`` with count ``n`` (0 or 1)."""
    if n != 0 and n != 1:
        raise ValueError(f"a packed code holds a count of 0 or 1, not {n!r}")
    return float(-(index + 1 + (n << COUNT_SHIFT)))


def counted(index: int) -> float:
    """The packed code of a record of code ``index`` whose count is in the side list."""
    return float(-(index + 1 + _COUNTED))


class Sink(Protocol):
    def write(self, chunk: np.ndarray, key: TraceKey) -> None: ...

    def close(self) -> None: ...


def _queue_op(op: int, doc: str, *, clocked: bool = False):
    """An SM method emitting ``op`` on a queue, with the record's code kept per queue;
    ``clocked``: for an environment that notes the time itself (see :class:`ClockedSM`)."""

    def clocked_method(self, queue: int, n: int = 1) -> None:
        try:
            pair = self._queue_codes[op][queue]
        except KeyError:
            pair = self._new_queue_codes(op, queue)
        if n == 1:
            self._add(pair[0])
        else:
            self._add(pair[1])
            self._add_count(n)

    def method(self, queue: int, n: int = 1) -> None:
        try:
            pair = self._queue_codes[op][queue]  # packed codes: count 1, count on the side
        except KeyError:
            pair = self._new_queue_codes(op, queue)
        now = self._env._now
        mark = self._mark
        if now != mark[0]:
            mark[0] = now
            mark[1] += 1
            self._add(now)
        if n == 1:
            self._add(pair[0])
        else:
            self._add(pair[1])
            self._add_count(n)
        if len(self._buf) >= mark[1]:
            self._tracer.flush()

    if clocked:
        method = clocked_method
    method.__doc__ = doc
    return method


class SM:
    """Handle of one state-machine instance; every method emits one record now.

    The methods append to the tracer's buffer themselves (one call per record).
    ``begin`` of the state the SM is already in emits nothing: the same state goes
    on, and the time is charged to it either way.  After a ``link`` to this SM its
    next ``begin`` is always emitted, so that the link's dependency lands there.
    """

    __slots__ = (
        "id",
        "name",
        "_tracer",
        "_begin_codes",
        "_queue_codes",
        "_link_codes",
        "_last",
        "_env",
        "_mark",
        "_add",
        "_add_count",
        "_buf",
    )

    def __init__(self, tracer: Tracer, sm_id: int, name: tuple[str, str, str]):
        self.id = sm_id
        self.name = name
        self._tracer = tracer
        self._begin_codes: dict[str, int] = {}  # state -> packed code of its begin
        self._queue_codes: list[dict[int, tuple[int, int]]] = [{} for _ in OPS]  # per op, queue
        self._link_codes: dict[SM, float] = {}  # target -> packed code of the link
        self._last = None  # packed code of the state last entered; None: emit the next begin
        self._env = tracer.env
        self._mark, self._add, self._add_count, self._buf = tracer._buffer

    def begin(self, state: str) -> None:
        """Enter ``state``; time until the next record is charged to it."""
        try:
            code = self._begin_codes[state]
        except KeyError:
            code = self._new_begin_code(state)
        if code is self._last:  # the same int object: codes are kept, never recomputed
            return
        self._last = code
        now = self._env._now
        mark = self._mark
        if now != mark[0]:
            mark[0] = now
            mark[1] += 1
            self._add(now)
        self._add(code)
        if len(self._buf) >= mark[1]:
            self._tracer.flush()

    def _new_begin_code(self, state: str) -> float:
        """The packed code of this SM's begin of ``state``, made and kept."""
        tracer = self._tracer
        code = self._begin_codes[state] = packed(tracer.code(BEGIN, self.id, tracer.state(state)))
        return code

    def _new_queue_codes(self, op: int, queue: int) -> tuple[float, float]:
        """The packed codes of this SM's ``op`` on ``queue``: count 1, count on the side."""
        index = self._tracer.code(op, self.id, queue)
        pair = self._queue_codes[op][queue] = (packed(index, 1), counted(index))
        return pair

    def link(self, other: SM) -> None:
        """Call into (or return to) ``other`` without a queue in between."""
        other._last = None
        try:
            code = self._link_codes[other]
        except KeyError:
            code = self._link_codes[other] = packed(self._tracer.code(LINK, self.id, other.id))
        self._tracer.emit_packed(code)  # links are rare: no need for begin's inlined copy

    def identify(self, conn: str) -> None:
        """From now on this SM works for connection ``conn``."""
        self._tracer.record(IDENTIFY, self.id, self._tracer.conn(conn))

    def run_on(self, other: SM) -> None:
        """From now on this SM runs on the core ``other`` holds (a call served on the
        caller's core); ``other`` = this SM: on its own again (the call returns)."""
        self._tracer.record(RUN, self.id, other.id)

    # Queue records, for components that move units by hand (queue = Tracer.queue id).
    enq = _queue_op(ENQ, "``n`` units appended to ``queue``.")
    deq = _queue_op(DEQ, "``n`` units taken from ``queue``; ``n = -1`` takes all.")
    peek = _queue_op(PEEK, "``n`` units looked at, not taken.")
    reserve = _queue_op(RESERVE, "Room for ``n`` units claimed without adding units.")
    resize = _queue_op(RESIZE, "``queue`` now holds exactly ``n`` units.")
    wait_empty = _queue_op(WAIT_EMPTY, "Blocked until ``queue`` holds ``n`` units.")
    wait_full = _queue_op(WAIT_FULL, "Blocked until ``queue`` has room for ``n`` units.")

    def __repr__(self) -> str:
        return f"SM({':'.join(self.name)})"


class ClockedSM(SM):
    """A handle whose records take their time from the environment's own notes.

    An environment that notes the simulated time in the buffer before each event it
    processes (:meth:`cpasim.model.environment.Kernel.note_times`) spares every record
    the check of the clock and of the buffer's length: a record is one append."""

    __slots__ = ()

    def begin(self, state: str) -> None:
        try:
            code = self._begin_codes[state]
        except KeyError:
            code = self._new_begin_code(state)
        if code is not self._last:
            self._last = code
            self._add(code)

    enq = _queue_op(ENQ, SM.enq.__doc__, clocked=True)
    deq = _queue_op(DEQ, SM.deq.__doc__, clocked=True)
    peek = _queue_op(PEEK, SM.peek.__doc__, clocked=True)
    reserve = _queue_op(RESERVE, SM.reserve.__doc__, clocked=True)
    resize = _queue_op(RESIZE, SM.resize.__doc__, clocked=True)
    wait_empty = _queue_op(WAIT_EMPTY, SM.wait_empty.__doc__, clocked=True)
    wait_full = _queue_op(WAIT_FULL, SM.wait_full.__doc__, clocked=True)


class Tracer:
    """Records annotations of one simulation run into ``sink``.

    Records are emitted with ``record(op, sm, a, n=0, flags=0)`` (any record),
    ``emit(code, n=0)`` with a code index from :meth:`code`, or, the hot paths for
    callers that keep their packed codes, ``emit_packed(packed(code, n))`` (count
    0 or 1) and ``emit_counted(counted(code), n)`` (any count); all append at the
    current simulated time.
    """

    enabled = True

    def __init__(self, env, sink: Sink, *, chunk_records: int = DEFAULT_CHUNK_RECORDS):
        """``env`` may be None when the environment is made later: see :meth:`bind`."""
        if chunk_records < 1:
            raise ValueError("chunk_records must be >= 1")
        self.sink = sink
        self.key = TraceKey()
        self.records_written = 0
        self._chunk_records = chunk_records
        self._closed = False
        # The buffer, emptied (never replaced) at each flush: packed codes, one per
        # record, each change of the simulated time before them; the counts other
        # than 0 and 1, in record order.  ``_mark`` is [the time last noted (NaN
        # after a flush, so that every chunk starts with a time), the buffer length
        # that holds ``chunk_records`` records].
        self._buf: list[float] = []
        self._counts: list[int] = []
        self._mark = [_NO_TIME, chunk_records]
        # Codes: (op, flags, sm, a) -> index, and the columns they stand for.
        self._code_ids: dict[tuple[int, int, int, int], int] = {}
        self._code_fields: list[tuple[int, int, int, int]] = []
        # Row ``index + 1`` holds the fields of code ``index`` (row 0 is never used),
        # so the low bits of a packed code index it directly.
        self._code_table = np.zeros(1, dtype=RECORD_DTYPE)
        reuse = getattr(sink, "done_with_chunk_after_write", False)
        self._scratch = np.empty(chunk_records, dtype=RECORD_DTYPE) if reuse else None
        self._state_ids = self.key._state_ids
        self._handles: list[SM] = []
        # What SM handles append with (see SM); bind() gives them the environment.
        self._clock = [env]  # a list, so that the closures see a later bind()
        self._buffer = (self._mark, self._buf.append, self._counts.append, self._buf)
        self._clocked = False  # True: the environment notes the time (see ClockedSM)
        self.emit_packed, self.emit_counted, self.emit, self.record = self._hot_path()
        self._env = None
        self.env = env

    @property
    def env(self):
        """The SimPy environment whose ``now`` stamps the records."""
        return self._env

    @env.setter
    def env(self, env) -> None:
        # A time in the buffer is told from a (negative) packed code by its sign.
        if env is not None and env._now < 0:
            raise ValueError(f"tracing needs a clock that starts at 0 or later, not {env._now}")
        # An environment that can note the time before each event does (the model's
        # Kernel); then records need not look at the clock.
        clocked = hasattr(env, "note_times")
        if self._clocked and not clocked and self._code_fields:
            raise RuntimeError(
                "tracer already serves queues of a clocked environment; use a new tracer"
            )
        old = self._env
        if old is not None and old is not env and self._clocked:
            old.note_times(None)
        self._env = env
        self._clock[0] = env
        if clocked != self._clocked:
            self._clocked = clocked
            self.emit_packed, self.emit_counted, self.emit, self.record = self._hot_path()
        cls = ClockedSM if clocked else SM
        for handle in self._handles:
            handle.__class__ = cls
            handle._env = env
        if clocked:
            mark, add, _, buf = self._buffer
            env.note_times((mark, add, buf, self.flush))
            self._note_time()

    def _note_time(self) -> None:
        """Note the current time in the buffer (clocked: the records that follow take it)."""
        now = self._env._now
        mark = self._mark
        if now != mark[0]:
            mark[0] = now
            mark[1] += 1
            self._buf.append(now)

    @classmethod
    def to_file(cls, env, path: str | Path, **kwargs) -> Tracer:
        """Stream the trace into a columnar ``.cpt`` file (it appears at ``path`` once
        the tracer is closed)."""
        from cpasim.tracing.columnar import CptWriter

        return cls(env, CptWriter(path), **kwargs)

    @classmethod
    def in_memory(cls, env, **kwargs) -> Tracer:
        """Keep the chunks in memory; :meth:`source` reads them back."""
        return cls(env, MemorySink(), **kwargs)

    def bind(self, env) -> Tracer:
        """Take time from ``env`` (for code that builds its own environment)."""
        holds_records = self.records_written or any(entry < 0 for entry in self._buf)
        if holds_records and env is not self.env:
            raise RuntimeError("tracer already holds records of another environment")
        self.env = env
        return self

    # Names -> ids
    def sm(self, sys: str, sm: str, inst: str = "0") -> SM:
        """The handle of SM ``(sys, sm, inst)``; the same object for the same name."""
        sm_id = self.key.intern_sm(sys, sm, inst)
        handles = self._handles
        cls = ClockedSM if self._clocked else SM
        while len(handles) <= sm_id:
            handles.append(cls(self, len(handles), self.key.sms[len(handles)]))
        return handles[sm_id]

    def queue(self, qsys: str, q: str, qinst: str = "0") -> int:
        return self.key.intern_queue(qsys, q, qinst)

    def state(self, state: str) -> int:
        found = self._state_ids.get(state)
        return self.key.intern_state(state) if found is None else found

    def conn(self, conn: str) -> int:
        return self.key.intern_conn(conn)

    # Records
    def code(self, op: int, sm: int, a: int, flags: int = 0) -> int:
        """The code index that stands for ``(op, flags, sm, a)``, for :meth:`emit`."""
        fields = (op, flags, sm, a)
        found = self._code_ids.get(fields)
        if found is None:
            # Checked once per distinct code, so a bad id fails here, not at a flush.
            if not 0 <= sm < len(self.key.sms) or a < 0 or not 0 <= op < len(OPS):
                raise ValueError(
                    f"record (op {op}, sm {sm}, a {a}) names an id this tracer never "
                    "gave out (a handle or queue of another tracer?)"
                )
            if len(self._code_fields) >= MAX_CODES:
                raise ValueError(f"more than {MAX_CODES} distinct (op, sm, a) in one trace")
            found = self._code_ids[fields] = len(self._code_fields)
            self._code_fields.append(fields)
        return found

    def _hot_path(self):
        """``emit_packed``, ``emit_counted``, ``emit`` and ``record``: closures over the buffer.

        They run once per record; as closures they skip the attribute look-ups a
        method would do, a good part of their cost in CPython.
        """
        mark, add, add_count, buf = self._buffer
        clock = self._clock
        code_ids, new_code, flush = self._code_ids, self.code, self.flush
        size = len
        clocked = self._clocked

        def emit_counted_clocked(code: float, n: int) -> None:
            add(code)
            add_count(n)

        def emit_packed(code: float) -> None:
            """Append the record of packed ``code`` at the current simulated time."""
            now = clock[0]._now
            if now != mark[0]:
                mark[0] = now
                mark[1] += 1
                add(now)
            add(code)
            if size(buf) >= mark[1]:
                flush()

        def emit_counted(code: float, n: int) -> None:
            """Append the record of ``code = counted(index)`` with count ``n`` now."""
            now = clock[0]._now
            if now != mark[0]:
                mark[0] = now
                mark[1] += 1
                add(now)
            add(code)
            add_count(n)
            if size(buf) >= mark[1]:
                flush()

        if clocked:  # the environment notes the time and flushes: a record is an append
            emit_packed = add
            emit_counted = emit_counted_clocked

        def emit(code: int, n: int = 0) -> None:
            """Append the record of code index ``code`` with count ``n`` now."""
            if n == 0 or n == 1:
                emit_packed(packed(code, n))
            else:
                emit_counted(counted(code), n)

        def record(op: int, sm: int, a: int, n: int = 0, flags: int = 0) -> None:
            """Append one raw record at the current simulated time."""
            code = code_ids.get((op, flags, sm, a))
            if code is None:
                code = new_code(op, sm, a, flags)
            emit(code, n)

        return emit_packed, emit_counted, emit, record

    def declare(self, queue: int, sm: SM, capacity: float | None, conn_flow: bool) -> None:
        """Queue metadata; ``capacity`` None or inf means unbounded."""
        cap = -1 if capacity is None or capacity == float("inf") else int(capacity)
        self.record(DECLARE, sm.id, queue, cap, FLAG_CONN_FLOW if conn_flow else 0)

    def flush(self) -> None:
        """Hand the buffered records to the sink as one chunk."""
        if self._closed:
            raise RuntimeError("tracer is closed")
        buf = self._buf
        if not buf:
            return
        table = self._code_table
        if len(table) <= len(self._code_fields):
            new = self._code_fields[len(table) - 1 :]
            rows = [(0.0, op, flags, sm, a, 0) for op, flags, sm, a in new]
            table = self._code_table = np.concatenate([table, np.array(rows, dtype=RECORD_DTYPE)])
        # struct packs a list of floats about four times faster than np.fromiter.
        entries = np.frombuffer(struct.pack(f"{len(buf)}d", *buf), dtype=np.float64)
        is_time = entries >= 0
        is_record = ~is_time
        raw = (-entries[is_record]).astype(np.int64)
        n_records = len(raw)
        if not n_records:  # only times noted (a clocked environment): nothing to write
            self._restart()
            return
        # A sink that is done with a chunk once written gets the same memory each
        # time: fresh pages for every chunk would cost more than filling them.
        out = None
        if self._scratch is not None:
            if len(self._scratch) < n_records:  # a clocked chunk ends with its event
                self._scratch = np.empty(n_records + n_records // 8, dtype=RECORD_DTYPE)
            out = self._scratch[:n_records]
        # Whole rows (op, flags, sm, a at once); every index names a row, and "clip"
        # spares the copy that bounds checking would make of ``out``.
        chunk = table.take(raw & _INDEX_MASK, out=out, mode="clip")
        slot = raw >> COUNT_SHIFT
        chunk["n"] = slot
        if self._counts:
            chunk["n"][slot == COUNTED] = self._counts
        # Each record takes the time last noted before it: a time is followed by
        # its records up to the next time (none, where a clocked event recorded nothing).
        at = np.flatnonzero(is_time)
        chunk["t"] = np.repeat(entries[at], np.diff(at, append=len(entries)) - 1)
        self._restart()
        self.records_written += len(chunk)
        self.sink.write(chunk, self.key)

    def _restart(self) -> None:
        """Empty the buffer for the next chunk, which starts with a time."""
        self._buf.clear()
        self._counts.clear()
        self._mark[:] = (_NO_TIME, self._chunk_records)
        if self._clocked:
            self._note_time()

    def close(self) -> None:
        """Flush and close the sink; further closes do nothing."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        if self._clocked:  # the environment may run on: it stops noting for us
            self._env.note_times(None)
            self._buf.clear()  # the time noted for a next chunk that never comes
        self.sink.close()

    def source(self) -> TraceSource:
        """The recorded trace (only for sinks that keep it, e.g. :meth:`in_memory`)."""
        if not self._closed:
            self.flush()
        source = getattr(self.sink, "source", None)
        if source is None:
            raise TypeError(f"{type(self.sink).__name__} does not keep the trace")
        return source(self.key)

    def __enter__(self) -> Tracer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _NullSM:
    """A state-machine handle that records nothing."""

    __slots__ = ()
    id = -1
    name = ("", "", "")

    def begin(self, state: str) -> None:
        pass

    def link(self, other) -> None:
        pass

    def identify(self, conn: str) -> None:
        pass

    def run_on(self, other) -> None:
        pass

    def enq(self, queue: int, n: int = 1) -> None:
        pass

    deq = peek = reserve = wait_empty = wait_full = enq

    def resize(self, queue: int, n: int) -> None:
        pass

    def __repr__(self) -> str:
        return "NULL_SM"


NULL_SM = _NullSM()


class NullTracer:
    """Tracing off: the :class:`Tracer` interface at (nearly) no cost."""

    enabled = False
    records_written = 0
    # Keeps no environment: setting one (as for a Tracer) is accepted and ignored.
    env = property(lambda self: None, lambda self, env: None)

    def __init__(self):
        self.key = TraceKey()

    def bind(self, env) -> NullTracer:
        return self

    def sm(self, sys: str, sm: str, inst: str = "0") -> _NullSM:
        return NULL_SM

    def queue(self, qsys: str, q: str, qinst: str = "0") -> int:
        return -1

    def state(self, state: str) -> int:
        return -1

    def conn(self, conn: str) -> int:
        return -1

    def code(self, op: int, sm: int, a: int, flags: int = 0) -> int:
        return -1

    def emit(self, code: int, n: int = 0) -> None:
        pass

    def emit_packed(self, code: float) -> None:
        pass

    def emit_counted(self, code: float, n: int) -> None:
        pass

    def record(self, op: int, sm: int, a: int, n: int = 0, flags: int = 0) -> None:
        pass

    def declare(self, queue: int, sm, capacity, conn_flow: bool) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return "NULL_TRACER"


NULL_TRACER = NullTracer()


class MemorySink:
    """Keeps every chunk; for tests and for analysing a run without a file."""

    def __init__(self):
        self.chunks: list[np.ndarray] = []
        self.key: TraceKey | None = None

    def write(self, chunk: np.ndarray, key: TraceKey) -> None:
        self.chunks.append(chunk)
        self.key = key

    def close(self) -> None:
        pass

    def source(self, key: TraceKey | None = None) -> MemorySource:
        """The chunks so far, named by ``key`` (default: the key last written with)."""
        return MemorySource(self.chunks, key or self.key or TraceKey())
