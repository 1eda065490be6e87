"""From raw scenario entries to one flat dict of validated values.

A *flat* configuration maps every full key to its value in internal units:
global keys as ``link.rate``, per-host keys as ``hosts.tx.tcp.wmem`` and
``hosts.rx.tcp.wmem``.  Entries arrive in *layers* (the scenario file, then each
``--set``, or a ``with_overrides`` mapping); each layer is applied on top of the
previous one.  Inside a layer, keys without a host prefix are applied first so
that ``hosts.<h>.`` keys override them whatever their order.
"""

from __future__ import annotations

import difflib
import math
import tomllib
from collections.abc import Iterable
from typing import Any

from cpasim import units
from cpasim.config.params import (
    ALL_HOSTS,
    BOOL,
    ENUM,
    FLOAT,
    FORWARDER,
    INT,
    QUANTITIES,
    SPECS,
    ParamSpec,
)
from cpasim.errors import CpasimError
from cpasim.units import show

#: (key as written, raw value) pairs of one layer.
Entries = Iterable[tuple[str, Any]]

_GLOBAL_KEYS = [k for k, s in SPECS.items() if not s.per_host]
_HOST_KEYS = [k for k, s in SPECS.items() if s.per_host]


def default_flat() -> dict[str, Any]:
    """Every full key with its declared default."""
    flat = {k: SPECS[k].default for k in _GLOBAL_KEYS}
    for host in ALL_HOSTS:
        flat.update(
            {f"hosts.{host}.{k}": SPECS[k].default for k in _HOST_KEYS if host in SPECS[k].hosts}
        )
    return flat


def _prefixes(key: str) -> list[str]:
    parts = key.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


#: Section names (``link``, ``cpu.cost``, ``hosts.tx.cpu`` ...), for clearer errors.
_SECTIONS = {p for k in [*SPECS, *default_flat()] for p in _prefixes(k)}


def spec_of(full_key: str) -> ParamSpec:
    """The spec of a full key (``hosts.rx.cpu.cores`` -> the ``cpu.cores`` spec)."""
    if full_key.startswith("hosts."):
        return SPECS[full_key.split(".", 2)[2]]
    return SPECS[full_key]


def targets(key: str, where: str) -> tuple[list[str], ParamSpec]:
    """The full keys a key as written sets, and its spec; unknown keys are errors."""
    if key in SPECS:
        spec = SPECS[key]
        if spec.per_host:
            return [f"hosts.{h}.{key}" for h in spec.hosts], spec
        return [key], spec
    if key.startswith("hosts.") or key == "hosts":
        parts = key.split(".", 2)
        if len(parts) < 3:
            raise CpasimError(
                f"{where}: {key!r} needs a parameter key after it, e.g. 'hosts.rx.cpu.cores'"
            )
        host, rest = parts[1], parts[2]
        if host not in ALL_HOSTS:
            raise CpasimError(
                f"{where}: unknown host {host!r} in {key!r}: expected one of {', '.join(ALL_HOSTS)}"
            )
        if rest in SPECS and SPECS[rest].per_host:
            if host not in SPECS[rest].hosts:
                raise CpasimError(f"{where}: {key!r}: {_not_on(host, rest)}")
            return [key], SPECS[rest]
        raise CpasimError(_unknown(key, where, rest, _HOST_KEYS, f"hosts.{host}."))
    raise CpasimError(_unknown(key, where, key, list(SPECS), ""))


def _not_on(host: str, key: str) -> str:
    if host == FORWARDER:
        return (
            f"the forwarding host {FORWARDER} has no {key} (it runs no sockets or TCP and "
            "only forwards): expected a key of its devices, IP, CPU, bus or memory"
        )
    return f"{key} is a key of the forwarding host only: expected hosts.{FORWARDER}.{key}"


