"""What-if transforms applied while the critical path is computed.

Patterns are shell globs (:mod:`fnmatch`, case-sensitive) over the names
annotations.md defines, with balanced ``[ ]``:

- states: ``sys:sm:state``; an SM instance other than ``"0"`` is also tried as
  ``sys:sm#inst:state``, so a pattern without ``#`` covers every instance;
- queues: ``qsys:q`` and, likewise, ``qsys:q#qinst``;
- communication edges: ``PRODUCER->CONSUMER[QUEUE]``, a glob over SM names
  (``sys:sm``, ``sys:sm#inst``) on each side of ``->`` and a queue glob in the
  closing brackets (omitted: any queue), as the path listing names the edges.

``scale_comm`` and ``break`` take queue or edge patterns (a queue pattern
matches every edge through its queues), ``capacity`` queue patterns.  Each
name is matched once, when its id first appears in the trace key: a queue and
an SM get one bit per entry of a list (:class:`EdgeRules`), and an edge takes
the first entry whose bit its queue, its producer and its consumer all have.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import translate
from functools import lru_cache
from itertools import accumulate, chain, count
from operator import add
from typing import NamedTuple

from cpasim.errors import CpasimError, shown


def sm_display(sys: str, sm: str, inst: str) -> str:
    """``sys:sm`` for instance ``"0"``, else ``sys:sm#inst``."""
    return f"{sys}:{sm}" if inst == "0" else f"{sys}:{sm}#{inst}"


