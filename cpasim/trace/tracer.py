"""The tracer: collects annotation records from a running simulation.

A :class:`Tracer` hands out state-machine handles (:class:`SM`); components call
``sm.begin(state)``, ``sm.link(other)`` and ``sm.identify(conn)``, and the traced
queues (:mod:`cpasim.trace.primitives`) emit the queue records.  The records go
to a sink as one :data:`RECORD_DTYPE` chunk every ``chunk_records`` records, so
memory stays flat however long the run.

Per-record cost matters (the target is at most ~1.3x the untraced run), so the
buffer avoids a Python tuple per record: the fields that repeat, ``(op, flags, sm,
a)``, are interned once as a *code*, and a record is three appends to columns
(time, code, ``n``) that turn into numpy arrays far faster than tuples would.
Handles and traced queues keep the codes they use (:meth:`Tracer.code`,
:meth:`Tracer.emit`); anything else may call :meth:`Tracer.record`.

A sink is anything with ``write(chunk, key)`` and ``close()``: the columnar
file writer (:meth:`Tracer.to_file`) or :class:`MemorySink` (:meth:`Tracer.in_memory`).

:data:`NULL_TRACER` has the same interface and records nothing; its handles'
methods are empty.  Tracing never schedules SimPy events, so a model run with
either tracer produces the same simulation, event for event.
"""

from __future__ import annotations

from array import array
from pathlib import Path
from typing import Protocol

import numpy as np

from cpasim.trace.memory import MemorySource
from cpasim.trace.records import (
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
    WAIT_EMPTY,
    WAIT_FULL,
    TraceKey,
    TraceSource,
)

#: Records buffered before a chunk goes to the sink (64 Ki records = 1.6 MiB).
DEFAULT_CHUNK_RECORDS = 1 << 16

_CODE_DTYPE = np.dtype([(name, RECORD_DTYPE[name]) for name in ("op", "flags", "sm", "a")])


class Sink(Protocol):
    def write(self, chunk: np.ndarray, key: TraceKey) -> None: ...

    def close(self) -> None: ...


def _queue_op(op: int, doc: str):
    """An SM method emitting ``op`` on a queue, with the record's code kept per queue."""

    def method(self, queue: int, n: int = 1) -> None:
        codes = self._queue_codes[op]
        code = codes.get(queue)
        if code is None:
            code = codes[queue] = self._tracer.code(op, self.id, queue)
        self._add_time(self._env._now)
        self._add_code(code)
        self._add_count(n)
        if len(self._codes) >= self._limit:
            self._tracer.flush()

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
        "_last",
        "_add_time",
        "_add_code",
        "_add_count",
        "_codes",
        "_limit",
        "_env",
    )

    def __init__(self, tracer: Tracer, sm_id: int, name: tuple[str, str, str]):
        self.id = sm_id
        self.name = name
        self._tracer = tracer
        self._begin_codes: dict[str, int] = {}
        self._queue_codes: list[dict[int, int]] = [{} for _ in OPS]  # per op: queue -> code
        self._last = -1  # code of the state last entered; -1: emit the next begin
        (
            self._add_time,
            self._add_code,
            self._add_count,
            self._codes,
            self._limit,
        ) = tracer._buffer
        self._env = tracer.env

    def begin(self, state: str) -> None:
        """Enter ``state``; time until the next record is charged to it."""
        code = self._begin_codes.get(state)
        if code is None:
            tracer = self._tracer
            code = self._begin_codes[state] = tracer.code(BEGIN, self.id, tracer.state(state))
        if code == self._last:
            return
        self._last = code
        self._add_time(self._env._now)
        self._add_code(code)
        self._add_count(0)
        if len(self._codes) >= self._limit:
            self._tracer.flush()

    def link(self, other: SM) -> None:
        """Call into (or return to) ``other`` without a queue in between."""
        other._last = -1
        self._tracer.record(LINK, self.id, other.id)

    def identify(self, conn: str) -> None:
        """From now on this SM works for connection ``conn``."""
        self._tracer.record(IDENTIFY, self.id, self._tracer.conn(conn))

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


