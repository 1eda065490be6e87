"""The names a what-if pattern can match in a trace, and the check that each matches one.

A pattern that matches nothing changes nothing: the what-if silently reports the
baseline.  :func:`check_patterns` turns that into an error naming the pattern and
the closest names the trace has; :func:`trace_names` lists them
(``cpasim trace names``).  State names are only known per state machine from the
``begin`` records, so listing them reads the trace once.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

import numpy as np

from cpasim.analysis.transforms import name_variants, split_edge
from cpasim.errors import CpasimError
from cpasim.tracing.records import BEGIN, TraceSource

#: Closest names offered when a pattern matches nothing.
CLOSEST = 5
#: A trace with at most this many names lists them all when one is not found.
FEW = 8


def closest(name: str, known: Sequence[str], n: int = CLOSEST) -> list[str]:
    """The names of ``known`` nearest to ``name``: those equal to it but for case
    first (``tx:app`` is ``tx:App`` misspelt, not a near miss of fifty names),
    else difflib's nearest, compared without case."""
    low = name.lower()
    same = [k for k in known if k.lower() == low]
    if same:
        return same[:n]
    by_lower: dict[str, str] = {}
    for k in known:
        by_lower.setdefault(k.lower(), k)
    return [by_lower[m] for m in difflib.get_close_matches(low, list(by_lower), n=n, cutoff=0.4)]


def hint(name: str, known: Sequence[str]) -> str:
    """What to say after "``name`` is not in the trace": the name it surely meant
    (the same but for case), all names of a small trace, the closest few, or how to
    list them."""
    close = closest(name, known)
    if close and close[0].lower() == name.lower():
        return "did you mean " + " or ".join(repr(c) for c in close) + "?"
    if len(known) <= FEW:
        return "the trace has: " + (", ".join(known) or "(none)")
    if close:
        return "closest: " + ", ".join(close)
    return f"the trace has {len(known)} (list them with 'cpasim trace names')"


@dataclass(frozen=True)
class TraceNames:
    """Display names in a trace, each as ``(sys, name, inst[, state])``."""

    states: list[tuple[str, str, str, str]]  # sys, sm, inst, state (entered at least once)
    sms: list[tuple[str, str, str]]
    queues: list[tuple[str, str, str]]

    def folded(self, kind: str) -> dict[str, int]:
        """Display names without instances (what a pattern without ``#`` matches) →
        number of instances, sorted by name."""
        rows = {"states": self.states, "sms": self.sms, "queues": self.queues}[kind]
        out: dict[str, int] = {}
        for row in rows:
            sys, name, _inst, *state = row
            key = ":".join([sys, name, *state])
            out[key] = out.get(key, 0) + 1
        return dict(sorted(out.items()))

    @property
    def systems(self) -> list[str]:
        return sorted({s for s, _, _ in self.sms} | {s for s, _, _ in self.queues})

    def to_json(self) -> dict:
        return {
            "systems": self.systems,
            "sms": self.folded("sms"),
            "states": self.folded("states"),
            "queues": self.folded("queues"),
        }


def trace_names(source: TraceSource) -> TraceNames:
    """Read ``source`` once for the (SM, state) pairs its ``begin`` records enter."""
    pairs: set[int] = set()
    for chunk in source.chunks():
        begins = chunk[chunk["op"] == BEGIN]
        if begins.size:
            both = begins["sm"].astype(np.int64) << 32 | begins["a"].astype(np.int64)
            pairs.update(np.unique(both).tolist())
    key = source.key
    states = sorted({(*key.sms[p >> 32], key.states[p & 0xFFFFFFFF]) for p in pairs})
    return TraceNames(states=states, sms=list(key.sms), queues=list(key.queues))


def _variants(rows: Iterable[tuple[str, ...]]) -> list[tuple[str, ...]]:
    return [name_variants(r[0], r[1], r[2], r[3] if len(r) > 3 else None) for r in rows]


def check_patterns(
    names: TraceNames, state_patterns: Sequence[tuple[str, str]], queue_patterns
) -> None:
    """Raise for the first ``(option, pattern)`` that matches no state (``--scale``) or
    no queue (``--scale-comm``, ``--break``, ``--capacity``) of the trace; an edge
    pattern (``PRODUCER->CONSUMER[QUEUE]``) must match an SM on each side and a queue."""
    edge_parts = []
    queue_only = []
    for option, pat in queue_patterns:
        edge = split_edge(pat, option)
        if edge is None:
            queue_only.append((option, pat))
            continue
        producer, consumer, queue = edge
        edge_parts += [(f"{option} {pat!r}: producer", producer, "sms")]
        edge_parts += [(f"{option} {pat!r}: consumer", consumer, "sms")]
        edge_parts += [(f"{option} {pat!r}: queue", queue, "queues")]
    for patterns, rows, kind, what in (
        (state_patterns, names.states, "states", "state (sys:sm:state)"),
        (queue_only, names.queues, "queues", "queue (sys:queue)"),
    ):
        _check(names, patterns, rows, kind, what)
    for label, pat, kind in edge_parts:
        rows = names.sms if kind == "sms" else names.queues
        what = "state machine (sys:sm)" if kind == "sms" else "queue (sys:queue)"
        _check(names, [(label, pat)], rows, kind, what)


def _check(names: TraceNames, patterns, rows, kind: str, what: str) -> None:
    variants = _variants(rows)
    for option, pat in patterns:
        if any(fnmatchcase(v, pat) for vs in variants for v in vs):
            continue
        folded = list(names.folded(kind))
        # The same pattern but for case: surely what was meant.
        low = pat.lower()
        same = [
            f for f, vs in _folded_variants(rows) if any(fnmatchcase(v.lower(), low) for v in vs)
        ]
        if same:
            said = "did you mean " + ", ".join(same[:CLOSEST]) + "? (names are case-sensitive)"
        else:
            # Compare with the pattern's glob characters dropped: "tx:NIC*" is near "tx:NIC".
            close = closest(pat.replace("*", "").replace("?", ""), folded)
            said = (
                "closest: " + ", ".join(close)
                if close
                else f"the trace has {len(folded)} (list them with 'cpasim trace names')"
            )
        raise CpasimError(f"{option} {pat!r} matches no {what} in the trace; {said}")


def _folded_variants(rows) -> list[tuple[str, tuple[str, ...]]]:
    """``(name without instance, its variants)`` per row, one per folded name."""
    out: dict[str, set[str]] = {}
    for row in rows:
        sys, name, _inst, *state = row
        out.setdefault(":".join([sys, name, *state]), set()).update(_variants([row])[0])
    return [(k, tuple(v)) for k, v in sorted(out.items())]
