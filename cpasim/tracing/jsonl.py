"""JSON Lines traces: the interchange form of ``docs/annotations.md``.

One JSON object per line with the fields ``t op sys sm inst state q qsys qinst n
to conn capacity conn_flow``.  Defaults: ``inst="0"``, ``qsys``/``qinst`` = the
emitter's ``sys``/``inst``, ``n=1``; ``to`` takes ``{"sys", "sm", "inst"}`` with
the same ``inst`` default.  Blank lines are allowed.

:func:`read_jsonl` streams: it parses a chunk of lines at a time and grows the
:class:`~cpasim.tracing.records.TraceKey` as it goes, so a trace of any length is
read in constant memory.  Every malformed line raises one
:class:`~cpasim.errors.CpasimError` naming the file and line.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from cpasim.errors import CpasimError, shown
from cpasim.files import OutputFile
from cpasim.inputs import InputError, open_input, read_error
from cpasim.tracing.records import (
    BEGIN,
    DECLARE,
    FLAG_CONN_FLOW,
    IDENTIFY,
    LINK,
    OP_CODE,
    OPS,
    QUEUE_OPS,
    RECORD_DTYPE,
    RESIZE,
    RUN,
    TraceKey,
    TraceSource,
)
from cpasim.tracing.validate import check_chunk, check_int, check_name, check_time, count_error

#: Records per chunk handed to the analyzer.
CHUNK_RECORDS = 65536
#: Longest line read (characters): a record is a few hundred; more is not a trace.
LINE_LIMIT = 1 << 20

FIELDS = frozenset(
    {"t", "op", "sys", "sm", "inst", "state", "q", "qsys", "qinst", "n", "to", "conn"}
    | {"capacity", "conn_flow"}
)
# Fields each op needs (beyond t, op, sys, sm) and may carry.
_REQUIRED = {
    BEGIN: {"state"},
    LINK: {"to"},
    IDENTIFY: {"conn"},
    RUN: {"to"},
}
_ALLOWED = {code: {"t", "op", "sys", "sm", "inst"} for code in range(len(OPS))}
_ALLOWED[BEGIN] |= {"state"}
_ALLOWED[LINK] |= {"to"}
_ALLOWED[RUN] |= {"to"}
_ALLOWED[IDENTIFY] |= {"conn"}
for _code in QUEUE_OPS:
    _REQUIRED[_code] = {"q"}
    _ALLOWED[_code] |= {"q", "qsys", "qinst", "n"}
_ALLOWED[DECLARE] = (_ALLOWED[DECLARE] - {"n"}) | {"capacity", "conn_flow"}


def _name(value, field: str) -> str:
    # Instances and connection ids are opaque: accept ints for convenience.
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and field in ("inst", "qinst", "conn")
    ):
        return str(value)
    return check_name(value, field)


def parse_record(obj, key: TraceKey, last_t: float) -> tuple:
    """Turn one decoded JSON object into a record tuple of :data:`RECORD_DTYPE`.

    Interns names into ``key``.  Raises ``ValueError`` with a message that
    names the field at fault; callers add the file and line.
    """
    if not isinstance(obj, dict):
        raise ValueError("expected a JSON object")
    unknown = obj.keys() - FIELDS
    if unknown:
        raise ValueError(f"unknown field {shown(repr(sorted(unknown)[0]))}")
    for field in ("t", "op", "sys", "sm"):
        if field not in obj:
            raise ValueError(f"missing field {field!r}")
    op = obj["op"]
    code = OP_CODE.get(op) if isinstance(op, str) else None
    if code is None:
        raise ValueError(f"unknown op {shown(json.dumps(op))}; expected one of {', '.join(OPS)}")
    missing = _REQUIRED.get(code, set()) - obj.keys()
    if missing:
        raise ValueError(f"op {op!r} needs field {sorted(missing)[0]!r}")
    extra = obj.keys() - _ALLOWED[code]
    if extra:
        raise ValueError(f"field {sorted(extra)[0]!r} does not apply to op {op!r}")
    t = check_time(obj["t"], last_t)
    sys = _name(obj["sys"], "sys")
    inst = _name(obj.get("inst", "0"), "inst")
    sm = key.intern_sm(sys, _name(obj["sm"], "sm"), inst)
    flags = 0
    n = 0
    if code == BEGIN:
        a = key.intern_state(_name(obj["state"], "state"))
    elif code in QUEUE_OPS:
        qsys = _name(obj.get("qsys", sys), "qsys")
        qinst = _name(obj.get("qinst", inst), "qinst")
        a = key.intern_queue(qsys, _name(obj["q"], "q"), qinst)
        if code == DECLARE:
            cap = obj.get("capacity")
            n = -1 if cap is None else check_int(cap, "capacity")
            flow = obj.get("conn_flow", True)
            if not isinstance(flow, bool):
                raise ValueError(f"field 'conn_flow' must be true or false, got {shown(flow)}")
            flags = FLAG_CONN_FLOW if flow else 0
        else:
            n = check_int(obj.get("n", 1), "n")
            if code == RESIZE and "n" not in obj:
                raise ValueError("op 'resize' needs field 'n'")
    elif code in (LINK, RUN):
        to = obj["to"]
        if (
            not isinstance(to, dict)
            or not {"sys", "sm"} <= to.keys()
            or to.keys()
            - {
                "sys",
                "sm",
                "inst",
            }
        ):
            raise ValueError('field \'to\' must be {"sys": .., "sm": .., "inst": ..}')
        a = key.intern_sm(
            _name(to["sys"], "to.sys"), _name(to["sm"], "to.sm"), _name(to.get("inst", "0"), "inst")
        )
    else:  # IDENTIFY
        a = key.intern_conn(_name(obj["conn"], "conn"))
    problem = count_error(code, n)
    if problem is not None:
        raise ValueError(problem)
    return (t, code, flags, sm, a, n)


class JsonlSource(TraceSource):
    """A JSON Lines trace file, read in chunks on each :meth:`chunks` call."""

    def __init__(self, path: str | Path, chunk_records: int = CHUNK_RECORDS):
        self.path = Path(path)
        self.name = str(path)
        self.key = TraceKey()
        self.chunk_records = chunk_records
        try:  # refused now, not at the first read, if it cannot be read
            open_input(self.path, "trace").close()
        except InputError as exc:
            if exc.errno == errno.ENOENT:
                raise CpasimError(f"{self.path}: no such trace file") from None
            raise

    def chunks(self) -> Iterator[np.ndarray]:
        # A fresh key per read keeps ids identical across repeated reads.
        self.key = key = TraceKey()
        rows: list[tuple] = []
        last_t = -math.inf
        before = 0  # records in the chunks handed out so far

        def chunk_of(rows: list[tuple]) -> np.ndarray:
            chunk = np.array(rows, dtype=RECORD_DTYPE)
            # The rules both readers share (each field was checked as it was parsed).
            check_chunk(chunk, key, self.name, before)
            return chunk

        with io.TextIOWrapper(open_input(self.path, "trace"), encoding="utf-8") as fh:
            lineno = 0
            try:
                while line := fh.readline(LINE_LIMIT + 1):
                    lineno += 1
                    if len(line) > LINE_LIMIT:
                        raise ValueError(
                            f"a line of more than {LINE_LIMIT:,} characters (no record is "
                            "that long; is this a trace?)"
                        )
                    if not line.strip():
                        continue
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise ValueError(f"malformed JSON ({exc.msg})") from None
                    row = parse_record(obj, key, last_t)
                    last_t = row[0]
                    rows.append(row)
                    if len(rows) >= self.chunk_records:
                        yield chunk_of(rows)
                        before += len(rows)
                        rows = []
            except UnicodeDecodeError:
                raise CpasimError(f"{self.path}:{lineno + 1}: not UTF-8 text") from None
            except RecursionError:
                raise CpasimError(f"{self.path}:{lineno}: JSON nested too deeply") from None
            except ValueError as exc:
                raise CpasimError(f"{self.path}:{lineno}: {exc}") from None
            except OSError as exc:  # a read failed (EIO)
                raise read_error(self.path, exc, "trace") from None
        if rows:
            yield chunk_of(rows)


def read_jsonl(path: str | Path) -> TraceSource:
    """Open a JSON Lines trace for streaming (nothing is read until ``chunks()``)."""
    return JsonlSource(path)


def record_to_dict(row, key: TraceKey) -> dict:
    """One record as its JSON object, defaults left out."""
    t, code, flags, sm, a, n = (row[f] for f in ("t", "op", "flags", "sm", "a", "n"))
    code = int(code)
    sys, smname, inst = key.sms[int(sm)]
    t = float(t)
    obj: dict = {"t": int(t) if t.is_integer() else t, "op": OPS[code], "sys": sys, "sm": smname}
    if inst != "0":
        obj["inst"] = inst
    a = int(a)
    n = int(n)
    if code == BEGIN:
        obj["state"] = key.states[a]
    elif code in QUEUE_OPS:
        qsys, q, qinst = key.queues[a]
        obj["q"] = q
        if qsys != sys:
            obj["qsys"] = qsys
        if qinst != inst:
            obj["qinst"] = qinst
        if code == DECLARE:
            if n >= 0:
                obj["capacity"] = n
            if not int(flags) & FLAG_CONN_FLOW:
                obj["conn_flow"] = False
        elif n != 1 or code == RESIZE:
            obj["n"] = n
    elif code in (LINK, RUN):
        tsys, tsm, tinst = key.sms[a]
        obj["to"] = {"sys": tsys, "sm": tsm, "inst": tinst}
    elif code == IDENTIFY:
        obj["conn"] = key.conns[a]
    return obj


def write_jsonl(source: TraceSource, path: str | Path, *, partial: bool = False) -> Path:
    """Write ``source`` as JSON Lines; the file appears only once complete.

    ``partial``: keep the file under a partial name instead of replacing ``path``
    (:meth:`cpasim.files.OutputFile.keep_partial`); returns where the file is.
    """
    return write_jsonl_digested(source, path, partial=partial)[0]


def write_jsonl_digested(
    source: TraceSource, path: str | Path, *, partial: bool = False
) -> tuple[Path, str]:
    """:func:`write_jsonl`, and the ``trace_digest`` of the bytes written (hashed as
    they were written, not read back from a path another process may have replaced)."""
    digest = hashlib.sha256()
    # OutputFile removes the temporary file on any error, and names the file on OSError.
    with OutputFile(path, "trace file") as out:
        with out.open("wb") as fh:
            for chunk in source.chunks():
                key = source.key
                data = "".join(
                    json.dumps(record_to_dict(row, key), separators=(",", ":")) + "\n"
                    for row in chunk
                ).encode()
                fh.write(data)
                digest.update(data)
        where = out.keep_partial() if partial else out.commit()
    return where, "sha256:" + digest.hexdigest()
