"""Microbenchmark tables (CSV): message size → latency, gap and per-message overheads.

The columns follow the LogP-style model of Directed Point: ``Os``/``Or``
send/receive overhead, ``Ur`` user-level receive cost, ``gs``/``gr`` send/receive
gap, ``L`` wire latency; plus ``latency`` (one-way or round trip, as the table
says) and ``gap``.  Every measurement column carries its unit as a suffix
(``Os_us``, ``latency_ns``, ``bandwidth_Mbps``) and is converted to cpasim units
(ns, bit/s).  ``size_bytes`` is required; other text columns (``source``,
``system``) are kept as labels.  Lines starting with ``#`` are comments.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from cpasim.errors import CpasimError
from cpasim.inputs import read_text

TIME_METRICS = ("latency", "gap", "Os", "Or", "Ur", "gs", "gr", "L")
RATE_METRICS = ("bandwidth",)
_TIME_UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
# MB/s here is 10^6 bytes per second.
_RATE_UNITS = {"bps": 1.0, "kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, "MBps": 8e6}
_CANONICAL = {m.lower(): m for m in TIME_METRICS + RATE_METRICS}


@dataclass(frozen=True)
class MicrobenchRow:
    size_bytes: int
    values: dict[str, float]  # metric → ns (times) or bit/s (bandwidth); absent if blank
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MicrobenchTable:
    path: str
    metrics: list[str]  # canonical metric names present, in column order
    rows: list[MicrobenchRow]

    def series(self, metric: str) -> list[tuple[int, float]]:
        """(size, value) pairs of one metric, rows where it is blank left out."""
        return [(r.size_bytes, r.values[metric]) for r in self.rows if metric in r.values]


def _column_unit(name: str) -> tuple[str, float] | None:
    """('Os', 1000.0) for 'Os_us'; None for a label column."""
    base, _, unit = name.strip().rpartition("_")
    metric = _CANONICAL.get(base.lower())
    if metric is None:
        return None
    units = _RATE_UNITS if metric in RATE_METRICS else _TIME_UNITS
    if unit not in units:
        raise CpasimError(
            f"column {name!r}: unknown unit {unit!r} for {metric}; expected one of "
            + ", ".join(f"{metric}_{u}" for u in units)
        )
    return metric, units[unit]


def read_microbench(path: str | Path) -> MicrobenchTable:
    path = Path(path)
    text = read_text(path, "microbenchmark table")
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    try:
        return _parse(path, lines)
    except csv.Error as exc:  # a field over the csv module's limit (128 KiB), a NUL byte
        raise CpasimError(f"{path}: not a readable CSV table ({exc})") from None


def _parse(path: Path, lines: list[str]) -> MicrobenchTable:
    reader = csv.DictReader(io.StringIO("\n".join(lines)))
    header = reader.fieldnames or []
    if "size_bytes" not in header:
        raise CpasimError(
            f"{path}: missing column 'size_bytes' (header is {', '.join(header) or 'empty'})"
        )
    units: dict[str, tuple[str, float]] = {}
    for name in header:
        try:
            u = _column_unit(name)
        except CpasimError as exc:
            raise CpasimError(f"{path}: {exc}") from None
        if u is not None and name != "size_bytes":
            units[name] = u
    if not units:
        wanted = ", ".join(f"{m}_<unit>" for m in TIME_METRICS + RATE_METRICS)
        raise CpasimError(f"{path}: no measurement column; expected at least one of {wanted}")
    rows = []
    for lineno, raw in enumerate(reader, start=2):
        if None in raw or any(v is None for v in raw.values()):
            raise CpasimError(f"{path}: row {lineno}: expected {len(header)} fields")
        try:
            size = int(raw["size_bytes"])
            if size < 0:
                raise ValueError
        except ValueError:
            raise CpasimError(
                f"{path}: row {lineno}: size_bytes {raw['size_bytes']!r} is not a byte count"
            ) from None
        values, labels = {}, {}
        for name, cell in raw.items():
            if name in units:
                if cell.strip():
                    try:
                        values[units[name][0]] = float(cell) * units[name][1]
                    except ValueError:
                        raise CpasimError(
                            f"{path}: row {lineno}: {name} {cell!r} is not a number"
                        ) from None
            elif name != "size_bytes":
                labels[name] = cell
        rows.append(MicrobenchRow(size, values, labels))
    return MicrobenchTable(str(path), [u[0] for u in units.values()], rows)
