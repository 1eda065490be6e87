"""The resolved configuration of one run: immutable, picklable, with a digest."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cpasim.config import flow_tables as flows_mod
from cpasim.config import resolve, rules
from cpasim.config.flow_tables import FlowGroup
from cpasim.config.params import (
    ALL_HOSTS,
    FORWARDER,
    GLOBAL_SECTIONS,
    SPECS,
    TOPOLOGIES,
    BottleneckParams,
    HostParams,
    LinkParams,
    SimParams,
    TopologyParams,
    WorkloadParams,
)
from cpasim.errors import CpasimError

_MISSING = object()


def _build(cls: type, prefix: str, flat: Mapping[str, Any], host: str | None = None) -> Any:
    """A section from the flat keys under ``prefix``; for ``host``, a key the host does
    not have (:func:`~cpasim.config.params.hosts_of`) keeps its declared default."""
    kwargs = {}
    for f in dataclasses.fields(cls):
        key = prefix + f.name
        if f.metadata.get("section"):
            kwargs[f.name] = _build(f.default_factory, key + ".", flat, host)
        elif host is None or key in flat:
            kwargs[f.name] = flat[key]
    return cls(**kwargs)


#: Keys (without host prefix) left out of the digest at their default -> that default.
_NEUTRAL = {k: s.default for k, s in SPECS.items() if s.digest_neutral}


def _bare(key: str) -> str:
    """``hosts.tx.host.detail`` -> ``host.detail``; a global key as it is."""
    return key.split(".", 2)[2] if key.startswith("hosts.") else key


def _digest(flat: Mapping[str, Any]) -> str:
    if _NEUTRAL:  # a digest-neutral key at its default is as if it did not exist
        flat = {k: v for k, v in flat.items() if _NEUTRAL.get(_bare(k), _MISSING) != v}
    canonical = json.dumps(flat, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Config:
    """Every parameter of a run, validated, in internal units (ns, bit/s, bytes, Hz, cycles).

    Build one with :func:`cpasim.config.load_scenario`; derive variants with
    :meth:`with_overrides`.  Sections are attributes (``cfg.link.rate``,
    ``cfg.tx.tcp.wmem``); ``digest`` identifies the resolved values.
    """

    sim: SimParams
    workload: WorkloadParams
    topology: TopologyParams
    link: LinkParams
    bottleneck: BottleneckParams
    tx: HostParams
    rx: HostParams
    fw: HostParams  # the forwarding host (topology.kind = "forward")
    #: The ``[[flows]]`` tables (:mod:`cpasim.config.flow_tables`); empty without.
    flows: tuple[FlowGroup, ...] = ()
    source: str | None = field(default=None, compare=False)
    digest: str = field(init=False, compare=False)
    _flat: dict[str, Any] = field(init=False, repr=False, compare=False, hash=False)
    _flow_cfgs: dict = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        flat: dict[str, Any] = {}
        for name in GLOBAL_SECTIONS:
            flat.update(_flatten(getattr(self, name), name + "."))
        for host in ALL_HOSTS:
            flat.update(_flatten(getattr(self, host), f"hosts.{host}.", host))
        object.__setattr__(self, "_flat", flat)
        object.__setattr__(self, "_flow_cfgs", {})
        # A scenario without flows keeps the digest it had before flows existed.
        canonical = flat
        if self.flows:
            canonical = {**flat, "flows": [g.canonical() for g in self.flows]}
        object.__setattr__(self, "digest", _digest(canonical))

    @classmethod
    def from_flat(
        cls, flat: Mapping[str, Any], source: str | None = None, flows: tuple = ()
    ) -> Config:
        """A Config from already validated full keys (see :mod:`cpasim.config.resolve`)
        and ``[[flows]]`` tables (see :mod:`cpasim.config.flow_tables`)."""
        sections = {name: _build(sec, name + ".", flat) for name, sec in GLOBAL_SECTIONS.items()}
        hosts = {h: _build(HostParams, f"hosts.{h}.", flat, h) for h in ALL_HOSTS}
        return cls(**sections, **hosts, flows=tuple(flows), source=source)

    # --- flows ------------------------------------------------------------------------

    def flow_config(self, table: int) -> Config:
        """The configuration the flows of ``[[flows]]`` table ``table`` run with: the
        scenario's, with the table's ``tcp`` and ``workload`` keys (and no flows)."""
        cfg = self._flow_cfgs.get(table)
        if cfg is None:
            flat = flows_mod.flat_of(self._flat, self.flows[table])
            cfg = self._flow_cfgs[table] = Config.from_flat(flat, self.source)
        return cfg

    @property
    def flow_count(self) -> int:
        """Flows in the run: the tables' counts, or 0 without ``[[flows]]``."""
        return sum(g.count for g in self.flows)

    # --- reading ----------------------------------------------------------------------

    def host(self, name: str) -> HostParams:
        """The parameters of host ``name`` (``"tx"``, ``"rx"`` or the forwarding ``"fw"``)."""
        if name not in ALL_HOSTS:
            raise CpasimError(f"unknown host {name!r}: expected one of {', '.join(ALL_HOSTS)}")
        return getattr(self, name)

    def flat(self) -> dict[str, Any]:
        """Every resolved full key -> value (``link.rate``, ``hosts.tx.tcp.wmem`` ...)."""
        return dict(self._flat)

    def value(self, key: str) -> Any:
        """One resolved value.  A per-host key without prefix (``tcp.wmem``) is answered
        only when every host of the run (the forwarding host only with
        ``topology.kind = "forward"``) that has it agrees."""
        if key in self._flat:
            return self._flat[key]
        if key.startswith(flows_mod.KEY + "."):
            return self._flow_value(key)
        full, _ = resolve.targets(key, "config")
        if not TOPOLOGIES[self.topology.kind].forwards:  # the forwarding host is not in the run
            full = [k for k in full if not k.startswith(f"hosts.{FORWARDER}.")] or full
        values = {self._flat[k] for k in full}
        if len(values) != 1:
            spec = SPECS[key]
            per_host = ", ".join(f"{k.split('.')[1]}: {spec.format(self._flat[k])}" for k in full)
            raise CpasimError(
                f"{key} differs between hosts ({per_host}); ask for hosts.<host>.{key}"
            )
        return values.pop()

    def _flow_value(self, key: str) -> Any:
        """``flows.<table>.<key>``: a table's own value, or what its flows run with."""
        table, _, rest = key[len(flows_mod.KEY) + 1 :].partition(".")
        if not table.isdigit() or int(table) >= len(self.flows):
            raise CpasimError(
                f"{key}: no such [[flows]] table (the scenario has {len(self.flows)})"
            )
        group = self.flows[int(table)]
        own = group.own()
        if rest in own:
            return own[rest]
        return self.flow_config(int(table)).value(rest)

    def changes(self, other: Config) -> dict[str, tuple[Any, Any]]:
        """Full key -> (value here, value in ``other``) for every key that differs; a
        ``[[flows]]`` table's as ``flows.<table>.<key>`` (``flows`` itself when the
        number of tables differs)."""
        out = {k: (v, other._flat[k]) for k, v in self._flat.items() if other._flat[k] != v}
        if self.flows == other.flows:
            return out
        if len(self.flows) != len(other.flows):
            out[flows_mod.KEY] = (len(self.flows), len(other.flows))
            return out
        for g, (a, b) in enumerate(zip(self.flows, other.flows, strict=True)):
            prefix = f"{flows_mod.KEY}.{g}."
            for key, v in a.own().items():
                if b.own()[key] != v:
                    out[prefix + key] = (v, b.own()[key])
            sa, sb = dict(a.sets), dict(b.sets)
            fa, fb = flows_mod.flat_of(self._flat, a), flows_mod.flat_of(other._flat, b)
            for key in sorted(set(sa) | set(sb)):
                if fa[key] != fb[key] and self._flat[key] == other._flat[key]:
                    out[prefix + key] = (fa[key], fb[key])
        return out

    # --- deriving ---------------------------------------------------------------------

    def with_overrides(self, overrides: Mapping[str, Any], *, where: str = "override") -> Config:
        """A copy with ``overrides`` applied, validated like a scenario file.

        Values are written as in TOML: strings with units (``"10Gbps"``), booleans,
        and plain numbers in SI base units (seconds, bit/s, bytes, Hz).  A string
        that is a TOML literal (``"2"``, ``"false"``) is read as that literal, as
        with ``--set``.  Use :meth:`with_values` for values in internal units.
        """
        entries = [
            (k, resolve.parse_text(v) if isinstance(v, str) else v) for k, v in overrides.items()
        ]
        return self._derive(entries, where)

    def with_values(self, values: Mapping[str, Any], *, where: str = "override") -> Config:
        """A copy with ``values`` in internal units (as :meth:`value` returns them: ns,
        bit/s, bytes, Hz), checked against each parameter's type and range."""
        entries = []
        for key, value in values.items():
            spec = flows_mod.spec_of(key, where)
            text = spec.format(value) if spec.type in _QUANTITY_KINDS else value
            entries.append((key, text))
        return self._derive(entries, where)

    def _derive(self, entries, where: str) -> Config:
        """A copy with one layer of raw ``entries`` applied and checked."""
        # This config passed its checks: only what these entries name can clash now.
        named: dict[str, str] = {}
        entries, flow_entries = flows_mod.split(entries)
        flat = resolve.apply(self._flat, entries, where, named=named)
        rules.check(flat, where, named)
        groups = flows_mod.apply(self.flows, flow_entries, where)
        flows_mod.check(flat, groups, where)
        return Config.from_flat(flat, self.source, groups)

    # --- writing ----------------------------------------------------------------------

    def to_toml(self) -> str:
        """A complete scenario file that loads back to this digest.

        Per-host values every host that has the key shares are written once without
        prefix; the rest under ``[hosts.tx.*]``, ``[hosts.rx.*]``, ``[hosts.fw.*]``.
        """
        shared: list[tuple[str, str]] = []
        per_host: list[tuple[str, str]] = []
        forward = TOPOLOGIES[self.topology.kind].forwards
        for key, spec in SPECS.items():
            if not spec.per_host:
                shared.append((key, _toml_value(spec, self._flat[key])))
                continue
            values = [self._flat[f"hosts.{h}.{key}"] for h in spec.hosts]
            if all(v == values[0] for v in values):
                shared.append((key, _toml_value(spec, values[0])))
            elif (
                not forward
                and FORWARDER in spec.hosts
                and (fw := self._flat[f"hosts.{FORWARDER}.{key}"]) != spec.default
            ):
                # A value the absent forwarding host inherited is written without
                # prefix, as a scenario sets it, so that it loads back as inherited;
                # the end hosts that differ follow under their own prefix.
                shared.append((key, _toml_value(spec, fw)))
                for h, v in zip(spec.hosts, values, strict=True):
                    if h != FORWARDER and v != fw:
                        per_host.append((f"hosts.{h}.{key}", _toml_value(spec, v)))
            else:
                for h, v in zip(spec.hosts, values, strict=True):
                    if h == FORWARDER and not forward and v == spec.default:
                        continue  # no forwarding host in the run: its default goes unsaid
                    per_host.append((f"hosts.{h}.{key}", _toml_value(spec, v)))
        lines = [f"# cpasim scenario, fully resolved; digest {self.digest}"]
        if self.source:
            lines.append(f"# resolved from {self.source}")
        lines += toml_tables([*shared, *per_host])
        lines += flows_mod.toml_lines(self.flows)
        return "\n".join(lines) + "\n"


_QUANTITY_KINDS = ("time", "rate", "size", "freq")


def _flatten(section: Any, prefix: str, host: str | None = None, key: str = "") -> dict[str, Any]:
    """Full key -> value of a section; of a ``host``'s, only the keys it has."""
    flat: dict[str, Any] = {}
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        name = key + f.name
        if f.metadata.get("section"):
            flat.update(_flatten(value, prefix + f.name + ".", host, name + "."))
        elif host is None or host in SPECS[name].hosts:
            flat[prefix + f.name] = value
    return flat


def toml_tables(entries: Iterable[tuple[str, str]]) -> list[str]:
    """Scenario-file lines for ``(full key, value as TOML)`` pairs: a ``[table]`` per
    key prefix, after a blank line, in the order the tables first appear."""
    tables: dict[str, list[str]] = {}
    for key, text in entries:
        table, name = key.rsplit(".", 1)
        tables.setdefault(table, []).append(f"{name} = {text}")
    lines: list[str] = []
    for name, body in tables.items():
        lines += ["", f"[{name}]", *body]
    return lines


def _toml_value(spec: Any, value: Any) -> str:
    if spec.type in _QUANTITY_KINDS or spec.type == "enum":
        return json.dumps(spec.format(value))
    return spec.format(value)
