"""``[[flows]]``: flows that differ, in one scenario.

Without ``[[flows]]`` a scenario runs ``workload.connections`` identical connections of
``workload.kind``.  Its ``[[flows]]`` tables instead describe groups of flows that
share the path (the link, a bottleneck, both hosts) but not their transport or their
application::

    [[flows]]
    count = 2                    # two CUBIC bulk transfers
    tcp.cc = "cubic"

    [[flows]]
    tcp.cc = "bbr"               # one BBR transfer, one second later
    start = "1s"

    [[flows]]
    kind = "ping"                # an ICMP echo every 10 ms through the same path
    workload.interval = "10ms"

A table's own keys are :class:`~cpasim.config.params.FlowParams`' (``count``,
``start``, ``kind``, ``workload.interval``, ``workload.ping_size``).  It may also set,
for its flows only, any ``tcp.*`` key (``hosts.tx.tcp.*``/``hosts.rx.tcp.*`` for one
end) and the scenario's workload keys of
:data:`~cpasim.config.params.FLOW_WORKLOAD_KEYS`; a key its kind does not use is
refused, and so is every other key (``link.rate`` is the path's, which every flow
shares).  Flows are numbered from 0 in table order, ``count`` at a time: flow ``i``
is connection ``c<i>``.

With ``[[flows]]``, ``workload.bytes`` is each bulk flow's own transfer, and the run
ends when every bulk flow has delivered its bytes if every one has a size (else at
``sim.duration``); ``workload.kind`` must be ``tcp_stream`` and
``workload.connections`` 1 (each table's ``count`` says how many).

``--set flows.<table>.<key>=VALUE`` changes one table (``flows.1.tcp.cc=bbr``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cpasim.config import resolve, rules
from cpasim.config.params import FLOW_SPECS, FLOW_WORKLOAD_KEYS, HOSTS, SPECS
from cpasim.errors import CpasimError
from cpasim.model.flow_kinds import FLOW_KINDS, flow_kind
from cpasim.model.workloads import WORKLOADS

#: The scenario key of the tables.
KEY = "flows"
#: Flows one scenario may hold (as ``workload.connections``).
MAX_FLOWS = SPECS["workload.connections"].hi

#: A table's own workload keys, which only some kinds of flow use (a ping's interval).
OWN_WORKLOAD_KEYS = tuple(k for k in FLOW_SPECS if k.startswith("workload."))


@dataclass(frozen=True)
class FlowGroup:
    """One ``[[flows]]`` table, validated; values in internal units."""

    count: int
    start: float
    kind: str
    interval: float
    ping_size: int
    #: The scenario keys the table sets for its flows: full key (``hosts.tx.tcp.cc``,
    #: ``workload.bytes``) → value, in key order.
    sets: tuple[tuple[str, Any], ...] = ()

    def own(self) -> dict[str, Any]:
        """The table's own keys, as :data:`~cpasim.config.params.FLOW_SPECS` names them."""
        return {
            "count": self.count,
            "start": self.start,
            "kind": self.kind,
            "workload.interval": self.interval,
            "workload.ping_size": self.ping_size,
        }

    def canonical(self) -> dict[str, Any]:
        """Everything that makes the table, as plain data (for the digest)."""
        return {**self.own(), "sets": dict(self.sets)}


def _table_where(where: str, g: int) -> str:
    return f"{where}: flows[{g}]"


def _uses(kind: str, key: str) -> bool:
    """Does a flow of ``kind`` use scenario key ``key`` (a full key)?"""
    if key.startswith("hosts."):
        key = key.split(".", 2)[2]
    uses = flow_kind(kind).uses
    return key in uses or ("tcp" in uses and key.startswith("tcp."))


def _not_per_flow(key: str, where: str) -> CpasimError:
    """The one-line refusal of a key a table may not set."""
    allowed = (
        "count, start, kind, workload.interval, workload.ping_size, tcp.* "
        f"(hosts.tx.tcp.* / hosts.rx.tcp.*) and {', '.join(FLOW_WORKLOAD_KEYS)}"
    )
    if key in SPECS or key.startswith("hosts."):
        why = "every flow shares it (the path, the hosts' devices and CPUs, the run)"
        return CpasimError(f"{where}: {key} is not a per-flow key: {why}; a flow sets {allowed}")
    return CpasimError(f"{where}: unknown key {key!r}; a flow sets {allowed}")


def _is_override(key: str) -> bool:
    """A scenario key a table may set for its flows (whichever its kind)."""
    if key in FLOW_WORKLOAD_KEYS:
        return True
    if key.startswith("tcp.") and key in SPECS:
        return True
    parts = key.split(".", 2)
    return (
        len(parts) == 3
        and parts[0] == "hosts"
        and parts[1] in HOSTS
        and parts[2].startswith("tcp.")
        and parts[2] in SPECS
    )