def check_pattern(pattern: str, what: str, takes: str = "queue") -> str:
    """Validate a glob over the names ``what`` ``takes`` (``"state"``, ``"queue"``,
    or ``"edge"``: a queue or an edge pattern); raise :class:`CpasimError` naming ``what``."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise CpasimError(f"{what}: empty pattern")
    if "->" in pattern:
        if takes != "edge":
            names = "states (sys:sm:state)" if takes == "state" else "queues (sys:queue)"
            raise CpasimError(f"{what}: pattern {pattern!r} names an edge; {what} takes {names}")
        for part in split_edge(pattern, what):
            _check_brackets(part or "*", pattern, what)
        return pattern
    return _check_brackets(pattern, pattern, what)


def split_edge(pattern: str, what: str) -> tuple[str, str, str] | None:
    """``PRODUCER->CONSUMER[QUEUE]`` as its three globs (queue ``*`` if the
    brackets are left out), or None for a pattern without ``->``."""
    producer, arrow, rest = pattern.partition("->")
    if not arrow:
        return None
    queue = "*"
    if rest.endswith("]"):
        # The bracket group that ends the pattern names the queue (a queue glob
        # may hold [ ] sets of its own).
        depth = 0
        for i in range(len(rest) - 1, -1, -1):
            depth += {"]": 1, "[": -1}.get(rest[i], 0)
            if depth == 0:
                break
        if depth:
            raise CpasimError(f"{what}: pattern {pattern!r} has an unclosed ']'")
        rest, queue = rest[:i], rest[i + 1 : -1]
    if not producer or not rest or not queue:
        raise CpasimError(
            f"{what}: edge pattern {pattern!r}: expected PRODUCER->CONSUMER[QUEUE], "
            "e.g. 'tx:*->rx:*[*]'"
        )
    return producer, rest, queue


def _check_brackets(part: str, pattern: str, what: str) -> str:
    depth = 0
    for ch in part:
        if ch == "[":
            if depth:
                raise CpasimError(f"{what}: pattern {pattern!r} has nested '['")
            depth = 1
        elif ch == "]" and depth:
            depth = 0
    if depth:
        raise CpasimError(f"{what}: pattern {pattern!r} has an unclosed '['")
    return part


def check_factor(value, what: str) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise CpasimError(f"{what}: factor {value!r} is not a number") from None
    if not math.isfinite(f) or f < 0:
        raise CpasimError(f"{what}: factor {value!r} must be a finite number >= 0")
    return f


@dataclass(frozen=True)
class Transforms:
    """A what-if: the same trace, with edges rescaled, resources removed or grown.

    - ``scale``: ``(state pattern, f)``: intra-SM edges of matching states x f;
    - ``scale_comm``: ``(queue pattern, f)``: communication latencies through
      matching queues x f;
    - ``breaks``: queue patterns whose dependencies are ignored (infinite resource);
    - ``capacity``: ``(queue pattern, k)``: grow matching queues by k > 0 units.

    The first matching entry of each list wins.  ``Transforms()`` is the identity.
    """

    scale: list[tuple[str, float]] = field(default_factory=list)
    scale_comm: list[tuple[str, float]] = field(default_factory=list)
    breaks: list[str] = field(default_factory=list)
    capacity: list[tuple[str, int]] = field(default_factory=list)

    def __post_init__(self):
        for pat, f in self.scale:
            check_pattern(pat, "scale", "state")
            check_factor(f, f"scale {pat}")
        for pat, f in self.scale_comm:
            check_pattern(pat, "scale_comm", "edge")
            check_factor(f, f"scale_comm {pat}")
        for pat in self.breaks:
            check_pattern(pat, "break", "edge")
        for what, entries in (("scale_comm", self.scale_comm), ("break", self.breaks)):
            if len(entries) > MAX_ENTRIES:
                raise CpasimError(f"{what}: {len(entries)} patterns; at most {MAX_ENTRIES}")
        for pat, k in self.capacity:
            check_pattern(pat, "capacity")
            if isinstance(k, bool) or not isinstance(k, int):
                raise CpasimError(f"capacity {pat}: growth {k!r} must be a whole number of units")
            if k <= 0:
                raise CpasimError(
                    f"capacity {pat}: growth must be positive (+k); shrinking a queue "
                    "would reorder causality and cannot be predicted from this trace"
                )
            if k > MAX_GROWTH:
                raise CpasimError(
                    f"capacity {pat}: growth {shown(k, 24)} is more than {MAX_GROWTH} units; "
                    "to lift the queue's bound altogether, break it (--break)"
                )

    @property
    def is_identity(self) -> bool:
        return not (self.scale or self.scale_comm or self.breaks or self.capacity)

    def describe(self) -> list[str]:
        out = [f"scale {p}={f:g}" for p, f in self.scale]
        out += [f"scale-comm {p}={f:g}" for p, f in self.scale_comm]
        out += [f"break {p}" for p in self.breaks]
        out += [f"capacity {p}=+{k}" for p, k in self.capacity]
        return out

    # -- matching, once per name ---------------------------------------------------

    def state_factor(self, sys: str, sm: str, inst: str, state: str) -> float:
        return self.state_factors(NameSet.of_states([(sys, sm, inst, state)]))[0]

    def state_factors(self, names: NameSet) -> list[float]:
        """The scale factor of each state of ``names`` (:meth:`NameSet.of_states`)."""
        if not self.scale:
            return [1.0] * len(names)
        scale = self.scale
        found = names.first([pat for pat, _ in scale])
        return [1.0 if i is None else float(scale[i][1]) for i in found]

    def queue_rules(self, qsys: str, q: str, qinst: str) -> QueueRule:
        return self.queues_rules(NameSet.of_queues([(qsys, q, qinst)]))[0]

    def queues_rules(self, names: NameSet) -> list[QueueRule]:
        """The :class:`QueueRule` of each queue of ``names`` (:meth:`NameSet.of_queues`)."""
        if not (self.breaks or self.scale_comm or self.capacity):
            return [QueueRule(0, 0, 0)] * len(names)
        breaks = _bits(names, [_queue_part(p) for p in self.breaks])
        comms = _bits(names, [_queue_part(p) for p, _ in self.scale_comm])
        extra = names.first([pat for pat, _ in self.capacity])
        return [
            QueueRule(b, c, 0 if k is None else int(self.capacity[k][1]))
            for b, c, k in zip(breaks, comms, extra, strict=True)
        ]

    def sms_rules(self, names: NameSet) -> list[SmRule]:
        """The :class:`SmRule` of each SM of ``names`` (:meth:`NameSet.of_sms`)."""
        out = []
        for entries in (self.breaks, [p for p, _ in self.scale_comm]):
            for side in (0, 1):
                # A queue pattern holds for every producer and consumer.
                parts = [(split_edge(p, "") or ("*", "*"))[side] for p in entries]
                out.append(_bits(names, parts))
        return [SmRule(*row) for row in zip(*out, strict=True)]

    @property
    def comm_factors(self) -> list[float]:
        """``scale_comm``'s factors, by entry (the bit numbers of :class:`EdgeRules`)."""
        return [float(f) for _, f in self.scale_comm]

    def edge_masks(self) -> tuple[int, int]:
        """Bits of the edge patterns among ``breaks`` and ``scale_comm``: a queue
        with any of them must look at each edge's producer and consumer."""
        return (
            _mask(i for i, p in enumerate(self.breaks) if "->" in p),
            _mask(i for i, (p, _) in enumerate(self.scale_comm) if "->" in p),
        )


