"""A sweep over levels of detail (``--grid host.detail=full,ideal``): the agreement.

When a sweep varies ``host.detail`` (or ``hosts.tx.host.detail``,
``hosts.rx.host.detail``), every row of a point simulated with an ideal host gets
the column :data:`COLUMN`: its headline figure (goodput, or the mean latency of a
request-response workload) relative to the same point and repeat with full hosts,
``ideal / full - 1``.  Both run with the same seed (:func:`cpasim.sweeps.points.point_seed`
leaves the level out of it), so the difference is the model's.  Rows with full hosts,
and rows without their full partner (it failed), get none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cpasim.model.detail import LEVELS
from cpasim.sweeps.table import AGREEMENT

#: The column of an ideal row: its figure against the full one's, ideal / full - 1.
COLUMN = AGREEMENT
#: The figure compared: the first of these a row has a number for.
FIGURES = ("latency_ns.mean", "goodput_bps")


def is_detail_key(key: str) -> bool:
    """Whether sweep key ``key`` chooses a host's level of detail."""
    return key == "host.detail" or (key.startswith("hosts.") and key.endswith(".host.detail"))


def add_agreement(rows: Sequence[dict], keys: Sequence[str]) -> bool:
    """Add :data:`COLUMN` to the ideal rows of ``rows`` (a sweep's, varied ``keys``);
    whether the sweep varies a level of detail at all."""
    levels = [k for k in keys if is_detail_key(k)]
    if not levels:
        return False
    others = [k for k in keys if k not in levels]
    full: dict[tuple, Mapping] = {}
    for row in rows:
        if all(LEVELS[str(row[k])].hardware for k in levels):
            full[_ident(row, others)] = row
    for row in rows:
        if all(LEVELS[str(row[k])].hardware for k in levels):
            continue
        partner = full.get(_ident(row, others))
        figure = _figure(row, partner) if partner is not None else None
        if figure is not None:
            mine, theirs = row[figure], partner[figure]
            row[COLUMN] = mine / theirs - 1.0 if theirs else None
    return True


def _ident(row: Mapping, keys: Sequence[str]) -> tuple:
    return (*(str(row.get(k)) for k in keys), row.get("repeat"))


def _figure(row: Mapping, partner: Mapping) -> str | None:
    for name in FIGURES:
        a, b = row.get(name), partner.get(name)
        if _number(a) and _number(b):
            return name
    return None


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)
