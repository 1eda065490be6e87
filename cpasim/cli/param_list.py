"""``cpasim params``: list the parameters, or show a scenario's resolved values."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import typer

from cpasim.cli import app
from cpasim.config import ALL_HOSTS, load_scenario, parameters
from cpasim.config.resolve import spec_of
from cpasim.errors import CpasimError


def _generic(key: str) -> str:
    """``hosts.tx.tcp.wmem`` -> ``tcp.wmem``; other keys unchanged."""
    parts = key.split(".", 2)
    if len(parts) == 3 and parts[0] == "hosts" and parts[1] in ALL_HOSTS:
        return parts[2]
    return key


def _matches(key: str, prefix: str | None) -> bool:
    return prefix is None or key.startswith(prefix) or _generic(key).startswith(prefix)


def _no_match(prefix: str, keys: list[str]) -> CpasimError:
    sections = {k.rsplit(".", i)[0] for k in keys for i in range(1, k.count(".") + 1)}
    close = difflib.get_close_matches(prefix, sorted(sections | set(keys)), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return CpasimError(f"no parameter key starts with {prefix!r}{hint}")


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
        for r in rows
    )


@app.command("params")
def params(
    prefix: str | None = typer.Argument(
        None, help="Only keys starting with this, e.g. 'tcp' or 'hosts.rx.cpu'."
    ),
    scenario: Path | None = typer.Option(
        None,
        "--scenario",
        "-s",
        metavar="FILE",
        help="Show the resolved values of this scenario file.",
    ),
    sets: list[str] = typer.Option(
        [],
        "--set",
        metavar="KEY=VALUE",
        help="Override a key, e.g. --set link.rate=10Gbps (repeatable).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable JSON output."),
    as_toml: bool = typer.Option(
        False, "--toml", help="Print the fully resolved scenario as TOML."
    ),
) -> None:
    """List every parameter: key, type and unit, default, range, doc.

    With --scenario, --set or --toml: the resolved values of that scenario and its digest.
    """
    if scenario is not None or sets or as_toml:
        _show_resolved(scenario, sets, prefix, as_json, as_toml)
        return
    specs = [s for s in parameters() if _matches(s.key, prefix)]
    if not specs:
        raise _no_match(prefix or "", [s.key for s in parameters()])
    if as_json:
        out = [
            {
                "key": s.key,
                "type": s.type,
                "unit": s.unit,
                "default": s.default,
                "default_text": s.format(s.default),
                "lo": s.lo,
                "hi": s.hi,
                "choices": list(s.choices) if s.choices is not None else None,
                "doc": s.doc,
                "per_host": s.per_host,
                "hosts": list(s.hosts),
            }
            for s in specs
        ]
        typer.echo(json.dumps(out, indent=2))
        return
    rows = [["key", "scope", "type", "default", "range", "doc"]]
    for s in specs:
        kind = f"{s.type}[{s.unit}]" if s.unit else s.type
        scope = "global"
        if s.per_host:
            scope = "per host" if len(s.hosts) > 1 else f"{s.hosts[0]} only"
        rows.append([s.key, scope, kind, s.format(s.default), s.range_text(), s.doc])
    typer.echo(_table(rows))
    typer.echo(
        "\nQuantities take units ('10Gbps', '350us', '64KiB', '4GHz'); plain numbers are in "
        "seconds, bit/s, bytes, Hz.\nPer-host keys set every host that has them (the forwarding "
        "host fw, with topology.kind=forward, has only its devices', IP's, CPU's, bus' and "
        "memory's); hosts.tx.<key>, hosts.rx.<key> or hosts.fw.<key> sets one."
    )


def _show_resolved(
    scenario: Path | None, sets: list[str], prefix: str | None, as_json: bool, as_toml: bool
) -> None:
    cfg = load_scenario(scenario, sets=sets)
    if as_toml:
        typer.echo(cfg.to_toml(), nl=False)
        return
    values = {k: v for k, v in cfg.flat().items() if _matches(k, prefix)}
    if not values:
        raise _no_match(prefix or "", list(cfg.flat()))
    if as_json:
        out = {"source": cfg.source, "digest": cfg.digest, "values": values}
        typer.echo(json.dumps(out, indent=2))
        return
    typer.echo(f"# {cfg.source or 'defaults'}  digest {cfg.digest}")
    rows = [[k, spec_of(k).format(v)] for k, v in values.items()]
    width = max(len(r[0]) for r in rows)
    typer.echo("\n".join(f"{k.ljust(width)}  {v}" for k, v in rows))