#: Entries of ``breaks`` or ``scale_comm``: one bit each in an int64.
MAX_ENTRIES = 63
#: Largest growth of a queue (units): the analyzer counts units in 64-bit integers,
#: and a queue grown by more than this is one without a bound (``--break``).
MAX_GROWTH = 2**31 - 1


class QueueRule(NamedTuple):
    """A queue's part of the what-if: per entry of ``breaks`` and ``scale_comm``
    a bit, set where the entry's queue glob matches it, and its growth."""

    breaks: int
    comms: int
    extra: int


class SmRule(NamedTuple):
    """An SM's part: per entry a bit, set where the entry holds for edges from
    (``p``) or to (``c``) the SM."""

    p_breaks: int
    c_breaks: int
    p_comms: int
    c_comms: int


def edge_rule(q: QueueRule, p: SmRule, c: SmRule, factors: list[float]) -> tuple[bool, float]:
    """Whether the edge from SM ``p`` to SM ``c`` through queue ``q`` is broken, and
    its communication factor: the first entry all three hold for."""
    comms = q.comms & p.p_comms & c.c_comms
    return (
        q.breaks & p.p_breaks & c.c_breaks != 0,
        factors[(comms & -comms).bit_length() - 1] if comms else 1.0,
    )


def queue_effect(t: Transforms, rule: QueueRule) -> tuple[bool, float, int, bool]:
    """``(broken, comm factor, extra, edgewise)`` of a queue: the first two hold for
    every edge through it unless ``edgewise`` (an edge pattern matches its queue,
    so each edge's producer and consumer decide, :func:`edge_rule`)."""
    break_edges, comm_edges = t.edge_masks()
    comms = rule.comms
    return (
        rule.breaks != 0,
        t.comm_factors[(comms & -comms).bit_length() - 1] if comms else 1.0,
        rule.extra,
        (rule.breaks & break_edges) | (comms & comm_edges) != 0,
    )


def _queue_part(pattern: str) -> str:
    edge = split_edge(pattern, "")
    return pattern if edge is None else edge[2]


def _bits(names: NameSet, patterns: list[str]) -> list[int]:
    """Per entry of ``names``, bit i set where it matches ``patterns[i]``."""
    out = [0] * len(names)
    for i, pattern in enumerate(patterns):
        if pattern == "*":
            out = [x | 1 << i for x in out]
            continue
        for j, hit in enumerate(names.first([pattern])):
            if hit is not None:
                out[j] |= 1 << i
    return out


def _mask(bits) -> int:
    out = 0
    for i in bits:
        out |= 1 << i
    return out