def _unknown(key: str, where: str, lookup: str, candidates: list[str], prefix: str) -> str:
    if key in _SECTIONS:
        return (
            f"{where}: {key!r} is a section, not a parameter: expected keys such as "
            + ", ".join(repr(k) for k in _keys_under(key)[:3])
        )
    if lookup in SPECS:  # a global key under hosts.<h>.
        return f"{where}: {key!r}: {lookup!r} is global and cannot be set per host"
    close = _closest_key(lookup, candidates)
    if close is not None:
        hint = f"; did you mean {prefix + close!r}?"
    else:
        section = lookup.rpartition(".")[0]
        # The section's keys and sub-sections (``cost.*``), one level down.
        under = [c[len(section) + 1 :] for c in candidates if c.startswith(section + ".")]
        leaves = sorted({u.split(".", 1)[0] + (".*" if "." in u else "") for u in under})
        if 0 < len(leaves) <= 8:
            hint = f"; {prefix + section} has: " + ", ".join(leaves)
        else:
            hint = (
                f"; see `cpasim params {prefix + section}`" if leaves else "; see `cpasim params`"
            )
    return f"{where}: unknown key {key!r}{hint}"


#: Words people use for a parameter under another name (the last part of a key).
_SAME_MEANING = {
    "speed": "rate",
    "bandwidth": "rate",
    "bw": "rate",
    "bitrate": "rate",
    "throughput": "rate",
    "latency": "delay",
    "rtt": "delay",
    "propagation": "delay",
    "drop": "loss",
    "drops": "loss",
    "loss_rate": "loss",
    "per": "loss",
    "frequency": "freq",
    "clock": "freq",
    "ghz": "freq",
    "cpus": "cores",
    "ncores": "cores",
    "time": "duration",
    "length": "duration",
    "runtime": "duration",
    "random_seed": "seed",
    "congestion_control": "cc",
    "congestion": "cc",
}


def _closest_key(lookup: str, candidates: list[str]) -> str | None:
    """The key ``lookup`` most likely means: within its own section first (a word
    of the same meaning, then the nearest spelling of the last part), then the
    nearest spelling of the whole key.  ``link.speed`` means ``link.rate``, not
    ``sim.seed``, which is spelt closer."""
    lookup = lookup.lower()
    by_lower = {c.lower(): c for c in candidates}
    if lookup in by_lower:
        return by_lower[lookup]
    section, _, leaf = lookup.rpartition(".")
    siblings = {
        c.rpartition(".")[2]: c for low, c in by_lower.items() if low.rpartition(".")[0] == section
    }
    if siblings:
        meaning = _SAME_MEANING.get(leaf)
        if meaning in siblings:
            return siblings[meaning]
        close = difflib.get_close_matches(leaf, list(siblings), n=1, cutoff=0.6)
        if close:
            return siblings[close[0]]
    # Elsewhere: a misspelt section (``lnk.rate``).  Not the keys of a known section
    # again, which the shared prefix alone would make look close (``link.zzz`` and
    # ``link.mtu``, ``cpu.bogus`` and ``cpu.cost.user``).
    top = lookup.split(".", 1)[0]
    others = [low for low in by_lower if not siblings or low.split(".", 1)[0] != top]
    close = difflib.get_close_matches(lookup, others, n=1, cutoff=0.6)
    return by_lower[close[0]] if close else None


def _keys_under(section: str) -> list[str]:
    flat = default_flat()
    return [k for k in flat if k.startswith(section + ".")] or list(flat)


def coerce(spec: ParamSpec, raw: Any, what: str) -> Any:
    """Check and convert one raw value (TOML type) for ``spec``; ``what`` names it in errors."""
    kind = spec.type
    if kind in QUANTITIES:
        value = units.parse_quantity(raw, kind, what=what)
    elif kind == BOOL:
        if not isinstance(raw, bool):
            raise CpasimError(f"{what} = {show(raw)}: expected true or false")
        value = raw
    elif kind == INT:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise CpasimError(f"{what} = {show(raw)}: expected an integer")
        value = raw
    elif kind == FLOAT:
        try:
            value = (
                float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else None
            )
        except OverflowError:
            value = None
        if value is None or not math.isfinite(value):
            raise CpasimError(f"{what} = {show(raw)}: expected a finite number{_unit(spec)}")
    elif kind == ENUM:
        if not isinstance(raw, str) or raw not in spec.choices:
            raise CpasimError(f"{what} = {show(raw)}: expected one of " + ", ".join(spec.choices))
        return raw
    else:  # pragma: no cover - params.py declares only the kinds above
        raise AssertionError(kind)
    if spec.choices is not None and value not in spec.choices:
        raise CpasimError(
            f"{what} = {show(raw)}: expected one of {spec.range_text().replace('|', ', ')}"
        )
    if (spec.lo is not None and value < spec.lo) or (spec.hi is not None and value > spec.hi):
        plain = units.plain_number_hint(raw, kind) if kind in QUANTITIES else ""
        if plain:
            # A bare 350 meant as microseconds is 350 s: say which unit it was read in.
            value_text, _, hint = plain.partition("; ")
            raise CpasimError(
                f"{what} = {show(raw)}: {value_text} is out of range {spec.range_text()}; {hint}"
            )
        raise CpasimError(f"{what} = {show(raw)} is out of range: expected {spec.range_text()}")
    return value