def parse_table(table: Any, where: str, g: int) -> FlowGroup:
    """One ``[[flows]]`` table (a TOML table) as a :class:`FlowGroup`."""
    here = _table_where(where, g)
    if not isinstance(table, dict):
        raise CpasimError(f"{here}: expected a table of keys ([[flows]]), got {table!r}")
    own = {k: s.default for k, s in FLOW_SPECS.items()}
    overrides: list[tuple[str, Any]] = []
    for key, raw in resolve.flatten_toml(table, here):
        if key in FLOW_SPECS:
            own[key] = resolve.coerce(FLOW_SPECS[key], raw, f"{here}: {key}")
        elif _is_override(key):
            overrides.append((key, raw))
        else:
            raise _not_per_flow(key, here)
    for key, _ in overrides:
        _check_use(own["kind"], key, here)
    # As a layer of a scenario: keys without a host prefix first, then hosts.<h>.
    return _group(own, resolve.apply({}, overrides, here), here)


def _check_use(kind: str, key: str, here: str) -> None:
    if not _uses(kind, key):
        raise CpasimError(
            f"{here}: {key} does nothing for a flow of kind {kind!r}; "
            f"a {kind} flow uses {', '.join(flow_kind(kind).uses).replace('tcp', 'tcp.*')}"
        )


def _group(own: Mapping[str, Any], sets: Mapping[str, Any], here: str) -> FlowGroup:
    """A group from its own values and the full scenario keys it sets (values checked)."""
    kind = own["kind"]
    for full in sets:
        _check_use(kind, full, here)
    for key in OWN_WORKLOAD_KEYS:
        if not _uses(kind, key) and own[key] != FLOW_SPECS[key].default:
            users = " or ".join(repr(k.name) for k in FLOW_KINDS.values() if key in k.uses)
            raise CpasimError(f"{here}: {key} is for flows of kind {users}, not {kind!r}")
    return FlowGroup(
        count=own["count"],
        start=own["start"],
        kind=kind,
        interval=own["workload.interval"],
        ping_size=own["workload.ping_size"],
        sets=tuple(sorted(sets.items())),
    )


def parse(raw: Any, where: str) -> tuple[FlowGroup, ...]:
    """A scenario's ``flows`` value (an array of tables) as groups."""
    if not isinstance(raw, list) or not raw:
        raise CpasimError(
            f"{where}: flows must be an array of tables, written [[flows]] (one per group)"
        )
    return tuple(parse_table(t, where, g) for g, t in enumerate(raw))


def split(entries: Iterable[tuple[str, Any]]) -> tuple[list, list]:
    """Scenario entries → (the others, those of ``flows``: the array or ``flows.*`` keys)."""
    rest, ours = [], []
    for key, value in entries:
        (ours if key == KEY or key.startswith(KEY + ".") else rest).append((key, value))
    return rest, ours


def apply(
    groups: tuple[FlowGroup, ...], entries: Iterable[tuple[str, Any]], where: str
) -> tuple[FlowGroup, ...]:
    """``groups`` with one layer of ``flows`` entries applied: a whole array
    (a scenario file's ``[[flows]]``) or ``flows.<table>.<key>`` changes of one table."""
    for key, raw in entries:
        if key == KEY:
            groups = parse(raw, where)
            continue
        table, _, rest = key[len(KEY) + 1 :].partition(".")
        if not table.isdigit() or not rest:
            raise CpasimError(
                f"{where}: {key!r}: flows are written as [[flows]] tables, one per group "
                "(or flows.<table>.<key> with --set, e.g. flows.0.tcp.cc)"
            )
        g = int(table)
        if g >= len(groups):
            have = (
                f"it has {len(groups)} [[flows]] table(s), flows.0 to flows.{len(groups) - 1}"
                if groups
                else "it has no [[flows]] tables"
            )
            raise CpasimError(f"{where}: {key}: no table {g} in the scenario; {have}")
        groups = groups[:g] + (_changed(groups[g], rest, raw, where, g),) + groups[g + 1 :]
    return groups


