"""Published reference figures (calibration/seeds/*.csv), each tied to the text it came from.

One figure per row: ``quantity,system,size_bytes,value,unit,seed,section,quote``.
``quote`` is a verbatim excerpt of the source that contains ``value``, so the
figure can be checked against the text itself (``tests/test_calibrate_reference.py``).
Values stay in the source's unit; :data:`TO_CPASIM` converts the common ones.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from cpasim.errors import CpasimError

COLUMNS = ("quantity", "system", "size_bytes", "value", "unit", "seed", "section", "quote")
# Factor to cpasim's units (ns, bit/s, Hz) for the units the seeds use.
TO_CPASIM = {
    "us": 1e3,
    "ms": 1e6,
    "ns": 1.0,
    "Mbps": 1e6,
    "Gbps": 1e9,
    "MBps": 8e6,  # 10^6 bytes per second
    "GHz": 1e9,
    "percent": 1.0,
    "Hz/bit": 1.0,
    "count": 1.0,
}


@dataclass(frozen=True)
class ReferenceFigure:
    quantity: str
    system: str
    size_bytes: int | None
    value: float
    unit: str
    seed: str  # file name under the seeds directory
    section: str  # section, table or figure of the seed
    quote: str  # verbatim text of the seed that states the value

    @property
    def cpasim_value(self) -> float:
        return self.value * TO_CPASIM[self.unit]


def read_reference(path: str | Path) -> list[ReferenceFigure]:
    path = Path(path)
    try:
        lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("#")]
    except (OSError, UnicodeDecodeError) as exc:
        raise CpasimError(f"{path}: cannot read reference table ({exc})") from None
    reader = csv.DictReader(lines)
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise CpasimError(f"{path}: missing column(s) {', '.join(missing)}")
    out = []
    for lineno, row in enumerate(reader, start=2):
        try:
            size = int(row["size_bytes"]) if row["size_bytes"].strip() else None
            value = float(row["value"])
        except (ValueError, AttributeError):
            raise CpasimError(f"{path}: row {lineno}: bad size_bytes or value") from None
        if row["unit"] not in TO_CPASIM:
            raise CpasimError(
                f"{path}: row {lineno}: unit {row['unit']!r}; "
                f"expected one of {', '.join(TO_CPASIM)}"
            )
        out.append(
            ReferenceFigure(
                row["quantity"],
                row["system"],
                size,
                value,
                row["unit"],
                row["seed"],
                row["section"],
                row["quote"],
            )
        )
    return out