def _unit(spec: ParamSpec) -> str:
    return f" in {spec.unit}" if spec.unit else ""


def parse_text(text: str, what: str = "value") -> Any:
    """A value written on the command line, read as TOML would (``false``, ``2``, ``1.5``);
    anything that is not a TOML value (``10Gbps``, ``pingpong``) stays a string.
    ``what`` names the value in errors (an array nested too deeply, a huge integer)."""
    if "\n" in text or "\r" in text:
        return text
    try:
        return loads_toml(f"v = {text}", what)["v"]
    except _NotToml:
        return text


class _NotToml(CpasimError):
    """Text that is not TOML at all (as opposed to TOML no parser can hold)."""


def loads_toml(text: str, what: str) -> dict[str, Any]:
    """``tomllib.loads`` whose every failure is one :class:`CpasimError` naming ``what``.

    Besides malformed text, tomllib fails on valid TOML it cannot hold: arrays or
    inline tables nested a few hundred deep exhaust Python's stack, and integers
    over 4300 digits exceed Python's conversion limit.
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _NotToml(f"{what}: malformed TOML: {exc}") from None
    except RecursionError:
        raise CpasimError(
            f"{what}: arrays or inline tables nested too deeply; expected a scenario value"
        ) from None
    except ValueError:
        # Python refuses to convert integers of more than 4300 digits (CVE-2020-10735).
        raise CpasimError(
            f"{what}: an integer with more than 4300 digits; expected a number in range"
        ) from None


def apply(
    flat: dict[str, Any],
    entries: Entries,
    where: str,
    *,
    once: bool = False,
    named: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``flat`` with one layer of raw entries applied (validated); ``flat`` is not changed.

    ``once``: a key may appear only once in this layer (a scenario file).
    ``named``: updated with the full keys this layer sets, each with the key as written
    (``tcp.wmem`` or ``hosts.fw.nic.rx_ring``), as the values are: a key with a host
    prefix over one without (what a rule may hold against a key set to no effect).
    """
    generic: list[tuple[str, list[str], Any]] = []
    specific: list[tuple[str, list[str], Any]] = []
    seen: set[str] = set()
    for key, raw in entries:
        if once and key in seen:
            raise CpasimError(f"{where}: {key!r} is set twice")
        seen.add(key)
        full, spec = targets(key, where)
        value = coerce(spec, raw, f"{where}: {key}")
        (specific if key.startswith("hosts.") else generic).append((key, full, value))
    out = dict(flat)
    for key, full, value in generic + specific:
        for k in full:
            out[k] = value
            if named is not None:
                named[k] = key
    return out


def flatten_toml(doc: dict[str, Any], where: str) -> list[tuple[str, Any]]:
    """Dotted (key, value) pairs of a parsed TOML document, tables followed down."""
    entries: list[tuple[str, Any]] = []
    # An explicit stack rather than recursion: TOML's dotted keys and table headers
    # nest without limit (``[a.a.a....]``), Python's stack does not.
    stack = [iter(doc.items())]
    prefixes = [""]
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
            prefixes.pop()
            continue
        key = prefixes[-1] + item[0]
        value = item[1]
        if isinstance(value, dict):
            if key in SPECS or _host_leaf(key):
                spec = SPECS[key] if key in SPECS else spec_of(key)
                raise CpasimError(f"{where}: {key} is a table: expected a {spec.type} value")
            stack.append(iter(value.items()))
            prefixes.append(key + ".")
        else:
            entries.append((key, value))
    return entries


def _host_leaf(key: str) -> bool:
    parts = key.split(".", 2)
    return len(parts) == 3 and parts[0] == "hosts" and parts[1] in ALL_HOSTS and parts[2] in SPECS