def _changed(group: FlowGroup, key: str, raw: Any, where: str, g: int) -> FlowGroup:
    """``group`` with its key ``key`` (as a table writes it) set to ``raw``."""
    here = _table_where(where, g)
    own = group.own()
    sets = dict(group.sets)
    if key in FLOW_SPECS:
        own[key] = resolve.coerce(FLOW_SPECS[key], raw, f"{here}: {key}")
        if key == "kind":  # what the old kind used and the new one does not goes
            sets = {k: v for k, v in sets.items() if _uses(own["kind"], k)}
            for k in OWN_WORKLOAD_KEYS:
                if not _uses(own["kind"], k):
                    own[k] = FLOW_SPECS[k].default
    elif _is_override(key):
        _check_use(own["kind"], key, here)
        sets.update(resolve.apply({}, [(key, raw)], here))
    else:
        raise _not_per_flow(key, here)
    return _group(own, sets, here)


def spec_of(key: str, where: str):
    """The spec of a key as written, ``flows.<table>.<key>`` included."""
    if key.startswith(KEY + "."):
        rest = key[len(KEY) + 1 :].partition(".")[2]
        if rest in FLOW_SPECS:
            return FLOW_SPECS[rest]
        key = rest
    return resolve.targets(key, where)[1]


def flat_of(flat: Mapping[str, Any], group: FlowGroup) -> dict[str, Any]:
    """The resolved keys of ``group``'s flows: the scenario's, with the table's sets."""
    out = dict(flat)
    out.update(group.sets)
    return out


def sized(flat: Mapping[str, Any], groups: tuple[FlowGroup, ...]) -> bool:
    """Does the run end when its transfers do: every bulk flow has a size (and one exists)?"""
    bulk = [g for g in groups if flow_kind(g.kind).bulk]
    return bool(bulk) and all(flat_of(flat, g)["workload.bytes"] > 0 for g in bulk)


def check(flat: Mapping[str, Any], groups: tuple[FlowGroup, ...], where: str) -> None:
    """What cannot work with these groups; each message names the table and the keys."""
    if not groups:
        return
    if not WORKLOADS[flat["workload.kind"]].flows:
        kinds = " or ".join(f'"{k.name}"' for k in WORKLOADS.values() if k.flows)
        raise CpasimError(
            f"{where}: [[flows]] needs workload.kind = {kinds} (each table's kind "
            f"says what its flows do), got {flat['workload.kind']!r}"
        )
    if flat["workload.connections"] != 1:
        raise CpasimError(
            f"{where}: workload.connections ({flat['workload.connections']}) cannot be used "
            "with [[flows]]: each table's count says how many flows it has"
        )
    total = sum(g.count for g in groups)
    if total > MAX_FLOWS:
        raise CpasimError(
            f"{where}: [[flows]] hold {total} flows in all; at most {MAX_FLOWS} are supported"
        )
    timed = not sized(flat, groups)
    duration = flat["sim.duration"]
    for g, group in enumerate(groups):
        here = _table_where(where, g)
        flow_kind(group.kind).check(flat, group, here)
        if timed and group.start >= duration:
            raise CpasimError(
                f"{here}: start ({FLOW_SPECS['start'].format(group.start)}) is not before "
                f"the end of the run (sim.duration = {SPECS['sim.duration'].format(duration)})"
            )
        rules.check(flat_of(flat, group), here)


def first_index(groups: tuple[FlowGroup, ...], g: int) -> int:
    """The index of table ``g``'s first flow."""
    return sum(x.count for x in groups[:g])


def expand(groups: tuple[FlowGroup, ...]) -> list[tuple[int, int]]:
    """``(flow index, table)`` of every flow, in order."""
    out = []
    for g, group in enumerate(groups):
        first = len(out)
        out += [(first + k, g) for k in range(group.count)]
    return out


def toml_lines(groups: tuple[FlowGroup, ...]) -> list[str]:
    """The ``[[flows]]`` tables of a scenario file that loads back to ``groups``."""
    lines: list[str] = []
    for group in groups:
        lines += ["", f"[[{KEY}]]"]
        for key, value in group.own().items():
            spec = FLOW_SPECS[key]
            if value != spec.default:
                lines.append(f"{key} = {_toml(spec, value)}")
        sets = dict(group.sets)
        for full, value in sets.items():
            host, _, key = (
                full.partition(".")[2].partition(".")
                if full.startswith("hosts.")
                else (None, "", full)
            )
            if host is not None:
                # Written once without prefix when both ends are set alike.
                both = [f"hosts.{h}.{key}" for h in HOSTS]
                if all(sets.get(b) == value for b in both):
                    if full == both[0]:
                        lines.append(f"{key} = {_toml(SPECS[key], value)}")
                    continue
            lines.append(f"{full} = {_toml(resolve.spec_of(full), value)}")
    return lines


def _toml(spec, value) -> str:
    if spec.type in ("time", "rate", "size", "freq", "enum"):
        return f'"{spec.format(value)}"'
    return spec.format(value)
