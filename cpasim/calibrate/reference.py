"""Published reference figures (calibration/seeds/*.csv), each tied to the text it came from.

One figure per row: ``quantity,system,size_bytes,value,unit,seed,section,quote``.
``quote`` is a verbatim excerpt of the source that contains ``value``, so the
figure can be checked against the text itself (``tests/test_calibrate_reference.py``).
Values stay in the source's unit; :data:`TO_CPASIM` converts the common ones.
The passages the quotes come from are kept verbatim in
``calibration/seeds/passages/<seed>`` (:func:`read_passages`).  A *seed* is one of the
five published texts cpasim is held to: Saidi 2009 (the method and chapter 6's
machines), the Directed Point paper, Waheed 2003, Makineni & Iyer (HPCA-10) and
Mosberger's Scout paper, numbered 004 to 000 (``docs/seeds.md``).
"""

from __future__ import annotations

import csv
import re
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


# Heads each passage in a passages file; a quote must lie inside one passage.
PASSAGE_BREAK = "@@"
PASSAGES_DIR = Path(__file__).resolve().parents[2] / "calibration" / "seeds" / "passages"


def normalize_text(text: str) -> str:
    """Whitespace collapsed, so a quote matches across the seed's line breaks."""
    return re.sub(r"\s+", " ", text).strip()


def section_title(section: str) -> str:
    """The leading title words of a figure's ``section`` (as the seed prints them)."""
    return re.sub(r"^(slide \d+ |Section )", "", section).split(" (")[0]


def read_passages(seed: str, directory: str | Path = PASSAGES_DIR) -> list[str]:
    """The passages kept from ``seed``, each whitespace-normalized."""
    path = Path(directory) / seed
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CpasimError(f"{path}: cannot read seed passages ({exc})") from None
    # What precedes the first passage is the file's own header.
    chunks = re.split(rf"^{PASSAGE_BREAK} lines \d+-\d+$", text, flags=re.M)[1:]
    return [normalize_text(c) for c in chunks]
