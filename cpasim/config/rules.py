"""Rules: combinations of values that cannot work, declared beside what they constrain.

Each parameter's own type and range is checked as it is read
(:func:`cpasim.config.resolve.coerce`).  A *rule* ties several together: a function
of one scenario's :class:`Values` that refuses a combination in one line naming
every key involved (``v.refuse(...)``).  Rules stand where a reader looks for them:

* a section's own in its ``rules`` (:mod:`cpasim.config.params`: ``sim.warmup``
  before ``sim.duration``, a fixed TCP buffer of at least one MSS ...);
* a kind's in its registry, applied when it is chosen: a workload's
  (:mod:`cpasim.model.workloads`), a bus's (:mod:`cpasim.model.buses`), a host's
  level of detail (:mod:`cpasim.model.detail`), a topology's (``TOPOLOGIES``).

:func:`check` runs them all, the global sections' once and the host sections' once
for each host in the run, each host's through a view that reads its keys without
the ``hosts.<h>.`` prefix.

:func:`unread` names what a configuration sets to no effect and takes all the same: a
bus key of another kind than the host's bus.  A sweep or a what-if may switch the
kind under it, and a resolved scenario (``Config.to_toml``) must load back, so a run
says so rather than the configuration refusing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from cpasim.config.params import GLOBAL_SECTIONS, SPECS, TOPOLOGIES, HostParams, Rule
from cpasim.errors import CpasimError
from cpasim.model.buses import ON_DIE_KEYS, owner, unread_keys
from cpasim.model.detail import LEVELS


class Values:
    """One scenario's resolved values as a rule reads them.

    ``v[key]``: a global key, or a full key (``hosts.tx.cpu.cores``); in a host's view
    (:meth:`host`) a per-host key without prefix is that host's, and a key the host
    does not have is its declared default, as the host's sections hold it.
    ``named``: the full keys the scenario's layers set, each with the key as it was
    written last (``bus.pci_clock`` or ``hosts.rx.bus.pci_clock``; see
    :func:`cpasim.config.resolve.apply`).
    """

    def __init__(
        self,
        flat: Mapping[str, Any],
        where: str,
        named: Mapping[str, str] | None = None,
        host: str | None = None,
    ) -> None:
        self.flat = flat
        self.where = where
        self.named = named or {}
        self.host_name = host
        #: What a message puts before a per-host key: ``hosts.tx.``, or nothing.
        self.prefix = f"hosts.{host}." if host else ""

    def full(self, key: str) -> str:
        """The full key ``key`` reads: a per-host key with this view's prefix."""
        spec = SPECS.get(key)
        return self.prefix + key if self.prefix and spec and spec.per_host else key

    def __getitem__(self, key: str) -> Any:
        full = self.full(key)
        if full in self.flat:
            return self.flat[full]
        return SPECS[key].default  # a key this host does not have

    def show(self, key: str) -> str:
        """The value of ``key`` as a scenario writes it (``2ms``)."""
        name = key.split(".", 2)[2] if key.startswith("hosts.") else key
        return SPECS[name].format(self[key])

    def refuse(self, message: str) -> NoReturn:
        raise CpasimError(f"{self.where}: {message}")

    @property
    def hosts(self) -> tuple[str, ...]:
        """The hosts in the run (the forwarding host only with ``topology.kind = "forward"``)."""
        return TOPOLOGIES[self.flat["topology.kind"]].hosts

    def host(self, name: str) -> Values:
        """Host ``name``'s view."""
        return Values(self.flat, self.where, self.named, name)


def _rules(section: type) -> list[Rule]:
    """A section's rules and its sub-sections', in declaration order."""
    out = list(getattr(section, "rules", ()))
    for field in section.__dataclass_fields__.values():
        if field.metadata.get("section"):
            out += _rules(field.default_factory)
    return out


#: The rules of the global sections, and of a host's.
GLOBAL_RULES: tuple[Rule, ...] = tuple(r for s in GLOBAL_SECTIONS.values() for r in _rules(s))
HOST_RULES: tuple[Rule, ...] = tuple(_rules(HostParams))


def check(flat: Mapping[str, Any], where: str, named: Mapping[str, str] | None = None) -> None:
    """Every rule on ``flat``; the first broken one raises a :class:`CpasimError`."""
    values = Values(flat, where, named)
    for rule in GLOBAL_RULES:
        rule(values)
    for host in values.hosts:
        view = values.host(host)
        for rule in HOST_RULES:
            rule(view)


def unread(flat: Mapping[str, Any]) -> list[str]:
    """One sentence per value that the run's hosts do not read: a ``bus.*`` key of
    another bus kind than theirs, set apart from its default (an ideal host has no bus
    at all: nothing more is said of it)."""
    values = Values(flat, "")
    found: dict[tuple[str, Any], dict[str, str]] = {}  # (key, value) -> host -> its bus
    for name in values.hosts:
        v = values.host(name)
        if LEVELS[v["host.detail"]].hardware:
            for key in unread_keys(v.__getitem__):
                if v[key] != SPECS[key].default:
                    found.setdefault((key, v[key]), {})[name] = v["bus.kind"]
    out = []
    for (key, value), buses in found.items():
        use = f'bus.kind = "{owner(key).name}"'
        if key in ON_DIE_KEYS:
            use += ' or an on-die copy engine (copy_engine.location = "on_die")'
        theirs = " or ".join(f'"{kind}"' for kind in sorted(set(buses.values())))
        out.append(
            f"{key} = {SPECS[key].format(value)} changes nothing on {', '.join(buses)} "
            f"(bus.kind = {theirs}): it is for {use}"
        )
    return out
