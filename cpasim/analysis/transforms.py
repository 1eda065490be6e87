"""What-if transforms applied while the critical path is computed.

Patterns are shell globs (:mod:`fnmatch`, case-sensitive) over display names:

- states: ``sys:sm:state``; an SM instance other than ``"0"`` is also tried as
  ``sys:sm#inst:state``, so a pattern without ``#`` covers every instance;
- queues: ``qsys:q`` and, likewise, ``qsys:q#qinst``.

A pattern must name its system (contain ``:``) and have balanced ``[ ]``.
``scale_comm`` patterns match the queue a communication latency went through.
Each name is matched once, when its id first appears in the trace key.
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

from cpasim.errors import CpasimError


def sm_display(sys: str, sm: str, inst: str) -> str:
    """``sys:sm`` for instance ``"0"``, else ``sys:sm#inst``."""
    return f"{sys}:{sm}" if inst == "0" else f"{sys}:{sm}#{inst}"


def check_pattern(pattern: str, what: str) -> str:
    """Validate a glob; raise :class:`CpasimError` naming ``what``."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise CpasimError(f"{what}: empty pattern")
    if ":" not in pattern:
        raise CpasimError(f"{what}: pattern {pattern!r} must name the system, e.g. 'tx:NIC*'")
    depth = 0
    for ch in pattern:
        if ch == "[":
            if depth:
                raise CpasimError(f"{what}: pattern {pattern!r} has nested '['")
            depth = 1
        elif ch == "]" and depth:
            depth = 0
    if depth:
        raise CpasimError(f"{what}: pattern {pattern!r} has an unclosed '['")
    return pattern


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
            check_pattern(pat, "scale")
            check_factor(f, f"scale {pat}")
        for pat, f in self.scale_comm:
            check_pattern(pat, "scale_comm")
            check_factor(f, f"scale_comm {pat}")
        for pat in self.breaks:
            check_pattern(pat, "break")
        for pat, k in self.capacity:
            check_pattern(pat, "capacity")
            if isinstance(k, bool) or not isinstance(k, int):
                raise CpasimError(f"capacity {pat}: growth {k!r} must be a whole number of units")
            if k <= 0:
                raise CpasimError(
                    f"capacity {pat}: growth must be positive (+k); shrinking a queue "
                    "would reorder causality and cannot be predicted from this trace"
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

    def queue_rules(self, qsys: str, q: str, qinst: str) -> tuple[bool, float, int]:
        """``(broken, comm factor, extra capacity)`` for one queue instance."""
        return self.queues_rules(NameSet.of_queues([(qsys, q, qinst)]))[0]

    def queues_rules(self, names: NameSet) -> list[tuple[bool, float, int]]:
        """:meth:`queue_rules` of each queue of ``names`` (:meth:`NameSet.of_queues`)."""
        if not (self.breaks or self.scale_comm or self.capacity):
            return [(False, 1.0, 0)] * len(names)
        broken = names.first(self.breaks)
        comm = names.first([pat for pat, _ in self.scale_comm])
        extra = names.first([pat for pat, _ in self.capacity])
        return [
            (
                b is not None,
                1.0 if i is None else float(self.scale_comm[i][1]),
                0 if k is None else int(self.capacity[k][1]),
            )
            for b, i, k in zip(broken, comm, extra, strict=True)
        ]


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


def parse_assignment(text: str, what: str) -> tuple[str, str]:
    """Split ``PATTERN=VALUE`` (the last ``=`` separates)."""
    pat, sep, value = text.rpartition("=")
    if not sep or not pat:
        raise CpasimError(f"{what}: expected PATTERN=VALUE, got {text!r}")
    return check_pattern(pat, what), value.strip()


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
    return pat, k