class Tracer:
    """Records annotations of one simulation run into ``sink``.

    Records are emitted with ``record(op, sm, a, n=0, flags=0)`` (any record), or
    ``emit(code, n=0)`` with a code from :meth:`code` (the hot path for callers that
    keep their codes); both append at the current simulated time.
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
        # The buffer: parallel columns, emptied (never replaced) at each flush.
        # Times go into a typed array at once: a list would keep one float object
        # per record, scattered in memory by the time of the flush.  Codes and
        # counts are mostly shared small ints, cheaper to keep in lists.
        self._times = array("d")
        self._codes: list[int] = []
        self._counts: list[int] = []
        # Codes: (op, flags, sm, a) -> index, and the columns they stand for.
        self._code_ids: dict[tuple[int, int, int, int], int] = {}
        self._code_fields: list[tuple[int, int, int, int]] = []
        self._code_table = np.zeros(0, dtype=_CODE_DTYPE)
        self._state_ids = self.key._state_ids
        self._handles: list[SM] = []
        # What SM handles append with (see SM); bind() gives them the environment.
        self._clock = [env]  # a list, so that emit/record see a later bind()
        self._buffer = (
            self._times.append,
            self._codes.append,
            self._counts.append,
            self._codes,
            chunk_records,
        )
        self.emit, self.record = self._hot_path()
        self.env = env

    @property
    def env(self):
        """The SimPy environment whose ``now`` stamps the records."""
        return self._env

    @env.setter
    def env(self, env) -> None:
        self._env = env
        self._clock[0] = env
        for handle in self._handles:
            handle._env = env

    @classmethod
    def to_file(cls, env, path: str | Path, **kwargs) -> Tracer:
        """Stream the trace into a columnar ``.cpt`` file (valid once closed)."""
        from cpasim.trace.columnar import CptWriter

        return cls(env, CptWriter(path), **kwargs)

    @classmethod
    def in_memory(cls, env, **kwargs) -> Tracer:
        """Keep the chunks in memory; :meth:`source` reads them back."""
        return cls(env, MemorySink(), **kwargs)

    def bind(self, env) -> Tracer:
        """Take time from ``env`` (for code that builds its own environment)."""
        if (self._codes or self.records_written) and env is not self.env:
            raise RuntimeError("tracer already holds records of another environment")
        self.env = env
        return self

    # Names -> ids
    def sm(self, sys: str, sm: str, inst: str = "0") -> SM:
        """The handle of SM ``(sys, sm, inst)``; the same object for the same name."""
        sm_id = self.key.intern_sm(sys, sm, inst)
        handles = self._handles
        while len(handles) <= sm_id:
            handles.append(SM(self, len(handles), self.key.sms[len(handles)]))
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
        """The code that stands for ``(op, flags, sm, a)``, for :meth:`emit`."""
        fields = (op, flags, sm, a)
        found = self._code_ids.get(fields)
        if found is None:
            # Checked once per distinct code, so a bad id fails here, not at a flush.
            if not 0 <= sm < len(self.key.sms) or a < 0 or not 0 <= op < len(OPS):
                raise ValueError(
                    f"record (op {op}, sm {sm}, a {a}) names an id this tracer never "
                    "gave out (a handle or queue of another tracer?)"
                )
            found = self._code_ids[fields] = len(self._code_fields)
            self._code_fields.append(fields)
        return found

    def _hot_path(self):
        """``emit`` and ``record`` as closures over the buffer and the clock.

        They run once per record; as closures they skip the attribute look-ups a
        method would do, a good part of their cost in CPython.
        """
        add_time, add_code, add_count, codes, limit = self._buffer
        clock = self._clock
        code_ids, new_code, flush = self._code_ids, self.code, self.flush
        size = len

        def emit(code: int, n: int = 0) -> None:
            """Append the record of ``code`` with count ``n`` at the current simulated time."""
            add_time(clock[0]._now)
            add_code(code)
            add_count(n)
            if size(codes) >= limit:
                flush()

        def record(op: int, sm: int, a: int, n: int = 0, flags: int = 0) -> None:
            """Append one raw record at the current simulated time."""
            code = code_ids.get((op, flags, sm, a))
            if code is None:
                code = new_code(op, sm, a, flags)
            add_time(clock[0]._now)
            add_code(code)
            add_count(n)
            if size(codes) >= limit:
                flush()

        return emit, record

    def declare(self, queue: int, sm: SM, capacity: float | None, conn_flow: bool) -> None:
        """Queue metadata; ``capacity`` None or inf means unbounded."""
        cap = -1 if capacity is None or capacity == float("inf") else int(capacity)
        self.record(DECLARE, sm.id, queue, cap, FLAG_CONN_FLOW if conn_flow else 0)

    def flush(self) -> None:
        """Hand the buffered records to the sink as one chunk."""
        if self._closed:
            raise RuntimeError("tracer is closed")
        if not self._codes:
            return
        table = self._code_table
        if len(table) < len(self._code_fields):
            table = self._code_table = np.array(self._code_fields, dtype=_CODE_DTYPE)
        rows = np.take(table, np.array(self._codes, dtype=np.intp))
        chunk = np.empty(len(rows), dtype=RECORD_DTYPE)
        chunk["t"] = np.frombuffer(self._times, dtype=np.float64)
        chunk["n"] = self._counts
        for field in _CODE_DTYPE.names:
            chunk[field] = rows[field]
        del self._times[:]
        self._codes.clear()
        self._counts.clear()
        self.records_written += len(chunk)
        self.sink.write(chunk, self.key)

    def close(self) -> None:
        """Flush and close the sink; further closes do nothing."""
        if self._closed:
            return
        self.flush()
        self._closed = True
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
