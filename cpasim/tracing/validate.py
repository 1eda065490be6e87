"""The rules every trace obeys, whichever file it was read from.

Both readers — JSON Lines (:mod:`cpasim.tracing.jsonl`) and ``.cpt``
(:mod:`cpasim.tracing.columnar`) — hand each chunk of records to
:func:`check_chunk` before anyone sees it, and check every name with
:func:`check_name`; the JSON Lines reader also checks each field as it parses
it with the same rules (:func:`count_error`, :func:`check_time`,
:func:`check_int`), so that its messages can name the field.  A file cannot
hold in one format what the other refuses.

Per record (see :mod:`cpasim.tracing.records` for the fields):

- ``t`` finite and never decreasing;
- ``op`` a known op code; ``sm`` and ``a`` ids the trace's names define;
- ``n``: the capacity of ``declare`` is at least 1, or -1 (unbounded); the
  count of another queue op is at least 0 (``deq`` may say -1, "all units");
  ops on no queue carry 0;
- ``flags``: only ``declare`` carries any, and only :data:`FLAG_CONN_FLOW`.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np

from cpasim.errors import CpasimError, shown
from cpasim.tracing.records import (
    BEGIN,
    DECLARE,
    DEQ,
    FLAG_CONN_FLOW,
    IDENTIFY,
    LINK,
    OPS,
    QUEUE_OPS,
    RUN,
    TraceKey,
)

_SURROGATE = re.compile("[\ud800-\udfff]")

#: The range of ``n`` (a signed 64-bit field).
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def check_name(value: object, field: str) -> str:
    """A name (system, SM, state, queue, instance, connection) must be a string of
    Unicode text: JSON can spell a lone surrogate (``"\\ud800"``), which no file
    or terminal can hold."""
    if not isinstance(value, str):
        raise ValueError(f"field {field!r} must be a string, got {_json(value)}")
    if _SURROGATE.search(value):
        raise ValueError(f"field {field!r} is not Unicode text (a lone surrogate): {shown(value)}")
    return value


def check_int(value: object, field: str) -> int:
    """An integer field (``n``, ``capacity``): a whole number that fits 64 bits."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"field {field!r} must be an integer, got {_json(value)}")
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"field {field!r} must be below 2**63, got {shown(value, 24)}")
    return value


def check_time(value: object, last: float) -> float:
    """``t``: a finite number of nanoseconds, not before the previous record's."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"field 't' must be a finite number, got {_json(value)}")
    try:
        t = float(value)
    except OverflowError:  # an integer beyond the float range
        t = math.inf
    if not math.isfinite(t):
        raise ValueError(f"field 't' must be a finite number, got {shown(value, 24)}")
    if t < last:
        raise ValueError(f"time goes backwards: t={t} after t={last}")
    return t


def count_error(code: int, n: int) -> str | None:
    """What is wrong with the count ``n`` of a record of op ``code`` (None: nothing)."""
    if code == DECLARE:
        if n != -1 and n < 1:
            return f"field 'capacity' must be at least 1, got {n}"
    elif code in QUEUE_OPS:
        if n < 0 and not (code == DEQ and n == -1):
            return f"field 'n' must be >= 0 (or -1 on deq), got {n}"
    elif n != 0:
        return f"op {OPS[code]!r} carries no count, got n={n}"
    return None


def _json(value: object) -> str:
    try:
        return shown(json.dumps(value))
    except (TypeError, ValueError):
        return shown(repr(value))


# The bound on ``a`` per op code as an index into the key's sizes (an unknown op
# allows nothing), and the least count per op (declare: checked on its own).
_QUEUE = np.zeros(256, bool)
_QUEUE[list(QUEUE_OPS)] = True
_MIN_N = np.zeros(256, np.int64)
_MIN_N[DEQ] = -1


def check_chunk(
    chunk: np.ndarray, key: TraceKey, name: str, before: int = 0, t_before: float = -np.inf
) -> None:
    """Raise :class:`CpasimError` at the first record of ``chunk`` that breaks a rule.

    ``before`` is the number of records preceding ``chunk`` in the trace (so the
    message can give the record number, counting from 1), ``t_before`` the time
    of the last of them.
    """
    n_sms, n_states, n_queues, n_conns = key.sizes()
    op = chunk["op"]
    a = chunk["a"]
    n = chunk["n"]
    t = chunk["t"]
    flags = chunk["flags"]
    limits = np.zeros(256, np.int64)
    limits[_QUEUE] = n_queues
    limits[BEGIN], limits[LINK], limits[IDENTIFY] = n_states, n_sms, n_conns
    limits[RUN] = n_sms
    limits[len(OPS) :] = -1
    limit = limits[op]
    bad = (limit < 0) | (chunk["sm"] >= n_sms) | (a < 0) | (a >= limit)
    bad |= ~np.isfinite(t)
    if len(t):
        bad[0] |= t[0] < t_before
        bad[1:] |= t[1:] < t[:-1]
    declare = op == DECLARE
    bad |= np.where(declare, (n != -1) & (n < 1), n < _MIN_N[op])
    bad |= ~_QUEUE[op] & (n != 0)
    bad |= np.where(declare, (flags | FLAG_CONN_FLOW) != FLAG_CONN_FLOW, flags != 0)
    if bad.any():
        i = int(np.argmax(bad))
        r = chunk[i]
        code = int(r["op"])
        what = OPS[code] if code < len(OPS) else f"op code {code}"
        t_prev = t_before if i == 0 else float(t[i - 1])
        raise CpasimError(
            f"{name}: record {before + i + 1} ({what} at t={r['t']}) is invalid: "
            f"{_record_error(r, key, t_prev)}"
        )


def _record_error(r, key: TraceKey, t_prev: float) -> str:
    """Why record ``r`` is invalid (the first rule it breaks, in the order checked)."""
    code = int(r["op"])
    t = float(r["t"])
    if code >= len(OPS):
        return f"unknown op code (expected 0 to {len(OPS) - 1})"
    n_sms, n_states, n_queues, n_conns = key.sizes()
    if int(r["sm"]) >= n_sms:
        return f"state machine id {int(r['sm'])} is a name id the trace never defined"
    bound, kind = (
        (n_states, "state")
        if code == BEGIN
        else (n_sms, "state machine")
        if code in (LINK, RUN)
        else (n_conns, "connection")
        if code == IDENTIFY
        else (n_queues, "queue")
    )
    if not 0 <= int(r["a"]) < bound:
        return f"{kind} id {int(r['a'])} is a name id the trace never defined"
    if not math.isfinite(t):
        return "its time is not finite"
    if t < t_prev:
        return f"time goes backwards (after t={t_prev})"
    problem = count_error(code, int(r["n"]))
    if problem is not None:
        return problem
    return f"flags {int(r['flags'])}, expected 0 (or {FLAG_CONN_FLOW} on declare)"