class NameSet:
    """Display names to match against pattern lists: per entry, the names it goes
    by (:func:`name_variants`); the entry matches the first pattern any of them does.

    The patterns of a list become one alternation of named groups; alternatives
    are tried in order, so the group that matched a name is its first matching
    pattern.  The distinct names are joined once, as the lines of one text, and
    each list is matched over the whole text in one scan (a pass meets hundreds
    of SM instances, and a call per name would cost more than the regex); names
    are matched one by one where that cannot be done exactly.
    """

    def __init__(self, entries: Sequence[Sequence[str]]):
        self.entries = entries
        self.names = list(dict.fromkeys(chain.from_iterable(entries)))
        text = "\n".join(self.names)
        # Usable when no name holds a line break of its own.
        self.text = text if text.count("\n") == len(self.names) - 1 else None
        self._starts: dict[int, str] | None = None

    @classmethod
    def of_states(cls, states: Iterable[tuple[str, str, str, str]]) -> NameSet:
        """``(sys, sm, inst, state)`` each."""
        return cls([name_variants(*state) for state in states])

    @classmethod
    def of_sms(cls, sms: Iterable[tuple[str, str, str]]) -> NameSet:
        """``(sys, sm, inst)`` each."""
        return cls([name_variants(sys, sm, inst, None) for sys, sm, inst in sms])

    @classmethod
    def of_queues(cls, queues: Iterable[tuple[str, str, str]]) -> NameSet:
        """``(qsys, q, qinst)`` each."""
        return cls([name_variants(qsys, q, qinst, None) for qsys, q, qinst in queues])

    def __len__(self) -> int:
        return len(self.entries)

    def first(self, patterns: Sequence[str]) -> list[int | None]:
        """Per entry, the index of the first of ``patterns`` it matches, or None."""
        if not patterns:
            return [None] * len(self.entries)
        index = self._together(tuple(patterns))
        if index is None:
            match = _alternation(tuple(patterns)).match
            index = {}
            for name in self.names:
                m = match(name)
                index[name] = None if m is None else int(m.lastgroup[1:])
        get = index.__getitem__
        out = []
        for group in self.entries:
            if len(group) == 1:  # the common case: instance "0"
                out.append(get(group[0]))
                continue
            best = None
            for name in group:
                i = get(name)
                if i is not None and (best is None or i < best):
                    best = i
            out.append(best)
        return out

    def _together(self, patterns: tuple[str, ...]) -> dict[str, int | None] | None:
        lines = _line_alternation(patterns)
        if lines is None or self.text is None:
            return None
        if self._starts is None:
            # Line i starts after the lengths of the lines before it and i line breaks.
            offsets = map(add, accumulate(map(len, self.names), initial=0), count())
            self._starts = dict(zip(offsets, self.names, strict=False))
        starts = self._starts
        out = dict.fromkeys(self.names)
        for m in lines.finditer(self.text):
            if "\n" in m.group():  # a [^...] took the line break: give up
                return None
            out[starts[m.start()]] = int(m.lastgroup[1:])
        return out


@lru_cache(maxsize=256)
def _alternation(patterns: tuple[str, ...]) -> re.Pattern:
    return re.compile("|".join(f"(?P<p{i}>{translate(p)})" for i, p in enumerate(patterns)))


@lru_cache(maxsize=256)
def _line_alternation(patterns: tuple[str, ...]) -> re.Pattern | None:
    """The alternation for names one per line: each pattern as :func:`fnmatch.translate`
    gives it, ``.`` kept from line breaks, from a line's start to its end; None if a
    translation has an unexpected form."""
    bodies = []
    for p in patterns:
        t = translate(p)
        end = next((e for e in ("\\Z", "\\z") if t.endswith(e)), None)
        if "\n" in p or end is None or not t.startswith("(?s:"):
            return None
        bodies.append("(?-s:" + t[4 : -len(end)])
    alts = "|".join(f"(?P<p{i}>{b})" for i, b in enumerate(bodies))
    return re.compile(f"(?m)^(?:{alts})(?=\\n|\\Z)")


def name_variants(sys: str, name: str, inst: str, state: str | None) -> tuple[str, ...]:
    """The display names patterns are matched against: ``sys:sm[:state]``, and
    ``sys:sm#inst[:state]`` for an instance other than ``"0"``."""
    tail = "" if state is None else f":{state}"
    plain = f"{sys}:{name}{tail}"
    if inst == "0":
        return (plain,)
    return (plain, f"{sys}:{name}#{inst}{tail}")


def parse_assignment(text: str, what: str, takes: str = "queue") -> tuple[str, str]:
    """Split ``PATTERN=VALUE`` (the last ``=`` separates); ``takes``: see
    :func:`check_pattern`."""
    pat, sep, value = text.rpartition("=")
    if not sep or not pat:
        raise CpasimError(f"{what}: expected PATTERN=VALUE, got {text!r}")
    return check_pattern(pat, what, takes), value.strip()


def parse_capacity(text: str) -> tuple[str, int]:
    """``QPATTERN=+K`` from the command line."""
    pat, value = parse_assignment(text, "--capacity")
    if not value.startswith("+"):
        raise CpasimError(
            f"--capacity {text!r}: growth must be written +K (e.g. 'tx:TX ring=+64'); "
            "only growth can be predicted"
        )
    try:
        k = int(value[1:])
    except ValueError:
        raise CpasimError(
            f"--capacity {text!r}: {value!r} is not +K with K a whole number"
        ) from None
    if k <= 0:
        raise CpasimError(f"--capacity {text!r}: K must be at least 1")
    if k > MAX_GROWTH:
        raise CpasimError(
            f"--capacity {shown(text)}: K must be at most {MAX_GROWTH} (to lift the "
            "queue's bound altogether, break it with --break)"
        )
    return pat, k
