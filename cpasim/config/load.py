"""Reading a scenario: TOML file, then ``--set KEY=VALUE`` overrides, into a Config."""

from __future__ import annotations

import errno
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cpasim.config import flow_tables as flows
from cpasim.config import resolve, rules
from cpasim.config.resolved import Config
from cpasim.errors import CpasimError
from cpasim.inputs import InputError, read_bytes


def load_scenario(path: str | Path | None = None, sets: Iterable[str] = ()) -> Config:
    """The Config of a scenario file (defaults if ``path`` is None) with ``--set`` overrides.

    Later ``sets`` win over earlier ones and over the file.
    """
    flat = resolve.default_flat()
    groups: tuple = ()
    source = None if path is None else str(path)
    where = "scenario"
    named: dict[str, str] = {}
    if path is not None:
        where = source
        entries, tables = flows.split(read_entries(path))
        flat = resolve.apply(flat, entries, source, once=True, named=named)
        groups = flows.apply(groups, tables, source)
    for text in sets:
        key, value = parse_set(text)
        if key.startswith(flows.KEY + "."):
            groups = flows.apply(groups, [(key, value)], "--set")
        else:
            flat = resolve.apply(flat, [(key, value)], "--set", named=named)
        where = f"{source} with --set" if source else "--set"
    rules.check(flat, where, named)
    flows.check(flat, groups, where)
    return Config.from_flat(flat, source, groups)


def scenario_config(
    scenario: str | Path | Mapping[str, Any] | Config | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """The Config of a scenario given as a file, a dict, a Config or None (defaults),
    with ``overrides`` (dotted keys, values as in TOML: ``{"link.rate": "10Gbps"}``).

    A dict is read like a scenario file's tables: nested (``{"link": {"rate":
    "10Gbps"}}``) or with dotted keys (``{"link.rate": "10Gbps"}``).
    """
    if isinstance(scenario, Config):
        cfg = scenario
    elif isinstance(scenario, Mapping):
        where = "scenario dict"
        named: dict[str, str] = {}
        entries, tables = flows.split(resolve.flatten_toml(dict(scenario), where))
        flat = resolve.apply(resolve.default_flat(), entries, where, once=True, named=named)
        rules.check(flat, where, named)
        groups = flows.apply((), tables, where)
        flows.check(flat, groups, where)
        cfg = Config.from_flat(flat, None, groups)
    elif scenario is None or isinstance(scenario, str | Path):
        cfg = load_scenario(scenario)
    else:
        raise CpasimError(
            f"scenario: expected a file path, a dict or a Config, got {type(scenario).__name__}"
        )
    if overrides:
        cfg = cfg.with_overrides(dict(overrides), where="overrides")
    return cfg


def read_entries(path: str | Path) -> list[tuple[str, object]]:
    """The dotted (key, raw value) pairs of a scenario file."""
    p = Path(path)
    try:
        text = read_bytes(p, "scenario file").decode("utf-8")
    except InputError as exc:
        if exc.errno == errno.ENOENT:
            raise CpasimError(f"{path}: scenario file not found") from None
        raise
    except UnicodeDecodeError as exc:
        raise CpasimError(f"{path}: not UTF-8 text (byte {exc.start}); expected TOML") from None
    doc = resolve.loads_toml(text, str(path))
    return resolve.flatten_toml(doc, str(path))


def parse_set(text: str) -> tuple[str, object]:
    """``"link.rate=10Gbps"`` -> ``("link.rate", "10Gbps")``; values read as in TOML."""
    key, sep, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not key or not value or " " in key:
        raise CpasimError(f"--set {text!r}: expected KEY=VALUE, e.g. --set link.rate=10Gbps")
    return key, resolve.parse_text(value, f"--set {key}")
